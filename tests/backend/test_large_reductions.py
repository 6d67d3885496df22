"""Large reductions on the ipu are as accurate as XLA:CPU's: never one f32 accumulator over millions of elements.

A single f32 accumulator stops growing at 2^24 when the terms are ones (2^24 + 1 rounds back to 2^24) and loses about
log2(n) bits on random data. XLA:CPU reduces long dimensions as a tree of 32-element windows (its
TreeReductionRewriter); the emulator does the same. These run on the full chip (the arrays need more than a 7-tile IPU
Model holds), against cpu and against the float64 sum of the same inputs.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def both(f, *args):
    ipu = jax.jit(f, backend="ipu")(*args)
    cpu = jax.jit(f, backend="cpu")(*args)
    return np.asarray(ipu), np.asarray(cpu)


def test_sum_of_2_to_the_25_ones():
    x = np.ones(1 << 25, np.float32)
    ipu_sum, ipu_mean, ipu_cols = (np.asarray(v) for v in jax.jit(
        lambda x: (jnp.sum(x), jnp.mean(x), jnp.sum(x.reshape(-1, 32), axis=0)), backend="ipu")(x))
    assert ipu_sum == np.float32(1 << 25)
    assert ipu_mean == np.float32(1.0)
    np.testing.assert_array_equal(ipu_cols, np.full(32, 1 << 20, np.float32))


def test_sums_of_many_terms_match_cpu_and_the_exact_sum():
    # The cases: 20M ones; 10^6 x 20 of 3.7 (in total and per column); the mean of the squares of 2*10^7
    # standard normals (a loss). The ipu's error against the float64 sum may not exceed twice cpu's error plus 2 ulp.
    ones = np.ones(20_000_000, np.float32)
    m = np.full((1_000_000, 20), 3.7, np.float32)
    z = np.random.default_rng(0).standard_normal(20_000_000).astype(np.float32)
    cases = {
        "sum of 20M ones": (jnp.sum, ones, ones.astype(np.float64).sum()),
        "sum of 1e6 x 20 of 3.7": (jnp.sum, m, m.astype(np.float64).sum()),
        "column sums of 1e6 x 20": (lambda m: jnp.sum(m, axis=0), m, m.astype(np.float64).sum(axis=0)),
        "row sums of 1e6 x 20": (lambda m: jnp.sum(m, axis=1), m, m.astype(np.float64).sum(axis=1)),
        "mean of 2e7 squared normals": (lambda z: jnp.mean(z * z), z, (z.astype(np.float64) ** 2).mean()),
    }
    for name, (f, x, exact) in cases.items():
        ipu, cpu = both(f, x)
        ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
        ipu_err = np.abs(ipu.astype(np.float64) - exact)
        cpu_err = np.abs(cpu.astype(np.float64) - exact)
        assert np.all(ipu_err <= 2 * cpu_err + 2 * ulp), (name, ipu, cpu, exact)


def test_a_long_outer_axis_reduces_through_an_intermediate_stage():
    # jnp.argmax(x, axis=0) of f16[8192, 1024]: every tile holds rows of all 1024 columns, so each column has 1,472
    # partials (value and index, 8 bytes each). Sent straight to the tiles of the result, 64 columns' worth is
    # 754 KB on one tile, more than it holds (it failed to compile); Poplar reduces them first on tiles across the
    # chip (at most 32 partials per output reach the result's tile). The sum and max take the same path.
    x = np.random.default_rng(2).standard_normal((8192, 1024)).astype(np.float16)
    f = lambda x: (jnp.argmax(x, axis=0), jnp.argmin(x, axis=0), jnp.max(x, axis=0),  # noqa: E731
                   jnp.sum(x.astype(jnp.float32), axis=0))
    ipu, cpu = jax.jit(f, backend="ipu")(x), jax.jit(f, backend="cpu")(x)
    for k in range(3):
        np.testing.assert_array_equal(np.asarray(ipu[k]), np.asarray(cpu[k]))
    np.testing.assert_allclose(np.asarray(ipu[3]), np.asarray(cpu[3]), rtol=1e-5, atol=1e-3)
