"""Finds and loads the native library (PJRT plugin + emulator) that ships inside this package, and declares the
ctypes signature of every function of its C boundary (jax_ipu_shim/include/jax_ipu/c_api.h): the one place they are
written; tests/backend/test_c_api.py checks that the header, this table and the library's exports agree."""

from __future__ import annotations

import ctypes
import functools
import json
import os
from ctypes import POINTER, c_char_p, c_double, c_int, c_int64, c_size_t, c_void_p
from typing import Any, Dict, List, Optional, Tuple

LIBRARY_NAME = "libjax_ipu.so"

# int compiler(const char* module, size_t, const char* options, size_t, void* result)
COMPILER_FN = ctypes.CFUNCTYPE(c_int, c_void_p, c_size_t, c_void_p, c_size_t, c_void_p)
# void hook(void* executable, const char* program, size_t, const int* device_ids, size_t)
COMPILED_FN = ctypes.CFUNCTYPE(None, c_void_p, c_void_p, c_size_t, POINTER(c_int), c_size_t)
# int callback(int64_t id, size_t num_in, const void* const* in, size_t num_out, void* const* out, char* error,
#              size_t error_size)
HOST_CALLBACK_FN = ctypes.CFUNCTYPE(c_int, c_int64, c_size_t, POINTER(c_void_p), c_size_t, POINTER(c_void_p),
                                    c_void_p, c_size_t)

_ERROR = POINTER(c_void_p)  # char** error: a message for take_string
# name -> (restype, argtypes). A char* result is a c_void_p, so that take_string can free it; arrays of pointers
# are c_void_p where the caller builds them (feeds.py).
SIGNATURES: Dict[str, Tuple[Any, List[Any]]] = {
    # the emulator
    "JaxIpu_DeviceInfo": (c_void_p, [c_char_p, _ERROR]),
    "JaxIpu_Compile": (c_void_p, [c_char_p, c_size_t, c_char_p, c_char_p, _ERROR]),
    "JaxIpu_ExecutableInfo": (c_void_p, [c_void_p]),
    "JaxIpu_ExecutableProfile": (c_void_p, [c_void_p]),
    "JaxIpu_Run": (c_int, [c_void_p, POINTER(c_void_p), POINTER(c_void_p), _ERROR]),
    "JaxIpu_LastRunProfile": (c_void_p, [c_void_p]),
    "JaxIpu_Destroy": (None, [c_void_p]),
    "JaxIpu_OpRegistry": (c_void_p, []),
    "JaxIpu_BuildId": (c_void_p, []),
    "JaxIpu_TraceEnable": (None, [c_int]),
    "JaxIpu_TraceTake": (c_void_p, []),
    "JaxIpu_FreeString": (None, [c_void_p]),
    # the PJRT plugin
    "JaxIpu_SetCompiler": (None, [COMPILER_FN]),
    "JaxIpu_CompileResult_SetProgram": (None, [c_void_p, c_char_p, c_size_t]),
    "JaxIpu_CompileResult_SetOptions": (None, [c_void_p, c_char_p, c_size_t]),
    "JaxIpu_CompileResult_SetError": (None, [c_void_p, c_int, c_char_p, c_size_t]),
    "JaxIpu_CompileResult_AddDevice": (None, [c_void_p, c_int]),
    "JaxIpu_SetCompiledHook": (None, [COMPILED_FN]),
    "JaxIpu_SetHostCallback": (None, [HOST_CALLBACK_FN]),
    "JaxIpu_InfeedPush": (c_int, [c_int, c_size_t, c_void_p, c_void_p, c_void_p, c_void_p, _ERROR]),
    "JaxIpu_OutfeedPop": (c_int, [c_int, c_size_t, c_void_p, c_void_p, c_void_p, c_void_p, c_double, _ERROR]),
    "JaxIpu_AtExit": (None, []),
    "JaxIpu_Synchronize": (None, []),
    "JaxIpu_DeviceStats": (c_void_p, [c_int]),
    "JaxIpu_ProfileStart": (c_void_p, []),
    "JaxIpu_ProfileStop": (c_int, [c_void_p, c_int64, POINTER(c_void_p), POINTER(c_size_t)]),
    "JaxIpu_WatchInterrupts": (c_int, []),
    "JaxIpu_TakeInterrupt": (c_int, []),
    "JaxIpu_TransportListen": (c_int, []),
    "JaxIpu_SetStablehloVersions": (None, [POINTER(c_int64), POINTER(c_int64)]),  # PJRT API 0.90 and later
}


def library_path() -> str:
    """The library to load: ``$JAX_IPU_LIBRARY`` if set (for development), else the one installed beside us."""
    override = os.environ.get("JAX_IPU_LIBRARY")
    if override:
        return override
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib", LIBRARY_NAME)


@functools.lru_cache(maxsize=None)
def load() -> ctypes.CDLL:
    path = library_path()
    if not os.path.exists(path):
        raise ImportError(
            f"jax_ipu: native library not found at {path}. Reinstall the wheel that carries it (jaxlib for jax "
            "0.4.13, jax-ipu-plugin for the current series) built by `nox -s build_wheels`, or point "
            "JAX_IPU_LIBRARY at a built libjax_ipu.so."
        )
    lib = ctypes.CDLL(path)
    for name, (restype, argtypes) in SIGNATURES.items():
        function = getattr(lib, name, None)  # a library built for an older PJRT API lacks the newer functions
        if function is not None:
            function.restype = restype
            function.argtypes = argtypes
    _loaded_from.append(path)
    return lib


_loaded_from: List[str] = []  # the path load() loaded the library from


def build_id(path: str) -> Optional[str]:
    """JaxIpu_BuildId of the library this process loaded, if ``path`` is that library and it has one; else None
    (also before anything loaded it: this never loads a library)."""
    if not _loaded_from or os.path.realpath(path) != os.path.realpath(_loaded_from[0]):
        return None
    lib = load()
    if getattr(lib, "JaxIpu_BuildId", None) is None:  # a library built without it
        return None
    return take_string(lib, lib.JaxIpu_BuildId()) or None


def device_stats(device_id: int) -> Optional[Dict[str, Any]]:
    """JaxIpu_DeviceStats of an ipu device id, parsed; None before the ipu backend exists (jax_ipu.runtime)."""
    lib = load()
    text = take_string(lib, lib.JaxIpu_DeviceStats(device_id))
    return json.loads(text) if text else None


@functools.lru_cache(maxsize=None)
def registry() -> Dict[str, Any]:
    """The emulator's registry (JaxIpu_OpRegistry, ipu/registry.h registryJson): its ops, its element types and what
    it knows of this host. The one source of these facts: the front end and the dtype table read them from here."""
    lib = load()
    text = take_string(lib, lib.JaxIpu_OpRegistry())
    if not text:
        raise RuntimeError(f"the native library {library_path()} returned no op registry")
    return json.loads(text)


def take_string(lib: ctypes.CDLL, pointer: int | None) -> str:
    """Copies a ``char*`` returned by a ``JaxIpu_*`` function and frees it with ``JaxIpu_FreeString``."""
    if not pointer:
        return ""
    try:
        return ctypes.string_at(pointer).decode("utf-8", errors="replace")
    finally:
        lib.JaxIpu_FreeString(ctypes.c_void_p(pointer))
