"""Fixtures for the emulator tests; helpers live in emulator_helpers.py."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)
