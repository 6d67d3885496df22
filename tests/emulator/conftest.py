"""Fixtures for the emulator tests; helpers live in emulator_helpers.py."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)



def pytest_collection_modifyitems(config, items):
    """This suite's known failures of the installed series (tests/expected-failures/<jaxlib version>.txt) as
    strict xfails."""
    import os
    import sys

    suite = os.path.dirname(os.path.abspath(__file__))
    tests = os.path.dirname(suite)
    if tests not in sys.path:
        sys.path.insert(0, tests)
    import _series_expectations

    _series_expectations.mark([item for item in items if str(item.fspath).startswith(suite + os.sep)])
