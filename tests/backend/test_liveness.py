"""Host memory follows liveness: a jitted chain of 200 elementwise ops on 1M f32 never has more than a few 4 MB
arrays live, so a run must not grow the process by more than ~100 MB (before, every intermediate had bytes of its
own for the whole run: 1.2 GB)."""

from __future__ import annotations

CHAIN = """
import resource
import numpy as np
import jax, jax.numpy as jnp

def chain(x):
    for _ in range(50):  # 200 elementwise ops (+ the broadcasts of their scalar operands and the negates)
        x = jnp.tanh(x)
        x = x * 1.01
        x = x + 0.5
        x = jnp.exp(-x)
    return x

x = np.linspace(-3, 3, 1 << 20, dtype=np.float32)
on_ipu = jax.device_put(x, jax.devices("ipu")[0])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
y = np.asarray(jax.jit(chain, backend="ipu")(on_ipu))  # compile and run
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

expected = x
for _ in range(50):
    expected = np.exp(-(np.tanh(expected) * np.float32(1.01) + np.float32(0.5)))
np.testing.assert_allclose(y, expected, rtol=2e-6, atol=1e-6)
print("growth_mb", (after - before) / 1024)
"""


def test_200_op_chain_grows_host_memory_by_less_than_100_mb(python):
    result = python(CHAIN)
    assert result.returncode == 0, result.stderr
    growth = float(result.stdout.split()[-1])
    assert growth < 100, f"peak RSS grew by {growth:.0f} MB"
