"""while / fori_loop / cond / switch / nested loops / calls to private functions, ipu against cpu."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _conformance import check, random
from jax import lax


def test_fori_loop_and_while_loop():
    def f(x, n):
        a = lax.fori_loop(0, 10, lambda i, c: c * 0.5 + i, x)  # static trip count
        b = lax.fori_loop(0, n, lambda i, c: c + i, jnp.int32(0))  # dynamic trip count, maybe zero
        c = lax.while_loop(lambda s: s[0] < 100, lambda s: (s[0] * 2 + 1, s[1] + 1), (jnp.int32(1), jnp.int32(0)))
        d = lax.while_loop(lambda v: jnp.sum(v) > 1.0, lambda v: v / 2, x)  # data-dependent termination
        return a, b, c, d

    x = random("float32", (37, 53), seed=1, low=0, high=1)
    for n in (0, 1, 7):
        check(f, x, np.int32(n))


def test_nested_loops_and_loop_carried_tuples():
    def f(x):
        def outer(i, carry):
            acc, count = carry
            inner = lax.fori_loop(0, i, lambda j, a: a + x[j], jnp.zeros_like(x[0]))
            return acc + inner, count + (inner.sum() > 0).astype(jnp.int32)

        return lax.fori_loop(0, x.shape[0], outer, (jnp.zeros_like(x[0]), jnp.int32(0)))

    check(f, random("float32", (7, 13), seed=1))


@pytest.mark.parametrize("name, body", [
    # each carry takes the next one's value and the last a fresh 0: the 0 must not be written over the carry the
    # update still reads (JAX's testScanVmapFixpoint)
    ("shift", lambda c: (c[1], c[2], c[3], jnp.zeros_like(c[3]))),
    ("rotate", lambda c: (c[1], c[2], c[3], c[0])),
    ("fibonacci", lambda c: (c[1], c[2], c[3], c[2] + c[3])),
])
def test_carries_passed_along(name, body):
    def f(x):
        return lax.fori_loop(0, 3, lambda i, c: body(c), (x, x + 1, x * 2, x - 3))

    check(jax.vmap(f), random("float32", (5,), seed=6))
    check(f, random("float32", (4, 3), seed=7))


def test_scan_cumulative_sum():
    def f(xs):
        return lax.scan(lambda c, x: (c + x, c * x), jnp.zeros_like(xs[0]), xs)

    check(f, random("int32", (9, 5), seed=1))


@pytest.mark.parametrize("pred", [True, False])
def test_cond(pred):
    def f(p, x, y):
        return lax.cond(p, lambda: x * 2.0, lambda: y - 1.0), lax.cond(p, lambda a: a.T, lambda a: -a.T, x)

    check(f, np.bool_(pred), random("float32", (5, 5), seed=1), random("float32", (5, 5), seed=2))


def test_switch_clamps_out_of_range_indices():
    def f(i, x):
        return lax.switch(i, [lambda v: v + 1, lambda v: v * 2, lambda v: -v, lambda v: jnp.sin(v)], x)

    x = random("float32", (7,), seed=1)
    for i in (-5, -1, 0, 1, 2, 3, 4, 100):
        check(f, np.int32(i), x, rtol=1e-6)


def test_loop_inside_cond_and_cond_inside_loop():
    def f(x, k):
        in_cond = lax.cond(k > 2, lambda: lax.fori_loop(0, k, lambda i, c: c + 1, x), lambda: x)
        in_loop = lax.fori_loop(0, 5, lambda i, c: lax.cond(i % 2 == 0, lambda: c + i, lambda: c * 2), x)
        return in_cond, in_loop

    for k in (1, 4):
        check(f, random("int32", (3,), seed=1), np.int32(k))


def test_calls_to_private_functions():
    inner = jax.jit(lambda x: jnp.maximum(x, 0) * 2)
    middle = jax.jit(lambda x: inner(x) + inner(-x))

    def f(x):
        return middle(x), inner(x[0]), lax.fori_loop(0, 3, lambda i, c: inner(c) - 1, x)

    check(f, random("float32", (37,), seed=1))


def test_while_over_big_state():
    x = random("float32", (100_003,), seed=1)
    check(lambda x: lax.fori_loop(0, 3, lambda i, c: jnp.where(c > 0, c - 1, c + 1), x), x)


def test_loops_of_scalar_and_small_steps():
    # Loops whose steps all run inline: the engine flattens their cond and body into one list of calls with the
    # slots' addresses resolved (one-element elementwise kernels as their block functions, copies as moves, other
    # kernels as their compute calls) and repeats it (engine.cc, runLoop). Each result is the tree's: exact with cpu.
    def f(x, v, n):
        def body(c):
            i, a, b, h, flag, w = c
            # a rotation of carries (the update copy through temporaries), a multiply-add the fused vertex contracts,
            # an f16 sum, a bool, and a vector step beside the scalar ones
            return i + 1, b * 0.5 + 1.0, a, h + jnp.float16(0.25), jnp.logical_not(flag), jnp.roll(w, 1) * 0.5 - i

        init = (jnp.int32(0), x, x * 3, jnp.float16(0), jnp.bool_(False), v)
        return lax.while_loop(lambda c: c[0] < n, body, init)

    v = random("float32", (13,), seed=1)
    for n in (0, 1, 2, 1001):
        check(f, np.float32(1.5), v, np.int32(n))
