"""jax_ipu.tile: arrays placed on chosen tiles, lax primitives mapped per tile, the tiles' cycle counter. Values are
compared with the cpu backend on the same inputs; placement is checked through what it changes on the ipu (the
exchange a step needs, the memory of the chosen tile), and the counter against the run's own trace."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jax_ipu
from jax_ipu import tile

TILES = (3, 700, 12, 1471)  # any distinct tiles, in any order


def both(f, *args):
    """f jitted on the ipu and on cpu, as numpy."""
    ipu = jax.jit(f, backend="ipu")(*args)
    cpu = jax.jit(f, backend="cpu")(*args)
    return jax.tree_util.tree_map(np.asarray, ipu), jax.tree_util.tree_map(np.asarray, cpu)


ROWS = (len(TILES), 64)


def rows(seed, shape=ROWS, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def steps_named(name):
    return [s for s in jax_ipu.last_execution()["steps"] if s["name"] == name]


def test_elementwise_primitives_map_per_tile_as_cpu_computes_them():
    def f(x, y):
        a, b = tile.tile_put_sharded(x, TILES), tile.tile_put_sharded(y, TILES)
        c = tile.tile_map(lax.add_p, tile.tile_map(lax.mul_p, a, b), a)  # one fused multiply-add, as on cpu
        d = tile.tile_map(lax.exp_p, tile.tile_map(lax.neg_p, tile.tile_map(lax.abs_p, c)))
        e = tile.tile_map(lax.select_n_p, tile.tile_map(lax.gt_p, c, b), d, c)
        return tile.tile_map(lax.convert_element_type_p, e, new_dtype=np.dtype(np.float16), weak_type=False).array

    ipu, cpu = both(f, rows(1), rows(2))
    assert ipu.dtype == np.float16 and ipu.shape == (len(TILES), 64)
    np.testing.assert_array_equal(ipu, cpu)


def test_an_elementwise_op_on_placed_rows_moves_nothing_and_a_put_moves_them():
    """Where the rows are is what the exchange pays for: the multiply of rows already on their tiles has no exchange;
    moving them to other tiles is a Copy with exchange."""
    x = rows(3)

    @partial(jax.jit, backend="ipu")
    def f(x):
        a = tile.tile_put_sharded(x, TILES)
        b = tile.tile_map(lax.mul_p, a, a)
        return tile.tile_put_sharded(b, (10, 11, 12, 13)).array

    np.testing.assert_array_equal(np.asarray(f(x)), x * x)
    (multiply,) = steps_named("stablehlo.multiply")
    assert multiply["exchange_cycles"] == 0
    puts = [s for s in jax_ipu.last_execution()["steps"] if s["type"] == "Copy"]
    assert puts and all(s["exchange_cycles"] > 0 for s in puts)


def test_two_rows_too_big_for_one_tile_are_out_of_memory_on_that_tile():
    """Placement is real: a row of 240 KB fits a tile's 624 KB (with the exchange buffer it arrives in); tile 700
    given a row of each of two arrays does not (the same arrays mapped by the emulator fit)."""
    x = np.ones((2, 60_000), np.float32)
    jax.jit(lambda x: (x * 2, x + 1), backend="ipu")(x)
    jax.jit(lambda x: (tile.tile_put_sharded(x * 2, (5, 700)).array, tile.tile_put_sharded(x + 1, (6, 7)).array),
            backend="ipu")(x)
    with pytest.raises(Exception, match=r"Out of memory on tile 700: "):
        jax.jit(lambda x: (tile.tile_put_sharded(x * 2, (5, 700)).array,
                           tile.tile_put_sharded(x + 1, (700, 6)).array), backend="ipu")(x)


def test_replicated_arrays_and_reductions_per_tile_match_cpu():
    def f(x, w):
        a = tile.tile_put_sharded(x, TILES)
        v = tile.tile_put_replicated(w, TILES)
        s = tile.tile_map(lax.reduce_sum_p, tile.tile_map(lax.mul_p, a, v), axes=(0,))
        m = tile.tile_map(lax.reduce_max_p, a, axes=(0,))
        return s.array, m.array, s.tiles == TILES

    x, w = rows(4), rows(5, (64,))
    ipu, cpu = both(f, x, w)
    np.testing.assert_allclose(ipu[0], cpu[0], rtol=2e-6, atol=1e-5)
    np.testing.assert_array_equal(ipu[1], cpu[1])
    np.testing.assert_allclose(ipu[0], (x.astype(np.float64) * w).sum(1), rtol=1e-5, atol=1e-5)


def test_dot_general_per_tile_matches_cpu():
    a, b = rows(6, (len(TILES), 8, 16)), rows(7, (len(TILES), 16, 4))
    dims = (((1,), (0,)), ((), ()))

    def f(a, b):
        x, y = tile.tile_put_sharded(a, TILES), tile.tile_put_sharded(b, TILES)
        return tile.tile_map(lax.dot_general_p, x, y, dimension_numbers=dims, precision=None,
                             preferred_element_type=np.dtype(np.float32)).array

    ipu, cpu = both(f, a, b)
    np.testing.assert_allclose(ipu, cpu, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ipu, np.einsum("tij,tjk->tik", a, b), rtol=1e-4, atol=1e-4)


def test_gradients_flow_through_placed_arrays_as_on_cpu():
    """tile_put is linear (its transpose places the cotangent on the same tiles); the same program runs on both
    series (tile_map fills in the parameters the current series' primitives add)."""
    def loss(x):
        a = tile.tile_put_sharded(x, TILES)
        return jnp.sum(tile.tile_map(lax.sin_p, tile.tile_map(lax.mul_p, a, a)).array)

    x = rows(12)
    ipu, cpu = both(jax.grad(loss), x)
    np.testing.assert_allclose(ipu, cpu, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(ipu, 2 * x * np.cos(x * x), rtol=1e-5, atol=1e-5)


def test_cycle_counts_are_the_cycles_of_the_steps_between_them():
    x = rows(8, (len(TILES), 4096))

    @partial(jax.jit, backend="ipu")
    def f(x):
        a = tile.tile_put_sharded(x, TILES)
        a, start = tile.ipu_cycle_count(a)
        b = tile.tile_map(lax.exp_p, tile.tile_map(lax.sin_p, a))
        b, end = tile.ipu_cycle_count(b)
        return b.array, start.array, end.array

    out, start, end = (np.asarray(v) for v in f(x))
    np.testing.assert_allclose(out, np.exp(np.sin(x)), rtol=1e-5)
    assert start.dtype == np.uint32 and start.shape == (len(TILES), 2)
    start, end = tile.cycles(start), tile.cycles(end)
    assert len(set(start)) == 1 and len(set(end)) == 1  # the tiles are in step after a sync
    trace = jax_ipu.last_execution()["steps"]
    reads = [i for i, s in enumerate(trace) if s["name"] == "stablehlo.custom_call"]
    assert len(reads) == 2
    between = sum(s["cycles"] for s in trace[reads[0] + 1:reads[1]])
    before = sum(s["cycles"] for s in trace[:reads[0]])
    assert between > 0 and int(end[0] - start[0]) == between
    assert int(start[0]) == before


def test_cycle_count_is_refused_off_the_ipu():
    with pytest.raises(NotImplementedError, match="runs only on the ipu backend"):
        jax.jit(lambda x: tile.ipu_cycle_count(tile.tile_put_sharded(x, (0,)))[1].array, backend="cpu")(
            np.ones((1, 2), np.float32))


def test_tile_sharded_arrays_pass_through_jit_and_slice_by_tile():
    x = rows(9)
    placed = jax.jit(lambda x: tile.tile_put_sharded(x, TILES), backend="ipu")(x)
    assert isinstance(placed, tile.TileShardedArray) and placed.tiles == TILES and placed.tile_shape == (64,)
    np.testing.assert_array_equal(np.asarray(placed), x)
    assert placed[1:3].tiles == TILES[1:3]
    np.testing.assert_array_equal(np.asarray(placed[2]), x[2])
    doubled = jax.jit(lambda t: tile.tile_map(lax.add_p, t, t), backend="ipu")(placed)
    assert doubled.tiles == TILES
    np.testing.assert_array_equal(np.asarray(doubled), x + x)


@pytest.mark.parametrize("call, error, message", [
    (lambda x: tile.tile_put_sharded(x, (0, 1, 1, 2)), ValueError, r"tile 1 is named twice"),
    (lambda x: tile.tile_put_sharded(x, (0, 1)), ValueError, r"one row per tile: 2 tiles, but the array's shape is"),
    (lambda x: tile.tile_put_sharded(x, (0, -1, 2, 3)), ValueError, r"tile -1 is negative"),
    (lambda x: tile.tile_map(lax.add_p, tile.tile_put_sharded(x, TILES), x), TypeError,
     r"operand 1 is a .*not a TileShardedArray"),
    (lambda x: tile.tile_map(lax.add_p, tile.tile_put_sharded(x, TILES), tile.tile_put_sharded(x, (0, 1, 2, 3))),
     ValueError, r"operand 1 is on tiles \(0, 1, 2, 3\), operand 0 on \(3, 700, 12, 1471\)"),
    (lambda x: tile.tile_map(lax.sort_p, tile.tile_put_sharded(x, TILES)), NotImplementedError,
     r"does not map sort per tile"),
])
def test_bad_tile_programs_are_refused_by_name(call, error, message):
    with pytest.raises(error, match=message):
        jax.jit(call, backend="ipu")(rows(10))


def test_a_tile_beyond_the_ipu_is_refused_naming_it():
    with pytest.raises(Exception, match=r"tile 1472 is out of range: the IPU has 1472 tiles \(0 to 1471\)"):
        jax.jit(lambda x: tile.tile_put_sharded(x, (0, 1, 2, 1472)).array, backend="ipu")(rows(11))


def test_cycle_counts_in_a_loop_see_each_iteration():
    """A loop around a cycle count charges its steps as they run (a loop without one charges them when it ends):
    each trip's count is the last one's plus one trip's cycles."""
    x = rows(9, (len(TILES), 64))

    @partial(jax.jit, backend="ipu")
    def f(x):
        def body(i, carry):
            a, counts = carry
            a, count = tile.ipu_cycle_count(a)
            a = tile.tile_map(lax.sin_p, a)
            return a, counts.at[i].set(count.array[0])

        a = tile.tile_put_sharded(x, TILES)
        return jax.lax.fori_loop(0, 4, body, (a, jnp.zeros((4, 2), jnp.uint32)))[1]

    counts = tile.cycles(np.asarray(f(x)))
    steps = np.diff(counts)
    assert counts[0] > 0 and len(set(steps.tolist())) == 1 and steps[0] > 0, counts


def test_the_tile_api_works_as_the_first_thing_a_program_runs(tmp_path):
    """A fresh process whose first jax call is a tile program on the default backend (as TessellateIPU's notebooks
    are written): the tile primitives' ipu lowerings are registered before jax has created any backend (the
    current series registers plugins' platforms only then)."""
    import os
    import subprocess
    import sys

    script = tmp_path / "first.py"
    script.write_text(
        "import jax, numpy as np\n"
        "from jax import lax\n"
        "from jax_ipu import tile\n"
        "def f(x):\n"
        "    x = tile.tile_put_sharded(x, (0, 5))\n"
        "    return tile.tile_map(lax.mul_p, x, x).array\n"
        "x = np.arange(8, dtype=np.float32).reshape(2, 4)\n"
        "out = jax.jit(f)(x)\n"
        "assert out.devices().pop().platform == 'ipu', out.devices()\n"
        "np.testing.assert_array_equal(np.asarray(out), x * x)\n"
        "print('ok')\n")
    env = dict(os.environ, JAX_PLATFORMS="ipu")
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]
