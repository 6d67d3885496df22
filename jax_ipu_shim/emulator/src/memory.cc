#include "ipu/memory.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "ipu/cost_model.h"
#include "ipu/json.h"

namespace ipu {

namespace {

template <class F>
void forEachTile(const Slot& s, F f) {
  const int64_t eb = static_cast<int64_t>(dtypeSize(s.type.dtype));
  for (int t = 0; t < s.mapping.tilesUsed(); ++t) f(t, s.mapping.elementsOn(t) * eb);
}

size_t align64(size_t n) { return (n + 63) & ~static_cast<size_t>(63); }

// Every Execute node's Node::in_place pairs, depth first; with `overwrites`, its Node::overwrites pair too (the
// pairs tile memory counts in place).
void inPlacePairs(const Node& node, std::vector<std::pair<int, int>>* out, bool overwrites = false) {
  out->insert(out->end(), node.in_place.begin(), node.in_place.end());
  if (overwrites && node.overwrites.first >= 0) out->push_back(node.overwrites);
  for (const auto& c : node.children) inPlacePairs(*c, out, overwrites);
}

}  // namespace

std::pair<int64_t, int64_t> liveRange(const Graph& g, const Slot& s) {
  const int64_t first = s.storage == Slot::Storage::Param ? -1 : s.def;
  int64_t last = std::max(first, s.last_use);
  for (const auto& loop : g.loops)  // inner loops first, so extensions compose outwards
    if (first < loop.first && last >= loop.first && last <= loop.second) last = loop.second;
  return {first, last};
}

namespace {

// The last step a non-always-live slot is live in: its live range's, or the program's end for a donated result
// written into its parameter's variable at the end.
int64_t lastStep(const Graph& g, const Slot& s) {
  return s.donated == Slot::Donated::Copied ? static_cast<int64_t>(g.steps.size()) : liveRange(g, s).second;
}

// Per slot, the operand whose tile memory it takes (-1: none), as Graphcore's in-place finder allows: the step that
// writes the result is the operand's last read and no loop reads the operand again, the operand is a value of the
// program's own (no parameter, constant, result or donated variable), and the result, no result or donated variable
// either, has the operand's type and tile mapping.
std::vector<int> tileMemoryTaken(const Graph& g) {
  std::vector<int> taken(g.slots.size(), -1);
  if (!g.root) return taken;
  std::vector<std::pair<int, int>> pairs;
  inPlacePairs(*g.root, &pairs, /*overwrites=*/true);
  const auto own = [](const Slot& s) {
    return s.storage == Slot::Storage::Arena && !s.always_live && s.donated == Slot::Donated::No && s.def >= 0;
  };
  for (const auto& p : pairs) {
    const Slot &o = g.slots[static_cast<size_t>(p.first)], &r = g.slots[static_cast<size_t>(p.second)];
    if (!own(o) || !own(r) || r.def <= o.def || o.last_use != r.def || liveRange(g, o).second != r.def ||
        o.type.dtype != r.type.dtype || o.type.numBytes() != r.type.numBytes() || !o.mapping.sameAs(r.mapping))
      continue;
    bool ok = true;
    for (const auto& loop : g.loops) ok = ok && !(r.def >= loop.first && r.def <= loop.second && o.def < loop.first);
    if (ok) taken[static_cast<size_t>(p.second)] = p.first;
  }
  return taken;
}

// The slots both memory sweeps count, once each: a variable (always live, not a donated result) into `always` per
// tile; any other written slot added at its first step and removed after its last (`adds`, `removes`: steps + 1
// lists, the last for what is live after the last step). A result that takes its operand's tile memory
// (tileMemoryTaken) is counted from the step after it is written: at that step its bytes are the operand's.
void sweepSlots(const Graph& g, std::vector<int64_t>* always, std::vector<std::vector<int>>* adds,
                std::vector<std::vector<int>>* removes) {
  const int64_t steps = static_cast<int64_t>(g.steps.size());
  adds->assign(static_cast<size_t>(steps) + 1, {});
  removes->assign(static_cast<size_t>(steps) + 1, {});
  const std::vector<int> taken = tileMemoryTaken(g);
  for (size_t i = 0; i < g.slots.size(); ++i) {
    const Slot& s = g.slots[i];
    if (s.donated == Slot::Donated::InPlace) continue;  // the donated parameter's bytes
    if (s.always_live && s.donated == Slot::Donated::No) {
      forEachTile(s, [&](int t, int64_t b) { (*always)[static_cast<size_t>(t)] += b; });
      continue;
    }
    if (s.def < 0) continue;  // never written (e.g. unused staging)
    const int64_t first = std::min(s.def + (taken[i] >= 0 ? 1 : 0), steps), last = std::min(lastStep(g, s), steps);
    if (last < first) continue;  // written in place and never read again
    (*adds)[static_cast<size_t>(first)].push_back(static_cast<int>(i));
    (*removes)[static_cast<size_t>(last)].push_back(static_cast<int>(i));
  }
}

}  // namespace

void markDonatedResults(Graph* g, const std::vector<std::pair<int, int>>& aliases) {
  for (const auto& alias : aliases) {
    if (alias.first < 0 || alias.second < 0 || static_cast<size_t>(alias.first) >= g->param_slots.size() ||
        static_cast<size_t>(alias.second) >= g->result_slots.size())
      continue;
    const int p = g->param_slots[static_cast<size_t>(alias.first)];
    const int r = g->result_slots[static_cast<size_t>(alias.second)];
    Slot& result = g->slots[static_cast<size_t>(r)];
    const Slot& param = g->slots[static_cast<size_t>(p)];
    // A result that is the parameter itself, a constant, or returned twice keeps its own count.
    if (r == p || result.storage != Slot::Storage::Arena || result.def < 0 ||
        std::count(g->result_slots.begin(), g->result_slots.end(), r) != 1)
      continue;
    const bool same_place = result.type.numBytes() == param.type.numBytes() && result.mapping.sameAs(param.mapping);
    result.donated =
        same_place && liveRange(*g, param).second <= result.def ? Slot::Donated::InPlace : Slot::Donated::Copied;
  }
}

MemoryReport computeMemory(const Graph& g) {
  const size_t tiles = static_cast<size_t>(g.device.num_tiles);
  std::vector<int64_t> base(tiles, 0), cur(tiles, 0), peak(tiles, 0), trans(tiles, 0);
  for (size_t t = 0; t < tiles; ++t)
    base[t] = g.vertex_bytes[t] + static_cast<int64_t>(g.codelets[t].size()) * cost::kCodeletCodeBytes;

  const size_t steps = g.steps.size();
  std::vector<std::vector<int>> adds, removes;
  sweepSlots(g, &base, &adds, &removes);
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

namespace {

std::string intArray(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

void treeJson(const Node& n, std::string* out) {
  *out += "{\"type\": \"" + std::string(nodeKindName(n.kind)) + "\", \"id\": " + std::to_string(n.id) +
          ", \"name\": " + json::quote(n.name) + ", \"loc\": " + json::quote(n.loc);
  if (!n.children.empty()) {
    *out += ", \"children\": [";
    for (size_t i = 0; i < n.children.size(); ++i) {
      if (i) *out += ", ";
      treeJson(*n.children[i], out);
    }
    *out += "]";
  }
  *out += "}";
}
}  // namespace


// The same sweep as computeMemory, keeping the categories apart and the bytes live at every step.
std::string profileJson(const Graph& g) {
  const size_t tiles = static_cast<size_t>(g.device.num_tiles), steps = g.steps.size();
  std::vector<int64_t> variables(tiles, 0), vertex(tiles, 0), code(tiles, 0), cur(tiles, 0), trans(tiles, 0),
      peak(tiles, 0), peak_exchange(tiles, 0);
  for (size_t t = 0; t < tiles; ++t) {
    vertex[t] = g.vertex_bytes[t];
    code[t] = static_cast<int64_t>(g.codelets[t].size()) * cost::kCodeletCodeBytes;
  }
  std::vector<std::vector<int>> adds, removes;
  sweepSlots(g, &variables, &adds, &removes);
  int64_t base_total = 0;
  for (size_t t = 0; t < tiles; ++t) base_total += variables[t] + vertex[t] + code[t];
  std::vector<int64_t> live_total, live_max, live_max_tile;  // per step (the last entry: after the last step)
  int64_t cur_total = 0;
  for (size_t step = 0; step <= steps; ++step) {
    for (int i : adds[step])
      forEachTile(g.slots[static_cast<size_t>(i)], [&](int t, int64_t b) {
        cur[static_cast<size_t>(t)] += b;
        cur_total += b;
      });
    int64_t trans_total = 0;
    if (step < steps)
      for (const auto& tb : g.steps[step].transient) {
        trans[static_cast<size_t>(tb.first)] += tb.second;
        trans_total += tb.second;
      }
    int64_t max_bytes = -1, max_tile = 0;
    for (size_t t = 0; t < tiles; ++t) {
      const int64_t live = cur[t] + trans[t];
      if (live > peak[t]) {
        peak[t] = live;
        peak_exchange[t] = trans[t];
      }
      const int64_t on_tile = live + variables[t] + vertex[t] + code[t];
      if (on_tile > max_bytes) {
        max_bytes = on_tile;
        max_tile = static_cast<int64_t>(t);
      }
      trans[t] = 0;
    }
    if (step < steps) {
      live_total.push_back(base_total + cur_total + trans_total);
      live_max.push_back(max_bytes);
      live_max_tile.push_back(max_tile);
    }
    for (int i : removes[step])
      forEachTile(g.slots[static_cast<size_t>(i)], [&](int t, int64_t b) {
        cur[static_cast<size_t>(t)] -= b;
        cur_total -= b;
      });
  }
  std::vector<int64_t> total(tiles);
  for (size_t t = 0; t < tiles; ++t) total[t] = variables[t] + vertex[t] + code[t] + peak[t];
  std::string s = "{\"tiles\": {\"bytes\": " + intArray(total) + ", \"variables\": " + intArray(variables) +
                  ", \"not_always_live\": " + intArray(peak) + ", \"exchange_buffers\": " + intArray(peak_exchange) +
                  ", \"vertex_state\": " + intArray(vertex) + ", \"code\": " + intArray(code) +
                  "}, \"liveness\": {\"bytes\": " + intArray(live_total) +
                  ", \"max_tile_bytes\": " + intArray(live_max) + ", \"max_tile\": " + intArray(live_max_tile) +
                  "}, \"program_tree\": ";
  if (g.root) treeJson(*g.root, &s);
  else s += "null";
  return s + "}";
}

void checkMemory(const MemoryReport& r, const DeviceDescription& device, bool allow_out_of_memory) {
  if (r.worst_bytes <= device.bytes_per_tile || allow_out_of_memory) return;
  const int64_t ideal_tiles = (r.total_bytes + device.bytes_per_tile - 1) / device.bytes_per_tile;
  throw Error(ErrorCode::ResourceExhausted,
              "Out of memory on tile " + std::to_string(r.worst_tile) + ": " + std::to_string(r.worst_bytes) +
                  " bytes used but tiles only have " + std::to_string(device.bytes_per_tile) + " bytes of memory\n" +
                  "Hint: the program needs " + std::to_string(r.total_bytes) + " bytes over " +
                  std::to_string(device.num_tiles) + " tile(s) of an " + device.version + " (at least " +
                  std::to_string(ideal_tiles) + " tiles' worth). Use more tiles (JAX_IPU_MODEL_NUM_TILES or " +
                  "TF_POPLAR_FLAGS=--ipu_model_tiles=N, up to " + std::to_string(device.tiles_per_chip) +
                  "), or a smaller batch.");
}

bool updatesInPlace(const Graph& g, int operand, int result) {
  if (!g.root) return false;
  std::vector<std::pair<int, int>> pairs;
  inPlacePairs(*g.root, &pairs);
  return std::find(pairs.begin(), pairs.end(), std::make_pair(operand, result)) != pairs.end();
}

void shareInPlaceResults(Graph* g) {
  if (!g->root) return;
  std::vector<std::pair<int, int>> pairs;
  inPlacePairs(*g->root, &pairs);
  for (const auto& p : pairs) {
    const Slot& o = g->slots[static_cast<size_t>(p.first)];
    Slot& r = g->slots[static_cast<size_t>(p.second)];
    if (o.storage != Slot::Storage::Arena || r.storage != Slot::Storage::Arena || o.always_live || r.share >= 0 ||
        o.def < 0 || r.def <= o.def || o.type.numBytes() != r.type.numBytes() || o.type.numBytes() == 0)
      continue;
    // The operand's last read is the op itself, and no loop runs the op without redefining the operand first (a
    // loop around the op alone would read the old operand again next iteration; control.cc handles carried values).
    bool ok = o.last_use == r.def && liveRange(*g, o).second == r.def;
    for (const auto& loop : g->loops) ok = ok && !(r.def >= loop.first && r.def <= loop.second && o.def < loop.first);
    if (ok) r.share = p.first;
  }
}

void layoutArena(Graph* g) {
  shareInPlaceResults(g);
  const int64_t end = static_cast<int64_t>(g->steps.size());  // results are read after the last step
  struct Block {
    size_t slot, bytes, offset;
    int64_t first, last;
  };
  // A slot that shares another's bytes (Slot::share, possibly through a chain) is placed with the slot it shares
  // them with, whose block then spans both live ranges.
  auto root = [&](size_t i) {
    while (g->slots[i].share >= 0) i = static_cast<size_t>(g->slots[i].share);
    return i;
  };
  auto rangeOf = [&](const Slot& s) {
    if (s.def < 0) return std::make_pair(int64_t{0}, end);  // no step defines it: bytes of its own for the whole run
    const auto range = liveRange(*g, s);
    return std::make_pair(range.first, s.always_live ? end : range.second);
  };
  std::vector<Block> blocks;
  std::vector<size_t> block_of(g->slots.size(), SIZE_MAX);
  for (size_t i = 0; i < g->slots.size(); ++i) {
    Slot& s = g->slots[i];
    if (s.storage != Slot::Storage::Arena) continue;
    s.offset = 0;
    const size_t bytes = align64(s.type.numBytes());
    if (bytes == 0 || s.share >= 0) continue;
    const auto range = rangeOf(s);
    block_of[i] = blocks.size();
    blocks.push_back(Block{i, bytes, 0, range.first, range.second});
  }
  for (size_t i = 0; i < g->slots.size(); ++i) {
    const Slot& s = g->slots[i];
    if (s.storage != Slot::Storage::Arena || s.share < 0 || s.type.numBytes() == 0) continue;
    const size_t r = block_of[root(i)];
    if (r == SIZE_MAX) continue;
    const auto range = rangeOf(s);
    blocks[r].first = std::min(blocks[r].first, range.first);
    blocks[r].last = std::max(blocks[r].last, range.second);
    blocks[r].bytes = std::max(blocks[r].bytes, align64(s.type.numBytes()));
  }

  // Peak of the bytes live at once: the bound for the layout (a sweep over range starts and ends).
  std::vector<std::pair<int64_t, int64_t>> events;  // (step, +bytes at first / -bytes after last)
  for (const Block& b : blocks) {
    events.emplace_back(b.first, static_cast<int64_t>(b.bytes));
    events.emplace_back(b.last + 1, -static_cast<int64_t>(b.bytes));
  }
  std::sort(events.begin(), events.end());  // at one step, ends (negative) before starts
  int64_t live = 0, peak = 0;
  for (const auto& e : events) peak = std::max(peak, live += e.second);
  g->peak_live_bytes = static_cast<size_t>(peak);

  // Biggest first (then in program order): each goes to the lowest offset that no placed block live at the same
  // time occupies.
  std::vector<size_t> order(blocks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (blocks[a].bytes != blocks[b].bytes) return blocks[a].bytes > blocks[b].bytes;
    return blocks[a].first != blocks[b].first ? blocks[a].first < blocks[b].first : a < b;
  });
  std::vector<size_t> placed;
  std::vector<std::pair<size_t, size_t>> taken;  // (offset, end) of the placed blocks live with the current one
  size_t arena = 0;
  for (size_t i : order) {
    Block& b = blocks[i];
    taken.clear();
    for (size_t j : placed) {
      const Block& p = blocks[j];
      if (p.first <= b.last && b.first <= p.last) taken.emplace_back(p.offset, p.offset + p.bytes);
    }
    std::sort(taken.begin(), taken.end());
    size_t offset = 0;
    for (const auto& t : taken) {
      if (offset + b.bytes <= t.first) break;
      offset = std::max(offset, t.second);
    }
    b.offset = offset;
    g->slots[b.slot].offset = offset;
    arena = std::max(arena, offset + b.bytes);
    placed.push_back(i);
  }
  for (size_t i = 0; i < g->slots.size(); ++i)
    if (g->slots[i].storage == Slot::Storage::Arena && g->slots[i].share >= 0)
      g->slots[i].offset = g->slots[root(i)].offset;
  g->arena_bytes = arena;
}

}  // namespace ipu
