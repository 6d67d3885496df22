"""Registers the ipu backend with jax and connects jax's compiler calls to our front end.

jax imports ``jax_plugins.ipu`` and calls :func:`initialize` while it imports itself. We register a backend
factory rather than a fixed client so that flags are read when the backend is first used, after the user's
``jax.config.update(...)`` calls, and so that a malformed flag surfaces as jax's
"Unable to initialize backend 'ipu': ..." naming the flag.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import traceback
from typing import Any, Dict, Iterator, List, Optional

from jax_ipu import _native, executable_cache, report
from jax_ipu import config as ipu_config
from jax_ipu.backend import interrupts, multihost, progress, pvti
from jax_ipu.config import PLATFORM

logger = logging.getLogger(__name__)

# Below cpu's 0: cpu stays the default backend unless JAX_PLATFORMS / JAX_PLATFORM_NAME say otherwise.
PRIORITY = -100

# PJRT_Error_Code values the front end can report.
_INVALID_ARGUMENT = 3
_INTERNAL = 13
_UNIMPLEMENTED = 12

_callback_keepalive: List[Any] = []
# The configuration of the client being created or last created, and the device it describes (for cache keys).
_client_config: Optional[ipu_config.IpuConfig] = None
_client_device: Dict[str, Any] = {}


def initialize() -> None:
    from jax_ipu import _jax

    _define_jax_options()
    executable_cache.install_jax_cache_option()
    _tell_library_stablehlo_versions()
    _jax.register_backend(PLATFORM, _make_client, priority=PRIORITY)
    _jax.allow_donation(PLATFORM)
    _jax.answer_lowered_cost_analysis(PLATFORM)
    _jax.scan_forwarding_without_cpu()
    _add_device_properties()
    _add_host_streams()


def _define_jax_options() -> None:
    """Defines jax_ipu_* options. Values stay raw here (environment spellings included) and are validated by
    ``jax_ipu.config.read`` when the backend is created, so that a typo cannot break ``import jax``."""
    from jax_ipu import _jax

    for option in ipu_config.JAX_OPTIONS:
        _jax.define_string_option(
            option, help=f"ipu backend: see jax_ipu.config ({option.upper()} in the environment).")


def _jax_option_values() -> Dict[str, Any]:
    from jax_ipu import _jax

    return _jax.option_values(ipu_config.JAX_OPTIONS)


def _tell_library_stablehlo_versions() -> None:
    """The StableHLO versions our front end reads go into the plugin attributes, which jaxlib reads to choose the
    version of the VHLO artifact it hands to Compile (the current series; 0.4.13 sends plain bytecode)."""
    from jax_ipu import _jax

    versions = _jax.stablehlo_versions()
    if versions is None:
        return
    try:
        lib = _native.load()
    except ImportError as error:  # surfaces again, naming the library, when the backend is created
        logger.debug("ipu: %s", error)
        return
    array = ctypes.c_int64 * 3
    current, minimum = (array(*(list(v) + [0, 0, 0])[:3]) for v in versions)
    lib.JaxIpu_SetStablehloVersions(current, minimum)


def _make_client():
    from jax_ipu import _jax

    # imported when the backend starts: they import jax's internals
    from jax_ipu.backend import dlpack, linalg, profiler

    global _client_config, _client_device
    config = ipu_config.read(jax_options=_jax_option_values())
    _check_device(config)
    _client_config, _client_device = config, executable_cache.device_fields(config)
    report.set_target(config.version, config.num_tiles, config.num_devices)  # and checks POPLAR_ENGINE_OPTIONS
    pvti.install()  # PVTI_OPTIONS
    _register_compiler(_native.load())
    executable_cache.install_jax_cache(PLATFORM, _around_compile)
    _add_host_callbacks(_native.load())
    dlpack.install()  # DLPack with ipu arrays: host copies (dlpack.py)
    interrupts.install(_native.load())  # Ctrl-C ends waits (interrupts.py)
    profiler.install()  # jax.profiler's IPU planes on jaxlib 0.4.13
    linalg.install_lowerings()  # jnp.linalg on the ipu: generic lowerings
    options = config.client_options()
    # jax.distributed with several processes: every process's IPUs, through jax's key-value store (multihost.py)
    options.update(multihost.rendezvous(_native.load(), config.num_devices, config.collective_timeout))
    return _jax.make_client(PLATFORM, _native.library_path(), options)


def _check_device(config: ipu_config.IpuConfig) -> None:
    """Validates version, then tile count and each IPU Model parameter, against the emulator's device table, naming
    the flag that set each."""
    from jax_ipu import emulator

    checks = [("version", {}), ("num_tiles", {"num_tiles": config.num_tiles})]
    checks += [(field, {field: value}) for field, value in config.model_parameters().items()]
    for field, parameters in checks:
        try:
            emulator.device_info(config.version, **parameters)
        except emulator.EmulatorError as error:
            raise ValueError(f"{config.sources.get(field, 'ipu ' + field)}: {error.message}") from None


def _register_compiler(lib: ctypes.CDLL) -> None:
    if _callback_keepalive:
        return

    def compile_callback(module_ptr, module_size, options_ptr, options_size, result):
        # Never let an exception escape into C: report it as the compile's error instead.
        try:
            interrupts.compile_started()
            module = ctypes.string_at(module_ptr, module_size)
            options = ctypes.string_at(options_ptr, options_size) if options_size else b""
            with pvti.span("Compile", "compile (front end)"):
                data = _compile_cached(module, options)  # TF_POPLAR_FLAGS=--executable_cache_path
            interrupts.compile_checkpoint()  # a Ctrl-C after the front end's last op (or from the cache)
            device_ids = _device_ids(options)
            # the emulator's compile options: JAX_IPU_FUSION, POPLAR_ENGINE_OPTIONS' debug.allowOutOfMemory...
            lowering = json.dumps(ipu_config.lowering_options()).encode()
            progress.stage("lowering onto tiles")  # what PJRT_Client_Compile does next, in the emulator
            report.on_compile()  # a malformed POPLAR_ENGINE_OPTIONS fails the compile, naming the option
            for device_id in device_ids:
                lib.JaxIpu_CompileResult_AddDevice(result, device_id)
            lib.JaxIpu_CompileResult_SetOptions(result, lowering, len(lowering))
            lib.JaxIpu_CompileResult_SetProgram(result, data, len(data))
        except BaseException as e:  # noqa: BLE001 - everything must be reported, nothing may cross into C
            _report_compile_error(lib, result, e)
        return 0

    def compiled_hook(handle, program_ptr, program_size, device_ids_ptr, num_devices):
        # PJRT lowered the program: its profile report (POPLAR_ENGINE_OPTIONS autoReport) comes from that executable.
        # The handle is this hook's to release; nothing may cross into C.
        try:
            report.on_compiled(handle, ctypes.string_at(program_ptr, program_size),
                               [device_ids_ptr[i] for i in range(num_devices)])
        except BaseException:  # noqa: BLE001 - a report must never fail the user's compile
            logger.warning("ipu: could not write the profile report", exc_info=True)

    callback = _native.COMPILER_FN(compile_callback)
    hook = _native.COMPILED_FN(compiled_hook)
    _callback_keepalive.extend((callback, hook))
    lib.JaxIpu_SetCompiler(callback)
    lib.JaxIpu_SetCompiledHook(hook)


def _report_compile_error(lib: Any, result: Any, error: BaseException) -> None:
    """Sets the compile's error. One Ctrl-C can arrive twice here, as the front end's checkpoint raises it from the
    library's count and as Python's own handler raises it where the main thread next looks, which may be this
    report: a KeyboardInterrupt raised while reporting is reported in its place, so that the compile always ends
    with an error (before, the callback returned none: "the ipu compiler front end returned no result")."""
    while True:
        try:
            if isinstance(error, KeyboardInterrupt):
                interrupts.compile_interrupted()  # raised again where jax compiles (_around_compile)
            code, message = _describe(error)
            data = message.encode("utf-8", errors="replace")
            lib.JaxIpu_CompileResult_SetError(result, code, data, len(data))
            return
        except KeyboardInterrupt as again:
            error = again


@contextlib.contextmanager
def _around_compile(module_name: str) -> Iterator[None]:
    """Around every ipu compile: the progress bar, as --show_progress_bar says, and a Ctrl-C in the front end
    raised as ``KeyboardInterrupt``."""
    with progress.compiling(module_name, _client_config.show_progress_bar if _client_config else False), \
            interrupts.compiling_raises_interrupts():
        yield


def _compile_cached(module: bytes, options: bytes) -> bytes:
    """The program from the executable cache (--executable_cache_path) if it holds it, else from the front end."""
    directory = _client_config.executable_cache_path if _client_config is not None else None
    if not directory:
        progress.stage("front end")
        return _compile(module, options)
    from jax_ipu.compiler import callback_ids

    progress.stage("loading from the executable cache")
    # Host callbacks by position, not by this process's ids: the same function compiled again gets the same key
    # (after jax.clear_caches(), in another process), and the program calls the callbacks of this lowering.
    module, ids = callback_ids.positional(module)
    hosts = multihost.hosts_of(_device_ids(options))  # several processes: part of what the program is
    key = executable_cache.cache_key(module, options + (repr(hosts).encode() if hosts else b""), _client_device)

    def compile_program() -> bytes:
        progress.stage("front end")
        return _compile(module, options)

    return callback_ids.bind(executable_cache.for_directory(directory).get_or_compile(key, compile_program), ids)


def _compile(module: bytes, options: bytes) -> bytes:
    """The program in the binary container (constants as raw blobs, see compiler.translate.encode); with several
    processes, it says whose IPU each replica runs on (for the cost of collectives between hosts)."""
    from jax_ipu.compiler import compile_to_binary

    return compile_to_binary(module, options, hosts=multihost.hosts_of(_device_ids(options)),
                             checkpoint=interrupts.compile_checkpoint)


def _describe(error: BaseException):
    from jax_ipu.compiler import CompileError

    if isinstance(error, CompileError):
        return _UNIMPLEMENTED, str(error)
    if isinstance(error, (ValueError, TypeError)):
        return _INVALID_ARGUMENT, f"ipu compiler: {error}"
    detail = "".join(traceback.format_exception_only(type(error), error)).strip()
    logger.debug("ipu compiler failure", exc_info=error)
    return _INTERNAL, f"ipu compiler front end failed: {detail}"


def _device_ids(options: bytes) -> List[int]:
    """The devices of the compile options' device assignment, e.g. for ``jit(f, device=jax.devices("ipu")[1])``;
    without one, PJRT's default for its replicas x partitions (the first ones: jax 0.4.13's jit of a pmap)."""
    from jax_ipu.compiler import compile_options

    if not options:
        return []
    parsed = compile_options.parse(options)
    count = parsed.num_replicas * parsed.num_partitions
    return parsed.device_ids or (list(range(count)) if count > 1 else [])


def _add_device_properties() -> None:
    """``device.is_ipu_model`` as a bool: PJRT attributes carry no booleans, so it arrives as an int. And
    ``device.memory_stats()`` of an ipu device gets its busiest tile (runtime.tile_memory_stats)."""
    from jax_ipu import _jax, runtime

    device_class = _jax.device_class()
    if getattr(device_class, "_jax_ipu_properties", False):
        return
    original_getattr = device_class.__getattr__
    original_memory_stats = device_class.memory_stats

    def __getattr__(self, name):  # noqa: N807 - replaces the class's own
        value = original_getattr(self, name)
        if name == "is_ipu_model" and self.platform == PLATFORM:
            return bool(value)
        return value

    def memory_stats(self):
        stats = original_memory_stats(self)
        if stats is not None and self.platform == PLATFORM:
            stats.update(runtime.tile_memory_stats(self))
        return stats

    memory_stats.__doc__ = original_memory_stats.__doc__
    try:
        device_class.__getattr__ = __getattr__
        device_class.memory_stats = memory_stats
        device_class._jax_ipu_properties = True
    except (AttributeError, TypeError) as e:  # pragma: no cover - a jaxlib whose Device class is sealed
        logger.debug("ipu: could not refine device properties: %s", e)


def _add_host_streams() -> None:
    """``device.transfer_to_infeed`` / ``transfer_from_outfeed`` for ipu devices (jaxlib's raise UNIMPLEMENTED)."""
    from jax_ipu import _jax
    from jax_ipu.backend import feeds

    if _jax.is_current_series():
        return  # infeed and outfeed are gone from jax there: io_callback streams replace them (README)
    try:
        feeds.install_device_methods()
    except (AttributeError, TypeError) as e:  # pragma: no cover - a jaxlib whose Device class is sealed
        logger.warning("ipu: could not add infeed/outfeed to jaxlib's Device: %s", e)


def _add_host_callbacks(lib: ctypes.CDLL) -> None:
    """jax.debug.print, pure_callback and io_callback on the ipu. Done when the backend is created, not in
    initialize(): jax calls initialize() while it is still importing the modules this needs."""
    from jax_ipu.backend import callbacks

    callbacks.install_lowering()
    callbacks.install_runtime(lib)
