"""The conformance suite checks what it runs on before it runs anything."""

from __future__ import annotations

import os

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
