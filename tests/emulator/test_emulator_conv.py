"""convolution on the emulator against a numpy reference of StableHLO's semantics: layouts, strides, padding
(negative too), lhs/rhs dilation, window reversal, feature and batch groups, every dtype, tile counts, errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from emulator_helpers import assert_same, dtype_name

from jax_ipu import emulator as E

TILE_BYTES = 638976


def reference(x, w, dn, strides, padding, lhs_dil, rhs_dil, reversal, fgc=1, bgc=1, out_dtype=None):
    """StableHLO convolution in numpy: float64 for floats, wrapping 64-bit ints (then the result type), bool OR/AND."""
    out_dtype = np.dtype(out_dtype or x.dtype)
    calc = np.float64 if x.dtype.kind == "f" else np.int64
    xs = np.transpose(x, [dn["input_batch_dimension"], dn["input_feature_dimension"]]
                      + list(dn["input_spatial_dimensions"])).astype(calc)
    ws = np.transpose(w, [dn["kernel_output_feature_dimension"], dn["kernel_input_feature_dimension"]]
                      + list(dn["kernel_spatial_dimensions"])).astype(calc)
    rank = xs.ndim - 2
    for d in range(rank):
        if reversal[d]:
            ws = np.flip(ws, axis=2 + d)
    # dilate, then pad (negative padding crops)
    dil_shape = [max(0, (s - 1) * lhs_dil[d] + 1) for d, s in enumerate(xs.shape[2:])]
    xd = np.zeros(xs.shape[:2] + tuple(dil_shape), calc)
    xd[(slice(None), slice(None)) + tuple(slice(None, None, lhs_dil[d]) for d in range(rank))] = xs
    xp = np.pad(xd, [(0, 0), (0, 0)] + [(max(0, lo), max(0, hi)) for lo, hi in padding])
    xp = xp[(slice(None), slice(None)) + tuple(slice(max(0, -lo), xp.shape[2 + d] - max(0, -hi))
                                               for d, (lo, hi) in enumerate(padding))]
    ksz = ws.shape[2:]
    win = [(k - 1) * rhs_dil[d] + 1 for d, k in enumerate(ksz)]
    osz = [max(0, (xp.shape[2 + d] - win[d]) // strides[d] + 1) if xp.shape[2 + d] >= win[d] else 0
           for d in range(rank)]
    groups = fgc * bgc
    n_out, c_out = xs.shape[0] // bgc, ws.shape[0]
    cog = c_out // groups
    res = np.zeros((n_out, c_out) + tuple(osz), calc)
    for kpos in itertools.product(*[range(k) for k in ksz]):
        sl = tuple(slice(kpos[d] * rhs_dil[d], kpos[d] * rhs_dil[d] + (osz[d] - 1) * strides[d] + 1, strides[d])
                   for d in range(rank))
        patch = xp[(slice(None), slice(None)) + sl] if all(osz) else np.zeros(xp.shape[:2] + tuple(osz), calc)
        for g in range(groups):
            wk = ws[(slice(g * cog, (g + 1) * cog), slice(None)) + kpos]
            if bgc > 1:
                p = patch[g * n_out:(g + 1) * n_out]
            else:
                cig = ws.shape[1]
                p = patch[:, g * cig:(g + 1) * cig]
            res[:, g * cog:(g + 1) * cog] += np.einsum("nc...,oc->no...", p, wk)
    perm = [dn["output_batch_dimension"], dn["output_feature_dimension"]] + list(dn["output_spatial_dimensions"])
    res = np.transpose(res, np.argsort(perm))
    if out_dtype == np.bool_:
        return res > 0
    if out_dtype.kind in "iu":
        return (res & 0xFFFFFFFF).astype(np.uint32).view(out_dtype)
    return res


def dims(layout_in, layout_k, layout_out):
    """Dimension numbers from strings like "NCHW", "OIHW", "NHWC" (spatial letters in order of appearance in in)."""
    spatial = [c for c in layout_in if c not in "NC"]
    return {
        "input_batch_dimension": layout_in.index("N"), "input_feature_dimension": layout_in.index("C"),
        "input_spatial_dimensions": [layout_in.index(c) for c in spatial],
        "kernel_input_feature_dimension": layout_k.index("I"), "kernel_output_feature_dimension": layout_k.index("O"),
        "kernel_spatial_dimensions": [layout_k.index(c) for c in spatial],
        "output_batch_dimension": layout_out.index("N"), "output_feature_dimension": layout_out.index("C"),
        "output_spatial_dimensions": [layout_out.index(c) for c in spatial],
    }


def shape_in(layout, sizes):
    return tuple(sizes[c] for c in layout)


def conv_program(x, w, dn, out_shape, out_dtype=None, **window):
    attrs = dict(dn)
    attrs.update(window)
    p = E.Program()
    a = p.main.param(dtype_name(x), x.shape)
    b = p.main.param(dtype_name(w), w.shape)
    p.main.ret(p.main.op("convolution", [a, b], out_dtype or dtype_name(x), out_shape, attrs))
    return p


def run_conv(x, w, dn, strides, padding, lhs_dil, rhs_dil, reversal, fgc=1, bgc=1, out_dtype=None, num_tiles=0):
    ref = reference(x, w, dn, strides, padding, lhs_dil, rhs_dil, reversal, fgc, bgc,
                    out_dtype=E.NUMPY_DTYPES[out_dtype] if out_dtype else None)
    exe = E.compile(conv_program(x, w, dn, ref.shape, out_dtype, window_strides=list(strides),
                                 padding=[list(p) for p in padding], lhs_dilation=list(lhs_dil),
                                 rhs_dilation=list(rhs_dil), window_reversal=list(reversal),
                                 feature_group_count=fgc, batch_group_count=bgc), num_tiles=num_tiles)
    return exe.run(x, w)[0], ref, exe


def values(rng, dtype, shape):
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype in ("int32", "uint32"):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    return rng.uniform(-2, 2, size=shape).astype(dtype)


def check_close(out, ref, x, w, dtype):
    if dtype in ("float32", "float16"):
        assert out.dtype == np.dtype(dtype) and out.shape == ref.shape
        scale = float(np.abs(x.astype(np.float64)).max() * np.abs(w.astype(np.float64)).sum() / max(1, w.shape[0])) + 1
        if dtype == "float32":
            np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5 * scale)
        else:  # f32 sums rounded once to f16
            np.testing.assert_allclose(out.astype(np.float64), ref, rtol=1e-3, atol=1e-4 * scale)
    else:
        assert_same(out, ref)


CASES = [
    # layouts, sizes, strides, padding, lhs_dil, rhs_dil, reversal, fgc, bgc
    (("NCHW", "OIHW", "NCHW"), dict(N=2, C=3, H=7, W=6, O=4), (1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1), (0, 0), 1, 1),
    (("NHWC", "HWIO", "NHWC"), dict(N=2, C=4, H=9, W=8, O=6), (2, 3), ((1, 2), (0, 1)), (1, 1), (1, 2), (0, 0), 2, 1),
    (("CHWN", "IHWO", "HWNC"), dict(N=3, C=2, H=5, W=6, O=4), (1, 2), ((-1, 2), (2, -1)), (2, 1), (1, 1), (1, 0), 1, 1),
    (("NCHW", "OIHW", "NCHW"), dict(N=4, C=3, H=6, W=5, O=6), (1, 1), ((1, 1), (0, 0)), (1, 2), (2, 1), (0, 1), 1, 2),
    (("NHWC", "OHWI", "NCHW"), dict(N=1, C=4, H=8, W=8, O=4), (2, 2), ((1, 1), (1, 1)), (1, 1), (1, 1), (1, 1), 4, 1),
]
KSIZE = [(3, 3), (3, 2), (2, 3), (3, 3), (3, 3)]


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "uint32", "bool"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_conv_2d_cases(case, dtype):
    rng = np.random.default_rng(case)
    (li, lk, lo), sizes, strides, padding, ld, rd, rev, fgc, bgc = CASES[case]
    kh, kw = KSIZE[case]
    x = values(rng, dtype, shape_in(li, sizes))
    w = values(rng, dtype, shape_in(lk, dict(I=sizes["C"] // fgc, O=sizes["O"], H=kh, W=kw)))
    out, ref, _ = run_conv(x, w, dims(li, lk, lo), strides, padding, ld, rd, rev, fgc, bgc)
    check_close(out, ref, x, w, dtype)


@pytest.mark.parametrize("num_tiles", [1, 4, 0])
def test_conv_1d_3d_and_tile_counts(num_tiles):
    rng = np.random.default_rng(7)
    x = values(rng, "float32", (3, 5, 17))
    w = values(rng, "float32", (4, 5, 4))
    out, ref, _ = run_conv(x, w, dims("NCW", "OIW", "NCW"), (3,), ((2, 5),), (1,), (2,), (0,), num_tiles=num_tiles)
    check_close(out, ref, x, w, "float32")
    x3 = values(rng, "int32", (2, 5, 6, 4, 3))
    w3 = values(rng, "int32", (2, 2, 3, 3, 4))
    out, ref, _ = run_conv(x3, w3, dims("NDHWC", "DHWIO", "NDHWC"), (1, 2, 1), ((1, 0), (0, 2), (1, 1)), (1, 1, 2),
                           (1, 1, 1), (0, 1, 0), num_tiles=num_tiles)
    assert_same(out, ref)


def test_conv_f16_to_f32_and_special_values():
    x = np.array([[[1.0, np.inf, 2.0, -1.0, np.nan, 0.5]]], np.float16)
    w = np.array([[[1.0, 0.0]]], np.float16)
    out, ref, _ = run_conv(x, w, dims("NCW", "OIW", "NCW"), (1,), ((0, 0),), (1,), (1,), (0,), out_dtype="f32")
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, ref.astype(np.float32))  # inf * 0 is NaN, as in the sum
    x = np.full((1, 64, 1), 1100.0, np.float16)  # 64 * 1100 * 1 overflows f16 only at the end: f32 accumulation
    w = np.full((1, 64, 1), 1.0, np.float16)
    out, _, _ = run_conv(x, w, dims("NCW", "OIW", "NCW"), (1,), ((0, 0),), (1,), (1,), (0,))
    assert out.dtype == np.float16 and np.isinf(out[0, 0, 0])
    out, _, _ = run_conv(x * np.float16(0.5), w, dims("NCW", "OIW", "NCW"), (1,), ((0, 0),), (1,), (1,), (0,))
    assert out[0, 0, 0] == np.float16(35200.0)  # exact: partial sums above 2048 are not f16-rounded


def test_large_conv_splits_over_tiles_and_fits():
    rng = np.random.default_rng(3)
    x = values(rng, "float32", (8, 64, 32, 32))
    w = values(rng, "float32", (128, 64, 3, 3))
    out, ref, exe = run_conv(x, w, dims("NCHW", "OIHW", "NCHW"), (1, 1), ((1, 1), (1, 1)), (1, 1), (1, 1), (0, 0))
    check_close(out, ref, x, w, "float32")
    assert exe.info["memory"]["worst_bytes"] < TILE_BYTES
    profile = exe.last_profile
    assert profile["supersteps"] == 2
    assert profile["total_cycles"] == profile["compute_cycles"] + profile["exchange_cycles"] + profile["sync_cycles"]
    assert exe.info["estimated_cycles"] == profile["total_cycles"]


def test_small_tile_count_k_split_matches():
    rng = np.random.default_rng(4)
    x = values(rng, "int32", (1, 300, 5))
    w = values(rng, "int32", (2, 300, 3))
    for tiles in (1, 2, 16, 0):
        out, ref, _ = run_conv(x, w, dims("NCW", "OIW", "NCW"), (1,), ((1, 1),), (1,), (1,), (0,), num_tiles=tiles)
        assert_same(out, ref)


def test_defaults_empty_outputs_and_empty_contraction():
    rng = np.random.default_rng(5)
    x = values(rng, "float32", (2, 3, 6))
    w = values(rng, "float32", (4, 3, 2))
    dn = dims("NCW", "OIW", "NCW")
    exe = E.compile(conv_program(x, w, dn, (2, 4, 5), feature_group_count=1, batch_group_count=1))
    ref = reference(x, w, dn, (1,), ((0, 0),), (1,), (1,), (0,))
    np.testing.assert_allclose(exe.run(x, w)[0], ref, rtol=1e-5, atol=1e-5)
    # an output with no positions, and a convolution over zero input features
    out, ref, _ = run_conv(x, values(rng, "float32", (4, 3, 9)), dn, (1,), ((0, 0),), (1,), (1,), (0,))
    assert out.shape == (2, 4, 0)
    xz, wz = np.zeros((2, 0, 6), np.float32), np.zeros((4, 0, 2), np.float32)
    out, ref, _ = run_conv(xz, wz, dn, (1,), ((0, 0),), (1,), (1,), (0,))
    assert_same(out, np.zeros((2, 4, 5), np.float32))


def test_errors():
    x, w = np.ones((2, 3, 6), np.float32), np.ones((4, 3, 2), np.float32)
    dn = dims("NCW", "OIW", "NCW")
    groups = dict(feature_group_count=1, batch_group_count=1)
    with pytest.raises(E.EmulatorError, match=r"result shape should be tensor<2x4x5xf32>"):
        E.compile(conv_program(x, w, dn, (2, 4, 6), **groups))
    with pytest.raises(E.EmulatorError, match=r"feature_group_count"):
        E.compile(conv_program(x, w, dn, (2, 4, 5), feature_group_count=2, batch_group_count=1))
    with pytest.raises(E.EmulatorError, match=r"padding"):
        E.compile(conv_program(x, w, dn, (2, 4, 5), padding=[0, 0], **groups))
    with pytest.raises(E.EmulatorError, match=r"stablehlo\.convolution.*one element type"):
        E.compile(conv_program(x, w.astype(np.int32), dn, (2, 4, 5), **groups))
    bad = dict(dn, kernel_input_feature_dimension=0)
    with pytest.raises(E.EmulatorError, match=r"out of range or repeated"):
        E.compile(conv_program(x, w, bad, (2, 4, 5), **groups))
