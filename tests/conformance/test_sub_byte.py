"""The sub-byte integers (int4, uint4, int2, uint2: quantised weights and activations) on the ipu, against cpu.

The IPU has no such type: a value is held one element per byte, its bits in the low bits (ipu/dtype.h), moved and
converted by the emulator, and every other op is computed in i8 or u8 and wrapped back by the front end
(jax_ipu/compiler/passes/narrow_types.py), as XLA:CPU's LLVM promotes them. Every pair of values of each type goes
through each op jax accepts on them. jax 0.4.13 cannot lower an int4 constant on any backend and its PJRT has no
sub-byte buffer types, so these run on the current series."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _conformance import BACKEND, CURRENT_SERIES, check, run_both
from jax import lax

pytestmark = pytest.mark.skipif(not CURRENT_SERIES, reason="jax 0.4.13 has no sub-byte buffers (and cannot lower "
                                                            "an int4 constant on cpu either)")

TYPES = ("int4", "uint4", "int2", "uint2")


def every_value(name: str) -> np.ndarray:
    bits = int(name[-1])
    low = -(1 << (bits - 1)) if name[0] == "i" else 0
    return np.arange(low, low + (1 << bits)).astype(getattr(jnp, name))


def every_pair(name: str):
    v = every_value(name)
    return np.repeat(v, len(v)), np.tile(v, len(v))


BINARY = ("add", "sub", "mul", "div", "rem", "max", "min", "shift_left", "shift_right_arithmetic",
          "shift_right_logical", "bitwise_and", "bitwise_or", "bitwise_xor", "eq", "ne", "gt", "ge", "lt", "le")


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("name", TYPES)
def test_every_pair_of_values_through_each_binary_op(name, op):
    """Wrapping arithmetic (int4 -8 / -1 is -8), shifts by the width and beyond (and by a negative amount), division
    by zero (all ones) and the logical shift of a negative int4 (its own four bits, not its byte's)."""
    check(getattr(lax, op), *every_pair(name))


@pytest.mark.parametrize("op", ("bitwise_not", "neg", "sign", "population_count", "clz"))
@pytest.mark.parametrize("name", TYPES)
def test_every_value_through_each_unary_op(name, op):
    """population_count is XLA:CPU's: an int4's bits counted in its sign-extended byte, an int2's in its own bits;
    clz counts the type's own leading zeros (int4 clz(0) is 4)."""
    check(getattr(lax, op), every_value(name))


FLOATS = np.array([0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, 7.9, -8.9, 8.0, -9.0, 15.5, 16.0, 100.0, -100.0, 1e10,
                   np.inf, -np.inf, np.nan], np.float32)
INTS = np.array([0, 1, -1, 7, -8, 8, -9, 15, 16, 17, 100, -100, 255, 2 ** 31 - 1, -2 ** 31], np.int32)


@pytest.mark.parametrize("name", TYPES)
def test_conversions_to_a_sub_byte_integer_saturate_floats_and_wrap_integers(name):
    """To int4: a float truncates and saturates to [-8, 7] (NaN is 0), an integer keeps its low four bits (17 is 1),
    as XLA:CPU converts; from every float type, int32, uint8 and bool."""
    to = getattr(jnp, name)
    with np.errstate(over="ignore"):  # 1e10 is an infinity in f16, on purpose
        sources = (FLOATS, FLOATS.astype(np.float16), FLOATS.astype(jnp.bfloat16), INTS, INTS.astype(np.uint8),
                   np.array([True, False]))
    for source in sources:
        check(lambda a: a.astype(to), source)  # noqa: B023 - called at once


@pytest.mark.parametrize("name", TYPES)
def test_conversions_from_a_sub_byte_integer_are_exact(name):
    targets = (jnp.float32, jnp.float16, jnp.bfloat16, jnp.int32, jnp.uint8, jnp.bool_) + tuple(getattr(jnp, t) for t in
                                                                                             TYPES)
    for to in targets:
        check(lambda a, to=to: a.astype(to), every_value(name))


@pytest.mark.parametrize("name", ("int4", "uint4"))
def test_bitcast_between_int4_and_uint4_keeps_the_bits(name):
    other = {"int4": jnp.uint4, "uint4": jnp.int4}[name]
    check(lambda a: lax.bitcast_convert_type(a, other), every_value(name))


@pytest.mark.parametrize("name", TYPES)
def test_reductions_and_scans_wrap_at_every_step(name):
    """A sum kept in the narrow type wraps (as the sum of the wrapped terms does), and so does a running sum; an
    extremum and a product likewise, over rows and whole arrays."""
    dtype = getattr(jnp, name)
    x = np.resize(every_value(name), (7, 11))
    check(lambda a: (jnp.sum(a, dtype=dtype), jnp.sum(a, axis=1, dtype=dtype), jnp.prod(a, axis=0, dtype=dtype),
                     jnp.max(a, axis=1), jnp.min(a), jnp.cumsum(a, axis=1, dtype=dtype)), x)


@pytest.mark.parametrize("name", TYPES)
def test_data_movement_and_selection(name):
    """Ops that move bytes keep them (concatenate, pad with a narrow value, gather, reverse, transpose, an update
    placed by a narrow index), and select and iota compute as cpu does."""
    dtype = getattr(jnp, name)
    x = np.resize(every_value(name), (6, 5))

    def f(a):
        return (jnp.concatenate([a, a[::-1]]), jnp.pad(a, 2, constant_values=a[0, 0]), a[jnp.array([3, 1, 2])],
                a.T, lax.dynamic_update_slice(a, a[:2, :2], (a[1, 1], a[0, 1])), jnp.where(a > 0, a, a * 3),
                lax.iota(dtype, 40) + a[0, 0], a + jnp.array(np.arange(30).reshape(6, 5) % 3, dtype),
                # (a constant MLIR prints as its raw bytes)
                jnp.tile(a, (40, 1)) * jnp.array(np.arange(1200).reshape(240, 5) % 7 - 3, dtype))

    check(f, x)


@pytest.mark.parametrize("name", TYPES)
def test_loops_carry_sub_byte_values(name):
    check(lambda a: lax.fori_loop(0, 5, lambda i, c: c * 3 + 1, a), every_value(name))


@pytest.mark.parametrize("name", TYPES)
def test_sort_orders_the_values(name):
    """Against numpy: XLA:CPU's sort of int2 and uint2 arrays loses values (jaxlib 0.12: [-2, -2, 1, -2, ...] for a
    sorted input of every value four times), where the ipu sorts them."""
    x = np.resize(every_value(name)[::-1], 16)
    with pytest.warns(DeprecationWarning, match="backend"):
        got = np.asarray(jax.jit(jnp.sort, backend=BACKEND)(x))
    np.testing.assert_array_equal(got.astype(np.int32), np.sort(x.astype(np.int32)))
    if name in ("int4", "uint4"):
        check(jnp.sort, x)


@pytest.mark.parametrize("name", ("int4", "uint4"))
def test_matmul_of_int4_operands(name):
    x = np.resize(every_value(name), (8, 8))
    check(lambda a, b: lax.dot(a, b), x, x.T)


@pytest.mark.parametrize("name", TYPES)
def test_host_callbacks_take_and_give_sub_byte_arrays(name):
    dtype = getattr(jnp, name)
    values = every_value(name)

    def f(a):
        given = jax.pure_callback(lambda: np.asarray(values[::-1]), jax.ShapeDtypeStruct(values.shape, dtype))
        taken = jax.pure_callback(lambda v: np.asfortranarray(np.asarray(v).reshape(2, -1)).T,
                                  jax.ShapeDtypeStruct((len(values) // 2, 2), dtype), a)
        return given, taken

    got, want = run_both(f, values)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(np.asarray(g).astype(np.int32), np.asarray(w).astype(np.int32))


def test_a_bitcast_that_packs_sub_byte_values_is_refused_by_name():
    """int8 -> int4[..., 2] packs two values per byte, which the ipu's one-per-byte form does not have."""
    with pytest.raises(Exception, match=r"bitcast_convert.*i4"):
        with pytest.warns(DeprecationWarning, match="backend"):
            jax.jit(lambda a: lax.bitcast_convert_type(a, jnp.int4), backend=BACKEND)(np.arange(4, dtype=np.int8))
