"""Rules of structure: how StableHLO's (and XLA's HLO's) forms map onto the program format, with no change to any value.

Tuples and get_tuple_element are resolved to the values they hold; ``mhlo.copy`` is its operand; an ``rng``'s shape
operand (a 64-bit constant) is left out, as its result's type states the shape; ``stablehlo.if`` becomes a ``case``;
a custom call to ``mhlo.<op>`` is that op; a tupled call of the partitioner's is untupled; calls are inlined, as XLA
inlines them (once the rules that read a call as such have declined); a ``while`` that runs its body once or never
is its body (or its operands), as XLA's while-loop simplifier removes it;
jax's ``dce_sink`` anchors are recorded for dead-code elimination; a one-device ``sdy.manual_computation`` is its
body; a splat constant read only by elementwise ops is written as its scalar broadcast (Poplar keeps such a constant
as a scalar). Every rule here writes the same computation in the program format's terms, so results are the module's
bit for bit.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional

from jax._src.lib.mlir import ir

from .. import attributes as A
from .. import facts as F
from .. import ops as O
from .. import partitioner, spmd
from .. import rewrite as W
from ..errors import CompileError, unsupported


def call_target(op: Any) -> str:
    return A.string(op.attributes["call_target_name"]) if "call_target_name" in op.attributes else ""


def _mhlo_op(op: Any) -> Optional[str]:
    """The program op of a custom call to ``mhlo.<op>`` (XLA's HLO spelling of an op it had no opcode for)."""
    target = call_target(op)
    name = target[len("mhlo."):] if target.startswith("mhlo.") else ""
    return name if name and O.is_known(name) else None


def _splat_for_elementwise_ops(op: Any) -> bool:
    """A splat constant of more than one real element whose every use is an elementwise op."""
    result = ir.RankedTensorType(op.results[0].type)
    if A.is_a(ir.ComplexType, result.element_type) or not result.has_static_shape or \
            math.prod(result.shape) < 2:  # complex constants are read from their text (types.py)
        return False
    attr = op.attributes["value"]
    if not A.is_a(ir.DenseElementsAttr, attr) or not ir.DenseElementsAttr(attr).is_splat:
        return False
    uses = list(op.results[0].uses)
    for use in uses:
        name = getattr(use.owner, "operation", use.owner).name  # an OpView (0.4.13) or an Operation
        entry = O.registry().get(name.split(".", 1)[-1]) if name.startswith("stablehlo.") else None
        if entry is None or not entry["elementwise"]:
            return False
    return bool(uses)


def _is_dce_sink(op: Any) -> bool:
    """jax's ``dce_sink`` custom call (no results): an anchor against XLA's dead-code elimination."""
    if op.name != "stablehlo.custom_call" or len(op.results):
        return False
    attrs = A.named(op.attributes)
    return "call_target_name" in attrs and A.string(attrs["call_target_name"]) == "dce_sink"


def _inline_manual(t: Any, op: Any, body: List[Dict[str, Any]]) -> None:
    """An ``sdy.manual_computation`` on one device (a shard_map over a mesh of one): its body in place of it, its
    arguments being its operands (the whole arrays), its results what its body returns. (Over several devices
    XLA's partitioner has made the body the program.)"""
    region = op.regions[0]
    if len(region.blocks) != 1:
        raise CompileError(f"a region of {op.name} has {len(region.blocks)} blocks; the ipu compiler expects one")
    block = region.blocks[0]
    for arg, operand in zip(block.arguments, op.operands):
        t.ids[arg] = t.use(operand)
    for result, returned in zip(op.results, t.ops(block, body, False)):
        t.ids[result] = returned


def _untupled_call(t: Any, op: Any) -> Dict[str, Any]:
    """Our host callback in XLA's HLO (the partitioned program) returns a tuple: the call with its elements as
    results, read back by get_tuple_element. (Any other custom call with a tuple is refused by _check.)"""
    tuple_type = ir.TupleType(op.results[0].type)
    results = []
    for index in range(tuple_type.num_types):
        element = t.type_of(tuple_type.get_type(index))
        if element is None:
            raise unsupported(op.name, W.types_text(op), f"{tuple_type} cannot be expressed as IPU tensors")
        results.append(t.fresh(element[0], list(element[1])))
    t.tuples[op.results[0]] = [r["id"] for r in results]
    entry = {"op": "custom_call", "mlir": op.name, "operands": [t.use(v) for v in op.operands],
             "results": results, "attrs": O.read_attrs(op.attributes), "regions": []}
    return W.located(entry, op)


def _if_as_case(t: Any, op: Any) -> List[Dict[str, Any]]:
    """XLA's conditional on a predicate (``stablehlo.if``, from the partitioner: a call only one device makes)
    as a ``case`` on the predicate as an index, the false branch first."""
    t.check(op)
    index = t.fresh("i32", [])
    convert = {"op": "convert", "mlir": op.name, "operands": [t.use(op.operands[0])], "results": [index],
               "attrs": {}, "regions": []}
    regions = [t.region(op.regions[1], "stablehlo.case"), t.region(op.regions[0], "stablehlo.case")]
    case = dict(convert, op="case", operands=[index["id"]], regions=regions,
                results=[t.define(v, op.name) for v in op.results])
    return [W.located(convert, op), W.located(case, op)]


def inline(t: Any, call: Any, body: List[Dict[str, Any]], scalar_body: bool = True, callee: str = "") -> None:
    """Writes the callee's ops in place of `call` (XLA inlines every call before it compiles); `callee`: the
    function, if not the call's "callee" (a composite's decomposition)."""
    callee = callee or A.symbol(A.named(call.attributes)["callee"])
    if callee not in t.funcs:
        raise CompileError(f"func.call to @{callee}, which the module does not define")
    region = t.funcs[callee].regions[0]
    if len(region.blocks) != 1:
        raise CompileError(f"func.func @{callee} has {len(region.blocks)} blocks; the ipu compiler expects one")
    block = region.blocks[0]
    for arg, operand in zip(block.arguments, call.operands):  # the callee's arguments are the call's operands
        t.ids[arg] = t.use(operand)
    returned_values = list(block.operations)[-1].operands
    for value in returned_values:  # (only what this call's ops write is known of its results, not an earlier call's)
        for known in (t.quotients, t.quotient_values, t.exponents, t.unrounded):
            known.pop(value, None)
    for result, returned, value in zip(call.results, t.ops(block, body, scalar_body), returned_values):
        t.ids[result] = returned
        # what the rules know of the returned value is known of the call's result, as XLA's rules see across the
        # inlined call: jax 0.4.13's sigmoid(x) / y is (1 / B) / y => 1 / (B * y) on cpu (fuzz seed 20286601
        # #141). Keyed by the result: the callee's own values are written again by its next call
        for known in (t.quotients, t.quotient_values, t.exponents, t.unrounded):
            if value in known:
                known[result] = known[value]


def _splat_as_broadcast(t: Any, op: Any) -> List[Dict[str, Any]]:
    """A splat constant that only elementwise ops read, as its one element broadcast: Poplar keeps such a
    constant as a scalar and broadcasts it as a view, and the emulator fuses the broadcast into the ops that
    read it, so the array is never stored (jax 0.12 folds every broadcast scalar into one: erf alone has 16)."""
    entry = t.entry(op)
    whole = entry["results"][0]
    scalar = t.fresh(whole["dtype"], [])
    entry.update(results=[scalar], attrs=dict(entry["attrs"], splat=False))
    t.splat_scalars[whole["id"]] = scalar["id"]
    return [entry, W.derived(entry, "broadcast_in_dim", [scalar["id"]], [whole], {"broadcast_dimensions": []})]


def tuple_elements(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if op.name != "stablehlo.tuple":
        return False
    t.tuples[op.results[0]] = [t.use(v) for v in op.operands]
    return True


def tuple_element(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "stablehlo.get_tuple_element" and op.operands[0] in t.tuples):
        return False
    index = A.integer(op.attributes["index"])
    t.ids[op.results[0]] = t.tuples[op.operands[0]][index]
    return True


def rng_shape(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "stablehlo.rng" and len(op.operands) == 3):
        return False
    entry = t.entry(op)
    body.append(dict(entry, operands=entry["operands"][:2]))
    return True


def hlo_copy(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if op.name != "mhlo.copy":
        return False
    t.ids[op.results[0]] = t.use(op.operands[0])
    return True


def if_as_case(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if op.name != "stablehlo.if":
        return False
    body.extend(_if_as_case(t, op))
    return True


def hlo_custom_call_op(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "stablehlo.custom_call" and _mhlo_op(op) is not None):
        return False
    # an op HLO had none of when jaxlib 0.4.13 was built, as XLA writes it (custom-call "mhlo.tan")
    body.append(dict(t.entry(op), op=_mhlo_op(op), attrs={}))
    return True


def hlo_topk(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    """``mhlo.topk``: XLA's TopK as its HLO importer writes it (the current series' modules that XLA's SPMD
    partitioner returned, e.g. a sharded jax.random.categorical), the top_k jax lowers through chlo elsewhere."""
    if op.name != "mhlo.topk":
        return False
    attrs = A.named(op.attributes)
    if "largest" in attrs and not A.boolean(attrs["largest"]):
        raise CompileError(f"mhlo.topk with largest = false ({W.types_text(op)}): the ipu's top_k keeps the largest "
                           "elements, as jax's lax.top_k asks")
    body.append(dict(t.entry(op), op="top_k", attrs={"k": A.integer(attrs["k"])}))
    return True


def tupled_call(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "stablehlo.custom_call" and len(op.results) == 1 and
            A.is_a(ir.TupleType, op.results[0].type) and call_target(op) == partitioner.CALL_TARGET):
        return False
    body.append(_untupled_call(t, op))
    return True


def inlined_call(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if op.name not in ("func.call", "stablehlo.composite"):
        return False
    # XLA inlines every call (CallInliner, a composite's decomposition included) before its simplifier and its
    # fusion see the program: the callee's ops are written in the caller's block (a scalar body's too), so that the
    # rules that read a convert's producer, the passes that need the whole function (duplicate_products:
    # jnp.where(p, v, w) - v of a product v is one fused loop on cpu, its product read twice there and not
    # contracted; fuzz seed 20281901 #3024) and the emulator's fusion see what XLA's do. The rules that read a call
    # as such (the sort it is, the select it returns) come before this one.
    callee = A.symbol(A.named(op.attributes)["callee" if op.name == "func.call" else "decomposition"])
    inline(t, op, body, scalar_body=scalar_body, callee=callee)
    return True


def one_trip_loop(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "stablehlo.while" and not F.is_loop(op)):
        return False
    # XLA's while-loop simplifier removes a loop it can tell runs its body once (lax.fori_loop(0, 1, ...), a scan
    # of length 1) or never, before its other passes see the program: the body is written in the loop's place, its
    # parameters the loop's operands, and the rules and fusion see across the loop's edges as XLA's do (a converted
    # predicate carried into the body is divided as such: fuzz seed 20282401 #8139; a product in the body is
    # contracted into an add after the loop: 20271601 #7152). A loop of no trip is its operands.
    # XLA:CPU's bf16 normalization still sees the loop, though: a bf16 value that crosses its edge is rounded there,
    # so excess_precision's rules do not read past it ((x * b) in lax.fori_loop(0, 1, ...) converted to f32 after
    # it is rounded on cpu)
    if F.removed_trips(op) == 0:
        for result, operand in zip(op.results, op.operands):
            t.ids[result] = t.use(operand)
            F.CALLS.aliases[result] = operand
        return True
    block = op.regions[1].blocks[0]
    edge = {t.use(operand) for operand in op.operands} - t.rounded_at_loop_edge
    for arg, operand in zip(block.arguments, op.operands):
        t.ids[arg] = t.use(operand)
        F.CALLS.aliases[arg] = operand
    t.rounded_at_loop_edge |= edge
    written = t.ops(block, body, scalar_body)
    t.rounded_at_loop_edge -= edge
    returned = list(block.operations)[-1].operands
    for result, value, new in zip(op.results, returned, written):
        t.ids[result] = new
        F.CALLS.aliases[result] = value
        t.rounded_at_loop_edge.add(new)
    return True


def dce_sink(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not _is_dce_sink(op):
        return False
    t.anchors.update(t.use(v) for v in op.operands)  # kept from the dead-code pass, as from XLA's
    return True


def manual_computation(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if op.name != spmd.MANUAL_COMPUTATION:
        return False
    _inline_manual(t, op, body)
    return True


def splat_constant(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "stablehlo.constant" and not scalar_body and _splat_for_elementwise_ops(op)):
        return False
    body.extend(_splat_as_broadcast(t, op))
    return True
