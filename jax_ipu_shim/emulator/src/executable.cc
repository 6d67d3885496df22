// Executable: compile = parse, lower, check memory; run = bind storage, execute the program tree, copy results.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "ipu/dtype.h"
#include "ipu/engine.h"
#include "ipu/host_io.h"
#include "ipu/json.h"
#include "ipu/lowering.h"
#include "ipu/memory.h"
#include "ipu/trace.h"

namespace ipu {

namespace {

struct Totals {
  uint64_t cycles = 0;
  uint64_t supersteps = 0;
  double flops = 0;
  Totals& operator+=(const Totals& x) {
    cycles += x.cycles;
    supersteps += x.supersteps;
    flops += x.flops;
    return *this;
  }
};

// Static estimate: every step once (loop bodies once, the costliest branch of a case).
Totals staticTotals(const Node& node) {
  Totals t;
  switch (node.kind) {
    case NodeKind::Sequence:
      for (const auto& c : node.children) t += staticTotals(*c);
      break;
    case NodeKind::Execute:
      for (const Superstep& s : node.supersteps) t.cycles += s.cost.total();
      t.supersteps = node.supersteps.size();
      t.flops = node.flops;
      break;
    case NodeKind::StreamCopy:
    case NodeKind::HostCall:
      t.cycles = node.cost.total();
      t.supersteps = 1;
      break;
    case NodeKind::Copy:
      if (!node.copies.empty()) {
        t.cycles = node.cost.total();
        t.supersteps = 1;
      }
      break;
    case NodeKind::RepeatWhileTrue:
      for (const auto& c : node.children) t += staticTotals(*c);
      t.cycles += node.cost.total();
      t.supersteps += 1;
      break;
    case NodeKind::Switch:
      for (const auto& c : node.children) {
        Totals x = staticTotals(*c);
        if (x.cycles >= t.cycles) t = x;
      }
      t.cycles += node.cost.total();
      t.supersteps += 1;
      break;
    case NodeKind::Repeat:  // (the graph API's; a loop body once, as above)
      t = staticTotals(*node.children[0]);
      t.cycles += node.cost.total();
      break;
  }
  return t;
}

// One execution of a step, as the static per-step table lists it.
Cost stepCost(const Node& node, uint64_t* supersteps) {
  if (node.kind != NodeKind::Execute) {
    *supersteps = 1;
    return node.cost;
  }
  Cost c;
  for (const Superstep& s : node.supersteps) {
    c.compute += s.cost.compute;
    c.exchange += s.cost.exchange;
    c.sync += s.cost.sync;
  }
  *supersteps = node.supersteps.size();
  return c;
}

std::string typeJson(const TensorType& t) {
  std::string s = "{\"dtype\": \"" + std::string(dtypeName(t.dtype)) + "\", \"shape\": [";
  for (size_t i = 0; i < t.shape.size(); ++i) s += (i ? ", " : "") + std::to_string(t.shape[i]);
  return s + "], \"bytes\": " + std::to_string(t.numBytes()) + "}";
}

// A lowered program; immutable after construction, so run() only touches its own RunState.
class ExecutableImpl : public Executable {
 public:
  ExecutableImpl(const Program& program, const DeviceDescription& device, std::string json,
                 const CompileOptions& options)
      : name_(program.name), json_(std::move(json)), options_(options), replicas_(program.replicas),
        partitions_(program.partitions), param_shardings_(program.param_shardings),
        result_shardings_(program.result_shardings), partitioned_hlo_(program.partitioned_hlo) {
    {
      Lowerer lowerer(program, device, options,
                      &graph_);  // kernels compute program.numerics' arithmetic (ipu/numerics.h)
      lowerer.lowerEntry();
    }
    aliases_ = program.aliases;
    markDonatedResults(&graph_, aliases_);
    for (int slot : graph_.param_slots) inputs_.push_back(graph_.slots[static_cast<size_t>(slot)].type);
    outputs_ = graph_.result_types;
    memory_ = computeMemory(graph_);
    checkMemory(memory_, device, options.allow_out_of_memory);
    totals_ = staticTotals(*graph_.root);
    // When a param's bytes are last read, for writing results straight into a donated input's buffer. A param
    // returned as a result is read when the run copies its results out, after every step.
    const int64_t after_all = static_cast<int64_t>(graph_.steps.size()) + 1;
    for (int slot : graph_.param_slots)
      param_last_.push_back(liveRange(graph_, graph_.slots[static_cast<size_t>(slot)]).second);
    for (int slot : graph_.result_slots)
      for (size_t i = 0; i < graph_.param_slots.size(); ++i)
        if (graph_.param_slots[i] == slot) param_last_[i] = after_all;
    // Results whose op is a donated input's last read and updates it in place (a scatter into a donated table).
    for (size_t j = 0; j < graph_.result_slots.size(); ++j)
      for (size_t i = 0; i < graph_.param_slots.size(); ++i)
        if (param_last_[i] == graph_.slots[static_cast<size_t>(graph_.result_slots[j])].def &&
            updatesInPlace(graph_, graph_.param_slots[i], graph_.result_slots[j]))
          in_place_.emplace_back(i, j);
    host_io_ = hostIOUse(*graph_.root);
    for (size_t i = 0; i < graph_.slots.size(); ++i) {
      const Slot& s = graph_.slots[i];
      if (s.storage == Slot::Storage::Param)
        param_slot_index_.emplace_back(static_cast<int>(i), static_cast<size_t>(s.index));
      if (s.storage == Slot::Storage::Arena) arena_slot_offset_.emplace_back(static_cast<int>(i), s.offset);
      if (s.storage == Slot::Storage::Arena && s.share >= 0) {
        size_t root = i;
        while (graph_.slots[root].share >= 0) root = static_cast<size_t>(graph_.slots[root].share);
        if (std::count(graph_.result_slots.begin(), graph_.result_slots.end(), static_cast<int>(root)))
          sharers_.emplace_back(static_cast<int>(root), static_cast<int>(i));
      }
    }
  }

  const std::string& name() const override { return name_; }
  const DeviceDescription& device() const override { return graph_.device; }
  const std::vector<TensorType>& inputTypes() const override { return inputs_; }
  const std::vector<TensorType>& outputTypes() const override { return outputs_; }
  const std::vector<std::pair<int, int>>& aliases() const override { return aliases_; }
  const MemoryReport& memory() const override { return memory_; }
  uint64_t estimatedCycles() const override { return totals_.cycles; }
  double flops() const override { return totals_.flops; }

  std::string infoJson() const override {
    std::string s = "{\"name\": " + json::quote(name_) + ", \"device\": " + graph_.device.toJson() + ", \"inputs\": [";
    for (size_t i = 0; i < inputs_.size(); ++i) s += (i ? ", " : "") + typeJson(inputs_[i]);
    s += "], \"outputs\": [";
    for (size_t i = 0; i < outputs_.size(); ++i) s += (i ? ", " : "") + typeJson(outputs_[i]);
    s += "], \"aliases\": [";
    for (size_t i = 0; i < aliases_.size(); ++i)
      s += (i ? ", [" : "[") + std::to_string(aliases_[i].first) + ", " + std::to_string(aliases_[i].second) + "]";
    int tiles_used = 0;
    std::vector<std::pair<int64_t, int>> top;
    for (size_t t = 0; t < memory_.bytes_per_tile.size(); ++t) {
      if (memory_.bytes_per_tile[t] > 0) ++tiles_used;
      top.emplace_back(-memory_.bytes_per_tile[t], static_cast<int>(t));
    }
    std::sort(top.begin(), top.end());
    s += "], \"memory\": {\"bytes_per_tile_limit\": " + std::to_string(graph_.device.bytes_per_tile) +
         ", \"worst_tile\": " + std::to_string(memory_.worst_tile) +
         ", \"worst_bytes\": " + std::to_string(memory_.worst_bytes) +
         ", \"total_bytes\": " + std::to_string(memory_.total_bytes) +
         ", \"tiles_used\": " + std::to_string(tiles_used) + ", \"top_tiles\": [";
    for (size_t i = 0; i < top.size() && i < 8 && top[i].first < 0; ++i)
      s += (i ? ", [" : "[") + std::to_string(top[i].second) + ", " + std::to_string(-top[i].first) + "]";
    s += "]}, \"estimated_cycles\": " + std::to_string(totals_.cycles) +
         ", \"estimated_seconds\": " + seconds(totals_.cycles) +
         ", \"static_supersteps\": " + std::to_string(totals_.supersteps) +
         ", \"flops\": " + std::to_string(totals_.flops) + ", \"codelets\": [";
    for (size_t i = 0; i < graph_.codelet_names.size(); ++i)
      s += (i ? ", " : "") + json::quote(graph_.codelet_names[i]);
    // Host memory of a run: the arena holds every intermediate value, placed by live range.
    size_t slot_bytes = 0;
    for (const Slot& slot : graph_.slots)
      if (slot.storage == Slot::Storage::Arena) slot_bytes += slot.type.numBytes();
    s += "], \"host\": {\"arena_bytes\": " + std::to_string(graph_.arena_bytes) +
         ", \"peak_live_bytes\": " + std::to_string(graph_.peak_live_bytes) +
         ", \"intermediate_bytes\": " + std::to_string(slot_bytes) +
         ", \"scratch_buffers\": " + std::to_string(graph_.num_scratch) + "}, \"steps\": [";
    // The static per-step table: one execution of every step (loop bodies once, every branch of a Switch).
    const std::vector<StepProfile> steps = staticSteps();
    for (size_t i = 0; i < steps.size(); ++i) {
      const StepProfile& st = steps[i];
      s += (i ? ", " : "") + std::string("{\"id\": ") + std::to_string(st.id) + ", \"type\": " + json::quote(st.type) +
           ", \"name\": " + json::quote(st.name) + ", \"loc\": " + json::quote(st.loc) +
           ", \"cycles\": " + std::to_string(st.compute_cycles + st.exchange_cycles + st.sync_cycles) +
           ", \"compute_cycles\": " + std::to_string(st.compute_cycles) +
           ", \"exchange_cycles\": " + std::to_string(st.exchange_cycles) +
           ", \"sync_cycles\": " + std::to_string(st.sync_cycles) +
           ", \"supersteps\": " + std::to_string(st.supersteps) +
           ", \"flops\": " + std::to_string(graph_.step_nodes[i]->flops) +
           (graph_.step_nodes[i]->emulated_64bit ? ", \"emulated_64bit\": true}" : "}");
    }
    return s + "]}";
  }

  std::vector<StepProfile> staticSteps() const override {
    std::vector<StepProfile> steps;
    for (const Node* n : graph_.step_nodes) {
      StepProfile st;
      const Cost c = stepCost(*n, &st.supersteps);
      st.id = n->id;
      st.type = nodeKindName(n->kind);
      st.name = n->name;
      st.loc = n->loc;
      st.executions = 1;
      st.compute_cycles = c.compute;
      st.exchange_cycles = c.exchange;
      st.sync_cycles = c.sync;
      steps.push_back(std::move(st));
    }
    return steps;
  }

  std::string profileJson() const override { return ipu::profileJson(graph_); }

  const std::string& programJson() const override { return json_; }
  const CompileOptions& options() const override { return options_; }
  bool hasInfeed() const override { return host_io_.infeed; }
  bool hasOutfeed() const override { return host_io_.outfeed; }
  bool hasHostCalls() const override { return host_io_.callbacks; }
  int numReplicas() const override { return replicas_; }
  int numPartitions() const override { return partitions_; }
  const std::vector<TileSharding>& paramShardings() const override { return param_shardings_; }
  const std::vector<TileSharding>& resultShardings() const override { return result_shardings_; }
  const std::string& partitionedHlo() const override { return partitioned_hlo_; }

  ~ExecutableImpl() override {
    for (auto& spare : spare_states_) delete spare.exchange(nullptr);
  }

  RunProfile run(const std::vector<const void*>& inputs, const std::vector<void*>& outputs,
                 const RunOptions& options) const override {
    RunProfile profile;
    runInto(inputs, outputs, options, &profile);
    return profile;
  }

  void runInto(const std::vector<const void*>& inputs, const std::vector<void*>& outputs, const RunOptions& options,
               RunProfile* profile) const override {
    if (inputs.size() != inputs_.size() || outputs.size() != outputs_.size())
      throw Error(ErrorCode::InvalidArgument, "Executable '" + name_ + "' takes " + std::to_string(inputs_.size()) +
                                                  " inputs and " + std::to_string(outputs_.size()) + " outputs, not " +
                                                  std::to_string(inputs.size()) + " and " +
                                                  std::to_string(outputs.size()));
    for (size_t i = 0; i < inputs.size(); ++i)
      if (!inputs[i] && inputs_[i].numBytes() > 0)
        throw Error(ErrorCode::InvalidArgument, "input " + std::to_string(i) + " is null");
    for (size_t i = 0; i < outputs.size(); ++i)
      if (!outputs[i] && outputs_[i].numBytes() > 0)
        throw Error(ErrorCode::InvalidArgument, "output " + std::to_string(i) + " is null");
    try {
      // A previous run's storage (arena, scratch, slot pointers, step counters): fresh pages would cost a fault
      // each, and fresh vectors an allocation each, every run.
      std::unique_ptr<RunState> held = takeState();
      RunState& state = *held;
      state.options = &options;
      for (const auto& p : param_slot_index_)
        state.ptr[static_cast<size_t>(p.first)] = const_cast<uint8_t*>(static_cast<const uint8_t*>(inputs[p.second]));
      for (const auto& a : arena_slot_offset_) state.ptr[static_cast<size_t>(a.first)] = state.arena.get() + a.second;
      std::fill(state.dynamic.begin(), state.dynamic.end(), 0);
      uint64_t bound = 0;  // bit j: result j is computed in its output buffer (at most 64 results are tracked)
      for (size_t j = 0; j < outputs.size() && j < 64; ++j)
        if (bindable(j, inputs, outputs)) {
          const int r = graph_.result_slots[j];
          state.ptr[static_cast<size_t>(r)] = static_cast<uint8_t*>(outputs[j]);
          for (const auto& sh : sharers_)  // the loop's new values are computed in place in the output too
            if (sh.first == r) state.ptr[static_cast<size_t>(sh.second)] = static_cast<uint8_t*>(outputs[j]);
          bound |= uint64_t{1} << j;
        }
      const int64_t traced = options.trace ? trace::nowNs() : 0;  // PVTI_OPTIONS: a span per run
      {
        ScopedFlushDenormals flush;
        Executor(graph_, &state).run(*graph_.root);
      }
      stepsThatRan(state.profile, profile);
      if (traced)
        options.trace->record("Execute", name_, traced, trace::nowNs(),
                              "{\"replica\": " + std::to_string(options.replica) +
                                  ", \"cycles\": " + std::to_string(profile->total_cycles) + "}");
      copyResults(state, outputs, bound);
      giveState(std::move(held));
    } catch (const std::bad_alloc&) {
      throw Error(ErrorCode::ResourceExhausted, "Host out of memory while running '" + name_ + "' on the IPU emulator");
    }
  }

 private:
  std::string seconds(uint64_t cycles) const {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g",
                  static_cast<double>(cycles) / static_cast<double>(graph_.device.tile_clock_frequency));
    return buf;
  }

  // Whether result j can be computed straight in its output buffer instead of the arena: the output buffer is no
  // other output's, the slot is not written first by an earlier result, and when the buffer is a donated input's,
  // every read of that input comes before the result's first write.
  bool bindable(size_t j, const std::vector<const void*>& inputs, const std::vector<void*>& outputs) const {
    const int r = graph_.result_slots[j];
    const Slot& slot = graph_.slots[static_cast<size_t>(r)];
    if (slot.storage != Slot::Storage::Arena || slot.share >= 0 || slot.def < 0 || outputs_[j].numBytes() == 0 ||
        !outputs[j])
      return false;
    for (size_t k = 0; k < outputs.size(); ++k) {
      if (k != j && outputs[k] == outputs[j]) return false;
      if (k < j && graph_.result_slots[k] == r) return false;
    }
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i] == outputs[j] && param_last_[i] >= slot.def &&
          std::find(in_place_.begin(), in_place_.end(), std::make_pair(i, j)) == in_place_.end())
        return false;
    return true;
  }

  // Copies the results that were not computed in place into their output buffers. An output buffer may be a donated
  // input that another result is read from (a param returned as a result): only such results are staged.
  void copyResults(const RunState& state, const std::vector<void*>& outputs, uint64_t bound) const {
    auto isBound = [&](size_t j) { return j < 64 && (bound >> j & 1); };
    std::vector<std::vector<uint8_t>> staged;  // allocated only when a result must be staged
    for (size_t j = 0; j < outputs.size(); ++j) {
      const uint8_t* src = state.ptr[static_cast<size_t>(graph_.result_slots[j])];
      const size_t n = outputs_[j].numBytes();
      if (isBound(j) || n == 0) continue;
      for (size_t k = 0; k < outputs.size(); ++k)
        if (k != j && !isBound(k) && outputs[k] == src) {
          staged.resize(outputs.size());
          staged[j].assign(src, src + n);
          break;
        }
    }
    auto isStaged = [&](size_t j) { return j < staged.size() && !staged[j].empty(); };
    for (size_t j = 0; j < outputs.size(); ++j) {
      const uint8_t* src = state.ptr[static_cast<size_t>(graph_.result_slots[j])];
      const size_t n = outputs_[j].numBytes();
      if (isBound(j) || n == 0 || isStaged(j) || src == outputs[j]) continue;
      std::memcpy(outputs[j], src, n);
    }
    for (size_t j = 0; j < staged.size(); ++j)
      if (isStaged(j)) std::memcpy(outputs[j], staged[j].data(), staged[j].size());
  }

  // The run's totals and the steps that ran, in program order, with their names and source locations, into `out`
  // (reusing its vector and strings). The run's own step counters are zeroed for the next run that reuses them.
  void stepsThatRan(RunProfile& p, RunProfile* out) const {
    out->total_cycles = p.total_cycles;
    out->compute_cycles = p.compute_cycles;
    out->exchange_cycles = p.exchange_cycles;
    out->sync_cycles = p.sync_cycles;
    out->supersteps = p.supersteps;
    size_t ran = 0;
    for (const StepProfile& st : p.steps) ran += st.executions != 0;
    out->steps.resize(ran);
    size_t k = 0;
    for (size_t i = 0; i < p.steps.size() && i < graph_.step_nodes.size(); ++i) {
      StepProfile& c = p.steps[i];
      if (!c.executions) continue;
      const Node& n = *graph_.step_nodes[i];
      StepProfile& s = out->steps[k++];
      s.id = n.id;
      s.type = nodeKindName(n.kind);
      s.name = n.name;
      s.loc = n.loc;
      s.executions = c.executions;
      s.compute_cycles = c.compute_cycles;
      s.exchange_cycles = c.exchange_cycles;
      s.sync_cycles = c.sync_cycles;
      s.supersteps = c.supersteps;
      c.executions = c.compute_cycles = c.exchange_cycles = c.sync_cycles = c.supersteps = 0;
    }
    out->steps.resize(k);
    p.total_cycles = p.compute_cycles = p.exchange_cycles = p.sync_cycles = p.supersteps = 0;
  }

  // Host storage of one run, kept for the next (at most a couple: runs of one executable may overlap), in slots
  // taken and returned without a lock. Constant slots point at the executable's constants for good; params and
  // arena slots are bound by each run.
  std::unique_ptr<RunState> takeState() const {
    for (auto& spare : spare_states_)
      if (RunState* s = spare.exchange(nullptr, std::memory_order_acquire)) return std::unique_ptr<RunState>(s);
    auto s = std::make_unique<RunState>();
    s->arena.reset(new uint8_t[std::max<size_t>(graph_.arena_bytes, 1)]);  // not zeroed: every slot is written first
    s->ptr.assign(graph_.slots.size(), nullptr);
    for (size_t i = 0; i < graph_.slots.size(); ++i) {
      const Slot& slot = graph_.slots[i];
      if (slot.storage == Slot::Storage::Constant)
        s->ptr[i] = const_cast<uint8_t*>(graph_.constants[static_cast<size_t>(slot.index)].data());
    }
    s->scratch.resize(static_cast<size_t>(graph_.num_scratch));
    s->dynamic.assign(static_cast<size_t>(graph_.num_dynamic), 0);
    s->profile.steps.resize(graph_.step_nodes.size());
    return s;
  }
  void giveState(std::unique_ptr<RunState> s) const {
    s->options = nullptr;
    for (auto& spare : spare_states_) {
      RunState* expected = nullptr;
      if (spare.compare_exchange_strong(expected, s.get(), std::memory_order_release)) {
        s.release();
        return;
      }
    }
  }

  mutable std::atomic<RunState*> spare_states_[2] = {};
  std::string name_;
  std::string json_;
  CompileOptions options_;
  int replicas_;
  int partitions_;
  std::vector<TileSharding> param_shardings_, result_shardings_;
  std::string partitioned_hlo_;
  Graph graph_;
  std::vector<TensorType> inputs_, outputs_;
  std::vector<std::pair<int, int>> aliases_;
  MemoryReport memory_;
  Totals totals_;
  std::vector<int64_t> param_last_;  // per input: the last step that reads it (past the end if it is a result)
  std::vector<std::pair<size_t, size_t>> in_place_;  // (input, output): the output's op updates that input in place
  HostIOUse host_io_;
  std::vector<std::pair<int, size_t>> param_slot_index_;   // (slot, input index) of every param slot
  std::vector<std::pair<int, size_t>> arena_slot_offset_;  // (slot, arena offset) of every arena slot
  std::vector<std::pair<int, int>> sharers_;  // (result slot, slot sharing its bytes): bound to the output with it
};

}  // namespace

namespace {

std::string numberText(double v) {  // the shortest text that reads back as v
  char buf[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

}  // namespace

CompileOptions CompileOptions::parse(const std::string& text) {
  CompileOptions options;
  if (text.empty()) return options;
  const json::Value doc = json::parse(text);
  if (!doc.isObject()) throw Error(ErrorCode::InvalidArgument, "compile options must be a JSON object: " + text);
  for (const auto& field : doc.object) {
    if (field.first == "available_memory_proportion") {
      const bool number = field.second.kind == json::Value::Kind::Number;
      const double v = number ? field.second.number : -1;
      if (!(v > 0 && v <= 1))
        throw Error(ErrorCode::InvalidArgument,
                    "compile option 'available_memory_proportion' (poplin's availableMemoryProportion) must be a "
                    "number in (0, 1], not " +
                        (number ? numberText(v) : std::string(json::Value::kindName(field.second.kind))));
      options.available_memory_proportion = v;
      continue;
    }
    if (field.first == "partials_type") {
      const bool text = field.second.kind == json::Value::Kind::String;
      if (!text || (field.second.string != "half" && field.second.string != "float"))
        throw Error(
            ErrorCode::InvalidArgument,
            "compile option 'partials_type' (poplin's partialsType) must be \"half\" or \"float\", not " +
                (text ? "\"" + field.second.string + "\"" : std::string(json::Value::kindName(field.second.kind))));
      options.half_partials = field.second.string == "half";
      continue;
    }
    bool* target = field.first == "fusion"                 ? &options.fusion
                   : field.first == "exchange_per_element" ? &options.exchange_per_element
                   : field.first == "allow_out_of_memory"  ? &options.allow_out_of_memory
                   : field.first == "emulate_64bit"        ? &options.emulate_64bit
                                                           : nullptr;
    if (target == nullptr)
      throw Error(ErrorCode::InvalidArgument, "unknown compile option '" + field.first +
                                                  "' (known: fusion, exchange_per_element, allow_out_of_memory, "
                                                  "emulate_64bit, available_memory_proportion, partials_type)");
    if (field.second.kind != json::Value::Kind::Bool)
      throw Error(ErrorCode::InvalidArgument, "compile option '" + field.first + "' must be true or false, not " +
                                                  json::Value::kindName(field.second.kind));
    *target = field.second.boolean;
  }
  return options;
}

std::string CompileOptions::toJson() const {
  auto b = [](bool v) { return v ? "true" : "false"; };
  std::string s = std::string("{\"fusion\":") + b(fusion) + ",\"exchange_per_element\":" + b(exchange_per_element) +
                  ",\"allow_out_of_memory\":" + b(allow_out_of_memory) + ",\"emulate_64bit\":" + b(emulate_64bit);
  if (available_memory_proportion > 0)
    s += ",\"available_memory_proportion\":" + numberText(available_memory_proportion);
  if (half_partials) s += ",\"partials_type\":\"half\"";
  return s + "}";
}

std::unique_ptr<Executable> Executable::compile(const std::string& program_json, const DeviceDescription& device,
                                                const CompileOptions& options) {
  try {
    const int64_t traced = options.trace ? trace::nowNs() : 0;  // PVTI_OPTIONS: a span per lowering
    Program program = parseProgram(program_json);
    auto executable = std::make_unique<ExecutableImpl>(program, device, program_json, options);
    if (traced) options.trace->record("Compile", "lower " + program.name + " onto tiles", traced, trace::nowNs(), "");
    return executable;
  } catch (const std::bad_alloc&) {
    throw Error(ErrorCode::ResourceExhausted, "Host out of memory while compiling for the IPU emulator");
  }
}

}  // namespace ipu
