"""Data-movement ops against numpy, including uneven tile spreads, scalars and empty tensors."""

from __future__ import annotations

import base64

import numpy as np
import pytest
from emulator_helpers import assert_same, dtype_name, run_op

from jax_ipu import emulator as E

ALL = [np.float32, np.float16, np.int32, np.uint32, np.bool_]


def arr(shape, dtype, rng):
    return (rng.integers(0, 50, size=shape)).astype(dtype)


@pytest.mark.parametrize("dtype", ALL)
def test_broadcast_in_dim(dtype, rng):
    x = arr((3, 1), dtype, rng)
    out = run_op("broadcast_in_dim", [x], out_shape=(2, 3, 4), attrs={"broadcast_dimensions": [1, 2]}, num_tiles=7)
    assert_same(out, np.broadcast_to(x, (2, 3, 4)))
    s = run_op("broadcast_in_dim", [np.array(5, dtype)], out_shape=(1000,), attrs={"broadcast_dimensions": []},
               num_tiles=13)
    assert_same(s, np.full(1000, 5, dtype))


def test_a_broadcast_that_inserts_unit_dimensions_is_a_view(rng):
    """broadcast_in_dim [64] -> [1, 64] or [4, 6] -> [4, 1, 6, 1] moves nothing, as a reshape (Poplar's expand): no
    step of its own (lowered unfused, as where a dynamic_update_slice reads it); one that repeats elements or
    reorders dimensions is a copy."""
    def steps(x, shape, dims):
        p = E.Program()
        a = p.main.param(dtype_name(x), x.shape)
        b = p.main.op("broadcast_in_dim", [a], dtype_name(x), shape, {"broadcast_dimensions": dims})
        p.main.ret(p.main.op("negate", [b], dtype_name(x), shape))
        exe = E.compile(p, num_tiles=4, options={"fusion": False})
        (out,) = exe.run(x)
        if int(np.prod(shape)) == x.size and dims == sorted(dims):
            assert_same(out, -x.reshape(shape))
        return [s["name"] for s in exe.info["steps"]]

    x = arr((64,), np.float32, rng)
    assert steps(x, (1, 64), [1]) == ["stablehlo.negate"]
    assert steps(arr((4, 6), np.float32, rng), (4, 1, 6, 1), [0, 2]) == ["stablehlo.negate"]
    assert steps(x, (2, 64), [1]) == ["stablehlo.broadcast_in_dim", "stablehlo.negate"]  # repeats the row
    assert steps(arr((4, 6), np.float32, rng), (6, 1, 4), [2, 0]) == [  # transposes
        "stablehlo.broadcast_in_dim", "stablehlo.negate"]


@pytest.mark.parametrize("dtype", ALL)
def test_transpose_reshape(dtype, rng):
    x = arr((4, 5, 6), dtype, rng)
    assert_same(run_op("transpose", [x], out_shape=(6, 4, 5), attrs={"permutation": [2, 0, 1]}, num_tiles=13),
                x.transpose(2, 0, 1))
    assert_same(run_op("reshape", [x], out_shape=(20, 6)), x.reshape(20, 6))
    assert_same(run_op("reshape", [np.array(3, dtype)], out_shape=(1, 1)), np.full((1, 1), 3, dtype))


def test_slice(rng):
    x = arr((10, 9), np.float32, rng)
    out = run_op("slice", [x], out_shape=(3, 2), attrs={"start_indices": [1, 2], "limit_indices": [8, 7],
                                                          "strides": [3, 4]})
    assert_same(out, x[1:8:3, 2:7:4])
    assert_same(run_op("slice", [x], out_shape=(0, 9), attrs={"start_indices": [4, 0], "limit_indices": [4, 9],
                                                                "strides": [1, 1]}), x[4:4])


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.bool_])
def test_dynamic_slice_clamps(dtype, rng):
    x = arr((6, 7), dtype, rng)
    p = E.Program()
    xi = p.main.param(dtype_name(x), x.shape)
    i = p.main.param("i32")
    j = p.main.param("u32")
    r = p.main.op("dynamic_slice", [xi, i, j], dtype_name(x), (2, 3), {"slice_sizes": [2, 3]})
    p.main.ret(r)
    exe = E.compile(p)
    for a, b in [(0, 0), (2, 3), (5, 6), (-4, 100), (100, 2)]:
        ca, cb = min(max(a, 0), 4), min(max(b, 0), 4)
        assert_same(exe.run(x, np.int32(a), np.uint32(b))[0], x[ca:ca + 2, cb:cb + 3])


def test_dynamic_update_slice_clamps(rng):
    x = arr((5, 8), np.int32, rng)
    u = -arr((2, 3), np.int32, rng) - 1
    p = E.Program()
    xi, ui = p.main.param("i32", x.shape), p.main.param("i32", u.shape)
    i, j = p.main.param("i32"), p.main.param("i32")
    p.main.ret(p.main.op("dynamic_update_slice", [xi, ui, i, j], "i32", x.shape))
    exe = E.compile(p, num_tiles=3)
    for a, b in [(0, 0), (1, 2), (9, 9), (-1, 6)]:
        ca, cb = min(max(a, 0), 3), min(max(b, 0), 5)
        expected = x.copy()
        expected[ca:ca + 2, cb:cb + 3] = u
        assert_same(exe.run(x, u, np.int32(a), np.int32(b))[0], expected)


@pytest.mark.parametrize("dtype", ALL)
def test_concatenate(dtype, rng):
    a, b, c = arr((2, 3, 4), dtype, rng), arr((2, 1, 4), dtype, rng), arr((2, 0, 4), dtype, rng)
    p = E.Program()
    ids = [p.main.param(dtype_name(v), v.shape) for v in (a, b, c)]
    p.main.ret(p.main.op("concatenate", ids, dtype_name(a), (2, 4, 4), {"dimension": 1}))
    assert_same(E.compile(p, num_tiles=5).run(a, b, c)[0], np.concatenate([a, b, c], axis=1))


def test_pad_negative_and_interior(rng):
    x = arr((3, 4), np.float32, rng)
    out = run_op("pad", [x, np.float32(-1)], out_shape=(1 + 3 + 2 * 2 - 1, 4 + 3 * 1 - 2 + 0),
                 attrs={"edge_padding_low": [1, -2], "edge_padding_high": [-1, 0], "interior_padding": [2, 1]})
    assert_same(out, _reference_pad(x, -1, [1, -2], [-1, 0], [2, 1]))


def _reference_pad(x, value, lo, hi, interior):
    shape = [s + (s - 1) * i if s else 0 for s, i in zip(x.shape, interior)]
    inner = np.full(shape, value, x.dtype)
    inner[tuple(slice(None, None, i + 1) for i in interior)] = x
    pads = [(max(low, 0), max(high, 0)) for low, high in zip(lo, hi)]
    padded = np.pad(inner, pads, constant_values=value)
    crop = tuple(slice(max(-low, 0), padded.shape[d] - max(-high, 0)) for d, (low, high) in enumerate(zip(lo, hi)))
    return padded[crop]


@pytest.mark.parametrize("dtype", ALL)
def test_iota(dtype):
    out = run_op("iota", [], out_dtype=dtype_name(np.zeros(0, dtype)), out_shape=(3, 4), attrs={"iota_dimension": 1})
    assert_same(out, np.broadcast_to(np.arange(4), (3, 4)).astype(dtype))


def test_constants_dense_and_splat():
    p = E.Program()
    dense = np.array([[1.5, -2], [3, 4]], np.float16)
    c1 = p.main.constant(dense)
    c2 = p.main.splat(7, "i32", (2, 3))
    c3 = p.main.constant(np.array([True, False, True]))
    p.main.ret(c1, c2, c3)
    out = E.compile(p).run()
    assert_same(out[0], dense)
    assert_same(out[1], np.full((2, 3), 7, np.int32))
    assert_same(out[2], np.array([True, False, True]))


def test_constant_size_mismatch_is_invalid():
    p = E.Program()
    p.main.ret(p.main.op("constant", [], "f32", (3,), {"value": base64.b64encode(b"\0" * 8).decode()}))
    with pytest.raises(E.EmulatorError, match="holds 8 bytes but the result needs 12") as e:
        E.compile(p)
    assert e.value.code == "INVALID_ARGUMENT"


def test_empty_shape_ops():
    x = np.zeros((0, 3), np.float32)
    assert_same(run_op("transpose", [x], out_shape=(3, 0), attrs={"permutation": [1, 0]}), x.T)
    assert_same(run_op("broadcast_in_dim", [x], out_shape=(2, 0, 3), attrs={"broadcast_dimensions": [1, 2]}),
                np.zeros((2, 0, 3), np.float32))


def test_bitcast_convert_is_a_reinterpretation():
    x = np.array([0.0, -0.0, 1.5, np.inf, np.nan, -3.25e-3], np.float32)
    as_int = run_op("bitcast_convert", [x], out_dtype="i32")
    np.testing.assert_array_equal(as_int, x.view(np.int32))
    back = run_op("bitcast_convert", [as_int], out_dtype="f32", num_tiles=3)
    np.testing.assert_array_equal(back.view(np.uint32), x.view(np.uint32))


def test_bitcast_convert_between_widths():
    """The same bytes: the narrower side has an innermost dimension of the width ratio, over any tile count; any
    other shape is refused, naming the one it needs."""
    x = np.array([[1.5, -2.0, np.inf], [np.nan, 3e-39, -0.0]], np.float32)
    halves = run_op("bitcast_convert", [x], out_dtype="u16", out_shape=(2, 3, 2), num_tiles=5)
    np.testing.assert_array_equal(halves, x.view(np.uint16).reshape(2, 3, 2))
    back = run_op("bitcast_convert", [halves], out_dtype="f32", out_shape=(2, 3), num_tiles=2)
    np.testing.assert_array_equal(back.view(np.uint32), x.view(np.uint32))
    with pytest.raises(E.EmulatorError, match=r"bitcast_convert to f16 needs the shape tensor<4x2xf16>"):
        run_op("bitcast_convert", [np.ones(4, np.float32)], out_dtype="f16")


@pytest.mark.parametrize("dims", [(0,), (1,), (0, 2), (0, 1, 2)])
def test_reverse(dims):
    x = np.arange(2 * 5 * 3, dtype=np.int32).reshape(2, 5, 3)
    np.testing.assert_array_equal(run_op("reverse", [x], attrs={"dimensions": list(dims)}, num_tiles=7),
                                  np.flip(x, dims))
