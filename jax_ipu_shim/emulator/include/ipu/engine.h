// Execution: a host thread pool that stands in for the tiles, and the executor of the program tree.
#pragma once

#include <functional>

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

// Runs a program tree superstep by superstep against one run's storage, accumulating the cycle profile.
class Executor {
 public:
  Executor(const Graph& graph, RunState* state) : graph_(graph), state_(*state) {}
  void run(const Node& node);

 private:
  void execute(const Node& node);
  void copy(const Node& node);

  const Graph& graph_;
  RunState& state_;
};

}  // namespace ipu
