"""The ipu backend's entry point for jax's plugin discovery (``jax_plugins`` is a namespace package)."""

from jax_ipu.backend.plugin import initialize

__all__ = ["initialize"]
