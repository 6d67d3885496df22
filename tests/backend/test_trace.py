"""The per-step trace of a jitted function: which ops and source lines the cycles went to."""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_ipu
from jax_ipu import runtime

TRIPS = 5


def model(a, b):
    c = a @ b  # trace: matmul
    d = c + 1.0  # trace: add

    def body(i, x):
        return x * 0.5 - i  # trace: loop body

    return jax.lax.fori_loop(0, TRIPS, body, d)  # trace: loop


def line_of(marker: str) -> str:
    lines, first = inspect.getsourcelines(model)
    (offset,) = [i for i, text in enumerate(lines) if f"# trace: {marker}" in text]
    return f"{__file__.rsplit('/', 1)[-1]}:{first + offset}"


def ops(name: str) -> list:
    """The ops a step ran: its own name, or the members of a fused step, "fused(stablehlo.a, stablehlo.b)"."""
    if name.startswith("fused(") and name.endswith(")"):
        return [op.strip() for op in name[len("fused("):-1].split(",")]
    return [name]


def run_model():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(64, 32)).astype(np.float32)
    b = rng.normal(size=(32, 48)).astype(np.float32)
    out = jax.jit(model, backend="ipu")(a, b)
    expected = jax.jit(model, backend="cpu")(a, b)
    np.testing.assert_allclose(np.asarray(out), np.asarray(expected), rtol=1e-5, atol=1e-5)
    return jax_ipu.last_execution()


def test_steps_name_the_ops_and_lines_they_came_from():
    profile = run_model()
    steps = profile["steps"]
    at = {}
    for s in steps:
        for op in ops(s["name"]):
            at.setdefault((op, s["loc"]), []).append(s)
    (matmul,) = at[("stablehlo.dot_general", line_of("matmul"))]
    assert matmul["type"] == "Execute" and matmul["executions"] == 1 and matmul["compute_cycles"] > 0
    (add,) = at[("stablehlo.add", line_of("add"))]
    assert add["executions"] == 1
    # The loop body's ops ran once per iteration; its cond and the decision once more.
    body = [s for s in steps if s["loc"] == line_of("loop body")]
    assert {op for s in body for op in ops(s["name"])} >= {"stablehlo.multiply", "stablehlo.subtract"}
    assert all(s["executions"] == TRIPS for s in body if s["type"] == "Execute")
    (decision,) = [s for s in steps if s["type"] == "RepeatWhileTrue"]
    assert decision["executions"] == TRIPS + 1
    assert decision["name"] == "stablehlo.while"
    # Program order: the matmul's step comes before the add's, which comes before the loop's.
    assert matmul["id"] < add["id"] < decision["id"] < min(s["id"] for s in body)


def test_steps_add_up_to_the_totals():
    profile = run_model()
    steps = profile["steps"]
    assert len(steps) > 4
    for key in ("compute_cycles", "exchange_cycles", "sync_cycles", "supersteps"):
        assert sum(s[key] for s in steps) == profile[key], key
    assert sum(s["cycles"] for s in steps) == profile["total_cycles"] > 0


def test_format_trace_is_a_table_of_the_last_run():
    profile = run_model()
    text = runtime.format_trace()
    assert text.splitlines()[0].startswith(f"{profile['program']}: {profile['total_cycles']} cycles")
    assert any("stablehlo.dot_general" in line and line_of("matmul") in line for line in text.splitlines())
    assert len(runtime.format_trace(top=3).splitlines()) == 5


def test_a_switch_traces_the_branch_that_ran():
    def pick(i, x):
        return jax.lax.switch(i, [lambda v: v * 2.0, lambda v: jnp.sin(v)], x)

    x = np.linspace(-1, 1, 16, dtype=np.float32)
    f = jax.jit(pick, backend="ipu")
    for branch in (0, 1):
        np.testing.assert_allclose(np.asarray(f(branch, x)), np.asarray(pick(branch, x)), rtol=1e-6)
        steps = jax_ipu.last_execution()["steps"]
        assert [s["executions"] for s in steps if s["type"] == "Switch"] == [1]
        names = {op for s in steps for op in ops(s["name"])}
        assert ("stablehlo.sine" in names) == (branch == 1)
        assert ("stablehlo.multiply" in names) == (branch == 0)


def test_cost_analysis_lists_the_static_steps_and_they_add_up():
    a, b = np.ones((64, 32), np.float32), np.ones((32, 48), np.float32)
    cost = jax.jit(model, backend="ipu").lower(a, b).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    steps = {name: cycles for name, cycles in cost.items() if name.startswith("ipu_step ")}
    (matmul,) = [c for name, c in steps.items() if name.endswith(f" stablehlo.dot_general ({line_of('matmul')})")]
    assert matmul > 0
    assert any("stablehlo.multiply" in name and name.endswith(f" ({line_of('loop body')})") for name in steps), \
        sorted(steps)
    # One execution of every step (a loop body once) is the static estimate.
    assert sum(steps.values()) == pytest.approx(cost["ipu_estimated_cycles"], rel=1e-6)


def nested_loops(x, n):
    def body(i, v):
        v = jax.lax.cond(i % 3 == 0, lambda u: u * 2.0, lambda u: jnp.sin(u), v)  # trace: branches
        v = jax.lax.fori_loop(0, i, lambda j, u: u + 1.0, v)  # trace: inner loop
        return v * 0.5  # trace: outer body

    return jax.lax.fori_loop(0, n, body, x)


@pytest.mark.parametrize("trips", [0, 1, 4, 7])
def test_a_loops_steps_charge_each_execution_the_same(trips):
    """A loop charges its fixed-cost steps when it ends (Executor::runLoop): the trace must be what charging them
    step by step gives. Every step charges the same cycles per execution at any trip count; the outer body runs
    `trips` times and its decision `trips + 1`; the branches as often as they were taken; the inner loop's body
    sum(i) times."""
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    f = jax.jit(nested_loops, backend="ipu")
    np.testing.assert_allclose(np.asarray(f(x, trips)), np.asarray(jax.jit(nested_loops, backend="cpu")(x, trips)),
                               rtol=1e-5, atol=1e-5)
    profile = jax_ipu.last_execution()
    steps = profile["steps"]
    for key in ("compute_cycles", "exchange_cycles", "sync_cycles", "supersteps"):
        assert sum(s[key] for s in steps) == profile[key], key
    # One execution's charge per step, from a run of 7 trips (every step runs there).
    f(x, 7)
    once = {s["id"]: (s["cycles"] // s["executions"], s["supersteps"] // s["executions"])
            for s in jax_ipu.last_execution()["steps"]}
    for s in steps:
        assert (s["cycles"], s["supersteps"]) == (once[s["id"]][0] * s["executions"],
                                                  once[s["id"]][1] * s["executions"]), s
    by_line = {}
    for s in steps:
        by_line.setdefault(s["loc"], []).append(s)
    decisions = sorted((s for s in steps if s["type"] == "RepeatWhileTrue"), key=lambda s: s["id"])
    outer, inner = decisions if trips > 0 else (decisions[0], None)
    assert outer["executions"] == trips + 1
    if trips == 0:
        assert not by_line.get(line_of_nested("outer body"))
        return
    assert inner["executions"] == sum(i + 1 for i in range(trips))
    assert {s["executions"] for s in by_line[line_of_nested("outer body")] if s["type"] == "Execute"} == {trips}
    taken = [s for s in steps if s["type"] != "Switch" and s["loc"] == line_of_nested("branches")
             and any(op in ("stablehlo.multiply", "stablehlo.sine") for op in ops(s["name"]))]
    assert sum(s["executions"] for s in taken) == trips
    assert [s["executions"] for s in steps if s["type"] == "Switch"] == [trips]
    adds = [s for s in by_line[line_of_nested("inner loop")] if s["type"] == "Execute"
            and "stablehlo.add" in ops(s["name"]) and s["id"] > inner["id"]]
    inner_trips = sum(range(trips))  # the inner body's steps run only if it does (the trace lists steps that ran)
    assert bool(adds) == (inner_trips > 0) and all(s["executions"] == inner_trips for s in adds), adds
    assert profile["total_cycles"] == sum(s["cycles"] for s in steps)


def line_of_nested(marker: str) -> str:
    lines, first = inspect.getsourcelines(nested_loops)
    (offset,) = [i for i, text in enumerate(lines) if f"# trace: {marker}" in text]
    return f"{__file__.rsplit('/', 1)[-1]}:{first + offset}"
