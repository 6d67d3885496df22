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
