// Tile mappings: which tile holds which elements of a tensor.
#pragma once

#include <algorithm>
#include <cstdint>

namespace ipu {

// A linear tile mapping, as poputil::mapTensorLinearly makes: the flattened tensor is cut into runs of
// `per_tile` elements (a multiple of the grain size), tile 0 taking the first run, tile 1 the next, and so on.
// When the count does not divide evenly the last used tile holds fewer elements and later tiles hold none.
struct TileMapping {
  int64_t num_elements = 0;
  int64_t per_tile = 1;

  // grain = the vector width of the type (64 bits), at least 128 bytes per tile (poputil's defaults), so that
  // small tensors stay on few tiles instead of spreading a few elements over every tile.
  static TileMapping linear(int64_t num_elements, size_t element_bytes, int num_tiles);

  int tilesUsed() const { return num_elements == 0 ? 0 : static_cast<int>((num_elements + per_tile - 1) / per_tile); }
  int64_t begin(int tile) const { return std::min(num_elements, per_tile * tile); }
  int64_t end(int tile) const { return std::min(num_elements, per_tile * (static_cast<int64_t>(tile) + 1)); }
  int64_t elementsOn(int tile) const { return end(tile) - begin(tile); }
  int tileOf(int64_t element) const { return static_cast<int>(element / per_tile); }
  // How many of the elements [b, e) live on `tile`.
  int64_t overlap(int tile, int64_t b, int64_t e) const {
    return std::max<int64_t>(0, std::min(e, end(tile)) - std::max(b, begin(tile)));
  }
};

}  // namespace ipu
