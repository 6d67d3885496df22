"""The ops the front end knows (the emulator's registry, read from the native library) and how their attributes are
read into the program (one table by attribute name, no if-chains)."""

from __future__ import annotations

import functools
from typing import Any, Callable, Dict

from jax._src.lib.mlir import ir

from . import attributes as A
from . import types as T
from .program_format import Blob

# The custom call a host callback is lowered to (jax_ipu.backend.callbacks emits it; its backend_config is the id the
# callback is registered under): the program's host call.
CALL_TARGET = "jax_ipu_host_callback"

# {MLIR attribute: reader}, by attribute name: a name means the same thing on every op, so an op the registry gains
# is read without an edit here when its attributes are ones other ops have. Only known ops (the registry's) are read.
# A reader's value is stored under the attribute's name, except that a dict (constant value + splat, the dot, gather,
# scatter and conv dimension numbers, a channel handle) is merged into the op's attrs. Attributes not listed (infeed's
# `layout`, always major-to-minor from jax; custom_call's layouts...) are left out: the program's arrays are dense
# row-major.
ATTRS: Dict[str, Callable[[Any], Any]] = {
    # element types, constants, shapes
    "comparison_direction": A.enum, "compare_type": A.enum,
    "value": lambda attr: _constant(attr),
    "iota_dimension": A.integer, "broadcast_dimensions": A.int_list, "broadcast_sizes": A.int_list,
    "permutation": A.int_list, "dimensions": A.int_list, "dimension": A.integer,
    "start_indices": A.int_list, "limit_indices": A.int_list, "strides": A.int_list, "slice_sizes": A.int_list,
    "edge_padding_low": A.int_list, "edge_padding_high": A.int_list, "interior_padding": A.int_list,
    # dot, gather/scatter, conv: the class of the attribute says which dimension numbers it holds
    "dot_dimension_numbers": A.dot_dimension_numbers, "dimension_numbers": A.dimension_numbers,
    "scatter_dimension_numbers": A.scatter_dimension_numbers,
    "indices_are_sorted": A.boolean, "unique_indices": A.boolean, "is_stable": A.boolean, "k": A.integer,
    "window_strides": A.int_list, "padding": A.padding_pairs, "lhs_dilation": A.int_list, "rhs_dilation": A.int_list,
    "window_reversal": A.bool_list, "feature_group_count": A.integer, "batch_group_count": A.integer,
    "window_dimensions": A.int_list, "base_dilations": A.int_list, "window_dilations": A.int_list,
    "exponent_bits": A.integer, "mantissa_bits": A.integer,
    "fft_type": A.enum, "fft_length": A.int_list, "rng_distribution": A.enum,
    # calls and host I/O
    "callee": A.symbol, "infeed_config": A.string, "outfeed_config": A.string, "call_target_name": A.string,
    "backend_config": A.string, "has_side_effect": A.boolean,
    # collectives between replicas
    "replica_groups": A.replica_groups, "channel_handle": A.channel_handle, "use_global_device_ids": A.flag,
    "all_gather_dim": A.integer, "scatter_dimension": A.integer, "split_dimension": A.integer,
    "concat_dimension": A.integer, "split_count": A.integer, "source_target_pairs": A.int_rows,
}

# Older spellings jax still emits, and the program op each becomes (see translate._respell).
RESPELLED = {"cross-replica-sum": "all_reduce", "broadcast": "broadcast_in_dim", "dot": "dot_general"}
# The MLIR ops that are a dot_general: its own and its older spellings.
DOTS = ("stablehlo.dot_general",) + tuple(f"stablehlo.{old}" for old, new in RESPELLED.items() if new == "dot_general")


@functools.lru_cache(maxsize=None)
def host() -> Dict[str, Any]:
    """What the native library knows of the XLA:CPU it models on this host (ipu/cpu_features.h), e.g.
    ``wide_vectors`` (LLVM vectorises with 512-bit vectors here), ``avx512`` (its code selects with masked moves),
    ``gathers_fast`` (it vectorises strided loads with gathers), ``avx512_fp16`` (it computes f16 natively)."""
    return dict(_registry_json().get("host", {}))


@functools.lru_cache(maxsize=None)
def xla_cpu() -> Dict[str, Any]:
    """What the native library models of XLA:CPU's own passes whatever the host, e.g. ``tree_window``: its
    TreeReductionRewriter's window (reduce_kernels.h), which a reduce with a longer reduced dimension is rewritten
    into, so that it is no longer one fused loop."""
    return dict(_registry_json().get("xla_cpu", {}))


def _registry_json() -> Dict[str, Any]:
    from jax_ipu import _native

    return _native.registry()


@functools.lru_cache(maxsize=None)
def registry() -> Dict[str, Dict[str, Any]]:
    """The emulator's op registry ({name: {family, dtypes, min_operands, max_operands, reducer, elementwise, pure}}),
    read from the native library: the one list of ops, which the front end does not repeat."""
    return {entry["name"]: entry for entry in _registry_json()["ops"]}


def is_elementwise(name: str) -> bool:
    """An op of the registry's elementwise families (ipu/registry.h isElementwiseFamily): each result element from
    the operands' elements at its index, what XLA fuses into one loop."""
    entry = registry().get(name)
    return bool(entry and entry["elementwise"])


def is_pure(name: str) -> bool:
    """An op that only computes its results (ipu/registry.h isPure): removed where nothing reads them."""
    entry = registry().get(name)
    return bool(entry and entry["pure"])


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

    dense = ir.DenseElementsAttr(attr)
    element = str(ir.RankedTensorType(dense.type).element_type)
    splat = bool(dense.is_splat) and len(dense) > 1
    return {"value": Blob(T._raw_bytes(dense, element, splat)), "splat": splat}


def read_attrs(mlir_attrs: Any) -> Dict[str, Any]:
    """The program attrs of a known op from its MLIR attributes (``op.attributes``)."""
    out: Dict[str, Any] = {}
    for item in mlir_attrs:
        name = item if isinstance(item, str) else item.name
        read = ATTRS.get(name)
        if read is not None:
            # Look the value up by name: NamedAttribute.attr downcasts, which fails on e.g. complex constants in 0.4.13.
            value = read(mlir_attrs[name])
            out.update(value if isinstance(value, dict) else {name: value})
    return out
