"""convolution (lax.conv_general_dilated, lax.conv, jnp.convolve/correlate, gradients of convolutions): ipu against cpu.

Float inputs are non-integer and bounded away from zero, and each output may differ from cpu's by a few ulps of its own
scale (the sum of |x||w| over its window, see _conformance.check): the order of each window's sum may differ from
XLA:CPU's, but one dropped term (a window tap, an input feature) moves an output by far more, in f16 too (both
accumulate in f32 and round once). Ints wrap and bools are an OR of ANDs: exact."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _conformance import away_from_zero, check, random, run_both, small_ints
from jax import lax


def tol(dtype):
    return {"scale_ulps": {"float32": 8, "float16": 2}[dtype]}


def conv(**kw):
    return lambda x, w: lax.conv_general_dilated(x, w, **kw)


CASES_2D = [
    # (lhs shape, rhs shape, kwargs)
    ((2, 3, 9, 9), (4, 3, 3, 3), dict(window_strides=(1, 1), padding="VALID")),
    ((2, 3, 9, 8), (4, 3, 3, 2), dict(window_strides=(2, 3), padding="SAME")),
    ((1, 2, 7, 11), (5, 2, 3, 3), dict(window_strides=(1, 2), padding=((1, 2), (0, 3)))),
    ((1, 2, 7, 11), (5, 2, 2, 3), dict(window_strides=(1, 1), padding=((-1, 2), (2, -3)))),
    ((2, 3, 9, 9), (4, 3, 3, 3), dict(window_strides=(2, 2), padding="SAME", rhs_dilation=(1, 2))),
    ((2, 3, 5, 6), (4, 3, 3, 2), dict(window_strides=(1, 1), padding=((2, 2), (1, 1)), lhs_dilation=(2, 3))),
    ((2, 3, 5, 6), (4, 3, 3, 2), dict(window_strides=(2, 1), padding=((1, 0), (0, 2)), lhs_dilation=(2, 1),
                                      rhs_dilation=(2, 2))),
    ((2, 6, 7, 7), (9, 2, 3, 3), dict(window_strides=(1, 1), padding="SAME", feature_group_count=3)),
    ((2, 4, 8, 8), (4, 1, 3, 3), dict(window_strides=(2, 2), padding="SAME", feature_group_count=4)),  # depthwise
    ((4, 3, 6, 5), (6, 3, 2, 2), dict(window_strides=(1, 1), padding="VALID", batch_group_count=2)),
    ((1, 1, 1, 1), (1, 1, 1, 1), dict(window_strides=(1, 1), padding="VALID")),
    ((3, 2, 4, 4), (2, 2, 5, 5), dict(window_strides=(1, 1), padding="VALID")),  # empty output
]


@pytest.mark.parametrize("case", range(len(CASES_2D)))
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_conv_2d_nchw(case, dtype):
    xs, ws, kw = CASES_2D[case]
    x, w = away_from_zero(dtype, xs, seed=1), away_from_zero(dtype, ws, seed=2)
    check(conv(**kw), x, w, **tol(dtype))


@pytest.mark.parametrize("dtype", ["int32", "uint32", "bool"])
def test_conv_exact_types(dtype):
    x, w = small_ints(dtype, (2, 4, 7, 6), seed=1), small_ints(dtype, (6, 2, 3, 2), seed=2)
    check(conv(window_strides=(2, 1), padding="SAME", feature_group_count=2, rhs_dilation=(1, 2)), x, w)
    big_x, big_w = random(dtype, (1, 3, 9), seed=3), random(dtype, (2, 3, 4), seed=4)  # ints wrap
    check(conv(window_strides=(1,), padding=((2, 1),), lhs_dilation=(2,)), big_x, big_w)


def test_conv_f16_to_f32():
    x, w = away_from_zero("float16", (2, 3, 9, 9), seed=1), away_from_zero("float16", (4, 3, 3, 3), seed=2)
    check(lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME", preferred_element_type=jnp.float32), x, w,
          **tol("float32"))


@pytest.mark.parametrize("dims", [("NHWC", "HWIO", "NHWC"), ("NCHW", "OIHW", "NCHW"), ("NHWC", "OHWI", "NCHW"),
                                  ("CHWN", "IHWO", "HWNC")])
def test_conv_layouts(dims):


    lhs_shape = {"NHWC": (2, 9, 8, 6), "NCHW": (2, 6, 9, 8), "CHWN": (6, 9, 8, 2)}[dims[0]]
    rhs_shape = {"HWIO": (3, 2, 3, 4), "OIHW": (4, 3, 3, 2), "OHWI": (4, 3, 2, 3), "IHWO": (3, 3, 2, 4)}[dims[1]]
    x, w = away_from_zero("float32", lhs_shape, seed=5), away_from_zero("float32", rhs_shape, seed=6)
    check(conv(window_strides=(2, 1), padding="SAME", rhs_dilation=(1, 2), feature_group_count=2,
               dimension_numbers=dims), x, w, **tol("float32"))


def test_conv_1d_and_3d():
    x1, w1 = away_from_zero("float32", (3, 5, 17), seed=1), away_from_zero("float32", (4, 5, 4), seed=2)
    check(conv(window_strides=(3,), padding=((2, 5),), rhs_dilation=(2,)), x1, w1, **tol("float32"))
    x3, w3 = away_from_zero("float32", (2, 3, 5, 6, 7), seed=3), away_from_zero("float32", (4, 3, 2, 3, 2), seed=4)
    check(conv(window_strides=(1, 2, 1), padding=((1, 0), (1, 1), (0, 2)), lhs_dilation=(1, 1, 2)), x3, w3,
          **tol("float32"))
    x3b = away_from_zero("float32", (2, 5, 6, 7, 4), seed=5)
    w3b = away_from_zero("float32", (2, 2, 2, 2, 6), seed=6)
    check(conv(window_strides=(1, 1, 2), padding="VALID", feature_group_count=2,
               dimension_numbers=("NDHWC", "DHWIO", "NDHWC")), x3b, w3b, **tol("float32"))


def test_lax_conv_and_numpy_convolve():
    x, w = away_from_zero("float32", (2, 3, 10, 10), seed=1), away_from_zero("float32", (5, 3, 3, 3), seed=2)
    check(lambda x, w: (lax.conv(x, w, (1, 1), "SAME"), lax.conv(x, w, (2, 2), "VALID")), x, w,
          **tol("float32"))
    a, v = away_from_zero("float32", (23,), seed=3), away_from_zero("float32", (5,), seed=4)
    check(lambda a, v: (jnp.convolve(a, v), jnp.convolve(a, v, mode="same"), jnp.convolve(a, v, mode="valid"),
                        jnp.correlate(a, v), jnp.correlate(a, v, mode="full"), jnp.convolve(v, a)), a, v,
          **tol("float32"))


def test_conv_large_spreads_over_tiles():
    x, w = away_from_zero("float32", (4, 16, 32, 32), seed=1), away_from_zero("float32", (32, 16, 3, 3), seed=2)
    check(conv(window_strides=(1, 1), padding="SAME"), x, w, **tol("float32"))


def _cnn(params, x):
    w1, w2, w3, dense = params
    dn = ("NHWC", "HWIO", "NHWC")
    h = jnp.tanh(lax.conv_general_dilated(x, w1, (1, 1), "SAME", dimension_numbers=dn))
    h = jnp.tanh(lax.conv_general_dilated(h, w2, (2, 2), "SAME", dimension_numbers=dn, feature_group_count=2))
    h = jnp.tanh(lax.conv_general_dilated(h, w3, (1, 1), ((1, 0), (0, 1)), rhs_dilation=(2, 1), dimension_numbers=dn))
    return h.reshape(h.shape[0], -1) @ dense


def _params():
    return (random("float32", (3, 3, 3, 8), seed=1, low=-0.5, high=0.5),
            random("float32", (3, 3, 4, 8), seed=2, low=-0.5, high=0.5),
            random("float32", (2, 2, 8, 4), seed=3, low=-0.5, high=0.5),
            random("float32", (3 * 4 * 4, 10), seed=4, low=-0.5, high=0.5))


def test_small_cnn_forward_and_grads():
    x = random("float32", (2, 8, 8, 3), seed=5, low=-1.0, high=1.0)
    params = _params()
    check(_cnn, params, x, rtol=1e-5, atol=1e-4)

    def loss(params, x):
        return jnp.sum(_cnn(params, x) ** 2)

    check(jax.grad(loss, argnums=(0, 1)), params, x, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kw", [
    dict(window_strides=(2, 1), padding=((1, 2), (0, 1)), rhs_dilation=(1, 2), feature_group_count=2),
    dict(window_strides=(1, 2), padding=((1, 1), (2, 0)), lhs_dilation=(2, 1)),
    dict(window_strides=(3, 2), padding="VALID", rhs_dilation=(2, 1), batch_group_count=2),
])
def test_conv_grads(kw):
    fg, bg = kw.get("feature_group_count", 1), kw.get("batch_group_count", 1)
    x = random("float32", (2 * bg, 2 * fg, 9, 9), seed=1, low=-1.0, high=1.0)
    w = random("float32", (6, 2, 3, 3), seed=2, low=-1.0, high=1.0)

    def loss(x, w):
        return jnp.sum(jnp.sin(lax.conv_general_dilated(x, w, **kw)))

    check(jax.grad(loss, argnums=(0, 1)), x, w, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("strides", [(1, 1), (2, 2)])
@pytest.mark.parametrize("padding", [((0, 0), (0, 0)), ((2, 0), (0, 1))])
def test_products_that_are_all_minus_zero_sum_to_plus_zero(padding, strides):
    """XLA:CPU's convolution adds the products to a sum that starts at +0 (Eigen's contraction), so a result whose
    products are all -0 (zeros times a negative weight, or padding) is +0, in every series, with or without padding
    and strides."""
    x = np.zeros((1, 1, 1, 5), np.float32)
    w = np.array([0.0, -4.5], np.float32).reshape(2, 1, 1, 1)

    def conv(a, b):
        return lax.conv_general_dilated(a, b, strides, padding, dimension_numbers=("NCHW", "OIHW", "NCHW"))

    got, want = (np.asarray(r) for r in run_both(conv, x, w))
    assert (np.signbit(got) == np.signbit(want)).all() and (got == want).all(), (got, want)


@pytest.mark.parametrize("lhs, rhs", [((2, 3, 8, 8), (4, 3, 3, 3)), ((1, 16, 10, 10), (8, 16, 3, 3)),
                                      ((1, 32, 9, 9), (16, 32, 3, 3))])
def test_a_window_s_products_add_position_by_position_as_on_cpu(lhs, rhs):
    """Each output adds its window's products window position by window position, a position's input features in a
    run, as the IPU's convolution vertices do (each kernel position's channels through the AMP) and as XLA:CPU's do
    (Eigen's patches, channels innermost): a convolution of one partial per output gives cpu's bits (feature by
    feature, 367 to 1,196 of these outputs were an ulp or more apart)."""
    x, w = random("float32", lhs, seed=71), random("float32", rhs, seed=72)
    check(conv(window_strides=(1, 1), padding="SAME"), x, w)  # (exact)


def test_an_overflow_in_a_window_is_cpus_infinity():
    """A product that overflows after the window's sum is already infinite stays out of it in a fused multiply-add
    (its exact value is finite), so the sum keeps that infinity; in another order the overflowed product meets an
    infinity of the other sign and gives NaN (fuzz seed 20286211 #1918, bf16: -inf and inf on cpu, NaN on the ipu
    before)."""
    x = np.array([[[1e-3, -3.9e11, 7.4e9, -3.7e4], [1.3e11, np.inf, -5e-11, 1.7e3]]], np.float32)
    w = np.array([[[1, 1, 1], [1, 1, 1]], [[-1.5, -2.5, 3.39e38], [6.5, -0.5, -1.5]]], np.float32)
    # (two output features: of one, XLA:CPU's matrix-vector kernel adds in another order, which is not modelled)
    for dtype in (jnp.float32, jnp.bfloat16):
        check(conv(window_strides=(1,), padding=((1, 2),)), x.astype(dtype), w.astype(dtype))
