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
import re
import sys
import tempfile
import warnings
from typing import Any, Dict, Iterator, List, NamedTuple, Tuple

from .. import _jax
from . import compile_options as options_proto
from .errors import CompileError
from .ops import CALL_TARGET

# XLA's name for the pass, as the dump file names it ("...after_spmd-partitioning...hlo.pb").
PARTITIONER_PASS = "spmd-partitioning"
# jax's host callback on cpu, whose placement XLA's sharding passes keep (xla/ffi's python callback handler)
XLA_CALLBACK_TARGET = "xla_ffi_python_cpu_callback"
# HloProto (what XLA dumps as .hlo.pb): hlo_module = 1
_HLO_PROTO_MODULE = 1
# HloModuleProto.host_program_shape: a ProgramShapeProto (parameters = 1, result = 2: a ShapeProto whose
# tuple_shapes = 4 are the entry's results; element_type = 2: TUPLE 13, TOKEN 17)
_HLO_MODULE_PROGRAM_SHAPE = 4
_TUPLE, _TOKEN = 13, 17
# OpSharding.Type of a last tile dimension whose devices hold the same piece (REPLICATED = 0), or partial sums of
# it (UNREDUCED = 6: jax's unreduced arrays, shard_map's out_specs with unreduced axes); an array can have both
# (last_tile_dims={unreduced, replicated}: partial sums over one mesh axis, copies over another)
_SUBGROUP_REPLICATED = 0
_SUBGROUP_UNREDUCED = 6


class Partitioned(NamedTuple):
    """One device's program, as StableHLO for parse_module, the sharding of each entry parameter and result in the
    program's form ({} for whole on every device; see tile_sharding), and the partitioner's warnings."""

    module: Any
    params: List[Dict[str, Any]]
    results: List[Dict[str, Any]]
    warnings: List[str]  # what XLA's partitioner said (arrays it made whole where the shardings did not say how)
    # XLA's partitioned HloModuleProto without its input/output aliases (8) and SPMD shardings (12, 14), which the
    # program states for itself: PJRT hands it to jax as the compiled program (as_text shows XLA's collectives)
    hlo_module: bytes = b""
    # how many parameters and results its entry has (host_program_shape), for checking it against the program's
    hlo_signature: Tuple[int, int] = (-1, -1)


def partition(module: Any, compile_options: bytes, partitions: int, uses_shardy: bool) -> Partitioned:
    """XLA's partitioning of ``module`` (jax's, parsed; its host callbacks are renamed in place) over ``partitions``
    devices, with the serialized CompileOptionsProto jax passed to the plugin (empty: jax's defaults for a sharded
    jit)."""
    from jax._src.interpreters import mlir as jax_mlir

    # XLA keeps the placement jax gives a host callback (a maximal sharding: one device runs it) only for the
    # custom call targets of jax's own callbacks; ours goes through the partitioner under that name.
    rename_custom_calls(module, CALL_TARGET, XLA_CALLBACK_TARGET)
    module = jax_mlir.module_to_bytecode(module)
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
            # the cpu machine code nobody runs: as cheap as LLVM makes it (halves the time of the cpu compile)
            *_jax.cheap_cpu_codegen(),
        ]
        with _StderrOfXla() as xla_log:
            error = _jax.cpu_compile_to_dump(module, options, partitions)
        dumped = sorted(glob.glob(os.path.join(dump, f"*after_{PARTITIONER_PASS}*.hlo.pb")))
        if not dumped:
            raise CompileError(f"XLA's SPMD partitioner could not partition the program over {partitions} ipu "
                               f"devices: {error or 'it wrote no partitioned module'}")
        with open(dumped[-1], "rb") as file:
            proto = _hlo_module_proto(file.read())
    for message in xla_log.partitioner_messages:
        # XLA's words (e.g. "Involuntary full rematerialization ... from sharding {devices=[2,2]0,1,2,3} to
        # {maximal device=0}"): an array made whole on every IPU (or moved to one) where the shardings did not say how
        warnings.warn(f"ipu: XLA's SPMD partitioner, partitioning the program over {partitions} ipu devices: "
                      f"{message}", stacklevel=2)
    hlo = _jax.hlo_module(proto)
    # (jaxlib 0.4.13 leaves them unset for a program without parameters, or results: translate pads with {})
    params = [tile_sharding(s) for s in hlo.spmd_parameters_shardings or []]
    results = []
    if hlo.spmd_output_sharding is not None:
        output = _jax.tiled_sharding(hlo.spmd_output_sharding)
        results = [tile_sharding(s) for s in output.tuple_elements() or [output]]
    return Partitioned(_jax.hlo_to_stablehlo(proto), params, results, xla_log.partitioner_messages,
                       options_proto.without_fields(proto, (8, 12, 14)), _entry_signature(proto))


def _entry_signature(proto: bytes) -> Tuple[int, int]:
    """How many parameters and results the entry of an HloModuleProto has, when each is an array (the program writes
    a token as an empty array, which XLA's module would contradict); else (-1, -1)."""
    shape = options_proto.field(proto, _HLO_MODULE_PROGRAM_SHAPE)
    params, result = options_proto.messages(shape, 1), options_proto.field(shape, 2)
    elements = options_proto.messages(result, 4)
    if not elements and options_proto.integer(result, 2) != _TUPLE:
        elements = [result]
    if any(options_proto.integer(s, 2) in (_TUPLE, _TOKEN) for s in params + elements):
        return (-1, -1)
    return (len(params), len(elements))


class _StderrOfXla:
    """Captures what XLA logs to the process's stderr (file descriptor 2) during the cpu compile: the partitioner's
    own warnings, which become Python warnings, and the complaints of a cpu code generator that meets the ipu's
    custom calls in a program that never runs on cpu, which are dropped. Anything else is written back to stderr."""

    _PARTITIONER = re.compile(r"spmd_partitioner\.cc:\d+\] (?:\[spmd\] )?(.*)")
    _CPU_CODEGEN = ("simple_orc_jit", "JIT session error", "Symbols not found", "Unable to resolve runtime symbol")

    def __enter__(self) -> "_StderrOfXla":
        self.partitioner_messages: List[str] = []
        sys.stderr.flush()
        self._saved = os.dup(2)
        self._file = tempfile.TemporaryFile()
        os.dup2(self._file.fileno(), 2)
        return self

    def __exit__(self, *exc: Any) -> None:
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._file.seek(0)
        text = self._file.read().decode("utf-8", errors="replace")
        self._file.close()
        kept = []
        for line in text.splitlines():
            found = self._PARTITIONER.search(line)
            if found:
                self.partitioner_messages.append(found.group(1).strip())
            elif not any(noise in line for noise in self._CPU_CODEGEN):
                kept.append(line)
        if kept:
            sys.stderr.write("\n".join(kept) + "\n")


def custom_calls(module: Any, target: str) -> Iterator[Any]:
    """Every ``stablehlo.custom_call`` to ``target`` in ``module``, nested ones included, in program order."""
    return _custom_calls_in(module.operation, target)


def _custom_calls_in(op: Any, target: str) -> Iterator[Any]:
    from jax._src.lib.mlir import ir

    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                inner = inner.operation
                if inner.name == "stablehlo.custom_call" and \
                        ir.StringAttr(inner.attributes["call_target_name"]).value == target:
                    yield inner
                yield from _custom_calls_in(inner, target)


def rename_custom_calls(module: Any, old: str, new: str) -> None:
    """Sets the call_target_name of every ``stablehlo.custom_call`` to ``old`` in ``module`` to ``new``."""
    from jax._src.lib.mlir import ir

    for op in list(custom_calls(module, old)):
        op.attributes["call_target_name"] = ir.StringAttr.get(new)


def _hlo_module_proto(hlo_proto: bytes) -> bytes:
    found = options_proto.messages(hlo_proto, _HLO_PROTO_MODULE)
    if not found:
        raise CompileError("XLA's dump of the partitioned program holds no module")
    return found[0]


def tile_sharding(op_sharding: Any) -> Dict[str, Any]:
    """An OpSharding (or HloSharding) in the program's form (ipu::TileSharding): dimension d in ``tile[d]`` pieces,
    piece after piece in row-major order of ``tile`` going to ``devices`` (partition numbers); with ``replicate_last``,
    a last tile dimension counting the devices that hold the same piece. {} for an array whole on every device."""
    return _tiles(_jax.tiled_sharding(op_sharding))


def _tiles(sharding: Any) -> Dict[str, Any]:
    if getattr(sharding, "is_unreduced", None) is not None and sharding.is_unreduced():
        return {"unreduced": True}  # every device holds a partial sum of the whole array (XLA's {unreduced})
    if sharding.is_replicated():
        return {}
    tile = [int(t) for t in sharding.tile_assignment_dimensions()]
    devices = [int(d) for d in sharding.tile_assignment_devices()]
    subgroups = [int(getattr(t, "value", t)) for t in sharding.subgroup_types()]
    replicate_last = bool(sharding.replicate_on_last_tile_dim()) or subgroups == [_SUBGROUP_REPLICATED]
    if not tile or any(s not in (_SUBGROUP_REPLICATED, _SUBGROUP_UNREDUCED) for s in subgroups):
        raise CompileError(f"an entry value of the partitioned program has the sharding {sharding}, which the ipu "
                           "backend cannot hand to jax (only tiled shardings, optionally partly replicated or "
                           "unreduced)")
    out = {"tile": tile, "devices": devices, "replicate_last": replicate_last}
    if _SUBGROUP_UNREDUCED in subgroups:  # jax's unreduced arrays: the kinds of the last tile dimensions, in order
        out["last_tile_dims"] = subgroups
    return out
