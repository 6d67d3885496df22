"""Tile memory: a program that does not fit says so in Poplar's words; with more tiles it fits.
Cycle estimates are reported per program and per execution."""

from __future__ import annotations

import re

import jax
import numpy as np

import jax_ipu

OOM = re.compile(r"Out of memory on tile (\d+): (\d+) bytes used but tiles only have 638976 bytes of memory")

BIG_PROGRAM = """
import jax, numpy as np
x = np.ones((1024, 1024), np.float32)   # 4 MiB: more than 4 tiles x 624 KiB
try:
    y = jax.jit(lambda a: a * 2 + 1, backend="ipu")(x)
    print("ok", float(np.asarray(y).sum()))
except Exception as e:
    print(type(e).__name__, e)
"""


def test_out_of_memory_uses_poplars_wording(python):
    result = python(BIG_PROGRAM, {"JAX_IPU_MODEL_NUM_TILES": "4"})
    assert result.returncode == 0, result.stderr
    match = OOM.search(result.stdout)
    assert match, result.stdout
    assert int(match.group(1)) < 4
    assert int(match.group(2)) > 638976
    assert result.stdout.startswith(("XlaRuntimeError", "JaxRuntimeError"))  # jax 0.4.13, the current series


def test_the_same_program_fits_with_more_tiles(python):
    result = python(BIG_PROGRAM, {"JAX_IPU_MODEL_NUM_TILES": "64"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["ok", str(float(3 * 1024 * 1024))]


def test_cost_analysis_reports_cycles_and_tile_memory():
    compiled = jax.jit(lambda a, b: a @ b, backend="ipu").lower(
        np.ones((64, 32), np.float32), np.ones((32, 16), np.float32)
    ).compile()
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    assert cost["ipu_estimated_cycles"] > 0
    assert cost["flops"] >= 2 * 64 * 32 * 16 * 0.99
    assert 0 < cost["ipu_worst_tile_bytes"] <= 638976
    assert 0 <= cost["ipu_worst_tile"] < 1472


def test_each_execution_has_a_cycle_estimate():
    f = jax.jit(lambda a: a * 3 + 1, backend="ipu")
    small = f(np.ones(10, np.float32)).block_until_ready()
    first = jax_ipu.last_execution()
    big = f(np.ones(100_000, np.float32)).block_until_ready()
    second = jax_ipu.last_execution()
    assert small is not None and big is not None
    assert first["program"] == second["program"] and first["program"].rstrip("_") == "jit__lambda"  # both series' names
    assert first["total_cycles"] > 0
    assert second["total_cycles"] > first["total_cycles"]
    assert second["total_cycles"] >= second["compute_cycles"] > 0
    assert second["supersteps"] >= 1
