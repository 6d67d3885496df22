"""dot_general's matmul plan: big matmuls fit, blocks and k-split partials give numpy's results, memory and OOM."""

from __future__ import annotations

import numpy as np
import pytest
from emulator_helpers import assert_same, dtype_name

from jax_ipu import emulator as E

TILE_BYTES = 638976


def dot_program(lhs, rhs, out_dtype, lb=(), rb=(), lc=(1,), rc=(0,), out_shape=None):
    p = E.Program()
    a = p.main.param(dtype_name(lhs), lhs.shape)
    b = p.main.param(dtype_name(rhs), rhs.shape)
    if out_shape is None:
        batch = [lhs.shape[d] for d in lb]
        lfree = [s for d, s in enumerate(lhs.shape) if d not in lb and d not in lc]
        rfree = [s for d, s in enumerate(rhs.shape) if d not in rb and d not in rc]
        out_shape = tuple(batch + lfree + rfree)
    p.main.ret(p.main.op("dot_general", [a, b], out_dtype, out_shape, {
        "lhs_batching_dimensions": list(lb), "rhs_batching_dimensions": list(rb),
        "lhs_contracting_dimensions": list(lc), "rhs_contracting_dimensions": list(rc)}))
    return p


def matmul(a, b, out_dtype=None, num_tiles=0, **dims):
    exe = E.compile(dot_program(a, b, out_dtype or dtype_name(a), **dims), num_tiles=num_tiles)
    return exe.run(a, b)[0], exe


def close_f32(out, ref, a, b):
    # f32 sums in another order (blocks, k-split partials): within a few ulps of the sum of magnitudes
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    assert np.all(np.abs(out.astype(np.float64) - ref) <= 1e-5 * scale + 1e-30)


def test_large_matmul_fits_and_is_right(rng):
    a = rng.normal(size=(128, 2048)).astype(np.float32)
    b = rng.normal(size=(2048, 2048)).astype(np.float32)  # 16 MB of weights: Poplar fits this on one IPU
    out, exe = matmul(a, b)
    close_f32(out, a.astype(np.float64) @ b.astype(np.float64), a, b)
    mem = exe.info["memory"]
    assert mem["worst_bytes"] < TILE_BYTES // 2
    profile = exe.last_profile
    assert profile["supersteps"] == 2  # partial blocks, then the k-split reduction into the output's mapping
    assert profile["total_cycles"] == profile["compute_cycles"] + profile["exchange_cycles"] + profile["sync_cycles"]
    assert exe.info["estimated_cycles"] == profile["total_cycles"]


def test_vector_times_big_matrix(rng):
    a = rng.normal(size=(1, 4096)).astype(np.float32)
    b = rng.normal(size=(4096, 4096)).astype(np.float32)
    out, exe = matmul(a, b)
    close_f32(out, a.astype(np.float64) @ b.astype(np.float64), a, b)
    assert exe.info["memory"]["worst_bytes"] < TILE_BYTES // 2


def test_mlp_layer_worst_tile_is_small(rng):
    a = rng.normal(size=(128, 784)).astype(np.float32)
    b = rng.normal(size=(784, 1024)).astype(np.float32)
    out, exe = matmul(a, b)
    close_f32(out, a.astype(np.float64) @ b.astype(np.float64), a, b)
    assert exe.info["memory"]["worst_bytes"] < 0.5 * TILE_BYTES
    # more tiles than the matmul needs make it cheaper than on a few
    _, few = matmul(a, b, num_tiles=64)
    assert exe.info["estimated_cycles"] * 4 < few.info["estimated_cycles"]


@pytest.mark.parametrize("tiles", [1, 7, 13])
def test_plans_on_few_tiles(tiles, rng):
    a = rng.normal(size=(100, 300)).astype(np.float32)
    b = rng.normal(size=(300, 90)).astype(np.float32)
    out, exe = matmul(a, b, num_tiles=tiles)
    close_f32(out, a.astype(np.float64) @ b.astype(np.float64), a, b)
    assert exe.info["memory"]["worst_bytes"] <= TILE_BYTES
    i = rng.integers(-(2 ** 31), 2 ** 31 - 1, size=(37, 260)).astype(np.int32)
    j = rng.integers(-(2 ** 31), 2 ** 31 - 1, size=(260, 21)).astype(np.int32)
    with np.errstate(over="ignore"):
        assert_same(matmul(i, j, num_tiles=tiles)[0], i @ j)


def test_one_tile_reads_operands_in_place():
    a = np.ones((64, 64), np.float32)
    out, exe = matmul(a, a, num_tiles=1)
    assert_same(out, np.full((64, 64), 64, np.float32))
    # lhs + rhs + result, plus one f32 partial block: nothing is received
    assert exe.info["memory"]["worst_bytes"] < 4 * 16384 + 4096
    assert exe.last_profile["exchange_cycles"] == 0


def test_batch_dims_and_transposed_layouts(rng):
    a = rng.normal(size=(70, 4, 33)).astype(np.float32)   # [k, batch, m]
    b = rng.normal(size=(4, 45, 70)).astype(np.float32)   # [batch, n, k]
    out, _ = matmul(a, b, lb=[1], rb=[0], lc=[0], rc=[2], num_tiles=13)
    ref = np.einsum("kbm,bnk->bmn", a.astype(np.float64), b.astype(np.float64))
    scale = np.einsum("kbm,bnk->bmn", np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
    assert out.shape == (4, 33, 45)
    assert np.all(np.abs(out - ref) <= 1e-5 * scale)
    x = rng.normal(size=(6, 50, 600)).astype(np.float32)
    y = rng.normal(size=(6, 600, 40)).astype(np.float32)
    out, _ = matmul(x, y, lb=[0], rb=[0], lc=[2], rc=[1])
    np.testing.assert_allclose(out, np.matmul(x.astype(np.float64), y.astype(np.float64)), rtol=1e-4, atol=1e-4)


def test_each_dtype_with_a_k_split(rng):
    k = 3000  # deep enough that the plan splits k over tiles and reduces partials
    a16 = rng.normal(size=(20, k)).astype(np.float16)
    b16 = rng.normal(size=(k, 24)).astype(np.float16)
    ref = a16.astype(np.float64) @ b16.astype(np.float64)
    out16, exe = matmul(a16, b16)
    assert exe.last_profile["supersteps"] == 2
    assert out16.dtype == np.float16
    np.testing.assert_allclose(out16.astype(np.float64), ref, rtol=2e-3, atol=0.05)
    out32, _ = matmul(a16, b16, out_dtype="f32")
    close_f32(out32, ref, a16, b16)
    i = rng.integers(-(2 ** 31), 2 ** 31 - 1, size=(9, k)).astype(np.int32)
    j = rng.integers(-(2 ** 31), 2 ** 31 - 1, size=(k, 11)).astype(np.int32)
    with np.errstate(over="ignore"):
        assert_same(matmul(i, j)[0], i @ j)
        u = i.view(np.uint32)
        v = j.view(np.uint32)
        assert_same(matmul(u, v)[0], u @ v)
    p = rng.random(size=(7, k)) < 0.02
    q = rng.random(size=(k, 13)) < 0.02
    expected = (p.astype(np.int32) @ q.astype(np.int32)) > 0
    assert expected.any() and not expected.all()
    assert_same(matmul(p, q)[0], expected)


def test_matmul_that_cannot_fit_is_out_of_memory(rng):
    a = np.zeros((512, 512), np.float32)  # 3 MB of operands and result over 4 tiles of 624 KiB
    with pytest.raises(E.EmulatorError) as e:
        E.compile(dot_program(a, a, "f32"), num_tiles=4)
    assert e.value.code == "RESOURCE_EXHAUSTED"
    first = str(e.value).split("\n")[0]
    assert first.startswith("Out of memory on tile ")
    assert first.endswith(" bytes used but tiles only have 638976 bytes of memory")
    used = int(first.split(": ")[1].split(" bytes")[0])
    assert used > TILE_BYTES


def test_a_matmul_no_grid_fits_runs_in_row_chunks(rng):
    """When no grid of the whole keeps a tile's temporaries within poplin's availableMemoryProportion (0.6 of the
    tile), the rows are computed in chunks one after another (poplin's serial split): a 256^3 f32 matmul on 8 tiles
    of 250,000 bytes fits (it was out of memory on tile 1), with numpy's values, and costs more cycles than on
    tiles with room for one grid."""
    a = rng.normal(size=(256, 256)).astype(np.float32)
    b = rng.normal(size=(256, 256)).astype(np.float32)

    def run(tile_bytes):
        exe = E.compile(dot_program(a, b, "f32"), "ipu2", 8, memory_bytes_per_tile=tile_bytes)
        out = exe.run(a, b)[0]
        return out, exe

    out, chunked = run(250000)
    close_f32(out, a.astype(np.float64) @ b.astype(np.float64), a, b)
    assert chunked.info["static_supersteps"] > 3  # a matmul superstep per chunk, then the reduction
    assert chunked.info["memory"]["worst_bytes"] <= 250000
    whole_out, whole = run(TILE_BYTES)
    close_f32(whole_out, a.astype(np.float64) @ b.astype(np.float64), a, b)
    assert whole.info["static_supersteps"] == 2
    assert chunked.info["estimated_cycles"] > whole.info["estimated_cycles"]
    # f16: f32 sums rounded once to f16 in every chunk
    h, g = a.astype(np.float16), b.astype(np.float16)
    exe = E.compile(dot_program(h, g, "f16"), "ipu2", 8, memory_bytes_per_tile=150000)
    assert exe.info["static_supersteps"] > 3
    ref = h.astype(np.float64) @ g.astype(np.float64)
    got = exe.run(h, g)[0].astype(np.float64)
    assert np.all(np.abs(got - ref) <= np.abs(ref) * 2.0 ** -10 + 1e-5 * (np.abs(h).astype(np.float64) @ np.abs(g)))


def test_available_memory_proportion_trades_cycles_for_memory(rng):
    """poplin's availableMemoryProportion (CompileOptions, JAX_IPU_AVAILABLE_MEMORY_PROPORTION): a smaller share of
    a tile for a matmul's temporaries gives a plan of more row chunks, less memory and more cycles, and the same
    values; a share outside (0, 1] is refused naming the option."""
    from jax_ipu import config

    a = rng.normal(size=(1024, 2048)).astype(np.float32)
    b = rng.normal(size=(2048, 1024)).astype(np.float32)
    plans = []
    for options in ({}, {"available_memory_proportion": 0.3}):
        exe = E.compile(dot_program(a, b, "f32"), "ipu2", 256, options=options)
        close_f32(exe.run(a, b)[0], a.astype(np.float64) @ b.astype(np.float64), a, b)
        plans.append((exe.info["static_supersteps"], exe.info["memory"]["worst_bytes"], exe.info["estimated_cycles"]))
    (steps, worst, cycles), (steps_low, worst_low, cycles_low) = plans
    assert steps_low > steps and worst_low < worst and cycles_low > cycles
    for bad, kind in ((0, "0"), (1.5, "1.5"), ("0.3", "a string"), (True, "a boolean")):
        with pytest.raises(E.EmulatorError, match=f"'available_memory_proportion'.*in \\(0, 1\\], not {kind}"):
            E.compile(dot_program(a[:8, :8], b[:8, :8], "f32"), options={"available_memory_proportion": bad})
    assert config.lowering_options({"JAX_IPU_AVAILABLE_MEMORY_PROPORTION": "0.3"})["available_memory_proportion"] == 0.3
    assert "available_memory_proportion" not in config.lowering_options({})
    with pytest.raises(ValueError, match="JAX_IPU_AVAILABLE_MEMORY_PROPORTION=1.2: availableMemoryProportion must"):
        config.lowering_options({"JAX_IPU_AVAILABLE_MEMORY_PROPORTION": "1.2"})


def _sum_of_half_partials(a, b, parts):
    """An f16 matmul of integer-valued operands as a plan splitting K in `parts` (blocks of ceil(K / parts)) with
    half partials computes it: each block's exact sum rounded to f16, their sum (exact in f32) rounded to f16."""
    k = a.shape[-1]
    block = -(-k // parts)
    total = np.zeros(a.shape[:-1] + b.shape[1:], np.float32)
    for k0 in range(0, k, block):
        partial = a[..., k0:k0 + block].astype(np.int64) @ b[k0:k0 + block].astype(np.int64)
        total += partial.astype(np.float16).astype(np.float32)
    return total.astype(np.float16)


@pytest.mark.parametrize("op", ["dot_general", "convolution"])
def test_half_partials_keep_f16_partials(rng, op):
    """poplin's partialsType half (compile option partials_type, JAX_IPU_PARTIALS_TYPE): an f16 matmul or
    convolution whose K is split over tiles keeps, sends and reduces its partials in f16. Integer-valued operands
    make every sum exact, so the values show it: with float partials the exact sum rounded once to f16; with half
    partials the sum of each tile's partial rounded to f16, for the plan's split of K. Less exchange and memory
    and fewer cycles; f32 operands keep f32 partials, their program unchanged."""
    from jax_ipu import config

    # K's first half positive and its second negative: on 16 tiles every partial (a K block of at least 256) sums
    # to thousands, where f16's spacing is 2 or more, and the whole to a few hundred, where it is at most 1/2.
    a = rng.integers(1, 8, size=(16, 4096)) * np.repeat([1, -1], 2048)
    b = rng.integers(2, 5, size=(4096, 8))
    exact = (a @ b).astype(np.float16)
    a, b = a.astype(np.float16), b.astype(np.float16)

    def program(x, y, dtype):
        if op == "dot_general":
            return dot_program(x, y, dtype)
        p = E.Program()  # the same product as a 1x1 convolution of a [1, 4, 4, K] NHWC image
        image = p.main.param(dtype, (1, 4, 4) + x.shape[1:])
        kernel = p.main.param(dtype, (1, 1) + y.shape)
        p.main.ret(p.main.op("convolution", [image, kernel], dtype, (1, 4, 4, y.shape[1]), {
            "input_batch_dimension": 0, "input_feature_dimension": 3, "input_spatial_dimensions": [1, 2],
            "kernel_input_feature_dimension": 2, "kernel_output_feature_dimension": 3,
            "kernel_spatial_dimensions": [0, 1], "output_batch_dimension": 0, "output_feature_dimension": 3,
            "output_spatial_dimensions": [1, 2], "feature_group_count": 1, "batch_group_count": 1}))
        return p

    def run(x, y, dtype, **options):
        exe = E.compile(program(x, y, dtype), "ipu2", 16, options=options)
        args = (x, y) if op == "dot_general" else (x.reshape(1, 4, 4, -1), y.reshape(1, 1, *y.shape))
        return exe.run(*args)[0].reshape(exact.shape), exe

    out, full = run(a, b, "f16")
    assert np.array_equal(out, exact)
    out, half = run(a, b, "f16", partials_type="half")
    assert not np.array_equal(out, exact)  # some partial was rounded
    assert any(np.array_equal(out, _sum_of_half_partials(a, b, parts)) for parts in range(2, 17))
    assert half.info["estimated_cycles"] < full.info["estimated_cycles"]
    assert half.info["memory"]["worst_bytes"] < full.info["memory"]["worst_bytes"]
    assert half.last_profile["exchange_cycles"] < full.last_profile["exchange_cycles"]
    x, y = a.astype(np.float32), b.astype(np.float32)
    (out32, f32), (half_out32, half32) = run(x, y, "f32"), run(x, y, "f32", partials_type="half")
    assert np.array_equal(out32, half_out32) and np.array_equal(out32, exact.astype(np.float32))
    assert f32.info["estimated_cycles"] == half32.info["estimated_cycles"]
    assert config.lowering_options({"JAX_IPU_PARTIALS_TYPE": "Half"})["partials_type"] == "half"
    assert "partials_type" not in config.lowering_options({"JAX_IPU_PARTIALS_TYPE": "float"})
    with pytest.raises(ValueError, match="JAX_IPU_PARTIALS_TYPE=f16: partialsType must be 'float' or 'half'"):
        config.lowering_options({"JAX_IPU_PARTIALS_TYPE": "f16"})


def _conv1x1_program(image_shape, kernel_shape, dtype):
    """A 1x1 NHWC convolution: the matmul of the image's pixels (rows) by the kernel's [K, N] matrix."""
    p = E.Program()
    image = p.main.param(dtype, image_shape)
    kernel = p.main.param(dtype, kernel_shape)
    p.main.ret(p.main.op("convolution", [image, kernel], dtype, image_shape[:3] + kernel_shape[3:], {
        "input_batch_dimension": 0, "input_feature_dimension": 3, "input_spatial_dimensions": [1, 2],
        "kernel_input_feature_dimension": 2, "kernel_output_feature_dimension": 3,
        "kernel_spatial_dimensions": [0, 1], "output_batch_dimension": 0, "output_feature_dimension": 3,
        "output_spatial_dimensions": [1, 2], "feature_group_count": 1, "batch_group_count": 1}))
    return p


@pytest.mark.parametrize("op, rows, n, tiles", [("dot_general", 2, 3, 16), ("dot_general", 2, 2048, 1472),
                                                ("convolution", 2, 3, 16), ("convolution", 784, 3, 1472)])
def test_partials_are_summed_in_k_order(op, rows, n, tiles):
    """A matmul or convolution whose K is split over tiles sums each output's partials in k order, as the reduction
    superstep adds the tiles' partials: ((p0 + p1) + p2) + ... With products of +2**14 over K's first half, -2**14
    over its second and -2**14 + 1 last, every partial and every sum in k order is exact and the result is 1; in any
    other order a sum passes -2**25 + 1, which f32 cannot hold, and the 1 is lost. Per op two shapes: few host
    blocks (the reduction superstep sums the partials) and many (each host block sums its own)."""
    k = 4096
    a = np.ones((rows, k), np.float32)
    b = np.repeat(np.float32([2.0**14, -(2.0**14)]), k // 2)[:, None].repeat(n, axis=1)
    b[-1] = -(2.0**14) + 1
    if op == "dot_general":
        program, args = dot_program(a, b, "f32"), (a, b)
    else:  # the rows as pixels of a [1, rows / 28 or 1, ...] image
        image = (1, 28, rows // 28, k) if rows % 28 == 0 else (1, 1, rows, k)
        program, args = _conv1x1_program(image, (1, 1, k, n), "f32"), (a.reshape(image), b.reshape(1, 1, k, n))
    exe = E.compile(program, "ipu2", tiles)
    assert exe.info["static_supersteps"] == 2  # the plan splits K: partials, then their reduction
    assert np.array_equal(exe.run(*args)[0].reshape(rows, n), np.ones((rows, n), np.float32))
    # the same in reverse k order, as a check that the order matters here
    reverse = np.float32(0)
    for block in np.split(a[0] * b[:, 0], 16)[::-1]:
        reverse += np.cumsum(block, dtype=np.float32)[-1]
    assert reverse != 1
