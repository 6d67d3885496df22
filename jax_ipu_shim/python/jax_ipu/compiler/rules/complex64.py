"""complex64 and complex128 as pairs of f32 and f64, and integer or widening products, as the emulator computes them.

The emulator has no complex element type in its kernels: dot_general and convolution of complex operands become
four real products (XLA:CPU's own decomposition's order), and sort, reduce and reduce_window of complex values are
split into their real and imaginary parts with the body rewritten over the parts. Products of integers into floats
and widening products convert their operands first, as XLA does. The values are those of the complex (or converted)
computation: the same additions and products in the same order."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from .. import ops as O
from .. import rewrite as W
from .. import types as T
from ..errors import CompileError

_COMPLEX_SPLIT = ("stablehlo.sort", "stablehlo.reduce", "stablehlo.reduce_window")


# Products of complex values, computed as four real products of the parts (f32 for c64, f64 for c128).
_COMPLEX_PRODUCTS = O.DOTS + ("stablehlo.convolution",)


def _complex_product(t: Any, entry: Dict[str, Any], mlir_op: Any) -> List[Dict[str, Any]]:
    """A dot_general or convolution of complex values as four real ones of their parts, as Poplar users multiply
    pairs of real matrices: (a + bi)(c + di) = (ac - bd) + (ad + bc)i, each product the op with its attributes,
    so the emulator's matmul and convolution planners map and cost them."""
    ops: List[Dict[str, Any]] = []
    out = entry["results"][0]

    def op(name: str, operands: List[int], shape: List[int], attrs: Optional[Dict[str, Any]] = None,
           result: Optional[Dict[str, Any]] = None) -> int:
        result = result or t.fresh(T.complex_part(out["dtype"]), shape)
        ops.append(W.derived(entry, name, operands, [result], attrs))
        return result["id"]

    parts = []
    for operand, value in zip(entry["operands"], mlir_op.operands):
        dtype, shape = t.tensor(value)
        if dtype != out["dtype"]:
            raise CompileError(f"{entry['mlir']} of {out['dtype']} and {value.type} values: jax converts both "
                               f"operands to one type; convert the other one to the result's type first")
        parts.append([op(part, [operand], list(shape), result=t.fresh(T.complex_part(dtype), list(shape)))
                      for part in ("real", "imag")])
    (a, b), (c, d) = parts
    conv = dict(entry["attrs"])
    ac, bd, ad, bc = (op(entry["op"], [x, y], out["shape"], conv) for x, y in ((a, c), (b, d), (a, d), (b, c)))
    re, im = op("subtract", [ac, bd], out["shape"]), op("add", [ad, bc], out["shape"])
    op("complex", [re, im], out["shape"], result=out)
    return ops


def _int_to_float(t: Any, op: Any) -> bool:
    """A dot_general or convolution of integers with a float result (preferred_element_type=float32)."""
    result = t.type_of(op.results[0].type)
    return (result is not None and T.dtype_kind(result[0]) == "f"
            and all(T.dtype_kind(t.tensor(v)[0]) in "iu" for v in op.operands))


def _widening(t: Any, op: Any) -> bool:
    """A dot_general or convolution of floats of different types with an f32 result (f32 x bf16, as jax 0.12's
    attention writes it): each operand widens exactly to f32."""
    result = t.type_of(op.results[0].type)
    dtypes = {t.tensor(v)[0] for v in op.operands}
    return result is not None and result[0] == "f32" and len(dtypes) > 1 and dtypes <= {"f16", "bf16", "f32"}


def _float_product(t: Any, entry: Dict[str, Any], mlir_op: Any) -> List[Dict[str, Any]]:
    """A product of integers, or of floats of different types, with a float result as the product of the
    operands converted to the result's type, as XLA computes it (jax's tests check exactly that equivalence)."""
    dtype = entry["results"][0]["dtype"]
    ops, operands = [], []
    for operand, value in zip(entry["operands"], mlir_op.operands):
        if t.tensor(value)[0] == dtype:
            operands.append(operand)
            continue
        converted = t.fresh(dtype, list(t.tensor(value)[1]))
        ops.append(W.derived(entry, "convert", [operand], [converted]))
        operands.append(converted["id"])
    return ops + [dict(entry, operands=operands)]


def _split_complex(t: Any, entry: Dict[str, Any], mlir_op: Any) -> List[Dict[str, Any]]:
    """A sort, reduce or reduce_window of complex operands whose body is not one op the emulator runs on pairs, as
    the same op over their real and imaginary parts (f32, or c128's f64). jax's bodies read a complex argument only
    through stablehlo.real and stablehlo.imag (lexicographic order: sort, max, min, argmax) and pass complex values on
    only through stablehlo.select, so each complex operand becomes two real operands, each complex body argument two,
    real/imag ops copies of them, and each select of complex values two selects; the results are put back
    together with stablehlo.complex. Emulator and cost model see an ordinary real op."""
    where = f" (at {entry['loc']})" if "loc" in entry else ""
    what = entry["mlir"]
    before: List[Dict[str, Any]] = []
    after: List[Dict[str, Any]] = []
    region = entry["regions"][0]

    def split_operand(operand: int, dtype: str, shape: List[int]) -> List[int]:
        parts = []
        for part in ("real", "imag"):
            value = t.fresh(T.complex_part(dtype), shape)
            before.append(W.derived(entry, part, [operand], [value]))
            parts.append(value["id"])
        return parts

    operands: List[int] = []
    for operand, value in zip(entry["operands"], mlir_op.operands):
        dtype, shape = t.tensor(value)
        operands += split_operand(operand, dtype, list(shape)) if T.complex_part(dtype) else [operand]
    results: List[Dict[str, Any]] = []
    for result in entry["results"]:
        if not T.complex_part(result["dtype"]):
            results.append(result)
            continue
        halves = [t.fresh(T.complex_part(result["dtype"]), result["shape"]) for _ in range(2)]
        results += halves
        after.append(W.derived(entry, "complex", [h["id"] for h in halves], [result]))

    parts: Dict[int, List[int]] = {}  # complex value of the body -> its real and imaginary part values
    params: List[Dict[str, Any]] = []
    # A comparator takes (lhs, rhs) per operand, so the parts of operand k are (lhs.re, rhs.re, lhs.im, rhs.im);
    # a reduce body takes the accumulators then the elements, so each complex argument becomes (re, im) in place.
    groups = region["params"]
    groups = [groups[i:i + 2] for i in range(0, len(groups), 2)] if entry["op"] == "sort" else [[p] for p in groups]
    for group in groups:
        part = T.complex_part(group[0]["dtype"])
        if not part:
            params += group
            continue
        pairs = [[t.fresh(part, []) for _ in range(2)] for _ in group]
        params += [pair[i] for i in range(2) for pair in pairs]
        for param, pair in zip(group, pairs):
            parts[param["id"]] = [p["id"] for p in pair]
    body: List[Dict[str, Any]] = []
    for inner in region["body"]:
        read = [v for v in inner["operands"] if v in parts]
        if read and inner["op"] in ("real", "imag"):  # now a copy of the argument's part
            body.append(dict(inner, op="convert", mlir="stablehlo.convert",
                             operands=[parts[read[0]][inner["op"] == "imag"]]))
        elif (inner["op"] == "select" and T.complex_part(inner["results"][0]["dtype"])
              and set(inner["operands"][1:]) <= set(parts)):
            pred, a, b = inner["operands"]
            pair = [t.fresh(T.complex_part(inner["results"][0]["dtype"]), []) for _ in range(2)]
            body += [dict(inner, operands=[pred, parts[a][i], parts[b][i]], results=[pair[i]]) for i in range(2)]
            parts[inner["results"][0]["id"]] = [p["id"] for p in pair]
        elif read or any(T.complex_part(r["dtype"]) for r in inner["results"]):
            raise CompileError(f"{what} of complex values: its body applies {inner['mlir']} to complex "
                               f"values; the ipu runs such a body on the real and imaginary parts (as jax's "
                               f"comparisons read them), through stablehlo.real, stablehlo.imag and "
                               f"stablehlo.select only{where}")
        else:
            body.append(inner)
    returned: List[int] = []
    for v in region["results"]:
        returned += parts[v] if v in parts else [v]
    entry = dict(entry, operands=operands, results=results,
                 regions=[dict(region, params=params, body=body, results=returned)])
    return before + [entry] + after


def complex_product(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name in _COMPLEX_PRODUCTS and t.any_complex(op)):
        return False
    body.extend(_complex_product(t, t.entry(op), op))
    return True


def float_product(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name in _COMPLEX_PRODUCTS and (_int_to_float(t, op) or _widening(t, op))):
        return False
    body.extend(_float_product(t, t.entry(op), op))
    return True


def complex_split(t: Any, op: Any, body: List[Dict[str, Any]], scalar_body: bool) -> bool:
    if not (op.name in _COMPLEX_SPLIT and t.any_complex(op)):
        return False
    entry = t.entry(op)
    body.extend([entry] if "computation" in entry["attrs"] else _split_complex(t, entry, op))
    return True
