"""Fused elementwise compute sets (JAX_IPU_FUSION): the same results bit for bit as op-by-op lowering, and the same
cycles and memory except for what the IPU itself saves (see lowerElementwiseGroup in elementwise.cc): one
supervisor launch (50 cycles) and one sync (100 cycles) per op fused away, no intermediate tensors, and no compute
set for a broadcast scalar."""

from __future__ import annotations

import numpy as np
import pytest

from jax_ipu import config
from jax_ipu import emulator as E

SUPERVISOR, SYNC = 50, 100  # cost_model.h: kSupervisorCycles, kSyncCycles


def chain(n: int, length: int, scalar: bool = False) -> E.Program:
    """x, y -> length ops alternating unary and binary ones, every intermediate used once."""
    p = E.Program()
    b = p.main
    x, y = b.param("f32", (n,)), b.param("f32", (n,))
    c = b.param("f32", ()) if scalar else None
    v = x
    ops = ["tanh", "multiply", "exponential", "add", "abs", "subtract", "logistic", "maximum", "log_plus_one"]
    for k in range(length):
        op = ops[k % len(ops)]
        if op in ("multiply", "add", "subtract", "maximum"):
            other = y
            if scalar and op == "add":
                other = b.op("broadcast_in_dim", [c], "f32", (n,), {"broadcast_dimensions": []})
            v = b.op(op, [v, other], "f32", (n,))
        else:
            v = b.op(op, [v], "f32", (n,))
    b.ret(v)
    return p


def compile_both(program: E.Program, **kw):
    off = E.compile(program, options={"fusion": False}, **kw)
    on = E.compile(program, options={"fusion": True}, **kw)
    return off, on


@pytest.mark.parametrize("length", [3, 6, 9])
def test_fused_chain_is_bit_identical_and_saves_one_launch_and_sync_per_fused_op(rng, length):
    n = 100_000
    x, y = rng.uniform(-2, 2, n).astype(np.float32), rng.uniform(-2, 2, n).astype(np.float32)
    off, on = compile_both(chain(n, length))
    r_off, r_on = off.run(x, y)[0], on.run(x, y)[0]
    np.testing.assert_array_equal(r_on.view(np.uint32), r_off.view(np.uint32))
    p_off, p_on = off.last_profile, on.last_profile
    assert p_off["supersteps"] == length and p_on["supersteps"] == 1
    assert p_on["exchange_cycles"] == p_off["exchange_cycles"]
    assert p_off["compute_cycles"] - p_on["compute_cycles"] == (length - 1) * SUPERVISOR
    assert p_off["sync_cycles"] - p_on["sync_cycles"] == (length - 1) * SYNC
    assert on.info["estimated_cycles"] == p_on["total_cycles"]
    # No intermediate tensors: the host arena holds only the result, tile memory only operands and result.
    assert on.info["host"]["intermediate_bytes"] < off.info["host"]["intermediate_bytes"]
    assert on.info["host"]["peak_live_bytes"] <= 4 * n
    assert on.info["memory"]["worst_bytes"] < off.info["memory"]["worst_bytes"]


def test_broadcast_scalar_is_a_view_of_the_fused_vertex(rng):
    n = 50_000
    x, y = rng.uniform(-2, 2, n).astype(np.float32), rng.uniform(-2, 2, n).astype(np.float32)
    c = np.float32(0.75)
    off, on = compile_both(chain(n, 6, scalar=True))
    r_off, r_on = off.run(x, y, c)[0], on.run(x, y, c)[0]
    np.testing.assert_array_equal(r_on.view(np.uint32), r_off.view(np.uint32))
    expected = np.abs(np.exp(np.tanh(x) * y) + c) - y
    np.testing.assert_allclose(r_on, expected, rtol=2e-6, atol=1e-6)
    assert off.last_profile["supersteps"] == 7 and on.last_profile["supersteps"] == 1
    assert on.last_profile["total_cycles"] < off.last_profile["total_cycles"]
    # The scalar's 4 bytes still reach every tile: as much exchange as the broadcast's own.
    assert on.last_profile["exchange_cycles"] <= off.last_profile["exchange_cycles"]


@pytest.mark.parametrize("return_t", [False, True])
def test_a_value_read_by_several_members_fuses_unless_read_outside(rng, return_t):
    n = 4096
    p = E.Program()
    x = p.main.param("f32", (n,))
    t = p.main.op("tanh", [x], "f32", (n,))
    e = p.main.op("exponential", [t], "f32", (n,))
    s = p.main.op("multiply", [e, t], "f32", (n,))  # t read by two members: a DAG
    results = [s, p.main.op("negate", [s], "f32", (n,))] + ([t] if return_t else [])
    p.main.ret(*results)
    off, on = compile_both(p)
    xv = rng.normal(size=n).astype(np.float32)
    got = on.run(xv)
    for a, b in zip(off.run(xv), got):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(got[0], np.exp(np.tanh(xv)) * np.tanh(xv), rtol=1e-5)
    # tanh, exp and multiply fused, negate alone (s is a result); t returned too: tanh alone, then exp + multiply.
    assert on.last_profile["supersteps"] == (3 if return_t else 2) and off.last_profile["supersteps"] == 4


def test_a_broadcast_read_by_several_groups_is_a_view_of_each(rng):
    n = 60_000
    p = E.Program()
    x, c = p.main.param("f32", (n,)), p.main.param("f32", ())
    b = p.main.op("broadcast_in_dim", [c], "f32", (n,), {"broadcast_dimensions": []})
    u = p.main.op("add", [x, b], "f32", (n,))
    v = p.main.op("multiply", [p.main.op("tanh", [x], "f32", (n,)), b], "f32", (n,))
    p.main.ret(u, v)  # two results: two groups, each reading b
    off, on = compile_both(p)
    xv, cv = rng.normal(size=n).astype(np.float32), np.float32(1.5)
    got = on.run(xv, cv)
    for a, w in zip(off.run(xv, cv), got):
        np.testing.assert_array_equal(a, w)
    np.testing.assert_array_equal(got[0], xv + cv)
    # off: broadcast, add, tanh, multiply; on: (add) and (tanh, multiply), each reading c, with no n-element broadcast
    assert off.last_profile["supersteps"] == 4 and on.last_profile["supersteps"] == 2
    assert on.info["host"]["peak_live_bytes"] <= 4 * (3 * n + 1)  # x and the two results
    assert on.info["memory"]["worst_bytes"] < off.info["memory"]["worst_bytes"]


def test_mixed_types_select_compare_convert_fuse(rng):
    n = 10_000
    p = E.Program()
    b = p.main
    x, y = b.param("f32", (n,)), b.param("f32", (n,))
    gt = b.op("compare", [x, y], "bool", (n,), {"comparison_direction": "GT"})
    s = b.op("select", [gt, x, y], "f32", (n,))
    h = b.op("convert", [s], "f16", (n,))
    h2 = b.op("negate", [h], "f16", (n,))
    b.ret(b.op("convert", [h2], "f32", (n,)))
    off, on = compile_both(p)
    xv, yv = rng.normal(size=n).astype(np.float32), rng.normal(size=n).astype(np.float32)
    r_off, r_on = off.run(xv, yv)[0], on.run(xv, yv)[0]
    np.testing.assert_array_equal(r_on, r_off)
    np.testing.assert_array_equal(r_on, -np.maximum(xv, yv).astype(np.float16).astype(np.float32))
    assert on.last_profile["supersteps"] == 1 and off.last_profile["supersteps"] == 5


def test_malformed_fusion_flag_is_an_error_naming_it():
    with pytest.raises(ValueError, match="JAX_IPU_FUSION=maybe: invalid boolean 'maybe'"):
        config.lowering_options({"JAX_IPU_FUSION": "maybe"})
    assert config.lowering_options({"JAX_IPU_FUSION": "off"})["fusion"] is False


@pytest.mark.parametrize("options, message", [
    ({"fusion": "maybe"}, "compile option 'fusion' must be true or false, not a string"),
    ({"fuse": True},
     "unknown compile option 'fuse' (known: fusion, exchange_per_element, allow_out_of_memory, emulate_64bit, "
     "available_memory_proportion, partials_type)"),
    ({"partials_type": "quarter"}, "compile option 'partials_type' (poplin's partialsType) must be \"half\" or "
                                   "\"float\", not \"quarter\""),
    ({"partials_type": 16}, "compile option 'partials_type' (poplin's partialsType) must be \"half\" or \"float\", "
                            "not a number"),
])
def test_malformed_compile_options_are_refused_by_name(options, message):
    with pytest.raises(E.EmulatorError) as e:
        E.compile(chain(16, 3), options=options)
    assert e.value.code == "INVALID_ARGUMENT" and message in e.value.message


def test_the_emulator_reads_no_flag_from_the_environment(monkeypatch):
    """The lowering takes its options as given (jax_ipu.config fills them for jax); JAX_IPU_FUSION set in the
    environment does not reach a compile through the C API."""
    monkeypatch.setenv("JAX_IPU_FUSION", "0")
    fused = E.compile(chain(16, 3))
    assert fused.info == E.compile(chain(16, 3), options={"fusion": True}).info
    assert fused.info != E.compile(chain(16, 3), options={"fusion": False}).info


@pytest.mark.parametrize("shape", [(37, 53), (300, 1000), (4, 1, 6)])
def test_row_and_column_broadcasts_fuse_as_views(rng, shape):
    """(x - broadcast(mean over the last axis)) * broadcast(gamma) + broadcast(beta): layer norm's shape."""
    p = E.Program()
    b = p.main
    rows, cols = shape[:-1], shape[-1:]
    x, m = b.param("f32", shape), b.param("f32", rows)
    g, beta = b.param("f32", cols), b.param("f32", ())
    last = len(shape) - 1
    mb = b.op("broadcast_in_dim", [m], "f32", shape, {"broadcast_dimensions": list(range(last))})
    gb = b.op("broadcast_in_dim", [g], "f32", shape, {"broadcast_dimensions": [last]})
    bb = b.op("broadcast_in_dim", [beta], "f32", shape, {"broadcast_dimensions": []})
    h = b.op("multiply", [b.op("subtract", [x, mb], "f32", shape), gb], "f32", shape)
    b.ret(b.op("add", [h, bb], "f32", shape))
    off, on = compile_both(p)
    xv, mv = rng.normal(size=shape).astype(np.float32), rng.normal(size=rows).astype(np.float32)
    gv, bv = rng.normal(size=cols).astype(np.float32), np.float32(0.5)
    r_off, r_on = off.run(xv, mv, gv, bv)[0], on.run(xv, mv, gv, bv)[0]
    # Fused, the multiply feeding the add is one fused multiply-add (as XLA:CPU's fused loops compute it): one
    # rounding instead of two, so the results are the exact product plus beta, rounded once.
    exact = ((xv - mv[..., None]).astype(np.float64) * gv + bv).astype(np.float32)
    np.testing.assert_array_equal(r_on, exact)
    np.testing.assert_array_equal(r_off, (xv - mv[..., None]) * gv + bv)
    assert off.last_profile["supersteps"] == 6 and on.last_profile["supersteps"] == 1
    assert on.last_profile["total_cycles"] < off.last_profile["total_cycles"]
    assert on.info["memory"]["worst_bytes"] <= off.info["memory"]["worst_bytes"]


def test_a_value_read_twice_by_one_op_still_fuses(rng):
    """(x - m)^2 as jnp.square writes it: multiply(d, d)."""
    n = 5000
    p = E.Program()
    x, m = p.main.param("f32", (n,)), p.main.param("f32", (n,))
    d = p.main.op("subtract", [x, m], "f32", (n,))
    p.main.ret(p.main.op("multiply", [d, d], "f32", (n,)))
    off, on = compile_both(p)
    xv, mv = rng.normal(size=n).astype(np.float32), rng.normal(size=n).astype(np.float32)
    np.testing.assert_array_equal(on.run(xv, mv)[0], off.run(xv, mv)[0])
    np.testing.assert_array_equal(on.run(xv, mv)[0], (xv - mv) * (xv - mv))
    assert on.last_profile["supersteps"] == 1 and off.last_profile["supersteps"] == 2
