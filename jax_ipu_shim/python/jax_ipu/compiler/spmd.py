"""Programs over a device mesh (the current series' pmap and shard_map): Shardy's meshes, shardings and manual
computations, read through the ``sdy`` and ``stablehlo`` attribute classes.

jax 0.12 lowers ``pmap(f, axis_name="i")`` over N devices as a jit with ``num_partitions = N``: ``main`` takes and
returns global arrays, and its body is one ``sdy.manual_computation`` whose region is ``f`` on one device's shard,
with manual axes covering the whole mesh. Its collectives name their groups by mesh axes
(``#stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = ["i"]>``) or by device ids. At run time PJRT hands each
device its shard and takes back its shard of every result, so the program one IPU runs is the region: an IPU
program replicated over the N IPUs (Poplar's replication), partition p on the p-th device of the assignment. A jit of
global arrays with shardings and no manual computation (what XLA's SPMD partitioner would split) runs whole on every
IPU, which gathers its split inputs and keeps its piece of each result (translate._mesh_entry). A shard_map with
auto axes, or among other ops, is refused.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from jax._src.lib.mlir import ir

from . import attributes as A
from .errors import CompileError

try:  # the Shardy dialect's bindings: the current series only (0.4.13 has no sdy dialect, hence no meshes)
    from jax._src.lib.mlir.dialects import sdy
except ImportError:  # pragma: no cover - jaxlib 0.4.13
    sdy = None

MANUAL_COMPUTATION = "sdy.manual_computation"


class Mesh(NamedTuple):
    """A device mesh: its axes in order, (name, size), and the logical device id of each position in row-major
    order of the axes (``device_ids``; absent: 0, 1, ...)."""

    axes: Tuple[Tuple[str, int], ...]
    device_ids: Tuple[int, ...]

    @property
    def size(self) -> int:
        return math.prod(size for _, size in self.axes)

    def axis_size(self, name: str) -> int:
        for axis, size in self.axes:
            if axis == name:
                return size
        raise CompileError(f"the mesh {self.describe()} has no axis '{name}'")

    def ways(self, axes: Sequence[str]) -> int:
        """Into how many pieces splitting over ``axes`` cuts an array."""
        return math.prod(self.axis_size(name) for name in axes)

    def device_at(self, coords: Dict[str, int]) -> int:
        """The logical device id at the given coordinate on every axis (row-major over the axes)."""
        position = 0
        for name, size in self.axes:
            position = position * size + coords[name]
        return self.device_ids[position] if self.device_ids else position

    def describe(self) -> str:
        return "[" + ", ".join(f'"{name}"={size}' for name, size in self.axes) + "]"

    def groups(self, axes: Sequence[str]) -> List[List[int]]:
        """The device groups of a collective over mesh ``axes``: devices that agree on every other axis form one
        group, ordered row-major over ``axes`` in the order given (as XLA expands replica_group_mesh_axes)."""
        others = [name for name, _ in self.axes if name not in axes]
        groups = []
        for fixed in itertools.product(*(range(self.axis_size(name)) for name in others)):
            group = []
            for varying in itertools.product(*(range(self.axis_size(name)) for name in axes)):
                group.append(self.device_at({**dict(zip(others, fixed)), **dict(zip(axes, varying))}))
            groups.append(group)
        return groups


def read_mesh(attr: Any) -> Mesh:
    """A ``#sdy.mesh<["i"=2, "j"=4]>`` (sdy.MeshAttr) as a Mesh."""
    mesh = sdy.MeshAttr(attr)
    axes = tuple((str(sdy.MeshAxisAttr(a).name), int(sdy.MeshAxisAttr(a).size)) for a in mesh.axes)
    return Mesh(axes, tuple(int(d) for d in mesh.device_ids))


def module_meshes(module: Any) -> Dict[str, Mesh]:
    """The module's ``sdy.mesh`` symbols by name."""
    meshes: Dict[str, Mesh] = {}
    for op in module.body.operations:
        op = op.operation
        if op.name == "sdy.mesh":
            meshes[A.string(op.attributes["sym_name"])] = read_mesh(op.attributes["mesh"])
    return meshes


class Sharding(NamedTuple):
    mesh: Mesh
    dims: Tuple[Tuple[str, ...], ...]  # the mesh axes each dimension is split over, major to minor


def read_sharding(attr: Any, meshes: Dict[str, Mesh]) -> Sharding:
    """A ``#sdy.sharding<@mesh, [{"i"}, {}]>`` (sdy.TensorShardingAttr)."""
    sharding = sdy.TensorShardingAttr(attr)
    where = sharding.mesh_or_ref
    if A.is_a(ir.FlatSymbolRefAttr, where):
        name = A.symbol(where)
        if name not in meshes:
            raise CompileError(f"a sharding names the mesh @{name}, which the module does not define")
        mesh = meshes[name]
    else:
        mesh = read_mesh(where)
    dims = []
    for dim in sharding.dimension_shardings:
        axes = []
        for ref in sdy.DimensionShardingAttr(dim).axes:
            ref = sdy.AxisRefAttr(ref)
            if ref.sub_axis_info is not None:
                raise CompileError(f"a sharding over a sub-axis of '{ref.name}' of the mesh {mesh.describe()}: the "
                                   "ipu backend runs shardings over whole mesh axes")
            axes.append(str(ref.name))
        dims.append(tuple(axes))
    return Sharding(mesh, tuple(dims))


def shard_shape(shape: Sequence[int], sharding: Optional[Sharding]) -> List[int]:
    """The shape of one device's shard of an array of ``shape``."""
    if sharding is None:
        return list(shape)
    out = list(shape)
    for dim, axes in enumerate(sharding.dims):
        ways = sharding.mesh.ways(axes)
        if dim >= len(out) or out[dim] % ways:
            raise CompileError(f"an array of shape {list(shape)} cannot be split {ways} ways along dimension {dim}")
        out[dim] //= ways
    return out


def manual_axes(op: Any) -> List[str]:
    """The manual axes of an ``sdy.manual_computation`` (sdy.ManualAxesAttr reads as a sequence of names)."""
    attr = sdy.ManualAxesAttr(op.attributes["manual_axes"])
    return [str(attr[i]) for i in range(len(attr))]


def mesh_computation(main: Any, partitions: int, meshes: Dict[str, Mesh]) -> Optional[Any]:
    """The ``sdy.manual_computation`` that is the whole of ``main`` (pmap, a jit of a shard_map), manual over every
    axis of a mesh of ``partitions`` devices; None when main has none (a jit of global arrays: translate gathers
    them). Raises CompileError for a shard_map among other ops or with auto axes."""
    block = main.regions[0].blocks[0]
    ops = [op.operation for op in block.operations]
    computations = [op for op in ops if op.name == MANUAL_COMPUTATION]
    if not computations:
        return None
    rest = sorted({op.name for op in ops if op.name not in (MANUAL_COMPUTATION, "func.return")})
    if len(computations) != 1 or rest:
        what = (f"operations outside it ({', '.join(rest)})" if rest else f"{len(computations)} of them")
        raise CompileError(
            f"a jit over {partitions} ipu devices with a shard_map and {what} is not supported by the ipu backend: "
            "each IPU runs a whole program, so a jit with a shard_map must be that shard_map alone (jit it on "
            "its own), with every mesh axis manual.")
    op = computations[0]
    manual = manual_axes(op)
    shardings = sdy.TensorShardingPerValueAttr(op.attributes["in_shardings"]).shardings
    mesh = next((read_sharding(s, meshes).mesh for s in shardings), None)
    if mesh is None:
        mesh = next(iter(meshes.values()), Mesh((), ()))
    auto = [name for name, size in mesh.axes if name not in manual and size > 1]
    if auto or mesh.size != partitions:
        raise CompileError(
            f"a shard_map over the mesh {mesh.describe()} with manual axes {manual} on {partitions} ipu devices: "
            "the ipu backend runs shard_map bodies manual over every mesh axis (no auto axes), on a mesh of all the "
            "devices of the jit")
    return op


def _own_shardings(main: Any, key: str, count: int, meshes: Dict[str, Mesh]) -> List[Optional[Sharding]]:
    """The ``sdy.sharding`` main's ``arg_attrs`` or ``res_attrs`` give each of its ``count`` values, if any."""
    attrs = A.named(main.attributes)
    listed = list(ir.ArrayAttr(attrs[key])) if key in attrs else []
    out: List[Optional[Sharding]] = []
    for index in range(count):
        entries = A.named(ir.DictAttr(listed[index])) if index < len(listed) else {}
        out.append(read_sharding(entries["sdy.sharding"], meshes) if "sdy.sharding" in entries else None)
    return out


def entry_shardings(main: Any, computation: Optional[Any], meshes: Dict[str, Mesh]) -> List[Optional[Sharding]]:
    """How each of main's parameters is split over the mesh: its own ``sdy.sharding`` (pmap, jit with
    in_shardings), else that of the manual computation's operand it is (a jit of a shard_map), else replicated."""
    block = main.regions[0].blocks[0]
    own = _own_shardings(main, "arg_attrs", len(block.arguments), meshes)
    operand_shardings = [] if computation is None else \
        sdy.TensorShardingPerValueAttr(computation.attributes["in_shardings"]).shardings
    operands = [] if computation is None else list(computation.operands)
    out: List[Optional[Sharding]] = []
    for arg, sharding in zip(block.arguments, own):
        uses = [k for k, operand in enumerate(operands) if operand == arg]
        if sharding is None and uses:
            sharding = read_sharding(operand_shardings[uses[0]], meshes)
        out.append(sharding)
    return out


def result_shardings(main: Any, computation: Optional[Any], params: List[Optional[Sharding]],
                     meshes: Dict[str, Mesh]) -> List[Optional[Sharding]]:
    """How each of main's results is split over the mesh: its own ``sdy.sharding``, else that of the manual
    computation's result it is, else replicated (a parameter returned as it is keeps ``params``' sharding)."""
    out_shardings = [] if computation is None else \
        sdy.TensorShardingPerValueAttr(computation.attributes["out_shardings"]).shardings
    results = [] if computation is None else list(computation.results)
    block = main.regions[0].blocks[0]
    returned = list(block.operations)[-1].operation.operands
    own = _own_shardings(main, "res_attrs", len(returned), meshes)
    out: List[Optional[Sharding]] = []
    for value, sharding in zip(returned, own):
        if sharding is not None:
            out.append(sharding)
        elif value in results:
            out.append(read_sharding(out_shardings[results.index(value)], meshes))
        elif value in list(block.arguments):
            out.append(params[list(block.arguments).index(value)])
        else:
            out.append(None)
    return out


def tile_sharding(sharding: Optional[Sharding], rank: int) -> Dict[str, Any]:
    """The program's form of a sharding (jax's tiled HloSharding; ipu::TileSharding): dimension d in ``tile[d]``
    pieces, piece after piece in row-major order of ``tile`` going to ``devices``; with ``replicate_last``, a last
    tile dimension counting the devices that hold the same piece. {} for an array whole on every device."""
    dims = split_dims(sharding, rank)
    used = {a for axes in dims for a in axes}
    if sharding is None or not used:
        return {}
    mesh = sharding.mesh
    rest = tuple(name for name, size in mesh.axes if name not in used and size > 1)
    groups = dims + ([rest] if rest else [])
    tile = [mesh.ways(axes) for axes in groups]
    devices = []
    for piece in itertools.product(*(range(t) for t in tile)):
        coords = {name: 0 for name, _ in mesh.axes}
        for axes, index in zip(groups, piece):
            for name in reversed(axes):  # the piece index of a dimension is row-major over its axes
                index, coords[name] = divmod(index, mesh.axis_size(name))
        devices.append(mesh.device_at(coords))
    return {"tile": tile, "devices": devices, "replicate_last": bool(rest)}


def split_dims(sharding: Optional[Sharding], rank: int) -> List[Tuple[str, ...]]:
    """For each dimension, the mesh axes (of size > 1) it is split over, major to minor."""
    if sharding is None:
        return [()] * rank
    sizes = dict(sharding.mesh.axes)
    return [tuple(a for a in sharding.dims[d] if sizes[a] > 1) if d < len(sharding.dims) else () for d in range(rank)]


def coordinate_strides(mesh: Mesh, partitions: int, what: str) -> Dict[str, Tuple[int, int]]:
    """{axis: (stride, size)}: the coordinate of a device along an axis is (partition_id // stride) % size, for
    a mesh of all ``partitions`` devices in partition order."""
    if mesh.size != partitions or (mesh.device_ids and list(mesh.device_ids) != list(range(mesh.size))):
        raise CompileError(f"{what}: the mesh {mesh.describe()} must hold the jit's {partitions} ipu devices in "
                           "order (jax.make_mesh or Mesh(devices) in device order)")
    out, stride = {}, 1
    for name, size in reversed(mesh.axes):
        out[name] = (stride, size)
        stride *= size
    return out
