"""Every IPU dtype through every op family, ipu against cpu on the same inputs: the 8/16-bit integers (wrapping as
XLA's do), bfloat16 (computed in f32 and rounded to nearest even), conversions between all of them with edge values,
bitcasts, and the error for complex128 (the 64-bit types: test_x64.py)."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _conformance import BACKEND, EXACT, check
from jax import lax

NARROW_INTS = ("int8", "uint8", "int16", "uint16")
INTS = NARROW_INTS + ("int32", "uint32")
FLOATS = ("bfloat16", "float16", "float32")
EVERY = ("bool",) + INTS + FLOATS
BF16_TRANSCENDENTAL = {"rtol": 1.6e-2, "atol": 1e-2}  # 2 ulp of bf16's 8-bit significand


def np_dtype(name: str) -> np.dtype:
    return np.dtype(jnp.bfloat16) if name == "bfloat16" else np.dtype(name)


def values(name: str, shape=(257,), seed: int = 0) -> np.ndarray:
    """Integers over their whole range (so sums and products overflow), floats with specials mixed in."""
    rng = np.random.default_rng(seed)
    if name == "bool":
        return rng.random(shape) < 0.5
    if name in INTS:
        info = np.iinfo(name)
        return rng.integers(info.min, info.max, size=shape, dtype=name, endpoint=True)
    x = rng.uniform(-8, 8, size=shape).astype(np.float32)
    flat = x.reshape(-1)
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 3.0e38, 1e-39]
    flat[: len(specials)] = specials[: flat.size]
    return x.astype(np_dtype(name))


def edges(name: str) -> np.ndarray:
    """Edge values of a type, for conversions: extremes, +-0, halves, just past the narrow types' ranges."""
    if name == "bool":
        return np.array([False, True])
    if name in INTS:
        info = np.iinfo(name)
        cand = [0, 1, -1, 2, 127, 128, -128, -129, 255, 256, 32767, 32768, -32768, 65535, 65536, info.min, info.max]
        return np.array([c for c in cand if info.min <= c <= info.max], dtype=name)
    cand = [0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 127.0, 127.5, 128.0, -128.0, -129.0, 255.0, 255.9, 256.0, -1.0,
            32767.0, 32768.0, -32768.0, -32769.0, 65504.0, 65535.0, 65536.0, 1e9, -1e9, 3e9, 5e9, 1e-8, 70000.0,
            np.inf, -np.inf, np.nan]
    with np.errstate(over="ignore"):
        return np.array(cand, np.float32).astype(np_dtype(name))


# ---- elementwise ----

@pytest.mark.parametrize("dtype", INTS)
def test_integer_arithmetic_wraps(dtype):
    x, y = values(dtype, seed=1), values(dtype, seed=2)
    check(lambda x, y: (x + y, x - y, x * y, -x, jnp.abs(x), jnp.sign(x), jnp.maximum(x, y), jnp.minimum(x, y),
                        x & y, x | y, x ^ y, ~x, lax.population_count(x), lax.clz(x)), x, y, **EXACT)


@pytest.mark.parametrize("dtype", INTS)
def test_integer_division_edges(dtype):
    info = np.iinfo(dtype)
    x = np.array([info.min, info.min, info.max, 7, -7 if info.min else 7, 0, 5, info.max], dtype)
    y = np.array([-1 if info.min else 1, 0, 0, 2, 2, 0, 3, -1 if info.min else 3], dtype)
    check(lambda x, y: (lax.div(x, y), lax.rem(x, y)), x, y, **EXACT)


@pytest.mark.parametrize("dtype", INTS)
def test_shifts_and_power(dtype):
    bits = np.dtype(dtype).itemsize * 8
    x = values(dtype, (64,), seed=3)
    s = (np.arange(64) % (bits + 3)).astype(dtype)  # counts past the width give 0 / the sign
    check(lambda x, s: (lax.shift_left(x, s), lax.shift_right_logical(x, s), lax.shift_right_arithmetic(x, s),
                        lax.integer_pow(x, 3), x ** (s % 5)), x, s, **EXACT)


@pytest.mark.parametrize("dtype", EVERY)
def test_compare_select_clamp(dtype):
    x, y = values(dtype, seed=4), values(dtype, seed=5)
    ops = lambda x, y: (x == y, x != y, x < y, x <= y, x > y, x >= y, jnp.where(x < y, x, y),  # noqa: E731
                        jnp.where(x == x, y, x))
    check(ops, x, y, **EXACT)
    if dtype != "bool":
        lo, hi = np.minimum(x, y), np.maximum(x, y)
        check(lambda lo, x, hi: lax.clamp(lo, x, hi), lo, values(dtype, seed=6), hi, **EXACT)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_16_bit_float_arithmetic_rounds_once(dtype):
    x, y = values(dtype, seed=7), values(dtype, seed=8)
    check(lambda x, y: (x + y, x - y, x * y, x / y, jnp.maximum(x, y), -x, jnp.abs(x), jnp.floor(x), jnp.round(x),
                        jnp.sqrt(jnp.abs(x)), jnp.isfinite(x), jnp.nextafter(x, y)), x, y, **EXACT)


def test_bfloat16_transcendentals():
    x = values("bfloat16", seed=9)
    x[9] = 1e-30  # not the subnormal: XLA:CPU runs with denormals flushed to zero, the IPU model does not
    check(lambda x: (jnp.exp(x), jnp.log(jnp.abs(x)), jnp.tanh(x), jnp.sin(x), jax.nn.sigmoid(x), lax.erf(x)), x,
          **BF16_TRANSCENDENTAL)


def _bf16_operands(seed):
    """bf16 operands where the f32 and the bf16 results of most ops differ: finite, normal, away from zero."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(-3, 3, 4099).astype(np.float32)
    b = (rng.uniform(0.3, 3, 4099) * rng.choice([-1, 1], 4099)).astype(np.float32)
    return a.astype(jnp.bfloat16), b.astype(jnp.bfloat16)


F32 = jnp.float32
# bf16 ops whose result XLA:CPU hands to a convert to f32 unrounded (XLA's excess precision): each computed exactly
# as cpu computes it in f32, or to the f32 tolerance of the emulator's libm (README, rules/excess_precision.py)
BF16_WIDENED_EXACT = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "div": lambda a, b: a / b,
    "sqrt": lambda a, b: jnp.sqrt(jnp.abs(a)), "exp": lambda a, b: jnp.exp(a), "log": lambda a, b: jnp.log(jnp.abs(b)),
    "tanh": lambda a, b: jnp.tanh(a), "log1p": lambda a, b: jnp.log1p(jnp.abs(a)), "tan": lambda a, b: jnp.tan(a),
}
BF16_WIDENED_LIBM = {
    "sin": lambda a, b: jnp.sin(a), "cos": lambda a, b: jnp.cos(a), "pow": lambda a, b: jnp.abs(b) ** a,
    "atan2": lambda a, b: jnp.arctan2(a, b), "cbrt": lambda a, b: jnp.cbrt(a), "atan": lambda a, b: jnp.arctan(a),
    "expm1": lambda a, b: jnp.expm1(a), "rsqrt": lambda a, b: lax.rsqrt(jnp.abs(b)),
}
BF16_WIDENED_EXACT.update({"pow_half": lambda a, b: jnp.abs(a) ** 0.5, "pow_2": lambda a, b: a ** 2.0})


@pytest.mark.parametrize("op", sorted(BF16_WIDENED_EXACT) + sorted(BF16_WIDENED_LIBM))
def test_bfloat16_result_converted_to_f32_is_not_rounded(op):
    """``(a * b).astype(jnp.float32)`` is the f32 product on cpu: XLA drops the f32 -> bf16 -> f32 round trip between
    a bf16 op and a convert to f32. The bf16 result itself, and what reads it otherwise, stay rounded."""
    a, b = _bf16_operands(21)
    f = {**BF16_WIDENED_EXACT, **BF16_WIDENED_LIBM}[op]
    tolerance = EXACT if op in BF16_WIDENED_EXACT else {"rtol": 1e-5, "atol": 1e-6}
    check(lambda a, b: (f(a, b).astype(F32), f(a, b), f(a, b) + b), a, b, **tolerance)


def test_bfloat16_excess_precision_stops_where_cpu_rounds():
    """Between two bf16 ops, and wherever a move, a select, an extremum or a loop's carry stands between the op and
    the convert, the value is rounded to bf16 on cpu, as here."""
    a, b = _bf16_operands(22)
    check(lambda a, b: ((a * b + b).astype(F32), jnp.exp(a * b).astype(F32), (a * b)[::-1].astype(F32),
                        jnp.maximum(a * b, 0.0).astype(F32), jnp.where(a > 0, a * b, b).astype(F32),
                        (-(a * b)).astype(F32), (a * b).reshape(1, -1).astype(F32),
                        lax.fori_loop(0, 1, lambda i, x: x * b, a).astype(F32)), a, b, **EXACT)


def test_bfloat16_sums_and_softmax_read_the_f32_values():
    """jnp's sums and means of bf16 convert to f32 first, and softmax sums its exps so: those read the unrounded
    values on cpu (with jaxlib 0.12 also through a reshape, which XLA moves past the convert), and so here."""
    a, b = _bf16_operands(23)
    a, b = a[:4096].reshape(64, 64), b[:4096].reshape(64, 64)
    # bf16 results of f32 sums of 64 to 256 terms: another order of the f32 adds moves a result by an f32 ulp, which
    # leaves its bf16 rounding alone but once in tens of thousands; reading rounded terms moves a third of them
    check(lambda a, b: (jnp.sum(a * b, axis=1), jnp.mean(jnp.exp(a), axis=0), jax.nn.softmax(a, axis=1),
                        jnp.sum((a * b).reshape(16, 256), axis=1)), a, b, **EXACT)
    check(lambda a, b: jnp.sum((a * b).reshape(4096).astype(F32)), a, b, scale_ulps=4)


def test_bfloat16_values_read_in_f32_by_expansions_and_across_calls():
    """XLA expands erfc, cosh and sinh (and jaxlib 0.4.13's erf) in f32, converting the bf16 operand up: that convert
    reads a bf16 product's or exp's f32 value. It inlines calls first: jax 0.4.13's sigmoid is a call of
    1 / (1 + exp(-x)) whose quotient a convert to f32 reads unrounded, and jax 0.12 sends erfc, cosh and sinh as
    composites whose decomposition converts up."""
    a, b = _bf16_operands(24)
    check(lambda a, b: (lax.erfc(a * b * 0.3), jnp.cosh(jnp.exp(a * 0.5)), jnp.sinh(a * b), lax.erf(a * b),
                        lax.lgamma(jnp.exp(a)), lax.digamma(a * b + 4.0), lax.erf_inv(a * 0.3),
                        jax.nn.sigmoid(a).astype(F32), jax.jit(lambda x: x * b)(a).astype(F32)), a, b, **EXACT)


def test_bfloat16_dot_with_an_f32_result_reads_its_operands_producers():
    """jaxlib 0.4.13's XLA:CPU converts the bf16 operands of a dot with an f32 result (preferred_element_type, or an
    f32 x bf16 dot) to f32, reading a product's or a sigmoid's f32 value; jaxlib 0.12 does so for small dots only
    (the rest agree to an f32 ulp or so; reading the rounded values moves results by up to 10%)."""
    a, b = _bf16_operands(25)
    a, b, c = a[:640].reshape(16, 40), b[:320].reshape(40, 8), b[320:640].reshape(40, 8).astype(np.float32)
    dims = (((1,), (0,)), ((), ()))
    check(lambda a, b, c: (lax.dot_general(a * 3.0, b, dims, preferred_element_type=F32),
                           lax.dot_general(jax.nn.sigmoid(a), b, dims, preferred_element_type=F32),
                           lax.dot_general(jnp.exp(a * 0.25), c, dims, preferred_element_type=F32)), a, b, c,
          rtol=1e-5, atol=1e-5)


# ---- conversions and bitcasts ----

@pytest.mark.parametrize("src", EVERY)
def test_convert_between_every_pair(src):
    x = edges(src)
    check(lambda x: tuple(lax.convert_element_type(x, np_dtype(d)) for d in EVERY), x, **EXACT)


def test_signalling_f16_nans_are_quiet_once_converted():
    """XLA:CPU converts f16 with F16C, which quiets a signalling NaN: its f32 bits have the quiet bit set, and
    pow(1, y) of one is 1, as of any NaN y (the ipu gave NaN: fuzz seed 20281901 #2399). bf16 and f32 signalling
    NaNs stay signalling on both (pow(1, y) is NaN)."""
    half = np.array([0x7c01, 0xfd28, 0x7d00, 0x7e00, 0x3c00, 0x7c00], np.uint16).view(np.float16)
    check(lambda y: (lax.bitcast_convert_type(y.astype(jnp.float32), jnp.uint32), jnp.power(jnp.ones_like(y), y),
                     jnp.power(y, jnp.zeros_like(y)), (y * 2).astype(jnp.float32)), half, **EXACT)


@pytest.mark.parametrize("a, b", [("float16", "int16"), ("float16", "uint16"), ("bfloat16", "uint16"),
                                  ("bfloat16", "int16"), ("bfloat16", "float16"), ("int8", "uint8"),
                                  ("int16", "uint16"), ("float32", "int32")])
def test_bitcast_convert(a, b):
    x = values(a, seed=10)
    check(lambda x: (lax.bitcast_convert_type(x, np_dtype(b)),
                     lax.bitcast_convert_type(lax.bitcast_convert_type(x, np_dtype(b)), np_dtype(a))), x, **EXACT)


@pytest.mark.parametrize("a, b", [("uint8", "float32"), ("int8", "bfloat16"), ("uint16", "int32"), ("float32", "int8"),
                                  ("uint32", "uint16"), ("float16", "uint8")])
def test_bitcast_convert_between_widths(a, b):
    """The same bytes in elements of another width: the narrower side has an innermost dimension of the ratio."""
    wa, wb = np.dtype(np_dtype(a)).itemsize, np.dtype(np_dtype(b)).itemsize
    x = values(a, (3, 5, max(1, wb // wa)), seed=11)
    if wa >= wb:
        x = x[..., 0]
    check(lambda x: lax.bitcast_convert_type(x, np_dtype(b)), x, **EXACT)


# ---- reductions, dot, sort, indexing, shapes ----

@pytest.mark.parametrize("dtype", INTS + ("bool", "bfloat16"))
def test_reductions_keep_the_type(dtype):
    x = values(dtype, (33, 40), seed=11)
    if dtype == "bool":
        check(lambda x: (jnp.all(x, axis=0), jnp.any(x, axis=1), jnp.max(x), jnp.min(x, axis=0)), x, **EXACT)
        return
    if dtype == "bfloat16":  # finite values: the order of a float sum is the backend's
        x = np.nan_to_num(x.astype(np.float32), posinf=1, neginf=-1).clip(-8, 8).astype(x.dtype)
        check(lambda x: (jnp.max(x, axis=0), jnp.min(x, axis=1), jnp.argmax(x, axis=0)), x, **EXACT)
        return
    check(lambda x: (jnp.sum(x, axis=0, dtype=x.dtype), jnp.prod(x, axis=1, dtype=x.dtype), jnp.max(x, axis=0),
                     jnp.min(x), jnp.argmax(x, axis=1), jnp.argmin(x, axis=0), jnp.cumsum(x, axis=0, dtype=x.dtype)),
          x, **EXACT)


@pytest.mark.parametrize("dtype", INTS)
def test_integer_dot_wraps_and_accumulates_in_i32(dtype):
    a, b = values(dtype, (9, 31), seed=12), values(dtype, (31, 5), seed=13)
    wide = np.int32 if np.iinfo(dtype).min < 0 else np.uint32
    check(lambda a, b: (jnp.matmul(a, b), lax.dot(a, b, preferred_element_type=wide)), a, b, **EXACT)


@pytest.mark.parametrize("result", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16"])
def test_integer_products_with_a_float_result(dtype, result):
    """preferred_element_type=float32 (or bfloat16, float16: int8 weights with a bf16 result, as quantized models
    write it) on integer operands: the float product of the converted operands, as XLA (exact in f32 here: every
    product and sum of these stays below 2^24; a 16-bit result is that sum rounded once)."""
    a, b = ((values(dtype, shape, seed=seed).astype(np.int32) % 97 - 48).astype(dtype)
            for shape, seed in (((2, 3, 9, 10), 16), ((4, 3, 4, 5), 17)))
    out = jnp.dtype(result)
    check(lambda a, b: (lax.conv(a, b, (1, 1), "VALID", preferred_element_type=out),
                        lax.dot(a[0, 0], a[1, 0].T, preferred_element_type=out)), a, b, **EXACT)


def test_bfloat16_dot_accumulates_in_f32():
    rng = np.random.default_rng(14)
    a = rng.uniform(-1, 1, (16, 40)).astype(jnp.bfloat16)
    b = rng.uniform(-1, 1, (40, 8)).astype(jnp.bfloat16)
    # one f32 accumulation rounded once to bf16 (cpu: the same, in its own order) and the f32 result itself
    check(lambda a, b: lax.dot(a, b, preferred_element_type=jnp.float32), a, b, rtol=1e-5, atol=1e-5)
    check(lambda a, b: a @ b, a, b, rtol=8e-3, atol=8e-3)


@pytest.mark.parametrize("dtype", EVERY)
def test_sort_and_top_k(dtype):
    x = values(dtype, (6, 50), seed=15)
    check(lambda x: (jnp.sort(x, axis=1), jnp.argsort(x, axis=0), lax.sort((x[0], x[1]), num_keys=1)), x, **EXACT)
    if dtype in NARROW_INTS + ("bfloat16",):
        check(lambda x: lax.top_k(x, 5), x, **EXACT)


@pytest.mark.parametrize("dtype", EVERY)
def test_data_movement(dtype):
    x = values(dtype, (12, 10), seed=16)
    idx = np.array([3, 0, 11, 3, 7], np.int32)

    def moves(x, i):
        return (x[i], x[2:9:3, ::-2], jnp.concatenate([x, x[:3]]), jnp.pad(x, ((1, 2), (0, 3))), x.T,
                jnp.roll(x, 3, axis=1), lax.dynamic_slice(x, (i[0], i[1]), (4, 5)),
                lax.dynamic_update_slice(x, x[:2, :3], (i[2], i[4])), jnp.broadcast_to(x[0], (3, 10)),
                x.at[i].set(x[0]), jnp.tile(x[:2], (2, 1)))

    if dtype != "bfloat16":
        check(moves, x, idx, **EXACT)
        return
    # XLA:CPU 0.12 on AVX512-BF16 hosts flushes bf16 subnormals to zero in some fused copies (x[0] broadcast here):
    # the exact reference is the same moves on cpu of the values widened to f32, narrowed back (both exact).
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "backend and device argument on jit is deprecated", DeprecationWarning)
        got = jax.jit(moves, backend=BACKEND)(x, idx)
        want = jax.jit(moves, backend="cpu")(x.astype(np.float32), idx)
    for index, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w).astype(x.dtype)
        assert g.dtype == w.dtype and g.shape == w.shape, index
        np.testing.assert_array_equal(g.astype(np.float32), w.astype(np.float32), err_msg=f"output {index}")
        np.testing.assert_array_equal(np.signbit(g.astype(np.float32)), np.signbit(w.astype(np.float32)))


@pytest.mark.parametrize("dtype", INTS + ("bfloat16",))
def test_scatter_add_and_max(dtype):
    x = values(dtype, (12, 10), seed=17)
    upd = values(dtype, (5, 10), seed=18)
    idx = np.array([3, 0, 11, 3, 7], np.int32)
    if dtype == "bfloat16":
        x = np.nan_to_num(x.astype(np.float32), posinf=2, neginf=-2).clip(-8, 8).astype(x.dtype)
        upd = np.nan_to_num(upd.astype(np.float32), posinf=2, neginf=-2).clip(-8, 8).astype(x.dtype)
    check(lambda x, u, i: (x.at[i].add(u), x.at[i].max(u), x.at[i].min(u)), x, upd, idx, **EXACT)


@pytest.mark.parametrize("dtype", INTS + FLOATS)  # jax has no bool iota
def test_iota(dtype):
    n = 300  # wraps in 8 bits; bf16 rounds above 256
    check(lambda: (lax.iota(np_dtype(dtype), n), lax.broadcasted_iota(np_dtype(dtype), (3, 4), 1)), **EXACT)


def test_a_model_step_in_bfloat16():
    rng = np.random.default_rng(19)
    w = rng.normal(size=(32, 16)).astype(jnp.bfloat16)
    x = rng.normal(size=(8, 32)).astype(jnp.bfloat16)

    def loss(w, x):
        return jnp.mean(jax.nn.relu(x @ w).astype(jnp.float32) ** 2)

    check(jax.value_and_grad(loss), w, x, rtol=2e-2, atol=2e-2)
