"""Linear algebra on the ipu: lowerings for jax's linalg primitives built from ops the emulator runs.

jaxlib 0.4.13 lowers cholesky, eigh, qr (geqrf/orgqr), svd, lu and triangular_solve on cpu to LAPACK custom_calls,
and the platform-independent fallbacks emit ``stablehlo.cholesky``/``triangular_solve`` or TPU-only custom_calls
("Qr", "ProductOfElementaryHouseholderReflectors", "Eigh"). None of those can reach the emulator, so for the "ipu"
platform we register ``mlir.lower_fun`` of pure-JAX algorithms instead, the way Poplar's poplin would compute them
on tiles: column-at-a-time loops whose body is matrix-vector work spread over the tiles, so every op they use is
already mapped and costed by the emulator.

- cholesky: left-looking, one column per step (a matvec with the finished columns, then a scaled copy);
- triangular_solve: every variant is reduced to a lower-triangular forward substitution, one row per step;
- geqrf / householder_product: Householder reflections with LAPACK's conventions (dlarfg's sign of beta, tau, v[0]=1),
  so Q and R agree with cpu's, signs included; geqp3 (the current series' ``qr(..., pivoting=True)``, which jax
  implements for cpu and gpu only) the same reflections after xlaqp2's choice of pivot column, norms downdated as
  xlaqp2 downdates them;
- eigh: cyclic Jacobi with the round-robin (Brent-Luk) ordering: each round rotates n/2 disjoint pairs at once,
  sweeps repeat until the off-diagonal part is below rounding;
- lu: getrf's partial pivoting, one column per step; a zero pivot leaves its column unscaled as getrf does (jax's
  generic rule divides by it), so det, solve and their gradients of singular matrices give cpu's zeros, not NaN;
- tridiagonal: sytd2/hetd2's Householder reduction, one reflector per step (a matrix-vector product and a rank-2
  update), with LAPACK's reflector conventions, so the packed result, d, e and taus agree with cpu's;
- hessenberg: gehd2's Householder reduction, with LAPACK's reflector conventions (as tridiagonal);
- eig (nonsymmetric, jax's cpu-only geev): the complex Schur form by the shifted QR algorithm (Wilkinson shifts,
  deflation at the bottom of the active block, each step one Householder QR above), then the eigenvectors of the
  triangular factor by back substitution, normalised as geev normalises them (unit norm, largest component real);
- schur of complex matrices (so ``jax.scipy.linalg.schur(a, output="complex")``, ``sqrtm``): that same complex Schur
  form; of real matrices (``jax.scipy.linalg.schur(a)``, ``funm``) the real Schur form, by Francis' double-shift QR
  steps, with gees' standardised 2x2 blocks for complex pairs;
- tridiagonal_solve with ``perturb_singular=True`` (the current series' inverse iteration in
  ``jax.scipy.linalg.eigh_tridiagonal(..., eigvals_only=False)``, which jax implements for cpu and gpu only): the
  row-pivoted elimination of LAPACK's xLAGTF/xLAGTS that jaxlib's cpu kernel follows, with a pivot too small for its
  row moved away from zero by eps * max|U| (doubling) as xLAGTS moves it; without the option jax's own rule;
- svd keeps jax's own platform-independent rule (QDWH), which runs on the above.

f16 inputs are computed in f32 and rounded back, as Poplar's f16 linear algebra accumulates in f32. complex64 runs
the same algorithms in their Hermitian forms (zpotrf, zlarfg/zungqr, complex Jacobi rotations) on the emulator's
pairs of f32.
"""

from __future__ import annotations

import inspect
from typing import Any, List, Tuple

import numpy as np

from jax_ipu.config import PLATFORM

_installed: List[bool] = []


def _without_mesh(ctx: Any) -> Any:
    """The lowering context with its abstract values' manual axes (varying, unreduced) and explicit shardings
    dropped (called inside _jax.outside_any_mesh())."""
    from jax_ipu import _jax

    avals_in = [_jax.without_mesh(a) for a in ctx.avals_in]
    avals_out = [_jax.without_mesh(a) for a in ctx.avals_out]
    if list(avals_in) == list(ctx.avals_in) and list(avals_out) == list(ctx.avals_out):
        return ctx
    return ctx.replace(avals_in=avals_in, avals_out=avals_out)


def install_lowerings() -> None:
    """Registers the ipu lowerings (once), rng_bit_generator's too (jax_ipu.backend.rng); called when the ipu backend is
    created, after jax has imported."""
    if _installed:
        return
    from jax._src.interpreters import mlir
    from jax._src.lax import linalg as lax_linalg

    from jax_ipu import _jax

    def rule(fn: Any, multiple_results: bool = False) -> Any:
        def lowering(ctx: Any, *args: Any, **params: Any) -> Any:
            with _jax.outside_any_mesh():
                return mesh_free_lowering(ctx, *args, **params)

        def mesh_free_lowering(ctx: Any, *args: Any, **params: Any) -> Any:
            # Inside a shard_map the operands' types say over which manual axes they vary, and in an explicit mesh
            # how they are split; the algorithms' loops start from constants that say neither. They are traced on
            # plain types, outside any mesh: the ops they write carry no sharding of their own, and XLA's
            # partitioner gives them the operands' (each device computes on its own operands in a shard_map).
            ctx = _without_mesh(ctx)
            if not multiple_results:
                return mlir.lower_fun(fn, multiple_results=False)(ctx, *args, **params)
            # LAPACK's trailing info status: jax 0.4.13's primitives return it, the current series' drop it.
            wanted = len(ctx.avals_out)

            def trimmed(*a: Any, **p: Any) -> Any:
                out = fn(*a, **p)
                return out[:wanted] if len(out) == wanted + 1 else out

            return mlir.lower_fun(trimmed, multiple_results=True)(ctx, *args, **params)

        return lowering

    lowerings = [
        ("cholesky_p", cholesky, False), ("triangular_solve_p", triangular_solve, False),
        ("geqrf_p", geqrf, True), ("householder_product_p", householder_product, False), ("lu_p", lu, True),
        ("tridiagonal_p", tridiagonal, True), ("eig_p", eig, True), ("hessenberg_p", hessenberg, True),
        ("schur_p", schur, True), ("eigh_p", eigh, True),
        ("eigh_jacobi_p", eigh_jacobi, True),  # jax 0.4.13 only (its TPU-style eigh); later series have none
    ]
    if "perturb_singular" in inspect.signature(lax_linalg.tridiagonal_solve).parameters:  # the current series
        lowerings.append(("tridiagonal_solve_p", tridiagonal_solve, False))
    lowerings.append(("geqp3_p", geqp3, True))  # the current series: qr(..., pivoting=True)
    for name, fn, multiple_results in lowerings:
        primitive = getattr(lax_linalg, name, None)
        if primitive is not None:
            mlir.register_lowering(primitive, rule(_f32(fn), multiple_results), platform=PLATFORM)
    from jax_ipu.backend import rng  # rng_bit_generator: the other op jaxlib lowers through 64-bit or custom calls
    rng.install_lowerings()
    _installed.append(True)


def _f32(fn: Any) -> Any:
    """Runs ``fn`` in f32 on f16/bf16 operands and rounds float results back. The lowerings are traced under the
    user's configuration: they run with jax's standard dtype promotion and rank promotion allowed, whatever the user
    chose (``jax_numpy_dtype_promotion=strict``, ``jax_numpy_rank_promotion=raise`` apply to user code)."""
    import jax
    import jax.numpy as jnp

    def wrapped(*args: Any, **params: Any) -> Any:
        with jax.numpy_dtype_promotion("standard"), jax.numpy_rank_promotion("allow"):
            return computed(*args, **params)

    def computed(*args: Any, **params: Any) -> Any:
        dtypes = {jnp.dtype(a.dtype) for a in args if jnp.issubdtype(a.dtype, jnp.inexact)}
        narrow = [d for d in dtypes if d.itemsize < 4]
        if not narrow:
            return fn(*args, **params)
        out = fn(*[a.astype(jnp.float32) if jnp.issubdtype(a.dtype, jnp.floating) else a for a in args], **params)
        def back(x: Any) -> Any:
            return x.astype(narrow[0]) if x.dtype == jnp.float32 else x

        return [back(x) for x in out] if isinstance(out, (list, tuple)) else back(out)

    wrapped.__name__ = fn.__name__
    return wrapped


def _min(m: Any, n: Any) -> Any:
    """min of two dimensions, either symbolic (jax.export with shape polymorphism: the current series' core.min_dim)."""
    from jax._src import core

    if core.is_constant_dim(m) and core.is_constant_dim(n):
        return min(m, n)
    return core.min_dim(m, n)


def _col(x: Any, j: Any) -> Any:
    """x[..., :, j] for a traced j."""
    from jax import lax
    return lax.dynamic_index_in_dim(x, j, axis=x.ndim - 1, keepdims=False)


def _row(x: Any, i: Any) -> Any:
    """x[..., i, :] for a traced i."""
    from jax import lax
    return lax.dynamic_index_in_dim(x, i, axis=x.ndim - 2, keepdims=False)


def _set_col(x: Any, j: Any, value: Any) -> Any:
    from jax import lax
    return lax.dynamic_update_index_in_dim(x, value, j, axis=x.ndim - 1)


def _set_row(x: Any, i: Any, value: Any) -> Any:
    from jax import lax
    return lax.dynamic_update_index_in_dim(x, value, i, axis=x.ndim - 2)


def _elem(v: Any, i: Any) -> Any:
    """v[..., i:i+1] for a traced i: keeps a unit axis so it broadcasts against v."""
    from jax import lax
    return lax.dynamic_slice_in_dim(v, i, 1, axis=v.ndim - 1)


def _mv(a: Any, x: Any) -> Any:
    """Batched a @ x, a (..., m, n), x (..., n), at full f32 precision."""
    import jax.numpy as jnp
    from jax import lax
    return jnp.einsum("...ij,...j->...i", a, x, precision=lax.Precision.HIGHEST)


# ---------------------------------------------------------------------------------------------------- lu

def lu(a: Any) -> List[Any]:
    """(lu, pivots, permutation) as LAPACK's getrf computes them: at step k the row of largest magnitude in column k
    (|re| + |im| for complex, as icamax; the first on ties) is swapped up, the column below is divided by the pivot
    unless it is zero (getrf then reports the singular column in info and goes on), and the trailing block gets the
    rank-1 update. Batches are vmapped."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    m, n = a.shape[-2:]
    rows, cols = jnp.arange(m), jnp.arange(n)

    def factor(a: Any) -> Tuple[Any, Any, Any]:
        def step(k: Any, state: Tuple[Any, Any, Any]) -> Tuple[Any, Any, Any]:
            pivots, perm, a = state
            col = a[:, k]
            mag = jnp.abs(jnp.real(col)) + jnp.abs(jnp.imag(col)) if jnp.iscomplexobj(a) else jnp.abs(col)
            i = jnp.argmax(jnp.where(rows >= k, mag, -jnp.inf)).astype(jnp.int32)
            a = a.at[jnp.stack([k, i])].set(a[jnp.stack([i, k])])
            perm = perm.at[jnp.stack([k, i])].set(perm[jnp.stack([i, k])])
            pivot = a[k, k]
            nonzero = pivot != 0
            col = jnp.where((rows > k) & nonzero, a[:, k] / jnp.where(nonzero, pivot, jnp.ones_like(pivot)), a[:, k])
            a = a.at[:, k].set(col)
            trailing = (rows[:, None] > k) & (cols[None, :] > k)
            a = a - jnp.where(trailing, jnp.outer(col, a[k, :]), jnp.zeros_like(a))
            return pivots.at[k].set(i), perm, a

        state = (jnp.zeros((_min(m, n),), jnp.int32), jnp.arange(m, dtype=jnp.int32), a)
        if m == 0 or n == 0:
            return state[2], state[0], state[1]
        pivots, perm, a = lax.fori_loop(0, _min(m, n), step, state)
        return a, pivots, perm

    for _ in a.shape[:-2]:
        factor = jax.vmap(factor)
    return list(factor(a))


# ---------------------------------------------------------------------------------------------------- tridiagonal

def _larfg(alpha: Any, x: Any, real: Any) -> Tuple[Any, Any, Any, Any]:
    """LAPACK's larfg: (beta, tau, scale, identity) of the reflector H = I - tau v v^H with v = (1, x * scale) and
    H^H (alpha, x) = (beta, 0), beta = -sign(Re alpha) |(alpha, x)| real; the identity (tau 0, x kept) when x is 0 and
    alpha real."""
    import jax.numpy as jnp
    from jax import lax

    hermitian = jnp.iscomplexobj(x)
    xnorm = jnp.sqrt(jnp.sum(jnp.real(x * _conj(x))))
    ar, ai = jnp.real(alpha), jnp.imag(alpha) if hermitian else jnp.zeros((), real)
    identity = (xnorm == 0) & (ai == 0)
    beta = -jnp.where(ar >= 0, 1, -1).astype(real) * jnp.sqrt(ar * ar + ai * ai + xnorm * xnorm)
    beta = jnp.where(identity, ar, beta)
    safe = jnp.where(identity, jnp.ones_like(beta), beta)
    tau = lax.complex((safe - ar) / safe, -ai / safe) if hermitian else ((safe - ar) / safe).astype(x.dtype)
    tau = jnp.where(identity, jnp.zeros_like(tau), tau)
    scale = 1 / jnp.where(identity, jnp.ones_like(alpha), alpha - beta.astype(x.dtype))
    return beta, tau, scale, identity


def tridiagonal(a: Any, *, lower: bool) -> List[Any]:
    """(packed, d, e, taus, info) of the Householder reduction Q^H A Q = T of the symmetric (Hermitian) matrix held in
    ``a``'s lower (upper) triangle, as LAPACK's sytd2/hetd2: step i (i = 0.. for lower, n-2.. down for upper) builds
    the reflector H = I - tau v v^H (larfg: beta = -sign(Re alpha) |(alpha, x)|, v = (1, x / (alpha - beta))) that
    zeroes column i below the subdiagonal (column i+1 above the superdiagonal), applies it to the rest as
    A -= v w^H + w v^H with w = p - (tau/2)(p^H v) v, p = tau A v, and stores v beyond the off-diagonal. The other
    triangle of ``a`` is returned untouched."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    n = a.shape[-1]
    rows = jnp.arange(n)
    real = jnp.finfo(a.dtype).dtype
    hermitian = jnp.iscomplexobj(a)

    def reduce(a: Any) -> Tuple[Any, Any, Any, Any]:
        tri = jnp.tril(a) if lower else jnp.triu(a)
        w = tri + _conj(jnp.swapaxes(jnp.tril(a, -1) if lower else jnp.triu(a, 1), -1, -2))
        if hermitian:
            w = jnp.where(jnp.eye(n, dtype=bool), jnp.real(w).astype(a.dtype), w)

        def step(k: Any, state: Tuple[Any, Any, Any, Any, Any]) -> Tuple[Any, Any, Any, Any, Any]:
            w, packed, d, e, taus = state
            i = k if lower else n - 2 - k
            col = w[:, i] if lower else w[:, i + 1]  # the column the reflector works on
            head = i + 1 if lower else i             # alpha's row
            rest = rows >= i + 2 if lower else rows < i
            block = rows >= i + 1 if lower else rows <= i  # rows and columns H acts on
            x = jnp.where(rest, col, jnp.zeros_like(col))
            beta, tau, scale, identity = _larfg(col[head], x, real)
            v = jnp.where(rows == head, jnp.ones_like(col), x * scale)
            p = jnp.where(block, tau * (w @ v), jnp.zeros_like(v))
            u = p + (-0.5 * tau * jnp.vdot(p, v)) * v
            w = w - jnp.outer(v, _conj(u)) - jnp.outer(u, _conj(v))
            if hermitian:
                w = jnp.where(jnp.eye(n, dtype=bool), jnp.real(w).astype(a.dtype), w)
            reflector = jnp.where(identity, x, v)
            column = i if lower else i + 1
            packed = packed.at[:, column].set(jnp.where(rest, reflector, packed[:, column]))
            packed = packed.at[head, column].set(beta.astype(a.dtype))
            diag = i if lower else i + 1  # final now: later steps act on other rows
            d = d.at[diag].set(jnp.real(w[diag, diag]))
            return w, packed, d, e.at[i].set(beta), taus.at[i].set(tau)

        init = (w, a, jnp.zeros((n,), real), jnp.zeros((n - 1,), real), jnp.zeros((n - 1,), a.dtype))
        w, packed, d, e, taus = lax.fori_loop(0, n - 1, step, init) if n > 1 else init
        last = n - 1 if lower else 0
        d = d.at[last].set(jnp.real(w[last, last]))
        packed = jnp.where(jnp.eye(n, dtype=bool), d.astype(a.dtype), packed)
        if lower:  # LAPACK writes the subdiagonal back into a
            packed = packed.at[rows[1:], rows[:-1]].set(e.astype(a.dtype))
        else:
            packed = packed.at[rows[:-1], rows[1:]].set(e.astype(a.dtype))
        return packed, d, e, taus

    for _ in a.shape[:-2]:
        reduce = jax.vmap(reduce)
    packed, d, e, taus = reduce(a)
    return [packed, d, e, taus, jnp.zeros(a.shape[:-2], jnp.int32)]


def hessenberg(a: Any) -> List[Any]:
    """(packed, taus) as LAPACK's gehrd: step i zeroes column i below the subdiagonal with the reflector of larfg,
    applied from the right to the whole matrix and from the left to the trailing rows; the Hessenberg matrix is in
    the upper triangle and first subdiagonal, the reflectors' v below it."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    n = a.shape[-1]
    rows = jnp.arange(n)
    real = jnp.finfo(a.dtype).dtype

    def reduce(a: Any) -> Tuple[Any, Any]:
        def step(i: Any, state: Tuple[Any, Any]) -> Tuple[Any, Any]:
            a, taus = state
            col = a[:, i]
            rest = rows >= i + 2
            x = jnp.where(rest, col, jnp.zeros_like(col))
            beta, tau, scale, identity = _larfg(col[i + 1], x, real)
            v = jnp.where(rows == i + 1, jnp.ones_like(col), jnp.where(rest, x * scale, jnp.zeros_like(col)))
            hi = lax.Precision.HIGHEST
            a = a - jnp.outer(jnp.matmul(a, v, precision=hi) * tau, _conj(v))           # A H
            left = jnp.outer(v, jnp.matmul(_conj(v), a, precision=hi) * _conj(tau))     # H^H A, on columns > i
            a = a - jnp.where(rows[None, :] > i, left, jnp.zeros_like(left))
            a = a.at[:, i].set(jnp.where(rest, jnp.where(identity, x, v), a[:, i]))
            return a.at[i + 1, i].set(beta.astype(a.dtype)), taus.at[i].set(tau)

        taus = jnp.zeros((max(n - 1, 0),), a.dtype)
        return lax.fori_loop(0, n - 1, step, (a, taus)) if n > 1 else (a, taus)

    for _ in a.shape[:-2]:
        reduce = jax.vmap(reduce)
    return list(reduce(a))


# ---------------------------------------------------------------------------------------------------- eig

def eig(a: Any, *, compute_left_eigenvectors: bool, compute_right_eigenvectors: bool,
        enable_eigvec_derivs: bool = False, implementation: Any = None) -> List[Any]:
    """Eigenvalues (and left and right eigenvectors) of a general square matrix, in complex64, as geev returns them:
    each vector of unit 2-norm with its largest component real; a matrix with an inf or NaN gives NaN eigenvalues.
    The order of the eigenvalues is the Schur form's (geev's is its own; neither is sorted), but for a 2 x 2 matrix,
    whose eigenvalues come in geev's order (_dlanv2_first, _zlahqr_first)."""
    import jax
    import jax.numpy as jnp

    n = a.shape[-1]
    ctype = jnp.complex64
    real_input = not jnp.iscomplexobj(a)

    def one(a: Any) -> List[Any]:
        finite = jnp.all(jnp.isfinite(a))
        given = a  # (before the cast: _dlanv2_first reads a real matrix's own entries)
        a = a.astype(ctype)
        t, z = _schur(a)
        w = jnp.where(finite, jnp.diagonal(t), jnp.full((n,), jnp.nan, ctype))
        out = [w]
        if compute_left_eigenvectors:  # y^H T = w y^H: T^H y = conj(w) y, upper triangular after reversing both axes
            flipped = _conj(jnp.swapaxes(t, -1, -2))[::-1, ::-1]
            out.append(_normalized(z @ _triangular_eigenvectors(flipped)[::-1, ::-1]))
        if compute_right_eigenvectors:
            out.append(_normalized(z @ _triangular_eigenvectors(t)))
        if n == 2:  # in geev's order, with their eigenvectors; gebal swaps a lower triangular matrix's rows first
            lower = (given[0, 1] == 0) & (given[1, 0] != 0)
            nearer = jnp.abs(w[0] - given[1, 1]) <= jnp.abs(w[1] - given[1, 1])
            first = jnp.where(lower, nearer, (_dlanv2_first if real_input else _zlahqr_first)(given, w))
            out = [jnp.where(first, x, x[..., ::-1]) for x in out]
        return out

    if n == 0:
        empty = jnp.zeros(a.shape, ctype)
        return [jnp.zeros(a.shape[:-1], ctype)] + [empty] * (compute_left_eigenvectors + compute_right_eigenvectors)
    for _ in a.shape[:-2]:
        one = jax.vmap(one)
    return list(one(a))


def _dlanv2_first(a: Any, w: Any) -> Any:
    """Whether w[0] is the eigenvalue geev lists first for the real 2 x 2 matrix a, whose Schur form dlanv2 makes:
    of a complex pair the one of positive imaginary part; of real eigenvalues the one on a[0, 0]'s side of
    a[1, 1] (the larger when a[0, 0] >= a[1, 1]). (rsf2csf takes the first as its shift; eig takes a lower
    triangular a's a[1, 1] first, whose rows gebal swaps.)"""
    import jax.numpy as jnp

    a00, a01, a10, a11 = a[0, 0], a[0, 1], a[1, 0], a[1, 1]
    half = (a00 - a11) / 2
    pair = half * half + a01 * a10 < 0
    re0, re1 = jnp.real(w[0]), jnp.real(w[1])
    side = jnp.where(half >= 0, re0 >= re1, re0 <= re1)
    return jnp.where(pair, jnp.imag(w[0]) > 0, side)


def _zlahqr_first(a: Any, w: Any) -> Any:
    """Whether w[0] is the eigenvalue zgeev lists first for the complex 2 x 2 matrix a: zlahqr's first step
    shifts by the eigenvalue Wilkinson's formula gives (its own spelling, in a's precision), which converges at
    the bottom, so the other is first. (rsf2csf promotes its real Schur form to complex before it asks for each
    block's eigenvalues.)"""
    import jax.numpy as jnp

    def cabs1(z: Any) -> Any:
        return jnp.abs(jnp.real(z)) + jnp.abs(jnp.imag(z))

    a00, a01, a10, a11 = a[0, 0], a[0, 1], a[1, 0], a[1, 1]
    u = jnp.sqrt(a01) * jnp.sqrt(a10)
    x = (a00 - a11) / 2
    sx = cabs1(x)
    s = jnp.maximum(cabs1(u), sx)
    safe_s = jnp.where(s > 0, s, jnp.ones_like(s)).astype(a.dtype)
    y = safe_s * jnp.sqrt((x / safe_s) ** 2 + (u / safe_s) ** 2)
    unit = x / jnp.where(sx > 0, sx, jnp.ones_like(sx)).astype(a.dtype)
    y = jnp.where((sx > 0) & (jnp.real(unit) * jnp.real(y) + jnp.imag(unit) * jnp.imag(y) < 0), -y, y)
    denominator = x + y
    safe_d = jnp.where(denominator != 0, denominator, jnp.ones_like(denominator))
    shift = jnp.where((cabs1(u) > 0) & (denominator != 0), a11 - u * (u / safe_d), a11)
    return jnp.abs(w[0] - shift) >= jnp.abs(w[1] - shift)  # w[0] is not the one it converges to


def schur(a: Any, *, compute_schur_vectors: bool, sort_eig_vals: bool, select_callable: Any) -> List[Any]:
    """(T, Z) with a = Z T Z^H, batched: for complex matrices T upper triangular (_schur), for real ones the real
    Schur form, T quasi-upper-triangular with gees' standardised 2x2 blocks (_real_schur). Sorted forms are not
    built."""
    import jax
    import jax.numpy as jnp

    if sort_eig_vals or select_callable is not None:
        raise NotImplementedError("a sorted Schur form (sort_eig_vals) is not implemented on the ipu backend")
    form = _schur if jnp.iscomplexobj(a) else _real_schur

    def factor(m: Any) -> Tuple[Any, Any]:  # a matrix with an inf or NaN: T all NaN, as gees leaves it
        t, z = form(m)
        return jnp.where(jnp.all(jnp.isfinite(m)), t, jnp.full_like(t, jnp.nan)), z

    for _ in a.shape[:-2]:
        factor = jax.vmap(factor)
    t, z = factor(a) if a.shape[-1] > 0 else (a, a)
    return [t, z] if compute_schur_vectors else [t]


def _real_schur(a: Any) -> Tuple[Any, Any]:
    """(T, Z) with a = Z T Z^T, Z orthogonal and T quasi-upper-triangular (1x1 blocks for real eigenvalues, 2x2
    blocks for complex pairs), all real: Francis' double-shift QR steps on the leading active block, each an explicit
    QR of (T_m - mu1 I)(T_m - mu2 I) = T_m^2 - s T_m + p I with mu1, mu2 the eigenvalues of T_m's trailing 2x2 (both
    the real one nearer its corner when they are real, as dlahqr takes them; an exceptional shift after 10 steps
    without deflation). The active block shrinks by one row when its last row left of the diagonal is below
    eps |a|, by two when its last two rows left of their 2x2 are; then each 2x2 block is standardised as gees leaves
    it (_standardize_blocks)."""
    import jax.numpy as jnp
    from jax import lax

    n = a.shape[-1]
    eye = jnp.eye(n, dtype=a.dtype)
    if n == 1:
        return a, eye
    rows = jnp.arange(n)
    small = float(jnp.finfo(a.dtype).eps) * jnp.sqrt(jnp.sum(a * a))

    def norm_left_of(t: Any, row: Any, col: Any) -> Any:  # |t[row, :col]|
        x = jnp.where(rows < col, t[row], jnp.zeros((n,), t.dtype))
        return jnp.sqrt(jnp.sum(x * x))

    def step(t: Any, z: Any, m: Any, since: Any) -> Tuple[Any, Any, Any]:
        last = m - 1
        one = norm_left_of(t, last, last)
        two = jnp.maximum(norm_left_of(t, last - 1, last - 1), norm_left_of(t, last, last - 1))
        drop = jnp.where(one <= small, 1, jnp.where(two <= small, 2, 0))

        def deflate(args: Tuple[Any, Any]) -> Tuple[Any, Any]:
            t, z = args
            first = m - drop  # rows [first, m) leave the active block: their entries left of column first are 0
            below = (rows[:, None] >= first) & (rows[:, None] < m) & (rows[None, :] < first)
            return jnp.where(below, jnp.zeros_like(t), t), z

        def qr_step(args: Tuple[Any, Any]) -> Tuple[Any, Any]:
            t, z = args
            p, q, r, d = t[last - 1, last - 1], t[last - 1, last], t[last, last - 1], t[last, last]
            half = (p - d) / 2
            disc = half * half + q * r
            root = jnp.sqrt(jnp.abs(disc))
            near = jnp.where(jnp.abs(half + root) <= jnp.abs(half - root), d + half + root, d + half - root)
            trace = jnp.where(disc >= 0, 2 * near, p + d)
            det = jnp.where(disc >= 0, near * near, p * d - q * r)
            kick = d + 0.75 * one  # exceptional: a double shift at d + 0.75 |last row|
            trace = jnp.where(since % 10 == 9, 2 * kick, trace)
            det = jnp.where(since % 10 == 9, kick * kick, det)
            hi = lax.Precision.HIGHEST
            active = (rows < m)[:, None] & (rows < m)[None, :]
            tm = jnp.where(active, t, jnp.zeros_like(t))
            shifted = jnp.matmul(tm, tm, precision=hi) - trace * tm + det * eye
            packed, taus = geqrf(jnp.where(active, shifted, eye))
            qm = householder_product(packed, taus)
            t = jnp.matmul(qm.T, jnp.matmul(t, qm, precision=hi), precision=hi)
            return t, jnp.matmul(z, qm, precision=hi)

        return (drop, *lax.cond(drop > 0, deflate, qr_step, (t, z)))

    t, z = _qr_iterations(a, 2, step)
    t = jnp.where(rows[:, None] > rows[None, :] + 1, jnp.zeros_like(t), t)  # below the first subdiagonal: converged
    return _standardize_blocks(t, z)


def _standardize_blocks(t: Any, z: Any) -> Tuple[Any, Any]:
    """Each 2x2 diagonal block of a quasi-triangular T (a nonzero subdiagonal entry) rotated into gees' standard
    form, T and Z updated alike (T <- R^T T R, Z <- Z R on the block's two rows and columns): a block with real
    eigenvalues becomes upper triangular (its rotation's first column the eigenvector of the eigenvalue farther
    from its corner); one with a complex pair gets equal diagonal entries, and then b c < 0 (dlanv2's rotation)."""
    import jax.numpy as jnp
    from jax import lax

    n = t.shape[-1]

    def rotation(blk: Any) -> Tuple[Any, Any, Any]:
        a, b, c, d = blk[0, 0], blk[0, 1], blk[1, 0], blk[1, 1]
        half = (a - d) / 2
        disc = half * half + b * c
        root = jnp.sqrt(jnp.maximum(disc, 0))
        # real eigenvalues: v = (lam - d, c), lam the eigenvalue farther from d
        lam = d + half + jnp.where(half >= 0, root, -root)
        h = jnp.sqrt((lam - d) ** 2 + c * c)
        safe_h = jnp.where(h > 0, h, jnp.ones_like(h))
        cs_real, sn_real = (lam - d) / safe_h, c / safe_h
        # a complex pair: equal diagonals (dlanv2: sigma = b + c, tau = |(sigma, a - d)|)
        sigma = b + c
        tau = jnp.sqrt(sigma * sigma + (a - d) ** 2)
        safe_tau = jnp.where(tau > 0, tau, jnp.ones_like(tau))
        cs_pair = jnp.sqrt(0.5 * (1 + jnp.abs(sigma) / safe_tau))
        sign = jnp.where(sigma >= 0, 1.0, -1.0).astype(t.dtype)
        sn_pair = -(half / (safe_tau * cs_pair)) * sign
        cs_pair = jnp.where(tau > 0, cs_pair, jnp.ones_like(cs_pair))
        sn_pair = jnp.where(tau > 0, sn_pair, jnp.zeros_like(sn_pair))
        real = disc >= 0
        return jnp.where(real, cs_real, cs_pair), jnp.where(real, sn_real, sn_pair), real

    def step(i: Any, state: Tuple[Any, Any, Any]) -> Tuple[Any, Any, Any]:
        t, z, skip = state
        j = jnp.minimum(i + 1, n - 1)
        is_block = (i < n - 1) & (t[j, i] != 0) & ~skip
        blk = lax.dynamic_slice(t, (i, i), (2, 2)) if n > 1 else t
        cs, sn, real = rotation(blk)
        cs = jnp.where(is_block, cs, jnp.ones_like(cs))
        sn = jnp.where(is_block, sn, jnp.zeros_like(sn))
        # R = [[cs, -sn], [sn, cs]] on rows/columns (i, j)
        ti, tj = t[i], t[j]
        t = t.at[i].set(cs * ti + sn * tj).at[j].set(-sn * ti + cs * tj)          # R^T T
        ci, cj = t[:, i], t[:, j]
        t = t.at[:, i].set(cs * ci + sn * cj).at[:, j].set(-sn * ci + cs * cj)  # (R^T T) R
        zi, zj = z[:, i], z[:, j]
        z = z.at[:, i].set(cs * zi + sn * zj).at[:, j].set(-sn * zi + cs * zj)
        # inside the block: the real case's subdiagonal is exactly 0, the pair's diagonal exactly equal
        blk = lax.dynamic_slice(t, (i, i), (2, 2))
        mean = (blk[0, 0] + blk[1, 1]) / 2
        fixed = jnp.where(real, blk.at[1, 0].set(0), blk.at[0, 0].set(mean).at[1, 1].set(mean))
        t = jnp.where(is_block, lax.dynamic_update_slice(t, fixed, (i, i)), t)
        return t, z, is_block & ~real

    if n < 2:
        return t, z
    t, z, _ = lax.fori_loop(0, n - 1, step, (t, z, jnp.bool_(False)))
    return t, z


def _schur(a: Any) -> Tuple[Any, Any]:
    """(T, Z) with a = Z T Z^H, T upper triangular: shifted QR steps on the leading active block (the rest is
    deflated; the step's Q is blockdiag(Q_m, I), from a QR of [[T_m - mu I, 0], [0, I]]). The active block shrinks when
    its last row left of the diagonal is below eps |a|; the shift is the eigenvalue of its trailing 2x2 nearer the
    corner (Wilkinson's), with an exceptional shift after 10 steps without deflation."""
    import jax.numpy as jnp
    from jax import lax

    n = a.shape[-1]
    eye = jnp.eye(n, dtype=a.dtype)
    if n == 1:
        return a, eye
    rows = jnp.arange(n)
    eps = float(jnp.finfo(jnp.float32).eps)
    small = eps * jnp.sqrt(jnp.sum(jnp.real(a * _conj(a))))

    def step(t: Any, z: Any, m: Any, since: Any) -> Tuple[Any, Any, Any]:
        last = m - 1
        row = jnp.where(rows < last, t[last], jnp.zeros((n,), t.dtype))
        off = jnp.sqrt(jnp.sum(jnp.real(row * _conj(row))))

        def deflate(args: Tuple[Any, Any]) -> Tuple[Any, Any]:
            t, z = args
            return t.at[last].set(jnp.where(rows < last, jnp.zeros((n,), t.dtype), t[last])), z

        def qr_step(args: Tuple[Any, Any]) -> Tuple[Any, Any]:
            t, z = args
            p, q, r, d = t[last - 1, last - 1], t[last - 1, last], t[last, last - 1], t[last, last]
            half = (p - d) / 2
            root = jnp.sqrt(half * half + q * r)
            # the 2x2's eigenvalues are d + half +- root: the one nearer d; every 10th step without deflation a kick
            wilkinson = jnp.where(jnp.abs(half + root) <= jnp.abs(half - root), d + half + root, d + half - root)
            mu = jnp.where(since % 10 == 9, d + 0.75 * off, wilkinson)
            active = (rows < m)[:, None] & (rows < m)[None, :]
            packed, taus = geqrf(jnp.where(active, t - mu * eye, eye))
            qm = householder_product(packed, taus)
            hi = lax.Precision.HIGHEST
            t = jnp.matmul(_conj(qm.T), jnp.matmul(t, qm, precision=hi), precision=hi)
            return t, jnp.matmul(z, qm, precision=hi)

        done = off <= small
        return (jnp.where(done, 1, 0), *lax.cond(done, deflate, qr_step, (t, z)))

    t, z = _qr_iterations(a, 1, step)
    return jnp.triu(t), z


def _qr_iterations(a: Any, blocks: int, step: Any) -> Tuple[Any, Any]:
    """(T, Z) from the shifted QR iteration both Schur forms run on their leading active block (rows and columns
    below m, from n): `step(t, z, m, since)` either deflates, returning how many trailing rows leave the block and t
    with their entries left of it zeroed, or takes a QR step, returning 0 and the new t and z; `since` counts the
    steps since the last deflation (for exceptional shifts). Runs until at most `blocks` rows stay active, or for
    30 n steps."""
    import jax.numpy as jnp
    from jax import lax

    n = a.shape[-1]

    def cond(state: Tuple[Any, Any, Any, Any, Any]) -> Any:
        steps, m, _, _, _ = state
        return (m > blocks) & (steps < 30 * n)

    def body(state: Tuple[Any, Any, Any, Any, Any]) -> Tuple[Any, Any, Any, Any, Any]:
        steps, m, t, z, since = state
        drop, t, z = step(t, z, m, since)
        return steps + 1, m - drop, t, z, jnp.where(drop > 0, 0, since + 1)

    start = (jnp.int32(0), jnp.int32(n), a, jnp.eye(n, dtype=a.dtype), jnp.int32(0))
    _, _, t, z, _ = lax.while_loop(cond, body, start)
    return t, z


def _triangular_eigenvectors(t: Any) -> Any:
    """Columns x_k with T x_k = t_kk x_k, x_k[k] = 1, x_k[j > k] = 0, by back substitution (trevc's, with its
    floor eps |t_kk| on the divisors where eigenvalues coincide)."""
    import jax.numpy as jnp
    from jax import lax

    n = t.shape[-1]
    d = jnp.diagonal(t)
    cols = jnp.arange(n)
    floor = jnp.maximum(float(jnp.finfo(jnp.float32).eps) * jnp.abs(d), jnp.finfo(jnp.float32).tiny)

    def row(i: Any, x: Any) -> Any:
        j = n - 2 - i
        s = t[j] @ x  # columns k > j: sum over l > j of t[j, l] x[l, k] (rows < j of x are still 0 there)
        divisor = t[j, j] - d
        divisor = jnp.where(jnp.abs(divisor) < floor, floor.astype(t.dtype), divisor)
        return x.at[j].set(jnp.where(cols > j, -s / divisor, x[j]))

    return lax.fori_loop(0, n - 1, row, jnp.eye(n, dtype=t.dtype))


def _normalized(v: Any) -> Any:
    """Columns scaled to unit 2-norm with the component of largest modulus real and positive, as geev's."""
    import jax.numpy as jnp

    v = v / jnp.sqrt(jnp.sum(jnp.real(v * _conj(v)), axis=0)).astype(v.dtype)
    big = jnp.take_along_axis(v, jnp.argmax(jnp.abs(v), axis=0)[None, :], axis=0)
    return v * (_conj(big) / jnp.abs(big).astype(v.dtype))


# ---------------------------------------------------------------------------------------------------- cholesky

def _conj(x: Any) -> Any:
    import jax.numpy as jnp
    return jnp.conj(x) if jnp.iscomplexobj(x) else x


def cholesky(a: Any) -> Any:
    """Lower Cholesky factor (a = L L^H) from the lower triangle of ``a``; all-NaN for a matrix that is not positive
    definite (as jax's cpu rule returns when potrf reports failure)."""
    import jax.numpy as jnp
    from jax import lax

    n = a.shape[-1]
    if a.size == 0:  # nothing to factor (the loop body could not even be traced on a 0-length axis)
        return a
    rows = jnp.arange(n)

    def column(j: Any, factor: Any) -> Any:
        # factor's columns >= j are still zero, so factor @ factor[j] only sums the finished columns k < j.
        v = _col(a, j) - _mv(factor, _conj(_row(factor, j)))
        pivot = jnp.real(_elem(v, j))  # zpotrf reads the real part of the diagonal
        d = jnp.sqrt(jnp.where(pivot > 0, pivot, jnp.nan)).astype(a.dtype)  # potrf fails on a pivot <= 0
        col = jnp.where(rows > j, v / d, jnp.where(rows == j, d, jnp.zeros_like(v)))
        return _set_col(factor, j, col)

    factor = lax.fori_loop(0, n, column, jnp.zeros_like(a))
    ok = jnp.all(jnp.isfinite(factor), axis=(-2, -1), keepdims=True)
    return jnp.where(ok, factor, jnp.full_like(factor, jnp.nan))


# ---------------------------------------------------------------------------------------------------- triangular solve

def triangular_solve(a: Any, b: Any, *, left_side: bool, lower: bool, transpose_a: bool, conjugate_a: bool,
                     unit_diagonal: bool) -> Any:
    """op(a) x = b (left_side) or x op(a) = b, reduced to a lower-triangular forward substitution on the left."""
    import jax.numpy as jnp

    if a.size == 0 or b.size == 0:  # an empty system: an empty (or all-zero-width) solution
        shape = jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + b.shape[-2:]
        return jnp.zeros(shape, jnp.result_type(a, b))
    a = jnp.tril(a) if lower else jnp.triu(a)  # lax's solve never reads the other triangle: it may hold anything
    if conjugate_a:
        a = _conj(a)
    if transpose_a:
        a, lower = jnp.swapaxes(a, -1, -2), not lower
    if not left_side:  # x a = b  <=>  a^T x^T = b^T
        a, lower, b = jnp.swapaxes(a, -1, -2), not lower, jnp.swapaxes(b, -1, -2)
    if not lower:  # reversing rows and columns turns an upper-triangular system into a lower one
        a, b = jnp.flip(a, (-2, -1)), jnp.flip(b, -2)
    x = _forward_substitution(a, b, unit_diagonal)
    if not lower:
        x = jnp.flip(x, -2)
    return x if left_side else jnp.swapaxes(x, -1, -2)


def _forward_substitution(a: Any, b: Any, unit_diagonal: bool) -> Any:
    import jax.numpy as jnp
    from jax import lax

    m = a.shape[-1]
    strict = jnp.tril(a, -1)
    diag = jnp.diagonal(a, axis1=-2, axis2=-1)

    def row(i: Any, x: Any) -> Any:
        # x's rows >= i are still zero, so strict[i] @ x only sums the solved rows.
        r = _row(b, i) - jnp.einsum("...k,...kn->...n", _row(strict, i), x, precision=lax.Precision.HIGHEST)
        if not unit_diagonal:
            r = r / _elem(diag, i)
        return _set_row(x, i, r)

    return lax.fori_loop(0, m, row, jnp.zeros(jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + b.shape[-2:],
                                               b.dtype))


# ---------------------------------------------------------------------------------------------------- QR

def geqrf(a: Any) -> Tuple[Any, Any]:
    """LAPACK geqrf: R in the upper triangle, the Householder vectors below it (v[k] = 1 implied), and taus.
    Complex: zgeqrf, whose reflectors I - tau v v^H have complex tau and a real beta on the diagonal."""
    import jax.numpy as jnp
    from jax import lax

    *batch, m, n = a.shape
    if a.size == 0:
        return a, jnp.zeros((*batch, _min(m, n)), a.dtype)

    def step(k: Any, state: Tuple[Any, Any]) -> Tuple[Any, Any]:
        a, taus = state
        a, tau = _householder_step(a, k)
        return a, lax.dynamic_update_slice_in_dim(taus, tau, k, axis=taus.ndim - 1)

    return lax.fori_loop(0, _min(m, n), step, (a, jnp.zeros((*batch, _min(m, n)), a.dtype)))


def _householder_step(a: Any, k: Any) -> Tuple[Any, Any]:
    """Column k of a (..., m, n) reduced by the reflector [dz]larfg makes of its rows k..m-1, which is applied (H^H)
    to the columns after it: (a with R's entry and the reflector's vector in column k, tau as a unit axis)."""
    import jax.numpy as jnp
    from jax import lax

    m, n = a.shape[-2:]
    rows, cols = jnp.arange(m), jnp.arange(n)
    x = _col(a, k)
    alpha = _elem(x, k)
    below = jnp.where(rows > k, x, jnp.zeros_like(x))
    xnorm = jnp.sqrt(jnp.sum(jnp.real(below * _conj(below)), axis=-1, keepdims=True))
    # [dz]larfg: beta = -sign(re alpha) * |(alpha, x)|, tau = (beta - alpha) / beta, v = x / (alpha - beta).
    re, im = jnp.real(alpha), jnp.imag(alpha)
    norm = jnp.sqrt(re * re + im * im + xnorm * xnorm)
    beta = jnp.where(re >= 0, -norm, norm).astype(a.dtype)
    trivial = (xnorm == 0) & (im == 0)  # H = I: LAPACK leaves the column alone and sets tau = 0
    safe = jnp.where(trivial, jnp.ones_like(beta), beta)
    tau = jnp.where(trivial, jnp.zeros_like(beta), (beta - alpha) / safe)
    scale = jnp.where(trivial, jnp.zeros_like(beta), 1 / jnp.where(trivial, jnp.ones_like(beta), alpha - beta))
    v = jnp.where(rows == k, jnp.ones_like(x), below * scale)
    # Apply H^H = I - conj(tau) v v^H to the trailing columns.
    w = jnp.einsum("...i,...ij->...j", _conj(v), a, precision=lax.Precision.HIGHEST)
    update = _conj(tau)[..., None] * v[..., :, None] * w[..., None, :]
    a = jnp.where(cols > k, a - update, a)
    newcol = jnp.where(rows < k, x, jnp.where(rows == k, jnp.where(trivial, alpha, beta), v))
    return _set_col(a, k, newcol), tau


def geqp3(a: Any, jpvt: Any, **params: Any) -> Tuple[Any, Any, Any]:
    """LAPACK geqp3, QR with column pivoting (jax's ``qr(..., pivoting=True)``, which jax implements for cpu and gpu
    only): (a with R and the reflectors as geqrf leaves them, jpvt, taus), a[:, jpvt - 1] = Q R. Columns whose jpvt
    entry is nonzero are moved to the front first, in dgeqp3's order of swaps, and reduced without pivoting; then
    each step takes the free column of largest remaining norm (the first of equals, as idamax), with the norms
    downdated after each reflector as xlaqp2 downdates them (recomputed where cancellation has eaten them)."""
    import jax

    *batch, m, n = a.shape
    one = _geqp3_one
    for _ in batch:
        one = jax.vmap(one)
    return tuple(one(a, jpvt))  # type: ignore[return-value]


def _geqp3_one(a: Any, jpvt: Any) -> Tuple[Any, Any, Any]:
    import jax.numpy as jnp
    from jax import lax

    m, n = a.shape
    k_steps = _min(m, n)
    rows, cols = jnp.arange(m), jnp.arange(n)
    real = jnp.finfo(a.dtype).dtype
    tol3z = float(np.sqrt(np.finfo(np.dtype(real)).eps / 2))  # sqrt(xlamch('E')): LAPACK's eps is half a ulp

    def swap(a: Any, i: Any, j: Any) -> Any:
        ci, cj = _col(a, i), _col(a, j)
        return _set_col(_set_col(a, i, cj), j, ci)

    def swap_entries(v: Any, i: Any, j: Any) -> Any:
        vi, vj = v[i], v[j]
        return v.at[i].set(vj).at[j].set(vi)

    # dgeqp3: the leading (fixed) columns to the front, one swap each; every jpvt entry becomes its column's number.
    def lead(j: Any, state: Tuple[Any, Any, Any]) -> Tuple[Any, Any, Any]:
        a, p, nfxd = state
        fixed = jpvt[j] != 0
        moved = fixed & (j != nfxd)
        a = jnp.where(moved, swap(a, j, nfxd), a)
        p = jnp.where(moved, p.at[j].set(p[nfxd]).at[nfxd].set(j + 1), p.at[j].set(j + 1))
        return a, p, nfxd + fixed.astype(nfxd.dtype)

    a, p, nfxd = lax.fori_loop(0, n, lead, (a, jnp.zeros((n,), jpvt.dtype), jnp.asarray(0, jpvt.dtype)))

    def norms(a: Any, k: Any) -> Any:  # |a[k:, j]| for every column
        x = jnp.where(rows[:, None] >= k, a, jnp.zeros_like(a))
        return jnp.sqrt(jnp.sum(jnp.real(x * _conj(x)), axis=0))

    def step(k: Any, state: Tuple[Any, Any, Any, Any, Any]) -> Tuple[Any, Any, Any, Any, Any]:
        a, p, taus, vn1, vn2 = state
        free = k >= nfxd
        start = k == nfxd  # the free columns' norms, of the rows left after the fixed columns' reflectors
        vn1 = jnp.where(start, norms(a, k), vn1)
        vn2 = jnp.where(start, vn1, vn2)
        pvt = jnp.argmax(jnp.where(cols >= k, vn1, -jnp.ones_like(vn1))).astype(k.dtype)  # the first largest
        pvt = jnp.where(free, pvt, k)
        moved = pvt != k
        a = jnp.where(moved, swap(a, k, pvt), a)
        p = jnp.where(moved, swap_entries(p, k, pvt), p)
        vn1 = jnp.where(moved, vn1.at[pvt].set(vn1[k]), vn1)
        vn2 = jnp.where(moved, vn2.at[pvt].set(vn2[k]), vn2)
        a, tau = _householder_step(a, k)
        taus = lax.dynamic_update_slice_in_dim(taus, tau, k, axis=0)
        # xlaqp2: each later column's norm less the entry row k now holds, recomputed below row k where the update
        # has cancelled too much of it.
        safe1 = jnp.where(vn1 != 0, vn1, jnp.ones_like(vn1))
        safe2 = jnp.where(vn2 != 0, vn2, jnp.ones_like(vn2))
        temp = jnp.maximum(1 - (jnp.abs(_row(a, k)) / safe1) ** 2, 0)
        temp2 = temp * (vn1 / safe2) ** 2
        fresh = norms(a, k + 1)
        later = free & (cols > k) & (vn1 != 0)
        recompute = later & (temp2 <= tol3z)
        vn1_new = jnp.where(recompute, fresh, jnp.where(later, vn1 * jnp.sqrt(temp), vn1))
        vn2 = jnp.where(recompute, fresh, vn2)
        return a, p, taus, vn1_new, vn2

    zeros = jnp.zeros((n,), real)
    state = (a, p, jnp.zeros((k_steps,), a.dtype), zeros, zeros)
    a, p, taus, _, _ = lax.fori_loop(0, k_steps, step, state)
    return a, p, taus


def householder_product(a: Any, taus: Any) -> Any:
    """LAPACK orgqr: the first n columns of H_0 H_1 ... H_{k-1}, applied right to left to the identity."""
    import jax.numpy as jnp
    from jax import lax

    *batch, m, n = a.shape
    k = taus.shape[-1]
    rows = jnp.arange(m)
    q0 = jnp.broadcast_to(jnp.eye(m, n, dtype=a.dtype), a.shape)
    if k == 0 or a.size == 0:
        return q0

    def step(t: Any, q: Any) -> Any:
        i = k - 1 - t
        v = jnp.where(rows > i, _col(a, i), jnp.where(rows == i, 1, 0).astype(a.dtype))
        tau = _elem(taus, i)
        w = jnp.einsum("...i,...ij->...j", _conj(v), q, precision=lax.Precision.HIGHEST)  # H = I - tau v v^H
        return q - tau[..., None] * v[..., :, None] * w[..., None, :]

    return lax.fori_loop(0, k, step, q0)


# ---------------------------------------------------------------------------------------------------- eigh

def tridiagonal_solve(dl: Any, d: Any, du: Any, b: Any, *, perturb_singular: bool = False, **params: Any) -> Any:
    """Solves T x = b for the tridiagonal T of sub-, main and superdiagonals ``dl``, ``d``, ``du`` ([..., n]; dl[0]
    and du[n - 1] unused) and right-hand sides ``b`` ([..., n, k]), as jaxlib's cpu kernels solve it (the current
    series; jax 0.4.13's cpu has no kernel of its own and this lowering is not registered there). Without
    ``perturb_singular``, LAPACK's xGTSV: Gaussian elimination with row interchanges, x all NaN where a pivot is
    exactly zero (jax's answer to gtsv's info). With it, LAPACK's xLAGTF factorisation with row interchanges, the
    forward substitution done on the fly, then xLAGTS' back substitution: a singular or nearly singular T still
    gives a finite x, which is what inverse iteration for eigenvectors needs."""
    import jax

    solve = _perturbed_tridiagonal_solve if perturb_singular else _gtsv
    for _ in range(d.ndim - 1):
        solve = jax.vmap(solve)
    return solve(dl, d, du, b)


def _gtsv(dl: Any, d: Any, du: Any, b: Any) -> Any:
    """One system of tridiagonal_solve without perturb_singular (dl, d, du: [n], b: [n, k]): [dz]gtsv. Row k + 1
    is eliminated against row k, or the two swap first where the subdiagonal element is the larger (|re| + |im|
    for complex, as zgtsv compares); a swap fills the second superdiagonal of U, which the back substitution reads."""
    import jax.numpy as jnp
    from jax import lax

    n = d.shape[0]
    if n == 0:
        return b
    complex_ = jnp.iscomplexobj(b)

    def size(z: Any) -> Any:
        return jnp.abs(jnp.real(z)) + jnp.abs(jnp.imag(z)) if complex_ else jnp.abs(z)

    def one(z: Any) -> Any:
        return jnp.where(z == 0, jnp.ones_like(z), z)

    def eliminate(i: Any, state: Tuple[Any, Any, Any, Any, Any]) -> Tuple[Any, Any, Any, Any, Any]:
        diag, sup, sup2, x, ok = state
        sub, di, di1, dui = dl[i + 1], diag[i], diag[i + 1], sup[i]
        dui1 = sup[i + 1]  # 0 at the last step: no row i + 2 to bring up
        xi, xi1 = x[i], x[i + 1]
        keep = size(di) >= size(sub)
        skip = (sub == 0) if complex_ else jnp.zeros((), bool)  # zgtsv: no elimination at all
        keep = keep | skip
        ok = ok & ~(keep & (di == 0))
        fact = sub / one(di)  # no interchange: row i + 1 -= fact * row i
        kept_d, kept_x = di1 - fact * dui, xi1 - fact * xi
        kept_d = jnp.where(skip, di1, kept_d)
        kept_x = jnp.where(skip, xi1, kept_x)
        mult = di / one(sub)  # interchange
        diag = diag.at[i].set(jnp.where(keep, di, sub)).at[i + 1].set(jnp.where(keep, kept_d, dui - mult * di1))
        last = i == n - 2  # sup[n - 1] stays +0
        sup = sup.at[i].set(jnp.where(keep, dui, di1)).at[i + 1].set(jnp.where(keep | last, dui1, -mult * dui1))
        sup2 = sup2.at[i].set(jnp.where(keep, jnp.zeros_like(dui1), dui1))
        x = x.at[i].set(jnp.where(keep, xi, xi1)).at[i + 1].set(jnp.where(keep, kept_x, xi - mult * xi1))
        return diag, sup, sup2, x, ok

    sup0 = du.at[n - 1].set(0)
    state = (d, sup0, jnp.zeros_like(d), b, jnp.array(True))
    diag, sup, sup2, x, ok = lax.fori_loop(0, n - 1, eliminate, state)
    ok = ok & (diag[n - 1] != 0)
    padded = jnp.concatenate([x, jnp.zeros((2,) + x.shape[1:], x.dtype)])

    def substitute(t: Any, x: Any) -> Any:  # rows n - 1 down to 0 (past the last row: zeros, subtracting +0)
        k = n - 1 - t
        return x.at[k].set((x[k] - sup[k] * x[k + 1] - sup2[k] * x[k + 2]) / diag[k])

    x = lax.fori_loop(0, n, substitute, padded)[:n]
    return jnp.where(ok, x, jnp.full_like(x, jnp.nan))


def _perturbed_tridiagonal_solve(dl: Any, d: Any, du: Any, b: Any) -> Any:
    """One system of tridiagonal_solve with perturb_singular (dl, d, du: [n], b: [n, k])."""
    import jax.numpy as jnp
    from jax import lax

    n = d.shape[0]
    if n == 0:
        return b
    real = np.finfo(np.dtype(b.dtype)).dtype  # the real type of a complex one
    eps = real.type(np.finfo(real).eps)
    if n == 1:
        return _perturbed_pivot(eps * jnp.abs(d[0]), d[0], b[0], divide=True)[None]

    u = jnp.zeros((n, 3), b.dtype).at[0, 0].set(d[0]).at[0, 1].set(du[0])
    absolute = jnp.abs

    def eliminate(k: Any, state: Tuple[Any, Any, Any, Any]) -> Tuple[Any, Any, Any, Any]:
        # Row k + 1 against row k of U (xLAGTF): no elimination where the subdiagonal element is zero, else the row
        # with the larger element relative to its row's scale is the pivot row (rows k and k + 1 swap for row k + 1).
        u, x, scale1, max_abs_u = state
        sub, diag, sup = dl[k + 1], d[k + 1], du[k + 1]
        inner = k < n - 2
        scale2 = absolute(sub) + absolute(diag) + jnp.where(inner, absolute(sup), real.type(0))
        u_k0, u_k1 = u[k, 0], u[k, 1]
        piv1 = jnp.where(u_k0 == 0, real.type(0), absolute(u_k0) / scale1)
        piv2 = absolute(sub) / scale2
        keep = sub == 0
        swap = ~keep & (piv2 > piv1)
        down = sub / u_k0  # row k + 1 -= down * row k
        up = u_k0 / sub  # after the swap: the new row k + 1 = the old row k - up * the old row k + 1
        x_k, b_k1 = x[k], b[k + 1]
        new_k0 = jnp.where(swap, sub, u_k0)
        new_k1 = jnp.where(swap, diag, u_k1)
        new_k2 = jnp.where(swap & inner, sup, jnp.zeros_like(sup))
        new_k10 = jnp.where(swap, u_k1 - up * diag, jnp.where(keep, diag, diag - down * u_k1))
        new_k11 = jnp.where(swap, jnp.where(inner, -up * sup, u[k + 1, 1]), sup)
        u = u.at[k].set(jnp.stack([new_k0, new_k1, new_k2])).at[k + 1, 0].set(new_k10).at[k + 1, 1].set(new_k11)
        x_k1 = jnp.where(swap, x_k - up * b_k1, jnp.where(keep, b_k1, b_k1 - down * x_k))
        x = x.at[k + 1].set(x_k1).at[k].set(jnp.where(swap, b_k1, x_k))
        scale1 = jnp.where(swap, absolute(new_k10) + absolute(new_k11), scale2)
        max_abs_u = jnp.where(inner, jnp.maximum(max_abs_u, jnp.max(absolute(u[k]))), max_abs_u)
        return u, x, scale1, max_abs_u

    state = (u, b, absolute(d[0]) + absolute(du[0]), jnp.maximum(absolute(d[0]), absolute(du[0])))
    u, x, _, max_abs_u = lax.fori_loop(0, n - 1, eliminate, state)
    perturb = eps * jnp.maximum(max_abs_u, absolute(u[n - 1, 0]))

    padded = jnp.concatenate([x, jnp.zeros((2,) + x.shape[1:], x.dtype)])

    def substitute(i: Any, x: Any) -> Any:  # xLAGTS: rows n - 1 down to 0, each pivot moved off zero if need be
        k = n - 1 - i
        c1 = jnp.where(k + 1 < n, u[k, 1], jnp.zeros_like(u[k, 1]))
        c2 = jnp.where(k + 2 < n, u[k, 2], jnp.zeros_like(u[k, 2]))
        row = x[k] - c1 * x[k + 1] - c2 * x[k + 2]
        return x.at[k].set(_perturbed_pivot(perturb, u[k, 0], row))

    return lax.fori_loop(0, n, substitute, padded)[:n]


def _perturbed_pivot(perturb: Any, pivot: Any, row: Any, divide: bool = False) -> Any:
    """``row / pivot`` (as ``row * (1 / pivot)``, or a divide for a 1 x 1 system, as the cpu kernel computes them)
    after xLAGTS' guard: a pivot under 1 in magnitude whose row would overflow when divided by it is moved away from
    zero by ``perturb`` (at least the smallest normal number, of the pivot's sign), doubling it each time, or the
    row and pivot are scaled up when the pivot is below the smallest normal number but the row allows it."""
    import jax.numpy as jnp
    from jax import lax

    real = np.finfo(np.dtype(row.dtype)).dtype
    safemin = real.type(np.finfo(real).tiny)  # xLAMCH's safe minimum: 1 / max is below it in IEEE formats
    bignum = real.type(1) / safemin
    max_factor = jnp.max(jnp.abs(row))
    perturb = jnp.maximum(jnp.abs(perturb), safemin)
    perturb = jnp.where(jnp.signbit(jnp.real(pivot)), -perturb, perturb)

    def small(state: Tuple[Any, Any, Any, Any]) -> Any:
        pivot, _, _, stop = state
        return (jnp.abs(pivot) < 1) & ~stop

    def step(state: Tuple[Any, Any, Any, Any]) -> Tuple[Any, Any, Any, Any]:
        pivot, row, perturb, _ = state
        size = jnp.abs(pivot)
        tiny = size < safemin
        move = jnp.where(tiny, (size == 0) | (max_factor * safemin > size), max_factor > size * bignum)
        scale = tiny & ~move
        pivot = jnp.where(move, pivot + perturb.astype(pivot.dtype), jnp.where(scale, pivot * bignum, pivot))
        row = jnp.where(scale, row * bignum, row)
        return pivot, row, jnp.where(move, perturb * 2, perturb), ~move

    pivot, row, _, _ = lax.while_loop(small, step, (pivot, row, perturb, jnp.array(False)))
    return row / pivot if divide else row * (jnp.ones_like(pivot) / pivot)


def _round_robin(n: int) -> np.ndarray:
    """(n-1, n) permutations: round r pairs perm[r, :n/2] with perm[r, n/2:], every pair once per sweep."""
    players = list(range(n))
    rounds = []
    for _ in range(n - 1):
        top, bottom = players[: n // 2], players[n // 2:][::-1]
        rounds.append(top + bottom)
        players = [players[0]] + [players[-1]] + players[1:-1]
    return np.asarray(rounds, np.int32)


def eigh(a: Any, *, lower: bool, sort_eigenvalues: bool, subset_by_index: Any = None,
         algorithm: Any = None) -> List[Any]:
    """(eigenvectors, eigenvalues) of the symmetric (Hermitian) matrix held in ``a``'s lower (or upper) triangle.
    The current series adds ``subset_by_index`` (the [lo, hi) range of the ascending eigenvalues to return) and
    ``algorithm`` (a choice among XLA's implementations: the ipu has one)."""
    del algorithm
    import jax.numpy as jnp

    a = jnp.tril(a) + _conj(jnp.swapaxes(jnp.tril(a, -1), -1, -2)) if lower else \
        jnp.triu(a) + _conj(jnp.swapaxes(jnp.triu(a, 1), -1, -2))
    if jnp.iscomplexobj(a):  # a Hermitian matrix's diagonal is real: LAPACK ignores the imaginary parts
        eye = jnp.eye(a.shape[-1], dtype=bool)
        a = jnp.where(eye, jnp.real(a).astype(a.dtype), a)
    v, w = _jacobi(a)
    if a.shape[-1] > 1:
        # Refinement: the rotations leave V orthogonal to O(sqrt(rotations) eps) only. One Newton-Schulz step
        # (V <- V (3I - V^H V) / 2) makes it orthogonal to rounding, and Jacobi on the nearly diagonal V^H A V
        # (one or two sweeps of small rotations) then takes up what that moved.
        from jax import lax
        hi = lax.Precision.HIGHEST
        vh = _conj(jnp.swapaxes(v, -1, -2))
        v = 1.5 * v - 0.5 * jnp.matmul(v, jnp.matmul(vh, v, precision=hi), precision=hi)
        vh = _conj(jnp.swapaxes(v, -1, -2))
        b = jnp.matmul(vh, jnp.matmul(a, v, precision=hi), precision=hi)
        b = (b + _conj(jnp.swapaxes(b, -1, -2))) / 2
        u, w = _jacobi(b, max_sweeps=3)
        v = jnp.matmul(v, u, precision=hi)
    if sort_eigenvalues or subset_by_index is not None:
        order = jnp.argsort(w, axis=-1)
        w = jnp.take_along_axis(w, order, axis=-1)
        v = jnp.take_along_axis(v, order[..., None, :], axis=-1)
    if subset_by_index is not None:
        lo, hi = subset_by_index
        v, w = v[..., lo:hi], w[..., lo:hi]
    return [v, w]


def eigh_jacobi(a: Any, *, lower: bool, sort_eigenvalues: bool) -> List[Any]:
    """eigh_jacobi_p returns (eigenvalues, eigenvectors), the other way round from eigh_p."""
    v, w = eigh(a, lower=lower, sort_eigenvalues=sort_eigenvalues)
    return [w, v]


def _jacobi(a: Any, max_sweeps: int = 16) -> Tuple[Any, Any]:
    import jax.numpy as jnp
    from jax import lax

    n = a.shape[-1]
    if n == 0 or a.size == 0:
        return a, jnp.zeros(a.shape[:-1], jnp.real(a).dtype)
    if n == 1:
        return jnp.ones_like(a), jnp.real(a[..., 0])
    size = n + n % 2  # pad to even with a decoupled zero row/column: its rotations are all the identity
    if size != n:
        pad = [(0, 0)] * (a.ndim - 2) + [(0, 1), (0, 1)]
        a = jnp.pad(a, pad)
    half = size // 2
    perms = _round_robin(size)
    inverses = np.argsort(perms, axis=1).astype(np.int32)
    eps = float(jnp.finfo(a.dtype).eps)
    offdiag = 1 - jnp.eye(size, dtype=a.dtype)
    hermitian = jnp.iscomplexobj(a)

    def rotate(r: Any, state: Tuple[Any, Any]) -> Tuple[Any, Any]:
        a, v = state
        perm, inverse = jnp.asarray(perms)[r], jnp.asarray(inverses)[r]
        p, q = perm[:half], perm[half:]
        app, aqq, apq = jnp.real(a[..., p, p]), jnp.real(a[..., q, q]), a[..., p, q]
        phase = None
        if hermitian:  # U = diag(1, g) J with g = conj(apq) / |apq|: diag(1, g)^H turns apq into |apq| >= 0
            mag = jnp.abs(apq)
            safe = jnp.where(mag != 0, mag, jnp.ones_like(mag))
            phase = jnp.where(mag != 0, jnp.conj(apq) / safe.astype(apq.dtype), jnp.ones_like(apq))
            apq = mag
        # Golub & Van Loan's sym.schur2: J = [[c, s], [-s, c]] makes J^T [[app, apq], [apq, aqq]] J diagonal.
        nonzero = apq != 0
        tau = (aqq - app) / (2 * jnp.where(nonzero, apq, jnp.ones_like(apq)))
        t = jnp.where(tau >= 0, 1, -1).astype(tau.dtype) / (jnp.abs(tau) + jnp.sqrt(1 + tau * tau))
        t = jnp.where(nonzero, t, jnp.zeros_like(t))
        c = 1 / jnp.sqrt(1 + t * t)
        s = t * c
        rho = s / (1 + c)  # Rutishauser's form: c = 1 - s rho, so each update is a correction of size s

        def rows(x: Any, g: Any) -> Any:  # J^T diag(1, g) x on the rows of x, in perm order and back
            xp = x[..., perm, :]
            top, bottom = xp[..., :half, :], xp[..., half:, :]
            if g is not None:
                bottom = bottom * g[..., :, None]
            ss, rr = s[..., :, None], rho[..., :, None]
            new_top, new_bottom = top - ss * (bottom + rr * top), bottom + ss * (top - rr * bottom)
            return jnp.concatenate([new_top, new_bottom], axis=-2)[..., inverse, :]

        def cols(x: Any) -> Any:  # x U, as (U^T x^T)^T
            return jnp.swapaxes(rows(jnp.swapaxes(x, -1, -2), phase), -1, -2)

        a = cols(rows(a, None if phase is None else jnp.conj(phase)))  # U^H a U
        # the rotated pair exactly: app - t apq and aqq + t apq on the diagonal, 0 off it (not rounding residue)
        zero = jnp.zeros_like(apq).astype(a.dtype)
        a = a.at[..., p, q].set(zero).at[..., q, p].set(zero)
        a = a.at[..., p, p].set((app - t * apq).astype(a.dtype)).at[..., q, q].set((aqq + t * apq).astype(a.dtype))
        return a, cols(v)

    def squares(x: Any) -> Any:
        return jnp.real(x * _conj(x))

    def off_norm(a: Any) -> Any:
        return jnp.sqrt(jnp.sum(squares(a * offdiag), axis=(-2, -1)))

    norm = jnp.sqrt(jnp.sum(squares(a), axis=(-2, -1)))
    tol = eps * np.sqrt(size) * jnp.maximum(norm, jnp.finfo(a.dtype).tiny)

    def cond(state: Tuple[Any, Any, Any]) -> Any:
        sweep, a, _ = state
        return (sweep < max_sweeps) & jnp.any(off_norm(a) > tol)

    def sweep(state: Tuple[Any, Any, Any]) -> Tuple[Any, Any, Any]:
        count, a, v = state
        a, v = lax.fori_loop(0, size - 1, rotate, (a, v))
        return count + 1, a, v

    v0 = jnp.broadcast_to(jnp.eye(size, dtype=a.dtype), a.shape)
    _, a, v = lax.while_loop(cond, sweep, (jnp.int32(0), a, v0))
    w = jnp.real(jnp.diagonal(a, axis1=-2, axis2=-1))
    return v[..., :n, :n], w[..., :n]
