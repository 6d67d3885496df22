"""XLA's FloatNormalization for the fp8 types, on the functions of the program document.

The IPU's fp8 (Poplar's quarter type, on chips that have it: ipu/dtype.h) has no arithmetic: it is stored, moved,
converted, and read by the AMP as a matmul's operands. XLA:CPU has none either: its FloatNormalization pass computes
every other op on an fp8 value in f16 (``FloatSupport(F8E4M3FN, F16)`` and the like in cpu_compiler.cc), converting
the operands up and the result back. This pass does the same, so that the ipu computes what cpu computes:
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
a dense sample with every tie, and integers): ``_through_f16`` writes that chain."""

from __future__ import annotations

import functools
from typing import Any, Callable, Dict, List, Tuple

import numpy as np

from jax_ipu import _jax

from .. import rewrite as W
from .. import types as T
from ..program_format import Blob
from . import id_counter

WIDE = "f16"


@functools.lru_cache(maxsize=None)
def fp8_types() -> Dict[str, str]:
    """The program's fp8 dtypes and their numpy names, from the emulator's dtype table."""
    return {name: np_name for name, _, np_name in T.ipu_dtypes() if np_name.startswith("float8_")}


# Ops whose fp8 operands and results stay fp8: they move bytes, convert, or hand values on (control flow, whose
# regions are normalised op by op). The emulator could move fp8 through concatenate, pad, gather, reverse and
# dynamic_update_slice too (the registry's MOVED), but XLA:CPU computes those through f16, which a NaN's payload
# shows (e5m2's 0x7d comes out 0x7f): they are normalised as it does.
_KEPT = frozenset((
    "convert", "bitcast_convert", "constant", "broadcast_in_dim", "reshape", "transpose", "slice", "dynamic_slice",
    "all_gather", "collective_permute", "all_to_all", "call", "while", "case", "optimization_barrier", "custom_call",
    "infeed", "outfeed",
))
_CONTROL = frozenset(("call", "while", "case", "optimization_barrier"))


_DIRECT = ("f16", "bf16")  # the sources jaxlib 0.4.13 converts to fp8 directly (and the fp8 types)


def _through_f16() -> bool:
    return not _jax.is_current_series()


def run(function: Dict[str, Any]) -> None:
    """Normalises ``function`` in place (its regions included)."""
    values: Dict[int, Tuple[str, List[int]]] = {}
    _collect(function, values)
    if any(dtype in fp8_types() for dtype, _ in values.values()):
        _block(function, values, id_counter(function))


def _collect(block: Dict[str, Any], values: Dict[int, Tuple[str, List[int]]]) -> None:
    """The dtype and shape of every value of ``block`` and its regions (ids are unique in a function)."""
    for p in block.get("params", ()):
        values[p["id"]] = (p["dtype"], p["shape"])
    for entry in block["body"]:
        for r in entry["results"]:
            values[r["id"]] = (r["dtype"], r["shape"])
        for region in entry.get("regions", ()):
            _collect(region, values)


def _fp8(values: Dict[int, Tuple[str, List[int]]], value: int) -> bool:
    return value in values and values[value][0] in fp8_types()


def _convert(entry: Dict[str, Any], source: int, result: Dict[str, Any]) -> Dict[str, Any]:
    """A convert the pass writes for ``entry`` (at its source location)."""
    return W.derived(entry, "convert", [source], [result])


def _computed_wide(r: Dict[str, Any], values: Dict[int, Tuple[str, List[int]]], fresh: Callable[[], int]
                   ) -> Dict[str, Any]:
    """Gives the op's fp8 result ``r`` a fresh id in f16 (the op computes in f16); returns r's declaration as it
    was, for the convert that gives the program its value."""
    declared = dict(r)
    r["id"], r["dtype"] = fresh(), WIDE
    values[r["id"]] = (WIDE, r["shape"])
    return declared


def _rounded_region(region: Dict[str, Any], values: Dict[int, Tuple[str, List[int]]],
                    fresh: Callable[[], int]) -> None:
    """A computation in f16 that rounds each fp8 result to its type at once (a round trip f16 -> fp8 -> f16 after
    the op), as XLA:CPU computes the normalised ops of an fp8 reduce's computation one by one: a sum accumulates in
    fp8. A constant's bytes become the f16 bytes of its values (exact)."""
    for p in region.get("params", ()):
        if p["dtype"] in fp8_types():
            p["dtype"] = WIDE
            values[p["id"]] = (WIDE, p["shape"])
    body: List[Dict[str, Any]] = []
    for entry in region["body"]:
        for inner in entry.get("regions", ()):
            _rounded_region(inner, values, fresh)
        body.append(entry)
        for r in entry["results"]:
            narrow = r["dtype"]
            if narrow not in fp8_types():
                continue
            if entry["op"] == "constant":
                raw = np.frombuffer(bytes(entry["attrs"]["value"]), dtype=np.uint8)
                value = raw.view(T.numpy_dtype(fp8_types()[narrow])).astype(np.float16)
                entry["attrs"]["value"] = Blob(value.tobytes())
                r["dtype"] = WIDE
                values[r["id"]] = (WIDE, r["shape"])
                continue
            final = dict(_computed_wide(r, values, fresh), dtype=WIDE)
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


def _fp8_result_type(entry: Dict[str, Any]) -> str:
    """The fp8 type of an op's first fp8 result."""
    return next(r["dtype"] for r in entry["results"] if r["dtype"] in fp8_types())


def _block(block: Dict[str, Any], values: Dict[int, Tuple[str, List[int]]], fresh: Callable[[], int]) -> None:
    body: List[Dict[str, Any]] = []

    def widened(entry: Dict[str, Any], value: int) -> int:
        """``value`` converted to f16 for ``entry`` (written before it)."""
        shape = values[value][1]
        wide = fresh()
        values[wide] = (WIDE, shape)
        body.append(_convert(entry, value, {"id": wide, "dtype": WIDE, "shape": list(shape)}))
        return wide

    for entry in block["body"]:
        name = entry["op"]
        if name in _CONTROL:
            for region in entry.get("regions", ()):
                _block(region, values, fresh)
        results_fp8 = any(r["dtype"] in fp8_types() for r in entry["results"])
        if name == "convert" and _through_f16() and results_fp8 and \
                values.get(entry["operands"][0], ("",))[0] not in _DIRECT + tuple(fp8_types()):
            entry["operands"] = [widened(entry, entry["operands"][0])]
        if name in _KEPT or (name == "dot_general" and not results_fp8) or \
                not (results_fp8 or any(_fp8(values, i) for i in entry["operands"])):
            body.append(entry)
            continue
        if name != "dot_general":  # the AMP reads fp8 operands
            entry["operands"] = [widened(entry, i) if _fp8(values, i) else i for i in entry["operands"]]
            if "computation" in entry.get("attrs", {}):  # the emulator's native combiner would not round to fp8
                if not entry.get("regions"):
                    entry["regions"] = [_computation(entry, _fp8_result_type(entry), fresh)]
                del entry["attrs"]["computation"]
            for region in entry.get("regions", ()):
                _rounded_region(region, values, fresh)
        body.append(entry)
        for r in entry["results"]:
            if r["dtype"] in fp8_types():
                declared = _computed_wide(r, values, fresh)
                body.append(_convert(entry, r["id"], declared))
    block["body"] = body
