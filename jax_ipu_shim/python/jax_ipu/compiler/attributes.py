"""Reads MLIR attributes into plain Python values through jaxlib's typed accessors (``ir.DenseIntElementsAttr``,
``ir.IntegerAttr``, the StableHLO attribute classes...), never by parsing printed text.

jaxlib 0.4.13 hands out generic ``ir.Attribute`` objects, spells dimension lists as ``dense<...> : tensor<Nxi64>``
and iterates ``op.attributes`` as ``NamedAttribute``; newer series downcast attributes, spell dimension lists as
``array<i64: ...>`` and iterate names. Everything version-specific about attributes lives here. A reader raises
ValueError naming the attribute it cannot read.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Dict, List, NamedTuple, Tuple, Union

from jax._src.lib.mlir import ir
from jax._src.lib.mlir.dialects import hlo


def named(attrs: Any) -> Dict[str, Any]:
    """An op's (or an attribute dictionary's) attributes as {name: attribute}, whatever iteration yields."""
    # Look values up by name: NamedAttribute.attr downcasts, which fails on e.g. complex constants in 0.4.13.
    names = [item if isinstance(item, str) else item.name for item in attrs]
    return {name: attrs[name] for name in names}


def _accepts_text(read: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Lets a reader take an attribute's text too (tests and tools): MLIR parses it, the typed accessors read it."""

    @functools.wraps(read)
    def reader(attr: Any) -> Any:
        if not isinstance(attr, str):
            return read(attr)
        from jax._src.interpreters import mlir as jmlir

        with jmlir.make_ir_context():
            try:
                parsed = ir.Attribute.parse(attr)
            except Exception as error:  # MLIRError / ValueError with the parser's diagnostics, by version
                raise ValueError(f"cannot parse the attribute {attr}: {error}") from None
            return read(parsed)

    return reader


def is_a(cls: Any, value: Any) -> bool:
    """Whether an MLIR attribute or type is a ``cls``: jaxlib 0.4.13's bindings ask ``cls.isinstance(value)``; the
    current series' downcast every value to its class and have no such method."""
    if cls is None:
        return False
    if hasattr(cls, "isinstance"):
        return bool(cls.isinstance(value))
    return isinstance(value, cls)


_is = is_a


def _cannot(what: str, attr: Any) -> ValueError:
    return ValueError(f"cannot read {what} from {attr}")


@_accepts_text
def int_list(attr: Any) -> List[int]:
    """A list of ints from DenseIntElementsAttr, Dense{I64,I32,Bool}ArrayAttr or an ArrayAttr of IntegerAttr."""
    if _is(ir.DenseIntElementsAttr, attr):
        dense = ir.DenseIntElementsAttr(attr)
        return [int(dense[i]) for i in range(len(dense))]
    for cls_name in ("DenseI64ArrayAttr", "DenseI32ArrayAttr", "DenseBoolArrayAttr"):
        cls = getattr(ir, cls_name, None)
        if _is(cls, attr):
            return [int(v) for v in cls(attr)]
    if _is(ir.ArrayAttr, attr):
        return [integer(a) for a in ir.ArrayAttr(attr)]
    raise _cannot("a list of integers", attr)


@_accepts_text
def integer(attr: Any) -> int:
    if _is(ir.IntegerAttr, attr):
        return int(ir.IntegerAttr(attr).value)
    raise _cannot("an integer", attr)


@_accepts_text
def boolean(attr: Any) -> bool:
    if _is(ir.BoolAttr, attr):
        return bool(ir.BoolAttr(attr).value)
    raise _cannot("a boolean", attr)


_ENUMS = (hlo.ComparisonDirectionAttr, hlo.ComparisonTypeAttr, hlo.FftTypeAttr, hlo.RngDistributionAttr)


@_accepts_text
def enum(attr: Any) -> str:
    """The value of a StableHLO enum attribute, e.g. ``#stablehlo<comparison_direction GT>`` -> "GT"."""
    for cls in _ENUMS:
        if _is(cls, attr):
            return str(cls(attr).value)
    raise _cannot("an enum value", attr)


@_accepts_text
def symbol(attr: Any) -> str:
    """A symbol reference, e.g. ``@argmax`` -> "argmax"."""
    if _is(ir.FlatSymbolRefAttr, attr):
        return str(ir.FlatSymbolRefAttr(attr).value)
    raise _cannot("a symbol reference", attr)


@_accepts_text
def string(attr: Any) -> str:
    if _is(ir.StringAttr, attr):
        return str(ir.StringAttr(attr).value)
    raise _cannot("a string", attr)


DOT_FIELDS = (
    "lhs_batching_dimensions",
    "rhs_batching_dimensions",
    "lhs_contracting_dimensions",
    "rhs_contracting_dimensions",
)


@_accepts_text
def dot_dimension_numbers(attr: Any) -> Dict[str, List[int]]:
    """``#stablehlo.dot<lhs_batching_dimensions = [0], ...>`` -> {field: [dims]}; absent fields are empty."""
    if not _is(hlo.DotDimensionNumbers, attr):
        raise _cannot("dot dimension numbers", attr)
    dot = hlo.DotDimensionNumbers(attr)
    return {name: [int(v) for v in getattr(dot, name)] for name in DOT_FIELDS}


GATHER_LISTS = ("offset_dims", "collapsed_slice_dims", "start_index_map")
SCATTER_LISTS = ("update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims")
# The bindings' spelling of a field where it differs from the program format's.
_BINDING_NAMES = {"scatter_dims_to_operand_dims": "scattered_dims_to_operand_dims"}


def _index_dimension_numbers(numbers: Any, lists: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {name: [int(v) for v in getattr(numbers, _BINDING_NAMES.get(name, name))] for name in lists}
    out["index_vector_dim"] = int(numbers.index_vector_dim)
    # Newer StableHLO's batching dimensions (the current series' vmapped gathers and scatters): read when present;
    # the front end rewrites them into index columns (rules/gather_scatter.py).
    for name in ("operand_batching_dims", "start_indices_batching_dims", "input_batching_dims",
                 "scatter_indices_batching_dims"):
        dims = [int(v) for v in getattr(numbers, name, [])]
        if dims:
            out[name] = dims
    return out


@_accepts_text
def gather_dimension_numbers(attr: Any) -> Dict[str, Any]:
    """``#stablehlo.gather<offset_dims = [1], ..., index_vector_dim = 1>`` -> {field: value}; absent lists are []."""
    if not _is(hlo.GatherDimensionNumbers, attr):
        raise _cannot("gather dimension numbers", attr)
    return _index_dimension_numbers(hlo.GatherDimensionNumbers(attr), GATHER_LISTS)


@_accepts_text
def scatter_dimension_numbers(attr: Any) -> Dict[str, Any]:
    """``#stablehlo.scatter<update_window_dims = [1], ..., index_vector_dim = 1>`` -> {field: value}."""
    if not _is(hlo.ScatterDimensionNumbers, attr):
        raise _cannot("scatter dimension numbers", attr)
    return _index_dimension_numbers(hlo.ScatterDimensionNumbers(attr), SCATTER_LISTS)


@_accepts_text
def dimension_numbers(attr: Any) -> Dict[str, Any]:
    """A gather's or a convolution's ``dimension_numbers``, told apart by the attribute's class."""
    if _is(hlo.GatherDimensionNumbers, attr):
        return gather_dimension_numbers(attr)
    return conv_dimension_numbers(attr)


CONV_FIELDS = (
    "input_batch_dimension", "input_feature_dimension", "input_spatial_dimensions",
    "kernel_input_feature_dimension", "kernel_output_feature_dimension", "kernel_spatial_dimensions",
    "output_batch_dimension", "output_feature_dimension", "output_spatial_dimensions",
)


@_accepts_text
def conv_dimension_numbers(attr: Any) -> Dict[str, Any]:
    """``#stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>`` -> {field: value}."""
    if not _is(hlo.ConvDimensionNumbers, attr):
        raise _cannot("convolution dimension numbers", attr)
    conv = hlo.ConvDimensionNumbers(attr)
    out: Dict[str, Any] = {}
    for name in CONV_FIELDS:
        value = getattr(conv, name)
        out[name] = [int(v) for v in value] if name.endswith("_dimensions") else int(value)
    return out


@_accepts_text
def padding_pairs(attr: Any) -> List[List[int]]:
    """``dense<[[1, 1], [2, 2]]> : tensor<2x2xi64>`` -> [[1, 1], [2, 2]] (pairs of low, high)."""
    rows = int_rows(attr)
    if any(len(row) != 2 for row in rows):
        raise ValueError(f"padding must hold (low, high) pairs: {attr}")
    return rows


@_accepts_text
def bool_list(attr: Any) -> List[bool]:
    return [bool(v) for v in int_list(attr)]


class MeshAxes(NamedTuple):
    """Replica groups named by axes of a device mesh (the current series' pmap): the translator, which knows the
    module's meshes, turns them into device groups (spmd.Mesh.groups)."""

    mesh: str
    axes: Tuple[str, ...]


@_accepts_text
def replica_groups(attr: Any) -> Union[List[List[int]], MeshAxes]:
    """``dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>`` -> [[0, 1], [2, 3]] (the -1s that pad uneven groups are
    dropped); ``#stablehlo.replica_group_mesh_axes<mesh = @m, axes = [...]>`` -> MeshAxes("m", (...))."""
    mesh_axes = getattr(hlo, "ReplicaGroupMeshAxesAttr", None)  # the current series only
    if _is(mesh_axes, attr):
        groups = mesh_axes(attr)
        axes = []
        for ref in groups.axes:
            ref = hlo.AxisRefAttr(ref)
            if ref.sub_axis_info is not None:
                raise ValueError(f"replica groups over a sub-axis of mesh axis '{ref.name}' are not supported: {attr}")
            axes.append(str(ref.name))
        return MeshAxes(symbol(groups.mesh), tuple(axes))
    return [[v for v in row if v != -1] for row in int_rows(attr)]


@_accepts_text
def int_rows(attr: Any) -> List[List[int]]:
    """The rows of a 2-D dense int attribute (``source_target_pairs``, ``replica_groups``, ``padding``)."""
    if not _is(ir.DenseIntElementsAttr, attr):
        raise _cannot("a 2-D integer attribute", attr)
    shape = list(ir.ShapedType(ir.DenseIntElementsAttr(attr).type).shape)
    flat = int_list(attr)
    if len(shape) != 2 or shape[0] * shape[1] != len(flat):
        raise ValueError(f"expected a 2-D integer attribute, not {attr}")
    return [flat[i * shape[1]:(i + 1) * shape[1]] for i in range(shape[0])]


@_accepts_text
def channel_handle(attr: Any) -> Dict[str, int]:
    """``#stablehlo.channel_handle<handle = 1, type = 1>`` -> {"channel_id": 1, "channel_type": 1}."""
    if not _is(hlo.ChannelHandle, attr):
        raise _cannot("a channel handle", attr)
    handle = hlo.ChannelHandle(attr)
    return {"channel_id": int(handle.handle), "channel_type": int(handle.channel_type)}


@_accepts_text
def flag(attr: Any) -> bool:
    """A unit attribute (present = true) or a bool attribute."""
    return boolean(attr) if _is(ir.BoolAttr, attr) else True
