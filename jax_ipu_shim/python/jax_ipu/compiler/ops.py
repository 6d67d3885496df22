"""Which attributes each op carries into the program, and how to read them (one table, no if-chains)."""

from __future__ import annotations

import ctypes
import functools
import json
from typing import Any, Callable, Dict

from jax._src.lib.mlir import ir

from . import attributes as A
from . import types as T

# The attributes every collective between replicas may carry.
_COLLECTIVE: Dict[str, Callable[[Any], Any]] = {
    "replica_groups": A.replica_groups, "channel_handle": A.channel_handle, "use_global_device_ids": A.flag,
}

# {op: {MLIR attribute: reader}}. A reader's value is stored under the attribute's name, except that a dict
# (constant value + splat, the four dot dimension lists, the nine conv dimension numbers) is merged into the op's attrs.
OP_ATTRS: Dict[str, Dict[str, Callable[[Any], Any]]] = {
    "compare": {"comparison_direction": A.enum, "compare_type": A.enum},
    "constant": {"value": lambda attr: _constant(attr)},
    "iota": {"iota_dimension": A.integer},
    "broadcast_in_dim": {"broadcast_dimensions": A.int_list},
    "transpose": {"permutation": A.int_list},
    "reverse": {"dimensions": A.int_list},
    "slice": {"start_indices": A.int_list, "limit_indices": A.int_list, "strides": A.int_list},
    "dynamic_slice": {"slice_sizes": A.int_list},
    "concatenate": {"dimension": A.integer},
    "pad": {"edge_padding_low": A.int_list, "edge_padding_high": A.int_list, "interior_padding": A.int_list},
    "dot_general": {"dot_dimension_numbers": A.dot_dimension_numbers},
    "reduce": {"dimensions": A.int_list},
    "gather": {"dimension_numbers": A.gather_dimension_numbers, "slice_sizes": A.int_list, "indices_are_sorted": A.boolean},
    "scatter": {"scatter_dimension_numbers": A.scatter_dimension_numbers, "indices_are_sorted": A.boolean,
                "unique_indices": A.boolean},
    "sort": {"dimension": A.integer, "is_stable": A.boolean},
    "top_k": {"k": A.integer},
    "call": {"callee": A.symbol},
    # infeed's `layout` (always major-to-minor from jax) is left out: the program's arrays are dense row-major.
    "infeed": {"infeed_config": A.string},
    "outfeed": {"outfeed_config": A.string},
    "custom_call": {"call_target_name": A.string, "backend_config": A.string, "has_side_effect": A.boolean},
    "convolution": {"dimension_numbers": A.conv_dimension_numbers, "window_strides": A.int_list, "padding": A.padding_pairs,
                    "lhs_dilation": A.int_list, "rhs_dilation": A.int_list, "window_reversal": A.bool_list,
                    "feature_group_count": A.integer, "batch_group_count": A.integer},
    # collectives between replicas
    "all_reduce": {**_COLLECTIVE},
    "cross-replica-sum": {"replica_groups": A.replica_groups},
    "all_gather": {"all_gather_dim": A.integer, **_COLLECTIVE},
    "reduce_scatter": {"scatter_dimension": A.integer, **_COLLECTIVE},
    "all_to_all": {"split_dimension": A.integer, "concat_dimension": A.integer, "split_count": A.integer, **_COLLECTIVE},
    "collective_permute": {"source_target_pairs": A.int_rows, "channel_handle": A.channel_handle},
    "broadcast": {"broadcast_sizes": A.int_list},
    # pooling and remat
    "reduce_window": {"window_dimensions": A.int_list, "window_strides": A.int_list, "base_dilations": A.int_list,
                      "window_dilations": A.int_list, "padding": A.padding_pairs},
    "select_and_scatter": {"window_dimensions": A.int_list, "window_strides": A.int_list, "padding": A.padding_pairs},
    "reduce_precision": {"exponent_bits": A.integer, "mantissa_bits": A.integer},
}

# Older spellings jax still emits, and the program op each becomes (see translate._respell).
RESPELLED = {"cross-replica-sum": "all_reduce", "broadcast": "broadcast_in_dim"}


@functools.lru_cache(maxsize=None)
def registry() -> Dict[str, Dict[str, Any]]:
    """The emulator's op registry ({name: {family, dtypes, min_operands, max_operands, reducer}}), read from the
    native library: the one list of ops, which the front end does not repeat."""
    from jax_ipu import _native

    lib = _native.load()
    lib.JaxIpu_OpRegistry.argtypes = []
    lib.JaxIpu_OpRegistry.restype = ctypes.c_void_p
    text = _native.take_string(lib, lib.JaxIpu_OpRegistry())
    if not text:
        raise RuntimeError(f"the native library {_native.library_path()} returned no op registry")
    return {entry["name"]: entry for entry in json.loads(text)["ops"]}


def is_known(name: str) -> bool:
    """An op the program format defines (the emulator may still refuse its types); anything else is passed through
    (name, operands, results) for the emulator to refuse by name."""
    return name in registry() or name in RESPELLED


def is_reducer(name: str) -> bool:
    """A binary op that, as a whole reduce/scatter body, runs as the op's native kernel."""
    entry = registry().get(name)
    return bool(entry and entry["reducer"])


def _constant(attr: Any) -> Dict[str, Any]:
    """A dense constant's ``value`` (its row-major little-endian bytes, one element for a splat) and ``splat``."""
    from .translate import Blob

    dense = ir.DenseElementsAttr(attr)
    element = str(ir.RankedTensorType(dense.type).element_type)
    splat = bool(dense.is_splat) and len(dense) > 1
    return {"value": Blob(T._raw_bytes(dense, element, splat)), "splat": splat}


def read_attrs(op_name: str, mlir_attrs: Dict[str, Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for name, read in OP_ATTRS.get(op_name, {}).items():
        if name in mlir_attrs:
            value = read(mlir_attrs[name])
            out.update(value if isinstance(value, dict) else {name: value})
    return out
