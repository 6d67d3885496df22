"""The graph API (jax_ipu_shim/emulator/include/ipu/poplar.h) from C++: its test program and the heat-stencil example,
each linked with the emulator's objects (the wheel's own, from the object cache) and run."""

from __future__ import annotations

import importlib.util
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


AXPY = """
#include <poplar/Vertex.hpp>
struct Axpy : poplar::Vertex {
  poplar::Input<poplar::Vector<float>> x;
  poplar::InOut<poplar::Vector<float>> y;
  float a;
  bool compute() {
    for (unsigned i = 0; i < y.size(); ++i) y[i] += a * x[i];
    return true;
  }
  std::uint64_t cycles() const { return 10 + 3 * y.size(); }
};
"""


def test_codelets_compiled_from_vertex_classes_run_through_the_engine(series: Series, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Graph::addCodelets with a library jax_ipu.codelets compiles (the module imported alone: no jax here)."""
    spec = importlib.util.spec_from_file_location(
        "jax_ipu_codelets", REPO / "jax_ipu_shim" / "python" / "jax_ipu" / "codelets.py")
    codelets = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(codelets)
    monkeypatch.setenv("JAX_IPU_CODELET_CACHE", str(tmp_path / "codelets"))
    monkeypatch.setenv("ZIG_GLOBAL_CACHE_DIR", str(native.cache_dir() / "zig"))
    library, classes = codelets.compile_codelets(AXPY)
    assert [f.describe() for f in classes["Axpy"]] == ["x:in:vector:f32", "y:inout:vector:f32", "a:value:scalar:f32"]
    exe = native.build_program(series, [REPO / "tests" / "toolchain" / "codelet_library_test.cc"], tmp_path / "t")
    proc = subprocess.run([str(exe), str(library)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout
    result = json.loads(proc.stdout.splitlines()[0])
    assert result["codelets"] == ["Axpy"]
    assert result["y"] == [1 + 2 * v for v in range(6)]
    assert result["compute_cycles"] == (10 + 3 * 3) * 6 + 50  # one vertex per tile, on one of its six workers
    assert "codelet library '" in result["missing"] and "does not load" in result["missing"]


@pytest.mark.parametrize("name", ["graph_api_test.cc", "heat_stencil.cc", "codelet_library_test.cc"])
def test_the_programs_include_only_the_public_header(name: str) -> None:
    """What a user of the graph API writes needs ipu/poplar.h (and what it includes), nothing of the lowering."""
    source = next(REPO.glob(f"**/{name}"))
    includes = [ln.split()[1].strip('"<>') for ln in source.read_text().splitlines() if ln.startswith("#include")]
    ours = [i for i in includes if i.startswith("ipu/")]
    assert "ipu/poplar.h" in ours
    assert set(ours) <= {"ipu/poplar.h", "ipu/cost_model.h"}, ours
