// jax_ipu.tile's ops (ipu/tile.h): tile_put places an array's rows on chosen tiles, cycle_count reads the tiles'
// cycle counters. Free functions over the Lowerer's public graph-building calls.
#include "ipu/tile.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include "ipu/codelet_library.h"
#include "ipu/cost_model.h"
#include "ipu/dtype.h"
#include "ipu/engine.h"
#include "ipu/json.h"

namespace ipu {

namespace {

bool sameType(const TensorType& a, const TensorType& b) { return a.dtype == b.dtype && a.shape == b.shape; }

// Distinct tiles of the device, at least one.
std::vector<int32_t> checkTiles(const Lowerer& L, const OpContext& ctx, const std::vector<long long>& given) {
  std::vector<int32_t> tiles;
  std::set<long long> seen;
  for (const long long t : given) {
    if (t < 0 || t >= L.device().num_tiles)
      L.invalid(ctx, "tile " + std::to_string(t) + " is out of range: the IPU has " +
                         std::to_string(L.device().num_tiles) + " tiles (0 to " +
                         std::to_string(L.device().num_tiles - 1) + ")");
    if (!seen.insert(t).second)
      L.invalid(ctx, "tile " + std::to_string(t) + " is named twice: each row has a tile of its own");
    tiles.push_back(static_cast<int32_t>(t));
  }
  if (tiles.empty()) L.invalid(ctx, "no tiles given");
  return tiles;
}

// backend_config "0,5,9" -> {0, 5, 9}.
std::vector<int32_t> parseTiles(const Lowerer& L, const OpContext& ctx) {
  const std::string text = attrString(*ctx.op, "backend_config", "");
  std::vector<long long> given;
  const char* p = text.c_str();
  while (*p) {
    char* end = nullptr;
    errno = 0;
    const long long t = std::strtoll(p, &end, 10);
    if (end == p || errno == ERANGE || (*end != ',' && *end != '\0'))
      L.invalid(ctx, "backend_config must be the tiles as numbers separated by commas, not '" + text + "'");
    given.push_back(t);
    p = *end ? end + 1 : end;
  }
  return checkTiles(L, ctx, given);
}

// The arrays of a tile-sharded value are placed so, row r on tiles[r] (the slot `in` itself when it already is).
int placed(Lowerer& L, OpContext& ctx, int in, const TensorType& type, const std::vector<int32_t>& tiles,
           const std::string& name) {
  const TileMapping mapping = TileMapping::onTiles(type.numElements(), tiles);
  if (L.graph().slots[static_cast<size_t>(in)].mapping.sameAs(mapping)) return in;  // already there: nothing moves
  const int out = L.newSlot(type);
  L.graph().slots[static_cast<size_t>(out)].mapping = mapping;
  L.emitCopy(ctx.seq, {{in, out}}, name);
  return out;
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
  return {placed(L, ctx, ctx.in[0], type, tiles, "tile_put")};
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
  bool readsCycles() const override { return true; }

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

// Runs a custom vertex once per tile, on that tile's rows of its fields. InOut fields start from their operand.
class VertexKernel : public Kernel {
 public:
  struct Bound {
    poplar::LibraryField field;
    int in = -1, out = -1;  // the operand read and the result written (-1: none)
    int64_t row = 0;        // elements per tile
  };
  VertexKernel(poplar::Codelet codelet, std::vector<Bound> fields, std::map<std::string, double> values, int64_t tiles)
      : codelet_(std::move(codelet)), fields_(std::move(fields)), values_(std::move(values)), tiles_(tiles) {}
  void prepare(RunState& s) const override {
    ScopedFlushDenormals ftz;  // the IPU's f32 arithmetic has no denormals
    for (const Bound& b : fields_)
      if (b.in >= 0 && b.out >= 0)
        std::memcpy(s.at<char>(b.out), s.at<char>(b.in), static_cast<size_t>(b.row * tiles_) * dtypeSize(b.field.type));
    for (int64_t t = 0; t < tiles_; ++t) {
      poplar::VertexData d;
      d.values = values_;
      for (const Bound& b : fields_) {
        if (b.field.spec.value) continue;
        const size_t bytes = static_cast<size_t>(b.row) * dtypeSize(b.field.type);
        char* base = s.at<char>(b.out >= 0 ? b.out : b.in) + static_cast<size_t>(t) * bytes;
        d.fields[b.field.spec.name] = {b.field.type, static_cast<size_t>(b.row), base};
      }
      codelet_.compute(d);
    }
  }
  void compute(RunState&, int64_t, int64_t) const override {}

 private:
  poplar::Codelet codelet_;
  std::vector<Bound> fields_;
  std::map<std::string, double> values_;
  int64_t tiles_;
};

const json::Value& member(const Lowerer& L, const OpContext& ctx, const json::Value& cfg, const char* key,
                          json::Value::Kind kind) {
  const json::Value* v = cfg.find(key);
  if (!v || v->kind != kind)
    L.invalid(ctx, std::string("backend_config needs \"") + key + "\" (a " + json::Value::kindName(kind) + ")");
  return *v;
}

// What a jax_ipu_tile_vertex call asks for. backend_config: {"library": path, "codelet": name, "tiles": [...],
// "values": {field: number}, "perf_estimate": worker cycles or null (then the codelet's cycles())}.
struct VertexCall {
  poplar::LibraryCodelet codelet;
  std::vector<int32_t> tiles;
  std::map<std::string, double> values;
  int64_t perf_estimate = -1;
  std::string who;  // "vertex 'Saxpy'"
};

VertexCall readVertexCall(const Lowerer& L, const OpContext& ctx) {
  json::Value cfg;
  try {
    cfg = json::parse(attrString(*ctx.op, "backend_config", ""));
  } catch (const Error& e) { L.invalid(ctx, std::string("backend_config is not JSON: ") + e.what()); }
  if (!cfg.isObject()) L.invalid(ctx, "backend_config must be a JSON object");
  VertexCall call;
  const std::string library = member(L, ctx, cfg, "library", json::Value::Kind::String).string;
  const std::string name = member(L, ctx, cfg, "codelet", json::Value::Kind::String).string;
  std::vector<long long> given;
  for (const json::Value& t : member(L, ctx, cfg, "tiles", json::Value::Kind::Array).array) {
    if (!t.is_integer) L.invalid(ctx, "\"tiles\" must hold integers");
    given.push_back(t.integer);
  }
  call.tiles = checkTiles(L, ctx, given);
  std::vector<poplar::LibraryCodelet> loaded;
  try {
    loaded = poplar::loadCodeletLibrary(library);
  } catch (const Error& e) { L.invalid(ctx, e.what()); }
  auto found =
      std::find_if(loaded.begin(), loaded.end(), [&](const poplar::LibraryCodelet& c) { return c.name == name; });
  if (found == loaded.end()) {
    std::string names;
    for (const poplar::LibraryCodelet& c : loaded) names += (names.empty() ? "" : ", ") + c.name;
    L.invalid(ctx, "codelet library '" + library + "' has no codelet '" + name + "' (it has " + names + ")");
  }
  call.codelet = *found;
  call.who = "vertex '" + name + "'";
  const json::Value* values = cfg.find("values");
  for (const poplar::LibraryField& f : call.codelet.fields) {
    if (!f.spec.value) continue;
    const json::Value* v = values ? values->find(f.spec.name) : nullptr;
    if (!v || (v->kind != json::Value::Kind::Number && v->kind != json::Value::Kind::Bool))
      L.invalid(ctx, call.who + ": value field '" + f.spec.name + "' is not given a number");
    call.values[f.spec.name] = v->kind == json::Value::Kind::Bool ? (v->boolean ? 1.0 : 0.0) : v->number;
  }
  if (values)
    for (const auto& kv : values->object)
      if (!call.values.count(kv.first)) L.invalid(ctx, call.who + " has no value field '" + kv.first + "'");
  const json::Value* perf = cfg.find("perf_estimate");
  if (perf && perf->kind != json::Value::Kind::Null) {
    if (!perf->is_integer || perf->integer < 0) L.invalid(ctx, "\"perf_estimate\" must be a count of cycles");
    call.perf_estimate = perf->integer;
  }
  return call;
}

// The call's fields bound to slots: the operands (Input, InOut) placed on the call's tiles, in declaration order,
// and a new placed result per InOut and Output field. `shape` gets one tile's field types and sizes.
std::vector<VertexKernel::Bound> bindFields(Lowerer& L, OpContext& ctx, const VertexCall& call,
                                            poplar::VertexData* shape) {
  const int64_t n = static_cast<int64_t>(call.tiles.size());
  std::vector<VertexKernel::Bound> fields;
  size_t next_in = 0, next_out = 0;
  for (const poplar::LibraryField& f : call.codelet.fields) {
    VertexKernel::Bound b{f};
    if (f.spec.value) {
      shape->values[f.spec.name] = call.values.at(f.spec.name);
      fields.push_back(b);
      continue;
    }
    const TensorType* type = nullptr;
    if (f.spec.direction != poplar::FieldDirection::Output) {
      if (next_in >= ctx.in.size()) L.invalid(ctx, call.who + ": field '" + f.spec.name + "' has no operand");
      type = &ctx.in_types[next_in];
      b.in = placed(L, ctx, ctx.in[next_in++], *type, call.tiles, "tile_vertex");
    }
    if (f.spec.direction != poplar::FieldDirection::Input) {
      if (next_out >= ctx.out_types.size()) L.invalid(ctx, call.who + ": field '" + f.spec.name + "' has no result");
      const TensorType& out = ctx.out_types[next_out++];
      if (type && !sameType(*type, out))
        L.invalid(ctx, call.who + ": InOut field '" + f.spec.name + "' must return its operand's type");
      type = &out;
      b.out = L.newSlot(out);
      L.graph().slots[static_cast<size_t>(b.out)].mapping = TileMapping::onTiles(out.numElements(), call.tiles);
    }
    if (type->shape.empty() || type->shape[0] != n)
      L.invalid(ctx, call.who + ": field '" + f.spec.name + "' needs one row per tile (" + std::to_string(n) +
                         "), not an array of shape " + type->str());
    b.row = type->numElements() / n;
    shape->fields[f.spec.name] = {type->dtype, static_cast<size_t>(b.row), nullptr};
    fields.push_back(b);
  }
  if (next_in != ctx.in.size() || next_out != ctx.out_types.size())
    L.invalid(ctx, call.who + " takes " + std::to_string(next_in) + " operands and gives " + std::to_string(next_out) +
                       " results, not " + std::to_string(ctx.in.size()) + " and " +
                       std::to_string(ctx.out_types.size()));
  return fields;
}

// Operands: the Input and InOut fields in declaration order; results: the InOut and Output fields, in order.
std::vector<int> tileVertex(Lowerer& L, OpContext& ctx) {
  VertexCall call = readVertexCall(L, ctx);
  poplar::VertexData shape;  // one tile's fields (types and sizes), for the check and the estimate
  std::vector<VertexKernel::Bound> fields = bindFields(L, ctx, call, &shape);
  const std::string why = call.codelet.codelet.check(shape);
  if (!why.empty()) L.invalid(ctx, call.who + ": " + why);
  if (call.perf_estimate < 0 && !call.codelet.has_cycles)
    L.invalid(ctx, call.who +
                       " has no cycle estimate: give the class a cycles() member, or the vertex a "
                       "perf_estimate");
  const uint64_t estimate =
      call.perf_estimate >= 0 ? static_cast<uint64_t>(call.perf_estimate) : call.codelet.codelet.cycles(shape);
  std::vector<int> results;
  ctx.in.clear();  // what the Execute reads: the placed operands
  for (const VertexKernel::Bound& b : fields) {
    if (b.out >= 0) results.push_back(b.out);
    if (b.in >= 0) ctx.in.push_back(b.in);
  }
  // One vertex per tile: it runs on one worker context, which the tile's barrel shares with five others.
  const uint64_t cycles = cost::vertexTile({estimate}, L.device().num_worker_contexts);
  Superstep step = L.superstep(call.codelet.name, L.graph().slots[static_cast<size_t>(results[0])].mapping, {},
                               [cycles](int, int64_t) { return cycles; });
  L.emitExecute(ctx,
                std::make_unique<VertexKernel>(call.codelet.codelet, std::move(fields), std::move(call.values),
                                               static_cast<int64_t>(call.tiles.size())),
                {std::move(step)}, results, 0);
  return results;
}

}  // namespace

bool isTileTarget(const std::string& target) {
  return target == kTilePutTarget || target == kCycleCountTarget || target == kTileVertexTarget;
}

std::vector<int> lowerTileOp(Lowerer& lowerer, OpContext& ctx, const std::string& target) {
  if (target == kTilePutTarget) return tilePut(lowerer, ctx);
  if (target == kTileVertexTarget) return tileVertex(lowerer, ctx);
  return cycleCount(lowerer, ctx);
}

}  // namespace ipu
