"""The ipu backend's configuration, read from the flags users of Graphcore's JAX and TensorFlow already write.

Sources, highest precedence first:

- JAX options (``jax.config.update("jax_ipu_model_num_tiles", 16)``) and their environment spellings
  ``JAX_IPU_USE_MODEL``, ``JAX_IPU_MODEL_NUM_TILES``, ``JAX_IPU_MODEL_VERSION``, ``JAX_IPU_DEVICE_COUNT``,
  ``JAX_IPU_VISIBLE_DEVICES``, and the IPU Model's other parameters (``MODEL_PARAMETERS``: Poplar's
  ``IPUModel`` members, ``JAX_IPU_MODEL_MEMORY_BYTES_PER_TILE`` and the rest);
- ``TF_POPLAR_FLAGS``: space-separated ``--flag[=value]`` (``--use_ipu_model --ipu_model_tiles=8``);
- the older ``XLA_IPU_PLATFORM_DEVICE_COUNT``;
- ``JAX_IPU_HOST_THREADS`` (environment only: the host threads that run the emulated tiles, 1..256);
- ``JAX_IPU_FUSION`` (environment only, default on: fuse chains of elementwise ops into one compute set, as
  popops' expression maps do; ``0`` lowers every op on its own, for comparison) and
  ``JAX_IPU_EXCHANGE_PER_ELEMENT`` (environment only, default off: count exchanged elements one by one, the
  reference the exchange accounting is tested against), read at each compile (lowering_options);
- ``JAX_IPU_EMULATE_64BIT`` (environment only, default on: with ``jax_enable_x64``, f64, int64 and uint64 run
  emulated, i64/u64 as pairs of 32-bit words and f64 in software, costed as those instruction sequences; ``0``
  refuses them at compile time, as Graphcore's JAX does), read at each compile (lowering_options);
- ``JAX_IPU_AVAILABLE_MEMORY_PROPORTION`` (environment only, default 0.6: poplin's ``availableMemoryProportion`` of
  every matmul and convolution, the share of a tile its plan may use for temporaries; lower it when a program is out
  of memory, as with Poplar), read at each compile (lowering_options);
- ``JAX_IPU_PARTIALS_TYPE`` (environment only, ``float`` or ``half``, default ``float``: poplin's ``partialsType`` of
  every matmul and convolution of f16 operands and result; ``half`` keeps, exchanges and reduces their partials in
  f16, as Graphcore's fp16 models ran, with less memory and exchange and f16 rounding of each partial), read at each
  compile (lowering_options);
- ``JAX_IPU_COLLECTIVE_TIMEOUT`` (environment only, seconds, default 300): with several processes
  (``jax.distributed``), how long a collective waits for another process that sends nothing before it fails,
  naming that process (one that ends or dies fails the others at once).

Nothing here imports jax, so the configuration can be read and tested on its own. A malformed value raises
``ValueError`` naming the flag, where it came from, and what is accepted.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shlex
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

logger = logging.getLogger(__name__)

# Which chip versions exist, and their tile counts, is the emulator's device table's to say (checked when the
# backend is created); here a version is only a name.
# The backend's platform name: jax.devices("ipu"), jax.jit(..., backend="ipu"), the lowerings registered for it.
PLATFORM = "ipu"
DEFAULT_VERSION = "ipu2"
MAX_DEVICES = 64
MAX_HOST_THREADS = 256  # the ThreadPool's limit (the PJRT client checks its host_threads option the same)

_TRUE = ("y", "yes", "t", "true", "on", "1")
_FALSE = ("n", "no", "f", "false", "off", "0")


@dataclasses.dataclass(frozen=True)
class IpuConfig:
    """What the backend is created with."""

    use_model: bool = True
    version: str = DEFAULT_VERSION
    num_tiles: int = 0  # 0: every tile of the chip
    num_devices: int = 1
    visible_devices: Optional[Tuple[int, ...]] = None
    executable_cache_path: Optional[str] = None  # --executable_cache_path: see jax_ipu.executable_cache
    show_progress_bar: Optional[bool] = None  # --show_progress_bar; None: when stderr is a terminal (backend/progress)
    host_threads: int = 0  # 0: the emulator's default, min(hardware threads, 8)
    # The IPU Model's other parameters (MODEL_PARAMETERS); 0: the chip's own.
    memory_bytes_per_tile: int = 0
    num_worker_contexts: int = 0
    tile_clock_frequency: int = 0
    exchange_bytes_per_cycle: int = 0
    global_sync_cycles: int = 0
    collective_timeout: int = 300  # JAX_IPU_COLLECTIVE_TIMEOUT, seconds
    # field -> the flag that set it ("TF_POPLAR_FLAGS --ipu_model_tiles=8"), for error messages
    sources: Mapping[str, str] = dataclasses.field(default_factory=dict, compare=False)

    def client_options(self) -> Dict[str, Any]:
        """Options for the PJRT client (``PJRT_Client_Create``)."""
        options: Dict[str, Any] = {"version": self.version, "num_tiles": self.num_tiles,
                                   "num_devices": self.num_devices, **self.model_parameters()}
        if self.host_threads:
            options["host_threads"] = self.host_threads
        return options

    def model_parameters(self) -> Dict[str, int]:
        """The IPU Model parameters set to other than the chip's own, by field (the client option of that name)."""
        return {field: getattr(self, field) for field in MODEL_PARAMETERS if getattr(self, field)}


# The IPU Model's parameters besides its version and tiles: IpuConfig field (the emulator's name for it: client
# option, ipu::ModelParameters, the profile's target) -> Poplar's IPUModel member. Each is the JAX option
# jax_ipu_model_<field> (JAX_IPU_MODEL_<FIELD>) and TF_POPLAR_FLAGS --ipu_model_<field>; a whole number, 0 for the
# chip's own. The emulator's device table checks each against its range when the backend is created.
MODEL_PARAMETERS = {
    "memory_bytes_per_tile": "memoryBytesPerTile",
    "num_worker_contexts": "numWorkerContexts",
    "tile_clock_frequency": "tileClockFrequency",  # Hz
    "exchange_bytes_per_cycle": "exchangeBytesPerCycle",  # per tile
    "global_sync_cycles": "globalSyncCycles",
}


# Environment flags of the emulator's lowering: its CompileOptions field each sets (ipu::CompileOptions).
LOWERING_FLAGS = {"JAX_IPU_FUSION": "fusion", "JAX_IPU_EXCHANGE_PER_ELEMENT": "exchange_per_element",
                  "JAX_IPU_EMULATE_64BIT": "emulate_64bit"}
# poplin's availableMemoryProportion for every matmul and convolution (CompileOptions::available_memory_proportion):
# the share of a tile a plan may use for temporaries, in (0, 1]; unset: poplin's default, 0.6.
MEMORY_PROPORTION_FLAG = "JAX_IPU_AVAILABLE_MEMORY_PROPORTION"
# poplin's partialsType for every matmul and convolution of f16 operands and result (CompileOptions::half_partials):
# "float" (Poplar's default) or "half".
PARTIALS_TYPE_FLAG = "JAX_IPU_PARTIALS_TYPE"
PARTIALS_TYPES = ("float", "half")


def lowering_options(environ: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """The emulator's compile options for the next compile (ipu::CompileOptions, passed with each program): the
    lowering flags, POPLAR_ENGINE_OPTIONS' debug.allowOutOfMemory, and the matmuls' availableMemoryProportion and
    partialsType, read from the environment each time so that they can change between compiles. Raises ValueError
    naming a malformed flag."""
    from jax_ipu import engine_options

    env = os.environ if environ is None else environ
    options: Dict[str, Any] = dict(_lowering_flags(env))
    options["allow_out_of_memory"] = engine_options.engine_options(env).allow_out_of_memory
    text = env.get(MEMORY_PROPORTION_FLAG, "").strip()
    if text:
        options["available_memory_proportion"] = parse_memory_proportion(text, f"{MEMORY_PROPORTION_FLAG}={text}")
    text = env.get(PARTIALS_TYPE_FLAG, "").strip()
    if text and parse_partials_type(text, f"{PARTIALS_TYPE_FLAG}={text}") == "half":
        options["partials_type"] = "half"
    return options


def _lowering_flags(env: Mapping[str, str]) -> Dict[str, bool]:
    """The lowering flags' fields, parsed (defaults: fused, counted in runs, 64-bit types emulated)."""
    options = {"fusion": True, "exchange_per_element": False, "emulate_64bit": True}
    for name, field in LOWERING_FLAGS.items():
        text = env.get(name, "")
        if text.strip():
            options[field] = parse_bool(text, f"{name}={text}")
    return options


# ------------------------------------------------------------------------------------------- value parsers


def parse_bool(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"{where}: invalid boolean {value!r}; use one of yes/true/t/1 or no/false/f/0")


def parse_memory_proportion(value: Any, where: str) -> float:
    """poplin's availableMemoryProportion: a decimal in (0, 1]."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if not 0 < number <= 1:
        raise ValueError(f"{where}: availableMemoryProportion must be a decimal between 0 (exclusive) and 1, as "
                         f"Poplar's matmul and convolution option (default 0.6)")
    return number


def parse_partials_type(value: Any, where: str) -> str:
    """poplin's partialsType: "float" or "half" (any case)."""
    text = str(value).strip().lower()
    if text not in PARTIALS_TYPES:
        raise ValueError(f"{where}: partialsType must be 'float' or 'half', as Poplar's matmul and convolution option "
                         f"(default 'float')")
    return text


def parse_timeout(value: Any, where: str) -> int:
    number = _parse_int(value, where)
    if not 1 <= number <= 86400:
        raise ValueError(f"{where}: a timeout of {number} s is outside 1..86400 (seconds)")
    return number


def parse_tiles(value: Any, where: str) -> int:
    number = _parse_int(value, where)
    if number < 1:
        raise ValueError(f"{where}: the IPU Model needs at least 1 tile, got {number}")
    if number > MAX_TILES:  # refused here, as given: the native side takes a 32-bit count
        raise ValueError(f"{where}: {value!r} tiles is more than any IPU has (an ipu2 has 1472); "
                         "set it to at most the chip's tile count")
    return number


MAX_TILES = 2**31 - 1  # beyond this no count reaches the emulator unchanged; its own check names the chip's limit


def parse_model_parameter(value: Any, where: str) -> int:
    """A whole number of at least 0 (0: the chip's own), also written as a float: 1.85e9 for a clock."""
    try:
        number = _parse_int(value, where)
    except ValueError:
        try:
            real = float(str(value).strip())
        except ValueError:
            raise ValueError(f"{where}: expected a whole number, got {value!r}") from None
        if not real.is_integer():
            raise ValueError(f"{where}: expected a whole number, got {value!r}") from None
        number = int(real)
    if not 0 <= number < 2**63:
        raise ValueError(f"{where}: expected 0 (the chip's own) or a positive number, got {value!r}")
    return number


def parse_device_count(value: Any, where: str) -> int:
    number = _parse_int(value, where)
    if number == -1:  # Graphcore's spelling for "all": the IPU Model has one unless told otherwise
        return 1
    if not 1 <= number <= MAX_DEVICES:
        raise ValueError(f"{where}: device count must be -1 (all) or 1..{MAX_DEVICES}, got {number}")
    return number


def parse_version(value: Any, where: str) -> str:
    text = str(value).strip().lower()
    if not text.isalnum():
        raise ValueError(f"{where}: expected an IPU version name such as ipu2, got {value!r}")
    return text


def parse_host_threads(value: Any, where: str) -> int:
    number = _parse_int(value, where)
    if not 1 <= number <= MAX_HOST_THREADS:
        raise ValueError(f"{where}: host threads must be 1..{MAX_HOST_THREADS}, got {number}")
    return number


def parse_visible_devices(value: Any, where: str) -> Optional[Tuple[int, ...]]:
    text = str(value).strip()
    if text in ("", "all"):
        return None
    try:
        ids = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise ValueError(f"{where}: expected a comma-separated list of device ids like '0,1', got {value!r}") from None
    if any(i < 0 for i in ids) or len(set(ids)) != len(ids):
        raise ValueError(f"{where}: device ids must be distinct and non-negative, got {value!r}")
    return ids


def _parse_int(value: Any, where: str) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{where}: expected an integer, got {value!r}")
    if isinstance(value, int):
        return value
    try:
        return int(str(value).strip())
    except ValueError:
        raise ValueError(f"{where}: expected an integer, got {value!r}") from None


# ------------------------------------------------------------------------------------------- TF_POPLAR_FLAGS

# flag -> (IpuConfig field or None if accepted and ignored, parser)
_POPLAR_FLAGS: Dict[str, Tuple[Optional[str], Callable[[Any, str], Any]]] = {
    "use_ipu_model": ("use_model", parse_bool),
    "ipu_model_tiles": ("num_tiles", parse_tiles),
    "ipu_model_version": ("version", parse_version),
    "executable_cache_path": ("executable_cache_path", lambda v, where: str(v)),
    "show_progress_bar": ("show_progress_bar", parse_bool),
    "max_compilation_threads": (None, lambda v, where: _parse_int(v, where)),
    "max_infeed_threads": (None, lambda v, where: _parse_int(v, where)),
    **{f"ipu_model_{field}": (field, parse_model_parameter) for field in MODEL_PARAMETERS},
}
# Flags whose bare form (no "=value") means true.
_BARE_TRUE = ("use_ipu_model", "show_progress_bar")


def parse_tf_poplar_flags(text: str) -> Dict[str, Tuple[Any, str]]:
    """Parses ``TF_POPLAR_FLAGS`` into IpuConfig fields, each with the flag that set it.

    Unknown flags are logged and ignored: users carry flags for Poplar features the emulator has no use for.
    """
    fields: Dict[str, Tuple[Any, str]] = {}
    try:
        words = shlex.split(text)
    except ValueError as e:
        raise ValueError(f"TF_POPLAR_FLAGS={text!r}: {e}") from None
    for word in words:
        if not word.startswith("--"):
            raise ValueError(f"TF_POPLAR_FLAGS: {word!r} is not a flag; flags look like --ipu_model_tiles=8")
        name, has_value, value = word[2:].partition("=")
        where = f"TF_POPLAR_FLAGS {word}"
        if name not in _POPLAR_FLAGS:
            logger.warning("TF_POPLAR_FLAGS: ignoring %s, which the ipu emulator does not use", word)
            continue
        if not has_value:
            if name not in _BARE_TRUE:
                raise ValueError(f"{where}: needs a value, e.g. --{name}=...")
            value = "true"
        field, parse = _POPLAR_FLAGS[name]
        parsed = parse(value, where)
        if field is not None:
            fields[field] = (parsed, where)
    return fields


# ------------------------------------------------------------------------------------------- JAX options

# JAX option -> (IpuConfig field, parser). Defined as jax config options by the plugin; read from the
# environment in upper case whether or not jax is imported.
JAX_OPTIONS: Dict[str, Tuple[str, Callable[[Any, str], Any]]] = {
    "jax_ipu_use_model": ("use_model", parse_bool),
    "jax_ipu_model_num_tiles": ("num_tiles", parse_tiles),
    "jax_ipu_model_version": ("version", parse_version),
    "jax_ipu_device_count": ("num_devices", parse_device_count),
    "jax_ipu_visible_devices": ("visible_devices", parse_visible_devices),
    **{f"jax_ipu_model_{field}": (field, parse_model_parameter) for field in MODEL_PARAMETERS},
}


def read(jax_options: Optional[Mapping[str, Any]] = None, environ: Optional[Mapping[str, str]] = None) -> IpuConfig:
    """Reads the configuration. ``jax_options`` holds values set through ``jax.config`` (None: unset)."""
    env = os.environ if environ is None else environ
    fields: Dict[str, Any] = {}
    sources: Dict[str, str] = {}

    legacy_count = env.get("XLA_IPU_PLATFORM_DEVICE_COUNT")
    if legacy_count:
        where = f"XLA_IPU_PLATFORM_DEVICE_COUNT={legacy_count}"
        fields["num_devices"] = parse_device_count(legacy_count, where)
        sources["num_devices"] = where
    poplar_flags = env.get("TF_POPLAR_FLAGS", "")
    if poplar_flags.strip():
        for field, (value, where) in parse_tf_poplar_flags(poplar_flags).items():
            fields[field] = value
            sources[field] = where

    # The client's thread pool (a client option); the lowering flags are read at each compile (lowering_options),
    # and checked here too, so that a typo fails when the backend is created, naming the flag.
    host_threads = env.get("JAX_IPU_HOST_THREADS", "")
    if host_threads.strip():
        where = f"JAX_IPU_HOST_THREADS={host_threads}"
        fields["host_threads"] = parse_host_threads(host_threads, where)
        sources["host_threads"] = where

    _lowering_flags(env)

    for option, (field, parse) in JAX_OPTIONS.items():
        env_value = env.get(option.upper())
        value = (jax_options or {}).get(option)
        if value is None or value == env_value:  # jax seeds its options from the environment
            if env_value is None or env_value == "":
                continue
            value, where = env_value, f"{option.upper()}={env_value}"
        else:
            where = f"jax option {option}={value!r}"
        fields[field] = parse(value, where)
        sources[field] = where

    timeout = env.get("JAX_IPU_COLLECTIVE_TIMEOUT", "")
    if timeout.strip():
        where = f"JAX_IPU_COLLECTIVE_TIMEOUT={timeout}"
        fields["collective_timeout"] = parse_timeout(timeout, where)
        sources["collective_timeout"] = where

    config = IpuConfig(sources=sources, **fields)
    if not config.use_model:
        raise ValueError(
            "JAX_IPU_USE_MODEL / --use_ipu_model is false, but this build has no IPU hardware support: the ipu "
            "backend always runs on the IPU Model emulator. Unset the flag or set it to true."
        )
    if config.visible_devices is not None:
        missing = [i for i in config.visible_devices if i >= config.num_devices]
        if missing:
            raise ValueError(
                f"JAX_IPU_VISIBLE_DEVICES names device {missing[0]} but only {config.num_devices} IPU(s) exist; "
                "raise JAX_IPU_DEVICE_COUNT"
            )
        config = dataclasses.replace(config, num_devices=len(config.visible_devices))
    return config
