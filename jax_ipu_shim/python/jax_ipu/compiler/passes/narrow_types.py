"""Narrow element types computed in a wider one, on the functions of the program document: XLA's FloatNormalization
for the fp8 types, and LLVM's promotion of the sub-byte integers.

**fp8.** The IPU's fp8 (Poplar's quarter type, on chips that have it: ipu/dtype.h) has no arithmetic: it is stored,
moved, converted, and read by the AMP as a matmul's operands. XLA:CPU has none either: its FloatNormalization pass
computes every other op on an fp8 value in f16 (``FloatSupport(F8E4M3FN, F16)`` and the like in cpu_compiler.cc),
converting the operands up and the result back. This pass does the same, so that the ipu computes what cpu computes:
- ops that only move data, converts, bitcasts, constants, calls, loops, branches and collectives that move keep
  their fp8 values (``_KEPT``), and so do a dot_general's operands (the AMP's; its fp8 result is computed in f16);
- every other op reads its fp8 operands converted to f16 (exact) and computes in f16; an fp8 result is its f16
  result converted back (one rounding, as XLA's). An op with a computation (reduce, sort, scatter, windows) runs
  it in f16 with each fp8 result of it rounded to fp8 at once, as XLA normalises the computation op by op: an fp8
  sum accumulates in fp8 (measured: cpu's sum of an e5m2 row is the sequential fp8 one).
One op in f16 then one rounding to fp8 gives the fp8 op's correctly rounded result for +, -, *, / and sqrt (f16
holds more than twice an fp8's precision), which is what cpu gives: measured over every pair of values of each
format, both series.

jaxlib 0.4.13 converts a value of any type but f16, bf16 and fp8 to fp8 through f16 (two roundings; measured over
a dense sample with every tie, and integers): ``_through_f16`` writes that chain.

**Sub-byte integers** (int4, uint4, int2, uint2: held one per byte, ipu/dtype.h). The IPU has no such type, and
XLA:CPU has no arithmetic on them either: LLVM legalises its i4 and i2 arithmetic by promoting it to i8 and keeping
the low bits. This pass does the same: every op but those that move data or convert (``_KEPT_INTEGER``) reads its
operands converted to i8 (signed) or u8 (unsigned), which is exact, and gives its narrow result as the 8-bit result
converted back (its low bits: two's complement wrap, the narrow type's own arithmetic for add, subtract, multiply,
negate, the bit ops, shifts left, divide and remainder, a computation's ops each wrapped at once as fp8's are
rounded). Where the 8-bit op would read bits the narrow type does not have, the operand is widened through its twin
of the other signedness (``_THROUGH_TWIN``): a logical shift right of a signed value reads its bits, and an
arithmetic shift right of an unsigned one takes its top bit for the sign; count_leading_zeros counts the byte's
leading zeros less the bits the narrow type lacks (a population count: see ``_THROUGH_TWIN_OF``). A sub-byte index
is widened (``_INDICES_FROM``). Measured against cpu over every pair of values of each type
(tests/conformance/test_sub_byte.py), jaxlib 0.12 (jax 0.4.13 cannot lower an int4 constant on any backend)."""

from __future__ import annotations

import functools
from typing import Any, Callable, Dict, List, Tuple

import numpy as np

from jax_ipu import _jax

from .. import rewrite as W
from .. import types as T
from ..program_format import Blob
from . import id_counter

Values = Dict[int, Tuple[str, List[int]]]


@functools.lru_cache(maxsize=None)
def fp8_types() -> Dict[str, str]:
    """The program's fp8 dtypes and their numpy names, from the emulator's dtype table."""
    return {name: np_name for name, _, np_name in T.ipu_dtypes() if np_name.startswith("float8_")}


@functools.lru_cache(maxsize=None)
def wide_types() -> Dict[str, str]:
    """Each narrow type and the type its ops compute in: f16 for fp8, i8 or u8 for the sub-byte integers."""
    wide = {name: "f16" for name in fp8_types()}
    wide.update({name: ("u8" if T.dtype_kind(name) == "u" else "i8") for name in T.sub_byte_bits()})
    return wide


# Ops whose fp8 operands and results stay fp8: they move bytes, convert, or hand values on (control flow, whose
# regions are normalised op by op). The emulator could move fp8 through concatenate, pad, gather, reverse and
# dynamic_update_slice too (the registry's MOVED), but XLA:CPU computes those through f16, which a NaN's payload
# shows (e5m2's 0x7d comes out 0x7f): they are normalised as it does.
_KEPT = frozenset((
    "convert", "bitcast_convert", "constant", "broadcast_in_dim", "reshape", "transpose", "slice", "dynamic_slice",
    "all_gather", "collective_permute", "all_to_all", "call", "while", "case", "optimization_barrier", "custom_call",
    "infeed", "outfeed",
))
# A sub-byte integer moves through every op the emulator moves it with (the registry's MOVED): through i8 each would
# give the same bits.
_KEPT_INTEGER = _KEPT | {"concatenate", "pad", "gather", "reverse", "dynamic_update_slice"}
# ... but not as indices, which the emulator reads as integers: those operands (from this position on) are widened.
_INDICES_FROM = {"dynamic_slice": 1, "dynamic_update_slice": 2, "gather": 1}
_CONTROL = frozenset(("call", "while", "case", "optimization_barrier"))
# Ops on a sub-byte integer that read bits the 8-bit value of it does not hold: their operands are widened through the
# twin type of the other signedness first ("u": a signed value's bits; "i": an unsigned value's top bit as its sign).
# XLA:CPU counts an int4's bits in its sign-extended byte (popcnt(-8) is 5) and an int2's in its own two bits
# (popcnt(-2) is 1): measured, jaxlib 0.12.
_THROUGH_TWIN = {"shift_right_logical": "u", "count_leading_zeros": "u", "shift_right_arithmetic": "i"}
_THROUGH_TWIN_OF = {("popcnt", "i2"): "u"}


def _twin_kind(op: str, dtype: str) -> str:
    """The signedness ("i", "u") an op on a sub-byte ``dtype`` reads it with, if not its own; "" for its own."""
    kind = _THROUGH_TWIN_OF.get((op, dtype)) or _THROUGH_TWIN.get(op, "")
    return kind if kind and dtype[0] != kind else ""


_DIRECT = ("f16", "bf16")  # the sources jaxlib 0.4.13 converts to fp8 directly (and the fp8 types)


def _through_f16() -> bool:
    return not _jax.is_current_series()


def run(function: Dict[str, Any]) -> None:
    """Computes ``function``'s narrow values in their wide types, in place (its regions included)."""
    values: Values = {}
    _collect(function, values)
    if any(dtype in wide_types() for dtype, _ in values.values()):
        _block(function, values, id_counter(function))


def _collect(block: Dict[str, Any], values: Values) -> None:
    """The dtype and shape of every value of ``block`` and its regions (ids are unique in a function)."""
    for p in block.get("params", ()):
        values[p["id"]] = (p["dtype"], p["shape"])
    for entry in block["body"]:
        for r in entry["results"]:
            values[r["id"]] = (r["dtype"], r["shape"])
        for region in entry.get("regions", ()):
            _collect(region, values)


def _narrow(values: Values, value: int) -> bool:
    return value in values and values[value][0] in wide_types()


def _twin(dtype: str, kind: str) -> str:
    """The sub-byte (or 8-bit) integer type of ``dtype``'s width with signedness ``kind`` ("i" or "u")."""
    name = dtype.lstrip("iu")
    return ("u" if kind == "u" else "i") + name


def _convert(entry: Dict[str, Any], source: int, result: Dict[str, Any]) -> Dict[str, Any]:
    """A convert the pass writes for ``entry`` (at its source location)."""
    return W.derived(entry, "convert", [source], [result])


def _computed_wide(r: Dict[str, Any], wide: str, values: Values, fresh: Callable[[], int]) -> Dict[str, Any]:
    """Gives the op's narrow result ``r`` a fresh id in ``wide`` (the op computes in it); returns r's declaration as
    it was, for the convert that gives the program its value."""
    declared = dict(r)
    r["id"], r["dtype"] = fresh(), wide
    values[r["id"]] = (wide, r["shape"])
    return declared


def _wide_constant(raw: bytes, narrow: str) -> bytes:
    """A narrow constant's values as the bytes of its wide type (exact)."""
    numpy_dtypes = T.numpy_dtypes_by_name()
    values = np.frombuffer(raw, dtype=np.uint8).view(numpy_dtypes[narrow])
    return values.astype(numpy_dtypes[wide_types()[narrow]]).tobytes()


def _rounded_region(region: Dict[str, Any], values: Values, fresh: Callable[[], int]) -> None:
    """A computation in the wide types that rounds (or wraps) each narrow result to its type at once (a round trip
    wide -> narrow -> wide after the op), as XLA:CPU computes the normalised ops of an fp8 reduce's computation one by
    one: an fp8 sum accumulates in fp8. A constant's bytes become the wide bytes of its values (exact)."""
    for p in region.get("params", ()):
        if p["dtype"] in wide_types():
            p["dtype"] = wide_types()[p["dtype"]]
            values[p["id"]] = (p["dtype"], p["shape"])
    body: List[Dict[str, Any]] = []
    for entry in region["body"]:
        for inner in entry.get("regions", ()):
            _rounded_region(inner, values, fresh)
        body.append(entry)
        for r in entry["results"]:
            narrow = r["dtype"]
            if narrow not in wide_types():
                continue
            wide = wide_types()[narrow]
            if entry["op"] == "constant":
                entry["attrs"]["value"] = Blob(_wide_constant(bytes(entry["attrs"]["value"]), narrow))
                r["dtype"] = wide
                values[r["id"]] = (wide, r["shape"])
                continue
            final = dict(_computed_wide(r, wide, values, fresh), dtype=wide)
            rounded = {"id": fresh(), "dtype": narrow, "shape": list(r["shape"])}
            body.append(_convert(entry, r["id"], rounded))
            body.append(_convert(entry, rounded["id"], final))
            for v in (rounded, final):
                values[v["id"]] = (v["dtype"], v["shape"])
    region["body"] = body


def _computation(entry: Dict[str, Any], dtype: str, fresh: Callable[[], int]) -> Dict[str, Any]:
    """The region of an op that names its computation only ("computation": "add", written by a rule)."""
    a, b, c = fresh(), fresh(), fresh()
    scalar = {"dtype": dtype, "shape": []}
    op = W.derived(entry, entry["attrs"]["computation"], [a, b], [dict(scalar, id=c)])
    return {"params": [dict(scalar, id=a), dict(scalar, id=b)], "body": [op], "results": [c]}


def _narrow_result_type(entry: Dict[str, Any]) -> str:
    """The narrow type of an op's first narrow result."""
    return next(r["dtype"] for r in entry["results"] if r["dtype"] in wide_types())


def _less_bits_lacking(entry: Dict[str, Any], counted: int, narrow: str, body: List[Dict[str, Any]], values: Values,
                       fresh: Callable[[], int]) -> int:
    """``counted`` (a byte's leading zeros) less the bits the sub-byte type ``narrow`` lacks: its own leading zeros."""
    dtype, shape = values[counted]
    lacking: Dict[str, Any] = {"id": fresh(), "dtype": dtype, "shape": []}
    splat: Dict[str, Any] = {"id": fresh(), "dtype": dtype, "shape": list(shape)}
    less: Dict[str, Any] = {"id": fresh(), "dtype": dtype, "shape": list(shape)}
    body.append(W.derived(entry, "constant", [], [lacking],
                          {"value": Blob(bytes([8 - T.sub_byte_bits()[narrow]])), "splat": False}))
    body.append(W.derived(entry, "broadcast_in_dim", [lacking["id"]], [splat], {"broadcast_dimensions": []}))
    body.append(W.derived(entry, "subtract", [counted, splat["id"]], [less]))
    for v in (lacking, splat, less):
        values[v["id"]] = (v["dtype"], v["shape"])
    return int(less["id"])


def _block(block: Dict[str, Any], values: Values, fresh: Callable[[], int]) -> None:
    body: List[Dict[str, Any]] = []

    def converted(entry: Dict[str, Any], value: int, dtype: str) -> int:
        """``value`` converted to ``dtype`` for ``entry`` (written before it)."""
        shape = values[value][1]
        new = fresh()
        values[new] = (dtype, shape)
        body.append(_convert(entry, value, {"id": new, "dtype": dtype, "shape": list(shape)}))
        return new

    def widened(entry: Dict[str, Any], value: int) -> int:
        """``value`` in its wide type (through its twin type first where the op reads bits the wide value lacks)."""
        dtype = values[value][0]
        twin = _twin_kind(entry["op"], dtype) if dtype in T.sub_byte_bits() else ""
        if twin:
            value = converted(entry, value, _twin(dtype, twin))  # the same bits, read with the other signedness
            dtype = values[value][0]
        return converted(entry, value, wide_types()[dtype])

    for entry in block["body"]:
        name = entry["op"]
        if name in _CONTROL:
            for region in entry.get("regions", ()):
                _block(region, values, fresh)
        narrow_results = [r["dtype"] for r in entry["results"] if r["dtype"] in wide_types()]
        narrow_operands = [values[i][0] for i in entry["operands"] if _narrow(values, i)]
        integers = any(d in T.sub_byte_bits() for d in narrow_results + narrow_operands)
        if name == "convert" and _through_f16() and narrow_results and narrow_results[0] in fp8_types() and \
                values.get(entry["operands"][0], ("",))[0] not in _DIRECT + tuple(fp8_types()):
            entry["operands"] = [converted(entry, entry["operands"][0], "f16")]
        if name == "bitcast_convert" and integers and len(narrow_operands) == 1 and narrow_results and \
                narrow_operands[0].lstrip("iu") == narrow_results[0].lstrip("iu"):
            entry["op"], entry["mlir"] = "convert", "stablehlo.convert"  # int4 <-> uint4: the same bits
        if name in _INDICES_FROM and integers:
            first = _INDICES_FROM[name]
            entry["operands"] = entry["operands"][:first] + [
                widened(entry, i) if _narrow(values, i) else i for i in entry["operands"][first:]]
        if (name in (_KEPT_INTEGER if integers else _KEPT)) or \
                (name == "dot_general" and not integers and not narrow_results) or \
                not (narrow_results or narrow_operands):
            body.append(entry)
            continue
        if name != "dot_general" or integers:  # the AMP reads fp8 operands
            entry["operands"] = [widened(entry, i) if _narrow(values, i) else i for i in entry["operands"]]
            if "computation" in entry.get("attrs", {}):  # the emulator's native combiner would not round or wrap
                if not entry.get("regions"):
                    entry["regions"] = [_computation(entry, _narrow_result_type(entry), fresh)]
                del entry["attrs"]["computation"]
            for region in entry.get("regions", ()):
                _rounded_region(region, values, fresh)
        body.append(entry)
        for r in entry["results"]:
            if r["dtype"] not in wide_types():
                continue
            narrow = r["dtype"]
            through_twin = narrow in T.sub_byte_bits() and (name in _THROUGH_TWIN or (name, narrow) in _THROUGH_TWIN_OF)
            # the op computes in its operands' wide type (through the twin: u8 or i8), else in the result's
            wide = values[entry["operands"][0]][0] if through_twin else wide_types()[narrow]
            declared = _computed_wide(r, wide, values, fresh)
            value = r["id"]
            if name == "count_leading_zeros" and narrow in T.sub_byte_bits():
                value = _less_bits_lacking(entry, value, narrow, body, values, fresh)
            body.append(_convert(entry, value, declared))
    block["body"] = body
