"""Host callbacks on the ipu: ``jax.debug.print``/``jax.debug.callback``, ``jax.pure_callback`` and ``io_callback``.

jax lowers all of them through ``mlir.emit_python_callback``. Our jax patch (patches/jax/0.4.13/0004) lets a plugin
emit them for its platform: for "ipu" we emit ``stablehlo.custom_call @jax_ipu_host_callback`` with the callback's
id in ``backend_config``, flat results and an optional token first in and out. The emulator runs it as a HostCall
step; the PJRT layer calls the ``JaxIpu_HostCallbackFn`` installed here, on the device's callback thread, with pointers
to the operands and the results to fill. The registry (id -> callable, operand and result types) lives here and an
entry lives as long as the executable that uses it (jax keeps the keepalive we return).

Nothing here imports jax at module level: ``import jax_ipu`` stays cheap.
"""

from __future__ import annotations

import atexit
import collections
import ctypes
import itertools
import logging
import threading
import traceback
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from jax_ipu import _jax, _native
from jax_ipu.compiler.ops import CALL_TARGET
from jax_ipu.config import PLATFORM

logger = logging.getLogger(__name__)


Aval = Tuple[Tuple[int, ...], np.dtype]


class _Entry:
    __slots__ = ("callback", "operands", "results", "x64")

    def __init__(self, callback: Callable[..., Any], operands: List[Aval], results: List[Aval]) -> None:
        self.callback = callback
        self.operands = operands
        self.results = results
        # jax_enable_x64 as the program was lowered: the callback runs on a device thread, where the caller's
        # thread-local jax.enable_x64 is not in force (jax would make the callback's 64-bit arrays 32-bit there)
        self.x64 = _jax.x64_enabled()


_registry: Dict[int, _Entry] = {}
_registry_lock = threading.Lock()
_next_id = itertools.count(1)
_installed: List[Any] = []  # the ctypes function object, kept alive for the life of the process


# Entries whose executable is gone, oldest first. Dispatch is asynchronous: a run queued on a device may still call
# back after jax dropped the executable (``jax.jit(lambda ...)(x)`` frees it at once in the current series), so an
# entry is kept for the next _RETIRED_KEPT retirements before it is really forgotten.
_retired: "collections.OrderedDict[int, None]" = collections.OrderedDict()
_RETIRED_KEPT = 256


class _Keepalive:
    """Owned by the executable that calls callback ``ident``; retires it when the executable goes."""

    def __init__(self, ident: int) -> None:
        self.ident = ident

    def __del__(self) -> None:
        try:
            with _registry_lock:
                _retired[self.ident] = None
                while len(_retired) > _RETIRED_KEPT:
                    _registry.pop(_retired.popitem(last=False)[0], None)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def register(callback: Callable[..., Any], operand_avals: Sequence[Any],
             result_avals: Sequence[Any]) -> Tuple[int, _Keepalive]:
    """Registers a host callback; returns its id and the object that keeps it registered."""
    entry = _Entry(callback, [_aval(p) for a in operand_avals for p in _jax.physical_avals(a)],
                   [_aval(p) for a in result_avals for p in _jax.physical_avals(a)])
    with _registry_lock:
        ident = next(_next_id)
        _registry[ident] = entry
    return ident, _Keepalive(ident)


def _aval(aval: Any) -> Aval:
    return tuple(int(d) for d in aval.shape), np.dtype(aval.dtype)


# ---------------------------------------------------------------------------------------------------- lowering

def emit_python_callback(ctx: Any, callback: Callable[..., Any], token: Optional[Any], operands: Sequence[Any],
                         operand_avals: Sequence[Any], result_avals: Sequence[Any], has_side_effect: bool, *,
                         sharding: Any = None, operand_layouts: Any = None, result_layouts: Any = None):
    """jax's ``emit_python_callback`` for the ipu: returns (results, token, keepalive) as jax's does."""
    from jax._src.interpreters import mlir
    from jax._src.lib.mlir import ir
    from jax._src.lib.mlir.dialects import hlo

    # The program's arrays are always dense row-major.
    del operand_layouts, result_layouts
    ident, keepalive = register(callback, operand_avals, result_avals)
    result_types = [t for aval in result_avals for t in _jax.ir_types(ctx, aval)]
    operands = list(operands)
    if token is not None:
        operands = [token] + operands
        result_types = list(_jax.token_types()) + result_types
    call = hlo.CustomCallOp(
        result_types, operands, call_target_name=ir.StringAttr.get(CALL_TARGET),
        has_side_effect=ir.BoolAttr.get(bool(has_side_effect)), backend_config=ir.StringAttr.get(str(ident)),
        api_version=mlir.i32_attr(2), called_computations=ir.ArrayAttr.get([]),
    )
    if sharding is not None:
        # A jit over several IPUs: where the call runs, as jax says (one device of a sharded jit, every device in
        # a shard_map), which XLA's partitioner honours as it does for cpu.
        _jax.set_callback_sharding(ctx, call, sharding, token is not None and len(result_avals) > 0)
    results = list(call.results)
    if token is not None:
        token, results = results[0], results[1:]
    return results, token, keepalive


def install_lowering() -> None:
    """Our emitter for "ipu" and debug_callback's lowering there (jax_ipu._jax knows how, per series)."""
    if not _jax.install_callback_emitter(PLATFORM, emit_python_callback):
        logger.warning("ipu: this jax lacks the jax-ipu patch that lets plugins emit host callbacks; "
                       "jax.debug.print and pure_callback will not work on the ipu")


# ---------------------------------------------------------------------------------------------------- runtime

# Threads whose Python thread state is kept (_keep_thread_state).
_kept_threads: set = set()


def _keep_thread_state() -> None:
    """Keeps this (native) thread's Python thread state for the thread's life. ctypes wraps each call from a thread
    Python did not start in PyGILState_Ensure/Release, which makes the thread's state and, when the call returns,
    destroys it again: every host callback then began in a new thread state, with jax's thread-local configuration
    made afresh (a quarter of a callback's round trip). One more Ensure, never released, keeps the state; the lane
    threads that call back (host_io.cc) live as long as the device's host streams."""
    ident = threading.get_ident()
    if ident not in _kept_threads:
        _kept_threads.add(ident)
        ctypes.pythonapi.PyGILState_Ensure()


def _invoke(ident: int, num_in: int, ins: Any, num_out: int, outs: Any, error: Optional[int], error_size: int) -> int:
    """The JaxIpu_HostCallbackFn: runs on a device's callback thread (ctypes takes the GIL). Never raises."""
    try:
        _keep_thread_state()
        with _registry_lock:
            entry = _registry.get(int(ident))
        if entry is None:
            raise RuntimeError(f"host callback {ident} is not registered (its executable was deleted "
                               f"{_RETIRED_KEPT}+ executables ago while this run was queued)")
        if num_in != len(entry.operands) or num_out != len(entry.results):
            raise RuntimeError(f"host callback {ident} takes {len(entry.operands)} operands and returns "
                               f"{len(entry.results)} results, but the device passed {num_in} and {num_out}")
        args = [_read(ins[i], shape, dtype) for i, (shape, dtype) in enumerate(entry.operands)]
        with _jax.x64_scope(entry.x64):
            results = entry.callback(*args)
            _write(entry.results, results, outs)
        return 0
    except BaseException as e:  # noqa: BLE001 - nothing may cross into C; the run fails with this message
        _set_error(error, error_size, f"{type(e).__name__}: {e}\n{traceback.format_exc()}")
        return 1


def _read(pointer: Optional[int], shape: Tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    # A copy: the device reuses its buffers once the callback returns, and a callback may keep what it got.
    array = np.empty(shape, dtype)
    if array.nbytes:
        ctypes.memmove(array.ctypes.data, pointer, array.nbytes)
    return array


def _write(avals: List[Aval], results: Any, outs: Any) -> None:
    results = list(results) if results is not None else []
    if len(results) != len(avals):
        raise RuntimeError(f"Mismatched number of outputs from callback. Expected: {len(avals)}, "
                           f"Actual: {len(results)}")
    checked = []
    for i, ((shape, dtype), value) in enumerate(zip(avals, results)):
        array = _jax.callback_result(value)
        if array.shape != shape:
            raise RuntimeError(f"Incorrect output shape for return value {i}: Expected: {shape}, Actual: {array.shape}")
        if array.dtype != dtype:
            raise RuntimeError(f"Incorrect output dtype for return value {i}: Expected: {dtype}, Actual: {array.dtype}")
        checked.append(np.ascontiguousarray(array))
    for i, array in enumerate(checked):  # all checked first: a failing call writes nothing
        if array.nbytes:
            ctypes.memmove(outs[i], array.ctypes.data, array.nbytes)


def _set_error(error: Optional[int], size: int, message: str) -> None:
    if not error or size == 0:
        return
    data = message.encode("utf-8", errors="replace")[: size - 1]
    ctypes.memmove(error, data, len(data))
    ctypes.memset(error + len(data), 0, 1)


def install_runtime(lib: ctypes.CDLL) -> None:
    """Gives the native library our host callback function, and waits for queued work at exit (once)."""
    if _installed:
        return
    set_callback = getattr(lib, "JaxIpu_SetHostCallback", None)
    at_exit = getattr(lib, "JaxIpu_AtExit", None)
    if set_callback is None:
        logger.warning("ipu: the native library has no JaxIpu_SetHostCallback; host callbacks will fail")
        return
    function = _native.HOST_CALLBACK_FN(_invoke)  # JaxIpu_HostCallbackFn
    _installed.append(function)
    set_callback(function)
    if at_exit is not None:
        # Work still queued at exit may call back into Python: let it finish while the interpreter is whole
        # (ctypes releases the GIL for the wait); a run waiting on an empty infeed fails instead, since nothing
        # can feed it any more. Registered after jax's own atexit handlers, so it runs first.
        atexit.register(at_exit)
    synchronize = getattr(lib, "JaxIpu_Synchronize", None)
    if synchronize is not None:
        _wait_in_effects_barrier(synchronize)


def _wait_in_effects_barrier(synchronize: Callable[[], None]) -> None:
    """``jax.effects_barrier()`` waits for the tokens of effectful computations; jax asks for none where a callback's
    effect is dropped (a vmap of an unordered io_callback, a pure_callback), which on cpu, whose calls return when
    they are done, loses nothing. The ipu's calls return at once: the barrier also waits for the work queued on the
    ipu devices, so that every callback queued before it has run (jax's python_callback_test.py
    test_io_callback_can_be_batched_if_unordered)."""
    from jax._src import api

    original = api.effects_barrier
    if getattr(original, "_jax_ipu", False):
        return

    def effects_barrier() -> None:
        original()
        synchronize()  # ctypes lets go of the GIL while the devices drain, so their callbacks can run

    effects_barrier.__doc__ = original.__doc__
    effects_barrier._jax_ipu = True  # type: ignore[attr-defined]
    api.effects_barrier = effects_barrier
    import jax

    if getattr(jax, "effects_barrier", None) is original:
        jax.effects_barrier = effects_barrier
