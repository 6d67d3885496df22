"""Steps over rows run a chunk of rows at a time (the executor's row chains), on the host threads when there are
several: a later step may write bytes an earlier, dead value held only where no other thread can still be reading
them. This file is in the ThreadSanitizer lane's CI tests (build_tools/sanitize.py), which reports such a race on
every run; without the sanitizer a wrong value shows only when the threads interleave badly."""

from __future__ import annotations

import numpy as np
import pytest

from jax_ipu import emulator as E


def rows_then_their_sums(rows: int, row: int) -> E.Program:
    """t = x * x; u = t + x (t's last read); s = the rows' sums of u; returns s * s. The arena places s, live after
    t, at t's first byte: a row's sum lies in the bytes of an earlier row of t, which the chunk of another host
    thread may still be reading."""
    p = E.Program()
    m = p.main
    x = m.param("f32", (rows, row))
    t = m.op("multiply", [x, x], "f32", (rows, row))
    u = m.op("add", [t, x], "f32", (rows, row))
    region = m.region()
    a, b = region.param("f32"), region.param("f32")
    region.ret(region.op("add", [a, b], "f32"))
    s = m.op("reduce", [u, m.constant(np.float32(0))], "f32", (rows,), {"dimensions": [1]}, regions=[region])
    m.ret(m.op("multiply", [s, s], "f32", (rows,)))
    return p


@pytest.mark.parametrize("rows,row", [(300_000, 3), (40_000, 16)])
def test_a_rows_sum_over_the_bytes_of_a_dead_value_waits_for_its_rows(rows, row):
    exe = E.compile(rows_then_their_sums(rows, row), options={"fusion": False})
    x = np.random.default_rng(rows).standard_normal((rows, row)).astype(np.float32)
    want = ((x.astype(np.float64) ** 2 + x).sum(axis=1)) ** 2
    first = exe.run(x)[0]
    np.testing.assert_allclose(first, want, rtol=1e-4, atol=1e-4)
    for _ in range(5):
        np.testing.assert_array_equal(exe.run(x)[0], first)
    assert exe.info["host"]["arena_bytes"] < 2 * 4 * rows * row + 4 * rows  # s shares bytes with a dead value
