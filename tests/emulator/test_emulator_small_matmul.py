"""Small matmuls (m <= 8 rows: dot.cc reads B in place, unpacked) against numpy on non-integer inputs."""

from __future__ import annotations

import numpy as np
import pytest
from emulator_helpers import assert_same
from test_emulator_reduce_dot import dot_program

from jax_ipu import emulator as E


def _host_fuses() -> bool:
    """dot.cc fuses each product into its sum on hosts with AVX2 and FMA (as XLA:CPU does there)."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return False
    return "avx2" in flags and "fma" in flags


FUSED = _host_fuses()


def sequential_f32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # Each output a running f32 sum over k in order: the host kernel's order. With FMA one rounding per step (the
    # product of two f32 values is exact in f64, and so, but for double roundings too rare to meet here, is the sum
    # rounded from f64), else one per product and one per sum.
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for kk in range(a.shape[1]):
        if FUSED:
            product = a[:, kk:kk + 1].astype(np.float64) * b[kk:kk + 1, :].astype(np.float64)
            acc = (acc.astype(np.float64) + product).astype(np.float32)
        else:
            acc = acc + a[:, kk:kk + 1] * b[kk:kk + 1, :]
    return acc


def matmul(a: np.ndarray, b: np.ndarray, tiles: int) -> np.ndarray:
    p = dot_program(a, b, "f32", lc=[1], rc=[0], out_shape=(a.shape[0], b.shape[1]))
    return E.compile(p, num_tiles=tiles).run(a, b)[0]


@pytest.mark.parametrize("m", range(1, 10))
@pytest.mark.parametrize("n,k", [(64, 64), (37, 19), (5, 300), (48, 1)])
def test_small_matmul_bit_exact_on_one_tile(m, n, k, rng):
    # One tile: no k split, so every element is the sequential sum (16-column panels, a tail, k > 256 passes).
    a = rng.normal(size=(m, k)).astype(np.float32)
    b = rng.normal(size=(k, n)).astype(np.float32)
    assert_same(matmul(a, b, 1), sequential_f32(a, b))


@pytest.mark.parametrize("m", [1, 3, 7, 8, 9])
def test_small_matmul_on_many_tiles(m, rng):
    a = rng.uniform(-1.5, 1.5, size=(m, 64)).astype(np.float32)
    b = rng.uniform(-1.5, 1.5, size=(64, 64)).astype(np.float32)
    np.testing.assert_allclose(matmul(a, b, 1472), a @ b, rtol=1e-5, atol=1e-5)


def test_small_batched_rows_in_strided_operands(rng):
    # [batch, k, m] x [batch, n, k]: both operands canonicalised, 8 rows per batch.
    a = rng.normal(size=(3, 40, 8)).astype(np.float32)
    b = rng.normal(size=(3, 33, 40)).astype(np.float32)
    p = dot_program(a, b, "f32", lb=[0], rb=[0], lc=[1], rc=[2], out_shape=(3, 8, 33))
    out = E.compile(p, num_tiles=1).run(a, b)[0]
    for i in range(3):
        assert_same(out[i], sequential_f32(a[i].T.copy(), b[i].T.copy()))
