"""lax.rng_bit_generator and jax's rbg / unsafe_rbg PRNGs on the ipu: the same bits as XLA:CPU for the same key."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _conformance import BACKEND, EXACT, REFERENCE, check, enable_x64
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


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("shape", [(), (1,), (3,), (4,), (7, 9), (9, 7), (3, 5, 3), (2, 3, 5), (5, 4, 3), (0, 4),
                                   (1000,)])
def test_three_fry_bits_and_state(key, shape):
    """XLA's ThreeFry generator: the split dimension is the first even one, else the first largest ((7, 9), (9, 7),
    (3, 5, 3)), and the counter's low word carries into its high one (KEYS[2], KEYS[3])."""
    k = np.array(key, np.uint32)
    check(lambda k: lax.rng_bit_generator(k, shape, algorithm=lax.RandomAlgorithm.RNG_THREE_FRY), k, **EXACT)


@pytest.mark.parametrize("algorithm", ["RNG_DEFAULT", "RNG_THREE_FRY"])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("shape", [(5,), (2, 7)])
def test_narrow_bits_are_the_low_bits_of_the_words(algorithm, dtype, shape):
    check(lambda k: lax.rng_bit_generator(k, shape, dtype=dtype, algorithm=getattr(lax.RandomAlgorithm, algorithm)),
          np.array(KEYS[2], np.uint32), **EXACT)


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


@pytest.mark.skipif(not hasattr(jax, "export"), reason="jax.export is the current series'")
@pytest.mark.parametrize("impl", ["rbg", "unsafe_rbg"])
def test_shape_polymorphic_export_of_random_draws(impl):
    """jax.export with a symbolic batch size: the ipu's own lowering of the random bits takes symbolic shapes (the
    program is compiled once the call gives the size); each size draws cpu's bits."""
    def f(seed, x):
        key = jax.random.PRNGKey(seed)
        return jax.random.bits(key, (x.shape[0], 3)), jax.random.uniform(key, x.shape) + x

    with jax.default_prng_impl(impl):
        b = jax.export.symbolic_shape("b")
        exported = jax.export.export(jax.jit(f), platforms=["ipu", "cpu"])(
            jax.ShapeDtypeStruct((), np.uint32), jax.ShapeDtypeStruct((b[0], 5), np.float32))
        for n in (1, 4, 7):
            x = np.arange(5 * n, dtype=np.float32).reshape(n, 5)
            got = [np.asarray(v) for v in jax.jit(exported.call, backend=BACKEND)(np.uint32(3), x)]
            want = [np.asarray(v) for v in jax.jit(exported.call, backend=REFERENCE)(np.uint32(3), x)]
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g, w)


@pytest.mark.skipif(not hasattr(jax, "export"), reason="jax.export is the current series'")
@pytest.mark.parametrize("spec, sizes", [("b, 6", [(3, 6), (4, 6)]), ("b, 5", [(3, 5), (4, 5), (7, 5)]),
                                         ("3, b", [(3, 2), (3, 5)]), ("b, c", [(3, 5), (5, 3), (4, 3), (3, 3)])])
def test_three_fry_with_symbolic_dimensions(spec, sizes):
    """jax.export with symbolic dimensions: which dimension ThreeFry splits depends on their values (the first even
    one, else the first largest), so each size must give the bits cpu gives for it."""
    def f(k, x):
        return lax.rng_bit_generator(k, x.shape, algorithm=lax.RandomAlgorithm.RNG_THREE_FRY)

    exported = jax.export.export(jax.jit(f), platforms=["ipu", "cpu"])(
        jax.ShapeDtypeStruct((4,), np.uint32), jax.ShapeDtypeStruct(jax.export.symbolic_shape(spec), np.float32))
    key = np.array(KEYS[2], np.uint32)
    for size in sizes:
        x = np.zeros(size, np.float32)
        got = [np.asarray(v) for v in jax.jit(exported.call, backend=BACKEND)(key, x)]
        want = [np.asarray(v) for v in jax.jit(f, backend=REFERENCE)(key, x)]
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w, err_msg=f"{spec} = {size}")


@pytest.mark.parametrize("algorithm", ["RNG_DEFAULT", "RNG_THREE_FRY"])
@pytest.mark.parametrize("shape", [(), (1,), (3,), (4,), (7, 9), (2, 3, 5), (0, 4)])
def test_64_bit_words_with_x64(algorithm, shape):
    """uint64 bits (jax_enable_x64; u64 emulated as pairs of u32): Philox's 32-bit words in pairs, ThreeFry's two
    words per counter over the whole shape, as XLA's 64-bit generators make them."""
    with enable_x64():
        check(lambda k: lax.rng_bit_generator(k, shape, dtype=np.uint64,
                                              algorithm=getattr(lax.RandomAlgorithm, algorithm)),
              np.array(KEYS[2], np.uint32), **EXACT)


def test_rbg_float64_draws_withenable_x64():
    with enable_x64(), jax.default_prng_impl("rbg"):
        check(lambda s: (jax.random.uniform(jax.random.PRNGKey(s), (5,), dtype=jnp.float64),
                         jax.random.bits(jax.random.PRNGKey(s), (3,), jnp.uint64)), np.uint32(7), **EXACT)


def test_signed_words_are_refused_by_name():
    with pytest.raises(Exception, match="int32"):
        jax.jit(lambda k: lax.rng_bit_generator(k, (4,), dtype=np.int32), backend=BACKEND)(np.zeros(4, np.uint32))


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


# ---- lax.rng_uniform (stablehlo.rng): a stateful generator whose bits XLA:CPU draws from a seed of its own process,
# so the ipu and cpu are compared as distributions: both samples lie in [a, b) and pass the same Kolmogorov-Smirnov
# test against the uniform law, and against each other.

def _ks(sample: np.ndarray, cdf) -> float:
    """The Kolmogorov-Smirnov statistic of `sample` against the distribution function `cdf`."""
    x = np.sort(sample.astype(np.float64))
    n = len(x)
    f = cdf(x)
    return float(max(np.max(np.arange(1, n + 1) / n - f), np.max(f - np.arange(n) / n)))


def _ks_two(a: np.ndarray, b: np.ndarray) -> float:
    x = np.sort(np.concatenate([a, b]).astype(np.float64))
    fa = np.searchsorted(np.sort(a.astype(np.float64)), x, side="right") / len(a)
    fb = np.searchsorted(np.sort(b.astype(np.float64)), x, side="right") / len(b)
    return float(np.max(np.abs(fa - fb)))


N = 200_003  # spread unevenly over every tile
KS_LIMIT = 2.0 / np.sqrt(N)  # a uniform sample exceeds it with probability ~7e-4 (5.6e-4 for two samples of N)


def _rng(backend: str, lo, hi, dtype, shape=(N,)):
    return np.asarray(jax.jit(lambda a, b: lax.rng_uniform(a, b, shape), backend=backend)(
        np.asarray(lo, dtype), np.asarray(hi, dtype)))


@pytest.mark.parametrize("lo, hi", [(0.0, 1.0), (-3.0, 5.0), (1e-3, 2e-3)])
def test_rng_uniform_floats_are_uniform_in_a_b_like_cpus(lo, hi):
    ipu, cpu = _rng(BACKEND, lo, hi, np.float32), _rng(REFERENCE, lo, hi, np.float32)
    assert ipu.dtype == cpu.dtype == np.float32 and ipu.shape == cpu.shape == (N,)
    assert ipu.min() >= lo and ipu.max() < hi, (ipu.min(), ipu.max())
    # 2^23 values: a sample of N repeats about N^2 / 2^24 of them; tiles drawing the same stream would repeat more
    assert N - len(np.unique(ipu)) < 2 * N * N / 2 ** 24 and N - len(np.unique(cpu)) < 2 * N * N / 2 ** 24
    uniform = lambda x: np.clip((x - lo) / (hi - lo), 0.0, 1.0)  # noqa: E731
    assert _ks(ipu, uniform) < KS_LIMIT and _ks(cpu, uniform) < KS_LIMIT
    assert _ks_two(ipu, cpu) < np.sqrt(2) * KS_LIMIT


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_rng_uniform_16_bit_floats_stay_below_b(dtype):
    # [0, 1) rounded to 16 bits would reach 1.0 from above 1 - 2^-12 (f16) or 1 - 2^-9 (bf16): never b itself.
    x = _rng(BACKEND, 0.0, 1.0, jnp.dtype(dtype)).astype(np.float32)
    assert x.min() >= 0.0 and x.max() < 1.0
    assert _ks(x, lambda v: np.clip(v, 0.0, 1.0)) < KS_LIMIT + 2.0 ** -9


@pytest.mark.parametrize("dtype, lo, hi", [("int32", -5, 12), ("uint32", 3, 10), ("int32", -2**31, 2**31 - 1),
                                           ("int8", -100, 100), ("uint16", 0, 65535)])
def test_rng_uniform_integers_cover_a_b_evenly(dtype, lo, hi):
    ipu = _rng(BACKEND, lo, hi, np.dtype(dtype))
    assert ipu.dtype == np.dtype(dtype)
    assert ipu.min() >= lo and ipu.max() < hi, (ipu.min(), ipu.max())
    if hi - lo <= 300:  # every value drawn about as often: a chi-square over the N samples
        counts = np.bincount((ipu.astype(np.int64) - lo), minlength=hi - lo)
        expected = N / (hi - lo)
        chi2 = float(np.sum((counts - expected) ** 2 / expected))
        assert chi2 < (hi - lo) + 6 * np.sqrt(2 * (hi - lo)), chi2
        assert set(np.unique(ipu)) == set(range(lo, hi))
        if np.dtype(dtype).itemsize == 4:  # (XLA:CPU draws 32- and 64-bit integers only: it aborts on narrower)
            assert set(np.unique(_rng(REFERENCE, lo, hi, np.dtype(dtype)))) == set(range(lo, hi))
    else:
        assert _ks(ipu, lambda v: (v - lo + 0.5) / (hi - lo)) < KS_LIMIT


def test_rng_uniform_draws_anew_each_call_and_each_trip():
    f = jax.jit(lambda: lax.rng_uniform(0.0, 1.0, (1000,)), backend=BACKEND)
    first, second = np.asarray(f()), np.asarray(f())
    assert not np.array_equal(first, second)  # stateful, as on cpu

    def loop():
        return lax.fori_loop(0, 3, lambda i, acc: acc.at[i].set(lax.rng_uniform(0.0, 1.0, (64,))),
                             jnp.zeros((3, 64)))
    rows = np.asarray(jax.jit(loop, backend=BACKEND)())
    assert len({r.tobytes() for r in rows}) == 3 and rows.min() >= 0.0 and rows.max() < 1.0


def test_rng_uniform_with_an_empty_range_gives_a():
    ints = _rng(BACKEND, 7, 7, np.int32, (5,))
    np.testing.assert_array_equal(ints, np.full(5, 7, np.int32))
