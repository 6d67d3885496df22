"""The cost model's internals from C++ (cost_model_test.cc, which may include the lowering's headers: it tests them,
not the graph API), linked with the emulator's objects and run."""

from __future__ import annotations

import subprocess
from pathlib import Path

from build_tools import native
from build_tools.pins import Series

REPO = Path(__file__).resolve().parents[2]


def test_cost_model_internals(series: Series, tmp_path: Path) -> None:
    """A supertile's two tiles receive an operand block they share once (supertileExchangeBytes)."""
    exe = native.build_program(series, [REPO / "tests" / "toolchain" / "cost_model_test.cc"], tmp_path / "cost")
    proc = subprocess.run([str(exe)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    assert proc.returncode == 0 and "ok: 0 failure(s)" in proc.stdout, proc.stdout
