"""Meshes of the current series (Shardy's ``sdy.mesh``), read through the ``sdy`` attribute classes.

A program over several devices is partitioned by XLA (partitioner.py) before it is translated, and its collectives
then name their groups by device. What is left to read here is a program on one device that still speaks of a mesh:
a ``shard_map`` over a mesh of one device (its ``sdy.manual_computation`` is inlined by translate) and collectives
that name their groups by mesh axes (``#stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = ["i"]>``).
"""

from __future__ import annotations

import itertools
from typing import Any, Dict, List, NamedTuple, Sequence, Tuple

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

    def axis_size(self, name: str) -> int:
        for axis, size in self.axes:
            if axis == name:
                return size
        raise CompileError(f"the mesh {self.describe()} has no axis '{name}'")

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
