"""sort (jnp.sort/argsort, lax.sort with several operands), ipu against cpu, bit-exact."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _conformance import ALL_DTYPES, EXACT, check, random, small_ints, special
from jax import lax


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_sort_and_argsort_over_every_axis(dtype):
    x = random(dtype, (3, 4, 5), seed=2)
    check(lambda x: [jnp.sort(x, axis=a) for a in (0, 1, 2, -1)] + [jnp.sort(x, axis=None)]
          + [jnp.argsort(x, axis=a) for a in (0, 1, 2)], x, **EXACT)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_special_values_total_order(dtype):
    # NaN (both signs), -0.0 before/after 0.0 as XLA:CPU puts them (equal: stable), infinities at the ends
    s = np.concatenate([special(dtype), -special(dtype), special(dtype)[::-1]])
    rng = np.random.default_rng(3)
    shuffled = s[rng.permutation(s.size)]
    check(lambda s: (jnp.sort(s), jnp.argsort(s), jnp.sort(s.reshape(4, -1), axis=0),
                     jnp.argsort(s.reshape(4, -1), axis=1), jnp.argsort(-s)), shuffled, **EXACT)


@pytest.mark.parametrize("dtype", ["int32", "uint32", "float32", "bool"])
def test_argsort_with_ties_is_stable(dtype):
    x = (small_ints(dtype, (37, 53), seed=4) % 4).astype(dtype)
    check(lambda x: (jnp.argsort(x, axis=0), jnp.argsort(x, axis=1), jnp.argsort(x.ravel())), x)


def test_key_value_lax_sort():
    keys = small_ints("int32", (37, 53), seed=5) % 5
    values = random("float32", (37, 53), seed=6)
    other = random("uint32", (37, 53), seed=7)
    check(lambda k, v, o: (lax.sort((k, v), num_keys=1), lax.sort((k, v, o), dimension=0, num_keys=1),
                           lax.sort((k, v), num_keys=2), lax.sort_key_val(v, k, dimension=0)), keys, values, other,
          **EXACT)


@pytest.mark.filterwarnings("ignore:backend and device argument on jit is deprecated")
def test_unstable_sort_gives_a_valid_order():
    # The order of ties in an unstable sort is unspecified (XLA:CPU's comes from its C++ library's std::sort): the
    # keys must match cpu exactly, and each slice's (key, value) pairs must be a permutation of the input's.
    keys = small_ints("int32", (4, 1000), seed=8) % 3
    values = np.arange(keys.size, dtype=np.float32).reshape(keys.shape)
    f = jax.jit(lambda k, v: lax.sort((k, v), num_keys=1, is_stable=False), backend="ipu")
    got_keys, got_values = (np.asarray(a) for a in f(keys, values))
    np.testing.assert_array_equal(got_keys, np.sort(keys, axis=1))
    for row in range(keys.shape[0]):
        assert sorted(zip(got_keys[row], got_values[row])) == sorted(zip(keys[row], values[row]))


@pytest.mark.parametrize("dtype", ["float16", "int32"])
def test_descending_forms(dtype):
    x = random(dtype, (37, 53), seed=9)
    check(lambda x: (-jnp.sort(-x, axis=0), jnp.argsort(-x, axis=1), lax.sort(-x, dimension=1)), x, **EXACT)


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_big_sort(dtype):
    x = random(dtype, (100_003,), seed=10)
    if dtype == "float32":
        x[::997] = np.nan
        x[1::991] = -0.0
    check(lambda x: (jnp.sort(x), jnp.argsort(x)), x, **EXACT)


def test_empty_and_single_element():
    check(lambda a, b, c: (jnp.sort(a), jnp.argsort(b, axis=0), jnp.sort(b, axis=1), jnp.sort(c)),
          np.zeros((0,), np.float32), np.zeros((3, 0), np.int32), np.ones((1,), np.float16), **EXACT)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "uint32"])
def test_top_k(dtype):
    # chlo.top_k: largest first in XLA:CPU's total order (-0.0 < 0.0, NaN above inf), ties to the smaller index
    s = np.concatenate([special(dtype)] * 3)
    x = random(dtype, (37, 53), seed=11)
    check(lambda s, x: [lax.top_k(s, k) for k in (0, 1, 5, s.size)] + [lax.top_k(x, 7), lax.top_k(x % 3, 4)], s, x,
          **EXACT)


def test_top_k_big():
    check(lambda x: lax.top_k(x, 10), random("float32", (100_003,), seed=12), **EXACT)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_approx_max_k_and_min_k(dtype):
    # XLA's ApproxTopK custom call, which every backend but the TPU computes exactly: a sort and a slice. Distinct
    # values (integers exact in bfloat16), so the indices are unique; k = 1 as well (XLA reduces there)
    rng = np.random.default_rng(13)
    x = (rng.permutation(240) - 120).reshape(12, 20).astype(dtype)
    y = (rng.permutation(240) - 120).reshape(2, 3, 40).astype(dtype)
    check(lambda x, y: [lax.approx_max_k(x, k) for k in (1, 7, 20)] + [lax.approx_min_k(x, 5)]
          + [lax.approx_max_k(x, 3, reduction_dimension=0), lax.approx_min_k(y, 2, reduction_dimension=1)]
          + [lax.approx_max_k(x, 4, recall_target=0.5, aggregate_to_topk=False)], x, y, **EXACT)


@pytest.mark.filterwarnings("ignore:backend and device argument on jit is deprecated")
def test_approx_max_k_with_ties_and_its_gradient():
    # Ties: the values match cpu exactly and each index points at its value (XLA:CPU's unstable sort orders ties as
    # its C++ library's std::sort does; the ipu's sort is stable). The gradient scatters into the chosen indices.
    x = (small_ints("int32", (16, 300), seed=15) % 9).astype(np.float16)
    f = jax.jit(lambda x: lax.approx_max_k(x, 20), backend="ipu")
    values, indices = (np.asarray(a) for a in f(x))
    want, _ = jax.jit(lambda x: lax.approx_max_k(x, 20), backend="cpu")(x)
    np.testing.assert_array_equal(values, np.asarray(want))
    np.testing.assert_array_equal(np.take_along_axis(x, indices, axis=1), values)
    assert all(len(set(row)) == row.size for row in indices)
    z = random("float32", (8, 100), seed=16)
    check(jax.grad(lambda z: jnp.sum(lax.approx_min_k(z, 6)[0] ** 2)), z, **EXACT)
