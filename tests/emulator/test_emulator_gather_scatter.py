"""gather and scatter in the emulator against numpy references of XLA's semantics: gather clamps each slice's start
into the operand, scatter skips update windows that do not fit and applies duplicates in index order."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from emulator_helpers import assert_same, dtype_name

from jax_ipu import emulator as E

NP = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "u32": np.uint32, "bool": np.bool_}


def values(name, shape, rng):
    if name == "bool":
        return rng.random(shape) < 0.5
    if name in ("f32", "f16"):
        return rng.uniform(-8, 8, size=shape).round(1).astype(NP[name])
    offset = 0 if name == "u32" else -50
    return (rng.integers(0, 100, size=shape) + offset).astype(NP[name])


def index_vectors(idx, ivd):
    """The indices with the index vector dimension last (a trailing 1 when ivd == rank)."""
    idx = np.asarray(idx).astype(np.int64)
    if ivd == idx.ndim:
        idx = idx[..., None]
    return np.moveaxis(idx, ivd, -1)


def ref_gather(x, idx, offset_dims, collapsed, start_index_map, ivd, slice_sizes):
    iv = index_vectors(idx, ivd)
    batch_shape = iv.shape[:-1]
    window = [d for d in range(x.ndim) if d not in collapsed]
    out_rank = len(batch_shape) + len(offset_dims)
    out_shape, b, w = [], iter(batch_shape), iter(window)
    for d in range(out_rank):
        out_shape.append(slice_sizes[next(w)] if d in offset_dims else next(b))
    out = np.zeros(out_shape, x.dtype)
    for o in np.ndindex(*out_shape):
        batch = tuple(o[d] for d in range(out_rank) if d not in offset_dims)
        start = [0] * x.ndim
        for k, dim in enumerate(start_index_map):
            start[dim] = min(max(int(iv[batch][k]), 0), x.shape[dim] - slice_sizes[dim])
        src = list(start)
        for d, dim in zip(offset_dims, window):
            src[dim] += o[d]
        out[o] = x[tuple(src)]
    return out


COMBINE = {
    "add": lambda a, b: a + b if a.dtype != np.bool_ else a | b,
    "multiply": lambda a, b: a * b if a.dtype != np.bool_ else a & b,
    "maximum": lambda a, b: np.maximum(a, b),
    "minimum": lambda a, b: np.minimum(a, b),
    "and": lambda a, b: a & b,
    "or": lambda a, b: a | b,
    "assign": lambda a, b: b,
    "subtract": lambda a, b: a - b,
}


def ref_scatter(x, idx, upd, window_dims, inserted, dims_map, ivd, combine):
    iv = index_vectors(idx, ivd)
    batch_shape = iv.shape[:-1]
    out = x.copy()
    window = [d for d in range(x.ndim) if d not in inserted]
    wsize = [1] * x.ndim
    for ud, dim in zip(window_dims, window):
        wsize[dim] = upd.shape[ud]
    scatter_dims = [d for d in range(upd.ndim) if d not in window_dims]
    f = COMBINE[combine]
    with np.errstate(over="ignore"):
        for batch in np.ndindex(*batch_shape):
            start = [0] * x.ndim
            for k, dim in enumerate(dims_map):
                start[dim] = int(iv[batch][k])
            if any(s < 0 or s > x.shape[d] - wsize[d] for d, s in enumerate(start)):
                continue  # XLA skips the whole window
            for win in np.ndindex(*[upd.shape[d] for d in window_dims]):
                u = [0] * upd.ndim
                for d, v in zip(scatter_dims, batch):
                    u[d] = v
                for d, v in zip(window_dims, win):
                    u[d] = v
                t = list(start)
                for dim, v in zip(window, win):
                    t[dim] += v
                out[tuple(t)] = f(out[tuple(t)], upd[tuple(u)])
    return out


def gather(x, idx, offset_dims, collapsed, start_index_map, ivd, slice_sizes, num_tiles=0):
    want = ref_gather(x, idx, offset_dims, collapsed, start_index_map, ivd, slice_sizes)
    attrs = {"offset_dims": offset_dims, "collapsed_slice_dims": collapsed, "start_index_map": start_index_map,
             "index_vector_dim": ivd, "slice_sizes": slice_sizes}
    p = E.Program()
    a, b = p.main.param(dtype_name(x), x.shape), p.main.param(dtype_name(idx), idx.shape)
    p.main.ret(p.main.op("gather", [a, b], dtype_name(x), want.shape, attrs))
    exe = E.compile(p, num_tiles=num_tiles)
    got = exe.run(x, idx)[0]
    return got, want, exe


def scatter_program(x, idx, upd, window_dims, inserted, dims_map, ivd, combine, body=None):
    name = dtype_name(x)
    p = E.Program()
    a, b, c = (p.main.param(dtype_name(v), v.shape) for v in (x, idx, upd))
    attrs = {"update_window_dims": window_dims, "inserted_window_dims": inserted,
             "scatter_dims_to_operand_dims": dims_map, "index_vector_dim": ivd}
    if combine is not None:
        attrs["computation"] = combine
    region = p.main.region()
    cur, new = region.param(name), region.param(name)
    if body == "subtract":
        region.ret(region.op("subtract", [cur, new], name))
    elif combine == "assign":
        region.ret(new)
    else:
        region.ret(region.op(combine, [cur, new], name))
    p.main.ret(p.main.op("scatter", [a, b, c], name, x.shape, attrs, regions=[region]))
    return p


def scatter(x, idx, upd, window_dims, inserted, dims_map, ivd, combine, num_tiles=0, body=None):
    want = ref_scatter(x, idx, upd, window_dims, inserted, dims_map, ivd, body or combine)
    p = scatter_program(x, idx, upd, window_dims, inserted, dims_map, ivd, combine, body)
    return E.compile(p, num_tiles=num_tiles).run(x, idx, upd)[0], want


# (operand shape, indices shape, offset_dims, collapsed_slice_dims, start_index_map, index_vector_dim, slice_sizes)
GATHERS = [
    ((5, 3), (4, 1), [1], [0], [0], 1, [1, 3]),                # x[idx]: rows
    ((5, 3), (4,), [0], [1], [1], 1, [5, 1]),                  # x[:, idx]: offset dim before the batch dim
    ((4, 5), (3, 2), [], [0, 1], [0, 1], 1, [1, 1]),           # points
    ((4, 5), (2, 3), [], [0, 1], [1, 0], 0, [1, 1]),           # index vector in dimension 0, swapped map
    ((6, 7), (2, 2), [1, 2], [], [0, 1], 1, [2, 3]),           # windows, nothing collapsed (clamped starts)
    ((6, 7), (), [0, 1], [], [1], 0, [6, 4]),                  # one scalar start index (dynamic_slice-like)
    ((3, 4, 5), (2, 3, 1), [2, 3], [1], [1], 2, [3, 1, 2]),    # batch of rank 2, windows either side
    ((8,), (0, 1), [], [0], [0], 1, [1]),                      # no indices
]


@pytest.mark.parametrize("config", GATHERS, ids=[str(i) for i in range(len(GATHERS))])
@pytest.mark.parametrize("name", ["f32", "f16", "i32", "u32", "bool"])
def test_gather_configurations(config, name):
    shape, ishape, offset_dims, collapsed, smap, ivd, sizes = config
    rng = np.random.default_rng(len(shape) + len(ishape))
    x = values(name, shape, rng)
    limit = max(shape) + 3
    idx = rng.integers(-3, limit, size=ishape).astype(np.int32)  # includes out-of-range starts: clamped
    got, want, _ = gather(x, idx, offset_dims, collapsed, smap, ivd, sizes)
    assert_same(got, want)


def test_gather_clamps_and_unsigned_indices():
    x = np.arange(10, dtype=np.float32)
    idx = np.array([[0], [7], [8], [9], [2**31]], np.uint32)  # 2**31 as u32 is large, not negative
    got, want, _ = gather(x, idx, [1], [], [0], 1, [3])
    assert_same(got, want)
    assert got[-1].tolist() == [7, 8, 9]
    idx = np.array([[-5], [100]], np.int32)
    got, want, _ = gather(x, idx, [1], [], [0], 1, [3])
    assert got.tolist() == [[0, 1, 2], [7, 8, 9]]


def test_gather_uneven_tiles():
    rng = np.random.default_rng(1)
    x = values("f32", (300, 5), rng)
    idx = rng.integers(-10, 310, size=(257, 1)).astype(np.int32)
    got, want, exe = gather(x, idx, [1], [0], [0], 1, [1, 5], num_tiles=7)
    assert_same(got, want)
    profile = exe.last_profile
    assert profile["supersteps"] == 1 and profile["exchange_cycles"] > 0


# (operand shape, indices shape, updates shape, update_window_dims, inserted_window_dims, dims_map, ivd)
SCATTERS = [
    ((6, 3), (5, 1), (5, 3), [1], [0], [0], 1),            # x.at[idx].op(rows)
    ((6,), (7,), (7,), [], [0], [0], 1),                    # x.at[idx].op(values), implicit index vector
    ((4, 5), (6, 2), (6,), [], [0, 1], [0, 1], 1),          # points
    ((4, 5), (2, 6), (6,), [], [0, 1], [1, 0], 0),          # index vector in dimension 0
    ((6, 7), (3, 2), (3, 2, 3), [1, 2], [], [0, 1], 1),     # windows (some do not fit: skipped)
    ((5, 4), (3, 1), (4, 3), [0], [0], [0], 1),             # window dim before the scatter dim
    ((5, 4), (2, 3, 1), (2, 3, 4), [2], [0], [0], 2),       # batch of rank 2
]

INT_COMBINERS = ["add", "multiply", "maximum", "minimum", "and", "or", "assign"]


@pytest.mark.parametrize("config", SCATTERS, ids=[str(i) for i in range(len(SCATTERS))])
@pytest.mark.parametrize("name,combine", [(n, c) for n in ["f32", "f16"] for c in
                                          ["add", "multiply", "maximum", "minimum", "assign"]]
                         + [(n, c) for n in ["i32", "u32"] for c in INT_COMBINERS]
                         + [("bool", c) for c in ["add", "multiply", "and", "or", "maximum", "assign"]])
def test_scatter_configurations(config, name, combine):
    shape, ishape, ushape, wdims, inserted, dmap, ivd = config
    rng = np.random.default_rng(len(shape) * 10 + len(ishape))
    x, upd = values(name, shape, rng), values(name, ushape, rng)
    # mostly in range with duplicates, some out of range (negative or past the end): those windows are skipped
    idx = rng.integers(-2, max(shape) + 2, size=ishape).astype(np.int32)
    got, want = scatter(x, idx, upd, wdims, inserted, dmap, ivd, combine)
    assert_same(got, want)


def test_scatter_duplicates_in_order():
    x = np.zeros(4, np.float32)
    idx = np.array([[1], [1], [1], [3], [3]], np.int32)
    upd = np.array([1e8, 1.0, -1e8, 5.0, 6.0], np.float32)
    got, want = scatter(x, idx, upd, [], [0], [0], 1, "add")
    assert_same(got, want)
    assert got.tolist() == [0.0, 0.0, 0.0, 11.0]  # (1e8 + 1) - 1e8 rounds to 0 in f32: applied in order
    got, _ = scatter(x, idx, upd, [], [0], [0], 1, "assign")
    assert got.tolist() == [0.0, -1e8, 0.0, 6.0]  # the last update wins


def test_scatter_out_of_bounds_windows_skipped():
    x = np.zeros((4, 4), np.int32)
    upd = np.ones((3, 2, 2), np.int32)
    idx = np.array([[0, 0], [3, 0], [-1, 2]], np.int32)  # the 2nd and 3rd windows stick out: skipped entirely
    got, want = scatter(x, idx, upd, [1, 2], [], [0, 1], 1, "add")
    assert_same(got, want)
    assert got.sum() == 4
    idx = np.array([[2**31 + 1, 0]] * 3, np.uint32)  # huge unsigned index: out of range, not negative
    got, _ = scatter(x, idx, upd, [1, 2], [], [0, 1], 1, "add")
    assert got.sum() == 0


def test_scatter_general_body_and_nan():
    rng = np.random.default_rng(3)
    x = values("f32", (6, 3), rng)
    idx = np.array([[0], [2], [0], [5], [7]], np.int32)
    upd = values("f32", (5, 3), rng)
    got, want = scatter(x, idx, upd, [1], [0], [0], 1, None, body="subtract")  # no computation attr: interpreted
    assert_same(got, want)
    x[0, 0] = np.nan
    upd[1, 1] = np.nan
    upd[0, 2] = -0.0
    x[0, 2] = 0.0
    for combine in ("maximum", "minimum"):
        got, want = scatter(x, idx, upd, [1], [0], [0], 1, combine)
        assert_same(got, want)
        assert np.isnan(got[0, 0])


@pytest.mark.parametrize("combine", ["add", "assign", None])
def test_scatter_uneven_tiles(combine):
    rng = np.random.default_rng(4)
    x = values("f32", (301, 5), rng)
    idx = rng.integers(-5, 306, size=(400, 1)).astype(np.int32)
    upd = values("f32", (400, 5), rng)
    got, want = scatter(x, idx, upd, [1], [0], [0], 1, combine, num_tiles=7,
                        body="subtract" if combine is None else None)
    assert_same(got, want)


def test_scatter_and_gather_empty():
    x = np.arange(6, dtype=np.int32)
    idx = np.zeros((0, 1), np.int32)
    upd = np.zeros((0,), np.int32)
    got, want = scatter(x, idx, upd, [], [0], [0], 1, "add")
    assert_same(got, want)
    got, want, _ = gather(np.zeros((0, 3), np.float32), np.zeros((2, 1), np.int32), [1, 2], [], [0], 1, [0, 3])
    assert_same(got, want)


def error_of(p):
    with pytest.raises(E.EmulatorError) as e:
        E.compile(p)
    return str(e.value)


@pytest.mark.parametrize("attrs,message", [
    ({"offset_dims": [1], "collapsed_slice_dims": [], "start_index_map": [0], "index_vector_dim": 1,
      "slice_sizes": [1, 3]}, "must together cover"),
    ({"offset_dims": [1], "collapsed_slice_dims": [0], "start_index_map": [0, 1], "index_vector_dim": 1,
      "slice_sizes": [1, 3]}, "one entry per index component"),
    ({"offset_dims": [1], "collapsed_slice_dims": [0], "start_index_map": [0], "index_vector_dim": 3,
      "slice_sizes": [1, 3]}, "index_vector_dim 3 is out of range"),
    ({"offset_dims": [1], "collapsed_slice_dims": [0], "start_index_map": [0], "index_vector_dim": 1,
      "slice_sizes": [1, 9]}, "do not fit"),
    ({"offset_dims": [1], "collapsed_slice_dims": [0], "start_index_map": [0], "index_vector_dim": 1},
     "slice_sizes"),
])
def test_gather_malformed(attrs, message):
    p = E.Program()
    a, b = p.main.param("f32", (5, 3)), p.main.param("i32", (4, 1))
    p.main.ret(p.main.op("gather", [a, b], "f32", (4, 3), attrs))
    text = error_of(p)
    assert "Malformed IPU program" in text and "stablehlo.gather" in text and message in text, text


def test_scatter_malformed_and_unsupported():
    x, upd = np.zeros((5, 3), np.float32), np.zeros((2, 3), np.float32)
    p = scatter_program(x, np.zeros((2, 1), np.int32), upd, [1], [0], [0], 1, "add")
    p.main.body[-1]["attrs"]["computation"] = "xor_shift"
    text = error_of(p)
    assert "Malformed IPU program" in text and 'unknown computation "xor_shift"' in text, text
    p = scatter_program(x, np.zeros((2, 1), np.int32), upd, [1], [], [0], 1, "add")
    assert "must together cover" in error_of(p)
    p = scatter_program(x, np.zeros((2, 1), np.float32), upd, [1], [0], [0], 1, "add")
    text = error_of(p)
    assert "Unsupported operation stablehlo.scatter(tensor<5x3xf32>, tensor<2x1xf32>" in text, text
    assert "i32 and u32 indices" in text


def test_scatter_unsupported_body():
    x, upd = np.zeros(5, np.float32), np.zeros(2, np.float32)
    p = scatter_program(x, np.zeros((2, 1), np.int32), upd, [], [0], [0], 1, "add")
    region = p.main.body[-1]["regions"][0]
    region["body"][0]["op"], region["body"][0]["mlir"] = "fft", "stablehlo.fft"
    del p.main.body[-1]["attrs"]["computation"]
    text = error_of(p)
    assert "Unsupported operation stablehlo.scatter" in text and "fft" in text, text


def test_all_combiner_dtype_pairs_compile():
    for name, combine in itertools.product(["f32", "f16", "i32", "u32", "bool"], INT_COMBINERS):
        x = np.zeros(3, NP[name])
        p = scatter_program(x, np.zeros((1, 1), np.int32), np.zeros(1, NP[name]), [], [0], [0], 1, combine)
        if name in ("f32", "f16") and combine in ("and", "or"):  # the interpreted body rejects them by name
            assert "Unsupported operation stablehlo.scatter" in error_of(p)
        else:
            E.compile(p)


@pytest.mark.parametrize("combine", ["add", "assign", None])
def test_overlapping_row_windows_combine_in_update_order(combine):
    # Windows of 5 consecutive elements starting anywhere (overlapping with different starts, repeated starts, some
    # sticking out), over 7 tiles so the tiles' ranges cut windows: every element must see its updates in update
    # order; f32 add with mixed magnitudes rounds differently in any other order, assign keeps the last.
    rng = np.random.default_rng(6)
    x = values("f32", (41,), rng)
    idx = rng.integers(-2, 40, size=(300, 1)).astype(np.int32)
    upd = (rng.standard_normal((300, 5)) * np.where(rng.random((300, 5)) < 0.3, 1e7, 1.0)).astype(np.float32)
    got, want = scatter(x, idx, upd, [1], [], [0], 1, combine, num_tiles=7,
                        body="subtract" if combine is None else None)
    assert_same(got, want)


def test_gather_rows_cut_by_tiles():
    # An embedding lookup (whole rows) and a gather of partial rows (a run shorter than the operand's row), over tile
    # ranges that start and end inside rows.
    rng = np.random.default_rng(7)
    x = values("f32", (50, 9), rng)
    idx = rng.integers(-3, 53, size=(37, 1)).astype(np.int32)
    got, want, _ = gather(x, idx, [1], [0], [0], 1, [1, 9], num_tiles=7)
    assert_same(got, want)
    idx2 = rng.integers(-3, 53, size=(37, 2)).astype(np.int32)
    got, want, _ = gather(x, idx2, [1, 2], [], [0, 1], 1, [3, 4], num_tiles=7)
    assert_same(got, want)
