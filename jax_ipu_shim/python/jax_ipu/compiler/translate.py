"""Walks a StableHLO module (func, stablehlo and chlo dialects) and builds the "jax-ipu-program" v1 document."""

from __future__ import annotations

import base64
import json
import os
import re
import struct
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


# The binary container the plugin hands to the emulator (parsed by program.cc): this magic, the u64 size of the JSON
# document, the document, the u64 number of blobs, then each blob as a u64 size and its raw bytes (little-endian).
CONTAINER_MAGIC = b"JIPUPRG1"
# Constants of at least this many bytes travel as blobs; smaller ones stay inline as base64 (readable, and what a
# reduce body's scalar constants are read as).
BLOB_MIN_BYTES = 64


class Blob(bytes):
    """A constant's raw bytes in the program document: base64 in the JSON text, a blob in the binary container."""


def compile_to_program(module_bytes: bytes, compile_options: bytes = b"") -> str:
    """Translates a StableHLO module (MLIR bytecode or text) into the IPU program's JSON document (constants in
    base64): the readable form, which the emulator reads too.

    ``compile_options`` (a serialized CompileOptionsProto, as PJRT passes it) gives the number of replicas (one per
    IPU, e.g. for ``pmap``); without it the module's ``mhlo.num_replicas`` does. Raises CompileError for a module
    the program format cannot express, and for a program partitioned over several IPUs (a sharded ``jit``).
    """
    return encode(translate(module_bytes, compile_options), binary=False)  # type: ignore[return-value]


def compile_to_binary(module_bytes: bytes, compile_options: bytes = b"") -> bytes:
    """As compile_to_program, in the binary container the plugin passes to the emulator (constants as raw blobs)."""
    return encode(translate(module_bytes, compile_options), binary=True)  # type: ignore[return-value]


def encode(program: Dict[str, Any], binary: bool) -> Any:
    """The one writer of the program format: JSON text (str), or the binary container (bytes) when ``binary``."""
    blobs: List[bytes] = []

    def blob(value: Any) -> Any:
        if not isinstance(value, Blob):
            raise TypeError(f"{type(value).__name__} is not part of the program format")
        if binary and len(value) >= BLOB_MIN_BYTES:
            blobs.append(value)
            return {"blob": len(blobs) - 1}
        return base64.b64encode(value).decode("ascii")

    text = json.dumps(program, separators=(",", ":"), default=blob)
    if not binary:
        return text
    document = text.encode("utf-8")
    parts = [CONTAINER_MAGIC, struct.pack("<Q", len(document)), document, struct.pack("<Q", len(blobs))]
    for data in blobs:
        parts += [struct.pack("<Q", len(data)), data]
    return b"".join(parts)


def decode(data: Any) -> Dict[str, Any]:
    """The program document of JSON text or a binary container, blobs back in base64 (for tests and tools)."""
    if not bytes(data[:len(CONTAINER_MAGIC)]) == CONTAINER_MAGIC:
        return json.loads(data)
    data = bytes(data)
    (size,) = struct.unpack_from("<Q", data, 8)
    program = json.loads(data[16:16 + size].decode("utf-8"))
    pos = 16 + size
    (count,) = struct.unpack_from("<Q", data, pos)
    pos += 8
    blobs = []
    for _ in range(count):
        (length,) = struct.unpack_from("<Q", data, pos)
        blobs.append(base64.b64encode(data[pos + 8:pos + 8 + length]).decode("ascii"))
        pos += 8 + length

    def inline(value: Any) -> Any:
        if isinstance(value, dict):
            if list(value) == ["blob"]:
                return blobs[value["blob"]]
            return {k: inline(v) for k, v in value.items()}
        if isinstance(value, list):
            return [inline(v) for v in value]
        return value

    return inline(program)


def translate(module_bytes: Any, compile_options: bytes = b"") -> Dict[str, Any]:
    """The program document of a module, as Python values (constants as Blob)."""
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
        return program


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
        self.types: Dict[Any, Optional[T.TensorType]] = {}
        self.called: List[str] = []  # callees of func.call ops, in the order the walk meets them
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
        program["functions"] = self._functions("main")
        aliases = self._aliases(self.funcs["main"])
        if aliases:
            program["aliases"] = aliases
        return program

    def _functions(self, entry: str) -> List[Dict[str, Any]]:
        """The entry and every function it calls, transitively, in first-call order: each function's calls are
        collected while it is translated, so the module is walked once."""
        done: List[str] = []
        pending = [entry]
        functions = []
        while pending:
            name = pending.pop(0)
            if name in done:
                continue
            if name not in self.funcs:
                raise CompileError(f"func.call to @{name}, which the module does not define")
            done.append(name)
            self.called = []
            functions.append(self._function(name, self.funcs[name]))
            pending.extend(self.called)
        return functions

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
            elif op.name == "stablehlo.sort" and any(self._type(v.type)[0] == "c64" for v in op.operands):
                body.extend(self._complex_sort(self._op(op)))
            else:
                body.append(self._op(op))
        return {"params": params, "body": body, "results": results}

    def _region(self, region: Any, owner: str) -> Dict[str, Any]:
        if len(region.blocks) != 1:
            raise CompileError(f"a region of {owner} has {len(region.blocks)} blocks; the ipu compiler expects one")
        return self._block(region.blocks[0], owner)

    def _type(self, mlir_type: Any) -> Optional[T.TensorType]:
        """T.tensor_type, once per distinct type of the module."""
        # Types are uniqued in the context and hash as such: no printing to look one up.
        if mlir_type not in self.types:
            self.types[mlir_type] = T.tensor_type(mlir_type)
        return self.types[mlir_type]

    def _check(self, op: Any) -> None:
        for value in list(op.operands) + list(op.results):
            if self._type(value.type) is None:
                raise unsupported(op.name, _types_text(op), f"{value.type} cannot be expressed as an IPU tensor")

    def _define(self, value: Any, owner: str) -> Dict[str, Any]:
        tensor = self._type(value.type)
        if tensor is None:
            raise unsupported(owner, str(value.type), "values of this type cannot be expressed as IPU tensors")
        self.ids[value] = len(self.ids)
        return {"id": self.ids[value], "dtype": tensor[0], "shape": list(tensor[1])}

    def _use(self, value: Any) -> int:
        return self.ids[value]

    def _op(self, op: Any) -> Dict[str, Any]:
        mlir_name = op.name
        name = "call" if mlir_name == "func.call" else mlir_name.split(".", 1)[-1]
        if mlir_name.startswith("stablehlo.") and name in O.RESPELLED:
            return self._respell(op, name)
        if _is_sharding_annotation(op):  # one partition: the annotation is the identity
            return self._op_entry(op, "reshape")
        self._check(op)
        known = mlir_name.split(".", 1)[0] in ("stablehlo", "chlo", "func") and O.is_known(name)
        operands = [self._use(v) for v in op.operands]
        try:
            attrs = O.read_attrs(op.attributes) if known else {}
        except (ValueError, TypeError) as error:
            raise CompileError(f"cannot read the attributes of {mlir_name} with types {_types_text(op)}: {error}") from error
        # Regions before results: values of a region are defined before the op's results in program order.
        if name == "call" and "callee" in attrs:
            self.called.append(attrs["callee"])
        regions = [self._region(r, mlir_name) for r in op.regions] if known else []
        entry: Dict[str, Any] = {
            "op": name,
            "mlir": mlir_name,
            "operands": operands,
            "results": [self._define(v, mlir_name) for v in op.results],
            "attrs": attrs,
            "regions": regions,
        }
        if name in _REDUCING and known:
            computation = _body_computation(op, assign=name == "scatter")
            if computation:
                attrs["computation"] = computation
        loc = _loc(op)
        if loc:
            entry["loc"] = loc
        return entry

    def _fresh(self, dtype: str, shape: List[int]) -> Dict[str, Any]:
        """A value of the program that the module does not have (numbered after the module's values)."""
        key = object()
        self.ids[key] = len(self.ids)
        return {"id": self.ids[key], "dtype": dtype, "shape": list(shape)}

    def _complex_sort(self, sort: Dict[str, Any]) -> List[Dict[str, Any]]:
        """A sort of c64 operands as a sort of their f32 real and imaginary parts. jax's comparators read a complex
        operand only through stablehlo.real and stablehlo.imag (lexicographic order), so each c64 operand becomes two
        f32 operands, each pair of its comparator arguments four, and its real/imag ops copies of them; the sorted
        parts are put back together with stablehlo.complex. Emulator and cost model see an ordinary f32 sort."""
        where = f" (at {sort['loc']})" if "loc" in sort else ""
        before: List[Dict[str, Any]] = []
        after: List[Dict[str, Any]] = []
        operands, results = [], []
        comparator = sort["regions"][0]
        params: List[Dict[str, Any]] = []
        parts: Dict[int, Dict[str, int]] = {}  # comparator argument of a c64 operand -> its "real"/"imag" argument
        for k, (operand, result) in enumerate(zip(sort["operands"], sort["results"])):
            lhs, rhs = comparator["params"][2 * k], comparator["params"][2 * k + 1]
            if result["dtype"] != "c64":
                operands.append(operand)
                results.append(result)
                params += [lhs, rhs]
                continue
            split = {}
            for part in ("real", "imag"):
                value = self._fresh("f32", result["shape"])
                before.append({"op": part, "mlir": f"stablehlo.{part}", "operands": [operand], "results": [value],
                               "attrs": {}, "regions": []})
                operands.append(value["id"])
                results.append(self._fresh("f32", result["shape"]))
                split[part] = (self._fresh("f32", []), self._fresh("f32", []))
                params += list(split[part])
            parts[lhs["id"]] = {part: split[part][0]["id"] for part in split}
            parts[rhs["id"]] = {part: split[part][1]["id"] for part in split}
            after.append({"op": "complex", "mlir": "stablehlo.complex", "operands": [results[-2]["id"], results[-1]["id"]],
                          "results": [result], "attrs": {}, "regions": []})
        body = []
        for inner in comparator["body"]:
            read = [v for v in inner["operands"] if v in parts]
            if read and inner["op"] not in ("real", "imag"):
                raise CompileError(f"sort of complex<f32> values: its comparator applies {inner['mlir']} to a complex "
                                   f"argument; the ipu sorts complex values by their real and imaginary parts (as "
                                   f"jax's comparators read them), through stablehlo.real and stablehlo.imag only"
                                   f"{where}")
            if read:  # real/imag of an argument: now a copy of the argument's part
                inner = dict(inner, op="convert", mlir="stablehlo.convert", operands=[parts[read[0]][inner["op"]]])
            body.append(inner)
        for op in before + after:
            if "loc" in sort:
                op["loc"] = sort["loc"]
        sort = dict(sort, operands=operands, results=results,
                    regions=[dict(comparator, params=params, body=body)])
        return before + [sort] + after

    def _respell(self, op: Any, name: str) -> Dict[str, Any]:
        """An op in an older spelling jax still emits (nested pmap), as the program op it means."""
        entry = self._op_entry(op, O.RESPELLED[name])
        attrs = O.read_attrs(op.attributes)
        if name == "cross-replica-sum":  # an all_reduce with an add body
            attrs["computation"] = "add"
        else:  # broadcast: new leading dimensions of the given sizes
            sizes, rank = attrs.pop("broadcast_sizes"), len(T.tensor_type(op.operands[0].type)[1])
            attrs["broadcast_dimensions"] = list(range(len(sizes), len(sizes) + rank))
        entry["attrs"] = attrs
        return entry

    def _op_entry(self, op: Any, name: str) -> Dict[str, Any]:
        """An op's entry without attrs or regions, its values checked and numbered."""
        self._check(op)
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


# Ops whose body, when it is one binary op of the two block arguments, is named in their "computation" attr.
_REDUCING = ("reduce", "reduce_window", "all_reduce", "reduce_scatter", "scatter")


def _body_computation(op: Any, assign: bool) -> Optional[str]:
    """The op name when a single-result op's body is ``return op(arg0, arg1)`` for a reducer of the registry (either
    argument order: every reducer commutes); "assign" when ``assign`` and the body returns arg1 (a scatter's update)."""
    if len(op.results) != 1 or len(op.regions) != 1:
        return None
    block = op.regions[0].blocks[0]
    args = list(block.arguments)
    body = [inner.operation for inner in block.operations]
    if len(args) != 2 or not body or body[-1].name != "stablehlo.return" or len(body[-1].operands) != 1:
        return None
    returned = body[-1].operands[0]
    if len(body) == 1:
        return "assign" if assign and returned == args[1] else None
    if len(body) != 2:
        return None
    combine = body[0]
    name = combine.name.split(".", 1)[-1]
    operands = list(combine.operands)
    if (
        not combine.name.startswith("stablehlo.")
        or not O.is_reducer(name)
        or len(operands) != 2
        or not ({operands[0], operands[1]} == {args[0], args[1]} and operands[0] != operands[1])
        or returned != combine.results[0]
    ):
        return None
    return name
