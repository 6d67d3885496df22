// Execution: a host thread pool that stands in for the tiles, and the executor of the program tree.
#pragma once

#include <functional>
#include <memory>
#include <unordered_map>

#include "ipu/graph.h"

namespace ipu {

// Subnormal f32 results flush to zero and subnormal inputs read as zero while one is alive on a thread, as on
// XLA:CPU (which runs its kernels the same way), so that results match it bit for bit.
class ScopedFlushDenormals {
 public:
  ScopedFlushDenormals();
  ~ScopedFlushDenormals();
  ScopedFlushDenormals(const ScopedFlushDenormals&) = delete;
  ScopedFlushDenormals& operator=(const ScopedFlushDenormals&) = delete;

 private:
  unsigned saved_;
};

// How the executor runs a program tree, once the tree is complete and its steps numbered: the loops whose steps
// charge the same cycles every iteration, to be charged when the loop ends (Node::charged_at_end, Node::fixed), and
// the steps of a sequence that run row by row together (Node::row_chains).
void planRun(Node* node);

// Runs a program tree superstep by superstep against one run's storage, accumulating the cycle profile.
class Executor {
 public:
  Executor(const Graph& graph, RunState* state);
  ~Executor();
  void run(const Node& node) { run(node, true); }

 private:
  // charge: whether the step charges its cycles now; false inside a loop that charges them when it ends.
  void run(const Node& node, bool charge);
  void checkInterrupts() const;
  void runLoop(const Node& node);
  void execute(const Node& node, bool charge);
  void copy(const Node& node, bool charge);
  void chargeFixed(const std::vector<FixedCharge>& steps, uint64_t times);
  // Runs the steps from sequence.children[first] that go together row by row, if two or more do: how many it ran.
  size_t runRowsTogether(const Node& sequence, size_t first, bool charge);

  const Graph& graph_;
  RunState& state_;
  // Per loop node, its iteration as a flat list of calls (engine.cc), made the first time the loop starts in this
  // run: a loop nested in another starts many times with the same addresses.
  struct FlatLoop;
  std::unordered_map<const Node*, std::unique_ptr<FlatLoop>> flat_;
};

}  // namespace ipu
