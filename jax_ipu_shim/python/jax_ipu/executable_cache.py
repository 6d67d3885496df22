"""The executable cache (``TF_POPLAR_FLAGS=--executable_cache_path=DIR``) and JAX's persistent compilation cache on
the ipu.

**Executable cache.** As with Poplar, each compiled program is kept in DIR as ``<key>.poplar_exec``; a process that
compiles the same module with the same options, compiler and device finds it there and skips the compiler front end
(StableHLO -> the binary IPU program, nearly all of a compile's time; lowering the program onto the tiles is what
loading a serialised executable does too, and is repeated). The key hashes everything that changes the result:

- the module's bytes (its source locations included: they name the profile's steps) and the compile options;
- the compiler: the jaxlib version, a hash of libjax_ipu.so and of this package's Python sources (a dev build
  changes these without changing the version);
- the device: chip version, tile count, device count, the IPU Model parameters set (``config.MODEL_PARAMETERS``);
- the emulator's compile options (``jax_ipu.config.lowering_options``: fusion, per-element exchange, allowing out of
  memory, emulating 64-bit types, the matmuls' availableMemoryProportion and partialsType), which change what the
  program lowers to.

Entries are written to a temporary file and renamed into place, so processes sharing DIR never see half an entry.
An entry that is corrupt, truncated, or not ours (another format, or a file for another key) is ignored with a
warning naming it, recompiled and rewritten; the cache never fails a compile.

**JAX's persistent compilation cache.** jax 0.4.13 uses it on TPU and GPU only, and has no
``jax_compilation_cache_dir`` option yet. :func:`install_jax_cache_option` defines that option (and reads
``JAX_COMPILATION_CACHE_DIR``), and :func:`install_jax_cache` routes ipu compiles through jax's own cache
functions, with jax's key extended by this compiler's fingerprint. Entries are serialised executables
(serialize.cc). As in jax, compiles faster than ``jax_persistent_cache_min_compile_time_secs`` are not written.
"""

from __future__ import annotations

import functools
import glob
import hashlib
import json
import logging
import os
import re
import tempfile
import threading
import time
import warnings
from typing import Any, Callable, Dict, Optional

logger = logging.getLogger(__name__)

SUFFIX = ".poplar_exec"
MAGIC = b"jax-ipu-executable-cache"
FORMAT_VERSION = 1

# What this process did, for users and tests: {"hits", "misses", "writes", "rejected"}.
_stats: Dict[str, int] = {"hits": 0, "misses": 0, "writes": 0, "rejected": 0}
_stats_lock = threading.Lock()


def stats() -> Dict[str, int]:
    with _stats_lock:
        return dict(_stats)


def _count(what: str) -> None:
    with _stats_lock:
        _stats[what] += 1


class CacheWarning(UserWarning):
    """An executable cache entry or directory could not be used; the program was compiled instead."""


# ------------------------------------------------------------------------------------------- the key


def _hash_file(hasher: Any, path: str) -> None:
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            hasher.update(chunk)


# The ELF note the linker writes with a hash of the library it linked: 4-byte name size, description size, type 3
# (NT_GNU_BUILD_ID), "GNU\0", then the id. Notes sit at the start of the file.
_BUILD_ID_NOTE = re.compile(rb"\x04\x00\x00\x00([\x08-\x40])\x00\x00\x00\x03\x00\x00\x00GNU\x00", re.DOTALL)


def _library_identity(path: str) -> bytes:
    """The library's identity: the build's own id (JaxIpu_BuildId) when it is the library this process loaded, or its
    GNU build id (reading either costs nothing), else a hash of all its bytes (7 ms for a wheel's library)."""
    from jax_ipu import _native

    own = _native.build_id(path)
    if own:
        return b"jax-ipu build " + own.encode()
    with open(path, "rb") as f:
        head = f.read(1 << 16)
    match = _BUILD_ID_NOTE.search(head) if head.startswith(b"\x7fELF") else None
    if match:
        start = match.end()
        return b"build-id " + head[start:start + match.group(1)[0]]
    hasher = hashlib.sha256()
    _hash_file(hasher, path)
    return b"sha256 " + hasher.digest()


@functools.lru_cache(maxsize=None)
def compiler_fingerprint() -> str:
    """The compiler's identity: jaxlib's version, the native library and the Python sources of this package."""
    from jax_ipu import _native

    hasher = hashlib.sha256()
    try:
        from jaxlib import version as jaxlib_version

        hasher.update(jaxlib_version.__version__.encode())
    except ImportError:  # pragma: no cover - jax_ipu ships inside jaxlib
        pass
    hasher.update(_library_identity(_native.library_path()))
    package = os.path.dirname(os.path.abspath(__file__))
    for path in sorted(glob.glob(os.path.join(package, "**", "*.py"), recursive=True)):
        hasher.update(os.path.relpath(path, package).encode() + b"\0")
        _hash_file(hasher, path)
    return hasher.hexdigest()


def device_fields(config: Any) -> Dict[str, Any]:
    """The device a program is compiled for: chip version, tiles per IPU (resolved: 0 means the chip's own), the
    number of IPUs and the IPU Model parameters set."""
    from jax_ipu import emulator

    tiles = int(emulator.device_info(config.version, config.num_tiles).get("num_tiles", config.num_tiles))
    return {"version": config.version, "num_tiles": tiles, "num_devices": config.num_devices,
            **config.model_parameters()}


def cache_key(module: bytes, options: bytes, device: Dict[str, Any], environ: Optional[Dict[str, str]] = None) -> str:
    env = os.environ if environ is None else environ
    hasher = hashlib.sha256()

    def field(data: bytes) -> None:  # length-prefixed, so that no two field lists hash alike
        hasher.update(len(data).to_bytes(8, "little") + data)

    field(MAGIC + b" %d" % FORMAT_VERSION)
    field(compiler_fingerprint().encode())
    field(json.dumps(device, sort_keys=True).encode())
    field(_lowering_key(env).encode())
    field(bytes(module))
    field(_options_key(bytes(options)))
    return hasher.hexdigest()


def _options_key(options: bytes) -> bytes:
    """What the front end reads from the compile options (replicas, partitions, devices, option overrides), not
    their bytes: the current series serialises the proto's map fields in no fixed order, so equal options can
    differ byte for byte."""
    from jax_ipu.compiler import compile_options

    parsed = compile_options.parse(options)
    return json.dumps([parsed.num_replicas, parsed.num_partitions, parsed.device_ids,
                       sorted((k, repr(v)) for k, v in parsed.env_option_overrides)]).encode()


def _lowering_key(environ: Any) -> str:
    from jax_ipu import config

    return json.dumps(config.lowering_options(environ), sort_keys=True)


# ------------------------------------------------------------------------------------------- entries
#
# An entry: the line "jax-ipu-executable-cache 1", a line of JSON {"key", "size", "sha256"}, then `size` bytes of
# the program the front end wrote (the binary container the emulator lowers).


def _encode(key: str, program: bytes) -> bytes:
    header = {"key": key, "size": len(program), "sha256": hashlib.sha256(program).hexdigest()}
    return MAGIC + b" %d\n" % FORMAT_VERSION + json.dumps(header).encode() + b"\n" + program


def _decode(key: str, data: bytes) -> bytes:
    """The program of an entry; ValueError saying what is wrong with it."""
    first, _, rest = data.partition(b"\n")
    if not first.startswith(MAGIC + b" "):
        raise ValueError("it is not a jax-ipu executable cache entry")
    if first != MAGIC + b" %d" % FORMAT_VERSION:
        raise ValueError(f"its format is {first.decode(errors='replace')!r},"
                         f" this jax-ipu reads version {FORMAT_VERSION}")
    line, _, program = rest.partition(b"\n")
    try:
        header = json.loads(line)
        size, digest, entry_key = int(header["size"]), str(header["sha256"]), str(header["key"])
    except (ValueError, KeyError, TypeError):
        raise ValueError("its header is unreadable") from None
    if entry_key != key:
        raise ValueError(f"it holds the program of key {entry_key[:16]}..., not of its file name")
    if len(program) != size:
        raise ValueError(f"it is truncated or has trailing bytes ({len(program)} bytes of program, expected {size})")
    if hashlib.sha256(program).hexdigest() != digest:
        raise ValueError("its program does not match its checksum (corrupt)")
    return program


def _warn(message: str) -> None:
    warnings.warn(message, CacheWarning, stacklevel=2)  # as jax warns about its cache: shown once per message


class ExecutableCache:
    """``<key>.poplar_exec`` files in one directory."""

    def __init__(self, directory: str) -> None:
        self.directory = os.path.abspath(os.path.expanduser(directory))
        self._unusable = False

    def path(self, key: str) -> str:
        return os.path.join(self.directory, key + SUFFIX)

    def load(self, key: str) -> Optional[bytes]:
        path = self.path(key)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except (FileNotFoundError, NotADirectoryError):  # not cached yet (store() says if it cannot be)
            return None
        except OSError as e:
            _warn(f"ipu executable cache: cannot read {path} ({e}); compiling the program instead")
            return None
        try:
            return _decode(key, data)
        except ValueError as e:
            _count("rejected")
            _warn(f"ipu executable cache: ignoring {path}: {e}; compiling the program again and replacing it")
            return None

    def store(self, key: str, program: bytes) -> None:
        if self._unusable:
            return
        tmp = None
        try:
            os.makedirs(self.directory, exist_ok=True)
            # A private temporary file in the same directory, renamed into place: atomic, so processes sharing the
            # directory see the old entry, the new one or none, never half of one.
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=SUFFIX, dir=self.directory)
            with os.fdopen(fd, "wb") as f:
                f.write(_encode(key, program))
            os.replace(tmp, self.path(key))
            tmp = None
            _count("writes")
        except OSError as e:
            self._unusable = True  # one warning per process, not one per compile
            _warn(
                f"ipu executable cache: cannot write to {self.directory} ({e}); programs are compiled but not "
                "cached. Check --executable_cache_path in TF_POPLAR_FLAGS"
            )
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass

    def get_or_compile(self, key: str, compile_fn: Callable[[], bytes]) -> bytes:
        program = self.load(key)
        if program is not None:
            _count("hits")
            logger.info("ipu executable cache hit: %s", self.path(key))
            return program
        _count("misses")
        program = compile_fn()
        self.store(key, program)
        return program


_caches: Dict[str, ExecutableCache] = {}


def for_directory(directory: str) -> ExecutableCache:
    if directory not in _caches:
        _caches[directory] = ExecutableCache(directory)
    return _caches[directory]


# ------------------------------------------------------------------------------------------- jax's cache

JAX_CACHE_OPTION = "jax_compilation_cache_dir"


def install_jax_cache_option() -> None:
    """Defines ``jax_compilation_cache_dir`` (jax 0.4.14's spelling) where jax does not: setting it initialises
    jax's persistent compilation cache there. Safe to call while jax is importing."""
    from jax._src.config import config as jax_config

    if JAX_CACHE_OPTION in jax_config.values:  # jax defines it (the current series)
        return

    defining = [True]

    def update(path: Optional[str]) -> None:
        # jax calls this with the default (the environment's value) while defining the option, which happens while
        # jax imports itself: the first ipu compile initialises the cache from it instead.
        if path and not defining[0]:
            _initialize_jax_cache(path)

    jax_config.define_string_state(
        JAX_CACHE_OPTION,
        os.environ.get(JAX_CACHE_OPTION.upper()) or None,
        help="Directory of jax's persistent compilation cache (also used by the ipu backend).",
        update_global_hook=update,
    )
    defining[0] = False


def _initialize_jax_cache(path: str) -> None:
    from jax._src import compilation_cache

    if not compilation_cache.is_initialized():
        compilation_cache.initialize_cache(path)
    elif str(compilation_cache._cache._path) != str(path):  # type: ignore[union-attr]
        logger.warning(
            "jax's persistent compilation cache is already at %s; %s=%s takes effect in a new process",
            compilation_cache._cache._path, JAX_CACHE_OPTION, path,  # type: ignore[union-attr]
        )


def install_jax_cache(platform: str, around_compile: Callable[[str], Any]) -> None:
    """Routes ``platform``'s compiles through jax's persistent cache (jax 0.4.13 does so for tpu and gpu only).

    ``around_compile(module_name)`` is a context manager wrapped around every compile of ``platform``, cached or
    not (the progress bar)."""
    from jax_ipu import _jax

    if _jax.is_current_series():
        _install_current_jax_cache(platform, around_compile)
        return
    from jax._src import compilation_cache, dispatch
    from jax._src.config import config as jax_config
    from jax._src.lib.mlir import ir

    original = dispatch.compile_or_get_cached
    if getattr(original, "_jax_ipu", False):
        return

    def compile_or_get_cached(backend, computation, devices, compile_options, host_callbacks):
        if backend.platform != platform:
            return original(backend, computation, devices, compile_options, host_callbacks)
        module_name = ir.StringAttr(computation.operation.attributes["sym_name"]).value
        with around_compile(module_name):
            directory = getattr(jax_config, JAX_CACHE_OPTION, None)
            if directory and not compilation_cache.is_initialized():
                _initialize_jax_cache(directory)  # set through the environment: no update hook ran
            if not compilation_cache.is_initialized():
                return original(backend, computation, devices, compile_options, host_callbacks)
            # jax's own key (module, devices, options, jaxlib, platform version: chip, tiles, IPUs) + our compiler.
            jax_key = compilation_cache.get_cache_key(computation, devices, compile_options, backend)
            extra = f"{jax_key}:ipu:{compiler_fingerprint()}:{_lowering_key(os.environ)}"
            key = hashlib.sha256(extra.encode()).hexdigest()
            executable = dispatch._cache_read(module_name, key, compile_options, backend)
            if executable is not None:
                dispatch.logger.info("Persistent compilation cache hit for '%s'", module_name)
                return executable
            start = time.monotonic()
            executable = dispatch.backend_compile(backend, computation, compile_options, host_callbacks)
            dispatch._cache_write(
                key, time.monotonic() - start, module_name, backend, executable, host_callbacks
            )
            return executable

    compile_or_get_cached._jax_ipu = True  # type: ignore[attr-defined]
    dispatch.compile_or_get_cached = compile_or_get_cached


class _ListedPlatform:
    """A backend as jax's persistent cache check sees it: named as a platform jax lists ("cpu"), all else its own."""

    platform = "cpu"

    def __init__(self, backend: Any) -> None:
        self._backend = backend

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)


def _install_current_jax_cache(platform: str, around_compile: Callable[[str], Any]) -> None:
    """The current series: jax's own compile path has a persistent cache, used only for the platforms it lists;
    we add the ipu (its key covers the module, devices, options, jaxlib and the platform version: chip, tiles,
    IPUs) and wrap every ipu compile in ``around_compile``."""
    from jax._src import compilation_cache, compiler
    from jax._src.lib.mlir import ir

    original = compiler.compile_or_get_cached
    if getattr(original, "_jax_ipu", False):
        return
    original_is_cache_used = compilation_cache.is_cache_used

    def is_cache_used(backend: Any) -> bool:
        if getattr(backend, "platform", None) == platform:
            # jax's own check, with the ipu among the platforms it lists: it reports its adoption metrics once per
            # process and memoises its answer for every backend, whichever asks first.
            return original_is_cache_used(_ListedPlatform(backend))
        return original_is_cache_used(backend)

    def compile_or_get_cached(backend, computation, *args, **kwargs):
        if backend.platform != platform:
            return original(backend, computation, *args, **kwargs)
        module_name = ir.StringAttr(computation.operation.attributes["sym_name"]).value
        with around_compile(module_name):
            return original(backend, computation, *args, **kwargs)

    compile_or_get_cached._jax_ipu = True  # type: ignore[attr-defined]
    compilation_cache.is_cache_used = is_cache_used
    compiler.compile_or_get_cached = compile_or_get_cached
