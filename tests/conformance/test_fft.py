"""stablehlo.fft on the ipu (FFT, IFFT, RFFT, IRFFT over 1 to 3 innermost axes, any lengths) against cpu, which
runs pocketfft on the same inputs. Tolerance: an ulp-level error of the transform's scale (the 2-norm of the input
times a few f32 ulps, per output), which a wrong sign of the exponent, a missing 1/N or a wrong half-spectrum
exceeds by orders of magnitude (test_fft_checks_can_fail)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _conformance import run_both

C64 = np.complex64
EPS = float(np.finfo(np.float32).eps)


def run(f, *args):
    got, want = run_both(f, *args)
    return np.asarray(got), np.asarray(want)


def assert_fft_close(got, want, x, n_points):
    """|got - want| <= 16 eps log2(N+1) * scale, scale = the largest output magnitude one entry can have (rms of
    the input times sqrt(N) for a forward transform), per element."""
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    scale = max(float(np.max(np.abs(want))), float(np.sqrt(np.mean(np.abs(x) ** 2))), 1e-30)
    bound = 16 * EPS * np.log2(n_points + 1) * scale
    err = float(np.max(np.abs(got.astype(np.complex128) - want.astype(np.complex128)))) if got.size else 0.0
    assert err <= bound, f"max error {err} > {bound}"


def crandom(shape, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(C64)


def rrandom(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


LENGTHS = [1, 2, 3, 5, 8, 12, 17, 64, 100, 127, 256, 1000]


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("name", ["fft", "ifft"])
def test_complex_1d(name, n):
    x = crandom((3, n), n)
    f = getattr(jnp.fft, name)
    assert_fft_close(*run(f, x), x, n)


@pytest.mark.parametrize("n", LENGTHS)
def test_real_1d(n):
    x = rrandom((4, n), n)
    assert_fft_close(*run(jnp.fft.rfft, x), x, n)
    spectrum = np.fft.rfft(x).astype(C64)
    assert_fft_close(*run(lambda s: jnp.fft.irfft(s, n=n), spectrum), spectrum, n)


@pytest.mark.parametrize("shape, axes", [((4, 6, 10), (-2, -1)), ((3, 5, 4, 7), (-3, -2, -1)), ((8, 9), (0, 1)),
                                         ((2, 16, 16, 16), (1, 2, 3)), ((6, 10), (0,))])
def test_nd(shape, axes):
    x = crandom(shape, 1)
    n = int(np.prod([shape[a] for a in axes]))
    assert_fft_close(*run(lambda a: jnp.fft.fftn(a, axes=axes), x), x, n)
    assert_fft_close(*run(lambda a: jnp.fft.ifftn(a, axes=axes), x), x, n)
    r = rrandom(shape, 2)
    assert_fft_close(*run(lambda a: jnp.fft.rfftn(a, axes=axes), r), r, n)
    s = np.fft.rfftn(r, axes=axes).astype(C64)
    lengths = [shape[a] for a in axes]
    assert_fft_close(*run(lambda a: jnp.fft.irfftn(a, s=lengths, axes=axes), s), s, n)


def test_fft_programs():
    x = rrandom((128,), 3)
    got, want = run(lambda a: jnp.fft.fftshift(jnp.abs(jnp.fft.fft(a))) * jnp.fft.fftfreq(128)[None], x)
    assert_fft_close(got, want, x, 128)
    # round trip: irfft(rfft(x)) == x
    got, want = run(lambda a: jnp.fft.irfft(jnp.fft.rfft(a), n=128), x)
    assert_fft_close(got, want, x, 128)
    np.testing.assert_allclose(got, x, atol=1e-5)


def test_fft_grad():
    x = rrandom((32,), 4)
    got, want = run(jax.grad(lambda a: jnp.sum(jnp.abs(jnp.fft.rfft(a * a)) ** 2)), x)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.max(np.abs(want))))


def test_fft_checks_can_fail():
    # a wrong sign of the exponent, a missing 1/N, a conjugated half-spectrum: each exceeds the tolerance
    x = crandom((2, 12), 5)
    got, want = run(jnp.fft.fft, x)
    for wrong in (np.fft.ifft(x) * 12, np.fft.ifft(x), np.conj(want)):
        with pytest.raises(AssertionError):
            assert_fft_close(wrong.astype(C64), want, x, 12)


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 4)])
@pytest.mark.parametrize("f", [jnp.fft.fft, jnp.fft.ifft, jnp.fft.fft2], ids=["fft", "ifft", "fft2"])
def test_empty_arrays_transform_to_empty_arrays(f, shape):
    if f is jnp.fft.fft2 and len(shape) < 2:
        pytest.skip("fft2 needs two axes")
    got, want = run(f, np.zeros(shape, C64))
    assert got.shape == want.shape and got.dtype == want.dtype
