"""Helpers for tests that need a fresh process: jax creates its backends once per process, from the flags
in force at that moment."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Dict, Optional

import pytest

# Flags that would change the backend under test; each subprocess starts from a clean slate plus its own.
_IPU_FLAGS = ("TF_POPLAR_FLAGS", "XLA_IPU_PLATFORM_DEVICE_COUNT", "JAX_PLATFORMS", "JAX_PLATFORM_NAME",
              "JAX_IPU_USE_MODEL", "JAX_IPU_MODEL_NUM_TILES", "JAX_IPU_MODEL_VERSION", "JAX_IPU_DEVICE_COUNT",
              "JAX_IPU_VISIBLE_DEVICES")


def run_python(code: str, env: Optional[Dict[str, str]] = None, timeout: float = 300) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in _IPU_FLAGS}
    environ.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        universal_newlines=True,
        timeout=timeout,
    )


def pytest_configure(config):
    # `jit(..., backend="ipu")` is the idiom Graphcore's users write (and the seeds show); jax 0.4.13 deprecates it.
    config.addinivalue_line("filterwarnings", "ignore:backend and device argument on jit is deprecated")


@pytest.fixture
def python():
    return run_python


@pytest.fixture(scope="module")
def module_python():
    """run_python for a module's fixtures: one fresh process whose results several tests read."""
    return run_python


# This suite's known failures of the installed series, as strict xfails (tests/_series_expectations.py).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _series_expectations import pytest_collection_modifyitems  # noqa: E402, F401
