"""lax.rng_bit_generator and jax's rbg / unsafe_rbg PRNGs on the ipu: the same bits as XLA:CPU for the same key."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _conformance import EXACT, check
from jax import lax

KEYS = [
    [0, 0, 0, 0],
    [1, 2, 3, 4],
    [0xDEADBEEF, 0x12345678, 0xFFFFFFFE, 0xFFFFFFFF],  # the counter's low words carry into each other
    [7, 8, 0xFFFFFFFF, 0xFFFFFFFF],  # the counter's low 64 bits wrap (and carry into the high 64 for the bits)
]


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("shape", [(), (1,), (3,), (4,), (5,), (7, 9), (2, 3, 5), (0, 4), (1000,)])
def test_rng_bit_generator_bits_and_state(key, shape):
    k = np.array(key, np.uint32)
    check(lambda k: lax.rng_bit_generator(k, shape), k, **EXACT)
    check(lambda k: lax.rng_bit_generator(k, shape, algorithm=lax.RandomAlgorithm.RNG_PHILOX), k, **EXACT)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("shape", [(5,), (2, 7)])
def test_narrow_bits_are_the_low_bits_of_the_words(dtype, shape):
    check(lambda k: lax.rng_bit_generator(k, shape, dtype=dtype), np.array(KEYS[2], np.uint32), **EXACT)


def test_state_threads_through_a_loop():
    def f(k):
        def body(_, carry):
            k, acc = carry
            k, bits = lax.rng_bit_generator(k, (6,))
            return k, acc ^ bits
        return lax.fori_loop(0, 5, body, (k, jnp.zeros(6, jnp.uint32)))
    check(f, np.array(KEYS[2], np.uint32), **EXACT)


@pytest.mark.parametrize("impl", ["rbg", "unsafe_rbg"])
def test_rbg_prng_samplers(impl):
    def f(seed):
        key = jax.random.PRNGKey(seed)
        k1, k2 = jax.random.split(key)
        return (jax.random.bits(k1, (5, 3)), jax.random.uniform(k2, (17,)), jax.random.randint(k1, (9,), -5, 50),
                jax.random.permutation(k2, 10), jax.random.fold_in(key, 3))
    with jax.default_prng_impl(impl):
        check(f, np.uint32(42), **EXACT)


def test_unsupported_algorithm_is_named():
    with pytest.raises(Exception, match="THREE_FRY"):
        jax.jit(lambda k: lax.rng_bit_generator(k, (4,), algorithm=lax.RandomAlgorithm.RNG_THREE_FRY),
                backend="ipu")(np.zeros(4, np.uint32))


@pytest.mark.skipif(not hasattr(lax, "mulhi"), reason="lax.mulhi is new in the current series")
@pytest.mark.parametrize("dtype", ["uint32", "int32", "uint16", "int16", "uint8", "int8"])
def test_mulhi_is_the_high_half_of_each_product(dtype):
    # jax lowers it through 64-bit integers; the ipu computes it from 16-bit partial products (rng.mulhi)
    info = np.iinfo(dtype)
    rng = np.random.default_rng(11)
    a = rng.integers(info.min, info.max, 4099, endpoint=True).astype(dtype)
    b = rng.integers(info.min, info.max, 4099, endpoint=True).astype(dtype)
    edges = [info.min, info.max, 0, 1, -1 if info.min < 0 else 2, info.min + 1]
    a[:36], b[:36] = np.repeat(edges, 6).astype(dtype), np.tile(edges, 6).astype(dtype)
    check(lax.mulhi, a, b, **EXACT)


PHILOX = [name for name in ("philox2x32", "philox4x32") if hasattr(lax, "mulhi")]


@pytest.mark.skipif(not PHILOX, reason="the Philox PRNGs are new in the current series")
@pytest.mark.parametrize("impl", PHILOX)
def test_philox_prngs_give_cpus_bits(impl):
    def f(seed):
        key = jax.random.key(seed, impl=impl)
        k1, k2 = jax.random.split(key)
        return jax.random.key_data(k1), jax.random.bits(k2, (1000,)), jax.random.uniform(k1, (257,))

    check(f, np.uint32(1701), **EXACT)
