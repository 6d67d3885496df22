"""XLA's algebraic simplifier, per series: the rewrites that change results on cpu, applied as XLA applies them.

XLA rewrites the module before XLA:CPU compiles it, and some rewrites change the bits of a result: ``A + 0`` and
``A * 1`` are A (a denormal A is not flushed), ``-0 - A`` is ``-A``, ``min(max(x, c0), c1)`` is a clamp with clamp's
denormal rule, ``real(complex(A, B))`` is A, a sort or a dynamic_update_slice that moves nothing is its operand,
``A * convert(p)`` is a select, ``pow(A, c)`` for the constants XLA folds (``A * A``, ``1 / A``, ``sqrt``...),
``log`` of products and powers, jaxlib 0.4.13's ``exp(A) * exp(B) => exp(A + B)``, ``pow(exp(A), B) =>
exp(A * B)`` and ``sqrt(A * A) => |A|``. The ipu computes what cpu computes only if it computes the rewritten
program, so each rule here writes that program; each names the series and element types it applies to, as measured
on cpu (test_xla_bits.py, test_denormals.py and the fuzz table), and leaves every other op as it is."""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Tuple

from jax._src.lib.mlir import ir

from jax_ipu import _jax

from .. import attributes as A
from .. import facts as F
from .. import ops as O
from .. import rewrite as W


def _constant_bound(op: Any) -> Optional[Tuple[Any, Any]]:
    """(x, c) for a binary op of which exactly one operand c is a constant (F.is_constant or F.splat_value); else
    None."""
    a, b = op.operands
    constant = [F.is_constant(v) or F.splat_value(v) is not None for v in (a, b)]
    if constant[0] == constant[1]:
        return None
    return (b, a) if constant[0] else (a, b)


def _through_parameter(value: Any) -> bool:
    """`value` is a constant seen through a call's parameter (F.splat_value), not one in this function."""
    producer = F.producer_of(value)
    while producer is not None and producer.name in ("stablehlo.broadcast_in_dim", "stablehlo.negate",
                                                      "stablehlo.convert"):
        producer = F.producer_of(producer.operands[0])
    return producer is None


def _is_minus_zero(value: Any) -> bool:
    number = F.splat_value(value)
    return number == 0.0 and math.copysign(1.0, number) < 0


def _sorts_one_element(op: Any) -> bool:
    """A stablehlo.sort along a dimension of at most one element: its results are its operands."""
    dimension = O.read_attrs(op.attributes).get("dimension")
    if not op.operands or not A.is_a(ir.RankedTensorType, op.operands[0].type):
        return False
    shape = ir.RankedTensorType(op.operands[0].type).shape
    return isinstance(dimension, int) and 0 <= dimension < len(shape) and shape[dimension] <= 1


def _call_passing_operands(op: Any) -> Optional[List[Any]]:
    """For a call of a private function that returns its parameters through sorts of one element only (and constants
    their comparators read), the caller's values it returns; else None."""
    block = F.callee_block(op)
    if block is None:
        return None
    params = list(block.arguments)
    passed: List[Tuple[Any, Any]] = [(p, v) for p, v in zip(params, op.operands)]

    def caller_value(value: Any) -> Optional[Any]:
        return next((v for p, v in passed if p == value), None)

    for o in block.operations:
        o = getattr(o, "operation", o)
        if o.name == "stablehlo.constant":  # the comparator's constants, hoisted out of it
            continue
        if o.name == "stablehlo.sort" and _sorts_one_element(o):
            sources = [caller_value(v) for v in o.operands]
            if any(v is None for v in sources):
                return None
            passed.extend(zip(o.results, sources))
        elif o.name == "func.return":
            out = [caller_value(v) for v in o.operands]
            return None if any(v is None for v in out) or len(out) != len(op.results) else out
        else:
            return None
    return None


def converted_predicate(value: Any, shape: Any) -> Optional[Any]:
    """The predicate (an i1 tensor of `shape`) that `value` is the conversion of; else None."""
    producer = F.producer_of(value)
    if producer is not None and producer.name == "stablehlo.convert" and \
            str(ir.RankedTensorType(producer.operands[0].type).element_type) == "i1" and \
            list(producer.operands[0].type.shape) == list(shape):
        return producer.operands[0]
    return None


def sees_converted_predicate(predicate: Any, other: Any, quotient: bool = False) -> bool:
    """Whether XLA's rule for a converted predicate P sees the convert beside `other` (the other factor, or the
    divisor). XLA's simplifier sinks a broadcast below the elementwise ops that read it before that rule visits
    them: convert(broadcast(Q)) => broadcast(convert(Q)), and then below the product or quotient only where `other`
    is a broadcast of a scalar (a splat constant is one to XLA) or of Q's shape along the same dimensions, so that
    the rule sees convert(Q) beside the sunk operand. A broadcast predicate beside any other operand stays a product
    on cpu (NaN and -0 where the
    mask is 0: a vmapped mask, fuzz seed 20286612 #1260), and a broadcast scalar predicate's quotient becomes a
    quotient of scalars, with no broadcast divisor left for the quotient's rule (0 / 0 is NaN). Measured on both
    series' optimised HLO."""
    producer = F.producer_of(predicate)
    if producer is None or producer.name != "stablehlo.broadcast_in_dim":
        return True
    source, beside = producer.operands[0], F.producer_of(other)
    if F.splat_value(other) is not None:
        sunk = True
    elif beside is None or beside.name != "stablehlo.broadcast_in_dim":
        return False
    else:
        shape = list(beside.operands[0].type.shape)
        dims = [A.int_list(o.attributes["broadcast_dimensions"]) for o in (producer, beside)]
        sunk = not shape or (shape == list(source.type.shape) and dims[0] == dims[1])
    return sunk and not (quotient and not list(source.type.shape))


def _predicate_product(op: Any) -> Optional[Tuple[Any, Any]]:
    """(predicate, A) for a multiply of A by the conversion of a predicate of the same shape (either side) that
    XLA's rule sees (sees_converted_predicate); else None."""
    for converted, other in (op.operands, reversed(list(op.operands))):
        predicate = converted_predicate(converted, op.results[0].type.shape)
        if predicate is not None and sees_converted_predicate(predicate, other):
            return predicate, other
    return None


def pow_by_constant(rewrite: "W.Rewrite", a: int, c: float, result: Optional[Dict[str, Any]] = None) -> int:
    """pow(A, c) for c in F.POWERS_REWRITTEN as cpu computes it: XLA's HandlePower pow(A, 0) => 1, pow(A, 1) => A,
    pow(A, 2) => A * A, pow(A, 3) => A * (A * A), pow(A, -1) => 1 / A; pow(A, 0.5) => A == -inf ? inf : |sqrt(A)|
    (LLVM's pow simplification, which XLA:CPU's code goes through: a denormal or -0 gives +0 under
    denormals-are-zero, where libm's pow of a negative denormal is NaN). Returns the result's id (`result`'s, if
    given: a 1 or A is then a broadcast or copy into it)."""
    emit, splat = rewrite.emit, rewrite.splat
    if c in (0.0, 1.0):
        value = splat(1.0) if c == 0.0 else a
        return emit("reshape", [value], result=result) if result is not None else value
    if c == 2.0:
        return emit("multiply", [a, a], result=result)
    if c == 3.0:
        return emit("multiply", [a, emit("multiply", [a, a])], result=result)
    if c == -1.0:
        return emit("divide", [splat(1.0), a], result=result)
    root = emit("abs", [emit("sqrt", [a])])
    minus_inf = emit("compare", [a, splat(-math.inf)], "bool", attrs={"comparison_direction": "EQ",
                                                                       "compare_type": "FLOAT"})
    return emit("select", [minus_inf, splat(math.inf), root], result=result)


def _clamp_parts(op: Any) -> Optional[Tuple[Any, Any, Any]]:
    """(c0, x, c1) when `op` is min(max(x, c0), c1) or max(min(x, c1), c0), either operand order, with c0 and c1
    splat constants (or broadcast scalars) of the result's type and c0 <= c1; else None."""
    def split(o: Any) -> Optional[Tuple[Any, Any]]:  # (constant operand, other operand)
        a, b = o.operands
        if F.splat_value(b) is not None:
            return b, a
        if F.splat_value(a) is not None:
            return a, b
        return None

    outer = split(op)
    if outer is None:
        return None
    outer_const, inner_value = outer
    inner = F.producer_of(inner_value)
    if inner is None or inner.name != F.MIN_MAX[op.name] or inner_value.type != op.results[0].type:
        return None
    parts = split(inner)
    if parts is None or parts[1].type != op.results[0].type or outer_const.type != op.results[0].type \
            or parts[0].type != op.results[0].type:
        return None
    inner_const, x = parts
    low, high = (inner_const, outer_const) if op.name == "stablehlo.minimum" else (outer_const, inner_const)
    low_value, high_value = F.splat_value(low), F.splat_value(high)
    if low_value is None or high_value is None or not low_value <= high_value:  # NaN bounds too: XLA leaves them
        return None
    return low, x, high


def _square_of(value: Any) -> Any:
    """A when `value` is A * A, or pow(A, 2), which XLA's simplifier makes A * A first (HandlePower: sqrt(x ** 2.0)
    is |x| too, fuzz seed 20273101 #331); else None."""
    producer = F.producer_of(value)
    if producer is not None and producer.name == "stablehlo.power" and F.splat_value(producer.operands[1]) == 2.0:
        return F.alias(producer.operands[0])
    if producer is None or producer.name != "stablehlo.multiply":
        return None
    a, b = (F.alias(v) for v in producer.operands)
    return a if a == b else None


def _same_broadcast(t: Any, a: Any, b: Any) -> bool:
    """`a` and `b` broadcast one value the same way (broadcast_in_dim chains composed: XLA's simplifier merges a
    broadcast of a broadcast, its CSE then makes the two one instruction before max(A, A) is seen):
    jnp.minimum(x, vmap(lambda _: x)(y)) (fuzz seed 20270101 #674)."""
    if a.type != b.type:
        return False
    sources = [_broadcast_source(t, v) for v in (a, b)]
    return None not in sources and sources[0] == sources[1]


def _broadcast_source(t: Any, value: Any) -> Optional[Tuple[int, Tuple[int, ...]]]:
    """(the value a chain of broadcast_in_dim ops starts from, its dimensions' places in `value`), or None."""
    dims: Optional[List[int]] = None
    producer = F.producer_of(value)
    while producer is not None and producer.name == "stablehlo.broadcast_in_dim":
        here = [int(d) for d in A.int_list(producer.attributes["broadcast_dimensions"])]
        dims = here if dims is None else [dims[d] for d in here]
        value = producer.operands[0]
        producer = F.producer_of(value)
    return None if dims is None else (t.use(value), tuple(dims))


def _identity_operand(t: Any, op: Any) -> Any:
    """For A + 0, 0 + A, A - 0, A * 1, 1 * A, A / 1, max(A, -inf), min(A, +inf), max(A, A), min(A, A) (the
    constant a splat, or a broadcast scalar, of the result's type; either side where the op commutes): the MLIR
    value A; else None. With jaxlib 0.12 also clamp(-inf, A, +inf) (XLA's simplifier takes a clamp of constant
    bounds for a maximum and a minimum, and those for A)."""
    if op.name == "stablehlo.clamp" and _jax.is_current_series() and t.real_float(op):
        low, a, high = op.operands
        infinite = F.splat_value(low) == -math.inf and F.splat_value(high) == math.inf
        return a if infinite and a.type == op.results[0].type else None
    rules = {"stablehlo.add": (0.0, True), "stablehlo.subtract": (0.0, False),
             "stablehlo.multiply": (1.0, True), "stablehlo.divide": (1.0, False),
             "stablehlo.maximum": (-math.inf, True), "stablehlo.minimum": (math.inf, True)}
    if op.name not in rules or len(op.operands) != 2 or not t.real_float(op):
        return None
    identity, commutes = rules[op.name]
    a, b = op.operands
    if op.name in F.MIN_MAX and (a == b or t.use(a) == t.use(b) or _same_broadcast(t, a, b)) \
            and a.type == op.results[0].type:
        return a  # max(A, A) and min(A, A) are A (also once a call is seen through): a denormal A stays
    if a.type != op.results[0].type and b.type != op.results[0].type:
        return None
    if F.splat_value(b) == identity and a.type == op.results[0].type:
        return a
    if commutes and F.splat_value(a) == identity and b.type == op.results[0].type:
        if op.name in F.MIN_MAX and not _jax.is_current_series() and _through_parameter(a):
            return None  # jaxlib 0.4.13: it stays on the left, where maxps reads b's denormals as zeros
        return b
    return None


def _power_of_constant(t: Any, entry: Dict[str, Any], mlir_op: Any) -> List[Dict[str, Any]]:
    """A real power with a constant exponent as cpu computes it (pow_by_constant)."""
    exponent = F.splat_value(mlir_op.operands[1])
    assert exponent is not None  # the caller matched it
    out = entry["results"][0]
    if out["dtype"] != "bf16":
        rewrite = W.Rewrite(t, entry)
        pow_by_constant(rewrite, entry["operands"][0], exponent, out)
        return rewrite.ops
    # bf16 (a ** 0.5, a ** 2): LLVM's expansion of XLA:CPU's f32 pow, rounded once (the same bf16 value as each op
    # rounded: the square of a bf16 is exact in f32, |sqrt| and the select are exact), whose f32 value a convert to
    # f32 reads (excess_precision.py)
    rewrite = W.Rewrite(t, entry, dtype="f32")
    wide = pow_by_constant(rewrite, rewrite.emit("convert", [entry["operands"][0]]), exponent)
    rewrite.emit("convert", [wide], "bf16", result=out)
    t.unrounded[mlir_op.results[0]] = wide
    return rewrite.ops


def _power_of_exp(t: Any, entry: Dict[str, Any], mlir_op: Any, exponent: int) -> List[Dict[str, Any]]:
    """jaxlib 0.4.13's HandlePower: pow(exp(A), B) => exp(A * B), for any B but the 0 and 1 its earlier rules fold,
    whatever else reads the exp (f32 and f16; bf16 pairs are never seen: _simplified_float). So sqrt-like powers
    of an exp round once: f16 jnp.exp(x) ** 0.5 at x = 1.843 is 2.5137 on cpu, 2.5117 through the rounded exp
    (fuzz seed 20272101 #6290). The exp no longer read is left to the dead-code pass."""
    rewrite = W.Rewrite(t, entry)
    product = rewrite.emit("multiply", [exponent, entry["operands"][1]])
    rewrite.emit("exponential", [product], result=entry["results"][0])
    t.exponents[mlir_op.results[0]] = product  # an exp to the rules after it (a divide by it, a log of it)
    return rewrite.ops


def _log(t: Any, entry: Dict[str, Any], mlir_op: Any) -> Optional[List[Dict[str, Any]]]:
    """A real log as XLA's algebraic simplifier rewrites it (HandleLog), in both series:
      log(sqrt(A)) => log(A) * 0.5         log(rsqrt(A)) => log(A) * -0.5
      log(pow(A, B)) => B == 0 ? 0 : log(|A|) * B   (not for a B of 0, 1, 2, 3 or -1: the power is folded first)
      log(exp(A)) => A                     (jaxlib 0.4.13)
      log(move(sqrt(A))) => move(log(A) * 0.5), the same for rsqrt (move: broadcasts and reshapes)
    None when none applies. The sqrt, pow or exp no longer read is left to the dead-code pass."""
    producer: Any = F.producer_of(mlir_op.operands[0])
    name = producer.name if producer is not None else ""
    out = entry["results"][0]
    moves, below = [], producer
    while below is not None and below.name in F.MOVED:
        moves.append(below)
        below = F.producer_of(below.operands[0])
    if moves and below is not None and below.name in ("stablehlo.sqrt", "stablehlo.rsqrt"):
        # XLA sinks broadcasts and reshapes below the elementwise log first: log(broadcast(sqrt(A))) =>
        # broadcast(log(A) * 0.5), whatever else reads them (f16 and f32, both series; jax.vmap of a captured
        # sqrt, fuzz seed 20271001 #2053)
        rewrite = W.Rewrite(t, entry, shape=list(t.tensor(below.results[0])[1]))
        half = 0.5 if below.name == "stablehlo.sqrt" else -0.5
        moved = rewrite.emit("multiply", [rewrite.emit("log", [t.use(below.operands[0])]), rewrite.splat(half)])
        for i, move in enumerate(reversed(moves)):
            moved = rewrite.emit(move.name.split(".", 1)[1], [moved], shape=list(t.tensor(move.results[0])[1]),
                                 attrs=O.read_attrs(move.attributes), result=out if i == len(moves) - 1 else None)
        return rewrite.ops
    if name == "stablehlo.exponential" and not _jax.is_current_series():
        t.ids[mlir_op.results[0]] = t.use(producer.operands[0])
        return []
    if name not in ("stablehlo.sqrt", "stablehlo.rsqrt", "stablehlo.power"):
        return None
    if name == "stablehlo.power" and F.splat_value(producer.operands[1]) in F.POWERS_XLA_FOLDS:
        return None  # XLA's simplifier visits the power first and folds it (a ** 2 => a * a): no power to see
    rewrite = W.Rewrite(t, entry)
    ops, emit, splat = rewrite.ops, rewrite.emit, rewrite.splat
    a = t.use(producer.operands[0])
    if name != "stablehlo.power":
        emit("multiply", [emit("log", [a]), splat(0.5 if name == "stablehlo.sqrt" else -0.5)], result=out)
        return ops
    b = t.use(producer.operands[1])
    product = emit("multiply", [emit("log", [emit("abs", [a])]), b])
    exponent = F.splat_value(producer.operands[1])
    if exponent is not None and exponent != 0:
        ops[-1]["results"] = [out]  # a constant B that is not 0: XLA folds the select away
        return ops
    zero = splat(0.0)
    is_zero = emit("compare", [b, zero], "bool", attrs={"comparison_direction": "EQ", "compare_type": "FLOAT"})
    emit("select", [is_zero, zero, product], result=out)
    return ops


def _extremum_with_constant(t: Any, entry: Dict[str, Any], op: Any, x: Any, bound: Any) -> List[Dict[str, Any]]:
    """max(x, c) or min(x, c) of a float x and a constant c, either operand order. XLA's simplifier puts a
    commutative op's constant on the right, except one it sees only after inlining a call that receives it as a
    parameter (jnp.clip's bound in jax 0.4.13), and LLVM lowers a maximum or minimum knowing a splat constant
    (relu's maxps on jaxlib 0.4.13, maxss on 0.12). So the op is written in XLA's operand order, marked
    "constant_operand": "lhs" or "rhs" when c is a splat, and the emulator computes it as XLA:CPU does
    (ipu/scalar_ops.h, xlaConstant). An array constant is only put on the right."""
    moved = not _through_parameter(bound) or entry["operands"][1] == t.use(bound)
    operands = [t.use(x), t.use(bound)] if moved else [t.use(bound), t.use(x)]
    if F.splat_value(bound) is None:
        return [dict(entry, operands=operands)]
    return [dict(entry, operands=operands, attrs=dict(entry["attrs"], constant_operand="rhs" if moved else "lhs"))]


def exponent_of(t: Any, value: Any) -> Optional[int]:
    """The id of X where XLA's simplifier sees `value` as exp(X) (an f32 or f16 exponential, or what a rule of the
    front end wrote as one), not across a branch's edge; else None."""
    producer = F.producer_of(value)
    if producer is None:
        return None
    if value in t.exponents:
        return t.exponents[value]
    if producer.name == "stablehlo.exponential" and t.simplified_float(producer):
        return t.use(producer.operands[0])
    return None


def extremum_pair_as_clamp(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name in F.MIN_MAX and not scalar_body and t.real_float(op)
            and (not _jax.is_current_series() or (t.bf16(op) and O.host().get("avx512")))
            and (parts := _clamp_parts(op)) is not None):
        return False
    # XLA's simplifier: min(max(x, c0), c1) and max(min(x, c1), c0) => clamp(c0, x, c1) for constants
    # c0 <= c1 (jnp.clip), which XLA:CPU computes with clamp's own denormal rule; before the identities,
    # as there: min(max(x, -inf), inf) is a clamp. A denormal bound is a zero of its sign there
    # (maxps/minps read it so: jnp.clip(x, 0, 1e-40) is 0). jaxlib 0.12 computes such a pair of bf16
    # ops as its clamp too where that changes a result, on an AVX-512 host: a denormal read as a zero,
    # which its maximum alone keeps (measured on an AMD EPYC of family 26: jnp.clip(d, -1, 1) is 0,
    # jnp.maximum(d, -1) is d); elsewhere both give the same values
    entry = t.entry(op)
    rewrite = W.Rewrite(t, entry)
    operands = []
    for k, v in enumerate(parts):
        bound = (F.splat_value(v) if k != 1 else None) or 0.0
        denormal = 0 < abs(bound) < F.F32_TINY
        operands.append(rewrite.splat(math.copysign(0.0, bound)) if denormal else t.use(v))
    body.extend(rewrite.ops + [dict(entry, op="clamp", mlir="stablehlo.clamp", operands=operands)])
    return True


def minus_zero_minus(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "stablehlo.subtract" and not scalar_body and t.simplified_float(op)
            and _is_minus_zero(op.operands[0]) and op.operands[1].type == op.results[0].type):
        return False
    # XLA's simplifier: -0 - A => -A (the same bits: a sign flip, so a denormal A stays)
    entry = t.entry(op)
    body.append(dict(entry, op="negate", mlir="stablehlo.negate", operands=entry["operands"][1:]))
    return True


def sort_of_one(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "stablehlo.sort" and not scalar_body and _sorts_one_element(op)):
        return False
    # XLA's simplifier: a sort along a dimension of one element returns its operands (so a denormal
    # that a later min(sort(x), x) reads is x itself there: min(A, A) is A)
    for result, operand in zip(op.results, op.operands):
        t.ids[result] = t.use(operand)
    return True


def call_of_sort_of_one(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "func.call" and not scalar_body and (passed := _call_passing_operands(op)) is not None):
        return False
    # ... and through a call of a function that is such a sort (jnp.sort is a call of @sort), which XLA
    # inlines first
    for result, operand in zip(op.results, passed):
        t.ids[result] = t.use(operand)
    return True


def empty_update(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "stablehlo.dynamic_update_slice" and not scalar_body and
            t.type_of(op.operands[1].type) is not None and 0 in t.tensor(op.operands[1])[1]):
        return False
    # XLA's simplifier: an update of no elements leaves the operand, which is then the same value for
    # the rules that read it ((A / B) / (A / B) is a quotient of quotients: 1; fuzz seed 20262101 #4853)
    t.ids[op.results[0]] = t.use(op.operands[0])
    if op.operands[0] in t.quotients:
        t.quotients[op.results[0]] = t.quotients[op.operands[0]]
    return True


def _scalar_broadcast(value: Any) -> bool:
    """`value` is a broadcast of a scalar to XLA (a splat constant is one)."""
    producer = F.producer_of(value)
    return F.splat_value(value) is not None or (
        producer is not None and producer.name == "stablehlo.broadcast_in_dim" and
        not list(producer.operands[0].type.shape))


def sinks_reverse(producer: Any) -> bool:
    """Whether XLA's simplifier sinks a reverse of `producer`'s result below it: an elementwise op of two operands
    of which one is a broadcast of a scalar (reverse(S / B) => S / reverse(B), reverse(pow(B, c)) => pow(reverse(B),
    c)); a reverse of a unary op (sqrt, exp) or of A / B stays where it is (measured on both series' optimised HLO)."""
    return producer is not None and len(producer.operands) == 2 and any(map(_scalar_broadcast, producer.operands))


def reverse_of_quotient(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "stablehlo.reverse" and not scalar_body and (source := F.alias(op.operands[0])) in t.quotients
            and (numerator := t.quotient_values.get(source)) is not None):
        return False
    quotient = F.producer_of(source)
    scalar_divisor = quotient is not None and quotient.name == "stablehlo.divide" and \
        _scalar_broadcast(quotient.operands[1])
    if not (_scalar_broadcast(numerator) or scalar_divisor):
        return False
    # XLA's simplifier sinks the reverse below the divide, so the divide rules that read the result see a quotient:
    # reverse(S / B) => S / reverse(B) ((x ** -2)[::-1] / y is 1 / (reverse(x * x) * y) on cpu: f16, fuzz seed
    # 20286731 #312), reverse(A / S) => reverse(A) / S ((x / s)[::-1] / y is reverse(x) / (s * y) on jaxlib 0.4.13)
    entry = t.entry(op)
    rewrite = W.Rewrite(t, entry)
    dividend, divisor = t.quotients[source]
    if _scalar_broadcast(numerator):
        divisor = rewrite.emit("reverse", [divisor], attrs=entry["attrs"])
        t.quotient_values[op.results[0]] = numerator
    else:
        dividend = rewrite.emit("reverse", [dividend], attrs=entry["attrs"])
    rewrite.emit("divide", [dividend, divisor], result=entry["results"][0])
    t.quotients[op.results[0]] = (dividend, divisor)
    body.extend(rewrite.ops)
    return True


def part_of_complex(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name in ("stablehlo.real", "stablehlo.imag") and not scalar_body and
            (parts := F.producer_of(op.operands[0])) is not None and parts.name == "stablehlo.complex"):
        return False
    # XLA's simplifier: real(complex(A, B)) => A, imag(complex(A, B)) => B, so a denormal A is A itself
    # for what reads it (jaxlib 0.12's min(A, real(complex(A, B))) => min(A, A) => A; fuzz seed 20261901
    # #312, where a scan's carry comes back so)
    t.ids[op.results[0]] = t.use(parts.operands[op.name == "stablehlo.imag"])
    return True


def _exponent_through_moves(t: Any, value: Any) -> Optional[Tuple[int, List[Any]]]:
    """(X, the moves from the exp up) where `value` is exp(X), or reshapes and broadcasts of one (which XLA's
    ReshapeMover puts below the exp: jnp.expand_dims(exp(x), 0) * exp(x)); else None."""
    moves: List[Any] = []
    while True:
        exponent = exponent_of(t, value)
        if exponent is not None:
            return exponent, moves[::-1]
        producer = F.producer_of(value)
        if producer is None or producer.name not in ("stablehlo.reshape", "stablehlo.broadcast_in_dim") or \
                len(moves) >= 8:
            return None
        moves.append(producer)
        value = producer.operands[0]


def product_of_exps(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "stablehlo.multiply" and not scalar_body and not _jax.is_current_series()
            and t.simplified_float(op) and None not in (found := [_exponent_through_moves(t, v) for v in op.operands])):
        return False
    # jaxlib 0.4.13's simplifier: exp(A) * exp(B) => exp(A + B), one rounding where there were three (f16's
    # jnp.square(jnp.exp2(x)) is exp(y + y); fuzz seed 20270101 #8343), also where a reshape or broadcast stands
    # between, which it moves onto A (jnp.expand_dims(jnp.exp(x), 0) * jnp.exp(x): fuzz seed 20287211 #744). Not
    # jaxlib 0.12's
    entry = t.entry(op)
    rewrite = W.Rewrite(t, entry)
    powers = []
    for x, moves in found:  # type: ignore[misc]
        for move in moves:
            x = rewrite.emit(move.name.split(".", 1)[1], [x], shape=list(t.tensor(move.results[0])[1]),
                             attrs=O.read_attrs(move.attributes))
        powers.append(x)
    total = rewrite.emit("add", powers)
    rewrite.emit("exponential", [total], result=entry["results"][0])
    t.exponents[op.results[0]] = total
    body.extend(rewrite.ops)
    return True


def identity_operand(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (not scalar_body and (kept := _identity_operand(t, op)) is not None):
        return False
    # A + 0, A - 0, A * 1, A / 1 (either side where the op commutes): XLA's algebraic simplifier returns
    # A itself, so cpu keeps what arithmetic would change (a denormal, -0 + 0), and its rules for what
    # reads the op see A (log(sqrt(x) + 0) is log(sqrt(x)): fuzz seed 20270301 #821; not a maximum or
    # minimum's: min(max(x, -inf), inf) is still a clamp to jaxlib 0.4.13's)
    t.ids[op.results[0]] = t.use(kept)
    if op.name not in F.MIN_MAX and op.name != "stablehlo.clamp":
        getattr(F.CALLS, "aliases", {})[op.results[0]] = kept
    return True


def double_negation(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "stablehlo.negate" and not scalar_body and
            (inner := F.producer_of(op.operands[0])) is not None and inner.name == "stablehlo.negate"):
        return False
    # XLA's simplifier: -(-A) is A itself, which the rules that read it see (-(-(b * c)) + c is contracted on cpu)
    t.ids[op.results[0]] = t.use(inner.operands[0])
    getattr(F.CALLS, "aliases", {})[op.results[0]] = inner.operands[0]
    return True


def moves_that_cancel(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name in ("stablehlo.transpose", "stablehlo.reshape", "stablehlo.reverse") and not scalar_body and
            (inner := F.producer_of(op.operands[0])) is not None and inner.name == op.name and
            _cancels(inner, op)):
        return False
    # XLA's simplifier: a transpose of a transpose that restores the order, a reshape of a reshape back to the
    # first shape, and a reverse of a reverse of the same dimensions are the value itself, which the rules that
    # read it see ((s / x).T.T / d is s / (x * d) on cpu; (x * y)[::-1][::-1] + z is contracted)
    t.ids[op.results[0]] = t.use(inner.operands[0])
    getattr(F.CALLS, "aliases", {})[op.results[0]] = inner.operands[0]
    return True


def _cancels(inner: Any, outer: Any) -> bool:
    """Whether move `outer` of move `inner` (one kind) gives back inner's operand."""
    if outer.name == "stablehlo.reshape":
        return list(outer.results[0].type.shape) == list(inner.operands[0].type.shape)
    if outer.name == "stablehlo.reverse":
        return sorted(O.read_attrs(outer.attributes)["dimensions"]) == \
            sorted(O.read_attrs(inner.attributes)["dimensions"])
    first, second = (list(O.read_attrs(m.attributes)["permutation"]) for m in (inner, outer))
    return [first[p] for p in second] == list(range(len(first)))


def extremum_with_constant(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name in F.MIN_MAX and not scalar_body and t.real_float(op)
            and (pair := _constant_bound(op)) is not None):
        return False
    body.extend(_extremum_with_constant(t, t.entry(op), op, *pair))
    return True


def product_with_predicate(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "stablehlo.multiply" and not scalar_body and t.simplified_float(op)
            and (masked := _predicate_product(op)) is not None):
        return False
    # XLA's simplifier: A * convert(predicate) => select(predicate, A, 0), so an infinite or NaN A gives
    # 0 where the predicate is false (jax's gradient of a maximum multiplies by the converted mask)
    entry = t.entry(op)
    rewrite = W.Rewrite(t, entry)
    rewrite.emit("select", [t.use(masked[0]), t.use(masked[1]), rewrite.splat(0.0)],
                 result=entry["results"][0])
    body.extend(rewrite.ops)
    return True


def log(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "stablehlo.log" and not scalar_body and t.simplified_float(op)
            and (rewritten := _log(t, t.entry(op), op)) is not None):
        return False
    body.extend(rewritten)
    return True


def power_of_exp(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "stablehlo.power" and not scalar_body and not _jax.is_current_series()
            and t.simplified_float(op) and F.splat_value(op.operands[1]) not in (0.0, 1.0)
            and (exponent := exponent_of(t, op.operands[0])) is not None):
        return False
    body.extend(_power_of_exp(t, t.entry(op), op, exponent))
    return True


def power_of_constant(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "stablehlo.power" and not scalar_body and t.real_float(op)
            and (F.splat_value(op.operands[1]) in (0.5, 2.0) or (
            t.simplified_float(op) and F.splat_value(op.operands[1]) in F.POWERS_XLA_FOLDS))):
        return False
    body.extend(_power_of_constant(t, t.entry(op), op))
    return True


def _as_inlined(producer: Any) -> Tuple[Any, List[Any]]:
    """``producer`` and its operands, or, for a call of a private function that returns one op, that op and its
    operands as XLA sees them once it has inlined the call (a parameter is the caller's value)."""
    returned = F.returned_op(producer) if producer.name == "func.call" else None
    if returned is None:
        return producer, list(producer.operands)
    inner, _, params = returned
    return inner, [producer.operands[params.index(v)] if v in params else v for v in inner.operands]


def _non_negative(value: Any, depth: int = 6) -> bool:
    """jaxlib 0.4.13's simplifier knows ``value`` is not negative (IsNonNegative): an abs, A * A, a non-negative
    constant (-0 counts: it is >= 0), a maximum with a non-negative operand, a select of two, and a broadcast of
    one. Never a complex value: a complex A * A can be anything."""
    producer = F.producer_of(value)
    if producer is None or depth == 0 or not F.real_float_type(value.type):
        return False
    op, operands = _as_inlined(producer)
    if op.name == "stablehlo.abs":
        return True
    if op.name == "stablehlo.multiply":
        return operands[0] == operands[1]
    if op.name == "stablehlo.broadcast_in_dim":
        return _non_negative(operands[0], depth - 1)
    if op.name == "stablehlo.constant":
        number = F.splat_value(value)
        return number is not None and number >= 0
    if op.name == "stablehlo.maximum":
        return any(_non_negative(v, depth - 1) for v in operands)
    if op.name == "stablehlo.select":
        return all(_non_negative(v, depth - 1) for v in operands[1:])
    return False


def abs_of_non_negative(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "stablehlo.abs" and not scalar_body and not _jax.is_current_series() and t.real_float(op)
            and _non_negative(op.operands[0])):
        return False
    # jaxlib 0.4.13's simplifier: abs(A) => A where A is not negative (_non_negative), so abs(relu(x)) is relu's
    # -0 of a -0 (jaxlib 0.4.13's maximum(-0, 0) is -0; fuzz seed 20285811 #711)
    kept = op.operands[0]
    t.ids[op.results[0]] = t.use(kept)
    getattr(F.CALLS, "aliases", {})[op.results[0]] = kept
    return True


def rsqrt_of_reciprocal_square(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    producer = F.producer_of(op.operands[0]) if op.name == "stablehlo.rsqrt" else None
    if not (producer is not None and producer.name == "stablehlo.divide" and not scalar_body
            and _jax.is_current_series() and t.simplified_float(op)
            and F.splat_value(producer.operands[0]) == 1.0 and _square_of(producer.operands[1]) is not None
            and producer.operands[1].type == op.results[0].type):
        return False
    # jaxlib 0.12's simplifier: rsqrt(1 / (A * A)) => sqrt(A * A) (measured on its optimised HLO: not for 1 / A,
    # 2 / (A * A), 1 / (A * B) or 1 / (A * A * A)), which is |A| wherever the square neither overflows nor
    # underflows: jax's x ** -2 under an rsqrt (fuzz seed 20286242 #3465)
    entry = t.entry(op)
    body.append(dict(entry, op="sqrt", mlir="stablehlo.sqrt", operands=[t.use(producer.operands[1])]))
    return True


def _predicate_constant(value: Any) -> Optional[bool]:
    """The value every element of an i1 `value` is, when it is a splat constant or a broadcast one; else None."""
    producer = F.producer_of(value)
    if producer is not None and producer.name == "stablehlo.broadcast_in_dim":
        producer = F.producer_of(producer.operands[0])
    if producer is None or producer.name != "stablehlo.constant":
        return None
    attr = ir.DenseElementsAttr(producer.attributes["value"])
    if str(ir.RankedTensorType(attr.type).element_type) != "i1" or not attr.is_splat:
        return None
    return bool(ir.IntegerAttr(attr.get_splat_value()).value)


def _predicate_compared(value: Any) -> Optional[Tuple[Any, bool]]:
    """(p, negated) where the i1 `value` is a compare of the predicate p with a constant (jax 0.4.13's select_n of
    a boolean predicate writes ``p == true``) or ``not p``: `value` is p, or not p where negated; else None."""
    producer = F.producer_of(value)
    if producer is None or str(ir.RankedTensorType(value.type).element_type) != "i1":
        return None
    if producer.name == "stablehlo.not":
        return producer.operands[0], True
    direction = A.enum(producer.attributes["comparison_direction"]) if producer.name == "stablehlo.compare" else ""
    if direction not in ("EQ", "NE") or any(str(ir.RankedTensorType(v.type).element_type) != "i1"
                                            for v in producer.operands):
        return None
    equal = direction == "EQ"
    for p, other in (producer.operands, reversed(producer.operands)):
        constant = _predicate_constant(other)
        if constant is not None:
            return p, constant != equal
    return None


def _decided_by_induction(predicate: Any) -> Optional[bool]:
    """The value of `predicate` on every trip, where it is a scalar compare of a loop's induction variable with an
    integer constant that its range (F.induction_range) decides; else None."""
    compare = F.producer_of(predicate)
    if compare is None or compare.name != "stablehlo.compare" or \
            str(ir.RankedTensorType(predicate.type).element_type) != "i1" or ir.RankedTensorType(predicate.type).rank:
        return None
    direction = A.enum(compare.attributes["comparison_direction"])
    holds = F.INT_COMPARES.get(direction) if F.signed_compare(compare) else None
    for side in (0, 1):
        bounds, constant = F.induction_range(compare.operands[side]), F.int_constant(compare.operands[1 - side])
        if holds is None or bounds is None or constant is None or len(constant) != 1:
            continue
        (c,) = constant
        if direction in ("EQ", "NE"):
            decided = None if bounds[0] <= c <= bounds[1] else direction == "NE"
        else:
            at = [holds(i, c) if side == 0 else holds(c, i) for i in bounds]  # monotone in i: the ends decide
            decided = at[0] if at[0] == at[1] else None
        return decided
    return None


def select_of_induction_compare(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "stablehlo.select" and not scalar_body
            and (decided := _decided_by_induction(op.operands[0])) is not None):
        return False
    # select(i < 0, i + n, i) of a loop's induction variable i that counts up from 0: jax 0.4.13's scan fixes up a
    # negative index so, on every trip. The range XLA's while-loop analysis gives i decides the compare, so the
    # select is the operand it picks on every trip: the same values, and dead-code removal drops the compare.
    kept = op.operands[1] if decided else op.operands[2]
    t.ids[op.results[0]] = t.use(kept)
    getattr(F.CALLS, "aliases", {})[op.results[0]] = kept
    return True


def select_of_compared_predicate(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "stablehlo.select" and not scalar_body
            and (compared := _predicate_compared(op.operands[0])) is not None):
        return False
    # XLA's simplifier: select(p == true, A, B) => select(p, A, B) and select(not(p), A, B) => select(p, B, A).
    # jax 0.4.13 writes every select of a boolean predicate (lax.select, jnp.where, relu's gradient) with a compare
    # of the predicate that XLA:CPU does not run; the values are the same (dead-code removal drops the compare).
    p, negated = compared
    on_true, on_false = (op.operands[2], op.operands[1]) if negated else (op.operands[1], op.operands[2])
    body.append(dict(t.entry(op), operands=[t.use(p), t.use(on_true), t.use(on_false)]))
    return True


def is_abs_of_square(t: Any, op: Any) -> bool:
    """Whether jaxlib 0.4.13's simplifier makes `op` |A|: a sqrt of A * A (sqrt_of_square), which it does before it
    visits what reads the sqrt (x * x / jnp.sqrt(x * x) is x * x / |x|, not a product by rsqrt: 0 where the square
    underflows, as on cpu)."""
    return op.name == "stablehlo.sqrt" and not _jax.is_current_series() and t.simplified_float(op) and \
        _square_of(op.operands[0]) is not None


def sqrt_of_square(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (not scalar_body and is_abs_of_square(t, op)):
        return False
    # jaxlib 0.4.13's simplifier: sqrt(A * A) => |A| (no overflow, no flush); not in bf16, whose ops it sees only
    # between converts to and from f32 (jnp.sqrt(jnp.square(x)) of a bf16 1e-30 is 0 on cpu: fuzz seed 20286831 #182)
    entry = t.entry(op)
    body.append(dict(entry, op="abs", mlir="stablehlo.abs",
                     operands=[t.use(_square_of(op.operands[0]))]))
    return True
