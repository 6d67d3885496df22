"""Tokens, host streams (infeed/outfeed as StreamCopy) and host callbacks (HostCall) in the emulator.

``jax_ipu.emulator`` runs programs without a host, so these tests check what needs none: tokens flowing through
control flow, the errors of host steps run without a host, the custom call targets, and the host-link costs. The
host side is tested end to end through jax in tests/backend/test_infeed_outfeed.py and test_callbacks.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from jax_ipu import emulator as E


def compile_only_infeed(shape, dtype="f32", num_tiles=0):
    p = E.Program()
    m = p.main
    token = m.op("create_token", [], "token")
    data, _ = m.op_multi("infeed", [token], [(dtype, shape), ("token", ())], {"infeed_config": ""}, loc="feed.py:7")
    m.ret(data)
    return E.compile(p, num_tiles=num_tiles)


def test_tokens_flow_through_while_case_and_call():
    """A token carried by a loop, chosen by a case and passed through a call: never computed on, results exact."""
    p = E.Program()
    callee = p.function("pass_token")
    ct, cx = callee.param("token"), callee.param("f32", (4,))
    callee.ret(callee.op("after_all", [ct], "token"), callee.op("negate", [cx], "f32", (4,)))
    m = p.main
    n, x = m.param("i32"), m.param("f32", (4,))
    t0 = m.op("after_all", [m.op("create_token", [], "token"), m.op("create_token", [], "token")], "token")
    cond = m.region()
    ci, _ct, _cx = cond.param("i32"), cond.param("token"), cond.param("f32", (4,))
    cond.ret(cond.op("compare", [ci, n], "bool", (), {"comparison_direction": "LT", "compare_type": "SIGNED"}))
    body = m.region()
    bi, bt, bx = body.param("i32"), body.param("token"), body.param("f32", (4,))
    bt2, bx2 = body.op_multi("call", [bt, bx], [("token", ()), ("f32", (4,))], {"callee": "pass_token"})
    body.ret(body.op("add", [bi, body.constant(np.int32(1))], "i32"), bt2,
             body.op("add", [bx2, body.splat(1, "f32", (4,))], "f32", (4,)))
    i, t, y = m.op_multi("while", [m.constant(np.int32(0)), t0, x], [("i32", ()), ("token", ()), ("f32", (4,))],
                         regions=[cond, body])
    branches = []
    for k in range(2):
        b = m.region()
        b.ret(b.op("after_all", [t], "token"), b.op("multiply", [y, b.splat(k + 2, "f32", (4,))], "f32", (4,)))
        branches.append(b)
    _t, z = m.op_multi("case", [m.constant(np.int32(1))], [("token", ()), ("f32", (4,))], regions=branches)
    m.ret(i, z)
    exe = E.compile(p, num_tiles=4)
    x0 = np.array([1.0, -2.0, 0.5, 3.0], np.float32)
    for trips in (0, 3):
        expected = x0.copy()
        for _ in range(trips):
            expected = -expected + np.float32(1)
        count, out = exe.run(np.int32(trips), x0)
        assert count == trips
        np.testing.assert_array_equal(out, expected * np.float32(3))


@pytest.mark.parametrize("op", ["infeed", "outfeed", "callback"])
def test_host_steps_without_a_host_fail_naming_the_op(op):
    p = E.Program()
    m = p.main
    x = m.param("f32", (3,))
    token = m.op("create_token", [], "token")
    if op == "infeed":
        y, _ = m.op_multi("infeed", [token], [("f32", (3,)), ("token", ())], loc="model.py:12")
        m.ret(m.op("add", [x, y], "f32", (3,)))
        name = "stablehlo.infeed"
    elif op == "outfeed":
        m.op("outfeed", [x, token], "token", loc="model.py:12")
        m.ret(x)
        name = "stablehlo.outfeed"
    else:
        y = m.op("custom_call", [x], "f32", (3,), {"call_target_name": "jax_ipu_host_callback",
                                                   "backend_config": "7", "has_side_effect": True}, loc="model.py:12")
        m.ret(y)
        name = "stablehlo.custom_call"
    exe = E.compile(p)
    with pytest.raises(E.EmulatorError, match=name + r" \(at model.py:12\) needs the host") as info:
        exe.run(np.zeros(3, np.float32))
    assert info.value.code == "INVALID_ARGUMENT"
    assert "no host interface" in info.value.message


def test_other_custom_call_targets_are_unimplemented_by_name():
    p = E.Program()
    x = p.main.param("f32", (3,))
    p.main.ret(p.main.op("custom_call", [x], "f32", (3,), {"call_target_name": "Sharding", "backend_config": ""}))
    with pytest.raises(E.EmulatorError, match=r"stablehlo.custom_call\(tensor<3xf32>\) -> tensor<3xf32> on the IPU: "
                                              r"the emulator does not implement the custom call target 'Sharding'"):
        E.compile(p)


def test_host_callback_id_must_be_an_integer():
    p = E.Program()
    x = p.main.param("f32", (3,))
    p.main.ret(p.main.op("custom_call", [x], "f32", (3,), {"call_target_name": "jax_ipu_host_callback",
                                                             "backend_config": "abc"}))
    with pytest.raises(E.EmulatorError, match="backend_config must be the host callback's id"):
        E.compile(p)


def test_malformed_host_io_ops():
    p = E.Program()
    x = p.main.param("f32", (3,))
    p.main.op("outfeed", [x], "token")  # no token operand
    p.main.ret(x)
    with pytest.raises(E.EmulatorError, match="the last operand must be a token"):
        E.compile(p)
    p = E.Program()
    p.main.op("after_all", [p.main.param("f32", (3,))], "token")
    p.main.ret()
    with pytest.raises(E.EmulatorError, match="operands must be tokens"):
        E.compile(p)


def test_tokens_are_not_computed_on():
    p = E.Program()
    t = p.main.op("create_token", [], "token")
    p.main.op("add", [t, t], "token")
    p.main.ret()
    with pytest.raises(E.EmulatorError, match=r"stablehlo.add\(!stablehlo.token, !stablehlo.token\)") as info:
        E.compile(p)
    assert info.value.code == "UNIMPLEMENTED"


def test_streams_are_costed_over_the_host_link():
    """An infeed is one StreamCopy: a fixed latency plus its bytes at the host link's rate (PCIe Gen4 x16,
    64 GB/s, half each way: ipu-model.md) at the chip's clock."""
    mb = 1 << 20
    cycles = {n: compile_only_infeed((n * mb // 4,)).info["estimated_cycles"] for n in (1, 2, 3)}
    slope = cycles[2] - cycles[1]
    assert abs((cycles[3] - cycles[2]) - slope) <= 1  # linear in the bytes
    clock = E.device_info("ipu2")["tile_clock_frequency"]
    np.testing.assert_allclose(slope / mb, clock / 32e9, rtol=1e-3)
    assert cycles[1] > slope  # plus a fixed latency
    # Streams do not get cheaper with more tiles: the host link is the limit.
    assert compile_only_infeed((mb // 4,), num_tiles=16).info["estimated_cycles"] == cycles[1]


def test_host_callbacks_cost_a_round_trip_even_without_data():
    def callback_cycles(n):
        p = E.Program()
        x = p.main.param("f32", (n,))
        y = p.main.op("custom_call", [x] if n else [], "f32", (n,), {"call_target_name": "jax_ipu_host_callback",
                                                                     "backend_config": "1"})
        p.main.ret(y)
        return E.compile(p).info["estimated_cycles"]

    empty, small, large = callback_cycles(0), callback_cycles(4), callback_cycles(1 << 20)
    assert 0 < empty <= small < large
    # Both ways: the operands to the host and the results back.
    assert large - small == pytest.approx(2 * (compile_only_infeed((1 << 20,)).info["estimated_cycles"]
                                               - compile_only_infeed((4,)).info["estimated_cycles"]), abs=2)


def test_a_stream_larger_than_a_host_stream_buffer_is_refused():
    with pytest.raises(E.EmulatorError, match=r"Out of memory. Single stream of length 134217732 in stablehlo.infeed"
                                              r".* at most 134217728 bytes") as info:
        compile_only_infeed(((128 << 20) // 4 + 1,))
    assert info.value.code == "RESOURCE_EXHAUSTED"
