"""Denormal f32 inputs, and the algebraic simplifications XLA applies before XLA:CPU computes, bit for bit with cpu.

XLA:CPU runs with denormals flushed (MXCSR DAZ + FTZ): arithmetic reads a denormal operand as a zero of its sign and
flushes a denormal result, but what it does not compute (a select, a copy, an op its simplifier removed) passes a
denormal through, and libm calls see the raw bits. Which ops flush is therefore a property of each op and series:
- jaxlib 0.4.13: an elementwise maximum/minimum against +0 (relu: maxps/minps) returns a denormal as a zero of its
  sign, clamp returns the bound it ties with (clip(denormal, 0, 1) = +0), any other maximum (of two arrays, against
  another constant, a reduce's) returns it as it is, except against a constant XLA sees only through a call
  (jnp.clip's one bound), which maxps reads and returns with denormals as zeros;
- jaxlib 0.12: a maximum/minimum against a constant that is neither a zero nor NaN is maxss/minss, which returns x on
  a tie (max(-0, 1e-40) = -0);
- max(x, -x) and min(x, -x) are |x| and -|x| in jaxlib 0.12, of both operands flushed in jaxlib 0.4.13;
- sign is copysign(x != 0, x), so a denormal's sign is a zero of its sign;
- A + 0, A - 0, A * 1, A / 1 are A (XLA's simplifier), so a denormal A stays;
- jaxlib 0.12: fmod(A, c) of a constant power of two c of at least 1 in magnitude reads a denormal A as a zero (LLVM's
  code for frem by such a constant); by 0.5 or 3, and with jaxlib 0.4.13, A stays;
- jaxlib 0.4.13: where(p, X op Y, X) is X op where(p, Y, identity) (LLVM's fold), so a kept denormal X is flushed;
- pow(A, 0.5) is LLVM's |sqrt(A)| (A == -inf: inf), so a negative denormal gives +0, not libm's NaN; pow(A, 2) is A * A;
- jaxlib 0.4.13: sqrt(A * A) is |A|; cbrt is copysign(pow(|x|, 1/3), x); sinh is XLA's decomposition (expm1 below
  1, two exps above), so a denormal gives 0 and every value is cpu's bits; asinh reads a denormal as 0;
Arrays here are 64 long: XLA:CPU leaves arrays of 2-7 elements unvectorised, where an elementwise maximum returns
the denormal unflushed; the emulator flushes it at every size.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _conformance import BACKEND, CURRENT_SERIES, EXACT, check, host_facts, run_both
from jax import lax


def _inputs() -> np.ndarray:
    base = [1e-45, -1e-45, 1e-40, -1e-40, 1e-39, -1.1e-38, 1.17549435e-38, -1.17549435e-38, 2e-38, 0.0, -0.0,
            1e-20, -1e-20, 1.5, -2.5, 8.0, np.inf, -np.inf, np.nan, 3e38]
    rng = np.random.default_rng(3)
    tiny = rng.choice([-1.0, 1.0], 24) * np.exp2(rng.uniform(-149, -120, 24))
    rest = rng.standard_normal(64 - len(base) - len(tiny))
    return np.concatenate([base, tiny, rest]).astype(np.float32)


# jitted functions a program calls: XLA sees the constants they receive only once it has inlined them
_MAXIMUM_OF = jax.jit(jnp.maximum)
_MINIMUM_OF = jax.jit(jnp.minimum)

FUNCTIONS = {
    "sign": jnp.sign,
    "maximum": lambda x: jnp.maximum(x, 0.0),
    "minimum": lambda x: jnp.minimum(x, -0.0),
    "relu": jax.nn.relu,
    "clip": lambda x: jnp.clip(x, 0.0, 1.0),
    "clip_around_zero": lambda x: jnp.clip(x, -1.0, 1.0),
    "min_of_max": lambda x: jnp.minimum(jnp.maximum(x, 0.0), 1.0),  # a clamp, once XLA's simplifier has seen it
    "max_of_min": lambda x: jnp.maximum(jnp.minimum(x, 1.0), -1.0),
    "maximum_minus_zero": lambda x: jnp.maximum(x, -0.0),
    "minimum_one": lambda x: jnp.minimum(x, 1.0),
    "maximum_of_arrays": lambda x: jnp.maximum(x, x[::-1]),
    "maximum_of_zeros_and_denormals": lambda x: jnp.maximum(x, x * 0.0),  # a tie of two arrays: the select's lhs
    "minimum_of_zeros_and_denormals": lambda x: jnp.minimum(x * 0.0, x),
    "maximum_denormal_constant": lambda x: jnp.maximum(x, np.float32(1e-40)),
    "fmod_by_two": lambda x: jnp.fmod(x, np.float32(2)),
    "fmod_by_minus_eight": lambda x: jnp.fmod(x, np.float32(-8)),
    "fmod_by_one": lambda x: jnp.fmod(x, np.float32(1)),
    "fmod_by_a_half": lambda x: jnp.fmod(x, np.float32(0.5)),
    "fmod_by_three": lambda x: jnp.fmod(x, np.float32(3)),
    "minimum_negative_denormal_constant": lambda x: jnp.minimum(np.float32(-1e-40), x),
    "maximum_constant_through_a_call": lambda x: _MAXIMUM_OF(np.float32(1e-40), x),
    "minimum_zero_through_a_call": lambda x: _MINIMUM_OF(np.float32(0.0), x),
    "minimum_second_through_a_call": lambda x: _MINIMUM_OF(x, np.float32(-1e-40)),
    "clip_lower_only_denormal": lambda x: jnp.clip(x, np.float32(1e-40), None),
    "clip_upper_only_minus_zero": lambda x: jnp.clip(x, None, np.float32(-0.0)),
    "clip_to_nan": lambda x: jnp.clip(x, 0.0, np.float32(np.nan)),  # NaN everywhere on cpu
    "maximum_of_itself": lambda x: jnp.maximum(x, x),  # XLA's simplifier: max(A, A) = A, min(A, A) = A,
    "minimum_of_itself": lambda x: jnp.minimum(x, x),  # max(A, -inf) = A, min(A, inf) = A (no arithmetic)
    "maximum_minus_inf": lambda x: jnp.maximum(-jnp.inf, x),
    "minimum_inf": lambda x: jnp.minimum(x, jnp.inf),
    # windows of one element are that element (XLA's simplifier), padding the init value; a product's still multiply
    "cumsum_axis_of_one": lambda x: jnp.cumsum(x[None], axis=0),
    "cummax_axis_of_one": lambda x: lax.cummax(x[None], axis=0),
    "cumprod_axis_of_one": lambda x: jnp.cumprod(x[None], axis=0),
    "window_of_one": lambda x: lax.reduce_window(x, 0.0, lax.add, (1,), (1,), ((2, 1),)),
    "max_window_of_one": lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1,), (1,), "VALID"),
    "reduce_max": lambda x: jnp.max(jnp.stack([x, jnp.zeros_like(x)]), axis=0),
    # XLA's simplifier puts a constant on the right (max(0, x) is max(x, 0)); it sees constants through the calls it
    # inlines (jnp.clip's bounds in jax's own jitted function), a clamp of two infinite bounds is x in jaxlib 0.12
    "maximum_zero_first": lambda x: jnp.maximum(0.0, x),
    "minimum_zero_first": lambda x: jnp.minimum(0.0, x),
    "maximum_minus_zero_first": lambda x: jnp.maximum(-0.0, x),
    "min_of_max_infinite": lambda x: jnp.minimum(jnp.maximum(x, -jnp.inf), jnp.inf),
    "clip_infinite": lambda x: jnp.clip(x, -jnp.inf, jnp.inf),
    "clip_to_a_denormal": lambda x: jnp.clip(x, 0.0, 1e-40),  # jaxlib 0.4.13: the bound is read as 0
    # ... also in a branch, which calls jnp.clip's function: XLA inlines it there (fuzz seed 20286211 #863)
    "clip_to_a_denormal_in_a_branch": lambda x: lax.cond(x.size > 1, lambda a: jnp.clip(a, 0.0, 1e-40),
                                                         lambda a: a, x),
    "clip_lower_only_infinite_upper": lambda x: jnp.clip(x, -1.0, jnp.inf),
    "clamp_infinite": lambda x: lax.clamp(-jnp.float32(jnp.inf), x, jnp.float32(jnp.inf)),
    # jaxlib 0.12: max(select(p, A, B), A) is select(p, A, max(B, A)) (jnp.where is a call XLA inlines)
    "minimum_of_where": lambda x: jnp.minimum(jnp.where(jnp.arange(x.size) % 2 == 0, x, jnp.ones_like(x)), x),
    "maximum_of_where": lambda x: jnp.maximum(x, jnp.where(jnp.arange(x.size) % 3 == 0, -jnp.ones_like(x), x)),
    # ... also where jnp.where broadcasts the other branch inside its function (a scalar or a lower-rank array)
    "minimum_of_where_of_a_scalar": lambda x: jnp.minimum(x, jnp.where(jnp.arange(x.size) % 2 == 0, x, 0.0)),
    "maximum_of_where_of_a_scalar": lambda x: jnp.maximum(jnp.where(jnp.arange(x.size) % 3 == 0, -1.0, x), x),
    # ... which LLVM folds in XLA:CPU's fused loop only where that loop reads the select once: not when an op fused
    # with the extremum reads the select too
    "atan2_of_minimum_of_where": lambda x: (lambda s: jnp.arctan2(jnp.minimum(s, x), s))(
        jnp.where(jnp.arange(x.size) % 2 == 0, x, jnp.ones_like(x))),
    "where_of_minimum_of_where": lambda x: (lambda s: jnp.where(s > 2, s, jnp.minimum(s, x)))(
        jnp.where(jnp.arange(x.size) % 2 == 0, x, jnp.ones_like(x))),
    "add_zero": lambda x: x + 0.0,
    # a product with nothing to contract and a sum of nothing are zeros to XLA's simplifier: x + 0 is x (fuzz seed
    # 20286212 #2406)
    "add_an_empty_product": lambda x: x + (jnp.zeros(x.shape + (0,), x.dtype) @ jnp.zeros((0,), x.dtype)),
    "subtract_an_empty_sum": lambda x: x - jnp.zeros(x.shape + (0,), x.dtype).sum(-1),
    "zero_add": lambda x: 0.0 + x,
    "subtract_zero": lambda x: x - 0.0,
    "multiply_one": lambda x: x * 1.0,
    "divide_one": lambda x: x / 1.0,
    "power_half": lambda x: x ** 0.5,
    "power_two": lambda x: x ** 2.0,
    "power_operand": lambda x: jnp.power(jnp.abs(x), jnp.full_like(x, 0.5)),
    "sqrt_of_square": lambda x: jnp.sqrt(x * x),
    "sqrt_of_power_two": lambda x: jnp.sqrt(x ** 2.0),  # XLA makes pow(A, 2) A * A first (fuzz seed 20273101 #331)
    "cbrt": lax.cbrt,
    "sinh": jnp.sinh,
    "asinh": jnp.arcsinh,
    "atan": jnp.arctan,
    "asin": jnp.arcsin,  # jaxlib 0.4.13: 2 atan2(x, 1 + sqrt(1 - x^2)) flushes |x| < 2^-125 to a zero
    "atanh": jnp.arctanh,  # jaxlib 0.4.13: reads a denormal as a zero
    "abs_negate": lambda x: jnp.abs(-x),
    # max(x, -x) and min(-x, x): jaxlib 0.12's LLVM folds them into |x| and -|x| (a denormal kept); jaxlib 0.4.13
    # flushes both operands (a denormal x gives a zero of the first operand's sign)
    "maximum_of_negation": lambda x: jnp.maximum(-x, x),
    "maximum_negation_second": lambda x: jnp.maximum(x, -x),
    "minimum_of_negation": lambda x: jnp.minimum(-x, x),
    "minimum_negation_second": lambda x: jnp.minimum(x, -x),
    # XLA's simplifier: -0 - A is -A; pow(A, c) for c in 0, 1, 2, 3, -1 is 1, A, A * A, A * (A * A), 1 / A before
    # HandleDivide's A / pow(B, c) => A * pow(B, -c) could see it, and that rule's new power is simplified in turn
    "minus_zero_minus": lambda x: -0.0 - x,
    "power_one": lambda x: x ** 1.0,
    "power_three": lambda x: x ** 3.0,
    "reciprocal_of_square": lambda x: 1 / x ** 2.0,
    "reciprocal_of_cube": lambda x: 1 / x ** 3.0,
    "reciprocal_of_power_minus_one": lambda x: 1 / x ** -1.0,
    "reciprocal_of_power_minus_two": lambda x: 1 / x ** -2.0,
    "reciprocal_of_power_minus_three": lambda x: 1 / x ** -3.0,
    "reciprocal_of_power_minus_half": lambda x: 1 / x ** -0.5,
    "quotient_by_fourth_power": lambda x: x[::-1] / x ** 4.0,
    # jaxlib 0.4.13: LLVM folds select(p, X op Y, X) into X op select(p, Y, identity) in the fused loop, so where the
    # select keeps X the op reads a denormal X as a zero; jaxlib 0.12 keeps the select
    "select_of_sum": lambda x: jnp.where(x[::-1] > 0, x + x[::-1], x),
    "select_of_difference": lambda x: jnp.where(x[::-1] > 0, x, x - x[::-1]),
    "select_of_product": lambda x: jnp.where(x[::-1] > 0, x[::-1] * x, x),
    "select_of_quotient": lambda x: jnp.where(x[::-1] > 0, x / (2.0 + x[::-1] * x[::-1]), x),
    # ... also where the sum has other elementwise readers: XLA's fusion gives the select's loop its own copy
    "select_of_sum_read_again": lambda x: (lambda t: jnp.where(t > 100, 0.0, jnp.where(x[::-1] > 0, t, x)))(
        x + x[::-1]),
    # two broadcasts of x the same way (one of a broadcast: XLA merges it, then its CSE) are one A: min(A, A) is A
    "minimum_of_same_broadcasts": lambda x: jnp.minimum(x, jax.vmap(lambda _: x)(jnp.zeros(3, x.dtype))),
    # a sort along a dimension of one element is its operand (also through jnp.sort's call), and min(A, A) is A
    "minimum_of_sort_of_one": lambda x: (lambda y: jnp.minimum(jnp.sort(y, axis=1), y))(x[:, None]),
    # a reduce over dimensions of one element (its init the identity) is a reshape to XLA's simplifier
    "sum_of_one_row": lambda x: jnp.sum(x[None], axis=0),
    "product_of_one_row": lambda x: jnp.prod(x[None, None], axis=(0, 1)),
    "maximum_of_one_row": lambda x: jnp.max(x[None], axis=0),
    # real(complex(A, B)) is A and imag(complex(A, B)) is B, also where a loop's body returns its carry so: the loop's
    # result is its operand there (fuzz seed 20261901 #312), and min(A, A) is A
    "minimum_of_real_of_complex": lambda x: jnp.minimum(x, jnp.real(lax.complex(x, x[::-1]))),
    "minimum_of_imag_of_complex": lambda x: jnp.minimum(jnp.imag(lax.complex(x[::-1], x)), x),
    # jaxlib 0.12: LLVM folds max(A, dynamic_update_slice(A, U, i)) as it folds max(A, select(p, U, A)): A itself
    # outside the window (fuzz seed 20262101 #802)
    "maximum_of_an_update": lambda x: (lambda a: jnp.maximum(a, lax.dynamic_update_slice(
        a, x[::-1][:6].reshape(2, 3), (2, 5))))(x.reshape(8, 8)).reshape(-1),
    "minimum_of_an_update": lambda x: (lambda a: jnp.minimum(a, lax.dynamic_update_slice(
        a, x[::-1][:6].reshape(2, 3), (5, 1))))(x.reshape(8, 8)).reshape(-1),
    "minimum_of_a_loops_unchanged_carry": lambda x: jnp.minimum(
        x, lax.scan(lambda a, _: (jnp.real(lax.complex(a, x)), None), x, None, length=3)[0]),
    # A op scatter(identity, I, U, op) is scatter(A, I, U, op): A itself outside the windows. One window (XLA makes it
    # a dynamic-update-slice), both series, at any index, dropped too (fuzz seed 20270101 #8222); any number of
    # windows of a sum in jaxlib 0.12
    "plus_a_segment_sum_of_one_id": lambda x: x.reshape(8, 8) + jax.ops.segment_sum(
        x[::-1][:8][None], jnp.array([3]), num_segments=8),
    "plus_a_segment_sum_of_a_dropped_id": lambda x: jax.ops.segment_sum(
        x[::-1][:8][None], jnp.array([-2]), num_segments=8) + x.reshape(8, 8),
    "bf16_plus_a_segment_sum_of_a_dropped_id": lambda x: (x.astype(jnp.bfloat16) + jax.ops.segment_sum(
        x[:1].astype(jnp.bfloat16), jnp.array([70]), num_segments=64)).astype(jnp.float32),
    "plus_a_segment_sum_of_two_ids": lambda x: x.reshape(8, 8) + jax.ops.segment_sum(
        x[::-1][:16].reshape(2, 8), jnp.array([1, 6]), num_segments=8),
    "plus_a_scatter_at_a_computed_index": lambda x: x.reshape(8, 8) + jnp.zeros((8, 8)).at[
        jnp.argmax(x) % 8].add(x[::-1][:8]),
    "times_a_scatter_of_one_window": lambda x: x.reshape(8, 8) * jnp.ones((8, 8)).at[2].mul(x[8:16]),
    "maximum_with_a_scatter_of_one_window": lambda x: jnp.maximum(x.reshape(8, 8), jnp.full(
        (8, 8), -jnp.inf).at[5].max(x[::-1][:8])),
    # the rules for what reads A + 0 see A (XLA's simplifier removed the sum first): log(sqrt(A)) is 0.5 * log(A),
    # and jaxlib 0.4.13's sqrt(A * A) is |A| (fuzz seed 20270301 #821, #540)
    "log_of_a_root_plus_zero": lambda x: jnp.log(jnp.sqrt(x) + 0.0),
    "root_of_a_square_through_a_sum_with_zero": lambda x: jnp.sqrt((x + 0.0) * x),
    "f16_root_of_a_square_through_a_sum_with_zero": lambda x: (lambda h: jnp.sqrt((h + 0.0) * h))(
        jnp.clip(x, -100, 100).astype(jnp.float16)).astype(jnp.float32),
    # jaxlib 0.4.13: exp(A) * exp(B) is exp(A + B) and exp(A) / exp(B) is exp(A - B) (fuzz seed 20270101 #8343)
    "product_of_exps": lambda x: jnp.exp(x / 64) * jnp.exp(x[::-1] / 64),
    "product_of_three_exps": lambda x: jnp.exp(x / 64) * jnp.exp(x[::-1] / 64) * jnp.exp(x[::2].repeat(2) / 64),
    "quotient_of_exps": lambda x: jnp.exp(x / 64) / jnp.exp(x[::-1] / 64),
    # ... also through reshapes and broadcasts, which XLA moves onto the exponents (fuzz seed 20287211 #744)
    "product_of_exps_through_an_expand_dims": lambda x: jnp.expand_dims(jnp.exp(x / 8), 0) * jnp.exp(x / 8),
    "product_of_exps_through_broadcasts": lambda x: jnp.broadcast_to(jnp.exp(x / 8), (3, 64)) * jnp.exp(x / 8)[None],
    "product_of_exps_through_reshapes": lambda x: jnp.exp(x / 8).reshape(8, 8) * jnp.exp(x[::-1] / 8).reshape(8, 8),
    "f16_square_of_exp2": lambda x: jnp.square(jnp.exp2(jnp.clip(x, -20, 3).astype(jnp.float16))).astype(
        jnp.float32),
}


# jaxlib 0.12: op(pad(x, c), y), either side, where op(c, y) is y (a max with -inf, a min with inf, a product with 1,
# a sum with -0): XLA:CPU fuses the pad into the op's loop, where LLVM folds op(c, y) => y on the padding, so y is
# kept there as it is (fuzz seed 20270101 #8322). Not every loop shape: with the pad first, LLVM's vectorised
# loop leaves some elements unfolded for some paddings ((1, 1, 0), (1, 2, 2) of 64: an open fuzz entry);
# jaxlib 0.4.13's LLVM folds it or not by the loop's shape.
IDENTITY_PADDING = {
    "minimum_with_inf": (jnp.minimum, jnp.inf, [(16, 16, 0)]),
    "maximum_with_minus_inf": (jnp.maximum, -jnp.inf, [(2, 1, 1)]),
    "product_with_one": (jnp.multiply, 1.0, [(20, 14, 0)]),
    "sum_with_minus_zero": (jnp.add, -0.0, [(1, 2, 3)]),
}


@pytest.mark.skipif(not CURRENT_SERIES, reason="jaxlib 0.12's rule (0.4.13's LLVM folds it by the loop's shape)")
@pytest.mark.parametrize("pad_first", [True, False])
@pytest.mark.parametrize("name", sorted(IDENTITY_PADDING))
def test_an_op_with_its_identity_as_padding_keeps_the_other_operand_there(name, pad_first):
    op, value, config = IDENTITY_PADDING[name]
    y = _inputs()
    inner = (64 - config[0][0] - config[0][1] + config[0][2]) // (1 + config[0][2])
    x = np.linspace(-3, 3, inner).astype(np.float32)

    def f(x, y):
        padded = lax.pad(x, jnp.float32(value), config)
        return op(padded, y) if pad_first else op(y, padded)

    got, want = (np.asarray(v) for v in run_both(f, x, y))
    differ = _bits(got) != _bits(want)
    if pad_first:
        # where cpu's vectorised loop left op(c, y) unfolded (which elements depends on the host's vector loop),
        # cpu's value is that op under denormals-are-zero: y's zero of its sign; the ipu's must still be y
        denormal = (y != 0) & (np.abs(y) < np.finfo(np.float32).tiny)
        unfolded = denormal & (_bits(want) == _bits(np.copysign(np.float32(0), y))) & (_bits(got) == _bits(y))
        differ &= ~unfolded
    bad = np.flatnonzero(differ)
    assert bad.size == 0, f"{name}: {bad.size} of 64 differ from cpu; " + ", ".join(
        f"y={y[i]!r}: ipu {got[i]!r} cpu {want[i]!r}" for i in bad[:5])


def _bits(a: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(a), np.uint32(0x7FC00000), a.view(np.uint32))


# Functions whose other values the emulator computes with libm rather than XLA:CPU's expansion: bit for bit where
# the input is a denormal or a zero, a few ulp elsewhere.
APPROXIMATE = {"asinh", "atan", "asin", "atanh"} | ({"sinh"} if CURRENT_SERIES else set())  # (jaxlib 0.12's expm1)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_denormals_and_simplifications_match_cpu_bit_for_bit(name):
    x = _inputs()
    got, want = (np.asarray(v) for v in run_both(FUNCTIONS[name], x))
    differ = _bits(got) != _bits(want)
    if name in APPROXIMATE:
        tiny = np.abs(x) < np.float32(1.17549435e-38)
        close = np.isclose(got, want, rtol=4 * np.finfo(np.float32).eps, atol=0, equal_nan=True)
        differ = np.where(tiny, differ, ~close)
    bad = np.flatnonzero(differ)
    assert bad.size == 0, f"{name}: {bad.size} of {x.size} differ from cpu; " + ", ".join(
        f"x={x[i]!r}: ipu {got[i]!r} cpu {want[i]!r}" for i in bad[:5])


BF16_EXTREMA = {
    "clip": lambda x: jnp.clip(x, -1.0, 1.0),
    "maximum_of_constant": lambda x: jnp.maximum(x, -1.0),
    "minimum_of_constant": lambda x: jnp.minimum(x, 1.0),
    "relu": jax.nn.relu,
    "maximum": lambda x: jnp.maximum(x, x[::-1]),
    "clamp": lambda x: lax.clamp(jnp.bfloat16(-1), x, jnp.bfloat16(1)),
    "cumulative_maximum": lambda x: lax.cummax(x.reshape(8, 16), 1),
    "windowed_maximum": lambda x: lax.reduce_window(x.reshape(8, 16), -jnp.inf, lax.max, (2, 2), (1, 1), "VALID"),
}


@pytest.mark.parametrize("name", sorted(BF16_EXTREMA))
def test_bf16_extrema_of_denormals_match_cpu(name):
    """bf16 maxima and minima of bf16 denormals, bit for bit: jaxlib 0.4.13 treats them as f32 ones (jnp.clip's
    f32 bounds, converted to bf16 inside its call, are constants to XLA as they are to the emulator's rules; fuzz seed
    20261901 #2606: arctan2(x, clip(x, -1, 1)) of a denormal x is pi/2 there, not NaN); jaxlib 0.12 computes them in
    f32 with denormals read as zeros (on hosts with AVX512-BF16 too), or in bf16 keeping them on an AVX512-FP16
    core (cpu_features.h: hostIsFp16Core; not on a virtual CPU that sets the AVX512-FP16 bit under another model)."""
    x = np.concatenate([_inputs(), -_inputs()[::-1]]).astype(jnp.bfloat16)
    got, want = (np.asarray(v).astype(np.float32).reshape(-1) for v in run_both(BF16_EXTREMA[name], x))
    bad = np.flatnonzero(_bits(got) != _bits(want))
    assert bad.size == 0, f"{name}: {bad.size} of {x.size} differ from cpu; " + ", ".join(
        f"x={x[i]!r}: ipu {got[i]!r} cpu {want[i]!r}" for i in bad[:5])


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_bf16_extrema_of_every_pair_of_denormals_zeros_and_ones_match_cpu(name):
    """bf16 maximum and minimum of every ordered pair of ±d, ±2d (d a bf16 denormal), ±0, ±1 and NaN, bit for bit:
    on an AVX-512 host jaxlib 0.12 compares them with denormals read as zeros but returns the operand's bits, and on
    a tie keeps an exact +0 first operand (minimum: -0), else takes the second (scalar_ops.h ieeeAvx512); on others
    it reads denormals as zeros (ieee16Daz); jaxlib 0.4.13 treats them as f32 ones."""
    d = float(np.float32(9.18355e-41))
    values = np.array([d, -d, 2 * d, -2 * d, 0.0, -0.0, 1.0, -1.0, np.nan], np.float32).astype(jnp.bfloat16)
    a, b = (np.ascontiguousarray(v) for v in np.broadcast_arrays(values[:, None], values[None, :]))
    op = jnp.maximum if name == "maximum" else jnp.minimum
    got, want = (np.asarray(v).astype(np.float32).reshape(-1) for v in run_both(op, a, b))
    bad = np.flatnonzero(_bits(got) != _bits(want))
    assert bad.size == 0, f"{name}: {bad.size} of {got.size} differ from cpu; " + ", ".join(
        f"({a.flat[i]!r}, {b.flat[i]!r}): ipu {got[i]!r} cpu {want[i]!r}" for i in bad[:5])


# What else reads d = x - y beside jnp.where(p, d, x), and whether jaxlib 0.4.13's XLA:CPU fuses d into it (a copy of
# d in each loop, so the select's loop reads its copy alone and LLVM folds the select: a kept denormal x flushed).
READERS_OF_THE_DIFFERENCE = {
    "argmax": (lambda d: jnp.argmax(d), True),
    "sum": (lambda d: jnp.sum(d), True),
    "argmax over rows": (lambda d: jnp.argmax(d, 1), True),
    "cumsum over rows": (lambda d: jnp.cumsum(d, 1), True),
    "max over columns": (lambda d: jnp.max(d, 0), False),  # no fusion into a reduction over major dimensions only
    "dot": (lambda d: d @ d.T, False),
}


@pytest.mark.parametrize("reader", sorted(READERS_OF_THE_DIFFERENCE))
def test_a_select_of_a_difference_read_by_other_loops_too_folds_as_on_cpu(reader):
    """jaxlib 0.4.13: XLA duplicates d = x - y into each reader's loop it fuses into, so jnp.where(p, d, x) folds to
    x - where(p, y, 0) as it does with no other reader, and a denormal x it keeps is flushed; where a reader cannot
    take a copy, d is computed apart and x stays (fuzz seed 20261801 #501). jaxlib 0.12 never folds, nor does 0.4.13
    on an AVX-512 host, whose masked ops leave x as it is (the emulator's host facts say which)."""
    x = np.zeros((4, 8), np.float32)
    x[:, 0], x[:, 1], x[:, 2] = 2.9e-39, -2.9e-39, 1.5
    y, p = np.ones((4, 8), np.float32), np.zeros((4, 8), bool)
    p[:, 2] = True
    read, fused = READERS_OF_THE_DIFFERENCE[reader]
    f = lambda x, y, p: (lambda d: (jnp.where(p, d, x), read(d)))(x - y)  # noqa: E731
    check(f, x, y, p, **EXACT)
    cpu = np.asarray(jax.jit(f, backend="cpu")(x, y, p)[0])
    masked = BACKEND == "ipu" and host_facts().get("avx512")
    assert (cpu[0, 0] == 0) == (fused and not CURRENT_SERIES and not masked), "cpu's fusion of the difference changed"
