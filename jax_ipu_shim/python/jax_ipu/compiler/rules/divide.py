"""XLA's divide rewrites, per series: what a float divide becomes before XLA:CPU computes it.

XLA's simplifier turns ``A / broadcast(B)`` into ``A * broadcast(1 / B)``, divides by constants into products by
their reciprocals, quotients of quotients into products, ``A / sqrt(B)`` into ``A * rsqrt(B)``, ``A / exp(B)`` into
``A * exp(-B)`` and ``A / pow(B, c)`` into a power, and loop-invariant divisors are hoisted, where XLA can see them.
Each of these rounds differently from a divide, so the ipu writes exactly the rewritten form where XLA writes it
(``divide``), for the series and element types measured on cpu (test_xla_bits.py's DIVIDES table, the fuzz table),
and a divide as it is everywhere else."""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Tuple, cast

from jax._src.lib.mlir import ir

from jax_ipu import _jax

from .. import facts as F
from .. import ops as O
from .. import rewrite as W
from .. import types as T
from ..program_format import Blob
from . import simplifier


def _readers_here(value: Any) -> int:
    """How many ops read `value` as XLA sees it from where the translation is: inside a conditional's branch, a value
    the branch captures is its computation's parameter, read only by that branch's own ops (a divisor that the other
    branch or the enclosing code also reads is still one reader's there: fuzz seed 20270601 #3546)."""
    uses = F.live_readers(value)
    blocks = getattr(F.CALLS, "branch_blocks", None)
    if not blocks:
        return len(uses)
    case, block = F.CALLS.branches[-1], blocks[-1]
    owner = getattr(value.owner, "operation", value.owner)
    if hasattr(owner, "name"):
        captured = not _in_block(owner, block, case)
    else:  # a block argument: of this branch's block or one nested in it, or of an enclosing region
        owner_op = getattr(value.owner.owner, "operation", value.owner.owner)
        captured = value.owner != block and not _in_block(owner_op, block, case)
    return len([u for u in uses if _in_block(u, block, case)]) if captured else len(uses)


def _in_block(op: Any, block: Any, case: Any) -> bool:
    """`op` is in `block` (a region's block of the op `case`), directly or nested."""
    child, parent = op, op.parent
    while parent is not None:
        parent = getattr(parent, "operation", parent)
        if parent == case:
            return any(getattr(o, "operation", o) == child for o in block.operations)
        if parent.name == "func.func":
            return False
        child, parent = parent, parent.parent
    return False


def _hoisted(op: Any) -> bool:
    """`op` is in a while loop's body, not nested deeper, and reads only values that are the same in every iteration:
    XLA's WhileLoopInvariantCodeMotion moves it out of the loop before the simplifier's later runs see it."""
    loop = op.parent
    loop = getattr(loop, "operation", loop) if loop is not None else None
    if loop is None or not F.is_loop(loop) or \
            not any(getattr(o, "operation", o) == op for o in loop.regions[1].blocks[0].operations):
        return False
    return all(_invariant_in(v, loop) for v in op.operands)


def _readers_hoisted(value: Any) -> int:
    """How many ops read `value`, a while loop's carried value, once XLA has hoisted its invariant readers out of the
    loop and dropped the carried value that nothing but the body's return reads: the body's readers but the return,
    and the readers of the loop's operand but the loop."""
    loop = getattr(value.owner.owner, "operation", value.owner.owner)
    outer = loop.operands[ir.BlockArgument(value).arg_number]
    inside = [u for u in value.uses if getattr(u.owner, "operation", u.owner).name != "stablehlo.return"]
    outside = [u for u in outer.uses if getattr(u.owner, "operation", u.owner) != loop]
    return len(inside) + len(outside)


def _invariant_in(value: Any, loop: Any, depth: int = 6) -> bool:
    """`value`, read in the body of the stablehlo.while `loop`, is the same in every iteration: a value from outside
    the loop, a constant, a carried value the body returns unchanged in its place, or an elementwise op or a move of
    such values (a few levels deep)."""
    value = F.alias(value)
    if isinstance(value.owner, ir.Block):
        parent = getattr(value.owner.owner, "operation", value.owner.owner)
        if parent != loop:
            return parent is not None and not F.inside(parent, loop)
        body = loop.regions[1].blocks[0]
        if value.owner != body:
            return False
        returned = list(body.operations)[-1].operands
        return returned[ir.BlockArgument(value).arg_number] == value
    owner = getattr(value.owner, "operation", value.owner)
    if not F.inside(owner, loop) or owner.name == "stablehlo.constant":
        return True
    entry = O.registry().get(owner.name.split(".", 1)[-1]) if owner.name.startswith("stablehlo.") else None
    if depth == 0 or entry is None or len(owner.regions) or (
            entry["family"] not in ("unary", "binary") and owner.name not in F.LOOP_MOVES):
        return False
    return all(_invariant_in(v, loop, depth - 1) for v in owner.operands)


def _while_argument(value: Any) -> bool:
    """`value` is an argument of a while loop's region: a loop-carried value as the body reads it."""
    block = value.owner
    if not isinstance(block, ir.Block):
        return False
    parent = getattr(block.owner, "operation", block.owner)
    return parent is not None and F.is_loop(parent)


def _pads_out_its_operand(pad: Any) -> bool:
    """A stablehlo.pad whose result holds none of its operand's elements (negative padding crops them all away, or
    the operand is empty): every element is the padding value."""
    attrs = O.read_attrs(pad.attributes)
    shape = list(ir.RankedTensorType(pad.operands[0].type).shape)
    for n, lo, hi, interior in zip(shape, attrs["edge_padding_low"], attrs["edge_padding_high"],
                                   attrs["interior_padding"]):
        size = lo + n + max(n - 1, 0) * interior + hi
        first = max(0, -(lo // (interior + 1)))  # the first operand element at or after the result's start
        if n == 0 or first >= n or lo + first * (interior + 1) >= size:
            return True
    return False


def _broadcasts_constant(value: Any) -> bool:
    """`value` is a broadcast_in_dim (of a broadcast_in_dim...) of a stablehlo.constant."""
    producer = F.producer_of(value)
    if producer is None or producer.name != "stablehlo.broadcast_in_dim":
        return False
    while producer is not None and producer.name == "stablehlo.broadcast_in_dim":
        producer = F.producer_of(producer.operands[0])
    return producer is not None and producer.name == "stablehlo.constant"


# Ops XLA's IsElementwise counts that the emulator's registry lowers in another family (reduce_precision: fuzz
# seed 20285811 #1283, rp(bcast(e)) / bcast(e)).
_ALSO_ELEMENTWISE_TO_XLA = ("reduce_precision",)


def _sunk_broadcast_of(value: Any, tensor: Any,
                       depth: int = 4) -> Optional[Tuple[Tuple[int, ...], Tuple[int, ...]]]:
    """_broadcast_of `value`, or of an elementwise op whose operands are all that same broadcast or splat constants:
    XLA moves the broadcast below such an op first (bcast(x) * 3 is bcast(x * 3), so (bcast(x) * 3) /
    bcast(x) divides: fuzz seed 20270501 #5050)."""
    found = _broadcast_of(value, tensor)
    producer = F.producer_of(value)
    if found is not None or depth == 0 or producer is None or not producer.name.startswith("stablehlo.") or \
            len(producer.results) != 1:
        return found
    name = producer.name.split(".", 1)[1]
    if not (O.is_elementwise(name) or name in _ALSO_ELEMENTWISE_TO_XLA):
        return None
    kinds = {_sunk_broadcast_of(v, tensor, depth - 1) for v in producer.operands if F.splat_value(v) is None}
    return kinds.pop() if len(kinds) == 1 else None


def _broadcast_of(value: Any, tensor: Any) -> Optional[Tuple[Tuple[int, ...], Tuple[int, ...]]]:
    """(operand shape, result dimensions of its axes) when `value` is a broadcast_in_dim, of a broadcast_in_dim...,
    or a transpose of one (XLA folds these into one broadcast); else None. `tensor` gives a value's (dtype, shape).
    The operand's dimensions of one are left out: XLA's simplifier reshapes them away first, so jax 0.4.13's
    broadcast of a reshape to a scalar and a broadcast of the f16[1] are alike to it (measured: cpu divides
    ``jnp.broadcast_to(v, (4,)) / (3 / v)`` of an f16[1] v as it divides ``v / (3 / v)``)."""
    producer = F.producer_of(value)
    permutation = None
    if producer is not None and producer.name == "stablehlo.transpose":
        permutation = list(O.read_attrs(producer.attributes)["permutation"])
        producer = F.producer_of(producer.operands[0])
    if producer is None or producer.name != "stablehlo.broadcast_in_dim":
        return None
    dims = list(O.read_attrs(producer.attributes)["broadcast_dimensions"])
    below = F.producer_of(producer.operands[0])
    while below is not None and below.name == "stablehlo.broadcast_in_dim":  # axis i below is axis dims[i] here
        dims = [dims[d] for d in O.read_attrs(below.attributes)["broadcast_dimensions"]]
        producer, below = below, F.producer_of(below.operands[0])
    if permutation is not None:  # result axis j of the transpose is axis permutation[j] of the broadcast
        dims = [permutation.index(d) for d in dims]
    kept = [(n, d) for n, d in zip(tensor(producer.operands[0])[1], dims) if n != 1]
    return tuple(n for n, _ in kept), tuple(d for _, d in kept)


# The roots XLA's divide rules trade for each other (A / sqrt(B) => A * rsqrt(B) and back) when read once.
_ROOTS = ("stablehlo.sqrt", "stablehlo.rsqrt")


def _moved_before_divide(a: Any, b: Any, beside_scalar: bool) -> Tuple[List[Any], List[Any]]:
    """The moves XLA's ReshapeMover moves below a divide of a and b, outermost first, and the values they move
    (a broadcast of a scalar stays itself): while both operands are reshapes of one shape or transposes by one
    permutation, of values that are not constants, or (`beside_scalar`) one such move beside a broadcast of a scalar
    that is not a constant. ([], []) where none is moved."""
    moves: List[Any] = []
    values = [a, b]
    while True:
        producers: List[Any] = [F.producer_of(v) for v in values]
        moved = [k for k, m in enumerate(producers) if m is not None and
                 m.name in ("stablehlo.reshape", "stablehlo.transpose") and not F.is_constant(m.operands[0])]
        if len(moved) == 1 and beside_scalar:
            other = producers[1 - moved[0]]
            if other is None or other.name != "stablehlo.broadcast_in_dim" or t_shape(other.operands[0]) or \
                    F.is_constant(other.operands[0]):
                break
        elif len(moved) == 2:
            first, second = producers
            if first.name != second.name or t_shape(first.operands[0]) != t_shape(second.operands[0]) or (
                    first.name == "stablehlo.transpose" and O.read_attrs(first.attributes)["permutation"] !=
                    O.read_attrs(second.attributes)["permutation"]):
                break
        else:
            break
        moves.append(producers[moved[0]])
        values = [producers[k].operands[0] if k in moved else values[k] for k in range(2)]
    return moves, values if moves else []


def t_shape(value: Any) -> List[int]:
    """A ranked tensor value's shape."""
    return list(value.type.shape)


def _divide(t: Any, entry: Dict[str, Any], mlir_op: Any, broadcast_only: bool = False) -> List[Dict[str, Any]]:
    """A float divide as XLA's algebraic simplifier rewrites it before XLA:CPU computes it (HandleDivide), so
    that the ipu rounds as cpu does. Operands are simplified first (program order), and a divide a rule writes
    is simplified again. The rules of the jaxlib the program is compiled for (_jax.numerics()), in order:
      (A / B) / (C / D) => (A * D) / (B * C)
      exp(A) / exp(B) => exp(A - B)        (jaxlib 0.4.13)
      A / sqrt(B) => A * rsqrt(B)          A / rsqrt(B) => A * sqrt(B)   (the root read by nothing else)
      A / exp(B) => A * exp(-B)            (jaxlib 0.4.13)
      A / pow(B, C) => A * pow(B, -C)      (f32 and f16)
      A / constant C => A * (1 / C)        (jaxlib 0.4.13: also a constant broadcast or reshaped)
      A / broadcast(B) => A * broadcast(1 / B)   (jaxlib 0.12: softmax's sum, any scalar divisor but a
                                                  while loop's own value)
      (A / B) / C => A / (B * C)           A / (B / C) => (A * C) / B
    and bcast(A) / bcast(B) => bcast(A / B) before them, where every operand is a broadcast alike or a scalar's
    (XLA's broadcast sinking), so the rules see B. An operand a rule no longer reads (the sqrt, the exp...) is
    left to the dead-code pass. `broadcast_only`: jaxlib 0.12's A / broadcast(B) alone (a bf16 divide)."""
    ops: List[Dict[str, Any]] = []
    out = entry["results"][0]
    dtype, shape = out["dtype"], out["shape"]
    current = _jax.numerics() == "jaxlib-0.12"
    hoisted = current and _hoisted(mlir_op)

    # a bf16 divide's reciprocal and product stay in f32 on cpu (XLA's excess precision), rounded once
    wide = "f32" if broadcast_only else dtype

    def emit(name: str, operands: List[int], shape: List[int], attrs: Optional[Dict[str, Any]] = None,
             result: Optional[Dict[str, Any]] = None, of: Optional[str] = None) -> int:
        result = result or t.fresh(of or dtype, shape)
        ops.append(W.derived(entry, name, operands, [result], attrs))
        return result["id"]

    def filled(number: float, shape: List[int], of: Optional[str] = None) -> int:
        scalar = emit("constant", [], [], {"value": Blob(W.float_bytes(of or dtype, number)), "splat": False}, of=of)
        return emit("broadcast_in_dim", [scalar], shape, {"broadcast_dimensions": []}, of=of) if shape else scalar

    def reciprocal(x: int, shape: List[int], of: Optional[str] = None) -> int:
        return emit("divide", [filled(1.0, shape, of), x], shape, of=of)

    def inverse_of_power(producer: Any, value: Any) -> Optional[int]:
        """1 / value for value = pow(B, C) (producer), written as XLA's A / pow(B, C) => A * pow(B, -C) leaves it,
        or None where no rule applies."""
        c = F.splat_value(producer.operands[1])
        if c == -1.0:  # 1 / B when HandleDivide sees it: A / (1 / B) => (A * B) / 1 => A * B
            return t.use(producer.operands[0])
        if c in F.POWERS_XLA_FOLDS:  # already multiplies (or 1, or A) when HandleDivide sees it
            return None
        value_shape = list(t.tensor(value)[1])
        base, exponent = (t.use(v) for v in producer.operands)
        if c is not None and -c in F.POWERS_REWRITTEN:  # the new pow(B, -c), simplified in turn
            return simplifier.pow_by_constant(W.Rewrite(t, entry, ops, value_shape), base, -c)
        return emit("power", [base, emit("negate", [exponent], value_shape)], value_shape)

    def inverse_of(value: Any) -> Optional[int]:
        """1 / value written without a divide (sqrt, rsqrt, exp) or as a reciprocal XLA folds or hoists, or
        None when no rule applies to dividing by it."""
        producer: Any = F.producer_of(value)
        name = producer.name if producer is not None else ""
        if broadcast_only and name != "stablehlo.broadcast_in_dim":
            return None
        if value in t.inverses and producer is not None and \
                (t.inverses[value][1] not in _ROOTS or len(list(value.uses)) == 1):
            # 1 / B, written as the F that XLA's rules leave of it (pow(B, -c), rsqrt, exp(-x)): A / F => A * B,
            # the same rules again (A / pow(B, -c) => A * pow(B, c); A / rsqrt(x) => A * sqrt(x) for a root read
            # once; A / exp(-x) => A * exp(x)): y / (1 / x ** 0.5) is y * sqrt(x) on cpu (fuzz seed 20272701 #457)
            restored.append(t.inverses[value][0])
            return t.use(t.inverses[value][0])
        moves, source, below = [], value, producer  # broadcasts and reshapes XLA 0.4.13 sees through
        while below is not None and below.name in F.MOVED and not current:
            moves.append(below)
            source = below.operands[0]
            below = F.producer_of(source)
        if moves and below is not None and below.name == "stablehlo.constant":
            inverse = reciprocal(t.use(source), list(t.tensor(source)[1]))
            for move in reversed(moves):
                inverse = emit(move.name.split(".", 1)[1], [inverse], list(t.tensor(move.results[0])[1]),
                               O.read_attrs(move.attributes))
            return inverse
        if name == "stablehlo.reverse" and simplifier.sinks_reverse(below := F.producer_of(producer.operands[0])) \
                and below.name == "stablehlo.power" and dtype != "bf16" and \
                (unreversed := inverse_of_power(below, producer.operands[0])) is not None:
            # XLA's simplifier sinks the reverse below a power by a scalar first: A / reverse(pow(B, c)) is
            # A * pow(reverse(B), -c) on cpu, the same elements as reverse(pow(B, -c)) (b ** 1.5 flipped)
            return emit("reverse", [unreversed], list(t.tensor(value)[1]), O.read_attrs(producer.attributes))
        if name in _ROOTS and len(list(value.uses)) == 1 and not simplifier.is_abs_of_square(t, producer):
            # (XLA rewrites A / sqrt(B) only where the sqrt has no other use: WithOneUse)
            value_shape = list(t.tensor(value)[1])
            x = t.use(producer.operands[0])
            return emit("sqrt" if name == "stablehlo.rsqrt" else "rsqrt", [x], value_shape)
        if name == "stablehlo.power" and dtype != "bf16":
            return inverse_of_power(producer, value)
        if not current and not broadcast_only and (x_id := simplifier.exponent_of(t, value)) is not None:
            # (also an exp a rule wrote: exp(A) * exp(A) => exp(A + A), so 1 / (exp(A) * exp(A)) is exp(-(A +
            # A)): jnp.exp2(x) ** -2 in f16, fuzz seed 20271001 #4250)
            value_shape = list(t.tensor(value)[1])
            return emit("exponential", [emit("negate", [x_id], value_shape)], value_shape)
        if name == "stablehlo.pad" and _pads_out_its_operand(producer) and F.is_constant(producer.operands[1]):
            # a pad whose result holds none of its operand's elements is a broadcast of its padding value to XLA:
            # A / constant C (x / lax.pad(v, 0.001, ...) cropping v away, f16: fuzz seed 20271601 #6152)
            inverse = reciprocal(t.use(producer.operands[1]), [])
            return emit("broadcast_in_dim", [inverse], list(t.tensor(value)[1]), {"broadcast_dimensions": []})
        if name == "stablehlo.constant":
            whole, value_shape = t.use(value), list(t.tensor(value)[1])
            if whole in t.splat_scalars:  # one reciprocal, broadcast, as XLA folds it
                inverse = reciprocal(t.splat_scalars[whole], [])
                return emit("broadcast_in_dim", [inverse], value_shape, {"broadcast_dimensions": []})
            return reciprocal(whole, value_shape)
        # (`value` may lie below another broadcast, inverse_below_broadcast's: what it writes has value's shape)
        value_shape = list(t.tensor(value)[1])
        if name == "stablehlo.broadcast_in_dim" and current and not broadcast_only and \
                F.is_constant(producer.operands[0]) and \
                math.prod(t.tensor(producer.operands[0])[1]) == math.prod(value_shape):
            # a broadcast that adds no element (a constant scalar to f32[1]) is a reshape to XLA, which it
            # folds into the constant: A / constant C => A * (1 / C) (272 / -1.5 in f16[1]: fuzz seed 20270901
            # #7152)
            source = producer.operands[0]
            inverse = reciprocal(t.use(source), list(t.tensor(source)[1]))
            return emit("broadcast_in_dim", [inverse], value_shape, O.read_attrs(producer.attributes))
        if name == "stablehlo.broadcast_in_dim" and current and \
                math.prod(t.tensor(producer.operands[0])[1]) < math.prod(value_shape) and \
                (not (carried := _while_argument(producer.operands[0])) or hoisted or
                 1 in t.tensor(producer.operands[0])[1]) and (
                    (_readers_hoisted(producer.operands[0]) if carried else _readers_here(producer.operands[0]))
                    == 1 or F.is_constant(producer.operands[0]) or
                    1 in t.tensor(producer.operands[0])[1]):
            # (a broadcast that only adds dimensions of one, jnp.expand_dims, is a reshape to XLA; a divisor that
            # is a loop's own value, lax.scan's `c / s` of a captured s, stays a divide on cpu unless the whole
            # divide is loop-invariant and XLA hoists it out of the loop first (`x1 / x36` of two captured
            # values in a lax.fori_loop body: fuzz seed 20271401 #121) or unless it has dimensions of one, which
            # XLA's simplifier reshapes away first, so that what it broadcasts is that reshape, not the loop's
            # value (`a / c` of a captured c f32[3, 1] or f32[1, 1, 1]: fuzz seed 20272201 #621), and so does one
            # that something else also reads, unless a constant: `(x2, v / x2)`, or unless it has dimensions of
            # one: XLA broadcasts a reshape that drops them, and that reshape has one reader: `(x / b, b)` of
            # b f32[1, 1] or f32[2, 1] multiplies)
            source = producer.operands[0]
            source_shape = list(t.tensor(source)[1])
            x = t.use(source)
            q = quotient(source) if wide == dtype else None
            if q is not None:
                # 1 / (B / C), simplified in turn: (1 * C) / B, so C / B, and C * (1 / B) for a constant B (1 / (3 /
                # v) is v * (1 / 3): fuzz seed 20286212 #2418, jnp.take_along_axis(v, i) / (3 / v) of an f16[1] v)
                numerator, denominator = q
                constant = constant_numerator(source)
                if constant == 1.0:
                    inverse = denominator
                elif constant is not None:
                    inverse = emit("multiply", [denominator, reciprocal(filled(constant, source_shape),
                                                                        source_shape)], source_shape)
                else:
                    inverse = emit("divide", [denominator, numerator], source_shape)
                return emit("broadcast_in_dim", [inverse], value_shape, O.read_attrs(producer.attributes))
            if wide != dtype:
                x = emit("convert", [x], source_shape, of=wide)
            inverse = reciprocal(x, source_shape, of=wide)
            return emit("broadcast_in_dim", [inverse], value_shape, O.read_attrs(producer.attributes), of=wide)
        return None

    def inverse_below_broadcast(value: Any) -> Optional[int]:
        """broadcast(1 / B) for value = broadcast(B), 1 / B as inverse_of writes it; else None."""
        producer = F.producer_of(value)
        if producer is None or producer.name != "stablehlo.broadcast_in_dim":
            return None
        inverse = inverse_of(producer.operands[0])
        if inverse is None:
            return None
        return emit("broadcast_in_dim", [inverse], shape, O.read_attrs(producer.attributes))

    def scalar_reciprocal(value: Any) -> Optional[int]:
        """broadcast(1 / Y) for a broadcast of a scalar Y; else None."""
        producer = F.producer_of(value)
        if producer is None or producer.name != "stablehlo.broadcast_in_dim" or t.tensor(producer.operands[0])[1]:
            return None
        inverse = reciprocal(t.use(producer.operands[0]), [])
        return emit("broadcast_in_dim", [inverse], shape, {"broadcast_dimensions": []})

    def constant_numerator(value: Any) -> Optional[float]:
        """The number B is when `value` is a quotient B / C of the module's own and B a splat constant; else None."""
        inner = t.quotient_values.get(F.alias(value))
        return F.splat_value(inner) if inner is not None else None

    def quotient(value: Any) -> Optional[Tuple[int, int]]:
        """The (numerator, denominator) `value` divides, where XLA sees that divide (not across a branch's edge:
        the branch gets the quotient as a parameter). Seen through an op XLA removed (1 / (x ** -2 + 0) divides
        x ** -2's quotient: fuzz seed 20283101 #300)."""
        value = F.alias(value) if value is not None else None
        if broadcast_only or value not in t.quotients or F.producer_of(value) is None:
            return None
        return t.quotients[value]

    def divide(a: int, a_value: Any, b: int, b_value: Any) -> Tuple[str, List[int]]:
        """The op that computes a / b and its operands (values: the MLIR values a and b are, if any). A divide a
        rule writes is simplified again: the loop (not a recursive closure, which would be a reference cycle
        left for the garbage collector with the whole document)."""
        while True:
            powers = [simplifier.exponent_of(t, v) if v is not None else None for v in (a_value, b_value)]
            if not current and not broadcast_only and None not in powers:
                return "exponential", [emit("subtract", powers, shape)]  # type: ignore[arg-type]
            qa, qb = quotient(a_value), quotient(b_value)
            if qa is not None and qb is not None:
                (n1, d1), (n2, d2) = qa, qb
                return "divide", [emit("multiply", [n1, d2], shape), emit("multiply", [d1, n2], shape)]
            alike = a_value is not None and b_value is not None and \
                _sunk_broadcast_of(a_value, t.tensor) == _sunk_broadcast_of(b_value, t.tensor) is not None
            sunk = a_value is not None and b_value is not None and (alike or (
                F.splat_value(a_value) is not None and _broadcast_of(b_value, t.tensor) is not None))
            # XLA moves a broadcast below an elementwise op whose operands are all broadcast alike (op(bcast(x),
            # bcast(y)) => bcast(op(x, y))) before HandleDivide sees it, so its rules see the divisor's operand:
            # bcast(r) / bcast(sqrt(s)) is bcast(r * rsqrt(s)), on jaxlib 0.4.13 bcast(a) / bcast(exp(b)) is
            # bcast(a * exp(-b)) (fuzz seed 20285811 #1283), x / x stays a divide, and x / constant C becomes
            # x * (1 / C) below the broadcast, the same bits as a broadcast reciprocal; a splat constant is a
            # broadcast of any shape there (3 / vmap(tanh)(x) divides: fuzz seed 20270301 #4549). jaxlib 0.12's
            # A / broadcast(B) => A * broadcast(1 / B) does not apply then.
            factor = inverse_of(b_value) if b_value is not None and (
                not (sunk and current) or _broadcasts_constant(b_value)) else None
            if factor is None and sunk and not broadcast_only:
                factor = inverse_below_broadcast(b_value)
            if factor is not None and wide != dtype:
                return "convert", [factor if a_value is not None and F.splat_value(a_value) == 1.0 else
                                   emit("multiply", [emit("convert", [a], shape, of=wide), factor], shape, of=wide)]
            if factor is not None and a_value is not None and F.splat_value(a_value) == 1.0:
                # 1 * F is F (XLA's simplifier drops the multiply, so a denormal F stays); an F that a rule wrote for
                # a power, root or exponential B is what a later divide by this value reads (inverse_of)
                below = F.producer_of(b_value)
                kind = below.name if below is not None else ""
                exponential = not current and simplifier.exponent_of(t, b_value) is not None
                if kind in _ROOTS + ("stablehlo.power",) or exponential:
                    inverted.append((b_value, kind))
                return "reshape", [factor]
            if factor is not None:
                return "multiply", [a, factor]
            if qa is not None:
                numerator, denominator = qa
                return "divide", [numerator, emit("multiply", [denominator, b], shape)]
            below = F.producer_of(b_value) if sunk and qb is None and b_value is not None else None
            if below is not None and below.name == "stablehlo.broadcast_in_dim" and \
                    (q := quotient(below.operands[0])) is not None:
                # bcast(A) / bcast(B / C), sunk to bcast(A / (B / C)): (A * C) / B below the broadcast, and a
                # constant B is then 1 / B's product (the same values computed at the broadcast's shape; fuzz seed
                # 20286212 #2418: jnp.take_along_axis(v, i) / (3 / v) of an f16[1] v)
                attrs = O.read_attrs(below.attributes)
                numerator, denominator = (emit("broadcast_in_dim", [x], shape, attrs) for x in q)
                a = emit("multiply", [a, denominator], shape)
                constant = constant_numerator(below.operands[0])
                if constant is not None:
                    return "multiply", [a, reciprocal(filled(constant, shape), shape)]
                return "divide", [a, numerator]
            if qb is not None:
                numerator, denominator = qb
                inner = t.quotient_values.get(F.alias(b_value))
                if a_value is not None and inner is not None and F.splat_value(a_value) == 1.0 == F.splat_value(inner):
                    # 1 / (1 / C) is C itself, a denormal kept: (A * C) / B below, then 1 * C => C and C / 1 => C
                    # (jnp.reciprocal(jnp.reciprocal(x)): fuzz seed 20281901 #1464)
                    return "reshape", [denominator]
                a, a_value = emit("multiply", [a, denominator], shape), None
                b, b_value = numerator, t.quotient_values.get(F.alias(b_value))
                continue
            return "divide", [a, b]

    a_value, b_value = mlir_op.operands
    inverted: List[Tuple[Any, str]] = []  # (B, its op) where this divide is 1 / B written as F
    restored: List[Any] = []  # B where this divide is 1 / (1 / B), which XLA's rules make B itself
    predicate = None if broadcast_only else simplifier.converted_predicate(a_value, shape)
    if predicate is not None and not simplifier.sees_converted_predicate(predicate, b_value, quotient=True):
        predicate = None
    factor = None if predicate is None else scalar_reciprocal(b_value)
    if predicate is not None and factor is None and (not T.complex_part(dtype) or F.is_constant(b_value)):
        factor = inverse_of(b_value)  # (of complex values, only A / constant C => A * (1 / C))
    if factor is not None:
        # convert(P) / broadcast(Y) => broadcast(1 / Y) * convert(P) (XLA's rule for a converted predicate, any
        # scalar Y, on both series), and A / constant C => A * (1 / C); then the multiply's rule: select(P,
        # 1 / Y, 0), so where P is false the result is +0 whatever Y is (0 where 0 / Y is NaN: a scan dividing
        # a converted mask by a zero gradient, fuzz seed 20282401 #8139)
        return ops + [W.derived(entry, "select", [t.use(predicate), factor, filled(0.0, shape)], [out])]
    if T.complex_part(dtype):  # (complex divides take no other rule here)
        return [entry]
    moves, sources = ([], []) if broadcast_only else _moved_before_divide(a_value, b_value, not current)
    if moves:
        # XLA's ReshapeMover computes an elementwise op of reshapes of one shape (transposes by one permutation)
        # before the move, and its simplifier then sees the operands' own values: (1 / b).reshape(s) /
        # c.reshape(s) is reshape(1 / (b * c)) on cpu, (2 / b).T / c.T is transpose(2 / (b * c)) (both series);
        # on jaxlib 0.4.13 also beside a broadcast scalar, which it broadcasts to the moved shape:
        # (1 / b).reshape(s) / y is reshape(1 / (b * y)) (jaxlib 0.12 first makes that divide a product)
        moved_shape = t_shape(moves[-1].operands[0])
        shape = moved_shape  # (the shape the rules' closures write at)
        ids = [emit("broadcast_in_dim", [t.use(cast(Any, F.producer_of(v)).operands[0])], moved_shape,
                    {"broadcast_dimensions": []}) if v is value else t.use(v)
               for v, value in zip(sources, (a_value, b_value))]
        name, operands = divide(ids[0], sources[0], ids[1], sources[1])
        moved = emit(name, operands, moved_shape)
        for move in reversed(moves[1:]):
            moved = emit(move.name.split(".", 1)[1], [moved], t_shape(move.results[0]), O.read_attrs(move.attributes))
        return ops + [W.derived(entry, moves[0].name.split(".", 1)[1], [moved], [out],
                                O.read_attrs(moves[0].attributes))]
    name, operands = divide(entry["operands"][0], a_value, entry["operands"][1], b_value)
    if name == "reshape" and inverted:
        t.inverses[mlir_op.results[0]] = inverted[-1]
    elif name == "reshape" and restored:  # B to the rules that read this value (1 / (1 / (1 / x ** 0.5)))
        F.CALLS.aliases[mlir_op.results[0]] = restored[-1]
    if name == "divide":
        unchanged = operands[0] == entry["operands"][0] and operands[1] == entry["operands"][1]
        if not broadcast_only:
            t.quotients[mlir_op.results[0]] = (operands[0], operands[1])
            if unchanged:
                t.quotient_values[mlir_op.results[0]] = a_value
        if unchanged:
            return ops + [entry]
    if name == "exponential":
        t.exponents[mlir_op.results[0]] = operands[0]
    if name == "convert" and wide != dtype:
        t.unrounded[mlir_op.results[0]] = operands[0]
    return ops + [W.derived(entry, name, operands, [out])]


def divide(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if op.name == "stablehlo.divide" and all(F.constant_expression(v) for v in op.operands):
        # XLA folds a divide of constants (and of what it folds into constants: sqrt(0.5) / 0.88, the stddev of
        # jax.nn.initializers.lecun_normal for a fan-in of 2) as a divide, before any rewrite could see it
        return False
    if not (op.name == "stablehlo.divide" and not scalar_body and (t.simplified_float(op) or (
            T.complex_part(t.tensor(op.results[0])[0]) and
            simplifier.converted_predicate(op.operands[0], op.results[0].type.shape) is not None))):
        return False
    body.extend(_divide(t, t.entry(op), op))
    return True


def bf16_divide_by_broadcast(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "stablehlo.divide" and not scalar_body and _jax.is_current_series() and t.bf16(op)):
        return False
    # jaxlib 0.12 rewrites a bf16 A / broadcast(B) as well (A * broadcast(1 / B): the reciprocal of a
    # huge B flushes, fuzz seed 20270401 #7242), no other divide rule
    body.extend(_divide(t, t.entry(op), op, broadcast_only=True))
    return True
