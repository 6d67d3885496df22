"""jax.profiler's traces see the IPUs: a plane per IPU (``/device:CUSTOM:<id>``) with its runs in host time, their
steps in IPU time and the host transfers (what the library records: ``pjrt/profiler.cc``).

jaxlib 0.12 asks the library for them itself, through the PJRT profiler extension: ``jax.profiler.start_trace``,
``trace``, ``start_server`` and TensorBoard's capture see them with no help from here. jaxlib 0.4.13's PJRT API has no
such extension, and its ``ProfilerSession.stop_and_export`` writes the trace files in C++. The closest way in is
that session: :func:`install` wraps jaxlib's ``ProfilerSession`` so that a session also records the IPUs, and once
jaxlib has written ``<log_dir>/plugins/profile/<run>/<host>.xplane.pb`` and ``.trace.json.gz``, their planes are
added to the first (a serialised XSpace takes more planes by appending them) and their events to the second. A
profile taken through ``start_server`` (a remote capture) has no IPU planes on 0.4.13.
"""

from __future__ import annotations

import ctypes
import glob
import gzip
import json
import os
import struct
import time
from typing import Any, Dict, Iterator, List, Tuple

from jax_ipu import _native
from jax_ipu.compiler.compile_options import _fields, _signed, _varint

_PID_BASE = 100000  # trace-viewer process ids of the IPU planes: past the host's and jaxlib's devices'


def install() -> None:
    """Wraps jaxlib 0.4.13's ``ProfilerSession`` (see the module's docstring); the current series needs nothing."""
    from jax_ipu import _jax

    if _jax.is_current_series():
        return
    from jax._src.lib import xla_client

    profiler = xla_client.profiler
    original = profiler.ProfilerSession
    if getattr(original, "_jax_ipu", False):
        return
    profiler.ProfilerSession = _session_class(original)


def _session_class(original: Any) -> Any:
    class ProfilerSession:
        """jaxlib's ProfilerSession, also recording the IPUs (jax_ipu.backend.profiler)."""

        _jax_ipu = True

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            lib = _native.load()
            before = time.time_ns()
            self._session = original(*args, **kwargs)
            self._origin = (before + time.time_ns()) // 2  # TSL's session start: its timestamps' origin
            self._ipu = lib.JaxIpu_ProfileStart()

        def stop_and_export(self, log_dir: str) -> None:
            stopped = time.time()
            self._session.stop_and_export(log_dir)
            xspace = _stop(self._ipu, self._origin)
            self._ipu = None
            if xspace:
                add_planes(str(log_dir), xspace, since=stopped)

        def __del__(self) -> None:
            if getattr(self, "_ipu", None):
                _stop(self._ipu, 0)

    return ProfilerSession


def _stop(session: Any, origin_ns: int) -> bytes:
    lib = _native.load()
    data, size = ctypes.c_void_p(), ctypes.c_size_t()
    if lib.JaxIpu_ProfileStop(session, origin_ns, ctypes.byref(data), ctypes.byref(size)) != 0:
        return b""
    try:
        return ctypes.string_at(data.value, size.value) if data.value and size.value else b""
    finally:
        lib.JaxIpu_FreeString(data)


def add_planes(log_dir: str, xspace: bytes, since: float) -> None:
    """Adds the IPUs' planes (a serialised XSpace of them) to the trace files jaxlib wrote under ``log_dir`` at or
    after ``since`` (the newest run directory)."""
    written = [p for p in glob.glob(os.path.join(log_dir, "plugins", "profile", "*", "*.xplane.pb"))
               if os.path.getmtime(p) >= since - 1]
    if not written:
        return
    xplane = max(written, key=os.path.getmtime)
    with open(xplane, "ab") as f:  # repeated field 1 (planes): appended entries are more planes
        f.write(xspace)
    trace = xplane[:-len(".xplane.pb")] + ".trace.json.gz"
    if os.path.exists(trace):
        with gzip.open(trace, "rt") as f:
            document = json.load(f)
        document.setdefault("traceEvents", []).extend(trace_events(xspace))
        with gzip.open(trace, "wt") as f:
            json.dump(document, f)


# ---------------------------------------------------------------------------------------------- reading XSpace

def fields(data: bytes) -> Iterator[Tuple[int, Any]]:
    """(field number, value) of a serialised protobuf message: an int for a varint, bytes otherwise (a 64-bit
    field's 8 bytes, as a double stat needs them). The wire format is read by compile_options' reader."""
    for number, wire, value in _fields(data):
        if wire in (1, 5):
            value = struct.pack("<q" if wire == 1 else "<i", value)
        yield number, value


varint = _varint  # (value, index after it) of the varint at an index


def planes(xspace: bytes) -> List[Dict[str, Any]]:
    """The planes of a serialised XSpace (tsl/profiler/protobuf/xplane.proto) as dicts: name, id, and lines of
    events with their names, start and duration in ns, and stats (ints, floats, strings)."""
    out = []
    for number, plane in fields(xspace):
        if number != 1:
            continue
        names: Dict[int, str] = {}
        stat_names: Dict[int, str] = {}
        raw_lines: List[bytes] = []
        record: Dict[str, Any] = {"name": "", "id": 0, "lines": []}
        for n, v in fields(plane):
            if n == 1:
                record["id"] = _signed(v)
            elif n == 2:
                record["name"] = v.decode()
            elif n == 3:
                raw_lines.append(v)
            elif n in (4, 5):  # map entries {key, value}: event / stat metadata
                entry = dict(fields(v))
                metadata = dict(fields(entry.get(2, b"")))
                (names if n == 4 else stat_names)[entry.get(1, 0)] = metadata.get(2, b"").decode()
        for raw in raw_lines:
            line: Dict[str, Any] = {"name": "", "timestamp_ns": 0, "events": []}
            for n, v in fields(raw):
                if n == 2:
                    line["name"] = v.decode()
                elif n == 3:
                    line["timestamp_ns"] = _signed(v)
                elif n == 4:
                    event: Dict[str, Any] = {"name": "", "offset_ps": 0, "duration_ps": 0, "stats": {}}
                    for en, ev in fields(v):
                        if en == 1:
                            event["name"] = names.get(ev, "")
                        elif en == 2:
                            event["offset_ps"] = _signed(ev)
                        elif en == 3:
                            event["duration_ps"] = _signed(ev)
                        elif en == 4:
                            stat = dict(fields(ev))
                            key = stat_names.get(stat.get(1, 0), "")
                            if 2 in stat:
                                event["stats"][key] = struct.unpack("<d", stat[2])[0]
                            elif 4 in stat:
                                event["stats"][key] = _signed(stat[4])
                            elif 3 in stat:
                                event["stats"][key] = stat[3]
                            elif 5 in stat:
                                event["stats"][key] = stat[5].decode()
                    event["start_ns"] = line["timestamp_ns"] + event["offset_ps"] / 1000
                    line["events"].append(event)
            record["lines"].append(line)
        out.append(record)
    return out


def trace_events(xspace: bytes) -> List[Dict[str, Any]]:
    """The IPU planes as Chrome trace events (what jaxlib writes in ``*.trace.json.gz``): a process per IPU, a
    thread per line, an ``X`` event per span (microseconds since the session's start)."""
    events: List[Dict[str, Any]] = []
    for plane in planes(xspace):
        pid = _PID_BASE + plane["id"]
        events.append({"ph": "M", "pid": pid, "name": "process_name", "args": {"name": plane["name"]}})
        events.append({"ph": "M", "pid": pid, "name": "process_sort_index", "args": {"sort_index": pid}})
        for tid, line in enumerate(plane["lines"], 1):
            events.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": line["name"]}})
            for e in line["events"]:
                events.append({"ph": "X", "pid": pid, "tid": tid, "ts": e["start_ns"] / 1000,
                               "dur": e["duration_ps"] / 1e6, "name": e["name"], "args": e["stats"]})
    return events
