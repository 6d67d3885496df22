"""Pooling and remat, ipu against cpu: reduce_window (max/avg pooling, dilations, general and variadic bodies),
select_and_scatter (the max-pool gradient), cumulative ops, jax.checkpoint (optimization_barrier) and
lax.reduce_precision."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _conformance import BACKEND, check, random, skip_unless_memory, small_ints
from jax import lax

# Max/min pooling and integer sums are exact. Float sums over a window are accumulated in the same order as
# XLA:CPU, so they agree to a few ulp of the sum (a window of k terms of size <= 4); f16 rounds after every add.
SUM = {"float32": {"rtol": 1e-6, "atol": 1e-6}, "float16": {"rtol": 1e-3, "atol": 4e-3}}
# Gradients pass through more float ops (a dense layer, a conv), summed in a different order than XLA's fusions.
GRAD = {"rtol": 2e-5, "atol": 2e-5}


def lowered(f, *args) -> str:
    """The StableHLO jax emits for the ipu (so a test can say which op it covers)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return jax.jit(f, backend=BACKEND).lower(*args).as_text()


def window_args(layout, window, strides, padding):
    """Full-rank window dimensions, strides and padding for a 2-D pool over NHWC or NCHW."""
    if not isinstance(padding, str):
        padding = ((0, 0),) + tuple(padding) + ((0, 0),) if layout == "NHWC" else ((0, 0), (0, 0)) + tuple(padding)
    if layout == "NHWC":
        return (1,) + window + (1,), (1,) + strides + (1,), padding
    return (1, 1) + window, (1, 1) + strides, padding


def max_pool(x, layout, window, strides, padding, dilation=(1, 1)):
    dims, strides, padding = window_args(layout, window, strides, padding)
    wdil = (1,) + dilation + (1,) if layout == "NHWC" else (1, 1) + dilation
    return lax.reduce_window(x, -jnp.inf, lax.max, dims, strides, padding, window_dilation=wdil)


def avg_pool(x, layout, window, strides, padding):
    dims, strides, padding = window_args(layout, window, strides, padding)
    sums = lax.reduce_window(x, 0.0, lax.add, dims, strides, padding)
    counts = lax.reduce_window(jnp.ones_like(x), 0.0, lax.add, dims, strides, padding)
    return sums / counts


POOLS = [  # window, strides, padding, window dilation
    ((2, 2), (2, 2), "VALID", (1, 1)),
    ((3, 3), (2, 2), "SAME", (1, 1)),
    ((3, 2), (1, 2), "SAME", (1, 1)),
    ((2, 3), (1, 1), ((1, 0), (2, 1)), (1, 1)),
    ((2, 2), (1, 1), "VALID", (2, 2)),
    ((3, 3), (2, 1), "SAME", (2, 1)),
]


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("window, strides, padding, dilation", POOLS)
def test_max_and_avg_pooling(layout, window, strides, padding, dilation):
    shape = (2, 9, 8, 3) if layout == "NHWC" else (2, 3, 9, 8)
    x = random("float32", shape, seed=1)
    check(lambda x: max_pool(x, layout, window, strides, padding, dilation), x)
    if dilation == (1, 1):
        check(lambda x: avg_pool(x, layout, window, strides, padding), x, **SUM["float32"])


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "uint32"])
def test_pooling_dtypes_and_base_dilation(dtype):
    x = small_ints(dtype, (3, 10, 7), seed=2)
    tol = SUM.get(dtype, {})
    check(lambda x: (lax.reduce_window(x, np.array(0, dtype), lax.add, (1, 3, 2), (1, 2, 1), "SAME"),
                     lax.reduce_window(x, np.array(1, dtype), lax.mul, (1, 2, 1), (1, 2, 1), "VALID"),
                     lax.reduce_window(x, np.array(np.iinfo(dtype).min if dtype[0] in "iu" else -np.inf, dtype),
                                       lax.max, (1, 2, 3), (1, 1, 1), ((0, 0), (1, 2), (3, 0)),
                                       base_dilation=(1, 2, 1), window_dilation=(1, 1, 2))), x, **tol)


def test_pooling_nan_inf_and_bool():
    x = np.array([[1.0, np.nan, -np.inf], [np.inf, 2.0, -0.0], [0.0, -1.0, 3.0]], np.float32)
    b = np.array([[True, False, False], [False, False, True]])
    check(lambda x, b: (lax.reduce_window(x, -jnp.inf, lax.max, (2, 2), (1, 1), "SAME"),
                        lax.reduce_window(x, jnp.inf, lax.min, (2, 1), (1, 1), "VALID"),
                        lax.reduce_window(b, False, lax.bitwise_or, (1, 2), (1, 1), "VALID"),
                        lax.reduce_window(b, True, lax.bitwise_and, (2, 2), (1, 1), "SAME")), x, b)


def test_general_and_variadic_bodies():
    x = random("float32", (6, 7), seed=3)
    idx = lax.broadcasted_iota(jnp.int32, (6, 7), 1)

    def argmax_pool(x):  # variadic: (value, index) pairs, the larger value (the first on ties) wins
        def body(a, b):
            take_b = b[0] > a[0]
            return lax.select(take_b, b[0], a[0]), lax.select(take_b, b[1], a[1])
        return lax.reduce_window((x, idx), (-jnp.inf, 0), body, (2, 3), (1, 2), "SAME")

    def sum_of_squares(x):  # not a monoid jax knows: the body is interpreted
        return lax.reduce_window(x, 0.0, lambda a, b: a + b * b, (3, 2), (2, 1), "VALID")

    assert lowered(argmax_pool, x).count("stablehlo.reduce_window") == 1
    check(argmax_pool, x)
    check(sum_of_squares, x, **SUM["float32"])


def test_body_calling_functions_is_inlined():
    """jnp.where inside a body is a func.call in jax's module: the front end inlines it (JAX's own
    test_variadic_reduce_window, a norm-argmax pooling under vmap)."""
    def normpool(x):
        norms, idxs = jnp.linalg.norm(x, axis=-1), jnp.arange(x.shape[0])

        def body(a, b):
            which = a[0] >= b[0]
            return jnp.where(which, a[0], b[0]), jnp.where(which, a[1], b[1])
        _, best = lax.reduce_window((norms, idxs), (-jnp.inf, -1), body, (2,), (2,), "VALID")
        return x[best]

    x = random("float32", (3, 8, 3), seed=4)
    assert "func.call" in lowered(jax.vmap(normpool), x)
    check(jax.vmap(normpool), x)


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("window, strides, padding, dilation", [p for p in POOLS if p[3] == (1, 1)])
def test_pooling_gradients(layout, window, strides, padding, dilation):
    shape = (2, 9, 8, 3) if layout == "NHWC" else (2, 3, 9, 8)
    x = random("float32", shape, seed=4)
    weights = random("float32", max_pool(x, layout, window, strides, padding).shape, seed=5)
    max_grad = jax.grad(lambda x: jnp.sum(max_pool(x, layout, window, strides, padding) * weights))
    avg_grad = jax.grad(lambda x: jnp.sum(avg_pool(x, layout, window, strides, padding) * weights))
    assert "stablehlo.select_and_scatter" in lowered(max_grad, x)
    check(max_grad, x, **SUM["float32"])
    check(avg_grad, x, **SUM["float32"])


@pytest.mark.parametrize("channels", [1, 11, 16])
def test_max_pool_gradient_ties_go_to_the_first_element(channels):
    # All-equal windows: XLA selects the first element of each window in window order (GE keeps the current one).
    # Channels side by side are selected together (8 at a time where the host has AVX2, the rest one by one); a NaN
    # is selected over a number and a number over a NaN (GE is false either way).
    x = np.ones((1, 6, 6, channels), np.float32)
    x[0, 2:4, 2:4, :] = 5.0
    x[0, 1, 1, ::3] = np.nan
    x[0, 4, 0, 1::2] = np.nan
    check(jax.grad(lambda x: jnp.sum(max_pool(x, "NHWC", (3, 3), (1, 1), "SAME") ** 2)), x)
    check(jax.grad(lambda x: jnp.sum(max_pool(x, "NHWC", (2, 2), (2, 2), "VALID"))), x)


def test_cnn_training_step_with_max_pooling():
    rng = np.random.default_rng(6)
    x = rng.normal(size=(4, 12, 12, 3)).astype(np.float32)
    y = rng.normal(size=(4, 5)).astype(np.float32)
    params = {"conv": (rng.normal(size=(3, 3, 3, 8)) / 5).astype(np.float32), "bias": np.zeros(8, np.float32),
              "dense": (rng.normal(size=(6 * 6 * 8, 5)) / 20).astype(np.float32)}

    def loss(p, x, y):
        h = lax.conv_general_dilated(x, p["conv"], (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        h = jax.nn.relu(h + p["bias"])
        h = max_pool(h, "NHWC", (2, 2), (2, 2), "VALID")
        return jnp.mean((h.reshape(h.shape[0], -1) @ p["dense"] - y) ** 2)

    def step(p, x, y):
        value, grads = jax.value_and_grad(loss)(p, x, y)
        return value, jax.tree_util.tree_map(lambda w, g: w - 0.1 * g, p, grads)

    assert "stablehlo.select_and_scatter" in lowered(step, params, x, y)
    check(step, params, x, y, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_cumulative_ops_and_their_gradients(dtype):
    x = (small_ints(dtype, (5, 6, 4), seed=7) // (10 if dtype == "int32" else 1))
    if dtype == "float32":
        x = (x / 32 + 1).astype(dtype)
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == "float32" else {}
    ops = [jnp.cumsum, jnp.cumprod, lambda x, axis: lax.cummax(x, axis), lambda x, axis: lax.cummin(x, axis)]
    check(lambda x: [op(x, axis=a) for op in ops for a in (0, 1, 2)] + [lax.cumsum(x, 1, reverse=True)], x, **tol)
    if dtype == "float32":
        check(lambda x: [lax.cumlogsumexp(x, a) for a in (0, 2)], x, **tol)
        check(jax.grad(lambda x: jnp.sum(jnp.cumsum(x, 1) * jnp.cumprod(x, 2)) + jnp.sum(lax.cummax(x, 0))), x, **tol)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32"])
@pytest.mark.parametrize("shape, axis", [((3000,), 0), ((17,), 0), ((5, 4099), 1), ((300, 7), 0), ((3, 40, 7), 1)])
def test_long_cumulative_ops_are_cpus_bits(dtype, shape, axis):
    """jaxlib 0.12 lowers jnp.cumsum and friends to a reduce_window over the whole axis, which XLA:CPU rewrites
    into a scan in rows of 16 (its ReduceWindowRewriter): the ipu computes the same tree, bit for bit, in linear
    time (it used to add every window in turn: quadratic, out of tile memory from ~2^27 element-windows); jaxlib
    0.4.13 lowers them to jax's associative scan, bit for bit as well."""
    rng = np.random.default_rng(3)
    x = rng.integers(-5, 5, shape) if dtype == "int32" else rng.standard_normal(shape)
    x = jnp.asarray(x, dtype)
    check(lambda x: [jnp.cumsum(x, axis), lax.cumsum(x, axis, reverse=True), lax.cummax(x, axis),
                     lax.cummin(x, axis, reverse=True), jnp.cumprod(x % 2 + 1 if dtype == "int32" else 1 + x / 1e3,
                                                                    axis)], x)
    if dtype != "int32":  # a body of several ops (logaddexp), applied to whole arrays as XLA's map does; XLA:CPU
        # may fuse its exp and log1p with their neighbours (an ulp here and there)
        check(lambda x: [lax.cumlogsumexp(x, axis), lax.cumlogsumexp(x, axis, reverse=True)], x,
              rtol=2.5e-7 if dtype == "float32" else 1e-2)


def test_bf16_windows_of_one_element_flush_denormals_as_cpu():
    """A window of one element is that element (XLA's simplifier), but not a bf16 one in jaxlib 0.12, which XLA:CPU
    computes between converts to and from f32 as init + x: a bf16 denormal comes out as a zero there."""
    x = jnp.asarray(np.array([2.9e-39, -2.9e-39, 1e-39, 0.5, -3.0, 0.0, -0.0, 7.0], np.float32), jnp.bfloat16)
    check(lambda x: [jnp.cumsum(x[:, None], axis=1), lax.reduce_window(x, jnp.bfloat16(0), lax.add, (1,), (1,),
                                                                       "VALID")], x)


def test_long_cumsum_is_linear_and_exact():
    """2^22 elements: quadratic in the old lowering (hours), and a running f32 sum would stall at 2^24 where cpu's
    tree of rows does not."""
    skip_unless_memory(68_000_000, "a cumsum of 2^22 floats")
    x = jnp.ones((2 ** 22,), jnp.float32) * 3
    check(lambda x: [jnp.cumsum(x)[::4097], lax.cumlogsumexp(x[:2 ** 18] / 3)[::4097]], x)


def test_checkpointed_mlp_gradient():
    rng = np.random.default_rng(8)
    params = [((rng.normal(size=(16, 32)) / 4).astype(np.float32), np.zeros(32, np.float32)),
              ((rng.normal(size=(32, 32)) / 6).astype(np.float32), np.full(32, 0.1, np.float32)),
              ((rng.normal(size=(32, 4)) / 6).astype(np.float32), np.zeros(4, np.float32))]
    x = rng.normal(size=(8, 16)).astype(np.float32)

    @jax.checkpoint
    def layer(wb, h):
        return jnp.tanh(h @ wb[0] + wb[1])

    def loss(params, x):
        for wb in params:
            x = layer(wb, x)
        return jnp.sum(x ** 2)

    grad = jax.grad(loss)
    assert "stablehlo.optimization_barrier" in lowered(grad, params, x)
    check(grad, params, x, **GRAD)
    check(jax.value_and_grad(jax.checkpoint(loss)), params, x, **GRAD)


def test_optimization_barrier_of_mixed_operands():
    from _conformance import optimization_barrier as _optimization_barrier

    x = random("float32", (5, 3), seed=9)
    i = random("int32", (7,), seed=9)

    def f(x, i):
        a, b, c = _optimization_barrier((x * 2, i, x))
        return a + c, b - 1, c  # c is the parameter itself, returned through the barrier

    assert "stablehlo.optimization_barrier" in lowered(f, x, i)
    check(f, x, i)


def bits(dtype, values):
    return np.array(values, dtype={"float32": np.uint32, "float16": np.uint16}[dtype]).view(dtype)


EDGES = {
    "float32": np.concatenate([
        np.array([0.0, -0.0, 1.0, -1.5, np.inf, -np.inf, np.nan, 3.4e38, -3.4e38, 65504.0, 65519.0, 65520.0,
                  -65520.0, 6.1e-5, 6.0e-5, 3.0e-5, 2.0 ** -14, 2.0 ** -15, 2.0 ** -24, 1e-40, -1e-45, 1e-38,
                  1.17549435e-38, 123.456, 0.1], np.float32),
        # bf16 halfway cases: 1 + 2^-8 (ties to even: 1), 1 + 3 * 2^-8 (up), just above and below a half, and the
        # largest float (rounds to infinity), a NaN with a payload only in the low bits
        bits("float32", [0x3F808000, 0x3F818000, 0x3F808001, 0x3F807FFF, 0x7F7FFFFF, 0x7F800001, 0xFFC00001,
                         0x00008000, 0x00018000, 0x807FFFFF, 0x3F800FFF, 0x33800000, 0x33000000, 0x387FE000]),
    ]),
    "float16": np.concatenate([
        np.array([0.0, -0.0, 1.0, -1.5, np.inf, -np.inf, np.nan, 65504.0, -65504.0, 6.1e-5, 6.0e-8, 1e-7, 0.1,
                  123.4, 2.0 ** -14], np.float16),
        bits("float16", [0x3C20, 0x3C60, 0x3C21, 0x3C1F, 0x7BFF, 0x7C01, 0xFE01, 0x0001, 0x0201, 0x83FF]),
    ]),
}
FORMATS = {"float32": [(8, 7), (5, 10), (8, 23), (5, 2), (4, 3), (11, 52), (2, 1), (3, 0)],
           "float16": [(5, 10), (5, 7), (4, 3), (5, 2), (3, 5), (2, 0)]}


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_reduce_precision_matches_xla_on_edge_values(dtype):
    x = EDGES[dtype]
    formats = FORMATS[dtype]
    assert lowered(lambda x: lax.reduce_precision(x, 8, 7), x).count("stablehlo.reduce_precision") == 1
    check(lambda x: [lax.reduce_precision(x, e, m) for e, m in formats], x)
    # random values over the whole exponent range of the type
    span = 40.0 if dtype == "float32" else 8.0
    r = (np.sign(random("float32", (4097,), seed=10)) * 2.0 ** random("float32", (4097,), seed=11, low=-span,
                                                                         high=span)).astype(dtype)
    check(lambda x: [lax.reduce_precision(x, e, m) for e, m in formats], r)
