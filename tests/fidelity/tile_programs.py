"""Published tile-level measurements, reproduced with ``jax_ipu.tile`` for `nox -s fidelity`.

    python tile_programs.py CHIP

Runs in a process of its own, since the emulated chip is chosen when the ipu backend starts, and prints one JSON
object: each measurement's figure on CHIP.
- ``add_f32_<n>``: TessellateIPU's tile API notebook (graphcore-research/tessellate-ipu @3ab241f,
  notebooks/01-tessellate-ipu-tile-api-basics.ipynb) as it is written there: ``lhs`` sharded one row per tile,
  ``rhs`` replicated on those tiles, ``ipu_cycle_count``, ``tile_map(lax.add_p, lhs, rhs)``, ``ipu_cycle_count``;
  the figure is the largest difference of the two reads over the tiles (the notebook's ``cycle_count_to_timing``),
  in cycles. Rows of 5 x 2 f32 on 3 tiles, and of 1,024 f32 on 4 tiles.
- ``exchange_congestion``: Jia et al.'s on-chip latency test: 8-byte messages between tiles, once with two tiles
  swapping theirs while the others are silent (no load) and once with every tile sending to the next at the same
  time (full load); the figure is the exchange's cycles under full load over those with no load.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict


def measure(chip: str) -> Dict[str, float]:
    os.environ["JAX_IPU_MODEL_VERSION"] = chip
    os.environ["JAX_PLATFORMS"] = "ipu"
    import jax
    import numpy as np
    from jax import lax

    from jax_ipu import runtime, tile

    def broadcast_add(lhs: Any, rhs: Any) -> Any:
        tiles = tuple(range(len(lhs)))
        lhs = tile.tile_put_sharded(lhs, tiles)
        rhs = tile.tile_put_replicated(rhs, tiles)
        lhs, rhs, start = tile.ipu_cycle_count(lhs, rhs)
        out = tile.tile_map(lax.add_p, lhs, rhs)
        out, end = tile.ipu_cycle_count(out)
        return out.array, start.array, end.array

    add = jax.jit(broadcast_add)  # JAX_PLATFORMS=ipu: on the ipu
    rng = np.random.default_rng(0)
    found: Dict[str, float] = {}
    for name, lhs_shape in (("add_f32_10", (3, 5, 2)), ("add_f32_1024", (4, 1024))):
        _, start, end = add(rng.random(lhs_shape, np.float32), rng.random(lhs_shape[1:], np.float32))
        found[name] = float(np.max(tile.cycles(end).astype(np.int64) - tile.cycles(start).astype(np.int64)))

    tiles = tuple(range(64))

    def send(x: Any, order: Any) -> Any:
        x = tile.tile_put_sharded(x, tiles)
        return tile.tile_put_sharded(x.array[np.asarray(order)], tiles).array

    def exchange_cycles(order: Any) -> int:
        jax.block_until_ready(jax.jit(send, static_argnums=1)(np.ones((len(tiles), 2), np.float32), tuple(order)))
        cycles = runtime.last_execution()["steps"][-1]["exchange_cycles"]
        assert cycles > 0, "the rows did not move over the exchange"
        return cycles

    silent = list(tiles)
    silent[0], silent[1] = 1, 0
    found["exchange_congestion"] = exchange_cycles(tuple(np.roll(tiles, 1).tolist())) / exchange_cycles(tuple(silent))
    return found


if __name__ == "__main__":
    print(json.dumps(measure(sys.argv[1])))
