"""JAX on Graphcore IPUs, run on a tile-level IPU Model emulator.

Use it through jax: ``jax.devices("ipu")``, ``jax.jit(f, backend="ipu")``. The backend registers itself via the
``jax_plugins.ipu`` entry point; importing this package does not import jax.

- ``jax_ipu.config``: the flags (``TF_POPLAR_FLAGS``, ``JAX_IPU_*``) and how they are read;
- ``jax_ipu.emulator``: the emulator on its own, driven with IPU programs and numpy arrays;
- ``jax_ipu.compiler``: the StableHLO front end;
- ``jax_ipu.last_execution()``: the cycle estimate and per-step trace of the most recent program run on an ipu
  device; ``jax_ipu.runtime``: device statistics (host and IPU-Link transfers) and ``format_trace()``;
- ``jax_ipu.feeds`` / ``jax_ipu.callbacks``: ``device.transfer_to_infeed`` / ``transfer_from_outfeed`` and host
  callbacks (``jax.debug.print``, ``pure_callback``, ``io_callback``) on ipu devices, installed by the plugin.
"""

from __future__ import annotations

from jax_ipu.runtime import last_execution

__all__ = ["last_execution"]
