"""Loop-carried values updated in place (their new value shares the old one's host storage when nothing reads the
old one afterwards): results must match cpu whether or not a loop qualifies, and the estimates must not move."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jax_ipu


def same_on_ipu_and_cpu(f, *args, donate=()):
    got = jax.jit(f, backend="ipu", donate_argnums=donate)(*[np.array(a) for a in args])
    profile = jax_ipu.last_execution()
    want = jax.jit(f, backend="cpu")(*args)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-5)
    return profile


def scan_collect(h0, xs):
    return lax.scan(lambda h, x: (jnp.tanh(h + x), jnp.tanh(h + x) * 2), h0, xs)


@pytest.mark.parametrize("donate", [(), (0, 1)])
def test_scan_outputs_written_in_place_match_cpu(donate):
    rng = np.random.default_rng(0)
    h0, xs = rng.normal(size=(3, 5)).astype(np.float32), rng.normal(size=(23, 3, 5)).astype(np.float32)
    same_on_ipu_and_cpu(scan_collect, h0, xs, donate=donate)


def test_old_value_read_after_the_new_one_is_written():
    # The new value is written by a step that also reads the old one at other indices (a reversal): it must not
    # share the old value's storage, or the reversal would read what it has just written.
    def f(x):
        return lax.fori_loop(0, 7, lambda i, v: v * 0.5 + v[::-1] + i, x)

    same_on_ipu_and_cpu(f, np.arange(37, dtype=np.float32))


@pytest.mark.parametrize("body", [lambda i, v: v[::-1], lambda i, v: v.T, lambda i, v: jnp.roll(v, 1, axis=0)])
def test_new_value_computed_from_other_elements_of_the_old_one(body):
    # The step that writes the new value reads other elements of the old one: sharing their storage would let it
    # read what it has already overwritten.
    def f(x):
        return lax.fori_loop(0, 3, body, x)

    same_on_ipu_and_cpu(f, np.arange(36, dtype=np.float32).reshape(6, 6))


@pytest.mark.parametrize("body, scalar", [
    (lambda i, c: (c[0] + c[1], c[0] - c[1]), False),  # each new value reads both old ones
    (lambda i, c: (c[0] * c[1] + 1.0, c[1] * 0.5), True),  # a scalar carry read by the other's update
    (lambda i, c: (jnp.sin(c[0]) * 0.5 + c[0], c[1] + c[0].sum()), False),  # the old value read after the new one
    (lambda i, c: (c[0] + 1, c[1] * 0.999 + 1.0), True),  # carries updated from themselves alone
])
def test_elementwise_updates_of_several_carries(body, scalar):
    # An elementwise step computes its result correctly in its operand's storage (Node::same_index); it may share it
    # only when no later step of the iteration reads the old value.
    def f(a, s):
        return lax.fori_loop(0, 5, body, (a, s))

    a = np.random.default_rng(1).normal(size=(3, 7)).astype(np.float32)
    same_on_ipu_and_cpu(f, a, np.float32(0.75) if scalar else a * 2)


def test_update_slice_whose_update_reads_the_operand():
    def f(x):
        def body(i, v):
            piece = lax.dynamic_slice(v, (i,), (4,)) * 2 + 1
            return lax.dynamic_update_slice(v, piece[::-1], (i + 1,))

        return lax.fori_loop(0, 9, body, x)

    same_on_ipu_and_cpu(f, np.arange(20, dtype=np.float32))


def test_swapped_carries_and_an_unchanged_carry():
    def f(a, b, c):
        return lax.fori_loop(0, 5, lambda i, abc: (abc[1] + 1, abc[0] * 2, abc[2]), (a, b, c))

    same_on_ipu_and_cpu(f, np.ones(6, np.float32), np.arange(6, dtype=np.float32), np.full(6, 3, np.float32))


def test_nested_loops_collect_rows():
    def f(m):
        def outer(i, acc):
            row = lax.fori_loop(0, 3, lambda j, r: r * 1.5 + j, acc[i])
            return lax.dynamic_update_slice(acc, row[None], (i, 0))

        return lax.fori_loop(0, m.shape[0], outer, m)

    same_on_ipu_and_cpu(f, np.random.default_rng(1).normal(size=(6, 10)).astype(np.float32))


def test_estimates_of_a_scan_are_its_static_ones_times_trips():
    rng = np.random.default_rng(2)
    h0, xs = rng.normal(size=(3, 5)).astype(np.float32), rng.normal(size=(11, 3, 5)).astype(np.float32)
    first = same_on_ipu_and_cpu(scan_collect, h0, xs)
    again = same_on_ipu_and_cpu(scan_collect, h0, xs, donate=(0, 1))
    # Where the results live (in place, donated or not) changes nothing the IPU would spend.
    assert first["total_cycles"] == again["total_cycles"]
    update = [s for s in first["steps"] if s["name"] == "while.update"]
    assert update and update[0]["executions"] == 11 and update[0]["cycles"] > 0
