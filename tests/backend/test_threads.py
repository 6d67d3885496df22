"""Several Python threads dispatching to the ipu backend at once: to one IPU, and to two."""

from __future__ import annotations

import threading
from typing import Callable, List

import jax
import jax.numpy as jnp
import numpy as np

THREADS = 4
CALLS = 25


def run_threads(work: Callable[[int], None]) -> None:
    errors: List[BaseException] = []
    start = threading.Barrier(THREADS)

    def body(i):
        try:
            start.wait()
            work(i)
        except BaseException as e:  # noqa: BLE001 - reported below, in the test's thread
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a dispatching thread hung"
    if errors:
        raise errors[0]


def test_threads_dispatch_the_same_and_different_programs_to_one_ipu():
    ipu = jax.devices("ipu")[0]
    shared = jax.jit(lambda x, k: jnp.sin(x) * k + x, backend="ipu")
    own = [jax.jit(lambda x, i=i: x @ x.T + i, backend="ipu") for i in range(THREADS)]
    rng = np.random.RandomState(0)
    inputs = [rng.randn(16, 16).astype(np.float32) for _ in range(THREADS)]
    results = {}

    def work(i):
        x = jax.device_put(inputs[i], ipu)
        outs = []
        for n in range(CALLS):
            outs.append((n, shared(x, np.float32(n)), own[i](x)))  # never waits until the end
        results[i] = [(n, np.asarray(a), np.asarray(b)) for n, a, b in outs]

    run_threads(work)
    for i in range(THREADS):
        x = inputs[i]
        for n, a, b in results[i]:
            np.testing.assert_allclose(a, np.sin(x) * np.float32(n) + x, rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(b, x @ x.T + i, rtol=1e-4, atol=1e-4)


def test_threads_chaining_donated_state_on_one_ipu():
    ipu = jax.devices("ipu")[0]
    step = jax.jit(lambda s, d: s + d, backend="ipu", donate_argnums=(0,))
    finals = {}

    def work(i):
        state = jax.device_put(np.zeros(1000, np.float32), ipu)
        delta = jax.device_put(np.full(1000, i + 1, np.float32), ipu)
        for _ in range(CALLS):
            state = step(state, delta)
        finals[i] = np.asarray(state)

    run_threads(work)
    for i in range(THREADS):
        np.testing.assert_array_equal(finals[i], np.full(1000, CALLS * (i + 1), np.float32))


TWO_IPU_THREADS = """
import threading
import numpy as np, jax, jax.numpy as jnp

ipus = jax.devices("ipu")
f = [jax.jit(lambda x: jnp.cos(x) * 2 + x.sum(), device=d) for d in ipus]
p = jax.pmap(lambda x: x * x - 1, backend="ipu")
rng = np.random.RandomState(0)
xs = [rng.randn(64, 64).astype(np.float32) for _ in range(4)]
errors, done = [], []
barrier = threading.Barrier(4)

def work(i):
    try:
        barrier.wait()
        outs = []
        for n in range(20):
            d = (i + n) % 2
            x = jax.device_put(xs[i], ipus[d])
            moved = jax.device_put(x, ipus[1 - d])          # IPU-Link copy while other threads dispatch
            outs.append((f[d](x), f[1 - d](moved), p(np.stack([xs[i], xs[i] * n]))))
        for n, (a, b, c) in enumerate(outs):
            want = np.cos(xs[i]) * 2 + xs[i].sum()
            assert np.allclose(np.asarray(a), want, rtol=1e-4, atol=1e-3), (i, n, "a")
            assert np.allclose(np.asarray(b), want, rtol=1e-4, atol=1e-3), (i, n, "b")
            stacked = np.stack([xs[i], xs[i] * np.float32(n)])
            assert np.allclose(np.asarray(c), stacked * stacked - 1, rtol=1e-5, atol=1e-4), (i, n, "c")
        done.append(i)
    except BaseException as e:
        errors.append(repr(e))

threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
for t in threads: t.start()
for t in threads: t.join(timeout=300)
print("ALIVE", sum(t.is_alive() for t in threads))
print("ERRORS", errors)
print("DONE", sorted(done))
"""


def test_threads_dispatch_to_two_ipus_and_pmap_over_both(python):
    result = python(TWO_IPU_THREADS, {"JAX_IPU_DEVICE_COUNT": "2"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["ALIVE 0", "ERRORS []", "DONE [0, 1, 2, 3]"], result.stdout
