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
# Ops XLA expands into polynomials of other ops before it folds them; the ipu computes them as XLA:CPU's loops do.
EXPANDED = {"erf_inv": (lax.erf_inv, (-0.99, 0.99)), "lgamma": (lax.lgamma, (0.1, 10)),
            "digamma": (lax.digamma, (0.1, 10))}
FOLDED_DTYPES = ("float32", "float16", "bfloat16")


def _constants(dtype, low, high, n=2000, seed=0):
    return random("float32", (n,), seed=seed, low=low, high=high).astype(jnp.dtype(dtype))


def _expanded_xfail(name, dtype):
    if name in EXPANDED or (name == "erf" and dtype == "float32" and not CURRENT_SERIES):
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
