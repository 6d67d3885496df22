"""Toolchain tests run with the host Python in `nox -s tests`: they check the build, not the backend."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from build_tools.pins import Pins, Series, load  # noqa: E402

collect_ignore = ["installed"]  # those run against the installed wheels, on the wheels' Python


@pytest.fixture(scope="session")
def pins() -> Pins:
    return load()


@pytest.fixture(scope="session")
def series(pins: Pins) -> Series:
    return pins.get_series()


def _one_wheel(prefix: str) -> Path:
    found = sorted((REPO / "dist").glob(f"{prefix}-*.whl"))
    if len(found) != 1:
        pytest.fail(f"expected exactly one {prefix} wheel in dist/, found {[p.name for p in found]}; "
                    "run `nox -s build_wheels`")
    return found[0]


@pytest.fixture(scope="session")
def jax_wheel() -> Path:
    return _one_wheel("jax")


@pytest.fixture(scope="session")
def jaxlib_wheel() -> Path:
    return _one_wheel("jaxlib")
