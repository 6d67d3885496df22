"""64-bit types with ``jax_enable_x64``: f64, int64 and uint64 run emulated on the ipu (the IPU has no 64-bit
hardware; i64/u64 as pairs of 32-bit words, f64 in software) and give cpu's values. ``JAX_IPU_EMULATE_64BIT=0``
refuses them at compile time, as Graphcore's JAX does."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _conformance import BACKEND, EXACT, check, enable_x64, run_both

# libm's f64 functions (which XLA:CPU calls) against glibc's on the host: within a few ulps of 2^-52.
F64_TRANSCENDENTAL = {"rtol": 1e-14, "atol": 1e-300}

F64_SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 2.5, 3.5, 1e-300, 1.7e308, -1.7e308, 2.0 ** 53 + 2, 1e-310,
               np.inf, -np.inf, np.nan, 3.0000000000000004, -7.75]
I64_SPECIAL = [0, 1, -1, 2, 7, -7, 31, 32, 63, 64, 65, 2 ** 32 - 1, 2 ** 32, -(2 ** 32), 2 ** 40 + 3,
               2 ** 63 - 1, -(2 ** 63), 123456789012345]
U64_SPECIAL = [0, 1, 2, 7, 63, 64, 65, 2 ** 32 - 1, 2 ** 32, 2 ** 63, 2 ** 64 - 1, 123456789012345678]


@pytest.fixture(autouse=True)
def x64():
    with enable_x64():
        yield


def pairs(values, dtype):
    """Every (a, b) of the values: the two operands of a binary op."""
    v = np.array(values, dtype)
    return np.repeat(v, len(v)), np.tile(v, len(v))


def random64(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape) * 3
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


# ---- elementwise ----

@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "max", "min", "pow", "rem", "atan2", "nextafter"])
def test_f64_binary_ops(op):
    f = {"add": jnp.add, "sub": jnp.subtract, "mul": jnp.multiply, "div": jnp.divide, "max": jnp.maximum,
         "min": jnp.minimum, "pow": jax.lax.pow, "rem": jax.lax.rem, "atan2": jnp.arctan2,
         "nextafter": jnp.nextafter}[op]
    a, b = pairs(F64_SPECIAL, np.float64)
    exact = op in ("add", "sub", "mul", "div", "max", "min", "rem", "nextafter")
    check(f, a, b, **(EXACT if exact else F64_TRANSCENDENTAL))
    x, y = random64(np.float64, (1000,), 1), random64(np.float64, (1000,), 2)
    check(f, x, y, **(EXACT if exact else F64_TRANSCENDENTAL))


@pytest.mark.parametrize("name", ["neg", "abs", "sign", "floor", "ceil", "round", "sqrt", "rsqrt", "isfinite"])
def test_f64_exact_unary_ops(name):
    f = {"neg": jnp.negative, "abs": jnp.abs, "sign": jnp.sign, "floor": jnp.floor, "ceil": jnp.ceil,
         "round": jnp.round, "sqrt": jnp.sqrt, "rsqrt": jax.lax.rsqrt, "isfinite": jnp.isfinite}[name]
    check(f, np.array(F64_SPECIAL), **(EXACT if name != "rsqrt" else {"rtol": 2.3e-16}))


@pytest.mark.parametrize("name", ["exp", "expm1", "log", "log1p", "sin", "cos", "tan", "tanh", "logistic", "erf",
                                  "erfc", "sinh", "cosh", "arcsin", "arctan", "arcsinh", "cbrt", "lgamma",
                                  "digamma", "erf_inv"])
def test_f64_transcendental_ops(name):
    import jax.scipy.special as S

    f = {"exp": jnp.exp, "expm1": jnp.expm1, "log": jnp.log, "log1p": jnp.log1p, "sin": jnp.sin, "cos": jnp.cos,
         "tan": jnp.tan, "tanh": jnp.tanh, "logistic": jax.nn.sigmoid, "erf": S.erf, "erfc": S.erfc,
         "sinh": jnp.sinh, "cosh": jnp.cosh, "arcsin": jnp.arcsin, "arctan": jnp.arctan, "arcsinh": jnp.arcsinh,
         "cbrt": jnp.cbrt, "lgamma": S.gammaln, "digamma": S.digamma, "erf_inv": S.erfinv}[name]
    x = random64(np.float64, (2000,), 3)
    if name in ("log", "log1p", "lgamma", "digamma"):
        x = np.abs(x) + 0.01
    if name in ("arcsin", "erf_inv"):
        x = np.tanh(x) * 0.999
    # chlo expands lgamma, digamma and erf_inv for f64 as series whose last bits differ from libm's and Newton's
    # (and jaxlib 0.4.13's erfc as a rational approximation)
    tol = {"rtol": 1e-12, "atol": 1e-13} if name in ("lgamma", "digamma", "erf_inv", "erfc") else F64_TRANSCENDENTAL
    check(f, x, **tol)


@pytest.mark.parametrize("dtype", ["int64", "uint64"])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "floordiv", "rem", "max", "min", "and", "or", "xor", "shl",
                                "shr", "pow", "eq", "lt"])
def test_64_bit_integer_binary_ops_wrap_as_xla(dtype, op):
    f = {"add": jnp.add, "sub": jnp.subtract, "mul": jnp.multiply, "floordiv": jax.lax.div, "rem": jax.lax.rem,
         "max": jnp.maximum, "min": jnp.minimum, "and": jnp.bitwise_and, "or": jnp.bitwise_or,
         "xor": jnp.bitwise_xor, "shl": jax.lax.shift_left, "shr": jax.lax.shift_right_logical,
         "pow": lambda a, b: jax.lax.integer_pow(a, 3) + b, "eq": jnp.equal, "lt": jnp.less}[op]
    a, b = pairs(I64_SPECIAL if dtype == "int64" else U64_SPECIAL, dtype)
    check(f, a, b)
    check(f, random64(dtype, (3000,), 4), random64(dtype, (3000,), 5))


@pytest.mark.parametrize("dtype", ["int64", "uint64"])
def test_64_bit_integer_unary_ops(dtype):
    x = np.array(I64_SPECIAL if dtype == "int64" else U64_SPECIAL, dtype)
    check(lambda x: (-x, ~x, jax.lax.population_count(x), jax.lax.clz(x), jnp.abs(x), jnp.sign(x),
                     jax.lax.shift_right_arithmetic(x, np.array(5, dtype))), x)


def test_conversions_between_64_bit_and_narrow_types():
    x = np.array(F64_SPECIAL + [1 + 2.0 ** -11, 1 + 2.0 ** -11 + 2.0 ** -40, 65519.99, 1e-7, 2.0 ** 64, -2.0 ** 63,
                                3.0e9, -1.5, 0.9999999999999999])
    # f64 -> f16/bf16 as XLA:CPU on this host (once with AVX512-FP16, else through f32: 1 + 2^-11 + 2^-40 tells
    # them apart); f64 -> integers saturate; NaN -> 0
    check(lambda x: (x.astype(jnp.float32), x.astype(jnp.float16), x.astype(jnp.bfloat16), x.astype(jnp.int64),
                     x.astype(jnp.uint64), x.astype(jnp.int32), x.astype(jnp.uint8)), x)
    i = np.array(I64_SPECIAL, np.int64)
    check(lambda i: (i.astype(jnp.float64), i.astype(jnp.float32), i.astype(jnp.int32), i.astype(jnp.uint64),
                     i.astype(jnp.int8), i.astype(jnp.bool_)), i)
    u = np.array(U64_SPECIAL, np.uint64)
    check(lambda u: (u.astype(jnp.float64), u.astype(jnp.float32), u.astype(jnp.int64)), u)
    f = np.array([1.5, -2.25, 3.4e38, np.nan, -0.0], np.float32)
    check(lambda f: (f.astype(jnp.float64), f.astype(jnp.int64)), f)


def test_bitcasts_between_64_bit_types_and_32_bit_words():
    x = np.array(F64_SPECIAL[:-3])  # NaN payloads aside
    check(lambda x: (jax.lax.bitcast_convert_type(x, jnp.int64), jax.lax.bitcast_convert_type(x, jnp.uint32)), x)
    w = np.arange(8, dtype=np.uint32).reshape(4, 2) * 0x10000001
    check(lambda w: jax.lax.bitcast_convert_type(w, jnp.uint64), w)


# ---- what jax builds on them ----

@pytest.mark.parametrize("dtype", ["float64", "int64", "uint64"])
def test_reductions(dtype):
    x = random64(dtype, (37, 1001), 6)
    if dtype != "float64":
        x = x // 4096  # sums that do not overflow, and products that do (they wrap)
    sums = {"scale_ulps": 4} if dtype == "float64" else {}
    check(lambda x: (jnp.sum(x, axis=1), jnp.sum(x), jnp.cumsum(x[0])), x, **sums)
    check(lambda x: (jnp.max(x, 0), jnp.min(x, 1), jnp.argmax(x, 1), jnp.argmin(x, 0)), x)
    check(lambda x: jnp.prod(x[:3, :20], 1), x, **({"rtol": 1e-14} if dtype == "float64" else {}))  # another order


def test_f64_sum_of_many_terms_keeps_f64_precision():
    # 1 + 2^-40 per term: lost in f32, kept in f64
    x = np.full(100_000, 1.0 + 2.0 ** -40)
    got, want = run_both(jnp.sum, x)
    assert float(got) == float(want) and float(got) != 100_000.0


@pytest.mark.parametrize("dtype", ["float64", "int64"])
def test_dot_and_matmul(dtype):
    a, b = random64(dtype, (33, 70), 7), random64(dtype, (70, 21), 8)
    if dtype == "int64":
        a, b = a // 2 ** 20, b // 2 ** 20
        check(lambda a, b: (a @ b, jnp.einsum("ij,ij->i", a[:21, :21], b[:21].T)), a, b)
    else:
        check(lambda a, b: (a @ b, jnp.einsum("ij,ij->i", a[:21, :21], b[:21].T)), np.abs(a) + 0.5, np.abs(b) + 0.5,
              scale_ulps=8)


def test_f64_convolution():
    x = np.abs(random64(np.float64, (2, 3, 12, 12), 9)) + 0.5
    w = np.abs(random64(np.float64, (4, 3, 3, 3), 10)) + 0.5
    check(lambda x, w: jax.lax.conv(x, w, (1, 1), "SAME"), x, w, scale_ulps=8)


@pytest.mark.parametrize("dtype", ["float64", "int64", "uint64"])
def test_sort_argsort_and_top_k(dtype):
    x = random64(dtype, (5, 300), 11)
    if dtype == "float64":
        x[0, :4] = [np.nan, -0.0, 0.0, -np.inf]
    check(lambda x: (jnp.sort(x, 1), jnp.argsort(x[1:], 1)), x)
    check(lambda x: jax.lax.top_k(x[1:], 7), x)


def test_gather_scatter_and_dynamic_slices_with_int64_indices():
    x = random64(np.float64, (50, 8), 12)
    idx = np.array([3, 0, 49, 7, 7, 12], np.int64)
    check(lambda x, i: (x[i], x.at[i].add(1.5), x.at[i, 2].set(-1.0), jax.lax.dynamic_slice(x, (i[0], i[1]), (4, 3)),
                        jnp.take_along_axis(x[:6], i[:, None] % 8, 1)), x, idx)


def test_loops_with_64_bit_carries():
    def f(x, n):
        def body(i, c):
            acc, k = c
            return acc * 1.0000001 + x[i % x.shape[0]], k + i * (2 ** 33)
        return jax.lax.fori_loop(0, n, body, (jnp.float64(0), jnp.int64(1)))

    # XLA:CPU contracts acc * c + x into one fused multiply-add; the emulator rounds the product: an ulp a step
    check(f, random64(np.float64, (10,), 13), np.int64(1000), rtol=1e-12)
    check(lambda xs: jax.lax.scan(lambda c, x: (c * 0.5 + x, c), 0.0, xs), random64(np.float64, (64,), 14))


def test_f64_gradients_and_a_linear_solve():
    def loss(w, x):
        return jnp.mean(jnp.tanh(x @ w) ** 2)

    w, x = random64(np.float64, (16, 8), 15) * 0.1, random64(np.float64, (32, 16), 16)
    check(jax.value_and_grad(loss), w, x, rtol=1e-12, atol=1e-14)
    a = random64(np.float64, (12, 12), 17) + 12 * np.eye(12)
    b = random64(np.float64, (12,), 18)
    got, _ = run_both(jnp.linalg.solve, a, b)
    np.testing.assert_allclose(a @ np.asarray(got), b, rtol=1e-12, atol=1e-12)


def test_values_are_64_bit_on_the_device_and_back():
    x = np.array([2.0 ** 60 + 1, -3], np.int64)
    y = jax.device_put(x, jax.devices(BACKEND)[0])
    assert y.dtype == np.int64 and np.array_equal(np.asarray(y), x)
    f = jax.device_put(np.array([np.pi, 1e-300]), jax.devices(BACKEND)[0])
    assert f.dtype == np.float64 and np.asarray(f).tolist() == [np.pi, 1e-300]


def test_emulation_off_refuses_64_bit_types_with_advice(monkeypatch):
    if BACKEND != "ipu":
        pytest.skip("checks the ipu's error")
    monkeypatch.setenv("JAX_IPU_EMULATE_64BIT", "0")
    for dtype, advice in (("float64", "use f32"), ("int64", "use i32"), ("uint64", "use u32")):
        name = {"float64": "f64", "int64": "i64", "uint64": "u64"}[dtype]
        with pytest.raises(Exception, match=rf"Unsupported element type {name}\b.*emulation is off.*{advice}"):
            jax.jit(lambda x: x * 3 + x, backend="ipu")(np.ones(3, dtype))
