"""What the front end's rules ask of the StableHLO module: read-only queries over MLIR values and ops.

The producer of a value as XLA's simplifier sees it (through the ops the front end removed as XLA does, and not
across a conditional's branch), the loops and calls around an op, constant values through calls' parameters, splat
and integer constants, a reduce body's one combining op, a scatter's windows. Nothing here writes the document or
changes the module: the walk (translate.py) and the rules (rules/) decide what to write from these answers.

``CALLS`` is the state of one module's translation that the queries need (the constants each function's parameters
receive, the conditional branches being walked, the values the simplifier rules replaced); translate sets it for
the length of one ``_Translator.program`` call, per thread.
"""

from __future__ import annotations

import math
import threading
from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Tuple

import numpy as np
from jax._src.lib.mlir import ir

from . import attributes as A
from . import ops as O
from . import types as T


def producer_of(value: Any) -> Optional[Any]:
    """The op that defines `value`, or None for a block argument and, inside a conditional's branch, for a value the
    branch captures from outside: XLA's conditional receives those as its branch computation's parameters, so its
    simplifier cannot see what made them (log(a) in a branch of lax.cond(p, f, g, x ** 0.5) is a log). An op the
    front end removed as XLA's simplifier does (A + 0 is A) is seen through to what made A."""
    value = alias(value)
    owner = value.owner
    owner = getattr(owner, "operation", owner)
    if not (hasattr(owner, "name") and hasattr(owner, "operands")):
        return sunk_constant(value)
    branches = getattr(CALLS, "branches", None)
    if branches and not inside(owner, branches[-1]) and owner.name != "stablehlo.constant" \
            and function_of(owner) == function_of(branches[-1]):
        # (a constant XLA propagates into the branch: the scatter of segment_sum's constant ids; and the ops of a
        # function the branch calls are the branch's own once XLA has inlined the call: jnp.clip's bounds in jax
        # 0.4.13, fuzz seed 20286211 #863)
        return None
    return owner


def alias(value: Any) -> Any:
    """The value `value` is to XLA's simplifier once the front end has removed the op that made it as XLA does
    (A + 0 is A)."""
    aliases = getattr(CALLS, "aliases", None)
    while aliases and value in aliases:
        value = aliases[value]
    return value


def sunk_constant(argument: Any) -> Optional[Any]:
    """The constant a while loop's argument always is, as XLA's WhileLoopConstantSinking sees it: the loop's operand
    at its position is a constant and the body returns the argument unchanged there (lax.scan carries what its body
    captures so: segment_sum's constant ids in a scan). None for any other block argument."""
    try:
        arg = ir.BlockArgument(argument)
    except (TypeError, ValueError):
        return None
    block = arg.owner
    loop = getattr(block.owner, "operation", block.owner)
    if getattr(loop, "name", None) != "stablehlo.while" or len(loop.regions) != 2:
        return None
    i = arg.arg_number
    body = loop.regions[1].blocks[0]
    returned = list(body.operations)[-1].operands
    if i >= len(returned) or i >= len(loop.operands) or returned[i] != body.arguments[i]:
        return None
    init = producer_of(loop.operands[i])
    return init if init is not None and init.name == "stablehlo.constant" else None


def in_while(op: Any) -> bool:
    """`op` is in a region of a stablehlo.while (within one function) that XLA keeps as a loop."""
    return any(is_loop(parent) for parent in enclosing(op))


# Ops XLA counts as side effects: a loop that holds one is never removed (HasSideEffect).
_SIDE_EFFECTS = ("stablehlo.custom_call", "stablehlo.infeed", "stablehlo.outfeed", "stablehlo.send",
                 "stablehlo.recv", "stablehlo.rng", "stablehlo.all_reduce", "stablehlo.all_gather",
                 "stablehlo.all_to_all", "stablehlo.reduce_scatter", "stablehlo.collective_permute",
                 "stablehlo.create_token", "stablehlo.after_all")


def _side_effect_free(op: Any, funcs: Dict[str, Any], depth: int = 8) -> bool:
    """No op in `op`'s regions, or in the functions they call, is a side effect."""
    for inner in nested_operations(op):
        if inner.name in _SIDE_EFFECTS:
            return False
        if inner.name == "func.call":
            callee = funcs.get(ir.FlatSymbolRefAttr(inner.attributes["callee"]).value)
            if callee is None or depth == 0 or not _side_effect_free(callee, funcs, depth - 1):
                return False
    return True


class _Induction(NamedTuple):
    """A while loop's induction variable as XLA's while-loop analysis matches it: argument k, its first value, the
    constant added each trip, and the condition `argument k <direction> limit` (`limit <direction> argument k` where
    `limit_first`)."""
    k: int
    init: int
    step: int
    direction: str
    limit: int
    limit_first: bool

    def runs(self, i: int) -> bool:
        holds = INT_COMPARES[self.direction]
        return holds(self.limit, i) if self.limit_first else holds(i, self.limit)

    def bounded_above(self) -> bool:
        """The condition is an upper limit: `i < n`, `i <= n`, `n > i` or `n >= i`."""
        return self.direction in (("GT", "GE") if self.limit_first else ("LT", "LE"))


def _induction(loop: Any) -> Optional[_Induction]:
    """The induction variable of a stablehlo.while: the loop's operand k is a scalar integer constant, the condition
    returns a compare of its argument k with a scalar constant, the body returns argument k plus a scalar constant;
    else None."""
    cond, body = (region.blocks[0] for region in loop.regions)
    returned = list(cond.operations)[-1].operands
    compare: Any = getattr(returned[0].owner, "operation", returned[0].owner) if len(returned) == 1 else None
    if getattr(compare, "name", "") != "stablehlo.compare":
        return None
    args = list(cond.arguments)
    sides = [args.index(v) if v in args else None for v in compare.operands]
    if sides.count(None) != 1:
        return None
    k = sides[0] if sides[0] is not None else sides[1]
    if k is None:
        return None
    limit = int_constant(compare.operands[1 if sides[0] is not None else 0])
    init = int_constant(loop.operands[k])
    stepped = list(body.operations)[-1].operands[k]
    add: Any = getattr(stepped.owner, "operation", stepped.owner)
    if getattr(add, "name", "") != "stablehlo.add" or body.arguments[k] not in list(add.operands):
        return None
    step = int_constant(add.operands[1] if add.operands[0] == body.arguments[k] else add.operands[0])
    if None in (limit, init, step) or not len(limit) == len(init) == len(step) == 1:  # type: ignore[arg-type]
        return None
    direction = A.enum(compare.attributes["comparison_direction"])
    if direction not in INT_COMPARES or not signed_compare(compare):
        return None
    return _Induction(k, init[0], step[0], direction, limit[0], sides[0] is None)  # type: ignore[index]


def signed_compare(compare: Any) -> bool:
    """A stablehlo.compare of integers that compares them as signed (INT_COMPARES' order): not UNSIGNED."""
    return "compare_type" not in compare.attributes or A.enum(compare.attributes["compare_type"]) != "UNSIGNED"


def trip_count(loop: Any) -> Optional[int]:
    """How many times a stablehlo.while runs its body, where XLA's while-loop simplifier can tell (its induction
    variable: _induction) and it is 0 or 1; else None."""
    induction = _induction(loop)
    if induction is None:
        return None
    i, trips = induction.init, 0
    while induction.runs(i):
        trips, i = trips + 1, i + induction.step
        if trips > 1:
            return None
    return trips


def induction_range(value: Any) -> Optional[Tuple[int, int]]:
    """(first, last): the values a while loop's body sees of its induction variable (_induction), when `value` is
    that body argument, the variable counts up (a positive step) under an upper limit (`i < n`, `i <= n`, `n > i`,
    `n >= i`) and stepping past its last value cannot wrap around its signed type; else None. (XLA's while-loop
    analysis bounds an induction variable so; jax 0.4.13's scan fixes up a negative index with it.)"""
    try:
        arg = ir.BlockArgument(alias(value))
    except (TypeError, ValueError):
        return None
    loop = getattr(arg.owner.owner, "operation", arg.owner.owner)
    if getattr(loop, "name", None) != "stablehlo.while" or len(loop.regions) != 2 or \
            arg.owner != loop.regions[1].blocks[0]:
        return None
    element = ir.RankedTensorType(arg.type).element_type if A.is_a(ir.RankedTensorType, arg.type) else None
    if element is None or not A.is_a(ir.IntegerType, element) or ir.IntegerType(element).is_unsigned or \
            ir.RankedTensorType(arg.type).rank != 0:
        return None
    induction = _induction(loop)
    if induction is None or induction.k != arg.arg_number or induction.step <= 0 or \
            not induction.bounded_above() or not induction.runs(induction.init):
        return None
    last = induction.init + (induction.limit - induction.init) // induction.step * induction.step
    while not induction.runs(last):  # (at most once: the limit itself, where the limit is strict)
        last -= induction.step
    if last + induction.step > (1 << (ir.IntegerType(element).width - 1)) - 1:
        return None  # the step after the last could wrap around and run the body again
    return induction.init, last


def removed_loops(funcs: Dict[str, Any]) -> List[Tuple[Any, int]]:
    """(loop, its trip count) for the stablehlo.while ops of the module that XLA's while-loop simplifier removes
    before its other passes: a loop that runs its body at most once (trip_count) and holds no side effect."""
    return [(op, trips) for func in funcs.values() for op in nested_operations(func)
            if op.name == "stablehlo.while" and len(op.regions) == 2 and (trips := trip_count(op)) is not None
            and _side_effect_free(op, funcs)]


def removed_trips(op: Any) -> Optional[int]:
    """The trip count (0 or 1) of `op` if it is a loop the front end removes (removed_loops); else None."""
    return next((trips for loop, trips in getattr(CALLS, "removed", ()) if op == loop), None)


def live_readers(value: Any, depth: int = 4) -> List[Any]:
    """The ops that read `value` as XLA sees them once its while-loop simplifier has removed the loops the front end
    removes (removed_loops) and its dead-code pass the ops whose results nothing reads: a removed loop's operand is
    read by what reads the body's parameter (the loop's result, for a loop of no trip), a value its body returns by
    what reads the loop's result; an op with results counts only where something reads one of them (`depth` levels
    down; deeper, it counts)."""
    return [owner for owner in _readers(value) if _live(owner, depth)]


def _readers(value: Any) -> Iterator[Any]:
    """The ops that read `value`, through the edges of removed loops (live_readers)."""
    for use in value.uses:
        owner = getattr(use.owner, "operation", use.owner)
        k = use.operand_number
        trips = removed_trips(owner)
        if trips is not None:  # the removed loop's operand: its body's parameter, or its result if it never runs
            yield from _readers(owner.results[k] if trips == 0 else owner.regions[1].blocks[0].arguments[k])
            continue
        loop = getattr(owner.parent, "operation", owner.parent) if owner.name == "stablehlo.return" else None
        if loop is not None and removed_trips(loop) is not None and \
                list(loop.regions[1].blocks[0].operations)[-1] == owner:  # the removed loop's body returns it
            yield from _readers(loop.results[k])
            continue
        yield owner


def _live(op: Any, depth: int) -> bool:
    """`op` has no results (a return, a side effect), or something live reads one (`depth` levels down)."""
    if not len(op.results) or depth == 0:
        return True
    return any(_live(reader, depth - 1) for result in op.results for reader in _readers(result))


def is_loop(op: Any) -> bool:
    """`op` is a stablehlo.while that XLA keeps: not one whose body the front end wrote in its place, as XLA's
    while-loop simplifier removes a loop of one trip (rules/structure.py, one_trip_loop)."""
    return op.name == "stablehlo.while" and removed_trips(op) is None


def inside(op: Any, ancestor: Any) -> bool:
    """`op` is nested in a region of `ancestor` (within one function)."""
    return any(parent == ancestor for parent in enclosing(op))


def function_of(op: Any) -> Any:
    """The func.func that holds `op`."""
    parent = op.parent
    while parent is not None:
        parent = getattr(parent, "operation", parent)
        if parent.name == "func.func":
            return parent
        parent = parent.parent
    return None


def enclosing(op: Any) -> Iterator[Any]:
    """The ops whose regions hold `op`, innermost first, up to (not including) its function."""
    parent = op.parent
    while parent is not None:
        parent = getattr(parent, "operation", parent)
        if parent.name == "func.func":
            return
        yield parent
        parent = parent.parent


MOVED = ("stablehlo.broadcast_in_dim", "stablehlo.reshape")


def callee_block(call: Any) -> Optional[Any]:
    """The body of the module's function a func.call calls, or None (not known while translating)."""
    func = getattr(CALLS, "funcs", {}).get(ir.FlatSymbolRefAttr(call.attributes["callee"]).value)
    return func.regions[0].blocks[0] if func is not None else None


def inlined_operands(producer: Any, name: str) -> Optional[List[Any]]:
    """The operands of `producer` if it is op `name`, or, as XLA sees it once it has inlined the call, of a call of
    a private function that returns op `name` of its parameters (jax 0.12's jnp.where is a call of @_where, one
    select), as values of the caller; else None."""
    if producer.name == name:
        return list(producer.operands)
    returned = returned_op(producer)
    if returned is None:
        return None
    op, before, params = returned
    if before or op.name != name or not all(v in params for v in op.operands):
        return None
    return [producer.operands[params.index(v)] for v in op.operands]


def returned_op(call: Any) -> Optional[Tuple[Any, List[Any], List[Any]]]:
    """For a call of a private function whose body ends by returning the results of one op: (that op, the ops
    before it, the body's parameters); else None."""
    if call.name != "func.call" or len(call.results) != 1:
        return None
    block = callee_block(call)
    if block is None:
        return None
    body = [getattr(o, "operation", o) for o in block.operations]
    if len(body) < 2 or body[-1].name != "func.return" or list(body[-1].operands) != list(body[-2].results):
        return None
    return body[-2], body[:-2], list(block.arguments)


def int_constant(value: Any) -> Optional[List[int]]:
    """The elements of an integer constant, or of a broadcast of a one-element one, in order; else None. Also folded
    through the signed compare, add, subtract and select of such constants that XLA folds (jax 0.4.13 writes a
    scatter's constant index i as select(i < 0, i + n, i))."""
    producer = producer_of(value)
    size = math.prod(ir.RankedTensorType(value.type).shape)
    if producer is not None and producer.name in INT_FOLDS and \
            all(ir.RankedTensorType(v.type).shape == ir.RankedTensorType(value.type).shape for v in producer.operands):
        parts = [int_constant(v) for v in producer.operands]
        if any(p is None for p in parts):
            return None
        if any(str(ir.RankedTensorType(v.type).element_type).startswith("ui") for v in producer.operands):
            return None  # (signed integers only)
        fold = INT_FOLDS[producer.name]
        if producer.name == "stablehlo.compare":
            fold = INT_COMPARES[A.enum(producer.attributes["comparison_direction"])]
        folded = [int(fold(*elements)) for elements in zip(*parts)]  # type: ignore[misc]
        width = ir.IntegerType(ir.RankedTensorType(value.type).element_type).width
        return [(e + (1 << (width - 1))) % (1 << width) - (1 << (width - 1)) if width > 1 else e for e in folded]
    if producer is not None and producer.name == "stablehlo.broadcast_in_dim":
        inner = int_constant(producer.operands[0])
        return None if inner is None or len(inner) != 1 else inner * size
    if producer is not None and producer.name == "stablehlo.reshape":
        return int_constant(producer.operands[0])
    if producer is not None and producer.name == "stablehlo.concatenate" and \
            A.is_a(ir.RankedTensorType, value.type) and ir.RankedTensorType(value.type).rank == 1:
        parts = [int_constant(v) for v in producer.operands]
        return None if any(p is None for p in parts) else [e for p in parts for e in p]  # type: ignore[union-attr]
    value_attr = constant_attr(producer) if producer is not None and producer.name == "stablehlo.constant" else None
    if value_attr is None or not A.is_a(ir.DenseIntElementsAttr, value_attr):
        return None
    attr = ir.DenseIntElementsAttr(value_attr)
    if 1 < ir.IntegerType(ir.ShapedType(attr.type).element_type).width < 8:
        return None  # the bindings read no sub-byte element (and the ipu computes those in 8 bits: narrow_types)
    return [attr[0]] * size if attr.is_splat else [attr[i] for i in range(len(attr))]


def constant_attr(constant: Any) -> Any:
    """A stablehlo.constant's ``value`` attribute, or None for a complex one: the MLIR bindings cannot read a complex
    dense attribute as an attribute (TypeError "Can't cast unknown element type"), so complex constants are read
    from their text (types.py)."""
    if A.is_a(ir.ComplexType, ir.RankedTensorType(constant.results[0].type).element_type):
        return None
    return constant.attributes["value"]


INT_FOLDS: Dict[str, Callable[..., int]] = {
    "stablehlo.add": lambda a, b: a + b, "stablehlo.subtract": lambda a, b: a - b,
    "stablehlo.select": lambda p, a, b: a if p else b, "stablehlo.compare": lambda a, b: 0}  # (compares: below)


INT_COMPARES: Dict[str, Callable[[int, int], bool]] = {
    "LT": lambda a, b: a < b, "LE": lambda a, b: a <= b, "GT": lambda a, b: a > b, "GE": lambda a, b: a >= b,
    "EQ": lambda a, b: a == b, "NE": lambda a, b: a != b}


def unconverted(value: Any) -> Any:
    """`value` before the converts to its own type that make it (jax writes some; XLA drops them)."""
    producer = producer_of(value)
    while producer is not None and producer.name == "stablehlo.convert" and producer.operands[0].type == value.type:
        value = producer.operands[0]
        producer = producer_of(value)
    return value


def scatter_windows(op: Any) -> Optional[Tuple[Dict[str, Any], int]]:
    """A scatter's attrs as the program has them (its combiner as "computation") and how many update windows it has,
    for a scatter of one operand with no batching dimensions; else None."""
    if op is None or op.name != "stablehlo.scatter" or len(op.operands) != 3 or len(op.results) != 1:
        return None
    attrs = O.read_attrs(op.attributes)
    if BATCHING.keys() & attrs.keys() or "update_window_dims" not in attrs:
        return None
    attrs["computation"] = body_computation(op, assign=True)
    update_shape = ir.RankedTensorType(op.operands[2].type).shape
    return attrs, math.prod(n for d, n in enumerate(update_shape) if d not in attrs["update_window_dims"])


def scatter_window(op: Any) -> Optional[Tuple[List[int], List[int], List[int]]]:
    """(start, window sizes, operand shape) of a scatter of one update window at constant indices; else None."""
    windows = scatter_windows(op)
    if windows is None or windows[1] != 1:
        return None
    attrs = windows[0]
    indices = int_constant(op.operands[1])
    if indices is None or len(indices) != len(attrs["scatter_dims_to_operand_dims"]):
        return None
    operand_shape = list(ir.RankedTensorType(op.operands[0].type).shape)
    update_shape = ir.RankedTensorType(op.operands[2].type).shape
    sizes = iter(update_shape[d] for d in attrs["update_window_dims"])
    window = [1 if d in attrs["inserted_window_dims"] else next(sizes) for d in range(len(operand_shape))]
    start = [0] * len(operand_shape)
    for k, d in enumerate(attrs["scatter_dims_to_operand_dims"]):
        start[d] = int(indices[k])
    return start, window, operand_shape


def drops_its_window(op: Any) -> bool:
    """A scatter of one update window at constant indices where the window does not fit: XLA drops the update."""
    placed = scatter_window(op)
    return placed is not None and any(s < 0 or s + w > n for s, w, n in zip(*placed))


# Moves XLA:CPU computes as index arithmetic inside the loop of what reads them.
LOOP_MOVES = tuple(f"stablehlo.{n}" for n in ("broadcast_in_dim", "reshape", "transpose", "reverse", "slice", "pad",
                                               "concatenate"))


def fusible_elementwise(owner: Any) -> bool:
    """An elementwise op, or a call of a function of elementwise ops and broadcasts (jnp.where's @_where), which XLA
    inlines and fuses alike."""
    name = owner.name
    if name.startswith("stablehlo."):
        entry = O.registry().get(name.split(".", 1)[-1])
        return entry is not None and entry["elementwise"]
    block = callee_block(owner) if name == "func.call" else None
    if block is None:
        return False
    body = [getattr(o, "operation", o) for o in block.operations]
    return all(o.name in ("func.return", "stablehlo.broadcast_in_dim", "stablehlo.constant") or (
        o.name.startswith("stablehlo.") and fusible_elementwise(o)) for o in body)


def owner_of(use: Any) -> Any:
    return getattr(use.owner, "operation", use.owner)  # an OpView (0.4.13) or an Operation


def is_constant(value: Any) -> bool:
    """A constant, or a broadcast one, in this function (not through a convert or a call's parameter, which XLA's
    first simplifier passes still see)."""
    producer = producer_of(value)
    if producer is not None and producer.name == "stablehlo.broadcast_in_dim":
        producer = producer_of(producer.operands[0])
    return producer is not None and producer.name == "stablehlo.constant"


# Ops XLA's constant folding evaluates when every operand is a constant (besides the elementwise ones).
_FOLDED_MOVES = ("stablehlo.broadcast_in_dim", "stablehlo.reshape", "stablehlo.transpose", "stablehlo.convert")


def constant_expression(value: Any, depth: int = 16) -> bool:
    """`value` is computed from constants alone, by elementwise ops and moves in this function: XLA's constant
    folding evaluates it (and an op of such values) before its simplifier's rules see it."""
    producer = producer_of(value)
    if producer is None or depth == 0:
        return False
    if producer.name == "stablehlo.constant":
        return True
    if producer.name not in _FOLDED_MOVES and not (producer.name.startswith("stablehlo.") and
                                                    O.is_elementwise(producer.name.split(".", 1)[1])):
        return False
    return all(constant_expression(v, depth - 1) for v in producer.operands)


def splat_value(value: Any) -> Optional[float]:
    """The number every element of `value` is, when it is a real float splat constant or a broadcast scalar one, seen
    through converts between real float types (rounded to each, as XLA folds a convert of a constant: jnp.clip's
    f32 bounds of a bf16 array) and, as XLA sees it once it has inlined the calls, through the parameters of a
    function that every call passes the same such constant (jnp.clip's bounds in jax's own jitted functions)."""
    if not real_float_type(value.type):
        return None
    producer = producer_of(value)
    sign = 1.0
    converts: List[str] = []  # the element types converted to, outermost first
    while producer is not None and (producer.name in ("stablehlo.broadcast_in_dim", "stablehlo.negate") or (
            producer.name == "stablehlo.convert" and real_float_type(producer.operands[0].type)) or (
            producer.name == "stablehlo.scatter" and drops_its_window(producer))):
        sign = -sign if producer.name == "stablehlo.negate" else sign  # XLA folds the negation of a constant
        if producer.name == "stablehlo.convert":
            converts.append(str(ir.RankedTensorType(producer.results[0].type).element_type))
        value = producer.operands[0]
        producer = producer_of(value)
    if producer is not None and producer.name in O.DOTS + ("stablehlo.reduce",) and \
            math.prod(ir.RankedTensorType(producer.operands[0].type).shape) == 0:
        # XLA's simplifier makes a dot with nothing to contract a broadcast zero, and a reduce of no elements a
        # broadcast of its initial value (jnp.matmul of f32[5, 0] and f32[0, 40] + x is x, denormals kept: fuzz
        # seed 20286212 #2406)
        if producer.name in O.DOTS:
            return 0.0 if not converts else None
        if len(producer.operands) != 2 or converts or sign < 0:
            return None
        return splat_value(producer.operands[1])
    if producer is None:
        number = CALLS.constants.get(parameter_of(value)) if getattr(CALLS, "constants", None) else None
    elif producer.name != "stablehlo.constant" or (value_attr := constant_attr(producer)) is None \
            or not A.is_a(ir.DenseFPElementsAttr, value_attr) or not ir.DenseElementsAttr(value_attr).is_splat:
        return None
    else:
        number = float(ir.FloatAttr(ir.DenseElementsAttr(value_attr).get_splat_value()).value)
    if number is None:
        return None
    for element in reversed(converts):  # innermost first; the sign flips exactly in every type
        number = float(np.asarray(number).astype(T.numpy_dtype(T.dtypes()[element][1]))) if element in T.dtypes() \
            else number
    return sign * number


# While a module is translated (_Translator.program): the constants each function's parameters receive from every
# call of it ((function, parameter number) -> the number) and the module's functions by name.
CALLS = threading.local()


# XLA's simplifier rewrites pow(A, c) for these constants (HandlePower) before any rule of an op that reads it; a
# half is LLVM's pow simplification, in XLA:CPU's code (simplifier.pow_by_constant).
POWERS_XLA_FOLDS = (0.0, 1.0, 2.0, 3.0, -1.0)


POWERS_REWRITTEN = POWERS_XLA_FOLDS + (0.5,)


def real_float_type(mlir_type: Any) -> bool:
    return A.is_a(ir.RankedTensorType, mlir_type) and \
        str(ir.RankedTensorType(mlir_type).element_type) in ("f16", "bf16", "f32", "f64")


def parameter_of(value: Any) -> Optional[Tuple[str, int]]:
    """(function name, parameter number) for a parameter of a function (an argument of its entry block); else None."""
    block = value.owner
    if not isinstance(block, ir.Block):
        return None
    parent = block.owner
    parent = getattr(parent, "operation", parent)
    if parent is None or parent.name != "func.func" or "sym_name" not in A.named(parent.attributes):
        return None
    return A.string(parent.attributes["sym_name"]), ir.BlockArgument(value).arg_number


def nested_operations(operation: Any) -> Iterator[Any]:
    """Every operation inside ``operation``'s regions, at any depth, in program order (an op before its regions')."""
    for region in operation.regions:
        for block in region.blocks:
            for inner in block.operations:
                inner = getattr(inner, "operation", inner)
                yield inner
                yield from nested_operations(inner)


def call_constants(funcs: Dict[str, Any]) -> Tuple[Dict[Tuple[str, int], float], Dict[Tuple[str, int], Any]]:
    """For the private functions of a module, the parameters that every func.call of the function passes the same
    splat constant (a float of splat_value's kind): (function, parameter number) -> the number; and those that
    every call passes the same value (XLA sees that value once it has inlined the calls) -> the value."""
    passed: Dict[Tuple[str, int], Optional[float]] = {}
    values: Dict[Tuple[str, int], Any] = {}
    for func in funcs.values():
        for inner in nested_operations(func):
            if inner.name == "func.call":
                callee = ir.FlatSymbolRefAttr(inner.attributes["callee"]).value
                for number, operand in enumerate(inner.operands):
                    value = splat_value(operand)
                    key = (callee, number)
                    if key in passed and passed[key] != value:
                        value = None
                    passed[key] = value
                    earlier = values.get(key, operand)
                    values[key] = operand if earlier is not None and operand == earlier else None
    public = {name for name, func in funcs.items()
              if "sym_visibility" not in A.named(func.attributes)
                 or A.string(func.attributes["sym_visibility"]) != "private"}
    return ({key: value for key, value in passed.items() if value is not None and key[0] not in public},
            {key: value for key, value in values.items() if value is not None and key[0] not in public})


def passed_in(value: Any) -> Optional[Any]:
    """The value every call passes a private function's parameter `value`, or None (not a parameter, or not one
    value)."""
    return CALLS.passed.get(parameter_of(value)) if getattr(CALLS, "passed", None) else None


MIN_MAX = {"stablehlo.minimum": "stablehlo.maximum", "stablehlo.maximum": "stablehlo.minimum"}


F32_TINY = 1.1754943508222875e-38  # the smallest normal f32


# Ops with a per-element scalar body the emulator interprets (calls in them are inlined), and those of them whose
# c64 operands are split into f32 parts when the body is not a single op the emulator runs on pairs.
# Attributes of a gather or scatter with batching dimensions (rules/gather_scatter.py rewrites them into index columns).
BATCHING = {"operand_batching_dims": 0, "start_indices_batching_dims": 0, "input_batching_dims": 0,
             "scatter_indices_batching_dims": 0}


SCALAR_BODIES = ("reduce", "reduce_window", "sort", "scatter", "select_and_scatter", "all_reduce", "reduce_scatter")


def body_computation(op: Any, assign: bool) -> Optional[str]:
    """The op name when a single-result op's body is ``return op(arg0, arg1)`` for a reducer of the registry (either
    argument order: every reducer commutes); "assign" when ``assign`` and the body returns arg1 (a scatter's update)."""
    if len(op.results) != 1 or len(op.regions) != 1:
        return None
    block = op.regions[0].blocks[0]
    args = list(block.arguments)
    # copies and sharding annotations are the values they take (XLA's partitioner leaves a copy of every value of a
    # body that carried a sharding constraint of an explicit mesh)
    source: Dict[Any, Any] = {}
    body = []
    for inner in block.operations:
        inner = inner.operation
        if _is_identity(inner):
            source[inner.results[0]] = source.get(inner.operands[0], inner.operands[0])
        else:
            body.append(inner)
    if len(args) != 2 or not body or body[-1].name != "stablehlo.return" or len(body[-1].operands) != 1:
        return None
    returned = source.get(body[-1].operands[0], body[-1].operands[0])
    if len(body) == 1:
        return "assign" if assign and returned == args[1] else None
    if len(body) != 2:
        return None
    combine = body[0]
    name = combine.name.split(".", 1)[-1]
    operands = [source.get(v, v) for v in combine.operands]
    if (
        not combine.name.startswith("stablehlo.")
        or not O.is_reducer(name)
        or len(operands) != 2
        or not ({operands[0], operands[1]} == {args[0], args[1]} and operands[0] != operands[1])
        or returned != combine.results[0]
    ):
        return None
    return name


def _is_identity(op: Any) -> bool:
    """An op of one operand whose result is that operand's value: an HLO copy, or a sharding annotation."""
    return (op.name == "mhlo.copy" and len(op.operands) == 1) or is_sharding_annotation(op)


_SDY_ANNOTATIONS = ("sdy.sharding_constraint", "sdy.reshard")


_SHARDING_TARGETS = ("Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape")


def is_sharding_annotation(op: Any) -> bool:
    """A custom_call jax emits for jax.sharding / shard_map (@Sharding, @SPMDFullToShardShape, @SPMDShardToFullShape).
    Shardy's sharding_constraint and reshard are the same annotations. XLA's SPMD partitioner consumes them before a
    program of several partitions is walked; in one partition each is the identity on one array (the full and the
    shard shape of one partition have the same elements)."""
    if len(op.operands) != 1 or len(op.results) != 1:
        return False
    if op.name in _SDY_ANNOTATIONS:
        return True
    if op.name != "stablehlo.custom_call":
        return False
    attrs = A.named(op.attributes)
    return "call_target_name" in attrs and A.string(attrs["call_target_name"]) in _SHARDING_TARGETS

