"""A hand-mapped Jacobi stencil with jax_ipu.tile: the 2-D Laplace equation on a grid whose rows are split into
blocks, one block per tile, relaxed by Jacobi sweeps inside one IPU program.

Each sweep gathers every point's four neighbours (north and south cross block edges: the halo rows come from the
neighbouring tiles), places them next to the block they feed with ``tile_put_sharded`` (the exchange is counted),
then averages them per tile with ``tile_map`` of lax primitives, which compute where their operands are. The
boundary rows and columns stay fixed. The tiles' cycle counter times the sweeps on the IPU Model.

With ``--vertex`` the average is a custom vertex instead: a Poplar codelet in C++ (``JACOBI_CODELET`` below),
compiled on first use with zig (``pip install ziglang``) and run once per tile on that tile's block.

    python tile_jacobi_stencil.py [--short] [--vertex] [--tiles 64] [--rows-per-tile 8] [--width 128] [--sweeps 200]

Prints ``RESULT max_abs_error E required 1e-5`` (against the same sweeps in numpy, float64),
``RESULT cycles_per_sweep C`` and ``RESULT exchange_share S`` (the part of the run's cycles spent exchanging).
"""

from __future__ import annotations

import argparse
import os
import sys
from functools import partial

os.environ.setdefault("JAX_PLATFORMS", "cpu,ipu")
os.environ.setdefault("JAX_PLATFORM_NAME", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

import jax_ipu  # noqa: E402
from jax_ipu import tile  # noqa: E402

REQUIRED = 1e-5

# One sweep of a tile's block as a Poplar codelet: each point where `inside` becomes the average of its four
# neighbours (added as the tile_map version adds them), the others keep their value. Its estimate: 3 cycles a point.
JACOBI_CODELET = """
#include <poplar/Vertex.hpp>

class JacobiSweep : public poplar::Vertex {
 public:
  poplar::Input<poplar::Vector<float>> u;
  poplar::Input<poplar::Vector<float>> north;
  poplar::Input<poplar::Vector<float>> south;
  poplar::Input<poplar::Vector<float>> west;
  poplar::Input<poplar::Vector<float>> east;
  poplar::Input<poplar::Vector<bool>> inside;
  poplar::Output<poplar::Vector<float>> out;

  bool compute() {
    for (unsigned i = 0; i < out.size(); ++i)
      out[i] = inside[i] ? ((north[i] + south[i]) + (west[i] + east[i])) * 0.25f : u[i];
    return true;
  }
  std::uint64_t cycles() const { return 20 + 3 * out.size(); }
};
"""


def initial_grid(rows: int, width: int) -> np.ndarray:
    """Zero inside; the top edge hot (a sine bump), the other edges cold."""
    u = np.zeros((rows, width), np.float32)
    u[0] = np.sin(np.linspace(0, np.pi, width)).astype(np.float32)
    return u


def numpy_sweeps(u: np.ndarray, sweeps: int) -> np.ndarray:
    u = u.astype(np.float64)
    for _ in range(sweeps):
        inner = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
        u = u.copy()
        u[1:-1, 1:-1] = inner
    return u


def jacobi(tiles: tuple, rows_per_tile: int, width: int, sweeps: int, vertex: bool = False):
    """The jitted solver: u0 (the whole grid) -> (the grid after `sweeps`, the cycle counts before and after).
    ``vertex``: each sweep's average is the JacobiSweep codelet rather than tile_map of lax primitives."""
    n = len(tiles)
    codelet = tile.vertex(JACOBI_CODELET, "JacobiSweep") if vertex else None
    shape = (n, rows_per_tile, width)
    interior = np.zeros((n * rows_per_tile, width), bool)
    interior[1:-1, 1:-1] = True

    def place(grid):
        return tile.tile_put_sharded(grid.reshape(shape), tiles)

    @partial(jax.jit, backend="ipu")
    def solve(u0):
        quarter = tile.tile_put_replicated(jnp.full((rows_per_tile, width), 0.25, jnp.float32), tiles)
        inside = place(jnp.asarray(interior))

        def sweep(_, u):
            g = u.array.reshape(n * rows_per_tile, width)
            north = jnp.concatenate([g[:1], g[:-1]], 0)  # a block's first row reads the last row of the tile above
            south = jnp.concatenate([g[1:], g[-1:]], 0)
            west = jnp.concatenate([g[:, :1], g[:, :-1]], 1)
            east = jnp.concatenate([g[:, 1:], g[:, -1:]], 1)
            if codelet is not None:
                return tile.tile_map(codelet, u, place(north), place(south), place(west), place(east), inside)
            total = tile.tile_map(lax.add_p, tile.tile_map(lax.add_p, place(north), place(south)),
                                  tile.tile_map(lax.add_p, place(west), place(east)))
            average = tile.tile_map(lax.mul_p, total, quarter)
            return tile.tile_map(lax.select_n_p, inside, u, average)  # the boundary keeps its values

        u, start = tile.ipu_cycle_count(place(u0))
        u = lax.fori_loop(0, sweeps, sweep, u)
        u, end = tile.ipu_cycle_count(u)
        return u.array.reshape(n * rows_per_tile, width), start.array, end.array

    return solve


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--short", action="store_true", help="a small grid and few sweeps (the examples suite)")
    parser.add_argument("--vertex", action="store_true", help="sweep with a custom vertex (a C++ codelet)")
    parser.add_argument("--tiles", type=int, default=64)
    parser.add_argument("--rows-per-tile", type=int, default=8)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--sweeps", type=int, default=200)
    args = parser.parse_args(argv)
    if args.short:
        args.tiles, args.rows_per_tile, args.width, args.sweeps = 16, 4, 32, 40
    tiles = tuple(range(0, 2 * args.tiles, 2))  # every other tile: the placement is ours, not the linear one
    u0 = initial_grid(args.tiles * args.rows_per_tile, args.width)

    solve = jacobi(tiles, args.rows_per_tile, args.width, args.sweeps, args.vertex)
    u, start, end = (np.asarray(v) for v in solve(u0))
    run = jax_ipu.last_execution()
    expected = numpy_sweeps(u0, args.sweeps)
    error = float(np.max(np.abs(u - expected)))
    took = int(tile.cycles(end)[0] - tile.cycles(start)[0])
    print(f"grid {u0.shape[0]}x{u0.shape[1]} on {len(tiles)} tiles ({args.rows_per_tile} rows each), "
          f"{args.sweeps} sweeps{' (a custom vertex)' if args.vertex else ''}")
    print(f"RESULT max_abs_error {error:.3g} required {REQUIRED:g}")
    print(f"RESULT cycles_per_sweep {took // args.sweeps}")
    print(f"RESULT exchange_share {run['exchange_cycles'] / run['total_cycles']:.3f}")
    return 0 if error <= REQUIRED else 1


if __name__ == "__main__":
    sys.exit(main())
