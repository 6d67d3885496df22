"""Tensor types and constants: MLIR element types to the program format's dtype names, dense attributes to raw bytes."""

from __future__ import annotations

import functools
import re
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
from jax._src.lib.mlir import ir

from . import attributes as A
from .program_format import Blob

Row = Tuple[str, Tuple[str, ...], str]  # (program dtype, MLIR element spellings, numpy dtype name)

def _row(t: Dict[str, Any]) -> Row:
    """A row of the emulator's table: MLIR spells a signed integer "i8" or "si8"; numpy names follow from the kind and
    the width in bits (bf16 is ml_dtypes' bfloat16, and so are the sub-byte integers int4, uint4, int2 and uint2;
    bool and the complex types are neither float nor int)."""
    bits = t["bits"]
    if t["mlir"].startswith("f8"):  # f8E4M3FN -> ml_dtypes' float8_e4m3fn
        np_name = "float8_" + t["mlir"][2:].lower()
    elif t["float"]:
        np_name = "bfloat16" if t["mlir"] == "bf16" else f"float{bits}"
    elif t["int"]:
        np_name = f"{'' if t['signed'] else 'u'}int{bits}"
    else:
        np_name = "bool" if bits == 8 else f"complex{bits}"
    spellings = (t["mlir"], "s" + t["mlir"]) if t["int"] and t["signed"] else (t["mlir"],)
    return t["name"], spellings, np_name


@functools.lru_cache(maxsize=None)
def ipu_dtypes() -> List[Row]:
    """The program format's element types, one row each, read from the emulator's one table (ipu/dtype.h
    kDTypeTable, through the registry): the Python side keeps no copy of it."""
    from jax_ipu import _native

    return [_row(t) for t in _native.registry()["element_types"]]


@functools.lru_cache(maxsize=None)
def dtypes() -> Dict[str, Tuple[str, str]]:
    """MLIR element type -> (program dtype, numpy dtype name of its bytes)."""
    return {mlir: (name, np_name) for name, spellings, np_name in ipu_dtypes() for mlir in spellings}


@functools.lru_cache(maxsize=None)
def element_bytes() -> Dict[str, int]:
    """Program dtype -> bytes of one element (the emulator's table)."""
    from jax_ipu import _native

    return {t["name"]: t["bytes"] for t in _native.registry()["element_types"]}


def numpy_dtype(np_name: str) -> np.dtype:
    """The numpy dtype of a table row's numpy name (bfloat16, the fp8 types and the sub-byte integers come from
    ml_dtypes, which jax depends on)."""
    try:
        return np.dtype(np_name)
    except TypeError:
        import ml_dtypes
        return np.dtype(getattr(ml_dtypes, np_name))


def ipu_numpy_dtypes() -> Dict[np.dtype, str]:
    """numpy dtype -> program dtype for every element type the ipu computes on and carries."""
    out = {}
    for name, _, np_name in ipu_dtypes():
        try:
            out[numpy_dtype(np_name)] = name
        except AttributeError:  # an older ml_dtypes lacks the format (int2): that type cannot reach the ipu
            pass
    return out


@functools.lru_cache(maxsize=None)
def sub_byte_bits() -> Dict[str, int]:
    """The sub-byte integers (program dtype -> width in bits), from the emulator's table: held one per byte, their
    bits in the low bits (ipu/dtype.h)."""
    from jax_ipu import _native

    return {t["name"]: t["bits"] for t in _native.registry()["element_types"] if t["bits"] < 8}


@functools.lru_cache(maxsize=None)
def numpy_dtypes_by_name() -> Dict[str, np.dtype]:
    """Program dtype -> numpy dtype for every element type the ipu computes on and carries (ipu_numpy_dtypes'
    inverse)."""
    return {name: dtype for dtype, name in ipu_numpy_dtypes().items()}


def dtype_kind(name: str) -> str:
    """numpy's kind character of a program dtype ('b', 'i', 'u', 'f', 'c'), from the table's numpy names (ml_dtypes'
    types, which numpy calls void, by what they are: bfloat16 and the float8 types 'f', the sub-byte integers 'i'
    and 'u'; an older ml_dtypes may lack some of them)."""
    for row_name, _, np_name in ipu_dtypes():
        if row_name == name:
            return next(kind for prefix, kind in (("bool", "b"), ("complex", "c"), ("uint", "u"), ("int", "i"),
                                                  ("", "f")) if np_name.startswith(prefix))
    return ""


@functools.lru_cache(maxsize=None)
def complex_part(name: str) -> str:
    """The program dtype of a complex type's real and imaginary parts ("c64" -> "f32", "c128" -> "f64"), "" for
    any other type: from numpy's types of the table's rows."""
    dtype = numpy_dtypes_by_name().get(name)
    if dtype is None or dtype.kind != "c":
        return ""
    return ipu_numpy_dtypes()[np.dtype(f"float{dtype.itemsize * 4}")]


TensorType = Tuple[str, List[int]]  # (dtype, shape)

# StableHLO's token (orders infeed, outfeed and host callbacks): a 0-byte scalar "token" in the program.
TOKEN = "token"
_TOKEN_TYPE = "!stablehlo.token"


def tensor_type(mlir_type: Any) -> Optional[TensorType]:
    """(dtype, shape) of a statically shaped ranked tensor of a known element type, or ("token", []) for a
    token; None for anything else."""
    if str(mlir_type) == _TOKEN_TYPE:
        return TOKEN, []
    if not A.is_a(ir.RankedTensorType, mlir_type):
        return None
    ranked = ir.RankedTensorType(mlir_type)
    entry = dtypes().get(str(ranked.element_type))
    if entry is None or not ranked.has_static_shape:
        return None
    return entry[0], [int(d) for d in ranked.shape]


def _raw_bytes(dense: Any, element: str, splat: bool) -> bytes:
    np_dtype = dtypes()[element][1]
    if element == "i1":
        # The buffer protocol aborts the process on i1: read the values one by one.
        ints = ir.DenseIntElementsAttr(dense)
        count = 1 if splat else len(ints)
        return bytes(1 if ints[i] else 0 for i in range(count))
    if element == "bf16" or np_dtype.startswith(("complex", "float8_")) or dtypes()[element][0] in sub_byte_bits():
        # bf16, fp8, complex and the sub-byte integers have no buffer protocol or element accessors in these
        # bindings: read the printed form.
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
    if count == 0:  # an empty array printed as a splat (dense<1.0> : tensor<3x0x2xbf16>) holds no element
        return b""
    # A sub-byte integer: its bits in the low bits of a byte (MLIR stores one per byte, and prints them as integers).
    mask = (1 << sub_byte_bits().get(dtypes()[element][0], 0)) - 1  # 0: not a sub-byte integer
    hex_blob = re.match(r'\s*dense<"0x([0-9A-Fa-f]*)">', text)
    if hex_blob:  # MLIR prints large constants as their raw storage: dense<"0x..."> : tensor<...>
        raw = bytes.fromhex(hex_blob.group(1))
        return bytes(b & mask for b in raw) if mask else raw
    body = text[text.index("<") + 1: text.rindex(">")].rsplit(":", 1)[0].strip()
    if mask:
        return bytes(int(t) & mask for t in re.findall(r"[-+]?\d+", body))
    tokens = re.findall(r"0x[0-9A-Fa-f]+|[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|inf|nan)", body)
    if element.startswith("f8"):  # hex tokens are the raw byte (MLIR prints NaNs so); numbers are exact values
        f8 = numpy_dtype(dtypes()[element][1])
        return bytes(int(t, 16) if t.startswith("0x") else int(np.array(float(t)).astype(f8).view(np.uint8))
                     for t in tokens)
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


def constant_from_op_text(op: Any) -> Dict[str, Any]:
    """A complex constant's attrs from the op's printed form. The current series' bindings cannot hand out a
    complex dense attribute at all (downcasting it raises), and no binding has accessors for its elements, so its
    printed ``dense<...>`` is the one way to its values (0.4.13 reads the same text through the attribute)."""

    text = str(op).split("\n", 1)[0]
    attr = text[text.index("dense<"):]
    result = ir.RankedTensorType(op.results[0].type)
    element = str(result.element_type)
    count = int(np.prod(result.shape, dtype=np.int64))
    data = _bytes_from_text(attr, element, count)
    item = np.dtype(dtypes()[element][1]).itemsize
    splat = len(data) == item and count > 1
    return {"value": Blob(data), "splat": splat}
