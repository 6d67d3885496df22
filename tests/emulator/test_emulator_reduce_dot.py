"""Reductions and dot_general against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from emulator_helpers import assert_same, dtype_name, xla_reduce

from jax_ipu import emulator as E

INIT = {"add": 0, "multiply": 1, "maximum": -np.inf, "minimum": np.inf, "and": -1, "or": 0}
NP = {"add": np.sum, "multiply": np.prod, "maximum": np.max, "minimum": np.min,
      "and": np.bitwise_and.reduce, "or": np.bitwise_or.reduce}


def reduce_program(x, computation, dims, init, num_inputs=1, with_attr=True):
    p = E.Program()
    name = dtype_name(x)
    xs = [p.main.param(name, x.shape) for _ in range(num_inputs)]
    inits = [p.main.constant(np.asarray(init, x.dtype)) for _ in range(num_inputs)]
    out_shape = [s for d, s in enumerate(x.shape) if d not in dims]
    body = p.main.region()
    a = [body.param(name) for _ in range(num_inputs)]
    b = [body.param(name) for _ in range(num_inputs)]
    body.ret(*[body.op(computation, [a[i], b[i]], name) for i in range(num_inputs)])
    attrs = {"dimensions": list(dims)}
    if with_attr:
        attrs["computation"] = computation
    outs = p.main.op_multi("reduce", xs + inits, [(name, out_shape)] * num_inputs, attrs, regions=[body])
    p.main.ret(*outs)
    return p


@pytest.mark.parametrize("dims", [(0,), (1,), (2,), (0, 2), (0, 1, 2), ()])
@pytest.mark.parametrize("computation", ["add", "maximum", "minimum", "multiply"])
def test_reduce_float_dims(computation, dims, rng):
    x = rng.uniform(0.5, 1.5, size=(7, 11, 13)).astype(np.float32)
    init = np.float32(INIT[computation])
    out = E.compile(reduce_program(x, computation, dims, init), num_tiles=7).run(x)[0]
    expected = NP[computation](x.astype(np.float64), axis=dims) if dims else x  # exact sums and products
    np.testing.assert_allclose(out, np.asarray(expected, np.float32), rtol=2e-6)


@pytest.mark.parametrize("computation", ["add", "multiply", "maximum", "minimum", "and", "or"])
@pytest.mark.parametrize("dtype", [np.int32, np.uint32])
def test_reduce_int(computation, dtype, rng):
    x = rng.integers(1, 1 << 20, size=(13, 77)).astype(dtype)
    init = {"maximum": np.iinfo(dtype).min, "minimum": np.iinfo(dtype).max}.get(computation, INIT[computation])
    init = np.array(init).astype(dtype)
    out = E.compile(reduce_program(x, computation, (0,), init), num_tiles=13).run(x)[0]
    with np.errstate(over="ignore"):
        assert_same(out, NP[computation](x, axis=0).astype(dtype))


def test_reduce_bool_and_f16(rng):
    b = rng.integers(0, 2, size=(5, 9)).astype(bool)
    assert_same(E.compile(reduce_program(b, "or", (1,), False)).run(b)[0], b.any(axis=1))
    assert_same(E.compile(reduce_program(b, "and", (1,), True)).run(b)[0], b.all(axis=1))
    h = rng.uniform(0, 1, size=(4, 300)).astype(np.float16)  # f16 per-op rounding, in XLA:CPU's tree order
    assert_same(E.compile(reduce_program(h, "add", (1,), 0)).run(h)[0], xla_tree_sum(h, (1,)))


def test_reduce_init_folded_once_and_nan(rng):
    x = np.ones((3, 4), np.float32)
    assert_same(E.compile(reduce_program(x, "add", (1,), 10)).run(x)[0], np.full(3, 14, np.float32))
    x[1, 2] = np.nan
    out = E.compile(reduce_program(x, "maximum", (1,), -np.inf)).run(x)[0]
    assert np.isnan(out[1]) and out[0] == 1


def test_reduce_variadic_same_computation_and_inferred_body(rng):
    x = rng.normal(size=(6, 5)).astype(np.float32)
    outs = E.compile(reduce_program(x, "add", (0,), 0, num_inputs=2, with_attr=False)).run(x, 2 * x)
    np.testing.assert_allclose(outs[0], x.sum(0), rtol=1e-6)
    np.testing.assert_allclose(outs[1], (2 * x).sum(0), rtol=1e-6)


def test_reduce_empty_and_scalar():
    x = np.zeros((0, 4), np.float32)
    assert_same(E.compile(reduce_program(x, "add", (0,), 3)).run(x)[0], np.full(4, 3, np.float32))
    s = np.float32(2.5)
    assert_same(E.compile(reduce_program(np.asarray(s), "add", (), 0)).run(s)[0], np.asarray(s))


def test_reduce_cross_tile_takes_two_supersteps(rng):
    x = rng.normal(size=(1000,)).astype(np.float32)
    exe = E.compile(reduce_program(x, "add", (0,), 0), num_tiles=13)
    np.testing.assert_allclose(exe.run(x)[0], x.sum(), rtol=1e-5)
    assert exe.last_profile["supersteps"] == 2


def dot_program(lhs, rhs, out_dtype, lb=(), rb=(), lc=(), rc=(), out_shape=None):
    p = E.Program()
    a = p.main.param(dtype_name(lhs), lhs.shape)
    b = p.main.param(dtype_name(rhs), rhs.shape)
    p.main.ret(p.main.op("dot_general", [a, b], out_dtype, out_shape, {
        "lhs_batching_dimensions": list(lb), "rhs_batching_dimensions": list(rb),
        "lhs_contracting_dimensions": list(lc), "rhs_contracting_dimensions": list(rc)}))
    return p


@pytest.mark.parametrize("tiles", [1, 7, 1472])
def test_matmul_f32(tiles, rng):
    a = rng.normal(size=(33, 20)).astype(np.float32)
    b = rng.normal(size=(20, 17)).astype(np.float32)
    out = E.compile(dot_program(a, b, "f32", lc=[1], rc=[0], out_shape=(33, 17)), num_tiles=tiles).run(a, b)[0]
    np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)


def test_batched_transposed_dot(rng):
    a = rng.normal(size=(5, 3, 4)).astype(np.float32)  # [k, batch, m]
    b = rng.normal(size=(3, 6, 5)).astype(np.float32)  # [batch, n, k]
    p = dot_program(a, b, "f32", lb=[1], rb=[0], lc=[0], rc=[2], out_shape=(3, 4, 6))
    out = E.compile(p, num_tiles=13).run(a, b)[0]
    np.testing.assert_allclose(out, np.einsum("kbm,bnk->bmn", a, b), rtol=1e-5, atol=1e-5)


def test_dot_f16_int_bool(rng):
    a = rng.normal(size=(8, 16)).astype(np.float16)
    b = rng.normal(size=(16, 4)).astype(np.float16)
    ref = (a.astype(np.float32) @ b.astype(np.float32))
    out16 = E.compile(dot_program(a, b, "f16", lc=[1], rc=[0], out_shape=(8, 4))).run(a, b)[0]
    np.testing.assert_allclose(out16.astype(np.float32), ref, rtol=2e-3, atol=2e-3)
    out32 = E.compile(dot_program(a, b, "f32", lc=[1], rc=[0], out_shape=(8, 4))).run(a, b)[0]
    np.testing.assert_allclose(out32, ref, rtol=1e-5, atol=1e-5)
    i = rng.integers(-(2 ** 31), 2 ** 31 - 1, size=(3, 5)).astype(np.int32)
    j = rng.integers(-(2 ** 31), 2 ** 31 - 1, size=(5,)).astype(np.int32)
    with np.errstate(over="ignore"):
        assert_same(E.compile(dot_program(i, j, "i32", lc=[1], rc=[0], out_shape=(3,))).run(i, j)[0], i @ j)
    p = rng.integers(0, 2, size=(4, 6)).astype(bool)
    q = rng.integers(0, 2, size=(6, 3)).astype(bool)
    expected = (p.astype(np.int32) @ q.astype(np.int32)) > 0
    assert_same(E.compile(dot_program(p, q, "bool", lc=[1], rc=[0], out_shape=(4, 3))).run(p, q)[0], expected)


def test_dot_vector_outer_and_empty(rng):
    v = rng.normal(size=(4,)).astype(np.float32)
    w = rng.normal(size=(4,)).astype(np.float32)
    assert np.allclose(E.compile(dot_program(v, w, "f32", lc=[0], rc=[0], out_shape=())).run(v, w)[0], v @ w)
    assert np.allclose(E.compile(dot_program(v, w, "f32", out_shape=(4, 4))).run(v, w)[0], np.outer(v, w))
    z = np.zeros((3, 0), np.float32)
    y = np.zeros((0, 2), np.float32)
    assert_same(E.compile(dot_program(z, y, "f32", lc=[1], rc=[0], out_shape=(3, 2))).run(z, y)[0],
                np.zeros((3, 2), np.float32))


def test_big_matmul_parallel(rng):
    a = rng.normal(size=(256, 512)).astype(np.float32)
    b = rng.normal(size=(512, 256)).astype(np.float32)
    out = E.compile(dot_program(a, b, "f32", lc=[1], rc=[0], out_shape=(256, 256))).run(a, b)[0]
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)


def xla_tree_sum(x: np.ndarray, dims) -> np.ndarray:
    """jnp.sum's order on the emulator: emulator_helpers.xla_reduce."""
    return xla_reduce(x, dims, 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape, dims", [
    ((33,), (0,)), ((1000,), (0,)), ((100_003,), (0,)),  # one, two and three levels; uneven pads
    ((11, 1000), (1,)),                                    # rows: 8 at a time (vector kernel) and 3 alone
    ((1000, 20), (0, 1)), ((5, 40, 7), (0, 1)), ((3, 70, 33), (1, 2)),  # windows over several dimensions
    ((70, 3), (0,)), ((2100, 5), (0,)), ((40, 3, 50), (0, 2)),  # reduced-major: outputs swept per coordinate
    ((20, 32), (1,)), ((32, 32), (0, 1)),                  # every dimension <= 32: a loop nest, no tree
    ((100, 50), (0, 1)), ((6, 1, 7), (0, 1, 2)),           # a padded innermost window; a dimension of one dropped
])
def test_reduce_follows_xla_cpu_tree(dtype, shape, dims, rng):
    # Random sums against a bit-exact model of the emulator's order (emulator_helpers.xla_reduce: jaxlib 0.4.13's
    # XLA:CPU tree and loops for f32, the tree over the flattened reduced elements for f16): a window, pad or lane off
    # by one, or a path (vector lanes, windows across rows, outputs swept per reduced coordinate) that folds in
    # another order, fails here.
    x = rng.standard_normal(shape).astype(dtype)
    out = E.compile(reduce_program(x, "add", dims, dtype(0)), num_tiles=13).run(x)[0]
    assert_same(out, xla_tree_sum(x, dims))


def test_large_sum_of_ones():
    # 2^25 f32 ones: one sequential f32 accumulator stops at 2^24 (2^24 + 1 rounds back to it); XLA:CPU's tree gives
    # 2^25, and so must the emulator. The same for 2^21 rows of 16 summed over both dimensions, and per column.
    x = np.ones(1 << 25, np.float32)
    assert E.compile(reduce_program(x, "add", (0,), np.float32(0))).run(x)[0] == np.float32(1 << 25)
    m = np.ones((1 << 21, 16), np.float32)
    assert E.compile(reduce_program(m, "add", (0, 1), np.float32(0))).run(m)[0] == np.float32(1 << 25)
    assert_same(E.compile(reduce_program(m, "add", (0,), np.float32(0))).run(m)[0], np.full(16, 1 << 21, np.float32))
