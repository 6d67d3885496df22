"""while / case / call, and running one executable from two threads at once."""

from __future__ import annotations

import threading

import numpy as np
from emulator_helpers import assert_same

from jax_ipu import emulator as E


def counting_loop(limit_is_param=True):
    """while i < n: (i, x) = (i + 1, x * 2 + 1); returns (i, x)."""
    p = E.Program()
    m = p.main
    n = m.param("i32")
    x = m.param("f32", (1000,))
    zero = m.constant(np.int32(0))
    cond = m.region()
    ci, _cx = cond.param("i32"), cond.param("f32", (1000,))
    cond.ret(cond.op("compare", [ci, n], "bool", (), {"comparison_direction": "LT", "compare_type": "SIGNED"}))
    body = m.region()
    bi, bx = body.param("i32"), body.param("f32", (1000,))
    one = body.constant(np.int32(1))
    two = body.splat(2, "f32", (1000,))
    ones = body.splat(1, "f32", (1000,))
    body.ret(body.op("add", [bi, one], "i32"),
             body.op("add", [body.op("multiply", [bx, two], "f32", (1000,)), ones], "f32", (1000,)))
    i_out, x_out = m.op_multi("while", [zero, x], [("i32", ()), ("f32", (1000,))], regions=[cond, body])
    m.ret(i_out, x_out)
    return p


def test_while_dynamic_trip_count(rng):
    exe = E.compile(counting_loop(), num_tiles=13)
    x = rng.normal(size=1000).astype(np.float32)
    for n in (0, 1, 5):
        i, out = exe.run(np.int32(n), x)
        expected = x.copy()
        for _ in range(n):
            expected = expected * np.float32(2) + np.float32(1)
        assert i == n
        assert_same(out, expected)
    exe.run(np.int32(0), x)
    p0 = exe.last_profile
    exe.run(np.int32(5), x)
    p5 = exe.last_profile
    assert p5["total_cycles"] > p0["total_cycles"] and p5["supersteps"] > p0["supersteps"]


def test_while_swaps_carried_values():
    p = E.Program()
    m = p.main
    a, b, k = m.param("f32", (3,)), m.param("f32", (3,)), m.param("i32")
    cond = m.region()
    _ca, _cb, ck = cond.param("f32", (3,)), cond.param("f32", (3,)), cond.param("i32")
    cond.ret(cond.op("compare", [ck, cond.constant(np.int32(0))], "bool", (), {"comparison_direction": "GT"}))
    body = m.region()
    ba, bb, bk = body.param("f32", (3,)), body.param("f32", (3,)), body.param("i32")
    body.ret(bb, ba, body.op("subtract", [bk, body.constant(np.int32(1))], "i32"))
    outs = m.op_multi("while", [a, b, k], [("f32", (3,)), ("f32", (3,)), ("i32", ())], regions=[cond, body])
    m.ret(*outs)
    exe = E.compile(p)
    x, y = np.array([1, 2, 3], np.float32), np.array([4, 5, 6], np.float32)
    r = exe.run(x, y, np.int32(3))
    assert_same(r[0], y)
    assert_same(r[1], x)
    r = exe.run(x, y, np.int32(2))
    assert_same(r[0], x)


def case_program():
    p = E.Program()
    m = p.main
    idx, x = m.param("i32"), m.param("f32", (4,))
    branches = []
    for op in ("negate", "exponential", "abs"):
        br = m.region()
        br.ret(br.op(op, [x], "f32", (4,)))
        branches.append(br)
    m.ret(m.op("case", [idx], "f32", (4,), regions=branches))
    return p


def test_case_out_of_range_runs_last_branch():
    exe = E.compile(case_program())
    x = np.array([-1, 0, 1, 2], np.float32)
    assert_same(exe.run(np.int32(0), x)[0], -x)
    np.testing.assert_allclose(exe.run(np.int32(1), x)[0], np.exp(x), rtol=1e-6)
    assert_same(exe.run(np.int32(2), x)[0], np.abs(x))
    assert_same(exe.run(np.int32(7), x)[0], np.abs(x))
    assert_same(exe.run(np.int32(-1), x)[0], np.abs(x))


def test_call_inlines_private_functions():
    p = E.Program()
    f = p.function("square_plus")
    fx, fy = f.param("f32", (5,)), f.param("f32", (5,))
    f.ret(f.op("add", [f.op("multiply", [fx, fx], "f32", (5,)), fy], "f32", (5,)), fx)
    m = p.main
    x, y = m.param("f32", (5,)), m.param("f32", (5,))
    r1, r2 = m.op_multi("call", [x, y], [("f32", (5,)), ("f32", (5,))], {"callee": "square_plus"}, mlir="func.call")
    r3, _ = m.op_multi("call", [r1, y], [("f32", (5,)), ("f32", (5,))], {"callee": "square_plus"}, mlir="func.call")
    m.ret(r3, r2)
    a = np.arange(5, dtype=np.float32)
    b = np.ones(5, np.float32)
    out = E.compile(p).run(a, b)
    assert_same(out[0], (a * a + b) ** 2 + b)
    assert_same(out[1], a)


def test_passthrough_and_aliases():
    p = E.Program()
    x = p.main.param("f32", (3,))
    p.main.ret(x, x)
    p.aliases = [[0, 0]]
    exe = E.compile(p)
    assert exe.info["aliases"] == [[0, 0]]
    a = np.array([1, 2, 3], np.float32)
    assert_same(exe.run(a)[0], a)


def test_concurrent_runs_share_one_executable(rng):
    exe = E.compile(counting_loop(), num_tiles=64)
    inputs = [(np.int32(k % 4), rng.normal(size=1000).astype(np.float32)) for k in range(16)]
    expected = [exe.run(*args) for args in inputs]
    failures = []

    def worker(offset):
        for k in range(offset, len(inputs), 2):
            for _ in range(5):
                got = exe.run(*inputs[k])
                if not (got[0] == expected[k][0] and np.array_equal(got[1], expected[k][1])):
                    failures.append(k)

    threads = [threading.Thread(target=worker, args=(o,)) for o in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
