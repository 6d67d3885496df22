"""The one error the compiler front end raises."""

from __future__ import annotations


class CompileError(ValueError):
    """A module the front end cannot express as an IPU program (the message names the op and its types)."""


def unsupported(mlir_name: str, types: str, why: str = "") -> CompileError:
    detail = f" ({why})" if why else ""
    return CompileError(
        f"{mlir_name} with types {types} is not supported on the ipu backend yet{detail}. "
        "Run this function with backend='cpu', or file an issue naming this op."
    )
