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


def tree_reduce(flat: np.ndarray, init: Any, op: Any = np.add, lanes: bool = True) -> np.ndarray:
    """The emulator's reduction order as a numpy model (emulator/src/reduce.cc): `flat` is [outputs..., n], each
    output's reduced elements in row-major order; `op` a numpy ufunc, rounded to the dtype at every step. Up to 32
    elements are folded in order from `init`. More are reduced as XLA:CPU's TreeReductionRewriter reduces one
    dimension: while more than 32 are left, windows of 32 (stride 32, SAME padding: half the pad low, rounded down)
    each give a partial, then the partials the same way; the last 32 or fewer are folded in order from `init`. A
    window of a sum or product (`lanes`) takes element k into lane k % 8, the lanes from the identity (-0 or 1),
    halves them 8 -> 4 -> 2 -> 1 and combines `init` with that; any other window is folded in order from `init`."""
    dt = flat.dtype
    init = np.asarray(init, dt)
    identity = np.asarray(1 if op is np.multiply else -0.0, dt)

    def fold(windows: np.ndarray) -> np.ndarray:  # [..., m] in order from init
        acc = np.broadcast_to(init, windows.shape[:-1]).astype(dt)
        for i in range(windows.shape[-1]):
            acc = op(acc, windows[..., i]).astype(dt)
        return acc

    cur = flat
    while cur.shape[-1] > 32:
        n = cur.shape[-1]
        o = -(-n // 32)
        lo = (o * 32 - n) // 2
        parts = []
        for j in range(o):
            w = cur[..., max(0, 32 * j - lo):min(n, 32 * j - lo + 32)]
            if not lanes:
                parts.append(fold(w))
                continue
            w = np.concatenate([w, np.broadcast_to(identity, w.shape[:-1] + (32 - w.shape[-1],))], axis=-1)
            acc = np.broadcast_to(identity, w.shape[:-1] + (8,)).astype(dt)
            for k in range(4):
                acc = op(acc, w[..., 8 * k:8 * k + 8]).astype(dt)
            for h in (4, 2, 1):
                acc = op(acc[..., :h], acc[..., h:2 * h]).astype(dt)
            parts.append(op(init, acc[..., 0]).astype(dt))
        cur = np.stack(parts, axis=-1)
    return fold(cur)

