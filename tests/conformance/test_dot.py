"""dot_general (jnp.dot, matmul, einsum): batch and contracting dims, vectors, transposed operands, ipu against cpu.

Float inputs are non-integer and bounded away from zero, and each output may differ from cpu's by a few ulps of its
own scale (sum over K of |a||b|, see _conformance.check): any order of the sum in f32 meets that, while one dropped
term of K, or an f16 dot accumulated in f16 instead of f32, does not. Integer dots are exact (with wrap-around)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from _conformance import away_from_zero, check, random, small_ints
from jax import lax

TOLERANCE = {"float32": {"scale_ulps": 8}, "float16": {"scale_ulps": 2}, "int32": {}, "uint32": {}}


def inputs(dtype, shape, seed):
    return away_from_zero(dtype, shape, seed) if dtype.startswith("float") else small_ints(dtype, shape, seed)


@pytest.mark.parametrize("dtype", sorted(TOLERANCE))
def test_matmul_shapes(dtype):
    a, b, v, w = (inputs(dtype, shape, seed=i) for i, shape in enumerate([(37, 53), (53, 7), (53,), (37,)]))

    def f(a, b, v, w):
        return (jnp.dot(a, b), a @ v, w @ a, v @ v, jnp.matmul(a.T, w), b.T @ a.T, jnp.dot(a, a.T),
                jnp.dot(a[:, :0], b[:0]), jnp.dot(w[0], a), jnp.outer(v, w)[:3])

    check(f, a, b, v, w, **TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", sorted(TOLERANCE))
def test_einsum_batch_and_contracting_dims(dtype):
    x, y, z = (inputs(dtype, s, seed=i) for i, s in enumerate([(2, 3, 4, 5), (2, 3, 5, 6), (4, 5, 6)]))

    def f(x, y, z):
        return (jnp.einsum("abij,abjk->abik", x, y), jnp.einsum("abij,abjk->bik", x, y),
                jnp.einsum("bij,bkj->bik", x[0], x[1]), jnp.einsum("aij,ijk->ak", x[0], z),
                jnp.einsum("ijk,ijk->", z, z), jnp.einsum("baij,bajk->abik", x, y),
                lax.dot_general(x[0], z, (((1, 2), (0, 1)), ((), ()))))

    check(f, x, y, z, **TOLERANCE[dtype])


def test_large_f32_matmul_spread_over_tiles():
    a, b = away_from_zero("float32", (256, 300), seed=1), away_from_zero("float32", (300, 129), seed=2)
    check(lambda a, b: a @ b, a, b, scale_ulps=8)
    h = np.tanh(a[:, :129])  # an input of mixed magnitudes too
    check(lambda h, b: h @ b.T, h, b, scale_ulps=8)


def test_dot_of_operands_read_across_their_rows():
    # Contracting dimension first in the lhs and last in the rhs (a gradient's dots): both are staged transposed.
    a, b = away_from_zero("float32", (300, 257), seed=1), away_from_zero("float32", (129, 300), seed=2)
    check(lambda a, b: (jnp.einsum("ki,jk->ij", a, b), lax.dot_general(a, b.T, (((0,), (0,)), ((), ())))), a, b,
          scale_ulps=8)


def test_f16_dot_accumulates_in_f32():
    # Positive terms: the partial sums grow to the result, so an f16 accumulator's roundings (half an ulp of each
    # partial, K of them) add up to several ulps of the scale, while an f32 accumulator rounded once stays within one.
    a, b = random("float16", (64, 512), seed=1, low=0.25, high=2.0), random("float16", (512, 48), seed=2, low=0.25,
                                                                             high=2.0)
    check(lambda a, b: (a @ b, jnp.einsum("ik,jk->ij", a, b.T)), a, b, scale_ulps=2)


def test_float_operands_of_different_types_widen_to_the_f32_result():
    # f32 x bf16 -> f32, as the transpose of jax 0.12's dot_product_attention writes it: each operand widens exactly
    # to f32, as XLA computes it (the program converts the bf16 one; run by the emulator against numpy).
    import ml_dtypes

    from jax_ipu import emulator
    from jax_ipu.compiler import compile_to_program

    text = """
      func.func public @main(%a: tensor<24x40xf32>, %b: tensor<40x8xbf16>) -> tensor<24x8xf32> {
        %0 = "stablehlo.dot_general"(%a, %b) {dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1],
             rhs_contracting_dimensions = [0]>} : (tensor<24x40xf32>, tensor<40x8xbf16>) -> tensor<24x8xf32>
        return %0 : tensor<24x8xf32>
      }"""
    program = compile_to_program(text.encode())
    assert '"op":"convert"' in program.replace(" ", "")
    a = away_from_zero("float32", (24, 40), seed=31)
    b = away_from_zero("float32", (40, 8), seed=32).astype(ml_dtypes.bfloat16)
    (got,) = emulator.compile(program).run(a, b)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_dot_of_one_term_is_the_product_with_its_sign_of_zero():
    # XLA rewrites a dot whose contraction has one term into a multiply: -0 products stay -0 on cpu (the old kernel
    # added them to a +0 accumulator). Longer contractions add from +0 on both.
    a = np.zeros((2, 129, 1), np.float32)
    b = np.array([[0.0, 1.0, -0.0, 3.0, -0.5671727]], np.float32)
    c = np.array([[-0.0, -0.0], [-0.0, -0.0]], np.float32)
    check(lambda a, b, c: (a @ b, jnp.outer(a[0, :, 0], b[0]), jnp.ones((3, 2), np.float32) @ c, -a[0] @ b), a, b, c)


def _host_has_fma() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and " fma " in f" {line.split(':', 1)[1]} " for line in f)
    except OSError:
        return False


@pytest.mark.skipif(not _host_has_fma(), reason="XLA:CPU and the emulator fuse a dot's multiply-adds on FMA hosts")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_dot_fuses_each_product_into_its_sum_as_cpu_does(dtype):
    # [-3.376e38, -37] . [-11.125, 3.376e38]: the first product overflows to inf, and the second, fused into it,
    # leaves inf (cpu); rounded first, it is -inf and the sum NaN (the emulator before). Short dots are then cpu's
    # bits: the products added in order, each in one fused multiply-add.
    a = np.array([[-3.376e38, -37.0]], np.float32).astype(dtype)
    b = np.array([[-11.125], [3.376e38]], np.float32).astype(dtype)
    check(lambda a, b: a @ b, a, b)
    x, y = random(dtype, (64, 2), seed=3), random(dtype, (2, 48), seed=4)
    check(lambda x, y: (x @ y, x[:, :1] @ y[:1]), x, y)


def test_a_smaller_available_memory_proportion_plans_in_row_chunks(monkeypatch):
    """JAX_IPU_AVAILABLE_MEMORY_PROPORTION (poplin's availableMemoryProportion, read at each compile): a jitted
    matmul whose plan needs more than that share of a tile runs in row chunks, one superstep each, with cpu's
    values within the same tolerance."""
    import jax

    import jax_ipu

    if jax.devices("ipu")[0].num_tiles < 256:
        pytest.skip("12 MB of operands and result: a whole IPU's memory, not a few tiles'")
    a, b = inputs("float32", (512, 2048), seed=1), inputs("float32", (2048, 1024), seed=2)
    check(jnp.matmul, a, b, **TOLERANCE["float32"])
    default = jax_ipu.last_execution()["supersteps"]
    monkeypatch.setenv("JAX_IPU_AVAILABLE_MEMORY_PROPORTION", "0.02")
    jax.clear_caches()
    check(jnp.matmul, a, b, **TOLERANCE["float32"])
    assert jax_ipu.last_execution()["supersteps"] > default
    monkeypatch.undo()
    jax.clear_caches()  # later tests compile with the default share again


@pytest.mark.parametrize("op", ["matmul", "conv"])
def test_half_partials_are_chosen_by_a_flag(monkeypatch, op):
    """JAX_IPU_PARTIALS_TYPE=half (poplin's partialsType, read at each compile): a jitted f16 matmul or convolution
    whose K is split over tiles keeps its partials in f16, as Graphcore's fp16 models ran: less exchange, and cpu's
    values within the partials' own rounding (half an f16 ulp of each of a few partials on top of the result's)."""
    import jax

    import jax_ipu

    a, b = inputs("float16", (32, 4096), seed=1), inputs("float16", (4096, 16), seed=2)
    if op == "matmul":
        def f(a, b):
            return a @ b
    else:
        def f(a, b):
            x, w = a.reshape(2, 4, 4, 4096), b.reshape(1, 1, 4096, 16)
            return lax.conv_general_dilated(x, w, (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    check(f, a, b, **TOLERANCE["float16"])
    exchange = jax_ipu.last_execution()["exchange_cycles"]
    monkeypatch.setenv("JAX_IPU_PARTIALS_TYPE", "half")
    jax.clear_caches()
    check(f, a, b, scale_ulps=8)
    assert jax_ipu.last_execution()["exchange_cycles"] < exchange
    monkeypatch.undo()
    jax.clear_caches()  # later tests compile with float partials again
