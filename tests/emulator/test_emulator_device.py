from __future__ import annotations

import pytest

from jax_ipu import emulator as E


@pytest.mark.parametrize("version,tiles,bytes_per_tile,clock", [
    ("ipu1", 1216, 262144, 1600000000),
    ("ipu2", 1472, 638976, 1330000000),  # ~1.33 GHz, derived from the GC200 peak (ipu-model.md)
    ("ipu21", 1472, 638976, 1850000000),
])
def test_device_info(version, tiles, bytes_per_tile, clock):
    info = E.device_info(version)
    assert info["version"] == version
    assert info["num_tiles"] == tiles == info["tiles_per_chip"]
    assert info["bytes_per_tile"] == bytes_per_tile
    assert info["tile_clock_frequency"] == clock
    assert info["num_worker_contexts"] == 6
    assert info["exchange_bytes_per_cycle"] == 4


def test_fewer_tiles():
    assert E.device_info("ipu2", 4)["num_tiles"] == 4
    assert E.device_info("ipu1", 1216)["num_tiles"] == 1216


@pytest.mark.parametrize("version,tiles", [("ipu2", 1473), ("ipu2", -1), ("ipu1", 1472)])
def test_bad_tile_count(version, tiles):
    with pytest.raises(E.EmulatorError,
                       match=f"Invalid number of IPU Model tiles {tiles} for {version}: must be between 1 and") as e:
        E.device_info(version, tiles)
    assert e.value.code == "INVALID_ARGUMENT"


def test_unknown_version():
    with pytest.raises(E.EmulatorError, match="Unknown IPU version 'ipu3': expected one of ipu1, ipu2, ipu21"):
        E.device_info("ipu3")


def test_ipu_model_parameters_replace_the_chips():
    """Poplar's IPUModel parameters: each replaces the chip's value; 0 keeps it; the links' per-cycle rates follow
    the clock."""
    info = E.device_info("ipu2", 4, memory_bytes_per_tile=4096, num_worker_contexts=3, tile_clock_frequency=10**9,
                         exchange_bytes_per_cycle=16, global_sync_cycles=250)
    assert (info["num_tiles"], info["bytes_per_tile"], info["num_worker_contexts"]) == (4, 4096, 3)
    assert (info["tile_clock_frequency"], info["exchange_bytes_per_cycle"], info["global_sync_cycles"]) == (
        10**9, 16, 250)
    assert info["total_memory_bytes"] == 4 * 4096
    assert E.device_info("ipu21", memory_bytes_per_tile=0) == E.device_info("ipu21")
    assert E.device_info("ipu2")["global_sync_cycles"] == 100


@pytest.mark.parametrize("parameter, value, message", [
    ("memory_bytes_per_tile", 1000, "memoryBytesPerTile = 1000: must be between 1024 and 1073741824"),
    ("num_worker_contexts", 65, "numWorkerContexts = 65: must be between 1 and 64"),
    ("tile_clock_frequency", -1, "tileClockFrequency = -1"),
    ("exchange_bytes_per_cycle", 10**7, "exchangeBytesPerCycle = 10000000"),
    ("global_sync_cycles", -5, "globalSyncCycles = -5"),
    ("tiles_per_ipu", 4, "expected one of version, num_tiles, memory_bytes_per_tile"),
])
def test_bad_ipu_model_parameters_are_named(parameter, value, message):
    with pytest.raises(E.EmulatorError, match=message) as e:
        E.device_info("ipu2", **{parameter: value})
    assert e.value.code == "INVALID_ARGUMENT"


def test_ipu_model_parameters_change_the_estimate():
    """The same program on a model with a slower sync, a narrower exchange and fewer workers: the sync and exchange
    cycles scale as the parameters do."""
    import numpy as np

    p = E.Program()
    x, y = p.main.param("f32", (64, 64)), p.main.param("f32", (64, 64))
    dot = p.main.op("dot_general", [x, y], "f32", (64, 64), {
        "lhs_batching_dimensions": [], "rhs_batching_dimensions": [],
        "lhs_contracting_dimensions": [1], "rhs_contracting_dimensions": [0]})
    p.main.ret(p.main.op("tanh", [dot], "f32", (64, 64)))
    a = np.linspace(-1, 1, 4096, dtype=np.float32).reshape(64, 64)
    runs = []
    for model in ({}, {"global_sync_cycles": 300, "exchange_bytes_per_cycle": 2, "num_worker_contexts": 2}):
        exe = E.compile(p, "ipu2", 16, **model)
        out = exe.run(a, a.T.copy())
        np.testing.assert_allclose(out[0], np.tanh(a @ a.T), rtol=1e-5, atol=1e-5)
        runs.append(exe.last_profile)
    chip, model = runs
    assert model["supersteps"] == chip["supersteps"] > 0
    assert model["sync_cycles"] == 3 * chip["sync_cycles"]
    assert model["exchange_cycles"] > 1.8 * chip["exchange_cycles"] > 0
    assert model["compute_cycles"] != chip["compute_cycles"]  # the work is shared among 2 workers, not 6
