"""Known failures of one jax/jaxlib series, marked as strict xfails (shared by the installed-wheel suites' conftests).

``tests/expected-failures/<jaxlib version>.txt`` lists test ids (``<suite>/<file>::<test>``, optionally followed by
``when VAR=value`` to hold only in runs with that environment, or ``when cpu has FLAG`` / ``when cpu lacks FLAG``
to hold only on hosts with or without that instruction-set flag), one per line, each group under a ``# reason``
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
                if condition and not _holds(condition.strip()):
                    continue
                out[test.strip()] = reason
    return out


def _cpu_flags() -> List[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return line.split(":", 1)[1].split()
    except OSError:
        pass
    return []


def _holds(condition: str) -> bool:
    """`VAR=value`: only in runs with that variable so (the 7-tile run); `cpu has FLAG` / `cpu lacks FLAG`: only on
    hosts whose /proc/cpuinfo flags have (lack) FLAG, for what XLA:CPU computes differently by instruction set."""
    words = condition.split()
    if len(words) == 3 and words[0] == "cpu" and words[1] in ("has", "lacks"):
        return (words[2] in _cpu_flags()) == (words[1] == "has")
    name, _, value = condition.partition("=")
    return os.environ.get(name.strip()) == value.strip()


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
