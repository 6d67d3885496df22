"""Elementwise ops against numpy, per dtype, including the edge cases whose XLA:CPU semantics are pinned down."""

from __future__ import annotations

import numpy as np
import pytest
from emulator_helpers import TOLERANCE, assert_same, dtype_name, run_op

from jax_ipu import emulator as E

F32_SPECIALS = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 1e-40, 3.4e38, -3.4e38, np.inf, -np.inf, np.nan], np.float32)

FLOAT_UNARY = {
    "abs": np.abs, "negate": np.negative, "exponential": np.exp, "exponential_minus_one": np.expm1,
    "log": np.log, "log_plus_one": np.log1p, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
    "cbrt": np.cbrt, "tanh": np.tanh, "logistic": lambda x: 1 / (1 + np.exp(-x)), "sine": np.sin,
    "cosine": np.cos, "tan": np.tan, "floor": np.floor, "ceil": np.ceil, "round_nearest_even": np.rint,
    "sinh": np.sinh, "cosh": np.cosh, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
}


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("op", sorted(FLOAT_UNARY))
def test_float_unary(op, dtype, rng):
    np_dtype = np.float32 if dtype == "f32" else np.float16
    x = rng.uniform(-3, 3, size=257).astype(np_dtype)
    if op in ("log", "sqrt", "rsqrt", "acosh"):
        x = np.abs(x) + np_dtype(1)
    if op in ("asin", "acos", "atanh"):
        x = (x / np_dtype(3.5)).astype(np_dtype)
    with np.errstate(all="ignore"):
        expected = FLOAT_UNARY[op](x.astype(np.float32)).astype(np_dtype)
    np.testing.assert_allclose(run_op(op, [x]), expected, **TOLERANCE[dtype])


def test_float_unary_specials():
    x = F32_SPECIALS
    with np.errstate(all="ignore"):
        assert_same(run_op("abs", [x]), np.abs(x))
        assert_same(run_op("floor", [x]), np.floor(x))
        assert_same(run_op("round_nearest_even", [np.array([0.5, 1.5, 2.5, -0.5, -2.5], np.float32)]),
                    np.array([0, 2, 2, -0.0, -2], np.float32))
        assert_same(run_op("round_nearest_afz", [np.array([0.5, 1.5, 2.5, -0.5, -2.5], np.float32)]),
                    np.array([1, 2, 3, -1, -3], np.float32))
        assert_same(run_op("is_finite", [x], "bool"), np.isfinite(x))
        np.testing.assert_allclose(run_op("exponential", [x]), np.exp(x), rtol=3e-7)


def test_sign_float():
    out = run_op("sign", [np.array([-0.0, 0.0, -3, 2, np.nan, -np.inf], np.float32)])
    assert np.signbit(out[0]) and out[0] == 0 and not np.signbit(out[1])
    assert_same(out[2:], np.array([-1, 1, np.nan, -1], np.float32))


def test_erf_family():
    x = np.linspace(-0.99, 0.99, 101).astype(np.float32)
    erf = run_op("erf", [x])
    back = run_op("erf_inv", [erf])
    np.testing.assert_allclose(back, x, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(run_op("erfc", [x]), 1 - erf, rtol=1e-5, atol=1e-6)
    edge = run_op("erf_inv", [np.array([1, -1, 0, 2], np.float32)])
    assert edge[0] == np.inf and edge[1] == -np.inf and edge[2] == 0 and np.isnan(edge[3])


def test_f16_rounding_overflow_and_subnormals():
    a = np.array([65504, 60000, 1e-7, 6e-8, 0.1, 2049], np.float16)
    b = np.array([65504, 10000, 1e-7, 6e-8, 0.2, 1], np.float16)
    with np.errstate(over="ignore"):  # the overflow to infinity is the point
        expected = (a.astype(np.float32) + b.astype(np.float32)).astype(np.float16)
        expected_product = (a.astype(np.float32) * b.astype(np.float32)).astype(np.float16)
    out = run_op("add", [a, b])
    assert_same(out, expected)
    assert out[0] == np.inf and out[1] == np.inf  # overflow to infinity
    assert_same(run_op("multiply", [a, b]), expected_product)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.uint32])
@pytest.mark.parametrize("op,fn", [("add", np.add), ("subtract", np.subtract), ("multiply", np.multiply),
                                   ("maximum", np.maximum), ("minimum", np.minimum)])
def test_binary(op, fn, dtype, rng):
    a = (rng.normal(size=1001) * 100).astype(dtype)
    b = (rng.normal(size=1001) * 100).astype(dtype)
    with np.errstate(all="ignore"):
        expected = fn(a.astype(np.float32), b.astype(np.float32)).astype(dtype) if dtype == np.float16 else fn(a, b)
    assert_same(run_op(op, [a, b], num_tiles=13), expected)


def test_float_divide_remainder_power_atan2(rng):
    a = rng.normal(size=500).astype(np.float32) * 10
    b = rng.normal(size=500).astype(np.float32) * 3
    assert_same(run_op("divide", [a, b]), a / b)
    assert_same(run_op("remainder", [a, b]), np.fmod(a, b))
    np.testing.assert_allclose(run_op("power", [np.abs(a), b]), np.power(np.abs(a), b), rtol=1e-5)
    np.testing.assert_allclose(run_op("atan2", [a, b]), np.arctan2(a, b), rtol=1e-6, atol=1e-7)


def test_max_min_propagate_nan():
    a = np.array([np.nan, 1, np.nan, -0.0], np.float32)
    b = np.array([1, np.nan, np.nan, 0.0], np.float32)
    mx = run_op("maximum", [a, b])
    mn = run_op("minimum", [a, b])
    assert np.isnan(mx[:3]).all() and np.isnan(mn[:3]).all()


# maximum, minimum and clamp as each jaxlib's XLA:CPU computes them (the program's "numerics", ipu/numerics.h), on
# every pair of signed zeros, f32 denormals, NaN, ones and infinities: jaxlib 0.4.13 selects (lhs wins ties, NaN lhs
# kept; the comparison reads denormals as zeros, the selected operand keeps its bits), and clamp returns the bound it
# ties with (its maxps/minps; NaN anywhere: the select rule); jaxlib 0.12 takes IEEE maximum/minimum (-0 < +0, NaN
# wins) of f32 operands read with denormals as zeros (f16 has none to read). Against a splat constant (the op's
# "constant_operand"), as LLVM lowers it knowing the constant: see _reference_against_constant.
SIGNED_SPECIALS = np.array([0.0, -0.0, 1e-40, -1e-40, np.nan, 1.0, -1.0, np.inf, -np.inf], np.float32)


def _daz(x):
    return np.where(np.abs(x) < np.finfo(np.float32).tiny, np.copysign(np.float32(0), x), x).astype(x.dtype)


def _reference_max_min(numerics, a, b):
    if numerics == "jaxlib-0.4":
        da, db = (_daz(a), _daz(b)) if a.dtype == np.float32 else (a, b)
        mx, mn = np.where((da >= db) | np.isnan(a), a, b), np.where((da <= db) | np.isnan(a), a, b)
        return mx.astype(a.dtype), mn.astype(a.dtype)
    if a.dtype == np.float32:
        a, b = _daz(a), _daz(b)
    nan = np.isnan(a) | np.isnan(b)
    tie = a == b
    mx = np.where(nan, np.nan, np.where(tie, np.where(np.signbit(a), b, a), np.where(a > b, a, b)))
    mn = np.where(nan, np.nan, np.where(tie, np.where(np.signbit(a), a, b), np.where(a < b, a, b)))
    return mx.astype(a.dtype), mn.astype(a.dtype)


def _reference_against_constant(numerics, x, c, side):
    """max and min of f32 x and a splat constant c on `side` ("rhs": where XLA's simplifier puts it; "lhs": one it
    saw through a call's parameter), as measured on XLA:CPU. jaxlib 0.4.13, rhs: the select, except that against +0
    (relu's maxps/minps) a denormal x comes back as a zero of its sign; lhs: maxps/minps of both operands read and
    returned with denormals as zeros, a tie giving x (c a zero: c), a NaN x returned, a NaN c the result.
    jaxlib 0.12: against a c that is neither a zero nor NaN, maxss/minss (as lhs in 0.4.13, a tie giving x); against
    -inf (max) or +inf (min) x itself; otherwise IEEE's."""
    is_zero = c.view(np.uint32) & 0x7FFFFFFF == 0
    dx, dc = _daz(x), _daz(c)

    def maxps(mx):
        beats = (dc > dx) if mx else (dc < dx)
        tie_to_c = is_zero & (dc == dx)
        return np.where(np.isnan(x), x, np.where(beats | tie_to_c, dc, dx)).astype(np.float32)

    def lhs(mx):  # the select XLA emits, folded for a NaN constant: c itself
        return np.where(np.isnan(c), c, maxps(mx)).astype(np.float32)

    if numerics == "jaxlib-0.4" and side == "rhs":
        mx, mn = _reference_max_min(numerics, x, c)
        flush = (c.view(np.uint32) == 0) & (dx != x) & ~np.isnan(x)
        return np.where(flush, dx, mx), np.where(flush, dx, mn)
    if numerics == "jaxlib-0.4":
        return lhs(True), lhs(False)
    ieee = _reference_max_min(numerics, x, c)
    special = is_zero | np.isnan(c)
    mx = np.where(c == -np.inf, x, np.where(special, ieee[0], maxps(True)))
    mn = np.where(c == np.inf, x, np.where(special, ieee[1], maxps(False)))
    return mx, mn


def _same_bits(got, want):
    both_nan = np.isnan(got) & np.isnan(want)
    assert ((got.view(f"u{got.itemsize}") == want.view(f"u{want.itemsize}")) | both_nan).all(), (got, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("numerics", ["jaxlib-0.4", "jaxlib-0.12"])
def test_maximum_minimum_clamp_follow_the_programs_numerics(numerics, dtype):
    with np.errstate(under="ignore"):
        v = SIGNED_SPECIALS.astype(dtype)
    a, b = (g.ravel() for g in np.meshgrid(v, v, indexing="ij"))
    want_max, want_min = _reference_max_min(numerics, a, b)
    _same_bits(run_op("maximum", [a, b], numerics=numerics), want_max)
    _same_bits(run_op("minimum", [a, b], numerics=numerics), want_min)
    lo, x, hi = (g.ravel() for g in np.meshgrid(v, v, v, indexing="ij"))
    _same_bits(run_op("clamp", [lo, x, hi], numerics=numerics), _reference_clamp(numerics, lo, x, hi))


@pytest.mark.parametrize("side", ["lhs", "rhs"])
@pytest.mark.parametrize("numerics", ["jaxlib-0.4", "jaxlib-0.12"])
def test_maximum_minimum_against_a_constant_follow_llvms_lowering(numerics, side):
    for c in SIGNED_SPECIALS:
        x = SIGNED_SPECIALS
        constant = np.full_like(x, c)
        operands = [constant, x] if side == "lhs" else [x, constant]
        want_max, want_min = _reference_against_constant(numerics, x, constant, side)
        attrs = {"constant_operand": side}
        _same_bits(run_op("maximum", operands, numerics=numerics, attrs=attrs), want_max)
        _same_bits(run_op("minimum", operands, numerics=numerics, attrs=attrs), want_min)


def test_unknown_constant_operand_is_refused():
    with pytest.raises(E.EmulatorError, match=r"unknown constant_operand 'middle'"):
        run_op("maximum", [SIGNED_SPECIALS, SIGNED_SPECIALS], attrs={"constant_operand": "middle"})


def _reference_clamp(numerics, lo, x, hi):
    select = _reference_max_min(numerics, _reference_max_min(numerics, x, lo)[0], hi)[1]
    if numerics != "jaxlib-0.4":
        return _reference_max_min(numerics, _reference_max_min(numerics, x, lo)[0], hi)[1]
    daz = _daz if x.dtype == np.float32 else (lambda v: v)
    z = daz(x)
    low = np.where(daz(lo) < z, z, lo)  # a tie gives the bound
    ties = np.where(daz(low) < daz(hi), low, hi)
    nan = np.isnan(lo) | np.isnan(x) | np.isnan(hi)
    return np.where(nan, select, ties).astype(x.dtype)


def test_unknown_numerics_is_refused():
    with pytest.raises(E.EmulatorError, match=r'"numerics" must be "jaxlib-0.4" or "jaxlib-0.12"'):
        run_op("maximum", [SIGNED_SPECIALS, SIGNED_SPECIALS], numerics="jaxlib-0.5")


def test_int_division_semantics():
    imin = np.iinfo(np.int32).min
    a = np.array([7, -7, 7, -7, 5, imin, imin, 0], np.int32)
    b = np.array([2, 2, -2, -2, 0, -1, 1, 0], np.int32)
    assert_same(run_op("divide", [a, b]), np.array([3, -3, -3, 3, -1, imin, imin, -1], np.int32))
    assert_same(run_op("remainder", [a, b]), np.array([1, -1, 1, -1, 5, 0, 0, 0], np.int32))
    ua = np.array([7, 5, 0xFFFFFFFF], np.uint32)
    ub = np.array([2, 0, 0], np.uint32)
    assert_same(run_op("divide", [ua, ub]), np.array([3, 0xFFFFFFFF, 0xFFFFFFFF], np.uint32))
    assert_same(run_op("remainder", [ua, ub]), np.array([1, 5, 0xFFFFFFFF], np.uint32))


def test_int_wraparound_and_abs_negate():
    imax, imin = np.iinfo(np.int32).max, np.iinfo(np.int32).min
    a = np.array([imax, imin, -5], np.int32)
    assert_same(run_op("add", [a, np.array([1, -1, 5], np.int32)]), np.array([imin, imax, 0], np.int32))
    assert_same(run_op("abs", [a]), np.array([imax, imin, 5], np.int32))
    assert_same(run_op("negate", [a]), np.array([-imax, imin, 5], np.int32))
    assert_same(run_op("negate", [np.array([1, 0], np.uint32)]), np.array([0xFFFFFFFF, 0], np.uint32))
    assert_same(run_op("sign", [np.array([-9, 0, 4], np.int32)]), np.array([-1, 0, 1], np.int32))


def test_integer_power():
    base = np.array([2, 3, -2, 1, -1, -1, 5, 0, 2], np.int32)
    exp = np.array([10, 3, 3, -5, -3, -4, -1, 0, 31], np.int32)
    assert_same(run_op("power", [base, exp]), np.array([1024, 27, -8, 1, -1, 1, 0, 1, imin()], np.int32))
    assert_same(run_op("power", [np.array([3, 2], np.uint32), np.array([4, 32], np.uint32)]),
                np.array([81, 0], np.uint32))


def imin() -> int:
    return int(np.iinfo(np.int32).min)


def test_shifts():
    a = np.array([1, -8, -8, 0x40000000, 5], np.int32)
    s = np.array([3, 1, 40, 1, -1], np.int32)
    assert_same(run_op("shift_left", [a, s]), np.array([8, -16, 0, imin(), 0], np.int32))
    assert_same(run_op("shift_right_arithmetic", [a, s]), np.array([0, -4, -1, 0x20000000, 0], np.int32))
    assert_same(run_op("shift_right_logical", [a, s]), np.array([0, 0x7FFFFFFC, 0, 0x20000000, 0], np.int32))
    u = np.array([0x80000000, 8], np.uint32)
    assert_same(run_op("shift_right_arithmetic", [u, np.array([4, 32], np.uint32)]),
                np.array([0xF8000000, 0], np.uint32))


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.bool_])
def test_bitwise(dtype, rng):
    a = rng.integers(0, 2 ** 31, size=100).astype(dtype)
    b = rng.integers(0, 2 ** 31, size=100).astype(dtype)
    assert_same(run_op("and", [a, b]), a & b)
    assert_same(run_op("or", [a, b]), a | b)
    assert_same(run_op("xor", [a, b]), a ^ b)
    assert_same(run_op("not", [a]), ~a)


def test_popcnt_clz():
    a = np.array([0, 1, -1, 0x00F00000, 255], np.int32)
    assert_same(run_op("popcnt", [a]), np.array([0, 1, 32, 4, 8], np.int32))
    assert_same(run_op("count_leading_zeros", [a]), np.array([32, 31, 0, 8, 24], np.int32))


DIRECTIONS = {"EQ": np.equal, "NE": np.not_equal, "GE": np.greater_equal, "GT": np.greater,
              "LE": np.less_equal, "LT": np.less}


@pytest.mark.parametrize("direction", sorted(DIRECTIONS))
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.uint32, np.bool_])
def test_compare(direction, dtype, rng):
    a = rng.integers(-3, 3, size=64).astype(dtype)
    b = rng.integers(-3, 3, size=64).astype(dtype)
    if dtype in (np.float32, np.float16):
        a[:4] = [np.nan, 1, np.nan, -0.0]
        b[:4] = [1, np.nan, np.nan, 0.0]
    attrs = {"comparison_direction": direction,
             "compare_type": "FLOAT" if dtype in (np.float32, np.float16) else "NOTYPE"}
    assert_same(run_op("compare", [a, b], "bool", attrs=attrs), DIRECTIONS[direction](a, b))


def test_compare_totalorder_and_unsigned():
    a = np.array([-0.0, np.nan, -np.inf, 1, np.nan], np.float32)
    b = np.array([0.0, np.inf, -1, 1, np.nan], np.float32)
    lt = run_op("compare", [a, b], "bool", attrs={"comparison_direction": "LT", "compare_type": "TOTALORDER"})
    assert_same(lt, np.array([True, False, True, False, False]))
    eq = run_op("compare", [a, b], "bool", attrs={"comparison_direction": "EQ", "compare_type": "TOTALORDER"})
    assert_same(eq, np.array([False, False, False, True, True]))
    i = np.array([-1, 1], np.int32)
    j = np.array([1, 2], np.int32)
    assert_same(run_op("compare", [i, j], "bool", attrs={"comparison_direction": "LT", "compare_type": "UNSIGNED"}),
                np.array([False, True]))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.uint32, np.bool_])
def test_select(dtype, rng):
    p = rng.integers(0, 2, size=(3, 5)).astype(bool)
    a = rng.integers(0, 9, size=(3, 5)).astype(dtype)
    b = rng.integers(0, 9, size=(3, 5)).astype(dtype)
    assert_same(run_op("select", [p, a, b], out_dtype=_name(dtype), out_shape=(3, 5)), np.where(p, a, b))
    assert_same(run_op("select", [np.array(False), a, b], out_dtype=_name(dtype), out_shape=(3, 5)), b)


def _name(dtype) -> str:
    return dtype_name(np.zeros(0, dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.uint32])
def test_clamp(dtype, rng):
    x = rng.integers(-10, 10, size=50).astype(dtype)
    lo = np.array(-3, dtype) if dtype != np.uint32 else np.array(2, dtype)
    hi = rng.integers(3, 8, size=50).astype(dtype)
    assert_same(run_op("clamp", [lo, x, hi], out_dtype=_name(dtype), out_shape=(50,)),
                np.minimum(np.maximum(x, lo), hi))


CONVERT_DTYPES = [np.float32, np.float16, np.int32, np.uint32, np.bool_]


@pytest.mark.parametrize("src", CONVERT_DTYPES)
@pytest.mark.parametrize("dst", CONVERT_DTYPES)
def test_convert(src, dst):
    x = np.array([0, 1, 2, 3, 100, 2049, 7], src)
    expected = x.astype(dst) if src != np.float16 or dst != np.bool_ else x != 0
    assert_same(run_op("convert", [x], _name(dst)), expected.astype(dst))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_convert_float_to_int_saturates():
    x = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, -1.7, 2.9, 4.3e9, -0.5], np.float32)
    assert_same(run_op("convert", [x], "i32"), np.array([0, 2 ** 31 - 1, -2 ** 31, 2 ** 31 - 1, -2 ** 31, -1, 2,
                                                           2 ** 31 - 1, 0], np.int32))
    assert_same(run_op("convert", [x], "u32"), np.array([0, 2 ** 32 - 1, 0, 3000000000, 0, 0, 2, 2 ** 32 - 1, 0],
                                                          np.uint32))
    assert_same(run_op("convert", [x], "bool"), x != 0)
    h = np.array([1e5, -1e5, 1 / 3, 1e-8, 70000], np.float32)
    assert_same(run_op("convert", [h], "f16"), h.astype(np.float16))
    big = np.array([2 ** 24 + 1, -(2 ** 31), 70000], np.int32)
    assert_same(run_op("convert", [big], "f32"), big.astype(np.float32))
    assert_same(run_op("convert", [big], "f16"), big.astype(np.float16))


@pytest.mark.parametrize("shape", [(), (0,), (3, 0, 2)])
def test_scalars_and_empty(shape):
    a = np.full(shape, 2.5, np.float32)
    assert_same(run_op("add", [a, a]), a + a)
    np.testing.assert_allclose(run_op("exponential", [a]), np.exp(a), rtol=3e-7)
    assert_same(run_op("compare", [a, a], "bool", attrs={"comparison_direction": "EQ"}), a == a)
    assert_same(run_op("convert", [a], "i32"), a.astype(np.int32))


@pytest.mark.parametrize("tiles", [1, 7, 13, 1472])
def test_uneven_tile_spread(tiles, rng):
    a = rng.normal(size=1000).astype(np.float32)
    b = rng.normal(size=1000).astype(np.float32)
    assert_same(run_op("multiply", [a, b], num_tiles=tiles), a * b)


def test_large_parallel(rng):
    a = rng.normal(size=(1000, 1000)).astype(np.float32)
    assert_same(run_op("add", [a, a]), a + a)
    np.testing.assert_allclose(run_op("tanh", [a]), np.tanh(a), rtol=3e-6, atol=1e-6)
