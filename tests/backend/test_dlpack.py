"""DLPack with ipu arrays: an ipu array is exported as a host copy (kDLCPU, numpy's capsule), a DLPack tensor is
imported onto an ipu through the host, and what must not copy is refused (jax_ipu/backend/dlpack.py)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _series import CURRENT_SERIES

IPU = jax.devices("ipu")[0]
DTYPES = [np.float32, np.float16, np.int32, np.int8, np.uint8, np.uint32, np.complex64]


def on_ipu(value: np.ndarray) -> jax.Array:
    x = jax.device_put(value, IPU)
    assert x.devices() == {IPU}
    return x


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_numpy_reads_an_ipu_array_through_dlpack(dtype):
    value = (np.arange(24).reshape(2, 3, 4) - 7).astype(dtype)
    x = on_ipu(value)
    assert tuple(int(v) for v in x.__dlpack_device__()) == (1, 0)  # kDLCPU: the copy is on the host
    got = np.from_dlpack(x)
    assert got.dtype == value.dtype and got.shape == value.shape
    np.testing.assert_array_equal(got, value)


def test_the_exported_copy_is_the_consumers_own():
    x = on_ipu(np.arange(4, dtype=np.float32))
    got = np.from_dlpack(x)
    assert not np.shares_memory(got, np.asarray(x))
    if got.flags.writeable:  # numpy 2 hands out writable arrays: the ipu array is not touched
        got += 100
    np.testing.assert_array_equal(np.asarray(x), np.arange(4, dtype=np.float32))


def test_a_dlpack_tensor_goes_onto_the_ipu_and_back():
    value = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    x = on_ipu(value)
    if CURRENT_SERIES:
        y = jax.dlpack.from_dlpack(x, device=IPU)
    else:  # jax 0.4.13: capsules; with a cpu backend jax keeps the tensor there, as it does with cpu arrays
        y = jax.device_put(jax.dlpack.from_dlpack(jax.dlpack.to_dlpack(x)), IPU)
    assert y.devices() == {IPU}
    np.testing.assert_array_equal(np.asarray(jnp.sin(y) * 2), np.asarray(jax.jit(lambda v: jnp.sin(v) * 2,
                                                                                 backend="cpu")(value)))


@pytest.mark.skipif(not CURRENT_SERIES, reason="copy= and dl_device= are DLPack 1.0's, in jax 0.5 and later")
def test_an_export_that_may_not_copy_is_refused():
    x = on_ipu(np.ones(3, np.float32))
    with pytest.raises(BufferError, match="host copy.*copy=False"):
        x.__dlpack__(copy=False)
    with pytest.raises(ValueError, match="copy=False"):
        jax.dlpack.from_dlpack(np.ones(3, np.float32), device=IPU, copy=False)


def test_dlpack_with_the_ipu_as_the_only_platform(python):
    """Without a cpu backend (JAX_PLATFORMS=ipu), jnp.from_dlpack puts the tensor on the default device, the ipu,
    and jax.dlpack's round trip works (jax's own from_dlpack needs the cpu backend: "Unknown backend cpu")."""
    result = python("""
        import jax, jax.numpy as jnp, numpy as np
        assert [d.platform for d in jax.devices()] == ["ipu"]
        y = jnp.from_dlpack(np.arange(5, dtype=np.int32))
        print([d.platform for d in y.devices()], (y * 3).tolist())
        x = jnp.arange(4.0) / 2
        if jax.__version__.startswith("0.4."):
            z = jax.dlpack.from_dlpack(jax.dlpack.to_dlpack(x))
        else:
            z = jax.dlpack.from_dlpack(x)
        print([d.platform for d in z.devices()], z.tolist(), np.from_dlpack(x).tolist())
        """, {"JAX_PLATFORMS": "ipu"}, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-2:] == ["['ipu'] [0, 3, 6, 9, 12]",
                                                      "['ipu'] [0.0, 0.5, 1.0, 1.5] [0.0, 0.5, 1.0, 1.5]"]
