"""The graph API (jax_ipu_shim/emulator/include/ipu/poplar.h) from C++: its test program and the heat-stencil example,
each linked with the emulator's objects (the wheel's own, from the object cache) and run."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from build_tools import native
from build_tools.pins import Series

REPO = Path(__file__).resolve().parents[2]


def _run(series: Series, source: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    exe = native.build_program(series, [source], tmp_path / source.stem)
    return subprocess.run([str(exe)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)


def test_graph_api_program(series: Series, tmp_path: Path) -> None:
    """Built-in codelets against the host's arithmetic, views, the cost model, memory checks, errors that name what
    is wrong, control flow, streams, host functions, cycleCount, and host threads (graph_api_test.cc)."""
    proc = _run(series, REPO / "tests" / "toolchain" / "graph_api_test.cc", tmp_path)
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.strip().endswith("built-in codelets") and "ok: 0 failure(s)" in proc.stdout, proc.stdout


def test_heat_stencil_example_matches_the_host(series: Series, tmp_path: Path) -> None:
    proc = _run(series, REPO / "examples" / "cpp" / "heat_stencil.cc", tmp_path)
    assert proc.returncode == 0, proc.stdout
    result = json.loads(proc.stdout.splitlines()[0])
    assert result["differing_points"] == 0
    assert result["ipu_iterations"] == result["iterations"] > 10  # a real convergence loop, as long as the host's
    assert result["cycle_count"] == result["cycles"] > 0  # poplar::cycleCount around the whole program
    assert 0 < result["worst_tile_bytes"] < 638_976
    assert 0 < result["centre"] < 100


@pytest.mark.parametrize("name", ["graph_api_test.cc", "heat_stencil.cc"])
def test_the_programs_include_only_the_public_header(name: str) -> None:
    """What a user of the graph API writes needs ipu/poplar.h (and what it includes), nothing of the lowering."""
    source = next(REPO.glob(f"**/{name}"))
    includes = [ln.split()[1].strip('"<>') for ln in source.read_text().splitlines() if ln.startswith("#include")]
    ours = [i for i in includes if i.startswith("ipu/")]
    assert "ipu/poplar.h" in ours
    assert set(ours) <= {"ipu/poplar.h", "ipu/cost_model.h"}, ours
