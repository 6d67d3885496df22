"""Programs whose elementwise chains the emulator fuses into one compute set (ipu/fusion.h), ipu against cpu: the
fused vertex must compute what the ops compute one by one, through scalar and row/column broadcasts, mixed element
types, compare/select, converts and chains inside loops."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _conformance import CURRENT_SERIES, EXACT, TRANSCENDENTAL, check, random
from jax import lax


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_transcendental_chain(dtype):
    def chain(x):
        y = jnp.tanh(x)
        y = jnp.exp(y) * x + 1.0
        y = jnp.tanh(y * 0.5) - y * y
        return jnp.exp(-jnp.abs(y)) + y * 0.25

    check(chain, random(dtype, (100_003,), low=-3, high=3), **TRANSCENDENTAL[dtype])


def test_layer_norm_and_softmax_rows():
    def f(x, gamma, beta):
        mean = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
        h = (x - mean) * lax.rsqrt(var + 1e-5) * gamma + beta
        return jax.nn.softmax(h, axis=-1)

    rng = np.random.default_rng(0)
    x = rng.normal(size=(37, 129)).astype(np.float32)
    check(f, x, rng.uniform(0.5, 1.5, 129).astype(np.float32), rng.normal(size=129).astype(np.float32),
          rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("cols", [512, 700, 1024, 1300])
def test_row_statistics_broadcast_over_blocks_of_a_row(dtype, cols):
    """A row's value broadcast along it, as a layer norm's mean is: rows longer than the fused vertex's block of 512
    (its blocks reuse the row's value), rows of whole blocks (each block a new row's value) and rows whose blocks start
    in one row and end in the next."""
    def f(x, r):
        return (x - r[:, None]) * r[:, None] + x

    check(f, random(dtype, (7, cols), seed=4), random(dtype, (7,), seed=5), **EXACT)


def test_exact_chain_with_broadcasts_compare_select_and_converts():
    def f(x, col, s):
        y = x * col[None, :] - s
        y = jnp.where(y > 0, y, -y * 0.5)
        z = jnp.clip(y, 0.25, 3.0).astype(jnp.float16) * jnp.float16(2)
        return z.astype(jnp.float32) + x, (y > 1.0).astype(jnp.int32) * 3 + 1

    rng = np.random.default_rng(1)
    check(f, rng.normal(size=(64, 33)).astype(np.float32), rng.normal(size=33).astype(np.float32), np.float32(0.1),
          **EXACT)


def test_integer_and_bool_chains():
    def f(a, b):
        c = (a * 3 + b) ^ (a >> 2)
        return jnp.where((c & 1) == 0, c, -c), jnp.logical_and(a > b, ~(b < 0))

    check(f, random("int32", (1000,), seed=2), random("int32", (1000,), seed=3), **EXACT)


def test_chain_inside_a_loop_body():
    def f(x):
        return lax.fori_loop(0, 7, lambda i, v: jnp.tanh(v * 0.9 + i.astype(jnp.float32) * 0.1) - 0.05, x)

    check(f, random("float32", (4096,), low=-2, high=2), **TRANSCENDENTAL["float32"])


@pytest.mark.parametrize("name, f", [
    ("a*b+c", lambda a, b, c: a * b + c),
    ("c+a*b", lambda a, b, c: c + a * b),
    ("a*b-c", lambda a, b, c: a * b - c),
    ("c-a*b", lambda a, b, c: c - a * b),
    ("horner", lambda a, b, c: ((a * b + c) * b + 0.25) * b - c),
    ("uniform's scale and shift", lambda a, b, c: jnp.maximum(c, a * (b - c) + c)),
    # LLVM writes a sum with a negation without it ((-P) + Q as Q - P...) and contracts P; XLA's simplifier makes
    # -(-P) P
    ("-(a*b)+c", lambda a, b, c: -(a * b) + c),
    ("c+-(a*b)", lambda a, b, c: c + -(a * b)),
    ("c-(-(a*b))", lambda a, b, c: c - jnp.negative(a * b)),
    ("-(a*b)-c", lambda a, b, c: -(a * b) - c),
    ("-(a*b)+-(b*c)", lambda a, b, c: -(a * b) + -(b * c)),
    ("-(a*b)-(-(b*c))", lambda a, b, c: -(a * b) - jnp.negative(b * c)),
    ("-(a*b)-b*c", lambda a, b, c: -(a * b) - b * c),  # the negated product is contracted
    ("-(-(a*b))+c", lambda a, b, c: jnp.negative(-(a * b)) + c),
    ("-(a*b) read twice", lambda a, b, c: (lambda n: (n + c, n))(-(a * b))),
])
def test_multiply_adds_round_once_as_on_cpu(name, f):
    """XLA:CPU contracts a multiply whose one user is an add or subtract into a fused multiply-add (one rounding) on
    a host with FMA; the fused vertex does the same, so these chains give cpu's bits. Inputs where one rounding and
    two differ are many: a*b + c with a = b = 1 + 2^-12, c = -1 is 2^-11 + 2^-24 fused and 2^-11 otherwise."""
    a, b, c = (random("float32", (4099,), seed=seed) for seed in (31, 32, 33))
    a[:3], b[:3], c[:3] = np.float32(1 + 2**-12), np.float32(1 + 2**-12), np.float32(-1)
    check(f, a, b, c, **EXACT)


@pytest.mark.parametrize("name, f", [
    ("-a-c", lambda a, b, c: -a - c),
    ("-(a*b)-c", lambda a, b, c: -(a * b) - c),
    ("-a-b*c", lambda a, b, c: -a - b * c),
    ("-a+-c", lambda a, b, c: -a + -c),
    ("-(a*b)+-c", lambda a, b, c: -(a * b) + -c),
    ("-c+-(a*b)", lambda a, b, c: -c + -(a * b)),
    ("-a-(-c)", lambda a, b, c: -a - jnp.negative(c)),
    ("c-(-a)", lambda a, b, c: c - jnp.negative(a)),
    ("-a+c", lambda a, b, c: -a + c),
])
def test_sums_with_a_negation_keep_the_sign_of_zero(name, f):
    """A sum with a negation, written without it for the fused vertex to contract a product as XLA:CPU does,
    still gives IEEE's zero: (-a) - c with c = -a is +0, not -(a + c) = -0 (fuzz seed 20287112 #228: the ipu gave
    -0 for jnp.sort(v) subtracted from v = -x). Every sign pair of zeros, and products that cancel exactly."""
    zeros = np.array([0.0, -0.0], np.float32)
    a = np.concatenate([np.repeat(zeros, 2), [2.0, -2.0, 3.0, 1.5, -0.0, 0.0]]).astype(np.float32)
    c = np.concatenate([np.tile(zeros, 2), [-2.0, 2.0, 6.0, -3.0, 0.0, -0.0]]).astype(np.float32)
    b = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 2.0, -2.0, 5.0, -1.0], np.float32)
    check(f, a, b, c, **EXACT)


@pytest.mark.parametrize("name,f", [
    # the deeper product is the second operand once LLVM's Reassociate has ordered the sum by rank: the other is
    # contracted (a polynomial written out: 1,380 of 4,099 elements were an ulp off)
    ("0.3*x*x + 0.7*x", lambda x, y: 0.3 * x * x + 0.7 * x),
    ("x*x*x*y + x*y", lambda x, y: x * x * x * y + x * y),
    ("((y*y)*y)*1.3 + x*y", lambda x, y: ((y * y) * y) * 1.3 + x * y),
    ("0.1*x**3 + 0.3*x**2 + 0.7*x + 1.1", lambda x, y: 0.1 * x * x * x + 0.3 * x * x + 0.7 * x + 1.1),
    ("gelu(y) + x*y", lambda x, y: jax.nn.gelu(y) + x * y),
    ("silu(y) + x*y", lambda x, y: jax.nn.silu(y) + x * y),
    # of equal rank, the first is contracted
    ("(y*y)*x + x*y", lambda x, y: (y * y) * x + x * y),
    ("tanh(y)*y + x*y", lambda x, y: jnp.tanh(y) * y + x * y),
    # exp ends in its product by 2^n, which LLVM contracts when exp comes first: the sum then rounds the other
    # product (a Poisson loss, exp(y) - x*y: 714 of 4,099 elements were an ulp off)
    ("exp(y) - x*y", lambda x, y: jnp.exp(y) - x * y),
    ("exp(y) + x*y", lambda x, y: jnp.exp(y) + x * y),
    ("x*y + exp(x)", lambda x, y: x * y + jnp.exp(x)),
    ("exp2(y) - x*y", lambda x, y: jnp.exp2(y) - x * y),
    ("x*y - exp(y)", lambda x, y: x * y - jnp.exp(y)),
    ("x*y + exp(y)", lambda x, y: x * y + jnp.exp(y)),
    # LLVM's CSE makes x * y and y * x one product, read twice: not contracted, so the other one is
    ("(x*y)*((1.053*y)*x) + y*x", lambda x, y: (x * y) * ((1.053 * y) * x) + y * x),
    # a sum with a negated product is a difference for LLVM, whose operands it does not reorder
    ("(x*x)*y + -0.7*x", lambda x, y: (x * x) * y + -0.7 * x),
    # a function XLA:CPU calls is ranked by its place among the loads (tanh here), not by its operand's depth
    ("tanh(x*x*x) + x*y", lambda x, y: jnp.tanh(x * x * x) * 1.5 + x * y),
])
def test_which_product_of_a_sum_is_contracted_follows_llvms_order(name, f):
    """Of a sum of two products (or of exp and a product), XLA:CPU's fused loop contracts the one LLVM puts first:
    Reassociate orders an add's operands by rank (a load's place in the loop body, plus one per instruction above
    it), lowest first, and the combiner contracts the first operand if it is a product. The fused vertex ranks its
    members as XLA writes them (elementwise.cc's llvmRank)."""
    rng = np.random.default_rng(5)
    x, y = (rng.standard_normal(4099).astype(np.float32) for _ in range(2))
    check(f, x, y, **EXACT)


@pytest.mark.parametrize("name,f", [
    # a constant in the loop: jaxlib 0.12's loop emitter writes the ops farthest from the root first, so a * c is
    # loaded before b and ranks below a * b (first operand); depth first from the root it would rank above
    ("b + ((a*c + a*b) - exp(0.847*a)) * c", lambda a, b, c, d: b + (((a * c) + (a * b)) - jnp.exp(0.847 * a)) * c),
    ("(b*d)*(d+c)*d + ((1.924*d)*(a*c) + exp(b)) * -1.062",
     lambda a, b, c, d: (((b * d) * (d + c)) * d) + (((1.924 * d) * (a * c)) + jnp.exp(b)) * -1.062),
    # no constant: the fused computation's order, depth first from the root, on both series
    ("b*((c*c)*(a*c)) + b*(c*(b*c))", lambda a, b, c, d: (b * ((c * c) * (a * c))) + b * (c * (b * c))),
])
def test_the_order_xla_writes_a_loop_in_ranks_its_loads(name, f):
    """The rank of a load is its place in the loop body, which depends on how XLA:CPU writes the fused loop
    (elementwise.cc's llvmRank): these sums contract another product when the loads are ranked in the other order."""
    a, b, c, d = (np.random.default_rng(11 + i).standard_normal(4099).astype(np.float32) for i in range(4))
    check(f, a, b, c, d, **EXACT)


RANKED = {  # functions whose values are cpu's bits on both series, as each series' XLA:CPU writes them
    "exp": jnp.exp, "log": jnp.log, "log1p": jnp.log1p, "expm1": jnp.expm1, "tanh": jnp.tanh, "logistic": lax.logistic,
    "sqrt": jnp.sqrt, "rsqrt": lax.rsqrt, "cbrt": jnp.cbrt, "sin": jnp.sin, "cos": jnp.cos, "tan": jnp.tan,
    "atan": jnp.arctan, "erf": lax.erf, "abs": jnp.abs, "sign": jnp.sign, "floor": jnp.floor, "pow": lambda v: v ** 1.7,
    "max": lambda v: jnp.maximum(v, 0.9),
    "bf16 and back": lambda v: v.astype(jnp.bfloat16).astype(jnp.float32),
    "f16 and back": lambda v: v.astype(jnp.float16).astype(jnp.float32),
}


@pytest.mark.parametrize("name", sorted(RANKED))
def test_a_functions_rank_decides_which_product_of_a_sum_is_contracted(name):
    """G(h) * 1.3 + c_k * z, with c_k a chain of k products: the second product ranks higher than the first from
    some k on, which depends on G's rank on each series (its instructions, or its place among the loads where XLA:CPU
    calls it: elementwise.cc's llvmRank). Below that k cpu contracts the second product, from it on the first."""
    if (name, CURRENT_SERIES) in (("max", False), ("expm1", True)):
        pytest.skip("LLVM moves a product by a constant into the arms of the select this series' function ends "
                    "with, so no product is left to contract: not modelled")
    if (name, CURRENT_SERIES) == ("bf16 and back", True):
        pytest.skip("jaxlib 0.12's loop emitter (a constant in the loop) with a chain of five products or more: the "
                    "order of its loads is not modelled there")
    g = RANKED[name]
    rng = np.random.default_rng(7)
    y, u = rng.uniform(0.8, 1.25, 2048).astype(np.float32), rng.uniform(0.9, 1.1, 2048).astype(np.float32)
    x, z = (rng.standard_normal(2048).astype(np.float32) for _ in range(2))
    for k in range(8):  # (one program each: a product several sums read is contracted into none)
        check(lambda y, x, u, z, k=k: g(y * y * y * y) * 1.3 + functools.reduce(lambda c, _: c * u, range(k), x) * z,
              y, x, u, z, **EXACT)


CURRENT = jax.__version__.split(".")[:2] != ["0", "4"]


def _rows_from_1(m, x):  # a slice op (stablehlo.slice; jax 0.4.13 lowers x[1:] to a dynamic_slice)
    return lax.slice(x, (1, 0), x.shape) if m is jnp else x[1:]


MOVED = [  # (name, f over a module m (jnp, or numpy for the reference), whether XLA:CPU fuses the move and
    #        contracts: on jaxlib 0.4.13, on jaxlib 0.12)
    ("flip of rows", lambda m, a, b, c: m.flip(a * b, 0) - c, True, True),
    ("flip of columns", lambda m, a, b, c: m.flip(a * b, 1) + c, False, True),
    ("transpose", lambda m, a, b, c: (a * b).T + c, True, False),
    # XLA's simplifier removes moves that cancel (a reverse of a reverse of the same dimensions, a transpose that
    # restores the order), so the add reads the product itself
    ("reverse of columns twice", lambda m, a, b, c: (a * b)[:, ::-1][:, ::-1] + c, True, True),
    ("transpose twice", lambda m, a, b, c: (a * b).T.T + c, True, True),
    # jaxlib 0.12's ReshapeMover moves transposes by one permutation below the add that reads them
    ("transpose beside a transpose", lambda m, a, b, c: (a * b).T + c.T, True, True),
    ("reshape", lambda m, a, b, c: (a * b).reshape(16, 16) + c, True, True),
    ("slice", lambda m, a, b, c: _rows_from_1(m, a * b) + c[1:], True, True),
    ("flip then reshape", lambda m, a, b, c: m.flip(a * a, 0).reshape(-1) + c.reshape(-1), True, True),
    ("product read twice", lambda m, a, b, c: m.flip(a * b, 0) + (a * b), False, False),
    # jaxlib 0.12 moves a transpose below an add whose other operand is a broadcast or a constant (fuzz seed
    # 20261801 #283), but not one of an array argument (above)
    ("transpose + row", lambda m, a, b, c: (a * b).T + c[0][None, :], True, True),
    ("transpose - column", lambda m, a, b, c: (a * b).T - c[:, 0][:, None], True, True),
    ("transpose + scalar", lambda m, a, b, c: (a * b).T + m.float32(1.5), True, True),
    # beside a splat constant jaxlib 0.4.13 contracts through a reverse of the minor dimension too, not beside a
    # scalar argument (fuzz seed 20280501 #6125)
    ("constant - flip of columns", lambda m, a, b, c: m.float32(2) - m.flip(a * b, 1), True, True),
    ("flip of columns + scalar argument", lambda m, a, b, c: m.flip(a * b, 1) + c[0, 0], False, True),
]


@pytest.mark.parametrize("name, f, on_04, on_012", MOVED, ids=[m[0] for m in MOVED])
def test_a_moved_product_added_rounds_as_on_cpu(name, f, on_04, on_012):
    """XLA:CPU fuses a reverse, reshape or slice (jaxlib 0.4.13: also a transpose, but not a reverse of the minor
    dimension; jaxlib 0.12: not a transpose) of a product into the loop of the add that reads it, and contracts the
    multiply into the add: the front end moves the multiply after the moves (compiler/passes/contract_through_moves.py)
    where cpu does, so these give cpu's bits. cpu is checked against the fused result too, so that a case fails if
    cpu's fusion changes."""
    a, b, c = (random("float32", (16, 16), seed=seed) for seed in (41, 42, 43))
    check(lambda a, b, c: f(jnp, a, b, c), a, b, c, **EXACT)
    cpu = np.asarray(jax.jit(lambda a, b, c: f(jnp, a, b, c), backend="cpu")(a, b, c))
    fused = f(np, *(x.astype(np.float64) for x in (a, b, c))).astype(np.float32)  # exact products, one rounding
    assert np.array_equal(cpu, fused) == (on_012 if CURRENT else on_04), "cpu's contraction of this chain changed"



CONCATENATED = [  # (name, f over a module m (jnp, or numpy for the reference) of f32[R, C] pieces and an array for
    #              the add, R, C, whether XLA:CPU contracts the products into the add: on jaxlib 0.4.13, on 0.12)
    ("rows of two products", lambda m, x, y, z, d: m.concatenate([x * y, x * z], 0) + d, 16, 16, True, True),
    ("a product twice", lambda m, x, y, z, d: m.concatenate([x * y] * 2, 0) - d, 16, 16, True, True),
    ("a square twice beside a row", lambda m, x, y, z, d: m.concatenate([x * x] * 2, 0) + d[:1], 40, 4, True, True),
    ("columns of two products", lambda m, x, y, z, d: m.concatenate([x * y, y * z], 1) + d, 16, 16, True, False),
    ("short columns of two products", lambda m, x, y, z, d: m.concatenate([x * y, y * z], 1) + d, 8, 8, True,
     True),
    # jaxlib 0.12 contracts each product piece; jaxlib 0.4.13 only sinks a multiply every piece ends with (its
    # contraction of a lone product piece of f32[16, 16] rows is not modelled)
    ("a product and an argument", lambda m, x, y, z, d: m.concatenate([x * y, z], 0) + d, 40, 4, False, True),
    ("columns of a product and an argument", lambda m, x, y, z, d: m.concatenate([z, x * y], 1) - d, 8, 8, False,
     True),
    ("wide columns of a product and an argument", lambda m, x, y, z, d: m.concatenate([z, x * y], 1) - d, 16, 16,
     False, False),
    ("a one-wide product twice", lambda m, x, y, z, d: m.concatenate([x * y] * 2, 1) + d, 8, 1, False, False),
]


@pytest.mark.parametrize("name, f, rows, columns, on_04, on_012", CONCATENATED, ids=[c[0] for c in CONCATENATED])
def test_a_concatenate_of_products_added_rounds_as_on_cpu(name, f, rows, columns, on_04, on_012):
    """XLA:CPU fuses a concatenate into the loop of the add that reads it and computes each piece in a block of its
    own; when every piece is a product, LLVM sinks the multiply into the add's block and contracts it (fuzz seed
    20286112 #700: ``concatenate([dynamic_update_slice(a, u, i) * a] * 2) + b``). The front end writes the product
    of concatenates there (compiler/passes/contract_through_moves.py). cpu is checked against the fused result too,
    so that a case fails if cpu's code generation changes."""
    x, y, z = (random("float32", (rows, columns), seed=seed) for seed in (61, 62, 63))
    size = (2 * rows, columns) if "columns" not in name and "one-wide" not in name else (rows, 2 * columns)
    d = random("float32", size, seed=64)
    check(lambda *a: f(jnp, *a), x, y, z, d, **EXACT)
    cpu = np.asarray(jax.jit(lambda *a: f(jnp, *a), backend="cpu")(x, y, z, d))
    fused = f(np, *(v.astype(np.float64) for v in (x, y, z, d))).astype(np.float32)
    assert np.array_equal(cpu, fused) == (on_012 if CURRENT else on_04), "cpu's contraction of this chain changed"


READ_AGAIN = [  # (name, f over a module m (jnp, or numpy for the reference), whether cpu contracts the add)
    ("x * c + y beside exp(x * c)", lambda m, x, y: ((t := x * m.float32(3.7)) + y, m.exp(t)), True),
    ("x * x - y beside max(x * x)", lambda m, x, y: ((t := x * x) - y, m.max(t, 1)), True),
    ("x / c - max(x / c), softmax's shift", lambda m, x, y: ((t := x / m.float32(3.7)) - m.max(t, 1, keepdims=True),
                                                            ), True),
    ("x * row + y beside x * row", lambda m, x, y: ((t := x * y[0]) + y, t), True),
    ("x * y + 1 and x * y - 2", lambda m, x, y: ((t := x * y) + m.float32(1), t - m.float32(2)), True),
    ("x * y + 1 beside max(x * y)", lambda m, x, y: ((t := x * y) + m.float32(1), m.max(t, 0)), False),
    # a reduce XLA:CPU fuses takes a copy too: no reduced dimension longer than its tree window (32), or variadic
    # (argmin), and with jaxlib 0.4.13 the innermost dimension reduced (fuzz seed 20282001 #9347: x ** 3 - y beside
    # jnp.argmin(x ** 3))
    ("x * y + 1 beside argmin(x * y)", lambda m, x, y: ((t := x * y) + m.float32(1), m.argmin(t)), True),
    ("x * y + 1 beside argmax(x * y, 0)", lambda m, x, y: ((t := x * y) + m.float32(1), m.argmax(t, 0)),
     (False, True)),
    ("x * y + 1 beside maxima of 11", lambda m, x, y: ((t := x * y) + m.float32(1), m.max(t.reshape(64, 3, 11), 2)),
     True),
    # (jaxlib 0.4.13 copies a product into any move that reads it, the reshape here)
    ("x * y + 1 beside maxima of 8 rows", lambda m, x, y: ((t := x * y) + m.float32(1),
                                                          m.max(t.reshape(8, 8, 33), 1)), True),
    # XLA copies the product only where it fuses into every reader along every path (CanFuseOnAllPaths): through
    # elementwise ops, an expensive one (exp) on the way read by one op only
    ("x * y + 1 beside t * exp(t)", lambda m, x, y: ((t := x * y) + m.float32(1), t * m.exp(t)), True),
    ("x * y + 1 beside t / (1 + t * t)", lambda m, x, y: ((t := x * y) + m.float32(1), t / (1 + t * t)), True),
    ("x * y + 1 beside t * e + e * 2 of e = exp(t)", lambda m, x, y: ((t := x * y) + m.float32(1),
                                                                     t * (e := m.exp(t)) + e * 2), False),
    # the cube read twice more on one path, as jaxlib 0.12's expansion of arcsin(x * x * x) reads it (fuzz seed
    # 20261901 #283: 2 * atan2(t, 1 + sqrt(1 - t * t)))
    ("x * x * x + x beside sqrt(1 - t * t) + t", lambda m, x, y: (
        (t := (x * x).astype(m.float32).astype(x.dtype) * x) + x, m.sqrt(1 - t * t) + t), True),
    # both adds in one loop (they meet in the last subtract): one product with two users there, rounded
    ("(t + 1) - (t - y) * 0.5 of t = x * c", lambda m, x, y: (((t := x * m.float32(1.3)) + m.float32(1)) -
                                                             (t - y) * m.float32(0.5),), False),
    # the copy goes through the moves cpu fuses into the add's loop (fuzz seed 20261801 #283: jnp.square(x)
    # read by logsumexp over rows and, transposed, by an add)
    ("(x * x).T + 1 beside max(x * x, 0)", lambda m, x, y: ((t := x * x).T + m.float32(1), m.max(t, 0)), True),
    ("(x * x).T + y[0] beside x * x", lambda m, x, y: ((t := x * x).T + y[0][:, None], t), True),
    ("flip(x * c, 0) - y beside max(x * c, 1)", lambda m, x, y: (m.flip(t := x * m.float32(3.7), 0) - y,
                                                                   m.max(t, 1)), True),
    # a moved product that several ops read: XLA copies the move and the product into each reader's loop (fuzz seed
    # 20280501 #6125: t = jnp.flip(jnp.square(x), 0), 2 - t, and t reshaped as a result)
    ("2 - t and t returned, t = flip(x * x, 0)", lambda m, x, y: (m.float32(2) - (t := m.flip(x * x, 0)),
                                                                 t.reshape(-1)), True),
    ("2 - t and t returned, t = flip(x * x, 1)", lambda m, x, y: (m.float32(2) - (t := m.flip(x * x, 1)),
                                                                 t.reshape(-1)), True),
    ("2 - t and t returned, t = (x * x).T", lambda m, x, y: (m.float32(2) - (t := (x * x).T), t.reshape(-1)), True),
    ("2 - t and exp(t), t = flip(x * y, 0)", lambda m, x, y: (m.float32(2) - (t := m.flip(x * y, 0)), m.exp(t)),
     (True, None)),  # jaxlib 0.12 copies x * y there for f32[16, 16], not for f32[8, 6]: open
    # a product Python computes twice, which jax writes twice and XLA's CSE makes one: read whole beside the add (a
    # result, a sum XLA does not fuse, a matmul), it is rounded there; a transpose of it returned takes a copy
    ("x * y + 1 beside x * y returned, written twice", lambda m, x, y: (x * y + m.float32(1), x * y), False),
    ("x * y - 1 beside max(x * y), written twice", lambda m, x, y: (x * y - m.float32(1), m.max(x * y)), False),
    ("x * y + 1 beside (x * y) @ y.T, written twice", lambda m, x, y: (x * y + m.float32(1), (x * y) @ y.T), False),
    ("x * y + 1 beside (x * y).T returned, written twice", lambda m, x, y: (x * y + m.float32(1), (x * y).T), True),
    ("x * y + 1 beside (x * y).T returned", lambda m, x, y: ((t := x * y) + m.float32(1), t.T), True),
    # two adds of one loop read the one product XLA's CSE makes of jax's two: neither contracts it
    ("max(x * y - 1, 1 - x * y), written twice", lambda m, x, y: (
        m.maximum(x * y - m.float32(1), m.float32(1) - x * y),), False),
]


@pytest.mark.parametrize("name, f, contracted", READ_AGAIN, ids=[c[0] for c in READ_AGAIN])
def test_a_product_read_again_is_contracted_into_each_add_as_on_cpu(name, f, contracted):
    """XLA:CPU duplicates a cheap multiply into the loop of each op that reads it (it is effectively unary: one operand
    is a broadcast or a constant; or its operands hold no more elements than it; or every reader is elementwise, or
    with jaxlib 0.4.13 a move), with the moves between them when several ops read a move, and
    contracts the copy inside an add or subtract: the front end gives each such add its own copy
    (compiler/passes/duplicate_products.py). cpu is checked against a fused reference as well, so that a case fails
    when cpu's fusion changes."""
    if isinstance(contracted, tuple):  # (on jaxlib 0.4.13, on jaxlib 0.12); None: not modelled on that series
        contracted = contracted[1] if CURRENT else contracted[0]
        if contracted is None:
            pytest.skip("cpu's copying of this product is not modelled on this series (open in the fuzz table)")
    x, y = (random("float32", (64, 33), seed=seed) for seed in (51, 52))
    check(lambda x, y: f(jnp, x, y), x, y, **EXACT)
    cpu = np.asarray(jax.jit(lambda x, y: f(jnp, x, y), backend="cpu")(x, y)[0])  # the other readers kept
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    first = f(np, x64, y64)[0]
    if "shift" in name:  # XLA multiplies by the reciprocal; the max is of rounded products, the subtract's is exact
        r = np.float32(1) / np.float32(3.7)
        first = x64 * np.float64(r) - np.max(x * r, 1, keepdims=True)
    fused = first.astype(np.float32)
    assert np.array_equal(cpu, fused) == contracted, "cpu's duplication and contraction of this product changed"


def test_a_product_written_twice_in_a_loop_body_rounds_as_on_cpu():
    """A loop body that returns a product and adds it, the product written twice (by Python, so by jax): XLA's CSE
    makes one, which the body returns whole, so cpu adds the rounded product (compiler/passes/duplicate_products.py,
    _merge_repeats; 716 of 960 elements differed)."""
    rng = np.random.default_rng(3)
    b, c = rng.uniform(0.5, 9, (24, 40)).astype(np.float32), rng.uniform(-4, 9, (24, 40)).astype(np.float32)
    check(lambda b, c: jax.lax.fori_loop(0, 3, lambda i, h: (h[0] * b + c, h[0] * b), (c, c)), b, c, **EXACT)


def test_a_scan_that_stacks_a_product_it_adds_contracts_the_add_as_on_cpu():
    """XLA:CPU copies a product into the in-place update of a scan's stacked output (a dynamic_update_slice of it,
    through jax's broadcast that adds the stacking dimension) and into the add of the carry, where it contracts it:
    lax.scan(lambda h, x: (h * x + 1, h * x)) on both series (163 of 960 elements differed when jax wrote the
    product once, 0 when twice)."""
    rng = np.random.default_rng(3)
    b, c = rng.uniform(0.5, 9, (24, 40)).astype(np.float32), rng.uniform(-4, 9, (24, 40)).astype(np.float32)
    check(lambda b, c: jax.lax.scan(lambda h, x: (lambda p: (p + 1, p))(h * x), b[0], c), b, c, **EXACT)
    check(lambda b, c: jax.lax.scan(lambda h, x: (h * x + 1, h * x), b[0], c), b, c, **EXACT)


def test_a_call_is_inlined_before_its_ops_are_fused_as_xla_inlines_it():
    """jnp.where is a call of a jitted function, and XLA inlines every call before it fuses: in ``jnp.where(p, t, y)
    - t`` of a product ``t`` the select and the subtract are one loop that reads one rounded product, so the result is
    0 where ``p`` holds (fuzz seed 20281901 #3024, both series). The front end inlines calls as XLA does
    (rules/structure.py, inlined_call); before, the subtract took a copy of the product of its own, contracted into
    it, and gave the product's rounding error there."""
    x, y = (random("float32", (64, 33), seed=seed) for seed in (53, 54))
    p = random("bool", (64, 33), seed=55)
    f = lambda p, x, y: jnp.where(p, (t := x * jnp.float32(3.7)), y) - t  # noqa: E731
    check(f, p, x, y, **EXACT)
    cpu = np.asarray(jax.jit(f, backend="cpu")(p, x, y))
    assert (cpu[p] == 0).all() and p.any(), "cpu no longer fuses the select with the subtract: the premise changed"


def test_logsumexp_of_huge_scaled_values_is_cpus_nan():
    """The product's rounding error, which cpu's contracted copy leaves in softmax's ``t - max(t)``, is exp's
    argument: for |t| near 1e38 it overflows, and cpu's logsumexp is NaN where the max is finite (the fuzzer's
    seed 20261310 #3085). The ipu computes what cpu computes."""
    x = np.zeros((2, 5, 8), np.float32)
    x[1, 1, :2] = [2.0877491e38, 2.6517673e38]
    x[1, 0, :2] = [1.0190146, 0.81893051]
    inf = np.zeros((2, 8), np.float32)
    inf[1, :2] = np.inf
    check(lambda x, inf: inf - jax.nn.logsumexp(x / 3.7, axis=1), x, inf, **EXACT)
    cpu = np.asarray(jax.jit(lambda x, inf: inf - jax.nn.logsumexp(x / 3.7, axis=1), backend="cpu")(x, inf))
    assert np.isnan(cpu[1, :2]).any(), "cpu no longer contracts the copy: this test's premise changed"


def test_erf_inv_contracts_into_the_add_it_feeds():
    """jaxlib 0.4.13's XLA:CPU contracts erf_inv's last product (x * p(w)) into an add or subtract fused with it:
    lax.erf_inv(x) + 3.0 is one fused multiply-add there, an ulp from the rounded erf_inv plus 3.0 on 3% of inputs
    (fuzz seed 20271601 #25), and the ipu's fused vertex computes it so, with +-1, denormals and NaN as erf_inv's.
    jaxlib 0.12: within an ulp of the result or of 1 (open in the fuzz table)."""
    rng = np.random.default_rng(3)
    x = np.concatenate([np.clip(rng.standard_normal(4096) / 3, -0.999, 0.999),
                        [1.0, -1.0, 0.0, -0.0, 1e-40, -1e-40, 0.5]]).astype(np.float32)
    c = rng.standard_normal(x.size).astype(np.float32)
    check(lambda x, c: (lax.erf_inv(x) + 3.0, lax.erf_inv(x) - 1.0, 1.0 - lax.erf_inv(x), c - lax.erf_inv(x)), x, c,
          **(EXACT if not CURRENT_SERIES else {"rtol": 3e-7, "atol": 2.4e-7}))
