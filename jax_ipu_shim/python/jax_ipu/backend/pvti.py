"""The host timeline: ``PVTI_OPTIONS='{"enable":"true","directory":"DIR"}'``.

Graphcore's libpvti recorded what the host did (compile, load, execute, copies) for PopVision's System Analyser.
Here the timeline is written as Chrome trace-event JSON (``DIR/jax_ipu_<pid>.pvti.json``), which Perfetto
(ui.perfetto.dev) and chrome://tracing open. It shows, per host thread:

- ``Compile``: jax tracing, lowering to StableHLO and the backend compile (from ``jax.monitoring``), and within
  it our front end and the profile report;
- ``Execute``: every run of a program on the emulator, on the device worker thread that ran it, with its replica
  and cycle estimate (recorded by the emulator, ``JaxIpu_TraceTake``);
- ``Callback``: host callbacks (``jax.debug.print``, ``pure_callback``, ``io_callback``), inside their run;
- ``Stream``: ``transfer_to_infeed`` / ``transfer_from_outfeed``.

The file is written at process exit and by ``flush()``. When PVTI is off nothing is recorded: ``span`` is a
shared no-op and the emulator checks one flag per run.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import logging
import os
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Optional

from jax_ipu import _native
from jax_ipu import engine_options as _options

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_events: List[Dict[str, Any]] = []
_enabled = False
_directory = "./"
_installed = False
_null = contextlib.nullcontext()

# jax.monitoring duration events -> the span's name on the timeline.
_JAX_EVENTS = {
    "/jax/core/compile/jaxpr_trace_duration": "jax trace",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower to StableHLO",
    "/jax/core/compile/backend_compile_duration": "backend compile",
}


def enabled() -> bool:
    return _enabled


def install() -> None:
    """Reads ``PVTI_OPTIONS`` (a bad value raises ValueError naming it) and, if enabled, starts recording.
    Called by the plugin when the ipu backend is created."""
    global _enabled, _directory, _installed
    options = _options.pvti_options()
    if not options.enable or _installed:
        return
    _installed = True
    _enabled = True
    _directory = options.directory
    lib = _native.load()
    lib.JaxIpu_TraceEnable(1)
    from jax import monitoring

    monitoring.register_event_duration_secs_listener(_on_jax_duration)
    _wrap_host_io()
    atexit.register(_at_exit)


def _now_us() -> float:
    return time.monotonic_ns() / 1000.0


def _add(cat: str, name: str, start_us: float, dur_us: float, args: Optional[Dict[str, Any]] = None,
         tid: Optional[int] = None) -> None:
    event = {"name": name, "cat": cat, "ph": "X", "ts": start_us, "dur": max(0.0, dur_us), "pid": os.getpid(),
             "tid": threading.get_native_id() if tid is None else tid}
    if args:
        event["args"] = args
    with _lock:
        _events.append(event)


def span(cat: str, name: str, **args: Any):
    """A context manager recording a span (no-op when PVTI is off)."""
    return _span(cat, name, args) if _enabled else _null


@contextlib.contextmanager
def _span(cat: str, name: str, args: Dict[str, Any]) -> Iterator[None]:
    start = _now_us()
    try:
        yield
    finally:
        _add(cat, name, start, _now_us() - start, args)


def _on_jax_duration(event: str, duration: float, **_: Any) -> None:  # the current series adds fun_name=...
    name = _JAX_EVENTS.get(event)
    if name is not None:
        end = _now_us()
        _add("Compile", name, end - duration * 1e6, duration * 1e6)


def _traced(cat: str, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with _span(cat, name, {}):
            return function(*args, **kwargs)

    wrapper._jax_ipu_pvti = True  # type: ignore[attr-defined]
    return wrapper


def _wrap_host_io() -> None:
    """Spans around the host side of streams and callbacks (their Python entry points)."""
    from jax._src.lib import xla_client

    from jax_ipu.backend import callbacks

    for method, name in (("transfer_to_infeed", "infeed"), ("transfer_from_outfeed", "outfeed")):
        original = getattr(xla_client.Device, method, None)
        if original is not None and not getattr(original, "_jax_ipu_pvti", False):
            try:
                setattr(xla_client.Device, method, _traced("Stream", name, original))
            except (AttributeError, TypeError):  # pragma: no cover - a sealed Device class
                logger.debug("PVTI: cannot trace %s", method)
    register = callbacks.register
    if not getattr(register, "_jax_ipu_pvti", False):
        def traced_register(callback: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
            label = getattr(callback, "__name__", None) or type(callback).__name__
            return register(_traced("Callback", f"host callback {label}", callback), *args, **kwargs)

        traced_register._jax_ipu_pvti = True  # type: ignore[attr-defined]
        callbacks.register = traced_register


def _native_spans() -> List[Dict[str, Any]]:
    lib = _native.load()
    text = _native.take_string(lib, lib.JaxIpu_TraceTake())
    if not text:
        return []
    data = json.loads(text)
    if data.get("dropped"):
        logger.warning("PVTI: %d emulator spans were dropped (the in-memory bound was reached)", data["dropped"])
    return [{"name": s["name"], "cat": s["cat"], "ph": "X", "ts": s["start_ns"] / 1000.0,
             "dur": max(0.0, (s["end_ns"] - s["start_ns"]) / 1000.0), "pid": os.getpid(), "tid": s["tid"],
             "args": s["args"]} for s in data.get("spans", [])]


def flush() -> Optional[str]:
    """Writes everything recorded so far to the timeline file (rewritten whole each time); returns its path."""
    if not _enabled:
        return None
    events = _native_spans()
    with _lock:
        _events.extend(events)
        snapshot = list(_events)
    pid = os.getpid()
    names = {e["tid"] for e in snapshot}
    meta: List[Dict[str, Any]] = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                                   "args": {"name": f"jax-ipu (pid {pid})"}}]
    main = threading.main_thread().native_id
    execute_threads = {e["tid"] for e in snapshot if e["cat"] == "Execute"}
    for tid in sorted(names):
        label = "main thread" if tid == main else ("IPU device worker" if tid in execute_threads else "host thread")
        meta.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": f"{label} {tid}"}})
    os.makedirs(_directory, exist_ok=True)
    path = os.path.join(_directory, f"jax_ipu_{pid}.pvti.json")
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"traceEvents": meta + sorted(snapshot, key=lambda e: e["ts"]), "displayTimeUnit": "ms",
                   "otherData": {"generator": "jax-ipu PVTI", "clock": "CLOCK_MONOTONIC"}}, f)
    os.replace(tmp, path)
    return path


def _at_exit() -> None:
    try:
        synchronize = getattr(_native.load(), "JaxIpu_Synchronize", None)
        if synchronize is not None:
            synchronize()
        flush()
    except Exception as error:  # noqa: BLE001 - interpreter shutdown: say so, never raise
        logger.warning("PVTI: could not write the host timeline: %s", error)
