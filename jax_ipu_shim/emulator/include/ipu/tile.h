// jax_ipu.tile's ops: arrays placed on chosen tiles, and the tiles' cycle counter, as custom calls the jax_ipu
// package writes (python/jax_ipu/tile.py). TessellateIPU's vocabulary: a tile-sharded array's row r lives on tile
// tiles[r]; ops on it compute where it lives (elementwise ops keep their operand's mapping).
#pragma once

#include <string>
#include <vector>

#include "ipu/lowering.h"

namespace ipu {

// Custom call targets. backend_config is the tiles, as decimal numbers separated by commas ("0,5,9"), but for a vertex.
//   jax_ipu_tile_put(x) -> x placed: row r of x (its first dimension has one row per tile) on tiles[r].
//   jax_ipu_cycle_count(xs...) -> (xs..., u32[tiles, 2]): the xs unchanged (they order the read) and, per tile, the
//     cycles the run has taken so far (low word first), as the tiles' $COUNT_L/$COUNT_U read after a sync.
//   jax_ipu_tile_vertex(fields...) -> (fields...): a custom vertex (ipu/codelet_library.h) on each tile, on that
//     tile's rows; backend_config is JSON (tile.cc: tileVertex says what it holds).
constexpr const char* kTilePutTarget = "jax_ipu_tile_put";
constexpr const char* kTileVertexTarget = "jax_ipu_tile_vertex";
constexpr const char* kCycleCountTarget = "jax_ipu_cycle_count";

bool isTileTarget(const std::string& target);
std::vector<int> lowerTileOp(Lowerer& lowerer, OpContext& ctx, const std::string& target);

}  // namespace ipu
