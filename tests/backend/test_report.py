"""Profile reports (POPLAR_ENGINE_OPTIONS autoReport.*): the JSON's numbers are the emulator's, read back through
independent paths (the PJRT executable's cost analysis, jax_ipu.last_execution); debug.allowOutOfMemory; bad
options fail naming the option; the CLI re-renders the page."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

REPORT_PROGRAM = """
import json, jax, jax.numpy as jnp, numpy as np
import jax_ipu

def f(x, w):
    def body(i, h):
        return jnp.tanh(h @ w) + 0.5
    return jax.lax.fori_loop(0, 3, body, x).sum(axis=0)

x = np.linspace(-1, 1, 32 * 64, dtype=np.float32).reshape(32, 64)
w = np.linspace(-0.1, 0.1, 64 * 64, dtype=np.float32).reshape(64, 64)
jitted = jax.jit(f, backend="ipu")
cost = jitted.lower(x, w).compile().cost_analysis()
cost = cost[0] if isinstance(cost, list) else cost
out = jitted(x, w).block_until_ready()
run = jax_ipu.last_execution()
np.testing.assert_allclose(np.asarray(out), np.asarray(jax.jit(f, backend="cpu")(x, w)), rtol=2e-5, atol=2e-5)
print(json.dumps({"cost": cost, "run": run}))
"""


def _engine(tmp_path, **extra):
    options = {"autoReport.all": "true", "autoReport.directory": str(tmp_path)}
    options.update(extra)
    return {"POPLAR_ENGINE_OPTIONS": json.dumps(options), "JAX_IPU_MODEL_NUM_TILES": "16"}


def _reports(tmp_path):
    return sorted(p for p in os.listdir(tmp_path) if os.path.isfile(os.path.join(tmp_path, p, "profile.json")))


def test_report_comes_from_the_executable_pjrt_lowered(python, tmp_path):
    """The graph profile is read from the executable PJRT_Client_Compile lowered (the plugin's compiled hook): with
    the emulator's Python compile entry point refusing every call, the report is still written."""
    script = """
import jax, numpy as np
import jax_ipu.emulator as emulator

def refuse(*args, **kwargs):
    raise AssertionError("the report lowered the program a second time")

emulator.compile = refuse
out = jax.jit(lambda x: x * 2.0 + 1.0, backend="ipu")(np.arange(8, dtype=np.float32))
print(np.asarray(out).tolist())
"""
    result = python(script, _engine(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "second time" not in result.stderr and "could not write" not in result.stderr, result.stderr
    assert any(f.startswith("jit_") for f in _reports(tmp_path)), os.listdir(tmp_path)


def test_report_holds_the_emulators_numbers(python, tmp_path):
    result = python(REPORT_PROGRAM, _engine(tmp_path))
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    cost, run = seen["cost"], seen["run"]
    folders = _reports(tmp_path)
    assert folders, os.listdir(tmp_path)
    # The program of the jit (jax also compiles small helper programs, e.g. for the sum's reduction).
    folder = [f for f in folders if f.startswith("jit_f")][-1]
    with open(tmp_path / folder / "profile.json") as f:
        report = json.load(f)
    assert (report["format"], report["version"]) == ("jax-ipu-profile", 1)
    assert report["program"] == run["program"]
    target = report["target"]
    assert (target["chip"], target["tiles"], target["bytes_per_tile"]) == ("ipu2", 16, 638976)
    assert target["clock_hz"] > 1e9

    memory = report["memory"]
    assert memory["worst_tile"] == cost["ipu_worst_tile"]
    assert memory["worst_bytes"] == cost["ipu_worst_tile_bytes"]
    assert memory["total_bytes"] == pytest.approx(cost["ipu_memory_bytes"], rel=1e-6)
    per_tile = memory["per_tile"]
    assert len(per_tile["bytes"]) == 16 and sum(per_tile["bytes"]) == memory["total_bytes"]
    assert max(per_tile["bytes"]) == memory["worst_bytes"]
    categories = ("variables", "not_always_live", "vertex_state", "code")
    for t in range(16):  # the categories add up to each tile's bytes; exchange buffers are part of the peak
        assert sum(per_tile[c][t] for c in categories) == per_tile["bytes"][t]
        assert per_tile["exchange_buffers"][t] <= per_tile["not_always_live"][t]
    for c in categories + ("exchange_buffers",):
        assert memory["by_category"][c] == sum(per_tile[c])
    assert memory["by_category"]["variables"] >= (32 * 64 + 64 * 64 + 64) * 4  # params and result are always live
    assert memory["overflowing_tiles"] == []
    assert memory["worst_tiles"][0]["tile"] == memory["worst_tile"]

    live = report["liveness"]
    assert len(live["bytes"]) > 0 and live["peak_bytes"] == max(live["bytes"])
    assert 0 < max(live["max_tile_bytes"]) <= memory["worst_bytes"]

    # Static cycles: the per-step table sums to the PJRT executable's estimate of one pass.
    assert report["estimate"]["cycles"] == pytest.approx(cost["ipu_estimated_cycles"], rel=1e-6)
    steps = {s["id"]: s for s in report["steps"]}
    assert sum(o["cycles"] for o in report["ops"]) == sum(s["cycles"] for s in steps.values())

    # The program tree nests the loop: a RepeatWhileTrue whose body holds the dot.
    def walk(node, path):
        yield node, path
        for child in node.get("children", []):
            yield from walk(child, path + [node["type"]])
    nodes = list(walk(report["program_tree"], []))
    assert any(n["name"] == "stablehlo.dot_general" and "RepeatWhileTrue" in p for n, p in nodes)
    assert {n["id"] for n, _ in nodes if n["id"] >= 0} == set(steps)
    assert report["program_tree"]["cycles"] == sum(s["cycles"] for s in steps.values())

    # Execution profile: the run, per step and per op, equals jax_ipu.last_execution().
    runs = report["execution"]["runs"]
    assert [r["device"] for r in runs] == [0]
    assert runs[0]["total_cycles"] == run["total_cycles"]
    for key in ("compute_cycles", "exchange_cycles", "sync_cycles", "supersteps"):
        assert runs[0][key] == run[key]
    assert runs[0]["steps"] == run["steps"]
    dot = [o for o in runs[0]["ops"] if o["name"] == "stablehlo.dot_general"]
    assert dot and dot[0]["executions"] == 3  # the loop ran three times
    assert sum(o["cycles"] for o in runs[0]["ops"]) == run["total_cycles"]
    assert report["host"]["transfers"]["0"]["bytes_to_device"] >= (32 * 64 + 64 * 64) * 4

    page = (tmp_path / folder / "profile.html").read_text()
    assert "<script src" not in page and "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    assert '"format":"jax-ipu-profile"' in page


def test_graph_profile_only_has_no_execution(python, tmp_path):
    env = _engine(tmp_path)
    env["POPLAR_ENGINE_OPTIONS"] = json.dumps({"autoReport.outputGraphProfile": "true",
                                                "autoReport.directory": str(tmp_path)})
    result = python(REPORT_PROGRAM, env)
    assert result.returncode == 0, result.stderr
    folder = [f for f in _reports(tmp_path) if f.startswith("jit_f")][-1]
    report = json.loads((tmp_path / folder / "profile.json").read_text())
    assert report["memory"] is not None and report["execution"] is None


def test_no_reports_without_options(python, tmp_path):
    result = python(f"import os; os.chdir({str(tmp_path)!r})\n" + REPORT_PROGRAM, {"JAX_IPU_MODEL_NUM_TILES": "16"})
    assert result.returncode == 0, result.stderr
    assert os.listdir(tmp_path) == []


OOM_PROGRAM = """
import jax, numpy as np
x = np.ones((1024, 1024), np.float32)   # 4 MiB: more than 4 tiles x 624 KiB
try:
    y = jax.jit(lambda a: a * 2 + 1, backend="ipu")(x)
    print("ran", float(np.asarray(y).sum()))
except Exception as e:
    print(type(e).__name__, e)
"""


def test_allow_out_of_memory_writes_the_report(python, tmp_path):
    env = _engine(tmp_path, **{"debug.allowOutOfMemory": "true"})
    env["JAX_IPU_MODEL_NUM_TILES"] = "4"
    result = python(OOM_PROGRAM, env)
    assert result.returncode == 0, result.stderr
    # It compiles and runs on the emulator (the estimate is of a chip it would not fit), with a warning.
    assert result.stdout.split() == ["ran", str(float(3 * 1024 * 1024))], result.stdout
    assert "does not fit in tile memory" in result.stderr
    folder = [f for f in _reports(tmp_path) if f.startswith("jit_")][-1]
    memory = json.loads((tmp_path / folder / "profile.json").read_text())["memory"]
    assert memory["worst_bytes"] > 638976
    assert memory["overflowing_tiles"] and all(memory["per_tile"]["bytes"][t] > 638976
                                               for t in memory["overflowing_tiles"])
    assert memory["worst_tile"] in memory["overflowing_tiles"]
    assert memory["percent_of_chip"] > 100

    # Without the option the same program fails in Poplar's words, and no report is written.
    env = _engine(tmp_path / "strict")
    env["JAX_IPU_MODEL_NUM_TILES"] = "4"
    result = python(OOM_PROGRAM, env)
    assert result.returncode == 0, result.stderr
    assert "Out of memory on tile" in result.stdout
    assert not (tmp_path / "strict").exists() or _reports(tmp_path / "strict") == []


@pytest.mark.parametrize("options, message", [
    ({"autoReport.al": "true"}, "Unrecognised option 'autoReport.al'"),
    ({"debug.allowOutOfMemory": "maybe"}, "Invalid value 'maybe' for option 'debug.allowOutOfMemory'"),
    ({"autoReport.directory": ""}, "option 'autoReport.directory'"),
])
def test_bad_engine_options_name_the_option(python, options, message):
    code = """
import jax, numpy as np
try:
    jax.jit(lambda a: a + 1, backend="ipu")(np.ones(4, np.float32))
    print("no error")
except Exception as e:
    print(type(e).__name__, e)
"""
    result = python(code, {"POPLAR_ENGINE_OPTIONS": json.dumps(options)})
    assert result.returncode == 0, result.stderr
    assert message in result.stdout and "POPLAR_ENGINE_OPTIONS" in result.stdout, result.stdout


def test_malformed_json_is_named(python):
    result = python("import jax; print(jax.devices('ipu'))", {"POPLAR_ENGINE_OPTIONS": "{autoReport.all: true"})
    assert result.returncode != 0
    assert "POPLAR_ENGINE_OPTIONS: not valid JSON" in result.stderr


def test_cli_rerenders_html(python, tmp_path):
    result = python(REPORT_PROGRAM, _engine(tmp_path))
    assert result.returncode == 0, result.stderr
    folder = [f for f in _reports(tmp_path) if f.startswith("jit_f")][-1]
    page = tmp_path / folder / "profile.html"
    page.unlink()
    cli = subprocess.run([sys.executable, "-m", "jax_ipu.report", str(tmp_path)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, universal_newlines=True)
    assert cli.returncode == 0, cli.stderr
    assert str(page) in cli.stdout.split()
    assert page.read_text().count('"format":"jax-ipu-profile"') == 1
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "profile.json").write_text('{"format": "jax-ipu-profile", "version": 99}')
    cli = subprocess.run([sys.executable, "-m", "jax_ipu.report", str(bad)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, universal_newlines=True)
    assert cli.returncode == 1 and "version 99" in cli.stderr


def test_engine_options_follow_poplars_precedence():
    from jax_ipu import engine_options

    parse = engine_options.parse_engine_options
    assert not parse("").reports and parse("").directory == "./"
    both = parse('{"autoReport.all": "true", "autoReport.outputExecutionProfile": "false"}')
    assert both.output_graph_profile and not both.output_execution_profile  # the specific option wins
    assert parse('{"autoReport.outputExecutionProfile": true}').output_execution_profile
    assert parse('{"debug.allowOutOfMemory": "true", "debug.instrument": "true"}').allow_out_of_memory
    with pytest.raises(ValueError, match="Unrecognised option 'autoReport.everything'"):
        parse('{"autoReport.everything": "true"}')
    with pytest.raises(ValueError, match="expected a JSON object"):
        parse('["autoReport.all"]')
    pvti = engine_options.parse_pvti_options('{"enable": "true", "directory": "/tmp/x"}')
    assert pvti.enable and pvti.directory == "/tmp/x"


def test_pmap_report_has_a_run_per_device(python, tmp_path):
    code = """
import jax, jax.numpy as jnp, numpy as np
f = jax.pmap(lambda x: jax.lax.psum(jnp.sin(x), "i"), axis_name="i", devices=jax.devices("ipu"))
x = np.arange(2 * 8, dtype=np.float32).reshape(2, 8)
np.testing.assert_allclose(np.asarray(f(x)), np.broadcast_to(np.sin(x).sum(0), (2, 8)), rtol=1e-5)
"""
    env = _engine(tmp_path)
    env["JAX_IPU_DEVICE_COUNT"] = "2"
    result = python(code, env)
    assert result.returncode == 0, result.stderr
    # pmap's program is named pmap_<fn> in jax 0.4.13 and jit_<fn> in the current series (a jit over a mesh)
    reports = [json.loads((tmp_path / f / "profile.json").read_text()) for f in _reports(tmp_path)]
    report = [r for r in reports if r["target"]["ipus"] == 2][-1]
    assert report["target"]["device_ids"] == [0, 1]
    runs = report["execution"]["runs"]
    assert [r["device"] for r in runs] == [0, 1]
    assert all(r["total_cycles"] > 0 and any(s["type"] != "Execute" or s["name"] for s in r["steps"]) for r in runs)
    assert any("all_reduce" in o["name"] for o in runs[0]["ops"])


def test_deeply_nested_json_is_named(python):
    # 60,000 nested brackets exhaust Python's JSON parser (a RecursionError); the error still names the variable
    result = python("import jax; print(jax.devices('ipu'))", {"POPLAR_ENGINE_OPTIONS": "[" * 60_000})
    assert result.returncode != 0
    assert "POPLAR_ENGINE_OPTIONS: not valid option JSON (nested too deeply" in result.stderr, result.stderr[-2000:]


def test_emulated_64_bit_steps_are_flagged(python, tmp_path):
    """With jax_enable_x64, the steps that compute on f64/i64/u64 values (run in software: the IPU has no 64-bit
    hardware) carry ``emulated_64bit`` and their cycles are summed in the estimate; 32-bit steps are not flagged."""
    script = """
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)
f = jax.jit(lambda x, y: (jnp.exp(x) * 2.0, y + 1), backend="ipu")
print(f(np.linspace(0, 1, 64), np.arange(64, dtype=np.int32))[0][3])
"""
    result = python(script, _engine(tmp_path))
    assert result.returncode == 0, result.stderr
    folder = [f for f in _reports(tmp_path) if "lambda" in f][-1]  # jit__lambda, or jit_<lambda> in jax 0.4.13
    report = json.loads((tmp_path / folder / "profile.json").read_text())
    flagged = {s["name"]: bool(s.get("emulated_64bit")) for s in report["steps"]}
    assert [f for f, wide in flagged.items() if wide] == [n for n in flagged if "exponential" in n], flagged
    assert [f for f, wide in flagged.items() if not wide] == [n for n in flagged if "add" in n], flagged  # i32
    wide = sum(s["cycles"] for s in report["steps"] if s.get("emulated_64bit"))
    assert 0 < report["estimate"]["emulated_64bit_cycles"] == wide < report["estimate"]["cycles"]
    html = (tmp_path / folder / "profile.html").read_text()
    assert "Emulated 64-bit types" in html
