"""The compiler front end: a StableHLO module from jax in, an IPU program ("jax-ipu-program" v1 JSON) out.

See jax_ipu_shim/README.md for the program format. Modules: ``attributes`` (reading MLIR attributes across jaxlib
versions), ``types`` (dtypes and constants), ``ops`` (the op table), ``program_format`` (the document and its binary
container: encode, decode), ``translate`` (the walk).
"""

from __future__ import annotations

from .errors import CompileError
from .program_format import decode
from .translate import compile_to_binary, compile_to_program

__all__ = ["CompileError", "compile_to_binary", "compile_to_program", "decode"]
