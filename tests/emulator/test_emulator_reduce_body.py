"""Reductions with general bodies (interpreted per element): argmax/argmin as jax emits them, and others."""

from __future__ import annotations

import numpy as np
import pytest
from emulator_helpers import assert_same, dtype_name, xla_reduce

from jax_ipu import emulator as E

COMPARE_TYPE = {"f32": "FLOAT", "f16": "FLOAT", "i32": "SIGNED", "u32": "UNSIGNED"}


def cmp(body, a, b, direction, compare_type):
    return body.op("compare", [a, b], "bool", (), {"comparison_direction": direction, "compare_type": compare_type})


def argminmax_body(p, name, direction):
    """jax's _compute_argminmax reducer: (value, index) pairs; NaN wins, ties go to the smaller index."""
    body = p.main.region()
    a, ai, b, bi = body.param(name), body.param("i32"), body.param(name), body.param("i32")
    ct = COMPARE_TYPE[name]
    pick_val = body.op("or", [cmp(body, a, b, direction, ct), cmp(body, a, a, "NE", ct)], "bool")
    tie = body.op("and", [cmp(body, a, b, "EQ", ct), cmp(body, ai, bi, "LT", "SIGNED")], "bool")
    pick_idx = body.op("or", [pick_val, tie], "bool")
    body.ret(body.op("select", [pick_val, a, b], name), body.op("select", [pick_idx, ai, bi], "i32"))
    return body


def argminmax_program(x, dims, direction):
    """reduce((x, flat index over the reduced dims), dims) -> (value, index); the index is a parameter."""
    name = dtype_name(x)
    p = E.Program()
    xv = p.main.param(name, x.shape)
    xi = p.main.param("i32", x.shape)
    if name in ("f32", "f16"):
        init = -np.inf if direction == "GT" else np.inf
    else:
        info = np.iinfo(x.dtype)
        init = info.min if direction == "GT" else info.max
    inits = [p.main.constant(np.asarray(init, x.dtype)), p.main.constant(np.int32(0))]
    out_shape = [s for d, s in enumerate(x.shape) if d not in dims]
    outs = p.main.op_multi("reduce", [xv, xi] + inits, [(name, out_shape), ("i32", out_shape)],
                           {"dimensions": list(dims)}, regions=[argminmax_body(p, name, direction)])
    p.main.ret(*outs)
    return p


def flat_reduced(x, dims):
    """x with the reduced dims moved last and flattened (row-major), and the matching flat indices."""
    kept = [d for d in range(x.ndim) if d not in dims]
    moved = np.transpose(x, kept + list(dims))
    flat = moved.reshape(moved.shape[:len(kept)] + (-1,))
    idx = np.arange(flat.shape[-1], dtype=np.int32).reshape(np.asarray(x.shape)[list(dims)].tolist() or [1])
    # the index each element of x gets: its row-major position among the reduced coordinates
    full = np.zeros(x.shape, np.int32)
    view = np.transpose(full, kept + list(dims))
    view[...] = idx.reshape((1,) * len(kept) + idx.shape) if dims else 0
    return flat, full


def run_argminmax(x, dims, direction, num_tiles):
    flat, index = flat_reduced(x, dims)
    values, indices = E.compile(argminmax_program(x, dims, direction), num_tiles=num_tiles).run(x, index)
    expected = np.argmax(flat, axis=-1) if direction == "GT" else np.argmin(flat, axis=-1)
    assert_same(indices, expected.astype(np.int32))
    assert_same(values, np.take_along_axis(flat, expected[..., None], axis=-1)[..., 0])


DIMS = [(0,), (1,), (2,), (0, 2), (1, 2), (0, 1, 2)]


@pytest.mark.parametrize("num_tiles", [1, 7])
@pytest.mark.parametrize("dims", DIMS)
@pytest.mark.parametrize("direction", ["GT", "LT"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_argmax_argmin_float_with_nan_and_ties(dtype, direction, dims, num_tiles, rng):
    x = rng.integers(-3, 4, size=(6, 7, 9)).astype(dtype)  # many ties
    x[1, 2, 3] = np.nan
    x[4, :, 5] = np.nan
    x[2, 5, 7] = np.inf
    x[3, 1, 1] = -np.inf
    x[5, 6, 8] = -0.0
    run_argminmax(x, dims, direction, num_tiles)


@pytest.mark.parametrize("num_tiles", [1, 7])
@pytest.mark.parametrize("dims", DIMS)
@pytest.mark.parametrize("direction", ["GT", "LT"])
@pytest.mark.parametrize("dtype", [np.int32, np.uint32])
def test_argmax_argmin_int(dtype, direction, dims, num_tiles, rng):
    info = np.iinfo(dtype)
    x = rng.integers(0, 5, size=(5, 8, 6)).astype(dtype)
    x[0, 0, 0] = info.max
    x[4, 7, 5] = info.min
    x[2, 3, 1] = info.max
    run_argminmax(x, dims, direction, num_tiles)


def test_graphcore_argmin_argmax_example():
    x = np.array([1, 0, 5, 3], np.float32)
    for direction, expected in (("LT", 1), ("GT", 2)):
        _, idx = E.compile(argminmax_program(x, (0,), direction)).run(x, np.arange(4, dtype=np.int32))
        assert idx == expected


@pytest.mark.parametrize("num_tiles, supersteps", [(16, 2), (64, 3)])
def test_argmax_first_nan_wins_and_big_cross_tile(rng, num_tiles, supersteps):
    x = rng.normal(size=(100_003,)).astype(np.float32)
    x[[70_000, 90_000]] = np.nan
    exe = E.compile(argminmax_program(x, (0,), "GT"), num_tiles=num_tiles)
    values, idx = exe.run(x, np.arange(x.size, dtype=np.int32))
    assert idx == 70_000 and np.isnan(values)
    # partials on each tile, then combined on the output's tile; more than 32 partials of one output (64 tiles) are
    # first reduced on tiles across the IPU (Poplar's intermediate stage)
    assert exe.last_profile["supersteps"] == supersteps


def single_input_body_program(x, dims, init, make_body, out_dtype=None):
    name = dtype_name(x)
    p = E.Program()
    xv = p.main.param(name, x.shape)
    out_shape = [s for d, s in enumerate(x.shape) if d not in dims]
    body = p.main.region()
    acc, elem = body.param(name), body.param(name)
    body.ret(make_body(body, acc, elem))
    out = p.main.op_multi("reduce", [xv, p.main.constant(np.asarray(init, x.dtype))], [(name, out_shape)],
                          {"dimensions": list(dims)}, regions=[body])
    p.main.ret(*out)
    return p


@pytest.mark.parametrize("dims", DIMS)
def test_sequential_order_from_the_init_value(dims, rng):
    x = rng.normal(size=(4, 5, 6)).astype(np.float32)
    flat, _ = flat_reduced(x, dims)
    last = E.compile(single_input_body_program(x, dims, 7, lambda b, acc, e: e), num_tiles=5).run(x)[0]
    assert_same(last, flat[..., -1])  # the body returns the element: the last one in row-major order wins
    first = E.compile(single_input_body_program(x, dims, 7, lambda b, acc, e: acc), num_tiles=5).run(x)[0]
    assert_same(first, np.full(flat.shape[:-1], 7, np.float32))
    # acc * 0.5 + clamp(-1, e, 1): order-dependent, rounded once per op, checked against a sequential loop
    def body(b, acc, e):
        half = b.constant(np.float32(0.5))
        lo, hi = b.constant(np.float32(-1)), b.constant(np.float32(1))
        return b.op("add", [b.op("multiply", [acc, half], "f32"), b.op("clamp", [lo, e, hi], "f32")], "f32")
    out = E.compile(single_input_body_program(x, dims, 3, body), num_tiles=5).run(x)[0]
    acc = np.full(flat.shape[:-1], 3, np.float32)
    for k in range(flat.shape[-1]):
        acc = acc * np.float32(0.5) + np.clip(flat[..., k], np.float32(-1), np.float32(1))
    assert_same(out, acc)


def test_f16_body_rounds_per_op_and_uses_unary_ops(rng):
    x = rng.uniform(-2, 2, size=(3, 50)).astype(np.float16)

    def body(b, acc, e):  # acc + |e| * e, in f16 (each op rounded)
        return b.op("add", [acc, b.op("multiply", [b.op("abs", [e], "f16"), e], "f16")], "f16")
    out = E.compile(single_input_body_program(x, (1,), 0, body)).run(x)[0]
    acc = np.zeros(3, np.float16)
    for k in range(50):
        sq = (np.abs(x[:, k]).astype(np.float32) * x[:, k].astype(np.float32)).astype(np.float16)
        acc = (acc.astype(np.float32) + sq.astype(np.float32)).astype(np.float16)
    assert_same(out, acc)


def test_totalorder_max_body():
    x = np.array([[0.0, -0.0, 1.0, -np.inf], [-0.0, 0.0, -1.0, -2.0], [np.nan, 1.0, np.inf, -np.nan]], np.float32)

    def body(b, acc, e):
        gt = cmp(b, e, acc, "GT", "TOTALORDER")
        return b.op("select", [gt, e, acc], "f32")
    out = E.compile(single_input_body_program(x, (1,), -np.inf, body)).run(x)[0]
    assert out[0] == 1.0 and out[1] == 0.0 and not np.signbit(out[1]) and np.isnan(out[2]) and not np.signbit(out[2])


def test_mixed_dtype_body_with_convert():
    """(any, count) of a bool input: or for the first result, add(convert(bool -> i32)) for the second."""
    b = np.array([[True, False, True, True], [False, False, False, False]])
    p = E.Program()
    x1 = p.main.param("bool", b.shape)
    x2 = p.main.param("bool", b.shape)
    # the second input is carried as i32 counts
    x2i = p.main.op("convert", [x2], "i32", b.shape)
    inits = [p.main.constant(np.bool_(False)), p.main.constant(np.int32(0))]
    body = p.main.region()
    a, ac, e, ec = body.param("bool"), body.param("i32"), body.param("bool"), body.param("i32")
    one = body.constant(np.int32(1))
    inc = body.op("convert", [body.op("compare", [ec, one], "bool", (), {"comparison_direction": "EQ"})], "i32")
    body.ret(body.op("or", [a, e], "bool"), body.op("add", [ac, inc], "i32"))
    p.main.ret(*p.main.op_multi("reduce", [x1, x2i] + inits, [("bool", (2,)), ("i32", (2,))], {"dimensions": [1]},
                                regions=[body]))
    any_, count = E.compile(p).run(b, b)
    assert_same(any_, b.any(1))
    assert_same(count, b.sum(1).astype(np.int32))


def test_empty_reduction_gives_init_values():
    x = np.zeros((3, 0), np.float32)
    flat, index = flat_reduced(x, (1,))
    values, idx = E.compile(argminmax_program(x, (1,), "GT")).run(x, index)
    assert_same(values, np.full(3, -np.inf, np.float32))
    assert_same(idx, np.zeros(3, np.int32))


def test_unsupported_body_op_is_named():
    x = np.ones((4, 3), np.float32)

    def body(b, acc, e):
        r = b.op("reshape", [e], "f32", ())
        return b.op("add", [acc, r], "f32")
    with pytest.raises(E.EmulatorError) as e:
        E.compile(single_input_body_program(x, (0,), 0, body))
    assert e.value.code == "UNIMPLEMENTED"
    assert "stablehlo.reshape is not implemented in a reduce body" in str(e.value)
    assert "stablehlo.reduce(" in str(e.value)

    def unknown(b, acc, e):
        return b.op("rng_uniform", [acc, e], "f32")
    with pytest.raises(E.EmulatorError, match="does not implement stablehlo.rng_uniform") as e:
        E.compile(single_input_body_program(x, (0,), 0, unknown))
    assert e.value.code == "UNIMPLEMENTED"

    def wrong_dtype(b, acc, e):  # sine is float-only: the registry's types apply inside bodies too
        return b.op("sine", [acc], "i32")
    i = np.ones((4, 3), np.int32)
    with pytest.raises(E.EmulatorError, match="sine is implemented for f16, bf16, f32") as e:
        E.compile(single_input_body_program(i, (0,), 0, wrong_dtype))
    assert e.value.code == "UNIMPLEMENTED"


def test_malformed_body_is_invalid():
    x = np.ones((4, 3), np.float32)
    with pytest.raises(E.EmulatorError, match="body result 0 must be a tensor<f32>") as e:
        E.compile(single_input_body_program(x, (0,), 0, lambda b, acc, e: b.op("convert", [e], "i32")))
    assert e.value.code == "INVALID_ARGUMENT"


@pytest.mark.parametrize("name", ["f32", "f16"])
@pytest.mark.parametrize("dims", [(2,), (1,), (0,), (1, 2), (0, 2)])
@pytest.mark.parametrize("op", ["add", "subtract", "maximum"])
def test_plain_bodies_accumulate_in_order(name, dims, op, rng):
    # add/maximum bodies run the native kernels (several outputs at a time for one inner reduced dimension, runs of
    # outputs for outer ones); subtract is no plain reduction and stays interpreted. Mixed magnitudes make any other
    # summation order round differently; 21 rows over 5 tiles leave partial groups of outputs.
    x = (rng.normal(size=(21, 37, 13))
         * np.where(rng.random((21, 37, 13)) < 0.2, 3e3 if name == "f32" else 20.0, 1.0)).astype(E.NUMPY_DTYPES[name])
    if op == "maximum":
        x.ravel()[::17] = np.nan
    flat, _ = flat_reduced(x, dims)
    out = E.compile(single_input_body_program(x, dims, 0.5, lambda b, acc, e: b.op(op, [acc, e], name)),
                    num_tiles=5).run(x)[0]
    f = {"add": np.add, "subtract": np.subtract, "maximum": np.maximum}[op]
    if op == "subtract":  # an interpreted body folds in order from the init value
        acc = np.full(flat.shape[:-1], 0.5, x.dtype)
        for k in range(flat.shape[-1]):
            acc = f(acc, flat[..., k]).astype(x.dtype)
    else:  # the native kernels' tree (37 > 32 elements per output over dimension 1; init 0.5 folded per window)
        acc = xla_reduce(x, dims, 0.5, f)
    assert_same(out, acc)
