"""sort: comparator regions compiled into scalar programs, several operands permuted together, any dimension."""

from __future__ import annotations

import numpy as np
import pytest
from emulator_helpers import assert_same, dtype_name

from jax_ipu import emulator as E

COMPARE_TYPE = {"f32": "FLOAT", "f16": "FLOAT", "i32": "SIGNED", "u32": "UNSIGNED", "bool": "UNSIGNED"}


def compare(body, a, b, direction, compare_type):
    return body.op("compare", [a, b], "bool", (), {"comparison_direction": direction, "compare_type": compare_type})


def simple_comparator(p, names, direction="LT", key=0):
    """Compares operand `key` only: (lhs_0, rhs_0, lhs_1, rhs_1, ...) -> lhs_key < rhs_key."""
    body = p.main.region()
    params = [body.param(n) for n in names for _ in range(2)]
    body.ret(compare(body, params[2 * key], params[2 * key + 1], direction, COMPARE_TYPE[names[key]]))
    return body


def total_order_key(body, x, name):
    """jax's _canonicalize_float_for_sort + _float_to_int_for_sort, as jax 0.4.13 emits them."""
    ints, uints, width = ("i32", "u32", np.float32) if name == "f32" else ("i16", "u16", np.float16)
    nan_bits = 0x7FC00000 if name == "f32" else 0x7E00
    signed = body.op("bitcast_convert", [x], ints)
    unsigned = body.op("bitcast_convert", [x], uints)
    is_zero = compare(body, x, body.constant(width(0)), "EQ", "FLOAT")
    k = body.op("select", [is_zero, body.op("constant", [], ints, (), const_attrs(0, ints)), signed], ints)
    is_nan = compare(body, x, x, "NE", "FLOAT")
    k = body.op("select", [is_nan, body.op("constant", [], ints, (), const_attrs(nan_bits, ints)), k], ints)
    top = body.op("constant", [], uints, (), const_attrs(0x7FFFFFFF if name == "f32" else 0x7FFF, uints))
    flipped = body.op("bitcast_convert", [body.op("subtract", [top, unsigned], uints)], ints)
    negative = compare(body, k, body.op("constant", [], ints, (), const_attrs(0, ints)), "LT", "SIGNED")
    return body.op("select", [negative, flipped, k], ints)


def const_attrs(value, name):
    import base64

    dtype = {"i32": np.int32, "u32": np.uint32, "i16": np.int16, "u16": np.uint16}[name]
    return {"value": base64.b64encode(np.asarray(value).astype(dtype).tobytes()).decode(), "splat": False}


def total_order_comparator(p, names):
    body = p.main.region()
    params = [body.param(n) for n in names for _ in range(2)]
    ka, kb = (total_order_key(body, params[i], names[0]) for i in (0, 1))
    body.ret(compare(body, ka, kb, "LT", "SIGNED"))
    return body


def sort_program(arrays, dimension, comparator, is_stable=True):
    names = [dtype_name(a) for a in arrays]
    p = E.Program()
    ids = [p.main.param(n, a.shape) for n, a in zip(names, arrays)]
    outs = p.main.op_multi("sort", ids, [(n, a.shape) for n, a in zip(names, arrays)],
                           {"dimension": dimension, "is_stable": is_stable}, regions=[comparator(p, names)])
    p.main.ret(*outs)
    return p


def run_sort(arrays, dimension, comparator=simple_comparator, num_tiles=0, is_stable=True):
    exe = E.compile(sort_program(arrays, dimension, comparator, is_stable), num_tiles=num_tiles)
    return exe.run(*arrays), exe


def expected(arrays, dimension, keys):
    order = np.argsort(keys, axis=dimension, kind="stable")
    return [np.take_along_axis(a, order, axis=dimension) for a in arrays]


def f32_total_keys(x):
    bits = x.view(np.int32).astype(np.int64)
    bits = np.where(x == 0, 0, bits)
    bits = np.where(np.isnan(x), 0x7FC00000, bits)
    return np.where(bits < 0, 0x7FFFFFFF - (bits & 0xFFFFFFFF), bits)


@pytest.mark.parametrize("num_tiles", [0, 7])
@pytest.mark.parametrize("dimension", [0, 1, 2])
@pytest.mark.parametrize("dtype", ["f32", "f16", "i32", "u32", "bool"])
def test_each_dimension_of_a_3d_array(rng, dtype, dimension, num_tiles):
    np_dtype = E.NUMPY_DTYPES[dtype]
    x = rng.integers(0, 6, size=(9, 10, 11)).astype(np_dtype)  # many ties
    (got,), _ = run_sort([x], dimension, num_tiles=num_tiles)
    assert_same(got, np.sort(x, axis=dimension, kind="stable"))


@pytest.mark.parametrize("dimension", [0, 1, -1])
def test_key_value_ties_are_stable_and_values_follow(rng, dimension):
    keys = rng.integers(-3, 3, size=(40, 50)).astype(np.int32)
    values = rng.normal(size=keys.shape).astype(np.float32)
    index = np.arange(keys.size, dtype=np.uint32).reshape(keys.shape)
    got, _ = run_sort([keys, values, index], dimension, num_tiles=7)
    for g, w in zip(got, expected([keys, values, index], dimension % 2, keys)):
        assert_same(g, w)


def test_descending_comparator_is_stable(rng):
    keys = rng.integers(0, 4, size=(100,)).astype(np.uint32)
    index = np.arange(100, dtype=np.int32)
    got, _ = run_sort([keys, index], 0, lambda p, n: simple_comparator(p, n, "GT"))
    for g, w in zip(got, expected([keys, index], 0, -keys.astype(np.int64))):
        assert_same(g, w)


def test_second_operand_breaks_ties():
    a = np.array([2, 1, 2, 1, 0], np.int32)
    b = np.array([5.0, 7.0, -1.0, 3.0, 9.0], np.float32)

    def lexicographic(p, names):
        body = p.main.region()
        a0, a1, b0, b1 = (body.param(n) for n in ("i32", "i32", "f32", "f32"))
        lt = compare(body, a0, a1, "LT", "SIGNED")
        eq = compare(body, a0, a1, "EQ", "SIGNED")
        body.ret(body.op("or", [lt, body.op("and", [eq, compare(body, b0, b1, "LT", "FLOAT")], "bool")], "bool"))
        return body

    (sa, sb), _ = run_sort([a, b], 0, lexicographic)
    assert_same(sa, np.array([0, 1, 1, 2, 2], np.int32))
    assert_same(sb, np.array([9.0, 3.0, 7.0, -1.0, 5.0], np.float32))


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_total_order_places_nan_and_signed_zeros(rng, dtype):
    base = np.array([np.nan, -np.nan, -0.0, 0.0, np.inf, -np.inf, 1.5, -1.5, 0.0, -0.0, 3.0, np.nan], np.float32)
    x = np.concatenate([base, rng.normal(size=37).astype(np.float32)]).astype(E.NUMPY_DTYPES[dtype])
    rng.shuffle(x)
    index = np.arange(x.size, dtype=np.int32)
    got, _ = run_sort([x, index], 0, total_order_comparator)
    want = expected([x, index], 0, f32_total_keys(x.astype(np.float32)))
    assert_same(got[1], want[1])  # the permutation says everything: -0.0/0.0 keep their order, NaNs go last
    np.testing.assert_array_equal(got[0].view(np.uint8), want[0].view(np.uint8))


@pytest.mark.parametrize("shape, dimension", [((0,), 0), ((3, 0), 0), ((3, 0), 1), ((0, 4), 1), ((1,), 0),
                                              ((5, 1), 1), ((1, 5), 0), ((2, 1, 3), 1)])
def test_empty_and_size_one_slices(rng, shape, dimension):
    x = rng.normal(size=shape).astype(np.float32)
    index = np.arange(x.size, dtype=np.int32).reshape(shape)
    got, exe = run_sort([x, index], dimension)
    for g, w in zip(got, expected([x, index], dimension, x)):
        assert_same(g, w)
    if x.size == 0:
        assert exe.last_profile["supersteps"] == 0


@pytest.mark.parametrize("shape, dimension", [((100_003,), 0), ((1000, 37), 0), ((1000, 37), 1), ((3, 40_000), 1)])
def test_big_and_uneven_over_seven_tiles(rng, shape, dimension):
    x = rng.normal(size=shape).astype(np.float32)
    index = np.arange(x.size, dtype=np.int32).reshape(shape)
    got, exe = run_sort([x, index], dimension, num_tiles=7)
    for g, w in zip(got, expected([x, index], dimension, x)):
        assert_same(g, w)
    profile = exe.last_profile
    assert profile["supersteps"] >= 1 and profile["compute_cycles"] > 0


def test_innermost_sort_is_one_superstep_and_other_dims_write_back(rng):
    x = rng.normal(size=(64, 128)).astype(np.float32)
    _, inner = run_sort([x], 1, num_tiles=16)
    _, outer = run_sort([x], 0, num_tiles=16)
    assert inner.last_profile["supersteps"] == 1
    assert outer.last_profile["supersteps"] == 2
    assert outer.last_profile["exchange_cycles"] > 0


def test_cycles_grow_like_n_log_n(rng):
    small = rng.normal(size=(1, 1024)).astype(np.float32)
    big = rng.normal(size=(1, 4096)).astype(np.float32)
    c_small = run_sort([small], 1)[1].last_profile["compute_cycles"]
    c_big = run_sort([big], 1)[1].last_profile["compute_cycles"]
    assert 4 * c_small < c_big < 6 * c_small


def test_unsupported_comparator_op_is_named():
    x = np.ones(4, np.float32)

    def with_sine(p, names):
        body = p.main.region()
        a, b = body.param("f32"), body.param("f32")
        body.ret(compare(body, body.op("sine", [a], "f32"), b, "LT", "FLOAT"))
        return body

    def with_iota(p, names):
        body = p.main.region()
        a, b = body.param("f32"), body.param("f32")
        body.op("iota", [], "i32", (2,), {"iota_dimension": 0})
        body.ret(compare(body, a, b, "LT", "FLOAT"))
        return body

    exe = E.compile(sort_program([x], 0, with_sine))  # sine on f32 is fine
    assert_same(exe.run(x)[0], x)
    with pytest.raises(E.EmulatorError, match="stablehlo.sort.*in the comparator.*iota") as e:
        E.compile(sort_program([x], 0, with_iota))
    assert e.value.code == "UNIMPLEMENTED"


def test_malformed_sorts_are_rejected():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(E.EmulatorError, match="dimension is out of range") as e:
        E.compile(sort_program([x], 2, simple_comparator))
    assert e.value.code == "INVALID_ARGUMENT"
    with pytest.raises(E.EmulatorError, match="comparator.*must take 4 scalar arguments"):
        E.compile(sort_program([x, x], 0, lambda p, n: simple_comparator(p, n[:1])))


def top_k_keys(x):
    """XLA:CPU's top_k order: raw bits, negative floats flipped (-NaN < -inf < -0.0 < 0.0 < inf < NaN)."""
    if x.dtype == np.float32:
        bits = x.view(np.int32).astype(np.int64)
        return np.where(bits < 0, 0x7FFFFFFF - (bits & 0xFFFFFFFF), bits)
    if x.dtype == np.float16:
        bits = x.view(np.int16).astype(np.int64)
        return np.where(bits < 0, 0x7FFF - (bits & 0xFFFF), bits)
    return x.astype(np.int64)


def run_top_k(x, k, num_tiles=0):
    p = E.Program()
    xv = p.main.param(dtype_name(x), x.shape)
    shape = x.shape[:-1] + (k,)
    p.main.ret(*p.main.op_multi("top_k", [xv], [(dtype_name(x), shape), ("i32", shape)], {"k": k}, mlir="chlo.top_k"))
    return E.compile(p, num_tiles=num_tiles).run(x)


@pytest.mark.parametrize("dtype", ["f32", "f16", "i32", "u32"])
@pytest.mark.parametrize("k", [0, 1, 4, 12])
def test_top_k_order_ties_and_special_values(rng, dtype, k):
    x = rng.integers(0, 4, size=(5, 3, 12)).astype(E.NUMPY_DTYPES[dtype])
    if dtype in ("f32", "f16"):
        x[0, 0] = np.array([np.nan, -np.nan, -0.0, 0.0, np.inf, -np.inf, 0.0, -0.0, 1, np.nan, -1, 2], x.dtype)
    values, indices = run_top_k(x, k, num_tiles=7)
    keys = top_k_keys(x)
    position = np.broadcast_to(np.arange(12), x.shape)
    order = np.lexsort((position, -keys), axis=-1)[..., :k]
    assert_same(indices, order.astype(np.int32))
    np.testing.assert_array_equal(values.view(np.uint8), np.take_along_axis(x, order, -1).view(np.uint8))


def test_top_k_rejects_k_above_the_dimension():
    with pytest.raises(E.EmulatorError, match="k must be in") as e:
        run_top_k(np.ones((2, 3), np.float32), 4)
    assert e.value.code == "INVALID_ARGUMENT"


def unary_key_comparator(op, direction="LT", swap=False):
    """compare(op(lhs), op(rhs)) on operand 0 (or compare(op(rhs), op(lhs)) with swap): a key comparison."""
    def build(p, names):
        body = p.main.region()
        params = [body.param(n) for n in names for _ in range(2)]
        ka, kb = (body.op(op, [params[i]], names[0]) for i in (0, 1))
        a, b = (kb, ka) if swap else (ka, kb)
        body.ret(compare(body, a, b, direction, COMPARE_TYPE[names[0]]))
        return body
    return build


@pytest.mark.parametrize("direction,swap,sign",
                         [("LT", False, -1), ("GT", False, 1), ("LT", True, 1), ("GT", True, -1)])
def test_key_comparator_direction_and_side(rng, direction, swap, sign):
    # compare(-x, -y) LT sorts by -x, GT by x; compare(-y, -x) LT sorts by x, GT by -x. Ties keep their order.
    keys = rng.integers(-4, 4, size=(3, 300)).astype(np.int32)
    index = np.arange(keys.size, dtype=np.int32).reshape(keys.shape)
    got, _ = run_sort([keys, index], 1, unary_key_comparator("negate", direction, swap), num_tiles=7)
    for g, w in zip(got, expected([keys, index], 1, sign * keys.astype(np.int64))):
        assert_same(g, w)


def test_float_key_comparator_keeps_signed_zero_ties(rng):
    # A plain FLOAT lt on abs(x): -0.0 == 0.0 and x == -x are ties, kept in input order.
    x = np.concatenate([rng.integers(-5, 5, size=200).astype(np.float32), np.array([0.0, -0.0, 0.0, -0.0], np.float32)])
    rng.shuffle(x)
    index = np.arange(x.size, dtype=np.int32)
    got, _ = run_sort([x, index], 0, unary_key_comparator("abs"))
    want = expected([x, index], 0, np.abs(x))
    assert_same(got[1], want[1])
    np.testing.assert_array_equal(got[0].view(np.uint32), want[0].view(np.uint32))


def test_sides_that_differ_are_not_a_key_order(rng):
    # lhs < rhs + 1 is lhs <= rhs for these ints: the sides differ by a constant, so it is not a sort by key and
    # runs as written. std::stable_sort with a <= comparator does not keep ties in input order; a sort by key would.
    def build(p, names):
        body = p.main.region()
        a, b, _, _ = (body.param(n) for n in names for _ in range(2))
        one = body.op("constant", [], "i32", (), const_attrs(1, "i32"))
        body.ret(compare(body, a, body.op("add", [b, one], "i32"), "LT", "SIGNED"))
        return body

    keys = rng.integers(0, 3, size=200).astype(np.int32)
    index = np.arange(keys.size, dtype=np.int32)
    (got_keys, got_index), _ = run_sort([keys, index], 0, build)
    assert_same(got_keys, np.sort(keys))
    assert sorted(got_index.tolist()) == index.tolist()
    assert not np.array_equal(got_index, np.argsort(keys, kind="stable"))
