"""Known failures of one jax/jaxlib series, marked as strict xfails (shared by the installed-wheel suites' conftests).

``tests/expected-failures/<jaxlib version>.txt`` lists test ids (``<suite>/<file>::<test>``, optionally followed by
``when VAR=value`` to hold only in runs with that environment), one per line, each group under a ``# reason``
comment: the gaps of a series still being brought up (the current series: see README). A listed test that passes
fails the run (strict), so the list only ever shrinks with the work; a series without a file expects every test to
pass.
"""

from __future__ import annotations

import os
from typing import Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))


def series() -> str:
    from jaxlib import version

    return version.__version__.split("+")[0]


def expected_failures(name: str = "") -> Dict[str, str]:
    """{test id: reason} for the series ``name`` (default: the installed jaxlib's)."""
    path = os.path.join(HERE, "expected-failures", (name or series()) + ".txt")
    if not os.path.exists(path):
        return {}
    out: Dict[str, str] = {}
    reason = "a known gap of this series"
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("#"):
                reason = line.lstrip("# ").strip() or reason
            elif line:
                test, _, condition = line.partition(" when ")
                if condition:  # `when VAR=value`: only in runs with that variable so (e.g. the 7-tile run)
                    name, _, value = condition.strip().partition("=")
                    if os.environ.get(name.strip()) != value.strip():
                        continue
                out[test.strip()] = reason
    return out


def test_id(item) -> str:  # noqa: ANN001 - a pytest Item
    """``backend/test_x.py::test_y[param]``: the item's path below tests/, then its name."""
    path = os.path.relpath(str(item.fspath), HERE).replace(os.sep, "/")
    return f"{path}::{item.name}"


def mark(items: List) -> None:  # noqa: ANN001 - pytest Items
    """Marks the listed items (once each, however many suites' conftests call this in one run)."""
    import pytest

    known = expected_failures()
    if not known:
        return
    tag = series()
    for item in items:
        reason = known.get(test_id(item))
        if reason is not None and not getattr(item, "_series_expectation", False):
            item._series_expectation = True
            item.add_marker(pytest.mark.xfail(reason=f"jaxlib {tag}: {reason}", strict=True))


def pytest_collection_modifyitems(config, items):  # noqa: ANN001 - imported by each suite's conftest.py
    """The installed series' known failures (expected-failures/<jaxlib version>.txt) as strict xfails."""
    mark(items)
