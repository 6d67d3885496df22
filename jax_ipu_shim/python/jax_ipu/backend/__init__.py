"""The ipu backend inside jax: what connects jax to the compiler (compiler/) and the native library (_native.py).

- ``plugin``: registers the backend with jax and answers jax's compiles (the executable cache, the front end);
- ``callbacks``, ``feeds``, ``multihost``: host callbacks, infeed/outfeed, the IPUs of several processes;
- ``linalg``, ``rng``: lowerings of jax primitives the ipu computes in its own way;
- ``interrupts``: Ctrl-C in every wait; ``progress``, ``pvti``, ``profiler``: the compile progress bar, the host
  timeline and jax.profiler's IPU planes.

Nothing below this layer (the compiler, the report, the emulator) imports it; the public modules above it
(``jax_ipu.tile``, ``jax_ipu.streams``...) and jax's ``jax_plugins.ipu`` entry point do."""
