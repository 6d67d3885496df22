"""Data movement ops (broadcast_in_dim, reshape, transpose, slice, dynamic_slice, dynamic_update_slice, concatenate,
pad, iota) on every supported dtype, ipu against cpu. All are exact."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from _conformance import ALL_DTYPES, EXACT, check, random
from jax import lax


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_broadcast_reshape_transpose(dtype):
    def f(x, row, scalar, cube):
        return (jnp.broadcast_to(scalar, (3, 4)), jnp.broadcast_to(row, (37, 53)), x + row[:, None][:1],
                x.reshape(53, 37), x.reshape(-1), x.reshape(1, 37, 1, 53), x.T, cube.transpose(2, 0, 1),
                cube.transpose(1, 2, 0).reshape(6, 20), jnp.moveaxis(cube, 0, -1), x[:0].T, scalar.reshape(1, 1))

    check(f, random(dtype, (37, 53), seed=1), random(dtype, (53,), seed=2), random(dtype, (), seed=3),
          random(dtype, (4, 5, 6), seed=4))


@pytest.mark.parametrize("dtype", ["float32", "float16", "uint8", "bool"])
def test_large_transposes_split_over_host_threads(dtype):
    # Large enough that the host threads copy parts of each (ranges that start and end inside rows), with the two
    # minor dimensions swapped: the host copies those rows 16 at a time (strided_copy.h); a dot reading its lhs
    # with the contracting dimension first stages it the same way.
    def f(x, cube):
        return x.T, cube.transpose(0, 2, 1), cube.transpose(2, 1, 0), x.T[3:-5, 1:]

    check(f, random(dtype, (301, 517), seed=1), random(dtype, (5, 300, 71), seed=2), **EXACT)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_static_slices_and_strides(dtype):
    def f(x, big):
        return (lax.slice(x, (0, 0), (37, 53), (2, 3)), lax.slice(x, (5, 1), (6, 52)), lax.slice(x, (3, 3), (3, 9)),
                x[1:-1, 10:20], x[-1], x[:, 0], lax.slice(big, (7,), (100_003,), (13,)), big[50_000:50_001])

    check(f, random(dtype, (37, 53), seed=1), random(dtype, (100_003,), seed=2))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_dynamic_slice_and_update(dtype):
    def f(x, update, i, j):
        return (x[i], lax.dynamic_slice(x, (i, j), (3, 4)), lax.dynamic_slice_in_dim(x, j, 5, axis=1),
                lax.dynamic_update_slice(x, update, (i, j)), lax.dynamic_index_in_dim(x, i, keepdims=False))

    x, update = random(dtype, (37, 53), seed=1), random(dtype, (3, 4), seed=2)
    # in range, negative (x[i] wraps it) and out of range (start indices are clamped)
    for i, j in ((0, 0), (5, 7), (-1, -3), (36, 52), (1000, -1000)):
        check(f, x, update, np.int32(i), np.int32(j))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_concatenate(dtype):
    def f(a, b, c, empty):
        return (jnp.concatenate([a, b], axis=0), jnp.concatenate([a, c, a], axis=1), jnp.concatenate([a, empty], 1),
                jnp.stack([a, a, a]), jnp.concatenate([a.reshape(-1), b.reshape(-1), c.reshape(-1)]),
                jnp.hstack([a[0], a[1]]))

    check(f, random(dtype, (7, 5), seed=1), random(dtype, (2, 5), seed=2), random(dtype, (7, 1), seed=3),
          random(dtype, (7, 0), seed=4))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_pad_with_negative_and_interior_padding(dtype):
    def f(x, value):
        return (lax.pad(x, value, [(1, 2, 0), (0, 3, 0)]), lax.pad(x, value, [(-2, 1, 1), (3, -4, 2)]),
                lax.pad(x, value, [(0, 0, 3), (-5, -5, 0)]), jnp.pad(x, ((2, 1), (1, 2))),
                lax.pad(x[:0], value, [(1, 1, 2), (0, 0, 0)]), lax.pad(x[0], value, [(-7, -6, 0)]))

    check(f, random(dtype, (7, 13), seed=1), random(dtype, (), seed=2))


def test_iota_via_arange():
    check(lambda: (jnp.arange(10), jnp.arange(100_003), jnp.arange(0.0, 3.0, 0.25), jnp.arange(5, dtype=jnp.uint32),
                   jnp.arange(7, dtype=jnp.float16), lax.broadcasted_iota(jnp.int32, (3, 4), 1),
                   lax.broadcasted_iota(jnp.float32, (3, 4, 2), 0), jnp.eye(5), jnp.tri(4, 6), jnp.arange(0)))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_reverse_flip_and_negative_steps(dtype):
    x = random(dtype, (37, 53), seed=5)
    v = random(dtype, (100_003,), seed=6)
    check(lambda x, v: (jnp.flip(x), jnp.flip(x, 1), x[::-1], v[::-1], lax.rev(x, (0, 1)), jnp.flip(v[:0])), x, v,
          **EXACT)
