"""Helpers shared by the emulator tests (a module of its own: several suites run together, each with a conftest)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from jax_ipu import emulator as E

DTYPE_NAMES = {np.dtype(v): k for k, v in E.NUMPY_DTYPES.items()}


def dtype_name(a: np.ndarray) -> str:
    return DTYPE_NAMES[np.asarray(a).dtype]


def run_op(op: str, inputs: Sequence[np.ndarray], out_dtype: Optional[str] = None,
           out_shape: Optional[Sequence[int]] = None, attrs: Optional[Dict[str, Any]] = None,
           num_tiles: int = 0, version: str = "ipu2", numerics: Optional[str] = None, **kwargs: Any) -> np.ndarray:
    """Runs `op` on `inputs` (all parameters) and returns its single result (`numerics`: the program's, whose
    XLA:CPU arithmetic it reproduces; default jaxlib-0.4)."""
    inputs = [np.asarray(x) for x in inputs]
    p = E.Program(numerics=numerics)
    ids = [p.main.param(dtype_name(x), x.shape) for x in inputs]
    if out_dtype is None:
        out_dtype = dtype_name(inputs[0])
    if out_shape is None:
        out_shape = inputs[0].shape
    r = p.main.op(op, ids, out_dtype, out_shape, attrs, **kwargs)
    p.main.ret(r)
    exe = E.compile(p, version=version, num_tiles=num_tiles)
    return exe.run(*inputs)[0]


def run_program(p: E.Program, *inputs: np.ndarray, num_tiles: int = 0) -> List[np.ndarray]:
    return E.compile(p, num_tiles=num_tiles).run(*inputs)


def assert_same(actual: np.ndarray, expected: np.ndarray) -> None:
    """Bit-exact where the dtype is exact; NaNs must be at the same places."""
    expected = np.asarray(expected)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    np.testing.assert_array_equal(actual, expected)


# Tolerances per dtype for transcendental functions (libm in float vs numpy's own kernels).
TOLERANCE = {"f32": dict(rtol=3e-6, atol=1e-6), "f16": dict(rtol=2e-3, atol=1e-4)}
