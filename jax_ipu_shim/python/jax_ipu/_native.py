"""Finds and loads the native library (PJRT plugin + emulator) that ships inside this package."""

from __future__ import annotations

import ctypes
import functools
import os

LIBRARY_NAME = "libjax_ipu.so"


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
    return ctypes.CDLL(path)


def take_string(lib: ctypes.CDLL, pointer: int | None) -> str:
    """Copies a ``char*`` returned by a ``JaxIpu_*`` function and frees it with ``JaxIpu_FreeString``."""
    if not pointer:
        return ""
    try:
        return ctypes.string_at(pointer).decode("utf-8", errors="replace")
    finally:
        lib.JaxIpu_FreeString(ctypes.c_void_p(pointer))
