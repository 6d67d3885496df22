"""The per-step trace: every step that runs is recorded with its op, source location, executions and cycles, and
the steps add up to the run's totals."""

from __future__ import annotations

import numpy as np
from emulator_helpers import assert_same

from jax_ipu import emulator as E
from jax_ipu import runtime

COUNTERS = ("compute_cycles", "exchange_cycles", "sync_cycles", "supersteps")


def assert_steps_add_up(profile: dict) -> None:
    for key in COUNTERS:
        assert sum(s[key] for s in profile["steps"]) == profile[key], key
    assert sum(s["cycles"] for s in profile["steps"]) == profile["total_cycles"]
    for s in profile["steps"]:
        assert s["cycles"] == s["compute_cycles"] + s["exchange_cycles"] + s["sync_cycles"]
        assert s["executions"] >= 1
    ids = [s["id"] for s in profile["steps"]]
    assert ids == sorted(set(ids))  # program order, each step once


def loop_program(size: int = 1000) -> E.Program:
    """y = x * 2 (model.py:3); while i < n: (i + 1, acc + y) (model.py:6, :7); return acc (model.py:5)."""
    p = E.Program()
    m = p.main
    n, x = m.param("i32"), m.param("f32", (size,))
    y = m.op("multiply", [x, m.splat(2, "f32", (size,))], "f32", (size,), loc="model.py:3")
    cond = m.region()
    ci, _ = cond.param("i32"), cond.param("f32", (size,))
    cond.ret(cond.op("compare", [ci, n], "bool", (), {"comparison_direction": "LT", "compare_type": "SIGNED"},
                     loc="model.py:6"))
    body = m.region()
    bi, bacc = body.param("i32"), body.param("f32", (size,))
    body.ret(body.op("add", [bi, body.constant(np.int32(1))], "i32", loc="model.py:6"),
             body.op("add", [bacc, y], "f32", (size,), loc="model.py:7"))
    _, acc = m.op_multi("while", [m.constant(np.int32(0)), x], [("i32", ()), ("f32", (size,))],
                        regions=[cond, body], loc="model.py:5")
    m.ret(acc)
    return p


def test_loop_steps_count_every_iteration(rng):
    exe = E.compile(loop_program(), num_tiles=16)
    x = rng.normal(size=1000).astype(np.float32)
    for trips in (0, 1, 6):
        expected = x.copy()
        for _ in range(trips):
            expected = expected + x * np.float32(2)
        assert_same(exe.run(np.int32(trips), x)[0], expected)
        profile = exe.last_profile
        assert_steps_add_up(profile)
        by_loc = {}
        for s in profile["steps"]:
            by_loc.setdefault((s["type"], s["name"], s["loc"]), []).append(s)
        (mul,) = by_loc[("Execute", "stablehlo.multiply", "model.py:3")]
        assert mul["executions"] == 1
        (compare,) = by_loc[("Execute", "stablehlo.compare", "model.py:6")]
        assert compare["executions"] == trips + 1
        (decision,) = by_loc[("RepeatWhileTrue", "stablehlo.while", "model.py:5")]
        assert decision["executions"] == trips + 1
        assert decision["supersteps"] == trips + 1 and decision["sync_cycles"] > 0
        (init,) = by_loc[("Copy", "while.init", "model.py:5")]
        assert init["executions"] == 1
        if trips == 0:  # the body never ran: none of its steps are in the trace
            assert ("Execute", "stablehlo.add", "model.py:7") not in by_loc
            continue
        (acc,) = by_loc[("Execute", "stablehlo.add", "model.py:7")]
        assert acc["executions"] == trips
        (update,) = by_loc[("Copy", "while.update", "model.py:5")]
        assert update["executions"] == trips
        # The body's step costs the same every iteration.
        static = {s["id"]: s for s in exe.info["steps"]}
        assert acc["cycles"] == trips * static[acc["id"]]["cycles"]
        assert acc["supersteps"] == trips * static[acc["id"]]["supersteps"]


def test_static_table_lists_every_step_once():
    exe = E.compile(loop_program())
    steps = exe.info["steps"]
    assert [s["id"] for s in steps] == list(range(len(steps)))
    assert [s["type"] for s in steps].count("RepeatWhileTrue") == 1
    names = [(s["name"], s["loc"]) for s in steps]
    assert names.count(("stablehlo.add", "model.py:7")) == 1
    # Static estimate: every step once, here with no Switch, so it is the sum of the table.
    assert exe.info["estimated_cycles"] == sum(s["cycles"] for s in steps)
    assert exe.info["static_supersteps"] == sum(s["supersteps"] for s in steps)


def test_switch_records_its_decision_and_the_branch_taken(rng):
    p = E.Program()
    m = p.main
    idx, x = m.param("i32"), m.param("f32", (64,))
    branches = []
    for op in ("negate", "exponential"):
        br = m.region()
        br.ret(br.op(op, [x], "f32", (64,), loc=f"branches.py:{10 if op == 'negate' else 20}"))
        branches.append(br)
    m.ret(m.op("case", [idx], "f32", (64,), regions=branches, loc="branches.py:5"))
    exe = E.compile(p)
    x = rng.normal(size=64).astype(np.float32)
    exe.run(np.int32(1), x)
    profile = exe.last_profile
    assert_steps_add_up(profile)
    kinds = [(s["type"], s["name"], s["loc"]) for s in profile["steps"]]
    assert ("Switch", "stablehlo.case", "branches.py:5") in kinds
    assert ("Execute", "stablehlo.exponential", "branches.py:20") in kinds
    assert all(loc != "branches.py:10" for _, _, loc in kinds)  # the branch not taken
    # The static table lists both branches.
    assert {"branches.py:10", "branches.py:20"} <= {s["loc"] for s in exe.info["steps"]}


def test_format_trace_prints_the_steps(rng):
    exe = E.compile(loop_program())
    exe.run(np.int32(3), rng.normal(size=1000).astype(np.float32))
    text = runtime.format_trace(exe.last_profile)
    lines = text.splitlines()
    assert str(exe.last_profile["total_cycles"]) in lines[0]
    assert len(lines) == 2 + len(exe.last_profile["steps"])
    assert any("stablehlo.add" in line and "model.py:7" in line for line in lines)
    top = runtime.format_trace(exe.last_profile, top=2).splitlines()
    assert len(top) == 4
