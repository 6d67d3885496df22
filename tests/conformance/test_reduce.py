"""reduce (jnp.sum/prod/max/min/all/any/mean/argmax) over every subset of axes, ipu against cpu."""

from __future__ import annotations

import itertools

import jax.numpy as jnp
import numpy as np
import pytest
from _conformance import check, random, small_ints, special

AXES = [()] + [c for r in (1, 2, 3) for c in itertools.combinations(range(3), r)] + [None]
REDUCTIONS = {
    "sum": (jnp.sum, ("float32", "float16", "int32", "uint32")),
    "prod": (jnp.prod, ("float32", "float16", "int32", "uint32")),
    "max": (jnp.max, ("float32", "float16", "int32", "uint32", "bool")),
    "min": (jnp.min, ("float32", "float16", "int32", "uint32", "bool")),
    "all": (jnp.all, ("bool",)), "any": (jnp.any, ("bool",)),
}
# The order of a float sum may differ; max/min/and/or and integer reductions (with wrap-around) are exact.
SUM_TOLERANCE = {"float32": {"rtol": 1e-5, "atol": 1e-4}, "float16": {"rtol": 2e-3, "atol": 1e-2}}


@pytest.mark.parametrize("name, dtype", [(n, d) for n, (_, ds) in REDUCTIONS.items() for d in ds])
def test_reduce_over_every_axis_subset(name, dtype):
    reduce = REDUCTIONS[name][0]
    # small values keep float sums and products exact-ish; full-range ints exercise wrap-around
    x = random(dtype, (2, 3, 5), seed=1) if dtype in ("int32", "uint32", "bool") or name in ("max", "min") else (
        small_ints(dtype, (2, 3, 5), seed=1) / (8 if name == "sum" else 32)).astype(dtype)
    if name == "prod" and dtype in ("float32", "float16"):
        x = (1 + x / 4).astype(dtype)
    tolerance = SUM_TOLERANCE.get(dtype, {}) if name in ("sum", "prod") else {}
    check(lambda x: [reduce(x, axis=axes) for axes in AXES] + [reduce(x, axis=1, keepdims=True)], x, **tolerance)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_max_min_propagate_nan_and_keep_infinities(dtype):
    s = special(dtype)
    check(lambda s: (jnp.max(s), jnp.min(s), jnp.max(s[:-1]), jnp.min(s[:-1]), jnp.max(s.reshape(4, 4), 0),
                     jnp.nanmax(s), jnp.argmax(s[:-1]), jnp.argmin(s[:-1])), s)


def test_big_and_uneven_reductions():
    x = random("float32", (100_003,), seed=1, low=0.0, high=1.0)
    m = random("float32", (1001, 37), seed=2)
    i = random("int32", (100_003,), seed=3)
    check(lambda x, m, i: (jnp.sum(x), jnp.mean(x), jnp.max(x), jnp.sum(m, 0), jnp.sum(m, 1), jnp.mean(m, 0),
                           jnp.var(m, 0), jnp.sum(i), jnp.max(i), jnp.min(i), jnp.all(i != 7), jnp.any(i == i[5])),
          x, m, i, rtol=1e-5, atol=1e-2)


def test_empty_reductions_give_the_init_value():
    x = np.zeros((3, 0), np.float32)
    check(lambda x: (jnp.sum(x, 1), jnp.sum(x), jnp.prod(x, 1), jnp.max(x, 1, initial=-np.inf), jnp.all(x > 0, 1),
                     jnp.any(x > 0), jnp.sum(x, 0)), x)


def test_argmax_argmin_variadic_reduce():
    x = small_ints("float32", (37, 53), seed=1)  # with ties: the first index wins
    i = small_ints("int32", (1001,), seed=2)
    check(lambda x, i: (jnp.argmax(x), jnp.argmax(x, 0), jnp.argmin(x, 1), jnp.argmax(i), jnp.argmin(i)), x, i)
