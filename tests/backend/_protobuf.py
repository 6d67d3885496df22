"""Reading what jax writes (pprof profiles, TSL's XSpace traces) in the tests: the messages' meaning is read here,
from the .proto files' field numbers, over jax_ipu's reader of the wire format (which jaxlib's own files, the host's
planes and pprof's, exercise as much as ours)."""

from __future__ import annotations

import struct
from typing import Any, Dict, List

from jax_ipu.backend.profiler import fields, varint

__all__ = ["fields", "packed", "xspace_planes"]


def packed(data: bytes) -> List[int]:
    out, i = [], 0
    while i < len(data):
        value, i = varint(data, i)
        out.append(value)
    return out


def xspace_planes(data: bytes) -> Dict[str, Dict[str, List[Dict[str, Any]]]]:
    """tsl.profiler.XSpace: {plane name: {line name: [{name, start_ns, duration_ps, stats}]}}."""
    planes: Dict[str, Dict[str, List[Dict[str, Any]]]] = {}
    for number, plane in fields(data):
        if number != 1:
            continue
        items = list(fields(plane))
        meta = {n: {} for n in (4, 5)}
        for n, v in items:
            if n in (4, 5):
                entry = dict(fields(v))
                meta[n][entry.get(1, 0)] = dict(fields(entry.get(2, b""))).get(2, b"").decode()
        name = next((v.decode() for n, v in items if n == 2), "")
        lines = planes.setdefault(name, {})
        for n, raw in items:
            if n != 3:
                continue
            line = dict((k, v) for k, v in fields(raw) if k != 4)
            events = lines.setdefault(line.get(2, b"").decode(), [])
            for k, raw_event in fields(raw):
                if k != 4:
                    continue
                event = {"stats": {}, "offset_ps": 0, "duration_ps": 0}
                for en, ev in fields(raw_event):
                    if en == 1:
                        event["name"] = meta[4].get(ev, "")
                    elif en in (2, 3):
                        event["offset_ps" if en == 2 else "duration_ps"] = ev
                    elif en == 4:
                        stat = dict(fields(ev))
                        key = meta[5].get(stat.get(1), "")
                        value = stat.get(4, stat.get(3))
                        if 2 in stat:
                            value = struct.unpack("<d", stat[2])[0]
                        elif 5 in stat:
                            value = stat[5].decode()
                        event["stats"][key] = value
                event["start_ns"] = line.get(3, 0) + event["offset_ps"] / 1000
                events.append(event)
    return planes
