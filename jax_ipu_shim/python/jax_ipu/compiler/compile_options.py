"""Reads the serialized ``xla.CompileOptionsProto`` jaxlib passes to PJRT_Client_Compile, without jaxlib.

Both jaxlib series send the same proto (0.12's is larger, with fields we skip), so one reader of protobuf's wire
format serves both: no bindings that differ by version, and no parsing of printed objects. The field numbers are
xla's (``xla/pjrt/proto/compile_options.proto``, ``xla/xla.proto``, ``xla/xla_data.proto``):

- CompileOptionsProto: executable_build_options = 3, env_option_overrides = 7 (map<string, OptionOverrideProto>);
- ExecutableBuildOptionsProto: num_replicas = 4, num_partitions = 5, device_assignment = 9;
- DeviceAssignmentProto: replica_count = 1, computation_count = 2, computation_devices = 3
  { replica_device_ids = 1 };
- OptionOverrideProto: string_field = 1, bool_field = 2, int_field = 3, double_field = 4.
"""

from __future__ import annotations

import struct
from typing import Any, Dict, Iterator, List, NamedTuple, Tuple, Union

Value = Union[int, bytes]


class CompileOptions(NamedTuple):
    num_replicas: int
    num_partitions: int
    # Device ids of the device assignment, computation by computation, replica by replica (empty: none given).
    device_ids: List[int]
    env_option_overrides: List[Tuple[str, Any]]


def _varint(data: bytes, pos: int) -> Tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("compile options: a varint runs past the end")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes) -> Iterator[Tuple[int, int, Value]]:
    """(field number, wire type, value) of one message: ints for varints and fixed widths, bytes for the rest."""
    for number, wire, value, _, _ in _spans(data):
        yield number, wire, value


def _spans(data: bytes) -> Iterator[Tuple[int, int, Value, int, int]]:
    """As _fields, with where each field's bytes (key and value) start and end in ``data``."""
    pos = 0
    while pos < len(data):
        start = pos
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        value: Value
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 1:
            value, pos = struct.unpack_from("<q", data, pos)[0], pos + 8
        elif wire == 2:
            size, pos = _varint(data, pos)
            value, pos = data[pos:pos + size], pos + size
        elif wire == 5:
            value, pos = struct.unpack_from("<i", data, pos)[0], pos + 4
        else:
            raise ValueError(f"compile options: unsupported wire type {wire} (field {number})")
        yield number, wire, value, start, pos


def without_fields(data: bytes, numbers: Tuple[int, ...]) -> bytes:
    """One serialized message without its fields of these numbers (the others' bytes as they are)."""
    return b"".join(data[start:end] for number, _, _, start, end in _spans(data) if number not in numbers)


def messages(data: bytes, number: int) -> List[bytes]:
    """The values of the bytes/message field ``number`` of one serialized message, in order (a repeated field)."""
    return [bytes(value) for n, wire, value in _fields(data) if n == number and wire == 2]  # type: ignore[arg-type]


def field(data: bytes, number: int) -> bytes:
    """The last value of the bytes/message field ``number`` of one serialized message (b"" if absent)."""
    found = messages(data, number)
    return found[-1] if found else b""


def integer(data: bytes, number: int) -> int:
    """The last value of the varint field ``number`` of one serialized message (0, protobuf's default, if absent)."""
    return next((int(v) for n, w, v in reversed(list(_fields(data))) if n == number and w == 0), 0)  # type: ignore


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _packed_ints(wire: int, value: Value) -> List[int]:
    if wire == 0:
        return [_signed(int(value))]  # type: ignore[arg-type]
    out, pos, data = [], 0, bytes(value)  # type: ignore[arg-type]
    while pos < len(data):
        v, pos = _varint(data, pos)
        out.append(_signed(v))
    return out


def _override(data: bytes) -> Any:
    for number, _, value in _fields(data):
        if number == 1:
            return bytes(value).decode("utf-8", errors="replace")  # type: ignore[arg-type]
        if number == 2:
            return bool(value)
        if number == 3:
            return _signed(int(value))  # type: ignore[arg-type]
        if number == 4:
            return struct.unpack("<d", struct.pack("<q", int(value)))[0]  # type: ignore[arg-type]
    return None


def parse(data: bytes) -> CompileOptions:
    """The options we use from a serialized CompileOptionsProto (empty bytes: the defaults)."""
    replicas = partitions = 1
    device_ids: List[int] = []
    overrides: List[Tuple[str, Any]] = []
    for number, _, value in _fields(bytes(data)):
        if number == 3:
            for field, _wire, v in _fields(value):  # type: ignore[arg-type]
                if field == 4:
                    replicas = max(1, int(v))  # type: ignore[arg-type]
                elif field == 5:
                    partitions = max(1, int(v))  # type: ignore[arg-type]
                elif field == 9:
                    for f, _, computation in _fields(v):  # type: ignore[arg-type]
                        if f == 3:
                            for g, w, ids in _fields(computation):  # type: ignore[arg-type]
                                if g == 1:
                                    device_ids += _packed_ints(w, ids)
        elif number == 7:
            entry: Dict[int, Value] = {f: v for f, _, v in _fields(value)}  # type: ignore[arg-type]
            key = bytes(entry.get(1, b"")).decode("utf-8", errors="replace")  # type: ignore[arg-type]
            overrides.append((key, _override(bytes(entry.get(2, b"")))))  # type: ignore[arg-type]
    return CompileOptions(replicas, partitions, device_ids, overrides)
