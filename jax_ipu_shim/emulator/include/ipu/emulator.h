// The emulator's public C++ interface: programs in; results, memory maps and cycle estimates out.
//
// This is all that the PJRT layer (and any other client) may include. It knows nothing of JAX, MLIR or PJRT.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ipu/program.h"

namespace ipu {

class Trace;  // ipu/trace.h

// Element types the emulated IPU stores; their facts are the one trait table of ipu/dtype.h. Everything else in a
// program is rejected by name at compile time.
// Token (StableHLO's !stablehlo.token, spelled "token" in programs) orders host I/O: a 0-byte scalar that is passed
// through calls, loops and branches like any value and never computed on.
enum class DType : uint8_t {
  Bool,
  F16,
  F32,
  I32,
  U32,
  Token,
  I8,
  U8,
  I16,
  U16,
  BF16,
  C64,
  F64,
  I64,
  U64,
  C128,
  // fp8 (Poplar's quarter; dtype.h): the last five, in this order (dtype.cc indexes its value tables by it)
  F8E4M3FN,
  F8E5M2,
  F8E4M3FNUZ,
  F8E5M2FNUZ,
  F8E4M3B11FNUZ,
  // the sub-byte integers (dtype.h): held one per byte, moved and converted; computed on in 8 bits by the front end
  I4,
  U4,
  I2,
  U2
};

size_t dtypeSize(DType dtype);      // Token: 0
const char* dtypeName(DType dtype);  // "bool", "f16", "f32", "i32", "u32", "token", "i8", ..., "bf16", "c64"

struct TensorType {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;

  int64_t numElements() const;
  size_t numBytes() const;
  std::string str() const;  // MLIR spelling, e.g. "tensor<2x3xf32>", "tensor<i1>"
};

// What kind of failure an Error is; the PJRT layer maps it onto its error codes.
enum class ErrorCode { InvalidArgument, Unimplemented, ResourceExhausted, Internal, Cancelled };

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

// The IPU Model's parameters, as Poplar's IPUModel has them: a chip version and what a user sets differently from
// that chip (0 keeps the chip's own value). `set` takes each by its one name, the same in jax_ipu's client options,
// the C API's model JSON and the profile report (tiles_per_ipu is the client option num_tiles).
struct ModelParameters {
  std::string version = "ipu2";    // IPUVersion: "ipu1", "ipu2" (Mk2 GC200), "ipu21" (Bow)
  int64_t num_tiles = 0;           // tilesPerIPU
  int64_t memory_bytes_per_tile = 0;     // memoryBytesPerTile: SRAM per tile
  int64_t num_worker_contexts = 0;       // numWorkerContexts: hardware worker threads per tile
  int64_t tile_clock_frequency = 0;      // tileClockFrequency, Hz
  int64_t exchange_bytes_per_cycle = 0;  // exchangeBytesPerCycle, per tile
  int64_t global_sync_cycles = 0;        // globalSyncCycles: one sync of every tile

  // Sets the integer parameter `name`; false for a name that is not one.
  bool set(const std::string& name, int64_t value);
  // The parameters set here other than version and tiles, as Poplar names them ("memoryBytesPerTile=4096, ..."),
  // or "" when none is.
  std::string settings() const;
  // The names `set` takes, comma-separated, for error messages.
  static const char* names();
  // A JSON object of these names (and "version"), e.g. {"version": "ipu21", "num_tiles": 16}; "" is the defaults.
  static ModelParameters parseJson(const std::string& text);
};

// One IPU: the single place that holds hardware parameters. Several devices are a list of these.
struct DeviceDescription {
  std::string version;             // "ipu1", "ipu2", "ipu21"
  int num_tiles = 0;               // tiles in use (the IPU Model may use fewer than the chip has)
  int tiles_per_chip = 0;          // tiles the chip has
  int64_t bytes_per_tile = 0;      // SRAM per tile
  int num_worker_contexts = 0;     // hardware worker threads per tile
  int64_t tile_clock_frequency = 0;  // Hz
  double exchange_bytes_per_cycle = 0;  // per tile
  uint64_t sync_cycles = 0;             // one sync of every tile of the chip (a superstep's end)
  // The AMP (matrix unit): multiply-accumulates per tile per cycle in f16 and f32, and the input channels it
  // consumes per pass (a contraction shorter than that still takes a whole pass).
  int amp_f16_macs_per_cycle = 0;
  int amp_f32_macs_per_cycle = 0;
  // fp8 (Poplar's quarter type): multiply-accumulates per tile per cycle with fp8 operands; 0 on chips without fp8,
  // whose programs may not hold an fp8 value (dtype.h).
  int amp_f8_macs_per_cycle = 0;
  int amp_f16_depth = 0;
  int amp_f32_depth = 0;
  double link_bytes_per_cycle = 0;      // IPU-Links, per chip, one direction (chip to chip)
  double host_bytes_per_cycle = 0;      // the host link (PCIe), per chip
  double gateway_bytes_per_cycle = 0;   // GW-Links between IPU-Machines (hosts), one direction

  // Cycles (at this chip's clock) to move `bytes` over the IPU-Links to another IPU, or over the host link;
  // each includes a fixed latency. Sources and calibrations are in device.cc.
  uint64_t linkCycles(int64_t bytes) const;
  uint64_t hostTransferCycles(int64_t bytes) const;
  // Cycles to move `bytes` from an IPU of one IPU-Machine to one of another over their IPU-Gateways' GW-Links.
  uint64_t gatewayCycles(int64_t bytes) const;
  // A sync across `ipus` chips (poplibs: 15 ns per hop, x2).
  uint64_t interIpuSyncCycles(int ipus) const;

  // num_tiles == 0 means all tiles of the chip. Throws Error(InvalidArgument) for an unknown version or a tile
  // count outside 1..tiles_per_chip, naming the value and what is allowed.
  static DeviceDescription forVersion(const std::string& version, int num_tiles);
  // The chip of `model.version` with the model's parameters in place of its own; throws Error(InvalidArgument)
  // naming a parameter (Poplar's name) outside its range.
  static DeviceDescription forModel(const ModelParameters& model);
  std::string toJson() const;
};

// Per-tile memory of a compiled program (peak over the program's steps).
struct MemoryReport {
  std::vector<int64_t> bytes_per_tile;
  int worst_tile = 0;
  int64_t worst_bytes = 0;
  int64_t total_bytes = 0;
};

// One step of the program tree as it ran: a compute set, exchange/copy, sync, stream copy, host callback or
// collective, with the op and source location it was lowered from. Steps that run several times (loop bodies)
// are one entry whose counters add up.
struct StepProfile {
  int id = 0;              // program order (the step's index in the program tree, depth first)
  std::string type;  // "Execute", "Copy", "RepeatWhileTrue", "Switch", "StreamCopy", "HostCall", "Collective"...
  std::string name;  // the codelet / op, e.g. "stablehlo.add"
  std::string loc;  // source location, e.g. "model.py:12" (may be empty)
  uint64_t executions = 0;
  uint64_t compute_cycles = 0;
  uint64_t exchange_cycles = 0;
  uint64_t sync_cycles = 0;
  uint64_t supersteps = 0;
};

// Cycle estimate of one execution, split the way a BSP superstep is, with the per-step trace.
struct RunProfile {
  uint64_t total_cycles = 0;
  uint64_t compute_cycles = 0;
  uint64_t exchange_cycles = 0;
  uint64_t sync_cycles = 0;
  uint64_t supersteps = 0;
  std::vector<StepProfile> steps;  // only steps that ran, in program order
  std::string toJson() const;
};

// ---- What a run talks to outside its own IPU ----

// The host side of a device's data streams and host functions (Poplar: connectStream, host callbacks).
// Implemented by the runtime that owns the device (the PJRT layer); called on the run's thread. A method may
// block (an infeed waits for data as an IPU waits on its host); it throws Error to fail the run.
class HostInterface {
 public:
  virtual ~HostInterface() = default;
  // Host-to-device StreamCopy: fills dst[i] (types[i].numBytes() bytes each) with the next infeed entry.
  virtual void infeed(const std::string& program, const std::vector<TensorType>& types,
                      const std::vector<void*>& dst) = 0;
  // Device-to-host StreamCopy: appends one outfeed entry (copied before returning).
  virtual void outfeed(const std::string& program, const std::vector<TensorType>& types,
                       const std::vector<const void*>& src) = 0;
  // A host function (jax.debug.print, pure_callback, io_callback): `id` names it as the program does.
  virtual void callback(int64_t id, const std::vector<TensorType>& in_types, const std::vector<const void*>& in,
                        const std::vector<TensorType>& out_types, const std::vector<void*>& out) = 0;
};

// What a replica brings to a step of its launch's ReplicaGroup: the collective it is at (`tag`; kEnded when its
// program has ended, kBarrier at a barrier) and the bytes of its operand, which the other replicas read (a replica
// in another process receives a copy of them).
struct ReplicaPost {
  static constexpr int kEnded = -1;
  static constexpr int kBarrier = -2;
  int tag = kEnded;
  const uint8_t* bytes = nullptr;
  size_t size = 0;
};

// The replicas of a launch that run in other processes (several hosts, jax.distributed), and the transport that
// carries their posts. Implemented by the runtime (the PJRT layer); the group calls step() once per step with the
// same step numbers in every process.
class RemoteReplicas {
 public:
  struct Received {
    int replica = 0;
    ReplicaPost post;  // bytes point into `data`
    std::vector<uint8_t> data;
  };
  virtual ~RemoteReplicas() = default;
  // Sends the posts of this process's replicas (replica id, post) to the other processes and returns theirs.
  // Throws Error naming a process that failed, ended or went silent past the timeout.
  virtual std::vector<Received> step(uint64_t step, const std::vector<std::pair<int, const ReplicaPost*>>& local) = 0;
  // Tells the other processes that this launch failed (they throw with `why` instead of waiting).
  virtual void abort(const std::string& why) = 0;
};

// The replicas of one launch over several IPUs: collectives meet here. The launcher makes one per launch and
// hands it to every replica's run. Every replica calls the same sequence of exchange()/barrier() calls.
class ReplicaGroup {
 public:
  explicit ReplicaGroup(int num_replicas);
  // A group of `num_replicas` of which `local` run in this process and the others elsewhere, behind `remote`.
  ReplicaGroup(int num_replicas, std::vector<int> local, std::shared_ptr<RemoteReplicas> remote);
  int size() const { return size_; }
  // Posts `mine` (null: the replica has ended its program) for this replica, waits for every replica to post,
  // and returns all posts in replica order (null for an ended one). The caller must not change what it posted
  // until the next barrier() returns; a remote replica's post stays valid until then too.
  std::vector<const ReplicaPost*> exchange(int replica, const ReplicaPost* mine);
  // Waits until every replica has arrived.
  void barrier(int replica);
  // Fails the group: every replica waiting now or later throws Error(Internal) with `why`. Called by a replica
  // whose run fails, so that the others never wait forever (in other processes too).
  void abort(const std::string& why);

 private:
  void arrive(std::unique_lock<std::mutex>& lock);
  void abortLocked(const std::string& why, bool tell_remote);
  const int size_;
  int local_count_;
  std::shared_ptr<RemoteReplicas> remote_;
  std::vector<int> local_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  std::vector<const ReplicaPost*> posts_;
  std::vector<const ReplicaPost*> published_;
  std::vector<RemoteReplicas::Received> received_;  // the remote posts of the latest step
  std::string aborted_;
};

// How a program is lowered: Poplar's compile OptionFlags, passed to Executable::compile. The emulator reads nothing
// from the environment; jax_ipu fills these from its flags (jax_ipu.config.lowering_options).
struct CompileOptions {
  bool fusion = true;  // fuse chains of elementwise ops into one compute set, as popops' expressions do
  bool exchange_per_element = false;  // count exchanged elements one by one (the exchange accounting's reference)
  bool allow_out_of_memory = false;  // Poplar's debug.allowOutOfMemory: a program that overflows a tile compiles
  // f64, i64 and u64 run emulated (dtype.h); false refuses them at compile time, as Poplar (no 64-bit types) does.
  bool emulate_64bit = true;
  // poplin's availableMemoryProportion of every matmul and convolution: the share of a tile its plan may use for
  // temporaries, in (0, 1]; a dot_general no grid of which fits runs in row chunks (dot.cc). 0: poplin's default
  // (cost::kAvailableMemoryProportion).
  double available_memory_proportion = 0;
  // poplin's partialsType "half" for every matmul and convolution of f16 operands and an f16 result: the partials
  // their tiles keep, exchange and reduce are f16 (each a tile's f32 sum rounded once), not f32 (matmul.h's
  // partialsType). Other types keep f32 partials, as Poplar's float option does for every type.
  bool half_partials = false;
  Trace* trace = nullptr;  // where the lowering's span goes (not part of the JSON); null: not traced
  // {"fusion": false, ...}: any subset of the fields (empty text: every default). An unknown name or a value of
  // the wrong kind throws Error(InvalidArgument) naming it.
  static CompileOptions parse(const std::string& json);
  std::string toJson() const;
};

// Host threads that run the tiles' work: a run splits each superstep into chunks of whole tiles, and the chunks run
// in parallel on the pool (the calling thread takes part). Runs may share a pool; its owner (a PJRT client, the C
// API) makes it and, if ever, destroys it once no run uses it.
class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // 1..256
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  static int defaultThreads();  // min(hardware threads, 8)
  int threads() const { return threads_; }
  // Calls fn(i) for every i in [0, n) and returns when all are done. Rethrows the first exception.
  void parallelFor(int64_t n, const std::function<void(int64_t)>& fn);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int threads_;
};

struct RunOptions {
  int replica = 0;  // this run's replica (stablehlo.replica_id)
  ThreadPool* pool = nullptr;  // null: the run computes on the calling thread alone
  ReplicaGroup* replicas = nullptr;  // null: a single replica
  HostInterface* host = nullptr;  // null: a program with streams or host calls fails, naming them
  // The host's interrupt count (Ctrl-C) and its value when the run was launched: once they differ, the run stops
  // before its next step with Error(Cancelled). Null: never interrupted.
  const std::atomic<uint64_t>* interrupts = nullptr;
  uint64_t interrupts_seen = 0;
  Trace* trace = nullptr;  // where the run's span goes; null: not traced
};

// A program lowered onto a device's tiles. Immutable after compile; run() may be called from several threads.
class Executable {
 public:
  // Parses a "jax-ipu-program" v1 JSON document (see jax_ipu_shim/README.md) and lowers it onto `device`.
  // Throws Error: InvalidArgument for a malformed program, Unimplemented for an op or dtype the emulator lacks
  // (naming the op and its types), ResourceExhausted for a program that does not fit in tile memory
  // ("Out of memory on tile N: X bytes used but tiles only have B bytes of memory").
  static std::unique_ptr<Executable> compile(const std::string& program_json, const DeviceDescription& device,
                                             const CompileOptions& options = CompileOptions());

  virtual ~Executable() = default;
  virtual const std::string& name() const = 0;
  virtual const DeviceDescription& device() const = 0;
  virtual const std::vector<TensorType>& inputTypes() const = 0;
  virtual const std::vector<TensorType>& outputTypes() const = 0;
  // (param index, result index) pairs: donated inputs whose buffers the outputs may reuse.
  virtual const std::vector<std::pair<int, int>>& aliases() const = 0;
  virtual const MemoryReport& memory() const = 0;
  virtual uint64_t estimatedCycles() const = 0;  // static: loop bodies counted once
  virtual double flops() const = 0;  // static
  virtual std::string infoJson() const = 0;  // inputs, outputs, memory summary, estimates
  // The static per-step table: one execution of every step of the program tree (loop bodies once, every branch).
  virtual std::vector<StepProfile> staticSteps() const = 0;
  // The graph profile of a report (memory categories per tile, liveness per step, program tree; see memory.h
  // profileJson). Computed on demand: only reports ask for it.
  virtual std::string profileJson() const { return "{}"; }

  // inputs[i] points at inputTypes()[i].numBytes() bytes; outputs[j] at outputTypes()[j].numBytes() writable bytes.
  // Throws Error on failure; never aborts.
  // An output may be the same buffer as an input (donation): the run then updates it in place.
  virtual RunProfile run(const std::vector<const void*>& inputs, const std::vector<void*>& outputs,
                         const RunOptions& options) const = 0;
  RunProfile run(const std::vector<const void*>& inputs, const std::vector<void*>& outputs) const {
    return run(inputs, outputs, RunOptions());
  }
  // The same, writing the profile into `*profile` and reusing its storage: a caller that keeps a profile per thread
  // allocates nothing for it once its runs repeat (dispatch of small programs).
  virtual void runInto(const std::vector<const void*>& inputs, const std::vector<void*>& outputs,
                       const RunOptions& options, RunProfile* profile) const {
    *profile = run(inputs, outputs, options);
  }

  // The program it was compiled from ("jax-ipu-program" JSON) and how: compile(programJson(), device(), options())
  // rebuilds it (serialised executables).
  virtual const std::string& programJson() const = 0;
  virtual const CompileOptions& options() const = 0;
  // Host I/O the program does, so that a runtime can tell whether a reader could ever be served.
  virtual bool hasInfeed() const { return false; }
  virtual bool hasOutfeed() const { return false; }
  virtual bool hasHostCalls() const { return false; }
  // Copies it was compiled for, one per IPU (stablehlo collectives need exactly that many IPUs).
  virtual int numReplicas() const { return 1; }
  // Of those, how many make one replica (jax's num_partitions; Program::partitions).
  virtual int numPartitions() const { return 1; }
  // How the entry's parameters and results, as global arrays, are split over the copies (partitions > 1); empty
  // when the program does not say (Program::param_shardings).
  virtual const std::vector<TileSharding>& paramShardings() const = 0;
  virtual const std::vector<TileSharding>& resultShardings() const = 0;
  // XLA's partitioned program as an HloModuleProto (Program::partitioned_hlo); empty when there is none.
  virtual const std::string& partitionedHlo() const = 0;
};

}  // namespace ipu
