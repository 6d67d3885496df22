"""What a run reuses from the one before (storage, step counters, output buffers) and how large arrays are staged:
none of it may show in results or traces."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import jax_ipu

STEPS = 37


def scan_rnn(w, h0, xs):
    def cell(h, x):
        h = jnp.tanh(h @ w + x)
        return h, h

    return lax.scan(cell, h0, xs)


def rnn_inputs(seed: int):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(16, 16)).astype(np.float32) / 4, rng.normal(size=(4, 16)).astype(np.float32),
            rng.normal(size=(STEPS, 4, 16)).astype(np.float32))


def test_repeated_loop_runs_match_cpu_and_give_the_same_trace_each_time():
    ipu, cpu = jax.jit(scan_rnn, backend="ipu"), jax.jit(scan_rnn, backend="cpu")
    profiles = []
    for seed in (0, 1, 2):  # new inputs each run, the same executable and (reused) run storage
        args = rnn_inputs(seed)
        got = ipu(*args)
        want = cpu(*args)
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)
        profiles.append(jax_ipu.last_execution())
    first = profiles[0]
    # The counters of a run start from zero: a reused run's trace is not added to the previous one's.
    for p in profiles[1:]:
        assert p["total_cycles"] == first["total_cycles"]
        assert [(s["id"], s["executions"], s["cycles"]) for s in p["steps"]] == \
            [(s["id"], s["executions"], s["cycles"]) for s in first["steps"]]
    assert sum(s["cycles"] for s in first["steps"]) == first["total_cycles"]
    assert max(s["executions"] for s in first["steps"]) == STEPS + 1  # the loop's decisions: one per trip + exit
    body = [s for s in first["steps"] if "stablehlo.tanh" in s["name"]]  # alone or in a fused step
    assert body and all(s["executions"] == STEPS for s in body)


def test_tiny_calls_in_a_row_each_see_their_own_inputs():
    f = jax.jit(lambda x, y: x * 2 + y, backend="ipu")
    outs = [f(np.full(8, i, np.float32), np.arange(8, dtype=np.float32)) for i in range(50)]
    for i, y in enumerate(outs):
        np.testing.assert_array_equal(np.asarray(y), np.full(8, 2 * i, np.float32) + np.arange(8, dtype=np.float32))


def test_large_arrays_round_trip_exactly():
    # Above the size at which staging is split over host threads, with a length no thread count divides evenly.
    n = (6 << 20) // 4 + 13
    x = np.random.default_rng(3).normal(size=n).astype(np.float32)
    dev = jax.devices("ipu")[0]
    on_ipu = jax.device_put(x, dev)
    np.testing.assert_array_equal(np.asarray(on_ipu), x)
    y = jax.jit(lambda a: a * 3 + 1, backend="ipu")(on_ipu)
    # one fused multiply-add, as XLA:CPU computes a * 3 + 1 (the product and sum are exact in double)
    np.testing.assert_array_equal(np.asarray(y), (x.astype(np.float64) * 3 + 1).astype(np.float32))
    # A strided (transposed) host array is gathered, not copied flat.
    m = np.random.default_rng(4).normal(size=(1536, 1100)).astype(np.float32).T
    np.testing.assert_array_equal(np.asarray(jax.device_put(m, dev)), m)


def test_outputs_are_fully_written_though_never_zeroed():
    # Output bytes are not zero-filled before the run: every element must come from the program.
    f = jax.jit(lambda a: (a + 1, jnp.zeros_like(a), a[::-1]), backend="ipu")
    for seed in range(3):
        a = np.random.default_rng(seed).normal(size=(257, 33)).astype(np.float32)
        p, z, r = f(a)
        np.testing.assert_array_equal(np.asarray(p), a + np.float32(1))
        np.testing.assert_array_equal(np.asarray(z), np.zeros_like(a))
        np.testing.assert_array_equal(np.asarray(r), a[::-1])
