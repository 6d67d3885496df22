#include "ipu/engine.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

#include "ipu/dtype.h"

namespace ipu {

namespace {
// Below this much work (elements x per-element weight) a compute set runs on the calling thread: waking the pool
// would cost more than it saves. A small RNN cell's 8x64x64 matmul (32K multiply-adds, a few microseconds on one
// thread) ran faster inline: scan_rnn went from 24 to 17 ms (median, busy 2-core host) when it stopped waking it.
constexpr double kParallelThreshold = 65536;

// Whether a superstep's work is worth spreading over the host threads (kParallelThreshold).
bool worthThreads(const Superstep& step) {
  return static_cast<double>(step.work.num_elements) * step.cost_weight >= kParallelThreshold;
}
}  // namespace

#if defined(__SSE2__)
// MXCSR: FTZ (bit 15) flushes subnormal results, DAZ (bit 6) reads subnormal inputs as zero.
constexpr unsigned kFlushDenormals = 0x8040;
ScopedFlushDenormals::ScopedFlushDenormals() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | kFlushDenormals); }
ScopedFlushDenormals::~ScopedFlushDenormals() { _mm_setcsr(saved_); }
#else
ScopedFlushDenormals::ScopedFlushDenormals() : saved_(0) {}
ScopedFlushDenormals::~ScopedFlushDenormals() {}
#endif

struct Job {
  const std::function<void(int64_t)>* fn;
  int64_t n;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  std::mutex mu;
  std::condition_variable finished;
  std::exception_ptr error;
};

struct ThreadPool::Impl {
  std::mutex mu;
  std::condition_variable wake;
  std::deque<std::shared_ptr<Job>> queue;
  bool stopping = false;
  std::vector<std::thread> workers;

  // Claims and runs items of `job` until none are left.
  static void work(Job& job) {
    while (true) {
      const int64_t i = job.next.fetch_add(1);
      if (i >= job.n) return;
      try {
        (*job.fn)(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(job.mu);
        if (!job.error) job.error = std::current_exception();
      }
      if (job.done.fetch_add(1) + 1 == job.n) {
        std::lock_guard<std::mutex> lock(job.mu);
        job.finished.notify_all();
      }
    }
  }

  void workerLoop() {
    while (true) {
      std::shared_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lock(mu);
        wake.wait(lock, [&] { return stopping || !queue.empty(); });
        if (stopping) return;
        job = queue.front();
        if (job->next.load() >= job->n) {  // fully claimed: retire it
          queue.pop_front();
          continue;
        }
      }
      work(*job);
    }
  }
};

ThreadPool::ThreadPool(int threads) : impl_(std::make_unique<Impl>()), threads_(std::max(1, std::min(threads, 256))) {
  for (int i = 1; i < threads_; ++i) {
    impl_->workers.emplace_back([impl = impl_.get()] {
      ScopedFlushDenormals flush;  // for the thread's whole life: it only ever runs kernels
      impl->workerLoop();
    });
  }
}

ThreadPool::~ThreadPool() {  // no run uses the pool any more (its owner's promise): the workers are idle
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  for (std::thread& t : impl_->workers) t.join();
}

void forRanges(const RunState& s, int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  ThreadPool* pool = s.options ? s.options->pool : nullptr;
  if (pool == nullptr || pool->threads() == 1 || n < kParallelElements) {
    fn(0, n);
    return;
  }
  const int64_t parts = pool->threads() * 4;
  pool->parallelFor(parts, [&](int64_t i) { fn(n * i / parts, n * (i + 1) / parts); });
}

int ThreadPool::defaultThreads() {
  return static_cast<int>(std::min(8u, std::max(1u, std::thread::hardware_concurrency())));
}

void ThreadPool::parallelFor(int64_t n, const std::function<void(int64_t)>& fn) {
  if (n <= 0) return;
  if (threads_ == 1 || n == 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  auto job = std::make_shared<Job>();
  job->fn = &fn;
  job->n = n;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->queue.push_back(job);
  }
  impl_->wake.notify_all();
  Impl::work(*job);
  {
    std::unique_lock<std::mutex> lock(job->mu);
    job->finished.wait(lock, [&] { return job->done.load() == job->n; });
  }
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    auto it = std::find(impl_->queue.begin(), impl_->queue.end(), job);
    if (it != impl_->queue.end()) impl_->queue.erase(it);
  }
  if (job->error) std::rethrow_exception(job->error);
}

const char* nodeKindName(NodeKind kind) {
  switch (kind) {
    case NodeKind::Sequence: return "Sequence";
    case NodeKind::Execute: return "Execute";
    case NodeKind::Copy: return "Copy";
    case NodeKind::RepeatWhileTrue: return "RepeatWhileTrue";
    case NodeKind::Switch: return "Switch";
    case NodeKind::StreamCopy: return "StreamCopy";
    case NodeKind::HostCall: return "HostCall";
    case NodeKind::Repeat: return "Repeat";
  }
  return "?";
}

namespace {

// The counters of a RunProfile (its totals, or one step's).
struct Counters {
  uint64_t compute = 0, exchange = 0, sync = 0, supersteps = 0;
  static Counters of(const RunProfile& p) { return {p.compute_cycles, p.exchange_cycles, p.sync_cycles, p.supersteps}; }
};

// Adds what the totals gained since `before` to the node's step, and counts one execution of it. Everything a node
// charges goes through the totals first, so that the steps always add up to them exactly.
void record(RunState& state, const Node& node, const Counters& before) {
  if (node.id < 0) return;
  RunProfile& p = state.profile;
  if (static_cast<size_t>(node.id) >= p.steps.size()) p.steps.resize(static_cast<size_t>(node.id) + 1);
  StepProfile& step = p.steps[static_cast<size_t>(node.id)];
  step.executions += 1;
  step.compute_cycles += p.compute_cycles - before.compute;
  step.exchange_cycles += p.exchange_cycles - before.exchange;
  step.sync_cycles += p.sync_cycles - before.sync;
  step.supersteps += p.supersteps - before.supersteps;
}

}  // namespace

namespace {

// Whether a kernel in `node`'s tree reads the cycle counters while the program runs.
bool readsCycles(const Node& node) {
  if (node.kernel && node.kernel->readsCycles()) return true;
  for (const auto& c : node.children)
    if (readsCycles(*c)) return true;
  return false;
}

// The fixed charges of the steps in `node`'s tree that run once each time it does: all but what a nested loop or
// switch runs (those charge as they run).
void fixedCharges(const Node& node, std::vector<FixedCharge>* out) {
  switch (node.kind) {
    case NodeKind::Sequence:
      for (const auto& c : node.children) fixedCharges(*c, out);
      return;
    case NodeKind::Execute: {
      FixedCharge f{node.id, Cost{}, node.supersteps.size()};
      for (const Superstep& s : node.supersteps) {
        f.cost.compute += s.cost.compute;
        f.cost.exchange += s.cost.exchange;
        f.cost.sync += s.cost.sync;
      }
      out->push_back(f);
      return;
    }
    case NodeKind::Copy:
      if (!node.copies.empty()) out->push_back(FixedCharge{node.id, node.cost, 1});
      return;
    case NodeKind::StreamCopy:
    case NodeKind::HostCall: out->push_back(FixedCharge{node.id, node.cost, 1}); return;
    case NodeKind::RepeatWhileTrue:
    case NodeKind::Switch:
    case NodeKind::Repeat: return;
  }
}

}  // namespace

static std::unique_ptr<RowChain> planRowChain(const Node& sequence, size_t first);

void planRun(Node* node) {
  for (auto& child : node->children) planRun(child.get());
  if (node->kind == NodeKind::Sequence) {
    node->row_chains.clear();
    for (size_t i = 0; i < node->children.size(); ++i) {
      std::unique_ptr<RowChain> chain = planRowChain(*node, i);
      if (node->row_chains.empty() && chain) node->row_chains.resize(node->children.size());
      if (chain) node->row_chains[i] = std::move(chain);
    }
  }
  if (node->kind != NodeKind::RepeatWhileTrue || readsCycles(*node)) return;
  node->charged_at_end = true;
  fixedCharges(*node->children[0], &node->fixed[0]);
  node->fixed[0].push_back(FixedCharge{node->id, node->cost, 1});  // each decision
  fixedCharges(*node->children[1], &node->fixed[1]);
}

void Executor::checkInterrupts() const {
  const RunOptions* options = state_.options;
  if (options && options->interrupts &&
      options->interrupts->load(std::memory_order_relaxed) != options->interrupts_seen) {
    throw Error(ErrorCode::Cancelled, "interrupted");  // the runtime says by what, and where
  }
}

namespace {

// One step of a loop's iteration as a flat list (Executor::runLoop): what run() does for the Execute and Copy nodes
// of the cond and body trees, with the slots' addresses resolved once when the loop starts.
struct FlatStep {
  enum class Kind : uint8_t { Call, Prepare, Compute, Move };
  Kind kind = Kind::Call;
  DirectCall call{};                // Call: a one-element kernel's block function
  const Kernel* kernel = nullptr;   // Prepare, Compute
  size_t step = 0;                  // Compute: computeStep(step, begin, end), as execute() calls it inline
  int64_t begin = 0, end = 0;
  uint8_t* to = nullptr;            // Move: a copy's bytes, as copy() moves them
  const uint8_t* from = nullptr;
  size_t bytes = 0;
};

// The moves of a Copy node, in order (through its temporaries where it has them): move(to, from, bytes) for each
// that moves something (a value already in place, same storage, is not copied).
template <class Move>
void forEachMove(const Node& node, const RunState& state, Move&& move) {
  auto each = [&](int dst, int src, size_t n) {
    uint8_t* to = state.ptr[static_cast<size_t>(dst)];
    const uint8_t* from = state.ptr[static_cast<size_t>(src)];
    if (n && to != from) move(to, from, n);
  };
  const size_t n = node.copies.size();
  if (node.temps.empty()) {
    for (size_t i = 0; i < n; ++i) each(node.copies[i].second, node.copies[i].first, node.copy_bytes[i]);
    return;
  }
  for (size_t i = 0; i < n; ++i) each(node.temps[i], node.copies[i].first, node.copy_bytes[i]);
  for (size_t i = 0; i < n; ++i) each(node.copies[i].second, node.temps[i], node.copy_bytes[i]);
}

// Whether an Execute node's kernel updates its operand in place in this run (Node::in_place, the same storage): it
// only writes what changes, so its work is not the output's size and is not worth waking the pool for.
bool updatesInPlace(const Node& node, const RunState& state) {
  bool in_place = !node.in_place.empty();
  for (const auto& p : node.in_place)
    in_place = in_place && state.ptr[static_cast<size_t>(p.first)] == state.ptr[static_cast<size_t>(p.second)];
  return in_place;
}

// Appends what running `node` does to `out`; false where the tree holds a step the flat list does not express (a
// nested loop or switch, host I/O) or work execute() would spread over the host threads.
bool flatten(const Node& node, RunState& state, std::vector<FlatStep>* out, DirectScratch* scratch) {
  switch (node.kind) {
    case NodeKind::Sequence:
      for (const auto& child : node.children)
        if (!flatten(*child, state, out, scratch)) return false;
      return true;
    case NodeKind::Execute: {
      const Kernel* kernel = node.kernel.get();
      if (!kernel) return true;
      const bool in_place = updatesInPlace(node, state);
      for (const Superstep& step : node.supersteps)
        if (step.computes && !in_place && step.work.runs() > 1 && worthThreads(step)) return false;
      // A one-element step of a kernel with calls of its own: those calls.
      if (node.supersteps.size() == 1 && node.supersteps[0].computes && node.supersteps[0].work.num_elements == 1) {
        const TileMapping& w = node.supersteps[0].work;
        std::vector<DirectCall> calls;
        if (kernel->directCalls(state, w.runBegin(0), &calls, scratch)) {
          for (const DirectCall& c : calls) out->push_back(FlatStep{FlatStep::Kind::Call, c});
          return true;
        }
      }
      out->push_back(FlatStep{FlatStep::Kind::Prepare, {}, kernel});
      for (size_t si = 0; si < node.supersteps.size(); ++si) {
        const TileMapping& w = node.supersteps[si].work;
        const int runs = w.runs();
        if (!node.supersteps[si].computes || runs == 0) continue;
        out->push_back(FlatStep{FlatStep::Kind::Compute, {}, kernel, si, w.runBegin(0), w.runEnd(runs - 1)});
      }
      return true;
    }
    case NodeKind::Copy:
      forEachMove(node, state, [&](uint8_t* to, const uint8_t* from, size_t n) {
        out->push_back(FlatStep{FlatStep::Kind::Move, {}, nullptr, 0, 0, 0, to, from, n});
      });
      return true;
    default: return false;
  }
}

void runFlat(const std::vector<FlatStep>& steps, RunState& state) {
  for (const FlatStep& f : steps) {
    switch (f.kind) {
      case FlatStep::Kind::Call: f.call.fn(f.call.args, f.call.out, 1); break;
      case FlatStep::Kind::Prepare: f.kernel->prepare(state); break;
      case FlatStep::Kind::Compute: f.kernel->computeStep(state, f.step, f.begin, f.end); break;
      case FlatStep::Kind::Move: std::memcpy(f.to, f.from, f.bytes); break;
    }
  }
}

// A flat list made of block-function calls only, as the calls themselves (what runFlat does, without its switch).
bool onlyCalls(const std::vector<FlatStep>& steps, std::vector<DirectCall>* calls) {
  for (const FlatStep& f : steps) {
    if (f.kind != FlatStep::Kind::Call) return false;
    calls->push_back(f.call);
  }
  return true;
}

inline void runCalls(const std::vector<DirectCall>& calls) {
  for (const DirectCall& c : calls) c.fn(c.args, c.out, 1);
}

// The value of a scalar slot of an integer or bool type (a switch's index, a loop's predicate).
int64_t readInteger(const Graph& graph, const RunState& state, int slot) {
  const uint8_t* p = state.ptr[static_cast<size_t>(slot)];
  int64_t value = 0;
  visitDType(graph.slots[static_cast<size_t>(slot)].type.dtype, [&](auto tag) {
    using T = Storage<decltype(tag)::value>;
    if constexpr (std::is_integral<T>::value) {
      T x;
      std::memcpy(&x, p, sizeof(T));
      value = static_cast<int64_t>(x);
    }
  });
  return value;
}

}  // namespace

struct Executor::FlatLoop {
  bool flat = false;  // false: the loop walks its tree
  std::vector<FlatStep> cond, body;
  bool calls = false;  // cond and body are calls only (a counter and scalar updates): these
  std::vector<DirectCall> cond_calls, body_calls;
  DirectScratch scratch;
};

// RowChain: steps over rows of one length, one after another (a layer norm's and a softmax's: the rows' sums, the
// deviations, their squares and sums, the normalised rows, their maxima, exponentials, sums and quotients): maps of
// rows (`row` elements per row) or of one value per row (a reduction's result and maps of it), and reductions of
// rows. The host runs them all on a chunk of rows at a time, while those rows are in its cache, instead of each over
// the whole array in turn. Every element is the same computation as when the steps run one after the other (the
// kernels, on ranges they already take: their host threads' chunks), and each step charges what it charges on its
// own: host speed only. A step belongs only where what it reads for a row is known once the steps before it have
// run on that row: operands from outside the chain, the same element of a result of the chain of its own kind, or a
// value per row broadcast along it.
//
// A chunk is 128 KB of f32 rows per step, within the host's L2 cache for every step of a chain, and many chunks for
// the host threads to share (softmax_layernorm's 1024-wide rows, min of 100 calls on 2 threads: 4 rows a chunk
// 1.66 ms, 32 rows 1.47 ms, 256 rows 1.41 ms, all 1,024 in one 2.4 ms).
constexpr int64_t kRowChunkBytes = int64_t{128} << 10;
constexpr size_t kMaxChain = 64;  // steps in a chain at most

Executor::Executor(const Graph& graph, RunState* state) : graph_(graph), state_(*state) {}
Executor::~Executor() = default;

void Executor::run(const Node& node, bool charge) {
  checkInterrupts();
  switch (node.kind) {
    case NodeKind::Sequence:
      for (size_t i = 0; i < node.children.size();) {
        const size_t together = runRowsTogether(node, i, charge);
        if (together == 0) run(*node.children[i++], charge);
        i += together;
      }
      return;
    case NodeKind::RepeatWhileTrue: runLoop(node); return;
    case NodeKind::Switch: {
      const Counters before = Counters::of(state_.profile);
      const int64_t value = readInteger(graph_, state_, node.slot);
      const int64_t branches = static_cast<int64_t>(node.children.size());
      int64_t index = value;
      if (!node.case_values.empty()) {
        index = 0;
        for (size_t i = 0; i < node.case_values.size(); ++i)
          if (node.case_values[i] == value) index = static_cast<int64_t>(i) + 1;
      } else if (index < 0 || index >= branches) {
        index = branches - 1;
      }
      node.cost.addTo(&state_.profile, 1);
      record(state_, node, before);
      run(*node.children[static_cast<size_t>(index)], true);  // what a branch runs charges as it runs
      return;
    }
    case NodeKind::Repeat:
      // Each iteration charges the node's own cost (no superstep of its own), then runs the body, which charges as
      // it runs.
      for (int64_t i = 0; i < node.repeat; ++i) {
        const Counters before = Counters::of(state_.profile);
        node.cost.addTo(&state_.profile, 0);
        record(state_, node, before);
        run(*node.children[0], true);
      }
      return;
    default: break;
  }
  const Counters before = charge ? Counters::of(state_.profile) : Counters{};
  switch (node.kind) {
    case NodeKind::Execute: execute(node, charge); break;
    case NodeKind::Copy: copy(node, charge); break;
    case NodeKind::StreamCopy:
    case NodeKind::HostCall:
      if (node.kernel) node.kernel->prepare(state_);
      if (charge) node.cost.addTo(&state_.profile, 1);
      break;
    default: break;
  }
  if (charge) record(state_, node, before);
}

namespace {

// The index of the one superstep of `node` that computes, if it has exactly one and it is the last.
bool onlyComputingStep(const Node& node, size_t* step) {
  if (node.supersteps.empty() || !node.supersteps.back().computes) return false;
  for (size_t i = 0; i + 1 < node.supersteps.size(); ++i)
    if (node.supersteps[i].computes) return false;
  *step = node.supersteps.size() - 1;
  return true;
}

// Whether a broadcast view over rows of `row` elements reads element i / row for output element i (one value per row,
// broadcast along it): its innermost dimensions, `row` elements, have stride 0, and the others run in row-major
// order.
bool readsRowValue(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, int64_t row) {
  size_t d = shape.size();
  int64_t inner = 1;
  while (d > 0 && inner < row) {
    --d;
    if (shape[d] != 1 && strides[d] != 0) return false;
    inner *= shape[d];
  }
  if (inner != row) return false;
  for (int64_t expect = 1; d-- > 0; expect *= shape[d])
    if (shape[d] != 1 && strides[d] != expect) return false;
  return true;
}

}  // namespace

// The chain of steps from children[first] (RowChain), by their kernels and work: empty if it has fewer than
// two steps or no reduction of rows. A map of neither size that reads no result of the chain's rows (a scalar's
// reciprocal) runs once, before the rows.
static std::unique_ptr<RowChain> planRowChain(const Node& sequence, size_t first) {
  auto plan = std::make_unique<RowChain>();
  const auto& children = sequence.children;
  // The rows: those of the first reduction among the maps and reductions that follow one another from `first`. (A
  // chain is planned from every step: it looks at most kMaxChain steps ahead, so that long sequences plan in linear
  // time.)
  const size_t end = std::min(children.size(), first + kMaxChain);
  for (size_t j = first; j < end && plan->row == 0; ++j) {
    const Node& node = *children[j];
    std::vector<Kernel::MapRead> reads;
    int in = -1, init = -1, out = -1;
    int64_t row = 0;
    size_t step = 0;
    if (node.kind != NodeKind::Execute || !node.kernel || !onlyComputingStep(node, &step)) break;
    if (node.kernel->rowReduction(&in, &init, &out, &row)) {
      plan->row = row;
      plan->rows = node.supersteps[step].work.num_elements;
    } else if (!node.kernel->mapReads(&reads, &out)) {
      break;
    }
  }
  if (plan->row <= 1 || plan->rows <= 1) return nullptr;
  std::unordered_map<int, int64_t> made;  // a result of the chain's steps -> its elements per row
  std::unordered_set<int> used;           // every slot a step of the chain reads or writes
  bool reduces = false;
  for (size_t j = first; j < end; ++j) {
    const Node& node = *children[j];
    RowChain::Member m;
    m.node = &node;
    if (node.kind != NodeKind::Execute || !node.kernel || node.kernel->readsCycles() ||
        !onlyComputingStep(node, &m.step))
      break;
    const TileMapping& work = node.supersteps[m.step].work;
    const int64_t n = work.num_elements;
    if (work.runs() == 0 || work.runBegin(0) != 0 || work.runEnd(work.runs() - 1) != n) break;
    const auto perRow = [&](int slot) {  // -1: not a result of the chain's
      const auto it = made.find(slot);
      return it == made.end() ? int64_t{-1} : it->second;
    };
    int in = -1, init = -1, out = -1;
    int64_t row = 0;
    std::vector<Kernel::MapRead> reads;
    if (node.kernel->rowReduction(&in, &init, &out, &row)) {
      if (row != plan->row || n != plan->rows || perRow(in) == 1 || perRow(init) > 0) break;
      m.per_row = 1;
      m.reduces = reduces = true;
      m.access = {{in, row, false}, {init, 0, false}};
    } else if (node.kernel->mapReads(&reads, &out)) {
      m.per_row = n == plan->rows * plan->row ? plan->row : n == plan->rows ? 1 : 0;
      bool ok = true;
      for (const Kernel::MapRead& r : reads) {
        // Element i itself (or through a view that reads it), or the value of its row, or the whole slot.
        const bool same = !r.scalar && (!r.shape || readsRowValue(*r.shape, *r.strides, 1));
        const bool row_value = r.shape && m.per_row == plan->row && readsRowValue(*r.shape, *r.strides, plan->row);
        const int64_t per_row = m.per_row == 0 ? 0 : same ? m.per_row : row_value ? 1 : 0;
        const int64_t made_per_row = perRow(r.slot);
        // A result of the chain's rows is read as its own rows; a step that runs once reads none of them.
        if (made_per_row > 0 && made_per_row != per_row) ok = false;
        m.access.push_back({r.slot, per_row, false});
      }
      if (!ok) break;
    } else {
      break;
    }
    if (used.count(out)) break;  // a slot the chain has read or written already
    m.access.push_back({out, m.per_row, true});
    for (const RowChain::Access& a : m.access) used.insert(a.slot);
    made[out] = m.per_row;
    plan->members.push_back(std::move(m));
  }
  // Stopped by a reduction that does not go with it, the chain ends with its own last one (as in runRowsTogether).
  const size_t next = first + plan->members.size();
  int in = -1, init = -1, out = -1;
  int64_t row = 0;
  if (next < end && children[next]->kind == NodeKind::Execute && children[next]->kernel &&
      children[next]->kernel->rowReduction(&in, &init, &out, &row))
    while (!plan->members.empty() && !plan->members.back().reduces) plan->members.pop_back();
  if (plan->members.size() < 2 || !reduces) return nullptr;
  return plan;
}

size_t Executor::runRowsTogether(const Node& sequence, size_t first, bool charge) {
  if (first >= sequence.row_chains.size() || !sequence.row_chains[first]) return 0;
  const RowChain& c = *sequence.row_chains[first];
  // Rows in chunks of about 128 KB of an f32 result (in the host's L2 cache when the next steps read them; a call
  // per step and chunk), shared among the host threads when there are several.
  const int64_t chunk = std::max<int64_t>(1, kRowChunkBytes / (c.row * 4));
  const int64_t chunks = (c.rows + chunk - 1) / chunk;
  ThreadPool* pool = state_.options ? state_.options->pool : nullptr;
  const bool parallel = pool && pool->threads() > 1 && chunks > 1;
  // This run's bytes. Arena slots whose live ranges end in the chain may share bytes with later results. Row by row
  // (every step on a chunk of rows, then the next chunk), two steps touch the same bytes in program order where the
  // two slots start at the same byte and a row of the later step's slot is no longer than a row of the earlier's (it
  // lies in that row or in an earlier one, whose steps are done): a softmax's exponentials over the bytes of its
  // normalised rows, a row's sum over the bytes of a row the steps have done with. When host threads share the
  // chunks, an earlier row may be another thread's, still in use: the rows must then be the same bytes (a later
  // row lies in the same chunk as the earlier). Any other overlap (a slot read whole, rows shifted against each other
  // or longer), or a step that updates in place, ends the chain there.
  const auto bytes = [&](int slot) { return graph_.slots[static_cast<size_t>(slot)].type.numBytes(); };
  const auto ptr = [&](int slot) { return state_.ptr[static_cast<size_t>(slot)]; };
  const auto rowBytes = [&](const RowChain::Access& a) {
    return a.per_row * static_cast<int64_t>(dtypeSize(graph_.slots[static_cast<size_t>(a.slot)].type.dtype));
  };
  // Whether access `a` of a step and access `b` of an earlier step (or of the same one) cannot run row by row.
  const auto clash = [&](const RowChain::Access& a, const RowChain::Access& b, bool same_step) {
    if (a.slot == b.slot || (!a.write && !b.write)) return false;
    if (!(ptr(a.slot) < ptr(b.slot) + bytes(b.slot) && ptr(b.slot) < ptr(a.slot) + bytes(a.slot))) return false;
    if (a.per_row == 0 || b.per_row == 0 || ptr(a.slot) != ptr(b.slot)) return true;
    return same_step || parallel ? rowBytes(a) != rowBytes(b) : rowBytes(a) > rowBytes(b);
  };
  size_t count = 0;
  bool reduces = false;
  for (; count < c.members.size(); ++count) {
    const RowChain::Member& m = c.members[count];
    bool stop = updatesInPlace(*m.node, state_);
    for (size_t k = 0; k <= count && !stop; ++k)
      for (const RowChain::Access& a : m.access)
        for (const RowChain::Access& b : c.members[k].access) stop = stop || clash(a, b, k == count);
    if (stop) break;
    reduces = reduces || m.reduces;
  }
  // Cut short, the chain ends with its last reduction: maps after it start the next chain, where they may go with the
  // reduction that follows them (an embedding update's squared errors with their rows' sums).
  if (count < c.members.size())
    while (count > 0 && !c.members[count - 1].reduces) --count;
  if (count < 2 || !reduces) return 0;
  checkInterrupts();
  bool threads = false;
  for (size_t k = 0; k < count; ++k) {  // each charges and records as it would on its own
    const RowChain::Member& m = c.members[k];
    if (charge) {
      const Counters before = Counters::of(state_.profile);
      for (const Superstep& step : m.node->supersteps) step.cost.addTo(&state_.profile, 1);
      record(state_, *m.node, before);
    }
    m.node->kernel->prepare(state_);
    if (m.per_row == 0) m.node->kernel->computeStep(state_, m.step, 0, m.node->supersteps[m.step].work.num_elements);
    threads = threads || (m.per_row > 0 && worthThreads(m.node->supersteps[m.step]));
  }
  const auto runChunk = [&](RunState& state, int64_t k) {
    const int64_t r0 = k * chunk, r1 = std::min(c.rows, r0 + chunk);
    for (size_t i = 0; i < count; ++i) {
      const RowChain::Member& m = c.members[i];
      if (m.per_row > 0) m.node->kernel->computeStep(state, m.step, r0 * m.per_row, r1 * m.per_row);
    }
  };
  if (parallel && threads) {
    RunState& state = state_;
    pool->parallelFor(chunks, [&](int64_t k) { runChunk(state, k); });
  } else {
    for (int64_t k = 0; k < chunks; ++k) runChunk(state_, k);
  }
  return count;
}

void Executor::runLoop(const Node& node) {
  if (!node.charged_at_end) {
    // Each decision (reading the predicate, broadcasting it) is one execution of the node's own step; the cond and
    // body steps record themselves.
    while (true) {
      run(*node.children[0], true);
      const Counters decision = Counters::of(state_.profile);
      node.cost.addTo(&state_.profile, 1);
      record(state_, node, decision);
      if (readInteger(graph_, state_, node.slot) == 0) return;
      run(*node.children[1], true);
    }
  }
  // The steps charge the same every iteration: count the iterations, then charge them all at once (a nested loop
  // or switch charges as it runs). The counters come out as step by step.
  uint64_t decisions = 0;
  std::unique_ptr<FlatLoop>& plan = flat_[&node];
  if (!plan) {
    plan = std::make_unique<FlatLoop>();
    // (The flat list reads the predicate as one byte, as the StableHLO lowering's bool predicates are.)
    plan->flat = dtypeSize(graph_.slots[static_cast<size_t>(node.slot)].type.dtype) == 1 &&
                 flatten(*node.children[0], state_, &plan->cond, &plan->scratch) &&
                 flatten(*node.children[1], state_, &plan->body, &plan->scratch);
    plan->calls = plan->flat && onlyCalls(plan->cond, &plan->cond_calls) && onlyCalls(plan->body, &plan->body_calls);
  }
  if (plan->flat) {
    // Steps small enough to run inline, with the addresses they use resolved once: each iteration calls them in
    // run()'s order, without walking the tree (the same kernels, so the same bits).
    const uint8_t* pred = state_.at<const uint8_t>(node.slot);
    // checkInterrupts() with its pointers read once: one load per iteration of a loop that may be a few ns long.
    const std::atomic<uint64_t>* interrupts = state_.options ? state_.options->interrupts : nullptr;
    const uint64_t seen = interrupts ? state_.options->interrupts_seen : 0;
    auto iterate = [&](auto&& cond, auto&& body) {
      while (true) {
        if (interrupts && interrupts->load(std::memory_order_relaxed) != seen) checkInterrupts();
        cond();
        ++decisions;
        if (!*pred) break;
        body();
      }
    };
    if (plan->calls) iterate([&] { runCalls(plan->cond_calls); }, [&] { runCalls(plan->body_calls); });
    else iterate([&] { runFlat(plan->cond, state_); }, [&] { runFlat(plan->body, state_); });
  } else {
    while (true) {
      run(*node.children[0], false);
      ++decisions;
      if (readInteger(graph_, state_, node.slot) == 0) break;
      run(*node.children[1], false);
    }
  }
  chargeFixed(node.fixed[0], decisions);
  chargeFixed(node.fixed[1], decisions - 1);
}

void Executor::chargeFixed(const std::vector<FixedCharge>& steps, uint64_t times) {
  if (times == 0) return;
  RunProfile& p = state_.profile;
  for (const FixedCharge& f : steps) {
    const uint64_t compute = f.cost.compute * times, exchange = f.cost.exchange * times, sync = f.cost.sync * times;
    const uint64_t supersteps = f.supersteps * times;
    p.compute_cycles += compute;
    p.exchange_cycles += exchange;
    p.sync_cycles += sync;
    p.total_cycles += compute + exchange + sync;
    p.supersteps += supersteps;
    if (f.id < 0) continue;
    if (static_cast<size_t>(f.id) >= p.steps.size()) p.steps.resize(static_cast<size_t>(f.id) + 1);
    StepProfile& step = p.steps[static_cast<size_t>(f.id)];
    step.executions += times;
    step.compute_cycles += compute;
    step.exchange_cycles += exchange;
    step.sync_cycles += sync;
    step.supersteps += supersteps;
  }
}

void Executor::execute(const Node& node, bool charge) {
  const Kernel* kernel = node.kernel.get();
  if (kernel) kernel->prepare(state_);
  const bool in_place = updatesInPlace(node, state_);
  for (size_t si = 0; si < node.supersteps.size(); ++si) {
    const Superstep& step = node.supersteps[si];
    if (charge) step.cost.addTo(&state_.profile, 1);
    if (!step.computes || !kernel) continue;
    const TileMapping& w = step.work;
    const int runs = w.runs();  // each on one tile; in element order, whichever tiles hold them
    ThreadPool* pool = state_.options ? state_.options->pool : nullptr;
    if (runs == 0) continue;
    if (runs == 1 || in_place || pool == nullptr || pool->threads() == 1 || !worthThreads(step)) {
      // The runs are consecutive: one call covers them all (a kernel's per-call setup, once).
      kernel->computeStep(state_, si, w.runBegin(0), w.runEnd(runs - 1));
      continue;
    }
    // Chunks of whole runs (tiles' ranges), a few per host thread for balance.
    const int chunks = std::min(runs, pool->threads() * 4);
    const int per_chunk = (runs + chunks - 1) / chunks;
    RunState& state = state_;
    pool->parallelFor(chunks, [&](int64_t c) {
      const int r0 = static_cast<int>(c) * per_chunk;
      const int r1 = std::min(runs, r0 + per_chunk);
      if (r0 < r1) kernel->computeStep(state, si, w.runBegin(r0), w.runEnd(r1 - 1));
    });
  }
}

void Executor::copy(const Node& node, bool charge) {
  if (node.copies.empty()) return;
  if (charge) node.cost.addTo(&state_.profile, 1);
  forEachMove(node, state_, [](uint8_t* to, const uint8_t* from, size_t n) { std::memcpy(to, from, n); });
}

}  // namespace ipu
