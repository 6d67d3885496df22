// The emulator's graph API, in Poplar's vocabulary: build a graph of tensors mapped onto tiles and compute sets of
// vertices by hand, give it programs, and run them on the IPU Model with an Engine. This is what an IPU engineer
// writes against Poplar (graphcore/examples tutorials/poplar), minus the hardware:
//
//   namespace poplar = ipu::poplar;
//   poplar::Target target = poplar::IPUModel().createTarget();
//   poplar::Graph graph(target);
//   poplar::Tensor x = graph.addVariable(poplar::FLOAT, {4}, "x");
//   graph.setTileMapping(x, 0);
//   poplar::ComputeSet cs = graph.addComputeSet("square");
//   poplar::VertexRef v = graph.addVertex(cs, "popops::multiply", {{"in1", x}, {"in2", x}, {"out", x}});
//   graph.setTileMapping(v, 0);
//   graph.createHostWrite("x", x);
//   graph.createHostRead("x", x);
//   poplar::Engine engine(graph, poplar::program::Execute(cs));
//   engine.writeTensor("x", in, in + 4);
//   engine.run(0);
//   engine.readTensor("x", out, out + 4);
//
// Results are computed for real, every tile's memory is checked when the Engine is made ("Out of memory on tile N"),
// and a run's time is estimated in IPU cycles, superstep by superstep: the exchange each tile's vertices need, the
// busiest tile's compute (its vertices shared among its worker contexts) and the sync.
//
// Vertices are named codelets. The built-in ones are popops' elementwise and reduction codelets, one per op of the
// registry (ipu/registry.h), named "popops::<op>": the same kernels and cycle estimates the StableHLO lowering uses.
// A program adds its own with Graph::addCodelet (a C++ function and its cycle estimate), or Graph::addCodelets (a
// library of poplar::Vertex classes, ipu/codelet_library.h).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "ipu/emulator.h"

namespace ipu {
namespace poplar {

// Element types, by Poplar's names.
using Type = DType;
constexpr Type BOOL = DType::Bool;
constexpr Type CHAR = DType::I8;
constexpr Type UNSIGNED_CHAR = DType::U8;
constexpr Type SHORT = DType::I16;
constexpr Type UNSIGNED_SHORT = DType::U16;
constexpr Type INT = DType::I32;
constexpr Type UNSIGNED_INT = DType::U32;
constexpr Type HALF = DType::F16;
constexpr Type FLOAT = DType::F32;

// Poplar's OptionFlags: option names and values as text. The Engine reads:
//   debug.allowOutOfMemory   "true"/"false": make the Engine even where a tile's memory is exceeded (for reports)
//   emulator.hostThreads     "1".."256": host threads that run the tiles' vertices (default 1: the calling thread;
//                            a compute set with little work per tile runs on the calling thread, as the executor's
//                            steps do)
// Any other name is refused, naming it.
using OptionFlags = std::map<std::string, std::string>;

// The target: one IPU of the IPU Model (every hardware parameter lives in its DeviceDescription).
class Target {
 public:
  explicit Target(DeviceDescription device) : device_(std::move(device)) {}
  const DeviceDescription& device() const { return device_; }
  unsigned getNumIPUs() const { return 1; }
  unsigned getNumTiles() const { return static_cast<unsigned>(device_.num_tiles); }
  unsigned getTilesPerIPU() const { return static_cast<unsigned>(device_.num_tiles); }
  uint64_t getBytesPerTile() const { return static_cast<uint64_t>(device_.bytes_per_tile); }
  unsigned getNumWorkerContexts() const { return static_cast<unsigned>(device_.num_worker_contexts); }
  double getTileClockFrequency() const { return static_cast<double>(device_.tile_clock_frequency); }
  unsigned getTypeSize(Type type) const { return static_cast<unsigned>(dtypeSize(type)); }

 private:
  DeviceDescription device_;
};

// Poplar's IPUModel: the parameters of the modelled IPU. Zero means the chip's own value (ipu/emulator.h's device
// table for `version`).
struct IPUModel {
  std::string version = "ipu2";  // "ipu1", "ipu2" (Mk2 GC200), "ipu21"
  unsigned numIPUs = 1;          // the graph API models one IPU
  unsigned tilesPerIPU = 0;
  uint64_t memoryBytesPerTile = 0;
  unsigned numWorkerContexts = 0;
  double tileClockFrequency = 0;     // Hz: what a run's cycles take in time (profile summaries)
  double exchangeBytesPerCycle = 0;  // per tile: what a superstep's exchange costs
  unsigned globalSyncCycles = 0;     // one sync of every tile: what each superstep's end costs
  // Throws Error(InvalidArgument) naming a parameter out of range.
  Target createTarget() const;
};

class Graph;
struct GraphState;

// Half-open range of elements, as Poplar's Interval.
struct Interval {
  size_t begin_ = 0, end_ = 0;
  size_t begin() const { return begin_; }
  size_t end() const { return end_; }
  size_t size() const { return end_ - begin_; }
  bool operator==(const Interval& o) const { return begin_ == o.begin_ && end_ == o.end_; }
};

// A view of elements of the graph's variables and constants, in row-major order. Views share the elements they show:
// a slice, reshape, dimShuffle or broadcast of a tensor connects a vertex to those same elements.
class Tensor {
 public:
  Tensor() = default;
  Type elementType() const { return type_; }
  const std::vector<size_t>& shape() const { return shape_; }
  unsigned rank() const { return static_cast<unsigned>(shape_.size()); }
  size_t dim(unsigned i) const;
  size_t numElements() const { return ids_ ? ids_->size() : 0; }
  bool valid() const { return ids_ != nullptr; }

  Tensor slice(size_t begin, size_t end, unsigned dimension = 0) const;
  Tensor slice(const std::vector<size_t>& begin, const std::vector<size_t>& end) const;
  Tensor operator[](size_t i) const;  // the i-th slice along dimension 0, that dimension removed
  Tensor index(const std::vector<size_t>& indices) const;
  Tensor reshape(const std::vector<size_t>& shape) const;
  Tensor flatten() const { return reshape({numElements()}); }
  Tensor dimShuffle(const std::vector<unsigned>& permutation) const;
  Tensor transpose() const;                                 // rank 2
  Tensor broadcast(unsigned times, unsigned dimension) const;  // the tensor repeated `times` along `dimension`
  Tensor expand(const std::vector<size_t>& indices) const;  // inserts dimensions of 1 at these positions
  Tensor squeeze(const std::vector<size_t>& dimensions) const;
  Tensor reverse(unsigned dimension) const;
  std::string shapeToString() const;  // "[2,3]"

  // The elements, as ids in the graph's element space (what vertices and copies connect to).
  const std::vector<int64_t>& elements() const;

 private:
  friend class Graph;
  friend Tensor concat(const std::vector<Tensor>& tensors, unsigned dimension);
  Tensor(const GraphState* owner, Type type, std::vector<size_t> shape, std::vector<int64_t> ids);
  Tensor view(std::vector<size_t> shape, std::vector<int64_t> ids) const;
  const GraphState* owner_ = nullptr;
  Type type_ = DType::F32;
  std::vector<size_t> shape_;
  std::shared_ptr<const std::vector<int64_t>> ids_;
};

Tensor concat(const std::vector<Tensor>& tensors, unsigned dimension = 0);
inline Tensor concat(const Tensor& a, const Tensor& b, unsigned dimension = 0) { return concat({a, b}, dimension); }

class ComputeSet {
 public:
  ComputeSet() = default;
  unsigned getId() const { return id_; }

 private:
  friend class Graph;
  explicit ComputeSet(unsigned id) : id_(id) {}
  unsigned id_ = ~0u;
};

class VertexRef;
// A field of a vertex: connect a tensor to it (Graph::connect), or give it a value (Graph::setInitialValue).
class FieldRef {
 public:
  const std::string& name() const { return name_; }
  unsigned vertex() const { return vertex_; }

 private:
  friend class VertexRef;
  FieldRef(unsigned vertex, std::string name) : vertex_(vertex), name_(std::move(name)) {}
  unsigned vertex_;
  std::string name_;
};

class VertexRef {
 public:
  VertexRef() = default;
  unsigned getId() const { return id_; }
  FieldRef operator[](const std::string& field) const { return FieldRef(id_, field); }

 private:
  friend class Graph;
  explicit VertexRef(unsigned id) : id_(id) {}
  unsigned id_ = ~0u;
};

// ---- Codelets: what a vertex computes, and how long it takes ----

enum class FieldDirection { Input, Output, InOut };

struct FieldSpec {
  std::string name;
  FieldDirection direction = FieldDirection::Input;
  bool value = false;  // a scalar the vertex is given (Graph::setInitialValue), not a connected tensor
};

// One vertex's fields as it runs: each connected field's elements gathered into a contiguous buffer (outputs are
// scattered back after compute), and the values of its value fields.
struct VertexData {
  struct Field {
    Type type = DType::F32;
    size_t size = 0;  // elements
    void* data = nullptr;
  };
  std::map<std::string, Field> fields;
  std::map<std::string, double> values;
  const Field& operator[](const std::string& name) const { return fields.at(name); }
  template <class T>
  T* data(const std::string& name) const {
    return static_cast<T*>(fields.at(name).data);
  }
};

// A codelet: its fields, a check of one vertex's connections made when the Engine is made (return an error text, or
// "" when they are fine), what it computes, and its cycle estimate for one worker (Poplar's setPerfEstimate /
// getCyclesEstimate: a tile runs its vertices on its worker contexts, 6 tile cycles per worker cycle).
struct Codelet {
  std::vector<FieldSpec> fields;
  std::function<std::string(const VertexData&)> check;
  std::function<void(const VertexData&)> compute;
  std::function<uint64_t(const VertexData&)> cycles;
};

// The built-in codelets' names ("popops::add", "popops::exponential", "popops::reduce_add", ...).
std::vector<std::string> builtinCodelets();

// ---- Streams and host functions ----

class DataStream {
 public:
  DataStream() = default;
  const std::string& handle() const { return handle_; }

 private:
  friend class Graph;
  DataStream(std::string handle, unsigned id) : handle_(std::move(handle)), id_(id) {}
  std::string handle_;
  unsigned id_ = ~0u;

 public:
  unsigned id() const { return id_; }
};

class HostFunction {
 public:
  HostFunction() = default;
  const std::string& handle() const { return handle_; }
  unsigned id() const { return id_; }

 private:
  friend class Graph;
  HostFunction(std::string handle, unsigned id) : handle_(std::move(handle)), id_(id) {}
  std::string handle_;
  unsigned id_ = ~0u;
};

class Function {
 public:
  Function() = default;
  unsigned id() const { return id_; }

 private:
  friend class Graph;
  explicit Function(unsigned id) : id_(id) {}
  unsigned id_ = ~0u;
};

// ---- Programs (Poplar's program classes): values that share their node, as in Poplar ----

namespace program {

struct Node;

class Program {
 public:
  const std::shared_ptr<Node>& node() const { return node_; }

 protected:
  Program() = default;
  explicit Program(std::shared_ptr<Node> node) : node_(std::move(node)) {}
  std::shared_ptr<Node> node_;
};

class Sequence : public Program {
 public:
  Sequence();
  Sequence(std::initializer_list<Program> programs);
  void add(const Program& program);
};

class Execute : public Program {
 public:
  explicit Execute(ComputeSet cs);
};

// Copies src's elements into dst's (the same element count and type), over the exchange; or a stream copy: the next
// entry of a host-to-device stream into dst, or src onto a device-to-host stream.
class Copy : public Program {
 public:
  Copy(const Tensor& src, const Tensor& dst);
  Copy(const DataStream& stream, const Tensor& dst);
  Copy(const Tensor& src, const DataStream& stream);
};

class Repeat : public Program {
 public:
  Repeat(unsigned count, const Program& body);
};

// Runs cond, then body while the predicate (a scalar bool or integer, written by cond) is nonzero.
class RepeatWhileTrue : public Program {
 public:
  RepeatWhileTrue(const Program& cond, const Tensor& predicate, const Program& body);
};

class If : public Program {
 public:
  If(const Tensor& predicate, const Program& then_body, const Program& else_body = Sequence());
};

// Runs the case whose value the control (a scalar integer) has, or the default.
class Switch : public Program {
 public:
  explicit Switch(const Tensor& control, const Program& default_body = Sequence());
  Switch& add(int32_t value, const Program& body);
};

// Calls a function of the graph (Graph::addFunction), or a host function (Graph::addHostFunction) with these inputs
// and outputs.
class Call : public Program {
 public:
  explicit Call(const Function& function);
  Call(const HostFunction& function, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs);
};

// A sync of every tile: what a Poplar Sync(SyncType::INTERNAL) costs.
class Sync : public Program {
 public:
  Sync();
};

}  // namespace program

// ---- The graph ----

class Graph {
 public:
  explicit Graph(const Target& target);
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  const Target& getTarget() const;

  Tensor addVariable(Type type, const std::vector<size_t>& shape, const std::string& name = "");
  // A constant of `values` (numElements elements of `type`, little-endian, as the type stores them).
  Tensor addConstant(Type type, const std::vector<size_t>& shape, const void* values, const std::string& name = "");
  // A constant of one value (converted to `type`), in every element.
  Tensor addConstant(Type type, const std::vector<size_t>& shape, double value, const std::string& name = "");

  // Maps every element of `t` (a view: the elements it shows) to `tile`.
  void setTileMapping(const Tensor& t, unsigned tile);
  // Per tile, the intervals of t's flattened elements it holds (Poplar's Graph::TileToTensorMapping); an unmapped
  // element is on no tile.
  std::vector<std::vector<Interval>> getTileMapping(const Tensor& t) const;

  ComputeSet addComputeSet(const std::string& name = "");
  // A vertex of `codelet` (a built-in codelet or one added by addCodelet); throws Error naming an unknown one.
  VertexRef addVertex(ComputeSet cs, const std::string& codelet);
  VertexRef addVertex(ComputeSet cs, const std::string& codelet,
                      std::initializer_list<std::pair<std::string, Tensor>> connections);
  void connect(const FieldRef& field, const Tensor& t);
  void setInitialValue(const FieldRef& field, double value);
  void setTileMapping(const VertexRef& v, unsigned tile);
  // Overrides the codelet's cycle estimate for this vertex (worker cycles), as Poplar's setPerfEstimate.
  void setPerfEstimate(const VertexRef& v, uint64_t cycles);

  void addCodelet(const std::string& name, Codelet codelet);
  // Adds every codelet of a library compiled from poplar::Vertex classes (Poplar's addCodelets; here the source is
  // compiled by jax_ipu.codelets.compile_codelets, and the path is the shared library it gives). Returns their names.
  std::vector<std::string> addCodelets(const std::string& library);

  DataStream addHostToDeviceFIFO(const std::string& handle, Type type, size_t numElements);
  DataStream addDeviceToHostFIFO(const std::string& handle, Type type, size_t numElements);
  // Tensors the host reads and writes by handle between runs (Engine::readTensor / writeTensor).
  void createHostWrite(const std::string& handle, const Tensor& t);
  void createHostRead(const std::string& handle, const Tensor& t);
  HostFunction addHostFunction(const std::string& handle, const std::vector<std::pair<Type, size_t>>& inputs,
                               const std::vector<std::pair<Type, size_t>>& outputs);
  Function addFunction(const program::Program& program);

  const GraphState& state() const { return *state_; }

 private:
  std::unique_ptr<GraphState> state_;
};

// poputil::mapTensorLinearly: the flattened tensor cut into runs of whole grains, tile 0 first, at least
// minElementsPerTile elements per tile used (0: the linear mapping the StableHLO lowering gives its tensors).
void mapTensorLinearly(Graph& graph, const Tensor& t, size_t minElementsPerTile = 0, size_t grainSize = 1);

// poplar::cycleCount: times `prog` (wraps what it holds so far); returns an unsigned int[2] tensor on `tile` that
// holds the cycles it took (low word first) once it has run.
Tensor cycleCount(Graph& graph, program::Sequence& prog, unsigned tile, const std::string& name = "");

// ---- The engine ----

class Engine {
 public:
  // Checks the graph (every vertex on a tile, every field connected as its codelet wants, every element used by a
  // program mapped, no two vertices of a compute set writing one element) and every tile's memory; throws Error
  // naming the vertex, field, tensor or tile.
  Engine(const Graph& graph, const program::Program& program, const OptionFlags& options = {});
  Engine(const Graph& graph, const std::vector<program::Program>& programs, const OptionFlags& options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  void run(unsigned program = 0);

  // Host access between runs, by the handles of createHostWrite / createHostRead.
  void writeTensor(const std::string& handle, const void* begin, const void* end);
  void readTensor(const std::string& handle, void* begin, void* end);
  // A stream's host side: a buffer of whole entries used in turn (a circular buffer, as Poplar's), or a callback that
  // fills (host-to-device) or takes (device-to-host) one entry.
  void connectStream(const std::string& handle, void* begin, void* end);
  void connectStreamToCallback(const std::string& handle, std::function<void(void*)> callback);
  void connectHostFunction(const std::string& handle,
                           std::function<void(const std::vector<const void*>&, const std::vector<void*>&)> function);

  // Per-tile memory (as the Engine was made: variables and constants, vertex state, code, exchange buffers).
  const MemoryReport& memory() const;
  // The last run: total cycles, the split, and a step per program step that ran.
  const RunProfile& profile() const;
  void printProfileSummary(std::ostream& out) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace poplar
}  // namespace ipu
