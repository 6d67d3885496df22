"""``POPLAR_ENGINE_OPTIONS`` and ``PVTI_OPTIONS``: the JSON option sets Poplar users write, with Poplar's names.

    POPLAR_ENGINE_OPTIONS='{"autoReport.all":"true","autoReport.directory":"./reports"}'
    POPLAR_ENGINE_OPTIONS='{"autoReport.outputGraphProfile":"true","debug.allowOutOfMemory":"true"}'
    PVTI_OPTIONS='{"enable":"true","directory":"./reports"}'

Engine options the emulator acts on:

- ``autoReport.all``: sets ``autoReport.outputGraphProfile`` and ``autoReport.outputExecutionProfile`` (the
  more specific option wins when both are given, as in Poplar);
- ``autoReport.outputGraphProfile``: a report (``jax_ipu.report``) written when each program is compiled;
- ``autoReport.outputExecutionProfile``: the report also holds the cycles of the program's most recent run;
- ``autoReport.directory`` (default ``./``): one folder per compiled program in it;
- ``debug.allowOutOfMemory``: a program that does not fit in tile memory compiles anyway (its report shows which
  tiles overflow).

Other Poplar engine options that users carry (``autoReport.outputDebugInfo``, ``debug.instrument``, ``opt.*``,
...) are accepted and have no effect. Anything else raises ``ValueError`` in Poplar's words ("Unrecognised
option"), as does a value that is not one the option takes. Nothing here imports jax.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from typing import Any, Dict, Mapping, Optional, Tuple

logger = logging.getLogger(__name__)

_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")

# Poplar engine options that exist but have no meaning on the emulator: accepted and ignored.
_IGNORED = (
    "autoReport.outputDebugInfo", "autoReport.outputArchive", "autoReport.outputSerializedGraph",
    "autoReport.outputLoweredVars", "autoReport.executionProfileProgramRunCount", "autoReport.streamAtEachRun",
    "debug.instrument", "debug.instrumentCompute", "debug.instrumentControlFlow", "debug.instrumentExternalExchange",
    "debug.computeInstrumentationLevel", "debug.retainDebugInformation", "debug.verify", "debug.runtimeVerify",
    "profiler.format", "profiler.includeFlopEstimates", "target.syncReplicasIndependently",
    "target.deterministicWorkers", "target.hostSyncTimeout", "opt.internalExchangeOptimisationTarget",
    "opt.maxCompilationThreads", "opt.enableMultiAccessCopies", "exchange.streamBufferOverlap",
)


@dataclasses.dataclass(frozen=True)
class EngineOptions:
    """``POPLAR_ENGINE_OPTIONS`` as the emulator uses them."""

    output_graph_profile: bool = False
    output_execution_profile: bool = False
    directory: str = "./"
    allow_out_of_memory: bool = False
    raw: Mapping[str, str] = dataclasses.field(default_factory=dict, compare=False)

    @property
    def reports(self) -> bool:
        return self.output_graph_profile or self.output_execution_profile


@dataclasses.dataclass(frozen=True)
class PvtiOptions:
    """``PVTI_OPTIONS``: the host timeline (``jax_ipu.backend.pvti``)."""

    enable: bool = False
    directory: str = "./"


def _load(text: str, variable: str) -> Dict[str, Any]:
    try:
        value = json.loads(text)
    except RecursionError:  # thousands of nested brackets: Python's parser gives up before finding the error
        raise ValueError(f"{variable}: not valid option JSON (nested too deeply, {len(text)} characters: "
                         f"{text[:40]!r}...); write it like "
                         "'{\"autoReport.all\":\"true\",\"autoReport.directory\":\"./reports\"}'") from None
    except ValueError as e:
        raise ValueError(f"{variable}: not valid JSON ({e}); write it like "
                         "'{\"autoReport.all\":\"true\",\"autoReport.directory\":\"./reports\"}'") from None
    if not isinstance(value, dict):
        raise ValueError(f"{variable}: expected a JSON object of option names to values, got {text!r}")
    return value


def _bool(name: str, value: Any, variable: str) -> bool:
    text = str(value).strip().lower() if not isinstance(value, bool) else str(value).lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"{variable}: Invalid value '{value}' for option '{name}'. Valid values are: true, false")


def _directory(name: str, value: Any, variable: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{variable}: Invalid value '{value}' for option '{name}': expected a directory path")
    return value


def parse_engine_options(text: str, variable: str = "POPLAR_ENGINE_OPTIONS") -> EngineOptions:
    options = _load(text, variable) if text.strip() else {}
    fields: Dict[str, Any] = {}
    report_all: Optional[bool] = None
    for name, value in options.items():
        if name == "autoReport.all":
            report_all = _bool(name, value, variable)
        elif name == "autoReport.outputGraphProfile":
            fields["output_graph_profile"] = _bool(name, value, variable)
        elif name == "autoReport.outputExecutionProfile":
            fields["output_execution_profile"] = _bool(name, value, variable)
        elif name == "autoReport.directory":
            fields["directory"] = _directory(name, value, variable)
        elif name == "debug.allowOutOfMemory":
            fields["allow_out_of_memory"] = _bool(name, value, variable)
        elif name in _IGNORED or name.startswith("opt."):
            logger.debug("%s: %s has no effect on the IPU emulator", variable, name)
        else:
            raise ValueError(f"{variable}: Unrecognised option '{name}'. The IPU emulator's engine options are "
                             "autoReport.all, autoReport.outputGraphProfile, autoReport.outputExecutionProfile, "
                             "autoReport.directory and debug.allowOutOfMemory")
    if report_all is not None:
        fields.setdefault("output_graph_profile", report_all)
        fields.setdefault("output_execution_profile", report_all)
    return EngineOptions(raw={str(k): str(v) for k, v in options.items()}, **fields)


def parse_pvti_options(text: str, variable: str = "PVTI_OPTIONS") -> PvtiOptions:
    options = _load(text, variable) if text.strip() else {}
    fields: Dict[str, Any] = {}
    for name, value in options.items():
        if name == "enable":
            fields["enable"] = _bool(name, value, variable)
        elif name == "directory":
            fields["directory"] = _directory(name, value, variable)
        elif name == "channels":  # libpvti's channel selection: the emulator has one host timeline
            continue
        else:
            raise ValueError(f"{variable}: Unrecognised option '{name}'. PVTI_OPTIONS takes enable and directory")
    return PvtiOptions(**fields)


_cache: Dict[Tuple[str, str], Any] = {}


def _parsed(variable: str, parse: Any, environ: Optional[Mapping[str, str]]) -> Any:
    """``parse`` of the variable's value, once per distinct value."""
    text = (os.environ if environ is None else environ).get(variable, "")
    key = (variable, text)
    if key not in _cache:
        _cache[key] = parse(text)
    return _cache[key]


def engine_options(environ: Optional[Mapping[str, str]] = None) -> EngineOptions:
    """The engine options in force (parsed once per distinct value of the variable)."""
    return _parsed("POPLAR_ENGINE_OPTIONS", parse_engine_options, environ)


def pvti_options(environ: Optional[Mapping[str, str]] = None) -> PvtiOptions:
    return _parsed("PVTI_OPTIONS", parse_pvti_options, environ)
