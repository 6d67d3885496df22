"""The f32 functions whose results the emulator computes exactly as XLA:CPU does: ipu == cpu bit for bit.

XLA:CPU evaluates exp, expm1, log, log1p, tanh and logistic with its own polynomial approximations, and chlo expands
erf, erfc, erf_inv, tan, lgamma and digamma into fixed formulas before it compiles for cpu (jaxlib 0.12's XLA:CPU
has Eigen's exp, tanh and atan, HLO erf and tan ops, and an rsqrt refined from the host's rsqrtss: ipu/numerics.h).
On a host with FMA, LLVM fuses each multiply feeding an add into one fused multiply-add, and the process runs with
denormals flushed to zero.
The emulator (ipu/xla_math.h, ipu/special_functions.h, ipu/scalar_ops.h) evaluates the same algorithms with the same
roundings, so every bit must agree: ~100k inputs per function over its range and a wide range of magnitudes, plus
edge values (signed zeros, infinities, NaN, denormals, the smallest normals, the ends of the approximations' ranges).
jax.random's samplers built only on these (normal, uniform, exponential, ...) then give the same bits as cpu.
"""

from __future__ import annotations

from typing import Callable, Dict, Tuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _conformance import run_both
from jax import lax

N = 100_000


def _edges() -> np.ndarray:
    base = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-40, -1e-38, 1.17549435e-38, 1.2e-38,
                     -2e-38, 1e-37, 3.4e38, -3.4e38, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 1e-8, -1e-8, 4e-4, -4e-4,
                     9e-3, -9e-3, 0.41421356, -0.41421356, 3.832507, 4.0, -4.0, 7.9, 8.0, 9.0, -9.0, 10.0, 88.72,
                     -87.8, 88.8, -88.8, 89.0, -104.0, 1e10, -1e10, 7.5, -7.5, -3.0, -2.5, 1e-20, 0.99999994,
                     -0.99999994, 1.4616321], dtype=np.float32)
    up, down = np.nextafter(base, np.float32(np.inf)), np.nextafter(base, np.float32(-np.inf))
    return np.concatenate([base, up, down]).astype(np.float32)


def _inputs(low: float, high: float, seed: int) -> np.ndarray:
    """N/2 uniform in [low, high), N/2 of random sign and magnitude 2^-30..2^30 (2^-126.. near 0), and the edges."""
    rng = np.random.default_rng(seed)
    uniform = rng.uniform(low, high, N // 2)
    wide = rng.choice([-1.0, 1.0], N // 2) * np.exp2(rng.uniform(-30, 30, N // 2))
    tiny = rng.choice([-1.0, 1.0], 1000) * np.exp2(rng.uniform(-130, -120, 1000))
    return np.concatenate([uniform, wide, tiny, _edges()]).astype(np.float32)


# name: (function, range of the uniform inputs)
FUNCTIONS: Dict[str, Tuple[Callable, Tuple[float, float]]] = {
    "exp": (jnp.exp, (-90.0, 90.0)),
    "expm1": (jnp.expm1, (-2.0, 2.0)),
    "log": (jnp.log, (0.0, 4.0)),
    "log1p": (jnp.log1p, (-1.0, 2.0)),
    "tanh": (jnp.tanh, (-10.0, 10.0)),
    "logistic": (jax.nn.sigmoid, (-90.0, 90.0)),
    "erf": (lax.erf, (-5.0, 5.0)),
    "erfc": (lax.erfc, (-5.0, 10.0)),
    "erf_inv": (lax.erf_inv, (-1.0, 1.0)),
    "tan": (jnp.tan, (-4.0, 4.0)),
    "lgamma": (lax.lgamma, (-20.0, 20.0)),
    "digamma": (lax.digamma, (-20.0, 20.0)),
    "rsqrt": (lax.rsqrt, (0.0, 100.0)),
    "sign": (jnp.sign, (-2.0, 2.0)),  # copysign(x != 0, x): a denormal compares equal to 0, so its sign is +-0
}


def assert_same_bits(got, want, where: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, where
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    if not same.all():
        bad = np.flatnonzero(~same)
        raise AssertionError(f"{where}: {bad.size} of {got.size} differ from cpu; first: " + ", ".join(
            f"#{i}: ipu {got[i]!r} cpu {want[i]!r}" for i in bad[:5]))


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_function_bits_match_cpu(name):
    f, (low, high) = FUNCTIONS[name]
    x = _inputs(low, high, seed=sum(map(ord, name)))
    got, want = run_both(f, x)
    assert_same_bits(got, want, name)


# f16: XLA upcasts these to f32 and rounds once, except tan, which chlo expands in f16 (sine and cosine each rounded
# to f16), and jaxlib 0.4.13's expm1 and log1p, its elemental formulas evaluated in f16 (each step rounded).
F16_FUNCTIONS = ("exp", "expm1", "log", "log1p", "tanh", "logistic", "erf", "erf_inv", "lgamma", "tan", "rsqrt")


@pytest.mark.parametrize("name", ["expm1", "log1p"])
def test_every_f16_value_of_expm1_and_log1p_is_cpus(name):
    """All 65,536 f16 values: jaxlib 0.4.13 evaluates these two in f16 step by step (a rounded f32 result is an ulp
    from it on 4% (log1p) to 18% (expm1) of them), jaxlib 0.12 in f32."""
    x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    got, want = (np.asarray(v) for v in run_both(FUNCTIONS[name][0], x))
    same = (got.view(np.uint16) == want.view(np.uint16)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), f"f16 {name}: {int((~same).sum())} differ; first {x[~same][:5]}: ipu {got[~same][:5]} " \
        f"cpu {want[~same][:5]}"


@pytest.mark.parametrize("name", F16_FUNCTIONS)
def test_f16_function_bits_match_cpu(name):
    f, (low, high) = FUNCTIONS[name]
    with np.errstate(over="ignore"):
        x = _inputs(low, high, seed=sum(map(ord, name))).astype(np.float16)
    got, want = run_both(f, x)
    got, want = np.asarray(got), np.asarray(want)
    same = (got.view(np.uint16) == want.view(np.uint16)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), f"f16 {name}: {int((~same).sum())} of {x.size} differ; first at {np.flatnonzero(~same)[:5]}: " \
        f"ipu {got[~same][:5]} cpu {want[~same][:5]}"


# Samplers whose every step the emulator rounds as XLA:CPU does: the bits of the keys (threefry), the uniform floats
# made from them, and the transforms above.
SAMPLERS: Dict[str, Callable] = {
    "uniform": lambda k: jax.random.uniform(k, (N,)),
    "normal": lambda k: jax.random.normal(k, (N,)),
    "exponential": lambda k: jax.random.exponential(k, (N // 10,)),
    "logistic": lambda k: jax.random.logistic(k, (N // 10,)),
    "gumbel": lambda k: jax.random.gumbel(k, (N // 10,)),
    "laplace": lambda k: jax.random.laplace(k, (N // 10,)),
    "bernoulli": lambda k: jax.random.bernoulli(k, 0.3, (N // 10,)),
}


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_sampler_bits_match_cpu(name):
    for seed in (0, 1234):
        got, want = run_both(SAMPLERS[name], jax.random.PRNGKey(seed))
        got, want = np.asarray(got), np.asarray(want)
        if want.dtype == np.bool_:
            np.testing.assert_array_equal(got, want, err_msg=name)
        else:
            assert_same_bits(got, want, f"{name} (key {seed})")
