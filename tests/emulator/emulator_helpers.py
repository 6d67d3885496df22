"""Helpers shared by the emulator tests (a module of its own: several suites run together, each with a conftest)."""

from __future__ import annotations

import itertools
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from jax_ipu import emulator as E
from jax_ipu.compiler import ops as _ops

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


def tree_reduce(flat: np.ndarray, init: Any, op: Any = np.add, lanes: bool = True, short_last: bool = False,
                strided: bool = False) -> np.ndarray:
    """The emulator's reduction order as a numpy model (emulator/src/reduce.cc): `flat` is [outputs..., n], each
    output's reduced elements in row-major order; `op` a numpy ufunc, rounded to the dtype at every step. Up to 32
    elements are folded in order from `init`. More are reduced as XLA:CPU's TreeReductionRewriter reduces one
    dimension: while more than 32 are left, windows of 32 (stride 32, SAME padding: half the pad low, rounded down)
    each give a partial, then the partials the same way; the last 32 or fewer are folded in order from `init`. A
    window of a sum or product (`lanes`) takes element k into lane k % 8 (LANES: 16 on a host with 512-bit vectors),
    the lanes from the identity (-0 or 1), halves them 8 -> 4 -> 2 -> 1 and combines `init` with that; any other
    window is folded in order from `init`.
    `short_last` (jaxlib 0.4.13, an f32 sum or product over the innermost dimension): the last fold is _short_fold's.
    `strided` (the innermost dimension kept: windows of strided elements): without fast gathers, a level's windows
    are in lanes only where the level needs no padding and it is not the first level of an input of 2^22 elements
    or more; the others in order (reduce.cc: stridedLanes)."""
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
            unpadded = o * 32 == n and not (cur is flat and flat.size >= 1 << 22)
            if not lanes or (strided and not HOST_GATHERS_FAST and not unpadded):
                parts.append(fold(w))
                continue
            w = np.concatenate([w, np.broadcast_to(identity, w.shape[:-1] + (32 - w.shape[-1],))], axis=-1)
            acc = np.broadcast_to(identity, w.shape[:-1] + (LANES,)).astype(dt)
            for k in range(32 // LANES):
                acc = op(acc, w[..., LANES * k:LANES * k + LANES]).astype(dt)
            h = LANES // 2
            while h:
                acc = op(acc[..., :h], acc[..., h:2 * h]).astype(dt)
                h //= 2
            parts.append(op(init, acc[..., 0]).astype(dt))
        cur = np.stack(parts, axis=-1)
    if short_last:
        return _short_fold(cur, np.broadcast_to(init, cur.shape[:-1]).astype(dt), op, identity)
    return fold(cur)



def _short_fold(rows: np.ndarray, acc: np.ndarray, op: Any, identity: np.ndarray) -> np.ndarray:
    """jaxlib 0.4.13's XLA:CPU fold of rows of at most 32 f32 elements ([..., m]) into `acc` (reduce.cc shortFold):
    up to 16 in 8 lanes (the running value in lane 0, the other lanes from the identity), halved 8 -> 4 -> 2 -> 1;
    17 to 32: those up to the last multiple of 4 in 8 lanes (an even number of 4-element steps) or 4 (odd), halved,
    then the rest in order; but 32 in 16 lanes on a host with 512-bit vectors (LANES)."""
    dt = rows.dtype
    m = rows.shape[-1]
    main = m if m <= 16 else m // 4 * 4
    w = LANES if m == 32 and LANES == 16 else 8 if m <= 16 or (main // 4) % 2 == 0 else 4
    a = np.empty(rows.shape[:-1] + (16,), dt)
    a[...] = identity
    a[..., 0] = acc
    for k in range(main):
        a[..., k % w] = op(a[..., k % w], rows[..., k]).astype(dt)
    h = w // 2
    while h:
        a[..., :h] = op(a[..., :h], a[..., h:2 * h]).astype(dt)
        h //= 2
    r = a[..., 0]
    for k in range(main, m):
        r = op(r, rows[..., k]).astype(dt)
    return r


# What the library knows of this host's XLA:CPU (ipu/cpu_features.h, through jax_ipu.compiler.ops.host): whether its
# LLVM vectorises a strided window with gathers, and with 512-bit vectors (a window of 32 in 16 lanes, not 8).
HOST_GATHERS_FAST = bool(_ops.host()["gathers_fast"])
LANES = 16 if _ops.host()["wide_vectors"] else 8


def _fold_nested(x: np.ndarray, init: np.ndarray, op: Any, identity: np.ndarray, inner_rows: bool,
                 first: bool = True) -> np.ndarray:
    """x [outputs, reduced...] reduced as reduce.cc's foldNested: dimensions of one element dropped; while one is
    longer than 32, XLA's tree level windowing each such dimension (32, stride 32, SAME padding), window rows along
    the innermost dimension folded into the window's running value (LANES by window position when it is windowed,
    _short_fold when whole); then a loop nest (_short_fold per innermost row with `inner_rows`, else in order)."""
    dt = x.dtype
    shape = [d for d in x.shape[1:] if d != 1] or [1]
    x = x.reshape((x.shape[0],) + tuple(shape))
    acc0 = np.full(x.shape[0], init, dt)
    if all(d <= 32 for d in shape):
        acc = acc0
        for oc in itertools.product(*[range(d) for d in shape[:-1]]):
            row = x[(slice(None),) + oc]
            if inner_rows:
                acc = _short_fold(row, acc, op, identity)
            else:
                for k in range(row.shape[-1]):
                    acc = op(acc, row[:, k]).astype(dt)
        return acc
    o = [-(-d // 32) if d > 32 else 1 for d in shape]
    pad = [(o[k] * 32 - d) // 2 if d > 32 else 0 for k, d in enumerate(shape)]
    partials = np.empty((x.shape[0],) + tuple(o), dt)
    for w in itertools.product(*[range(k) for k in o]):
        lo = [max(0, w[k] * 32 - pad[k]) if d > 32 else 0 for k, d in enumerate(shape)]
        hi = [min(d, (w[k] + 1) * 32 - pad[k]) if d > 32 else d for k, d in enumerate(shape)]
        acc = acc0
        for oc in itertools.product(*[range(lo[k], hi[k]) for k in range(len(shape) - 1)]):
            row = x[(slice(None),) + oc]
            if shape[-1] <= 32 and (inner_rows or HOST_GATHERS_FAST or not first):
                acc = _short_fold(row, acc, op, identity)
                continue
            if not inner_rows and not HOST_GATHERS_FAST and first:  # a strided window of the input: in order
                for q in range(lo[-1], hi[-1]) if shape[-1] > 32 else range(shape[-1]):
                    acc = op(acc, row[:, q]).astype(dt)
                continue
            a = np.empty((x.shape[0], LANES), dt)
            a[...] = identity
            a[:, 0] = acc
            start = w[-1] * 32 - pad[-1]
            for q in range(lo[-1], hi[-1]):
                a[:, (q - start) % LANES] = op(a[:, (q - start) % LANES], row[:, q]).astype(dt)
            h = LANES // 2
            while h:
                a[:, :h] = op(a[:, :h], a[:, h:2 * h]).astype(dt)
                h //= 2
            acc = a[:, 0]
        partials[(slice(None),) + w] = acc
    return _fold_nested(partials, init, op, identity, inner_rows, first=False)


def xla_reduce(x: np.ndarray, dims: Sequence[int], init: Any, op: Any = np.add) -> np.ndarray:
    """The emulator's reduction of `x` over `dims` (jaxlib-0.4 numerics) as a numpy model: an f32 sum or product as
    jaxlib 0.4.13's XLA:CPU computes it (reduce.cc: one dimension, tree_reduce with its last fold _short_fold when it
    is the innermost; several, _fold_nested); anything else tree_reduce over the reduced elements in row-major order."""
    dims = sorted(dims)
    kept = [d for d in range(x.ndim) if d not in dims]
    moved = np.transpose(x, kept + dims)
    flat = moved.reshape(moved.shape[:len(kept)] + (-1,))
    dt = x.dtype
    inner = bool(dims) and dims[-1] == x.ndim - 1
    if dt != np.float32 or op not in (np.add, np.multiply) or not dims:
        return tree_reduce(flat, init, op, lanes=op in (np.add, np.multiply), strided=not inner)
    identity = np.asarray(1 if op is np.multiply else -0.0, dt)
    init = np.asarray(init, dt)
    if len(dims) == 1:  # a window of the input over a kept innermost dimension is strided (tree_reduce's `strided`)
        return tree_reduce(flat, init, op, short_last=inner, strided=not inner)
    out = _fold_nested(moved.reshape((-1,) + moved.shape[len(kept):]), init, op, identity, inner)
    return out.reshape(moved.shape[:len(kept)])
