"""64-bit types with ``jax_enable_x64``: f64, int64, uint64 and complex128 run emulated on the ipu (the IPU has no
64-bit hardware; i64/u64 as pairs of 32-bit words, f64 in software, complex128 as pairs of those f64) and give cpu's
values. ``JAX_IPU_EMULATE_64BIT=0``
refuses them at compile time, as Graphcore's JAX does."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _conformance import BACKEND, CURRENT_SERIES, EXACT, check, enable_x64, run_both

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
    for dtype, advice in (("float64", "use f32"), ("int64", "use i32"), ("uint64", "use u32"),
                          ("complex128", "use complex64")):
        name = {"float64": "f64", "int64": "i64", "uint64": "u64", "complex128": "c128"}[dtype]
        with pytest.raises(Exception, match=rf"Unsupported element type {name}\b.*emulation is off.*{advice}"):
            jax.jit(lambda x: x * 3 + x, backend="ipu")(np.ones(3, dtype))


# ---- complex128: pairs of emulated f64 ----

C128_PARTS = [0.0, -0.0, 1.0, -1.5, 2.5, 1e-300, 1e300, np.inf, -np.inf, np.nan]


def complex128_pairs():
    """Every (a, b) of complex values made of the special parts (each part from C128_PARTS)."""
    parts = np.array(C128_PARTS)
    z = np.empty(parts.size ** 2, np.complex128)
    z.real, z.imag = np.repeat(parts, parts.size), np.tile(parts, parts.size)
    return np.repeat(z, z.size), np.tile(z, z.size)


def check_c128(f, *args, ulps=8):
    """Each part of each output within ``ulps`` ulps of the output's |value| of cpu's (NaNs matching NaNs): the
    standard test_complex.py holds c64's functions and divisions to, XLA:CPU's formulas being rounded at other
    steps than the emulator's pair arithmetic."""
    got, want = run_both(f, *args)
    for index, (g, w) in enumerate(zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want))):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (index, g.dtype, w.dtype, g.shape, w.shape)
        bound = ulps * np.finfo(np.float64).eps * np.abs(w)
        for part in (np.real, np.imag):
            gp, wp = part(g), part(w)
            with np.errstate(invalid="ignore"):
                bad = ~((gp == wp) | (np.isnan(gp) & np.isnan(wp)) | (np.abs(gp - wp) <= bound))
            assert not bad.any(), (f"output {index}: {int(bad.sum())} of {bad.size} parts differ by more than {ulps} "
                                   f"ulps of |result|; first: ipu {g[bad][0]!r}, cpu {w[bad][0]!r}")


def random128(shape, seed=0):
    z = np.empty(shape, np.complex128)
    z.real, z.imag = random64(np.float64, shape, seed), random64(np.float64, shape, seed + 100)
    return z


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "eq", "ne", "pow"])
def test_c128_binary_ops(op):
    """The pair arithmetic in binary64 on every pair of special values and on random ones: bit for bit where it is
    exactly rounded (sums, XLA:CPU's 4-multiply product with its fused multiply-adds, comparisons), a few ulps of
    |result| for Smith's division (its infinite and zero cases exactly) and the power (each series' algorithm)."""
    f = {"add": jnp.add, "sub": jnp.subtract, "mul": jnp.multiply, "div": jnp.divide, "eq": jnp.equal,
         "ne": jnp.not_equal, "pow": jax.lax.pow}[op]
    x, y = random128((1000,), 1), random128((1000,), 2)
    exact = op in ("add", "sub", "mul", "eq", "ne")
    (lambda *a: check(f, *a, **EXACT) if exact else check_c128(f, *a))(x, y)
    if op == "pow":  # XLA's special cases: 0^c, z^0, 1^w, inf^c; and a tiny and a huge |z| (jaxlib 0.12 keeps them)
        z = np.array([0, 0, 1, np.inf, 1e-160 + 1e-160j, 1e150 - 2e150j, 2 + 3j], np.complex128)
        w = np.array([2, 0, 3 + 1j, -2, -0.5, 0.5, 0], np.complex128)
        check_c128(f, z, w, ulps=C128_FUNCTION_ULPS)
    else:
        (lambda *a: check(f, *a, **EXACT) if exact else check_c128(f, *a))(*complex128_pairs())


# XLA:CPU's complex functions round their formulas' steps otherwise than the emulator's pair arithmetic (libm's f64
# functions, C99's for the inverse ones): jaxlib 0.12's agree with accurate ones to a few ulps of |result|, jaxlib
# 0.4.13's older formulas to ~150 (measured on 4,000 values of parts of scale 0.5 and 3 on both series). sinh is
# chlo's decomposition exp(z + log 1/2) - exp(-z + log 1/2) on cpu, which cancels for small |z| (hundreds of ulps at
# 0.5): tested at scale 3.
C128_FUNCTION_ULPS = 16 if CURRENT_SERIES else 256


@pytest.mark.parametrize("name", ["neg", "conj", "real", "imag", "abs", "sign", "exp", "expm1", "log", "log1p", "sqrt",
                                  "rsqrt", "tanh", "sin", "cos", "tan", "sinh", "cosh", "arcsinh", "arcsin",
                                  "arctan", "arctanh", "angle", "reciprocal"])
def test_c128_unary_ops(name):
    f = {"neg": jnp.negative, "conj": jnp.conj, "real": jnp.real, "imag": jnp.imag, "abs": jnp.abs, "sign": jnp.sign,
         "exp": jnp.exp, "expm1": jnp.expm1, "log": jnp.log, "log1p": jnp.log1p, "sqrt": jnp.sqrt,
         "rsqrt": jax.lax.rsqrt, "tanh": jnp.tanh, "sin": jnp.sin, "cos": jnp.cos, "tan": jnp.tan, "sinh": jnp.sinh,
         "cosh": jnp.cosh, "arcsinh": jnp.arcsinh, "arcsin": jnp.arcsin, "arctan": jnp.arctan,
         "arctanh": jnp.arctanh, "angle": jnp.angle, "reciprocal": jnp.reciprocal}[name]
    if name in ("neg", "conj", "real", "imag", "angle"):
        check(f, random128((2000,), 3), **EXACT)
        return
    few = name in ("abs", "sign", "sqrt", "rsqrt", "reciprocal")  # one or two roundings from XLA:CPU's
    for scale in ((3.0,) if name == "sinh" else (0.5, 3.0)):
        check_c128(f, random128((2000,), 3) * (scale / 3), ulps=4 if few else C128_FUNCTION_ULPS)


def test_c128_conversions():
    """complex128 from and to complex64, f64, f32 and integers, as XLA converts (each part; to a real type the
    real part)."""
    z = random128((64,), 4)

    def f(z, x, i):
        return [z.astype(jnp.complex64), z.astype(jnp.complex64).astype(jnp.complex128), x.astype(jnp.complex128),
                x.astype(jnp.float32).astype(jnp.complex128), i.astype(jnp.complex128), jnp.real(z).astype(jnp.float32),
                jax.lax.complex(x, x * 2)]

    check(f, z, random64(np.float64, (64,), 5), np.arange(64, dtype=np.int64) - 30, **EXACT)


def test_c128_products_reductions_and_sorts():
    """What the front end computes on the f64 parts: dot_general (four real products), sums and products, and
    sorts (lexicographic, as jax's comparators read the parts)."""
    a, b = random128((8, 16), 6), random128((16, 5), 7)
    check(lambda a, b: [a @ b, jnp.vdot(a[0], b[:, 0])], a, b, rtol=1e-13, atol=1e-13)
    z = random128((6, 50), 8)
    check(lambda z: [jnp.sum(z, axis=1), jnp.sum(z), jnp.prod(z[:, :5], axis=1)], z, rtol=1e-13, atol=1e-13)
    check(lambda z: [jnp.sort(z, axis=1), jnp.argsort(z[0])], z, **EXACT)


@pytest.mark.parametrize("name,shape", [("fft", (4, 64)), ("ifft", (3, 100)), ("rfft", (5, 96)), ("irfft", (2, 33)),
                                        ("fft2", (2, 8, 12)), ("rfftn", (2, 6, 10))])
def test_c128_fft(name, shape):
    """FFTs of f64 and complex128 values (what jnp.fft gives a float64 array): computed in double and kept so, each
    output within 16 f64 ulps of log2 N times the transform's scale of cpu's (pocketfft), as test_fft.py holds c64's
    to f32 ulps; a wrong sign, a missing 1/N or an f32 rounding misses it by orders of magnitude."""
    f = {"fft": jnp.fft.fft, "ifft": jnp.fft.ifft, "rfft": jnp.fft.rfft, "irfft": jnp.fft.irfft,
         "fft2": jnp.fft.fft2, "rfftn": lambda x: jnp.fft.rfftn(x, axes=(1, 2))}[name]
    x = random128(shape, 11) if name in ("fft", "ifft", "fft2", "irfft") else random64(np.float64, shape, 11)
    got, want = (np.asarray(v) for v in run_both(f, x))
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype)
    assert want.dtype in (np.complex128, np.float64)
    n = int(np.prod(shape[1:]))
    scale = max(float(np.max(np.abs(want))), float(np.sqrt(np.mean(np.abs(x) ** 2))))
    err = float(np.max(np.abs(got - want)))
    assert err <= 16 * np.finfo(np.float64).eps * np.log2(n + 1) * scale, (err, scale)


def test_c128_gradients_of_a_real_loss():
    """An optimiser's step on complex parameters (optax's tests run them with jax_enable_x64): the gradient of
    sum |x - t|^2, conjugated, applied to the parameters."""
    x, t = random128((10,), 9), random128((10,), 10)

    def step(x, t):
        g = jax.grad(lambda x: jnp.sum(jnp.abs(x - t) ** 2))(x)
        return x - 0.1 * jnp.conj(g)

    check(step, x, t, **EXACT)


def test_c128_values_round_trip():
    """16-byte elements in and out, and through the ops that move them (a reshape, a reversal, a select, a gather
    and a dynamic update), bit for bit."""
    z = np.empty(6, np.complex128)
    z.real, z.imag = [1, np.pi, np.nan, -0.0, 1e-310, np.inf], [2, -1e-300, np.inf, 5, -np.nan, 0]
    y = jax.device_put(z, jax.devices(BACKEND)[0])
    assert y.dtype == np.complex128 and np.asarray(y).tobytes() == z.tobytes()
    check(lambda z: [z.reshape(2, 3)[::-1], jnp.where(jnp.arange(6) % 2 == 0, z, z[::-1]), z[np.array([5, 0, 2])],
                     jax.lax.dynamic_update_slice(z, z[:2], (3,)), jnp.concatenate([z, z[1:3]]),
                     jnp.pad(z, 2)], z, **EXACT)
