"""The program format: the "jax-ipu-program" v1 document the front end writes and the emulator reads
(jax_ipu_shim/README.md), as JSON text or in the binary container; its one writer (encode) and its readers for tests
and tools (decode, container_parts)."""

from __future__ import annotations

import base64
import json
import struct
from typing import Any, Dict, List, Tuple

from .errors import CompileError

FORMAT = "jax-ipu-program"
VERSION = 1

# The binary container the plugin hands to the emulator (parsed by program.cc): this magic, the u64 size of the JSON
# document, the document, the u64 number of blobs, then each blob as a u64 size and its raw bytes (little-endian).
CONTAINER_MAGIC = b"JIPUPRG1"
# Constants of at least this many bytes travel as blobs; smaller ones stay inline as base64 (readable, and what a
# reduce body's scalar constants are read as).
BLOB_MIN_BYTES = 64


class Blob(bytes):
    """A constant's raw bytes in the program document: base64 in the JSON text, a blob in the binary container."""


def encode(program: Dict[str, Any], binary: bool) -> Any:
    """The one writer of the program format: JSON text (str), or the binary container (bytes) when ``binary``."""
    blobs: List[bytes] = []

    def blob(value: Any) -> Any:
        if not isinstance(value, Blob):
            raise TypeError(f"{type(value).__name__} is not part of the program format")
        if binary and len(value) >= BLOB_MIN_BYTES:
            blobs.append(value)
            return {"blob": len(blobs) - 1}
        return base64.b64encode(value).decode("ascii")

    text = json.dumps(program, separators=(",", ":"), default=blob)
    if not binary:
        return text
    parts = [struct.pack("<Q", len(blobs))]
    for data in blobs:
        parts += [struct.pack("<Q", len(data)), data]
    return container(text, b"".join(parts))


def container_parts(data: bytes) -> Tuple[Dict[str, Any], bytes]:
    """The JSON document of a binary container (blobs as {"blob": i}) and the blob section that follows it."""
    if bytes(data[:len(CONTAINER_MAGIC)]) != CONTAINER_MAGIC:
        raise CompileError("not a binary program container (its magic is missing)")
    (size,) = struct.unpack_from("<Q", data, 8)
    return json.loads(bytes(data[16:16 + size]).decode("utf-8")), bytes(data[16 + size:])


def container(document: str, blob_section: bytes) -> bytes:
    """The binary container of a document's JSON text whose blobs are ``blob_section`` (see container_parts)."""
    text = document.encode("utf-8")
    return CONTAINER_MAGIC + struct.pack("<Q", len(text)) + text + blob_section


def decode(data: Any) -> Dict[str, Any]:
    """The program document of JSON text or a binary container, blobs back in base64 (for tests and tools)."""
    if not bytes(data[:len(CONTAINER_MAGIC)]) == CONTAINER_MAGIC:
        return json.loads(data)
    program, data = container_parts(bytes(data))
    pos = 0
    (count,) = struct.unpack_from("<Q", data, pos)
    pos += 8
    blobs = []
    for _ in range(count):
        (length,) = struct.unpack_from("<Q", data, pos)
        blobs.append(base64.b64encode(data[pos + 8:pos + 8 + length]).decode("ascii"))
        pos += 8 + length
    return _inline_blobs(program, blobs)


def _inline_blobs(value: Any, blobs: List[str]) -> Any:
    """``value`` with each ``{"blob": i}`` replaced by blob i's base64 text."""
    if isinstance(value, dict):
        if list(value) == ["blob"]:
            return blobs[value["blob"]]
        return {k: _inline_blobs(v, blobs) for k, v in value.items()}
    if isinstance(value, list):
        return [_inline_blobs(v, blobs) for v in value]
    return value
