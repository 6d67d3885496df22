"""XLA:CPU's fused loops: what LLVM does to the arithmetic once XLA has fused ops into one loop, per series and host.

Inside a fused loop, LLVM folds ``select(p, X op Y, X)`` into ``X op select(p, Y, identity)``, ``max(select(p, A, B),
A)`` into a select of A, and the extremum of a dynamic_update_slice into a select of its window; it reads a bf16 zero
test through the moves between it and its value, a negation pair as a sign flip, and a clamp with a bound that is
not constant as IEEE max-then-min on an AVX-512 host. Each of these changes whether a denormal is read as a zero
or kept. The rules write the form LLVM leaves (for the series and host capabilities measured on cpu: O.host()),
so that denormals, signed zeros and NaNs come out as on cpu; other values are the same either way. One rule changes
rounding instead: LLVM writes a sum with a negated product first as a difference, which decides the product it
contracts into a fused multiply-add (product_after_negated_product); it only orders the sum's operands."""

from __future__ import annotations

import math
import struct
from typing import Any, Dict, List, Optional, Tuple

from jax._src.lib.mlir import ir

from jax_ipu import _jax

from .. import attributes as A
from .. import facts as F
from .. import ops as O
from .. import rewrite as W
from ..program_format import Blob


def _identity_padded(op: Any) -> Optional[Tuple[Any, Any]]:
    """(the pad, the other operand) for op(pad(x, c), y) or op(y, pad(x, c)) where c is the op's identity for
    LLVM (op(c, y) is y, bit for bit: _PAD_IDENTITIES); else None."""
    for pad, other in ((op.operands[0], op.operands[1]), (op.operands[1], op.operands[0])):
        pad = F.unconverted(pad)
        producer = F.producer_of(pad)
        if producer is not None and producer.name == "stablehlo.pad" and other.type == pad.type:
            value = F.splat_value(producer.operands[1])
            identity = _PAD_IDENTITIES[op.name]
            if value is not None and value == identity and math.copysign(1.0, value) == math.copysign(1.0, identity):
                return producer, other
    return None


def _negation_pair(op: Any) -> Optional[Any]:
    """x for a binary op of x and negate(x), in either order; else None."""
    a, b = op.operands
    for negated, other in ((a, b), (b, a)):
        producer = F.producer_of(negated)
        if producer is not None and producer.name == "stablehlo.negate" and producer.operands[0] == other:
            return other
    return None


def _select_extremum(op: Any) -> Optional[Tuple[Any, Any, Any, bool]]:
    """(p, A, B, whether A is the select's first branch) for max or min of select(p, A, B) (or select(p, B, A))
    and A, either operand order, all of the result's type; else None. p and B may be a (value, broadcast
    dimensions) pair: a broadcast inside jnp.where's function, which XLA inlines (jnp.where(p, x, z) of a z of
    fewer dimensions), for the caller to write again."""
    for chosen, kept in (op.operands, reversed(list(op.operands))):
        producer = F.producer_of(chosen)
        operands = F.inlined_operands(producer, "stablehlo.select") if producer is not None else None
        if operands is None and producer is not None:
            operands = _select_of_broadcasts(producer)
        if operands is None or kept.type != op.results[0].type:
            continue
        predicate, first, second = operands
        if any(not isinstance(v, tuple) and v.type != kept.type for v in (first, second)):
            continue
        if not _read_once_where_fused(chosen, op):
            continue
        if first == kept and second != kept:
            return predicate, kept, second, True
        if second == kept and first != kept:
            return predicate, kept, first, False
    return None


def _extremum_of_update(op: Any) -> Optional[Tuple[Any, Any]]:
    """(A, the dynamic_update_slice) for max(A, dynamic_update_slice(A, U, i...)) or min of them that XLA fuses
    into the extremum's loop: read once there (_read_once_where_fused); else None. Only in this operand order:
    max(dynamic_update_slice(A, U, i), A) keeps some denormals of A outside the window on cpu and flushes others
    (f32[7, 8], a window at (2, 6): [0, 0] kept, [0, 7] flushed), which neither rule reproduces; the emulator
    flushes them all there."""
    kept, updated = op.operands
    producer = F.producer_of(updated)
    if producer is not None and producer.name == "stablehlo.dynamic_update_slice" and \
            producer.operands[0] == kept and kept.type == op.results[0].type and _read_once_where_fused(updated, op):
        return kept, producer
    return None


def _select_of_broadcasts(call: Any) -> Optional[List[Any]]:
    """The operands of a call of a private function whose body broadcasts some of its parameters and returns a
    select of its parameters and those broadcasts (jax 0.12's @_where for operands of fewer dimensions), as caller
    values, a broadcast one as (value, broadcast dimensions); else None."""
    returned = F.returned_op(call)
    if returned is None:
        return None
    select, before, params = returned
    values: Dict[Any, Any] = {p: call.operands[i] for i, p in enumerate(params)}  # callee value -> the caller's
    for o in before:
        if o.name == "stablehlo.convert" and o.operands[0] in values and o.operands[0].type == o.results[0].type:
            values[o.results[0]] = values[o.operands[0]]  # a convert to the same type (a weak-typed scalar)
        elif o.name == "stablehlo.broadcast_in_dim" and o.operands[0] in values and \
                not isinstance(values[o.operands[0]], tuple):
            values[o.results[0]] = (values[o.operands[0]], A.int_list(o.attributes["broadcast_dimensions"]))
        else:
            return None
    if select.name != "stablehlo.select" or not all(v in values for v in select.operands):
        return None
    return [values[v] for v in select.operands]


# The operand LLVM's select fold gives the op where the select kept X: X op identity is X but for a denormal X.
_SELECT_FOLD_IDENTITY = {"add": -0.0, "subtract": 0.0, "multiply": 1.0, "divide": 1.0}


def _select_of_arithmetic(op: Any) -> Optional[Tuple[Any, Any, Any, str, bool]]:
    """(p, X, Y, op name, whether X op Y is the select's first branch) for select(p, X op Y, X) or select(p, X, X op
    Y), op an f32 add, subtract, multiply or divide (X its dividend or minuend) read only by the select, Y not a
    constant (LLVM folds X op constant first); else None. `op` may be a call of a function that is one such select
    of its parameters (jax 0.4.13's jnp.where is a call of @_where), which XLA inlines first."""
    operands = F.inlined_operands(op, "stablehlo.select")
    if operands is None:
        return None
    predicate, first, second = operands
    for branch, kept, op_first in ((first, second, True), (second, first, False)):
        producer = F.producer_of(branch)
        if producer is None or not producer.name.startswith("stablehlo.") or not _alone_in_the_selects_loop(branch, op):
            continue
        name = producer.name.split(".", 1)[1]
        if name not in _SELECT_FOLD_IDENTITY or len(producer.operands) != 2:
            continue
        a, b = producer.operands
        for x, y in ((a, b), (b, a)) if name in ("add", "multiply") else ((a, b),):
            if x == kept and y != kept and y.type == kept.type and F.splat_value(y) is None:
                return predicate, kept, y, name, op_first
    return None


def _alone_in_the_selects_loop(value: Any, select: Any) -> bool:
    """XLA:CPU computes `value` (an elementwise result) inside the loop of `select`, which is its only reader there:
    the select reads it alone, or XLA's fusion duplicates it into each of its readers (_takes_a_copy; none the
    function's result) and no other elementwise or move reader's result flows into the select's loop, where the
    loop would share the one copy (where(t > 100, 0, where(p, t, x)) keeps t's select). jnp.where(p, d, x) beside
    jnp.argmax(d) or jnp.cumsum(d, 1) of d = x - y: a copy each (fuzz seed 20261801 #501); beside jnp.sum(d, 0) of a
    matrix, XLA:CPU computes d apart."""
    others = [F.owner_of(use) for use in value.uses if F.owner_of(use) != select]
    if not all(_takes_a_copy(o, value) for o in others):
        return False
    looped = [o for o in others if F.fusible_elementwise(o) or o.name in F.LOOP_MOVES]
    loop = _loop_downstream(select)
    return not any(any(o == member for member in loop) for other in looped for o in _loop_downstream(other))


def _takes_a_copy(owner: Any, value: Any, depth: int = 0) -> bool:
    """jaxlib 0.4.13's XLA:CPU fuses the elementwise producer of `value` into the loop of `owner`, which reads it: an
    elementwise op (jnp.where's @_where included), a move, a reduce over the minor dimension among others (it fuses
    into no reduction over major dimensions only), or a call of a function whose parameter `value` is only read so
    (jnp.argmax's @argmax, jnp.cumsum's slices and adds), which XLA inlines first."""
    if F.fusible_elementwise(owner) or owner.name in F.LOOP_MOVES:
        return True
    if not A.is_a(ir.RankedTensorType, value.type):
        return False
    if owner.name == "stablehlo.reduce":
        rank = len(ir.RankedTensorType(value.type).shape)
        return rank == 0 or rank - 1 in list(O.read_attrs(owner.attributes).get("dimensions") or [])
    block = F.callee_block(owner) if owner.name == "func.call" and depth < 8 else None
    operands = list(owner.operands)
    if block is None or sum(v == value for v in operands) != 1:
        return False
    param = block.arguments[next(i for i, v in enumerate(operands) if v == value)]
    uses = [F.owner_of(use) for use in param.uses]
    return bool(uses) and all(_takes_a_copy(u, param, depth + 1) for u in uses)


def _loop_downstream(op: Any, limit: int = 64) -> List[Any]:
    """`op` and the elementwise ops that read its results, transitively: what XLA:CPU's fusion puts in one loop."""
    found, frontier = [op], list(op.results)
    while frontier and len(found) < limit:
        for use in frontier.pop().uses:
            owner = F.owner_of(use)
            if F.fusible_elementwise(owner) and not any(owner == f for f in found):
                found.append(owner)
                frontier.extend(owner.results)
    return found


def _read_once_where_fused(value: Any, op: Any) -> bool:
    """XLA:CPU fuses `value` (an elementwise result) into `op`'s loop and LLVM folds it there only if that loop reads
    it once: not if it is also a result of the function (the fusion writes it too), nor if an op the loop also holds
    (one that reads op's result through elementwise ops) reads it as well. jnp.arctan2(jnp.minimum(s, x), s) of a
    select s keeps the minimum (a denormal is read as zero) where jnp.minimum(s, x) alone is the select's x."""
    others = [F.owner_of(use) for use in value.uses if F.owner_of(use) != op]
    if any(o.name == "func.return" for o in others):
        return False
    frontier, seen = list(op.results), 0
    while frontier and seen < 64:
        for use in frontier.pop().uses:
            seen += 1
            owner = F.owner_of(use)
            if any(owner == o for o in others):
                return False
            name = owner.name
            entry = O.registry().get(name.split(".", 1)[-1]) if name.startswith("stablehlo.") else None
            if name == "func.call" or (entry is not None and entry["elementwise"]):
                frontier.extend(owner.results)
    return True


def _sign(value: Any, depth: int = 0) -> int:
    """-1 where LLVM's InstCombine sees ``value`` as a negation once it has moved the negations of a product out of
    it (-C for a constant C > 0; -X; X * -C; (-X) * Y; a product of such factors, read once, by parity), else 1."""
    constant = F.splat_value(value)
    if constant is not None:
        return -1 if constant < 0 else 1
    producer = F.producer_of(value)
    if producer is None or depth > 8:
        return 1
    if producer.name == "stablehlo.negate":
        return -_sign(producer.operands[0], depth + 1)
    if producer.name == "stablehlo.multiply" and (depth == 0 or len(list(value.uses)) == 1):
        return _sign(producer.operands[0], depth + 1) * _sign(producer.operands[1], depth + 1)
    return 1


def _product_read_once(value: Any) -> bool:
    producer = F.producer_of(value)
    return producer is not None and producer.name == "stablehlo.multiply" and len(list(value.uses)) == 1


def _bf16_zero_test(op: Any, direct: bool) -> Optional[Any]:
    """For a compare, EQ or NE, with a zero constant of an f32 value that is a bf16 value widened (and then only
    moved: reversed, reshaped, transposed, sliced, broadcast), that f32 value; with ``direct``, for one of a bf16
    value, that value; else None."""
    if A.enum(op.attributes["comparison_direction"]) not in ("EQ", "NE"):
        return None
    for x, other in (op.operands, reversed(list(op.operands))):
        if F.splat_value(other) != 0.0:
            continue
        element = str(ir.RankedTensorType(x.type).element_type)
        if element == "bf16" and direct:
            return x
        if element != "f32":
            continue
        producer = F.producer_of(x)
        while producer is not None:  # moves, also those of jax's jitted helpers XLA inlines (jnp.flip)
            moved = next((operands for name in _MOVES_ONLY
                          if (operands := F.inlined_operands(producer, name)) is not None), None)
            if moved is None:
                break
            producer = F.producer_of(moved[0])
        if producer is not None and producer.name == "stablehlo.convert" and \
                str(ir.RankedTensorType(producer.operands[0].type).element_type) == "bf16":
            return x
    return None


_MOVES_ONLY = ("stablehlo.reverse", "stablehlo.reshape", "stablehlo.transpose", "stablehlo.slice",
               "stablehlo.broadcast_in_dim")


# An op and the constant c for which LLVM folds op(c, y) => y (so a denormal y stays), both orders: a pad's value
# jaxlib 0.12's XLA:CPU fuses into the op (_beside_identity_padding)
_PAD_IDENTITIES = {"stablehlo.add": -0.0, "stablehlo.multiply": 1.0, "stablehlo.maximum": -math.inf,
                   "stablehlo.minimum": math.inf}


def _zero_test_rewritten(t: Any, entry: Dict[str, Any], tested: Any) -> List[Dict[str, Any]]:
    """x == 0 or x != 0 for a bf16 x widened to f32 (moved after the widening or not; with jaxlib 0.4.13 also
    for a bf16 x itself) as XLA:CPU computes it: LLVM folds the compare of the widened bf16 with zero into a
    test of its bits, so a bf16 denormal is nonzero there although every other compare reads it as a zero:
    (bits(x) & ~sign) == 0 (or !=), in x's own width."""
    rewrite = W.Rewrite(t, entry)
    wide = str(ir.RankedTensorType(tested.type).element_type) == "f32"
    unsigned, pack, magnitude_mask = ("u32", "<I", 0x7FFFFFFF) if wide else ("u16", "<H", 0x7FFF)

    def constant(number: int) -> int:
        scalar = rewrite.emit("constant", [], unsigned, shape=[],
                              attrs={"value": Blob(struct.pack(pack, number)), "splat": False})
        return rewrite.emit("broadcast_in_dim", [scalar], unsigned, attrs={"broadcast_dimensions": []}) \
            if rewrite.shape else scalar

    bits = rewrite.emit("bitcast_convert", [t.use(tested)], unsigned)
    magnitude = rewrite.emit("and", [bits, constant(magnitude_mask)], unsigned)
    rewrite.emit("compare", [magnitude, constant(0)], result=entry["results"][0],
                 attrs={"comparison_direction": entry["attrs"]["comparison_direction"],
                        "compare_type": "UNSIGNED"})
    return rewrite.ops


def _where_operand(t: Any, rewrite: W.Rewrite, value: Any, dtype: Optional[str] = None) -> int:
    """A value of the caller, or a (value, dimensions) broadcast inside jnp.where's function written again."""
    if not isinstance(value, tuple):
        return t.use(value)
    return rewrite.emit("broadcast_in_dim", [t.use(value[0])], dtype=dtype,
                        attrs={"broadcast_dimensions": value[1]})


def _extremum_of_negation(t: Any, entry: Dict[str, Any], op: Any, x: Any) -> List[Dict[str, Any]]:
    """max(x, -x), max(-x, x), min(x, -x) or min(-x, x) of f32 as XLA:CPU computes them. jaxlib 0.12: |x| and
    -|x| (LLVM folds the pair into fabs), so a denormal is kept. jaxlib 0.4.13: the maximum or minimum of both
    operands flushed (a denormal x gives a zero of the first operand's sign, as its compiled loops do at every
    size), written as products by 1 that the emulator flushes."""
    rewrite = W.Rewrite(t, entry)
    result = entry["results"][0]
    if _jax.is_current_series():
        if op.name == "stablehlo.minimum":
            rewrite.emit("negate", [rewrite.emit("abs", [t.use(x)])], result=result)
        else:
            rewrite.emit("abs", [t.use(x)], result=result)
    else:
        one = rewrite.splat(1.0)
        flushed = [rewrite.emit("multiply", [operand, one]) for operand in entry["operands"]]
        rewrite.emit(op.name.split(".", 1)[1], flushed, result=result)
    return rewrite.ops


def _beside_identity_padding(t: Any, entry: Dict[str, Any], pad: Any, other: Any) -> List[Dict[str, Any]]:
    """op(pad(x, c), y), either side, where c is op's identity (_identity_padded), as jaxlib 0.12's XLA:CPU
    computes it: the pad is fused into the op's loop, where LLVM folds op(c, y) => y on the padding, so y is
    kept there as it is (a denormal y is not flushed: fuzz seed 20270101 #8322, min(pad(x, inf), y)). The op
    where x is, y where the padding is: a select by a pad of `true` with `false`."""
    rewrite = W.Rewrite(t, entry)
    computed = rewrite.emit(entry["op"], entry["operands"])
    source_shape = list(t.tensor(pad.operands[0])[1])
    true, false = (rewrite.emit("constant", [], "bool", shape=[], attrs={"value": Blob(bit), "splat": False})
                   for bit in (b"\x01", b"\x00"))
    inside = rewrite.emit("broadcast_in_dim", [true], "bool", source_shape, {"broadcast_dimensions": []}) \
        if source_shape else true
    mask = rewrite.emit("pad", [inside, false], "bool", attrs=O.read_attrs(pad.attributes))
    rewrite.emit("select", [mask, computed, t.use(other)], result=entry["results"][0])
    return rewrite.ops


def bf16_clamp_avx512(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "stablehlo.clamp" and not scalar_body and _jax.is_current_series() and t.bf16(op)
            and O.host().get("avx512") and all(b.type == op.results[0].type for b in op.operands)
            and (F.splat_value(op.operands[0]) is None or F.splat_value(op.operands[2]) is None)):
        return False
    # jaxlib 0.12, bf16 on an AVX-512 host: XLA:CPU computes a clamp with a bound that is not a constant
    # as its IEEE maximum, then minimum (LLVM's checks for NaN and signed zeros, whose selects keep a
    # denormal's bits: scalar_ops.h ieeeAvx512), one of constant bounds with plain maxps/minps (a
    # denormal read as a zero: the emulator's clamp). Measured on an AMD EPYC of family 26
    # (test_dtypes.py::test_compare_select_clamp, test_denormals.py's bf16 clamp)
    entry = t.entry(op)
    rewrite = W.Rewrite(t, entry)
    low, clamped, high = (t.use(v) for v in op.operands)
    raised = rewrite.emit("maximum", [clamped, low])
    rewrite.emit("minimum", [raised, high], result=entry["results"][0])
    body.extend(rewrite.ops)
    return True


def extremum_of_negation(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name in F.MIN_MAX and not scalar_body and t.f32(op) and (x := _negation_pair(op)) is not None):
        return False
    body.extend(_extremum_of_negation(t, t.entry(op), op, x))
    return True


def extremum_of_select(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name in F.MIN_MAX and not scalar_body and _jax.is_current_series() and t.real_float(op)
            and (selected := _select_extremum(op)) is not None):
        return False
    # jaxlib 0.12: XLA:CPU fuses the select into the extremum's loop, where LLVM folds max(select(p, A,
    # B), A) => select(p, A, max(B, A)) (either operand, either branch) if the loop reads the select once,
    # so where A is chosen it is A itself: a denormal A is not read as a zero
    entry = t.entry(op)
    rewrite = W.Rewrite(t, entry)
    predicate, same, other, same_first = (_where_operand(t, rewrite, selected[0], "bool"),
                                          t.use(selected[1]),
                                          _where_operand(t, rewrite, selected[2]), selected[3])
    extremum = rewrite.emit(op.name.split(".", 1)[1], [other, same])
    branches = [same, extremum] if same_first else [extremum, same]
    rewrite.emit("select", [predicate] + branches, result=entry["results"][0])
    body.extend(rewrite.ops)
    return True


def extremum_of_update(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name in F.MIN_MAX and not scalar_body and _jax.is_current_series() and t.real_float(op)
            and (updated := _extremum_of_update(op)) is not None):
        return False
    # jaxlib 0.12: XLA:CPU fuses dynamic_update_slice(A, U, i) into the extremum's loop, a select of U
    # inside the window and A outside, and LLVM folds max(A, select(p, U, A)) => select(p, max(A, U), A)
    # as above: outside the window the result is A itself, a denormal kept (fuzz seed 20262101 #802)
    entry = t.entry(op)
    rewrite = W.Rewrite(t, entry)
    kept, update_op = updated
    starts = [t.use(v) for v in update_op.operands[2:]]
    _, window_shape = t.tensor(update_op.operands[1])
    window = rewrite.emit("dynamic_slice", [t.use(kept)] + starts, shape=window_shape,
                          attrs={"slice_sizes": list(window_shape)})
    extremum = rewrite.emit(op.name.split(".", 1)[1], [window, t.use(update_op.operands[1])],
                            shape=window_shape)
    rewrite.emit("dynamic_update_slice", [t.use(kept), extremum] + starts, result=entry["results"][0])
    body.extend(rewrite.ops)
    return True


def select_of_arithmetic(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name in ("stablehlo.select", "func.call") and not scalar_body and not _jax.is_current_series()
            and not O.host().get("avx512") and len(op.results) == 1 and t.f32(op)
            and (folded := _select_of_arithmetic(op)) is not None):
        return False
    # jaxlib 0.4.13: XLA:CPU fuses X op Y into the select's loop, where LLVM's InstCombine folds
    # select(p, X op Y, X) => X op select(p, Y, identity) (either branch), so where the select keeps X
    # the op computes X op identity, which reads a denormal X as a zero: jnp.where(p, x + y, x) of a
    # denormal x is -0 on cpu. The same values otherwise (X + -0, X - 0, X * 1, X / 1 are X). Not on an
    # AVX-512 host (O.host()), where LLVM's X86 backend turns the fold back into a masked X op Y that
    # leaves X as it is (measured on an AMD EPYC of family 26)
    entry = t.entry(op)
    rewrite = W.Rewrite(t, entry)
    predicate, kept, other, name, op_first = folded
    identity = rewrite.splat(_SELECT_FOLD_IDENTITY[name])
    branches = [t.use(other), identity] if op_first else [identity, t.use(other)]
    chosen = rewrite.emit("select", [t.use(predicate)] + branches)
    rewrite.emit(name, [t.use(kept), chosen], result=entry["results"][0])
    body.extend(rewrite.ops)
    return True


def product_after_negated_product(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "stablehlo.add" and not scalar_body and t.f32(op)):
        return False
    if (_sign(op.operands[0]) > 0 and _sign(op.operands[1]) < 0
            and all(_product_read_once(v) for v in op.operands)):
        # Q + P with a negated product P is Q - |P| for LLVM, which Reassociate does not reorder: the product Q is
        # contracted, as written ((d * b) + (-0.746 * c), whatever the ranks of the two).
        entry = t.entry(op)
        body.append(dict(entry, attrs=dict(entry["attrs"], operand_order="as_written")))
        return True
    if not (all(_product_read_once(v) for v in op.operands) and _sign(op.operands[0]) < 0):
        return False
    # Both series: XLA:CPU's fused loop contracts one f32 product of a sum into a fused multiply-add, the first
    # operand's after LLVM's Reassociate has put the lower ranked first (elementwise.cc's llvmRank); but LLVM's
    # InstCombine first writes P + Q with a negated product P (0.48 * -y, -a * b, x * -0.5, (x * 0.48) * -1) as
    # Q - |P|, which Reassociate leaves as it is, so it is Q that is contracted, P rounded on its own. jax.grad of
    # 0.26 * (x**2 + y**2) - 0.48 * x * y at x = y gave two different components on the ipu (optax's L-BFGS test on
    # the Matyas function). The vertex contracts the first operand of an add marked "as_written": here Q comes
    # first, the same sum otherwise.
    entry = t.entry(op)
    body.append(dict(entry, operands=entry["operands"][::-1], attrs=dict(entry["attrs"], operand_order="as_written")))
    return True


def sum_of_negation(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name in ("stablehlo.add", "stablehlo.subtract") and not scalar_body and t.f32(op)):
        return False
    producers: List[Any] = [F.producer_of(v) for v in op.operands]
    negated = [p is not None and p.name == "stablehlo.negate" for p in producers]
    if True not in negated:
        return False
    # Both series: LLVM's InstCombine writes a sum with a negation without it where that is exact, signed zeros
    # included: (-X) + Q and Q + (-X) as Q - X, Q - (-X) as Q + X, (-X) - (-Y) as Y - X, and (-X) + (-Y) as
    # (-Y) - X. XLA:CPU's fused loop then contracts a product X into that add or subtract (one fused multiply-add),
    # where the ipu rounded -X first: -(b * c) + c as cpu computes it. The adds it writes keep their operands' order
    # (LLVM writes them after ordering sums by rank: elementwise.cc's llvmRank). A difference (-A) - B it leaves as
    # it is (-(A + B) needs no-signed-zeros: (-a) - b with b = -a is +0, -(a + b) is -0; fuzz seed 20287112 #228),
    # and its DAG combiner contracts the negated product A there, else B: measured on cpu, both series.
    entry = t.entry(op)
    kept = {"operand_order": "as_written"}
    x = t.use(producers[negated.index(True)].operands[0])
    out = entry["results"]
    if negated == [True, True]:
        y = t.use(producers[1].operands[0])
        if op.name == "stablehlo.subtract":
            body.append(W.derived(entry, "subtract", [y, x], out))
            return True
        body.extend(_negated_difference(t, entry, producers[1].operands[0], entry["operands"][1], x))
        return True
    side = negated.index(True)
    q = entry["operands"][1 - side]
    if op.name == "stablehlo.add":
        body.append(W.derived(entry, "subtract", [q, x], out))
    elif side == 1:
        body.append(W.derived(entry, "add", [q, x], out, kept))
    else:
        body.extend(_negated_difference(t, entry, producers[0].operands[0], entry["operands"][0], q))
    return True


def _negated_difference(t: Any, entry: Dict[str, Any], a: Any, negated_a: int, b: int) -> List[Dict[str, Any]]:
    """(-A) - B (A, the id of -A, the id of B) written for the fused vertex to contract as XLA:CPU does: the product
    A where it is one read once, as (-B) - A (the same sum, exactly: IEEE addition commutes), else as written,
    where the vertex contracts B if it is a product."""
    if not _product_read_once(a):
        return [W.derived(entry, "subtract", [negated_a, b], entry["results"])]
    rewrite = W.Rewrite(t, entry)
    rewrite.emit("subtract", [rewrite.emit("negate", [b]), t.use(a)], result=entry["results"][0])
    return rewrite.ops


def remainder_by_power_of_two(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "stablehlo.remainder" and not scalar_body and _jax.is_current_series() and t.f32(op)
            and (divisor := F.splat_value(op.operands[1])) is not None and math.isfinite(divisor)
            and abs(divisor) >= 1 and math.frexp(abs(divisor))[0] == 0.5):
        return False
    # jaxlib 0.12: LLVM computes an f32 frem by a constant power of two of at least 1 with arithmetic that reads a
    # denormal dividend as a zero (jnp.fmod(x, 2.0) of 3e-39 is 0 there, -0 for -3e-39; every other f32 dividend
    # gives fmod's exact result: measured over all powers of two and 20,000 values, for divisors 1, 2, 8, 2^20; 0.5,
    # 2^-20 and 3 keep the denormal, as jaxlib 0.4.13 does for all of them). The dividend is read through x * 1,
    # which the ipu's arithmetic flushes so, and is x otherwise. (An iota divisor is such a constant only where LLVM
    # unrolls its loop: the fuzz table's entry.)
    entry = t.entry(op)
    rewrite = W.Rewrite(t, entry)
    read = rewrite.emit("multiply", [entry["operands"][0], rewrite.splat(1.0)])
    rewrite.emit("remainder", [read, entry["operands"][1]], result=entry["results"][0])
    body.extend(rewrite.ops)
    return True


def beside_identity_padding(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name in _PAD_IDENTITIES and not scalar_body and _jax.is_current_series()
            and t.real_float(op) and (padded := _identity_padded(op)) is not None):
        return False
    body.extend(_beside_identity_padding(t, t.entry(op), *padded))
    return True


def bf16_zero_test(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "stablehlo.compare" and not scalar_body
            and (tested := _bf16_zero_test(op, direct=not _jax.is_current_series())) is not None):
        return False
    body.extend(_zero_test_rewritten(t, t.entry(op), tested))
    return True
