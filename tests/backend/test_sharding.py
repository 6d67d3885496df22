"""jax.sharding / shard_map on one ipu device (their custom_calls are identities with one partition), and
unsafe_buffer_pointer() on an ipu array (the emulated buffer's host address)."""

from __future__ import annotations

import ctypes
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _series import CURRENT_SERIES
from jax.experimental.shard_map import shard_map
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P


def _mesh(platform):
    return Mesh(np.array(jax.devices(platform)[:1]), ("x",))


def _program(x, w):
    return jnp.tanh(x @ w).sum(axis=0) * 0.5


@pytest.mark.parametrize("spec", [P("x", None), P(None, "x"), P()])
def test_shard_map_on_one_ipu_matches_cpu(spec):
    x = np.random.default_rng(0).standard_normal((8, 6)).astype(np.float32)
    w = np.random.default_rng(1).standard_normal((6, 6)).astype(np.float32)
    out = {}
    for platform in ("ipu", "cpu"):
        mesh = _mesh(platform)
        f = shard_map(lambda x, w: jax.lax.psum(jnp.tanh(x @ w), "x") * 2.0, mesh=mesh, in_specs=(spec, P()),
                      out_specs=spec if spec != P(None, "x") else P(None, "x"))
        out[platform] = jax.jit(f)(jax.device_put(x, NamedSharding(mesh, spec)),
                                   jax.device_put(w, NamedSharding(mesh, P())))
    assert out["ipu"].devices() == set(jax.devices("ipu")[:1])
    np.testing.assert_allclose(np.asarray(out["ipu"]), np.asarray(out["cpu"]), rtol=1e-5, atol=1e-5)


def test_jit_with_shardings_and_constraints_on_one_ipu():
    x = np.random.default_rng(2).standard_normal((8, 6)).astype(np.float32)
    w = np.random.default_rng(3).standard_normal((6, 4)).astype(np.float32)
    out = {}
    for platform in ("ipu", "cpu"):
        mesh = _mesh(platform)
        s = NamedSharding(mesh, P("x"))

        @partial(jax.jit, in_shardings=(s, NamedSharding(mesh, P())), out_shardings=s)
        def f(x, w):  # traced in this iteration, so `mesh` is this iteration's
            y = jax.lax.with_sharding_constraint(x * 2, NamedSharding(mesh, P(None, "x")))  # noqa: B023
            return _program(y, w)[None] + y.sum()

        out[platform] = f(x, w)
        # the annotation the ipu front end has to pass through: a custom_call in 0.4.13, a Shardy op since
        assert ("sdy.sharding_constraint" if CURRENT_SERIES else "Sharding") in f.lower(x, w).as_text()
    np.testing.assert_allclose(np.asarray(out["ipu"]), np.asarray(out["cpu"]), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", ["float32", "int32", "float16", "bool"])
def test_unsafe_buffer_pointer_reads_the_array(dtype):
    device = jax.devices("ipu")[0]
    host = (np.arange(24).reshape(4, 6) % 7).astype(dtype)
    x = jax.jit(lambda a: a[::-1] if a.dtype == jnp.bool_ else a * 3 - 1, backend="ipu")(jax.device_put(host, device))
    want = np.asarray(x)
    address = x.unsafe_buffer_pointer()
    assert address != 0
    view = np.ctypeslib.as_array(ctypes.cast(address, ctypes.POINTER(ctypes.c_uint8)), shape=(want.nbytes,))
    assert view.tobytes() == want.tobytes()
    x.delete()
    with pytest.raises(Exception, match="deleted"):
        x.unsafe_buffer_pointer()
