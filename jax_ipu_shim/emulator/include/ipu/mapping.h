// Tile mappings: which tile holds which elements of a tensor.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <tuple>
#include <vector>

namespace ipu {

// A tile mapping: the flattened tensor cut into runs of `per_tile` elements. Linear, as poputil::mapTensorLinearly
// makes (a multiple of the grain size): tile 0 takes the first run, tile 1 the next, and so on; when the count does
// not divide evenly the last used tile holds fewer elements and later tiles hold none. Placed (jax_ipu.tile's
// tile_put): run r lives on tile tiles[r], distinct tiles in any order, the others holding none. Either way a tile
// holds at most one run, so begin(t)..end(t) are its elements; the runs are in element order (runBegin(r)).
struct TileMapping {
  int64_t num_elements = 0;
  int64_t per_tile = 1;
  std::vector<int32_t> tiles;  // placed: each run's tile; empty: linear

  // grain = the vector width of the type (64 bits), at least 128 bytes per tile (poputil's defaults), so that
  // small tensors stay on few tiles instead of spreading a few elements over every tile.
  static TileMapping linear(int64_t num_elements, size_t element_bytes, int num_tiles);
  // `num_elements` in tiles.size() equal runs (a whole number of elements each), run r on tiles[r].
  static TileMapping onTiles(int64_t num_elements, std::vector<int32_t> tiles);

  bool isPlaced() const { return !tiles.empty(); }
  bool sameAs(const TileMapping& o) const {
    return num_elements == o.num_elements && per_tile == o.per_tile && tiles == o.tiles;
  }
  int runs() const { return num_elements == 0 ? 0 : static_cast<int>((num_elements + per_tile - 1) / per_tile); }
  int64_t runBegin(int run) const { return std::min(num_elements, per_tile * run); }
  int64_t runEnd(int run) const { return std::min(num_elements, per_tile * (static_cast<int64_t>(run) + 1)); }
  int tileOfRun(int run) const { return tiles.empty() ? run : tiles[static_cast<size_t>(run)]; }
  // The run on `tile`, or -1.
  int runOn(int tile) const {
    if (tiles.empty()) return tile >= 0 && tile < runs() ? tile : -1;
    for (int r = 0; r < runs(); ++r)
      if (tiles[static_cast<size_t>(r)] == tile) return r;
    return -1;
  }

  // One past the highest tile that holds elements.
  int tilesUsed() const {
    if (tiles.empty()) return runs();
    int top = 0;
    for (int r = 0; r < runs(); ++r) top = std::max(top, tiles[static_cast<size_t>(r)] + 1);
    return top;
  }
  int64_t begin(int tile) const {
    if (tiles.empty()) return std::min(num_elements, per_tile * tile);
    const int r = runOn(tile);
    return r < 0 ? num_elements : runBegin(r);
  }
  int64_t end(int tile) const {
    if (tiles.empty()) return std::min(num_elements, per_tile * (static_cast<int64_t>(tile) + 1));
    const int r = runOn(tile);
    return r < 0 ? num_elements : runEnd(r);
  }
  int64_t elementsOn(int tile) const { return end(tile) - begin(tile); }
  int tileOf(int64_t element) const { return tileOfRun(static_cast<int>(element / per_tile)); }
  // How many of the elements [b, e) live on `tile`.
  int64_t overlap(int tile, int64_t b, int64_t e) const {
    return std::max<int64_t>(0, std::min(e, end(tile)) - std::max(b, begin(tile)));
  }
};

// How many of a + k*step (k in [0, count)) lie in [lo, hi): an arithmetic run's overlap with a tile's interval.
int64_t countInRange(int64_t a, int64_t step, int64_t count, int64_t lo, int64_t hi);

// The index map i -> base + sum_d idx_d(i) * strides[d] over a row-major `shape` (broadcast, transpose, slice, reverse
// read their operand so; a reduce sends each input element to its output so). It answers "which distinct elements
// do the indices [b, e) map to" as arithmetic runs, per row of the coalesced map rather than per element, so that
// exchange and partial-sum accounting cost no more for a 4096x4096 tensor than for a 64x64 one.
class StridedMap {
 public:
  // per_element: count element by element, not in runs (CompileOptions::exchange_per_element, the tests' reference).
  StridedMap(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, int64_t base,
             bool per_element = false);
  // Calls run(first, step, count) for disjoint runs of elements that together are the distinct images of [b, e).
  void forEachRun(int64_t b, int64_t e, const std::function<void(int64_t, int64_t, int64_t)>& run) const;

 private:
  int64_t image(int64_t i) const;
  std::vector<int64_t> dims_, steps_;  // coalesced: size-1 dims dropped, exactly nested dims merged
  int64_t base_ = 0;
  bool rows_ = true;  // only stride-0 dims alias (the moving dims form a mixed radix): rows can be counted by image
  bool aliases_ = false;  // two rows can read the same elements (an outer dim of stride 0): their runs are merged
  // forEachRun's rows of one image: (first image, k interval), sorted to merge the rows that alias.
  struct Piece {
    int64_t first, kb, ke;
    bool operator<(const Piece& o) const { return std::tie(first, kb, ke) < std::tie(o.first, o.kb, o.ke); }
  };
  mutable std::vector<Piece> pieces_;  // scratch of forEachRun (so a map is not shared between threads)
};

}  // namespace ipu
