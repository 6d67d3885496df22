"""`jax.devices("ipu")`: what a device shows, and how flags change it."""

from __future__ import annotations

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _series import CURRENT_SERIES


def test_one_ipu2_device_with_graphcore_properties():
    (device,) = jax.devices("ipu")
    assert repr(device) == "IpuDevice(id=0, num_tiles=1472, version=ipu2)"
    assert str(device) == repr(device)
    assert device.id == 0
    assert device.platform == "ipu"
    assert device.is_ipu_model is True
    assert device.version == "ipu2"
    assert device.num_tiles == 1472
    assert device.num_worker_contexts == 6
    assert device.bytes_per_tile == 638976
    assert device.tile_clock_frequency == 1_330_000_000
    assert device.device_kind == "Graphcore-IPUModel(ipu2)-NumTiles(1472)"


def test_cpu_stays_the_default_backend():
    assert jax.default_backend() == "cpu"
    assert next(iter(jnp.ones(3).devices())).platform == "cpu"
    assert jax.devices()[0].platform == "cpu"


def test_jit_backend_ipu_runs_on_the_ipu():
    out = jax.jit(lambda x: x * 2, backend="ipu")(np.arange(4, dtype=np.float32))
    assert next(iter(out.devices())) == jax.devices("ipu")[0]
    np.testing.assert_array_equal(np.asarray(out), [0, 2, 4, 6])


def test_device_put_round_trip():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    on_ipu = jax.device_put(x, jax.devices("ipu")[0])
    assert next(iter(on_ipu.devices())).platform == "ipu"
    np.testing.assert_array_equal(np.asarray(on_ipu), x)
    # A non-contiguous host view is gathered correctly.
    np.testing.assert_array_equal(np.asarray(jax.device_put(x.T, jax.devices("ipu")[0])), x.T)


@pytest.mark.parametrize(
    "env, tiles",
    [
        ({"JAX_IPU_MODEL_NUM_TILES": "16"}, 16),
        ({"TF_POPLAR_FLAGS": "--use_ipu_model --ipu_model_tiles=8"}, 8),
        ({"TF_POPLAR_FLAGS": "--ipu_model_tiles=8", "JAX_IPU_MODEL_NUM_TILES": "32"}, 32),
    ],
)
def test_tile_count_flags(python, env, tiles):
    result = python(
        """
        import jax
        d = jax.devices("ipu")[0]
        print(repr(d), d.num_tiles, d.device_kind)
        """,
        env,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "IpuDevice(id=0,", f"num_tiles={tiles},", "version=ipu2)", str(tiles),
        f"Graphcore-IPUModel(ipu2)-NumTiles({tiles})",
    ]


def test_jax_config_option_sets_tiles_before_first_use(python):
    result = python(
        """
        import jax
        import jax_ipu  # the current series imports plugins lazily: this defines their jax.config options
        jax.config.update("jax_ipu_model_num_tiles", 24)
        print(jax.devices("ipu")[0].num_tiles)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "24"


def test_several_devices_and_placement(python):
    result = python(
        """
        import jax, numpy as np
        devices = jax.devices("ipu")
        print(len(devices), [d.id for d in devices])
        out = jax.jit(lambda x: x + 1, device=devices[1])(np.ones(3, np.float32))
        print(next(iter(out.devices())).id, np.asarray(out).tolist())
        """,
        {"JAX_IPU_DEVICE_COUNT": "2"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["2 [0, 1]", "1 [2.0, 2.0, 2.0]"]


def test_platform_name_ipu_makes_ipu_the_default(python):
    result = python(
        """
        import jax, jax.numpy as jnp
        print(jax.default_backend(), next(iter((jnp.arange(3) * 2).devices())).platform)
        """,
        {"JAX_PLATFORM_NAME": "ipu"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ipu ipu"


def test_jax_platforms_cpu_skips_the_ipu(python):
    result = python(
        """
        import jax
        print(jax.devices()[0].platform)
        try:
            jax.devices("ipu")
        except RuntimeError as e:
            print("no ipu:", "ipu" in str(e))
        """,
        {"JAX_PLATFORMS": "cpu"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["cpu", "no ipu: True"]


@pytest.mark.parametrize(
    "env, names",
    [
        ({"JAX_IPU_MODEL_NUM_TILES": "abc"}, ["JAX_IPU_MODEL_NUM_TILES=abc", "expected an integer"]),
        ({"TF_POPLAR_FLAGS": "--ipu_model_tiles=0"}, ["--ipu_model_tiles=0", "at least 1 tile"]),
        ({"TF_POPLAR_FLAGS": "--ipu_model_tiles=5000"}, ["--ipu_model_tiles=5000", "5000"]),
        # beyond 32 bits: refused as written, not as the count a 32-bit field would wrap it to
        ({"TF_POPLAR_FLAGS": "--ipu_model_tiles=99999999999999999999"},
         ["--ipu_model_tiles=99999999999999999999", "'99999999999999999999' tiles is more than any IPU has"]),
        ({"TF_POPLAR_FLAGS": "--ipu_model_version=ipu9"}, ["--ipu_model_version=ipu9", "ipu2"]),
        ({"JAX_IPU_USE_MODEL": "maybe"}, ["JAX_IPU_USE_MODEL=maybe", "yes/true"]),
        ({"JAX_IPU_DEVICE_COUNT": "0"}, ["JAX_IPU_DEVICE_COUNT=0", "device count"]),
        ({"TF_POPLAR_FLAGS": "ipu_model_tiles=8"}, ["TF_POPLAR_FLAGS", "not a flag"]),
        ({"JAX_IPU_HOST_THREADS": "abc"}, ["JAX_IPU_HOST_THREADS=abc", "expected an integer"]),
        ({"JAX_IPU_HOST_THREADS": "0"}, ["JAX_IPU_HOST_THREADS=0", "1..256"]),
        ({"JAX_IPU_HOST_THREADS": "300"}, ["JAX_IPU_HOST_THREADS=300", "1..256"]),
    ],
)
def test_malformed_flags_name_the_flag(python, env, names):
    result = python(
        """
        import jax
        try:
            jax.devices("ipu")
        except RuntimeError as e:
            print(e)
        else:
            print("no error")
        """,
        env,
    )
    assert result.returncode == 0, result.stderr
    assert "Unable to initialize backend 'ipu'" in result.stdout
    for name in names:
        assert name in result.stdout


def test_host_threads_flag_runs_programs(python):
    result = python(
        """
        import jax, numpy as np
        x = np.arange(100000, dtype=np.float32)
        print(float(np.asarray(jax.jit(lambda a: a * 2, backend="ipu")(x)).sum()) == float((x * 2).sum()))
        """,
        {"JAX_IPU_HOST_THREADS": "2"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"


def test_ipu21_is_a_faster_clock_than_ipu2(python):
    result = python(
        """
        import jax
        d = jax.devices("ipu")[0]
        print(d.version, d.tile_clock_frequency)
        """,
        {"JAX_IPU_MODEL_VERSION": "ipu21"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["ipu21", "1850000000"]


def test_jax_platforms_ipu_alone_differentiates_scans(python):
    """With JAX_PLATFORMS=ipu jax has no cpu backend; grad of a scan that forwards a numpy constant asked for a cpu
    device in jax 0.4.13 ("Unknown backend cpu") until patches/jax/0.4.13/0005 made it use the default device. The
    current series puts a numpy input that the scan's body returns unchanged on a cpu device (``_maybe_put``):
    jax_ipu._jax.scan_forwarding_without_cpu puts it on the default device there."""
    result = python(
        """
        import jax, numpy as np
        from jax import lax
        x = np.arange(1.0, 5.0, dtype=np.float32)
        cumprod = lambda x: lax.scan(lambda s, v: (v * s, s), np.float32(1), x)[1].sum()
        print([d.platform for d in jax.devices()], np.asarray(jax.grad(cumprod)(x)).tolist())
        total, same = lax.scan(lambda s, v: (s + v, v), np.float32(0), x)  # x forwarded: not computed
        print(float(total), np.asarray(same).tolist(), [d.platform for d in same.devices()])
        """,
        {"JAX_PLATFORMS": "ipu"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines() == ["['ipu'] [9.0, 4.0, 2.0, 0.0]", "10.0 [1.0, 2.0, 3.0, 4.0] ['ipu']"]


@pytest.mark.skipif(not CURRENT_SERIES, reason="jax 0.4.13 sends native MLIR bytecode: no version to negotiate")
def test_plugin_attributes_tell_jaxlib_the_stablehlo_version_we_read():
    # jaxlib serialises the VHLO artifact it hands to Compile at the version the plugin attributes give: the one
    # the bundled StableHLO (and so our front end) reads.
    from jax._src import xla_bridge
    from jaxlib.mlir.dialects import stablehlo

    want = [int(x) for x in stablehlo.get_current_version().split(".")]
    assert list(xla_bridge.backend_stablehlo_version("ipu")) == want


# The IPU Model's parameters (Poplar's IPUModel members), each set by a flag: the device shows them, the estimate
# uses them, and the profile report says which were used.
MODEL_PROGRAM = """
import json, jax, jax.numpy as jnp, jax_ipu, numpy as np
d = jax.devices("ipu")[0]
x = np.linspace(-1, 1, 64 * 64, dtype=np.float32).reshape(64, 64)
f = lambda a: jnp.tanh(a @ a.T) + a.sum(axis=0)
out = jax.jit(f, backend="ipu")(x)
np.testing.assert_allclose(np.asarray(out), np.asarray(jax.jit(f, backend="cpu")(x)), rtol=2e-5, atol=2e-4)
print(json.dumps({"device": [d.bytes_per_tile, d.num_worker_contexts, d.tile_clock_frequency],
                  "platform_version": d.client.platform_version, "run": jax_ipu.last_execution()}))
"""

MODEL_FLAGS = {
    "JAX_IPU_MODEL_MEMORY_BYTES_PER_TILE": "600000",
    "JAX_IPU_MODEL_NUM_WORKER_CONTEXTS": "4",
    "JAX_IPU_MODEL_TILE_CLOCK_FREQUENCY": "1e9",
    "TF_POPLAR_FLAGS": "--ipu_model_exchange_bytes_per_cycle=1 --ipu_model_global_sync_cycles=700",
}


def _model_run(python, tmp_path, flags):
    env = {"JAX_IPU_MODEL_NUM_TILES": "16", "POPLAR_ENGINE_OPTIONS": json.dumps(
        {"autoReport.outputGraphProfile": "true", "autoReport.directory": str(tmp_path)}), **flags}
    result = python(MODEL_PROGRAM, env)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    folder = [f for f in sorted(os.listdir(tmp_path)) if f.startswith("jit_")][-1]
    seen["target"] = json.loads((tmp_path / folder / "profile.json").read_text())["target"]
    return seen


def test_ipu_model_parameters_from_flags(python, tmp_path):
    chip = _model_run(python, tmp_path / "chip", {})
    model = _model_run(python, tmp_path / "model", MODEL_FLAGS)
    assert chip["device"] == [638976, 6, 1330000000]
    assert model["device"] == [600000, 4, 1000000000]
    assert "memoryBytesPerTile=600000" in model["platform_version"]
    assert "globalSyncCycles=700" in model["platform_version"]
    target = model["target"]
    assert (target["bytes_per_tile"], target["num_worker_contexts"], target["clock_hz"]) == (600000, 4, 1e9)
    assert (target["exchange_bytes_per_cycle"], target["global_sync_cycles"]) == (1, 700)
    assert (chip["target"]["exchange_bytes_per_cycle"], chip["target"]["global_sync_cycles"]) == (4, 100)
    # Each sync costs 7x as much, each byte exchanged 4x; fewer workers change the compute estimate.
    a, b = chip["run"], model["run"]
    assert a["supersteps"] == b["supersteps"] > 0
    assert b["sync_cycles"] == 7 * a["sync_cycles"]
    assert b["exchange_cycles"] > 3 * a["exchange_cycles"] > 0
    assert b["compute_cycles"] != a["compute_cycles"]


@pytest.mark.parametrize("env, names", [
    ({"JAX_IPU_MODEL_MEMORY_BYTES_PER_TILE": "100"},
     ["JAX_IPU_MODEL_MEMORY_BYTES_PER_TILE=100", "memoryBytesPerTile = 100: must be between 1024 and"]),
    ({"TF_POPLAR_FLAGS": "--ipu_model_num_worker_contexts=65"},
     ["--ipu_model_num_worker_contexts=65", "numWorkerContexts = 65"]),
    ({"JAX_IPU_MODEL_TILE_CLOCK_FREQUENCY": "1.5"}, ["JAX_IPU_MODEL_TILE_CLOCK_FREQUENCY=1.5", "whole number"]),
    ({"JAX_IPU_MODEL_GLOBAL_SYNC_CYCLES": "-3"}, ["JAX_IPU_MODEL_GLOBAL_SYNC_CYCLES=-3", "positive"]),
])
def test_bad_ipu_model_parameters_name_the_flag(python, env, names):
    result = python("""
import jax
try:
    jax.devices("ipu")
except RuntimeError as e:
    print(e)
""", env)
    assert result.returncode == 0, result.stderr
    for name in names:
        assert name in result.stdout, result.stdout


def test_less_memory_per_tile_is_out_of_memory(python):
    """The memory check is the model's: a program that fits 16 tiles of an ipu2 fails on 16 tiles of 4 KiB."""
    script = """
import jax, numpy as np
x = np.ones((16, 1024), np.float32)
try:
    print(float(jax.jit(lambda a: (a * 2).sum(), backend="ipu")(x)))
except Exception as e:
    print(type(e).__name__, e)
"""
    fits = python(script, {"JAX_IPU_MODEL_NUM_TILES": "16"})
    assert fits.returncode == 0, fits.stderr
    assert fits.stdout.strip() == "32768.0"
    small = python(script, {"JAX_IPU_MODEL_NUM_TILES": "16", "JAX_IPU_MODEL_MEMORY_BYTES_PER_TILE": "4096"})
    assert small.returncode == 0, small.stderr
    assert "Out of memory on tile" in small.stdout and "4096" in small.stdout, small.stdout
