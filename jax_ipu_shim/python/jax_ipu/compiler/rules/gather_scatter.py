"""Rules for gathers and scatters: XLA's simplifier on scatters, and batched indices as the emulator reads them.

- A scatter of one update window at constant indices out of bounds is its operand (XLA's simplifier drops it).
- A gather or scatter with batching dimensions (the current series' ``*_batching_dims``) gets explicit index
  columns instead (the same elements addressed, so the same values).
- A scatter into a splat of its combiner's identity that is then combined with another value (``x + scatter(0, ...)``)
  is the scatter onto that value, as XLA's simplifier rewrites it; where cpu rounds so, so does the ipu.
- A scatter of one window into a splat identity is a pad-and-select of the update (``scatter_into_identity``).
Each either keeps the elements' values or changes them exactly as XLA:CPU's rewritten program does (measured
against cpu: test_gather_scatter.py, the fuzz table)."""

from __future__ import annotations

import math
import struct
from typing import Any, Dict, List, Optional, Tuple

from jax_ipu import _jax

from .. import facts as F
from .. import rewrite as W
from ..program_format import Blob

# An elementwise op and the scatter combiner XLA's simplifier folds it into (_combined_scatter), and the identity
# of each combiner (what a scatter's operand must be filled with)
_SCATTER_COMBINES = {"stablehlo.add": "add", "stablehlo.multiply": "multiply", "stablehlo.maximum": "maximum",
                     "stablehlo.minimum": "minimum"}


_SCATTER_IDENTITIES = {"add": 0.0, "multiply": 1.0, "maximum": -math.inf, "minimum": math.inf}


def _combined_scatter(t: Any, op: Any) -> Optional[Tuple[Any, Any]]:
    """(the scatter, the other operand A) for A op scatter(identity, I, U, op), either side, where XLA's simplifier
    writes scatter(A, I, U, op), so that A is left as it is outside the updated windows (a denormal or a -0 A
    stays; x + segment_sum(u, ids)): f32 and f16 (bf16 ops are already between converts then), for a scatter of
    one update window with a sum or a product combiner, and with jaxlib 0.12 also a maximum or a minimum, at any
    indices (XLA makes it a dynamic-update-slice, whose A + DUS(0, U) => DUS(A, DS(A) + U)); with jaxlib 0.12 a
    sum's scatter of any number of windows that nothing else reads (HandleAdd's A + scatter(0, I, U) =>
    scatter(A, I, U)). Else None. Measured on cpu, both series, f32/f16/bf16, 1 and 2 windows, constant, dynamic
    and dropped indices, one and two readers; not jaxlib 0.4.13's maximum and minimum, where LLVM computes
    max(-inf, A) on the side XLA writes the scatter (reading a denormal A as 0)."""
    combiner = _SCATTER_COMBINES[op.name]
    current = _jax.is_current_series()
    if combiner in ("maximum", "minimum") and not current:
        return None
    for scatter, other in ((op.operands[1], op.operands[0]), (op.operands[0], op.operands[1])):
        scatter = F.unconverted(scatter)
        producer = F.producer_of(scatter)
        windows = F.scatter_windows(producer)
        if producer is None or windows is None or windows[0].get("computation") != combiner \
                or other.type != scatter.type:
            continue
        if F.splat_value(producer.operands[0]) != _SCATTER_IDENTITIES[combiner]:
            # jaxlib 0.12 also A + scatter(B, I, U, add) => scatter(A + B, I, U, add) for one update window
            # (f16: (x.at[i].add(u) + 16) rounds x + 16 first; fuzz seed 20270901 #9054)
            if current and combiner == "add" and windows[1] == 1:
                return producer, other
            continue
        if windows[1] == 1 or (current and combiner == "add" and len(list(scatter.uses)) == 1):
            return producer, other
    return None


def _scatter_onto(t: Any, entry: Dict[str, Any], scatter: Any, other: Any) -> List[Dict[str, Any]]:
    """scatter(A, I, U, op) for `entry`, A op scatter(identity, I, U, op) (_combined_scatter): the scatter
    translated again (its own update computation), onto A, at `entry`'s location and with its result."""
    translated = t.ids[scatter.results[0]]
    onto = t.entry(scatter)
    t.ids[scatter.results[0]] = translated  # the scatter itself stays what other readers read
    ops: List[Dict[str, Any]] = []
    base = t.use(other)
    if F.splat_value(scatter.operands[0]) != _SCATTER_IDENTITIES[onto["attrs"]["computation"]]:
        base = W.Rewrite(t, entry, ops).emit("add", [base, onto["operands"][0]])  # A + B, then the updates
    onto["operands"][0] = base
    onto["results"] = entry["results"]
    if "loc" in entry:
        onto["loc"] = entry["loc"]
    return ops + [onto]


def _scatter_into_identity(t: Any, entry: Dict[str, Any], op: Any) -> Optional[List[Dict[str, Any]]]:
    """A float scatter of one update window at constant indices, in bounds, into a splat of its combiner's identity
    (jnp.zeros(n).at[3].add(x), segment_sum with one constant segment id), as XLA:CPU computes it: its scatter
    expander's loop of one trip is unrolled, the combine with the identity is the update itself (XLA's A + 0 =>
    A; jaxlib 0.12 also max(-inf, A) => A) and the dynamic-update-slice of a broadcast constant a pad, so the
    update is placed as it is (a -0 or a denormal update is kept): a dynamic_update_slice of the update reshaped
    to its window. (jax 0.4.13 writes a negative index as a select XLA folds; the front end does not see through
    it.) Else None."""
    attrs = entry["attrs"]
    computation = attrs.get("computation", "")
    identity = _SCATTER_IDENTITIES.get(computation)
    if computation in ("maximum", "minimum") and not _jax.is_current_series():
        identity = None  # jaxlib 0.4.13 computes max(-inf, u) with maxps, reading a denormal as 0
    if identity is None or not t.real_float(op) or F.splat_value(op.operands[0]) != identity:
        return None
    placed = F.scatter_window(op)
    if placed is None:
        return None
    start, window, operand_shape = placed
    if any(s < 0 or s + w > n for s, w, n in zip(start, window, operand_shape)):
        return None  # dropped: left to the scatter
    rewrite = W.Rewrite(t, entry)
    update = rewrite.emit("reshape", [entry["operands"][2]], shape=window)
    starts = [rewrite.emit("constant", [], "i32", shape=[], attrs={"value": Blob(struct.pack("<i", s)),
                                                                     "splat": False}) for s in start]
    rewrite.emit("dynamic_update_slice", [entry["operands"][0], update] + starts, result=entry["results"][0])
    return rewrite.ops


def _unbatch_indices(t: Any, entry: Dict[str, Any], mlir_op: Any) -> List[Dict[str, Any]]:
    """A gather or scatter with batching dimensions (newer StableHLO) as one without: batching dimension k of
    the operand is indexed by the position along batching dimension k of the indices, so each becomes one more
    index column, an iota along that dimension, and a collapsed (inserted) dimension. The emulator then sees
    the gather or scatter it has always run."""
    attrs = dict(entry["attrs"])
    gather = entry["op"] == "gather"
    operand_dims = attrs.pop("operand_batching_dims" if gather else "input_batching_dims", [])
    index_dims = attrs.pop("start_indices_batching_dims" if gather else "scatter_indices_batching_dims", [])
    collapsed, to_operand = ("collapsed_slice_dims", "start_index_map") if gather else \
        ("inserted_window_dims", "scatter_dims_to_operand_dims")
    indices_id = entry["operands"][1]
    dtype, dims = t.tensor(mlir_op.operands[1])
    shape = list(dims)
    ops: List[Dict[str, Any]] = []
    vector_dim = attrs["index_vector_dim"]
    if vector_dim == len(shape):  # an implicit trailing index vector of one: make it explicit
        shape = shape + [1]
        reshaped = t.fresh(dtype, shape)
        ops.append(W.derived(entry, "reshape", [indices_id], [reshaped]))
        indices_id = reshaped["id"]
    columns = [indices_id]
    for dim in index_dims:
        column_shape = list(shape)
        column_shape[vector_dim] = 1
        column = t.fresh(dtype, column_shape)
        ops.append(W.derived(entry, "iota", [], [column], {"iota_dimension": dim}))
        columns.append(column["id"])
    shape = list(shape)
    shape[vector_dim] += len(index_dims)
    joined = t.fresh(dtype, shape)
    ops.append(W.derived(entry, "concatenate", columns, [joined], {"dimension": vector_dim}))
    attrs[collapsed] = sorted(attrs[collapsed] + operand_dims)
    attrs[to_operand] = attrs[to_operand] + operand_dims
    operands = list(entry["operands"])
    operands[1] = joined["id"]
    ops.append(dict(entry, operands=operands, attrs=attrs))
    return ops


def scatter_out_of_bounds(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "stablehlo.scatter" and F.drops_its_window(op)):
        return False
    # XLA's simplifier: a scatter of one update window at constant indices out of bounds is its operand
    # (so x + segment_sum(u, [-2]) is x + 0, which is x: a denormal or bf16 -0 x stays); the rules see the operand
    # there as XLA's do (a / (3 / v).at[1].mul(u, mode='drop') divides by a quotient: fuzz seed 20286212 #2418)
    t.ids[op.results[0]] = t.use(op.operands[0])
    F.CALLS.aliases[op.results[0]] = op.operands[0]
    return True


def gather_scatter(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if op.name not in ("stablehlo.gather", "stablehlo.scatter"):
        return False
    entry = t.entry(op)
    if op.name == "stablehlo.scatter" and (placed := _scatter_into_identity(t, entry, op)) is not None:
        body.extend(placed)
    else:
        body.extend(_unbatch_indices(t, entry, op) if F.BATCHING.keys() & entry["attrs"].keys()
                    else [entry])
    return True


def combined_with_scatter(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name in _SCATTER_COMBINES and not scalar_body and t.simplified_float(op)
            and (into := _combined_scatter(t, op)) is not None):
        return False
    body.extend(_scatter_onto(t, t.entry(op), *into))
    return True
