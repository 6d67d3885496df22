#include "ipu/memory.h"

#include <algorithm>

#include "ipu/cost_model.h"

namespace ipu {

namespace {

template <class F>
void forEachTile(const Slot& s, F f) {
  const int64_t eb = static_cast<int64_t>(dtypeSize(s.type.dtype));
  for (int t = 0; t < s.mapping.tilesUsed(); ++t) f(t, s.mapping.elementsOn(t) * eb);
}

}  // namespace

MemoryReport computeMemory(const Graph& g) {
  const size_t tiles = static_cast<size_t>(g.device.num_tiles);
  std::vector<int64_t> base(tiles, 0), cur(tiles, 0), peak(tiles, 0), trans(tiles, 0);
  for (size_t t = 0; t < tiles; ++t)
    base[t] = g.vertex_bytes[t] + static_cast<int64_t>(g.codelets[t].size()) * cost::kCodeletCodeBytes;

  const size_t steps = g.steps.size();
  std::vector<std::vector<int>> adds(steps + 1), removes(steps + 1);
  for (size_t i = 0; i < g.slots.size(); ++i) {
    const Slot& s = g.slots[i];
    if (s.always_live) {
      forEachTile(s, [&](int t, int64_t b) { base[static_cast<size_t>(t)] += b; });
      continue;
    }
    if (s.def < 0) continue;  // never written (e.g. unused staging)
    int64_t last = std::max(s.def, s.last_use);
    for (const auto& loop : g.loops)  // inner loops first, so extensions compose outwards
      if (s.def < loop.first && last >= loop.first && last <= loop.second) last = loop.second;
    adds[static_cast<size_t>(std::min<int64_t>(s.def, static_cast<int64_t>(steps)))].push_back(static_cast<int>(i));
    removes[static_cast<size_t>(std::min<int64_t>(last, static_cast<int64_t>(steps)))].push_back(static_cast<int>(i));
  }
  std::vector<int> touched;
  for (size_t step = 0; step <= steps; ++step) {
    touched.clear();
    for (int i : adds[step])
      forEachTile(g.slots[static_cast<size_t>(i)], [&](int t, int64_t b) {
        cur[static_cast<size_t>(t)] += b;
        touched.push_back(t);
      });
    if (step < steps)
      for (const auto& tb : g.steps[step].transient) {
        trans[static_cast<size_t>(tb.first)] += tb.second;
        touched.push_back(tb.first);
      }
    for (int t : touched) {
      const size_t u = static_cast<size_t>(t);
      peak[u] = std::max(peak[u], cur[u] + trans[u]);
    }
    for (int t : touched) trans[static_cast<size_t>(t)] = 0;
    for (int i : removes[step])
      forEachTile(g.slots[static_cast<size_t>(i)], [&](int t, int64_t b) { cur[static_cast<size_t>(t)] -= b; });
  }

  MemoryReport r;
  r.bytes_per_tile.resize(tiles);
  for (size_t t = 0; t < tiles; ++t) {
    r.bytes_per_tile[t] = base[t] + peak[t];
    r.total_bytes += r.bytes_per_tile[t];
    if (r.bytes_per_tile[t] > r.worst_bytes) {
      r.worst_bytes = r.bytes_per_tile[t];
      r.worst_tile = static_cast<int>(t);
    }
  }
  return r;
}

void checkMemory(const MemoryReport& r, const DeviceDescription& device) {
  if (r.worst_bytes <= device.bytes_per_tile) return;
  const int64_t ideal_tiles = (r.total_bytes + device.bytes_per_tile - 1) / device.bytes_per_tile;
  throw Error(ErrorCode::ResourceExhausted,
              "Out of memory on tile " + std::to_string(r.worst_tile) + ": " + std::to_string(r.worst_bytes) +
                  " bytes used but tiles only have " + std::to_string(device.bytes_per_tile) + " bytes of memory\n" +
                  "Hint: the program needs " + std::to_string(r.total_bytes) + " bytes over " +
                  std::to_string(device.num_tiles) + " tile(s) of an " + device.version +
                  " (at least " + std::to_string(ideal_tiles) + " tiles' worth). Use more tiles (JAX_IPU_MODEL_NUM_TILES or " +
                  "TF_POPLAR_FLAGS=--ipu_model_tiles=N, up to " + std::to_string(device.tiles_per_chip) +
                  "), or a smaller batch.");
}

}  // namespace ipu
