// jax_ipu.tile's ops (ipu/tile.h): tile_put places an array's rows on chosen tiles, cycle_count reads the tiles'
// cycle counters. Free functions over the Lowerer's public graph-building calls.
#include "ipu/tile.h"

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>

#include "ipu/dtype.h"

namespace ipu {

namespace {

bool sameType(const TensorType& a, const TensorType& b) { return a.dtype == b.dtype && a.shape == b.shape; }

// "0,5,9" -> {0, 5, 9}: distinct tiles of the device, at least one.
std::vector<int32_t> parseTiles(const Lowerer& L, const OpContext& ctx) {
  const std::string text = attrString(*ctx.op, "backend_config", "");
  std::vector<int32_t> tiles;
  std::set<int32_t> seen;
  const char* p = text.c_str();
  while (*p) {
    char* end = nullptr;
    errno = 0;
    const long long t = std::strtoll(p, &end, 10);
    if (end == p || errno == ERANGE || (*end != ',' && *end != '\0'))
      L.invalid(ctx, "backend_config must be the tiles as numbers separated by commas, not '" + text + "'");
    if (t < 0 || t >= L.device().num_tiles)
      L.invalid(ctx, "tile " + std::to_string(t) + " is out of range: the IPU has " +
                         std::to_string(L.device().num_tiles) + " tiles (0 to " +
                         std::to_string(L.device().num_tiles - 1) + ")");
    if (!seen.insert(static_cast<int32_t>(t)).second)
      L.invalid(ctx, "tile " + std::to_string(t) + " is named twice: each row has a tile of its own");
    tiles.push_back(static_cast<int32_t>(t));
    p = *end ? end + 1 : end;
  }
  if (tiles.empty()) L.invalid(ctx, "no tiles given (backend_config is empty)");
  return tiles;
}

std::vector<int> tilePut(Lowerer& L, OpContext& ctx) {
  if (ctx.in.size() != 1 || ctx.out_types.size() != 1 || !sameType(ctx.in_types[0], ctx.out_types[0]))
    L.invalid(ctx, "tile_put takes one array and returns it, of the same type");
  const std::vector<int32_t> tiles = parseTiles(L, ctx);
  const TensorType& type = ctx.out_types[0];
  if (type.shape.empty() || type.shape[0] != static_cast<int64_t>(tiles.size()))
    L.invalid(ctx, "a tile-sharded array has one row per tile: " + std::to_string(tiles.size()) +
                       " tiles, but the array's first dimension is " +
                       (type.shape.empty() ? std::string("missing (a scalar)") : std::to_string(type.shape[0])));
  const TileMapping placed = TileMapping::onTiles(type.numElements(), tiles);
  const int in = ctx.in[0];
  if (L.graph().slots[static_cast<size_t>(in)].mapping.sameAs(placed)) return {in};  // already there: nothing moves
  const int out = L.newSlot(type);
  L.graph().slots[static_cast<size_t>(out)].mapping = placed;
  L.emitCopy(ctx.seq, {{in, out}}, "tile_put");
  return {out};
}

// Writes the cycles the run has taken before this step into a u32[tiles, 2] (every tile's counter: the tiles are in
// step after a sync).
class CycleCountKernel : public Kernel {
 public:
  CycleCountKernel(int slot, int64_t tiles) : slot_(slot), tiles_(tiles) {}
  void prepare(RunState& s) const override {
    const uint64_t now = s.profile.total_cycles;
    const uint32_t words[2] = {static_cast<uint32_t>(now), static_cast<uint32_t>(now >> 32)};
    uint32_t* out = s.at<uint32_t>(slot_);
    for (int64_t t = 0; t < tiles_; ++t) std::memcpy(out + 2 * t, words, sizeof words);
  }
  void compute(RunState&, int64_t, int64_t) const override {}

 private:
  int slot_;
  int64_t tiles_;
};

std::vector<int> cycleCount(Lowerer& L, OpContext& ctx) {
  const std::vector<int32_t> tiles = parseTiles(L, ctx);
  const size_t n = ctx.in.size();
  if (ctx.out_types.size() != n + 1) L.invalid(ctx, "cycle_count returns its operands and the counts");
  for (size_t i = 0; i < n; ++i)
    if (!sameType(ctx.in_types[i], ctx.out_types[i]))
      L.invalid(ctx, "result " + std::to_string(i) + " must be operand " + std::to_string(i) + ", of the same type");
  const TensorType& counts = ctx.out_types[n];
  if (counts.dtype != DType::U32 || counts.shape != std::vector<int64_t>{static_cast<int64_t>(tiles.size()), 2})
    L.invalid(ctx, "the counts are a u32[" + std::to_string(tiles.size()) + ", 2] (a low and a high word per tile)");
  const int out = L.newSlot(counts);
  L.graph().slots[static_cast<size_t>(out)].mapping = TileMapping::onTiles(counts.numElements(), tiles);
  // Reading $COUNT_L/$COUNT_U costs nothing the model counts (as poplar::cycleCount's stamps): no superstep.
  L.emitExecute(ctx, std::make_unique<CycleCountKernel>(out, static_cast<int64_t>(tiles.size())), {}, {out}, 0);
  std::vector<int> results(ctx.in.begin(), ctx.in.end());
  results.push_back(out);
  return results;
}

}  // namespace

bool isTileTarget(const std::string& target) { return target == kTilePutTarget || target == kCycleCountTarget; }

std::vector<int> lowerTileOp(Lowerer& lowerer, OpContext& ctx, const std::string& target) {
  return target == kTilePutTarget ? tilePut(lowerer, ctx) : cycleCount(lowerer, ctx);
}

}  // namespace ipu
