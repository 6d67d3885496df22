"""Walks a StableHLO module (func, stablehlo and chlo dialects) and builds the "jax-ipu-program" v1 document."""

from __future__ import annotations

import math
import os
import re
import struct
import threading
from typing import Any, Callable, Dict, Iterator, List, Optional, Set, Tuple

import numpy as np
from jax._src.interpreters import mlir as jmlir
from jax._src.lib.mlir import ir

from jax_ipu import _jax

from . import attributes as A
from . import ops as O
from . import partitioner, spmd
from . import types as T
from .errors import CompileError, unsupported
from .passes import contract_through_moves, dead_code, duplicate_products, id_counter, reassociate_constants
from .program_format import FORMAT, VERSION, Blob, encode

TERMINATORS = ("func.return", "stablehlo.return", "sdy.return")
_FILE_LINE = re.compile(r'"([^"]+)":(\d+):\d+')


def compile_to_program(module_bytes: bytes, compile_options: bytes = b"") -> str:
    """Translates a StableHLO module (MLIR bytecode or text) into the IPU program's JSON document (constants in
    base64): the readable form, which the emulator reads too.

    ``compile_options`` (a serialized CompileOptionsProto, as PJRT passes it) gives the number of replicas (one per
    IPU, e.g. for ``pmap`` in jax 0.4.13) and of partitions (one per IPU: a sharded ``jit``, ``shard_map``, the
    current series' ``pmap``, partitioned by XLA's SPMD partitioner: partitioner.py); without it the module's
    ``mhlo.num_replicas`` and ``mhlo.num_partitions`` do. Raises CompileError for a module the program format
    cannot express.
    """
    return encode(translate(module_bytes, compile_options), binary=False)  # type: ignore[return-value]


def compile_to_binary(module_bytes: bytes, compile_options: bytes = b"", hosts: Optional[List[int]] = None) -> bytes:
    """As compile_to_program, in the binary container the plugin passes to the emulator (constants as raw blobs).
    ``hosts``: with several processes (jax.distributed), the process of each replica's IPU, for the cost model."""
    program = translate(module_bytes, compile_options)
    if hosts is not None and len(hosts) == program["replicas"]:
        program["hosts"] = hosts
    return encode(program, binary=True)  # type: ignore[return-value]


def translate(module_bytes: Any, compile_options: bytes = b"") -> Dict[str, Any]:
    """The program document of a module, as Python values (constants as Blob)."""
    with jmlir.make_ir_context():
        module = _parse(module_bytes)
        replicas, partitions = _replication(module, compile_options)
        if partitions > 1 and replicas > 1:
            raise CompileError(
                f"a program of {replicas} replicas x {partitions} partitions is not supported by the ipu backend: "
                "it runs one copy of a program per IPU, as replicas (jax.pmap) or as the partitions of one shard_map "
                "over a mesh of the ipu devices, not both")
        if partitions > 1:  # XLA's SPMD partitioner makes the program one IPU runs (partitioner.py)
            aliases = _aliases(_main(module))
            partitioned = partitioner.partition(module, compile_options, partitions,
                                                uses_shardy=bool(spmd.sdy is not None and spmd.module_meshes(module)))
            module = _parse(partitioned.module)
            partitioner.rename_custom_calls(module, partitioner.XLA_CALLBACK_TARGET, partitioner.CALL_TARGET)
            program = _Translator(module, partitions, partitioned, aliases).program()
        else:
            program = _Translator(module).program()
        # The emulator runs the program on replicas x partitions IPUs, one copy each (Poplar's replication);
        # "partitions" tells it how to number them (replica_id, partition_id) and PJRT what to report.
        program["replicas"] = replicas * partitions
        if partitions > 1:
            program["partitions"] = partitions
        program["numerics"] = _jax.numerics()
        return program


# The compile options (``jit(f).lower(x).compile(compiler_options={...})``, CompileOptions.env_option_overrides) the
# ipu compiler takes, with their type. XLA's debug options act on XLA's passes, which the ipu does not run: only
# those that mean something for an ipu program are accepted, and any other key is refused as XLA refuses one.
COMPILE_OPTIONS: Dict[str, type] = {
    # XLA keeps the module's text in the executable; the ipu program always keeps its StableHLO source locations
    "xla_embed_ir_in_executable": bool,
}


def _check_compile_options(overrides: List[Tuple[str, Any]]) -> None:
    for key, value in overrides:
        if key not in COMPILE_OPTIONS:
            known = ", ".join(sorted(COMPILE_OPTIONS))
            raise CompileError(f"No such compile option: '{key}' (the ipu compiler takes: {known})")
        if COMPILE_OPTIONS[key] is bool and not isinstance(value, bool) and str(value).lower() not in ("true", "false"):
            raise CompileError(f"compile option {key}: '{value}' is not a valid bool value.")


def _replication(module: Any, compile_options: bytes) -> Tuple[int, int]:
    """(num_replicas, num_partitions) from the compile options, else from the module's attributes, else (1, 1);
    the options' overrides are checked against COMPILE_OPTIONS."""
    if compile_options:
        from jax_ipu import compile_options as options_proto

        options = options_proto.parse(compile_options)
        _check_compile_options(options.env_option_overrides)
        return options.num_replicas, options.num_partitions
    attrs = A.named(module.operation.attributes)
    return tuple(  # type: ignore[return-value]
        max(1, A.integer(attrs[name])) if name in attrs else 1 for name in ("mhlo.num_replicas", "mhlo.num_partitions")
    )


def _main(module: Any) -> Any:
    for op in module.body.operations:
        if op.operation.name == "func.func" and A.string(op.attributes["sym_name"]) == "main":
            return op.operation
    raise CompileError("the module has no entry function `main`; the ipu compiler expects jax's modules")


def _aliases(func: Any) -> List[List[int]]:
    """[parameter, result] of each donation jax asked for (``tf.aliasing_output`` on a parameter)."""
    attrs = A.named(func.attributes)
    if "arg_attrs" not in attrs:
        return []
    aliases = []
    for index, arg_attrs in enumerate(ir.ArrayAttr(attrs["arg_attrs"])):
        entries = A.named(ir.DictAttr(arg_attrs))
        if "tf.aliasing_output" in entries:
            aliases.append([index, A.integer(entries["tf.aliasing_output"])])
    return aliases


def _parse(module_bytes: Any) -> Any:
    data = module_bytes.encode() if isinstance(module_bytes, str) else bytes(module_bytes)
    try:
        return _jax.parse_module(data)
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


def _call_target(op: Any) -> str:
    return A.string(op.attributes["call_target_name"]) if "call_target_name" in op.attributes else ""


def _mhlo_op(op: Any) -> Optional[str]:
    """The program op of a custom call to ``mhlo.<op>`` (XLA's HLO spelling of an op it had no opcode for)."""
    target = _call_target(op)
    name = target[len("mhlo."):] if target.startswith("mhlo.") else ""
    return name if name and O.is_known(name) else None


# Collectives whose replica_groups (or source_target_pairs) name devices by XLA's CollectiveOpGroupMode.
_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "collective_permute",
                "collective_broadcast")


def _partition_groups(name: str, attrs: Dict[str, Any], partitions: int) -> None:
    """A collective of a program partitioned over ``partitions`` IPUs (one replica), its groups rewritten as the
    IPUs' numbers (partition p runs on IPU p), which is what the emulator reads, as XLA defines them
    (CollectiveOpGroupMode): without a channel the groups are of replica ids (cross-replica: with one replica,
    every IPU on its own); with a channel and ``use_global_device_ids``, of device ids (as they are); with a
    channel, an all_to_all's or collective_permute's are of partition ids (as they are); with a channel and no
    ``use_global_device_ids``, of replica ids each spanning every partition (the one replica: all the IPUs)."""
    channel = "channel_id" in attrs
    if name == "collective_permute":
        if not channel and [0, 0] in attrs.get("source_target_pairs", []):  # replica 0 to itself, on every IPU
            attrs["source_target_pairs"] = [[d, d] for d in range(partitions)]
        elif not channel:
            attrs["source_target_pairs"] = []
        return
    if attrs.get("use_global_device_ids") or (channel and name in ("all_to_all", "collective_broadcast")):
        return
    if not channel:
        attrs["replica_groups"] = [[d] for d in range(partitions)]
    else:
        attrs["replica_groups"] = [list(range(partitions))]
    attrs["use_global_device_ids"] = True


def _located(entry: Dict[str, Any], op: Any) -> Dict[str, Any]:
    """`entry` with the source location of the MLIR op it comes from, if jax gave one."""
    loc = _loc(op)
    if loc:
        entry["loc"] = loc
    return entry


class _Rewrite:
    """The ops the front end writes in place of ``entry`` (a rewrite of it, at its source location), by default of
    its result's dtype and shape."""

    def __init__(self, translator: Any, entry: Dict[str, Any], ops: Optional[List[Dict[str, Any]]] = None,
                 shape: Optional[List[int]] = None, dtype: Optional[str] = None) -> None:
        """``ops``: a list to append to (another rewrite's); ``shape``, ``dtype``: the defaults, if not the result's."""
        self.translator, self.entry = translator, entry
        self.ops: List[Dict[str, Any]] = [] if ops is None else ops
        self.dtype = entry["results"][0]["dtype"] if dtype is None else dtype
        self.shape = entry["results"][0]["shape"] if shape is None else shape

    def emit(self, name: str, operands: List[int], dtype: Optional[str] = None, shape: Optional[List[int]] = None,
             attrs: Optional[Dict[str, Any]] = None, result: Optional[Dict[str, Any]] = None) -> int:
        """Appends op ``name``; returns its result's id (``result``, or a fresh value)."""
        result = result or self.translator._fresh(dtype or self.dtype, self.shape if shape is None else shape)
        self.ops.append(_derived(self.entry, name, operands, [result], attrs))
        return result["id"]

    def splat(self, number: float) -> int:
        """``number`` in every element: a scalar constant, broadcast to the shape."""
        scalar = self.emit("constant", [], shape=[], attrs={"value": Blob(_float_bytes(self.dtype, number)),
                                                            "splat": False})
        return self.emit("broadcast_in_dim", [scalar], attrs={"broadcast_dimensions": []}) if self.shape else scalar


def _derived(entry: Dict[str, Any], name: str, operands: List[int], results: List[Dict[str, Any]],
             attrs: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """A stablehlo op the front end writes in place of `entry` (a rewrite of it), at `entry`'s source location."""
    new = {"op": name, "mlir": f"stablehlo.{name}", "operands": operands, "results": results, "attrs": attrs or {},
           "regions": []}
    if "loc" in entry:
        new["loc"] = entry["loc"]
    return new


def _tokens_cross_as_bool0(main: Dict[str, Any]) -> None:
    """Tokens that cross the entry function's boundary travel as bool[0] arrays: jax 0.4.13 rewrites them so
    itself (replace_tokens_with_dummy), the current series leaves ``!stablehlo.token`` in main's signature and
    passes bool[0] buffers at run time. Each token parameter becomes a bool[0] parameter and a create_token; each
    token result a bool[0] constant."""
    fresh = id_counter(main)  # after every id, its regions' too (the passes number new values there)
    prologue, epilogue = [], []
    for param in main["params"]:
        if param["dtype"] == T.TOKEN:
            token = param["id"]
            param.update(id=fresh(), dtype="bool", shape=[0])
            prologue.append({"op": "create_token", "mlir": "stablehlo.create_token", "operands": [],
                             "results": [{"id": token, "dtype": T.TOKEN, "shape": []}], "attrs": {}, "regions": []})
    types = {r["id"]: r["dtype"] for op in main["body"] for r in op.get("results", [])}
    types.update({p["id"]: p["dtype"] for p in main["params"]})
    for token in prologue:
        types[token["results"][0]["id"]] = T.TOKEN
    for i, value in enumerate(main["results"]):
        if types.get(value) == T.TOKEN:
            main["results"][i] = fresh()
            epilogue.append({"op": "constant", "mlir": "stablehlo.constant", "operands": [],
                             "results": [{"id": main["results"][i], "dtype": "bool", "shape": [0]}],
                             "attrs": {"value": Blob(b""), "splat": False}, "regions": []})
    main["body"][:0] = prologue
    main["body"].extend(epilogue)


class _Translator:
    """One pass over a module. Value ids are numbered per function, regions included."""

    def __init__(self, module: Any, partitions: int = 1, partitioned: Optional[partitioner.Partitioned] = None,
                 aliases: Optional[List[List[int]]] = None):
        """``module`` is one device's program; for several partitions, XLA's partitioning of jax's (``partitioned``
        says how main's parameters and results split, ``aliases`` are jax's donations, by position)."""
        self.module = module
        self.partitions = partitions
        self.partitioned = partitioned
        self.donations = aliases
        self.meshes = spmd.module_meshes(module) if spmd.sdy is not None else {}
        # XLA's HLO has tuples where StableHLO has several values: a tuple op's value -> the ids of its elements
        self.tuples: Dict[Any, List[int]] = {}
        self.types: Dict[Any, Optional[T.TensorType]] = {}
        # A float divide's result: the ids of the divide that computes it (after _divide's rules), and the MLIR
        # value of its numerator where that divide is the module's own.
        self.quotients: Dict[Any, Tuple[int, int]] = {}
        self.quotient_values: Dict[Any, Any] = {}
        # A float value a simplifier rule of the front end wrote as exp(X) (jaxlib 0.4.13's exp(A) * exp(B) =>
        # exp(A + B)): the MLIR value -> the id of X, so that the rule applies again to what reads it
        self.exponents: Dict[Any, int] = {}
        # A splat constant written as a broadcast scalar, in the function being translated: broadcast id -> scalar id
        self.splat_scalars: Dict[int, int] = {}
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
        _CALLS.constants, _CALLS.passed, _CALLS.funcs, _CALLS.aliases = {}, {}, self.funcs, {}
        try:
            _CALLS.constants, _CALLS.passed = _call_constants(self.funcs)
            program["functions"] = self._functions("main")
        finally:
            _CALLS.constants, _CALLS.passed, _CALLS.funcs, _CALLS.aliases = {}, {}, {}, {}
        _tokens_cross_as_bool0(program["functions"][0])
        if self.partitioned is not None:
            entry = program["functions"][0]
            params, results = self.partitioned.params, self.partitioned.results
            counts = len(entry["params"]), len(entry["results"])  # (XLA may say nothing of some, or a tuple of none)
            program["shardings"] = {"params": (params + [{}] * counts[0])[:counts[0]],
                                    "results": (results + [{}] * counts[1])[:counts[1]]}
            if self.partitioned.warnings:  # for the profile report (report.graph_profile)
                program["partitioner_warnings"] = self.partitioned.warnings
        aliases = self.donations if self.donations is not None else _aliases(self.funcs["main"])
        if self.partitions > 1:  # a donated shard is reused only for a result shard of its type
            entry = program["functions"][0]
            types = {r["id"]: (r["dtype"], r["shape"]) for op in entry["body"] for r in op["results"]}
            types.update({p["id"]: (p["dtype"], p["shape"]) for p in entry["params"]})
            aliases = [[i, j] for i, j in aliases
                       if types[entry["params"][i]["id"]] == types.get(entry["results"][j])]
        if aliases:
            program["aliases"] = aliases
        return program

    def _functions(self, entry: str) -> List[Dict[str, Any]]:
        """The entry and every function it calls, transitively, in first-call order: each function's calls are
        collected while it is translated, so the module is walked once."""
        done: List[str] = []
        pending = [entry]
        functions = []
        self.function_anchors: Dict[str, Set[int]] = {}
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
        if not _jax.is_current_series():  # XLA's simplifier first, then what its fusion does
            for function in reassociate_constants.run(functions):
                dead_code.run(function, self.function_anchors.get(function["name"], set()))
        contract_through_moves.run(functions, self.function_anchors, _jax.is_current_series())
        for function in duplicate_products.run(functions, self.function_anchors, _jax.is_current_series()):
            dead_code.run(function, self.function_anchors.get(function["name"], set()))
        return functions

    # --- functions, regions, ops -------------------------------------------------------------------------------

    def _function(self, name: str, func: Any) -> Dict[str, Any]:
        self.ids: Dict[Any, int] = {}
        self.next_id = 0
        self.splat_scalars = {}  # ids are per function
        self.anchors: Set[int] = set()  # the operands of jax's dce_sinks
        region = func.regions[0]
        if len(region.blocks) != 1:
            raise CompileError(f"func.func @{name} has {len(region.blocks)} blocks; the ipu compiler expects one")
        function = {"name": name, **self._block(region.blocks[0], f"func.func @{name}")}
        dead_code.run(function, self.anchors)
        self.function_anchors[name] = self.anchors
        return function

    def _inline_manual(self, op: Any, body: List[Dict[str, Any]]) -> None:
        """An ``sdy.manual_computation`` on one device (a shard_map over a mesh of one): its body in place of it, its
        arguments being its operands (the whole arrays), its results what its body returns. (Over several devices
        XLA's partitioner has made the body the program.)"""
        region = op.regions[0]
        if len(region.blocks) != 1:
            raise CompileError(f"a region of {op.name} has {len(region.blocks)} blocks; the ipu compiler expects one")
        block = region.blocks[0]
        for arg, operand in zip(block.arguments, op.operands):
            self.ids[arg] = self._use(operand)
        for result, returned in zip(op.results, self._ops(block, body, False)):
            self.ids[result] = returned

    def _block(self, block: Any, owner: str, scalar_body: bool = False) -> Dict[str, Any]:
        params = [self._define(arg, owner) for arg in block.arguments]
        body: List[Dict[str, Any]] = []
        outer = self._capture_constants(block, body, owner) if scalar_body else {}
        branch = owner in ("stablehlo.case", "stablehlo.if")
        if branch:  # XLA passes what a branch captures as its parameters: _producer sees no further
            _CALLS.branches = getattr(_CALLS, "branches", []) + [getattr(block.owner, "operation", block.owner)]
            _CALLS.branch_blocks = getattr(_CALLS, "branch_blocks", []) + [block]
        try:
            results = self._ops(block, body, scalar_body)
        finally:
            if branch:
                _CALLS.branches = _CALLS.branches[:-1]
                _CALLS.branch_blocks = _CALLS.branch_blocks[:-1]
        self.ids.update(outer)  # the enclosing scope's values keep their own ids
        return {"params": params, "body": body, "results": results}

    def _capture_constants(self, block: Any, body: List[Dict[str, Any]], owner: str) -> Dict[Any, int]:
        """A scalar body (comparator, reducer) runs on its own arguments, but StableHLO lets a region use values of
        the enclosing scope, and jaxlib's canonicalisation hoists a body's constants out of it (the current
        series). Each captured constant is defined again inside the body; anything else captured is refused by
        name. Returns the captured values' outer ids, to restore after the body."""
        defined = set(block.arguments)
        outer: Dict[Any, int] = {}
        for op in block.operations:
            for value in op.operands:
                if value in defined or value in outer:
                    continue
                source = value.owner
                source_op = getattr(source, "operation", source)
                if getattr(source_op, "name", None) != "stablehlo.constant":
                    raise CompileError(
                        f"a {owner} body uses {value.get_name() if hasattr(value, 'get_name') else 'a value'} from "
                        f"outside it, computed by {getattr(source_op, 'name', 'a block argument')}; the ipu runs "
                        "such bodies on their own arguments and constants only")
                outer[value] = self.ids[value]
                body.append(self._op(source_op))  # defines `value` again, with an id of the body
            defined.update(op.results)
        return outer

    def _ops(self, block: Any, body: List[Dict[str, Any]], scalar_body: bool) -> List[int]:
        """Translates the ops of `block` into `body`; returns the ids its terminator returns. In a scalar body (a
        reduce body, a comparator...: the emulator interprets those per element and has no calls) func.calls are
        inlined: jax emits `jnp.where` inside them as a call."""
        for op in block.operations:
            op = op.operation
            if op.name in TERMINATORS:
                return [i for v in op.operands for i in (self.tuples[v] if v in self.tuples else [self._use(v)])]
            if op.name == "stablehlo.tuple":  # the entry of XLA's HLO returns its results as one tuple
                self.tuples[op.results[0]] = [self._use(v) for v in op.operands]
            elif op.name == "stablehlo.get_tuple_element" and op.operands[0] in self.tuples:
                index = A.integer(op.attributes["index"])
                self.ids[op.results[0]] = self.tuples[op.operands[0]][index]
            elif op.name == "mhlo.copy":  # XLA's HLO (the partitioned program): the same value
                self.ids[op.results[0]] = self._use(op.operands[0])
            elif op.name == "stablehlo.if":
                body.extend(self._if_as_case(op))
            elif op.name == "stablehlo.custom_call" and _mhlo_op(op) is not None:
                # an op HLO had none of when jaxlib 0.4.13 was built, as XLA writes it (custom-call "mhlo.tan")
                body.append(dict(self._op(op), op=_mhlo_op(op), attrs={}))
            elif op.name == "stablehlo.custom_call" and len(op.results) == 1 and \
                    A.is_a(ir.TupleType, op.results[0].type) and _call_target(op) == partitioner.CALL_TARGET:
                body.append(self._untupled_call(op))
            elif op.name == "stablehlo.scatter" and _drops_its_window(op):
                # XLA's simplifier: a scatter of one update window at constant indices out of bounds is its operand
                # (so x + segment_sum(u, [-2]) is x + 0, which is x: a denormal or bf16 -0 x stays)
                self.ids[op.results[0]] = self._use(op.operands[0])
            elif op.name in ("stablehlo.gather", "stablehlo.scatter"):
                entry = self._op(op)
                if op.name == "stablehlo.scatter" and (placed := self._scatter_into_identity(entry, op)) is not None:
                    body.extend(placed)
                else:
                    body.extend(self._unbatch_indices(entry, op) if _BATCHING.keys() & entry["attrs"].keys()
                                else [entry])
            elif scalar_body and op.name == "func.call":
                self._inline(op, body)
            elif _is_dce_sink(op):
                self.anchors.update(self._use(v) for v in op.operands)  # kept from the dead-code pass, as from XLA's
            elif op.name == spmd.MANUAL_COMPUTATION:
                self._inline_manual(op, body)
            elif op.name == "stablehlo.constant" and not scalar_body and _splat_for_elementwise_ops(op):
                body.extend(self._splat_as_broadcast(op))
            elif op.name in _MIN_MAX and not scalar_body and self._real_float(op) \
                    and (not _jax.is_current_series() or (self._bf16(op) and O.host().get("avx512"))) \
                    and (parts := _clamp_parts(op)) is not None:
                # XLA's simplifier: min(max(x, c0), c1) and max(min(x, c1), c0) => clamp(c0, x, c1) for constants
                # c0 <= c1 (jnp.clip), which XLA:CPU computes with clamp's own denormal rule; before the identities,
                # as there: min(max(x, -inf), inf) is a clamp. A denormal bound is a zero of its sign there
                # (maxps/minps read it so: jnp.clip(x, 0, 1e-40) is 0). jaxlib 0.12 computes such a pair of bf16
                # ops as its clamp too where that changes a result, on an AVX-512 host: a denormal read as a zero,
                # which its maximum alone keeps (measured on an AMD EPYC of family 26: jnp.clip(d, -1, 1) is 0,
                # jnp.maximum(d, -1) is d); elsewhere both give the same values
                entry = self._op(op)
                rewrite = _Rewrite(self, entry)
                operands = []
                for k, v in enumerate(parts):
                    bound = (_splat_value(v) if k != 1 else None) or 0.0
                    denormal = 0 < abs(bound) < _F32_TINY
                    operands.append(rewrite.splat(math.copysign(0.0, bound)) if denormal else self._use(v))
                body.extend(rewrite.ops + [dict(entry, op="clamp", mlir="stablehlo.clamp", operands=operands)])
            elif op.name == "stablehlo.clamp" and not scalar_body and _jax.is_current_series() and self._bf16(op) \
                    and O.host().get("avx512") and all(b.type == op.results[0].type for b in op.operands) \
                    and (_splat_value(op.operands[0]) is None or _splat_value(op.operands[2]) is None):
                # jaxlib 0.12, bf16 on an AVX-512 host: XLA:CPU computes a clamp with a bound that is not a constant
                # as its IEEE maximum, then minimum (LLVM's checks for NaN and signed zeros, whose selects keep a
                # denormal's bits: scalar_ops.h ieeeAvx512), one of constant bounds with plain maxps/minps (a
                # denormal read as a zero: the emulator's clamp). Measured on an AMD EPYC of family 26
                # (test_dtypes.py::test_compare_select_clamp, test_denormals.py's bf16 clamp)
                entry = self._op(op)
                rewrite = _Rewrite(self, entry)
                low, clamped, high = (self._use(v) for v in op.operands)
                raised = rewrite.emit("maximum", [clamped, low])
                rewrite.emit("minimum", [raised, high], result=entry["results"][0])
                body.extend(rewrite.ops)
            elif op.name in _MIN_MAX and not scalar_body and self._f32(op) and (x := _negation_pair(op)) is not None:
                body.extend(self._extremum_of_negation(self._op(op), op, x))
            elif op.name in _MIN_MAX and not scalar_body and _jax.is_current_series() and self._real_float(op) \
                    and (selected := _select_extremum(op)) is not None:
                # jaxlib 0.12: XLA:CPU fuses the select into the extremum's loop, where LLVM folds max(select(p, A,
                # B), A) => select(p, A, max(B, A)) (either operand, either branch) if the loop reads the select once,
                # so where A is chosen it is A itself: a denormal A is not read as a zero
                entry = self._op(op)
                rewrite = _Rewrite(self, entry)
                predicate, same, other, same_first = (self._where_operand(rewrite, selected[0], "bool"),
                                                      self._use(selected[1]),
                                                      self._where_operand(rewrite, selected[2]), selected[3])
                extremum = rewrite.emit(op.name.split(".", 1)[1], [other, same])
                branches = [same, extremum] if same_first else [extremum, same]
                rewrite.emit("select", [predicate] + branches, result=entry["results"][0])
                body.extend(rewrite.ops)
            elif op.name in _MIN_MAX and not scalar_body and _jax.is_current_series() and self._real_float(op) \
                    and (updated := _extremum_of_update(op)) is not None:
                # jaxlib 0.12: XLA:CPU fuses dynamic_update_slice(A, U, i) into the extremum's loop, a select of U
                # inside the window and A outside, and LLVM folds max(A, select(p, U, A)) => select(p, max(A, U), A)
                # as above: outside the window the result is A itself, a denormal kept (fuzz seed 20262101 #802)
                entry = self._op(op)
                rewrite = _Rewrite(self, entry)
                kept, update_op = updated
                starts = [self._use(v) for v in update_op.operands[2:]]
                _, window_shape = self._tensor(update_op.operands[1])
                window = rewrite.emit("dynamic_slice", [self._use(kept)] + starts, shape=window_shape,
                                      attrs={"slice_sizes": list(window_shape)})
                extremum = rewrite.emit(op.name.split(".", 1)[1], [window, self._use(update_op.operands[1])],
                                        shape=window_shape)
                rewrite.emit("dynamic_update_slice", [self._use(kept), extremum] + starts, result=entry["results"][0])
                body.extend(rewrite.ops)
            elif op.name in ("stablehlo.select", "func.call") and not scalar_body and not _jax.is_current_series() \
                    and not O.host().get("avx512") and len(op.results) == 1 and self._f32(op) \
                    and (folded := _select_of_arithmetic(op)) is not None:
                # jaxlib 0.4.13: XLA:CPU fuses X op Y into the select's loop, where LLVM's InstCombine folds
                # select(p, X op Y, X) => X op select(p, Y, identity) (either branch), so where the select keeps X
                # the op computes X op identity, which reads a denormal X as a zero: jnp.where(p, x + y, x) of a
                # denormal x is -0 on cpu. The same values otherwise (X + -0, X - 0, X * 1, X / 1 are X). Not on an
                # AVX-512 host (O.host()), where LLVM's X86 backend turns the fold back into a masked X op Y that
                # leaves X as it is (measured on an AMD EPYC of family 26)
                entry = self._op(op)
                rewrite = _Rewrite(self, entry)
                predicate, kept, other, name, op_first = folded
                identity = rewrite.splat(_SELECT_FOLD_IDENTITY[name])
                branches = [self._use(other), identity] if op_first else [identity, self._use(other)]
                chosen = rewrite.emit("select", [self._use(predicate)] + branches)
                rewrite.emit(name, [self._use(kept), chosen], result=entry["results"][0])
                body.extend(rewrite.ops)
            elif op.name == "stablehlo.subtract" and not scalar_body and self._simplified_float(op) \
                    and _is_minus_zero(op.operands[0]) and op.operands[1].type == op.results[0].type:
                # XLA's simplifier: -0 - A => -A (the same bits: a sign flip, so a denormal A stays)
                entry = self._op(op)
                body.append(dict(entry, op="negate", mlir="stablehlo.negate", operands=entry["operands"][1:]))
            elif op.name == "stablehlo.sort" and not scalar_body and _sorts_one_element(op):
                # XLA's simplifier: a sort along a dimension of one element returns its operands (so a denormal
                # that a later min(sort(x), x) reads is x itself there: min(A, A) is A)
                for result, operand in zip(op.results, op.operands):
                    self.ids[result] = self._use(operand)
            elif op.name == "func.call" and not scalar_body and (passed := _call_passing_operands(op)) is not None:
                # ... and through a call of a function that is such a sort (jnp.sort is a call of @sort), which XLA
                # inlines first
                for result, operand in zip(op.results, passed):
                    self.ids[result] = self._use(operand)
            elif op.name == "stablehlo.dynamic_update_slice" and not scalar_body and \
                    self._type(op.operands[1].type) is not None and 0 in self._tensor(op.operands[1])[1]:
                # XLA's simplifier: an update of no elements leaves the operand, which is then the same value for
                # the rules that read it ((A / B) / (A / B) is a quotient of quotients: 1; fuzz seed 20262101 #4853)
                self.ids[op.results[0]] = self._use(op.operands[0])
                if op.operands[0] in self.quotients:
                    self.quotients[op.results[0]] = self.quotients[op.operands[0]]
            elif op.name in ("stablehlo.real", "stablehlo.imag") and not scalar_body and \
                    (parts := _producer(op.operands[0])) is not None and parts.name == "stablehlo.complex":
                # XLA's simplifier: real(complex(A, B)) => A, imag(complex(A, B)) => B, so a denormal A is A itself
                # for what reads it (jaxlib 0.12's min(A, real(complex(A, B))) => min(A, A) => A; fuzz seed 20261901
                # #312, where a scan's carry comes back so)
                self.ids[op.results[0]] = self._use(parts.operands[op.name == "stablehlo.imag"])
            elif op.name == "stablehlo.multiply" and not scalar_body and not _jax.is_current_series() \
                    and self._simplified_float(op) and None not in (powers := [self._exponent(v) for v in op.operands]):
                # jaxlib 0.4.13's simplifier: exp(A) * exp(B) => exp(A + B), one rounding where there were three (f16's
                # jnp.square(jnp.exp2(x)) is exp(y + y); fuzz seed 20270101 #8343). Not jaxlib 0.12's
                entry = self._op(op)
                rewrite = _Rewrite(self, entry)
                total = rewrite.emit("add", powers)  # type: ignore[arg-type]
                rewrite.emit("exponential", [total], result=entry["results"][0])
                self.exponents[op.results[0]] = total
                body.extend(rewrite.ops)
            elif op.name in _PAD_IDENTITIES and not scalar_body and _jax.is_current_series() \
                    and self._real_float(op) and (padded := _identity_padded(op)) is not None:
                body.extend(self._beside_identity_padding(self._op(op), *padded))
            elif op.name in _SCATTER_COMBINES and not scalar_body and self._simplified_float(op) \
                    and (into := self._combined_scatter(op)) is not None:
                body.extend(self._scatter_onto(self._op(op), *into))
            elif not scalar_body and (kept := self._identity_operand(op)) is not None:
                # A + 0, A - 0, A * 1, A / 1 (either side where the op commutes): XLA's algebraic simplifier returns
                # A itself, so cpu keeps what arithmetic would change (a denormal, -0 + 0), and its rules for what
                # reads the op see A (log(sqrt(x) + 0) is log(sqrt(x)): fuzz seed 20270301 #821; not a maximum or
                # minimum's: min(max(x, -inf), inf) is still a clamp to jaxlib 0.4.13's)
                self.ids[op.results[0]] = self._use(kept)
                if op.name not in _MIN_MAX and op.name != "stablehlo.clamp":
                    getattr(_CALLS, "aliases", {})[op.results[0]] = kept
            elif op.name in _MIN_MAX and not scalar_body and self._real_float(op) \
                    and (pair := _constant_bound(op)) is not None:
                body.extend(self._extremum_with_constant(self._op(op), op, *pair))
            elif op.name == "stablehlo.multiply" and not scalar_body and self._simplified_float(op) \
                    and (masked := _predicate_product(op)) is not None:
                # XLA's simplifier: A * convert(predicate) => select(predicate, A, 0), so an infinite or NaN A gives
                # 0 where the predicate is false (jax's gradient of a maximum multiplies by the converted mask)
                entry = self._op(op)
                rewrite = _Rewrite(self, entry)
                rewrite.emit("select", [self._use(masked[0]), self._use(masked[1]), rewrite.splat(0.0)],
                             result=entry["results"][0])
                body.extend(rewrite.ops)
            elif op.name == "stablehlo.compare" and not scalar_body \
                    and (tested := _bf16_zero_test(op, direct=not _jax.is_current_series())) is not None:
                body.extend(self._bf16_zero_test(self._op(op), tested))
            elif op.name == "stablehlo.divide" and not scalar_body and self._simplified_float(op):
                body.extend(self._divide(self._op(op), op))
            elif op.name == "stablehlo.divide" and not scalar_body and _jax.is_current_series() and self._bf16(op):
                # jaxlib 0.12 rewrites a bf16 A / broadcast(B) as well (A * broadcast(1 / B): the reciprocal of a
                # huge B flushes, fuzz seed 20270401 #7242), no other divide rule
                body.extend(self._divide(self._op(op), op, broadcast_only=True))
            elif op.name == "stablehlo.reduce_window" and not scalar_body and _jax.is_current_series() \
                    and (scan := _scan_window(op)) is not None:
                body.extend(self._scan_as_tree(self._op(op), *scan))
            elif op.name == "stablehlo.reduce_window" and not scalar_body and _one_element_windows(op) \
                    and _body_computation(op, False) in _ONE_ELEMENT_WINDOW_IS_THE_ELEMENT \
                    and not (_jax.is_current_series() and self._dtype_of(op) == "bf16"):
                # XLA's simplifier: a window of one element, stride 1, no dilation, is that element; padding is
                # the init value (a sum does not turn -0 into +0, a maximum does not flush a denormal). Not a bf16
                # one in jaxlib 0.12: its float normalization has already put it between converts to and from f32,
                # where it is computed (init + x, flushing a denormal)
                entry = self._op(op)
                padding = entry["attrs"].get("padding") or []
                if not any(lo or hi for lo, hi in padding):
                    self.ids[op.results[0]] = self._use(op.operands[0])
                else:
                    body.append(_derived(entry, "pad", entry["operands"][:2], entry["results"], {
                        "edge_padding_low": [lo for lo, _ in padding], "edge_padding_high": [hi for _, hi in padding],
                        "interior_padding": [0] * len(padding)}))
            elif op.name == "stablehlo.log" and not scalar_body and self._simplified_float(op) \
                    and (rewritten := self._log(self._op(op), op)) is not None:
                body.extend(rewritten)
            elif op.name == "stablehlo.power" and not scalar_body and not _jax.is_current_series() \
                    and self._simplified_float(op) and _splat_value(op.operands[1]) not in (0.0, 1.0) \
                    and (exponent := self._exponent(op.operands[0])) is not None:
                body.extend(self._power_of_exp(self._op(op), op, exponent))
            elif op.name == "stablehlo.power" and not scalar_body and self._real_float(op) \
                    and (_splat_value(op.operands[1]) in (0.5, 2.0) or (
                        self._simplified_float(op) and _splat_value(op.operands[1]) in _POWERS_XLA_FOLDS)):
                body.extend(self._power_of_constant(self._op(op), op))
            elif op.name in _TINY_IS_ZERO and not scalar_body and not _jax.is_current_series() \
                    and (self._type(op.results[0].type) or ("", []))[0] in ("f32", "bf16"):
                body.extend(self._tiny_as_zero(self._op(op), _TINY_IS_ZERO[op.name]))
            elif op.name == "stablehlo.reduce" and not scalar_body and (pieces := _reduce_of_concatenate(op)):
                body.extend(self._reduce_pieces(self._op(op), op, *pieces))
            elif op.name == "stablehlo.reduce" and not scalar_body and not _reduces_one_element(op) \
                    and (moved := _reduce_through_moves(op)) is not None:
                # XLA's simplifier reduces the value a reshape or transpose moved (reduce(reshape(x)) => reduce(x)
                # over x's dimensions): the sum's order is then that of x's shape, not the moved one's
                entry = self._op(op)
                entry["operands"][0] = self._use(moved[0])
                entry["attrs"]["dimensions"] = moved[1]
                if moved[2] is not None:  # (elementwise ops of transposes: the same values in the source's order)
                    dtype, shape = self._tensor(moved[0])
                    back = self._fresh(dtype, [shape[d] for d in moved[2]])
                    body.append(_derived(entry, "transpose", [entry["operands"][0]], [back],
                                         {"permutation": moved[2]}))
                    entry["operands"][0] = back["id"]
                body.append(entry)
            elif op.name == "stablehlo.reduce" and not scalar_body and _reduces_one_element(op) \
                    and self._real_float(op):
                # XLA's simplifier: a reduce with as many results as operand elements is a reshape (its init value
                # the identity), so a denormal or a -0 stays; only where the init is the identity, as jax's is
                entry = self._op(op)
                body.append(_derived(entry, "reshape", entry["operands"][:1], entry["results"]))
            elif op.name in _F16_IN_LOOPS_EXPANDED and not scalar_body and _jax.is_current_series() \
                    and self._dtype_of(op) == "f16" and _in_while(op):
                body.extend(self._expanded_in_loop(self._op(op), op))
            elif op.name == "chlo.acosh" and not scalar_body and not _jax.is_current_series() \
                    and self._dtype_of(op) in ("f32", "f16", "bf16"):
                body.extend(self._acosh_decomposed(self._op(op)))
            elif op.name == "chlo.sinh" and not scalar_body and not _jax.is_current_series() \
                    and self._real_float(op):
                body.extend(self._sinh_decomposed(self._op(op)))
            elif op.name == "stablehlo.sqrt" and not scalar_body and not _jax.is_current_series() \
                    and self._real_float(op) and _square_of(op.operands[0]) is not None:
                entry = self._op(op)  # jaxlib 0.4.13's simplifier: sqrt(A * A) => |A| (no overflow, no flush)
                body.append(dict(entry, op="abs", mlir="stablehlo.abs",
                                 operands=[self._use(_square_of(op.operands[0]))]))
            elif op.name == "stablehlo.composite" and self._chlo_op(op):
                # A CHLO op jaxlib 0.12 sends a plugin as a composite of its decomposition, where XLA:CPU computes
                # an HLO op of its own: that op, so the ipu computes what cpu does.
                entry = self._op(op)
                self.called.remove(entry["attrs"]["callee"])
                body.append(dict(entry, op=self._chlo_op(op), mlir=_composite_name(op), attrs={}))
            elif op.name == "stablehlo.atan2" and _jax.is_current_series() and _is_one(op.operands[1]):
                entry = self._op(op)  # chlo.atan, as jaxlib 0.12 writes it for a plugin: atan2(x, 1)
                body.append(dict(entry, op="atan", mlir="chlo.atan", operands=entry["operands"][:1]))
            elif op.name in _COMPLEX_PRODUCTS and self._any_complex(op):
                body.extend(self._complex_product(self._op(op), op))
            elif op.name in _COMPLEX_PRODUCTS and (self._int_to_float(op) or self._widening(op)):
                body.extend(self._float_product(self._op(op), op))
            elif op.name in _COMPLEX_SPLIT and self._any_complex(op):
                entry = self._op(op)
                body.extend([entry] if "computation" in entry["attrs"] else self._split_complex(entry, op))
            else:
                body.append(self._op(op))
        return []

    def _reduce_pieces(self, entry: Dict[str, Any], op: Any, combine: str, dim: int,
                       sizes: List[int]) -> List[Dict[str, Any]]:
        """XLA's simplifier (both series): reduce(concatenate(A, B, ...)) over the concatenated dimension is
        combine(combine(reduce(A), reduce(B)), ...), each reduce from the init value (HandleReduce), so the pieces are
        summed apart and their sums added: jnp.sum(jnp.roll(x, -2)) is sum(x[2:]) + sum(x[:2]) on cpu (fuzz seed
        20271501 #1057). The pieces are sliced back out of the concatenation (bit for bit what it holds), which may
        be a called function's result."""
        dtype, shape = self._tensor(op.operands[0])
        out = entry["results"][0]
        if out["dtype"] == "bool":  # (XLA's convention for bool reductions, as the emulator's reduce)
            combine = {"add": "or", "multiply": "and"}.get(combine, combine)
        rank = len(shape)
        ops: List[Dict[str, Any]] = []
        total: Optional[Dict[str, Any]] = None
        start = 0
        for k, size in enumerate(sizes):
            limit = list(shape)
            limit[dim] = start + size
            begin = [0] * rank
            begin[dim] = start
            piece = self._fresh(dtype, [hi - lo for lo, hi in zip(begin, limit)])
            ops.append(_derived(entry, "slice", [entry["operands"][0]], [piece],
                                {"start_indices": begin, "limit_indices": limit, "strides": [1] * rank}))
            last = k == len(sizes) - 1
            reduced = self._fresh(out["dtype"], out["shape"])
            ops.append(dict(entry, operands=[piece["id"], entry["operands"][1]], results=[reduced]))
            if total is None:
                total = reduced
            else:
                combined = out if last else self._fresh(out["dtype"], out["shape"])
                ops.append(_derived(entry, combine, [total["id"], reduced["id"]], [combined]))
                total = combined
            start += size
        return ops

    def _untupled_call(self, op: Any) -> Dict[str, Any]:
        """Our host callback in XLA's HLO (the partitioned program) returns a tuple: the call with its elements as
        results, read back by get_tuple_element. (Any other custom call with a tuple is refused by _check.)"""
        tuple_type = ir.TupleType(op.results[0].type)
        results = []
        for index in range(tuple_type.num_types):
            element = self._type(tuple_type.get_type(index))
            if element is None:
                raise unsupported(op.name, _types_text(op), f"{tuple_type} cannot be expressed as IPU tensors")
            results.append(self._fresh(element[0], list(element[1])))
        self.tuples[op.results[0]] = [r["id"] for r in results]
        entry = {"op": "custom_call", "mlir": op.name, "operands": [self._use(v) for v in op.operands],
                 "results": results, "attrs": O.read_attrs(op.attributes), "regions": []}
        return _located(entry, op)

    def _if_as_case(self, op: Any) -> List[Dict[str, Any]]:
        """XLA's conditional on a predicate (``stablehlo.if``, from the partitioner: a call only one device makes)
        as a ``case`` on the predicate as an index, the false branch first."""
        self._check(op)
        index = self._fresh("i32", [])
        convert = {"op": "convert", "mlir": op.name, "operands": [self._use(op.operands[0])], "results": [index],
                   "attrs": {}, "regions": []}
        regions = [self._region(op.regions[1], "stablehlo.case"), self._region(op.regions[0], "stablehlo.case")]
        case = dict(convert, op="case", operands=[index["id"]], regions=regions,
                    results=[self._define(v, op.name) for v in op.results])
        return [_located(convert, op), _located(case, op)]

    def _inline(self, call: Any, body: List[Dict[str, Any]]) -> None:
        callee = A.symbol(A.named(call.attributes)["callee"])
        if callee not in self.funcs:
            raise CompileError(f"func.call to @{callee}, which the module does not define")
        region = self.funcs[callee].regions[0]
        if len(region.blocks) != 1:
            raise CompileError(f"func.func @{callee} has {len(region.blocks)} blocks; the ipu compiler expects one")
        block = region.blocks[0]
        for arg, operand in zip(block.arguments, call.operands):  # the callee's arguments are the call's operands
            self.ids[arg] = self._use(operand)
        for result, returned in zip(call.results, self._ops(block, body, True)):
            self.ids[result] = returned

    def _region(self, region: Any, owner: str) -> Dict[str, Any]:
        if len(region.blocks) != 1:
            raise CompileError(f"a region of {owner} has {len(region.blocks)} blocks; the ipu compiler expects one")
        return self._block(region.blocks[0], owner, scalar_body=owner.split(".", 1)[-1] in _SCALAR_BODIES)

    def _type(self, mlir_type: Any) -> Optional[T.TensorType]:
        """T.tensor_type, once per distinct type of the module."""
        # Types are uniqued in the context and hash as such: no printing to look one up.
        if mlir_type not in self.types:
            self.types[mlir_type] = T.tensor_type(mlir_type)
        return self.types[mlir_type]

    def _tensor(self, value: Any) -> T.TensorType:
        """The (dtype, shape) of a value that _check has accepted."""
        tensor = self._type(value.type)
        if tensor is None:
            raise CompileError(f"{value.type} cannot be expressed as an IPU tensor")
        return tensor

    def _chlo_op(self, composite: Any) -> Optional[str]:
        """The emulator op that computes a chlo composite as XLA:CPU does (_CHLO_OPS, _COMPLEX_CHLO_OPS), or None."""
        name = _composite_name(composite)
        if name in _COMPLEX_CHLO_OPS and self._any_complex(composite):
            return _COMPLEX_CHLO_OPS[name]
        return _CHLO_OPS.get(name)

    def _any_complex(self, op: Any) -> bool:
        return any((self._type(v.type) or ("", []))[0] == "c64" for v in op.operands)

    def _check(self, op: Any) -> None:
        for value in list(op.operands) + list(op.results):
            if self._type(value.type) is None:
                raise unsupported(op.name, _types_text(op), f"{value.type} cannot be expressed as an IPU tensor")

    def _define(self, value: Any, owner: str) -> Dict[str, Any]:
        tensor = self._type(value.type)
        if tensor is None:
            raise unsupported(owner, str(value.type), "values of this type cannot be expressed as IPU tensors")
        self.ids[value] = self._number()
        return {"id": self.ids[value], "dtype": tensor[0], "shape": list(tensor[1])}

    def _number(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def _use(self, value: Any) -> int:
        return self.ids[value]

    def _op(self, op: Any) -> Dict[str, Any]:
        mlir_name = op.name
        name = "call" if mlir_name == "func.call" else mlir_name.split(".", 1)[-1]
        if mlir_name.startswith("stablehlo.") and name in O.RESPELLED:
            return self._respell(op, name)
        if _is_sharding_annotation(op):  # one partition: the annotation is the identity
            return self._op_entry(op, "reshape")
        if mlir_name == "stablehlo.composite":
            # The current series names some ops (erf_inv, top_k, acosh...) as composites whose decomposition is a
            # function of ordinary ops: that function is the op.
            composite = self._op_entry(op, "call")
            composite["attrs"] = {"callee": A.symbol(A.named(op.attributes)["decomposition"])}
            self.called.append(composite["attrs"]["callee"])
            return composite
        self._check(op)
        known = mlir_name.split(".", 1)[0] in ("stablehlo", "chlo", "func") and O.is_known(name)
        operands = [self._use(v) for v in op.operands]
        try:
            if mlir_name == "stablehlo.constant" and "complex" in str(op.results[0].type):
                attrs = T.constant_from_op_text(op)
            else:
                attrs = O.read_attrs(op.attributes) if known else {}
        except (ValueError, TypeError) as error:
            raise CompileError(
                f"cannot read the attributes of {mlir_name} with types {_types_text(op)}: {error}") from error
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
        if mlir_name == "stablehlo.while" and len(regions) == 2:
            # XLA's while-loop simplifier: a value the body returns as it received it (once its own simplifier has
            # seen through real(complex(A, B)) and the like) is the loop's operand there, for what reads the loop's
            # result (jaxlib 0.12's min(x, scan's unchanged carry of x) is x, a denormal kept; fuzz seed 20261901
            # #312)
            body = regions[1]
            for i, (param, returned) in enumerate(zip(body["params"], body["results"])):
                if param["id"] == returned and i < len(op.results) and op.results[i].type == op.operands[i].type:
                    self.ids[op.results[i]] = operands[i]
        if isinstance(attrs.get("replica_groups"), A.MeshAxes):
            attrs["replica_groups"] = self._mesh_groups(attrs["replica_groups"], mlir_name)
        if self.partitions > 1 and name in _COLLECTIVES:
            _partition_groups(name, attrs, self.partitions)
        if name in _REDUCING and known:
            computation = _body_computation(op, assign=name == "scatter")
            if computation:
                attrs["computation"] = computation
        return _located(entry, op)

    def _scan_as_tree(self, entry: Dict[str, Any], shape: List[int], dim: int, forward: bool,
                      exclusive: bool) -> List[Dict[str, Any]]:
        """A cumulative reduce_window (jnp.cumsum, cumprod, cummax and cummin as jaxlib 0.12 lowers them: a window
        of the whole axis) as XLA:CPU's ReduceWindowRewriter (base length 16) rewrites it, so the ipu combines the
        elements in cpu's order, in linear time: the axis, moved last and padded with the init value to a multiple
        of 16, scanned in rows of 16; the rows' last (first, in reverse) elements scanned exclusively, the same
        way, and combined with each row's scan; the padding sliced off again."""
        rewrite = _Rewrite(self, entry)
        init = entry["operands"][1]
        computation = entry["attrs"].get("computation")  # None: a body of several ops (cumlogsumexp's)
        region = entry["regions"][0] if computation is None else None

        def reduce_window(x: int, out_shape: List[int], attrs: Dict[str, Any]) -> int:
            if computation is not None:
                attrs["computation"] = computation
            result = rewrite.emit("reduce_window", [x, init], shape=out_shape, attrs=attrs)
            if region is not None:
                rewrite.ops[-1]["regions"] = [self._renumbered(region)]
            return result

        def window(x: int, x_shape: List[int], size: int, pad: int, out_len: int) -> int:
            rank = len(x_shape)
            return reduce_window(x, x_shape[:-1] + [out_len], {
                "window_dimensions": [1] * (rank - 1) + [size], "window_strides": [1] * rank,
                "base_dilations": [1] * rank, "window_dilations": [1] * rank,
                "padding": [[0, 0]] * (rank - 1) + [[pad, 0] if forward else [0, pad]]})

        def combine(a: int, b: int, shape: List[int]) -> int:
            """The body applied to a and b elementwise (XLA's map of it)."""
            if region is None:
                return rewrite.emit(computation, [a, b], shape=shape)
            values = {p["id"]: v for p, v in zip(region["params"], (a, b))}
            for inner in region["body"]:
                dtype = inner["results"][0]["dtype"]
                if inner["op"] == "constant":
                    scalar = rewrite.emit("constant", [], dtype, shape=[], attrs=inner["attrs"])
                    values[inner["results"][0]["id"]] = rewrite.emit(
                        "broadcast_in_dim", [scalar], dtype, shape=shape, attrs={"broadcast_dimensions": []}) \
                        if shape else scalar
                else:
                    values[inner["results"][0]["id"]] = rewrite.emit(
                        inner["op"], [values[o] for o in inner["operands"]], dtype, shape=shape, attrs=inner["attrs"])
            return values[region["results"][0]]

        def scan(x: int, x_shape: List[int], d: int, excl: bool) -> int:
            rank, length = len(x_shape), x_shape[d]
            if length <= _SCAN_BASE:  # XLA:CPU's own window, each output from init in the window's order
                pad = length if excl else length - 1
                out_shape = list(x_shape)
                out_shape[d] += 1 if excl else 0
                window_dims, padding = [1] * rank, [[0, 0]] * rank
                window_dims[d], padding[d] = length, [pad, 0] if forward else [0, pad]
                return reduce_window(x, out_shape, {
                    "window_dimensions": window_dims, "window_strides": [1] * rank, "base_dilations": [1] * rank,
                    "window_dilations": [1] * rank, "padding": padding})
            perm = list(range(rank))
            perm[d], perm[-1] = perm[-1], perm[d]
            moved = [x_shape[p] for p in perm]
            if d != rank - 1:
                x = rewrite.emit("transpose", [x], shape=moved, attrs={"permutation": perm})
            padded = -(-length // _SCAN_BASE) * _SCAN_BASE
            if padded != length:
                x = rewrite.emit("pad", [x, init], shape=moved[:-1] + [padded], attrs={
                    "edge_padding_low": [0] * rank, "edge_padding_high": [0] * (rank - 1) + [padded - length],
                    "interior_padding": [0] * rank})
            columns = padded // _SCAN_BASE
            tiled = moved[:-1] + [columns, _SCAN_BASE]
            x = rewrite.emit("reshape", [x], shape=tiled)
            rows = window(x, tiled, _SCAN_BASE, _SCAN_BASE - 1, _SCAN_BASE)
            edge = _SCAN_BASE - 1 if forward else 0
            column = rewrite.emit("slice", [rows], shape=tiled[:-1] + [1], attrs={
                "start_indices": [0] * rank + [edge], "limit_indices": tiled[:-1] + [edge + 1],
                "strides": [1] * (rank + 1)})
            column = rewrite.emit("reshape", [column], shape=tiled[:-1])
            carried = scan(column, tiled[:-1], rank - 1, True)  # [..., columns + 1]
            start = 0 if forward else 1
            carried = rewrite.emit("slice", [carried], shape=tiled[:-1], attrs={
                "start_indices": [0] * (rank - 1) + [start], "limit_indices": tiled[:-2] + [start + columns],
                "strides": [1] * rank})
            carried = rewrite.emit("broadcast_in_dim", [carried], shape=tiled,
                                   attrs={"broadcast_dimensions": list(range(rank))})
            out = combine(rows, carried, tiled)
            out = rewrite.emit("reshape", [out], shape=moved[:-1] + [padded])
            full = list(x_shape)
            full[d] = padded
            if d != rank - 1:
                out = rewrite.emit("transpose", [out], shape=full, attrs={"permutation": perm})
            if padded != length:
                out = rewrite.emit("slice", [out], shape=x_shape, attrs={
                    "start_indices": [0] * rank, "limit_indices": list(x_shape), "strides": [1] * rank})
            if excl:
                out_shape = list(x_shape)
                out_shape[d] += 1
                low, high = [0] * rank, [0] * rank
                (low if forward else high)[d] = 1
                out = rewrite.emit("pad", [out, init], shape=out_shape, attrs={
                    "edge_padding_low": low, "edge_padding_high": high, "interior_padding": [0] * rank})
            return out

        scan(entry["operands"][0], shape, dim, exclusive)
        rewrite.ops[-1]["results"] = entry["results"]  # the last op writes the reduce_window's own result
        return rewrite.ops

    def _bf16_zero_test(self, entry: Dict[str, Any], tested: Any) -> List[Dict[str, Any]]:
        """x == 0 or x != 0 for a bf16 x widened to f32 (moved after the widening or not; with jaxlib 0.4.13 also
        for a bf16 x itself) as XLA:CPU computes it: LLVM folds the compare of the widened bf16 with zero into a
        test of its bits, so a bf16 denormal is nonzero there although every other compare reads it as a zero:
        (bits(x) & ~sign) == 0 (or !=), in x's own width."""
        rewrite = _Rewrite(self, entry)
        wide = str(ir.RankedTensorType(tested.type).element_type) == "f32"
        unsigned, pack, magnitude_mask = ("u32", "<I", 0x7FFFFFFF) if wide else ("u16", "<H", 0x7FFF)

        def constant(number: int) -> int:
            scalar = rewrite.emit("constant", [], unsigned, shape=[],
                                  attrs={"value": Blob(struct.pack(pack, number)), "splat": False})
            return rewrite.emit("broadcast_in_dim", [scalar], unsigned, attrs={"broadcast_dimensions": []}) \
                if rewrite.shape else scalar

        bits = rewrite.emit("bitcast_convert", [self._use(tested)], unsigned)
        magnitude = rewrite.emit("and", [bits, constant(magnitude_mask)], unsigned)
        rewrite.emit("compare", [magnitude, constant(0)], result=entry["results"][0],
                     attrs={"comparison_direction": entry["attrs"]["comparison_direction"],
                            "compare_type": "UNSIGNED"})
        return rewrite.ops

    def _tiny_as_zero(self, entry: Dict[str, Any], below: float) -> List[Dict[str, Any]]:
        """``entry`` (a function f with f(x) ~ x near 0) with a zero of x's sign where |x| < ``below``, as jaxlib
        0.4.13's XLA:CPU computes it: its expansion's intermediate (x / 2 in asin's 2 atan2(x, 1 + sqrt(1 - x^2)),
        2x in atanh's) is a denormal there, which it flushes."""
        rewrite = _Rewrite(self, entry)
        out = entry["results"][0]
        exact = self._fresh(out["dtype"], out["shape"])
        rewrite.ops.append(dict(entry, results=[exact]))
        x = entry["operands"][0]
        tiny = rewrite.emit("compare", [rewrite.emit("abs", [x]), rewrite.splat(below)], "bool",
                            attrs={"comparison_direction": "LT", "compare_type": "FLOAT"})
        rewrite.emit("select", [tiny, rewrite.emit("multiply", [x, rewrite.splat(0.0)]), exact["id"]], result=out)
        return rewrite.ops

    def _renumbered(self, region: Dict[str, Any]) -> Dict[str, Any]:
        """A copy of a translated region with fresh ids for its values (for a second op with the same body)."""
        ids: Dict[int, int] = {}

        def fresh(value: Dict[str, Any]) -> Dict[str, Any]:
            new = self._fresh(value["dtype"], value["shape"])
            ids[value["id"]] = new["id"]
            return new

        params = [fresh(p) for p in region["params"]]
        body = []
        for inner in region["body"]:
            operands = [ids.get(o, o) for o in inner["operands"]]
            body.append(dict(inner, operands=operands, results=[fresh(r) for r in inner["results"]]))
        return dict(region, params=params, body=body, results=[ids.get(r, r) for r in region["results"]])

    def _splat_as_broadcast(self, op: Any) -> List[Dict[str, Any]]:
        """A splat constant that only elementwise ops read, as its one element broadcast: Poplar keeps such a
        constant as a scalar and broadcasts it as a view, and the emulator fuses the broadcast into the ops that
        read it, so the array is never stored (jax 0.12 folds every broadcast scalar into one: erf alone has 16)."""
        entry = self._op(op)
        whole = entry["results"][0]
        scalar = self._fresh(whole["dtype"], [])
        entry.update(results=[scalar], attrs=dict(entry["attrs"], splat=False))
        self.splat_scalars[whole["id"]] = scalar["id"]
        return [entry, _derived(entry, "broadcast_in_dim", [scalar["id"]], [whole], {"broadcast_dimensions": []})]

    def _same_broadcast(self, a: Any, b: Any) -> bool:
        """`a` and `b` broadcast one value the same way (broadcast_in_dim chains composed: XLA's simplifier merges a
        broadcast of a broadcast, its CSE then makes the two one instruction before max(A, A) is seen):
        jnp.minimum(x, vmap(lambda _: x)(y)) (fuzz seed 20270101 #674)."""
        if a.type != b.type:
            return False
        sources = [self._broadcast_source(v) for v in (a, b)]
        return None not in sources and sources[0] == sources[1]

    def _broadcast_source(self, value: Any) -> Optional[Tuple[int, Tuple[int, ...]]]:
        """(the value a chain of broadcast_in_dim ops starts from, its dimensions' places in `value`), or None."""
        dims: Optional[List[int]] = None
        producer = _producer(value)
        while producer is not None and producer.name == "stablehlo.broadcast_in_dim":
            here = [int(d) for d in A.int_list(producer.attributes["broadcast_dimensions"])]
            dims = here if dims is None else [dims[d] for d in here]
            value = producer.operands[0]
            producer = _producer(value)
        return None if dims is None else (self._use(value), tuple(dims))

    def _identity_operand(self, op: Any) -> Any:
        """For A + 0, 0 + A, A - 0, A * 1, 1 * A, A / 1, max(A, -inf), min(A, +inf), max(A, A), min(A, A) (the
        constant a splat, or a broadcast scalar, of the result's type; either side where the op commutes): the MLIR
        value A; else None. With jaxlib 0.12 also clamp(-inf, A, +inf) (XLA's simplifier takes a clamp of constant
        bounds for a maximum and a minimum, and those for A)."""
        if op.name == "stablehlo.clamp" and _jax.is_current_series() and self._real_float(op):
            low, a, high = op.operands
            infinite = _splat_value(low) == -math.inf and _splat_value(high) == math.inf
            return a if infinite and a.type == op.results[0].type else None
        rules = {"stablehlo.add": (0.0, True), "stablehlo.subtract": (0.0, False),
                 "stablehlo.multiply": (1.0, True), "stablehlo.divide": (1.0, False),
                 "stablehlo.maximum": (-math.inf, True), "stablehlo.minimum": (math.inf, True)}
        if op.name not in rules or len(op.operands) != 2 or not self._real_float(op):
            return None
        identity, commutes = rules[op.name]
        a, b = op.operands
        if op.name in _MIN_MAX and (a == b or self._use(a) == self._use(b) or self._same_broadcast(a, b)) \
                and a.type == op.results[0].type:
            return a  # max(A, A) and min(A, A) are A (also once a call is seen through): a denormal A stays
        if a.type != op.results[0].type and b.type != op.results[0].type:
            return None
        if _splat_value(b) == identity and a.type == op.results[0].type:
            return a
        if commutes and _splat_value(a) == identity and b.type == op.results[0].type:
            if op.name in _MIN_MAX and not _jax.is_current_series() and _through_parameter(a):
                return None  # jaxlib 0.4.13: it stays on the left, where maxps reads b's denormals as zeros
            return b
        return None

    def _sinh_decomposed(self, entry: Dict[str, Any]) -> List[Dict[str, Any]]:
        """jaxlib 0.4.13's real chlo.sinh as XLA decomposes it (chlo_legalize_to_hlo), in f32 (an f16 or bf16 operand
        converted up and the result back): |x| < 1 ? (expm1(x) + expm1(x) / (expm1(x) + 1)) * 0.5 :
        exp(x + log(1/2)) - exp(log(1/2) - x), each op XLA:CPU's (its exp and expm1 approximations), so a denormal
        x gives a zero of its sign and large ones round as cpu's do."""
        out = entry["results"][0]
        rewrite = _Rewrite(self, entry, dtype="f32")
        emit, splat = rewrite.emit, rewrite.splat
        x = entry["operands"][0]
        if out["dtype"] != "f32":
            x = emit("convert", [x])
        log_half = splat(math.log(0.5))  # XLA folds log(0.5) with the host's logf
        large = emit("subtract", [emit("exponential", [emit("add", [x, log_half])]),
                                  emit("exponential", [emit("subtract", [log_half, x])])])
        e = emit("exponential_minus_one", [x])
        ratio = emit("divide", [e, emit("add", [e, splat(1.0)])])
        small = emit("multiply", [splat(0.5), emit("add", [e, ratio])])
        below_one = emit("compare", [emit("abs", [x]), splat(1.0)], "bool", attrs={
            "comparison_direction": "LT", "compare_type": "FLOAT"})
        if out["dtype"] == "f32":
            emit("select", [below_one, small, large], result=out)
        else:
            emit("convert", [emit("select", [below_one, small, large])], out["dtype"], result=out)
        return rewrite.ops

    def _acosh_decomposed(self, entry: Dict[str, Any]) -> List[Dict[str, Any]]:
        """jaxlib 0.4.13's real chlo.acosh as XLA decomposes it (chlo_legalize_to_hlo), each op rounded to the
        type (no upcast, unlike its sinh): x < -1 ? NaN : x >= sqrt(max) ? log(2) + log(x) : log(x + sqrt((x + 1) *
        (x - 1))) (so -3.4e38 is NaN, not the inf of x + sqrt(inf)).
        Near 1 the rounded x + 1 moves the result by several ulps (acosh(1.0029) is 0.07611 in f16 on cpu, 0.07654
        rounded once; fuzz seed 20271001 #1972): measured on 1,000 values per type in [1, 100] and beyond the
        threshold, all cpu's bits."""
        out = entry["results"][0]
        rewrite = _Rewrite(self, entry)
        emit, splat = rewrite.emit, rewrite.splat
        x = entry["operands"][0]
        one = splat(1.0)
        root = emit("sqrt", [emit("multiply", [emit("add", [x, one]), emit("subtract", [x, one])])])
        small = emit("log", [emit("add", [x, root])])
        large = emit("add", [splat(math.log(2.0)), emit("log", [x])])
        largest = {"f16": 65504.0, "bf16": 3.3895313892515355e38, "f32": 3.4028234663852886e38}[out["dtype"]]
        beyond = emit("compare", [x, splat(math.sqrt(largest))], "bool", attrs={
            "comparison_direction": "GE", "compare_type": "FLOAT"})
        below = emit("compare", [x, splat(-1.0)], "bool", attrs={"comparison_direction": "LT", "compare_type": "FLOAT"})
        emit("select", [below, splat(math.nan), emit("select", [beyond, large, small])], result=out)
        return rewrite.ops

    def _power_of_constant(self, entry: Dict[str, Any], mlir_op: Any) -> List[Dict[str, Any]]:
        """A real power with a constant exponent as cpu computes it (_pow_by_constant)."""
        rewrite = _Rewrite(self, entry)
        exponent = _splat_value(mlir_op.operands[1])
        assert exponent is not None  # the caller matched it
        _pow_by_constant(rewrite, entry["operands"][0], exponent, entry["results"][0])
        return rewrite.ops

    def _power_of_exp(self, entry: Dict[str, Any], mlir_op: Any, exponent: int) -> List[Dict[str, Any]]:
        """jaxlib 0.4.13's HandlePower: pow(exp(A), B) => exp(A * B), for any B but the 0 and 1 its earlier rules fold,
        whatever else reads the exp (f32 and f16; bf16 pairs are never seen: _simplified_float). So sqrt-like powers
        of an exp round once: f16 jnp.exp(x) ** 0.5 at x = 1.843 is 2.5137 on cpu, 2.5117 through the rounded exp
        (fuzz seed 20272101 #6290). The exp no longer read is left to the dead-code pass."""
        rewrite = _Rewrite(self, entry)
        product = rewrite.emit("multiply", [exponent, entry["operands"][1]])
        rewrite.emit("exponential", [product], result=entry["results"][0])
        self.exponents[mlir_op.results[0]] = product  # an exp to the rules after it (a divide by it, a log of it)
        return rewrite.ops

    def _real_float(self, op: Any) -> bool:
        return (self._type(op.results[0].type) or ("", []))[0] in ("f32", "f16", "bf16")

    def _dtype_of(self, op: Any) -> str:
        """The dtype of the op's first result ("" for a token or tuple)."""
        return (self._type(op.results[0].type) or ("", []))[0]

    def _bf16(self, op: Any) -> bool:
        return self._dtype_of(op) == "bf16"

    def _f32(self, op: Any) -> bool:
        return self._dtype_of(op) == "f32"

    def _simplified_float(self, op: Any) -> bool:
        """f32 or f16: XLA:CPU's simplifier sees bf16 ops only between the converts to and from f32 that its float
        normalization has already put around each of them, so its rules of two ops never match a bf16 pair."""
        return (self._type(op.results[0].type) or ("", []))[0] in ("f32", "f16")

    def _log(self, entry: Dict[str, Any], mlir_op: Any) -> Optional[List[Dict[str, Any]]]:
        """A real log as XLA's algebraic simplifier rewrites it (HandleLog), in both series:
          log(sqrt(A)) => log(A) * 0.5         log(rsqrt(A)) => log(A) * -0.5
          log(pow(A, B)) => B == 0 ? 0 : log(|A|) * B   (not for a B of 0, 1, 2, 3 or -1: the power is folded first)
          log(exp(A)) => A                     (jaxlib 0.4.13)
          log(move(sqrt(A))) => move(log(A) * 0.5), the same for rsqrt (move: broadcasts and reshapes)
        None when none applies. The sqrt, pow or exp no longer read is left to the dead-code pass."""
        producer: Any = _producer(mlir_op.operands[0])
        name = producer.name if producer is not None else ""
        out = entry["results"][0]
        moves, below = [], producer
        while below is not None and below.name in _MOVED:
            moves.append(below)
            below = _producer(below.operands[0])
        if moves and below is not None and below.name in ("stablehlo.sqrt", "stablehlo.rsqrt"):
            # XLA sinks broadcasts and reshapes below the elementwise log first: log(broadcast(sqrt(A))) =>
            # broadcast(log(A) * 0.5), whatever else reads them (f16 and f32, both series; jax.vmap of a captured
            # sqrt, fuzz seed 20271001 #2053)
            rewrite = _Rewrite(self, entry, shape=list(self._tensor(below.results[0])[1]))
            half = 0.5 if below.name == "stablehlo.sqrt" else -0.5
            moved = rewrite.emit("multiply", [rewrite.emit("log", [self._use(below.operands[0])]), rewrite.splat(half)])
            for i, move in enumerate(reversed(moves)):
                moved = rewrite.emit(move.name.split(".", 1)[1], [moved], shape=list(self._tensor(move.results[0])[1]),
                                     attrs=O.read_attrs(move.attributes), result=out if i == len(moves) - 1 else None)
            return rewrite.ops
        if name == "stablehlo.exponential" and not _jax.is_current_series():
            self.ids[mlir_op.results[0]] = self._use(producer.operands[0])
            return []
        if name not in ("stablehlo.sqrt", "stablehlo.rsqrt", "stablehlo.power"):
            return None
        if name == "stablehlo.power" and _splat_value(producer.operands[1]) in _POWERS_XLA_FOLDS:
            return None  # XLA's simplifier visits the power first and folds it (a ** 2 => a * a): no power to see
        rewrite = _Rewrite(self, entry)
        ops, emit, splat = rewrite.ops, rewrite.emit, rewrite.splat
        a = self._use(producer.operands[0])
        if name != "stablehlo.power":
            emit("multiply", [emit("log", [a]), splat(0.5 if name == "stablehlo.sqrt" else -0.5)], result=out)
            return ops
        b = self._use(producer.operands[1])
        product = emit("multiply", [emit("log", [emit("abs", [a])]), b])
        exponent = _splat_value(producer.operands[1])
        if exponent is not None and exponent != 0:
            ops[-1]["results"] = [out]  # a constant B that is not 0: XLA folds the select away
            return ops
        zero = splat(0.0)
        is_zero = emit("compare", [b, zero], "bool", attrs={"comparison_direction": "EQ", "compare_type": "FLOAT"})
        emit("select", [is_zero, zero, product], result=out)
        return ops

    def _expanded_in_loop(self, entry: Dict[str, Any], op: Any) -> List[Dict[str, Any]]:
        """jaxlib 0.12's XLA:CPU computes an f16 tan or rsqrt in a while loop's body as its expansion, each part
        rounded to f16: tan(A) = sin(A) / cos(A), rsqrt(A) = 1 / sqrt(A) (measured on every f16 in [0.05, 3]: all
        its bits; outside loops, and for bf16, it rounds the f32 result once, as the ipu does)."""
        rewrite = _Rewrite(self, entry)
        a, out = self._use(op.operands[0]), entry["results"][0]
        if op.name == "stablehlo.tan":
            rewrite.emit("divide", [rewrite.emit("sine", [a]), rewrite.emit("cosine", [a])], result=out)
        else:
            rewrite.emit("divide", [rewrite.splat(1.0), rewrite.emit("sqrt", [a])], result=out)
        return rewrite.ops

    def _where_operand(self, rewrite: _Rewrite, value: Any, dtype: Optional[str] = None) -> int:
        """A value of the caller, or a (value, dimensions) broadcast inside jnp.where's function written again."""
        if not isinstance(value, tuple):
            return self._use(value)
        return rewrite.emit("broadcast_in_dim", [self._use(value[0])], dtype=dtype,
                            attrs={"broadcast_dimensions": value[1]})

    def _extremum_with_constant(self, entry: Dict[str, Any], op: Any, x: Any, bound: Any) -> List[Dict[str, Any]]:
        """max(x, c) or min(x, c) of a float x and a constant c, either operand order. XLA's simplifier puts a
        commutative op's constant on the right, except one it sees only after inlining a call that receives it as a
        parameter (jnp.clip's bound in jax 0.4.13), and LLVM lowers a maximum or minimum knowing a splat constant
        (relu's maxps on jaxlib 0.4.13, maxss on 0.12). So the op is written in XLA's operand order, marked
        "constant_operand": "lhs" or "rhs" when c is a splat, and the emulator computes it as XLA:CPU does
        (ipu/scalar_ops.h, xlaConstant). An array constant is only put on the right."""
        moved = not _through_parameter(bound) or entry["operands"][1] == self._use(bound)
        operands = [self._use(x), self._use(bound)] if moved else [self._use(bound), self._use(x)]
        if _splat_value(bound) is None:
            return [dict(entry, operands=operands)]
        return [dict(entry, operands=operands, attrs=dict(entry["attrs"], constant_operand="rhs" if moved else "lhs"))]

    def _extremum_of_negation(self, entry: Dict[str, Any], op: Any, x: Any) -> List[Dict[str, Any]]:
        """max(x, -x), max(-x, x), min(x, -x) or min(-x, x) of f32 as XLA:CPU computes them. jaxlib 0.12: |x| and
        -|x| (LLVM folds the pair into fabs), so a denormal is kept. jaxlib 0.4.13: the maximum or minimum of both
        operands flushed (a denormal x gives a zero of the first operand's sign, as its compiled loops do at every
        size), written as products by 1 that the emulator flushes."""
        rewrite = _Rewrite(self, entry)
        result = entry["results"][0]
        if _jax.is_current_series():
            if op.name == "stablehlo.minimum":
                rewrite.emit("negate", [rewrite.emit("abs", [self._use(x)])], result=result)
            else:
                rewrite.emit("abs", [self._use(x)], result=result)
        else:
            one = rewrite.splat(1.0)
            flushed = [rewrite.emit("multiply", [operand, one]) for operand in entry["operands"]]
            rewrite.emit(op.name.split(".", 1)[1], flushed, result=result)
        return rewrite.ops

    def _divide(self, entry: Dict[str, Any], mlir_op: Any, broadcast_only: bool = False) -> List[Dict[str, Any]]:
        """A float divide as XLA's algebraic simplifier rewrites it before XLA:CPU computes it (HandleDivide), so
        that the ipu rounds as cpu does. Operands are simplified first (program order), and a divide a rule writes
        is simplified again. The rules of the jaxlib the program is compiled for (_jax.numerics()), in order:
          (A / B) / (C / D) => (A * D) / (B * C)
          exp(A) / exp(B) => exp(A - B)        (jaxlib 0.4.13)
          A / sqrt(B) => A * rsqrt(B)          A / rsqrt(B) => A * sqrt(B)   (the root read by nothing else)
          A / exp(B) => A * exp(-B)            (jaxlib 0.4.13)
          A / pow(B, C) => A * pow(B, -C)      (f32 and f16)
          A / constant C => A * (1 / C)        (jaxlib 0.4.13: also a constant broadcast or reshaped)
          A / broadcast(B) => A * broadcast(1 / B)   (jaxlib 0.12: softmax's sum, any scalar divisor but a
                                                      while loop's own value)
          (A / B) / C => A / (B * C)           A / (B / C) => (A * C) / B
        An operand a rule no longer reads (the sqrt, the exp...) is left to the dead-code pass. `broadcast_only`:
        jaxlib 0.12's A / broadcast(B) alone (a bf16 divide)."""
        ops: List[Dict[str, Any]] = []
        out = entry["results"][0]
        dtype, shape = out["dtype"], out["shape"]
        current = _jax.numerics() == "jaxlib-0.12"
        hoisted = current and _hoisted(mlir_op)

        # a bf16 divide's reciprocal and product stay in f32 on cpu (XLA's excess precision), rounded once
        wide = "f32" if broadcast_only else dtype

        def emit(name: str, operands: List[int], shape: List[int], attrs: Optional[Dict[str, Any]] = None,
                 result: Optional[Dict[str, Any]] = None, of: Optional[str] = None) -> int:
            result = result or self._fresh(of or dtype, shape)
            ops.append(_derived(entry, name, operands, [result], attrs))
            return result["id"]

        def reciprocal(x: int, shape: List[int], of: Optional[str] = None) -> int:
            one = emit("constant", [], [], {"value": Blob(_one(of or dtype)), "splat": False}, of=of)
            ones = emit("broadcast_in_dim", [one], shape, {"broadcast_dimensions": []}, of=of) if shape else one
            return emit("divide", [ones, x], shape, of=of)

        def inverse_of(value: Any) -> Optional[int]:
            """1 / value written without a divide (sqrt, rsqrt, exp) or as a reciprocal XLA folds or hoists, or
            None when no rule applies to dividing by it."""
            producer: Any = _producer(value)
            name = producer.name if producer is not None else ""
            if broadcast_only and name != "stablehlo.broadcast_in_dim":
                return None
            moves, source, below = [], value, producer  # broadcasts and reshapes XLA 0.4.13 sees through
            while below is not None and below.name in _MOVED and not current:
                moves.append(below)
                source = below.operands[0]
                below = _producer(source)
            if moves and below is not None and below.name == "stablehlo.constant":
                inverse = reciprocal(self._use(source), list(self._tensor(source)[1]))
                for move in reversed(moves):
                    inverse = emit(move.name.split(".", 1)[1], [inverse], list(self._tensor(move.results[0])[1]),
                                   O.read_attrs(move.attributes))
                return inverse
            if name in ("stablehlo.sqrt", "stablehlo.rsqrt") and len(list(value.uses)) == 1:
                # (XLA rewrites A / sqrt(B) only where the sqrt has no other use: WithOneUse)
                value_shape = list(self._tensor(value)[1])
                x = self._use(producer.operands[0])
                return emit("sqrt" if name == "stablehlo.rsqrt" else "rsqrt", [x], value_shape)
            if name == "stablehlo.power" and dtype != "bf16":
                c = _splat_value(producer.operands[1])
                if c == -1.0:  # 1 / B when HandleDivide sees it: A / (1 / B) => (A * B) / 1 => A * B
                    return self._use(producer.operands[0])
                if c in _POWERS_XLA_FOLDS:  # already multiplies (or 1, or A) when HandleDivide sees it
                    return None
                value_shape = list(self._tensor(value)[1])
                base, exponent = (self._use(v) for v in producer.operands)
                if c is not None and -c in _POWERS_REWRITTEN:  # the new pow(B, -c), simplified in turn
                    return _pow_by_constant(_Rewrite(self, entry, ops, value_shape), base, -c)
                return emit("power", [base, emit("negate", [exponent], value_shape)], value_shape)
            if not current and not broadcast_only and (x_id := self._exponent(value)) is not None:
                # (also an exp a rule wrote: exp(A) * exp(A) => exp(A + A), so 1 / (exp(A) * exp(A)) is exp(-(A +
                # A)): jnp.exp2(x) ** -2 in f16, fuzz seed 20271001 #4250)
                value_shape = list(self._tensor(value)[1])
                return emit("exponential", [emit("negate", [x_id], value_shape)], value_shape)
            if name == "stablehlo.pad" and _pads_out_its_operand(producer) and _is_constant(producer.operands[1]):
                # a pad whose result holds none of its operand's elements is a broadcast of its padding value to XLA:
                # A / constant C (x / lax.pad(v, 0.001, ...) cropping v away, f16: fuzz seed 20271601 #6152)
                inverse = reciprocal(self._use(producer.operands[1]), [])
                return emit("broadcast_in_dim", [inverse], list(self._tensor(value)[1]), {"broadcast_dimensions": []})
            if name == "stablehlo.constant":
                whole, value_shape = self._use(value), list(self._tensor(value)[1])
                if whole in self.splat_scalars:  # one reciprocal, broadcast, as XLA folds it
                    inverse = reciprocal(self.splat_scalars[whole], [])
                    return emit("broadcast_in_dim", [inverse], value_shape, {"broadcast_dimensions": []})
                return reciprocal(whole, value_shape)
            if name == "stablehlo.broadcast_in_dim" and current and not broadcast_only and \
                    _is_constant(producer.operands[0]) and \
                    math.prod(self._tensor(producer.operands[0])[1]) == math.prod(shape):
                # a broadcast that adds no element (a constant scalar to f32[1]) is a reshape to XLA, which it
                # folds into the constant: A / constant C => A * (1 / C) (272 / -1.5 in f16[1]: fuzz seed 20270901
                # #7152)
                source = producer.operands[0]
                inverse = reciprocal(self._use(source), list(self._tensor(source)[1]))
                return emit("broadcast_in_dim", [inverse], shape, O.read_attrs(producer.attributes))
            if name == "stablehlo.broadcast_in_dim" and current and \
                    math.prod(self._tensor(producer.operands[0])[1]) < math.prod(shape) and \
                    (not (carried := _while_argument(producer.operands[0])) or hoisted or
                     1 in self._tensor(producer.operands[0])[1]) and (
                        (_readers_hoisted(producer.operands[0]) if carried else _readers_here(producer.operands[0]))
                        == 1 or _is_constant(producer.operands[0]) or
                        1 in self._tensor(producer.operands[0])[1]):
                # (a broadcast that only adds dimensions of one, jnp.expand_dims, is a reshape to XLA; a divisor that
                # is a loop's own value, lax.scan's `c / s` of a captured s, stays a divide on cpu unless the whole
                # divide is loop-invariant and XLA hoists it out of the loop first (`x1 / x36` of two captured
                # values in a lax.fori_loop body: fuzz seed 20271401 #121) or unless it has dimensions of one, which
                # XLA's simplifier reshapes away first, so that what it broadcasts is that reshape, not the loop's
                # value (`a / c` of a captured c f32[3, 1] or f32[1, 1, 1]: fuzz seed 20272201 #621), and so does one
                # that something else also reads, unless a constant: `(x2, v / x2)`, or unless it has dimensions of
                # one: XLA broadcasts a reshape that drops them, and that reshape has one reader: `(x / b, b)` of
                # b f32[1, 1] or f32[2, 1] multiplies)
                source = producer.operands[0]
                source_shape = list(self._tensor(source)[1])
                x = self._use(source)
                if wide != dtype:
                    x = emit("convert", [x], source_shape, of=wide)
                inverse = reciprocal(x, source_shape, of=wide)
                return emit("broadcast_in_dim", [inverse], shape, O.read_attrs(producer.attributes), of=wide)
            return None

        def quotient(value: Any) -> Optional[Tuple[int, int]]:
            """The (numerator, denominator) `value` divides, where XLA sees that divide (not across a branch's edge:
            the branch gets the quotient as a parameter)."""
            if broadcast_only or value not in self.quotients or _producer(value) is None:
                return None
            return self.quotients[value]

        def divide(a: int, a_value: Any, b: int, b_value: Any) -> Tuple[str, List[int]]:
            """The op that computes a / b and its operands (values: the MLIR values a and b are, if any)."""
            powers = [self._exponent(v) if v is not None else None for v in (a_value, b_value)]
            if not current and not broadcast_only and None not in powers:
                return "exponential", [emit("subtract", powers, shape)]  # type: ignore[arg-type]
            qa, qb = quotient(a_value), quotient(b_value)
            if qa is not None and qb is not None:
                (n1, d1), (n2, d2) = qa, qb
                return "divide", [emit("multiply", [n1, d2], shape), emit("multiply", [d1, n2], shape)]
            alike = a_value is not None and b_value is not None and \
                _sunk_broadcast_of(a_value, self._tensor) == _sunk_broadcast_of(b_value, self._tensor) is not None
            sunk = current and a_value is not None and b_value is not None and (alike or (
                _splat_value(a_value) is not None and _broadcast_of(b_value, self._tensor) is not None))
            # jaxlib 0.12 moves a broadcast below an elementwise op whose operands are all broadcast alike
            # (op(bcast(x), bcast(y)) => bcast(op(x, y))) before HandleDivide sees it: x / x stays a divide, and
            # x / constant C becomes x * (1 / C) below the broadcast, the same bits as a broadcast reciprocal; a
            # splat constant is a broadcast of any shape there (3 / vmap(tanh)(x) divides: fuzz seed 20270301 #4549)
            factor = inverse_of(b_value) if b_value is not None and (not sunk or _broadcasts_constant(b_value)) \
                else None
            if factor is not None and wide != dtype:
                return "convert", [factor if a_value is not None and _splat_value(a_value) == 1.0 else
                                   emit("multiply", [emit("convert", [a], shape, of=wide), factor], shape, of=wide)]
            if factor is not None:
                # 1 * F is F (XLA's simplifier drops the multiply, so a denormal F stays)
                return ("reshape", [factor]) if a_value is not None and _splat_value(a_value) == 1.0 else \
                    ("multiply", [a, factor])
            if qa is not None:
                numerator, denominator = qa
                return "divide", [numerator, emit("multiply", [denominator, b], shape)]
            if qb is not None:
                numerator, denominator = qb
                numerator_value = self.quotient_values.get(b_value)
                return divide(emit("multiply", [a, denominator], shape), None, numerator, numerator_value)
            return "divide", [a, b]

        a_value, b_value = mlir_op.operands
        name, operands = divide(entry["operands"][0], a_value, entry["operands"][1], b_value)
        if name == "divide":
            unchanged = operands[0] == entry["operands"][0] and operands[1] == entry["operands"][1]
            if not broadcast_only:
                self.quotients[mlir_op.results[0]] = (operands[0], operands[1])
                if unchanged:
                    self.quotient_values[mlir_op.results[0]] = a_value
            if unchanged:
                return ops + [entry]
        if name == "exponential":
            self.exponents[mlir_op.results[0]] = operands[0]
        return ops + [_derived(entry, name, operands, [out])]

    def _mesh_groups(self, groups: A.MeshAxes, what: str) -> List[List[int]]:
        if groups.mesh not in self.meshes:
            raise CompileError(
                f"{what}: its replica groups name the mesh @{groups.mesh}, which the module does not define")
        return self.meshes[groups.mesh].groups(groups.axes)

    def _fresh(self, dtype: str, shape: List[int]) -> Dict[str, Any]:
        """A value of the program that the module does not have (numbered after the module's values)."""
        return {"id": self._number(), "dtype": dtype, "shape": list(shape)}

    def _complex_product(self, entry: Dict[str, Any], mlir_op: Any) -> List[Dict[str, Any]]:
        """A dot_general or convolution of c64 values as four f32 ones of their parts, as Poplar users multiply
        pairs of f32 matrices: (a + bi)(c + di) = (ac - bd) + (ad + bc)i, each product the op with its attributes,
        so the emulator's matmul and convolution planners map and cost them."""
        ops: List[Dict[str, Any]] = []
        out = entry["results"][0]

        def op(name: str, operands: List[int], shape: List[int], attrs: Optional[Dict[str, Any]] = None,
               result: Optional[Dict[str, Any]] = None) -> int:
            result = result or self._fresh("f32", shape)
            ops.append(_derived(entry, name, operands, [result], attrs))
            return result["id"]

        parts = []
        for operand, value in zip(entry["operands"], mlir_op.operands):
            dtype, shape = self._tensor(value)
            if dtype != "c64":
                raise CompileError(f"{entry['mlir']} of complex<f32> and {value.type} values: jax converts both "
                                   f"operands to one type; convert the real one to complex64 first")
            parts.append([op(part, [operand], list(shape)) for part in ("real", "imag")])
        (a, b), (c, d) = parts
        conv = dict(entry["attrs"])
        ac, bd, ad, bc = (op(entry["op"], [x, y], out["shape"], conv) for x, y in ((a, c), (b, d), (a, d), (b, c)))
        re, im = op("subtract", [ac, bd], out["shape"]), op("add", [ad, bc], out["shape"])
        op("complex", [re, im], out["shape"], result=out)
        return ops

    def _exponent(self, value: Any) -> Optional[int]:
        """The id of X where XLA's simplifier sees `value` as exp(X) (an f32 or f16 exponential, or what a rule of the
        front end wrote as one), not across a branch's edge; else None."""
        producer = _producer(value)
        if producer is None:
            return None
        if value in self.exponents:
            return self.exponents[value]
        if producer.name == "stablehlo.exponential" and self._simplified_float(producer):
            return self._use(producer.operands[0])
        return None

    def _beside_identity_padding(self, entry: Dict[str, Any], pad: Any, other: Any) -> List[Dict[str, Any]]:
        """op(pad(x, c), y), either side, where c is op's identity (_identity_padded), as jaxlib 0.12's XLA:CPU
        computes it: the pad is fused into the op's loop, where LLVM folds op(c, y) => y on the padding, so y is
        kept there as it is (a denormal y is not flushed: fuzz seed 20270101 #8322, min(pad(x, inf), y)). The op
        where x is, y where the padding is: a select by a pad of `true` with `false`."""
        rewrite = _Rewrite(self, entry)
        computed = rewrite.emit(entry["op"], entry["operands"])
        source_shape = list(self._tensor(pad.operands[0])[1])
        true, false = (rewrite.emit("constant", [], "bool", shape=[], attrs={"value": Blob(bit), "splat": False})
                       for bit in (b"\x01", b"\x00"))
        inside = rewrite.emit("broadcast_in_dim", [true], "bool", source_shape, {"broadcast_dimensions": []}) \
            if source_shape else true
        mask = rewrite.emit("pad", [inside, false], "bool", attrs=O.read_attrs(pad.attributes))
        rewrite.emit("select", [mask, computed, self._use(other)], result=entry["results"][0])
        return rewrite.ops

    def _combined_scatter(self, op: Any) -> Optional[Tuple[Any, Any]]:
        """(the scatter, the other operand A) for A op scatter(identity, I, U, op), either side, where XLA's simplifier
        writes scatter(A, I, U, op), so that A is left as it is outside the updated windows (a denormal or a -0 A
        stays; x + segment_sum(u, ids)): f32 and f16 (bf16 ops are already between converts then), for a scatter of
        one update window with a sum or a product combiner, and with jaxlib 0.12 also a maximum or a minimum, at any
        indices (XLA makes it a dynamic-update-slice, whose A + DUS(0, U) => DUS(A, DS(A) + U)); with jaxlib 0.12 a
        sum's scatter of any number of windows that nothing else reads (HandleAdd's A + scatter(0, I, U) =>
        scatter(A, I, U)). Else None. Measured on cpu, both series, f32/f16/bf16, 1 and 2 windows, constant, dynamic
        and dropped indices, one and two readers; not jaxlib 0.4.13's maximum and minimum, where LLVM computes
        max(-inf, A) on the side XLA writes the scatter (reading a denormal A as 0)."""
        combiner = _SCATTER_COMBINES[op.name]
        current = _jax.is_current_series()
        if combiner in ("maximum", "minimum") and not current:
            return None
        for scatter, other in ((op.operands[1], op.operands[0]), (op.operands[0], op.operands[1])):
            scatter = _unconverted(scatter)
            producer = _producer(scatter)
            windows = _scatter_windows(producer)
            if producer is None or windows is None or windows[0].get("computation") != combiner \
                    or other.type != scatter.type:
                continue
            if _splat_value(producer.operands[0]) != _SCATTER_IDENTITIES[combiner]:
                # jaxlib 0.12 also A + scatter(B, I, U, add) => scatter(A + B, I, U, add) for one update window
                # (f16: (x.at[i].add(u) + 16) rounds x + 16 first; fuzz seed 20270901 #9054)
                if current and combiner == "add" and windows[1] == 1:
                    return producer, other
                continue
            if windows[1] == 1 or (current and combiner == "add" and len(list(scatter.uses)) == 1):
                return producer, other
        return None

    def _scatter_onto(self, entry: Dict[str, Any], scatter: Any, other: Any) -> List[Dict[str, Any]]:
        """scatter(A, I, U, op) for `entry`, A op scatter(identity, I, U, op) (_combined_scatter): the scatter
        translated again (its own update computation), onto A, at `entry`'s location and with its result."""
        translated = self.ids[scatter.results[0]]
        onto = self._op(scatter)
        self.ids[scatter.results[0]] = translated  # the scatter itself stays what other readers read
        ops: List[Dict[str, Any]] = []
        base = self._use(other)
        if _splat_value(scatter.operands[0]) != _SCATTER_IDENTITIES[onto["attrs"]["computation"]]:
            base = _Rewrite(self, entry, ops).emit("add", [base, onto["operands"][0]])  # A + B, then the updates
        onto["operands"][0] = base
        onto["results"] = entry["results"]
        if "loc" in entry:
            onto["loc"] = entry["loc"]
        return ops + [onto]

    def _scatter_into_identity(self, entry: Dict[str, Any], op: Any) -> Optional[List[Dict[str, Any]]]:
        """A float scatter of one update window at constant indices, in bounds, into a splat of its combiner's identity
        (jnp.zeros(n).at[3].add(x), segment_sum with one constant segment id), as XLA:CPU computes it: its scatter
        expander's loop of one trip is unrolled, the combine with the identity is the update itself (XLA's A + 0 =>
        A; jaxlib 0.12 also max(-inf, A) => A) and the dynamic-update-slice of a broadcast constant a pad, so the
        update is placed as it is (a -0 or a denormal update is kept): a dynamic_update_slice of the update reshaped
        to its window. (jax 0.4.13 writes a negative index as a select XLA folds; the front end does not see through
        it.) Else None."""
        attrs = entry["attrs"]
        computation = attrs.get("computation", "")
        identity = _SCATTER_IDENTITIES.get(computation)
        if computation in ("maximum", "minimum") and not _jax.is_current_series():
            identity = None  # jaxlib 0.4.13 computes max(-inf, u) with maxps, reading a denormal as 0
        if identity is None or not self._real_float(op) or _splat_value(op.operands[0]) != identity:
            return None
        placed = _scatter_window(op)
        if placed is None:
            return None
        start, window, operand_shape = placed
        if any(s < 0 or s + w > n for s, w, n in zip(start, window, operand_shape)):
            return None  # dropped: left to the scatter
        rewrite = _Rewrite(self, entry)
        update = rewrite.emit("reshape", [entry["operands"][2]], shape=window)
        starts = [rewrite.emit("constant", [], "i32", shape=[], attrs={"value": Blob(struct.pack("<i", s)),
                                                                         "splat": False}) for s in start]
        rewrite.emit("dynamic_update_slice", [entry["operands"][0], update] + starts, result=entry["results"][0])
        return rewrite.ops

    def _unbatch_indices(self, entry: Dict[str, Any], mlir_op: Any) -> List[Dict[str, Any]]:
        """A gather or scatter with batching dimensions (newer StableHLO) as one without: batching dimension k of
        the operand is indexed by the position along batching dimension k of the indices, so each becomes one more
        index column, an iota along that dimension, and a collapsed (inserted) dimension. The emulator then sees
        the gather or scatter it has always run."""
        attrs = dict(entry["attrs"])
        gather = entry["op"] == "gather"
        operand_dims = attrs.pop("operand_batching_dims" if gather else "input_batching_dims", [])
        index_dims = attrs.pop("start_indices_batching_dims" if gather else "scatter_indices_batching_dims", [])
        collapsed, to_operand = ("collapsed_slice_dims", "start_index_map") if gather else \
            ("inserted_window_dims", "scatter_dims_to_operand_dims")
        indices_id = entry["operands"][1]
        dtype, dims = self._tensor(mlir_op.operands[1])
        shape = list(dims)
        ops: List[Dict[str, Any]] = []
        vector_dim = attrs["index_vector_dim"]
        if vector_dim == len(shape):  # an implicit trailing index vector of one: make it explicit
            shape = shape + [1]
            reshaped = self._fresh(dtype, shape)
            ops.append(_derived(entry, "reshape", [indices_id], [reshaped]))
            indices_id = reshaped["id"]
        columns = [indices_id]
        for dim in index_dims:
            column_shape = list(shape)
            column_shape[vector_dim] = 1
            column = self._fresh(dtype, column_shape)
            ops.append(_derived(entry, "iota", [], [column], {"iota_dimension": dim}))
            columns.append(column["id"])
        shape = list(shape)
        shape[vector_dim] += len(index_dims)
        joined = self._fresh(dtype, shape)
        ops.append(_derived(entry, "concatenate", columns, [joined], {"dimension": vector_dim}))
        attrs[collapsed] = sorted(attrs[collapsed] + operand_dims)
        attrs[to_operand] = attrs[to_operand] + operand_dims
        operands = list(entry["operands"])
        operands[1] = joined["id"]
        ops.append(dict(entry, operands=operands, attrs=attrs))
        return ops

    def _int_to_float(self, op: Any) -> bool:
        """A dot_general or convolution of integers with a float result (preferred_element_type=float32)."""
        result = self._type(op.results[0].type)
        return (result is not None and T.dtype_kind(result[0]) == "f"
                and all(T.dtype_kind(self._tensor(v)[0]) in "iu" for v in op.operands))

    def _widening(self, op: Any) -> bool:
        """A dot_general or convolution of floats of different types with an f32 result (f32 x bf16, as jax 0.12's
        attention writes it): each operand widens exactly to f32."""
        result = self._type(op.results[0].type)
        dtypes = {self._tensor(v)[0] for v in op.operands}
        return result is not None and result[0] == "f32" and len(dtypes) > 1 and dtypes <= {"f16", "bf16", "f32"}

    def _float_product(self, entry: Dict[str, Any], mlir_op: Any) -> List[Dict[str, Any]]:
        """A product of integers, or of floats of different types, with a float result as the product of the
        operands converted to the result's type, as XLA computes it (jax's tests check exactly that equivalence)."""
        dtype = entry["results"][0]["dtype"]
        ops, operands = [], []
        for operand, value in zip(entry["operands"], mlir_op.operands):
            if self._tensor(value)[0] == dtype:
                operands.append(operand)
                continue
            converted = self._fresh(dtype, list(self._tensor(value)[1]))
            ops.append(_derived(entry, "convert", [operand], [converted]))
            operands.append(converted["id"])
        return ops + [dict(entry, operands=operands)]

    def _split_complex(self, entry: Dict[str, Any], mlir_op: Any) -> List[Dict[str, Any]]:
        """A sort, reduce or reduce_window of c64 operands whose body is not one op the emulator runs on pairs, as the
        same op over their f32 real and imaginary parts. jax's bodies read a complex argument only through
        stablehlo.real and stablehlo.imag (lexicographic order: sort, max, min, argmax) and pass complex values on
        only through stablehlo.select, so each c64 operand becomes two f32 operands, each c64 body argument two,
        real/imag ops copies of them, and each select of complex values two selects; the results are put back
        together with stablehlo.complex. Emulator and cost model see an ordinary f32 op."""
        where = f" (at {entry['loc']})" if "loc" in entry else ""
        what = entry["mlir"]
        before: List[Dict[str, Any]] = []
        after: List[Dict[str, Any]] = []
        region = entry["regions"][0]

        def split_operand(operand: int, shape: List[int]) -> List[int]:
            parts = []
            for part in ("real", "imag"):
                value = self._fresh("f32", shape)
                before.append(_derived(entry, part, [operand], [value]))
                parts.append(value["id"])
            return parts

        operands: List[int] = []
        for operand, value in zip(entry["operands"], mlir_op.operands):
            dtype, shape = self._tensor(value)
            operands += split_operand(operand, list(shape)) if dtype == "c64" else [operand]
        results: List[Dict[str, Any]] = []
        for result in entry["results"]:
            if result["dtype"] != "c64":
                results.append(result)
                continue
            halves = [self._fresh("f32", result["shape"]) for _ in range(2)]
            results += halves
            after.append(_derived(entry, "complex", [h["id"] for h in halves], [result]))

        parts: Dict[int, List[int]] = {}  # c64 value of the body -> its real and imaginary f32 values
        params: List[Dict[str, Any]] = []
        # A comparator takes (lhs, rhs) per operand, so the parts of operand k are (lhs.re, rhs.re, lhs.im, rhs.im);
        # a reduce body takes the accumulators then the elements, so each c64 argument becomes (re, im) in place.
        groups = region["params"]
        groups = [groups[i:i + 2] for i in range(0, len(groups), 2)] if entry["op"] == "sort" else [[p] for p in groups]
        for group in groups:
            if group[0]["dtype"] != "c64":
                params += group
                continue
            pairs = [[self._fresh("f32", []) for _ in range(2)] for _ in group]
            params += [pair[i] for i in range(2) for pair in pairs]
            for param, pair in zip(group, pairs):
                parts[param["id"]] = [p["id"] for p in pair]
        body: List[Dict[str, Any]] = []
        for inner in region["body"]:
            read = [v for v in inner["operands"] if v in parts]
            if read and inner["op"] in ("real", "imag"):  # now a copy of the argument's part
                body.append(dict(inner, op="convert", mlir="stablehlo.convert",
                                 operands=[parts[read[0]][inner["op"] == "imag"]]))
            elif (inner["op"] == "select" and inner["results"][0]["dtype"] == "c64"
                  and set(inner["operands"][1:]) <= set(parts)):
                pred, a, b = inner["operands"]
                pair = [self._fresh("f32", []) for _ in range(2)]
                body += [dict(inner, operands=[pred, parts[a][i], parts[b][i]], results=[pair[i]]) for i in range(2)]
                parts[inner["results"][0]["id"]] = [p["id"] for p in pair]
            elif read or any(r["dtype"] == "c64" for r in inner["results"]):
                raise CompileError(f"{what} of complex<f32> values: its body applies {inner['mlir']} to complex "
                                   f"values; the ipu runs such a body on the real and imaginary parts (as jax's "
                                   f"comparisons read them), through stablehlo.real, stablehlo.imag and "
                                   f"stablehlo.select only{where}")
            else:
                body.append(inner)
        returned: List[int] = []
        for v in region["results"]:
            returned += parts[v] if v in parts else [v]
        entry = dict(entry, operands=operands, results=results,
                     regions=[dict(region, params=params, body=body, results=returned)])
        return before + [entry] + after

    def _respell(self, op: Any, name: str) -> Dict[str, Any]:
        """An op in an older spelling jax still emits (nested pmap), as the program op it means."""
        entry = self._op_entry(op, O.RESPELLED[name])
        attrs = O.read_attrs(op.attributes)
        if name == "cross-replica-sum":  # an all_reduce with an add body
            attrs["computation"] = "add"
        elif name == "dot":  # XLA's HLO: a matrix or vector product, contracting lhs's last dimension with rhs's first
            attrs.update(lhs_batching_dimensions=[], rhs_batching_dimensions=[],
                         lhs_contracting_dimensions=[len(self._tensor(op.operands[0])[1]) - 1],
                         rhs_contracting_dimensions=[0])
        else:  # broadcast: new leading dimensions of the given sizes
            sizes, rank = attrs.pop("broadcast_sizes"), len(self._tensor(op.operands[0])[1])
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
        return _located(entry, op)


def _splat_for_elementwise_ops(op: Any) -> bool:
    """A splat constant of more than one real element whose every use is an elementwise op."""
    result = ir.RankedTensorType(op.results[0].type)
    if A.is_a(ir.ComplexType, result.element_type) or not result.has_static_shape or \
            math.prod(result.shape) < 2:  # complex constants are read from their text (types.py)
        return False
    attr = op.attributes["value"]
    if not A.is_a(ir.DenseElementsAttr, attr) or not ir.DenseElementsAttr(attr).is_splat:
        return False
    uses = list(op.results[0].uses)
    for use in uses:
        name = getattr(use.owner, "operation", use.owner).name  # an OpView (0.4.13) or an Operation
        entry = O.registry().get(name.split(".", 1)[-1]) if name.startswith("stablehlo.") else None
        if entry is None or not entry["elementwise"]:
            return False
    return bool(uses)


def _producer(value: Any) -> Optional[Any]:
    """The op that defines `value`, or None for a block argument and, inside a conditional's branch, for a value the
    branch captures from outside: XLA's conditional receives those as its branch computation's parameters, so its
    simplifier cannot see what made them (log(a) in a branch of lax.cond(p, f, g, x ** 0.5) is a log). An op the
    front end removed as XLA's simplifier does (A + 0 is A) is seen through to what made A."""
    value = _alias(value)
    owner = value.owner
    owner = getattr(owner, "operation", owner)
    if not (hasattr(owner, "name") and hasattr(owner, "operands")):
        return _sunk_constant(value)
    branches = getattr(_CALLS, "branches", None)
    if branches and not _inside(owner, branches[-1]) and owner.name != "stablehlo.constant":
        return None  # (a constant XLA propagates into the branch: the scatter of segment_sum's constant ids)
    return owner


def _alias(value: Any) -> Any:
    """The value `value` is to XLA's simplifier once the front end has removed the op that made it as XLA does
    (A + 0 is A)."""
    aliases = getattr(_CALLS, "aliases", None)
    while aliases and value in aliases:
        value = aliases[value]
    return value


def _sunk_constant(argument: Any) -> Optional[Any]:
    """The constant a while loop's argument always is, as XLA's WhileLoopConstantSinking sees it: the loop's operand
    at its position is a constant and the body returns the argument unchanged there (lax.scan carries what its body
    captures so: segment_sum's constant ids in a scan). None for any other block argument."""
    try:
        arg = ir.BlockArgument(argument)
    except (TypeError, ValueError):
        return None
    block = arg.owner
    loop = getattr(block.owner, "operation", block.owner)
    if getattr(loop, "name", None) != "stablehlo.while" or len(loop.regions) != 2:
        return None
    i = arg.arg_number
    body = loop.regions[1].blocks[0]
    returned = list(body.operations)[-1].operands
    if i >= len(returned) or i >= len(loop.operands) or returned[i] != body.arguments[i]:
        return None
    init = _producer(loop.operands[i])
    return init if init is not None and init.name == "stablehlo.constant" else None


def _readers_here(value: Any) -> int:
    """How many ops read `value` as XLA sees it from where the translation is: inside a conditional's branch, a value
    the branch captures is its computation's parameter, read only by that branch's own ops (a divisor that the other
    branch or the enclosing code also reads is still one reader's there: fuzz seed 20270601 #3546)."""
    uses = [getattr(u.owner, "operation", u.owner) for u in value.uses]
    blocks = getattr(_CALLS, "branch_blocks", None)
    if not blocks:
        return len(uses)
    case, block = _CALLS.branches[-1], blocks[-1]
    owner = getattr(value.owner, "operation", value.owner)
    if hasattr(owner, "name"):
        captured = not _in_block(owner, block, case)
    else:  # a block argument: of this branch's block or one nested in it, or of an enclosing region
        owner_op = getattr(value.owner.owner, "operation", value.owner.owner)
        captured = value.owner != block and not _in_block(owner_op, block, case)
    return len([u for u in uses if _in_block(u, block, case)]) if captured else len(uses)


_F16_IN_LOOPS_EXPANDED = ("stablehlo.tan", "stablehlo.rsqrt")


def _in_while(op: Any) -> bool:
    """`op` is in a region of a stablehlo.while (within one function)."""
    return any(parent.name == "stablehlo.while" for parent in _enclosing(op))


def _in_block(op: Any, block: Any, case: Any) -> bool:
    """`op` is in `block` (a region's block of the op `case`), directly or nested."""
    child, parent = op, op.parent
    while parent is not None:
        parent = getattr(parent, "operation", parent)
        if parent == case:
            return any(getattr(o, "operation", o) == child for o in block.operations)
        if parent.name == "func.func":
            return False
        child, parent = parent, parent.parent
    return False


def _inside(op: Any, ancestor: Any) -> bool:
    """`op` is nested in a region of `ancestor` (within one function)."""
    return any(parent == ancestor for parent in _enclosing(op))


def _enclosing(op: Any) -> Iterator[Any]:
    """The ops whose regions hold `op`, innermost first, up to (not including) its function."""
    parent = op.parent
    while parent is not None:
        parent = getattr(parent, "operation", parent)
        if parent.name == "func.func":
            return
        yield parent
        parent = parent.parent


_MOVED = ("stablehlo.broadcast_in_dim", "stablehlo.reshape")


def _callee_block(call: Any) -> Optional[Any]:
    """The body of the module's function a func.call calls, or None (not known while translating)."""
    func = getattr(_CALLS, "funcs", {}).get(ir.FlatSymbolRefAttr(call.attributes["callee"]).value)
    return func.regions[0].blocks[0] if func is not None else None


def _inlined_operands(producer: Any, name: str) -> Optional[List[Any]]:
    """The operands of `producer` if it is op `name`, or, as XLA sees it once it has inlined the call, of a call of
    a private function that returns op `name` of its parameters (jax 0.12's jnp.where is a call of @_where, one
    select), as values of the caller; else None."""
    if producer.name == name:
        return list(producer.operands)
    returned = _returned_op(producer)
    if returned is None:
        return None
    op, before, params = returned
    if before or op.name != name or not all(v in params for v in op.operands):
        return None
    return [producer.operands[params.index(v)] for v in op.operands]


def _returned_op(call: Any) -> Optional[Tuple[Any, List[Any], List[Any]]]:
    """For a call of a private function whose body ends by returning the results of one op: (that op, the ops
    before it, the body's parameters); else None."""
    if call.name != "func.call" or len(call.results) != 1:
        return None
    block = _callee_block(call)
    if block is None:
        return None
    body = [getattr(o, "operation", o) for o in block.operations]
    if len(body) < 2 or body[-1].name != "func.return" or list(body[-1].operands) != list(body[-2].results):
        return None
    return body[-2], body[:-2], list(block.arguments)


def _constant_bound(op: Any) -> Optional[Tuple[Any, Any]]:
    """(x, c) for a binary op of which exactly one operand c is a constant (_is_constant or _splat_value); else
    None."""
    a, b = op.operands
    constant = [_is_constant(v) or _splat_value(v) is not None for v in (a, b)]
    if constant[0] == constant[1]:
        return None
    return (b, a) if constant[0] else (a, b)


def _through_parameter(value: Any) -> bool:
    """`value` is a constant seen through a call's parameter (_splat_value), not one in this function."""
    producer = _producer(value)
    while producer is not None and producer.name in ("stablehlo.broadcast_in_dim", "stablehlo.negate",
                                                      "stablehlo.convert"):
        producer = _producer(producer.operands[0])
    return producer is None


def _int_constant(value: Any) -> Optional[List[int]]:
    """The elements of an integer constant, or of a broadcast of a one-element one, in order; else None. Also folded
    through the signed compare, add, subtract and select of such constants that XLA folds (jax 0.4.13 writes a
    scatter's constant index i as select(i < 0, i + n, i))."""
    producer = _producer(value)
    size = math.prod(ir.RankedTensorType(value.type).shape)
    if producer is not None and producer.name in _INT_FOLDS and \
            all(ir.RankedTensorType(v.type).shape == ir.RankedTensorType(value.type).shape for v in producer.operands):
        parts = [_int_constant(v) for v in producer.operands]
        if any(p is None for p in parts):
            return None
        if any(str(ir.RankedTensorType(v.type).element_type).startswith("ui") for v in producer.operands):
            return None  # (signed integers only)
        fold = _INT_FOLDS[producer.name]
        if producer.name == "stablehlo.compare":
            fold = _INT_COMPARES[A.enum(producer.attributes["comparison_direction"])]
        folded = [int(fold(*elements)) for elements in zip(*parts)]  # type: ignore[misc]
        width = ir.IntegerType(ir.RankedTensorType(value.type).element_type).width
        return [(e + (1 << (width - 1))) % (1 << width) - (1 << (width - 1)) if width > 1 else e for e in folded]
    if producer is not None and producer.name == "stablehlo.broadcast_in_dim":
        inner = _int_constant(producer.operands[0])
        return None if inner is None or len(inner) != 1 else inner * size
    if producer is not None and producer.name == "stablehlo.reshape":
        return _int_constant(producer.operands[0])
    if producer is not None and producer.name == "stablehlo.concatenate" and \
            A.is_a(ir.RankedTensorType, value.type) and ir.RankedTensorType(value.type).rank == 1:
        parts = [_int_constant(v) for v in producer.operands]
        return None if any(p is None for p in parts) else [e for p in parts for e in p]  # type: ignore[union-attr]
    if producer is None or producer.name != "stablehlo.constant" or \
            not A.is_a(ir.DenseIntElementsAttr, producer.attributes["value"]):
        return None
    attr = ir.DenseIntElementsAttr(producer.attributes["value"])
    return [attr[0]] * size if attr.is_splat else [attr[i] for i in range(len(attr))]


_INT_FOLDS: Dict[str, Callable[..., int]] = {
    "stablehlo.add": lambda a, b: a + b, "stablehlo.subtract": lambda a, b: a - b,
    "stablehlo.select": lambda p, a, b: a if p else b, "stablehlo.compare": lambda a, b: 0}  # (compares: below)
_INT_COMPARES: Dict[str, Callable[[int, int], bool]] = {
    "LT": lambda a, b: a < b, "LE": lambda a, b: a <= b, "GT": lambda a, b: a > b, "GE": lambda a, b: a >= b,
    "EQ": lambda a, b: a == b, "NE": lambda a, b: a != b}


def _unconverted(value: Any) -> Any:
    """`value` before the converts to its own type that make it (jax writes some; XLA drops them)."""
    producer = _producer(value)
    while producer is not None and producer.name == "stablehlo.convert" and producer.operands[0].type == value.type:
        value = producer.operands[0]
        producer = _producer(value)
    return value


def _identity_padded(op: Any) -> Optional[Tuple[Any, Any]]:
    """(the pad, the other operand) for op(pad(x, c), y) or op(y, pad(x, c)) where c is the op's identity for
    LLVM (op(c, y) is y, bit for bit: _PAD_IDENTITIES); else None."""
    for pad, other in ((op.operands[0], op.operands[1]), (op.operands[1], op.operands[0])):
        pad = _unconverted(pad)
        producer = _producer(pad)
        if producer is not None and producer.name == "stablehlo.pad" and other.type == pad.type:
            value = _splat_value(producer.operands[1])
            identity = _PAD_IDENTITIES[op.name]
            if value is not None and value == identity and math.copysign(1.0, value) == math.copysign(1.0, identity):
                return producer, other
    return None


def _scatter_windows(op: Any) -> Optional[Tuple[Dict[str, Any], int]]:
    """A scatter's attrs as the program has them (its combiner as "computation") and how many update windows it has,
    for a scatter of one operand with no batching dimensions; else None."""
    if op is None or op.name != "stablehlo.scatter" or len(op.operands) != 3 or len(op.results) != 1:
        return None
    attrs = O.read_attrs(op.attributes)
    if _BATCHING.keys() & attrs.keys() or "update_window_dims" not in attrs:
        return None
    attrs["computation"] = _body_computation(op, assign=True)
    update_shape = ir.RankedTensorType(op.operands[2].type).shape
    return attrs, math.prod(n for d, n in enumerate(update_shape) if d not in attrs["update_window_dims"])


def _scatter_window(op: Any) -> Optional[Tuple[List[int], List[int], List[int]]]:
    """(start, window sizes, operand shape) of a scatter of one update window at constant indices; else None."""
    windows = _scatter_windows(op)
    if windows is None or windows[1] != 1:
        return None
    attrs = windows[0]
    indices = _int_constant(op.operands[1])
    if indices is None or len(indices) != len(attrs["scatter_dims_to_operand_dims"]):
        return None
    operand_shape = list(ir.RankedTensorType(op.operands[0].type).shape)
    update_shape = ir.RankedTensorType(op.operands[2].type).shape
    sizes = iter(update_shape[d] for d in attrs["update_window_dims"])
    window = [1 if d in attrs["inserted_window_dims"] else next(sizes) for d in range(len(operand_shape))]
    start = [0] * len(operand_shape)
    for k, d in enumerate(attrs["scatter_dims_to_operand_dims"]):
        start[d] = int(indices[k])
    return start, window, operand_shape


def _drops_its_window(op: Any) -> bool:
    """A scatter of one update window at constant indices where the window does not fit: XLA drops the update."""
    placed = _scatter_window(op)
    return placed is not None and any(s < 0 or s + w > n for s, w, n in zip(*placed))


def _is_minus_zero(value: Any) -> bool:
    number = _splat_value(value)
    return number == 0.0 and math.copysign(1.0, number) < 0


def _negation_pair(op: Any) -> Optional[Any]:
    """x for a binary op of x and negate(x), in either order; else None."""
    a, b = op.operands
    for negated, other in ((a, b), (b, a)):
        producer = _producer(negated)
        if producer is not None and producer.name == "stablehlo.negate" and producer.operands[0] == other:
            return other
    return None


def _select_extremum(op: Any) -> Optional[Tuple[Any, Any, Any, bool]]:
    """(p, A, B, whether A is the select's first branch) for max or min of select(p, A, B) (or select(p, B, A))
    and A, either operand order, all of the result's type; else None. p and B may be a (value, broadcast
    dimensions) pair: a broadcast inside jnp.where's function, which XLA inlines (jnp.where(p, x, z) of a z of
    fewer dimensions), for the caller to write again."""
    for chosen, kept in (op.operands, reversed(list(op.operands))):
        producer = _producer(chosen)
        operands = _inlined_operands(producer, "stablehlo.select") if producer is not None else None
        if operands is None and producer is not None:
            operands = _select_of_broadcasts(producer)
        if operands is None or kept.type != op.results[0].type:
            continue
        predicate, first, second = operands
        if any(not isinstance(v, tuple) and v.type != kept.type for v in (first, second)):
            continue
        if not _read_once_where_fused(chosen, op):
            continue
        if first == kept and second != kept:
            return predicate, kept, second, True
        if second == kept and first != kept:
            return predicate, kept, first, False
    return None


def _extremum_of_update(op: Any) -> Optional[Tuple[Any, Any]]:
    """(A, the dynamic_update_slice) for max(A, dynamic_update_slice(A, U, i...)) or min of them that XLA fuses
    into the extremum's loop: read once there (_read_once_where_fused); else None. Only in this operand order:
    max(dynamic_update_slice(A, U, i), A) keeps some denormals of A outside the window on cpu and flushes others
    (f32[7, 8], a window at (2, 6): [0, 0] kept, [0, 7] flushed), which neither rule reproduces; the emulator
    flushes them all there."""
    kept, updated = op.operands
    producer = _producer(updated)
    if producer is not None and producer.name == "stablehlo.dynamic_update_slice" and \
            producer.operands[0] == kept and kept.type == op.results[0].type and _read_once_where_fused(updated, op):
        return kept, producer
    return None


def _select_of_broadcasts(call: Any) -> Optional[List[Any]]:
    """The operands of a call of a private function whose body broadcasts some of its parameters and returns a
    select of its parameters and those broadcasts (jax 0.12's @_where for operands of fewer dimensions), as caller
    values, a broadcast one as (value, broadcast dimensions); else None."""
    returned = _returned_op(call)
    if returned is None:
        return None
    select, before, params = returned
    values: Dict[Any, Any] = {p: call.operands[i] for i, p in enumerate(params)}  # callee value -> the caller's
    for o in before:
        if o.name == "stablehlo.convert" and o.operands[0] in values and o.operands[0].type == o.results[0].type:
            values[o.results[0]] = values[o.operands[0]]  # a convert to the same type (a weak-typed scalar)
        elif o.name == "stablehlo.broadcast_in_dim" and o.operands[0] in values and \
                not isinstance(values[o.operands[0]], tuple):
            values[o.results[0]] = (values[o.operands[0]], A.int_list(o.attributes["broadcast_dimensions"]))
        else:
            return None
    if select.name != "stablehlo.select" or not all(v in values for v in select.operands):
        return None
    return [values[v] for v in select.operands]


# The operand LLVM's select fold gives the op where the select kept X: X op identity is X but for a denormal X.
_SELECT_FOLD_IDENTITY = {"add": -0.0, "subtract": 0.0, "multiply": 1.0, "divide": 1.0}


def _select_of_arithmetic(op: Any) -> Optional[Tuple[Any, Any, Any, str, bool]]:
    """(p, X, Y, op name, whether X op Y is the select's first branch) for select(p, X op Y, X) or select(p, X, X op
    Y), op an f32 add, subtract, multiply or divide (X its dividend or minuend) read only by the select, Y not a
    constant (LLVM folds X op constant first); else None. `op` may be a call of a function that is one such select
    of its parameters (jax 0.4.13's jnp.where is a call of @_where), which XLA inlines first."""
    operands = _inlined_operands(op, "stablehlo.select")
    if operands is None:
        return None
    predicate, first, second = operands
    for branch, kept, op_first in ((first, second, True), (second, first, False)):
        producer = _producer(branch)
        if producer is None or not producer.name.startswith("stablehlo.") or not _alone_in_the_selects_loop(branch, op):
            continue
        name = producer.name.split(".", 1)[1]
        if name not in _SELECT_FOLD_IDENTITY or len(producer.operands) != 2:
            continue
        a, b = producer.operands
        for x, y in ((a, b), (b, a)) if name in ("add", "multiply") else ((a, b),):
            if x == kept and y != kept and y.type == kept.type and _splat_value(y) is None:
                return predicate, kept, y, name, op_first
    return None


def _alone_in_the_selects_loop(value: Any, select: Any) -> bool:
    """XLA:CPU computes `value` (an elementwise result) inside the loop of `select`, which is its only reader there:
    the select reads it alone, or XLA's fusion duplicates it into each of its readers (_takes_a_copy; none the
    function's result) and no other elementwise or move reader's result flows into the select's loop, where the
    loop would share the one copy (where(t > 100, 0, where(p, t, x)) keeps t's select). jnp.where(p, d, x) beside
    jnp.argmax(d) or jnp.cumsum(d, 1) of d = x - y: a copy each (fuzz seed 20261801 #501); beside jnp.sum(d, 0) of a
    matrix, XLA:CPU computes d apart."""
    others = [_owner(use) for use in value.uses if _owner(use) != select]
    if not all(_takes_a_copy(o, value) for o in others):
        return False
    looped = [o for o in others if _fusible_elementwise(o) or o.name in _LOOP_MOVES]
    loop = _loop_downstream(select)
    return not any(any(o == member for member in loop) for other in looped for o in _loop_downstream(other))


# Moves XLA:CPU computes as index arithmetic inside the loop of what reads them.
_LOOP_MOVES = tuple(f"stablehlo.{n}" for n in ("broadcast_in_dim", "reshape", "transpose", "reverse", "slice", "pad",
                                               "concatenate"))


def _takes_a_copy(owner: Any, value: Any, depth: int = 0) -> bool:
    """jaxlib 0.4.13's XLA:CPU fuses the elementwise producer of `value` into the loop of `owner`, which reads it: an
    elementwise op (jnp.where's @_where included), a move, a reduce over the minor dimension among others (it fuses
    into no reduction over major dimensions only), or a call of a function whose parameter `value` is only read so
    (jnp.argmax's @argmax, jnp.cumsum's slices and adds), which XLA inlines first."""
    if _fusible_elementwise(owner) or owner.name in _LOOP_MOVES:
        return True
    if not A.is_a(ir.RankedTensorType, value.type):
        return False
    if owner.name == "stablehlo.reduce":
        rank = len(ir.RankedTensorType(value.type).shape)
        return rank == 0 or rank - 1 in list(O.read_attrs(owner.attributes).get("dimensions") or [])
    block = _callee_block(owner) if owner.name == "func.call" and depth < 8 else None
    operands = list(owner.operands)
    if block is None or sum(v == value for v in operands) != 1:
        return False
    param = block.arguments[next(i for i, v in enumerate(operands) if v == value)]
    uses = [_owner(use) for use in param.uses]
    return bool(uses) and all(_takes_a_copy(u, param, depth + 1) for u in uses)


def _fusible_elementwise(owner: Any) -> bool:
    """An elementwise op, or a call of a function of elementwise ops and broadcasts (jnp.where's @_where), which XLA
    inlines and fuses alike."""
    name = owner.name
    if name.startswith("stablehlo."):
        entry = O.registry().get(name.split(".", 1)[-1])
        return entry is not None and entry["elementwise"]
    block = _callee_block(owner) if name == "func.call" else None
    if block is None:
        return False
    body = [getattr(o, "operation", o) for o in block.operations]
    return all(o.name in ("func.return", "stablehlo.broadcast_in_dim", "stablehlo.constant") or (
        o.name.startswith("stablehlo.") and _fusible_elementwise(o)) for o in body)


def _loop_downstream(op: Any, limit: int = 64) -> List[Any]:
    """`op` and the elementwise ops that read its results, transitively: what XLA:CPU's fusion puts in one loop."""
    found, frontier = [op], list(op.results)
    while frontier and len(found) < limit:
        for use in frontier.pop().uses:
            owner = _owner(use)
            if _fusible_elementwise(owner) and not any(owner == f for f in found):
                found.append(owner)
                frontier.extend(owner.results)
    return found


def _sorts_one_element(op: Any) -> bool:
    """A stablehlo.sort along a dimension of at most one element: its results are its operands."""
    dimension = O.read_attrs(op.attributes).get("dimension")
    if not op.operands or not A.is_a(ir.RankedTensorType, op.operands[0].type):
        return False
    shape = ir.RankedTensorType(op.operands[0].type).shape
    return isinstance(dimension, int) and 0 <= dimension < len(shape) and shape[dimension] <= 1


def _call_passing_operands(op: Any) -> Optional[List[Any]]:
    """For a call of a private function that returns its parameters through sorts of one element only (and constants
    their comparators read), the caller's values it returns; else None."""
    block = _callee_block(op)
    if block is None:
        return None
    params = list(block.arguments)
    passed: List[Tuple[Any, Any]] = [(p, v) for p, v in zip(params, op.operands)]

    def caller_value(value: Any) -> Optional[Any]:
        return next((v for p, v in passed if p == value), None)

    for o in block.operations:
        o = getattr(o, "operation", o)
        if o.name == "stablehlo.constant":  # the comparator's constants, hoisted out of it
            continue
        if o.name == "stablehlo.sort" and _sorts_one_element(o):
            sources = [caller_value(v) for v in o.operands]
            if any(v is None for v in sources):
                return None
            passed.extend(zip(o.results, sources))
        elif o.name == "func.return":
            out = [caller_value(v) for v in o.operands]
            return None if any(v is None for v in out) or len(out) != len(op.results) else out
        else:
            return None
    return None


def _owner(use: Any) -> Any:
    return getattr(use.owner, "operation", use.owner)  # an OpView (0.4.13) or an Operation


def _read_once_where_fused(value: Any, op: Any) -> bool:
    """XLA:CPU fuses `value` (an elementwise result) into `op`'s loop and LLVM folds it there only if that loop reads
    it once: not if it is also a result of the function (the fusion writes it too), nor if an op the loop also holds
    (one that reads op's result through elementwise ops) reads it as well. jnp.arctan2(jnp.minimum(s, x), s) of a
    select s keeps the minimum (a denormal is read as zero) where jnp.minimum(s, x) alone is the select's x."""
    others = [_owner(use) for use in value.uses if _owner(use) != op]
    if any(o.name == "func.return" for o in others):
        return False
    frontier, seen = list(op.results), 0
    while frontier and seen < 64:
        for use in frontier.pop().uses:
            seen += 1
            owner = _owner(use)
            if any(owner == o for o in others):
                return False
            name = owner.name
            entry = O.registry().get(name.split(".", 1)[-1]) if name.startswith("stablehlo.") else None
            if name == "func.call" or (entry is not None and entry["elementwise"]):
                frontier.extend(owner.results)
    return True


def _is_constant(value: Any) -> bool:
    """A constant, or a broadcast one, in this function (not through a convert or a call's parameter, which XLA's
    first simplifier passes still see)."""
    producer = _producer(value)
    if producer is not None and producer.name == "stablehlo.broadcast_in_dim":
        producer = _producer(producer.operands[0])
    return producer is not None and producer.name == "stablehlo.constant"


def _bf16_zero_test(op: Any, direct: bool) -> Optional[Any]:
    """For a compare, EQ or NE, with a zero constant of an f32 value that is a bf16 value widened (and then only
    moved: reversed, reshaped, transposed, sliced, broadcast), that f32 value; with ``direct``, for one of a bf16
    value, that value; else None."""
    if A.enum(op.attributes["comparison_direction"]) not in ("EQ", "NE"):
        return None
    for x, other in (op.operands, reversed(list(op.operands))):
        if _splat_value(other) != 0.0:
            continue
        element = str(ir.RankedTensorType(x.type).element_type)
        if element == "bf16" and direct:
            return x
        if element != "f32":
            continue
        producer = _producer(x)
        while producer is not None:  # moves, also those of jax's jitted helpers XLA inlines (jnp.flip)
            moved = next((operands for name in _MOVES_ONLY
                          if (operands := _inlined_operands(producer, name)) is not None), None)
            if moved is None:
                break
            producer = _producer(moved[0])
        if producer is not None and producer.name == "stablehlo.convert" and \
                str(ir.RankedTensorType(producer.operands[0].type).element_type) == "bf16":
            return x
    return None


_MOVES_ONLY = ("stablehlo.reverse", "stablehlo.reshape", "stablehlo.transpose", "stablehlo.slice",
               "stablehlo.broadcast_in_dim")


def _predicate_product(op: Any) -> Optional[Tuple[Any, Any]]:
    """(predicate, A) for a multiply of A by the conversion of a predicate of the same shape (either side); else
    None."""
    for converted, other in (op.operands, reversed(list(op.operands))):
        producer = _producer(converted)
        if producer is not None and producer.name == "stablehlo.convert" and \
                str(ir.RankedTensorType(producer.operands[0].type).element_type) == "i1" and \
                producer.operands[0].type.shape == op.results[0].type.shape:
            return producer.operands[0], other
    return None


# Composites of chlo ops whose decomposition XLA:CPU does not run, computing an HLO op of its own instead (jaxlib
# 0.12's has an erf op), and the emulator's op for each.
_CHLO_OPS = {"chlo.erf": "erf"}
# The same for complex operands only: chlo.sinh's decomposition of a c64 value is its large-|x| formula,
# exp(x + log(1/2)) - exp(-x + log(1/2)), which cancels to a relative error of ~1e-4 near 0, where XLA:CPU's complex
# sinh (sinh a cos b + i cosh a sin b) keeps full accuracy; a real sinh's decomposition is kept.
_COMPLEX_CHLO_OPS = {"chlo.sinh": "sinh"}


def _composite_name(op: Any) -> str:
    return A.string(A.named(op.attributes)["name"])


def _is_one(value: Any) -> bool:
    """`value` is 1.0 everywhere: a splat constant of 1, or one broadcast."""
    return _splat_value(value) == 1.0


def _one(dtype: str) -> bytes:
    """1.0 as the bytes of a constant of `dtype` (f32, f16 or bf16)."""
    return _float_bytes(dtype, 1.0)


def _float_bytes(dtype: str, number: float) -> bytes:
    """`number` (exact in bf16, f16 and f32: 1, 0.5, infinities...) as the bytes of a scalar of `dtype`."""
    if dtype == "bf16":
        return struct.pack("<f", number)[2:]
    return struct.pack("<e" if dtype == "f16" else "<f", number)


def _splat_value(value: Any) -> Optional[float]:
    """The number every element of `value` is, when it is a real float splat constant or a broadcast scalar one, seen
    through converts between real float types (rounded to each, as XLA folds a convert of a constant: jnp.clip's
    f32 bounds of a bf16 array) and, as XLA sees it once it has inlined the calls, through the parameters of a
    function that every call passes the same such constant (jnp.clip's bounds in jax's own jitted functions)."""
    if not _real_float_type(value.type):
        return None
    producer = _producer(value)
    sign = 1.0
    converts: List[str] = []  # the element types converted to, outermost first
    while producer is not None and (producer.name in ("stablehlo.broadcast_in_dim", "stablehlo.negate") or (
            producer.name == "stablehlo.convert" and _real_float_type(producer.operands[0].type)) or (
            producer.name == "stablehlo.scatter" and _drops_its_window(producer))):
        sign = -sign if producer.name == "stablehlo.negate" else sign  # XLA folds the negation of a constant
        if producer.name == "stablehlo.convert":
            converts.append(str(ir.RankedTensorType(producer.results[0].type).element_type))
        value = producer.operands[0]
        producer = _producer(value)
    if producer is None:
        number = _CALLS.constants.get(_parameter_of(value)) if getattr(_CALLS, "constants", None) else None
    elif producer.name != "stablehlo.constant" or not A.is_a(ir.DenseFPElementsAttr, producer.attributes["value"]) \
            or not ir.DenseElementsAttr(producer.attributes["value"]).is_splat:
        return None
    else:
        number = float(ir.FloatAttr(ir.DenseElementsAttr(producer.attributes["value"]).get_splat_value()).value)
    if number is None:
        return None
    for element in reversed(converts):  # innermost first; the sign flips exactly in every type
        number = float(np.asarray(number).astype(T.numpy_dtype(T.dtypes()[element][1]))) if element in T.dtypes() \
            else number
    return sign * number


# While a module is translated (_Translator.program): the constants each function's parameters receive from every
# call of it ((function, parameter number) -> the number) and the module's functions by name.
_CALLS = threading.local()


# XLA's simplifier rewrites pow(A, c) for these constants (HandlePower) before any rule of an op that reads it; a
# half is LLVM's pow simplification, in XLA:CPU's code (_pow_by_constant).
_POWERS_XLA_FOLDS = (0.0, 1.0, 2.0, 3.0, -1.0)
_POWERS_REWRITTEN = _POWERS_XLA_FOLDS + (0.5,)


def _pow_by_constant(rewrite: "_Rewrite", a: int, c: float, result: Optional[Dict[str, Any]] = None) -> int:
    """pow(A, c) for c in _POWERS_REWRITTEN as cpu computes it: XLA's HandlePower pow(A, 0) => 1, pow(A, 1) => A,
    pow(A, 2) => A * A, pow(A, 3) => A * (A * A), pow(A, -1) => 1 / A; pow(A, 0.5) => A == -inf ? inf : |sqrt(A)|
    (LLVM's pow simplification, which XLA:CPU's code goes through: a denormal or -0 gives +0 under
    denormals-are-zero, where libm's pow of a negative denormal is NaN). Returns the result's id (`result`'s, if
    given: a 1 or A is then a broadcast or copy into it)."""
    emit, splat = rewrite.emit, rewrite.splat
    if c in (0.0, 1.0):
        value = splat(1.0) if c == 0.0 else a
        return emit("reshape", [value], result=result) if result is not None else value
    if c == 2.0:
        return emit("multiply", [a, a], result=result)
    if c == 3.0:
        return emit("multiply", [a, emit("multiply", [a, a])], result=result)
    if c == -1.0:
        return emit("divide", [splat(1.0), a], result=result)
    root = emit("abs", [emit("sqrt", [a])])
    minus_inf = emit("compare", [a, splat(-math.inf)], "bool", attrs={"comparison_direction": "EQ",
                                                                       "compare_type": "FLOAT"})
    return emit("select", [minus_inf, splat(math.inf), root], result=result)


def _real_float_type(mlir_type: Any) -> bool:
    return A.is_a(ir.RankedTensorType, mlir_type) and \
        str(ir.RankedTensorType(mlir_type).element_type) in ("f16", "bf16", "f32", "f64")


def _hoisted(op: Any) -> bool:
    """`op` is in a while loop's body, not nested deeper, and reads only values that are the same in every iteration:
    XLA's WhileLoopInvariantCodeMotion moves it out of the loop before the simplifier's later runs see it."""
    loop = op.parent
    loop = getattr(loop, "operation", loop) if loop is not None else None
    if loop is None or loop.name != "stablehlo.while" or \
            not any(getattr(o, "operation", o) == op for o in loop.regions[1].blocks[0].operations):
        return False
    return all(_invariant_in(v, loop) for v in op.operands)


def _readers_hoisted(value: Any) -> int:
    """How many ops read `value`, a while loop's carried value, once XLA has hoisted its invariant readers out of the
    loop and dropped the carried value that nothing but the body's return reads: the body's readers but the return,
    and the readers of the loop's operand but the loop."""
    loop = getattr(value.owner.owner, "operation", value.owner.owner)
    outer = loop.operands[ir.BlockArgument(value).arg_number]
    inside = [u for u in value.uses if getattr(u.owner, "operation", u.owner).name != "stablehlo.return"]
    outside = [u for u in outer.uses if getattr(u.owner, "operation", u.owner) != loop]
    return len(inside) + len(outside)


def _invariant_in(value: Any, loop: Any, depth: int = 6) -> bool:
    """`value`, read in the body of the stablehlo.while `loop`, is the same in every iteration: a value from outside
    the loop, a constant, a carried value the body returns unchanged in its place, or an elementwise op or a move of
    such values (a few levels deep)."""
    value = _alias(value)
    if isinstance(value.owner, ir.Block):
        parent = getattr(value.owner.owner, "operation", value.owner.owner)
        if parent != loop:
            return parent is not None and not _inside(parent, loop)
        body = loop.regions[1].blocks[0]
        if value.owner != body:
            return False
        returned = list(body.operations)[-1].operands
        return returned[ir.BlockArgument(value).arg_number] == value
    owner = getattr(value.owner, "operation", value.owner)
    if not _inside(owner, loop) or owner.name == "stablehlo.constant":
        return True
    entry = O.registry().get(owner.name.split(".", 1)[-1]) if owner.name.startswith("stablehlo.") else None
    if depth == 0 or entry is None or len(owner.regions) or (
            entry["family"] not in ("unary", "binary") and owner.name not in _LOOP_MOVES):
        return False
    return all(_invariant_in(v, loop, depth - 1) for v in owner.operands)


def _while_argument(value: Any) -> bool:
    """`value` is an argument of a while loop's region: a loop-carried value as the body reads it."""
    block = value.owner
    if not isinstance(block, ir.Block):
        return False
    parent = getattr(block.owner, "operation", block.owner)
    return parent is not None and parent.name == "stablehlo.while"


def _parameter_of(value: Any) -> Optional[Tuple[str, int]]:
    """(function name, parameter number) for a parameter of a function (an argument of its entry block); else None."""
    block = value.owner
    if not isinstance(block, ir.Block):
        return None
    parent = block.owner
    parent = getattr(parent, "operation", parent)
    if parent is None or parent.name != "func.func" or "sym_name" not in A.named(parent.attributes):
        return None
    return A.string(parent.attributes["sym_name"]), ir.BlockArgument(value).arg_number


def _call_constants(funcs: Dict[str, Any]) -> Tuple[Dict[Tuple[str, int], float], Dict[Tuple[str, int], Any]]:
    """For the private functions of a module, the parameters that every func.call of the function passes the same
    splat constant (a float of _splat_value's kind): (function, parameter number) -> the number; and those that
    every call passes the same value (XLA sees that value once it has inlined the calls) -> the value."""
    passed: Dict[Tuple[str, int], Optional[float]] = {}
    values: Dict[Tuple[str, int], Any] = {}

    def walk(operation: Any) -> None:
        for region in operation.regions:
            for block in region.blocks:
                for inner in block.operations:
                    inner = getattr(inner, "operation", inner)
                    if inner.name == "func.call":
                        callee = ir.FlatSymbolRefAttr(inner.attributes["callee"]).value
                        for number, operand in enumerate(inner.operands):
                            value = _splat_value(operand)
                            key = (callee, number)
                            if key in passed and passed[key] != value:
                                value = None
                            passed[key] = value
                            earlier = values.get(key, operand)
                            values[key] = operand if earlier is not None and operand == earlier else None
                    walk(inner)

    for func in funcs.values():
        walk(func)
    public = {name for name, func in funcs.items()
              if "sym_visibility" not in A.named(func.attributes)
                 or A.string(func.attributes["sym_visibility"]) != "private"}
    return ({key: value for key, value in passed.items() if value is not None and key[0] not in public},
            {key: value for key, value in values.items() if value is not None and key[0] not in public})


def _passed(value: Any) -> Optional[Any]:
    """The value every call passes a private function's parameter `value`, or None (not a parameter, or not one
    value)."""
    return _CALLS.passed.get(_parameter_of(value)) if getattr(_CALLS, "passed", None) else None


_MIN_MAX = {"stablehlo.minimum": "stablehlo.maximum", "stablehlo.maximum": "stablehlo.minimum"}
# An elementwise op and the scatter combiner XLA's simplifier folds it into (_combined_scatter), and the identity
# of each combiner (what a scatter's operand must be filled with)
_SCATTER_COMBINES = {"stablehlo.add": "add", "stablehlo.multiply": "multiply", "stablehlo.maximum": "maximum",
                     "stablehlo.minimum": "minimum"}
_SCATTER_IDENTITIES = {"add": 0.0, "multiply": 1.0, "maximum": -math.inf, "minimum": math.inf}
# An op and the constant c for which LLVM folds op(c, y) => y (so a denormal y stays), both orders: a pad's value
# jaxlib 0.12's XLA:CPU fuses into the op (_beside_identity_padding)
_PAD_IDENTITIES = {"stablehlo.add": -0.0, "stablehlo.multiply": 1.0, "stablehlo.maximum": -math.inf,
                   "stablehlo.minimum": math.inf}


def _clamp_parts(op: Any) -> Optional[Tuple[Any, Any, Any]]:
    """(c0, x, c1) when `op` is min(max(x, c0), c1) or max(min(x, c1), c0), either operand order, with c0 and c1
    splat constants (or broadcast scalars) of the result's type and c0 <= c1; else None."""
    def split(o: Any) -> Optional[Tuple[Any, Any]]:  # (constant operand, other operand)
        a, b = o.operands
        if _splat_value(b) is not None:
            return b, a
        if _splat_value(a) is not None:
            return a, b
        return None

    outer = split(op)
    if outer is None:
        return None
    outer_const, inner_value = outer
    inner = _producer(inner_value)
    if inner is None or inner.name != _MIN_MAX[op.name] or inner_value.type != op.results[0].type:
        return None
    parts = split(inner)
    if parts is None or parts[1].type != op.results[0].type or outer_const.type != op.results[0].type \
            or parts[0].type != op.results[0].type:
        return None
    inner_const, x = parts
    low, high = (inner_const, outer_const) if op.name == "stablehlo.minimum" else (outer_const, inner_const)
    low_value, high_value = _splat_value(low), _splat_value(high)
    if low_value is None or high_value is None or not low_value <= high_value:  # NaN bounds too: XLA leaves them
        return None
    return low, x, high


# The reductions whose one-element windows XLA:CPU returns as they are (jnp.cumsum, cummax and cummin along an axis of
# length 1, lax.reduce_window of window 1); a product's it still multiplies by the init value 1, flushing a denormal.
_ONE_ELEMENT_WINDOW_IS_THE_ELEMENT = ("add", "maximum", "minimum", "or", "and")


_F32_TINY = 1.1754943508222875e-38  # the smallest normal f32

# Functions with f(x) ~ x near 0 whose jaxlib 0.4.13 XLA:CPU expansion flushes a tiny x's result to a zero: below
# what magnitude (asin: x / 2 is a denormal; atanh: x itself is, read as a zero).
_TINY_IS_ZERO = {"chlo.asin": 2 * _F32_TINY, "chlo.atanh": _F32_TINY}

_SCAN_BASE = 16  # XLA:CPU's ReduceWindowRewriter(base_length=16): its scans' rows
_SCAN_COMPUTATIONS = ("add", "multiply", "maximum", "minimum", "and", "or")


def _mappable_body(op: Any) -> bool:
    """A one-result body of elementwise ops and scalar constants (cumlogsumexp's logaddexp), which the front end can
    apply to whole arrays as XLA's map does."""
    if len(op.results) != 1 or len(op.regions) != 1:
        return False
    for inner in op.regions[0].blocks[0].operations:
        inner = getattr(inner, "operation", inner)
        if inner.name in ("stablehlo.return", "stablehlo.constant"):
            continue
        entry = O.registry().get(inner.name.split(".", 1)[-1]) if inner.name.startswith("stablehlo.") else None
        if entry is None or not entry["elementwise"] or len(inner.regions):
            return False
    return True


def _scan_window(op: Any) -> Optional[Tuple[List[int], int, bool, bool]]:
    """(operand shape, axis, forward, exclusive) for a reduce_window that XLA's ReduceWindowRewriter takes for a scan:
    one operand, a known reducer, every window dimension trivial but one, whose window is the whole axis (stride 1, no
    dilation) with the axis' length less one (inclusive) or the length (exclusive) of padding on one side, over an
    axis longer than the base length; else None."""
    if len(op.operands) != 2 or (_body_computation(op, False) not in _SCAN_COMPUTATIONS and not _mappable_body(op)):
        return None
    attrs = O.read_attrs(op.attributes)
    shape = list(ir.RankedTensorType(op.operands[0].type).shape)
    rank = len(shape)
    sizes = attrs.get("window_dimensions") or [1] * rank
    strides = attrs.get("window_strides") or [1] * rank
    base = attrs.get("base_dilations") or [1] * rank
    dilations = attrs.get("window_dilations") or [1] * rank
    padding = attrs.get("padding") or [[0, 0]] * rank
    axes = [d for d in range(rank) if (sizes[d], strides[d], base[d], dilations[d], list(padding[d])) !=
            (1, 1, 1, 1, [0, 0])]
    if len(axes) != 1:
        return None
    d = axes[0]
    length, (low, high) = shape[d], padding[d]
    if strides[d] != 1 or sizes[d] != length or base[d] != 1 or dilations[d] != 1 or length <= _SCAN_BASE:
        return None
    forward = low in (length - 1, length) and high == 0
    reverse = high in (length - 1, length) and low == 0
    if not (forward or reverse):
        return None
    return shape, d, forward, (low if forward else high) == length


_REDUCER_IDENTITY = {"add": 0.0, "multiply": 1.0, "maximum": -math.inf, "minimum": math.inf}


def _reduces_one_element(op: Any) -> bool:
    """A reduce of one operand over dimensions of one element only, whose init value is its combiner's identity."""
    if len(op.operands) != 2 or len(op.results) != 1:
        return False
    operand = op.operands[0].type
    dims = list(O.read_attrs(op.attributes).get("dimensions") or [])
    if not A.is_a(ir.RankedTensorType, operand) or any(operand.shape[d] != 1 for d in dims):
        return False
    computation = _body_computation(op, False)
    return computation in _REDUCER_IDENTITY and _splat_value(op.operands[1]) == _REDUCER_IDENTITY[computation]


def _pads_out_its_operand(pad: Any) -> bool:
    """A stablehlo.pad whose result holds none of its operand's elements (negative padding crops them all away, or
    the operand is empty): every element is the padding value."""
    attrs = O.read_attrs(pad.attributes)
    shape = list(ir.RankedTensorType(pad.operands[0].type).shape)
    for n, lo, hi, interior in zip(shape, attrs["edge_padding_low"], attrs["edge_padding_high"],
                                   attrs["interior_padding"]):
        size = lo + n + max(n - 1, 0) * interior + hi
        first = max(0, -(lo // (interior + 1)))  # the first operand element at or after the result's start
        if n == 0 or first >= n or lo + first * (interior + 1) >= size:
            return True
    return False


def _reduce_of_concatenate(op: Any) -> Optional[Tuple[str, int, List[int]]]:
    """(the combiner, the concatenated dimension, the pieces' sizes along it) for a reduce of one operand, whose body
    is one reducer op, over a concatenation (or a called function's: XLA inlines it) along a dimension it reduces:
    what XLA's simplifier splits into a reduce per piece (_reduce_pieces); else None."""
    if len(op.operands) != 2 or len(op.results) != 1 or not A.is_a(ir.RankedTensorType, op.operands[0].type):
        return None
    combine = _body_computation(op, False)
    producer = _producer(op.operands[0])
    if combine is None or producer is None:
        return None
    if producer.name == "func.call" and (returned := _returned_op(producer)) is not None:
        producer = returned[0]
    if producer.name != "stablehlo.concatenate" or len(producer.operands) < 2:
        return None
    dim = int(O.read_attrs(producer.attributes)["dimension"])
    if dim not in (O.read_attrs(op.attributes).get("dimensions") or []):
        return None
    return combine, dim, [int(ir.RankedTensorType(v.type).shape[dim]) for v in producer.operands]


def _reduce_through_moves(op: Any) -> Optional[Tuple[Any, List[int], Optional[List[int]]]]:
    """(the value, the dimensions to reduce over it, None) where XLA's simplifier reduces through the reshapes and
    transposes that feed a reduce of one operand (AlgebraicSimplifier::HandleReduce): through a reshape whose kept
    dimensions it leaves unmodified (here: the kept dimensions are a leading run of both shapes, every dimension
    reduced included), and through a transpose when the reduce's result has rank 0 or 1. Where the reduce reads
    elementwise ops of transposes instead (and of broadcasts and splats), layout assignment gives those ops the
    transposed layout, so the sum's order is again the untransposed one (jnp.sum(jnp.exp(x.T - m), 1), as in
    jax.nn.log_softmax(x.T, axis=1): fuzz seed 20271301 #436): (the reduce's operand, the dimensions to reduce once it
    is transposed back, that permutation). None where neither applies."""
    if len(op.operands) != 2 or len(op.results) != 1 or not A.is_a(ir.RankedTensorType, op.operands[0].type):
        return None
    dims = sorted(O.read_attrs(op.attributes).get("dimensions") or [])
    value, moved = op.operands[0], False
    while (producer := _producer(value)) is not None and producer.name in ("stablehlo.reshape", "stablehlo.transpose"):
        source = producer.operands[0]
        if not A.is_a(ir.RankedTensorType, source.type):
            break
        out_shape, in_shape = list(value.type.shape), list(source.type.shape)
        if producer.name == "stablehlo.reshape":
            kept = [d for d in range(len(out_shape)) if d not in dims]
            if in_shape == out_shape:
                pass
            elif kept == list(range(len(kept))) and in_shape[:len(kept)] == out_shape[:len(kept)]:
                dims = list(range(len(kept), len(in_shape)))
            else:
                break
        else:
            if len(op.results[0].type.shape) >= 2:
                break
            permutation = list(O.read_attrs(producer.attributes)["permutation"])
            dims = sorted(permutation[d] for d in dims)
        value, moved = source, True
    if moved:
        return value, dims, None
    transposed = _transposed_elementwise(value) if len(op.results[0].type.shape) < 2 else None
    if transposed is None:
        return None
    return value, sorted(transposed[d] for d in dims), [transposed.index(d) for d in range(len(transposed))]


def _transposed_elementwise(value: Any, depth: int = 6) -> Optional[List[int]]:
    """The permutation of the transposes an elementwise op (of elementwise ops...) reads, where every operand that is
    not a splat constant or a broadcast is a transpose by that same permutation (not the identity); else None."""
    producer = _producer(value)
    if producer is None and (outer := _passed(value)) is not None:  # (jax.nn.log_softmax's call, inlined)
        producer = _producer(outer)
    if producer is None or depth == 0 or len(producer.results) != 1:
        return None
    if producer.name == "stablehlo.transpose" and depth < 6:
        permutation = list(O.read_attrs(producer.attributes)["permutation"])
        return permutation if permutation != sorted(permutation) else None
    entry = O.registry().get(producer.name.split(".", 1)[-1]) if producer.name.startswith("stablehlo.") else None
    if entry is None or entry["family"] not in ("unary", "binary"):
        return None
    found = []
    for operand in producer.operands:
        below = _producer(operand)
        if _splat_value(operand) is not None or (below is not None and below.name == "stablehlo.broadcast_in_dim"):
            continue
        found.append(_transposed_elementwise(operand, depth - 1))
    return found[0] if found and all(f is not None and f == found[0] for f in found) else None


def _one_element_windows(op: Any) -> bool:
    """A reduce_window of one operand whose every window is one element (sizes, strides and dilations all 1)."""
    if len(op.operands) != 2:
        return False
    attrs = O.read_attrs(op.attributes)
    return all(all(d == 1 for d in attrs.get(name) or [1])
               for name in ("window_dimensions", "window_strides", "base_dilations", "window_dilations"))


def _broadcasts_constant(value: Any) -> bool:
    """`value` is a broadcast_in_dim (of a broadcast_in_dim...) of a stablehlo.constant."""
    producer = _producer(value)
    if producer is None or producer.name != "stablehlo.broadcast_in_dim":
        return False
    while producer is not None and producer.name == "stablehlo.broadcast_in_dim":
        producer = _producer(producer.operands[0])
    return producer is not None and producer.name == "stablehlo.constant"


def _sunk_broadcast_of(value: Any, tensor: Any,
                       depth: int = 4) -> Optional[Tuple[Tuple[int, ...], Tuple[int, ...]]]:
    """_broadcast_of `value`, or of an elementwise op whose operands are all that same broadcast or splat constants:
    jaxlib 0.12 moves the broadcast below such an op first (bcast(x) * 3 is bcast(x * 3), so (bcast(x) * 3) /
    bcast(x) divides: fuzz seed 20270501 #5050)."""
    found = _broadcast_of(value, tensor)
    producer = _producer(value)
    if found is not None or depth == 0 or producer is None or not producer.name.startswith("stablehlo.") or \
            len(producer.results) != 1:
        return found
    entry = O.registry().get(producer.name.split(".", 1)[1])
    if entry is None or entry["family"] not in ("unary", "binary"):
        return None
    kinds = {_sunk_broadcast_of(v, tensor, depth - 1) for v in producer.operands if _splat_value(v) is None}
    return kinds.pop() if len(kinds) == 1 else None


def _broadcast_of(value: Any, tensor: Any) -> Optional[Tuple[Tuple[int, ...], Tuple[int, ...]]]:
    """(operand shape, result dimensions of its axes) when `value` is a broadcast_in_dim, of a broadcast_in_dim...,
    or a transpose of one (XLA folds these into one broadcast); else None. `tensor` gives a value's (dtype, shape)."""
    producer = _producer(value)
    permutation = None
    if producer is not None and producer.name == "stablehlo.transpose":
        permutation = list(O.read_attrs(producer.attributes)["permutation"])
        producer = _producer(producer.operands[0])
    if producer is None or producer.name != "stablehlo.broadcast_in_dim":
        return None
    dims = list(O.read_attrs(producer.attributes)["broadcast_dimensions"])
    below = _producer(producer.operands[0])
    while below is not None and below.name == "stablehlo.broadcast_in_dim":  # axis i below is axis dims[i] here
        dims = [dims[d] for d in O.read_attrs(below.attributes)["broadcast_dimensions"]]
        producer, below = below, _producer(below.operands[0])
    if permutation is not None:  # result axis j of the transpose is axis permutation[j] of the broadcast
        dims = [permutation.index(d) for d in dims]
    return tuple(tensor(producer.operands[0])[1]), tuple(dims)


def _square_of(value: Any) -> Any:
    """A when `value` is A * A; else None."""
    producer = _producer(value)
    if producer is None or producer.name != "stablehlo.multiply":
        return None
    a, b = (_alias(v) for v in producer.operands)
    return a if a == b else None


def _is_dce_sink(op: Any) -> bool:
    """jax's ``dce_sink`` custom call (no results): an anchor against XLA's dead-code elimination."""
    if op.name != "stablehlo.custom_call" or len(op.results):
        return False
    attrs = A.named(op.attributes)
    return "call_target_name" in attrs and A.string(attrs["call_target_name"]) == "dce_sink"


_SDY_ANNOTATIONS = ("sdy.sharding_constraint", "sdy.reshard")
_SHARDING_TARGETS = ("Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape")


def _is_sharding_annotation(op: Any) -> bool:
    """A custom_call jax emits for jax.sharding / shard_map (@Sharding, @SPMDFullToShardShape, @SPMDShardToFullShape).
    XLA's SPMD partitioner consumes them; compile_to_program refuses more than one partition, so here each is the
    identity on one array (the full and the shard shape of one partition have the same elements)."""
    if len(op.operands) != 1 or len(op.results) != 1:
        return False
    if op.name in _SDY_ANNOTATIONS:  # the current series' Shardy spelling of the same annotations
        return True
    if op.name != "stablehlo.custom_call":
        return False
    attrs = A.named(op.attributes)
    return "call_target_name" in attrs and A.string(attrs["call_target_name"]) in _SHARDING_TARGETS


# Ops with a per-element scalar body the emulator interprets (calls in them are inlined), and those of them whose
# c64 operands are split into f32 parts when the body is not a single op the emulator runs on pairs.
# Attributes of a gather or scatter with batching dimensions (translate._unbatch_indices removes them).
_BATCHING = {"operand_batching_dims": 0, "start_indices_batching_dims": 0, "input_batching_dims": 0,
             "scatter_indices_batching_dims": 0}
_SCALAR_BODIES = ("reduce", "reduce_window", "sort", "scatter", "select_and_scatter", "all_reduce", "reduce_scatter")
_COMPLEX_SPLIT = ("stablehlo.sort", "stablehlo.reduce", "stablehlo.reduce_window")
# Products of c64 values, computed as four f32 products of the parts.
_COMPLEX_PRODUCTS = ("stablehlo.dot_general", "stablehlo.convolution")

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
