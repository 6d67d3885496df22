"""The conformance suite checks what it runs on before it runs anything."""

from __future__ import annotations

import os
import sys

import jax
import pytest
from _conformance import BACKEND

TILES_FLAG = "JAX_IPU_MODEL_NUM_TILES"


@pytest.fixture(scope="session", autouse=True)
def _backend_under_test():
    """The ipu backend is there, and when the run says it uses an IPU Model of N tiles, the devices have N tiles:
    a suite that quietly ran on cpu, or on the full chip, would pass for the wrong reason."""
    if BACKEND != "ipu":
        return
    devices = jax.devices("ipu")
    want = os.environ.get(TILES_FLAG)
    if want:
        assert {d.num_tiles for d in devices} == {int(want)}, f"{TILES_FLAG}={want} but the ipu devices have " \
            f"{sorted({d.num_tiles for d in devices})} tiles"


# This suite's known failures of the installed series, as strict xfails (tests/_series_expectations.py).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _series_expectations import pytest_collection_modifyitems  # noqa: E402, F401
