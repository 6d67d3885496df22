"""Tensor types and constants: MLIR element types to the program format's dtype names, dense attributes to raw bytes."""

from __future__ import annotations

import base64
import re
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
from jax._src.lib.mlir import ir

# MLIR element type -> (program dtype, numpy dtype of its bytes). The emulator decides which dtypes it runs
# (bool, f16, f32, i32, u32 today); the others are spelled so that it can reject them by name.
DTYPES: Dict[str, Tuple[str, Optional[str]]] = {
    "i1": ("bool", "bool"),
    "f16": ("f16", "float16"),
    "f32": ("f32", "float32"),
    "bf16": ("bf16", None),
    "f64": ("f64", "float64"),
    "i8": ("i8", "int8"), "si8": ("i8", "int8"), "ui8": ("u8", "uint8"),
    "i16": ("i16", "int16"), "si16": ("i16", "int16"), "ui16": ("u16", "uint16"),
    "i32": ("i32", "int32"), "si32": ("i32", "int32"), "ui32": ("u32", "uint32"),
    "i64": ("i64", "int64"), "si64": ("i64", "int64"), "ui64": ("u64", "uint64"),
    "complex<f32>": ("c64", "complex64"),
    "complex<f64>": ("c128", "complex128"),
}

TensorType = Tuple[str, List[int]]  # (dtype, shape)

# StableHLO's token (orders infeed, outfeed and host callbacks): a 0-byte scalar "token" in the program.
TOKEN = "token"
_TOKEN_TYPE = "!stablehlo.token"


def tensor_type(mlir_type: Any) -> Optional[TensorType]:
    """(dtype, shape) of a statically shaped ranked tensor of a known element type, or ("token", []) for a
    token; None for anything else."""
    if str(mlir_type) == _TOKEN_TYPE:
        return TOKEN, []
    if not ir.RankedTensorType.isinstance(mlir_type):
        return None
    ranked = ir.RankedTensorType(mlir_type)
    entry = DTYPES.get(str(ranked.element_type))
    if entry is None or not ranked.has_static_shape:
        return None
    return entry[0], [int(d) for d in ranked.shape]


def describe(mlir_type: Any) -> Dict[str, Any]:
    dtype, shape = tensor_type(mlir_type)  # type: ignore[misc]  # callers checked it
    return {"dtype": dtype, "shape": shape}


def constant(attr: Any) -> Dict[str, Any]:
    """The program's ``value``/``splat`` attrs of a dense constant: base64 of dense row-major little-endian bytes."""
    dense = ir.DenseElementsAttr(attr)
    element = str(ir.RankedTensorType(dense.type).element_type)
    splat = bool(dense.is_splat) and len(dense) > 1
    data = _raw_bytes(dense, element, splat)
    return {"value": base64.b64encode(data).decode("ascii"), "splat": splat}


def _raw_bytes(dense: Any, element: str, splat: bool) -> bytes:
    np_dtype = DTYPES[element][1]
    if element == "i1":
        # The buffer protocol aborts the process on i1: read the values one by one.
        ints = ir.DenseIntElementsAttr(dense)
        count = 1 if splat else len(ints)
        return bytes(1 if ints[i] else 0 for i in range(count))
    if np_dtype is None or np_dtype.startswith("complex"):
        # bf16 and complex have no buffer protocol or element accessors in these bindings: read the printed form.
        return _bytes_from_text(str(dense), element, 1 if splat else len(dense))
    if splat:
        # A splat of a huge shape must not be expanded: read its one value.
        value = dense.get_splat_value()
        if np_dtype.startswith("float"):
            return np.array(ir.FloatAttr(value).value, dtype=np_dtype).tobytes()
        bits = 8 * np.dtype(np_dtype).itemsize
        raw = int(ir.IntegerAttr(value).value) & ((1 << bits) - 1)
        return raw.to_bytes(bits // 8, "little")
    cls = ir.DenseFPElementsAttr if np_dtype.startswith("float") else ir.DenseIntElementsAttr
    array = np.asarray(cls(dense))
    return np.ascontiguousarray(array, dtype=np.dtype(np_dtype).newbyteorder("<")).tobytes()


def _bytes_from_text(text: str, element: str, count: int) -> bytes:
    body = text[text.index("<") + 1: text.rindex(">")].rsplit(":", 1)[0].strip()
    hex_blob = re.fullmatch(r'"0x([0-9A-Fa-f]*)"', body)
    if hex_blob:  # MLIR prints large constants as their raw storage
        return bytes.fromhex(hex_blob.group(1))
    tokens = re.findall(r"0x[0-9A-Fa-f]+|[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|inf|nan)", body)
    if element == "bf16":
        out = bytearray()
        for token in tokens:
            if token.startswith("0x"):
                out += int(token, 16).to_bytes(2, "little")
            else:
                bits = int(np.array(float(token), dtype="<f4").view("<u4"))
                bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # round to nearest even
                out += bits.to_bytes(2, "little")
        return bytes(out)
    part = "<f4" if element == "complex<f32>" else "<f8"
    values = [
        np.array(int(t, 16), dtype="<u4" if part == "<f4" else "<u8").view(part) if t.startswith("0x")
        else np.array(float(t), dtype=part)
        for t in tokens
    ]
    return b"".join(v.tobytes() for v in values)
