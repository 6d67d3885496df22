// Lowering of a parsed program onto a device's tiles: slots, supersteps and the program tree.
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ipu/graph.h"
#include "ipu/program.h"
#include "ipu/registry.h"
#include "ipu/scalar_program.h"

namespace ipu {

// Value ids of one function instance (a call inlines its callee with a fresh environment).
struct Env {
  std::unordered_map<int64_t, int> slots;
  std::unordered_map<int64_t, const ValueDecl*> decls;
};

// What an op's handler (ipu/handlers.h) sees of the op: its operands' slots and types, its declared result types,
// where its steps go, and the environment of the region it is in (control ops lower their regions into it).
struct OpContext {
  const Op* op = nullptr;
  const OpInfo* info = nullptr;
  std::vector<int> in;              // operand slots
  std::vector<TensorType> in_types;
  std::vector<TensorType> out_types;
  std::string signature;            // "stablehlo.add(tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>"
  Node* seq = nullptr;              // the sequence the op's steps are appended to
  Env* env = nullptr;               // the values of the region being lowered
};

// An elementwise op on c64 values, or one of the complex family (real/imag/complex/fft) (complex.cc). Lowerer sends
// the first kind to complex.cc's handler whatever the op; the second have handlers of their own (registry rows).
bool isComplexOp(const OpContext& ctx);

// Lowers op by op, Poplar-style: every result gets a tile mapping, every op becomes supersteps (exchange, then a
// compute set partitioned by the output's tile mapping), and control flow becomes a program tree.
class Lowerer {
 public:
  Lowerer(const Program& program, const DeviceDescription& device, const CompileOptions& options, Graph* graph);
  void lowerEntry();

  // ---- the graph-building calls the op handlers (ipu/handlers.h) make ----
  const DeviceDescription& device() const { return device_; }
  Numerics numerics() const { return program_.numerics; }  // whose arithmetic the kernels compute (ipu/numerics.h)
  const CompileOptions& options() const { return options_; }
  // The element type `name` spells; throws Unimplemented ("Unsupported element type NAME in WHERE : why" + after)
  // when this program may not hold it on this chip: unknown, 64-bit with emulation off, fp8 on a chip without it.
  DType elementType(const std::string& name, const std::string& where, const std::string& after = "") const;
  Graph& graph() { return *graph_; }
  int newSlot(const TensorType& type);                 // linear mapping; its arena offset is set after lowering
  int newSlotLike(const TensorType& type, int like);   // the mapping of `like` when it has as many elements
  int newConstant(const TensorType& type, std::vector<uint8_t> bytes);
  // A kernel scratch buffer. Scratch holds something only while its node runs, so every op numbers its scratch from
  // 0 again: a run has as many scratch buffers as the op that needs the most, not one per op.
  int newScratch() {
    graph_->num_scratch = std::max(graph_->num_scratch, op_scratch_ + 1);
    return op_scratch_++;
  }
  int newDynamic(int count) {
    int i = graph_->num_dynamic;
    graph_->num_dynamic += count;
    return i;
  }

  // Per-tile bytes each tile of `work` receives to read operand `slot` at the same element indices.
  void exchangeSameIndex(std::vector<int64_t>* recv, const TileMapping& work, int slot) const;
  // ... to read one element of `slot` (a scalar operand broadcast to every tile).
  void exchangeScalar(std::vector<int64_t>* recv, const TileMapping& work, int slot) const;
  // ... to read in[base + sum_d idx_d(i) * strides[d]] for each output i of `shape` (broadcast, transpose, slice,
  // reverse): the same bytes as exchangeGather with that source, counted per tile interval and row, not per element.
  void exchangeStrided(std::vector<int64_t>* recv, const TileMapping& work, int slot, const std::vector<int64_t>& shape,
                       const std::vector<int64_t>& strides, int64_t base) const;
  // ... to read the elements src(i) for each output i (distinct elements counted once per tile); src < 0: none.
  void exchangeGather(std::vector<int64_t>* recv, const TileMapping& work, int slot,
                      const std::function<int64_t(int64_t)>& src) const;

  // A superstep over `work`: cost = max over tiles of compute(tile, elements) + exchange(recv[tile]) + sync.
  // Also records the tiles' vertex state, codelet and receive buffers for the memory report.
  Superstep superstep(const std::string& codelet, const TileMapping& work, const std::vector<int64_t>& recv,
                      const std::function<uint64_t(int, int64_t)>& compute_cycles, bool computes = true);
  // Appends an Execute node that runs `supersteps` with `kernel`; operands are used and results defined by it.
  Node* emitExecute(OpContext& ctx, std::unique_ptr<Kernel> kernel, std::vector<Superstep> supersteps,
                    const std::vector<int>& results, double flops);
  // Appends a Copy node (staged through temporaries when a destination is also a source).
  Node* emitCopy(Node* seq, const std::vector<std::pair<int, int>>& copies, const std::string& name);

  int64_t currentStep() const { return static_cast<int64_t>(graph_->steps.size()); }
  void use(int slot);
  void define(int slot);
  [[noreturn]] void invalid(const OpContext& ctx, const std::string& why) const;
  [[noreturn]] void unimplemented(const OpContext& ctx, const std::string& why) const;
  // Compiles an op's region (a reduce body, comparator, update computation...) into a scalar program. Its errors
  // become the op's: an unimplemented one stays Unimplemented, anything else is a malformed program; `where` ("in
  // the body") prefixes the message, of unimplemented ones too when `name_unimplemented`.
  ScalarProgram compileBody(const OpContext& ctx, const Region& region, const std::vector<DType>& params,
                            const std::vector<DType>& results, const std::string& where,
                            bool name_unimplemented = false) const;

  // Lowers a region's ops into `seq` with the given environment; returns the slots of its results.
  std::vector<int> lowerRegion(const Region& region, Env* env, Node* seq);
  // Elementwise ops in program order, the last one the root, as one fused compute set (elementwise.cc).
  int lowerElementwiseGroup(std::vector<OpContext>& members);
  const Program& program() const { return program_; }
  // The step the next superstep() call records: a handler whose supersteps share buffers adjusts its transient
  // bytes per tile (ipu/memory.h).
  StepRecord& pendingStep() { return pending_; }
  // The program's function `name`, or null (a call's callee).
  const Function* function(const std::string& name) const { return program_.find(name); }
  // The callees being lowered, outermost first: a call of one of them is recursion, which the IPU cannot run.
  std::vector<std::string>& callStack() { return call_stack_; }
  // Matmul plans this compile has chosen, by their inputs (dot.cc): a model's layers repeat their shapes, and the
  // plan search is the costliest part of lowering a matmul. Each plan is a pure function of its key.
  std::map<std::vector<int64_t>, std::vector<int64_t>>& matmulPlans() { return matmul_plans_; }

 private:
  void lowerOp(const Op& op, Env* env, Node* seq);
  // lowerOp's two halves: the op's operands, types and registry checks; and recording its results' slots.
  OpContext prepareOp(const Op& op, Env* env, Node* seq);
  void bindResults(const OpContext& ctx, const std::vector<int>& results, Env* env);
  // A fusion group (ipu/fusion.h): its members' intermediate results get no slot (-1 in the environment).
  void lowerFusedGroup(const Region& region, const std::vector<size_t>& members, Env* env, Node* seq);
  void numberSteps(Node* node);
  // The op's handler: its registry row's (ipu/handlers.h), or complex.cc's for c64 arithmetic of any op.
  std::vector<int> lowerWithHandler(OpContext& ctx);

  const Program& program_;
  DeviceDescription device_;
  CompileOptions options_;
  Graph* graph_;
  StepRecord pending_;  // transient bytes of the step being built
  std::vector<std::string> call_stack_;
  int op_scratch_ = 0;  // scratch ids the op being lowered has taken
  // The slots elementwise vertices wrote: values XLA:CPU computes inside a fused loop rather than loads of it
  // (elementwise.cc's llvmRank).
  std::unordered_set<int> elementwise_results_;
  std::map<std::vector<int64_t>, std::vector<int64_t>> matmul_plans_;
};

}  // namespace ipu
