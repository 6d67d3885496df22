"""The hand-vectorised and native host kernels give the bits of the code they replace.

- exp, expm1, log, log1p, tanh, logistic, sqrt and rsqrt on f32 run whole 8-lane AVX2+FMA vectors
  (ipu/xla_math_avx2.h) and finish a block's last n % 8 elements with the scalar version, in each series' numerics.
  On one tile an array of 8k + 7 elements is one block: the same values placed in the vector part and in the tail
  must give the same bits. (Off x86-64 or without AVX2 both parts are scalar.)
- select_and_scatter with max pooling's f32 bodies (compare GE/GT, add) runs natively: it must match the same bodies
  run through the interpreter (made unrecognisable by an identity op each).
- f32 add/max/min over the innermost dimension run 8 rows at a time: each row is still summed in order. jaxlib
  0.12's IEEE maximum/minimum run 8 lanes at a time too, elementwise and in those row reductions.
"""

from __future__ import annotations

import numpy as np
import pytest
from emulator_helpers import run_op, xla_reduce

from jax_ipu import emulator as E

SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-40, 1.17549435e-38, 88.8, -87.8, 89.0,
                     -88.0, 88.72, -87.33, 7.9053111, -7.9053111, 8.0, 0.0004, -0.0004, 0.00039, -0.00039, 0.70710677,
                     0.7071068, 1.0, -1.0, 0.5, 3.4e38, -3.4e38, 20.0, -20.0, 88.723, 88.7229, -103.9, -104.0,
                     -104.1, -110.0, 7.9988117, -7.9988117, 0.41421354, -0.41421354], np.float32)


def _values(rng: np.random.Generator) -> np.ndarray:
    bits = rng.integers(0, 2**32, size=256, dtype=np.uint64).astype(np.uint32).view(np.float32)
    return np.concatenate([SPECIALS, bits, rng.uniform(-10, 10, 256).astype(np.float32),
                           rng.uniform(-0.01, 0.01, 64).astype(np.float32), rng.uniform(0, 3, 64).astype(np.float32)])


@pytest.mark.parametrize("numerics", ["jaxlib-0.4", "jaxlib-0.12"])
@pytest.mark.parametrize("op", ["exponential", "exponential_minus_one", "log", "log_plus_one", "tanh", "logistic",
                                "rsqrt", "sqrt"])
def test_vector_lanes_match_scalar_tail(op, numerics, rng):
    values = _values(rng)
    body = values[: len(values) // 8 * 8]
    checked = 0
    for start in range(0, len(values), 7):
        tail = values[start:start + 7]
        if len(tail) < 7:
            break
        x = np.concatenate([body, tail])
        with np.errstate(all="ignore"):
            out = run_op(op, [x], num_tiles=1, numerics=numerics)
        vec = out[: len(body)]
        # where each tail value sits in the vector part (the same value, so the same input bits)
        where = {v.tobytes(): i for i, v in enumerate(body)}
        for j, v in enumerate(tail):
            i = where.get(v.tobytes())
            if i is None:
                continue
            assert out[len(body) + j].tobytes() == vec[i].tobytes(), (op, v, out[len(body) + j], vec[i])
            checked += 1
    assert checked >= 80


@pytest.mark.parametrize("op,fn", [("exponential", np.exp), ("log", np.log), ("tanh", np.tanh),
                                   ("logistic", lambda x: 1 / (1 + np.exp(-x)))])
def test_vector_kernels_against_numpy(op, fn, rng):
    x = rng.uniform(-20, 20, 4099).astype(np.float32)
    if op == "log":
        x = np.abs(x) + np.float32(1e-3)
    out = run_op(op, [x])
    np.testing.assert_allclose(out, fn(x.astype(np.float64)).astype(np.float32), rtol=3e-6, atol=1e-30)


def _select_and_scatter(x, src, window, strides, padding, direction, scatter, interpreted):
    """select_and_scatter(x, src, init 0) with a compare `direction` select and an add scatter ("add" or
    "add_swapped": source + accumulator). `interpreted`: the same bodies, each followed by an identity op (and of the
    predicate with itself, maximum of the sum with itself), which the emulator cannot run natively."""
    p = E.Program()
    xv, sv = p.main.param("f32", x.shape), p.main.param("f32", src.shape)
    init = p.main.constant(np.float32(0))
    sel = p.main.region()
    a, b = sel.param("f32"), sel.param("f32")
    r = sel.op("compare", [a, b], "bool", (), {"comparison_direction": direction, "compare_type": "FLOAT"})
    if interpreted:
        r = sel.op("and", [r, r], "bool")
    sel.ret(r)
    sc = p.main.region()
    acc, v = sc.param("f32"), sc.param("f32")
    t = sc.op("add", [acc, v] if scatter == "add" else [v, acc], "f32")
    if interpreted:
        t = sc.op("maximum", [t, t], "f32")
    sc.ret(t)
    attrs = {"window_dimensions": list(window), "window_strides": list(strides), "padding": [list(q) for q in padding]}
    out = p.main.op_multi("select_and_scatter", [xv, sv, init], [("f32", x.shape)], attrs, regions=[sel, sc])
    p.main.ret(*out)
    return E.compile(p).run(x, src)[0]


@pytest.mark.parametrize("direction", ["GE", "GT"])
@pytest.mark.parametrize("scatter", ["add", "add_swapped"])
@pytest.mark.parametrize("window,strides,padding", [
    ((1, 2, 2, 1), (1, 2, 2, 1), ((0, 0), (0, 0), (0, 0), (0, 0))),   # max pooling 2x2 / 2, NHWC
    ((1, 3, 3, 1), (1, 2, 2, 1), ((0, 0), (1, 1), (1, 1), (0, 0))),   # overlapping windows with padding
])
def test_native_select_and_scatter_matches_interpreted(direction, scatter, window, strides, padding, rng):
    x = rng.integers(-3, 4, size=(2, 9, 8, 5)).astype(np.float32)  # many ties
    x[0, 1, 1, 1] = np.nan
    x[1, 2, 3, 4] = -0.0
    out_shape = [(n + lo + hi - w) // s + 1 for n, w, s, (lo, hi) in zip(x.shape, window, strides, padding)]
    src = rng.standard_normal(out_shape).astype(np.float32)
    src.flat[3] = np.nan
    src.flat[7] = -0.0
    native = _select_and_scatter(x, src, window, strides, padding, direction, scatter, False)
    reference = _select_and_scatter(x, src, window, strides, padding, direction, scatter, True)
    np.testing.assert_array_equal(native.view(np.uint32), reference.view(np.uint32))
    assert np.count_nonzero(native) > 0


def _reduce_rows(x, op, dims, numerics=None):
    name = {"add": "add", "max": "maximum", "min": "minimum"}[op]
    init = {"add": 0.0, "max": -np.inf, "min": np.inf}[op]
    p = E.Program(numerics=numerics)
    xv = p.main.param("f32", x.shape)
    iv = p.main.constant(np.float32(init))
    body = p.main.region()
    a, b = body.param("f32"), body.param("f32")
    body.ret(body.op(name, [a, b], "f32"))
    out_shape = [s for d, s in enumerate(x.shape) if d not in dims]
    r = p.main.op_multi("reduce", [xv, iv], [("f32", out_shape)], {"dimensions": list(dims)}, regions=[body])
    p.main.ret(*r)
    return E.compile(p).run(x)[0]


@pytest.mark.parametrize("cols", [1, 7, 8, 61, 1024])
def test_row_reductions_sum_in_order(cols, rng):
    """Row sums (up to 32 columns as jaxlib 0.4.13's XLA:CPU folds a row; more: the windows of the reduction tree in
    vector lanes) give emulator_helpers.xla_reduce's bits; max and min propagate NaN as XLA's do."""
    x = (rng.standard_normal((77, cols)) * 10.0 ** rng.integers(-3, 4, (77, cols))).astype(np.float32)
    np.testing.assert_array_equal(_reduce_rows(x, "add", [1]).view(np.uint32), xla_reduce(x, [1], 0).view(np.uint32))
    x[5, cols // 2] = np.nan
    x[13, 0] = np.nan
    for op, fn in (("max", np.max), ("min", np.min)):
        np.testing.assert_array_equal(_reduce_rows(x, op, [1]), fn(x, axis=1))
    # the innermost dimension of a 3-d array: outputs over two dimensions
    y = x[:76].reshape(4, 19, cols)
    np.testing.assert_array_equal(_reduce_rows(y, "add", [2]).view(np.uint32), xla_reduce(y, [2], 0).view(np.uint32))


def _ieee_pick(a: np.ndarray, b: np.ndarray, is_max: bool) -> np.ndarray:
    """jaxlib 0.12's XLA:CPU maximum/minimum: f32 denormals read as zeros, -0 < +0, NaN if either is."""
    def daz(v):
        return np.where(np.abs(v) < np.float32(1.17549435e-38), np.copysign(np.float32(0), v), v).astype(np.float32)

    def key(v):
        i = v.view(np.int32)
        return i ^ ((i >> 31) & 0x7FFFFFFF)

    a, b = daz(a), daz(b)
    pick_a = key(a) >= key(b) if is_max else key(a) <= key(b)
    return np.where(np.isnan(a) | np.isnan(b), np.float32(np.nan), np.where(pick_a, a, b)).astype(np.float32)


def _same(got: np.ndarray, want: np.ndarray) -> None:
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_array_equal(got[ok].view(np.uint32), want[ok].view(np.uint32))


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_jaxlib_012_maximum_and_minimum_vectors_and_rows(op, rng):
    """jaxlib 0.12's IEEE maximum/minimum run eight lanes at a time (elementwise, and row reductions 8 rows at a
    time): the same bits as the scalar rule, specials (signed zeros, denormals, infinities, NaN) included."""
    specials = np.array([0.0, -0.0, 1e-40, -1e-40, 1e-45, -1e-45, np.inf, -np.inf, np.nan, 1.0, -1.0, 3.4e38,
                         1.17549435e-38, -1.17549435e-38], np.float32)
    a = np.concatenate([np.repeat(specials, len(specials)), rng.standard_normal(1001).astype(np.float32)])
    b = np.concatenate([np.tile(specials, len(specials)), rng.standard_normal(1001).astype(np.float32)])
    _same(run_op(op, [a, b], num_tiles=1, numerics="jaxlib-0.12"), _ieee_pick(a, b, op == "maximum"))
    rows = rng.choice(np.concatenate([specials, rng.standard_normal(50).astype(np.float32)]), size=(77, 61))
    rows = rows.astype(np.float32)
    want = np.full(77, -np.inf if op == "maximum" else np.inf, np.float32)
    for k in range(rows.shape[1]):
        want = _ieee_pick(want, rows[:, k], op == "maximum")
    _same(_reduce_rows(rows, {"maximum": "max", "minimum": "min"}[op], [1], numerics="jaxlib-0.12"), want)
