"""reduce (jnp.sum/prod/max/min/all/any/mean/argmax) over every subset of axes, ipu against cpu."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _conformance import CURRENT_SERIES, EXACT, away_from_zero, check, random, skip_unless_memory, small_ints, special
from jax import lax

AXES = [()] + [c for r in (1, 2, 3) for c in itertools.combinations(range(3), r)] + [None]
REDUCTIONS = {
    "sum": (jnp.sum, ("float32", "float16", "int32", "uint32")),
    "prod": (jnp.prod, ("float32", "float16", "int32", "uint32")),
    "max": (jnp.max, ("float32", "float16", "int32", "uint32", "bool")),
    "min": (jnp.min, ("float32", "float16", "int32", "uint32", "bool")),
    "all": (jnp.all, ("bool",)), "any": (jnp.any, ("bool",)),
}
# Float sums and products: each output may differ from cpu's by a few ulps of its own scale (sum of |x| over its
# reduced elements; |prod| for a product), which any summation order meets (both accumulate in f32; f16 rounds once at
# the end), while one dropped or doubled term of magnitude >= 0.5 moves it by far more. Max/min/and/or and integer
# reductions (with wrap-around) are exact.
SCALE_ULPS = {"float32": 8, "float16": 2}


@pytest.mark.parametrize("name, dtype", [(n, d) for n, (_, ds) in REDUCTIONS.items() for d in ds])
def test_reduce_over_every_axis_subset(name, dtype):
    reduce = REDUCTIONS[name][0]
    x = random(dtype, (2, 3, 5), seed=1)  # full-range ints exercise wrap-around
    tolerance = {}
    if name in ("sum", "prod") and dtype in SCALE_ULPS:
        # non-integer terms bounded away from zero; factors near 1 keep a product of 30 inside f16's range
        x = away_from_zero(dtype, x.shape, seed=1) if name == "sum" else away_from_zero(dtype, x.shape, 1, 0.8, 1.25)
        tolerance = {"scale_ulps": SCALE_ULPS[dtype]}
    check(lambda x: [reduce(x, axis=axes) for axes in AXES] + [reduce(x, axis=1, keepdims=True)], x, **tolerance)


ROW_LENGTHS = list(range(1, 41)) + [47, 63, 64, 100, 1000, 1057]


@pytest.mark.parametrize("name", ["sum", "prod"])
def test_rows_fold_in_cpus_order(name):
    """jaxlib 0.4.13: an f32 sum or product over the innermost dimension is XLA:CPU's bits at every row length: up
    to 32 elements in the lanes of its vectorised loop (8 or 4 lanes, halved, then the rest in order), longer rows as
    its tree of 32-element windows with that same last fold. (A sequential fold differs from cpu's in most rows of 3
    or more.) jaxlib 0.12's XLA:CPU hands these reductions to its YNNPACK kernels, whose order depends on the number
    of rows too: there, a few ulps of each output's scale (a product of 1,000 factors: its error, about n ulps)."""
    rng = np.random.default_rng(5)
    if name == "sum":
        x = (rng.standard_normal((64, 1057)) * np.exp2(rng.integers(-8, 8, (64, 1057)))).astype(np.float32)
    else:
        x = (1 + rng.standard_normal((64, 1057)) / 4).astype(np.float32)
    reduce = jnp.sum if name == "sum" else jnp.prod
    check(lambda x: [reduce(x[:, :n], axis=1) for n in ROW_LENGTHS] + [reduce(x[0, :n]) for n in ROW_LENGTHS], x,
          **(EXACT if not CURRENT_SERIES else {"scale_ulps": 8} if name == "sum" else {"rtol": 1e-4}))


SEVERAL = [((4, 5), None), ((6, 2, 3), None), ((4, 5, 7), (1, 2)), ((100, 50), None), ((3, 33), None),
           ((33, 3), None), ((70, 24), None), ((2, 40, 40), (1, 2)), ((40, 5, 40), (0, 2)), ((5, 1, 7), None),
           ((2000, 3), None), ((40, 40, 5), (0, 1)), ((16, 3, 3, 8), (0, 1, 2)), ((3, 50, 2, 40), (1, 3)),
           # kept dimensions of one element after the reduced ones: no dimensions to XLA (the innermost is reduced)
           ((4, 4, 1), (0, 1)), ((6, 5, 1, 1), (0, 1)), ((7, 1, 3, 1), (0, 2)),
           # column sums: windows of strided elements, in lanes only where the host gathers fast (README, reductions)
           ((40, 5), (0,)), ((1000, 7), (0,)), ((70, 3, 8), (0,))]


@pytest.mark.parametrize("name", ["sum", "prod"])
def test_reductions_over_several_dimensions_fold_in_cpus_order(name):
    """jaxlib 0.4.13: an f32 sum or product over several dimensions is XLA:CPU's bits: dimensions of one element
    dropped (kept ones too), XLA's tree of 32-element windows along each dimension longer than 32 (not over the
    flattened elements), window rows and the last loop nest folded as XLA:CPU's loops fold them (jnp.sum of a matrix,
    a batch norm's mean over N, H and W). jaxlib 0.12: a few ulps of each output's scale, as for rows."""
    rng = np.random.default_rng(6)
    xs = []
    for shape, _ in SEVERAL:
        if name == "sum":
            xs.append((rng.standard_normal(shape) * np.exp2(rng.integers(-8, 8, shape))).astype(np.float32))
        else:
            xs.append((1 + rng.standard_normal(shape) / 64).astype(np.float32))
    reduce = jnp.sum if name == "sum" else jnp.prod
    check(lambda *xs: [reduce(x, axis=axes) for x, (_, axes) in zip(xs, SEVERAL)], *xs,
          **(EXACT if not CURRENT_SERIES else {"scale_ulps": 8} if name == "sum" else {"rtol": 1e-4}))


# Column sums and products (rows, columns): levels without padding (64, 1024, 16384 rows), with it (1000, 40000),
# both (1280 -> 40 -> 2), and an input of 2^22 elements (131072 x 32), whose first level XLA:CPU folds in order.
COLUMNS = [(64, 9), (1024, 32), (1280, 17), (1000, 64), (16384, 32), (40000, 9), (131072, 32)]


@pytest.mark.parametrize("shape", COLUMNS, ids=[f"{r}x{c}" for r, c in COLUMNS])
@pytest.mark.parametrize("name", ["sum", "prod"])
def test_column_sums_fold_in_cpus_order(name, shape):
    """jaxlib 0.4.13: jnp.sum(x, 0) and jnp.prod(x, 0) of f32[n, c], c >= 9, are XLA:CPU's bits: each level of the
    tree over strided elements in 8 lanes where the host gathers fast, else where the level needs no padding (but
    the first level of an input of 2^22 elements or more), the others in order (fuzz seed 20261901 #868: a product
    of 16,384 factors near 1, 7e-5 apart, more than its tolerance). jaxlib 0.12: a few ulps of each output's
    scale."""
    rng = np.random.default_rng(7)
    if name == "sum":
        x = (rng.standard_normal(shape) * np.exp2(rng.integers(-8, 8, shape))).astype(np.float32)
    else:
        x = (1 + rng.standard_normal(shape) / 256).astype(np.float32)
    skip_unless_memory(3 * x.nbytes, f"a column {name} of f32{list(shape)}")
    reduce = jnp.sum if name == "sum" else jnp.prod
    check(lambda x: reduce(x, axis=0), x,
          **(EXACT if not CURRENT_SERIES else {"scale_ulps": 8} if name == "sum" else {"rtol": 1e-4}))


# Short columns (at most 32 reduced rows, no tree) whose kept innermost dimension is 1 more than a multiple of 32 or
# not: f32[4, K, r, m] reduced over dimension 1
SHORT_COLUMNS = [(4, 3, 6, 33), (4, 4, 2, 1), (4, 5, 1, 65), (4, 12, 2, 33), (4, 20, 1, 33), (4, 32, 1, 65),
                 (4, 12, 3, 1), (4, 8, 6, 17), (4, 7, 3, 32), (4, 31, 2, 34)]


@pytest.mark.parametrize("shape", SHORT_COLUMNS, ids=["x".join(map(str, s)) for s in SHORT_COLUMNS])
@pytest.mark.parametrize("name", ["sum", "prod"])
def test_short_column_sums_fold_in_cpus_order(name, shape):
    """jaxlib 0.4.13: each output of a column sum or product of at most 32 rows folds its rows in order, but on a
    host with AVX-512 the last output of an innermost dimension of 32k + 1 folds them in the lanes of a loop
    vectorised over the rows (2 lanes for 3 or 4 rows: (x0 * x2) * (x1 * x3); 4, 8 for more, and for 32 rows the
    host's vector width: 16 lanes where LLVM uses 512-bit vectors, 8 on an Intel core, whose tuning prefers 256;
    fuzz seed 20270301 #1906, and the Intel host of 2026-12-02, where all 14 cases failed while only a 512-bit host
    had the lanes). Probed with terms that overflow or cancel in one order and not the other, and random terms.
    jaxlib 0.12: a few ulps of each output's scale."""
    rng = np.random.default_rng(11)
    big, small = (2.0 ** 100, 2.0 ** -100) if name == "prod" else (2.0 ** 24, 1.0)
    probe = np.ones(shape, np.float32) if name == "prod" else np.zeros(shape, np.float32)
    probe[:, 0], probe[:, 1], probe[:, 2] = big, big if name == "prod" else small, small if name == "prod" else -big
    if shape[1] > 3:
        probe[:, 3] = small
    noisy = (1 + rng.standard_normal(shape) / 64 if name == "prod" else rng.standard_normal(shape)).astype(np.float32)
    reduce = jnp.sum if name == "sum" else jnp.prod
    check(lambda a, b: [reduce(a, axis=1), reduce(b, axis=1)], probe, noisy,
          **(EXACT if not CURRENT_SERIES else {"scale_ulps": 8} if name == "sum" else {"rtol": 1e-4}))


# (operand shape, moved to: a reshape's shape or "T" for a transpose, reduced axes of the moved value)
MOVED = [((3, 7), (7, 3), None), ((3, 7), (21,), None), ((64, 33), (2112,), None), ((4, 6, 5), (4, 30), (1,)),
         ((3, 7, 5), (3, 35), (1,)), ((6, 9), (2, 27), (1,)), ((3, 7), "T", (0,)), ((8, 33), "T", None),
         ((5, 8), "T", (1,))]


@pytest.mark.parametrize("name", ["sum", "prod"])
def test_reductions_of_reshaped_or_transposed_values_fold_in_their_sources_order(name):
    """XLA's simplifier reduces the value a reshape or a transpose moved (reduce(reshape(x)) => reduce(x) where the
    kept dimensions are unmodified; through a transpose when the result has rank 0 or 1), so jnp.sum(x.reshape(-1))
    adds in x's order: jaxlib 0.4.13's bits (the moved shape's order differs in most of these); jaxlib 0.12: a few
    ulps, as for rows. (6, 9) -> (2, 27) over axis 1 modifies the kept dimension: reduced as it is."""
    rng = np.random.default_rng(7)
    xs = [(rng.uniform(0.5, 2, shape) if name == "prod" else rng.standard_normal(shape)).astype(np.float32)
          for shape, _, _ in MOVED]
    reduce = jnp.sum if name == "sum" else jnp.prod
    check(lambda *xs: [reduce(x.T if to == "T" else x.reshape(to), axis=axes) for x, (_, to, axes) in zip(xs, MOVED)],
          *xs, **(EXACT if not CURRENT_SERIES else {"scale_ulps": 8} if name == "sum" else {"rtol": 1e-4}))


def test_reductions_of_concatenations_reduce_each_piece_then_combine():
    """XLA's simplifier (both series) splits a reduce over the concatenated dimension of a concatenation into a reduce
    of each piece, combined in order: jnp.sum(jnp.roll(x, -2)) of f32[5] is sum(x[2:]) + sum(x[:2]) on cpu, an ulp
    from the in-order sum when one element dwarfs the others (fuzz seed 20271501 #1057); jnp.roll is a called
    function's concatenation. jaxlib 0.12: a few ulps, as for rows."""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((2, 40)) * np.logspace(-3, 6, 40)).astype(np.float32)
    v = np.frombuffer(bytes.fromhex("095afcca05a324cc28986bd40000000000000000"), np.float32).copy()
    b = rng.uniform(size=(3, 5)) < 0.5
    y = rng.integers(-100, 100, (4, 6)).astype(np.int32)
    check(lambda x, v, b, y: [jnp.sum(jnp.roll(v, -2)), jnp.sum(jnp.concatenate([x, x]), 0),
                              jnp.sum(jnp.concatenate([x, x * 3], 1), (0, 1)), jnp.max(jnp.roll(x, 3, 1), 1),
                              jnp.mean(jnp.roll(x, 7)), jnp.any(jnp.concatenate([b, ~b]), 0),
                              jnp.sum(jnp.concatenate([y, y[::-1]], 1), 1)],
          x, v, b, y, **(EXACT if not CURRENT_SERIES else {"scale_ulps": 8}))


def test_a_concatenation_of_transposes_reduces_each_piece_in_its_sources_order():
    """A piece of a concatenation split off by XLA's simplifier is reduced as any reduce is: through the transpose
    or reshape that moved it, so jnp.mean(jnp.concatenate([x.T, x.T], 1), 1) of an f32[3, 40] is (sum(x, 0) +
    sum(x, 0)) / 6 in x's order on cpu, where summing the transposed piece's rows was an ulp off in 8 of 40 means
    on jaxlib 0.4.13 (fuzz seed 20286731 #744). jaxlib 0.12: a few ulps, as for rows (its sum over two dimensions
    of a transpose is in another order)."""
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, (3, 40)).astype(np.float32)
    y = rng.uniform(-1, 1, (3, 5, 40)).astype(np.float32)
    check(lambda x, y: [jnp.mean(jnp.concatenate([x.T, x.T], 1), 1), jnp.sum(jnp.concatenate([x.T * 2, x.T], 1), 1),
                        jnp.sum(jnp.concatenate([jnp.exp(y[0].T), y[1].T - 1], 1), 1),
                        jnp.sum(jnp.concatenate([y.transpose(2, 0, 1), y.transpose(2, 0, 1) * 3], 2), (1, 2)),
                        jnp.sum(jnp.concatenate([y[0, :1].T, y[1].T], 1), 1)],
          x, y, **(EXACT if not CURRENT_SERIES else {"scale_ulps": 8}))


def test_reductions_of_elementwise_ops_of_transposes_fold_in_their_sources_order():
    """XLA's layout assignment gives elementwise ops of a transpose (and of broadcasts) the transposed layout, so a sum
    over them adds in the source's order, as a sum of the transpose itself does: jnp.sum(jnp.exp(x.T - m), 1), and
    jax.nn.log_softmax(x.T, axis=1) (whose call XLA inlines) of f32[3, 31], where cpu's 1.214866 is an ulp from
    the moved order's 1.2148662 (fuzz seed 20271301 #436). jaxlib 0.12: a few ulps, as for rows."""
    rng = np.random.default_rng(8)
    x = np.where(rng.uniform(size=(3, 31)) < 0.6, 0, rng.uniform(0, 4, (3, 31))).astype(np.float32)
    y = rng.standard_normal((8, 37)).astype(np.float32)
    check(lambda x, y: [jax.nn.log_softmax(x.T, axis=1), jax.nn.softmax(x.T, axis=1),
                        jnp.sum(jnp.exp(x.T - jnp.max(x.T, axis=1, keepdims=True)), 1),
                        jnp.sum(jnp.tanh(y.T) * 0.5 + 1.0, axis=0), jnp.sum(y.T * y.T.max(), axis=0)],
          x, y, **(EXACT if not CURRENT_SERIES else {"scale_ulps": 8}))


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_max_min_propagate_nan_and_keep_infinities(dtype):
    s = special(dtype)
    check(lambda s: (jnp.max(s), jnp.min(s), jnp.max(s[:-1]), jnp.min(s[:-1]), jnp.max(s.reshape(4, 4), 0),
                     jnp.nanmax(s), jnp.argmax(s[:-1]), jnp.argmin(s[:-1])), s)


def _extremum_rows(length: int) -> np.ndarray:
    """Rows of f32 whose maximum or minimum is a normal number, a zero of either sign, a denormal, an infinity or a
    NaN (two of them), each of ``length`` elements."""
    rng = np.random.default_rng(length)
    nan_a = np.array([0x7FC00001], np.uint32).view(np.float32)[0]
    nan_b = np.array([0xFFC12345], np.uint32).view(np.float32)[0]
    rows = [rng.standard_normal(length), -np.abs(rng.standard_normal(length)), np.abs(rng.standard_normal(length))]
    zeros = rng.choice(np.array([0.0, -0.0], np.float32), length)
    rows += [zeros, np.where(rng.random(length) < 0.5, zeros, -1.0), np.where(rng.random(length) < 0.5, zeros, 1.0)]
    rows += [np.full(length, -0.0), np.where(rng.random(length) < 0.5, zeros, 1e-40 * rng.choice([-1, 1], length))]
    rows += [np.where(rng.random(length) < 0.2, np.inf, -np.inf), rng.standard_normal(length) * 1e-39]
    for first, second in ((nan_a, nan_b), (nan_b, nan_a)):
        row = rng.standard_normal(length).astype(np.float32)
        row[rng.integers(length)] = second
        row[rng.integers(length)] = first
        rows.append(row)
    return np.stack([np.asarray(r, np.float32) for r in rows])


@pytest.mark.parametrize("length", [1, 7, 8, 9, 31, 32, 33, 40, 64, 100, 250])
def test_max_min_of_rows_keep_zero_signs_denormals_and_nans(length):
    # The maximum and minimum of contiguous rows: any order gives a row's extremum unless it is a zero, whose sign
    # the combiner's order decides (or a denormal, which jaxlib 0.12's combiner reads as a zero), or a NaN; those
    # rows must come out as on cpu (exact: zero signs compared; NaN against NaN, payloads not compared). (Longer rows
    # are left out: jaxlib 0.12's cpu loses a NaN in some fused maxima of rows of 1,000 and more, where the ipu keeps
    # it as StableHLO's maximum says.)
    x = _extremum_rows(length)
    check(lambda x: (jnp.max(x, axis=1), jnp.min(x, axis=1), jnp.max(x, axis=1, keepdims=True),
                     jax.lax.reduce(x, np.float32(-np.inf), jax.lax.max, (1,)),
                     jax.lax.reduce(x, np.float32(np.inf), jax.lax.min, (1,)),
                     jnp.max(x[:, ::-1], axis=1), jnp.min(-x, axis=1)), x)


def test_big_and_uneven_reductions():
    # 100,003 multiples of 1/16 in [1/16, 1]: every partial sum is exact in f32, so any order gives the same sum, and
    # 4 ulps of its scale (~0.025) are below the smallest term. (A reordered sum of arbitrary floats this long
    # differs by about as much as one term, so it could not tell a dropped term from rounding.)
    x = (np.random.default_rng(1).integers(1, 17, size=100_003) / 16).astype(np.float32)
    m = away_from_zero("float32", (1001, 37), seed=2)
    i = random("int32", (100_003,), seed=3)
    check(lambda x, m: (jnp.sum(x), jnp.mean(x), jnp.sum(m, 0), jnp.sum(m, 1), jnp.mean(m, 0)), x, m, scale_ulps=4)
    check(lambda x, m, i: (jnp.max(x), jnp.var(m, 0), jnp.sum(i), jnp.max(i), jnp.min(i), jnp.all(i != 7),
                           jnp.any(i == i[5])), x, m, i, rtol=1e-5, atol=1e-5)


def test_empty_reductions_give_the_init_value():
    x = np.zeros((3, 0), np.float32)
    check(lambda x: (jnp.sum(x, 1), jnp.sum(x), jnp.prod(x, 1), jnp.max(x, 1, initial=-np.inf), jnp.all(x > 0, 1),
                     jnp.any(x > 0), jnp.sum(x, 0)), x)


def test_argmax_argmin_variadic_reduce():
    x = small_ints("float32", (37, 53), seed=1)  # with ties: the first index wins
    i = small_ints("int32", (1001,), seed=2)
    check(lambda x, i: (jnp.argmax(x), jnp.argmax(x, 0), jnp.argmin(x, 1), jnp.argmax(i), jnp.argmin(i)), x, i)


@pytest.mark.parametrize("shape", [(1024, 1024), (300, 37), (6, 5, 2000), (2, 3)])
def test_a_reduction_of_a_maps_rows_gives_the_bits_of_the_two_apart(shape):
    """An elementwise map whose result's rows a reduction reads next (softmax's exponentials and their sum, a layer
    norm's squared deviations) runs on the host a few rows at a time, the map then the reduction, while the rows are
    in cache. Each value is what the two give one after the other: the same ops as two programs, the map's result
    handed from one to the other, bit for bit; and cpu's sums within the reductions' tolerance."""
    x = random("float32", shape, seed=5)
    g = random("float32", shape[-1:], seed=6)
    skip_unless_memory(3 * x.nbytes, f"rows of f32{list(shape)}")

    def exps(x, g):
        return jnp.exp(x * g - 1.0)

    def together(x, g):
        e = exps(x, g)
        return jnp.sum(e, axis=-1), jnp.max(e, axis=-1), jnp.sum(jnp.square(x - g), axis=-1)

    ipu = jax.jit(together, backend="ipu")(x, g)
    apart_exps = jax.jit(exps, backend="ipu")(x, g)
    apart = (jax.jit(lambda e: jnp.sum(e, axis=-1), backend="ipu")(apart_exps),
             jax.jit(lambda e: jnp.max(e, axis=-1), backend="ipu")(apart_exps),
             jax.jit(lambda d: jnp.sum(d, axis=-1), backend="ipu")(jax.jit(lambda x, g: jnp.square(x - g),
                                                                            backend="ipu")(x, g)))
    for got, want in zip(ipu, apart):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    check(together, x, g, rtol=1e-5)  # sums of positive terms (exp and square differ from cpu's by an ulp or two)


def test_a_reduction_written_twice_is_one_value():
    """XLA's CSE merges two reductions of the same operand whose computations are the same, so jnp.mean(x) written
    twice is one value on cpu and the difference of the two is 0; kept apart, each mean's product by 1/n is read
    once by the subtract, which contracts one of them (a rounding error, not 0: fuzz seed 20287211 #1404)."""
    x = random("float32", (3, 5), seed=11, low=0.01, high=4.0)
    check(lambda x: (jnp.mean(x, axis=0) - jnp.mean(x, axis=0), jnp.sum(x) - jnp.sum(x),
                     jnp.max(x, axis=1) - jnp.max(x, axis=1)), x, **EXACT)


@pytest.mark.parametrize("shape", [(1024, 1024), (300, 37), (6, 5, 2000), (2, 3)])
def test_a_layer_norm_and_softmax_run_row_by_row_give_the_bits_of_their_steps_apart(shape):
    """A layer norm then a softmax is a chain of steps over rows of one length: reductions of rows, maps of rows
    reading a value per row (a mean, a maximum) broadcast along them, maps of those values, a scalar's reciprocal.
    The host runs such a chain a few rows at a time, every step on those rows before the next rows, where the arena
    lets it (results placed over rows whose steps are done). Each value is what the steps give as programs of their
    own, bit for bit; and cpu's within the tolerance of its sums."""
    x = random("float32", shape, seed=7)
    gamma = random("float32", shape[-1:], seed=8, low=0.5, high=1.5)
    beta = random("float32", shape[-1:], seed=9)
    skip_unless_memory(8 * x.nbytes, f"rows of f32{list(shape)}")

    def mean(x):
        return jnp.mean(x, axis=-1, keepdims=True)

    def normalised(x, m, gamma, beta):
        var = jnp.mean(jnp.square(x - m), axis=-1, keepdims=True)
        return (x - m) * lax.rsqrt(var + 1e-5) * gamma + beta

    def f(x, gamma, beta):
        return jax.nn.softmax(normalised(x, mean(x), gamma, beta), axis=-1)

    ipu = jax.jit(f, backend="ipu")(x, gamma, beta)
    m = jax.jit(mean, backend="ipu")(x)
    h = jax.jit(normalised, backend="ipu")(x, m, gamma, beta)
    apart = jax.jit(lambda h: jax.nn.softmax(h, axis=-1), backend="ipu")(h)
    np.testing.assert_array_equal(np.asarray(ipu), np.asarray(apart))
    check(f, x, gamma, beta, rtol=2e-5, atol=1e-7)
