#include "ipu/mapping.h"

#include <algorithm>
#include <tuple>
#include <unordered_set>

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

TileMapping TileMapping::onTiles(int64_t num_elements, std::vector<int32_t> tiles) {
  TileMapping m;
  m.num_elements = num_elements;
  m.per_tile = std::max<int64_t>(1, num_elements / std::max<int64_t>(1, static_cast<int64_t>(tiles.size())));
  m.tiles = std::move(tiles);
  return m;
}

int64_t countInRange(int64_t a, int64_t step, int64_t count, int64_t lo, int64_t hi) {
  if (count <= 0 || lo >= hi) return 0;
  if (step == 0) return a >= lo && a < hi ? count : 0;
  if (step < 0) {
    a += (count - 1) * step;
    step = -step;
  }
  auto ceilDiv = [](int64_t x, int64_t y) { return x >= 0 ? (x + y - 1) / y : -((-x) / y); };  // y > 0
  const int64_t k0 = std::max<int64_t>(0, ceilDiv(lo - a, step)), k1 = std::min(count, ceilDiv(hi - a, step));
  return std::max<int64_t>(0, k1 - k0);
}

StridedMap::StridedMap(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, int64_t base,
                       bool per_element)
    : base_(base) {
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!dims_.empty() && steps_.back() == strides[d] * shape[d]) {  // the outer dim steps exactly over this one
      dims_.back() *= shape[d];
      steps_.back() = strides[d];
    } else {
      dims_.push_back(shape[d]);
      steps_.push_back(strides[d]);
    }
  }
  std::vector<std::pair<int64_t, int64_t>> moving;  // (|stride|, size) of the dims with a stride
  for (size_t d = 0; d < dims_.size(); ++d)
    if (steps_[d] != 0) moving.emplace_back(steps_[d] < 0 ? -steps_[d] : steps_[d], dims_[d]);
  std::sort(moving.begin(), moving.end());
  int64_t reach = 0;  // the farthest the smaller strides get
  for (const auto& m : moving) {
    if (m.first <= reach) rows_ = false;
    reach += m.first * (m.second - 1);
  }
  rows_ = rows_ && !per_element;  // per element: one run per distinct element
  // Rows alias only through a stride-0 dim other than the innermost (the rows' own dim).
  for (size_t d = 0; d + 1 < dims_.size(); ++d)
    if (steps_[d] == 0) aliases_ = true;
}

int64_t StridedMap::image(int64_t i) const {
  int64_t out = base_;
  for (size_t d = dims_.size(); d-- > 0;) {
    out += (i % dims_[d]) * steps_[d];
    i /= dims_[d];
  }
  return out;
}

void StridedMap::forEachRun(int64_t b, int64_t e, const std::function<void(int64_t, int64_t, int64_t)>& run) const {
  if (b >= e) return;
  if (!rows_) {
    std::unordered_set<int64_t> seen;
    for (int64_t i = b; i < e; ++i)
      if (seen.insert(image(i)).second) run(image(i), 1, 1);
    return;
  }
  // Rows of the innermost coalesced dim: two rows read the same elements exactly when their outer coordinates differ
  // only in stride-0 dims, i.e. when their first images are equal; their k ranges are then merged.
  const size_t rank = dims_.size();
  const int64_t len = rank ? dims_[rank - 1] : 1, step = rank ? steps_[rank - 1] : 0;
  // Each row's first image, walking the outer coordinates as an odometer (no division per row).
  const size_t outer = rank ? rank - 1 : 0;
  const int64_t r0 = b / len;
  std::vector<int64_t> coord(outer);
  for (size_t d = outer, r = static_cast<size_t>(r0); d-- > 0;) {
    coord[d] = static_cast<int64_t>(r) % dims_[d];
    r /= static_cast<size_t>(dims_[d]);
  }
  int64_t first = image(r0 * len);
  auto nextRow = [&] {
    for (size_t d = outer; d-- > 0;) {
      first += steps_[d];
      if (++coord[d] < dims_[d]) return;
      first -= steps_[d] * dims_[d];
      coord[d] = 0;
    }
  };
  if (!aliases_) {  // every row reads elements of its own: its one interval, in row order (as merging gives)
    for (int64_t row = r0; row * len < e; ++row, nextRow()) {
      const int64_t kb = std::max<int64_t>(0, b - row * len), ke = std::min(len, e - row * len);
      if (step == 0) run(first, 0, 1);
      else run(first + kb * step, step, ke - kb);
    }
    return;
  }
  // Rows that alias: each row's (image, k interval), a row of the same image as the one before merged at once (a
  // broadcast's rows), then sorted by image and merged. The sums the callers take do not depend on the order of the
  // runs.
  std::vector<Piece>& pieces = pieces_;  // kept between calls: a map is asked once per tile
  pieces.clear();
  auto add = [&](int64_t kb, int64_t ke) {
    Piece* last = pieces.empty() ? nullptr : &pieces.back();
    if (last && last->first == first && kb <= last->ke && last->kb <= ke) {
      last->kb = std::min(last->kb, kb);
      last->ke = std::max(last->ke, ke);
    } else {
      pieces.push_back({first, kb, ke});
    }
  };
  // When the dim just outside the rows is a broadcast (stride 0), its rows share one image: those between a
  // block's first and last row are whole rows, added at once.
  const bool broadcast_rows = steps_[outer - 1] == 0;
  const int64_t row_end = (e + len - 1) / len;
  for (int64_t row = r0; row < row_end; ++row, nextRow()) {
    add(std::max<int64_t>(0, b - row * len), std::min(len, e - row * len));
    if (!broadcast_rows) continue;
    const int64_t k = std::min(dims_[outer - 1] - 1 - coord[outer - 1], row_end - 1 - row);  // rows left in block
    if (k >= 2) {
      add(0, len);
      row += k - 1;
      coord[outer - 1] += k - 1;
    }
  }
  std::sort(pieces.begin(), pieces.end());
  for (size_t i = 0; i < pieces.size();) {
    const int64_t at = pieces[i].first;
    if (step == 0) {  // the row reads one element, however many times
      run(at, 0, 1);
      while (i < pieces.size() && pieces[i].first == at) ++i;
      continue;
    }
    int64_t kb = pieces[i].kb, ke = pieces[i].ke;
    for (++i; i < pieces.size() && pieces[i].first == at; ++i) {
      if (pieces[i].kb > ke) {
        run(at + kb * step, step, ke - kb);
        kb = pieces[i].kb;
      }
      ke = std::max(ke, pieces[i].ke);
    }
    run(at + kb * step, step, ke - kb);
  }
}

}  // namespace ipu
