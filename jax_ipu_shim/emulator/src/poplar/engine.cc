// poplar::Engine: checks a graph and its programs once, lays its variables out in host memory, costs every step, and
// writes each program as a tree of the executor's nodes (ipu/graph.h), which the Executor that runs the StableHLO
// lowering's programs runs (ipu/engine.h): one runtime, with its loops, host threads and profile. A compute set is
// one BSP superstep (each tile receives the operand elements its vertices read from other tiles, its workers run its
// vertices, every tile syncs), costed per tile as the StableHLO lowering's supersteps are.
#include "ipu/engine.h"

#include <algorithm>
#include <cstring>
#include <iomanip>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "ipu/cost_model.h"
#include "ipu/dtype.h"
#include "ipu/memory.h"
#include "state.h"

namespace ipu {
namespace poplar {

namespace {

[[noreturn]] void invalid(const std::string& what) { throw Error(ErrorCode::InvalidArgument, what); }

bool parseBool(const std::string& name, const std::string& value) {
  if (value == "true") return true;
  if (value == "false") return false;
  invalid("Engine option '" + name + "': '" + value + "' is not \"true\" or \"false\"");
}

struct Options {
  bool allow_out_of_memory = false;
  int host_threads = 1;
};

Options parseOptions(const OptionFlags& flags) {
  Options o;
  for (const auto& f : flags) {
    if (f.first == "debug.allowOutOfMemory") {
      o.allow_out_of_memory = parseBool(f.first, f.second);
    } else if (f.first == "emulator.hostThreads") {
      int n = 0;
      try {
        size_t used = 0;
        n = std::stoi(f.second, &used);
        if (used != f.second.size()) n = 0;
      } catch (const std::exception&) { n = 0; }
      if (n < 1 || n > 256) invalid("Engine option 'emulator.hostThreads': '" + f.second + "' is not 1..256");
      o.host_threads = n;
    } else {
      invalid("Unrecognised Engine option '" + f.first +
              "' (the emulator's Engine knows debug.allowOutOfMemory and "
              "emulator.hostThreads)");
    }
  }
  return o;
}

const char* directionName(FieldDirection d) {
  return d == FieldDirection::Input ? "input" : d == FieldDirection::Output ? "output" : "in/out";
}

}  // namespace

struct Engine::Impl {
  // One vertex ready to run: its codelet and, per connected field, the byte offsets of its elements.
  struct Field {
    std::string name;
    FieldDirection direction;
    Type type;
    std::vector<size_t> offsets;
  };
  struct Prepared {
    const Codelet* codelet = nullptr;
    int tile = 0;
    std::vector<Field> fields;
    std::map<std::string, double> values;
  };
  struct Step {  // a compute set, copy, stream copy, host call or control decision, as it is costed and profiled
    std::string type, name;
    Cost cost;
  };
  struct ComputeSetPlan {
    std::vector<Prepared> vertices;
    std::vector<std::vector<size_t>> by_tile;  // vertex indices per tile that has any
    std::vector<int32_t> tiles;                // those tiles
    double cycles_per_tile = 0;                // their vertices' worker cycles, on average: the host work per tile
    Cost cost;
  };
  struct StreamHost {
    uint8_t* begin = nullptr;
    uint8_t* end = nullptr;
    size_t next = 0;
    std::function<void(void*)> callback;
  };

  GraphState g;
  std::vector<program::Program> programs;
  Options options;
  std::unique_ptr<ThreadPool> pool;
  std::vector<size_t> var_bytes;  // per variable: byte offset in `memory`
  std::vector<uint8_t> storage;
  std::map<unsigned, ComputeSetPlan> plans;  // the compute sets the programs execute
  std::unordered_map<const program::Node*, int> step_of;  // node -> its step id (program order)
  std::vector<Step> steps;
  std::vector<StreamHost> streams;
  std::vector<std::function<void(const std::vector<const void*>&, const std::vector<void*>&)>> host_functions;
  std::map<int, uint64_t> stamps;
  MemoryReport memory;
  RunProfile profile;
  std::vector<int64_t> tile_bytes, transient;  // per tile: permanent bytes; largest exchange buffer of any step

  Impl(const Graph& graph, std::vector<program::Program> progs, const OptionFlags& flags)
      : g(graph.state()), programs(std::move(progs)), options(parseOptions(flags)) {
    const DeviceDescription& dev = g.target.device();
    tile_bytes.assign(static_cast<size_t>(dev.num_tiles), 0);
    transient.assign(static_cast<size_t>(dev.num_tiles), 0);
    layout();
    std::set<const program::Node*> seen;
    for (const program::Program& p : programs) number(p, &seen);
    for (const program::Program& f : g.functions) number(f, &seen);
    streams.resize(g.streams.size());
    host_functions.resize(g.host_functions.size());
    finishMemory();
    if (options.host_threads > 1) pool = std::make_unique<ThreadPool>(options.host_threads);
    storage_ = storage.data();
    lowerPrograms();
  }

  const DeviceDescription& device() const { return g.target.device(); }
  size_t offsetOf(int64_t id) const {
    const Variable& v = g.variableOf(id);
    const size_t var = static_cast<size_t>(&v - g.variables.data());
    return var_bytes[var] + static_cast<size_t>(id - v.base) * dtypeSize(v.type);
  }
  std::vector<size_t> offsets(const Tensor& t) const {
    std::vector<size_t> o;
    o.reserve(t.numElements());
    for (int64_t id : t.elements()) o.push_back(offsetOf(id));
    return o;
  }
  int tileOf(int64_t id) const { return g.tile[static_cast<size_t>(id)]; }

  // Every variable in one host block; constants written once. Each tile holds the bytes of its elements.
  void layout() {
    size_t total = 0;
    for (const Variable& v : g.variables) {
      var_bytes.push_back(total);
      total += static_cast<size_t>(v.count) * dtypeSize(v.type);
      total = (total + 7) / 8 * 8;
    }
    storage.assign(total, 0);
    for (size_t i = 0; i < g.variables.size(); ++i) {
      const Variable& v = g.variables[i];
      if (v.constant && !v.value.empty()) std::memcpy(storage.data() + var_bytes[i], v.value.data(), v.value.size());
      for (int64_t e = 0; e < v.count; ++e) {
        const int tile = tileOf(v.base + e);
        if (tile >= 0) tile_bytes[static_cast<size_t>(tile)] += static_cast<int64_t>(dtypeSize(v.type));
      }
    }
  }

  // Every element a program reads or writes must be on a tile.
  void requireMapped(const Tensor& t, const std::string& where) const {
    const std::vector<int64_t>& ids = t.elements();
    for (size_t i = 0; i < ids.size(); ++i)
      if (tileOf(ids[i]) < 0) {
        const Variable& v = g.variableOf(ids[i]);
        invalid(where + ": tensor '" + v.name + "' (" + dtypeName(v.type) +
                ") is not completely mapped to tiles: "
                "its element " +
                std::to_string(ids[i] - v.base) + " has no tile (Graph::setTileMapping)");
      }
  }

  ComputeSetPlan plan(size_t cs_index) {
    const ComputeSetState& cs = g.compute_sets[cs_index];
    ComputeSetPlan p;
    const int tiles = device().num_tiles;
    std::vector<std::vector<uint64_t>> cycles(static_cast<size_t>(tiles));
    std::vector<std::unordered_set<int64_t>> received(static_cast<size_t>(tiles));
    std::vector<int64_t> recv(static_cast<size_t>(tiles), 0);
    std::vector<std::set<std::string>> codelets_on(static_cast<size_t>(tiles));
    std::unordered_map<int64_t, unsigned> writer;  // element -> the vertex that writes it
    std::vector<std::pair<int64_t, unsigned>> reads;  // (element, vertex): every read, checked once writers are known
    for (unsigned vid : cs.vertices) {
      const Vertex& v = g.vertices[vid];
      const std::string who = "compute set '" + cs.name + "': vertex " + std::to_string(vid) + " ('" + v.codelet + "')";
      if (v.tile < 0) invalid(who + " has no tile (Graph::setTileMapping of the vertex)");
      auto own = g.codelets.find(v.codelet);
      Prepared pv;
      pv.codelet = own != g.codelets.end() ? &own->second : builtinCodelet(v.codelet);
      pv.tile = v.tile;
      pv.values = v.values;
      VertexData shape;  // types and sizes only, for the check and the estimate
      for (const FieldSpec& f : pv.codelet->fields) {
        if (f.value) {
          if (!v.values.count(f.name)) invalid(who + ": field '" + f.name + "' has no value (Graph::setInitialValue)");
          shape.values[f.name] = v.values.at(f.name);
          continue;
        }
        auto c = v.connections.find(f.name);
        if (c == v.connections.end())
          invalid(who + ": " + directionName(f.direction) + " field '" + f.name +
                  "' is not connected (Graph::connect)");
        const Tensor& t = c->second;
        requireMapped(t, who + ", field '" + f.name + "'");
        Field field{f.name, f.direction, t.elementType(), offsets(t)};
        for (int64_t id : t.elements()) {
          const int tile = tileOf(id);
          if (f.direction != FieldDirection::Input) {
            if (g.variableOf(id).constant)
              invalid(who + ": " + directionName(f.direction) + " field '" + f.name + "' writes the constant '" +
                      g.variableOf(id).name + "'");
            if (tile != v.tile)
              invalid(who + " on tile " + std::to_string(v.tile) + ": " + directionName(f.direction) + " field '" +
                      f.name + "' is connected to an element of '" + g.variableOf(id).name + "' on tile " +
                      std::to_string(tile) + "; a vertex writes only its own tile's memory");
            auto w = writer.find(id);
            if (w != writer.end() && w->second != vid)
              invalid(who + " and vertex " + std::to_string(w->second) + " both write element " +
                      std::to_string(id - g.variableOf(id).base) + " of '" + g.variableOf(id).name +
                      "': the vertices of a compute set run at the same time");
            writer[id] = vid;
          }
          if (f.direction != FieldDirection::Output) {
            reads.emplace_back(id, vid);
            if (tile != v.tile && received[static_cast<size_t>(v.tile)].insert(id).second)
              recv[static_cast<size_t>(v.tile)] += static_cast<int64_t>(dtypeSize(t.elementType()));
          }
        }
        shape.fields[f.name] = VertexData::Field{t.elementType(), t.numElements(), nullptr};
        pv.fields.push_back(std::move(field));
      }
      for (const auto& c : v.connections)
        if (std::none_of(pv.codelet->fields.begin(), pv.codelet->fields.end(),
                         [&](const FieldSpec& f) { return f.name == c.first; }))
          invalid(who + " has no field '" + c.first + "'");
      if (pv.codelet->check) {
        const std::string why = pv.codelet->check(shape);
        if (!why.empty()) invalid(who + ": " + why);
      }
      const uint64_t c = v.perf_estimate >= 0 ? static_cast<uint64_t>(v.perf_estimate)
                         : pv.codelet->cycles ? pv.codelet->cycles(shape)
                                              : 0;
      cycles[static_cast<size_t>(v.tile)].push_back(c);
      codelets_on[static_cast<size_t>(v.tile)].insert(v.codelet);
      tile_bytes[static_cast<size_t>(v.tile)] += cost::kVertexStateBytes + 8 * static_cast<int64_t>(pv.fields.size());
      p.vertices.push_back(std::move(pv));
    }
    for (const auto& r : reads) {
      auto w = writer.find(r.first);
      if (w != writer.end() && w->second != r.second)
        invalid("compute set '" + cs.name + "': vertex " + std::to_string(w->second) + " writes element " +
                std::to_string(r.first - g.variableOf(r.first).base) + " of '" + g.variableOf(r.first).name +
                "' that vertex " + std::to_string(r.second) +
                " reads: the vertices of a compute set run at the same "
                "time");
    }
    // Code per codelet type on each tile (once per graph: a codelet's code is loaded once per tile).
    for (int t = 0; t < tiles; ++t)
      for (const std::string& name : codelets_on[static_cast<size_t>(t)])
        if (code_on_.insert({t, name}).second) tile_bytes[static_cast<size_t>(t)] += cost::kCodeletCodeBytes;
    // The superstep: max over tiles of (the busiest worker, its vertices shared longest-first) + exchange; a sync.
    p.by_tile.clear();
    std::vector<std::vector<size_t>> per_tile(static_cast<size_t>(tiles));
    for (size_t i = 0; i < p.vertices.size(); ++i) per_tile[static_cast<size_t>(p.vertices[i].tile)].push_back(i);
    const int workers = device().num_worker_contexts;
    bool any = false;
    for (int t = 0; t < tiles; ++t) {
      const size_t ti = static_cast<size_t>(t);
      if (per_tile[ti].empty()) continue;
      p.by_tile.push_back(per_tile[ti]);
      p.tiles.push_back(t);
      for (uint64_t c : cycles[ti]) p.cycles_per_tile += static_cast<double>(c);
      const uint64_t compute = cost::vertexTile(cycles[ti], workers);
      const uint64_t exchange = cost::exchange(recv[ti], device().exchange_bytes_per_cycle);
      if (!any || compute + exchange > p.cost.compute + p.cost.exchange) {
        p.cost.compute = compute;
        p.cost.exchange = exchange;
        any = true;
      }
      transient[ti] = std::max(transient[ti], recv[ti]);
    }
    p.cost.sync = device().sync_cycles;
    if (!p.tiles.empty()) p.cycles_per_tile /= static_cast<double>(p.tiles.size());
    return p;
  }

  // A Copy: each destination tile receives the source elements held elsewhere and copies its own on the tile.
  Cost planCopy(const program::Node& n) {
    requireMapped(n.src, "program::Copy");
    requireMapped(n.dst, "program::Copy");
    const std::vector<int64_t>& src = n.src.elements();
    const std::vector<int64_t>& dst = n.dst.elements();
    const int64_t eb = static_cast<int64_t>(dtypeSize(n.src.elementType()));
    for (int64_t id : dst)
      if (g.variableOf(id).constant)
        invalid("program::Copy: the destination includes the constant '" + g.variableOf(id).name + "'");
    std::map<int, std::pair<int64_t, int64_t>> per_tile;  // tile -> (received, local) bytes
    for (size_t i = 0; i < dst.size(); ++i) {
      const int to = tileOf(dst[i]), from = tileOf(src[i]);
      (from == to ? per_tile[to].second : per_tile[to].first) += eb;
    }
    Cost c;
    for (const auto& t : per_tile) {
      const uint64_t x = cost::exchange(t.second.first, device().exchange_bytes_per_cycle);
      const uint64_t k = t.second.second > 0 ? cost::copy(t.second.second, device().num_worker_contexts) : 0;
      if (x + k > c.exchange + c.compute) {
        c.exchange = x;
        c.compute = k;
      }
      transient[static_cast<size_t>(t.first)] = std::max(transient[static_cast<size_t>(t.first)], t.second.first);
    }
    c.sync = device().sync_cycles;
    return c;
  }

  Cost control() const {
    Cost c;
    c.compute = cost::kControlCycles;
    c.sync = device().sync_cycles;
    return c;
  }

  // Numbers the steps depth first (program order) and checks and costs each node once.
  void number(const program::Program& p, std::set<const program::Node*>* seen) {
    const program::Node* n = p.node().get();
    if (!n || !seen->insert(n).second) return;
    using program::Kind;
    auto add = [&](const std::string& type, const std::string& name, Cost cost) {
      step_of[n] = static_cast<int>(steps.size());
      steps.push_back({type, name, cost});
    };
    switch (n->kind) {
      case Kind::Sequence: break;
      case Kind::Execute:
        if (n->compute_set >= g.compute_sets.size()) invalid("program::Execute: not a compute set of this graph");
        if (!plans.count(n->compute_set)) plans.emplace(n->compute_set, plan(n->compute_set));
        add("Execute", g.compute_sets[n->compute_set].name, plans.at(n->compute_set).cost);
        break;
      case Kind::Copy: add("Copy", g.describe(n->dst), planCopy(*n)); break;
      case Kind::StreamToDevice:
      case Kind::StreamFromDevice: {
        const bool to_device = n->kind == Kind::StreamToDevice;
        const Tensor& t = to_device ? n->dst : n->src;
        if (n->index >= g.streams.size()) invalid("program::Copy: not a stream of this graph");
        const StreamState& s = g.streams[n->index];
        if (s.to_device != to_device || s.type != t.elementType() || s.elements != t.numElements())
          invalid("program::Copy with stream '" + s.handle + "' (" +
                  (s.to_device ? "host to device"
                               : "device to "
                                 "host") +
                  ", " + dtypeName(s.type) + " x " + std::to_string(s.elements) + "): the tensor " + g.describe(t) +
                  " does not match it");
        requireMapped(t, "program::Copy with stream '" + s.handle + "'");
        Cost c;
        c.exchange = device().hostTransferCycles(static_cast<int64_t>(t.numElements() * dtypeSize(t.elementType())));
        c.sync = device().sync_cycles;
        add("StreamCopy", s.handle, c);
        break;
      }
      case Kind::HostCall: {
        if (n->index >= g.host_functions.size()) invalid("program::Call: not a host function of this graph");
        const HostFunctionState& f = g.host_functions[n->index];
        auto match = [&](const std::vector<Tensor>& ts, const std::vector<std::pair<Type, size_t>>& want,
                         const char* what) {
          if (ts.size() != want.size())
            invalid("program::Call of host function '" + f.handle + "': " + std::to_string(ts.size()) + " " + what +
                    " given, it takes " + std::to_string(want.size()));
          for (size_t i = 0; i < ts.size(); ++i) {
            if (ts[i].elementType() != want[i].first || ts[i].numElements() != want[i].second)
              invalid("program::Call of host function '" + f.handle + "': " + what + " " + std::to_string(i) + " is " +
                      g.describe(ts[i]) + ", it takes " + dtypeName(want[i].first) + " x " +
                      std::to_string(want[i].second));
            requireMapped(ts[i], "program::Call of host function '" + f.handle + "'");
          }
        };
        match(n->inputs, f.inputs, "inputs");
        match(n->outputs, f.outputs, "outputs");
        int64_t bytes = 0;
        for (const auto& t : n->inputs) bytes += static_cast<int64_t>(t.numElements() * dtypeSize(t.elementType()));
        for (const auto& t : n->outputs) bytes += static_cast<int64_t>(t.numElements() * dtypeSize(t.elementType()));
        Cost c;
        c.exchange = device().hostTransferCycles(bytes);
        c.sync = device().sync_cycles;
        add("HostCall", f.handle, c);
        break;
      }
      case Kind::Repeat: add("Repeat", "repeat " + std::to_string(n->index), Cost{cost::kControlCycles, 0, 0}); break;
      case Kind::RepeatWhileTrue:
      case Kind::If:
      case Kind::Switch:
        requireMapped(n->src, "the control of a program");
        add(n->kind == Kind::If       ? "If"
            : n->kind == Kind::Switch ? "Switch"
                                      : "RepeatWhileTrue",
            g.describe(n->src), control());
        break;
      case Kind::Call:
        if (n->index >= g.functions.size()) invalid("program::Call: not a function of this graph");
        number(g.functions[n->index], seen);
        break;
      case Kind::Sync: add("Sync", "sync", Cost{0, 0, device().sync_cycles}); break;
      case Kind::CycleStamp: break;
    }
    for (const program::Program& c : n->children) number(c, seen);
  }

  void finishMemory() {
    memory.bytes_per_tile.assign(tile_bytes.size(), 0);
    for (size_t t = 0; t < tile_bytes.size(); ++t) {
      const int64_t b = tile_bytes[t] + transient[t];
      memory.bytes_per_tile[t] = b;
      memory.total_bytes += b;
      if (b > memory.worst_bytes) {
        memory.worst_bytes = b;
        memory.worst_tile = static_cast<int>(t);
      }
    }
    checkMemory(memory, device(), options.allow_out_of_memory);
  }

  // ---- running: each program as a tree of the executor's nodes (ipu/graph.h), run by the Executor that runs the
  // StableHLO lowering's programs, with its loops, host threads and profile ----

  // A compute set's vertices, tile by tile: its superstep's work is its tiles, one "element" each.
  class ComputeSetKernel : public Kernel {
   public:
    ComputeSetKernel(const Impl* impl, const ComputeSetPlan* plan) : impl_(impl), plan_(plan) {}
    void compute(RunState&, int64_t begin, int64_t end) const override {
      ScopedFlushDenormals ftz;  // the IPU's f32 and f16 arithmetic has no denormals
      for (int64_t i = begin; i < end; ++i)
        for (size_t v : plan_->by_tile[static_cast<size_t>(i)]) impl_->runVertex(plan_->vertices[v]);
    }

   private:
    const Impl* impl_;
    const ComputeSetPlan* plan_;
  };

  // A step that does its work on the run's thread before it is charged: a copy, stream copy, host call or cycle
  // stamp (which reads the cycle counters, so a loop around it charges step by step).
  class HostStepKernel : public Kernel {
   public:
    HostStepKernel(std::function<void(RunState&)> work, bool reads_cycles)
        : work_(std::move(work)), reads_cycles_(reads_cycles) {}
    void prepare(RunState& state) const override { work_(state); }
    void compute(RunState&, int64_t, int64_t) const override {}
    bool readsCycles() const override { return reads_cycles_; }

   private:
    std::function<void(RunState&)> work_;
    bool reads_cycles_;
  };

  // A slot for a program's control scalar (a switch's index, a loop's predicate): its element in the storage.
  int controlSlot(const Tensor& t) {
    Slot slot;
    slot.type = TensorType{t.elementType(), {}};
    slot.offset = offsetOf(t.elements()[0]);
    exe.slots.push_back(slot);
    return static_cast<int>(exe.slots.size()) - 1;
  }

  // An Execute node of one superstep that charges `cost`; `kernel` (if any) works in prepare() when `computes` is
  // false, else on `work`.
  std::unique_ptr<Node> executeNode(std::unique_ptr<Kernel> kernel, const Cost& cost, bool computes = false,
                                    TileMapping work = TileMapping(), double weight = 1) {
    auto node = std::make_unique<Node>();
    node->kind = NodeKind::Execute;
    node->kernel = std::move(kernel);
    Superstep step;
    step.computes = computes;
    step.work = std::move(work);
    step.cost_weight = weight;
    step.cost = cost;
    node->supersteps.push_back(std::move(step));
    return node;
  }

  std::unique_ptr<Node> hostStep(NodeKind kind, std::function<void(RunState&)> work, const Cost& cost) {
    auto node = std::make_unique<Node>();
    node->kind = kind;
    node->kernel = std::make_unique<HostStepKernel>(std::move(work), false);
    node->cost = cost;
    return node;
  }

  std::unique_ptr<Node> lower(const program::Program& p) {
    const program::Node* n = p.node().get();
    using program::Kind;
    auto step = step_of.find(n);
    const Cost cost = step != step_of.end() ? steps[static_cast<size_t>(step->second)].cost : Cost();
    std::unique_ptr<Node> node;
    switch (n->kind) {
      case Kind::Sequence:
        node = std::make_unique<Node>();
        for (const program::Program& c : n->children) node->children.push_back(lower(c));
        break;
      case Kind::Execute: {
        const ComputeSetPlan& plan = plans.at(n->compute_set);
        node = executeNode(std::make_unique<ComputeSetKernel>(this, &plan), cost, true,
                           TileMapping::onTiles(static_cast<int64_t>(plan.tiles.size()), plan.tiles),
                           plan.cycles_per_tile);
        break;
      }
      case Kind::Copy:
        node = executeNode(
            std::make_unique<HostStepKernel>([this, n](RunState&) { copyElements(n->src, n->dst); }, false), cost);
        break;
      case Kind::Sync: node = executeNode(nullptr, cost); break;
      case Kind::StreamToDevice:
      case Kind::StreamFromDevice:
        node = hostStep(NodeKind::StreamCopy, [this, n](RunState&) { stream(*n); }, cost);
        break;
      case Kind::HostCall: node = hostStep(NodeKind::HostCall, [this, n](RunState&) { hostCall(*n); }, cost); break;
      case Kind::Repeat:
        node = std::make_unique<Node>();
        node->kind = NodeKind::Repeat;
        node->repeat = n->index;
        node->cost = cost;
        node->children.push_back(lower(n->children[0]));
        break;
      case Kind::RepeatWhileTrue:
      case Kind::If:
      case Kind::Switch:
        node = std::make_unique<Node>();
        node->kind = n->kind == Kind::RepeatWhileTrue ? NodeKind::RepeatWhileTrue : NodeKind::Switch;
        node->slot = controlSlot(n->src);
        node->cost = cost;
        if (n->kind == Kind::If) {  // a switch whose branch 0 is the else and any other value the then
          node->children.push_back(lower(n->children[1]));
          node->children.push_back(lower(n->children[0]));
        } else {
          for (const program::Program& c : n->children) node->children.push_back(lower(c));
          node->case_values.assign(n->case_values.begin(), n->case_values.end());
        }
        break;
      case Kind::Call: return lower(g.functions[n->index]);  // its steps are the function's, wherever it is called
      case Kind::CycleStamp: {
        node = executeNode(std::make_unique<HostStepKernel>([this, n](RunState& state) { stamp(*n, state); }, true),
                           Cost());
        node->supersteps.clear();
        break;
      }
    }
    if (step != step_of.end()) {
      node->id = step->second;
      node->name = steps[static_cast<size_t>(step->second)].name;
    }
    return node;
  }

  // The programs as the executor's trees, once the steps are numbered and costed.
  void lowerPrograms() {
    exe.device = device();
    exe.slots.emplace_back();  // slot 0: the storage
    for (const program::Program& p : programs) {
      roots.push_back(lower(p));
      planRun(roots.back().get());
    }
    for (const Slot& slot : exe.slots) ptr.push_back(storage.data() + slot.offset);
    if (pool) run_options.pool = pool.get();
  }

  void runVertex(const Prepared& v) const {
    std::vector<std::vector<uint8_t>> buffers(v.fields.size());  // the vertex's copy of its fields
    VertexData data;
    data.values = v.values;
    for (size_t i = 0; i < v.fields.size(); ++i) {
      const Field& f = v.fields[i];
      const size_t eb = dtypeSize(f.type);
      std::vector<uint8_t>& buf = buffers[i];
      buf.resize(std::max<size_t>(f.offsets.size() * eb, 8));
      if (f.direction != FieldDirection::Output)
        for (size_t k = 0; k < f.offsets.size(); ++k) std::memcpy(buf.data() + k * eb, storage_ + f.offsets[k], eb);
      data.fields[f.name] = VertexData::Field{f.type, f.offsets.size(), buf.data()};
    }
    v.codelet->compute(data);
    for (size_t i = 0; i < v.fields.size(); ++i) {
      const Field& f = v.fields[i];
      if (f.direction == FieldDirection::Input) continue;
      const size_t eb = dtypeSize(f.type);
      for (size_t k = 0; k < f.offsets.size(); ++k)
        std::memcpy(storage_ + f.offsets[k], buffers[i].data() + k * eb, eb);
    }
  }

  void copyElements(const Tensor& src, const Tensor& dst) {
    const size_t eb = dtypeSize(src.elementType());
    const std::vector<int64_t>& s = src.elements();
    const std::vector<int64_t>& d = dst.elements();
    std::vector<uint8_t> staged(s.size() * eb);  // sources may overlap destinations
    for (size_t i = 0; i < s.size(); ++i) std::memcpy(staged.data() + i * eb, storage_ + offsetOf(s[i]), eb);
    for (size_t i = 0; i < d.size(); ++i) std::memcpy(storage_ + offsetOf(d[i]), staged.data() + i * eb, eb);
  }

  void gather(const Tensor& t, uint8_t* out) const {
    const size_t eb = dtypeSize(t.elementType());
    size_t k = 0;
    for (int64_t id : t.elements()) std::memcpy(out + eb * k++, storage_ + offsetOf(id), eb);
  }
  void scatter(const Tensor& t, const uint8_t* in) {
    const size_t eb = dtypeSize(t.elementType());
    size_t k = 0;
    for (int64_t id : t.elements()) std::memcpy(storage_ + offsetOf(id), in + eb * k++, eb);
  }

  void stream(const program::Node& n) {
    const StreamState& s = g.streams[n.index];
    StreamHost& h = streams[n.index];
    const Tensor& t = s.to_device ? n.dst : n.src;
    const size_t bytes = t.numElements() * dtypeSize(t.elementType());
    std::vector<uint8_t> entry(bytes);
    if (!s.to_device) gather(t, entry.data());
    if (h.callback) {
      h.callback(entry.data());
    } else if (h.begin) {
      uint8_t* at = h.begin + h.next;
      if (s.to_device) std::memcpy(entry.data(), at, bytes);
      else std::memcpy(at, entry.data(), bytes);
      h.next = (h.next + bytes) % static_cast<size_t>(h.end - h.begin);
    } else {
      invalid("Engine::run: stream '" + s.handle +
              "' is not connected (Engine::connectStream or "
              "connectStreamToCallback)");
    }
    if (s.to_device) scatter(t, entry.data());
  }

  void hostCall(const program::Node& n) {
    const HostFunctionState& f = g.host_functions[n.index];
    if (!host_functions[n.index])
      invalid("Engine::run: host function '" + f.handle + "' is not connected (Engine::connectHostFunction)");
    std::vector<std::vector<uint8_t>> ins, outs;
    std::vector<const void*> in_ptrs;
    std::vector<void*> out_ptrs;
    for (const Tensor& t : n.inputs) {
      ins.emplace_back(t.numElements() * dtypeSize(t.elementType()));
      gather(t, ins.back().data());
    }
    for (const Tensor& t : n.outputs) outs.emplace_back(t.numElements() * dtypeSize(t.elementType()));
    for (auto& b : ins) in_ptrs.push_back(b.data());
    for (auto& b : outs) out_ptrs.push_back(b.data());
    host_functions[n.index](in_ptrs, out_ptrs);
    for (size_t i = 0; i < n.outputs.size(); ++i) scatter(n.outputs[i], outs[i].data());
  }

  // A cycleCount's start records the run's cycles so far; its end writes what passed since, as two words.
  void stamp(const program::Node& n, const RunState& state) {
    const uint64_t now = state.profile.total_cycles;
    if (n.stamp >= 0) {
      stamps[n.stamp] = now;
      return;
    }
    const uint64_t took = now - stamps[-1 - n.stamp];
    const uint32_t words[2] = {static_cast<uint32_t>(took), static_cast<uint32_t>(took >> 32)};
    scatter(n.dst, reinterpret_cast<const uint8_t*>(words));
  }

  void runProgram(unsigned index) {
    if (index >= programs.size())
      invalid("Engine::run(" + std::to_string(index) + "): the engine has " + std::to_string(programs.size()) +
              " program(s)");
    RunState state;
    state.ptr = ptr;
    state.options = &run_options;
    profile = RunProfile();
    Executor(exe, &state).run(*roots[index]);
    profile = state.profile;
    profile.steps.clear();
    for (size_t i = 0; i < state.profile.steps.size(); ++i) {
      StepProfile s = state.profile.steps[i];
      if (s.executions == 0) continue;
      s.id = static_cast<int>(i);
      s.type = steps[i].type;
      s.name = steps[i].name;
      profile.steps.push_back(std::move(s));
    }
  }

  std::set<std::pair<int, std::string>> code_on_;
  ipu::Graph exe;  // the slots of the programs' control scalars (slot 0: all of the storage)
  std::vector<std::unique_ptr<Node>> roots;  // per program
  std::vector<uint8_t*> ptr;  // per slot: its address in the storage
  RunOptions run_options;
  uint8_t* storage_ = nullptr;
};

Engine::Engine(const Graph& graph, const program::Program& program, const OptionFlags& options)
    : Engine(graph, std::vector<program::Program>{program}, options) {}
Engine::Engine(const Graph& graph, const std::vector<program::Program>& programs, const OptionFlags& options)
    : impl_(std::make_unique<Impl>(graph, programs, options)) {}
Engine::~Engine() = default;

void Engine::run(unsigned program) { impl_->runProgram(program); }

namespace {
const Tensor& handleTensor(const std::map<std::string, Tensor>& handles, const std::string& handle, const char* what) {
  auto it = handles.find(handle);
  if (it == handles.end())
    invalid(std::string("Engine::") + what + ": no tensor has the handle '" + handle + "' (Graph::createHost" +
            (std::string(what) == "writeTensor" ? "Write" : "Read") + ")");
  return it->second;
}
}  // namespace

void Engine::writeTensor(const std::string& handle, const void* begin, const void* end) {
  const Tensor& t = handleTensor(impl_->g.host_writes, handle, "writeTensor");
  const size_t bytes = t.numElements() * dtypeSize(t.elementType());
  const size_t given = static_cast<size_t>(static_cast<const uint8_t*>(end) - static_cast<const uint8_t*>(begin));
  if (given != bytes)
    invalid("Engine::writeTensor('" + handle + "'): " + std::to_string(given) + " bytes given, the tensor " +
            impl_->g.describe(t) + " has " + std::to_string(bytes));
  impl_->scatter(t, static_cast<const uint8_t*>(begin));
}

void Engine::readTensor(const std::string& handle, void* begin, void* end) {
  const Tensor& t = handleTensor(impl_->g.host_reads, handle, "readTensor");
  const size_t bytes = t.numElements() * dtypeSize(t.elementType());
  const size_t given = static_cast<size_t>(static_cast<uint8_t*>(end) - static_cast<uint8_t*>(begin));
  if (given != bytes)
    invalid("Engine::readTensor('" + handle + "'): a buffer of " + std::to_string(given) + " bytes, the tensor " +
            impl_->g.describe(t) + " has " + std::to_string(bytes));
  impl_->gather(t, static_cast<uint8_t*>(begin));
}

namespace {
size_t streamIndex(const GraphState& g, const std::string& handle) {
  for (size_t i = 0; i < g.streams.size(); ++i)
    if (g.streams[i].handle == handle) return i;
  invalid("Engine::connectStream: no stream has the handle '" + handle + "'");
}
}  // namespace

void Engine::connectStream(const std::string& handle, void* begin, void* end) {
  const size_t i = streamIndex(impl_->g, handle);
  const StreamState& s = impl_->g.streams[i];
  const size_t entry = s.elements * dtypeSize(s.type);
  const size_t given = static_cast<size_t>(static_cast<uint8_t*>(end) - static_cast<uint8_t*>(begin));
  if (entry == 0 || given == 0 || given % entry != 0)
    invalid("Engine::connectStream('" + handle + "'): a buffer of " + std::to_string(given) +
            " bytes; it must hold "
            "whole entries of " +
            std::to_string(entry) + " bytes");
  impl_->streams[i] = Impl::StreamHost{static_cast<uint8_t*>(begin), static_cast<uint8_t*>(end), 0, nullptr};
}

void Engine::connectStreamToCallback(const std::string& handle, std::function<void(void*)> callback) {
  const size_t i = streamIndex(impl_->g, handle);
  impl_->streams[i] = Impl::StreamHost{nullptr, nullptr, 0, std::move(callback)};
}

void Engine::connectHostFunction(
    const std::string& handle,
    std::function<void(const std::vector<const void*>&, const std::vector<void*>&)> function) {
  for (size_t i = 0; i < impl_->g.host_functions.size(); ++i)
    if (impl_->g.host_functions[i].handle == handle) {
      impl_->host_functions[i] = std::move(function);
      return;
    }
  invalid("Engine::connectHostFunction: no host function has the handle '" + handle + "'");
}

const MemoryReport& Engine::memory() const { return impl_->memory; }
const RunProfile& Engine::profile() const { return impl_->profile; }

void Engine::printProfileSummary(std::ostream& out) const {
  const RunProfile& p = impl_->profile;
  const double hz = static_cast<double>(impl_->device().tile_clock_frequency);
  out << "Target: " << impl_->device().version << ", " << impl_->device().num_tiles << " tiles\n";
  out << "Memory: " << impl_->memory.total_bytes << " bytes in all; the fullest tile, " << impl_->memory.worst_tile
      << ", holds " << impl_->memory.worst_bytes << " of " << impl_->device().bytes_per_tile << "\n";
  out << "Cycles: " << p.total_cycles << " (" << std::fixed << std::setprecision(2)
      << static_cast<double>(p.total_cycles) / hz * 1e6 << " us): compute " << p.compute_cycles << ", exchange "
      << p.exchange_cycles << ", sync " << p.sync_cycles << ", " << p.supersteps << " supersteps\n";
  for (const StepProfile& s : p.steps)
    out << "  " << std::setw(4) << s.id << "  " << std::left << std::setw(16) << s.type << std::setw(28) << s.name
        << std::right << " x" << s.executions << "  " << (s.compute_cycles + s.exchange_cycles + s.sync_cycles)
        << " cycles\n";
}

}  // namespace poplar
}  // namespace ipu
