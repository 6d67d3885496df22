"""XLA's excess precision for bf16: an op's f32 value, not yet rounded to bf16, where the program converts it to f32.

XLA:CPU computes a bf16 add, multiply, exp... in f32 and rounds the result to bf16. Where the next op is a convert
to f32 (``(a * b).astype(jnp.float32)``, the upcast jnp puts before a sum or a mean, softmax's sum of its exps, a
mixed-precision loss), the round trip f32 -> bf16 -> f32 is dropped (``xla_allow_excess_precision``, on by
default), so the convert reads the f32 value. Between two bf16 ops the rounding stays, and so it does wherever
something stands between the op and the convert: a move, a select, a maximum, a negation, a loop's carry, a branch
(jaxlib 0.12 only: a reshape read by reductions alone is not in the way, as XLA moves it past the convert). Measured
on both series, every element of bf16[8192] against cpu, for each op of ``_WIDENED`` read by a convert (the f32
value) and by add, multiply, divide, sin, exp, tanh and sqrt (rounded); also with other readers (they read the
rounded value) and inside a loop's body. f16 keeps its rounding on the hosts measured (an AVX512-FP16 core computes
f16 natively), and so does a user's own f32 -> bf16 -> f32 round trip, on cpu as here.

In place of such a convert the rule writes the op itself, on its operands converted to f32 (bf16 to f32 is exact):
the arithmetic cpu does, rounded once, to f32. The bf16 op stays for its other readers; one left with none is
removed by the dead-code pass. Where a rule has already computed the bf16 op in f32 and rounded it once (jaxlib
0.12's bf16 ``a / broadcast(b)``, ``a ** 0.5``), the convert reads that f32 value. Only the program's own converts
are read this way: a convert the front end writes keeps its rounding. The converts XLA itself puts before an op it
computes in f32 read the same way: the expansions of erf, erfc, cosh, sinh, lgamma, digamma and erf_inv
(upcast_operand) and jaxlib 0.4.13's dots with an f32 result (dot_read_in_f32); and XLA inlines calls and composites
first, as the front end does (structure.inlined_call), so a convert after a call (jax 0.4.13's sigmoid is a call of
1 / (1 + exp(-x))) finds the op in its block. Producers that XLA expands into several ops (sinh, asinh, erf_inv,
lgamma, jaxlib 0.4.13's erf) round their last step and are not in ``_WIDENED``."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from jax_ipu import _jax

from .. import ops as O
from .. import rewrite as W

_WIDENED = ("add", "subtract", "multiply", "divide", "exponential", "exponential_minus_one", "log", "log_plus_one",
            "sqrt", "rsqrt", "cbrt", "tanh", "sine", "cosine", "tan", "atan", "power", "atan2")
_WIDENED_CURRENT = _WIDENED + ("erf",)  # jaxlib 0.12 has an HLO erf; 0.4.13 expands it

# Ops XLA expands in f32 for a bf16 operand, converting it up first: that convert reads the operand's producer
# unrounded as any convert to f32 does (measured like the table above: erfc, cosh, lgamma, digamma and erf_inv of
# a * b or exp(a), both series; erf on jaxlib 0.4.13, where it is an expansion; jaxlib 0.12 sends most of them as
# composites, which structure.inlined_call inlines). jaxlib 0.4.13's sinh, expanded by the front end as XLA does
# (decompositions.py), reads its operand through unrounded() too.
_UPCAST = ("chlo.erf", "chlo.erfc", "chlo.cosh", "chlo.lgamma", "chlo.digamma", "chlo.erf_inv")
_UPCAST_CURRENT = ("chlo.erfc", "chlo.cosh", "chlo.lgamma", "chlo.digamma", "chlo.erf_inv")


def _widened_ops() -> Tuple[str, ...]:
    return _WIDENED_CURRENT if _jax.is_current_series() else _WIDENED


def converted_to_f32(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name == "stablehlo.convert" and not scalar_body and t.f32(op)):
        return False
    source = op.operands[0]
    wide = t.unrounded.get(source)
    if wide is not None and wide in _defined_in(t, body):
        t.ids[op.results[0]] = wide  # a rule's own rounding of an f32 value (in this block): the convert is that value
        return True
    reshape = None
    if _jax.is_current_series() and op.results[0].uses and all(
            _name(use.owner) == "stablehlo.reduce" for use in op.results[0].uses):
        reshape = _written(t, body, t.ids.get(source), ("reshape",))
    producer = _written(t, body, reshape["operands"][0] if reshape else t.ids.get(source), _widened_ops())
    if producer is None:
        return False
    entry = t.entry(op)
    out = entry["results"][0]
    ops = _widened(producer, entry, t, None if reshape else out)
    if reshape is not None:
        ops.append(dict(reshape, operands=[ops[-1]["results"][0]["id"]], results=[out]))
    body.extend(ops)
    return True


def _bf16(t: Any, value: Any) -> bool:
    return (t.type_of(value.type) or ("", []))[0] == "bf16"


def _f32(t: Any, value: Any) -> bool:
    return (t.type_of(value.type) or ("", []))[0] == "f32"


def upcast_operand(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name in (_UPCAST_CURRENT if _jax.is_current_series() else _UPCAST) and not scalar_body
            and t.bf16(op) and _written(t, body, t.ids.get(op.operands[0]), _widened_ops()) is not None):
        return False
    entry = t.entry(op)
    ops, wide = unrounded(t, body, entry["operands"][0], entry)  # type: ignore[misc]
    result = t.fresh("f32", entry["results"][0]["shape"])
    ops.append(dict(entry, operands=[wide], results=[result]))
    ops.append(W.derived(entry, "convert", [result["id"]], [entry["results"][0]]))
    body.extend(ops)
    return True


def dot_read_in_f32(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    """jaxlib 0.4.13's XLA:CPU converts a bf16 dot's operands to f32 where its result is f32
    (``preferred_element_type=jnp.float32``, or an f32 x bf16 dot): those converts read the operands' producers
    unrounded too (measured for dots of 1x8x1 to 128x64x128). jaxlib 0.12 does so only for small dots, which go to
    its own loops rather than a library: not modelled (the fuzz table lists it)."""
    if not (op.name in O.DOTS and not scalar_body and not _jax.is_current_series() and t.f32(op)
            and all(_bf16(t, v) or _f32(t, v) for v in op.operands)
            and any(_written(t, body, t.ids.get(v), _widened_ops()) is not None for v in op.operands)):
        return False
    entry = t.entry(op)
    ops, operands = [], []
    for operand, (dtype, shape) in zip(entry["operands"], (t.tensor(v) for v in op.operands)):
        wide = unrounded(t, body, operand, entry) if dtype == "bf16" else ([], operand)
        if wide is None:  # bf16 to f32 is exact: the dot's products are the same
            result = t.fresh("f32", list(shape))
            ops.append(W.derived(entry, "convert", [operand], [result]))
            wide = ([], result["id"])
        ops.extend(wide[0])
        operands.append(wide[1])
    body.extend(ops + [dict(entry, operands=operands)])
    return True


def unrounded(t: Any, body: List[Dict[str, Any]], value: int,
              reader: Dict[str, Any]) -> Optional[Tuple[List[Dict[str, Any]], int]]:
    """(ops to write, the id of their f32 result) for the bf16 `value` as XLA's convert to f32 reads it: its producer's
    unrounded value where that is one of the ops above in this block; else None. `reader`: where to locate them."""
    producer = _written(t, body, value, _widened_ops())
    if producer is None:
        return None
    ops = _widened(producer, reader, t, None)
    return ops, ops[-1]["results"][0]["id"]


def _name(op: Any) -> str:
    """An op's name, or "" for a block (the owner of a block argument)."""
    return getattr(getattr(op, "operation", op), "name", "")


def _written(t: Any, body: List[Dict[str, Any]], value: Optional[int], ops: Any) -> Optional[Dict[str, Any]]:
    """The op of this block that defines `value`, if it is one of `ops` with a single bf16 result."""
    if value in t.rounded_at_loop_edge:  # (a removed loop's result or, inside its body, its parameter)
        return None
    entry = _defined_in(t, body).get(value) if value is not None else None  # None: a parameter, a capture
    if entry is None or entry["op"] not in ops or len(entry["results"]) != 1:
        return None
    return entry if entry["results"][0]["dtype"] == "bf16" else None


def _defined_in(t: Any, body: List[Dict[str, Any]]) -> Dict[int, Dict[str, Any]]:
    """id -> the entry of `body` that defines it, brought up to date with what the walk has appended since (a block's
    list only grows while it is written): one pass over each block, however many converts read it."""
    held = t.written_index.get(id(body))
    if held is None or held[0] is not body:
        held = t.written_index[id(body)] = [body, 0, {}]
    for entry in body[held[1]:]:
        held[2].update((r["id"], entry) for r in entry["results"])
    held[1] = len(body)
    return held[2]


def _widened(producer: Dict[str, Any], reader: Dict[str, Any], t: Any,
             out: Optional[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The producer's op on its operands converted to f32, its result `out` (or a fresh f32 value), at the source
    location of the reader that reads it in f32."""
    shape = producer["results"][0]["shape"]
    ops, operands = [], []
    for operand in producer["operands"]:  # an elementwise op's operands have its shape and type
        result = t.fresh("f32", shape)
        ops.append(W.derived(reader, "convert", [operand], [result]))
        operands.append(result["id"])
    wide = dict(producer, operands=operands, results=[out or t.fresh("f32", shape)])
    if "loc" in reader:
        wide["loc"] = reader["loc"]
    return ops + [wide]
