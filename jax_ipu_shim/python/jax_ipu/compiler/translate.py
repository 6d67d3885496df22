"""Walks a StableHLO module (func, stablehlo and chlo dialects) and builds the "jax-ipu-program" v1 document."""

from __future__ import annotations

import json
import os
import re
from typing import Any, Dict, List, Optional, Tuple

from jax._src.interpreters import mlir as jmlir
from jax._src.lib.mlir import ir

from . import attributes as A
from . import ops as O
from . import types as T
from .errors import CompileError, unsupported

FORMAT = "jax-ipu-program"
VERSION = 1
TERMINATORS = ("func.return", "stablehlo.return")
_FILE_LINE = re.compile(r'"([^"]+)":(\d+):\d+')


def compile_to_program(module_bytes: bytes, compile_options: bytes = b"") -> str:
    """Translates a StableHLO module (MLIR bytecode or text) into the IPU program's JSON document.

    ``compile_options`` (a serialized CompileOptionsProto, as PJRT passes it) gives the number of replicas (one per
    IPU, e.g. for ``pmap``); without it the module's ``mhlo.num_replicas`` does. Raises CompileError for a module
    the program format cannot express, and for a program partitioned over several IPUs (a sharded ``jit``).
    """
    with jmlir.make_ir_context():
        module = _parse(module_bytes)
        replicas, partitions = _replication(module, compile_options)
        if partitions > 1:
            raise CompileError(
                f"a jit sharded over {partitions} ipu devices (num_partitions={partitions}, e.g. jax.jit with "
                "shardings over a Mesh, pjit or shard_map) is not supported by the ipu backend: each IPU runs a whole "
                "program. Use jax.pmap over the ipu devices to run on several IPUs (with psum, pmean, all_gather, "
                "ppermute, all_to_all, ... between them), or jit on one ipu device."
            )
        program = _Translator(module).program()
        program["replicas"] = replicas
        return json.dumps(program, separators=(",", ":"))


def _replication(module: Any, compile_options: bytes) -> Tuple[int, int]:
    """(num_replicas, num_partitions) from the compile options, else from the module's attributes, else (1, 1)."""
    if compile_options:
        from jax._src.lib import xla_client

        options = xla_client.CompileOptions.ParseFromString(compile_options)
        return max(1, int(options.num_replicas)), max(1, int(options.num_partitions))
    attrs = A.named(module.operation.attributes)
    return tuple(  # type: ignore[return-value]
        max(1, A.integer(attrs[name])) if name in attrs else 1 for name in ("mhlo.num_replicas", "mhlo.num_partitions")
    )


def _parse(module_bytes: Any) -> Any:
    data = module_bytes.encode() if isinstance(module_bytes, str) else bytes(module_bytes)
    try:
        return ir.Module.parse(data)
    except Exception as error:  # the bindings raise a bare Exception/MLIRError with the diagnostics
        raise CompileError(f"the ipu compiler cannot parse the module jax produced: {error}") from error


def _types_text(op: Any) -> str:
    """``(tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>``, as MLIR prints an op's signature."""
    operands = ", ".join(str(v.type) for v in op.operands)
    results = ", ".join(str(v.type) for v in op.results)
    return f"({operands}) -> ({results})"


def _loc(op: Any) -> Optional[str]:
    text = str(op.location)
    match = _FILE_LINE.search(text)
    if match:
        return f"{os.path.basename(match.group(1))}:{match.group(2)}"
    name = re.match(r'loc\("([^"]*)"\)$', text)
    return name.group(1) if name else None


class _Translator:
    """One pass over a module. Value ids are numbered per function, regions included."""

    def __init__(self, module: Any):
        self.module = module
        self.funcs: Dict[str, Any] = {}
        for op in module.body.operations:
            if op.operation.name == "func.func":
                self.funcs[A.string(op.attributes["sym_name"])] = op.operation

    def program(self) -> Dict[str, Any]:
        if "main" not in self.funcs:
            raise CompileError("the module has no entry function `main`; the ipu compiler expects jax's modules")
        module_attrs = A.named(self.module.operation.attributes)
        name = A.string(module_attrs["sym_name"]) if "sym_name" in module_attrs else "main"
        program: Dict[str, Any] = {"format": FORMAT, "version": VERSION, "name": name, "entry": "main"}
        signature = ir.FunctionType(ir.TypeAttr(self.funcs["main"].attributes["function_type"]).value)
        if any(T.tensor_type(t) == (T.TOKEN, []) for t in list(signature.inputs) + list(signature.results)):
            # jax passes bool[0] dummies in their place (replace_tokens_with_dummy): this module is not jax's.
            raise CompileError("the entry function `main` takes or returns a !stablehlo.token; tokens can only be "
                               "used inside an ipu program (pass bool[0] arrays across its boundary, as jax does)")
        program["functions"] = [self._function(n, self.funcs[n]) for n in self._reachable("main")]
        aliases = self._aliases(self.funcs["main"])
        if aliases:
            program["aliases"] = aliases
        return program

    def _reachable(self, entry: str) -> List[str]:
        """The entry and every function it calls, transitively, in first-call order."""
        order, pending = [], [entry]
        while pending:
            name = pending.pop(0)
            if name in order:
                continue
            if name not in self.funcs:
                raise CompileError(f"func.call to @{name}, which the module does not define")
            order.append(name)
            pending.extend(self._callees(self.funcs[name]))
        return order

    def _callees(self, op: Any) -> List[str]:
        found = []
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    if inner.operation.name == "func.call":
                        found.append(A.symbol(inner.attributes["callee"]))
                    found.extend(self._callees(inner.operation))
        return found

    def _aliases(self, func: Any) -> List[List[int]]:
        attrs = A.named(func.attributes)
        if "arg_attrs" not in attrs:
            return []
        aliases = []
        for index, arg_attrs in enumerate(ir.ArrayAttr(attrs["arg_attrs"])):
            entries = A.named(ir.DictAttr(arg_attrs))
            if "tf.aliasing_output" in entries:
                aliases.append([index, A.integer(entries["tf.aliasing_output"])])
        return aliases

    # --- functions, regions, ops -------------------------------------------------------------------------------

    def _function(self, name: str, func: Any) -> Dict[str, Any]:
        self.ids: Dict[Any, int] = {}
        region = func.regions[0]
        if len(region.blocks) != 1:
            raise CompileError(f"func.func @{name} has {len(region.blocks)} blocks; the ipu compiler expects one")
        return {"name": name, **self._block(region.blocks[0], f"func.func @{name}")}

    def _block(self, block: Any, owner: str) -> Dict[str, Any]:
        params = [self._define(arg, owner) for arg in block.arguments]
        body, results = [], []
        for op in block.operations:
            op = op.operation
            if op.name in TERMINATORS:
                results = [self._use(v) for v in op.operands]
            else:
                body.append(self._op(op))
        return {"params": params, "body": body, "results": results}

    def _region(self, region: Any, owner: str) -> Dict[str, Any]:
        if len(region.blocks) != 1:
            raise CompileError(f"a region of {owner} has {len(region.blocks)} blocks; the ipu compiler expects one")
        return self._block(region.blocks[0], owner)

    def _define(self, value: Any, owner: str) -> Dict[str, Any]:
        if T.tensor_type(value.type) is None:
            raise unsupported(owner, str(value.type), "values of this type cannot be expressed as IPU tensors")
        self.ids[value] = len(self.ids)
        return {"id": self.ids[value], **T.describe(value.type)}

    def _use(self, value: Any) -> int:
        return self.ids[value]

    def _op(self, op: Any) -> Dict[str, Any]:
        mlir_name = op.name
        name = "call" if mlir_name == "func.call" else mlir_name.split(".", 1)[-1]
        if mlir_name.startswith("stablehlo.") and name in O.RESPELLED:
            return self._respell(op, name)
        if _is_sharding_annotation(op):  # one partition: the annotation is the identity
            return self._op_entry(op, "reshape")
        types = _types_text(op)
        for value in list(op.operands) + list(op.results):
            if T.tensor_type(value.type) is None:
                raise unsupported(mlir_name, types, f"{value.type} cannot be expressed as an IPU tensor")
        known = mlir_name.split(".", 1)[0] in ("stablehlo", "chlo", "func") and name in O.KNOWN_OPS
        operands = [self._use(v) for v in op.operands]
        try:
            attrs = O.read_attrs(name, A.named(op.attributes)) if known else {}
        except (ValueError, TypeError) as error:
            raise CompileError(f"cannot read the attributes of {mlir_name} with types {types}: {error}") from error
        # Regions before results: values of a region are defined before the op's results in program order.
        regions = [self._region(r, mlir_name) for r in op.regions] if known else []
        entry: Dict[str, Any] = {
            "op": name,
            "mlir": mlir_name,
            "operands": operands,
            "results": [self._define(v, mlir_name) for v in op.results],
            "attrs": attrs,
            "regions": regions,
        }
        if name in ("reduce", "reduce_window", "all_reduce", "reduce_scatter") and known:
            computation = _reduce_computation(op)
            if computation:
                attrs["computation"] = computation
        if name == "scatter" and known:
            computation = _scatter_computation(op)
            if computation:
                attrs["computation"] = computation
        loc = _loc(op)
        if loc:
            entry["loc"] = loc
        return entry

    def _respell(self, op: Any, name: str) -> Dict[str, Any]:
        """An op in an older spelling jax still emits (nested pmap), as the program op it means."""
        entry = self._op_entry(op, O.RESPELLED[name])
        attrs = O.read_attrs(name, A.named(op.attributes))
        if name == "cross-replica-sum":  # an all_reduce with an add body
            attrs["computation"] = "add"
        else:  # broadcast: new leading dimensions of the given sizes
            sizes, rank = attrs.pop("broadcast_sizes"), len(T.tensor_type(op.operands[0].type)[1])
            attrs["broadcast_dimensions"] = list(range(len(sizes), len(sizes) + rank))
        entry["attrs"] = attrs
        return entry

    def _op_entry(self, op: Any, name: str) -> Dict[str, Any]:
        """An op's entry without attrs or regions, its values checked and numbered."""
        types = _types_text(op)
        for value in list(op.operands) + list(op.results):
            if T.tensor_type(value.type) is None:
                raise unsupported(op.name, types, f"{value.type} cannot be expressed as an IPU tensor")
        entry: Dict[str, Any] = {
            "op": name, "mlir": op.name, "operands": [self._use(v) for v in op.operands],
            "results": [self._define(v, op.name) for v in op.results], "attrs": {}, "regions": [],
        }
        loc = _loc(op)
        if loc:
            entry["loc"] = loc
        return entry


_SHARDING_TARGETS = ("Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape")


def _is_sharding_annotation(op: Any) -> bool:
    """A custom_call jax emits for jax.sharding / shard_map (@Sharding, @SPMDFullToShardShape, @SPMDShardToFullShape).
    XLA's SPMD partitioner consumes them; compile_to_program refuses more than one partition, so here each is the
    identity on one array (the full and the shard shape of one partition have the same elements)."""
    if op.name != "stablehlo.custom_call" or len(op.operands) != 1 or len(op.results) != 1:
        return False
    attrs = A.named(op.attributes)
    return "call_target_name" in attrs and A.string(attrs["call_target_name"]) in _SHARDING_TARGETS


def _scatter_computation(op: Any) -> Optional[str]:
    """The scatter computation: "assign" when a single-operand scatter's body returns the update; the op name when it
    returns ``op(current, update)`` with the arguments in that order (a swapped body is left to the interpreter)."""
    if len(op.results) != 1 or len(op.regions) != 1:
        return None
    block = op.regions[0].blocks[0]
    args = list(block.arguments)
    body = [inner.operation for inner in block.operations]
    if len(args) != 2 or not body or body[-1].name != "stablehlo.return":
        return None
    ret = body[-1]
    if len(body) == 1:
        return "assign" if list(ret.operands) == [args[1]] else None
    if len(body) != 2:
        return None
    combine = body[0]
    name = combine.name.split(".", 1)[-1]
    if (
        not combine.name.startswith("stablehlo.")
        or name not in O.SCATTER_COMPUTATIONS
        or list(combine.operands) != [args[0], args[1]]
        or list(ret.operands) != [combine.results[0]]
    ):
        return None
    return name


def _reduce_computation(op: Any) -> Optional[str]:
    """The op name when a single-input reduce's body is ``return op(arg0, arg1)`` (either argument order)."""
    if len(op.results) != 1:
        return None
    block = op.regions[0].blocks[0]
    body = [inner.operation for inner in block.operations]
    if len(body) != 2 or body[1].name != "stablehlo.return":
        return None
    combine, ret = body
    name = combine.name.split(".", 1)[-1]
    args = list(block.arguments)
    operands = list(combine.operands)
    if (
        not combine.name.startswith("stablehlo.")
        or name not in O.REDUCE_COMPUTATIONS
        or len(operands) != 2
        or not ({operands[0], operands[1]} == {args[0], args[1]} and operands[0] != operands[1])
        or list(ret.operands) != [combine.results[0]]
    ):
        return None
    return name
