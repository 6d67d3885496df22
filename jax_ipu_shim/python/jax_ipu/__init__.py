"""JAX on Graphcore IPUs, run on a tile-level IPU Model emulator.

Use it through jax: ``jax.devices("ipu")``, ``jax.jit(f, backend="ipu")``. The backend registers itself via the
``jax_plugins`` entry point (or namespace); importing this package does not import jax. With the current series,
``import jax_ipu`` after ``import jax`` defines the ``jax_ipu_*`` options for ``jax.config.update``.

- ``jax_ipu.config``: the flags (``TF_POPLAR_FLAGS``, ``JAX_IPU_*``) and how they are read;
- ``jax_ipu.emulator``: the emulator on its own, driven with IPU programs and numpy arrays;
- ``jax_ipu.compiler``: the StableHLO front end;
- ``jax_ipu.last_execution()``: the cycle estimate and per-step trace of the most recent program run on an ipu
  device; ``jax_ipu.runtime``: device statistics (host and IPU-Link transfers) and ``format_trace()``;
- ``jax_ipu.tile``, ``jax_ipu.streams``: tile-level programming; host data streams for on-device loops;
- ``jax_ipu.backend``: the backend inside jax (the plugin, infeed/outfeed, host callbacks such as
  ``jax.debug.print``, ``pure_callback`` and ``io_callback``), installed when jax starts the ipu backend.
"""

from __future__ import annotations

import sys as _sys

from jax_ipu.runtime import last_execution

__all__ = ["last_execution"]


def _define_options_if_jax_is_imported() -> None:
    """The current series imports plugins lazily, at the first use of a backend: ``import jax_ipu`` after
    ``import jax`` defines the ``jax_ipu_*`` options so that ``jax.config.update`` can set them before that first
    use (jax 0.4.13 defines them while it imports itself)."""
    jax = _sys.modules.get("jax")
    if jax is None or not hasattr(jax, "config"):
        return
    from jax_ipu.backend import plugin

    plugin._define_jax_options()


_define_options_if_jax_is_imported()
