"""JAX's memory APIs on the ipu: ``device.memory_stats()`` counts the live arrays on the IPU and the program loaded
on it (the last one run there) against its SRAM, with the busiest tile; ``jax.profiler.device_memory_profile``
lists the live arrays in pprof's format. Measured in a fresh process, so that no other test's arrays move the
counts."""

from __future__ import annotations

import base64
import gzip
import json

import _protobuf
import pytest

TILE_BYTES = 638976  # a Mk2 tile's SRAM (docs/ipu-model.md)

SCRIPT = """
import base64, gc, json
import jax, numpy as np

d = jax.devices("ipu")[0]
seen = {}

def stats(name):
    gc.collect()
    seen[name] = d.memory_stats()

stats("start")
x = jax.device_put(np.ones((1024, 256), np.float32), d)  # 1 MiB
x.block_until_ready()
stats("put")
x.delete()
stats("deleted")

y = jax.device_put(np.ones((512, 256), np.float32), d)  # 512 KiB
compiled = jax.jit(lambda a: a * 2 + 1, backend="ipu").lower(y).compile()
cost = compiled.cost_analysis()
cost = cost[0] if isinstance(cost, list) else cost
seen["program"] = {"bytes": int(cost["ipu_memory_bytes"]), "worst_tile": int(cost["ipu_worst_tile_bytes"])}
stats("compiled")  # compiled, not run: nothing loaded yet
z = compiled(y)
z.block_until_ready()
stats("run")

donating = jax.jit(lambda a: a + 1, donate_argnums=0, backend="ipu").lower(z).compile()
cost = donating.cost_analysis()
seen["donating_program"] = int((cost[0] if isinstance(cost, list) else cost)["ipu_memory_bytes"])
w = donating(z)
w.block_until_ready()
seen["donated_is_deleted"] = z.is_deleted()
stats("donated")

del compiled, donating
jax.clear_caches()
stats("programs_freed")

marker = jax.device_put(np.ones((333, 77), np.float32), d)  # 102,564 bytes: a size no other array here has
marker.block_until_ready()
seen["profile"] = base64.b64encode(jax.profiler.device_memory_profile(backend="ipu")).decode()
seen["device"] = str(d)
seen["num_tiles"] = int(d.num_tiles)
print("RESULT", json.dumps(seen))
"""


@pytest.fixture(scope="module")
def seen(module_python):
    result = module_python(SCRIPT, {"JAX_PLATFORMS": "ipu,cpu"})
    assert result.returncode == 0, result.stderr[-3000:]
    line = [ln for ln in result.stdout.splitlines() if ln.startswith("RESULT ")]
    assert line, result.stdout + result.stderr[-3000:]
    return json.loads(line[0][len("RESULT "):])


def test_memory_stats_has_jaxs_keys_and_the_ipus_limits(seen):
    start = seen["start"]
    for key in ("bytes_in_use", "peak_bytes_in_use", "num_allocs", "largest_alloc_size", "bytes_limit"):
        assert isinstance(start[key], int), (key, start)
    assert start["bytes_limit"] == seen["num_tiles"] * TILE_BYTES
    assert start["tile_bytes_limit"] == TILE_BYTES
    assert start["largest_tile_bytes_in_use"] == 0  # no program has run


def test_an_array_counts_until_it_is_deleted(seen):
    start, put, deleted = seen["start"], seen["put"], seen["deleted"]
    assert put["bytes_in_use"] - start["bytes_in_use"] == 1024 * 256 * 4
    assert put["num_allocs"] == start["num_allocs"] + 1
    assert put["largest_alloc_size"] >= 1024 * 256 * 4
    assert put["peak_bytes_in_use"] >= put["bytes_in_use"]
    assert deleted["bytes_in_use"] == start["bytes_in_use"]
    assert deleted["peak_bytes_in_use"] == put["peak_bytes_in_use"]  # the peak stays


def test_the_program_run_on_the_ipu_counts_with_its_busiest_tile(seen):
    deleted, compiled, run, program = seen["deleted"], seen["compiled"], seen["run"], seen["program"]
    arrays = deleted["bytes_in_use"] + 512 * 256 * 4
    assert compiled["bytes_in_use"] == arrays  # compiled only: not loaded on the IPU
    assert program["bytes"] > 0 and 0 < program["worst_tile"] <= TILE_BYTES
    assert run["bytes_in_use"] == arrays + 512 * 256 * 4 + program["bytes"]  # its result, and the program
    assert run["largest_tile_bytes_in_use"] == program["worst_tile"]
    assert run["peak_bytes_in_use"] >= run["bytes_in_use"]


def test_donation_and_freeing_the_program_lower_bytes_in_use(seen):
    deleted, donated, freed = seen["deleted"], seen["donated"], seen["programs_freed"]
    arrays = deleted["bytes_in_use"] + 2 * 512 * 256 * 4  # y, and w in place of the donated result
    assert seen["donated_is_deleted"]
    assert donated["bytes_in_use"] == arrays + seen["donating_program"]  # the program loaded now is the donating one
    assert freed["bytes_in_use"] == arrays  # no program left to load
    assert freed["largest_tile_bytes_in_use"] == 0


def test_unset_figures_are_a_gpu_allocators(seen):
    run = seen["run"]
    assert run.get("bytes_reserved", 0) == 0 and run.get("peak_bytes_reserved", 0) == 0  # nothing is reserved


def _samples(profile: bytes):
    """pprof's Profile (profile.proto): each sample's values and its string labels, decoded by hand."""
    fields = list(_protobuf.fields(profile))
    strings = [v.decode() for n, v in fields if n == 6]  # string_table
    samples = []
    for number, sample in fields:
        if number != 2:
            continue
        values, labels = [], {}
        for n, v in _protobuf.fields(sample):
            if n == 2:  # value: packed int64
                values.extend(_protobuf.packed(v))
            elif n == 3:  # Label {key, str, num}
                label = dict(_protobuf.fields(v))
                labels[strings[label[1]]] = strings[label[2]] if label.get(2) else label.get(3)
        samples.append((values, labels))
    return strings, samples


def test_device_memory_profile_lists_the_live_ipu_arrays(seen):
    profile = base64.b64decode(seen["profile"])
    if profile[:2] == b"\x1f\x8b":
        profile = gzip.decompress(profile)
    strings, samples = _samples(profile)
    assert "space" in strings and "bytes" in strings  # pprof's sample types
    on_ipu = [(values, labels) for values, labels in samples if labels.get("device") == seen["device"]]
    buffers = [values[-1] for values, labels in on_ipu if labels.get("kind") == "buffer"]
    assert 333 * 77 * 4 in buffers, samples
    assert 512 * 256 * 4 in buffers  # y and w
