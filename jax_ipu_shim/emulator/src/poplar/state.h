// What a poplar::Graph holds, shared by the graph API's files (not part of the public header).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ipu/poplar.h"

namespace ipu {
namespace poplar {

// A variable or constant: a block of the graph's element space [base, base + count).
struct Variable {
  std::string name;
  Type type = DType::F32;
  std::vector<size_t> shape;
  int64_t base = 0;
  int64_t count = 0;
  bool constant = false;
  std::vector<uint8_t> value;  // a constant's bytes
};

struct Vertex {
  std::string codelet;
  unsigned compute_set = 0;
  int tile = -1;
  std::map<std::string, Tensor> connections;
  std::map<std::string, double> values;
  int64_t perf_estimate = -1;  // setPerfEstimate's worker cycles; -1: the codelet's estimate
};

struct ComputeSetState {
  std::string name;
  std::vector<unsigned> vertices;
};

struct StreamState {
  std::string handle;
  Type type = DType::F32;
  size_t elements = 0;
  bool to_device = true;
};

struct HostFunctionState {
  std::string handle;
  std::vector<std::pair<Type, size_t>> inputs, outputs;
};

struct GraphState {
  explicit GraphState(Target t) : target(std::move(t)) {}
  Target target;
  std::vector<Variable> variables;
  int64_t elements = 0;        // the element space's size
  std::vector<int32_t> tile;   // per element: its tile, or -1 while unmapped
  std::vector<Vertex> vertices;
  std::vector<ComputeSetState> compute_sets;
  std::map<std::string, Codelet> codelets;  // added by addCodelet (the built-ins are looked up by name)
  std::vector<StreamState> streams;
  std::vector<HostFunctionState> host_functions;
  std::vector<program::Program> functions;
  std::map<std::string, Tensor> host_writes, host_reads;

  // The variable holding element `id`.
  const Variable& variableOf(int64_t id) const;
  // A tensor's description for messages: "'x' (float[2,3])" or "a view of 'x', 'y' (float[4])".
  std::string describe(const Tensor& t) const;
};

// The built-in codelet of this name, or null.
const Codelet* builtinCodelet(const std::string& name);

// A program node (Poplar's program classes).
namespace program {
enum class Kind {
  Sequence,
  Execute,
  Copy,
  StreamToDevice,
  StreamFromDevice,
  Repeat,
  RepeatWhileTrue,
  If,
  Switch,
  Call,
  HostCall,
  Sync,
  CycleStamp
};

struct Node {
  Kind kind = Kind::Sequence;
  std::vector<Program> children;  // Sequence: its steps; Repeat/RepeatWhileTrue: {body} / {cond, body}; If: {then,
                                  // else}; Switch: {default, cases...}; Call: none (function)
  std::vector<int32_t> case_values;  // Switch: one per case, after the default
  unsigned compute_set = 0;  // Execute
  Tensor src, dst;  // Copy; stream copies: the tensor; If/Switch/RepeatWhileTrue: src = control
  unsigned index = 0;  // stream, function or host function id; Repeat: the count
  std::vector<Tensor> inputs, outputs;  // HostCall
  int stamp = 0;  // CycleStamp: its id (a cycleCount's start), or -1 - id for its end
};
}  // namespace program

}  // namespace poplar
}  // namespace ipu
