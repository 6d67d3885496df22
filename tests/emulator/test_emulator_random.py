"""rng (random.cc): poprand's uniform and normal, drawn per tile from a counter-based generator.

jax emits only UNIFORM (lax.rng_uniform; tests/conformance/test_rng.py compares it with cpu as a distribution);
NORMAL, the mapping onto tiles and the errors are checked here on hand-written programs."""

from __future__ import annotations

import numpy as np
import pytest
from emulator_helpers import run_op

from jax_ipu import emulator as E

N = 100_003


def _draw(distribution, a, b, dtype="f32", shape=(N,), num_tiles=0):
    a, b = np.asarray(a, E.NUMPY_DTYPES[dtype]), np.asarray(b, E.NUMPY_DTYPES[dtype])
    return run_op("rng", [a, b], dtype, shape, {"rng_distribution": distribution}, num_tiles=num_tiles)


def test_normal_has_the_mean_and_deviation_asked_for():
    x = _draw("NORMAL", 3.0, 2.0).astype(np.float64)
    assert np.isfinite(x).all()
    assert abs(x.mean() - 3.0) < 6 * 2.0 / np.sqrt(N)
    assert abs(x.std() - 2.0) < 6 * 2.0 / np.sqrt(2 * N)
    z = np.sort((x - 3.0) / 2.0)  # Kolmogorov-Smirnov against the standard normal
    from math import erf, sqrt
    cdf = np.array([0.5 * (1 + erf(v / sqrt(2))) for v in z])
    assert np.max(np.abs(cdf - (np.arange(N) + 0.5) / N)) < 2.0 / np.sqrt(N)


def test_each_run_of_an_executable_draws_anew():
    p = E.Program()
    a, b = p.main.param("f32", ()), p.main.param("f32", ())
    p.main.ret(p.main.op("rng", [a, b], "f32", (4096,), {"rng_distribution": "UNIFORM"}))
    exe = E.compile(p)
    one, two = exe.run(np.float32(0), np.float32(1))[0], exe.run(np.float32(0), np.float32(1))[0]
    assert not np.array_equal(one, two)
    assert one.min() >= 0 and one.max() < 1 and two.min() >= 0 and two.max() < 1


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16", "i32", "u8"])
def test_uniform_stays_in_a_b_on_few_tiles(dtype):
    x = _draw("UNIFORM", 2, 9, dtype, (5000,), num_tiles=7).astype(np.float64)
    assert x.min() >= 2 and x.max() < 9


def test_errors_name_the_op_and_what_to_do():
    with pytest.raises(E.EmulatorError, match="NORMAL needs a floating-point result, not i32"):
        _draw("NORMAL", 0, 1, "i32", (4,))
    with pytest.raises(E.EmulatorError, match="must be UNIFORM or NORMAL, not 'GAMMA'"):
        _draw("GAMMA", 0.0, 1.0, "f32", (4,))
    with pytest.raises(E.EmulatorError, match="rng_distribution"):
        run_op("rng", [np.float32(0), np.float32(1)], "f32", (4,))
    with pytest.raises(E.EmulatorError, match=r"stablehlo.rng\(tensor<i1>.*rng is implemented for i8"):
        run_op("rng", [np.bool_(0), np.bool_(1)], "bool", (4,), {"rng_distribution": "UNIFORM"})
