"""A protobuf reader for the tests, written from the wire format alone (no generated code, no library): what jax
writes (pprof profiles, TSL's XSpace traces) is checked without trusting the code that wrote it."""

from __future__ import annotations

import struct
from typing import Any, Dict, Iterator, List, Tuple


def varint(data: bytes, i: int) -> Tuple[int, int]:
    value = shift = 0
    while True:
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def fields(data: bytes) -> Iterator[Tuple[int, Any]]:
    """(field number, value) of a message: ints for varints, bytes for the rest."""
    i = 0
    while i < len(data):
        key, i = varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = varint(data, i)
        elif wire == 2:
            size, i = varint(data, i)
            value, i = data[i:i + size], i + size
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            value, i = data[i:i + width], i + width
        else:
            raise AssertionError(f"wire type {wire}: not a protobuf message")
        yield number, value


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
