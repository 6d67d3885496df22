"""PVTI_OPTIONS: a host timeline in Chrome trace-event JSON with compile, execute (per device worker), host
transfers, streams and callbacks; nothing written when off; bad options fail naming the option."""

from __future__ import annotations

import json
import os

from _series import CURRENT_SERIES, needs_feeds

PROGRAM = """
import jax, jax.numpy as jnp, numpy as np
import jax_ipu

def step(x):
    jax.debug.callback(lambda v: None, x.sum())
    return jnp.sin(x) * 2

f = jax.jit(step, backend="ipu")
x = np.arange(64, dtype=np.float32)
for _ in range(3):
    y = f(x)
y.block_until_ready()
d1 = jax.jit(lambda a: a + 1, device=jax.devices("ipu")[1])(x).block_until_ready()
print("sum", float(np.asarray(y).sum()), float(np.asarray(d1).sum()))
"""


def _trace(tmp_path):
    files = [p for p in os.listdir(tmp_path) if p.endswith(".pvti.json")]
    assert len(files) == 1, os.listdir(tmp_path)
    with open(tmp_path / files[0]) as f:
        return json.load(f)


def test_timeline_is_trace_event_json_with_the_expected_events(python, tmp_path):
    env = {"PVTI_OPTIONS": json.dumps({"enable": "true", "directory": str(tmp_path)}), "JAX_IPU_DEVICE_COUNT": "2",
           "JAX_IPU_MODEL_NUM_TILES": "16"}
    result = python(PROGRAM, env)
    assert result.returncode == 0, result.stderr
    trace = _trace(tmp_path)
    events = trace["traceEvents"]
    # Every event is a valid complete ("X") or metadata ("M") event with the fields the viewers need.
    for e in events:
        assert e["ph"] in ("X", "M") and isinstance(e["pid"], int) and isinstance(e["tid"], int) and e["name"]
        if e["ph"] == "X":
            assert isinstance(e["ts"], (int, float)) and e["dur"] >= 0 and e["cat"]
    spans = [e for e in events if e["ph"] == "X"]
    names = {(e["cat"], e["name"]) for e in spans}
    assert ("Compile", "backend compile") in names and ("Compile", "compile (front end)") in names
    assert any(c == "Compile" and n.startswith("lower jit_step") for c, n in names)
    executes = [e for e in spans if e["cat"] == "Execute"]
    assert sum(e["name"] == "jit_step" for e in executes) == 3
    assert sum(e["name"] == ("jit__lambda" if CURRENT_SERIES else "jit__lambda_")
               for e in executes) == 1  # jax names it
    assert all(e["args"]["cycles"] > 0 for e in executes)
    callbacks = [e for e in spans if e["cat"] == "Callback"]
    assert len(callbacks) == 3
    # A callback runs inside its program's run, on the device's callback thread (which the run waits for, so that
    # Ctrl-C can end the wait), not on the worker that runs the program.
    for cb in callbacks:
        assert any(x["tid"] != cb["tid"] and x["ts"] <= cb["ts"] and cb["ts"] + cb["dur"] <= x["ts"] + x["dur"] + 1
                   for x in executes if x["name"] == "jit_step")
    # The front end's compile is inside jax's backend compile.
    front = [e for e in spans if e["name"] == "compile (front end)"]
    backend = [e for e in spans if e["name"] == "backend compile"]
    assert len(backend) >= len(front) >= 2
    assert all(any(b["ts"] <= f["ts"] and f["ts"] + f["dur"] <= b["ts"] + b["dur"] + 1000 for b in backend)
               for f in front)
    thread_names = [e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"]
    assert any(n.startswith("IPU device worker") for n in thread_names)
    # Host <-> device transfers: the inputs to each device, and the results read back (64 f32 each way).
    transfers = {(e["name"], e["args"]["bytes"]) for e in spans if e["cat"] == "Transfer"}
    assert {("host to ipu 0", 256), ("host to ipu 1", 256), ("ipu 0 to host", 256), ("ipu 1 to host", 256)} <= transfers


@needs_feeds
def test_streams_are_on_the_timeline(python, tmp_path):
    code = """
import jax, jax.numpy as jnp, numpy as np
from jax import lax
from jax._src.lib import xla_client
dev = jax.devices("ipu")[0]
def f():
    x, token = lax.infeed(lax.create_token(), shape=(jax.core.ShapedArray((4,), jnp.float32),))
    lax.outfeed(token, x[0] + 1)
    return x[0].sum()
dev.transfer_to_infeed((np.arange(4, dtype=np.float32),))
jax.jit(f, backend="ipu")()
shape = xla_client.shape_from_pyval((np.zeros(4, np.float32),)).with_major_to_minor_layout_if_absent()
print(dev.transfer_from_outfeed(shape)[0].tolist())
"""
    env = {"PVTI_OPTIONS": json.dumps({"enable": "true", "directory": str(tmp_path)})}
    result = python(code, env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[-2] == "[1.0, 2.0, 3.0, 4.0]"
    spans = [e for e in _trace(tmp_path)["traceEvents"] if e["ph"] == "X"]
    assert {e["name"] for e in spans if e["cat"] == "Stream"} == {"infeed", "outfeed"}


def test_nothing_written_when_off(python, tmp_path):
    result = python(f"import os; os.chdir({str(tmp_path)!r})\n" + PROGRAM, {"JAX_IPU_DEVICE_COUNT": "2"})
    assert result.returncode == 0, result.stderr
    assert os.listdir(tmp_path) == []


def test_bad_pvti_options_name_the_option(python):
    result = python("import jax; print(jax.devices('ipu'))", {"PVTI_OPTIONS": '{"enabled": "true"}'})
    assert result.returncode != 0
    assert "PVTI_OPTIONS: Unrecognised option 'enabled'" in result.stderr
    result = python("import jax; print(jax.devices('ipu'))", {"PVTI_OPTIONS": '{"enable": "sometimes"}'})
    assert result.returncode != 0
    assert "Invalid value 'sometimes' for option 'enable'" in result.stderr
