"""A run's host memory follows liveness: the arena holds only the values live at once, values read inside loops
stay live across iterations, kernel scratch does not grow per op, and results can be written in place into a
donated input."""

from __future__ import annotations

import numpy as np
from emulator_helpers import assert_same

from jax_ipu import emulator as E

N = 1 << 20  # 4 MiB of f32
NBYTES = 4 * N


def chain_program(n_ops: int, size: int = N, scalar_operands: bool = True) -> E.Program:
    """x -> tanh -> * 1.01 -> + 0.5 -> exp(-.) ... as jax writes it: binary ops take a broadcast scalar constant."""
    p = E.Program()
    m = p.main
    v = m.param("f32", (size,))
    for i in range(n_ops):
        kind = ("tanh", "multiply", "add", "negexp")[i % 4] if scalar_operands else ("tanh", "negexp")[i % 2]
        if kind in ("multiply", "add"):
            c = m.constant(np.float32(1.01 if kind == "multiply" else 0.5))
            b = m.op("broadcast_in_dim", [c], "f32", (size,), {"broadcast_dimensions": []})
            v = m.op(kind, [v, b], "f32", (size,))
        elif kind == "negexp":
            v = m.op("exponential", [m.op("negate", [v], "f32", (size,))], "f32", (size,))
        else:
            v = m.op(kind, [v], "f32", (size,))
    m.ret(v)
    return p


def chain_reference(x: np.ndarray, n_ops: int, scalar_operands: bool = True) -> np.ndarray:
    x = x.copy()
    for i in range(n_ops):
        kind = ("tanh", "multiply", "add", "negexp")[i % 4] if scalar_operands else ("tanh", "negexp")[i % 2]
        if kind == "tanh":
            x = np.tanh(x)
        elif kind == "multiply":
            x = x * np.float32(1.01)
        elif kind == "add":
            x = x + np.float32(0.5)
        else:
            x = np.exp(-x)
    return x


def test_arena_of_a_200_op_chain_is_bounded_by_the_live_values():
    # unfused: one slot per op, as tested here; fused, the chain is one vertex
    exe = E.compile(chain_program(200), options={"fusion": False})
    host = exe.info["host"]
    # Every intermediate (200 ops + 100 broadcasts + 50 negates) has a slot ...
    assert host["intermediate_bytes"] >= 350 * NBYTES
    # ... but at most three are live at once: an op's operand, the broadcast scalar and its result.
    assert host["peak_live_bytes"] <= 3 * NBYTES
    assert host["peak_live_bytes"] <= host["arena_bytes"] <= 3 * NBYTES
    x = np.linspace(-3, 3, N, dtype=np.float32)
    np.testing.assert_allclose(exe.run(x)[0], chain_reference(x, 200), rtol=2e-6, atol=1e-6)


def test_a_unary_chain_needs_two_values():
    exe = E.compile(chain_program(100, scalar_operands=False))
    assert exe.info["host"]["arena_bytes"] == 2 * NBYTES
    x = np.linspace(-3, 3, N, dtype=np.float32)
    np.testing.assert_allclose(exe.run(x)[0], chain_reference(x, 100, scalar_operands=False), rtol=2e-6, atol=1e-6)


def loop_program(size: int = 1000) -> E.Program:
    """c = x * 3 before the loop; while i < n: acc = (acc + c) * 0.5 + i_f, with temporaries defined after c's last
    read in the body (they must not take c's bytes: c is read again by the next iteration)."""
    p = E.Program()
    m = p.main
    n = m.param("i32")
    x = m.param("f32", (size,))
    c = m.op("multiply", [x, m.splat(3, "f32", (size,))], "f32", (size,))
    zero = m.constant(np.int32(0))
    acc0 = m.op("negate", [x], "f32", (size,))
    cond = m.region()
    ci, _ca = cond.param("i32"), cond.param("f32", (size,))
    cond.ret(cond.op("compare", [ci, n], "bool", (), {"comparison_direction": "LT", "compare_type": "SIGNED"}))
    body = m.region()
    bi, ba = body.param("i32"), body.param("f32", (size,))
    s1 = body.op("add", [ba, c], "f32", (size,))
    half = body.op("broadcast_in_dim", [body.constant(np.float32(0.5))], "f32", (size,), {"broadcast_dimensions": []})
    s2 = body.op("multiply", [s1, half], "f32", (size,))
    fi = body.op("broadcast_in_dim", [body.op("convert", [bi], "f32")], "f32", (size,), {"broadcast_dimensions": []})
    s3 = body.op("add", [s2, fi], "f32", (size,))
    body.ret(body.op("add", [bi, body.constant(np.int32(1))], "i32"), s3)
    _i, acc = m.op_multi("while", [zero, acc0], [("i32", ()), ("f32", (size,))], regions=[cond, body])
    m.ret(m.op("add", [acc, x], "f32", (size,)))  # (c is not read after the loop)
    return p


def test_values_read_inside_a_loop_live_across_its_iterations(rng):
    x = rng.normal(size=1000).astype(np.float32)
    for tiles in (0, 7):
        exe = E.compile(loop_program(), num_tiles=tiles)
        for n in (0, 1, 4):
            c = x * np.float32(3)
            acc = -x
            for i in range(n):
                acc = (acc + c) * np.float32(0.5) + np.float32(i)
            assert_same(exe.run(np.int32(n), x)[0], acc + x)


def test_kernel_scratch_is_shared_by_all_ops(rng):
    """Dots whose lhs is transposed stage it in scratch: three of them use one op's scratch buffers, not three's."""
    p = E.Program()
    m = p.main
    b = m.param("f32", (32, 32))
    v = b
    for _ in range(3):
        v = m.op("dot_general", [v, b], "f32", (32, 32),
                 {"lhs_contracting_dimensions": [0], "rhs_contracting_dimensions": [0],
                  "lhs_batching_dimensions": [], "rhs_batching_dimensions": []})
    m.ret(v)
    exe = E.compile(p)
    assert 1 <= exe.info["host"]["scratch_buffers"] <= 3
    bv = rng.normal(size=(32, 32)).astype(np.float32)
    expected = bv
    for _ in range(3):
        expected = expected.T @ bv
    np.testing.assert_allclose(exe.run(bv)[0], expected, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(exe.run(bv)[0], expected, rtol=1e-4, atol=1e-3)  # reused buffers, same result


# ---- donation: an output buffer that is an input's


def test_result_written_in_place_into_its_donated_input(rng):
    p = E.Program()
    m = p.main
    x = m.param("f32", (1000,))
    y = m.op("add", [m.op("multiply", [x, m.splat(2, "f32", (1000,))], "f32", (1000,)), m.splat(1, "f32", (1000,))],
             "f32", (1000,))
    m.ret(y)
    exe = E.compile(p)
    x = rng.normal(size=1000).astype(np.float32)
    expected = x * np.float32(2) + np.float32(1)
    (out,) = exe.run(x, out=[x])
    assert out is x
    assert_same(x, expected)


def test_donated_input_read_after_a_result_is_computed(rng):
    """(x + 1, x * x) into (x's buffer, a new one): x is read again after the first result exists, so that result
    must not be written into x's buffer before the program is done with x."""
    p = E.Program()
    m = p.main
    x = m.param("f32", (1000,))
    r0 = m.op("add", [x, m.splat(1, "f32", (1000,))], "f32", (1000,))
    r1 = m.op("multiply", [x, x], "f32", (1000,))
    m.ret(r0, r1)
    exe = E.compile(p)
    x = rng.normal(size=1000).astype(np.float32)
    x0 = x.copy()
    other = np.empty_like(x)
    exe.run(x, out=[x, other])
    assert_same(x, x0 + np.float32(1))
    assert_same(other, x0 * x0)


def test_donated_input_read_inside_a_loop(rng):
    exe = E.compile(loop_program())
    x = rng.normal(size=1000).astype(np.float32)
    c = x * np.float32(3)
    acc = -x
    for i in range(3):
        acc = (acc + c) * np.float32(0.5) + np.float32(i)
    expected = acc + x
    exe.run(np.int32(3), x, out=[x])
    assert_same(x, expected)


def test_donated_inputs_swapped_and_returned_unchanged(rng):
    p = E.Program()
    m = p.main
    a, b = m.param("f32", (100,)), m.param("f32", (100,))
    m.ret(b, a, a)
    exe = E.compile(p)
    a = rng.normal(size=100).astype(np.float32)
    b = rng.normal(size=100).astype(np.float32)
    a0, b0 = a.copy(), b.copy()
    third = np.empty_like(a)
    exe.run(a, b, out=[a, b, third])  # (b, a, a) into (a's buffer, b's buffer, new)
    assert_same(a, b0)
    assert_same(b, a0)
    assert_same(third, a0)
    (same,) = E.compile(identity_program()).run(a, out=[a])
    assert_same(same, b0)


def identity_program() -> E.Program:
    p = E.Program()
    x = p.main.param("f32", (100,))
    p.main.ret(x)
    return p


def test_a_result_returned_twice_into_a_donated_input(rng):
    p = E.Program()
    m = p.main
    x = m.param("f32", (100,))
    y = m.op("negate", [m.op("abs", [x], "f32", (100,))], "f32", (100,))
    m.ret(y, y, x)
    exe = E.compile(p)
    x = rng.normal(size=100).astype(np.float32)
    x0 = x.copy()
    second, third = np.empty_like(x), np.empty_like(x)
    exe.run(x, out=[x, second, third])
    assert_same(x, -np.abs(x0))
    assert_same(second, -np.abs(x0))
    assert_same(third, x0)


def test_out_arrays_are_checked():
    exe = E.compile(identity_program())
    x = np.zeros(100, np.float32)
    for bad in ([np.zeros(100, np.int32)], [np.zeros(99, np.float32)], [], [np.zeros(200, np.float32)[::2]]):
        try:
            exe.run(x, out=bad)
        except E.EmulatorError as e:
            assert e.code == "INVALID_ARGUMENT"
        else:
            raise AssertionError(f"out={bad!r} was accepted")
