"""Host callbacks by position, for the executable cache.

A module jax lowers for the ipu names each host callback by the id jax_ipu.backend.callbacks registered it under
(``stablehlo.custom_call @jax_ipu_host_callback`` with ``backend_config = "<id>"``). Ids are a process's counter:
the same function lowered again (after ``jax.clear_caches()``, or in another process) gets new ones, so a cache
keyed by the module's bytes would miss every time and grow. The cache instead keys, and compiles, the module with
each callback named by its position (``positional``), and binds the positions of the program it gets, compiled or
cached, to the ids of the module being compiled (``bind``): a cached program then calls the callbacks this lowering
registered, as a fresh compile would.
"""

from __future__ import annotations

import json
import re
from typing import Any, List, Tuple

from jax._src.interpreters import mlir as jmlir

from .errors import CompileError
from .ops import CALL_TARGET
from .partitioner import custom_calls
from .program_format import container, container_parts
from .translate import _parse


def positional(module_bytes: bytes) -> Tuple[bytes, List[str]]:
    """(the module with its host callbacks numbered 0, 1, ... in the order of its ops, as text; their ids in that
    order). A module without host callbacks is returned as it is, with no ids."""
    if CALL_TARGET.encode() not in bytes(module_bytes):  # the call target is in bytecode's string table too
        return bytes(module_bytes), []
    from jax._src.lib.mlir import ir

    with jmlir.make_ir_context():
        module = _parse(module_bytes)
        ids: List[str] = []
        for op in custom_calls(module, CALL_TARGET):
            ids.append(ir.StringAttr(op.attributes["backend_config"]).value)
            op.attributes["backend_config"] = ir.StringAttr.get(str(len(ids) - 1))
        # With its source locations (the program's error messages name them), but not the addresses of the
        # callbacks' Python functions, which jax 0.4.13 writes into the names of their locations
        # ("pure_callback[callback=<function ... at 0x7f59968a550> ...]").
        text = module.operation.get_asm(enable_debug_info=True)
        return _ADDRESS.sub(" at 0x0>", text).encode(), ids


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+>")


def bind(program: bytes, ids: List[str]) -> bytes:
    """The binary program with host callback i (as ``positional`` numbered them) calling ``ids[i]``."""
    if not ids:
        return program
    document, blobs = container_parts(program)
    _rename(document, ids)
    return container(json.dumps(document, separators=(",", ":")), blobs)


def _rename(value: Any, ids: List[str]) -> None:
    """Host callback i's ``backend_config`` in ``value`` (a program document or part of one) set to ``ids[i]``."""
    if isinstance(value, dict):
        attrs = value.get("attrs")
        if isinstance(attrs, dict) and attrs.get("call_target_name") == CALL_TARGET:
            position = int(attrs["backend_config"])
            if not 0 <= position < len(ids):
                raise CompileError(f"the cached program calls host callback {position}, but the module has "
                                   f"{len(ids)}")
            attrs["backend_config"] = ids[position]
        for v in value.values():
            _rename(v, ids)
    elif isinstance(value, list):
        for v in value:
            _rename(v, ids)
