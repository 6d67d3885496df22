"""The CHLO special functions (chlo.lgamma, chlo.digamma, chlo.bessel_i1e, chlo.next_after) and what jax builds on
them (gradients, scipy.special, jax.random's gamma family), ipu against cpu on the same inputs.

XLA expands these ops into fixed approximations before compiling for cpu; the emulator evaluates the same ones, so
the differences left come from XLA:CPU's own log/log1p/sin/cos, which differ from the host libm by an ulp or two.
Tolerances are therefore in ulps of the result, with a floor where the algorithm itself cancels terms of size ~1
(lgamma near its roots 1 and 2, digamma near its roots): an error of k ulps of max(|want|, floor).
"""

from __future__ import annotations

from typing import Dict, Tuple

import jax
import jax.numpy as jnp
import jax.scipy.special as jsp
import numpy as np
import pytest
from _conformance import random, run_both
from jax import lax


def assert_ulps(got, want, ulps: float, floor: float = 0.0, where: str = "") -> None:
    """|got - want| <= ulps * eps * max(|want|, floor) elementwise; NaN, infinities and signs of inf must match."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, where
    eps = float(np.finfo(want.dtype).eps)
    g, w = got.astype(np.float64), want.astype(np.float64)
    nan_ok = np.isnan(g) == np.isnan(w)
    assert nan_ok.all(), (f"{where}: NaN mismatch at {np.flatnonzero(~nan_ok)[:5]}:"
                          f" got {g[~nan_ok][:5]} want {w[~nan_ok][:5]}")
    inf = np.isinf(w) | np.isinf(g)
    assert (g[inf] == w[inf]).all(), f"{where}: infinities differ: got {g[inf]} want {w[inf]}"
    finite = np.isfinite(w) & np.isfinite(g)
    g, w = g[finite], w[finite]
    err = np.abs(g - w)
    bound = ulps * eps * np.maximum(np.abs(w), floor)
    bad = err > bound
    if bad.any():
        i = np.argmax(err / np.maximum(bound, 1e-300))
        raise AssertionError(f"{where}: {bad.sum()} of {err.size} beyond {ulps} ulp (floor {floor}); worst: got "
                             f"{g[i]!r} want {w[i]!r} ({err[i] / (eps * max(abs(w[i]), floor, 1e-300)):.1f} ulp)")


# Edge values: zeros, poles (0 and negative integers), just beside poles, halves, the roots of lgamma (1, 2) and of
# digamma (1.4616...), tiny and huge magnitudes, subnormals, infinities and NaN.
EDGES = [0.0, -0.0, 1.0, 2.0, -1.0, -2.0, -3.0, -10.0, -100.0, 0.5, -0.5, 1.5, -1.5, -2.5, 1.4616321, -0.999, -1.001,
         -4.9999, -5.0001, 1e-3, -1e-3, 1e-8, -1e-8, 1e-30, -1e-30, 1e-40, 7.999, 8.0, 8.001, 30.0, 100.0, 1e4, 1e6,
         1e10, 1e30, 3.4e38, -3.4e38, -1e7 - 0.5, np.inf, -np.inf, np.nan]
EDGES16 = [0.0, -0.0, 1.0, 2.0, -1.0, -2.0, -3.0, -10.0, 0.5, -0.5, 1.5, -1.5, -2.5, 1.462, -0.999, -1.001, 1e-3,
           -1e-3, 6e-8, 7.996, 8.0, 8.01, 30.0, 100.0, 1e4, 65504.0, -65504.0, np.inf, -np.inf, np.nan]

# name: (function, input range, f32 ulps, floor, share of random f32 inputs within 1 ulp). Measured worst (ipu vs
# cpu): lgamma 16 ulp (near poles, where log|sin(pi x)| and lgamma(1 - x) cancel), digamma 4, i1e 2; and 95%, 98.6%,
# 100% within 1 ulp. The exactly rounded function (scipy in f64) is up to 28, 11, 8 ulp from cpu and within 1 ulp for
# only 14-57%, 44-82%, 76-83%: the share is what tells XLA's algorithm from a libm call.
UNARY: Dict[str, Tuple] = {
    "lgamma": (lax.lgamma, (-20, 40), 32, 1.0, 0.93),
    "digamma": (lax.digamma, (-20, 40), 8, 1.0, 0.97),
    "bessel_i1e": (lax.bessel_i1e, (-30, 30), 4, 0.0, 0.99),
}


def inputs(dtype, low, high):
    edges = np.array(EDGES if dtype == "float32" else EDGES16, dtype)
    return [edges, random(dtype, (37, 53), seed=1, low=low, high=high),
            random(dtype, (100_003,), seed=2, low=-3, high=3), random(dtype, (0,), seed=3)]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_special_function(name, dtype):
    op, (low, high), ulps, floor, within_one = UNARY[name]
    xs = inputs(dtype, low, high)
    got, want = run_both(lambda *xs: [op(x) for x in xs] + [op(xs[1].T)], *xs)
    # f16 is computed in f32 and rounded once, on both sides: at most one f16 ulp apart.
    for i, (g, w) in enumerate(zip(got, want)):
        assert_ulps(g, w, ulps if dtype == "float32" else 1, floor, where=f"{name}<{dtype}> output {i}")
    if dtype == "float32":
        for i in (1, 2):  # the random inputs
            g, w = np.asarray(got[i], np.float64), np.asarray(want[i], np.float64)
            share = np.mean(np.abs(g - w) <= np.spacing(np.abs(w).astype(np.float32)))
            assert share >= within_one, f"{name} output {i}: only {share:.1%} within 1 ulp of cpu"


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_next_after_is_bit_identical(dtype):
    e = np.array(EDGES if dtype == "float32" else EDGES16, dtype)
    # every edge value towards every other (zeros both ways, infinities, NaN), and random pairs
    x, y = np.broadcast_arrays(e[:, None], e[None, :])
    a, b = random(dtype, (1001,), seed=1), random(dtype, (1001,), seed=2)
    got, want = run_both(lambda x, y, a, b: (lax.nextafter(x, y), lax.nextafter(a, b), lax.nextafter(b, a),
                                        jnp.nextafter(a, jnp.inf), jnp.nextafter(a, -jnp.inf)), x, y, a, b)
    for i, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype
        same = (g.view(np.uint16 if dtype == "float16" else np.uint32) == w.view(g.dtype.str.replace("f", "u"))) | (
            np.isnan(g) & np.isnan(w))
        assert same.all(), f"next_after<{dtype}> output {i}: got {g[~same][:5]} want {w[~same][:5]}"


# --- what jax builds on them ---------------------------------------------------------------------------------------

def test_gradients_through_lgamma_digamma_and_i1e():
    x = random("float32", (257,), seed=4, low=0.1, high=20)
    z = random("float32", (257,), seed=5, low=-20, high=20)
    got, want = run_both(lambda x, z: (jax.grad(lambda v: lax.lgamma(v).sum())(x),    # digamma
                                  jax.grad(lambda v: lax.digamma(v).sum())(x),   # polygamma(1): jax's zeta series
                                  jax.grad(lambda v: lax.bessel_i1e(v).sum())(z),  # i0e and i1e
                                  jax.vmap(jax.grad(jsp.gammaln))(x)), x, z)
    for i, (g, w) in enumerate(zip(got, want)):
        assert_ulps(g, w, 16, 1.0, where=f"gradient {i}")  # measured worst: 4.7 ulp


def test_scipy_special_built_on_them():
    a = random("float32", (301,), seed=6, low=0.2, high=15)
    b = random("float32", (301,), seed=7, low=0.2, high=15)
    u = random("float32", (301,), seed=8, low=0.01, high=0.99)

    def f(a, b, u):
        return (jsp.gammaln(a), jsp.gamma(a), jsp.betaln(a, b), jsp.digamma(a), jsp.polygamma(2, a),
                jsp.zeta(a + 1.5, b), jsp.multigammaln(a + 2, 3), jsp.i1(b), jsp.i1e(-b),
                jsp.gammainc(a, b), jsp.gammaincc(a, b), jsp.betainc(a, b, u))

    got, want = run_both(f, a, b, u)
    # Series, continued fractions and products of a few of the ops above: errors add up (measured worst: 110 ulp,
    # betainc; gammainc 63; gammaln and gamma 33 near lgamma's roots).
    for i, (g, w) in enumerate(zip(got, want)):
        assert_ulps(g, w, 256, 1e-3, where=f"scipy.special output {i}")


def test_random_gamma_family_and_its_gradient():
    # gamma samples (Marsaglia-Tsang rejection on normals: erf_inv, log) and their implicit gradient
    # (random_gamma_grad: a series in lgamma and digamma). The normals differ from cpu by a few ulp of log and
    # erf_inv, so samples agree to some ulp, not bit for bit; with these keys no accept/reject decision flips.
    key = jax.random.PRNGKey(3)
    alpha = random("float32", (500,), seed=9, low=0.1, high=10)

    def f(key, alpha):
        k1, k2, k3 = jax.random.split(key, 3)
        grad = jax.grad(lambda a: jax.random.gamma(k1, a).sum())(alpha)
        return (jax.random.gamma(k1, alpha), grad, lax.random_gamma_grad(alpha, alpha),
                jax.random.beta(k2, alpha, alpha[::-1]), jax.random.dirichlet(k3, alpha[:50]),
                jax.random.poisson(k3, alpha, dtype=jnp.int32))

    got, want = run_both(f, key, alpha)
    names = ["gamma", "gamma grad", "random_gamma_grad", "beta", "dirichlet"]
    for name, g, w in zip(names, got, want):
        assert_ulps(g, w, 64, 1e-3, where=name)  # measured worst: 26 ulp (the gamma gradient)
    np.testing.assert_array_equal(got[-1], want[-1], err_msg="poisson")
