"""Writing ops into the program document on behalf of a rewrite: ``Rewrite`` (the ops written in place of one
op, at its source location), ``derived`` (one such op), source locations (``located``) and MLIR's spelling of an op's
signature for messages (``types_text``)."""

from __future__ import annotations

import os
import re
import struct
from typing import Any, Dict, List, Optional

from .program_format import Blob

_FILE_LINE = re.compile(r'"([^"]+)":(\d+):\d+')


def types_text(op: Any) -> str:
    """``(tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>``, as MLIR prints an op's signature."""
    operands = ", ".join(str(v.type) for v in op.operands)
    results = ", ".join(str(v.type) for v in op.results)
    return f"({operands}) -> ({results})"


def _loc(op: Any) -> Optional[str]:
    text = str(op.location)
    match = _FILE_LINE.search(text)
    if match:
        return f"{os.path.basename(match.group(1))}:{match.group(2)}"
    name = re.match(r'loc\("([^"]*)"\)$', text)
    return name.group(1) if name else None


def located(entry: Dict[str, Any], op: Any) -> Dict[str, Any]:
    """`entry` with the source location of the MLIR op it comes from, if jax gave one."""
    loc = _loc(op)
    if loc:
        entry["loc"] = loc
    return entry


class Rewrite:
    """The ops the front end writes in place of ``entry`` (a rewrite of it, at its source location), by default of
    its result's dtype and shape."""

    def __init__(self, translator: Any, entry: Dict[str, Any], ops: Optional[List[Dict[str, Any]]] = None,
                 shape: Optional[List[int]] = None, dtype: Optional[str] = None) -> None:
        """``ops``: a list to append to (another rewrite's); ``shape``, ``dtype``: the defaults, if not the result's."""
        self.translator, self.entry = translator, entry
        self.ops: List[Dict[str, Any]] = [] if ops is None else ops
        self.dtype = entry["results"][0]["dtype"] if dtype is None else dtype
        self.shape = entry["results"][0]["shape"] if shape is None else shape

    def emit(self, name: str, operands: List[int], dtype: Optional[str] = None, shape: Optional[List[int]] = None,
             attrs: Optional[Dict[str, Any]] = None, result: Optional[Dict[str, Any]] = None) -> int:
        """Appends op ``name``; returns its result's id (``result``, or a fresh value)."""
        result = result or self.translator.fresh(dtype or self.dtype, self.shape if shape is None else shape)
        self.ops.append(derived(self.entry, name, operands, [result], attrs))
        return result["id"]

    def splat(self, number: float) -> int:
        """``number`` in every element: a scalar constant, broadcast to the shape."""
        scalar = self.emit("constant", [], shape=[], attrs={"value": Blob(float_bytes(self.dtype, number)),
                                                               "splat": False})
        return self.emit("broadcast_in_dim", [scalar], attrs={"broadcast_dimensions": []}) if self.shape else scalar


def derived(entry: Dict[str, Any], name: str, operands: List[int], results: List[Dict[str, Any]],
             attrs: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """A stablehlo op the front end writes in place of `entry` (a rewrite of it), at `entry`'s source location."""
    new = {"op": name, "mlir": f"stablehlo.{name}", "operands": operands, "results": results, "attrs": attrs or {},
           "regions": []}
    if "loc" in entry:
        new["loc"] = entry["loc"]
    return new


def float_bytes(dtype: str, number: float) -> bytes:
    """`number` (exact in bf16, f16 and f32: 1, 0.5, infinities...) as the bytes of a scalar of `dtype` (c64 and
    c128: its real part, the imaginary part 0)."""
    if dtype == "bf16":
        return struct.pack("<f", number)[2:]
    if dtype == "c64":
        return struct.pack("<ff", number, 0.0)
    if dtype == "c128":
        return struct.pack("<dd", number, 0.0)
    return struct.pack({"f16": "<e", "f64": "<d"}.get(dtype, "<f"), number)
