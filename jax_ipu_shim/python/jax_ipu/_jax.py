"""The one adapter between jax_ipu and the jax/jaxlib series it runs under (0.4.13 on Python 3.8; 0.12 on 3.12).

Everything that differs between the series' bindings and internals is answered here, chosen once by jaxlib's
version; the rest of the package asks this module instead of testing versions itself. (MLIR attribute reading
differs too and lives in ``compiler/attributes.py``; compile options are read from their proto bytes by
``compile_options``, the same for both.)
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple


@functools.lru_cache(maxsize=None)
def jaxlib_version() -> Tuple[int, ...]:
    from jaxlib import version

    return tuple(int(part) for part in version.__version__.split("+")[0].split(".")[:3])


def is_current_series() -> bool:
    """jaxlib 0.5 or newer: VHLO compile input, memory spaces, no infeed/outfeed, plugins by entry point."""
    return jaxlib_version() >= (0, 5)


def numerics() -> str:
    """Whose XLA:CPU arithmetic the emulator reproduces for this process's programs (their document's "numerics";
    the emulator's ipu/numerics.h says what differs): XLA:CPU changed maximum, minimum and its approximations of
    exp, tanh, erf... between the series, and backend="ipu" computes what backend="cpu" does."""
    return "jaxlib-0.12" if is_current_series() else "jaxlib-0.4"


# ------------------------------------------------------------------------------------------------- options

def define_string_option(name: str, help: str) -> None:
    """A ``jax.config`` option holding a string or object, unvalidated (jax_ipu.config validates it later)."""
    from jax._src import config as jax_config_module

    if name in jax_config_module.config.values:
        return
    if is_current_series():
        jax_config_module.string_or_object_state(name, None, help)
    else:
        jax_config_module.config.define_string_or_object_state(name, None, help=help)


def option_values(names: Iterable[str]) -> Dict[str, Any]:
    from jax._src.config import config as jax_config

    if not is_current_series():
        return {name: getattr(jax_config, name) for name in names}
    values = jax_config.values  # the current series has no attribute access to options
    return {name: values.get(name) for name in names}


@functools.lru_cache(maxsize=None)
def xla_refuses_option(key: str, value: Any) -> Optional[str]:
    """XLA:CPU's error for the compile option ``key=value`` (an unknown name, a value of the wrong type), or None
    where it takes it: this jaxlib's own answer, from compiling an empty module on a cpu client of its own (a few
    milliseconds, once per option and value; no cpu backend needs to be configured)."""
    from jax._src.lib import xla_client

    options = xla_client.CompileOptions()
    if key == "xla_dump_to" and isinstance(value, str):
        value = ""  # the check needs the name and the type; a directory would get XLA's dump of the empty module
    options.env_option_overrides = [(key, value)]
    try:
        _cpu_compile("module @compile_options { func.func public @main() { return } }", options, 1)
    except Exception as error:  # noqa: BLE001 - XLA's status, whatever jaxlib names its class
        message = str(error)
        return message.split(": ", 1)[1] if message.startswith("INVALID_ARGUMENT: ") else message
    return None


# ------------------------------------------------------------------------------------------------- backend

def register_backend(platform: str, factory: Callable[[], Any], priority: int) -> None:
    from jax._src import xla_bridge

    xla_bridge.register_backend_factory(platform, factory, priority=priority, fail_quietly=False, experimental=True)


def ensure_plugins_registered() -> None:
    """Make the installed PJRT plugins' platforms known to jax (so that lowerings can be registered for "ipu")
    without creating any backend: jax 0.4.13 registers them when it is imported, the current series only when its
    backends are first asked for."""
    from jax._src import xla_bridge

    register = getattr(xla_bridge, "_discover_and_register_pjrt_plugins", None)
    if register is not None:
        register()


def make_client(platform: str, library_path: str, options: Dict[str, Any]) -> Any:
    from jax._src.lib import xla_client

    if not xla_client.pjrt_plugin_loaded(platform):
        c_api = xla_client.load_pjrt_plugin_dynamically(platform, library_path)
        # The current series: the library's PJRT profiler extension gives jax.profiler the IPUs' planes, as jax's own
        # register_plugin does for the plugins it loads (0.4.13 has neither: jax_ipu.backend.profiler).
        from jax._src import lib

        register_profiler = getattr(getattr(lib, "_profiler", None), "register_plugin_profiler", None)
        if register_profiler is not None and c_api is not None:
            register_profiler(c_api)
    return xla_client.make_c_api_client(platform, options)


def allow_donation(platform: str) -> None:
    """jax lowers donation (``tf.aliasing_output``) only for the platforms it lists; jax 0.4.13's patch 0002 adds
    the ipu there, the current series lists it from here."""
    from jax._src.interpreters import mlir

    platforms = getattr(mlir, "_platforms_with_donation", None)
    if platforms is not None and platform not in platforms:
        platforms.append(platform)


def answer_lowered_cost_analysis(platform: str) -> None:
    """``jax.jit(f).lower(x).cost_analysis()`` on ``platform``: XLA's cost analysis of the module's HLO (flops,
    transcendentals, bytes accessed), computed by a cpu client as cpu's own lowered stage computes it. jax raises
    NotImplementedError there for every PJRT C API plugin and the stage returns None, so flax's
    ``nn.tabulate(compute_flops=True)`` showed 0 flops. (``compile().cost_analysis()`` is the ipu's own: its
    estimate in cycles and tile memory.)"""
    from jax._src.interpreters import pxla
    from jax._src.lib import xla_client

    original = pxla.MeshComputation.cost_analysis
    if getattr(original, "_jax_ipu_platform", None) == platform:
        return

    def cost_analysis(self: Any) -> Any:
        if self.compile_args["backend"].platform != platform:
            return original(self)
        return xla_client._xla.hlo_module_cost_analysis(_cpu_client(1), self.hlo().as_hlo_module())

    cost_analysis._jax_ipu_platform = platform  # type: ignore[attr-defined]
    pxla.MeshComputation.cost_analysis = cost_analysis


def device_class() -> Any:
    from jax._src.lib import xla_client

    return xla_client.Device


def runtime_error(message: str) -> Exception:
    """The error jaxlib raises for runtime failures: XlaRuntimeError (0.4.13), JaxRuntimeError (current)."""
    from jax._src.lib import xla_client

    cls = getattr(xla_client, "XlaRuntimeError", None)
    if cls is None:
        import jax

        cls = jax.errors.JaxRuntimeError
    return cls(message)


def install_callback_emitter(platform: str, emitter: Callable[..., Any]) -> bool:
    """Makes jax's ``emit_python_callback`` (pure_callback, io_callback, jax.debug.*) use ``emitter`` when lowering
    for ``platform``, and registers debug_callback's lowering there. False if this jax offers no way in.

    jax 0.4.13 asks ``mlir._platform_callback_emitters`` (added by our patch 0004); the current series has one
    emitter, ``jax._src.callback.emit_python_callback``, looked up as a module attribute by every caller, which we
    wrap (its other platforms are untouched)."""
    from jax._src import debugging
    from jax._src.interpreters import mlir

    if not is_current_series():
        emitters = getattr(mlir, "_platform_callback_emitters", None)
        if emitters is None:
            return False
        emitters[platform] = emitter
        _when_imported(_HOST_CALLBACK, functools.partial(_lower_host_callback, platform))
    else:
        from jax._src import callback as jax_callback

        original = jax_callback.emit_python_callback
        if not getattr(original, "_jax_ipu", False):
            def emit_python_callback(ctx: Any, callback: Any, token: Any, operands: Any, operand_avals: Any,
                                     result_avals: Any, *, has_side_effect: bool, returns_token: bool = True,
                                     partitioned: bool = False, sharding: Any = None) -> Any:
                if list(ctx.module_context.platforms) != [platform]:
                    return original(ctx, callback, token, operands, operand_avals, result_avals,
                                    has_side_effect=has_side_effect, returns_token=returns_token,
                                    partitioned=partitioned, sharding=sharding)
                results, token, keepalive = emitter(ctx, callback, token, operands, operand_avals, result_avals,
                                                    has_side_effect, sharding=sharding)
                # The callers of this series drop what we return third: keep the registration alive with the
                # executable ourselves (0.4.13's callers do it).
                ctx.module_context.add_keepalive(keepalive)
                return results, token, keepalive

            emit_python_callback._jax_ipu = True  # type: ignore[attr-defined]
            jax_callback.emit_python_callback = emit_python_callback
            # jax.interpreters.mlir re-exports it (bound when jax was imported): the lowerings that call it there
            # (sparse spsolve's, third-party primitives') get the same emitter
            from jax.interpreters import mlir as public_mlir

            if getattr(public_mlir, "emit_python_callback", None) is original:
                public_mlir.emit_python_callback = emit_python_callback
        _callbacks_without_cpu()
    mlir.register_lowering(debugging.debug_callback_p, debugging.debug_callback_lowering, platform=platform)
    _when_imported("jax._src.checkify", functools.partial(_lower_checks, platform))
    _when_imported("jax.experimental.sparse.linalg", functools.partial(_lower_spsolve, platform))
    if hasattr(debugging, "debug_print_p"):  # the current series' jax.debug.print has a primitive of its own
        mlir.register_lowering(debugging.debug_print_p, debugging.debug_print_lowering_rule, platform=platform)
    return True


@functools.lru_cache(maxsize=1)  # jax's backends are made once: asked at the first use, not at each
def has_cpu_backend() -> bool:
    """Whether jax has a cpu backend (JAX_PLATFORMS may name the ipu alone)."""
    from jax._src import xla_bridge

    try:
        xla_bridge.local_devices(backend="cpu")
    except RuntimeError:
        return False
    return True


def scan_forwarding_without_cpu() -> None:
    """The current series' lax.scan returns an input its body forwards unchanged as an output (``lambda c, x: (c,
    x)``) without computing it, and puts that input, when it is a numpy array, on a cpu device: without a cpu backend
    (JAX_PLATFORMS=ipu) the scan fails with "Unknown backend cpu". Then the array goes to the default device, as jax
    0.4.13's patch 0005 puts it; with a cpu backend jax's own code runs. jax looks ``_maybe_put`` up as a module
    function when the scan runs: it is wrapped in place."""
    if not is_current_series():
        return
    from jax._src.lax.control_flow import loops

    original = getattr(loops, "_maybe_put", None)
    if original is None or getattr(original, "_jax_ipu", False):
        return

    def maybe_put(x: Any) -> Any:
        import numpy
        from jax._src import core, dispatch, sharding_impls, xla_bridge
        from jax._src.interpreters import pxla

        if has_cpu_backend() or not isinstance(x, numpy.ndarray):
            return original(x)
        # jax's own code with the default device for the cpu one (an uncommitted array, as there)
        sharding = sharding_impls.make_single_device_sharding(xla_bridge.local_devices()[0])
        handler = pxla.global_aval_to_result_handler(core.shaped_abstractify(x), sharding, False)
        return handler(pxla.shard_args([sharding], [None], [dispatch.ArrayCopySemantics.REUSE_INPUT], [x]))

    maybe_put._jax_ipu = True  # type: ignore[attr-defined]
    loops._maybe_put = maybe_put


def _callbacks_without_cpu() -> None:
    """The current series puts a host callback's operands on a cpu device before calling it (jax.pure_callback,
    io_callback, jax.debug.callback and jax.debug.print), and fails without one ("failed to find a local CPU device")
    when JAX_PLATFORMS names the ipu alone. Without a cpu backend the callback gets its operands as numpy arrays
    instead, as jax 0.4.13 gives them; with one, jax's own impl runs. jax's lowerings and impl rules look these impls
    up as module functions when they run: they are wrapped in place."""
    import numpy
    from jax._src import callback as jax_callback
    from jax._src import debugging, tree_util

    def wrapped(module: Any, name: str, results: Callable[[Any], Any]) -> Any:
        original = getattr(module, name)
        if getattr(original, "_jax_ipu", False):
            return original

        def impl(*args: Any, callback: Callable[..., Any], **params: Any) -> Any:
            if has_cpu_backend():
                return original(*args, callback=callback, **params)
            return results(callback(*(numpy.asarray(a) for a in args)))

        impl._jax_ipu = True  # type: ignore[attr-defined]
        setattr(module, name, impl)
        return impl

    def as_numpy(out: Any) -> Any:
        return tree_util.tree_map(numpy.asarray, out)

    wrapped(jax_callback, "pure_callback_impl", as_numpy)
    wrapped(jax_callback, "io_callback_impl", as_numpy)
    debugging.debug_callback_p.def_impl(wrapped(debugging, "debug_callback_impl", lambda _: ()))


_HOST_CALLBACK = "jax.experimental.host_callback"


def _lower_host_callback(platform: str, module: Any) -> None:
    """jax.experimental.host_callback (jax 0.4.13's id_tap, id_print, call): jax registers the lowering of its
    primitive, a custom call through ``emit_python_callback``, for "cpu" only, and takes an outfeed path on gpu and
    tpu that refuses PJRT C API plugins. The custom-call path is the ipu's: our emitter runs it as a host call."""
    from jax._src.interpreters import mlir

    mlir.register_lowering(module.outside_call_p, module._outside_call_lowering, platform=platform)
    # barrier_wait (and the wait at exit) runs a barrier tap on each device host_callback listens to, by default
    # those of "cpu", "cuda", "rocm" and "tpu": the ipu's devices join them, so that it waits for the taps of the
    # computations already queued there (they run in order per device)
    start = module._initialize_outfeed_receiver

    def initialize_with_ipu_devices(*args: Any, **kwargs: Any) -> None:
        start(*args, **kwargs)
        from jax._src import xla_bridge

        data = module._callback_handler_data
        with data.lock:
            if platform in xla_bridge.backends():
                data.devices = list(data.devices) + [d for d in xla_bridge.get_backend(platform).local_devices()
                                                     if d not in data.devices]

    module._initialize_outfeed_receiver = initialize_with_ipu_devices


def _lower_spsolve(platform: str, module: Any) -> None:
    """jax.experimental.sparse.linalg.spsolve: jax lowers it for cpu as a host callback to scipy's spsolve (and for
    cuda to cuSOLVER). The ipu runs host callbacks, so it lowers it as cpu does."""
    from jax._src.interpreters import mlir

    mlir.register_lowering(module.spsolve_p, module._spsolve_cpu_lowering, platform=platform)


def _lower_checks(platform: str, module: Any) -> None:
    """checkify's ``check`` primitive (checkify.check, debug_check) outside checkify: jax lowers it for cpu and gpu
    as a host callback that raises the error (with jax_experimental_unsafe_xla_runtime_errors; a debug_check is a
    no-op there), and refuses it on tpu. The ipu runs host callbacks, so it lowers it as cpu does."""
    from jax._src.interpreters import mlir

    mlir.register_lowering(module.check_p, module.check_lowering_rule, platform=platform)


class _AfterImport:
    """A ``sys.meta_path`` entry that calls ``then(module)`` once ``name`` has been imported (loaded by the other
    finders as usual), so that an optional jax module costs nothing until a program imports it."""

    def __init__(self, name: str, then: Callable[[Any], None]) -> None:
        self.name, self.then = name, then

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        import importlib.util
        import sys

        if fullname != self.name:
            return None
        sys.meta_path.remove(self)  # the real finders locate it; we only wrap its execution
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        exec_module, then = spec.loader.exec_module, self.then

        def exec_then(module: Any) -> None:
            exec_module(module)
            then(module)

        spec.loader.exec_module = exec_then  # type: ignore[method-assign]
        return spec


def _when_imported(name: str, then: Callable[[Any], None]) -> None:
    """Calls ``then(module)`` now if ``name`` is imported, else right after its import."""
    import sys

    if name in sys.modules:
        then(sys.modules[name])
    elif not any(isinstance(f, _AfterImport) and f.name == name for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(name, then))


def ir_types(ctx: Any, aval: Any) -> Tuple[Any, ...]:
    """The MLIR types of an abstract value; the current series needs the lowering's module context."""
    from jax._src.interpreters import mlir

    if is_current_series():
        return tuple(mlir.aval_to_ir_types(ctx.module_context, aval))
    return tuple(mlir.aval_to_ir_types(aval))


def physical_avals(aval: Any) -> List[Any]:
    """The arrays that hold an abstract value: itself, or for an extended dtype (a PRNG key array) the avals of its
    physical representation (a key<fry>[n] is a uint32[n, 2]), which is what the program moves and a host callback
    receives."""
    from jax._src import core, dtypes

    dtype = getattr(aval, "dtype", None)
    extended = dtypes.issubdtype(dtype, dtypes.extended) if is_current_series() else dtypes.is_opaque_dtype(dtype)
    return [core.physical_aval(aval)] if extended else [aval]


def x64_enabled() -> bool:
    """jax_enable_x64 as this thread sees it (a ``jax.enable_x64`` context included)."""
    import jax

    return bool(jax.config.jax_enable_x64)


def x64_scope(enabled: bool) -> Any:
    """A context in which this thread sees jax_enable_x64 as ``enabled`` (jax's thread-local state, both series)."""
    from jax._src import config

    return config.enable_x64(enabled)


def callback_result(value: Any) -> Any:
    """A host callback's returned value as the array jax's own emitter checks: in the current series canonicalised
    (a Python literal or a 64-bit array without jax_enable_x64 is the 32-bit array, as jax's ``_wrapped_callback``
    makes it); jax 0.4.13 takes ``np.asarray`` of it as it is."""
    import numpy as np

    array = np.asarray(value)
    if is_current_series():
        from jax._src import dtypes

        array = np.asarray(dtypes.canonicalize_value(array))
    return array


def set_callback_sharding(ctx: Any, op: Any, sharding: Any, token_first: bool) -> None:
    """Annotates a host callback's custom_call with the sharding jax chose for it, as jax's own emitter does: an
    OpSharding (``mhlo.sharding``) or, in the current series with Shardy, one sharding per result, the leading
    token's on the same device as the first result's."""
    from jax._src.interpreters import mlir

    if not is_current_series():
        mlir.set_sharding(op, sharding)
        return
    from jax._src.sharding_impls import SdyArray, SdyArrayList

    if token_first and isinstance(sharding, SdyArrayList):
        first = sharding.shardings[0]
        sharding = SdyArrayList((SdyArray(mesh_shape=(), dim_shardings=(), logical_device_ids=first.logical_device_ids),
                                 *sharding.shardings))
    mlir.set_sharding(ctx.module_context, op, sharding)


def without_mesh(aval: Any) -> Any:
    """An abstract value without what a mesh says of it (the current series): the manual axes a shard_map's body
    gives it (over which axes it varies or is unreduced) and its sharding in an explicit mesh. Called inside
    outside_any_mesh(). jax 0.4.13's have neither."""
    mat = getattr(aval, "manual_axis_type", None)
    if mat is not None and (mat.varying or mat.unreduced or getattr(mat, "reduced", None)):
        aval = aval.update(manual_axis_type=type(mat)())
    sharding = getattr(aval, "sharding", None)
    if sharding is not None and not sharding.mesh.empty:
        aval = aval.update(sharding=None)  # the default of no mesh: replicated
    return aval


def outside_any_mesh() -> Any:
    """A context in which jax traces as outside any mesh (the current series' use_abstract_mesh of the empty mesh)."""
    if not is_current_series():
        return contextlib.nullcontext()
    from jax._src import mesh as mesh_lib

    return mesh_lib.use_abstract_mesh(mesh_lib.empty_abstract_mesh)


def token_types() -> Tuple[Any, ...]:
    from jax._src.lib.mlir.dialects import hlo

    return (hlo.TokenType.get(),)


# ------------------------------------------------------------------------------------------------- compile input

def stablehlo_versions() -> Optional[Tuple[Tuple[int, ...], Tuple[int, ...]]]:
    """(current, minimum) StableHLO versions the bundled deserializer reads; None where compile input is not a
    versioned artifact (0.4.13 sends native MLIR bytecode)."""
    if not is_current_series():
        return None
    from jaxlib.mlir.dialects import stablehlo

    def triple(text: str) -> Tuple[int, ...]:
        return tuple(int(x) for x in text.split("."))

    return triple(stablehlo.get_current_version()), triple(stablehlo.get_minimum_version())


# MLIR bytecode starts with these four bytes; a VHLO portable artifact is bytecode of the vhlo dialect.
_BYTECODE_MAGIC = b"ML\xefR"


def parse_module(data: bytes) -> Any:
    """The module jaxlib handed to Compile, as StableHLO in jax's MLIR context (the caller's ``with`` context).

    jaxlib 0.4.13 sends native MLIR bytecode (StableHLO, CHLO, func); the current series a VHLO portable artifact,
    which the bundled StableHLO deserializes at whatever version it was written (the plugin attributes tell jaxlib
    which versions we read). Text (tests, tools) parses as it is."""
    from jax._src.lib.mlir import ir

    if is_current_series() and data.startswith(_BYTECODE_MAGIC):
        from jaxlib.mlir.dialects import stablehlo

        try:
            return stablehlo.deserialize_portable_artifact(ir.Context.current, data)
        except Exception:  # native (non-VHLO) bytecode, e.g. from tools: parse it as it is
            pass
    return ir.Module.parse(data)


# ------------------------------------------------------------------------------------------------- XLA's partitioner

def cpu_compile_to_dump(module: bytes, options: Any, partitions: int) -> Optional[Exception]:
    """Compiles ``module`` with this jaxlib's XLA:CPU for ``partitions`` devices, so that the passes it runs first
    (sharding propagation, Shardy, the SPMD partitioner) write the dumps ``options`` asks for. Returns the error of
    a compile that failed (after those passes, e.g. at an ipu-only custom call), else None.

    jaxlib 0.4.13's cpu client has the process's cpu devices (one unless XLA_FLAGS forces more) and compiles for
    a device assignment that names one of them N times; the current series' executables check the assignment
    against the devices, so it gets a cpu client of N devices of its own, made once per N."""
    import numpy
    from jax._src.lib import xla_client

    build = options.executable_build_options
    build.num_partitions = options.num_partitions = partitions
    build.num_replicas = options.num_replicas = 1
    build.device_assignment = xla_client.DeviceAssignment.create(
        numpy.arange(partitions, dtype=numpy.int32)[None] if is_current_series()
        else numpy.zeros((1, partitions), dtype=numpy.int32))
    try:
        _cpu_compile(module, options, partitions)
    except Exception as error:  # the dumps were written before it; the caller decides
        return error
    return None


def cheap_cpu_codegen() -> List[Tuple[str, Any]]:
    """Debug options that make XLA:CPU's code generation cheap, as compile option overrides (jaxlib 0.4.13's
    overrides cannot set an int: only the bool there)."""
    if is_current_series():
        return [("xla_backend_optimization_level", 0), ("xla_llvm_disable_expensive_passes", True)]
    return [("xla_llvm_disable_expensive_passes", True)]


def _cpu_compile(module: Any, options: Any, devices: int) -> None:
    """Compiles ``module`` with this jaxlib's XLA:CPU on a cpu client of its own, for ``devices`` devices (jaxlib
    0.4.13's client has the process's cpu devices, and its assignment names one of them as often as it needs)."""
    from jax._src.lib import xla_client

    if is_current_series():
        client = _cpu_client(devices)
        client.compile_and_load(module, xla_client.DeviceList(tuple(client.devices())), options)
    else:
        _cpu_client(0).compile(module, options)


@functools.lru_cache(maxsize=None)
def _cpu_client(devices: int) -> Any:
    from jax._src.lib import xla_client

    if is_current_series():
        return xla_client.make_cpu_client(num_devices=devices)
    return xla_client._xla.get_tfrt_cpu_client(asynchronous=True)


def compile_options(serialized: bytes) -> Any:
    """jaxlib's CompileOptions from the serialized proto PJRT hands a plugin (empty: the defaults)."""
    from jax._src.lib import xla_client

    if not serialized:
        return xla_client.CompileOptions()
    return xla_client.CompileOptions.ParseFromString(serialized)


def hlo_module(proto: bytes) -> Any:
    """An HloModuleProto as jaxlib's HloModule (spmd_parameters_shardings, spmd_output_sharding)."""
    from jax._src.lib import xla_client

    cls = getattr(getattr(xla_client, "hlo", None), "HloModule", None) or xla_client._xla.HloModule
    return cls.from_serialized_hlo_module_proto(proto)


def hlo_to_stablehlo(proto: bytes) -> Any:
    """An HloModuleProto as StableHLO (text or bytecode, for parse_module): the importer both series ship."""
    from jax._src.lib import xla_client

    mlir = xla_client._xla.mlir
    if is_current_series():
        return mlir.hlo_to_stablehlo(proto)
    return mlir.mhlo_to_stablehlo(mlir.xla_computation_to_mlir_module(xla_client.XlaComputation(proto)).encode())


def tiled_sharding(op_sharding: Any) -> Any:
    """An OpSharding (or HloSharding) as jaxlib's HloSharding, in the tiled form (a mesh sharding of the current
    series as tiles)."""
    from jax._src.lib import xla_client

    sharding = op_sharding if isinstance(op_sharding, xla_client.HloSharding) \
        else xla_client.HloSharding.from_proto(op_sharding)
    return sharding.v3_to_v2_sharding() if hasattr(sharding, "v3_to_v2_sharding") else sharding


# ------------------------------------------------------------------------------------------------- primitives

def new_primitive(name: str, multiple_results: bool = False) -> Any:
    """A jax primitive evaluated eagerly by compiling it alone, as jax's own are (jax.tile's ops)."""
    from jax._src import dispatch

    if is_current_series():
        from jax.extend.core import Primitive
    else:
        from jax.core import Primitive
    primitive = Primitive(name)
    primitive.multiple_results = multiple_results
    primitive.def_impl(functools.partial(dispatch.apply_primitive, primitive))
    return primitive


def custom_call(target: str, result_types: List[Any], operands: List[Any], backend_config: str) -> Any:
    """A ``stablehlo.custom_call`` without side effects; returns the op."""
    from jax._src.interpreters import mlir

    if is_current_series():
        return mlir.custom_call(target, result_types=result_types, operands=operands, backend_config=backend_config)
    return mlir.custom_call(target, result_types, operands, backend_config=backend_config)
