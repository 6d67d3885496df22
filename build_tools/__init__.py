"""Build tooling for jax-ipu: pins, downloads, patches, the native library and the wheels (see README.md here)."""
