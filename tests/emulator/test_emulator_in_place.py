"""Ops that update their operand in place on the host (a scatter whose operand dies at the scatter, as Poplar's
multiUpdateAdd updates in place) must give the same results whether or not they qualify, and must not change the
cycle estimates; tile memory counts a result computed in place at its operand's last read once, as Graphcore's XLA
backend lays such ops out; and the f16 conversions (inline, F16C where the host has it) must round exactly as numpy
does."""

from __future__ import annotations

import numpy as np
import pytest
from emulator_helpers import assert_same

from jax_ipu import emulator as E

ROWS, DIM, UPD = 300, 16, 64
NBYTES = ROWS * DIM * 4


def scatter_add_program(read_operand_after: bool, donated: bool = False) -> E.Program:
    """y = x * 2 (or x itself when `donated`); z = scatter-add of upd into rows idx of y; returns z (and y's sum
    when `read_operand_after`: y must then keep its own storage)."""
    p = E.Program()
    m = p.main
    x = m.param("f32", (ROWS, DIM))
    idx = m.param("i32", (UPD, 1))
    upd = m.param("f32", (UPD, DIM))
    y = x if donated else m.op("multiply", [x, m.splat(2, "f32", (ROWS, DIM))], "f32", (ROWS, DIM))
    region = m.region()
    a, b = region.param("f32"), region.param("f32")
    region.ret(region.op("add", [a, b], "f32"))
    attrs = {"update_window_dims": [1], "inserted_window_dims": [0], "scatter_dims_to_operand_dims": [0],
             "index_vector_dim": 1, "computation": "add"}
    z = m.op("scatter", [y, idx, upd], "f32", (ROWS, DIM), attrs, regions=[region])
    if read_operand_after:
        zero = m.constant(np.float32(0))
        region = m.region()
        a, b = region.param("f32"), region.param("f32")
        region.ret(region.op("add", [a, b], "f32"))
        total = m.op("reduce", [y, zero], "f32", (), {"dimensions": [0, 1]}, regions=[region])
        m.ret(z, total)
    else:
        m.ret(z)
    return p


def inputs(seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(ROWS, DIM)).astype(np.float32)
    idx = rng.integers(0, ROWS, size=(UPD, 1)).astype(np.int32)
    idx[:8] = 5  # repeated rows accumulate in update order
    upd = rng.normal(size=(UPD, DIM)).astype(np.float32)
    return x, idx, upd


def reference(y: np.ndarray, idx: np.ndarray, upd: np.ndarray) -> np.ndarray:
    z = y.copy()
    for k in range(UPD):
        z[idx[k, 0]] += upd[k]
    return z


def test_scatter_whose_operand_dies_there_updates_it_in_place():
    x, idx, upd = inputs()
    exe = E.compile(scatter_add_program(read_operand_after=False))
    assert_same(exe.run(x, idx, upd)[0], reference(x * 2, idx, upd))
    # The operand and the result share one block of the host arena (the result is computed in its output).
    assert exe.info["host"]["arena_bytes"] == NBYTES


def test_scatter_whose_operand_is_read_afterwards_keeps_it():
    x, idx, upd = inputs(1)
    exe = E.compile(scatter_add_program(read_operand_after=True))
    z, total = exe.run(x, idx, upd)
    assert_same(z, reference(x * 2, idx, upd))
    np.testing.assert_allclose(total, (x * 2).sum(dtype=np.float64), rtol=1e-5)
    assert exe.info["host"]["arena_bytes"] >= 2 * NBYTES


def test_in_place_changes_no_estimate():
    # The same scatter with and without a later read of its operand: the scatter's own step costs the same.
    steps = []
    for read_after in (False, True):
        info = E.compile(scatter_add_program(read_after)).info
        steps.append([s for s in info["steps"] if s["name"].startswith("stablehlo.scatter")
                      or "scatter" in s["name"]][0])
    assert steps[0]["cycles"] == steps[1]["cycles"] > 0


N = 4096  # f32 elements: 16 KiB, on one tile
BLOCK = 4 * N


def chain_program(how: str) -> E.Program:
    """x = a + b; y from x as `how` says; returns y - b (and x's sum where x is read after y)."""
    p = E.Program()
    m = p.main
    a, b = m.param("f32", (N,)), m.param("f32", (N,))
    x = m.op("add", [a, b], "f32", (N,))
    if how == "select":
        y = m.op("select", [m.param("bool", (N,)), x, b], "f32", (N,))
    elif how == "dynamic_update_slice":
        y = m.op("dynamic_update_slice", [x, m.param("f32", (16,)), m.param("i32")], "f32", (N,))
    else:
        y = m.op("multiply", {"x*b": [x, b], "x*x": [x, x], "b*x": [b, x], "x*b, x read after": [x, b]}[how],
                 "f32", (N,))
    z = m.op("subtract", [y, b], "f32", (N,))
    if how == "x*b, x read after":
        zero = m.constant(np.float32(0))
        region = m.region()
        r0, r1 = region.param("f32"), region.param("f32")
        region.ret(region.op("add", [r0, r1], "f32"))
        m.ret(z, m.op("reduce", [x, zero], "f32", (), {"dimensions": [0]}, regions=[region]))
    else:
        m.ret(z)
    return p


# The parameters a and b and the result are live throughout (3 blocks, plus a predicate's or an update's bytes);
# x is written at the first step. Computed in place, y takes x's bytes: 4 blocks at the peak; otherwise 5.
@pytest.mark.parametrize("how,in_place", [
    ("x*b", True),                     # an elementwise op in place on its first operand
    ("dynamic_update_slice", True),    # the update written into the operand (Poplar's dynamicUpdate)
    ("x*x", False),                    # the operand read twice
    ("b*x", False),                    # x is not the first operand
    ("select", False),                 # select is not computed in place
    ("x*b, x read after", False),      # not x's last read
])
def test_a_result_computed_in_place_takes_its_operands_tile_memory(how, in_place):
    exe = E.compile(chain_program(how), num_tiles=1, options={"fusion": False})
    worst = exe.info["memory"]["worst_bytes"]
    blocks = 4 if in_place else 5
    assert blocks * BLOCK <= worst < blocks * BLOCK + 8192, (worst, blocks)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32)
    x = a + b
    if how == "select":
        pred = rng.standard_normal(N) > 0
        assert_same(exe.run(a, b, pred)[0], np.where(pred, x, b) - b)
    elif how == "dynamic_update_slice":
        upd = np.arange(16, dtype=np.float32)
        y = x.copy()
        y[32:48] = upd
        assert_same(exe.run(a, b, upd, np.int32(32))[0], y - b)
    else:
        want = {"x*b": x * b, "x*x": x * x, "b*x": b * x, "x*b, x read after": x * b}[how] - b
        assert_same(exe.run(a, b)[0], want)


@pytest.mark.parametrize("alias", [True, False])
def test_scatter_into_a_donated_input(alias):
    x, idx, upd = inputs(2)
    exe = E.compile(scatter_add_program(read_operand_after=False, donated=True))
    want = reference(x, idx, upd)
    if alias:  # the output buffer is the input's (donation): updated in place
        buf = x.copy()
        exe.run(buf, idx, upd, out=[buf])
        assert_same(buf, want)
    else:
        assert_same(exe.run(x, idx, upd)[0], want)
        assert_same(x, inputs(2)[0])  # the input is untouched


def test_donated_input_read_after_the_scatter_is_not_overwritten():
    x, idx, upd = inputs(3)
    exe = E.compile(scatter_add_program(read_operand_after=True, donated=True))
    buf = x.copy()
    total = np.zeros((), np.float32)
    exe.run(buf, idx, upd, out=[buf, total])
    assert_same(buf, reference(x, idx, upd))
    np.testing.assert_allclose(total, x.sum(dtype=np.float64), rtol=1e-5)


def test_half_to_float_every_bit_pattern():
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    p = E.Program()
    a = p.main.param("f16", bits.shape)
    p.main.ret(p.main.op("convert", [a], "f32", bits.shape))
    got = E.compile(p).run(bits.view(np.float16))[0]
    want = bits.view(np.float16).astype(np.float32).view(np.uint32)
    # numpy keeps a signalling NaN signalling; XLA:CPU converts with F16C's vcvtph2ps, which quiets it (sets the
    # quiet bit, the payload kept), and so does the emulator (conformance/test_dtypes.py checks that against cpu)
    nan = (want & 0x7F800000) == 0x7F800000
    want = np.where(nan & ((want & 0x007FFFFF) != 0), want | 0x00400000, want)
    assert_same(got.view(np.uint32), want)


def float_samples() -> np.ndarray:
    """Every half value, the midpoints between neighbours and one ulp either side (ties round to even), the
    overflow edge, f32 subnormals, and random bit patterns; both signs, no NaNs."""
    h = np.arange(0x7c00, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float64)
    mids = (h[:-1] + h[1:]) / 2
    near = np.concatenate([mids, h, [65504.0, 65519.99, 65520.0, 1e6, np.inf, 1e-40, 2.0 ** -25, 2.0 ** -26]])
    f = near.astype(np.float32)
    f = np.concatenate([f, np.nextafter(f, np.float32(np.inf)), np.nextafter(f, np.float32(0))])
    rnd = np.random.default_rng(0).integers(0, 0x7f800000, size=200_000, dtype=np.uint32).view(np.float32)
    f = np.concatenate([f, rnd])
    return np.concatenate([f, -f]).astype(np.float32)


def test_float_to_half_rounds_as_numpy():
    f = float_samples()
    p = E.Program()
    a = p.main.param("f32", f.shape)
    p.main.ret(p.main.op("convert", [a], "f16", f.shape))
    with np.errstate(over="ignore"):  # values past 65504 round to infinity, as intended
        want = f.astype(np.float16)
    assert_same(E.compile(p).run(f)[0].view(np.uint16), want.view(np.uint16))


def test_f16_matmul_rounds_its_f32_sums_as_numpy():
    # [n, 2] @ [2, 2] of halves: the f32 accumulator holds a0*b0 + a1*b1 (each product exact, one rounding) and is
    # rounded once to f16 by the vector conversion, over every magnitude from subnormal to overflow.
    rng = np.random.default_rng(4)
    n = 1 << 14
    a = (rng.normal(size=(n, 2)) * np.exp2(rng.integers(-14, 9, size=(n, 1)))).astype(np.float16)
    b = np.array([[1.5, -0.75], [3.25, 2.0 ** -10]], np.float16)
    p = E.Program()
    pa, pb = p.main.param("f16", a.shape), p.main.param("f16", b.shape)
    p.main.ret(p.main.op("dot_general", [pa, pb], "f16", (n, 2), {
        "lhs_batching_dimensions": [], "rhs_batching_dimensions": [],
        "lhs_contracting_dimensions": [1], "rhs_contracting_dimensions": [0]}))
    got = E.compile(p).run(a, b)[0]
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    want = (a32[:, :1] * b32[:1, :] + a32[:, 1:] * b32[1:, :]).astype(np.float16)
    assert_same(got.view(np.uint16), want.view(np.uint16))
