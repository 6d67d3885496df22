"""jax.profiler's traces show the IPUs: ``jax.profiler.start_trace`` / ``stop_trace`` around ipu work write, beside
the host's plane, a plane per IPU with its runs (host time, with the program, replica and estimated cycles), their
steps (IPU time) and the host transfers, in both files jax writes (``*.xplane.pb`` for TensorBoard, read here with a
reader of the wire format alone, and ``*.trace.json.gz`` for Perfetto). Checked against
``jax_ipu.last_execution()`` of the same run."""

from __future__ import annotations

import glob
import gzip
import json
import os

import _protobuf
import pytest

IPU_PLANE = "/device:CUSTOM:0"

SCRIPT = """
import json, sys
import jax, jax.numpy as jnp, numpy as np
import jax_ipu

log_dir = sys.argv[1] if len(sys.argv) > 1 else LOG_DIR
f = jax.jit(lambda x: jnp.tanh(x @ x), backend="ipu")
x = np.ones((64, 64), np.float32)
f(x).block_until_ready()  # compiled before the trace
with jax.profiler.trace(log_dir):
    on_ipu = jax.device_put(x, jax.devices("ipu")[0])
    for _ in range(3):
        y = f(on_ipu).block_until_ready()
    back = np.asarray(y)
    last = jax_ipu.last_execution()
    doubled = jax.pmap(lambda v: v * 2, backend="ipu")(np.ones((2, 8), np.float32)).block_until_ready()
    replicated = jax_ipu.last_execution(jax.devices("ipu")[1])
print("RESULT", json.dumps({"last": last, "nbytes": x.nbytes, "replicated": replicated}))
"""


@pytest.fixture(scope="module")
def traced(tmp_path_factory, module_python):
    log_dir = str(tmp_path_factory.mktemp("trace"))
    result = module_python(SCRIPT.replace("LOG_DIR", repr(log_dir)),
                           {"JAX_PLATFORMS": "cpu,ipu", "JAX_IPU_DEVICE_COUNT": "2"})
    assert result.returncode == 0, result.stderr[-3000:]
    line = [ln for ln in result.stdout.splitlines() if ln.startswith("RESULT ")]
    assert line, result.stdout + result.stderr[-3000:]
    xplanes = glob.glob(os.path.join(log_dir, "plugins", "profile", "*", "*.xplane.pb"))
    traces = glob.glob(os.path.join(log_dir, "plugins", "profile", "*", "*.trace.json.gz"))
    assert len(xplanes) == 1, os.listdir(log_dir)
    with open(xplanes[0], "rb") as f:
        planes = _protobuf.xspace_planes(f.read())
    trace = None
    if traces:
        with gzip.open(traces[0], "rt") as f:
            trace = json.load(f)
    return json.loads(line[0][len("RESULT "):]), planes, trace


def test_the_trace_has_a_plane_per_ipu_beside_the_hosts(traced):
    _, planes, _ = traced
    assert any(name.startswith("/host:") for name in planes), sorted(planes)
    assert IPU_PLANE in planes, sorted(planes)
    assert set(planes[IPU_PLANE]) == {"Runs (host time)", "Steps (IPU time)", "Transfers"}


def test_each_run_is_on_the_ipu_lane_with_its_cycles(traced):
    result, planes, _ = traced
    last = result["last"]
    runs = planes[IPU_PLANE]["Runs (host time)"][:3]
    assert [r["name"] for r in runs] == [last["program"]] * 3
    for run in runs:
        assert run["stats"]["replica"] == 0
        assert run["stats"]["ipu_cycles"] == last["total_cycles"]
        assert run["stats"]["compute_cycles"] == last["compute_cycles"]
        assert run["duration_ps"] > 0 and run["start_ns"] >= 0  # host time, since the session's start
        assert abs(run["stats"]["ipu_time_us"] - last["total_cycles"] / 1.33e3) < 1e-6 * last["total_cycles"]
    starts = [r["start_ns"] for r in runs]
    assert starts == sorted(starts)


def test_the_steps_of_each_run_are_in_ipu_time(traced):
    result, planes, _ = traced
    last = result["last"]
    steps = planes[IPU_PLANE]["Steps (IPU time)"][:3 * len(last["steps"])]
    final = steps[-len(last["steps"]):]
    assert [s["name"] for s in final] == [f"{s['type']} {s['name']}" for s in last["steps"]]
    assert [s["stats"]["cycles"] for s in final] == [s["cycles"] for s in last["steps"]]
    assert sum(s["stats"]["cycles"] for s in final) == last["total_cycles"]
    run = planes[IPU_PLANE]["Runs (host time)"][2]
    assert final[0]["start_ns"] == pytest.approx(run["start_ns"], abs=1)  # laid end to end from the run's start
    for a, b in zip(final, final[1:]):
        assert b["start_ns"] == pytest.approx(a["start_ns"] + a["duration_ps"] / 1000, abs=1)


def test_a_replicated_program_runs_on_each_ipus_lane_with_its_replica(traced):
    result, planes, _ = traced
    replicated = result["replicated"]
    for device in (0, 1):
        runs = [r for r in planes[f"/device:CUSTOM:{device}"]["Runs (host time)"]
                if r["name"] == replicated["program"]]
        assert [r["stats"]["replica"] for r in runs] == [device]
        assert runs[0]["stats"]["ipu_cycles"] == replicated["total_cycles"]


def test_host_transfers_are_on_the_ipu_lane(traced):
    result, planes, _ = traced
    transfers = planes[IPU_PLANE]["Transfers"]
    to_ipu = [t for t in transfers if t["name"] == "host to ipu"]
    from_ipu = [t for t in transfers if t["name"] == "ipu to host"]
    # device_put of x and reading y back (then the pmap's pieces)
    assert [t["stats"]["bytes"] for t in to_ipu].count(result["nbytes"]) == 1
    assert [t["stats"]["bytes"] for t in from_ipu].count(result["nbytes"]) == 1
    assert all(t["stats"]["ipu_cycles"] > 0 for t in transfers)


def test_the_perfetto_trace_has_the_ipu_lanes(traced):
    result, planes, trace = traced
    assert trace is not None, "no *.trace.json.gz"
    events = trace["traceEvents"]
    pids = {e["pid"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"
            and e["args"]["name"] == IPU_PLANE}
    assert len(pids) == 1, [e for e in events if e.get("ph") == "M" and e.get("name") == "process_name"]
    runs = [e for e in events if e.get("ph") == "X" and e["pid"] in pids and e["name"] == result["last"]["program"]]
    assert len(runs) == 3
    assert {int(e["args"]["ipu_cycles"]) for e in runs} == {result["last"]["total_cycles"]}
    hosts = [e for e in events if e.get("ph") == "X" and e["pid"] not in pids]
    assert hosts and min(e["ts"] for e in hosts) <= min(e["ts"] for e in runs)  # one time base with the host's
