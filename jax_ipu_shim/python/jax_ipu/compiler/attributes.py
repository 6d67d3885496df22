"""Reads MLIR attributes into plain Python values, absorbing differences between jaxlib's MLIR bindings.

jaxlib 0.4.13 hands out generic ``ir.Attribute`` objects, spells dimension lists as ``dense<...> : tensor<Nxi64>``
and iterates ``op.attributes`` as ``NamedAttribute``; newer series downcast attributes, spell dimension lists as
``array<i64: ...>`` and iterate names. Everything version-specific about attributes lives here.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List

from jax._src.lib.mlir import ir


def named(attrs: Any) -> Dict[str, Any]:
    """An op's (or an attribute dictionary's) attributes as {name: attribute}, whatever iteration yields."""
    # Look values up by name: NamedAttribute.attr downcasts, which fails on e.g. complex constants in 0.4.13.
    names = [item if isinstance(item, str) else item.name for item in attrs]
    return {name: attrs[name] for name in names}


def _is(cls: Any, attr: Any) -> bool:
    return hasattr(cls, "isinstance") and cls.isinstance(attr)


def int_list(attr: Any) -> List[int]:
    """A list of ints from DenseIntElementsAttr, Dense{I64,I32,Bool}ArrayAttr or ArrayAttr (or their printed form)."""
    if _is(ir.DenseIntElementsAttr, attr):
        dense = ir.DenseIntElementsAttr(attr)
        return [int(dense[i]) for i in range(len(dense))]
    for cls_name in ("DenseI64ArrayAttr", "DenseI32ArrayAttr", "DenseBoolArrayAttr"):
        cls = getattr(ir, cls_name, None)
        if cls is not None and _is(cls, attr):
            return [int(v) for v in cls(attr)]
    if _is(ir.ArrayAttr, attr):
        return [integer(a) for a in ir.ArrayAttr(attr)]
    # Last resort: the printed form, e.g. "array<i64: 1, 2>" or "dense<[1, 2]> : tensor<2xi64>".
    text = str(attr)
    body = text.split(":", 1)[1] if text.startswith("array<") else text.split(":", 1)[0]
    return [int(v) for v in re.findall(r"-?\d+", body)]


def integer(attr: Any) -> int:
    if _is(ir.IntegerAttr, attr):
        return int(ir.IntegerAttr(attr).value)
    return int(str(attr).split(":")[0].strip())


def boolean(attr: Any) -> bool:
    if _is(ir.BoolAttr, attr):
        return bool(ir.BoolAttr(attr).value)
    return str(attr).strip() == "true"


def enum(attr: Any) -> str:
    """The value of an enum attribute from its printed form, e.g. ``#stablehlo<comparison_direction GT>`` -> "GT"."""
    text = str(attr).strip()
    match = re.match(r"#\w+<\s*\w+\s+(\w+)\s*>$", text)
    if match:
        return match.group(1)
    return text.strip('"')


def symbol(attr: Any) -> str:
    """A symbol reference, e.g. ``@argmax`` -> "argmax"."""
    if _is(ir.FlatSymbolRefAttr, attr):
        return str(ir.FlatSymbolRefAttr(attr).value)
    return str(attr).strip().lstrip("@").strip('"')


def string(attr: Any) -> str:
    if _is(ir.StringAttr, attr):
        return str(ir.StringAttr(attr).value)
    return str(attr).strip('"')


DOT_FIELDS = (
    "lhs_batching_dimensions",
    "rhs_batching_dimensions",
    "lhs_contracting_dimensions",
    "rhs_contracting_dimensions",
)


def dot_dimension_numbers(attr: Any) -> Dict[str, List[int]]:
    """``#stablehlo.dot<lhs_batching_dimensions = [0], ...>`` -> {field: [dims]}; absent fields are empty."""
    text = str(attr)
    found = {name: [int(v) for v in re.findall(r"-?\d+", dims)]
             for name, dims in re.findall(r"(\w+)\s*=\s*\[([^\]]*)\]", text)}
    if not text.startswith("#") or any(name not in DOT_FIELDS for name in found):
        raise ValueError(f"cannot read dot dimension numbers from {text}")
    return {name: found.get(name, []) for name in DOT_FIELDS}


GATHER_LISTS = ("offset_dims", "collapsed_slice_dims", "start_index_map")
SCATTER_LISTS = ("update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims")
# Newer StableHLO's batching dimensions: accepted only when empty (jax 0.4.13 never prints them).
_BATCHING = ("operand_batching_dims", "start_indices_batching_dims", "input_batching_dims",
             "scatter_indices_batching_dims")


def _index_dimension_numbers(attr: Any, prefix: str, lists: Any) -> Dict[str, Any]:
    text = str(attr).strip()
    if not text.startswith(prefix + "<") or not text.endswith(">"):
        raise ValueError(f"cannot read {prefix} dimension numbers from {text}")
    body = text[len(prefix) + 1:-1]
    fields: Dict[str, Any] = {}
    for name, dims, scalar in re.findall(r"(\w+)\s*=\s*(?:\[([^\]]*)\]|(-?\d+))", body):
        if name in fields:
            raise ValueError(f"{name} appears twice in {text}")
        fields[name] = int(scalar) if scalar else [int(v) for v in re.findall(r"-?\d+", dims)]
    residue = re.sub(r"(\w+)\s*=\s*(?:\[[^\]]*\]|-?\d+)", "", body).replace(",", "").strip()
    unknown = [name for name in fields if name not in lists + ("index_vector_dim",) + _BATCHING]
    if residue or unknown:
        raise ValueError(f"cannot read {prefix} dimension numbers from {text}")
    # The printer leaves out default values: empty lists and index_vector_dim = 0.
    if not isinstance(fields.get("index_vector_dim", 0), int):
        raise ValueError(f"index_vector_dim must be an integer in {text}")
    for name in _BATCHING:
        if fields.get(name):
            raise ValueError(f"{name} (batching dimensions) are not supported: {text}")
    out: Dict[str, Any] = {}
    for name in lists:
        value = fields.get(name, [])
        if not isinstance(value, list):
            raise ValueError(f"{name} must be a list in {text}")
        out[name] = value
    out["index_vector_dim"] = fields.get("index_vector_dim", 0)
    return out


def gather_dimension_numbers(attr: Any) -> Dict[str, Any]:
    """``#stablehlo.gather<offset_dims = [1], ..., index_vector_dim = 1>`` -> {field: value}; absent lists are []."""
    return _index_dimension_numbers(attr, "#stablehlo.gather", GATHER_LISTS)


def scatter_dimension_numbers(attr: Any) -> Dict[str, Any]:
    """``#stablehlo.scatter<update_window_dims = [1], ..., index_vector_dim = 1>`` -> {field: value}."""
    return _index_dimension_numbers(attr, "#stablehlo.scatter", SCATTER_LISTS)


CONV_FIELDS = (
    "input_batch_dimension", "input_feature_dimension", "input_spatial_dimensions",
    "kernel_input_feature_dimension", "kernel_output_feature_dimension", "kernel_spatial_dimensions",
    "output_batch_dimension", "output_feature_dimension", "output_spatial_dimensions",
)
# In the short form, the letters of each tensor's dimension list: (batch-like, feature-like) fields per letter.
_CONV_LETTERS = (("b", "f"), ("i", "o"), ("b", "f"))


def conv_dimension_numbers(attr: Any) -> Dict[str, Any]:
    """``#stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>`` (or the ``raw`` form) -> {field: value}."""
    text = str(attr).strip()
    if not text.startswith("#stablehlo.conv<") or not text.endswith(">"):
        raise ValueError(f"cannot read convolution dimension numbers from {text}")
    body = text[len("#stablehlo.conv<"):-1].strip()
    if body.startswith("raw"):
        fields: Dict[str, Any] = {}
        for name, dims, scalar in re.findall(r"(\w+)\s*=\s*(?:\[([^\]]*)\]|(-?\d+))", body):
            fields[name] = int(scalar) if scalar else [int(v) for v in re.findall(r"-?\d+", dims)]
        if sorted(fields) != sorted(CONV_FIELDS):
            raise ValueError(f"cannot read convolution dimension numbers from {text}")
        return {name: fields[name] for name in CONV_FIELDS}
    match = re.fullmatch(r"\[([^\]]*)\]\s*x\s*\[([^\]]*)\]\s*->\s*\[([^\]]*)\]", body)
    if not match:
        raise ValueError(f"cannot read convolution dimension numbers from {text}")
    out: Dict[str, Any] = {}
    for (first, second), dims, names in zip(_CONV_LETTERS, match.groups(), (CONV_FIELDS[0:3], CONV_FIELDS[3:6], CONV_FIELDS[6:9])):
        letters = [d.strip() for d in dims.split(",")] if dims.strip() else []
        spatial: Dict[int, int] = {}
        found: Dict[str, int] = {}
        for position, letter in enumerate(letters):
            if letter in (first, second) and letter not in found:
                found[letter] = position
            elif re.fullmatch(r"\d+", letter) and int(letter) not in spatial:
                spatial[int(letter)] = position
            else:
                raise ValueError(f"cannot read convolution dimension numbers from {text}")
        if len(found) != 2 or sorted(spatial) != list(range(len(spatial))):
            raise ValueError(f"cannot read convolution dimension numbers from {text}")
        out[names[0]] = found[first]
        out[names[1]] = found[second]
        out[names[2]] = [spatial[i] for i in range(len(spatial))]
    if not (len(out["input_spatial_dimensions"]) == len(out["kernel_spatial_dimensions"])
            == len(out["output_spatial_dimensions"])):
        raise ValueError(f"convolution dimension numbers of different spatial ranks: {text}")
    return out


def padding_pairs(attr: Any) -> List[List[int]]:
    """``dense<[[1, 1], [2, 2]]> : tensor<2x2xi64>`` -> [[1, 1], [2, 2]] (pairs of low, high)."""
    flat = int_list(attr)
    if len(flat) % 2:
        raise ValueError(f"padding must hold (low, high) pairs: {attr}")
    return [flat[i:i + 2] for i in range(0, len(flat), 2)]


def bool_list(attr: Any) -> List[bool]:
    return [bool(v) for v in int_list(attr)]


def replica_groups(attr: Any) -> List[List[int]]:
    """``dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>`` -> [[0, 1], [2, 3]]; the -1s that pad uneven groups are dropped."""
    return [[v for v in row if v != -1] for row in int_rows(attr)]


def int_rows(attr: Any) -> List[List[int]]:
    """The rows of a 2-D dense int attribute (``source_target_pairs``, ``replica_groups``)."""
    flat = int_list(attr)
    shape = list(ir.RankedTensorType(attr.type).shape) if hasattr(attr, "type") else []
    if len(shape) != 2:
        match = re.search(r"tensor<(\d+)x(\d+)x", str(attr))
        shape = [int(match.group(1)), int(match.group(2))] if match else []
    if len(shape) != 2 or shape[0] * shape[1] != len(flat):
        raise ValueError(f"expected a 2-D integer attribute, not {attr}")
    return [flat[i * shape[1]:(i + 1) * shape[1]] for i in range(shape[0])]


def channel_handle(attr: Any) -> Dict[str, int]:
    """``#stablehlo.channel_handle<handle = 1, type = 1>`` -> {"channel_id": 1, "channel_type": 1}."""
    fields = dict(re.findall(r"(\w+)\s*=\s*(-?\d+)", str(attr)))
    if "handle" not in fields:
        raise ValueError(f"cannot read a channel handle from {attr}")
    return {"channel_id": int(fields["handle"]), "channel_type": int(fields.get("type", 0))}


def flag(attr: Any) -> bool:
    """A unit attribute (present = true) or a bool attribute."""
    return boolean(attr) if _is(ir.BoolAttr, attr) else True
