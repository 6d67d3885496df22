"""The C boundary is declared once: jax_ipu_shim/include/jax_ipu/c_api.h declares every JaxIpu_* function,
jax_ipu._native.SIGNATURES gives each its ctypes signature, and the installed library exports exactly those."""

from __future__ import annotations

import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_ipu
from jax_ipu import _jax, _native

HEADER = Path(__file__).resolve().parents[2] / "jax_ipu_shim" / "include" / "jax_ipu" / "c_api.h"
DECLARATION = re.compile(r"JAX_IPU_EXPORT\s+([\w\s\*]+?)\s*\b(JaxIpu_\w+)\s*\(([^)]*)\)\s*;")
ONLY_CURRENT = {"JaxIpu_SetStablehloVersions"}  # PJRT API 0.90 and later


def declared():
    """name -> (returns void, number of parameters), from the header."""
    text = re.sub(r"/\*.*?\*/", " ", HEADER.read_text(), flags=re.S)
    out = {}
    for returns, name, params in DECLARATION.findall(text):
        params = params.strip()
        count = 0 if params in ("", "void") else params.count(",") + 1
        out[name] = (returns.strip() == "void", count)
    return out


def exported():
    """The JaxIpu_* names in the installed library's dynamic string table."""
    data = Path(_native.library_path()).read_bytes()
    return {m.decode() for m in re.findall(rb"(?<=\x00)JaxIpu_\w+(?=\x00)", data)}


def test_the_header_declares_what_the_table_types():
    header = declared()
    assert len(header) >= 26, f"the header parse found only {sorted(header)}"
    assert set(header) == set(_native.SIGNATURES), (set(header) ^ set(_native.SIGNATURES))
    for name, (void, count) in header.items():
        restype, argtypes = _native.SIGNATURES[name]
        assert (restype is None) == void, f"{name}: the header and _native.SIGNATURES disagree on its result"
        assert len(argtypes) == count, f"{name}: {count} parameters in the header, {len(argtypes)} in the table"


def test_the_library_exports_the_header_and_nothing_else():
    want = set(declared())
    if not _jax.is_current_series():
        want -= ONLY_CURRENT
    assert exported() == want


def test_every_exported_function_has_its_signature_when_loaded():
    lib = _native.load()
    for name in exported():
        restype, argtypes = _native.SIGNATURES[name]
        assert tuple(getattr(lib, name).argtypes) == tuple(argtypes), name


@pytest.mark.parametrize("name", sorted(ONLY_CURRENT))
def test_functions_of_newer_pjrt_apis_are_absent_from_older_builds(name):
    assert hasattr(_native.load(), name) == _jax.is_current_series()


def test_the_compile_options_travel_with_each_compile(monkeypatch):
    """jax_ipu.config.lowering_options() is read at each compile and handed to PJRT with the program
    (JaxIpu_CompileResult_SetOptions): JAX_IPU_FUSION=0 lowers a chain op by op, one compute set each."""
    x = np.linspace(-1, 1, 4096, dtype=np.float32)
    supersteps = {}
    for flag in ("1", "0"):
        monkeypatch.setenv("JAX_IPU_FUSION", flag)
        f = jax.jit(lambda x: jnp.tanh(x * 3.0 + 1.0) - x, backend="ipu")  # a new function: compiled again
        np.testing.assert_allclose(np.asarray(f(x)), np.tanh(x * 3 + 1) - x, rtol=1e-6, atol=1e-6)
        supersteps[flag] = jax_ipu.last_execution()["supersteps"]
    assert supersteps["1"] < supersteps["0"]
