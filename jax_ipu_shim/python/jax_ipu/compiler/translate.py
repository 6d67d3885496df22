"""Walks a StableHLO module (func, stablehlo and chlo dialects) and builds the "jax-ipu-program" v1 document.

The module's constant elementwise ops are folded first, as XLA folds them (fold_constants.py). The walk then reads
the module op by op and offers each op to the rules (rules/: XLA's rewrites that change results on
cpu, one module per origin, in the order rules.RULES states); an op no rule takes is written as it is. The passes
(passes/) then rewrite whole functions of the document, and program_format.py encodes it."""

from __future__ import annotations

import logging
import math
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Set, Tuple

from jax._src.interpreters import mlir as jmlir
from jax._src.lib.mlir import ir

from jax_ipu import _jax

from . import attributes as A
from . import facts as F
from . import fold_constants, partitioner, spmd
from . import ops as O
from . import rewrite as W
from . import types as T
from .errors import CompileError, unsupported
from .passes import (
    common_subexpressions,
    contract_through_moves,
    dead_code,
    duplicate_products,
    id_counter,
    narrow_types,
    reassociate_constants,
)
from .program_format import FORMAT, VERSION, Blob, encode
from .rules import RULES

logger = logging.getLogger(__name__)

TERMINATORS = ("func.return", "stablehlo.return", "sdy.return")


def _no_checkpoint() -> None:
    """Between two ops of a compile no one can interrupt."""


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


def compile_to_binary(module_bytes: bytes, compile_options: bytes = b"", hosts: Optional[List[int]] = None,
                      checkpoint: Callable[[], None] = _no_checkpoint) -> bytes:
    """As compile_to_program, in the binary container the plugin passes to the emulator (constants as raw blobs).
    ``hosts``: with several processes (jax.distributed), the process of each replica's IPU, for the cost model.
    ``checkpoint``: called between ops; what it raises ends the compile (the backend's Ctrl-C check)."""
    program = translate(module_bytes, compile_options, checkpoint)
    if hosts is not None and len(hosts) == program["replicas"]:
        program["hosts"] = hosts
    return encode(program, binary=True)  # type: ignore[return-value]


def translate(module_bytes: Any, compile_options: bytes = b"",
              checkpoint: Callable[[], None] = _no_checkpoint) -> Dict[str, Any]:
    """The program document of a module, as Python values (constants as Blob); ``checkpoint`` as in
    compile_to_binary."""
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
            program = _Translator(module, checkpoint, partitions, partitioned, aliases).program()
        else:
            program = _Translator(module, checkpoint).program()
        # The emulator runs the program on replicas x partitions IPUs, one copy each (Poplar's replication);
        # "partitions" tells it how to number them (replica_id, partition_id) and PJRT what to report.
        program["replicas"] = replicas * partitions
        if partitions > 1:
            program["partitions"] = partitions
        program["numerics"] = _jax.numerics()
        return program


# The compile options (``jit(f).lower(x).compile(compiler_options={...})``, CompileOptions.env_option_overrides) that
# mean something for an ipu program, with their type. XLA's other debug options act on XLA's passes, which the ipu
# does not run (xla_gpu_autotune_level, xla_cpu_enable_fast_math...): they are checked as XLA:CPU checks them (an
# unknown name or a value of the wrong type is refused with XLA's words) and then ignored, with a warning.
COMPILE_OPTIONS: Dict[str, type] = {
    # XLA keeps the module's text in the executable; the ipu program always keeps its StableHLO source locations
    "xla_embed_ir_in_executable": bool,
}


def _check_compile_options(overrides: List[Tuple[str, Any]]) -> None:
    for key, value in overrides:
        if key in COMPILE_OPTIONS:
            if COMPILE_OPTIONS[key] is bool and not isinstance(value, bool) and \
                    str(value).lower() not in ("true", "false"):
                raise CompileError(f"compile option {key}: '{value}' is not a valid bool value.")
            continue
        refused = _jax.xla_refuses_option(key, value)
        if refused is not None:
            known = ", ".join(sorted(COMPILE_OPTIONS))
            raise CompileError(f"{refused} (the ipu compiler uses {known}; XLA's other options are checked and "
                               "ignored)")
        logger.warning("ipu: compile option %s=%r is XLA's and means nothing to the ipu compiler: ignored", key, value)


def _replication(module: Any, compile_options: bytes) -> Tuple[int, int]:
    """(num_replicas, num_partitions) from the compile options, else from the module's attributes, else (1, 1);
    the options' overrides are checked (_check_compile_options)."""
    if compile_options:
        from jax_ipu.compiler import compile_options as options_proto

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


def _aliases(func: Any) -> Donations:
    """The donations jax asked for: [parameter, result] of each ``tf.aliasing_output`` on a parameter (jax matched
    it with a result of its type), and the parameters marked ``jax.buffer_donor`` (donated, for XLA to match)."""
    attrs = A.named(func.attributes)
    if "arg_attrs" not in attrs:
        return Donations([], [])
    aliases, donors = [], []
    for index, arg_attrs in enumerate(ir.ArrayAttr(attrs["arg_attrs"])):
        entries = A.named(ir.DictAttr(arg_attrs))
        if "tf.aliasing_output" in entries:
            aliases.append([index, A.integer(entries["tf.aliasing_output"])])
        elif "jax.buffer_donor" in entries and A.boolean(entries["jax.buffer_donor"]):
            donors.append(index)
    return Donations(aliases, donors)


class Donations(NamedTuple):
    aliases: List[List[int]]  # [parameter, result]
    donors: List[int]  # parameters donated to any result XLA finds them (match_buffer_donors)


def match_buffer_donors(entry: Dict[str, Any], values: Dict[int, Dict[str, Any]], aliases: List[List[int]],
                        donors: List[int]) -> List[List[int]]:
    """[parameter, result] for the buffer donors (``jax.buffer_donor``) XLA gives a result
    (OptimizeInputOutputBufferAlias): the donors and the results no alias holds yet, each sorted by bytes, largest
    first (stably: parameter and result order among equals), matched wherever the sizes are equal. The sizes are the
    entry's, one IPU's shard of a partitioned program's, as XLA matches after SPMD partitioning (``values``: the
    entry's values by id). The runtime gives the result the donated bytes (pjrt/launch.cc); an unmatched donor is not
    donated, as on cpu."""
    sizes = T.element_bytes()

    def nbytes(value: Dict[str, Any]) -> int:
        return sizes[value["dtype"]] * math.prod(value["shape"])

    aliased, held = {i for i, _ in aliases}, {j for _, j in aliases}
    given = sorted(((nbytes(entry["params"][i]), i) for i in donors if i not in aliased), key=lambda d: -d[0])
    taken = sorted(((nbytes(values[r]), j) for j, r in enumerate(entry["results"]) if j not in held and r in values),
                   key=lambda d: -d[0])
    matched, a, b = [], 0, 0
    while a < len(given) and b < len(taken):
        if given[a][0] > taken[b][0]:
            a += 1
        elif given[a][0] < taken[b][0]:
            b += 1
        else:
            matched.append([given[a][1], taken[b][1]])
            a, b = a + 1, b + 1
    return matched


def _parse(module_bytes: Any) -> Any:
    data = module_bytes.encode() if isinstance(module_bytes, str) else bytes(module_bytes)
    try:
        return _jax.parse_module(data)
    except Exception as error:  # the bindings raise a bare Exception/MLIRError with the diagnostics
        raise CompileError(f"the ipu compiler cannot parse the module jax produced: {error}") from error


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
    """One pass over a module. Value ids are numbered per function, regions included. The rules call its public
    methods (use, entry, fresh, tensor, type_of, the dtype questions) and read its state (ids, tuples, quotients,
    exponents, inverses, splat_scalars, anchors)."""

    def __init__(self, module: Any, checkpoint: Callable[[], None] = _no_checkpoint, partitions: int = 1,
                 partitioned: Optional[partitioner.Partitioned] = None, aliases: Optional[Donations] = None):
        """``module`` is one device's program; for several partitions, XLA's partitioning of jax's (``partitioned``
        says how main's parameters and results split, ``aliases`` are jax's donations, by position).
        ``checkpoint`` is called between ops (compile_to_binary)."""
        fold_constants.run(module, checkpoint)  # before anything reads it, as XLA folds before its rules
        self.module = module
        self.checkpoint = checkpoint
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
        # A float 1 / B that a divide rule wrote as the power, root or exponential XLA leaves of it (1 * F is F):
        # the MLIR value -> B, so that dividing by it again divides by F as XLA does (rules/divide.py)
        self.inverses: Dict[Any, Any] = {}
        # A bf16 value a rule computed in f32 and rounded once (jaxlib 0.12's bf16 A / broadcast(B), A ** 0.5): the
        # MLIR value -> the id of the f32 value before the rounding, which a convert to f32 reads
        # (rules/excess_precision.py)
        self.unrounded: Dict[Any, int] = {}
        # Per block being written: [its body, how many entries are indexed, id -> the entry defining it]
        # (rules/excess_precision.py looks up what a convert reads there)
        self.written_index: Dict[int, List[Any]] = {}
        # ids of bf16 values rounded where a loop the front end removed had its edge (rules/structure.py
        # one_trip_loop): excess_precision's rules do not read past them
        self.rounded_at_loop_edge: Set[int] = set()
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
        F.CALLS.constants, F.CALLS.passed, F.CALLS.funcs, F.CALLS.aliases = {}, {}, self.funcs, {}
        F.CALLS.removed = []
        try:
            F.CALLS.constants, F.CALLS.passed = F.call_constants(self.funcs)
            F.CALLS.removed = F.removed_loops(self.funcs)
            program["functions"] = self._functions("main")
        finally:
            F.CALLS.constants, F.CALLS.passed, F.CALLS.funcs, F.CALLS.aliases = {}, {}, {}, {}
            F.CALLS.removed = []
        _tokens_cross_as_bool0(program["functions"][0])
        if self.partitioned is not None:
            entry = program["functions"][0]
            params, results = self.partitioned.params, self.partitioned.results
            counts = len(entry["params"]), len(entry["results"])  # (XLA may say nothing of some, or a tuple of none)
            program["shardings"] = {"params": (params + [{}] * counts[0])[:counts[0]],
                                    "results": (results + [{}] * counts[1])[:counts[1]]}
            if self.partitioned.warnings:  # for the profile report (report.graph_profile)
                program["partitioner_warnings"] = self.partitioned.warnings
            if self.partitioned.hlo_signature == counts:  # XLA's module has the program's parameters and results
                program["partitioned_hlo"] = Blob(self.partitioned.hlo_module)
        donations = self.donations if self.donations is not None else _aliases(self.funcs["main"])
        aliases, entry = donations.aliases, program["functions"][0]
        values = {r["id"]: r for op in entry["body"] for r in op["results"]}
        values.update({p["id"]: p for p in entry["params"]})
        if self.partitions > 1:  # a donated shard is reused only for a result shard of its type
            def of(value: Optional[Dict[str, Any]]) -> Any:
                return value and (value["dtype"], value["shape"])

            aliases = [[i, j] for i, j in aliases
                       if of(values[entry["params"][i]["id"]]) == of(values.get(entry["results"][j]))]
        aliases = aliases + match_buffer_donors(entry, values, aliases, donations.donors)
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
        # fp8 computed in f16 and the sub-byte integers in 8 bits; XLA's CSE and simplifier, then what its fusion does
        for function in functions:
            narrow_types.run(function)
            common_subexpressions.run(function, self.function_anchors.setdefault(function["name"], set()))
        if not _jax.is_current_series():
            for function in reassociate_constants.run(functions):
                dead_code.run(function, self.function_anchors.get(function["name"], set()))
        contract_through_moves.run(functions, self.function_anchors, _jax.is_current_series())
        for function in duplicate_products.run(functions, self.function_anchors, _jax.is_current_series()):
            dead_code.run(function, self.function_anchors.get(function["name"], set()))
        return functions

    def _function(self, name: str, func: Any) -> Dict[str, Any]:
        self.ids: Dict[Any, int] = {}
        self.next_id = 0
        self.splat_scalars = {}  # ids are per function
        self.anchors: Set[int] = set()  # the operands of jax's dce_sinks
        region = func.regions[0]
        if len(region.blocks) != 1:
            raise CompileError(f"func.func @{name} has {len(region.blocks)} blocks; the ipu compiler expects one")
        function = {"name": name, **self.block(region.blocks[0], f"func.func @{name}")}
        dead_code.run(function, self.anchors)
        self.function_anchors[name] = self.anchors
        return function

    def block(self, block: Any, owner: str, scalar_body: bool = False) -> Dict[str, Any]:
        params = [self.define(arg, owner) for arg in block.arguments]
        body: List[Dict[str, Any]] = []
        outer = self._capture_constants(block, body, owner) if scalar_body else {}
        branch = owner in ("stablehlo.case", "stablehlo.if")
        if branch:  # XLA passes what a branch captures as its parameters: F.producer_of sees no further
            F.CALLS.branches = getattr(F.CALLS, "branches", []) + [getattr(block.owner, "operation", block.owner)]
            F.CALLS.branch_blocks = getattr(F.CALLS, "branch_blocks", []) + [block]
        try:
            results = self.ops(block, body, scalar_body)
        finally:
            if branch:
                F.CALLS.branches = F.CALLS.branches[:-1]
                F.CALLS.branch_blocks = F.CALLS.branch_blocks[:-1]
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
                body.append(self.entry(source_op))  # defines `value` again, with an id of the body
            defined.update(op.results)
        return outer

    def ops(self, block: Any, body: List[Dict[str, Any]], scalar_body: bool) -> List[int]:
        """Translates the ops of `block` into `body`; returns the ids its terminator returns. Each op goes to the
        first of the rules that takes it (rules.RULES), else is written as it is. In a scalar body (a reduce body,
        a comparator...: the emulator interprets those per element and has no calls) func.calls are inlined: jax
        emits `jnp.where` inside them as a call."""
        for op in block.operations:
            self.checkpoint()  # the backend's: a Ctrl-C that Python's handler lost in a gc callback
            op = op.operation
            if op.name in TERMINATORS:
                return [i for v in op.operands for i in (self.tuples[v] if v in self.tuples else [self.use(v)])]
            for rule in RULES:
                if rule(self, op, body, scalar_body):
                    break
            else:
                body.append(self.entry(op))
        return []

    def region(self, region: Any, owner: str) -> Dict[str, Any]:
        if len(region.blocks) != 1:
            raise CompileError(f"a region of {owner} has {len(region.blocks)} blocks; the ipu compiler expects one")
        return self.block(region.blocks[0], owner, scalar_body=owner.split(".", 1)[-1] in F.SCALAR_BODIES)

    def type_of(self, mlir_type: Any) -> Optional[T.TensorType]:
        """T.tensor_type, once per distinct type of the module."""
        # Types are uniqued in the context and hash as such: no printing to look one up.
        if mlir_type not in self.types:
            self.types[mlir_type] = T.tensor_type(mlir_type)
        return self.types[mlir_type]

    def tensor(self, value: Any) -> T.TensorType:
        """The (dtype, shape) of a value that _check has accepted."""
        tensor = self.type_of(value.type)
        if tensor is None:
            raise CompileError(f"{value.type} cannot be expressed as an IPU tensor")
        return tensor

    def any_complex(self, op: Any) -> bool:
        return any(T.complex_part((self.type_of(v.type) or ("", []))[0]) for v in op.operands)

    def check(self, op: Any) -> None:
        for value in list(op.operands) + list(op.results):
            if self.type_of(value.type) is None:
                raise unsupported(op.name, W.types_text(op), f"{value.type} cannot be expressed as an IPU tensor")

    def define(self, value: Any, owner: str) -> Dict[str, Any]:
        tensor = self.type_of(value.type)
        if tensor is None:
            raise unsupported(owner, str(value.type), "values of this type cannot be expressed as IPU tensors")
        self.ids[value] = self.number()
        return {"id": self.ids[value], "dtype": tensor[0], "shape": list(tensor[1])}

    def number(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def use(self, value: Any) -> int:
        return self.ids[value]

    def entry(self, op: Any) -> Dict[str, Any]:
        mlir_name = op.name
        name = "call" if mlir_name == "func.call" else mlir_name.split(".", 1)[-1]
        if mlir_name.startswith("stablehlo.") and name in O.RESPELLED:
            return self._respell(op, name)
        if F.is_sharding_annotation(op):  # one partition: the annotation is the identity
            return self._op_entry(op, "reshape")
        if mlir_name == "stablehlo.composite":
            # The current series names some ops (erf_inv, top_k, acosh...) as composites whose decomposition is a
            # function of ordinary ops: that function is the op.
            composite = self._op_entry(op, "call")
            composite["attrs"] = {"callee": A.symbol(A.named(op.attributes)["decomposition"])}
            self.called.append(composite["attrs"]["callee"])
            return composite
        self.check(op)
        known = mlir_name.split(".", 1)[0] in ("stablehlo", "chlo", "func") and O.is_known(name)
        operands = [self.use(v) for v in op.operands]
        try:
            if mlir_name == "stablehlo.constant" and "complex" in str(op.results[0].type):
                attrs = T.constant_from_op_text(op)
            else:
                attrs = O.read_attrs(op.attributes) if known else {}
        except (ValueError, TypeError) as error:
            raise CompileError(
                f"cannot read the attributes of {mlir_name} with types {W.types_text(op)}: {error}") from error
        # Regions before results: values of a region are defined before the op's results in program order.
        if name == "call" and "callee" in attrs:
            self.called.append(attrs["callee"])
        regions = [self.region(r, mlir_name) for r in op.regions] if known else []
        entry: Dict[str, Any] = {
            "op": name,
            "mlir": mlir_name,
            "operands": operands,
            "results": [self.define(v, mlir_name) for v in op.results],
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
            attrs["replica_groups"] = self.mesh_groups(attrs["replica_groups"], mlir_name)
        if self.partitions > 1 and name in _COLLECTIVES:
            _partition_groups(name, attrs, self.partitions)
        if name in _REDUCING and known:
            computation = F.body_computation(op, assign=name == "scatter")
            if computation:
                attrs["computation"] = computation
        return W.located(entry, op)

    def real_float(self, op: Any) -> bool:
        return (self.type_of(op.results[0].type) or ("", []))[0] in ("f32", "f16", "bf16")

    def dtype_of(self, op: Any) -> str:
        """The dtype of the op's first result ("" for a token or tuple)."""
        return (self.type_of(op.results[0].type) or ("", []))[0]

    def bf16(self, op: Any) -> bool:
        return self.dtype_of(op) == "bf16"

    def f32(self, op: Any) -> bool:
        return self.dtype_of(op) == "f32"

    def simplified_float(self, op: Any) -> bool:
        """f32 or f16: XLA:CPU's simplifier sees bf16 ops only between the converts to and from f32 that its float
        normalization has already put around each of them, so its rules of two ops never match a bf16 pair."""
        return (self.type_of(op.results[0].type) or ("", []))[0] in ("f32", "f16")

    def mesh_groups(self, groups: A.MeshAxes, what: str) -> List[List[int]]:
        if groups.mesh not in self.meshes:
            raise CompileError(
                f"{what}: its replica groups name the mesh @{groups.mesh}, which the module does not define")
        return self.meshes[groups.mesh].groups(groups.axes)

    def fresh(self, dtype: str, shape: List[int]) -> Dict[str, Any]:
        """A value of the program that the module does not have (numbered after the module's values)."""
        return {"id": self.number(), "dtype": dtype, "shape": list(shape)}

    def _respell(self, op: Any, name: str) -> Dict[str, Any]:
        """An op in an older spelling jax still emits (nested pmap), as the program op it means."""
        entry = self._op_entry(op, O.RESPELLED[name])
        attrs = O.read_attrs(op.attributes)
        if name == "cross-replica-sum":  # an all_reduce with an add body
            attrs["computation"] = "add"
        elif name == "dot":  # XLA's HLO: a matrix or vector product, contracting lhs's last dimension with rhs's first
            attrs.update(lhs_batching_dimensions=[], rhs_batching_dimensions=[],
                         lhs_contracting_dimensions=[len(self.tensor(op.operands[0])[1]) - 1],
                         rhs_contracting_dimensions=[0])
        else:  # broadcast: new leading dimensions of the given sizes
            sizes, rank = attrs.pop("broadcast_sizes"), len(self.tensor(op.operands[0])[1])
            attrs["broadcast_dimensions"] = list(range(len(sizes), len(sizes) + rank))
        entry["attrs"] = attrs
        return entry

    def _op_entry(self, op: Any, name: str) -> Dict[str, Any]:
        """An op's entry without attrs or regions, its values checked and numbered."""
        self.check(op)
        entry: Dict[str, Any] = {
            "op": name, "mlir": op.name, "operands": [self.use(v) for v in op.operands],
            "results": [self.define(v, op.name) for v in op.results], "attrs": {}, "regions": [],
        }
        return W.located(entry, op)


# Ops whose body, when it is one binary op of the two block arguments, is named in their "computation" attr.
_REDUCING = ("reduce", "reduce_window", "all_reduce", "reduce_scatter", "scatter")
