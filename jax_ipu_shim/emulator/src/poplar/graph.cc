// poplar::Graph: variables and constants in one element space with a tile per element, compute sets of vertices
// connected to views of them, streams, host functions and functions; and the program classes' constructors.
#include <algorithm>
#include <cstring>
#include <sstream>

#include "ipu/codelet_library.h"
#include "ipu/dtype.h"
#include "ipu/elementwise.h"
#include "ipu/mapping.h"
#include "state.h"

namespace ipu {
namespace poplar {

namespace {

[[noreturn]] void invalid(const std::string& what) { throw Error(ErrorCode::InvalidArgument, what); }

std::string number(double x) {  // as given: "-1", "2.5e+09", "nan"
  std::ostringstream out;
  out << x;
  return out.str();
}

size_t product(const std::vector<size_t>& shape) {
  size_t n = 1;
  for (size_t d : shape) n *= d;
  return n;
}

void checkType(Type type, const std::string& what) {
  if (type == DType::Token || isComplex(type))
    invalid(what + ": the element type " + dtypeName(type) +
            " is not one the IPU stores (use bool, char, short, "
            "int, their unsigned forms, half or float)");
}

}  // namespace

Target IPUModel::createTarget() const {
  if (numIPUs != 1)
    invalid("IPUModel.numIPUs = " + std::to_string(numIPUs) +
            ": the graph API models one IPU (several IPUs run "
            "through jax's pmap and sharding)");
  // Whole numbers, or 0 for the chip's own (a NaN or a fraction fails the comparison).
  const auto whole = [](double v, const char* name) {
    if (!(v >= 0 && v <= 1e15 && v == static_cast<double>(static_cast<int64_t>(v))))
      invalid(std::string("IPUModel.") + name + " = " + number(v) + ": a whole number (0 for the chip's own)");
    return static_cast<int64_t>(v);
  };
  ModelParameters model;
  model.version = version;
  model.num_tiles = tilesPerIPU;
  model.memory_bytes_per_tile = static_cast<int64_t>(std::min<uint64_t>(memoryBytesPerTile, uint64_t{1} << 62));
  model.num_worker_contexts = numWorkerContexts;
  model.tile_clock_frequency = whole(tileClockFrequency, "tileClockFrequency");
  model.exchange_bytes_per_cycle = whole(exchangeBytesPerCycle, "exchangeBytesPerCycle");
  model.global_sync_cycles = globalSyncCycles;
  return Target(DeviceDescription::forModel(model));
}

const Variable& GraphState::variableOf(int64_t id) const {
  auto it =
      std::upper_bound(variables.begin(), variables.end(), id, [](int64_t x, const Variable& v) { return x < v.base; });
  return *(it - 1);
}

std::string GraphState::describe(const Tensor& t) const {
  std::vector<std::string> names;
  bool whole = false;
  for (int64_t id : t.elements()) {
    const Variable& v = variableOf(id);
    const std::string n = v.name.empty() ? "(unnamed)" : v.name;
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
    if (names.size() > 3) break;
  }
  if (names.size() == 1 && !t.elements().empty()) {
    const Variable& v = variableOf(t.elements()[0]);
    whole = static_cast<int64_t>(t.numElements()) == v.count && t.elements()[0] == v.base;
  }
  std::string s = whole ? "" : "a view of ";
  for (size_t i = 0; i < names.size() && i < 3; ++i) s += (i ? ", '" : "'") + names[i] + "'";
  if (names.size() > 3) s += ", ...";
  return s + " (" + dtypeName(t.elementType()) + t.shapeToString() + ")";
}

Graph::Graph(const Target& target) : state_(std::make_unique<GraphState>(target)) {}
Graph::~Graph() = default;
const Target& Graph::getTarget() const { return state_->target; }

Tensor Graph::addVariable(Type type, const std::vector<size_t>& shape, const std::string& name) {
  checkType(type, "Graph::addVariable('" + name + "')");
  Variable v;
  v.name = name;
  v.type = type;
  v.shape = shape;
  v.base = state_->elements;
  v.count = static_cast<int64_t>(product(shape));
  state_->elements += v.count;
  state_->tile.resize(static_cast<size_t>(state_->elements), -1);
  std::vector<int64_t> ids(static_cast<size_t>(v.count));
  for (int64_t i = 0; i < v.count; ++i) ids[static_cast<size_t>(i)] = v.base + i;
  state_->variables.push_back(std::move(v));
  return Tensor(state_.get(), type, shape, std::move(ids));
}

Tensor Graph::addConstant(Type type, const std::vector<size_t>& shape, const void* values, const std::string& name) {
  Tensor t = addVariable(type, shape, name);
  Variable& v = state_->variables.back();
  v.constant = true;
  v.value.resize(static_cast<size_t>(v.count) * dtypeSize(type));
  if (!v.value.empty()) std::memcpy(v.value.data(), values, v.value.size());
  return t;
}

Tensor Graph::addConstant(Type type, const std::vector<size_t>& shape, double value, const std::string& name) {
  checkType(type, "Graph::addConstant('" + name + "')");
  std::vector<uint8_t> one(dtypeSize(type));
  // The value converted to `type` as a float -> type convert computes it (saturating, NaN -> 0 for integers).
  const float f = static_cast<float>(value);
  const void* args[1] = {&f};
  elementwiseBlock(opInfo(OpKind::Convert), DType::F32, type, Numerics::Jaxlib012)(args, one.data(), 1);
  std::vector<uint8_t> all(product(shape) * one.size());
  for (size_t i = 0; i < all.size(); i += one.size()) std::memcpy(all.data() + i, one.data(), one.size());
  return addConstant(type, shape, all.data(), name);
}

void Graph::setTileMapping(const Tensor& t, unsigned tile) {
  if (tile >= getTarget().getNumTiles())
    invalid("Graph::setTileMapping: tile " + std::to_string(tile) + " of " + state_->describe(t) +
            " is not one of "
            "the target's " +
            std::to_string(getTarget().getNumTiles()) + " tiles");
  for (int64_t id : t.elements()) state_->tile[static_cast<size_t>(id)] = static_cast<int32_t>(tile);
}

std::vector<std::vector<Interval>> Graph::getTileMapping(const Tensor& t) const {
  std::vector<std::vector<Interval>> mapping(getTarget().getNumTiles());
  const std::vector<int64_t>& ids = t.elements();
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t tile = state_->tile[static_cast<size_t>(ids[i])];
    if (tile < 0) continue;
    std::vector<Interval>& on = mapping[static_cast<size_t>(tile)];
    if (!on.empty() && on.back().end_ == i) ++on.back().end_;
    else on.push_back(Interval{i, i + 1});
  }
  return mapping;
}

ComputeSet Graph::addComputeSet(const std::string& name) {
  state_->compute_sets.push_back({name.empty() ? "cs" + std::to_string(state_->compute_sets.size()) : name, {}});
  return ComputeSet(static_cast<unsigned>(state_->compute_sets.size() - 1));
}

VertexRef Graph::addVertex(ComputeSet cs, const std::string& codelet) {
  if (cs.getId() >= state_->compute_sets.size()) invalid("Graph::addVertex: not a compute set of this graph");
  if (!state_->codelets.count(codelet) && !builtinCodelet(codelet))
    invalid("Graph::addVertex: unknown codelet '" + codelet +
            "': add it with Graph::addCodelet, or use a built-in "
            "one (popops::<op>: poplar::builtinCodelets() lists them)");
  Vertex v;
  v.codelet = codelet;
  v.compute_set = cs.getId();
  state_->vertices.push_back(std::move(v));
  const unsigned id = static_cast<unsigned>(state_->vertices.size() - 1);
  state_->compute_sets[cs.getId()].vertices.push_back(id);
  return VertexRef(id);
}

VertexRef Graph::addVertex(ComputeSet cs, const std::string& codelet,
                           std::initializer_list<std::pair<std::string, Tensor>> connections) {
  VertexRef v = addVertex(cs, codelet);
  for (const auto& c : connections) connect(v[c.first], c.second);
  return v;
}

void Graph::connect(const FieldRef& field, const Tensor& t) {
  if (field.vertex() >= state_->vertices.size()) invalid("Graph::connect: not a vertex of this graph");
  if (!t.valid()) invalid("Graph::connect: field '" + field.name() + "' given an empty tensor");
  state_->vertices[field.vertex()].connections[field.name()] = t;
}

void Graph::setInitialValue(const FieldRef& field, double value) {
  if (field.vertex() >= state_->vertices.size()) invalid("Graph::setInitialValue: not a vertex of this graph");
  state_->vertices[field.vertex()].values[field.name()] = value;
}

void Graph::setTileMapping(const VertexRef& v, unsigned tile) {
  if (v.getId() >= state_->vertices.size()) invalid("Graph::setTileMapping: not a vertex of this graph");
  if (tile >= getTarget().getNumTiles())
    invalid("Graph::setTileMapping: tile " + std::to_string(tile) + " of vertex " + std::to_string(v.getId()) +
            " is not one of the target's " + std::to_string(getTarget().getNumTiles()) + " tiles");
  state_->vertices[v.getId()].tile = static_cast<int>(tile);
}

void Graph::setPerfEstimate(const VertexRef& v, uint64_t cycles) {
  if (v.getId() >= state_->vertices.size()) invalid("Graph::setPerfEstimate: not a vertex of this graph");
  state_->vertices[v.getId()].perf_estimate = static_cast<int64_t>(cycles);
}

void Graph::addCodelet(const std::string& name, Codelet codelet) {
  if (builtinCodelet(name)) invalid("Graph::addCodelet: '" + name + "' is a built-in codelet");
  if (!codelet.compute) invalid("Graph::addCodelet('" + name + "'): the codelet has no compute function");
  state_->codelets[name] = std::move(codelet);
}

std::vector<std::string> Graph::addCodelets(const std::string& library) {
  std::vector<std::string> names;
  for (LibraryCodelet& c : loadCodeletLibrary(library)) {
    if (!c.codelet.cycles) {  // then each vertex needs Graph::setPerfEstimate
      const std::string name = c.name;
      c.codelet.cycles = [name](const VertexData&) -> uint64_t {
        throw Error(ErrorCode::InvalidArgument, "codelet '" + name +
                                                    "' has no cycle estimate: give the class a "
                                                    "cycles() member, or each of its vertices Graph::setPerfEstimate");
      };
    }
    names.push_back(c.name);
    addCodelet(c.name, std::move(c.codelet));
  }
  return names;
}

DataStream Graph::addHostToDeviceFIFO(const std::string& handle, Type type, size_t numElements) {
  checkType(type, "Graph::addHostToDeviceFIFO('" + handle + "')");
  for (const StreamState& s : state_->streams)
    if (s.handle == handle) invalid("Graph: a stream named '" + handle + "' exists already");
  state_->streams.push_back({handle, type, numElements, true});
  return DataStream(handle, static_cast<unsigned>(state_->streams.size() - 1));
}

DataStream Graph::addDeviceToHostFIFO(const std::string& handle, Type type, size_t numElements) {
  DataStream s = addHostToDeviceFIFO(handle, type, numElements);
  state_->streams.back().to_device = false;
  return s;
}

void Graph::createHostWrite(const std::string& handle, const Tensor& t) {
  if (state_->host_writes.count(handle)) invalid("Graph::createHostWrite: '" + handle + "' exists already");
  state_->host_writes[handle] = t;
}

void Graph::createHostRead(const std::string& handle, const Tensor& t) {
  if (state_->host_reads.count(handle)) invalid("Graph::createHostRead: '" + handle + "' exists already");
  state_->host_reads[handle] = t;
}

HostFunction Graph::addHostFunction(const std::string& handle, const std::vector<std::pair<Type, size_t>>& inputs,
                                    const std::vector<std::pair<Type, size_t>>& outputs) {
  for (const HostFunctionState& f : state_->host_functions)
    if (f.handle == handle) invalid("Graph::addHostFunction: '" + handle + "' exists already");
  state_->host_functions.push_back({handle, inputs, outputs});
  return HostFunction(handle, static_cast<unsigned>(state_->host_functions.size() - 1));
}

Function Graph::addFunction(const program::Program& program) {
  state_->functions.push_back(program);
  return Function(static_cast<unsigned>(state_->functions.size() - 1));
}

void mapTensorLinearly(Graph& graph, const Tensor& t, size_t minElementsPerTile, size_t grainSize) {
  const int64_t n = static_cast<int64_t>(t.numElements());
  const int tiles = static_cast<int>(graph.getTarget().getNumTiles());
  int64_t per_tile;
  if (minElementsPerTile == 0 && grainSize <= 1) {
    per_tile = TileMapping::linear(n, dtypeSize(t.elementType()), tiles).per_tile;
  } else {
    const int64_t grain = static_cast<int64_t>(std::max<size_t>(grainSize, 1));
    const int64_t grains = (n + grain - 1) / grain;
    per_tile = std::max<int64_t>((grains + tiles - 1) / tiles * grain, static_cast<int64_t>(minElementsPerTile));
    per_tile = (per_tile + grain - 1) / grain * grain;
  }
  const Tensor flat = t.flatten();
  for (int64_t b = 0, tile = 0; b < n; b += per_tile, ++tile)
    graph.setTileMapping(flat.slice(static_cast<size_t>(b), static_cast<size_t>(std::min(n, b + per_tile))),
                         static_cast<unsigned>(tile));
}

Tensor cycleCount(Graph& graph, program::Sequence& prog, unsigned tile, const std::string& name) {
  Tensor counter = graph.addVariable(UNSIGNED_INT, {2}, name.empty() ? "cycleCount" : name);
  graph.setTileMapping(counter, tile);
  // The stamp pairs a start with its end: the counter's first element id is unique in the graph.
  const int id = static_cast<int>(counter.elements()[0]);
  auto start = std::make_shared<program::Node>();
  start->kind = program::Kind::CycleStamp;
  start->stamp = id;
  start->dst = counter;
  auto end = std::make_shared<program::Node>(*start);
  end->stamp = -1 - id;
  program::Node& seq = *prog.node();
  struct Wrap : program::Program {
    explicit Wrap(std::shared_ptr<program::Node> n) : Program(std::move(n)) {}
  };
  seq.children.insert(seq.children.begin(), Wrap(start));
  seq.children.push_back(Wrap(end));
  return counter;
}

// ---- program classes ----

namespace program {

namespace {
std::shared_ptr<Node> make(Kind kind) {
  auto n = std::make_shared<Node>();
  n->kind = kind;
  return n;
}
void scalarControl(const Tensor& t, const char* what) {
  if (!t.valid() || t.numElements() != 1 || isFloat(t.elementType()))
    invalid(std::string("program::") + what + ": the control must be one element of bool or an integer type");
}
}  // namespace

Sequence::Sequence() : Program(make(Kind::Sequence)) {}
Sequence::Sequence(std::initializer_list<Program> programs) : Sequence() {
  for (const Program& p : programs) add(p);
}
void Sequence::add(const Program& program) { node_->children.push_back(program); }

Execute::Execute(ComputeSet cs) : Program(make(Kind::Execute)) { node_->compute_set = cs.getId(); }

Copy::Copy(const Tensor& src, const Tensor& dst) : Program(make(Kind::Copy)) {
  if (!src.valid() || !dst.valid() || src.numElements() != dst.numElements() || src.elementType() != dst.elementType())
    invalid("program::Copy: the source (" + std::string(dtypeName(src.elementType())) + src.shapeToString() +
            ") and destination (" + dtypeName(dst.elementType()) + dst.shapeToString() +
            ") must have the same element type and number of elements");
  node_->src = src;
  node_->dst = dst;
}
Copy::Copy(const DataStream& stream, const Tensor& dst) : Program(make(Kind::StreamToDevice)) {
  node_->dst = dst;
  node_->index = stream.id();
}
Copy::Copy(const Tensor& src, const DataStream& stream) : Program(make(Kind::StreamFromDevice)) {
  node_->src = src;
  node_->index = stream.id();
}

Repeat::Repeat(unsigned count, const Program& body) : Program(make(Kind::Repeat)) {
  node_->index = count;
  node_->children = {body};
}

RepeatWhileTrue::RepeatWhileTrue(const Program& cond, const Tensor& predicate, const Program& body)
    : Program(make(Kind::RepeatWhileTrue)) {
  scalarControl(predicate, "RepeatWhileTrue");
  node_->src = predicate;
  node_->children = {cond, body};
}

If::If(const Tensor& predicate, const Program& then_body, const Program& else_body) : Program(make(Kind::If)) {
  scalarControl(predicate, "If");
  node_->src = predicate;
  node_->children = {then_body, else_body};
}

Switch::Switch(const Tensor& control, const Program& default_body) : Program(make(Kind::Switch)) {
  scalarControl(control, "Switch");
  node_->src = control;
  node_->children = {default_body};
}
Switch& Switch::add(int32_t value, const Program& body) {
  if (std::find(node_->case_values.begin(), node_->case_values.end(), value) != node_->case_values.end())
    invalid("program::Switch::add: a case for " + std::to_string(value) + " exists already");
  node_->case_values.push_back(value);
  node_->children.push_back(body);
  return *this;
}

Call::Call(const Function& function) : Program(make(Kind::Call)) { node_->index = function.id(); }
Call::Call(const HostFunction& function, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs)
    : Program(make(Kind::HostCall)) {
  node_->index = function.id();
  node_->inputs = inputs;
  node_->outputs = outputs;
}

Sync::Sync() : Program(make(Kind::Sync)) {}

}  // namespace program

}  // namespace poplar
}  // namespace ipu
