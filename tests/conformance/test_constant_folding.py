"""Elementwise ops of constants, which XLA folds on the host (libm, in double or float) before it compiles the rest,
ipu against cpu, bit for bit (compiler/fold_constants.py). The ipu computes an op of a value the way XLA:CPU's
compiled loops do; an op of a constant must come out as XLA's folding makes it, an ulp away on many inputs."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _conformance import CURRENT_SERIES, EXACT, check, random
from jax import lax

# op -> (function, range of its constants)
OPS = {
    "exponential": (jnp.exp, (-20, 20)), "exponential_minus_one": (jnp.expm1, (-5, 5)), "log": (jnp.log, (0.01, 100)),
    "log_plus_one": (jnp.log1p, (-0.9, 10)), "sine": (jnp.sin, (-10, 10)), "cosine": (jnp.cos, (-10, 10)),
    "tan": (jnp.tan, (-1.5, 1.5)), "tanh": (jnp.tanh, (-10, 10)), "sqrt": (jnp.sqrt, (0, 100)),
    "rsqrt": (lax.rsqrt, (0.01, 100)), "cbrt": (jnp.cbrt, (-100, 100)), "logistic": (jax.nn.sigmoid, (-10, 10)),
    "erf": (lax.erf, (-4, 4)),
    "power": (lambda c: c ** jnp.asarray(1.7, c.dtype), (0.01, 10)),
    "atan2": (lambda c: jnp.arctan2(c, jnp.asarray(0.7, c.dtype)), (-10, 10)),
    "chain": (lambda c: jnp.exp(c * 2 - 1) / jnp.tanh(c + 0.5), (0.1, 3)),  # a fold reads a folded op
    "after_evaluator": (lambda c: jnp.tanh(jnp.expm1(c)) + jnp.log(jnp.cbrt(c) + 2), (0.01, 2)),  # all in float
}
# Ops XLA expands into polynomials of other ops before it folds them. On jaxlib 0.12 the expansions of erf_inv and
# digamma are float ops, comparisons and selects, which fold op by op as XLA's do; lgamma's reads its argument's bits
# as integers, which are not folded here, and jaxlib 0.4.13's are left to the ipu (computed as XLA:CPU's loops do).
EXPANDED = {"erf_inv": (lax.erf_inv, (-0.99, 0.99)), "lgamma": (lax.lgamma, (0.1, 10)),
            "digamma": (lax.digamma, (0.1, 10))}
FOLDED_DTYPES = ("float32", "float16", "bfloat16")


def _constants(dtype, low, high, n=2000, seed=0):
    return random("float32", (n,), seed=seed, low=low, high=high).astype(jnp.dtype(dtype))


def _expanded_xfail(name, dtype):
    if (name in EXPANDED and (name == "lgamma" or not CURRENT_SERIES)) or \
            (name == "erf" and dtype == "float32" and not CURRENT_SERIES):
        return pytest.mark.xfail(strict=True, reason="XLA folds its expansion op by op; the ipu computes the op")
    return []


@pytest.mark.parametrize("name,dtype", [pytest.param(n, d, marks=_expanded_xfail(n, d))
                                        for n in sorted(OPS) for d in FOLDED_DTYPES] +
                         [pytest.param(n, "float32", marks=_expanded_xfail(n, "float32")) for n in sorted(EXPANDED)])
def test_op_of_constants(name, dtype):
    """2,000 constants in one dense constant, and three of them alone (splats, broadcast as jax writes them)."""
    op, (low, high) = {**OPS, **EXPANDED}[name]
    values = _constants(dtype, low, high)

    def f(x, ones):
        return [x * op(jnp.asarray(values))] + [ones * op(jnp.asarray(v, dtype)) for v in values[:3]]

    check(f, np.ones(values.shape, dtype), np.ones((4,), dtype), **EXACT)


def test_divide_by_folded_exponential():
    """XLA folds exp(c) before its simplifier sees x / exp(c) (so it is x * (1 / C), not x * exp(-c)), and
    exp(c) * exp(x) stays a product."""
    cs = _constants("float32", 0.01, 5, n=40, seed=1)

    def f(x):
        return [x / jnp.exp(jnp.float32(c)) for c in cs] + [jnp.exp(jnp.float32(c)) * jnp.exp(x) for c in cs[:8]] + \
            [x / jnp.exp(jnp.full(x.shape, c, jnp.float32)) for c in cs[:8]]

    check(f, random("float32", (8,), seed=2, low=0.5, high=2), **EXACT)


def test_private_function_of_constants():
    """jaxlib 0.4.13 writes jax.nn.sigmoid as a call of @sigmoid: XLA inlines it, then folds it in float."""
    cs = _constants("float32", -10, 10, n=64, seed=3)
    check(lambda x: [x * jax.nn.sigmoid(jnp.float32(c)) for c in cs], np.ones((4,), np.float32), **EXACT)


def test_large_constant():
    """More elements than jaxlib 0.4.13's MLIR folders take (65,536): its evaluator folds them, in float."""
    values = _constants("float32", -3, 3, n=70000, seed=4)
    check(lambda x: [x * jnp.tanh(jnp.asarray(values)), x * jnp.exp(jnp.asarray(values))],
          np.ones(values.shape, np.float32), **EXACT)


def test_constants_in_a_loop_body():
    """A constant op inside a loop's body folds there too, and so does one of a constant the loop carries (jax
    passes what the body captures as loop operands; XLA sinks them into the body, then folds in float)."""
    cs = _constants("float32", -3, 3, n=16, seed=5)

    def f(x):
        return lax.fori_loop(0, 3, lambda i, acc: acc * jnp.tanh(jnp.asarray(cs)) + jnp.exp(jnp.float32(0.3)), x)

    check(f, np.ones(cs.shape, np.float32), **EXACT)


def test_constants_in_a_branch():
    """A constant a conditional's branch reads from outside it folds there (MLIR's folders see it)."""
    cs = _constants("float32", -3, 3, n=300, seed=6)

    def f(p, x):
        return lax.cond(p, lambda x: x * jnp.tanh(jnp.asarray(cs)), lambda x: x * jnp.exp(jnp.asarray(cs)), x)

    x = np.ones(cs.shape, np.float32)
    check(f, np.bool_(True), x, **EXACT)
    check(f, np.bool_(False), x, **EXACT)


SPECIALS = {  # op -> constants with NaN, infinities, zeros and out-of-domain values
    "log": (jnp.log, (-1, -0.0, 0, 4, np.nan, np.inf)), "sqrt": (jnp.sqrt, (-1, -0.0, 4, -np.inf, np.nan, 2)),
    "rsqrt": (lax.rsqrt, (-1, -0.0, 0, 4, np.inf, np.nan)), "log1p": (jnp.log1p, (-2, -1, 4, np.inf, -np.inf, np.nan)),
    "exp": (jnp.exp, (np.nan, -np.nan, np.inf, -np.inf, 89, -104)),
    "tanh": (jnp.tanh, (np.nan, -np.inf, 0, -0.0, 9, 1)),
    "sin": (jnp.sin, (np.inf, -np.inf, np.nan, -0.0, 1e30, 3)), "cos": (jnp.cos, (np.inf, -np.inf, np.nan, 0, 1e30, 3)),
    "tan": (jnp.tan, (np.inf, -np.inf, np.nan, -0.0, 1e30, 3)),
    "cbrt": (jnp.cbrt, (-8, np.nan, -0.0, np.inf, 1e-40, 2)),
    "divide": (lambda c: c / c[::-1], (0, 1, -1, np.inf, 0, np.nan)),
    "subtract": (lambda c: c - c[::-1], (np.inf, 1, np.nan, -0.0, 2, np.inf)),
    "multiply": (lambda c: c * c[::-1], (np.inf, 1, -0.0, 0, np.nan, 0)),
}


@pytest.mark.parametrize("name", sorted(SPECIALS))
def test_special_values_of_constants(name):
    """NaN, infinities, signed zeros and out-of-domain constants, bit for bit, NaN's sign included: MLIR's folders
    give APFloat's +NaN for an invalid operation (0 / 0, inf - inf), libm its -NaN; jaxlib 0.4.13 folds no log of a
    non-positive value (cpu's log(-1) is +NaN there)."""
    op, values = SPECIALS[name]
    c = np.array(values, np.float32)

    def f(x):
        return x * op(jnp.asarray(c))

    x = np.ones(c.shape, np.float32)
    cpu = np.asarray(jax.jit(f, backend="cpu")(x))
    ipu = np.asarray(jax.jit(f, backend="ipu")(x))
    assert cpu.view(np.uint32).tolist() == ipu.view(np.uint32).tolist(), (cpu, ipu)


MOVES = {"reverse": lambda a: a[::-1], "transpose": lambda a: a.T, "reshape": lambda a: a.reshape(50, 40),
         "slice": lambda a: lax.slice(a, (1, 2), (30, 40), (1, 3)),  # (jax 0.4.13 writes a[1:30, 2:40:3] as a gather)
         "concatenate": lambda a: jnp.concatenate([a, lax.slice(a, (0, 0), (7, 50))]),
         "pad": lambda a: lax.pad(a, jnp.float32(0.5), [(1, -2, 1), (-3, 2, 0)])}


@pytest.mark.parametrize("name", sorted(MOVES))
def test_ops_of_moved_constants(name):
    """XLA folds data movement of constants too, and what reads it then: by MLIR's folders (in double after a
    reshape, reverse, slice or concatenate, and on jaxlib 0.12 a transpose) or by its evaluator (in float after a
    pad, and on jaxlib 0.4.13 a transpose)."""
    c = random("float32", (40, 50), seed=7, low=-3, high=3)
    move = MOVES[name]
    check(lambda x: x * jnp.tanh(move(jnp.asarray(c))), np.ones(np.shape(move(jnp.asarray(c))), np.float32),
          **EXACT)


EXACT_OPS = {  # what XLA folds them with decides what reads them: tanh of them is an ulp apart in double and float
    "maximum": lambda c, d: lax.max(c, d), "minimum": lambda c, d: lax.min(c, jnp.asarray(0.5, c.dtype)),
    "clamp": lambda c, d: lax.clamp(jnp.asarray(-1, c.dtype), c, jnp.asarray(1, c.dtype)),
    "floor": lambda c, d: lax.floor(c * 4) * d, "ceil": lambda c, d: lax.ceil(c * 4) * d,
    "round": lambda c, d: lax.round(c * 4, lax.RoundingMethod.TO_NEAREST_EVEN) * d,
    "round_away_from_zero": lambda c, d: lax.round(c * 4, lax.RoundingMethod.AWAY_FROM_ZERO) * d,
    "sign": lambda c, d: lax.sign(c) * d, "select": lambda c, d: lax.select(lax.gt(c, d), c, d),
    "comparison": lambda c, d: lax.convert_element_type(lax.gt(c, d), c.dtype) * d,
    "logic": lambda c, d: lax.convert_element_type(
        lax.bitwise_or(lax.gt(c, d), lax.bitwise_not(lax.lt(c, jnp.asarray(0.5, c.dtype)))), c.dtype) * d,
    "remainder": lambda c, d: lax.rem(c, d),
    # jax's own functions, which it writes as calls (XLA's evaluator folds them once it has inlined them)
    "jnp_where_of_logic": lambda c, d: jnp.where((c > 0) & ~(d > 1), c, d), "jnp_clip": lambda c, d: jnp.clip(c, -1, 1),
    "jnp_fmod": lambda c, d: jnp.fmod(c, jnp.asarray(0.7, c.dtype)), "jnp_sign": lambda c, d: jnp.sign(c) * d,
}


@pytest.mark.parametrize("name,dtype", [(n, d) for n in sorted(EXACT_OPS) for d in FOLDED_DTYPES])
def test_transcendental_of_an_exact_op_of_constants(name, dtype):
    """Exact ops of constants fold too, and where decides the precision of what reads them: MLIR's folders fold the
    extrema, sign, roundings to nearest, comparisons, logic and remainders (and on jaxlib 0.12 a select), so a tanh
    of them folds in double; XLA's evaluator floor, ceil (and on 0.4.13 a select) and what a call of jax's
    functions makes, so a tanh of them folds in float."""
    c, d = _constants(dtype, -3, 3, n=4000, seed=8), _constants(dtype, -3, 3, n=4000, seed=9)
    check(lambda x: x * jnp.tanh(EXACT_OPS[name](jnp.asarray(c), jnp.asarray(d))), np.ones(c.shape, dtype), **EXACT)


_EDGES = np.array([np.nan, -np.nan, 0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, 2.5, -2.5, 0.5, -0.5, 1.5], np.float32)
EXACT_EDGES = {
    "maximum": jnp.maximum, "minimum": jnp.minimum, "clamp_by_a_constant": lambda c, d: lax.clamp(c, d, np.float32(1)),
    "clamp_by_nan": lambda c, d: lax.clamp(np.float32(np.nan), c, np.float32(1)), "sign": lambda c, d: jnp.sign(c),
    "round": lambda c, d: jnp.round(c),
    "round_away_from_zero": lambda c, d: lax.round(c, lax.RoundingMethod.AWAY_FROM_ZERO),
    "select": lambda c, d: jnp.where(c > d, c, d), "total_order": lambda c, d: lax.select(lax.lt(c, d), c, d),
    "remainder": lax.rem, "tanh_of_remainder": lambda c, d: jnp.tanh(lax.rem(c, d)),
}


@pytest.mark.parametrize("name", sorted(EXACT_EDGES))
def test_exact_ops_of_special_constants(name):
    """Every pair of NaNs of both signs, zeros of both signs, infinities and halves, bit for bit: XLA's maximum
    and minimum give the first NaN operand and order -0 below +0, a clamp is min(max(lo, x), hi), an invalid
    remainder (inf % y, x % 0) is +NaN."""
    c, d = np.repeat(_EDGES, _EDGES.size), np.tile(_EDGES, _EDGES.size)
    cpu = np.asarray(jax.jit(lambda: EXACT_EDGES[name](c, d), backend="cpu")())
    ipu = np.asarray(jax.jit(lambda: EXACT_EDGES[name](c, d), backend="ipu")())
    assert cpu.view(np.uint32).tolist() == ipu.view(np.uint32).tolist(), (cpu, ipu)
