"""Every benchmark program compiles, runs once on cpu and on ipu with --quick sizes, and the results agree.

Nothing here is timed or asserts a time: the benchmark itself is `nox -s bench`. This only keeps the program table
runnable, so a later benchmark run does not discover a broken program or a wrong ipu result.
"""

from __future__ import annotations

import io
import json

import bench
import pytest
from bench_programs import PROGRAMS, Case, Program

pytestmark = pytest.mark.filterwarnings("ignore:backend and device argument on jit is deprecated")

# Programs that use an op the ipu backend does not implement yet (reduce_window: the max pooling). They must then be
# reported as unsupported, not crash the bench; once the op lands they must pass like the rest.
MAY_BE_UNSUPPORTED = {"cnn_train_step"}


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_program_runs_on_both_backends_and_matches(program: Program) -> None:
    entry = bench.measure(program, quick=True, reps=0, log=io.StringIO())
    if program.name in MAY_BE_UNSUPPORTED and entry["status"].startswith("unsupported: "):
        return
    assert entry["status"] == "ok", entry
    assert entry["check"]["ok"], entry


def test_wrong_and_unsupported_programs_are_reported_not_raised() -> None:
    import jax.numpy as jnp
    import numpy as np

    check = bench.compare(np.ones(4, np.float32), np.float32([1, 1, 1.001, 1]), rtol=1e-5, atol=1e-6)
    assert not check["ok"] and abs(check["max_abs_err"] - 1e-3) < 1e-6 and check["err_over_tol"] > 50
    assert bench.compare(np.ones(4, np.float32), np.ones(4, np.float32), 0.0, 0.0)["err_over_tol"] == 0
    fp8 = Program("fp8", "float8 on an ipu2 (the suites' chip) is refused by name",
                  lambda quick: Case(lambda x: x.astype(jnp.float8_e4m3fn).astype(jnp.float32),
                                     (np.arange(4, dtype=np.float32),)),
                  0.0, 0.0)
    entry = bench.measure(fp8, quick=True, reps=1, log=io.StringIO())
    assert entry["status"].startswith("unsupported: ") and "\n" not in entry["status"], entry
    assert entry["cpu"]["median_s"] > 0 and entry["ratio"] is None
    wrong = dict(entry, name="wrong", status="MISMATCH: output 0 differs", check=check, ratio=1.0)
    table = bench.format_table([entry, wrong], bench.summarize([entry, wrong]))
    assert "unsupported: " in table and "*** MISMATCH" in table and "WRONG RESULTS on ipu" in table


def test_main_prints_the_table_and_writes_json(tmp_path, capsys) -> None:
    out = tmp_path / "results.json"
    assert bench.main(["--quick", "--only", "dispatch,sort_1m_f32", "--reps", "1", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "ipu/cpu" in printed and "geomean ipu/cpu" in printed and str(out) in printed
    results = json.loads(out.read_text())
    assert [p["name"] for p in results["programs"]] == ["sort_1m_f32", "dispatch"]
    import jax

    assert results["machine"]["cores"] and results["versions"]["jax"] == jax.__version__  # the installed series
    for entry in results["programs"]:
        assert entry["status"] == "ok" and entry["ratio"] > 0 and entry["ipu"]["cycles"] > 0
        assert entry["cpu"]["compile_s"] > 0 and entry["ipu"]["compile_s"] > 0
    assert results["summary"]["geomean_over"] == ["sort_1m_f32", "dispatch"]
