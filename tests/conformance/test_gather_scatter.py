"""gather and scatter through jax's indexing idioms, ipu against cpu: integer-array indexing, take, take_along_axis,
.at[...] updates with duplicates, negative and out-of-range indices (jax's default modes), vmap. All exact."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _conformance import ALL_DTYPES, CURRENT_SERIES, check, random, run_both
from jax import lax

# In range, negative (wrapped by jax), duplicated, and out of range in both directions.
IDX = np.array([0, 3, -1, 3, 36, -37, 40, -50, 7, 3], np.int32)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_gather_indexing(dtype):
    def f(x, idx, i, idx2d, cols):
        return (x[::2], x[:, i], x[i], x[idx], x[idx, 1:4], x[:, cols], x[idx2d], x[idx, cols[: idx.shape[0]]],
                x[i, cols], x.at[idx].get(mode="clip"), x.at[idx].get(mode="fill", fill_value=1),
                x.at[idx].get(mode="fill"), x.reshape(-1)[idx2d])

    x = random(dtype, (37, 53), seed=1)
    cols = np.array([0, 52, -1, -53, 60, 5, 5, 9, 1, 2], np.int32)
    idx2d = np.array([[1, 2, 3], [-4, 40, 0]], np.int32)
    for i in (np.int32(5), np.int32(-2), np.int32(99)):
        check(f, x, IDX, i, idx2d, cols)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_take_and_take_along_axis(dtype):
    def f(x, idx, along, along0):
        return (jnp.take(x, idx, axis=0), jnp.take(x, idx, axis=1), jnp.take(x, idx),
                jnp.take(x, idx, axis=1, mode="clip"), jnp.take(x, idx, axis=0, mode="wrap"),
                jnp.take_along_axis(x, along, axis=1), jnp.take_along_axis(x, along0, axis=0))

    x = random(dtype, (37, 53), seed=2)
    rng = np.random.default_rng(0)
    along = rng.integers(-53, 53, size=(37, 6)).astype(np.int32)
    along0 = rng.integers(-37, 37, size=(4, 53)).astype(np.int32)
    check(f, x, IDX, along, along0)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
def test_one_hot_and_embedding(dtype):
    def f(table, labels):
        return jnp.eye(10, dtype=table.dtype)[labels], table[labels], jax.nn.one_hot(labels, 10, dtype=table.dtype)

    labels = np.array([[0, 9, 3], [3, 3, 1]], np.int32)
    check(f, random(dtype, (10, 16), seed=3), labels)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_vmapped_gathers(dtype):
    def f(x, rows, starts):
        return (jax.vmap(lambda r, j: r[j])(x, rows), jax.vmap(lambda r, j: r[j], in_axes=(None, 0))(x, rows),
                jax.vmap(lambda r, s: jax.lax.dynamic_slice(r, (s,), (4,)))(x, starts),
                jax.vmap(jnp.take, in_axes=(0, 0))(x, jnp.stack([rows, rows + 1], axis=1)))

    x = random(dtype, (6, 9), seed=4)
    rows = np.array([0, -1, 8, 20, -30, 2], np.int32)
    starts = np.array([0, 3, 5, 6, -2, 100], np.int32)
    check(f, x, rows, starts)


def scatter_idioms(x, idx, i, upd_rows, upd_vals):
    numeric = x.dtype != jnp.bool_
    out = [x.at[i].set(upd_rows[0]), x.at[idx].set(upd_rows), x.at[idx].max(upd_rows), x.at[idx].min(upd_rows),
           x.at[idx, 2].set(upd_vals), x.at[:, idx % 8].set(jnp.broadcast_to(upd_vals, (x.shape[0], idx.shape[0]))),
           x.at[idx].set(upd_rows, mode="clip"), x.at[idx, idx].max(upd_vals)]
    if numeric:
        out += [x.at[i].add(upd_rows[0]), x.at[idx].add(upd_rows), x.at[idx].mul(upd_rows),
                x.at[idx, 3].add(upd_vals), x.at[idx].add(upd_rows, mode="clip"),
                x.at[idx, idx].add(upd_vals), x.at[idx].add(upd_rows, mode="drop")]
    return tuple(out)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_scatter_updates(dtype):
    x = random(dtype, (37, 8), seed=5)
    upd_rows = random(dtype, (IDX.shape[0], 8), seed=6)
    upd_vals = random(dtype, (IDX.shape[0],), seed=7)
    if dtype in ("float32", "float16"):  # products stay finite
        x, upd_rows, upd_vals = (np.clip(v, -2, 2).astype(dtype) for v in (x, upd_rows, upd_vals))
    for i in (np.int32(3), np.int32(-1), np.int32(50)):
        check(scatter_idioms, x, IDX, i, upd_rows, upd_vals)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "uint32"])
def test_scatter_add_duplicates_order(dtype):
    def f(x, idx, upd):
        return x.at[idx].add(upd), jnp.zeros(5, x.dtype).at[idx % 5].add(upd), x.at[idx].set(upd)

    rng = np.random.default_rng(8)
    idx = rng.integers(-12, 14, size=200).astype(np.int32)
    if dtype in ("float32", "float16"):
        upd = (rng.standard_normal(200) * np.where(rng.random(200) < 0.2, 1e4, 1.0)).astype(dtype)
    else:
        upd = random(dtype, (200,), seed=9)
    check(f, random(dtype, (12,), seed=10).astype(dtype), idx, upd)


@pytest.mark.parametrize("donate", [False, True])
@pytest.mark.parametrize("op", ["add", "set"])
def test_scatter_of_many_rows_in_update_order(op, donate):
    """An embedding table's update: thousands of rows with repeated ids (added in update order, the last set wins),
    into a donated table (updated in place: one call over the whole table) or not (in chunks over host threads)."""
    def f(x, idx, upd):
        return getattr(x.at[idx], op)(upd)

    rng = np.random.default_rng(11)
    idx = rng.integers(0, 300, size=5000).astype(np.int32)  # 80,000 updated elements: worth the host threads
    upd = (rng.standard_normal((5000, 16)) * np.where(rng.random((5000, 1)) < 0.2, 1e4, 1.0)).astype(np.float32)
    check(f, random("float32", (300, 16), seed=12), idx, upd, **({"donate_argnums": (0,)} if donate else {}))


def test_scatter_float_specials():
    def f(x, idx, upd):
        return x.at[idx].max(upd), x.at[idx].min(upd), x.at[idx].add(upd), x.at[idx].mul(upd)

    x = np.array([0.0, -0.0, np.nan, 1.0, np.inf, -1.0], np.float32)
    idx = np.array([0, 1, 2, 3, 4, 5, 0, 1, 3], np.int32)
    upd = np.array([-0.0, 0.0, 1.0, np.nan, -np.inf, -0.0, np.nan, -1.0, 2.0], np.float32)
    check(f, x, idx, upd)
    check(f, x.astype(np.float16), idx, upd.astype(np.float16))


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_vmapped_scatter_and_segment_sum(dtype):
    def f(x, idx, upd, seg):
        return (jax.vmap(lambda r, j, u: r.at[j].add(u))(x, idx, upd),
                jax.vmap(lambda r, j: r.at[j].set(0), in_axes=(0, None))(x, idx[0]),
                jax.ops.segment_sum(upd.reshape(-1), seg, num_segments=5),
                jax.ops.segment_max(upd.reshape(-1), seg, num_segments=5))

    x = random(dtype, (4, 7), seed=11)
    idx = np.array([[0, 1, 1], [6, -1, 9], [2, 2, 2], [-8, 3, 4]], np.int32)
    upd = random(dtype, (4, 3), seed=12)
    seg = np.array([0, 0, 4, 1, 1, 1, 3, 9, -1, 2, 2, 0], np.int32)
    check(f, x, idx, upd, seg)


def test_scatter_unsigned_indices():
    def f(x, idx, upd):
        return x[idx], x.at[idx].add(upd), jnp.take(x, idx, mode="clip")

    idx = np.array([0, 4, 4, 2, 7, 2**31 + 3], np.uint32)
    check(f, random("float32", (5,), seed=13), idx, random("float32", (6,), seed=14))


def test_dimension_number_readers():
    from jax_ipu.compiler import attributes as A

    assert A.gather_dimension_numbers(
        "#stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>"
    ) == {"offset_dims": [1], "collapsed_slice_dims": [0], "start_index_map": [0], "index_vector_dim": 1}
    # the printer leaves out empty lists and index_vector_dim = 0
    assert A.scatter_dimension_numbers(
        "#stablehlo.scatter<update_window_dims = [0], scatter_dims_to_operand_dims = [0]>"
    ) == {"update_window_dims": [0], "inserted_window_dims": [], "scatter_dims_to_operand_dims": [0],
          "index_vector_dim": 0}
    bad_ones = ["#stablehlo.gather<offset_dims = [1], bogus = [2]>", "#stablehlo.dot<lhs_batching_dimensions = [0]>",
                "#stablehlo.gather<offset_dims = [1] junk>"]
    if not CURRENT_SERIES:  # batching dimensions are StableHLO of the current series (translate unbatches them)
        bad_ones.append("#stablehlo.gather<offset_dims = [1], operand_batching_dims = [0], index_vector_dim = 1>")
    for bad in bad_ones:
        with pytest.raises(ValueError):
            A.gather_dimension_numbers(bad)


# A scatter of one update window at constant indices into a splat of its combiner's identity is the update placed
# as it is: XLA unrolls its scatter loop of one trip, simplifies 0 + u to u and the dynamic-update-slice of a
# constant to a pad, so a -0 or denormal update survives on cpu (jnp.zeros(n).at[i].add(x), segment_sum of one id).
ONE_UPDATE_SCATTERS = {
    "at_add": lambda v: jnp.zeros(5).at[3].add(v[0]),
    "at_add_row": lambda v: jnp.zeros((3, 4)).at[1].add(v),
    "at_add_slice": lambda v: jnp.zeros(6).at[2:4].add(v[1:3]),
    "at_add_element_of_2d": lambda v: jnp.zeros((3, 4)).at[1, 2].add(v[3]),
    "at_add_column": lambda v: jnp.zeros((4, 3)).at[:, 1].add(v),
    "at_multiply": lambda v: jnp.ones(5).at[3].multiply(v[1]),
    "at_add_out_of_bounds": lambda v: jnp.zeros(5).at[7].add(v[1]),  # dropped
    "segment_sum_of_one_id": lambda v: jax.ops.segment_sum(v.reshape(1, 4), jnp.array([1], jnp.int32), num_segments=4),
    "at_add_of_an_argument": lambda v: v.at[2].add(v[3]),  # not into the identity: the add computes (flushes)
    # XLA sees constants as constants across a branch's edge (the ids are captured from outside the branch) and
    # sinks a constant that a while loop carries unchanged into its body (lax.scan carries what its body captures)
    "segment_sum_in_a_branch": lambda v: lax.cond(v[0] == 0, lambda v: jax.ops.segment_sum(
        v.reshape(1, 4), jnp.array([1], jnp.int32), num_segments=4), lambda v: jnp.zeros((4, 4)), v),
    "segment_sum_in_a_scan": lambda v: lax.scan(lambda c, _: (c, jax.ops.segment_sum(
        v.reshape(1, 4), jnp.array([1], jnp.int32), num_segments=4)), 0, None, length=2)[1],
}
if CURRENT_SERIES:  # jaxlib 0.4.13 computes max(-inf, u) there with maxps, reading a denormal as a zero
    ONE_UPDATE_SCATTERS["at_max"] = lambda v: jnp.full(5, -jnp.inf).at[3].max(v[1])


@pytest.mark.parametrize("name", sorted(ONE_UPDATE_SCATTERS))
def test_one_update_into_the_identity_is_placed_as_it_is(name):
    v = np.array([-0.0, 1e-40, -1e-40, -1e-40], np.float32)
    got, want = (np.asarray(r) for r in run_both(ONE_UPDATE_SCATTERS[name], v))
    assert (got.view(np.uint32) == want.view(np.uint32)).all(), (name, got.ravel(), want.ravel())
