"""Serialised executables: jax.experimental.serialize_executable and the backend's serialize/deserialize (what
compilation caches use). A loaded program runs and costs exactly as the original."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _series import CURRENT_SERIES, only_jax_0_4_13
from jax.experimental import serialize_executable


def model(params, x):
    w, b = params
    h = jnp.tanh(x @ w + b)
    return jnp.sum(h * h, axis=1), h.max()


def inputs():
    rng = np.random.RandomState(0)
    params = (rng.randn(12, 6).astype(np.float32), rng.randn(6).astype(np.float32))
    return params, rng.randn(5, 12).astype(np.float32)


def test_serialize_and_load_runs_like_the_original_and_numpy():
    params, x = inputs()
    compiled = jax.jit(model, backend="ipu").lower(params, x).compile()
    payload, in_tree, out_tree = serialize_executable.serialize(compiled)
    loaded = serialize_executable.deserialize_and_load(payload, in_tree, out_tree, backend="ipu")

    got, original = loaded(params, x), compiled(params, x)
    h = np.tanh(x @ params[0] + params[1])
    for a, b, want in zip(got, original, (np.sum(h * h, axis=1), h.max())):
        assert next(iter(a.devices())).platform == "ipu"
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))  # bit for bit
        np.testing.assert_allclose(np.asarray(a), want, rtol=1e-5, atol=1e-5)
    assert loaded.cost_analysis() == compiled.cost_analysis()


def test_loaded_program_profiles_like_the_original():
    from jax_ipu import runtime

    params, x = inputs()
    compiled = jax.jit(model, backend="ipu").lower(params, x).compile()
    loaded = serialize_executable.deserialize_and_load(*serialize_executable.serialize(compiled), backend="ipu")
    ipu = jax.devices("ipu")[0]
    jax.block_until_ready(compiled(params, x))
    original = runtime.last_execution(ipu)
    jax.block_until_ready(loaded(params, x))
    again = runtime.last_execution(ipu)
    assert again == original


def test_backend_serialize_executable_round_trip():
    backend = jax.devices("ipu")[0].client
    f = jax.jit(lambda a, b: (a * b + 1, jnp.cumsum(a)), backend="ipu")
    a = np.arange(8, dtype=np.float32)
    b = np.linspace(0, 1, 8, dtype=np.float32)
    executable = f.lower(a, b).compile().runtime_executable()
    blob = backend.serialize_executable(executable)
    ipu = jax.devices("ipu")[0]
    args = [jax.device_put(v, ipu) for v in (a, b)]
    if CURRENT_SERIES:  # jaxlib wraps our bytes in metadata of its own, loads onto a device list, runs jax Arrays
        from jax._src.lib import xla_client

        assert b"jax-ipu-executable 3\n" in blob
        loaded = backend.deserialize_executable(blob, xla_client.DeviceList((ipu,)))
        outs = [out[0] for out in loaded.execute_sharded(args).disassemble_into_single_device_arrays()]
    else:
        assert blob.startswith(b"jax-ipu-executable 3\n")
        loaded = backend.deserialize_executable(blob, None)
        outs = loaded.execute(args)
    np.testing.assert_allclose(np.asarray(outs[0]), a * b + 1, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(outs[1]), np.cumsum(a), rtol=1e-6)


def test_optimized_hlo_is_the_programs_signature():
    f = jax.jit(lambda a, b: (a + b, a.sum()), backend="ipu")
    text = f.lower(np.ones((2, 3), np.float32), np.ones((2, 3), np.float32)).compile().as_text()
    assert "(f32[2,3]{1,0}, f32[2,3]{1,0})->(f32[2,3]{1,0}, f32[])" in text
    assert 'custom_call_target="jax_ipu.ipu_program"' in text


def test_donation_survives_serialization():
    f = jax.jit(lambda s, x: s + x, backend="ipu", donate_argnums=(0,))
    s = jax.device_put(np.ones(4, np.float32), jax.devices("ipu")[0])
    compiled = f.lower(s, np.ones(4, np.float32)).compile()
    loaded = serialize_executable.deserialize_and_load(*serialize_executable.serialize(compiled), backend="ipu")
    out = loaded(s, np.full(4, 2, np.float32))
    np.testing.assert_array_equal(np.asarray(out), [3, 3, 3, 3])
    assert s.is_deleted()


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda blob: b"not an executable", "it does not start with 'jax-ipu-executable'"),
        (lambda blob: blob.replace(b"jax-ipu-executable 3", b"jax-ipu-executable 9", 1), "format version is '9'"),
        # the options it was lowered with are checked too: allowing out of memory is not slipped in
        (lambda blob: blob.replace(b'"allow_out_of_memory":false', b'"allow_out_of_memory":true', 1),
         "does not match its checksum"),
        # one byte of the program changed (the constant 2.0 of a * 2 is in it): refused, never run changed
        (lambda blob: blob[:-40] + bytes([blob[-40] ^ 1]) + blob[-39:], "does not match its checksum"),
        (lambda blob: blob.replace(b"\nchecksum ", b"\nchecksum 0", 1), "does not match its checksum"),
        (
            lambda blob: blob.replace(b"device ipu2 1472", b"device ipu21 1472", 1),
            "was compiled for ipu21 with 1472 tiles, but this process's IPUs are ipu2 with 1472 tiles",
        ),
        (
            lambda blob: blob.replace(b"device ipu2 1472", b"device ipu2 16", 1),
            "was compiled for ipu2 with 16 tiles, but this process's IPUs are ipu2 with 1472 tiles",
        ),
        (lambda blob: blob[:-10], "the program is cut short"),
        (lambda blob: blob.replace(b"devices 0", b"devices 5", 1), "no ipu device with id 5"),
    ],
)
@only_jax_0_4_13("the current series' jaxlib wraps serialised executables in metadata of its own")
def test_a_blob_for_another_chip_or_damaged_is_refused(edit, message):
    backend = jax.devices("ipu")[0].client
    executable = jax.jit(lambda a: a * 2, backend="ipu").lower(np.ones(3, np.float32)).compile()
    blob = edit(backend.serialize_executable(executable.runtime_executable()))
    with pytest.raises(RuntimeError, match="INVALID_ARGUMENT") as error:
        backend.deserialize_executable(blob, None)
    assert message in str(error.value)


def test_pmap_executable_round_trip_on_two_ipus(python):
    result = python(
        """
        import numpy as np, jax
        backend = jax.devices("ipu")[0].client
        p = jax.pmap(lambda x: x * 3 - 1, backend="ipu")
        x = np.arange(8, dtype=np.float32).reshape(2, 4)
        compiled = p.lower(x).compile()
        blob = backend.serialize_executable(compiled.runtime_executable())
        blob = blob[blob.index(b"jax-ipu-executable"):]  # the current series' jaxlib puts metadata first
        print(blob.split(b"\\nprogram")[0].decode().replace("\\n", "|"))
        if hasattr(backend, "compile_and_load"):  # the current series: pmap is a jit, loaded as one
            from jax.experimental import serialize_executable
            loaded = serialize_executable.deserialize_and_load(*serialize_executable.serialize(compiled), backend="ipu")
            out = loaded(x)
            print([s.device.id for s in out.addressable_shards])
            print(np.asarray(out).tolist())
        else:
            loaded = backend.deserialize_executable(blob, None)
            print([d.id for d in loaded.local_devices()])
            args = [[jax.device_put(x[i], d)] for i, d in enumerate(jax.devices("ipu"))]
            outs = loaded.execute_sharded_on_local_devices([[a[0] for a in args]])
            print([np.asarray(o).tolist() for o in outs[0]])
        """,
        {"JAX_IPU_DEVICE_COUNT": "2"},
    )
    assert result.returncode == 0, result.stderr
    header, devices, values = result.stdout.splitlines()[-3:]
    # two IPUs: 2 replicas of one partition in jax 0.4.13, one replica of 2 partitions (a jit over a mesh) since
    replicas = 1 if CURRENT_SERIES else 2
    header, checksum = header.split("|checksum ")
    assert header == (f"jax-ipu-executable 3|device ipu2 1472|replicas {replicas}|devices 0 1|options "
                      '{"fusion":true,"exchange_per_element":false,"allow_out_of_memory":false,'
                      '"emulate_64bit":true}')
    assert len(checksum) == 16 and int(checksum, 16) >= 0
    assert devices == "[0, 1]"
    assert values == str([[-1.0, 2.0, 5.0, 8.0], [11.0, 14.0, 17.0, 20.0]])
