"""A program over several IPUs, partitioned as XLA partitions it for cpu: one IPU's share of the work.

jax hands a plugin the global program: a ``jit`` with shardings over a mesh (``NamedSharding``, ``pjit``,
``with_sharding_constraint``), a ``shard_map`` (a manual computation), a ``pmap`` of the current series, and any
mix of them, with ``num_partitions`` = N. XLA's SPMD partitioner (after GSPMD's sharding propagation in jaxlib
0.4.13, Shardy's in the current series) turns it into the program each of the N devices runs on its own shard of
every array, with the collectives the shardings need (all-gather, reduce-scatter, all-reduce, all-to-all,
collective-permute) and ``partition-id`` where a device's piece depends on where it sits.

The ipu backend reuses that pass rather than a partitioner of its own: the jaxlib in the user's interpreter ships
it, inside XLA:CPU's compiler. We compile the module for N cpu devices with the options jax gave us, let XLA dump
the module just after its ``spmd-partitioning`` pass (an HloModuleProto), read it back as StableHLO with the
importer jaxlib ships, and translate that as the program every IPU runs (Poplar's replication: partition p on the
p-th device of the assignment). The shardings of the entry's parameters and results come from the same module, so
what jax is told (and every result's ``.sharding``) is what cpu would say. The cpu compile's own result is
discarded; if it fails after the partitioner (an ipu-only custom call, say), the dump is all we need.
"""

from __future__ import annotations

import glob
import os
import tempfile
from typing import Any, Dict, List, NamedTuple

from .. import _jax
from .. import compile_options as options_proto
from .errors import CompileError

# XLA's name for the pass, as the dump file names it ("...after_spmd-partitioning...hlo.pb").
PARTITIONER_PASS = "spmd-partitioning"
# HloProto (what XLA dumps as .hlo.pb): hlo_module = 1
_HLO_PROTO_MODULE = 1
# OpSharding.ShardGroupType of a subgroup whose devices hold the same piece (REPLICATED = 0)
_SUBGROUP_REPLICATED = 0


class Partitioned(NamedTuple):
    """One device's program, as StableHLO for parse_module, and the sharding of each entry parameter and result
    in the program's form ({} for whole on every device; see tile_sharding)."""

    module: Any
    params: List[Dict[str, Any]]
    results: List[Dict[str, Any]]


def partition(module: bytes, compile_options: bytes, partitions: int, uses_shardy: bool) -> Partitioned:
    """XLA's partitioning of ``module`` (native MLIR bytecode or text) over ``partitions`` devices, with the
    serialized CompileOptionsProto jax passed to the plugin (empty: jax's defaults for a sharded jit)."""
    options = _jax.compile_options(compile_options)
    build = options.executable_build_options
    if not compile_options:
        build.use_spmd_partitioning = True
        if hasattr(build, "use_shardy_partitioner"):
            build.use_shardy_partitioner = uses_shardy
    with tempfile.TemporaryDirectory(prefix="jax-ipu-spmd-") as dump:
        # The overrides jax allows on an ipu compile were checked (translate.COMPILE_OPTIONS) and mean nothing to
        # XLA's partitioner: only ours go to the cpu compile.
        options.env_option_overrides = [
            ("xla_dump_to", dump), ("xla_dump_hlo_pass_re", PARTITIONER_PASS),
            ("xla_dump_hlo_as_proto", True), ("xla_dump_hlo_as_text", False),
        ]
        error = _jax.cpu_compile_to_dump(module, options, partitions)
        dumped = sorted(glob.glob(os.path.join(dump, f"*after_{PARTITIONER_PASS}*.hlo.pb")))
        if not dumped:
            raise CompileError(f"XLA's SPMD partitioner could not partition the program over {partitions} ipu "
                               f"devices: {error or 'it wrote no partitioned module'}")
        with open(dumped[-1], "rb") as file:
            proto = _hlo_module_proto(file.read())
    hlo = _jax.hlo_module(proto)
    params = [tile_sharding(s) for s in hlo.spmd_parameters_shardings]
    output = _jax.tiled_sharding(hlo.spmd_output_sharding)
    results = [tile_sharding(s) for s in output.tuple_elements() or [output]]
    return Partitioned(_jax.hlo_to_stablehlo(proto), params, results)


def _hlo_module_proto(hlo_proto: bytes) -> bytes:
    for number, _, value in options_proto._fields(hlo_proto):
        if number == _HLO_PROTO_MODULE:
            return bytes(value)  # type: ignore[arg-type]
    raise CompileError("XLA's dump of the partitioned program holds no module")


def tile_sharding(op_sharding: Any) -> Dict[str, Any]:
    """An OpSharding (or HloSharding) in the program's form (ipu::TileSharding): dimension d in ``tile[d]`` pieces, piece after
    piece in row-major order of ``tile`` going to ``devices`` (partition numbers); with ``replicate_last``, a last
    tile dimension counting the devices that hold the same piece. {} for an array whole on every device."""
    return _tiles(_jax.tiled_sharding(op_sharding))


def _tiles(sharding: Any) -> Dict[str, Any]:
    if sharding.is_replicated():
        return {}
    tile = [int(t) for t in sharding.tile_assignment_dimensions()]
    devices = [int(d) for d in sharding.tile_assignment_devices()]
    subgroups = [int(getattr(t, "value", t)) for t in sharding.subgroup_types()]
    replicate_last = bool(sharding.replicate_on_last_tile_dim()) or subgroups == [_SUBGROUP_REPLICATED]
    if not tile or (subgroups and subgroups != [_SUBGROUP_REPLICATED]):
        raise CompileError(f"an entry value of the partitioned program has the sharding {sharding}, which the ipu "
                           "backend cannot hand to jax (only tiled, optionally partly replicated, shardings)")
    return {"tile": tile, "devices": devices, "replicate_last": replicate_last}
