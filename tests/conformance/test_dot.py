"""dot_general (jnp.dot, matmul, einsum): batch and contracting dims, vectors, transposed operands, ipu against cpu.

Float tolerances grow with the contraction length K because the order of the sum may differ: atol ~ K * eps * |x|."""

from __future__ import annotations

import jax.numpy as jnp
import pytest
from _conformance import check, small_ints
from jax import lax

TOLERANCE = {"float32": {"rtol": 1e-5, "atol": 1e-3}, "float16": {"rtol": 1e-2, "atol": 0.5},
             "int32": {}, "uint32": {}}


@pytest.mark.parametrize("dtype", sorted(TOLERANCE))
def test_matmul_shapes(dtype):
    # small integer values: int products are exact and float sums stay well inside the tolerance
    a, b, v, w = (small_ints(dtype, shape, seed=i) for i, shape in enumerate([(37, 53), (53, 7), (53,), (37,)]))

    def f(a, b, v, w):
        return (jnp.dot(a, b), a @ v, w @ a, v @ v, jnp.matmul(a.T, w), b.T @ a.T, jnp.dot(a, a.T),
                jnp.dot(a[:, :0], b[:0]), jnp.dot(w[0], a), jnp.outer(v, w)[:3])

    check(f, a, b, v, w, **TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", sorted(TOLERANCE))
def test_einsum_batch_and_contracting_dims(dtype):
    x, y, z = (small_ints(dtype, s, seed=i) for i, s in enumerate([(2, 3, 4, 5), (2, 3, 5, 6), (4, 5, 6)]))

    def f(x, y, z):
        return (jnp.einsum("abij,abjk->abik", x, y), jnp.einsum("abij,abjk->bik", x, y),
                jnp.einsum("bij,bkj->bik", x[0], x[1]), jnp.einsum("aij,ijk->ak", x[0], z),
                jnp.einsum("ijk,ijk->", z, z), jnp.einsum("baij,bajk->abik", x, y),
                lax.dot_general(x[0], z, (((1, 2), (0, 1)), ((), ()))))

    check(f, x, y, z, **TOLERANCE[dtype])


def test_large_f32_matmul_spread_over_tiles():
    a, b = small_ints("float32", (256, 300), seed=1) / 16, small_ints("float32", (300, 129), seed=2) / 16
    check(lambda a, b: (a @ b, jnp.tanh(a @ b) @ b.T), a, b, rtol=1e-5, atol=1e-3)
