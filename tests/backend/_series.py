"""What differs between the series for the backend tests (imported like _conformance: the folder is on sys.path)."""

from __future__ import annotations

import pytest
from jaxlib import version as _jaxlib_version

JAXLIB = tuple(int(p) for p in _jaxlib_version.__version__.split("+")[0].split(".")[:3])
# jax/jaxlib 0.5 and newer: no infeed/outfeed, pmap as a jit over a mesh, plugins imported at first use.
CURRENT_SERIES = JAXLIB >= (0, 5)

# lax.infeed, lax.outfeed and Device.transfer_to_infeed/from_outfeed exist in jax 0.4.13 only.
needs_feeds = pytest.mark.skipif(
    CURRENT_SERIES, reason="infeed/outfeed are gone from the current series; io_callback streams replace them "
                           "(README, examples/training_loop_with_streams.py)")


def only_jax_0_4_13(reason: str) -> pytest.MarkDecorator:
    """A test of jax 0.4.13 behaviour the current series does not have (the reason says what changed)."""
    return pytest.mark.skipif(CURRENT_SERIES, reason=f"jax 0.4.13 only: {reason}")
