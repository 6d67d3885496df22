"""Elementwise ops (unary, binary, compare, select, clamp, convert) on every supported dtype, ipu against cpu."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _conformance import (
    ALL_DTYPES,
    BACKEND,
    CURRENT_SERIES,
    EXACT,
    FLOAT_DTYPES,
    INT_DTYPES,
    REFERENCE,
    SHAPES,
    TRANSCENDENTAL,
    check,
    host_facts,
    random,
    special,
)
from jax import lax


def unary_check(op, dtype, low=-4.0, high=4.0, **tolerance):
    """One compile per op and dtype: the special values, a transposed matrix, and an array of every shape in SHAPES."""
    xs = [special(dtype)] + [random(dtype, shape, seed=i, low=low, high=high) for i, shape in enumerate(SHAPES)]
    check(lambda *xs: [op(xs[6].T)] + [op(x) for x in xs], *xs, **tolerance)


# --- unary ------------------------------------------------------------------------------------------------------

EXACT_FLOAT_UNARY = {
    "abs": jnp.abs, "negate": jnp.negative, "sign": jnp.sign, "floor": jnp.floor, "ceil": jnp.ceil,
    "round_nearest_even": jnp.round, "round_nearest_afz": lambda x: lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO),
    "is_finite": jnp.isfinite, "sqrt": jnp.sqrt,
}
# (function, input range): arguments where the functions are well defined and not enormous; the special values
# still bring NaN, infinities, zeros and out-of-domain arguments.
TRANSCENDENTAL_UNARY = {
    "exponential": (jnp.exp, (-20, 20)), "exponential_minus_one": (jnp.expm1, (-5, 5)),
    "log": (jnp.log, (0.01, 100)), "log_plus_one": (jnp.log1p, (-0.9, 10)), "rsqrt": (lax.rsqrt, (0.01, 100)),
    "cbrt": (jnp.cbrt, (-100, 100)), "tanh": (jnp.tanh, (-10, 10)), "logistic": (lax.logistic, (-10, 10)),
    "sine": (jnp.sin, (-10, 10)), "cosine": (jnp.cos, (-10, 10)), "tan": (jnp.tan, (-1.5, 1.5)),
    "erf": (lax.erf, (-4, 4)), "erfc": (lax.erfc, (-4, 4)), "sinh": (jnp.sinh, (-5, 5)), "cosh": (jnp.cosh, (-5, 5)),
    "asin": (jnp.arcsin, (-1, 1)), "acos": (jnp.arccos, (-1, 1)), "atan": (jnp.arctan, (-10, 10)),
    "asinh": (jnp.arcsinh, (-10, 10)), "acosh": (jnp.arccosh, (1, 10)), "atanh": (jnp.arctanh, (-0.99, 0.99)),
    "erf_inv": (lax.erf_inv, (-0.99, 0.99)),
}
INT_UNARY = {
    "abs": jnp.abs, "negate": jnp.negative, "sign": jnp.sign, "not": jnp.invert,
    "popcnt": lax.population_count, "count_leading_zeros": lax.clz,
}


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", sorted(EXACT_FLOAT_UNARY))
def test_exact_float_unary(name, dtype):
    unary_check(EXACT_FLOAT_UNARY[name], dtype, low=-1000.0, high=1000.0, **EXACT)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", sorted(TRANSCENDENTAL_UNARY))
def test_transcendental_unary(name, dtype):
    op, (low, high) = TRANSCENDENTAL_UNARY[name]
    unary_check(op, dtype, low=low, high=high, **TRANSCENDENTAL[dtype])


# --- transcendentals in ulps, where the results are small -------------------------------------------------------
# rtol/atol above hide errors in small results (atol 1e-6 passes expm1(1e-7) = 0). Here every result is compared in
# units in the last place of cpu's result, on inputs whose results are small (down to 1e-7) as well as on the
# function's ordinary range: a naive expm1(x) = exp(x) - 1 or log1p(x) = log(1 + x) is thousands of ulps off.
# (inputs, max ulps in f32, max ulps in f16), measured: exp, log, log1p, tanh and logistic are XLA's own
# approximations (ipu/xla_math.h; XLA's build contracts multiply-adds into FMAs, ours does not: tanh is the one that
# shows it), the rest libm's against XLA's.
def _tiny(seed, low=-7.0, high=-1.0, n=20_000):
    rng = np.random.default_rng(seed)
    return (rng.choice([-1.0, 1.0], n) * 10.0 ** rng.uniform(low, high, n)).astype(np.float32)


def _between(low, high, seed=0, n=20_000):
    return np.random.default_rng(seed).uniform(low, high, n).astype(np.float32)


ULP_UNARY = {
    "exponential": (jnp.exp, lambda: np.concatenate([_tiny(1), _between(-80, 80)]), 1, 1),
    "exponential_minus_one": (jnp.expm1, lambda: np.concatenate([_tiny(2), _between(-5, 5)]), 6, 2),
    "log": (jnp.log, lambda: np.concatenate([1 + _tiny(3, -7, -1), _between(1e-30, 1e30)]), 1, 1),
    "log_plus_one": (jnp.log1p, lambda: np.concatenate([_tiny(4), _between(-0.99, 10)]), 1, 2),
    "tanh": (jnp.tanh, lambda: np.concatenate([_tiny(5), _between(-10, 10)]), 8, 1),
    "logistic": (lax.logistic, lambda: np.concatenate([_between(-80, -10), _between(-10, 10)]), 2, 1),
    "sinh": (jnp.sinh, lambda: np.concatenate([_tiny(6), _between(-5, 5)]), 6, 1),
    "asinh": (jnp.arcsinh, lambda: np.concatenate([_tiny(7), _between(-10, 10)]), 4, 2),
    "atanh": (jnp.arctanh, lambda: np.concatenate([_tiny(8), _between(-0.99, 0.99)]), 3, 2),
    "atan": (jnp.arctan, lambda: np.concatenate([_tiny(9), _between(-10, 10)]), 1, 1),
    "asin": (jnp.arcsin, lambda: np.concatenate([_tiny(10), _between(-1, 1)]), 3, 2),
    "erf": (lax.erf, lambda: np.concatenate([_tiny(11), _between(-4, 4)]), 8, 1),
    "sine": (jnp.sin, lambda: np.concatenate([_tiny(12), _between(-10, 10)]), 1, 1),
    "tan": (jnp.tan, lambda: np.concatenate([_tiny(13), _between(-1.5, 1.5)]), 3, 2),
}


def ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """|got - want| in units in the last place: the distance between their positions in the ordered float bits. NaN
    against NaN is 0, NaN against a number is huge."""
    bits = np.int32 if got.dtype == np.float32 else np.int16

    def key(a):
        i = a.view(bits).astype(np.int64)
        return np.where(i < 0, np.iinfo(bits).min - i, i)

    d = np.abs(key(got) - key(want))
    both_nan = np.isnan(got) & np.isnan(want)
    return np.where(both_nan, 0, np.where(np.isnan(got) | np.isnan(want), 1 << 40, d))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", sorted(ULP_UNARY))
def test_transcendental_unary_in_ulps(name, dtype):
    op, inputs, max_f32, max_f16 = ULP_UNARY[name]
    with np.errstate(over="ignore"):  # float32 extremes become f16 infinities on purpose
        x = np.concatenate([special("float32"), inputs()]).astype(dtype)
    got = np.asarray(jax.jit(op, backend="ipu")(x))
    want = np.asarray(jax.jit(op, backend="cpu")(x))
    d = ulps(got, want)
    worst = int(np.argmax(d))
    limit = max_f32 if dtype == "float32" else max_f16
    assert d[worst] <= limit, f"{name}({x[worst]!r}) = {got[worst]!r} on ipu, {want[worst]!r} on cpu: {d[worst]} ulps"


def test_f16_cbrt_of_every_value_is_cpus():
    """Every f16 value's cube root, bit for bit: jaxlib 0.4.13's XLA:CPU computes it as copysign(pow(|x|, 1/3), x)
    with f16's 1/3 (0.333251953125) as the exponent, up to 3 ulps from the rounded cube root; jaxlib 0.12 rounds the
    f32 cube root (fuzz seed 20270101 #406: lgamma(cbrt(x)) of an f16 denormal)."""
    x = np.arange(0, 0x7C01, dtype=np.uint16).view(np.float16)
    check(jnp.cbrt, np.concatenate([x, -x, np.array([np.nan], np.float16)]), **EXACT)


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("name", sorted(INT_UNARY))
def test_int_unary(name, dtype):
    unary_check(INT_UNARY[name], dtype)


def test_bool_not():
    unary_check(jnp.logical_not, "bool")
    unary_check(jnp.invert, "bool")


def broadcasting(op):
    """lax's binary ops want equal shapes; broadcast the jnp way first (which lowers to broadcast_in_dim)."""
    return lambda x, y: op(*jnp.broadcast_arrays(x, y))


# --- binary: every special value against every other (through broadcasting), plus shapes ---------------------------

FLOAT_BINARY = {  # name: (function, exactly rounded)
    "add": (jnp.add, True), "subtract": (jnp.subtract, True), "multiply": (jnp.multiply, True),
    "divide": (broadcasting(lax.div), True), "remainder": (broadcasting(lax.rem), True),
    "maximum": (jnp.maximum, True), "minimum": (jnp.minimum, True),
    "power": (broadcasting(lax.pow), False), "atan2": (jnp.arctan2, False),
}
INT_BINARY = {
    "add": jnp.add, "subtract": jnp.subtract, "multiply": jnp.multiply, "divide": broadcasting(lax.div),
    "remainder": broadcasting(lax.rem), "maximum": jnp.maximum, "minimum": jnp.minimum, "and": jnp.bitwise_and,
    "or": jnp.bitwise_or, "xor": jnp.bitwise_xor, "shift_left": broadcasting(lax.shift_left),
    "shift_right_arithmetic": broadcasting(lax.shift_right_arithmetic),
    "shift_right_logical": broadcasting(lax.shift_right_logical),
}
BOOL_BINARY = {"and": jnp.logical_and, "or": jnp.logical_or, "xor": jnp.logical_xor,
               "maximum": jnp.maximum, "minimum": jnp.minimum}


def binary_check(op, dtype, **tolerance):
    s = special(dtype)
    a, b = random(dtype, (37, 53), seed=1), random(dtype, (37, 53), seed=2)
    big_a, big_b = random(dtype, (100_003,), seed=3), random(dtype, (100_003,), seed=4)
    scalar = special(dtype)[-1]
    empty = random(dtype, (3, 0), seed=5)

    def f(s, a, b, big_a, big_b, scalar, empty):
        return [
            op(s[:, None], s[None, :]),  # all pairs of special values (broadcast_in_dim)
            op(a, b), op(a.T, b.T), op(a, b[0]), op(scalar, a), op(a[:, :1], scalar),  # shapes and broadcasting
            op(big_a, big_b), op(empty, empty), op(scalar, scalar),
        ]

    check(f, s, a, b, big_a, big_b, scalar, empty, **tolerance)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", sorted(FLOAT_BINARY))
def test_float_binary(name, dtype):
    op, exact = FLOAT_BINARY[name]
    binary_check(op, dtype, **(EXACT if exact else TRANSCENDENTAL[dtype]))


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("name", sorted(INT_BINARY))
def test_int_binary(name, dtype):
    binary_check(INT_BINARY[name], dtype)


@pytest.mark.parametrize("name", sorted(BOOL_BINARY))
def test_bool_binary(name):
    binary_check(BOOL_BINARY[name], "bool")


def test_jnp_integer_division_and_shift_operators():
    # What users write: floor division and modulo (sign fix-ups around divide/remainder), >> and << operators.
    s = special("int32")
    check(lambda x, y: (x // y, x % y, x >> (y & 31), x << (y & 31), jnp.floor_divide(x, 3)), s[:, None], s[None, :])


# --- compare, select, clamp ---------------------------------------------------------------------------------------

DIRECTIONS = {"EQ": jnp.equal, "NE": jnp.not_equal, "GE": jnp.greater_equal, "GT": jnp.greater,
              "LE": jnp.less_equal, "LT": jnp.less}


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_compare_all_directions(dtype):
    def f(s, a, b, scalar):
        return [cmp(x, y) for cmp in DIRECTIONS.values()
                for x, y in ((s[:, None], s[None, :]), (a, b), (a.T, scalar), (scalar, scalar))]

    check(f, special(dtype), random(dtype, (7, 9), seed=1), random(dtype, (7, 9), seed=2), special(dtype)[-1])


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_select(dtype):
    def f(pred, a, b, scalar_pred, big_pred, big_a, big_b):
        return (jnp.where(pred, a, b), lax.select(scalar_pred, a, b), jnp.where(pred, a, b[0]),
                lax.select(big_pred, big_a, big_b), jnp.where(pred[:0], a[:0], b[:0]))

    check(f, random("bool", (37, 53), seed=1), random(dtype, (37, 53), seed=2), random(dtype, (37, 53), seed=3),
          np.bool_(True), random("bool", (100_003,), seed=4), random(dtype, (100_003,), seed=5),
          random(dtype, (100_003,), seed=6))


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "uint32"])
def test_clamp(dtype):
    def f(x, lo, hi, s):
        return (lax.clamp(lo[0, 0], x, hi[0, 0]), lax.clamp(lo, x, hi), jnp.clip(x, lo[0, 0], hi[0, 0]),
                lax.clamp(s[1], s, s[-2]))

    lo = np.minimum(*[random(dtype, (37, 53), seed=i) for i in (1, 2)])
    hi = np.maximum(*[random(dtype, (37, 53), seed=i) for i in (1, 2)])
    check(f, random(dtype, (37, 53), seed=3), lo, hi, special(dtype))


# --- convert: every pair of the five dtypes ---------------------------------------------------------------------

CONVERT_INPUTS = {
    # out-of-range floats saturate when converted to ints; NaN goes to 0; fractions truncate toward zero
    "float32": np.array([0.0, -0.0, 0.4, 0.5, 0.6, 1.5, -1.5, 2.5, -2.7, 255.9, 65504.0, 65520.0, 1e5, -1e5,
                         2.1e9, 3e9, 4.3e9, 5e9, -3e9, 3.4e38, -3.4e38, np.inf, -np.inf, np.nan, 1e-8, 16777217.0],
                        np.float32),
    "float16": np.array([0.0, -0.0, 0.4, 0.5, 1.5, -1.5, 2.5, -2.7, 255.9, 65504.0, -65504.0, 6e-8,
                         np.inf, -np.inf, np.nan], np.float16),
    "int32": np.array([0, 1, -1, 7, 65504, 65520, 70000, 16777217, 2**31 - 1, -2**31, -5], np.int32),
    "uint32": np.array([0, 1, 7, 65520, 16777217, 2**31 - 1, 2**31, 2**32 - 1], np.uint32),
    "bool": np.array([False, True]),
}


@pytest.mark.parametrize("source", ALL_DTYPES)
def test_convert_to_every_dtype(source):
    x = CONVERT_INPUTS[source]
    big = random(source, (100_003,), seed=1, low=-1e5, high=1e5)

    def f(x, big):
        return [lax.convert_element_type(v, target) for target in ALL_DTYPES for v in (x, big, x[:0])]

    check(f, x, big)


def test_astype_idioms():
    x = random("float32", (37, 53), seed=1, low=-10, high=10)
    check(lambda x: (x.astype(jnp.int32), x.astype(jnp.uint32), x.astype(jnp.float16), x.astype(bool),
                     (x > 0).astype(jnp.float32), jnp.int32(3) * x), x)


# --- a few compositions users write ------------------------------------------------------------------------------


def test_nn_activations():
    x = random("float32", (37, 53), seed=1, low=-10, high=10)
    check(lambda x: (jax.nn.relu(x), jax.nn.sigmoid(x), jax.nn.softmax(x), jax.nn.softmax(x, axis=0),
                     jax.nn.gelu(x), jax.nn.log_softmax(x), jax.nn.silu(x)), x, **TRANSCENDENTAL["float32"])


def test_polynomial_and_powers():
    x = random("float32", (1001,), seed=1, low=-3, high=3)
    check(lambda x: (x ** 2, x ** 3, jnp.square(x), 1 / x, jnp.reciprocal(x), 3 * x * x - 2 * x + 1), x,
          **TRANSCENDENTAL["float32"])


# --- divides as XLA's algebraic simplifier rewrites them (the front end's _divide, per jaxlib) ----------------------

K = random("float32", (24, 40), seed=21, low=1.0, high=9.0)  # a constant divisor (closed over, as the operands' type)
def _rows(row, like):
    """``row`` broadcast to ``like``'s shape (a broadcast_in_dim)."""
    return jnp.broadcast_to(row, like.shape)


DIVIDES = {
    "(a/b)/c": lambda a, b, c, r: (a / b) / c,
    "a/(b/c)": lambda a, b, c, r: a / (b / c),
    "(a/b)/(c/a)": lambda a, b, c, r: (a / b) / (c / a),
    "((a/b)/c)/a": lambda a, b, c, r: ((a / b) / c) / a,
    "(a/b)/constant": lambda a, b, c, r: (a / b) / K.astype(a.dtype),
    "a/(constant/b)": lambda a, b, c, r: a / (K.astype(a.dtype) / b),
    "a/constant": lambda a, b, c, r: a / K.astype(a.dtype),
    "a/scalar": lambda a, b, c, r: a / 3.7,
    # a divide of constants, or of what XLA folds into constants, is folded as a divide before any rewrite sees it
    # (jax.nn.initializers.lecun_normal's stddev for a fan-in of 2: sqrt(0.5) / 0.8796...; flax's
    # test_jit_with_setup_helpers)
    "a*(constant/constant)": lambda a, b, c, r: a * (jnp.asarray(0.7071067, a.dtype) / jnp.asarray(0.8796257, a.dtype)),
    "a*(sqrt(constant)/constant)": lambda a, b, c, r: a * (jnp.sqrt(jnp.asarray(0.5, a.dtype)) /
                                                           jnp.asarray(0.8796257, a.dtype)),
    "a*(sqrt(row of constants)/constant)": lambda a, b, c, r: a * (jnp.sqrt(jnp.full((40,), 0.5, a.dtype)) /
                                                                   jnp.asarray(0.8796257, a.dtype)),
    "a/row": lambda a, b, c, r: a / r[None, :],
    "(a/row)/c": lambda a, b, c, r: (a / r[None, :]) / c,
    "a/(b/row)": lambda a, b, c, r: a / (b / r[None, :]),
    "a/exp(b)": lambda a, b, c, r: a / jnp.exp(b),
    # XLA moves broadcasts alike below an elementwise op (bcast(x) / bcast(y) is bcast(x / y)), so jaxlib 0.4.13's
    # rules see the divisor's operand: bcast(r) / bcast(exp(s)) is bcast(r * exp(-s)) (fuzz seed 20285811 #1283,
    # reduce_precision counts as elementwise there); a full numerator keeps the broadcast where it is
    "row/row(exp)": lambda a, b, c, r: _rows(r, a) / _rows(jnp.exp(r[::-1] * 0.5), a),
    "2/row(exp)": lambda a, b, c, r: 2 / _rows(jnp.exp(r * 0.5), a),
    "tanh(row)/row(exp)": lambda a, b, c, r: jnp.tanh(_rows(r * 0.25, a)) / _rows(jnp.exp(r * 0.5), a),
    "rp(row(exp))/row(exp)": lambda a, b, c, r: (lambda e: lax.reduce_precision(e, 5, 4) / e)(
        _rows(jnp.exp(r * 0.5), a)),
    "row/row(sqrt)": lambda a, b, c, r: _rows(r, a) / _rows(jnp.sqrt(r[::-1]), a),
    "a/row(exp)": lambda a, b, c, r: a / _rows(jnp.exp(r * 0.5), a),
    # ... and of an exp jaxlib 0.4.13 wrote: exp(A) * exp(A) => exp(A + A) (fuzz seed 20271001 #4250)
    "exp2(b)**-2": lambda a, b, c, r: jnp.exp2(b * 0.5) ** -2,
    "a/(exp(b)*exp(c))": lambda a, b, c, r: a / (jnp.exp(b * 0.25) * jnp.exp(c * 0.25)),
    "a/rsqrt(b)": lambda a, b, c, r: a / lax.rsqrt(b),
    "a/sqrt(b)": lambda a, b, c, r: a / jnp.sqrt(b),
    # ... only where nothing else reads the sqrt (rsqrt): XLA's rule matches a root with one use
    "a/sqrt(b) + sqrt(b)": lambda a, b, c, r: (lambda s: a / s + s)(jnp.sqrt(b)),
    "a/rsqrt(b) - rsqrt(b)": lambda a, b, c, r: (lambda s: a / s - s)(lax.rsqrt(b)),
    "(a/b)/sqrt(c)": lambda a, b, c, r: (a / b) / jnp.sqrt(c),
    "a/b**0.5": lambda a, b, c, r: a / b ** 0.5,
    "a/b**1.5": lambda a, b, c, r: a / b ** 1.5,
    "a/b**c": lambda a, b, c, r: a / b ** (c / 4),
    "1/b**1.5": lambda a, b, c, r: 1 / b ** 1.5,
    # 1 / B written as what XLA leaves of it (pow(B, -c), rsqrt, exp(-B)): dividing by that again is the same rule
    # again, A * B (y / (1 / x ** 0.5) is y * sqrt(x): fuzz seed 20272701 #457)
    "a/(1/b**0.5)": lambda a, b, c, r: a / (1 / b ** 0.5),
    "1/(1/b**1.7)": lambda a, b, c, r: 1 / (1 / b ** 1.7),
    "a/(1/b**c)": lambda a, b, c, r: a / (1 / b ** (c / 4)),
    "a/(1/sqrt(b))": lambda a, b, c, r: a / (1 / jnp.sqrt(b)),
    "a/(1/rsqrt(b))": lambda a, b, c, r: a / (1 / lax.rsqrt(b)),
    "a/(1/exp(b/4))": lambda a, b, c, r: a / (1 / jnp.exp(b / 4)),
    "1/(1/(1/b**0.5))": lambda a, b, c, r: 1 / (1 / (1 / b ** 0.5)),
    "(1/b**0.5, a/(1/b**0.5))": lambda a, b, c, r: (lambda q: (q, a / q))(1 / b ** 0.5),
    # ... seen through an op XLA removes: 1 / (b ** -2 + 0) is b * b on cpu (fuzz seed 20283101 #300)
    "1/(b**-2+0)": lambda a, b, c, r: jnp.reciprocal(b ** -2 + 0.0),
    # jaxlib 0.12 moves alike broadcasts below the divide before its reciprocal rule sees it: x / x stays 1
    "row/row": lambda a, b, c, r: jnp.broadcast_to(r, a.shape) / jnp.broadcast_to(r, a.shape),
    "row[None]/row": lambda a, b, c, r: r[None, :] / jnp.broadcast_to(r, a.shape),
    "2row/row": lambda a, b, c, r: jnp.broadcast_to(2 * r, a.shape) / jnp.broadcast_to(r, a.shape),
    # ... a splat constant is such a broadcast: 3 / vmap(tanh)(b) divides (fuzz seed 20270301 #4549)
    "3/broadcast(b)": lambda a, b, c, r: 3.0 / jax.vmap(lambda _: jnp.tanh(b))(r[:3]),
    "3/(row[None])": lambda a, b, c, r: 3.0 / jnp.broadcast_to(r, a.shape),
    # ... and an elementwise op of a broadcast and splats is that broadcast there (fuzz seed 20270501 #5050)
    "(3row)/row": lambda a, b, c, r: (lambda t: (t * 3.0) / t)(jnp.broadcast_to(r + 0.5, a.shape)),
    # ... and a broadcast scalar divided by a broadcast constant is a multiply by its reciprocal there
    "scalars/constant": lambda a, b, c, r: [jnp.broadcast_to(r[i], (3,)) / -1.5 for i in range(len(r))],
    # a broadcast_in_dim that only adds a dimension of one (jnp.expand_dims) is a reshape to XLA: no reciprocal
    "b**-2/expand_dims(b)": lambda a, b, c, r: jnp.expand_dims(b, 2) ** -2 / jnp.expand_dims(b, 2),
    # jaxlib 0.12 leaves a divide by a while loop's own scalar (a scalar lax.scan's body captures) a divide, but
    # rewrites one by a scalar the body computes (r[0] of a captured r, a sum)
    "scan: x/captured": lambda a, b, c, r: (lambda s: lax.scan(lambda x, _: (x / s,) * 2, a, None, length=3)[1])(
        jnp.sum(r)),
    "scan: x/r[0]": lambda a, b, c, r: lax.scan(lambda x, _: (x / r[0],) * 2, a, None, length=3)[1],
    "scan: x/sum(row)": lambda a, b, c, r: lax.scan(lambda x, _: (x / jnp.sum(r),) * 2, a, None, length=3)[1],
    # ... and one by a captured value with dimensions of one, which XLA reshapes away before it broadcasts it: the
    # divisor is then that reshape, not the loop's value (a / c of c f32[1, 1, 1] in a scan: fuzz seed 20272201 #621)
    "scan: x/captured[1, 1]": lambda a, b, c, r: (lambda s: lax.scan(lambda x, _: (x / s,) * 2, a, None, length=3)[1])(
        jnp.sum(r).reshape(1, 1)),
    "scan: x/captured column": lambda a, b, c, r: (lambda s: lax.scan(
        lambda x, _: (x / s,) * 2, a, None, length=3)[1])(b[:, 3:4] + 1.0),
    # ... unless the divide reads only loop-invariant values: XLA hoists it out of the loop and rewrites it there
    # (x1 / x36 of two captured values in a lax.fori_loop body: fuzz seed 20271401 #121)
    "fori: a/captured, hoisted": lambda a, b, c, r: (lambda s: lax.fori_loop(0, 2, lambda i, h: a / s, a))(
        jnp.sum(r)),
    "fori: a/captured row, hoisted": lambda a, b, c, r: (lambda s: lax.fori_loop(
        0, 2, lambda i, h: (a * 2.0) / s[None, :], a))(r * 1.5),
    "fori: (h+a)/captured, not hoisted": lambda a, b, c, r: (lambda s: lax.fori_loop(
        0, 2, lambda i, h: (h + a) / s, a))(jnp.sum(r)),
    # a pad that crops its operand away is a broadcast of its padding value: A / constant (fuzz seed 20271601 #6152)
    "a/pad(b, 0.7) of no b": lambda a, b, c, r: a / lax.pad(b[:1], jnp.asarray(0.7, a.dtype), [(24, -1, 0), (0, 0, 0)]),
    # ... and leaves a divide by a broadcast scalar that something else also reads
    "x/s, s read again": lambda a, b, c, r: (lambda s: (a / s, s + 1))(jnp.sum(r)),
    "x/s, s returned": lambda a, b, c, r: (lambda s: (a / s, s))(r[3]),
    # ... but not one with dimensions of one: XLA broadcasts a reshape that drops them, read by the divide alone
    "x/s, s[1, 1] returned": lambda a, b, c, r: (lambda s: (a / s, s))(r[3:4, None]),
    "x/s, s[24, 1] returned": lambda a, b, c, r: (lambda s: (a / s, s))(b[:, 3:4] + c[:, :1]),
    # an update of no elements is its operand to XLA: (c / b) / (c / b) is a quotient of quotients, 1 (fuzz seed
    # 20262101 #4853)
    "(c/b)/update(c/b, nothing)": lambda a, b, c, r: (lambda q: q / lax.dynamic_update_slice(q, q[:0], (0, 0)))(
        0.5 / b),
    # ... and a captured divisor as a parameter that only the branch's own ops read (fuzz seed 20270601 #3546)
    "in a branch, a/s of an s read outside": lambda a, b, c, r: (lambda s: lax.cond(
        s > 0, lambda: a / s, lambda: a * s))(jnp.sum(r)),
    # a branch gets a captured quotient as a parameter: 0.5 / (1 / a) is a divide there, not 0.5 * a
    "in a branch, c/(1/a)": lambda a, b, c, r: lax.cond(r[0] > 100, lambda v: v, lambda v: 0.5 / v, 1 / a),
    # XLA inlines a call before its rules: jax 0.4.13's sigmoid is a call of @sigmoid, 1 / (1 + exp(-x)), so
    # sigmoid(x) / y is 1 / ((1 + exp(-x)) * y) on cpu, which overflows to 0 in f16 (fuzz seed 20286601 #141),
    # a / sigmoid(b) is a * (1 + exp(-b)) and 1 / sigmoid(b) is 1 + exp(-b); the same function called twice is two
    # quotients
    "a/sigmoid(b-5)": lambda a, b, c, r: a / jax.nn.sigmoid(b - 5.0),
    "1/sigmoid(b-5)": lambda a, b, c, r: jnp.reciprocal(jax.nn.sigmoid(b - 5.0)),
    "sigmoid(-a)/b": lambda a, b, c, r: jax.nn.sigmoid(-a) / b,
    "sigmoid(-a)/b, sigmoid(c)/b": lambda a, b, c, r: (jax.nn.sigmoid(-a) / b, jax.nn.sigmoid(c) / b),
    # XLA sinks a reverse below a quotient of a broadcast scalar: reverse(S / B) => S / reverse(B), which the
    # rules then see ((x ** -2)[::-1] / y: fuzz seed 20286731 #312); a reverse of A / B stays where it is
    "(1/(b*b))[::-1]/c": lambda a, b, c, r: (b ** -2)[::-1] / c,
    "(2/b)[::-1, ::-1]/c": lambda a, b, c, r: (2.0 / b)[::-1, ::-1] / c,
    "(r[0]/b)[::-1]/c": lambda a, b, c, r: (r[0] / b)[:, ::-1] / c,
    "c/(3/b)[::-1]": lambda a, b, c, r: c / (3.0 / b)[::-1],
    "(a/b)[::-1]/c": lambda a, b, c, r: (a / b)[::-1] / c,
    "(a/r[0])[::-1]/c": lambda a, b, c, r: (a / r[0])[::-1] / c,  # (0.4.13: reverse(a) / (r[0] * c))
    "(1/b)[::-1][:, ::-1]/c": lambda a, b, c, r: (1.0 / b)[::-1][:, ::-1] / c,
    # ... and below a power by a scalar: c / (b ** 1.5)[::-1] is c * reverse(b) ** -1.5
    "c/(b**1.5)[::-1]": lambda a, b, c, r: c / (b ** 1.5)[::-1],
    # XLA's ReshapeMover moves reshapes of one shape, or transposes by one permutation, below the divide of them (and,
    # on jaxlib 0.4.13, beside a broadcast scalar), so the rules see the values moved
    "(1/b).reshape/c.reshape": lambda a, b, c, r: (1.0 / b).reshape(40, 24) / c.reshape(40, 24),
    "(2/b).T/c.T": lambda a, b, c, r: (2.0 / b).T / c.T,
    "c.reshape/sqrt(b).reshape": lambda a, b, c, r: c.reshape(-1) / jnp.sqrt(b).reshape(-1),
    "(1/b).reshape.T/c.reshape.T": lambda a, b, c, r: ((1.0 / b).reshape(4, 6, 40).transpose(2, 0, 1) /
                                                        c.reshape(4, 6, 40).transpose(2, 0, 1)),
    "(1/b).reshape/r[0]": lambda a, b, c, r: (1.0 / b).reshape(40, 24) / r[0],
    "(1/b).T/c.T, c.T*2": lambda a, b, c, r: ((1.0 / b).T / c.T, c.T * 2.0),
    # a broadcast of a broadcast (vmap of a function returning a reduction it keeps the dimensions of): 1 / that is
    # the outer broadcast of 1 / the inner one, each at its own shape (the front end wrote the inner one at the
    # outer's: "Malformed IPU program", fuzz seed 20287202 #613)
    "1/vmap(min keepdims)": lambda a, b, c, r: jnp.reciprocal(
        jax.vmap(lambda row: jnp.min(b, axis=1, keepdims=True) + 0 * row[0], in_axes=1)(a[:, :3])),
    "c/vmap(min keepdims)": lambda a, b, c, r: c[None, :, :1] / jax.vmap(
        lambda row: jnp.max(b, axis=1, keepdims=True), in_axes=1)(a[:, :3]),
    # ... and removes moves that cancel: (r[0] / b).T.T / c is r[0] / (b * c)
    "(r[0]/b).T.T/c": lambda a, b, c, r: (r[0] / b).T.T / c,
    "(2/b).reshape.reshape/c": lambda a, b, c, r: (2.0 / b).reshape(-1).reshape(b.shape) / c,
}


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_divide_by_a_broadcast_huge_divisor_flushes_as_on_cpu(dtype):
    """jaxlib 0.12 rewrites A / broadcast(B) as A * broadcast(1 / B) in bf16 too, the reciprocal and the product kept
    in f32 (XLA's excess precision) and rounded once: 1 / -3.4e38 is a denormal that flushes, so 61 / B is -0, not
    the quotient's -1.8e-37 (fuzz seed 20270401 #7242). jaxlib 0.4.13 divides."""
    a = random(dtype, (4, 6, 8), seed=26, low=-100.0, high=100.0)
    b = np.concatenate([np.array([-3.38953e38, 3.38953e38, 1e38, -2e37]), random("float32", (4,), seed=27)])
    check(lambda a, b: (a / b[None, None, :], a / b[3]), a, b.astype(dtype), **EXACT)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_a_one_element_divide_by_a_constant_rounds_as_cpu(dtype):
    """A / constant => A * (1 / C) also where the constant's broadcast adds no element (f16[1] / -1.5 is f16[1] *
    f16(-0.6665): 272 gives -181.25 on cpu, the quotient's -181.375 in a divide: fuzz seed 20270901 #7152)."""
    x = random(dtype, (24,), seed=28, low=1.0, high=500.0)
    for c in (-1.5, 0.3):
        for v in x:
            check(lambda v, c=c: v / c, np.array(v).reshape(1), **EXACT)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_a_sum_with_a_scatter_add_rounds_as_cpu(dtype):
    """jaxlib 0.12's simplifier: A + scatter(B, I, U, add) => scatter(A + B, I, U, add) for one update window, so
    A + B is rounded before the update is added (f16 x.at[3].add(u) + 16: fuzz seed 20270901 #9054); jaxlib 0.4.13
    adds in program order. bf16 sums are computed between converts, where no rule matches."""
    x = random(dtype, (7, 64, 2), seed=30, low=0.0, high=1.0)
    u = random(dtype, (1, 64, 2), seed=31, low=-5.0, high=5.0)
    check(lambda x, u: (x.at[jnp.array([-4])].add(u, mode="drop") + jnp.asarray(16, x.dtype),
                        x[::-1] + x.at[2].add(u[0])), x, u, **EXACT)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_a_power_of_an_exp_rounds_as_cpu(dtype):
    """jaxlib 0.4.13's simplifier: pow(exp(A), B) => exp(A * B) for f32 and f16, constant or not, whatever else reads
    the exp (f16 jnp.exp(x) ** 0.5 at x = 1.843 is 2.5137 on cpu, 2.5117 through the rounded exp: fuzz seed 20272101
    #6290); bf16 and jaxlib 0.12 compute the power of the exp. Exponents 0 and 1 are folded before that rule."""
    x = np.concatenate([random("float32", (200,), seed=32, low=-6.0, high=6.0),
                        [0.0, -0.0, 1e-30, 80.0, -90.0, np.inf, -np.inf, np.nan]]).astype(dtype)
    b = random(dtype, x.shape, seed=33, low=-2.0, high=2.0)

    def f(x, b):
        e = jnp.exp(x)
        return (e ** 0.5, e ** 2.0, e ** -1.0, e ** 1.7, e ** 0.0, e ** 1.0, e ** b, (e ** 3.0, e + 1),
                jnp.exp2(x) ** -0.5)

    check(f, x, b, **EXACT)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_acosh_rounds_as_cpu(dtype):
    """jaxlib 0.4.13's XLA decomposes acosh into log(x + sqrt((x + 1) * (x - 1))), or log(2) + log(x) from sqrt(max)
    on, each op rounded to the type: near 1 that is several ulps from the exact result (f16 acosh(1.0029) is 0.07611
    on cpu, 0.07654 exactly: fuzz seed 20271001 #1972), and the ipu computes it so. jaxlib 0.12's is jax's own
    decomposition, which the ipu runs as it is."""
    x = np.concatenate([np.linspace(1, 1.2, 300), np.linspace(1.2, 100, 500),
                        [200, 255, 256, 300, 1e4, 65504, 1e18, 1.8e19, 2e19, 1e30, 3e38, np.inf, 0.5, 1, -2, np.nan]])
    check(jnp.arccosh, x.astype(dtype), **EXACT)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["tan", "rsqrt", "sin"])
def test_half_ops_in_a_while_loop_round_as_cpu(name, dtype):
    """jaxlib 0.12 computes an f16 tan or rsqrt in a while loop's body as its expansion, each part rounded to f16
    (sin(x) / cos(x), 1 / sqrt(x)): an ulp from the rounded result on a third of the values, which a chaotic loop
    (h = tan(h * x), fuzz seed 20270901 #1178) turns into -600.5 against 0.5166. Outside loops, in bf16 and on
    jaxlib 0.4.13 the result is rounded once."""
    if name == "tan" and dtype == "bfloat16" and not CURRENT_SERIES:
        pytest.skip("jaxlib 0.4.13's bf16 tan is an ulp from the ipu's on a third of the inputs (fuzz table: open)")
    op = {"tan": jnp.tan, "rsqrt": lax.rsqrt, "sin": jnp.sin}[name]
    x = np.linspace(0.05, 3.0, 1500).astype(dtype)
    check(lambda x, n: (lax.fori_loop(0, n, lambda i, h: op(h), x), op(x)), x, np.int32(1), **EXACT)
    check(lambda x: lax.scan(lambda h, a: (op(h * a),) * 2, x[:16], x[16:64].reshape(3, 16)), x, **EXACT)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("name", sorted(DIVIDES))
def test_divide_rewrites_round_as_cpu(name, dtype):
    """XLA rewrites divides before XLA:CPU runs them (A / sqrt(B) => A * rsqrt(B), A / pow(B, C) => A * pow(B, -C),
    A / constant => A * (1 / C), jaxlib 0.12's A / broadcast(B) => A * broadcast(1 / B)...), each rounding
    differently from the divide: the ipu program is rewritten the same way, so every bit agrees. bf16 divides are
    not rewritten (XLA:CPU computes each between converts to and from f32, where no rule matches), but for jaxlib
    0.12's A / broadcast(B)."""
    a, b, c = (random(dtype, (24, 40), seed=s, low=1.0, high=9.0) for s in (22, 23, 24))
    r = random(dtype, (40,), seed=25, low=1.0, high=9.0)
    check(DIVIDES[name], a, b, c, r, **EXACT)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_reciprocal_of_a_reciprocal_is_the_value_itself(dtype):
    """XLA's A / (B / C) => (A * C) / B, then 1 * C => C and C / 1 => C: 1 / (1 / x) is x, bit for bit, a denormal
    kept and a value whose reciprocal is a denormal or overflows too (the ipu gave 0 for 1.8e-40: fuzz seed 20281901
    #1464)."""
    info = np.finfo(dtype)
    x = np.array([info.smallest_subnormal, -info.smallest_subnormal * 3, info.tiny / 2, info.max, -info.max / 3,
                  info.tiny, 2.5, -0.0, np.inf], dtype)
    check(lambda x: (jnp.reciprocal(jnp.reciprocal(x)), 1 / (1 / x)), x, **EXACT)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_sqrt_of_a_square_as_cpu_computes_it(dtype):
    """jaxlib 0.4.13's simplifier makes sqrt(A * A) |A| (no overflow, no underflow) in f32 and f16, not in bf16,
    whose ops it sees only between converts to and from f32: there a square that overflows or underflows gives inf
    or 0, as on cpu (jnp.sqrt(jnp.square(x)) of a bf16 1e-30 was 1e-30 on the ipu: fuzz seed 20286831 #182).
    jaxlib 0.12 computes the square and the root on both."""
    info = jnp.finfo(dtype)
    x = np.array([0.0, -0.0, np.inf, -np.inf, 3.0, -2.5, float(info.tiny) * 8, -float(info.max) / 4,
                  float(np.sqrt(float(info.max))) * 4, float(np.sqrt(float(info.tiny))) / 8], dtype)
    check(lambda x: (jnp.sqrt(jnp.square(x)), jnp.sqrt(x * x), x * x / jnp.sqrt(x * x)), x, **EXACT)


# --- chains of constants as XLA's simplifier folds them (jaxlib 0.4.13: compiler/passes/reassociate_constants.py) -----

CHAINS = {
    "(x+c1)+c2": lambda x: (x + 1.3) + 0.7,
    "(x+c1)-c2": lambda x: (x + 1.3) - 0.7,
    "(x-c1)-c2": lambda x: (x - 1.3) - 0.7,
    "(c1-x)+c2": lambda x: (1.3 - x) + 0.7,
    "(c1-x)-c2": lambda x: (1.3 - x) - 0.7,
    "c2+(c1+x)": lambda x: 0.7 + (1.3 + x),
    "((x+c1)+c2)+c3": lambda x: ((x + 1.1) + 2.3) + 3.7,
    "(x*c1)*c2": lambda x: (x * 1.1) * 0.7,
    "(x/c1)/c2": lambda x: (x / 1.1) / 0.7,
    "x/255*2-1": lambda x: x / 255.0 * 2.0 - 1.0,
    "(x+c1)+c2, x+c1 read again": lambda x: (lambda t: ((t + 0.7), t * t))(x + 1.3),
    "in a loop": lambda x: lax.fori_loop(0, 3, lambda i, h: (h + 1.3) - 0.7, x),
    # jaxlib 0.4.13's exp2(y) is exp(log(2) * y), and XLA folds the constant log(2) first (fuzz seed 20280101 #573)
    "exp2(x*c)": lambda x: jnp.exp2(x * -7.25),
    "exp2((x+c1)*c2)": lambda x: jnp.exp2((x + 0.3) * 3.1),
}


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("name", sorted(CHAINS))
def test_constant_chains_fold_as_on_cpu(name, dtype):
    """jaxlib 0.4.13's simplifier folds the constants of an add or multiply chain into one constant (A - C is A +
    (-C), (A + C1) + C2 is A + (C1 + C2), (C1 - A) + C2 is (C1 + C2) - A, (A * C1) * C2 is A * (C1 * C2)): one
    rounding of x where the ops one by one round twice. The ipu folds them too; jaxlib 0.12 folds none, and XLA:CPU
    computes bf16 through converts to f32, where no rule matches. On a host with AVX512-FP16, XLA:CPU computes f16
    natively and contracts a multiply and an add into one f16 fused multiply-add (x / 255 * 2 - 1: 2 of 256 an ulp
    apart), which the ipu does not: there an f16 ulp."""
    x = random(dtype, (256,), seed=31)
    native_f16 = dtype == "float16" and host_facts()["avx512_fp16"]
    check(CHAINS[name], x, **({"rtol": 2.0 ** -10} if native_f16 else EXACT))


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_a_product_by_a_constant_and_then_a_scalar_multiplies_the_scalars_first(dtype):
    """jaxlib 0.4.13's simplifier writes an array's (A * C) * broadcast(s), C a constant and s a scalar that is not
    one, as A * broadcast(s * C): a momentum step's (g * 0.9) * lr rounds once on cpu (126 of 240 elements were an
    ulp apart). (A * s) * C and (A * s) * t stay two products there."""
    y = random(dtype, (12, 20), seed=33)
    s, t = np.asarray(1.7, dtype), np.asarray(-0.3, dtype)
    check(lambda y, s, t: ((y * 1.5) * s, s * (y * -0.9), (y * s) * 1.5, (y * s) * t, (y * 1.5) * s - y), y, s, t,
          **EXACT)


SCALAR_PRODUCTS = {
    "(x*c1)*(y*c2)": lambda x, y: (x * np.float32(-0.13793103)) * (y * np.float32(1.7320508)),
    "(x/c)**2": lambda x, y: (x / -7.25) ** 2,
    "(x/c)**3": lambda x, y: (x / -7.25) ** 3,
    "(x*c)*y": lambda x, y: (x * np.float32(-0.13793103)) * y,  # (one constant: not reassociated)
}


@pytest.mark.parametrize("name", sorted(SCALAR_PRODUCTS))
def test_scalar_products_of_constants_reassociate_as_on_cpu(name):
    """jaxlib 0.4.13's simplifier writes a product of two scalar products with constants, (A * C1) * (B * C2), as
    (A * B) * (C1 * C2): in a program of scalars, where its constants are constant ops rather than broadcasts, (x /
    7.25) ** 2 is (x * x) * (1 / 7.25)^2 on cpu (fuzz seed 20286221 #900: 137 of 200 scalars of the cube an ulp or
    two from the rounded products). The ipu reassociates them too; jaxlib 0.12 does neither."""
    f = SCALAR_PRODUCTS[name]
    xs, ys = (random("float32", (64,), seed=s, low=-3.0, high=3.0) for s in (33, 34))
    ipu, cpu = (jax.jit(f, backend=backend) for backend in (BACKEND, REFERENCE))
    got = np.array([np.asarray(ipu(x, y)) for x, y in zip(xs, ys)])
    want = np.array([np.asarray(cpu(x, y)) for x, y in zip(xs, ys)])
    np.testing.assert_array_equal(got, want)


def test_cpu_folds_constant_chains_on_jaxlib_04_only():
    """The premise of the test above: cpu's (x + 1.3) - 0.7 is x + 0.6 on jaxlib 0.4.13, and the two roundings on
    jaxlib 0.12."""
    x = random("float32", (256,), seed=31)
    cpu = np.asarray(jax.jit(CHAINS["(x+c1)-c2"], backend="cpu")(x))
    folded = x + (np.float32(1.3) + -np.float32(0.7))
    one_by_one = (x + np.float32(1.3)) - np.float32(0.7)
    assert np.array_equal(cpu, one_by_one if jax.__version__.split(".")[:2] != ["0", "4"] else folded)


LOGS = {
    "log(sqrt(a))": lambda a, b: jnp.log(jnp.sqrt(a)),
    "log(rsqrt(a))": lambda a, b: jnp.log(lax.rsqrt(a)),
    # ... through broadcasts and reshapes, which XLA sinks below the log first (fuzz seed 20271001 #2053)
    "log(broadcast(sqrt(a)))": lambda a, b: jnp.log(jnp.broadcast_to(jnp.sqrt(a), (2, 1000))),
    "log(reshape(rsqrt(a))), rsqrt(a)": lambda a, b: (lambda r: (jnp.log(r.reshape(40, 25)), r))(lax.rsqrt(a)),
    "log(vmap(sqrt(a)))": lambda a, b: jnp.log(jax.vmap(lambda _: jnp.sqrt(a))(b[:3])),
    "log(a**1.7)": lambda a, b: jnp.log(a ** 1.7),
    "log(a**b)": lambda a, b: jnp.log(a ** b),
    "log(exp(b))": lambda a, b: jnp.log(jnp.exp(b)),
    # XLA folds a power of 0, 1, 2, 3 or -1 before the log sees it: log(a * a), not 2 log|a| (a tiny a: -inf)
    "log(a**2.0)": lambda a, b: jnp.log((a * 1e-20) ** 2.0),
    "log(a**1.0)": lambda a, b: jnp.log((a - 10) ** 1.0),
    "log(a**-1.0)": lambda a, b: jnp.log((a - 10) ** -1.0),
    # a conditional's branch gets what it captures as parameters: XLA cannot see the power there (a ** 0.5 of a
    # negative a is NaN, and stays so in the log)
    "log in a branch, of a**0.5": lambda a, b: lax.cond(b[9] > 100, lambda v: v, jnp.log, (a - 10) ** 0.5),
}


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("name", sorted(LOGS))
def test_log_rewrites_round_as_cpu(name, dtype):
    """XLA's simplifier rewrites a log of a square root, a power or (jaxlib 0.4.13) an exponential:
    log(sqrt(A)) => log(A) * 0.5, log(pow(A, B)) => B == 0 ? 0 : log(|A|) * B, log(exp(A)) => A. bf16 is not
    rewritten. Zeros, infinities, NaN and negative bases included, with a zero exponent among the powers."""
    a = random(dtype, (1000,), seed=26, low=0.0, high=20.0)
    b = random(dtype, (1000,), seed=27, low=-3.0, high=3.0)
    a[:8] = np.array([0, -0.0, np.inf, np.nan, -2.0, 1.0, 1e-30, -np.inf]).astype(a.dtype)
    b[:8] = np.array([0, 2.0, 0, -1.0, 3.0, 0, 0.5, 2.0]).astype(b.dtype)
    check(LOGS[name], a, b, **EXACT)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_product_with_a_converted_predicate_is_a_select(dtype):
    """XLA's simplifier: A * convert(predicate) => select(predicate, A, 0) in f32 and f16 (bf16 is not rewritten),
    so an infinite or NaN A gives +0 where the predicate is false, -0 gives +0; jax's gradient of a maximum
    multiplies by such a mask (the gradient of jnp.max over a row holding a NaN is 0 elsewhere on cpu)."""
    a = random(dtype, (64,), seed=28)
    a[:6] = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0]).astype(a.dtype)
    mask = np.arange(64) % 3 == 0
    check(lambda a, m: [a * m.astype(a.dtype), m.astype(a.dtype) * a, a * (a > 0).astype(a.dtype)], a, mask, **EXACT)
    x = random(dtype, (4, 16), seed=29)
    x[1, 3] = np.nan
    check(jax.grad(lambda x: jnp.sum(jnp.max(x, axis=1) * 2)), x, **EXACT)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_a_broadcast_predicate_is_a_select_only_where_xla_sinks_the_broadcast(dtype):
    """XLA sinks a broadcast below the convert of a predicate first (convert(broadcast(Q)) => broadcast(convert(Q)))
    and below the product or quotient only where the other operand is a broadcast of a scalar or a broadcast of
    Q's shape alike; only then does the converted predicate's rule see the convert. A broadcast predicate times a
    full array is a product on cpu (NaN and -0 where the mask is 0, a denormal flushed where it is 1: a vmapped
    mask, fuzz seed 20286612 #1260); a broadcast scalar predicate divided by a scalar is a scalar quotient (0 / 0
    is NaN). Both series."""
    q = np.array([True, False, True, False])
    x = random(dtype, (3, 4), seed=30)
    x[:, :] = np.array([np.nan, -1.0, np.inf, -2.0] * 2 + [1e-40, -1e-40, -0.0, 3.0], np.float32).reshape(3, 4)
    row = np.array([np.nan, -1.0, np.inf, -0.0], dtype)
    check(lambda q, x: [jnp.broadcast_to(q, (3, 4)).astype(x.dtype) * x,  # a product on cpu
                        x * jnp.broadcast_to(q, (3, 4)).astype(x.dtype)], q, x, **EXACT)
    check(lambda p, x: jnp.broadcast_to(p, (3, 4)).astype(x.dtype) * x, np.bool_(False), x, **EXACT)
    check(lambda q, r: [jnp.broadcast_to(q, (3, 4)).astype(r.dtype) * jnp.broadcast_to(r, (3, 4)),  # a select
                        jnp.broadcast_to(q, (3, 4)).astype(r.dtype) / jnp.broadcast_to(r, (3, 4))],  # a quotient
          q, row, **EXACT)
    check(lambda q: jnp.broadcast_to(q, (3, 4)).astype(dtype) * np.full((3, 4), np.nan, dtype), q, **EXACT)  # a select
    check(lambda q, y: [jnp.broadcast_to(q, (3, 4)).astype(y.dtype) * y,  # selects on cpu
                        jnp.broadcast_to(q, (3, 4)).astype(y.dtype) / y], q, np.array(np.nan, dtype), **EXACT)
    for p in (False, True):
        check(lambda p, y: [jnp.broadcast_to(p, (3, 4)).astype(y.dtype) / y,  # a quotient of scalars on cpu
                            jnp.broadcast_to(p, (3, 4)).astype(y.dtype) * y], np.bool_(p), np.array(0, dtype), **EXACT)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "complex64"])
def test_converted_predicate_divided_by_a_scalar_is_a_select(dtype):
    """XLA's simplifier: convert(P) / broadcast(Y) => broadcast(1 / Y) * convert(P), any scalar Y, then the
    product's rule: select(P, 1 / Y, 0), so where P is false the quotient is +0 whatever Y is (0 / 0, 0 / NaN and
    0 / -3 give 0), on both series; A / constant C => A * (1 / C) makes a constant vector divisor a select too;
    bf16 is not rewritten, nor a divisor that is not a broadcast scalar (fuzz seed 20282401 #8139)."""
    mask = np.arange(12) % 3 == 0
    ys = np.array([0.0, -0.0, np.nan, -3.0, np.inf], np.float32)
    for y in ys:
        check(lambda m, y: [m.astype(dtype) / y.astype(dtype), m.reshape(3, 4).astype(dtype) / y.astype(dtype)],
              mask, y, **EXACT)
    check(lambda m: m.astype(dtype) / jnp.array([0.0, -2.0, 1.0] * 4, dtype), mask, **EXACT)
    check(lambda m, v: m.astype(dtype) / v.astype(dtype), mask, np.zeros(12, np.float32), **EXACT)


def test_a_loop_of_one_trip_is_removed_as_xla_removes_it():
    """XLA's while-loop simplifier removes a loop whose body runs once (lax.fori_loop(0, 1, ...), a scan of length
    1) or never, before its simplifier sees the program, so its rules see across the loop's edges: a converted
    predicate carried into the body and divided by a zero there is a select (0 where cpu's arithmetic would be
    0 / 0; fuzz seed 20282401 #8139), and a value the loop's removal leaves unread no longer keeps a divisor from
    becoming a reciprocal product (x / s of a scalar s also carried into the loop; 20282401 #8980). A loop of two
    trips stays a loop."""
    p = np.arange(24).reshape(4, 6) % 3 == 0
    s = np.float32(0.0)

    def scan_divide(p, s, n):
        def body(carry, _):
            q = carry / s
            return q, q
        return lax.scan(body, p.astype(jnp.float32), None, length=n)

    def carried_divisor(x, s, n):
        kept = lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, jnp.float32(2)), (0, jnp.minimum(s, 1.0)))
        return x / s, kept[1]

    x = random("float32", (6, 2, 3), seed=30)
    for n in (0, 1, 2):
        check(lambda p, s, n=n: scan_divide(p, s, n), p, s, **EXACT)
        check(lambda x, s, n=n: carried_divisor(x, s, n), x, np.float32(0.7), **EXACT)
        check(lambda p, n=n: lax.fori_loop(0, n, lambda i, c: c / jnp.float32(0), p.astype(jnp.float32)), p, **EXACT)


def test_a_sum_with_a_negated_product_contracts_the_other_product():
    """XLA:CPU contracts one f32 product of a sum into a fused multiply-add; LLVM first writes P + Q with a negated
    product P (0.48 * -y, -a * b, a * -0.5, (a * b) * -1, a * (-3 * b), -a * -b is not one) as Q - |P|, so Q is
    the one contracted whichever comes first. jax.grad of the Matyas function, 0.26 * (x**2 + y**2) - 0.48 * x * y,
    had two different components at x = y on the ipu (optax's L-BFGS test), and each form below differed in up to
    a third of its elements; products of values with cancellation make every rounding visible (EXACT)."""
    a, b, c = (random("float32", (4096,), seed=40 + i) for i in range(3))
    d = (a * b / c * -1 * np.float32(1.0000001)).astype(np.float32)
    neg = lax.neg
    forms = [
        lambda a, b, c, d: neg(a) * b + c * d, lambda a, b, c, d: a * neg(b) + c * d,
        lambda a, b, c, d: neg(a) * neg(b) + c * d, lambda a, b, c, d: a * b + neg(c) * d,
        lambda a, b, c, d: a * (jnp.float32(-3) * b) + c * d, lambda a, b, c, d: neg(a * b) + c * d,
        lambda a, b, c, d: (a * b) * jnp.float32(-1) + c * d, lambda a, b, c, d: a * jnp.float32(-0.5) + c * d,
        lambda a, b, c, d: neg(a) * b + neg(c) * d, lambda a, b, c, d: neg(a) * b - c * d,
        lambda a, b, c, d: c * d - neg(a) * b,
    ]
    check(lambda a, b, c, d: [f(a, b, c, d) for f in forms], a, b, c, d, **EXACT)

    def matyas(p):
        x, y = p
        return 0.26 * (x ** 2 + y ** 2) - 0.48 * x * y

    for v in (5.99976015, 6.0, 1.2345678, 3.3):
        check(jax.grad(matyas), np.full(2, v, np.float32), **EXACT)


@pytest.mark.parametrize("n", [1, 3, 72])
def test_bf16_compared_with_zero(n):
    """XLA:CPU tests a bf16 value widened to f32 against a zero constant by its bits, so a bf16 denormal is nonzero
    there (x.astype(f32) != 0), and jaxlib 0.4.13 tests the bf16 value itself so too (x != 0, x == 0,
    x.astype(bool)); a compare with a computed zero or an order reads it as a zero. The ipu does as cpu does."""
    bits = np.array([2, 0, 0x8000, 0x8002, 0x7F, 0x80, 0x3F80, 0x7FC0, 0x7F80] * 8, np.uint16)[:n]
    x = bits.view(jnp.bfloat16)
    check(lambda x: [x != 0, x == 0, 0 == x, x == -0.0, x.astype(bool), x.astype(jnp.float32) != 0, x < 0,
                     x == x[::-1] * 0, (x * 1.5) == 0, jnp.flip(x.astype(jnp.float32)).astype(bool),
                     x.astype(jnp.float32)[::-1].reshape(-1, 1) == 0], x, **EXACT)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_abs_of_a_non_negative_value(dtype):
    """jaxlib 0.4.13's simplifier drops the abs of what it knows is not negative, so abs(relu(-0)) is relu's -0
    there (fuzz seed 20285811 #711); the other forms it knows, and one it does not (a minimum), alongside."""
    x = special(dtype)
    zero = jnp.zeros((), dtype)
    check(lambda x, y: [jnp.abs(jax.nn.relu(x)), jnp.abs(jnp.maximum(x, 0)), jnp.abs(jnp.maximum(zero, x)),
                        jnp.abs(x * x), jnp.abs(jnp.where(y > 0, jnp.abs(x), jnp.maximum(x, 0.5))),
                        jnp.abs(jnp.minimum(x, 0))],
          x, random(dtype, x.shape, seed=3), **EXACT)


ONE_ELEMENT_QUOTIENTS = {  # v: an f16[1] or f32[1] difference; u and i arguments, as the fuzz program had them
    "broadcast(v) / (3 / v)": lambda v, u, i: jnp.broadcast_to(v, (4,)) / (3.0 / v),
    "take_along_axis(v, i) / (3 / v)": lambda v, u, i: jnp.take_along_axis(v, jnp.clip(i, -1, 0), axis=0) / (3.0 / v),
    "... / (3 / v) with nothing scattered": lambda v, u, i: jnp.take_along_axis(v, jnp.clip(i, -1, 0), axis=0) / (
        (3.0 / v).at[jnp.array([1], jnp.int32)].mul(u, mode="drop")),
}


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("name", sorted(ONE_ELEMENT_QUOTIENTS))
def test_a_divide_by_a_broadcast_quotient_rounds_as_cpu(name, dtype):
    """XLA's rules see a quotient under a broadcast: bcast(v) / bcast(3 / v) has its broadcasts moved below the divide
    (a broadcast's operand's dimensions of one removed first) and is (v * v) * (1 / 3); jaxlib 0.12's A / bcast(3 / v)
    is A * bcast(1 / (3 / v)), which is A * bcast(v * (1 / 3)); a scatter that writes nothing is its operand (fuzz
    seed 20286212 #2418: an f16 ulp apart on half of the values)."""
    f = ONE_ELEMENT_QUOTIENTS[name]
    rng = np.random.default_rng(26)
    u, i = np.ones(1, dtype), np.array([0, 2, -1, 3], np.int32)
    ipu, cpu = (jax.jit(lambda x, y, u, i: f(y - x, u, i), backend=backend) for backend in (BACKEND, REFERENCE))
    differ = 0
    for _ in range(64):
        a, b = (np.array([rng.normal() * 3], dtype) for _ in range(2))
        differ += int((np.asarray(ipu(a, b, u, i)) != np.asarray(cpu(a, b, u, i))).any())
    assert differ == 0, f"{differ} of 64"


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_rsqrt_of_a_reciprocal_square_rounds_as_cpu(dtype):
    """jaxlib 0.12's simplifier writes rsqrt(1 / (A * A)) as sqrt(A * A), which is |A| wherever the square neither
    overflows nor underflows (jax writes x ** -2 as 1 / (x * x)): fuzz seed 20286242 #3465, an f16 ulp from the
    rsqrt of the quotient on 25 of 600 values (92 in f32). jaxlib 0.4.13 computes both alike."""
    x = random(dtype, (600,), seed=35, low=-4.0, high=4.0)
    x[:4] = [0.0, -0.0, np.inf, np.nan]
    check(lambda x: lax.rsqrt(x ** -2), x, **EXACT)
