// The lowered program: value slots with tile mappings, compute sets grouped in supersteps, and the program tree.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ipu/emulator.h"
#include "ipu/mapping.h"

namespace ipu {

// The storage of one run: where every slot's data is, plus kernel scratch. One per run() call.
struct RunState {
  std::vector<uint8_t*> ptr;               // slot -> data
  std::unique_ptr<uint8_t[]> arena;        // backing store of the arena slots
  // Kernel scratch buffers, indexed by a kernel's scratch id. A scratch buffer holds something only while its
  // node runs: ids are reused by every op (see Lowerer::newScratch), so that scratch does not grow per op.
  std::vector<std::vector<uint8_t>> scratch;
  std::vector<int64_t> dynamic;            // per-kernel run-time integers (dynamic slice offsets)
  const RunOptions* options = nullptr;     // replica, replica group, host streams and callbacks of this run
  // Totals, and while running the counters of every step indexed by Node::id (the executable keeps the steps
  // that ran, with their names, when the run ends).
  RunProfile profile;

  template <class T>
  T* at(int slot) const {
    return reinterpret_cast<T*>(ptr[static_cast<size_t>(slot)]);
  }
};

// Calls fn(b, e) for pieces [b, e) covering [0, n) elements: on the run's host threads when n is at least
// kParallelElements and it has several, else once on the calling thread. For host work whose pieces are
// independent (a kernel's copies in prepare(), which runs on one thread); values never depend on it.
constexpr int64_t kParallelElements = 65536;  // fewer cost less to copy than waking the threads
void forRanges(const RunState& s, int64_t n, const std::function<void(int64_t, int64_t)>& fn);

// One call of an elementwise block function (ipu/kernels.h BlockFn) on one element, its operands' and result's
// addresses resolved for a run: what a loop of one-element steps calls in place of walking its program tree on every
// iteration (Executor::runLoop). Values passed between calls live in `DirectScratch` entries, whose addresses do not
// move as more are added.
struct DirectCall {
  void (*fn)(const void* const* args, void* out, int64_t n);
  const void* args[3];
  void* out;
};
using DirectScratch = std::deque<std::array<uint64_t, 2>>;

// The codelet of a compute set: computes the output elements [begin, end), which are always whole tiles' ranges.
class Kernel {
 public:
  virtual ~Kernel() = default;
  // Runs once per execution of the step, before the compute set, on one thread (reads dynamic offsets, etc).
  virtual void prepare(RunState&) const {}
  virtual void compute(RunState& state, int64_t begin, int64_t end) const = 0;
  // The same for superstep `step` of the Execute node (kernels whose supersteps compute different things, such as
  // a matmul's partials and then their reduction, override this one).
  virtual void computeStep(RunState& state, size_t /*step*/, int64_t begin, int64_t end) const {
    compute(state, begin, end);
  }
  // Whether it reads the run's cycle counters (RunState::profile) while the program runs: a loop around it then
  // charges its cycles step by step (Node::charged_at_end).
  virtual bool readsCycles() const { return false; }
  // Appends the calls that compute output element `i` alone in this run, with the same functions and so the same
  // bits as compute(state, i, i + 1); false (nothing appended) where the kernel has no such form. Only a kernel whose
  // prepare() does nothing may return true: the caller then calls neither prepare() nor compute().
  virtual bool directCalls(RunState& /*state*/, int64_t /*i*/, std::vector<DirectCall>* /*calls*/,
                           DirectScratch* /*scratch*/) const {
    return false;
  }
  // An elementwise map (output element i from element i of each operand, from its one element, or from a broadcast
  // view of it, alone): how it reads each operand, and the slot it writes. False for any other kernel.
  struct MapRead {
    int slot = -1;
    bool scalar = false;  // element 0 for every output element
    // A broadcast view: output element i reads element sum_d index_d(i) * strides[d] over the output's shape (the
    // kernel's own vectors); null: element i itself (or element 0, scalar).
    const std::vector<int64_t>* shape = nullptr;
    const std::vector<int64_t>* strides = nullptr;
  };
  virtual bool mapReads(std::vector<MapRead>* /*reads*/, int* /*writes*/) const { return false; }
  // A reduction of rows (output element j from elements [j * row, (j + 1) * row) of one operand, and the scalar init,
  // alone; its prepare() reads nothing): the operand's slot, the init's, the slot it writes and the row's length.
  // False for any other kernel. (Executor::runRowsTogether runs such reductions in pieces beside the maps that make
  // their operands and read their results.)
  virtual bool rowReduction(int* /*reads*/, int* /*init*/, int* /*writes*/, int64_t* /*row*/) const { return false; }
};

// Several kernels over the same output range, one after another (e.g. the inputs of a variadic reduce).
class KernelSequence : public Kernel {
 public:
  explicit KernelSequence(std::vector<std::unique_ptr<Kernel>> parts) : parts_(std::move(parts)) {}
  void compute(RunState& s, int64_t b, int64_t e) const override {
    for (const auto& k : parts_) k->compute(s, b, e);
  }

 private:
  std::vector<std::unique_ptr<Kernel>> parts_;
};

struct Cost {
  uint64_t compute = 0;
  uint64_t exchange = 0;
  uint64_t sync = 0;
  uint64_t total() const { return compute + exchange + sync; }
  void addTo(RunProfile* p, uint64_t supersteps) const {
    p->compute_cycles += compute;
    p->exchange_cycles += exchange;
    p->sync_cycles += sync;
    p->total_cycles += total();
    p->supersteps += supersteps;
  }
};

// One BSP superstep: sync, exchange of the operand elements each tile lacks, then a compute set.
struct Superstep {
  std::string name;
  bool computes = true;  // false: a superstep whose effect is folded into the next one's kernel (reduce partials)
  TileMapping work;      // the output elements each tile computes
  double cost_weight = 1;  // host work per output element, to decide whether to spread over host threads
  Cost cost;
};

struct Node;

// Steps of a Sequence over rows of one length, one after another, that the executor runs a chunk of rows at a time
// (Executor::runRowsTogether; planned by planRun): maps of rows, maps of one value per row, reductions of rows, and
// maps that run once before the rows (a scalar's reciprocal).
struct RowChain {
  // How a step reads or writes a slot: `per_row` elements of each row (the step's own rows), or 0: the whole slot.
  struct Access {
    int slot = -1;
    int64_t per_row = 0;
    bool write = false;
  };
  struct Member {
    const Node* node = nullptr;
    size_t step = 0;      // its computing superstep
    int64_t per_row = 0;  // its elements per row: `row` (a map of rows), 1 (one value per row), 0 (once, first)
    bool reduces = false;
    std::vector<Access> access;
  };
  std::vector<Member> members;  // the longest such chain from its first step; a run takes what its bytes allow
  int64_t rows = 0, row = 0;
};

// What one execution of a step charges: its cycles and supersteps (the same every time for Execute, Copy, StreamCopy
// and HostCall steps, and for a loop's or switch's decision).
struct FixedCharge {
  int id = -1;  // Node::id
  Cost cost;
  uint64_t supersteps = 0;
};

// Poplar's program classes. StreamCopy (host streams) and HostCall (host callbacks) run their node's kernel's
// prepare() on the run's thread, which talks to RunState::options->host. Repeat runs its body a fixed number of
// times (the graph API's program::Repeat; the StableHLO lowering writes loops as RepeatWhileTrue).
enum class NodeKind { Sequence, Execute, Copy, RepeatWhileTrue, Switch, StreamCopy, HostCall, Repeat };
const char* nodeKindName(NodeKind kind);  // "Sequence", "Execute", ...

// A node of the program tree (Poplar's Sequence / Execute / Copy / RepeatWhileTrue / Switch / StreamCopy / Call).
struct Node {
  NodeKind kind = NodeKind::Sequence;
  std::string name;
  std::string loc;  // source location of the op it was lowered from ("model.py:12"; may be empty)
  int id = -1;      // step id: program order (depth first) among the steps; -1 for Sequences and empty Copies
  std::vector<std::unique_ptr<Node>> children;  // Sequence: steps; RepeatWhileTrue: {cond, body}; Switch: branches
  std::unique_ptr<Kernel> kernel;               // Execute, StreamCopy, HostCall
  std::vector<Superstep> supersteps;            // Execute
  std::vector<std::pair<int, int>> copies;      // Copy: (source slot, destination slot)
  std::vector<int> temps;                       // Copy: staging slots when sources and destinations overlap
  std::vector<size_t> copy_bytes;               // Copy: the bytes of each copy's value
  Cost cost;  // Copy, StreamCopy, HostCall: its cost; RepeatWhileTrue/Switch: each decision
  int slot = -1;  // RepeatWhileTrue: the predicate; Switch: the index (a scalar of any integer or bool type)
  // Switch: the value of each branch after the first, which is the default (Poplar's Switch); empty: the index is
  // the branch, and an index out of range runs the last (XLA's case).
  std::vector<int64_t> case_values;
  int64_t repeat = 0;  // Repeat: the iterations; its body is children[0], and each iteration charges `cost`
  double flops = 0;
  bool emulated_64bit = false;  // Execute: reads or writes f64/i64/u64 values, which the IPU runs in software
  // Execute: (operand slot, result slot) pairs the kernel computes correctly when both are the same storage: it
  // reads each element of the operand only to write the same element of the result, and reads the operand through
  // no other of its inputs (dynamic_update_slice writing its update into the operand, as Poplar's dynamicUpdate
  // does in place). Set by the op's lowering; a loop then updates a loop-carried value in place (control.cc).
  std::vector<std::pair<int, int>> in_place;
  // Execute: (operand slot, result slot) pairs the kernel also computes correctly in the same storage, although it
  // writes every element of the result: it reads element i of the operand only for element i of the result (an
  // elementwise map). Host storage only: a loop's new value may then share its carried value's bytes
  // (shareCarriedStorage), so the update copy moves nothing; memory estimates and host threads do not look at it.
  std::vector<std::pair<int, int>> same_index;
  // Execute: an (operand slot, result slot) pair whose result takes the operand's tile memory on the IPU when this
  // step is the operand's last read: Graphcore's XLA backend computes an elementwise op in place on its first
  // operand, and a fused map on an operand it reads elementwise, when they have the result's type (its in-place
  // finder). Tile memory only (computeMemory), as for the in_place pairs; {-1, -1}: none.
  std::pair<int, int> overwrites{-1, -1};
  // RepeatWhileTrue: whether the executor charges the loop's fixed-cost steps once the loop ends, as iterations x
  // their charges, instead of step by step (the same counters: a loop's small steps then cost no bookkeeping).
  // fixed[0]: the cond's steps outside a nested loop or switch (they charge as they run), and the decision itself;
  // fixed[1]: the body's. False when a kernel inside reads the cycle counters while it runs (planRun).
  bool charged_at_end = false;
  std::vector<FixedCharge> fixed[2];
  // Sequence: per child, the steps from it that run row by row together (null: none; planRun).
  std::vector<std::unique_ptr<RowChain>> row_chains;
};

// A value's storage and placement.
struct Slot {
  enum class Storage { Param, Constant, Arena };
  TensorType type;
  TileMapping mapping;
  Storage storage = Storage::Arena;
  int index = 0;  // Param: parameter number; Constant: index into Graph::constants
  size_t offset = 0;  // Arena: byte offset, assigned after lowering from the slot's live range (layoutArena)
  int64_t def = -1;  // first program step that writes it
  int64_t last_use = -1;
  bool always_live = false;
  // Arena: the slot whose host bytes this one uses, or -1. A loop body's new value of a loop-carried value shares
  // the carried value's bytes when nothing reads the old value after the new one is written (see lowerWhile), so
  // that the loop's update copy has nothing to move. Host storage only: tile memory and cycles are unchanged.
  int share = -1;
  // A result returned in place of a donated parameter (the program's aliases: jax's donate_argnums). On the IPU it
  // is that parameter's variable, written at the end (Copied: it is computed in bytes of its own from its step to
  // the end) or by the op that defines it (InPlace: the parameter's last read, with the same bytes on the same
  // tiles). Tile memory counts it so (computeMemory) instead of as a variable of its own; host storage is unchanged.
  enum class Donated { No, Copied, InPlace };
  Donated donated = Donated::No;
};

// Per program step: transient bytes per tile (exchange receive buffers) while the step runs.
struct StepRecord {
  std::vector<std::pair<int, int64_t>> transient;
};

struct Graph {
  DeviceDescription device;
  std::vector<Slot> slots;
  std::vector<std::vector<uint8_t>> constants;
  std::vector<StepRecord> steps;
  std::vector<std::pair<int64_t, int64_t>> loops;  // [first step, last step] of each while loop, inner first
  std::vector<int64_t> vertex_bytes;  // per tile: vertex state (permanent in Poplar)
  std::vector<std::set<int>> codelets;  // per tile: codelet types used
  std::vector<std::string> codelet_names;
  size_t arena_bytes = 0;  // host bytes of a run's arena: slots whose live ranges overlap never share bytes
  size_t peak_live_bytes = 0;  // the most arena bytes live at any one step (what arena_bytes is bounded by)
  int num_scratch = 0;
  int num_dynamic = 0;
  std::unique_ptr<Node> root;
  std::vector<const Node*> step_nodes;  // Node::id -> node
  std::vector<int> param_slots;
  std::vector<int> result_slots;
  std::vector<TensorType> result_types;  // as declared (a reshaped result shares its operand's slot)
};

}  // namespace ipu
