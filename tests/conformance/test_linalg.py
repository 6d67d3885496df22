"""jnp.linalg / jax.scipy.linalg / lax.linalg on the ipu against cpu (LAPACK) on the same well-conditioned inputs.

The ipu runs jax_ipu.backend.linalg's pure-JAX lowerings. Tolerances are a few hundred f32 ulps of the result's scale: a
wrong sign, a swapped row or a dropped pivot changes entries by O(1) and fails. Eigen- and singular vectors are
defined up to sign, so those are compared after fixing each vector's sign (and by reconstruction).
"""

from __future__ import annotations

import warnings
from typing import Any, List

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
from _conformance import BACKEND, CURRENT_SERIES, REFERENCE
from jax import lax

TOL = {"rtol": 2e-4, "atol": 2e-4}


def run(f: Any, *args: Any) -> List[List[np.ndarray]]:
    """[ipu leaves, cpu leaves] of jit(f)(*args)."""
    out = []
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "backend and device argument on jit is deprecated", DeprecationWarning)
        for backend in (BACKEND, REFERENCE):
            leaves = jax.tree_util.tree_leaves(jax.jit(f, backend=backend)(*args))
            out.append([np.asarray(x) for x in leaves])
    return out


def same(f: Any, *args: Any, **tol: Any) -> List[np.ndarray]:
    got, want = run(f, *args)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_allclose(g, w, **(tol or TOL))
    return got


def _normal(rng: Any, dtype: Any, *shape: int) -> np.ndarray:
    """Standard normal values of `dtype`; complex64: independent real and imaginary parts."""
    x = rng.standard_normal(shape)
    return (x + 1j * rng.standard_normal(shape) if dtype == np.complex64 else x).astype(dtype)


def general(shape: Any, seed: int = 0) -> np.ndarray:
    """Random normal matrices: not diagonally dominant, so LU must pivot; well conditioned at these sizes."""
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    n = shape[-1]
    return (a + 2 * np.eye(n, dtype=np.float32) * np.sign(a[..., range(n), range(n)])[..., None, :]
            if shape[-2] == n else a).astype(np.float32)


def spd(shape: Any, seed: int = 0) -> np.ndarray:
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    n = shape[-1]
    return (a @ np.swapaxes(a, -1, -2) / n + np.eye(n, dtype=np.float32)).astype(np.float32)


def fix_signs(v: np.ndarray) -> np.ndarray:
    """Each column (vector) times the sign of its largest-magnitude entry."""
    idx = np.argmax(np.abs(v), axis=-2)[..., None, :]
    return v * np.sign(np.take_along_axis(v, idx, axis=-2))


SIZES = [(1, 1), (4, 4), (7, 7), (16, 16), (3, 5, 5)]


def test_runs_on_ipu():
    assert BACKEND == "ipu" and jax.devices(BACKEND)[0].platform == "ipu"


@pytest.mark.parametrize("shape", SIZES)
def test_cholesky(shape):
    a = spd(shape, seed=1)
    same(lambda a: (jnp.linalg.cholesky(a), jsl.cholesky(a, lower=False)), a)


def test_cholesky_reads_lower_triangle_and_flags_non_pd():
    a = spd((6, 6), seed=2)
    garbage = np.triu(np.full((6, 6), 100.0, np.float32), 1)
    same(lambda a: lax.linalg.cholesky(a, symmetrize_input=False), np.tril(a) + garbage)
    bad = a.copy()
    bad[3, 3] = -5.0
    got, want = run(jnp.linalg.cholesky, bad)
    assert np.isnan(np.tril(want[0])[np.tril_indices(6)]).all()  # cpu: the whole factor is NaN (then tril'd)
    np.testing.assert_array_equal(np.isnan(got[0]), np.isnan(want[0]))
    singular = np.ones((2, 2), np.float32)  # positive semi-definite: potrf fails on the last, zero pivot
    got, want = run(jnp.linalg.cholesky, singular)
    assert np.isnan(want[0][np.tril_indices(2)]).all()
    np.testing.assert_array_equal(np.isnan(got[0]), np.isnan(want[0]))


@pytest.mark.parametrize("left_side", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transpose_a", [True, False])
@pytest.mark.parametrize("unit_diagonal", [True, False])
def test_triangular_solve(left_side, lower, transpose_a, unit_diagonal):
    a = general((2, 6, 6), seed=3) + 4 * np.eye(6, dtype=np.float32)
    b = general((2, 6, 3) if left_side else (2, 3, 6), seed=4)
    # the other triangle holds junk that must be ignored
    same(lambda a, b: lax.linalg.triangular_solve(a, b, left_side=left_side, lower=lower, transpose_a=transpose_a,
                                                  unit_diagonal=unit_diagonal), a, b)


def test_scipy_triangular_and_cholesky_solves():
    a, b = spd((5, 5), seed=5), general((5, 2), seed=6)
    same(lambda a, b: (jsl.solve_triangular(jnp.tril(a), b, lower=True),
                       jsl.solve_triangular(jnp.triu(a), b[:, 0], trans=1),
                       jsl.cho_solve(jsl.cho_factor(a), b)), a, b)


@pytest.mark.parametrize("shape", [(4, 4), (7, 7), (8, 5), (5, 8), (2, 6, 4)])
def test_qr(shape):
    a = general(shape, seed=7)
    same(lambda a: (jnp.linalg.qr(a), jnp.linalg.qr(a, mode="complete"), jnp.linalg.qr(a, mode="r")), a)


@pytest.mark.parametrize("shape", [(4, 4), (9, 9), (16, 16), (3, 5, 5)])
def test_lu_pivots_match(shape):
    a = general(shape, seed=8)
    got, want = run(lax.linalg.lu, a)
    np.testing.assert_array_equal(got[1], want[1])  # pivots: a dropped pivot or a wrong choice fails here
    np.testing.assert_array_equal(got[2], want[2])
    np.testing.assert_allclose(got[0], want[0], **TOL)
    if a.ndim == 2:  # jax.scipy.linalg.lu takes one matrix
        same(lambda a: jsl.lu(a), a)
    b = general(shape[:-1] + (2,), seed=9)
    same(lambda a, b: jsl.lu_solve(jsl.lu_factor(a), b), a, b)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
@pytest.mark.parametrize("lower", [True, False])
def test_tridiagonal_matches_sytrd(dtype, lower):
    """The packed reflectors, d, e and taus of LAPACK's sytrd/hetrd (cpu), from the one triangle it reads; a column
    that is already zero below the off-diagonal gives the identity reflector (tau 0; for complex only when the
    off-diagonal element is real)."""
    rng = np.random.default_rng(15)
    a = rng.standard_normal((2, 7, 7)).astype(np.float32)
    if dtype == np.complex64:
        a = (a + 1j * rng.standard_normal((2, 7, 7))).astype(dtype)
    a[1, 2:, 0] = a[1, 0, 2:] = a[1, :5, 6] = a[1, 6, :5] = 0  # the first step's column, for lower and for upper
    for x in (a, a[0, :1, :1], a[0, :2, :2]):
        same(lambda x: lax.linalg.tridiagonal(x, lower=lower), x, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_hessenberg_matches_gehrd(dtype):
    """The packed reflectors and taus of LAPACK's gehrd (cpu), and jax.scipy.linalg.hessenberg's H and Q."""
    rng = np.random.default_rng(18)
    a = rng.standard_normal((2, 7, 7)).astype(np.float32)
    if dtype == np.complex64:
        a = (a + 1j * rng.standard_normal((2, 7, 7))).astype(dtype)
    for x in (a, a[0, :1, :1], a[0, :2, :2]):
        same(lax.linalg.hessenberg, x, rtol=1e-5, atol=1e-5)
    same(lambda x: jsl.hessenberg(x, calc_q=True), a[1], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
@pytest.mark.parametrize("shape", [(1, 1), (5, 5), (3, 6, 6), (24, 24)])
def test_eig(dtype, shape):
    """Nonsymmetric eig: the eigenvalues are cpu's (geev) as a set (neither is sorted), and the left and right
    eigenvectors have residuals of a backward-stable algorithm, unit norm and their largest component real."""
    rng = np.random.default_rng(16)
    a = rng.standard_normal(shape).astype(np.float32)
    if dtype == np.complex64:
        a = (a + 1j * rng.standard_normal(shape)).astype(dtype)
    got, want = run(lambda a: lax.linalg.eig(a), a)
    w, vl, vr = got
    n, eps = shape[-1], np.finfo(np.float32).eps
    dist = np.abs(w[..., :, None] - want[0][..., None, :])
    assert np.all(dist.min(axis=-1) <= 100 * n * eps * np.linalg.norm(a, axis=(-2, -1))[..., None])
    assert np.all(dist.min(axis=-2) <= 100 * n * eps * np.linalg.norm(a, axis=(-2, -1))[..., None])
    ah = np.conj(np.swapaxes(a, -1, -2))
    bound = 20 * (n + 1) * eps * np.linalg.norm(a, axis=(-2, -1))
    assert np.all(np.linalg.norm(a @ vr - w[..., None, :] * vr, axis=(-2, -1)) <= bound)
    assert np.all(np.linalg.norm(ah @ vl - np.conj(w)[..., None, :] * vl, axis=(-2, -1)) <= bound)
    for v in (vl, vr):
        np.testing.assert_allclose(np.linalg.norm(v, axis=-2), 1, rtol=1e-5)
        big = np.take_along_axis(v, np.argmax(np.abs(v), axis=-2)[..., None, :], axis=-2)
        np.testing.assert_allclose(big.imag, 0, atol=1e-6)


def test_complex_schur_and_sqrtm():
    """The complex Schur form: T upper triangular, Z unitary, a = Z T Z^H (a Schur form is not unique, so not
    compared with cpu's entry for entry); sqrtm, built on it, against cpu's."""
    rng = np.random.default_rng(19)
    a = (rng.standard_normal((2, 9, 9)) + 1j * rng.standard_normal((2, 9, 9))).astype(np.complex64)
    t, z = (np.asarray(x) for x in jax.jit(jsl.schur, static_argnames="output", backend=BACKEND)(a, output="complex"))
    np.testing.assert_array_equal(np.tril(t, -1), 0)
    np.testing.assert_allclose(np.conj(np.swapaxes(z, -1, -2)) @ z, np.broadcast_to(np.eye(9), z.shape), atol=2e-5)
    np.testing.assert_allclose(z @ t @ np.conj(np.swapaxes(z, -1, -2)), a, atol=5e-5)
    spd_a = spd((6, 6), seed=20)
    same(jsl.sqrtm, spd_a, rtol=1e-4, atol=1e-4)


def test_real_schur_form_and_funm():
    """The real Schur form (jax.scipy.linalg.schur's default, lax.linalg.schur of a real matrix): Z orthogonal,
    a = Z T Z^T, T quasi-upper-triangular with gees' standardised 2x2 blocks (equal diagonal entries, b c < 0, one
    per complex pair; none adjacent) and cpu's eigenvalues; not compared with cpu's factors entry for entry (a Schur
    form is not unique). funm, built on it, against cpu's."""
    rng = np.random.default_rng(23)
    rotation = np.array([[0, -2, 0, 0], [2, 0, 0, 0], [0, 0, 1, 5], [0, 0, 0, 1]], np.float32)  # +-2i; 1 twice
    mats = [rng.standard_normal((3, 12, 12)).astype(np.float32), rotation[None],
            np.triu(rng.standard_normal((1, 7, 7))).astype(np.float32), spd((1, 6, 6), seed=24),
            rng.standard_normal((1, 2, 2)).astype(np.float32), rng.standard_normal((1, 1, 1)).astype(np.float32)]
    for a in mats:
        n = a.shape[-1]
        t, z = (np.asarray(x, np.float64)
                for x in jax.jit(jsl.schur, static_argnames="output", backend=BACKEND)(a, output="real"))
        t_only = np.asarray(jax.jit(lambda m: lax.linalg.schur(m, compute_schur_vectors=False)[0],
                                    backend=BACKEND)(a), np.float64)
        np.testing.assert_array_equal(t_only, t)
        np.testing.assert_allclose(np.swapaxes(z, -1, -2) @ z, np.broadcast_to(np.eye(n), z.shape), atol=3e-6)
        scale = max(1.0, float(np.abs(a).max()))
        np.testing.assert_allclose(z @ t @ np.swapaxes(z, -1, -2), a, atol=5e-6 * n * scale)
        want = np.asarray(jax.jit(jnp.linalg.eigvals, backend=REFERENCE)(a))
        for tb, wb in zip(t, want):
            np.testing.assert_array_equal(np.tril(tb, -2), 0)
            sub = np.flatnonzero(np.diag(tb, -1))
            assert not np.any(np.diff(sub) == 1), f"adjacent 2x2 blocks: {sub}"
            for i in sub:  # standardised: a complex pair, equal diagonal entries
                assert tb[i, i] == tb[i + 1, i + 1] and tb[i, i + 1] * tb[i + 1, i] < 0, tb[i:i + 2, i:i + 2]
            got = np.linalg.eigvals(tb)
            assert np.sum(np.abs(got.imag) > 0) == 2 * len(sub)
            np.testing.assert_allclose(np.sort_complex(got), np.sort_complex(wb), atol=2e-5 * n * scale)
    a = 0.5 * rng.standard_normal((5, 5)).astype(np.float32)
    same(lambda m: jsl.funm(m, jnp.exp), a, rtol=2e-4, atol=2e-5)
    # an inf or NaN anywhere: T all NaN, as gees (cpu) leaves it
    bad = np.stack([np.array([[1, np.inf], [0, 1]], np.float32), np.eye(2, dtype=np.float32)])
    got, want = run(lambda m: lax.linalg.schur(m)[0], bad)
    np.testing.assert_array_equal(got[0], want[0])


def test_eigvals_of_non_finite_and_gradient():
    got, _ = run(jnp.linalg.eigvals, np.array([[np.inf]], np.float32))
    assert np.isnan(got[0]).all()
    a = general((4, 4), seed=17)
    same(jax.grad(lambda a: jnp.sum(jnp.linalg.eigvals(a).real)), a, rtol=1e-3, atol=1e-3)


def test_lu_of_singular_and_rectangular_matrices():
    """A zero pivot leaves its column unscaled, as getrf does: det of a singular matrix is 0 and its gradient
    finite, where dividing by the pivot (jax's generic rule) gives NaN."""
    rank2 = np.array([[50, -30, 45], [-30, 90, -81], [45, -81, 81]], np.float32)
    zero_col = general((5, 5), seed=12)
    zero_col[:, 2] = 0
    for a in (np.zeros((3, 3), np.float32), zero_col, general((2, 6, 4), seed=13), general((4, 7), seed=14)):
        got, want = run(lax.linalg.lu, a)
        np.testing.assert_array_equal(got[1], want[1])
        np.testing.assert_array_equal(got[2], want[2])
        np.testing.assert_allclose(got[0], want[0], **TOL)
        assert not np.isnan(got[0]).any()
    for a in (np.zeros((3, 3), np.float32), zero_col, rank2):
        same(lambda a: (jnp.linalg.det(a), jax.grad(jnp.linalg.det)(a)), a, rtol=1e-3, atol=1e-2)


@pytest.mark.parametrize("shape", [(1, 1), (4, 4), (9, 9), (3, 5, 5)])
def test_solve_inv_det_slogdet(shape):
    a, b = general(shape, seed=10), general(shape[:-1] + (3,), seed=11)
    same(lambda a, b: (jnp.linalg.solve(a, b), jnp.linalg.inv(a), jnp.linalg.slogdet(a)), a, b)
    same(jnp.linalg.det, a, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (5, 5), (8, 8), (17, 17), (3, 6, 6)])
def test_eigh(shape):
    a = spd(shape, seed=12) - 1.5 * np.eye(shape[-1], dtype=np.float32)  # mixed-sign eigenvalues
    got, want = run(lambda a: jnp.linalg.eigh(a), a)
    np.testing.assert_allclose(got[0], want[0], **TOL)  # eigenvalues, ascending
    np.testing.assert_allclose(fix_signs(got[1]), fix_signs(want[1]), rtol=1e-3, atol=1e-3)
    w, v = got
    np.testing.assert_allclose((v * w[..., None, :]) @ np.swapaxes(v, -1, -2), a, **TOL)
    got, want = run(lambda a: (jnp.linalg.eigvalsh(a, UPLO="U"), jsl.eigh(a, eigvals_only=True)),
                    np.triu(a) + np.tril(np.ones_like(a), -1))
    np.testing.assert_allclose(got[0], want[0], **TOL)


@pytest.mark.parametrize("shape", [(4, 4), (7, 5), (5, 7), (2, 6, 4)])
def test_svd(shape):
    a = general(shape, seed=13)
    got, want = run(lambda a: jnp.linalg.svd(a, full_matrices=False), a)
    u, s, vh = got
    np.testing.assert_allclose(s, want[1], **TOL)
    np.testing.assert_allclose((u * s[..., None, :]) @ vh, a, **TOL)
    np.testing.assert_allclose(fix_signs(u), fix_signs(want[0]), rtol=1e-3, atol=1e-3)
    same(lambda a: jnp.linalg.svd(a, compute_uv=False), a)


def test_lstsq_pinv():
    a, b = general((8, 4), seed=14), general((8, 2), seed=15)
    got, want = run(lambda a, b: (jnp.linalg.lstsq(a, b)[0], jnp.linalg.pinv(a), jnp.linalg.matrix_rank(a)), a, b)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-3)


def test_gradients():
    a, s, b = general((5, 5), seed=16), spd((5, 5), seed=17), general((5, 2), seed=18)
    w = general((5, 5), seed=19)
    fns = {
        "cholesky": lambda s: jnp.sum(jnp.linalg.cholesky(s) * w),
        "eigh": lambda s: jnp.sum(jnp.linalg.eigh(s)[0] * jnp.arange(5.0)) + jnp.sum(jnp.linalg.eigh(s)[1] ** 2 * w),
        "svd": lambda a: jnp.sum(jnp.linalg.svd(a, compute_uv=False) * jnp.arange(1.0, 6.0)),
        "qr": lambda a: jnp.sum(jnp.linalg.qr(a)[0] * w) + jnp.sum(jnp.linalg.qr(a)[1] * w.T),
        "solve": lambda a: jnp.sum(jnp.linalg.solve(a, b) * w[:, :2]),
        "det": lambda a: jnp.linalg.det(a),
        "slogdet": lambda a: jnp.linalg.slogdet(a)[1],
    }
    for name, f in fns.items():
        x = s if name in ("cholesky", "eigh") else a
        got, want = run(jax.grad(f), x)
        np.testing.assert_allclose(got[0], want[0], rtol=2e-3, atol=2e-3, err_msg=name)


def test_f16_computed_in_f32():
    # cpu (LAPACK) has no f16 linalg: compared with numpy in f64 on the f16-rounded inputs. jax 0.4.13 takes f16
    # for cholesky; the current series refuses it itself (on every backend), so there only triangular_solve.
    a = spd((6, 6), seed=20)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "backend and device argument on jit is deprecated", DeprecationWarning)
        got = jax.jit(lambda a: (lax.linalg.triangular_solve(a.astype(jnp.float16), a.astype(jnp.float16),
                                                             left_side=True, lower=True),
                                 () if CURRENT_SERIES else jnp.linalg.cholesky(a.astype(jnp.float16))),
                      backend=BACKEND)(a)
    solved = np.asarray(got[0])
    assert solved.dtype == np.float16
    np.testing.assert_allclose(solved, np.linalg.solve(np.tril(a).astype(np.float16).astype(np.float64),
                                                       a.astype(np.float16).astype(np.float64)), rtol=1e-2, atol=1e-2)
    if not CURRENT_SERIES:
        factor = np.asarray(got[1])
        assert factor.dtype == np.float16
        np.testing.assert_allclose(factor, np.linalg.cholesky(a.astype(np.float64)), rtol=5e-3, atol=5e-3)


def test_gaussian_process_regression():
    """GP regression with an RBF kernel as JAX's example does it: marginal likelihood through cholesky/cho_solve,
    a few gradient steps on the log hyperparameters, then the posterior mean and variance."""
    rng = np.random.default_rng(21)
    x = np.sort(rng.uniform(-3, 3, (24, 1)).astype(np.float32), axis=0)
    y = (np.sin(2 * x[:, 0]) + 0.1 * rng.standard_normal(24)).astype(np.float32)
    xt = np.linspace(-3, 3, 11, dtype=np.float32)[:, None]

    def kernel(p, a, b):
        d = jnp.sum((a[:, None, :] - b[None, :, :]) ** 2, -1)
        return jnp.exp(p[0]) * jnp.exp(-0.5 * d / jnp.exp(2 * p[1]))

    def nll(p, x, y):
        k = kernel(p, x, x) + (jnp.exp(p[2]) + 1e-4) * jnp.eye(x.shape[0])
        chol = jnp.linalg.cholesky(k)
        alpha = jsl.cho_solve((chol, True), y)
        return 0.5 * y @ alpha + jnp.sum(jnp.log(jnp.diag(chol))) + 0.5 * x.shape[0] * jnp.log(2 * jnp.pi)

    def fit_predict(x, y, xt):
        p = jnp.zeros(3)
        for _ in range(5):
            p = p - 0.05 * jax.grad(nll)(p, x, y)
        k = kernel(p, x, x) + (jnp.exp(p[2]) + 1e-4) * jnp.eye(x.shape[0])
        chol = jnp.linalg.cholesky(k)
        ks = kernel(p, xt, x)
        mean = ks @ jsl.cho_solve((chol, True), y)
        v = jsl.solve_triangular(chol, ks.T, lower=True)
        var = jnp.diag(kernel(p, xt, xt)) - jnp.sum(v * v, 0)
        return p, nll(p, x, y), mean, var

    got = same(fit_predict, x, y, xt, rtol=1e-3, atol=1e-3)
    assert np.abs(got[2] - np.sin(2 * xt[:, 0])).max() < 0.5  # and it actually regresses


# ---------------------------------------------------------------------------------------------------- complex64

def complex_general(shape: Any, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
    return (a + 3 * np.eye(shape[-1], dtype=np.complex64)) if shape[-2] == shape[-1] else a


def hermitian_pd(shape: Any, seed: int) -> np.ndarray:
    a = complex_general(shape, seed)
    return (a @ np.conj(np.swapaxes(a, -1, -2)) / shape[-1] + np.eye(shape[-1])).astype(np.complex64)


def fix_phases(v: np.ndarray) -> np.ndarray:
    """Eigenvectors of a Hermitian matrix are defined up to a unit complex factor: make each one's largest entry
    real and positive."""
    idx = np.argmax(np.abs(v), axis=-2)[..., None, :]
    pivot = np.take_along_axis(v, idx, axis=-2)
    return v * (np.conj(pivot) / np.abs(pivot))


@pytest.mark.parametrize("shape", [(1, 1), (5, 5), (2, 4, 4)])
def test_complex_cholesky_and_solves(shape):
    h, b = hermitian_pd(shape, seed=30), complex_general(shape[:-1] + (2,), seed=31)
    h_bad = h.copy()
    h_bad[..., -1, -1] = -1  # not positive definite: all NaN, as zpotrf's failure gives on cpu
    same(lambda h, b: (jnp.linalg.cholesky(h), jsl.cho_solve(jsl.cho_factor(h), b),
                       jsl.solve_triangular(jnp.tril(h), b, lower=True, trans="C"),
                       jsl.solve_triangular(jnp.triu(h), b, trans="T")), h, b)
    got, want = run(jnp.linalg.cholesky, h_bad)
    np.testing.assert_array_equal(np.isnan(got[0]), np.isnan(want[0]))


@pytest.mark.parametrize("shape", [(4, 4), (6, 3), (3, 6), (2, 5, 4)])
def test_complex_qr_matches_zgeqrf(shape):
    same(lambda a: (jnp.linalg.qr(a), jnp.linalg.qr(a, mode="complete")), complex_general(shape, seed=32))


@pytest.mark.parametrize("shape", [(4, 4), (2, 6, 6)])
def test_complex_lu_solve_inv_det(shape):
    a, b = complex_general(shape, seed=33), complex_general(shape[:-1] + (3,), seed=34)
    got, want = run(lax.linalg.lu, a)
    np.testing.assert_array_equal(got[1], want[1])
    same(lambda a, b: (jnp.linalg.solve(a, b), jnp.linalg.inv(a), jnp.linalg.slogdet(a)), a, b)
    same(jnp.linalg.det, a, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (7, 7), (2, 5, 5)])
def test_complex_eigh(shape):
    h = hermitian_pd(shape, seed=35) - 1.5 * np.eye(shape[-1], dtype=np.complex64)
    h[..., range(shape[-1]), range(shape[-1])] += 0.25j  # LAPACK ignores the diagonal's imaginary parts
    got, want = run(jnp.linalg.eigh, h)
    assert got[0].dtype == np.float32
    np.testing.assert_allclose(got[0], want[0], **TOL)
    np.testing.assert_allclose(fix_phases(got[1]), fix_phases(want[1]), rtol=1e-3, atol=1e-3)
    w, v = got
    herm = np.tril(h) + np.conj(np.swapaxes(np.tril(h, -1), -1, -2))
    herm[..., range(shape[-1]), range(shape[-1])] = np.real(herm[..., range(shape[-1]), range(shape[-1])])
    np.testing.assert_allclose((v * w[..., None, :]) @ np.conj(np.swapaxes(v, -1, -2)), herm, **TOL)


@pytest.mark.parametrize("shape", [(4, 4), (6, 3), (2, 3, 5)])
def test_complex_svd_and_pinv(shape):
    a = complex_general(shape, seed=36)
    got, want = run(lambda a: (jnp.linalg.svd(a, compute_uv=False), jnp.linalg.pinv(a)), a)
    np.testing.assert_allclose(got[0], want[0], **TOL)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-3, atol=1e-3)
    u, s, vh = run(lambda a: jnp.linalg.svd(a, full_matrices=False), a)[0]
    np.testing.assert_allclose((u * s[..., None, :]) @ vh, a, **TOL)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
@pytest.mark.parametrize("shape", [(0, 0), (3, 0, 0), (2, 4, 4)])
def test_strict_promotion_and_empty_matrices(dtype, shape):
    """The lowerings are traced under the user's configuration: JAX's own linalg tests run with strict dtype
    promotion and rank promotion raising, and with empty matrices."""
    a = general(shape, seed=40).astype(dtype) if shape[-1] else np.zeros(shape, dtype)
    s = (a @ np.conj(np.swapaxes(a, -1, -2)) + np.broadcast_to(np.eye(shape[-1], dtype=dtype), shape)).astype(dtype)
    with jax.numpy_dtype_promotion("strict"), jax.numpy_rank_promotion("raise"):
        got, want = run(lambda a, s: (jnp.linalg.eigvalsh(s), jnp.linalg.inv(s), jnp.linalg.cholesky(s),
                                      jnp.linalg.qr(a)[1], jnp.linalg.svd(a, compute_uv=False)), a, s)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(np.abs(g), np.abs(w), rtol=1e-3, atol=1e-3)  # |R|: signs follow LAPACK anyway


@pytest.mark.skipif(not hasattr(jax, "export"), reason="jax.export is the current series'")
def test_shape_polymorphic_export_of_lu_and_qr():
    """jax.export with symbolic batch and matrix sizes: the ipu's own lu and qr lowerings take them (their loops run
    min(m, n) steps, a symbolic dimension), and each concrete call gives cpu's factors."""
    b, m, n = jax.export.symbolic_shape("b, m, n", constraints=["m >= n"])

    def f(x):
        lu, pivots, perm = lax.linalg.lu(x)
        q, r = jnp.linalg.qr(x)
        return lu, pivots, perm, q, r

    exported = jax.export.export(jax.jit(f), platforms=["ipu", "cpu"])(jax.ShapeDtypeStruct((b, m, n), np.float32))
    rng = np.random.default_rng(0)
    for shape in ((1, 3, 3), (2, 5, 4), (3, 7, 2)):
        x = rng.standard_normal(shape).astype(np.float32)
        got = jax.jit(exported.call, backend=BACKEND)(x)
        want = jax.jit(exported.call, backend=REFERENCE)(x)
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not CURRENT_SERIES, reason="jax 0.4.13 has no perturb_singular (nor eigh_tridiagonal's vectors)")
@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_perturbed_tridiagonal_solve_and_eigh_tridiagonal_vectors(dtype):
    """``lax.linalg.tridiagonal_solve(..., perturb_singular=True)``, which jax implements for cpu and gpu only, and
    ``jax.scipy.linalg.eigh_tridiagonal(..., eigvals_only=False)``, whose inverse iteration calls it on singular
    systems: as cpu's kernel (row-pivoted elimination, pivots moved off zero). Small diagonals make the elimination
    swap rows; the singular systems are T - lambda I at an eigenvalue lambda, where only the pivot guard keeps x
    finite (without it, or without the swaps, x differs by O(1) or is inf)."""
    from jax._src.lax import linalg as lax_linalg

    rng = np.random.default_rng(7)

    def draw(*shape: int) -> np.ndarray:
        return _normal(rng, dtype, *shape)

    solve = lambda dl, d, du, b: lax_linalg.tridiagonal_solve(dl, d, du, b, perturb_singular=True)  # noqa: E731
    for batch, n, k in [((), 1, 1), ((), 2, 3), ((3,), 9, 2), ((), 40, 4)]:
        dl, du, b = draw(*batch, n), draw(*batch, n), draw(*batch, n, k)
        d = (draw(*batch, n) * 1e-3).astype(dtype)  # |sub| > |diag|: rows swap
        d[..., 0] = 0 if n > 1 else d[..., 0]  # (without the swap, a division by zero)
        same(solve, dl, d, du, b, rtol=1e-4, atol=1e-5)
    for n in (3, 8, 50):
        a, off = (rng.standard_normal(m).astype(np.float32) for m in (n, n - 1))
        t = np.diag(a) + np.diag(off, 1) + np.diag(off, -1)
        lam = np.linalg.eigvalsh(t.astype(np.float64))[n // 2]
        dl, du = np.concatenate([[0], off]).astype(dtype), np.concatenate([off, [0]]).astype(dtype)
        got, want = run(solve, dl, (a - np.float32(lam)).astype(dtype), du, draw(n, 1))
        assert np.isfinite(got[0]).all()
        np.testing.assert_allclose(got[0] / np.linalg.norm(got[0]), want[0] / np.linalg.norm(want[0]), atol=1e-5)
    one, zero = np.ones(2, dtype), np.zeros(3, dtype)  # exactly singular: [[1, 1], [1, 1]] and a zero matrix
    for dl, d, du in [(one, one, one), (zero, zero, zero)]:
        got, want = run(solve, dl, d, du, draw(len(d), 2))
        assert np.isfinite(got[0]).all()
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    for n in (1, 2, 7, 100):
        alpha, beta = rng.standard_normal(n).astype(dtype), draw(n - 1)  # (a complex alpha: its real part)
        got, want = run(lambda a, b: jsl.eigh_tridiagonal(a, b, eigvals_only=False), alpha, beta)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)
        t = np.diag(alpha.real).astype(dtype) + np.diag(beta, 1) + np.diag(np.conj(beta), -1)
        v, w = got[1], got[0]
        assert np.abs(t @ v - v * w[None, :]).max() <= 8 * np.sqrt(n) * 1.2e-7 * np.abs(w).max() + 1e-6
        np.testing.assert_allclose(np.abs(np.conj(v.T) @ v), np.eye(n), atol=1e-4)


@pytest.mark.skipif(not CURRENT_SERIES, reason="jax 0.4.13 has no pivoted QR")
@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_pivoted_qr_as_geqp3(dtype):
    """``qr(..., pivoting=True)`` (geqp3, which jax implements for cpu and gpu only): the same column pivots as
    LAPACK's, exactly, and Q, R as cpu's. The inputs exercise the pivot choice: columns of very different norms, a
    column nearly parallel to another (its downdated norm cancels and is recomputed, as xlaqp2 recomputes it), zero
    columns (equal norms: the first is taken), and leading columns fixed by a nonzero jpvt entry. Without pivoting,
    with the largest column taken by its original norm only, without the recomputed norms, or with fixed columns
    ignored, P differs."""
    from jax._src.lax import linalg as lax_linalg

    rng = np.random.default_rng(11)

    def draw(*shape: int) -> np.ndarray:
        return _normal(rng, dtype, *shape)

    cases = [draw(3, 4), draw(4, 3), draw(6, 6) * np.array([1, 5, 0.2, 3, 1, 8], np.float32), draw(2, 7, 5),
             draw(9, 4)]
    near = draw(8, 5)
    near[:, 3] = near[:, 0] * 1.5 + draw(8) * 1e-3  # after the first step little of column 3 is left
    zero = draw(5, 6)
    zero[:, [1, 4]] = 0
    # (near, cancelling: Q's later columns are 1e3 times as sensitive to rounding as the rest)
    cancelling = _cancelling_columns().astype(dtype)
    for a in cases + [near, zero, cancelling]:
        got, want = run(lambda a: lax_linalg.qr(a, pivoting=True, full_matrices=False), a)
        np.testing.assert_array_equal(got[2], want[2])
        for g, w in zip(got[:2], want[:2]):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=2e-3 if a is near or a is cancelling else 1e-5)
        q, r, p = got
        np.testing.assert_allclose(q @ r, np.take_along_axis(a, p[..., None, :], -1), rtol=1e-4, atol=1e-5)
    a, jpvt = draw(5, 6), np.array([0, 1, 0, 0, 2, 0], np.int32)
    got, want = run(lambda a, j: lax_linalg.geqp3(a, j), a, jpvt)
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[2], want[2], rtol=1e-4, atol=1e-5)


def _cancelling_columns() -> np.ndarray:
    """An 8 x 4 matrix whose column 1 is nearly 0.9 x column 0 and whose column 2's part orthogonal to column 0 is
    about as long as what is left of column 1: after the first reflector, column 1's downdated norm has lost most of
    its digits, and only its recomputed norm picks the pivot LAPACK picks (found by search: seed 0 is one)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((8, 4)).astype(np.float32)
    a[:, 0] *= 10
    a[:, 1] = a[:, 0] * 0.9 + rng.standard_normal(8).astype(np.float32) * 1e-2
    q = a[:, 0] / np.linalg.norm(a[:, 0])
    left = a[:, 1] - q * (q @ a[:, 1])
    c = rng.standard_normal(8)
    c -= q * (q @ c)
    c *= np.linalg.norm(left) * (1 + rng.uniform(-0.05, 0.05)) / np.linalg.norm(c)
    a[:, 2] = (c + q * 3).astype(np.float32)
    a[:, 3] *= 1e-3
    return a


@pytest.mark.skipif(not CURRENT_SERIES, reason="jax 0.4.13's cpu solves tridiagonal systems with jax's own rule too")
@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_tridiagonal_solve_pivots_as_gtsv(dtype):
    """``lax.linalg.tridiagonal_solve`` without perturb_singular: jaxlib's cpu kernel is LAPACK's gtsv, Gaussian
    elimination with row interchanges, and so is the ipu's. Small diagonals make the rows swap (without the swaps
    the elimination divides by them: O(1) errors or inf); a zero pivot gives NaN for its system, as cpu does."""
    from jax._src.lax import linalg as lax_linalg

    rng = np.random.default_rng(5)

    def draw(*shape: int) -> np.ndarray:
        return _normal(rng, dtype, *shape)

    solve = lambda dl, d, du, b: lax_linalg.tridiagonal_solve(dl, d, du, b)  # noqa: E731
    for batch, n, k in [((), 1, 1), ((), 2, 3), ((), 3, 1), ((3,), 9, 2), ((), 40, 4)]:
        dl, d, du, b = draw(*batch, n), draw(*batch, n), draw(*batch, n), draw(*batch, n, k)
        d[..., ::2] *= 1e-3  # every other row has the larger subdiagonal element: those swap
        same(solve, dl, d, du, b, rtol=1e-4, atol=1e-5)
    # jax's own cases: swaps in the middle and in the last rows
    for dl, d, du, b in [([0, 2, -2, 3], [1, 4, 1, -1], [2, -1, 1, 0], [1, 2, 3, 4]),
                         ([0, 1, -6, 1], [1, -1, 2, 1], [2, 1, -1, 0], [1, 2, -1, -2])]:
        args = [np.asarray(v, dtype) for v in (dl, d, du)] + [np.asarray(b, dtype)[:, None]]
        same(solve, *args, rtol=1e-5, atol=1e-6)
    dl, d, du = (np.asarray(v, dtype) for v in ([0, 1, 0], [1, 1, 1], [1, 0, 0]))  # rows 0 and 1 equal: singular
    b = np.ones((2, 3, 1), dtype)
    d2 = np.stack([d, np.asarray([2, 3, 4], dtype)])
    got, want = run(solve, np.stack([dl, dl]), d2, np.stack([du, du]), b)
    assert np.isnan(want[0][0]).all() and np.isnan(got[0][0]).all()  # the singular system: NaN, as on cpu
    np.testing.assert_allclose(got[0][1], want[0][1], rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_eig_of_a_2x2_in_geevs_order(dtype):
    """``jnp.linalg.eig`` / ``eigvals`` of 2 x 2 matrices list their eigenvalues as geev does: for real ones
    dlanv2's standard form (a complex pair's positive imaginary part first, real ones on a[0, 0]'s side of a[1, 1]
    first), for complex ones the order zlahqr's first Wilkinson shift leaves (the eigenvalue it converges to last),
    a lower triangular matrix's a[1, 1] first (gebal swaps its rows); eigenvectors alongside. So
    ``jax.scipy.linalg.rsf2csf``, which takes the first eigenvalue of each 2 x 2 block (promoted to complex) as
    its shift, gives cpu's complex Schur form. Before, 82 of the real matrices and 87 of the complex ones (those of
    real values) came out in the other order."""
    rng = np.random.default_rng(3)
    mats = [rng.standard_normal((2, 2)) for _ in range(300)]
    if dtype == np.complex64:
        mats += [m + 1j * rng.standard_normal((2, 2)) for m in mats[:200]]
    mats += [np.array(m, np.float64) for m in ([[1, 2], [0, 3]], [[3, 0], [1, 1]], [[1, 0], [2, 5]],
                                                [[2, 0], [0, 1]], [[0, 1], [-1, 0]], [[1, 2], [-3, 1]])]
    a = np.stack(mats).astype(dtype)
    got, want = run(jnp.linalg.eigvals, a)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)
    got, want = run(jnp.linalg.eig, a)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)
    # eigenvectors in the same columns (unit norm, largest component real, as geev; a real one's sign is free)
    np.testing.assert_allclose(np.abs(got[1]), np.abs(want[1]), rtol=1e-4, atol=1e-4)
    if dtype == np.float32:
        t = np.array([[1.0, 2.0, 0.5], [-3.0, 1.0, 0.7], [0.0, 0.0, 2.5]], np.float32)  # a real Schur form
        q = np.linalg.qr(rng.standard_normal((3, 3)))[0].astype(np.float32)
        same(jsl.rsf2csf, t, q, rtol=1e-5, atol=1e-5)
