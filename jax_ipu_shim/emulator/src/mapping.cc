#include "ipu/mapping.h"

namespace ipu {

TileMapping TileMapping::linear(int64_t num_elements, size_t element_bytes, int num_tiles) {
  constexpr int64_t kMinBytesPerTile = 128;  // poputil::mapTensorLinearly's default
  constexpr int64_t kVectorBytes = 8;        // one 64-bit vector: the grain
  const int64_t elem = std::max<int64_t>(1, static_cast<int64_t>(element_bytes));  // tokens have 0 bytes
  const int64_t grain = std::max<int64_t>(1, kVectorBytes / elem);
  const int64_t min_grains = std::max<int64_t>(1, (kMinBytesPerTile + elem * grain - 1) / (elem * grain));
  const int64_t grains = (num_elements + grain - 1) / grain;
  const int64_t grains_per_tile = std::max(min_grains, (grains + num_tiles - 1) / std::max(1, num_tiles));
  TileMapping m;
  m.num_elements = num_elements;
  m.per_tile = std::max<int64_t>(1, grains_per_tile * grain);
  return m;
}

}  // namespace ipu
