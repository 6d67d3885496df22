"""The IPU emulator through its C API (``JaxIpu_*`` in libjax_ipu.so), with numpy arrays in and out.

It is what the emulator's unit tests and tools use directly. Importing it does not import jax; the first use of a
dtype does, to read the one dtype table (the emulator's kDTypeTable, read by ``jax_ipu.compiler.types.ipu_dtypes``).

    exe = compile(program_dict_or_json, version="ipu2", num_tiles=0)
    outputs = exe.run(x, y)          # numpy arrays in the program's parameter order
    exe.run(x, y, out=[x])           # results written into given arrays (an input's: updated in place)
    exe.info, exe.last_profile       # memory / cycle estimates, profile of the last run

``exe.info`` has the device, inputs and outputs, tile memory, the static cycle estimate, ``host`` (the run's
host arena: ``arena_bytes``, ``peak_live_bytes`` of intermediate values live at once, ``intermediate_bytes`` of
all of them) and ``steps``, the static per-step table (one execution of every program step). ``last_profile``
has the totals of the last run and its ``steps``: each step that ran, with its executions and cycles.

``Program`` builds program documents (the "jax-ipu-program" v1 format) for tests and tools.
"""

from __future__ import annotations

import base64
import ctypes
import functools
import json
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from jax_ipu import _native

__all__ = ["EmulatorError", "Executable", "Program", "Builder", "compile", "device_info",  # noqa: F822
           "NUMPY_DTYPES"]  # NUMPY_DTYPES comes from __getattr__ below


@functools.lru_cache(maxsize=None)
def _dtype_names() -> Dict[np.dtype, str]:
    """numpy dtype -> the program format's element type, for every type of the table (bf16 from ml_dtypes)."""
    from jax_ipu.compiler import types  # imports jax: read on first use only

    return types.ipu_numpy_dtypes()


def _numpy_dtypes() -> Dict[str, np.dtype]:
    from jax_ipu.compiler import types  # imports jax: read on first use only

    return types.numpy_dtypes_by_name()


def __getattr__(name: str) -> Any:
    # NUMPY_DTYPES ({"f32": dtype("float32"), ...}) is built on first access (PEP 562), so that importing this
    # module stays free of jax.
    if name == "NUMPY_DTYPES":
        return _numpy_dtypes()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _numpy_dtype(name: str) -> np.dtype:
    dtype = _numpy_dtypes().get(name)
    if dtype is None:
        raise EmulatorError(f"INVALID_ARGUMENT: unknown element type {name!r}; the emulator's types are "
                            f"{', '.join(_numpy_dtypes())}")
    return dtype


_ERROR_CODES = ("INVALID_ARGUMENT", "UNIMPLEMENTED", "RESOURCE_EXHAUSTED", "INTERNAL")


class EmulatorError(RuntimeError):
    """An error reported by the emulator. ``code`` is INVALID_ARGUMENT, UNIMPLEMENTED, RESOURCE_EXHAUSTED or
    INTERNAL."""

    def __init__(self, message: str) -> None:
        code, sep, rest = message.partition(": ")
        if sep and code in _ERROR_CODES:
            self.code = code
            self.message = rest
        else:
            self.code = "INTERNAL"
            self.message = message
        super().__init__(self.message)


def _lib() -> ctypes.CDLL:
    return _native.load()  # the signatures: _native.SIGNATURES


def _take(pointer: Optional[int]) -> str:
    return _native.take_string(_lib(), pointer)


def _raise_if(error: ctypes.c_void_p) -> None:
    if error.value:
        raise EmulatorError(_take(error.value))


def device_info(version: str = "ipu2", num_tiles: int = 0, **model: int) -> dict:
    """The device description (tiles, bytes per tile, clock, ...) of an IPU version, with the IPU Model's other
    parameters (``memory_bytes_per_tile``, ``num_worker_contexts``, ``tile_clock_frequency``,
    ``exchange_bytes_per_cycle``, ``global_sync_cycles``; 0 or absent: the chip's own) in place of the chip's."""
    error = ctypes.c_void_p()
    out = _lib().JaxIpu_DeviceInfo(_model_json(version, num_tiles, model), ctypes.byref(error))
    _raise_if(error)
    return json.loads(_take(out))


class Executable:
    """A program compiled for the emulated IPU. ``run`` may be called from several threads at once."""

    def __init__(self, handle: int) -> None:
        self._handle: Optional[int] = handle
        self.info: dict = json.loads(_take(_lib().JaxIpu_ExecutableInfo(handle)))
        self.input_types: List[Tuple[Any, Tuple[int, ...]]] = [
            (_numpy_dtype(t["dtype"]), tuple(t["shape"])) for t in self.info["inputs"]
        ]
        self.output_types: List[Tuple[Any, Tuple[int, ...]]] = [
            (_numpy_dtype(t["dtype"]), tuple(t["shape"])) for t in self.info["outputs"]
        ]

    def run(self, *args: Any, out: Optional[Sequence[np.ndarray]] = None) -> List[np.ndarray]:
        """Runs the program on numpy arrays and returns its results.

        ``out``: C-contiguous arrays of the results' dtypes and shapes to write the results into (one per result);
        an input array given here is updated in place, as a donated buffer is.
        """
        if self._handle is None:
            raise EmulatorError("INVALID_ARGUMENT: the executable has been destroyed")
        if len(args) != len(self.input_types):
            raise EmulatorError(
                f"INVALID_ARGUMENT: expected {len(self.input_types)} inputs, got {len(args)}")
        inputs = []
        for i, (arg, (dtype, shape)) in enumerate(zip(args, self.input_types)):
            a = _contiguous(np.asarray(arg, dtype=dtype))
            if a.shape != shape:
                raise EmulatorError(f"INVALID_ARGUMENT: input {i} has shape {a.shape}, expected {shape}")
            inputs.append(a)
        if out is None:
            outputs = [np.empty(shape, dtype=dtype) for dtype, shape in self.output_types]
        else:
            outputs = list(out)
            if len(outputs) != len(self.output_types):
                raise EmulatorError(
                    f"INVALID_ARGUMENT: out has {len(outputs)} arrays,"
                    f" the program has {len(self.output_types)} results")
            for j, (o, (dtype, shape)) in enumerate(zip(outputs, self.output_types)):
                if not isinstance(o, np.ndarray) or o.dtype != dtype or o.shape != shape or \
                        not o.flags.c_contiguous or not o.flags.writeable:
                    raise EmulatorError(f"INVALID_ARGUMENT: out[{j}] must be a writable C-contiguous {dtype} array "
                                        f"of shape {shape}")
        in_ptrs = (ctypes.c_void_p * max(1, len(inputs)))(*[a.ctypes.data for a in inputs])
        out_ptrs = (ctypes.c_void_p * max(1, len(outputs)))(*[o.ctypes.data for o in outputs])
        error = ctypes.c_void_p()
        status = _lib().JaxIpu_Run(self._handle, in_ptrs, out_ptrs, ctypes.byref(error))
        if status != 0:
            _raise_if(error)
            raise EmulatorError("INTERNAL: JaxIpu_Run failed without a message")
        return outputs

    @property
    def last_profile(self) -> dict:
        """Cycles of the most recent run: total, compute, exchange, sync, supersteps."""
        return json.loads(_take(_lib().JaxIpu_LastRunProfile(self._handle)))

    def close(self) -> None:
        if self._handle is not None:
            _lib().JaxIpu_Destroy(self._handle)
            self._handle = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass


def _model_json(version: str, num_tiles: int, model: Dict[str, int]) -> bytes:
    return json.dumps(dict(model, version=version, num_tiles=int(num_tiles))).encode()


def compile(program: Union[dict, str, bytes, "Program"], version: str = "ipu2", num_tiles: int = 0,
            options: Optional[Dict[str, Any]] = None, **model: int) -> Executable:
    """Compiles a program document (dict, JSON text or ``Program``) for an IPU version and tile count, with the
    IPU Model's other parameters as ``device_info`` takes them. ``options``:
    the emulator's compile options (``{"fusion": bool, "exchange_per_element": bool, "allow_out_of_memory": bool,
    "emulate_64bit": bool}``, any subset; the rest keep their defaults: fused, counted in runs, memory checked,
    64-bit types emulated)."""
    if isinstance(program, Program):
        program = program.to_dict()
    if isinstance(program, dict):
        program = json.dumps(program)
    data = program.encode() if isinstance(program, str) else bytes(program)
    error = ctypes.c_void_p()
    text = json.dumps(options).encode() if options else None
    handle = _lib().JaxIpu_Compile(data, len(data), _model_json(version, num_tiles, model), text, ctypes.byref(error))
    _raise_if(error)
    if not handle:
        raise EmulatorError("INTERNAL: JaxIpu_Compile returned no executable")
    return Executable(handle)


def _contiguous(a: np.ndarray) -> np.ndarray:
    # (np.ascontiguousarray would turn 0-d arrays into 1-d ones)
    return a if a.flags.c_contiguous else a.copy(order="C")


def _decl(ident: int, dtype: str, shape: Sequence[int]) -> dict:
    return {"id": ident, "dtype": dtype, "shape": [int(d) for d in shape]}


class Builder:
    """The body of a function or region being built: params, ops and results. Ids are unique per Program."""

    def __init__(self, program: "Program") -> None:
        self._program = program
        self.params: List[dict] = []
        self.body: List[dict] = []
        self.results: List[int] = []

    def param(self, dtype: str, shape: Sequence[int] = ()) -> int:
        ident = self._program._next_id()
        self.params.append(_decl(ident, dtype, shape))
        return ident

    def op_multi(self, op: str, operands: Sequence[int], results: Sequence[Tuple[str, Sequence[int]]],
                 attrs: Optional[dict] = None, regions: Sequence["Builder"] = (), loc: Optional[str] = None,
                 mlir: Optional[str] = None) -> List[int]:
        ids = [self._program._next_id() for _ in results]
        entry: Dict[str, Any] = {
            "op": op,
            "mlir": mlir or ("stablehlo." + op),
            "operands": list(operands),
            "results": [_decl(i, d, s) for i, (d, s) in zip(ids, results)],
            "attrs": dict(attrs or {}),
            "regions": [r.to_dict() for r in regions],
        }
        if loc:
            entry["loc"] = loc
        self.body.append(entry)
        return ids

    def op(self, op: str, operands: Sequence[int], dtype: str, shape: Sequence[int] = (),
           attrs: Optional[dict] = None, **kwargs: Any) -> int:
        return self.op_multi(op, operands, [(dtype, shape)], attrs, **kwargs)[0]

    def constant(self, value: Any, dtype: Optional[str] = None, splat: bool = False) -> int:
        np_dtype = _numpy_dtype(dtype) if dtype else np.asarray(value).dtype
        a = _contiguous(np.asarray(value, dtype=np_dtype))
        name = _dtype_names().get(a.dtype)
        if name is None:
            raise EmulatorError(f"INVALID_ARGUMENT: a constant of numpy dtype {a.dtype} has no IPU element type")
        raw = a.astype(np.uint8).tobytes() if name == "bool" else a.tobytes()
        shape = a.shape
        if splat:
            raw = a.reshape(-1)[:1].tobytes() if name != "bool" else a.reshape(-1)[:1].astype(np.uint8).tobytes()
        return self.op("constant", [], name, shape, {"value": base64.b64encode(raw).decode(), "splat": splat})

    def splat(self, value: Any, dtype: str, shape: Sequence[int]) -> int:
        a = np.asarray(value, dtype=_numpy_dtype(dtype)).reshape(1)
        raw = a.astype(np.uint8).tobytes() if dtype == "bool" else a.tobytes()
        return self.op("constant", [], dtype, shape, {"value": base64.b64encode(raw).decode(), "splat": True})

    def ret(self, *ids: int) -> None:
        self.results = list(ids)

    def region(self) -> "Builder":
        return Builder(self._program)

    def to_dict(self) -> dict:
        return {"params": self.params, "body": self.body, "results": self.results}


class Program:
    """Builds a "jax-ipu-program" v1 document: ``main`` is the entry function's body."""

    def __init__(self, name: str = "jit_f", numerics: Optional[str] = None) -> None:
        self.name = name
        self.numerics = numerics  # "jaxlib-0.4" / "jaxlib-0.12": whose XLA:CPU arithmetic (default: jaxlib-0.4)
        self._ids = 0
        self.functions: Dict[str, Builder] = {}
        self.main = self.function("main")
        self.aliases: List[List[int]] = []

    def _next_id(self) -> int:
        self._ids += 1
        return self._ids - 1

    def function(self, name: str) -> Builder:
        builder = Builder(self)
        self.functions[name] = builder
        return builder

    def to_dict(self) -> dict:
        functions = []
        for name, body in self.functions.items():
            f = body.to_dict()
            f["name"] = name
            functions.append(f)
        doc = {
            "format": "jax-ipu-program", "version": 1, "name": self.name, "entry": "main",
            "functions": functions, "aliases": self.aliases,
        }
        if self.numerics is not None:
            doc["numerics"] = self.numerics
        return doc

    def to_json(self) -> str:
        return json.dumps(self.to_dict())
