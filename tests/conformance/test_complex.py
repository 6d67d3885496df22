"""complex64 on the ipu, emulated as pairs of f32, against cpu on the same inputs: buffers and data movement
(bit-exact), the arithmetic XLA:CPU defines on c64 (exact where it is exactly rounded, a few ulp of |result|
elsewhere), special values (inf/nan parts, huge and tiny magnitudes), reductions and gradients through complex
intermediates. c128 (jax_enable_x64) is test_x64.py's."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _conformance import BACKEND, CURRENT_SERIES, compile_text, run_both
from jax import lax

C64 = np.complex64


def assert_close(got, want, rtol=0.0, atol=0.0, scale=None):
    """Real and imaginary parts separately; NaNs must match NaNs, infinities their signs. rtol is relative to
    |want| (the magnitude of the complex result when `scale` is None: a part near 0 of a large result is judged
    against the result's size, as an ulp-level error of complex arithmetic is)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    mag = np.abs(want).astype(np.float64) if scale is None else scale
    with np.errstate(invalid="ignore"):
        mag = np.where(np.isfinite(mag), mag, 0.0)
    for part in (np.real, np.imag) if np.iscomplexobj(want) else (lambda x: x,):
        g, w = part(got).astype(np.float64), part(want).astype(np.float64)
        assert np.array_equal(np.isnan(g), np.isnan(w)), (g, w)
        finite = np.isfinite(w)
        assert np.array_equal(g[~finite & ~np.isnan(w)], w[~finite & ~np.isnan(w)]), (g, w)
        assert np.all(np.isfinite(g[finite])), (g, w)
        err = np.abs(g[finite] - w[finite])
        bound = atol + rtol * np.broadcast_to(mag, w.shape)[finite]
        bad = err > bound
        assert not bad.any(), f"max excess {np.max(err - bound)} at {np.argwhere(bad)[:5].tolist()}: " \
                              f"got {g[finite][bad][:5]}, want {w[finite][bad][:5]}"


def crandom(shape, seed=0, low=-4.0, high=4.0):
    rng = np.random.default_rng(seed)
    return (rng.uniform(low, high, shape) + 1j * rng.uniform(low, high, shape)).astype(C64)


# Parts that find edge cases: zeros of both signs, infinities, NaN, huge and tiny magnitudes.
PARTS = [0.0, -0.0, 1.0, -2.5, 1e-30, -3e-38, 1e30, 3e38, np.inf, -np.inf, np.nan]
SPECIAL = np.array([complex(a, b) for a in PARTS for b in PARTS], dtype=C64)

F32_ULPS = 8 * np.finfo(np.float32).eps  # a few ulp of |result|


def test_round_trip_is_bit_exact():
    x = SPECIAL
    y = jax.device_put(x, jax.devices(BACKEND)[0])
    assert y.dtype == C64
    back = np.asarray(y)
    assert back.view(np.uint32).tolist() == x.view(np.uint32).tolist()


@pytest.mark.parametrize("name, f", [
    ("reshape_transpose", lambda x: x.reshape(11, 11).T),
    ("broadcast", lambda x: jnp.broadcast_to(x[:5], (3, 5))),
    ("slice_reverse", lambda x: x[::-3]),
    ("concatenate_pad", lambda x: jnp.concatenate([jnp.pad(x[:4], 2), x])),
    ("gather", lambda x: x[jnp.array([3, 0, 120, 7])]),
    ("scatter", lambda x: x.at[jnp.array([1, 5])].set(x[:2])),
    ("dynamic_slice", lambda x: lax.dynamic_update_slice(x, lax.dynamic_slice(x, (jnp.int32(5),), (9,)), (100,))),
    ("select", lambda x: jnp.where(jnp.arange(x.size) % 2 == 0, x, x[::-1])),
    ("conj_real_imag", lambda x: (jnp.conj(x), jnp.real(x), jnp.imag(x), lax.complex(jnp.imag(x), jnp.real(x)))),
    ("while", lambda x: lax.fori_loop(0, 3, lambda i, c: jnp.roll(c, 1), x)),
    ("cond", lambda x: lax.cond(x.size > 3, lambda c: c[::-1], lambda c: c, x)),
])
def test_data_movement_is_exact(name, f):
    got, want = run_both(f, SPECIAL)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        assert np.array_equal(g.view(np.uint32), w.view(np.uint32)) or np.array_equal(g, w, equal_nan=True), name


@pytest.mark.parametrize("name, f", [
    ("add", lambda x, y: x + y), ("subtract", lambda x, y: x - y), ("negate", lambda x, y: -x),
    ("eq", lambda x, y: (x == y, x != y, x == x[::-1], x != x[::-1])),
])
def test_exact_ops(name, f):
    x, y = SPECIAL, SPECIAL[::-1].copy()
    got, want = run_both(f, x, y)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        assert_close(g, w)


MULDIV = [("multiply", lambda x, y: x * y), ("divide", lambda x, y: x / y)]


@pytest.mark.parametrize("name, f", MULDIV)
def test_multiply_divide_random(name, f):
    x, y = crandom((1000,), 1), crandom((1000,), 2)
    assert_close(*run_both(f, x, y), rtol=F32_ULPS)


@pytest.mark.parametrize("name, f", MULDIV)
def test_multiply_divide_special(name, f):
    # every pair of special values: NaNs, infinities and zeros exactly where XLA:CPU puts them; finite results
    # to an ulp-level error of |result|
    x = np.repeat(SPECIAL, SPECIAL.size)
    y = np.tile(SPECIAL, SPECIAL.size)
    got, want = run_both(f, x, y)
    assert_close(got, want, rtol=F32_ULPS)


def test_divide_huge_and_tiny():
    # Smith's scaling keeps these finite (the naive (ac + bd) / (c^2 + d^2) overflows or underflows to 0/0)
    x = np.array([3e37 + 3e37j, 2e-37 + 2e-37j, 1 + 1j, 2e30 - 1e30j], C64)
    y = np.array([1e38 + 2e38j, 3e-37 - 1e-37j, 1e30 + 1e30j, 1e10 + 3e10j], C64)
    got, want = run_both(lambda a, b: a / b, x, y)
    assert np.all(np.isfinite(np.asarray(got))) and np.all(np.asarray(got) != 0)
    assert_close(got, want, rtol=F32_ULPS)


@pytest.mark.parametrize("name, f, special", [
    ("abs", jnp.abs, True), ("sign", jnp.sign, False), ("exp", jnp.exp, False), ("expm1", jnp.expm1, False),
    ("log", jnp.log, True), ("log1p", jnp.log1p, False), ("sqrt", jnp.sqrt, True), ("rsqrt", lax.rsqrt, False),
    ("tanh", jnp.tanh, False), ("sin", jnp.sin, False), ("cos", jnp.cos, False), ("tan", jnp.tan, False),
    ("sinh", jnp.sinh, False), ("cosh", jnp.cosh, False), ("arcsin", jnp.arcsin, False),
    ("arccos", jnp.arccos, False), ("arctan", jnp.arctan, False), ("arcsinh", jnp.arcsinh, False),
    ("arccosh", jnp.arccosh, False), ("arctanh", jnp.arctanh, False),
    ("square", jnp.square, True), ("reciprocal", jnp.reciprocal, False), ("angle", jnp.angle, True),
])
def test_unary(name, f, special):
    for x in (crandom((2000,), 3), crandom((500,), 4, -1e-3, 1e-3)):
        got, want = run_both(f, x)
        if name in ACCURATE:  # XLA:CPU's formula cancels here: judge the ipu against float64
            want = ACCURATE[name](x.astype(np.complex128)).astype(C64)
        assert_close(got, want, rtol=F32_ULPS)
    if special:
        got, want = run_both(f, SPECIAL)
        if name == "log":  # cpu forms |z| first, which overflows for |z| > 3.4e38; log|z| itself is finite
            exact = np.log(SPECIAL.astype(np.complex128))
            with np.errstate(invalid="ignore"):
                fix = np.isinf(want.real) & np.isfinite(exact.real)
            want = np.where(fix, exact.astype(C64), want)
        assert_close(got, want, rtol=F32_ULPS)


def _expm1(z):
    a, b = z.real, z.imag
    return np.expm1(a) * np.cos(b) - 2 * np.sin(b / 2) ** 2 + 1j * np.exp(a) * np.sin(b)


# Near 0, XLA:CPU computes complex expm1 as e^a cos b - 1 and sinh b as (e^b - e^-b)/2, which lose every digit of
# a small result (expm1(1e-6j) has real part -5e-13; cpu gives 0), and tan and sinh of small values too; the ipu
# keeps them. A naive expm1 fails here. (sin, cos, sinh and cosh are cpu's own, cancellation included: see
# test_functions_are_cpus_bit_for_bit.)
ACCURATE = {
    "expm1": _expm1,
    "log1p": lambda z: 0.5 * np.log1p(z.real * (2 + z.real) + z.imag ** 2) + 1j * np.arctan2(z.imag, 1 + z.real),
    "tan": np.tan,
    # the inverse functions are C99's computed in double on the ipu; XLA:CPU's f32 formulas lose digits near 0
    "arcsin": np.arcsin, "arccos": np.arccos, "arctan": np.arctan, "arcsinh": np.arcsinh, "arccosh": np.arccosh,
    "arctanh": np.arctanh,
}


def test_sqrt_near_the_negative_real_axis_keeps_its_small_real_part():
    # sqrt(-a + ib) for |b| << a has a small real part |b| / (2 sqrt(a)). jaxlib 0.4.13's XLA:CPU computes complex
    # sqrt in polar form, sqrt|z| (cos(t/2) + i sin(t/2)) with t = atan2(b, -a), where t/2 rounds to f32's pi/2 and
    # cos of it is -4.4e-8: the real part comes out -4.4e-8 sqrt|z| (-8.7e-8 for -4 + 1e-7j; -8.1e11 for
    # -3.4e38 + 0.33j: fuzz seed 20285421 #1365). The ipu computes C99's csqrt, as numpy and jaxlib 0.12's cpu do:
    # each part to a few ulps of itself, judged against float64.
    z = np.array([-4 + 1e-7j, -4 - 1e-6j, -1e10 + 1e-3j, -3.4e38 + 0.328j, -1 + 1e-9j, -1e20 + 1e10j,
                  -2.5 + 3e-30j, -1e-30 + 1e-36j], C64)
    got = np.asarray(jax.jit(jnp.sqrt, backend=BACKEND)(z))
    exact = np.sqrt(z.astype(np.complex128))
    for part in (np.real, np.imag):
        assert_close(part(got), part(exact).astype(np.float32), rtol=F32_ULPS, scale=np.abs(part(exact)))


def test_abs_huge_and_tiny():
    x = np.array([3e38 + 3e38j, 2e-37 + 2e-37j, -2e38j, 1e-37 + 0j, complex(np.inf, np.nan),
                  complex(np.nan, -np.inf)], C64)
    assert_close(*run_both(jnp.abs, x), rtol=F32_ULPS)


def test_abs_of_a_complex_square_is_its_magnitude():
    """jax 0.4.13's simplifier drops an abs of a real A * A (it is never negative), not of a complex one: |z * z| is
    real, z * z is not (the ipu gave back the complex product's buffer for the real result: fuzz seed 20286401
    #1136)."""
    z = crandom((4, 6, 6), seed=3)
    got, want = run_both(lambda z: (jnp.abs(z * z), jnp.abs(z) * jnp.abs(z)), z)
    for g, w in zip(got, want):
        assert_close(g, w, rtol=F32_ULPS)


def test_power():
    x, y = crandom((1000,), 5, -2, 2), crandom((1000,), 6, -2, 2)
    assert_close(*run_both(lambda a, b: a ** b, x, y), rtol=64 * np.finfo(np.float32).eps)
    z = np.array([0, 0, 1 + 1j], C64)
    assert_close(*run_both(lambda a, b: a ** b, z, np.array([0, 2, 0], C64)), rtol=F32_ULPS)
    assert_close(*run_both(lambda a: a ** 3, x), rtol=F32_ULPS)  # integer_pow: products


def test_power_of_tiny_and_huge_magnitudes():
    # |z|^2 under- or overflows f32 for |z| < 1e-19 or > 1e19. jaxlib 0.12's XLA:CPU scales |z| and stays finite
    # (1e-30 ** -0.5 = 1e15: optax's adafactor on complex parameters); 0.4's forms a^2 + b^2 and gives NaN. Whichever
    # the series, the ipu must give cpu's values: NaN where cpu has NaN, finite where it is finite. Exponents are
    # operands (runtime w: each series' formula, exp, log and fused multiply-adds as its XLA:CPU compiles them, so
    # bit for bit) and constants of the program (z ** -0.5, as users write it: LLVM specialises pow for a constant
    # exponent, so an ulp or two of slack).
    rng = np.random.default_rng(7)
    mag = 10.0 ** rng.uniform(-37, 37, 2000)
    z = (mag * np.exp(1j * rng.uniform(-np.pi, np.pi, 2000))).astype(C64)
    z[:8] = [1e-30, 1e-30 + 1e-30j, 1e-20j, 3e20, 1e30 + 1e30j, -1e-30, 1e38, 2 + 1j]
    w = (rng.uniform(-3, 3, 2000) + 1j * rng.choice([0.0, 1.0], 2000) * rng.uniform(-2, 2, 2000)).astype(C64)
    assert_close(*run_both(lambda a, b: a ** b, z, w))
    for e in (-0.5, 0.5, 2.5, 1.5 + 0.5j):
        assert_close(*run_both(lambda a, e=e: a ** e, z), rtol=64 * np.finfo(np.float32).eps)
    got, want = run_both(lambda a: 0 * a ** -0.5, z[:1])
    assert_close(got, want)


def test_convert_to_and_from_real():
    x = crandom((100,), 7)
    r = np.linspace(-3, 3, 100, dtype=np.float32)
    got, want = run_both(lambda a, b: (b.astype(C64), (b.astype(jnp.int32)).astype(C64), a.real.astype(jnp.int32)),
                         x, r)
    for g, w in zip(got, want):
        assert_close(g, w)


@pytest.mark.parametrize("name, f", [
    ("sum", lambda x: jnp.sum(x, axis=1)), ("sum_all", jnp.sum), ("mean", lambda x: jnp.mean(x, axis=0)),
    ("prod", lambda x: jnp.prod(x[:, :8], axis=1)),
])
def test_reductions(name, f):
    x = crandom((37, 53), 8, -1.5, 1.5)
    got, want = run_both(f, x)
    # a sum's error is relative to the sum of magnitudes it adds, not to its (possibly cancelled) result
    scale = run_both(lambda a: jnp.sum(jnp.abs(a)), x)[1]
    assert_close(got, want, rtol=64 * np.finfo(np.float32).eps, scale=None if name == "prod" else float(scale))


@pytest.mark.parametrize("name, f", [
    ("conv", lambda x, w: lax.conv_general_dilated(x, w, (1, 2), "SAME", rhs_dilation=(2, 1))),
    ("conv_grad", jax.grad(lambda x, w: jnp.sum(jnp.abs(lax.conv_general_dilated(x, w, (1, 1), "VALID")) ** 2),
                           argnums=(0, 1))),
    ("convolve", lambda x, w: jnp.convolve(x.ravel()[:40], w.ravel()[:7])),
])
def test_convolution(name, f):
    """A c64 convolution is four f32 convolutions of the parts. Each output is a sum of products that cancel, so its
    error is judged against the largest output (a wrong sign in a part's combination is off by the output itself)."""
    x, w = crandom((2, 3, 9, 8), 16), crandom((4, 3, 3, 2), 17)
    got, want = run_both(f, x, w)
    for g, v in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        assert_close(g, v, rtol=64 * np.finfo(np.float32).eps, scale=float(np.max(np.abs(v))))


def test_grad_through_complex_intermediates():
    def loss(a, b):
        z = lax.complex(a, b)
        w = jnp.exp(z) * jnp.conj(z) / (z + 3.0) + jnp.sqrt(z * z + 1.0)
        return jnp.sum(jnp.abs(w) ** 2 + jnp.real(jnp.log(w)))

    a = np.linspace(-1, 1, 64, dtype=np.float32)
    b = np.linspace(0.5, 2, 64, dtype=np.float32)
    got, want = run_both(jax.grad(loss, argnums=(0, 1)), a, b)
    for g, w in zip(got, want):
        assert_close(g, w, rtol=1e-5, atol=1e-5)


def test_complex_grad_holomorphic():
    z = crandom((16,), 9)
    got, want = run_both(jax.grad(lambda x: jnp.sum(jnp.sin(x) * x), holomorphic=True), z)
    assert_close(got, want, rtol=F32_ULPS * 4)


def test_wrong_answer_would_fail():
    # the comparison can fail: a conjugated product is far from the product
    x, y = crandom((10,), 10), crandom((10,), 11)
    got, _ = run_both(lambda a, b: a * b, x, y)
    with pytest.raises(AssertionError):
        assert_close(got, np.conj(x * y), rtol=F32_ULPS)


@pytest.mark.parametrize("name, f, shapes", [
    ("matmul", lambda a, b: a @ b, ((17, 33), (33, 9))),
    ("batched", lambda a, b: jnp.einsum("bij,bjk->bik", a, b), ((3, 5, 7), (3, 7, 4))),
    ("vdot", lambda a, b: jnp.vdot(a, b), ((64,), (64,))),
])
def test_dot_general(name, f, shapes):
    a, b = crandom(shapes[0], 12), crandom(shapes[1], 13)
    got, want = run_both(f, a, b)
    depth = shapes[0][-1]
    scale = float(np.max(np.abs(a))) * float(np.max(np.abs(b))) * depth  # a sum's error is relative to its terms
    assert_close(got, want, rtol=8 * np.finfo(np.float32).eps, scale=scale)


def test_batched_matmul_is_planned_as_f32_matmuls():
    """A c64 dot_general is four f32 dot_generals of the parts, mapped over the tiles by the matmul planner: ten
    300x300 products fit in tile memory (each tile receiving all of rhs, as a naive c64 kernel would, does not)."""
    if BACKEND != "ipu":
        pytest.skip("tile memory is the ipu's")
    if jax.devices(BACKEND)[0].num_tiles < 1472:  # 57 MB of operands and results: a whole chip's worth
        pytest.skip("needs the whole chip's tile memory (this run emulates fewer tiles)")
    a = jax.ShapeDtypeStruct((10, 300, 300), jnp.complex64)
    jax.jit(lambda x, y: x @ y, backend=BACKEND).lower(a, a).compile()  # tile memory is checked at compile time


@pytest.mark.parametrize("name, f", [
    ("sort", jnp.sort),
    ("argsort", jnp.argsort),
    ("sort along axis 0", lambda a: jnp.sort(a.reshape(4, 6), axis=0)),
    ("sort with a payload", lambda a: lax.sort((a, jnp.arange(24)), num_keys=1)),
    ("two complex keys", lambda a: lax.sort((a, a[::-1]), num_keys=2)),
    ("unique", lambda a: jnp.unique(a, size=24)),
    ("lexsort", lambda a: jnp.lexsort((a.real, a))),
])
def test_sort(name, f):
    """Complex values sort by real part, then imaginary part, NaNs last, as jax's comparator orders them: the ipu
    sorts the f32 parts."""
    rng = np.random.default_rng(14)
    a = (rng.integers(0, 3, 24) + 1j * rng.integers(-2, 2, 24) + 0.5j * rng.standard_normal(24)).astype(C64)
    a[3], a[5], a[7] = np.nan, complex(1, np.nan), -0.0  # NaN in either part, and a signed zero
    got, want = run_both(f, a)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("name, f", [
    ("max", lambda a: jnp.max(a, axis=0)),
    ("min", lambda a: jnp.min(a, axis=1)),
    ("max_initial", lambda a: jnp.max(a, axis=1, initial=1 + 0j)),
    ("max_empty", lambda a: jnp.max(a[:0], axis=0, initial=-2 - 1j)),
    ("max_pool", lambda a: lax.reduce_window(a, complex(-np.inf, 0), lax.max, (2, 2), (1, 1), "VALID")),
    ("cummax", lambda a: lax.cummax(a, axis=1)),
    ("iota", lambda a: a + jnp.arange(6, dtype=jnp.complex64)),
])
def test_lexicographic_reductions(name, f):
    """max/min of complex values compare real parts, then imaginary parts, in a body of real/imag/compare/select:
    the ipu reduces the f32 parts with that body. Ties in the real part decide on the imaginary part."""
    rng = np.random.default_rng(15)
    a = (rng.integers(-2, 3, (5, 6)) + 1j * rng.integers(-2, 3, (5, 6))).astype(C64)
    got, want = run_both(f, a)
    np.testing.assert_array_equal(got, want)


def test_sort_comparator_reading_complex_otherwise_is_refused_clearly():
    with pytest.raises(Exception, match=r"applies stablehlo\.abs to complex values"):
        _custom_comparator_sort()


def _custom_comparator_sort():
    """A stablehlo.sort whose comparator compares abs(lhs) > abs(rhs), compiled from StableHLO text."""
    text = """
    module @custom {
      func.func public @main(%x: tensor<8xcomplex<f32>>) -> tensor<8xcomplex<f32>> {
        %0 = "stablehlo.sort"(%x) ({
        ^bb0(%a: tensor<complex<f32>>, %b: tensor<complex<f32>>):
          %ma = stablehlo.abs %a : (tensor<complex<f32>>) -> tensor<f32>
          %mb = stablehlo.abs %b : (tensor<complex<f32>>) -> tensor<f32>
          %c = stablehlo.compare GT, %ma, %mb, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
          stablehlo.return %c : tensor<i1>
        }) {dimension = 0 : i64, is_stable = true} : (tensor<8xcomplex<f32>>) -> tensor<8xcomplex<f32>>
        return %0 : tensor<8xcomplex<f32>>
      }
    }"""
    return compile_text(text)


@pytest.mark.parametrize("name, f", [
    ("abs of a chain", lambda z, w, x: jnp.abs(z * w + 1) * 2.0 + x),
    ("compare into real arithmetic", lambda z, w, x: (z == w).astype(jnp.float32) * x + 1.0),
    ("real part of a product", lambda z, w, x: jnp.real(z * z) * 2.0 - x),
    ("real into complex", lambda z, w, x: (x * 2.0 + 1.0).astype(C64) * z),
])
def test_chains_mixing_complex_and_real(name, f):
    """Elementwise chains are fused into one vertex (JAX_IPU_FUSION); ops that read or make c64 stay on the complex
    kernels, and the real ops around them still give cpu's answers."""
    z, w = crandom((37, 53), seed=1), crandom((37, 53), seed=2)
    w[::3] = z[::3]  # some equal elements for the compare
    x = np.random.default_rng(3).uniform(-4, 4, (37, 53)).astype(np.float32)
    got, want = run_both(f, z, w, x)
    # A few ulp of the terms' size: the results cancel (abs(...) * 2 + x), so |result| alone would be too tight.
    terms = 2 * (np.abs(z) * (np.abs(w) + np.abs(z)) + 1) + 2 * np.abs(x) + 1
    assert_close(got, want, rtol=F32_ULPS, scale=terms.astype(np.float64))


@pytest.mark.skipif(not CURRENT_SERIES, reason="jaxlib 0.4.13's complex expm1 (e^a cos b - 1) cancels near 0; the "
                    "ipu's is accurate there (test_unary)")
def test_expm1_is_jaxlib_012s_bit_for_bit():
    """jaxlib 0.12's complex expm1, (expm1(a) cos b + cosm1(b)) + i e^a sin b with its own expm1 and Cephes' cosm1:
    cpu's bits, over the unit disc, near 0, far out and at the special values."""
    rng = np.random.default_rng(31)
    r, t = rng.uniform(0, 2, 20000), rng.uniform(-np.pi, np.pi, 20000)
    parts = [0.0, -0.0, 1e-30, 1e-6, 0.5, 0.785, 0.786, 1.0, 3.0, 20.0, -20.0, 88.0, 89.0, np.inf, -np.inf, np.nan]
    z = np.concatenate([r * np.exp(1j * t), crandom((4000,), 32, -1e-3, 1e-3), crandom((4000,), 33, -30, 30),
                        np.array([complex(a, b) for a in parts for b in parts])]).astype(C64)
    got, want = (np.asarray(v) for v in run_both(jnp.expm1, z))
    for part in ("real", "imag"):
        g, w = getattr(got, part), getattr(want, part)
        same = (g.view(np.uint32) == w.view(np.uint32)) | (np.isnan(g) & np.isnan(w))
        assert same.all(), f"{part}: {int((~same).sum())} of {z.size} differ; first {z[~same][:4]}: " \
            f"ipu {g[~same][:4]} cpu {w[~same][:4]}"


@pytest.mark.parametrize("name", ["exp", "sin", "cos", "sinh", "cosh"])
def test_functions_are_cpus_bit_for_bit(name):
    """Complex exp, sin, cos, sinh and cosh as cpu computes them, bit for bit. jaxlib 0.4.13's XLA:CPU expands sin
    and cos itself, sin(a+bi) = sin a (e/2 + 0.5/e) + i cos a (e/2 - 0.5/e) with e = e^b, which cancels near the real
    axis (sin(1e-6j) is 9.54e-7j, sin(4.1e-16j) is 0 and cos(4.1e-16j) is 1 - 0i on cpu), and exp with its own
    e^a; jax 0.12 writes sin and cos as real ops itself. sinh and cosh are jax's chlo expansion on both series,
    e^(z + log 1/2) -+ e^(log 1/2 - z) (sinh(1e-6 + 1e-6j) has real part 9.83e-7), its products fused into the sum
    on jaxlib 0.4.13. Over the unit disc, near 0, far out, small imaginary parts and the special values. (Not
    jaxlib 0.12's e^a beyond f32's range, where its exp avoids the overflow of e^a when e^a cos b or e^a sin b is
    finite: exp(100 + 4.1e-16i) is inf + 1.1e28i on cpu and inf + inf i on the ipu; nor its sinh and cosh of
    NaN + 0i, whose imaginary part is 0 on cpu and NaN on the ipu.)"""
    rng = np.random.default_rng(34)
    r, t = rng.uniform(0, 2, 4000), rng.uniform(-np.pi, np.pi, 4000)
    tiny = rng.standard_normal(2000) * 3 + 1j * rng.standard_normal(2000) * np.exp2(rng.integers(-40, 4, 2000))
    parts = [0.0, -0.0, 1e-40, 4.1e-16, 1e-6, 0.5, 1.0, 3.0, 20.0, -20.0, 89.0, 100.0, np.inf, -np.inf, np.nan]
    reals = [a for a in parts if not (CURRENT_SERIES and (abs(a) > 88 or (np.isnan(a) and name in ("sinh", "cosh"))))]
    z = np.concatenate([r * np.exp(1j * t), tiny, crandom((2000,), 35, -30, 30),
                        np.array([complex(a, b) for a in reals for b in parts])]).astype(C64)
    got, want = (np.asarray(v) for v in run_both(getattr(jnp, name), z))
    for part in ("real", "imag"):
        g, w = getattr(got, part), getattr(want, part)
        same = (g.view(np.uint32) == w.view(np.uint32)) | (np.isnan(g) & np.isnan(w))
        assert same.all(), f"{part}: {int((~same).sum())} of {z.size} differ; first {z[~same][:4]}: " \
            f"ipu {g[~same][:4]} cpu {w[~same][:4]}"


def test_tanh_as_xla_computes_it():
    """Complex tanh is XLA:CPU's formula (from e^2a - 1 and e^-2a - 1) with its special values, bit for bit on cpu's
    jaxlib 0.4.13 for finite operands: the old quotient (tanh a + i tan b) / (1 + i tanh a tan b) gave
    tanh(30 + 1i) = 1 - 2.7e-8i (cpu 1 + 1.6e-26i) and NaN for tanh(+-inf + i NaN) (cpu +-1 + 0i)."""
    inf, nan = np.inf, np.nan
    parts = [0.0, -0.0, 1e-6, 0.5, 1.0, 3.0, 9.0, 30.0, -30.0, 1e30, inf, -inf, nan]
    z = np.array([complex(a, b) for a in parts for b in parts], C64)
    got, want = run_both(jnp.tanh, z)
    got, want = np.asarray(got), np.asarray(want)
    for part in ("real", "imag"):
        g, w = getattr(got, part), getattr(want, part)
        assert np.array_equal(np.isnan(g), np.isnan(w)), (part, z[np.isnan(g) != np.isnan(w)])
        big = np.abs(z.real) >= 9  # beyond tanh's saturation: signs and exact limits
        assert np.array_equal(np.signbit(g[big & ~np.isnan(w)]), np.signbit(w[big & ~np.isnan(w)])), part
        assert_close(g, w, rtol=8 * np.finfo(np.float32).eps)
