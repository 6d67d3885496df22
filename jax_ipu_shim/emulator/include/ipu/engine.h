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

// A process-wide pool of host threads. Tiles' work is split into chunks of whole tiles and the chunks run in
// parallel; the calling thread takes part. Several runs may share the pool at once.
class ThreadPool {
 public:
  static ThreadPool& instance();  // size: $JAX_IPU_HOST_THREADS, else min(hardware threads, 8)
  int threads() const { return threads_; }
  // Calls fn(i) for every i in [0, n) and returns when all are done. Rethrows the first exception.
  void parallelFor(int64_t n, const std::function<void(int64_t)>& fn);

 private:
  explicit ThreadPool(int threads);
  struct Impl;
  Impl* impl_;
  int threads_;
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
