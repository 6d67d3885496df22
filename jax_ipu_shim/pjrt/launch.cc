// PJRT_LoadedExecutable_Execute: a launch of a program on one or several IPUs.
//
// Execute checks the arguments at once (a wrong type or a deleted input is an error of the call), makes the
// output buffers with their shapes and a pending definition, queues one run per device and returns. Each run
// happens later on its device's worker; its outcome (or its error) completes the outputs' definition, which
// is where the user sees it: block_until_ready(), np.asarray(y), or a later program that reads y.
//
// Cheap programs are the exception (as XLA's CPU client runs cheap computations inline): when a program's last
// run took less host time than handing it to the worker and waiting for it would, its inputs are all defined,
// it does no host I/O and its IPU is idle, it runs at once on the caller's thread. Nothing else can tell.
//
// Programs that call the host (jax.pure_callback, io_callback, jax.debug.print, checkify, host_callback) on one IPU
// have run when Execute returns, as XLA's CPU client runs them: queued, and waited for (jaxlib has let go of the
// GIL, so the callbacks run on the worker). A callback's error is then the call's error (XlaRuntimeError where the
// jitted function is called, as on cpu: equinox's error_if, jax's own callback tests), not a failure waiting in
// the results. A run a Ctrl-C cancelled is the exception: its outputs carry the error and the call returns, so
// that Python raises the KeyboardInterrupt it has pending right there (the callbacks never run on the caller's
// thread, where Python would raise it inside the callback instead). Launches on several IPUs (pmap, sharded jit)
// stay asynchronous; their errors are the results'.
#include <algorithm>
#include <chrono>

#include "ipu/c_handle.h"
#include "ipu/trace.h"
#include "plugin.h"

namespace jax_ipu {
namespace {

std::string ShapeString(PJRT_Buffer_Type type, const std::vector<int64_t>& dims) {
  std::string s = TypeName(type);
  s += "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

// One replica of a launch: everything its run needs, owned by the queued work (jax may drop its arrays first).
struct Replica {
  std::shared_ptr<const ipu::Executable> program;
  PJRT_Device* device = nullptr;
  int index = 0;
  std::shared_ptr<ipu::ReplicaGroup> group;  // null for a single replica
  std::vector<Bytes> inputs;
  std::vector<std::shared_ptr<Completion>> inputs_defined;
  std::vector<Bytes> outputs;
  std::shared_ptr<Completion> done;  // defines every output; also the launch's device-complete event
  std::shared_ptr<std::atomic<int64_t>> last_run_ns;  // the executable's
  uint64_t interrupts_seen = 0;  // Interrupts() at launch: a Ctrl-C after it cancels the run (interrupt.cc)
};

// Host time below which a run is cheaper on the caller's thread than a round trip through the worker: the hand-off,
// and waking the caller that waits for the result, cost ~50 us on a 2-core VM (a 200-step RNN scan, ~58 us of
// emulation: 103-122 us queued, 65 us inline, both series). jaxlib 0.4.13's own CPU client runs programs of that
// size at once on the caller's thread (a 300 us loop returned after 305 us of its 309), so that series' users see
// the same here up to 150 us; the current series' CPU client dispatches them asynchronously, and so does this one
// above 20 us.
#if JAX_IPU_PJRT_MINOR >= 90
constexpr int64_t kInlineRunNs = 20000;
#else
constexpr int64_t kInlineRunNs = 150000;
#endif

// Checks that `buffer` is what parameter `index` of `program` takes; adds its bytes and definition to `replica`.
void AddArgument(const ipu::Executable& program, size_t index, PJRT_Buffer* buffer, Replica* replica) {
  const ipu::TensorType& want = program.inputTypes()[index];
  ipu::DType dtype;
  const bool known = ToIpuDType(buffer->type, &dtype);
  if (!known || dtype != want.dtype || buffer->dims != want.shape) {
    throw ipu::Error(ipu::ErrorCode::InvalidArgument, "argument " + std::to_string(index) + " of " + program.name() +
                                                          " is " + ShapeString(buffer->type, buffer->dims) +
                                                          " but the program takes " + want.str());
  }
  std::lock_guard<std::mutex> lock(buffer->mutex);
  if (!buffer->data) {
    throw ipu::Error(ipu::ErrorCode::InvalidArgument, "argument " + std::to_string(index) + " of " + program.name() +
                                                          " has been deleted or donated to an earlier call");
  }
  replica->inputs.push_back(buffer->data);
  replica->inputs_defined.push_back(buffer->defined);
}

// Gives output j its bytes. A donated input i whose bytes nothing else holds any more (no other buffer, no
// pending read) becomes output j itself: the program updates it in place and nothing is allocated. Otherwise
// (a transfer to the host still reads it) the output gets fresh bytes.
void PlaceOutputs(Replica& r) {
  const ipu::Executable& program = *r.program;
  if (program.aliases().empty()) {
    for (size_t j = 0; j < r.outputs.size(); ++j) r.outputs[j]->resize(program.outputTypes()[j].numBytes());
    return;
  }
  std::vector<bool> placed(r.outputs.size(), false);
  for (const auto& [i, j] : program.aliases()) {
    Bytes& donated = r.inputs[i];
    if (donated.use_count() == 1 && donated->size() == program.outputTypes()[j].numBytes() && !placed[j]) {
      r.outputs[j]->swap(*donated);
      donated = r.outputs[j];
      placed[j] = true;
    }
  }
  for (size_t j = 0; j < r.outputs.size(); ++j) {
    if (!placed[j]) r.outputs[j]->resize(program.outputTypes()[j].numBytes());
  }
}

// What runs on one thread reuse from one run to the next, so that a tiny launch allocates little more than its
// outputs: one thread_local object (each thread_local costs a lookup per use in a shared library).
struct RunScratch {
  std::vector<const void*> in;
  std::vector<void*> out;
  ipu::RunProfile profile;
  Replica inline_replica;
  std::vector<std::unique_ptr<PJRT_Buffer>> inline_results;
};
RunScratch& ThisThreadsScratch() {
  thread_local RunScratch scratch;
  return scratch;
}

// Runs one replica: waits for inputs defined elsewhere, runs the program, records its profile on the device. Returns
// the outcome (code 0: ok); on failure the outputs hold no memory. Lets go of every byte vector before returning:
// whoever is woken up by the completion (a donation, the next run) sees only the references that really remain.
PJRT_Error_Code RunReplica(Replica& r, std::string* message) {
  PJRT_Error_Code code = static_cast<PJRT_Error_Code>(0);
  const ipu::Executable& program = *r.program;
  const RunInterrupts interrupts(r.interrupts_seen);  // for the waits of this run (infeed, callbacks, collectives)
  // An input from another IPU's queue may still be in flight; one whose definition failed fails this run with
  // the same error (as jax's other backends propagate errors through buffers).
  for (const auto& defined : r.inputs_defined) {
    defined->Wait();
    if (defined->code() != 0 && code == 0) {
      code = defined->code();
      *message = defined->message();
    }
  }
  // Per thread, reused by every run on it: the pointer lists, and the profile that the run fills and then trades
  // for the device's previous one (whose storage the next run on this thread reuses). Runs never nest on a thread.
  RunScratch& scratch = ThisThreadsScratch();
  std::vector<const void*>& in = scratch.in;
  std::vector<void*>& out = scratch.out;
  ipu::RunProfile& profile = scratch.profile;
  int64_t profiled_from = 0, profiled_to = 0;
  if (code == 0) {
    try {
      PlaceOutputs(r);
      in.clear();
      out.clear();
      for (const Bytes& b : r.inputs) in.push_back(b->data());
      for (const Bytes& b : r.outputs) out.push_back(b->data());
      ipu::RunOptions options;
      options.replica = r.index;
      options.pool = r.device->client->pool.get();
      options.replicas = r.group.get();
      options.host = r.device->host.get();
      options.interrupts = &Interrupts();
      options.interrupts_seen = r.interrupts_seen;
      options.trace = ipu::processTrace();
      const auto start = std::chrono::steady_clock::now();
      profiled_from = Profiling() ? ipu::trace::nowNs() : 0;  // jax.profiler's IPU lanes (profiler.cc)
      program.runInto(in, out, options, &profile);
      if (profiled_from) profiled_to = ipu::trace::nowNs();
      // The end of the program is a meeting point too: a replica still waiting in a collective then learns that
      // this one has ended (it fails, naming both, instead of waiting forever; see collective.cc).
      if (r.group) r.group->exchange(r.index, nullptr);
      const auto host_time = std::chrono::steady_clock::now() - start;
      r.last_run_ns->store(std::chrono::duration_cast<std::chrono::nanoseconds>(host_time).count());
    } catch (const ipu::Error& e) {
      code = ToPjrtCode(e.code());
      *message = e.what();
      if (e.code() == ipu::ErrorCode::Cancelled && *message == "interrupted") {  // between two steps (engine.cc)
        *message = "ipu device " + std::to_string(r.device->local_hardware_id) + ": " + program.name() +
                   " was interrupted (SIGINT, Ctrl-C) before it finished; its results do not exist";
      }
    } catch (const std::bad_alloc&) {
      code = PJRT_Error_Code_RESOURCE_EXHAUSTED;
      *message = "ipu device " + std::to_string(r.device->local_hardware_id) + ": out of host memory running " +
                 program.name();
    } catch (const std::exception& e) {
      code = PJRT_Error_Code_INTERNAL;
      *message = "ipu device " + std::to_string(r.device->local_hardware_id) + ": running " + program.name() +
                 " failed: " + e.what();
    }
  }
  if (code != 0 && r.group) r.group->abort(*message);  // the other replicas fail instead of waiting for this one
  if (code == 0 && profiled_from) ProfileRun(r.device, r.index, program.name(), profiled_from, profiled_to, profile);
  if (code == 0) {
    std::lock_guard<std::mutex> lock(r.device->stats_mutex);
    if (r.device->last_program != program.name()) r.device->last_program = program.name();
    CountLoadedProgram(r.device, r.program);
    std::swap(r.device->last_profile, profile);
    r.device->executions += 1;
  } else {
    for (Bytes& b : r.outputs) ByteVector().swap(*b);  // a failed output holds no memory
  }
  if (program.hasOutfeed()) r.device->host->OutfeedProgramFinished(code == 0 ? nullptr : message);
  r.inputs.clear();
  r.outputs.clear();
  r.inputs_defined.clear();
  return code;
}

// The work item of a queued run: runs it, then completes its outputs' definition.
void Run(Replica& r) {
  std::string message;
  const PJRT_Error_Code code = RunReplica(r, &message);
  r.done->Set(code, std::move(message));
}

// A launch on one IPU that runs at once on the caller's thread (see the top of this file) if it may; false, with
// nothing done, if it must be queued instead. Throws for a bad argument before anything happens.
// A synchronous launch's failure is `*error` (and nothing is returned); otherwise failures are the outputs'.
bool ExecuteInline(const PJRT_LoadedExecutable& loaded, PJRT_Device* device, PJRT_LoadedExecutable_Execute_Args* args,
                   bool synchronous, PJRT_Error** error) {
  const ipu::Executable& program = *loaded.program;
  // Called from a host callback of a program that runs on this IPU: its queue can run nothing before that program
  // ends, so a jax computation the callback makes on the same IPU runs here and now (queued, it would wait for
  // the program that waits for it).
  const bool nested = ServingQueue() == device->queue.get();
  const int64_t last = loaded.last_run_ns->load(std::memory_order_relaxed);
  if (!nested && (last < 0 || last > kInlineRunNs)) return false;
  if (program.hasInfeed() || program.hasOutfeed()) return false;
  if (program.hasHostCalls() && !nested) return false;
  if (!nested && !device->queue->Idle()) return false;
  // One replica and result list per thread, reused: their vectors keep their capacity, so that a launch allocates
  // little more than its outputs. Emptied on the way out, whatever happens, so that they hold nothing alive.
  RunScratch& scratch = ThisThreadsScratch();
  Replica& r = scratch.inline_replica;
  std::vector<std::unique_ptr<PJRT_Buffer>>& results = scratch.inline_results;
  struct Reset {
    Replica& r;
    std::vector<std::unique_ptr<PJRT_Buffer>>& results;
    ~Reset() {
      r.inputs.clear();
      r.inputs_defined.clear();
      r.outputs.clear();
      r.program.reset();
      r.last_run_ns.reset();
      results.clear();
    }
  } reset{r, results};
  r.program = loaded.program;
  r.device = device;
  r.index = 0;
  r.last_run_ns = loaded.last_run_ns;
  r.interrupts_seen = Interrupts().load(std::memory_order_relaxed);
  const size_t num_inputs = program.inputTypes().size();
  for (size_t i = 0; i < num_inputs; ++i) AddArgument(program, i, args->argument_lists[0][i], &r);
  for (const auto& defined : r.inputs_defined) {
    if (!defined->IsReady() && !nested) return false;  // nested: RunReplica waits for them
  }
  const std::vector<ipu::TensorType>& types = program.outputTypes();
  for (const ipu::TensorType& type : types) {
    auto bytes = std::make_shared<ByteVector>();  // sized by the run
    r.outputs.push_back(bytes);
    results.emplace_back(NewBuffer(device, FromIpuDType(type.dtype), type.shape, std::move(bytes), nullptr));
  }
  // Donated arrays are deleted for jaxlib (see Execute); nothing is queued, so no launch order is at stake.
  for (const auto& alias : program.aliases()) {
    PJRT_Buffer* donated = args->argument_lists[0][alias.first];
    std::lock_guard<std::mutex> buffer_lock(donated->mutex);
    DropBytes(donated);
  }
  std::string message;
  const PJRT_Error_Code code = RunReplica(r, &message);
  if (code != 0 && synchronous && Interrupts().load() == r.interrupts_seen) {
    *error = MakeError(code, message);
    return true;
  }
  // Defined by now: a successful run's outputs share the one ready completion (nothing to allocate or signal).
  std::shared_ptr<Completion> done = Completion::Ready();
  if (code != 0) {
    done = std::make_shared<Completion>();
    done->Set(code, std::move(message));
  }
  for (size_t j = 0; j < results.size(); ++j) {
    results[j]->defined = done;
    args->output_lists[0][j] = results[j].release();
  }
  if (args->device_complete_events != nullptr) args->device_complete_events[0] = NewEvent(std::move(done));
  return true;
}

}  // namespace
}  // namespace jax_ipu

using namespace jax_ipu;

namespace jax_ipu {
namespace {
// A donated argument that is also passed as another argument of the same call: XLA refuses the call (its donation
// would hand the other argument's bytes to a result), in its words.
PJRT_Error* DonatedTwice(const ipu::Executable& program, const PJRT_LoadedExecutable_Execute_Args* args, size_t n) {
  const size_t num_inputs = program.inputTypes().size();
  for (size_t d = 0; d < n; ++d) {
    for (const auto& alias : program.aliases()) {
      const size_t donated = static_cast<size_t>(alias.first);
      for (size_t k = 0; k < num_inputs; ++k) {
        if (k == donated || args->argument_lists[d][k] != args->argument_lists[d][donated]) continue;
        const size_t first = std::min(k, donated), second = std::max(k, donated);
        const std::string where =
            " in the same call to Execute() (flattened argument " + std::to_string(second) + ", replica " +
            std::to_string(d) + ", partition 0, first use: " + std::to_string(first) + "). Toy example for this bug: ";
        return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,
                         first == donated
                             ? "Attempt to use a buffer that was previously donated" + where + "`f(donate(a), a)`."
                             : "Attempt to donate a buffer which is also used" + where + "`f(a, donate(a))`.");
      }
    }
  }
  return nullptr;
}
}  // namespace
}  // namespace jax_ipu

PJRT_Error* PJRT_LoadedExecutable_Execute_Impl(PJRT_LoadedExecutable_Execute_Args* args) {
  return Guard("PJRT_LoadedExecutable_Execute", [&]() -> PJRT_Error* {
    PJRT_LoadedExecutable* loaded = args->executable;
    if (loaded->deleted) { return MakeError(PJRT_Error_Code_INVALID_ARGUMENT, "the ipu executable has been deleted"); }
    const ipu::Executable& program = *loaded->program;
    // This process's devices of the executable, each running its replica (its place in the device assignment);
    // the other processes of a jax.distributed job run the rest.
    PJRT_Device* const* devices = loaded->addressable.data();
    size_t n = loaded->addressable.size();
    const int* replica_of = loaded->addressable_replicas.data();
    const int zero = 0;
    size_t total = loaded->devices.size();
    if (args->execute_device != nullptr) {
      devices = &args->execute_device;
      n = total = 1;
      replica_of = &zero;
    }
    if (args->num_devices != n) {
      return MakeError(PJRT_Error_Code_INVALID_ARGUMENT, "executable compiled for " + std::to_string(n) +
                                                             " ipu devices of this process, launched on " +
                                                             std::to_string(args->num_devices));
    }
    if (program.numReplicas() > 1 && static_cast<size_t>(program.numReplicas()) != total) {
      return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,
                       program.name() + " was compiled for " + std::to_string(program.numReplicas()) +
                           " replicas but is launched on " + std::to_string(total) + " ipu devices");
    }
    const size_t num_inputs = program.inputTypes().size();
    if (args->num_args != num_inputs) {
      return MakeError(PJRT_Error_Code_INVALID_ARGUMENT, program.name() + " takes " + std::to_string(num_inputs) +
                                                             " arguments, " + std::to_string(args->num_args) +
                                                             " given");
    }

    if (PJRT_Error* twice = DonatedTwice(program, args, n)) return twice;

    // Runs before returning (see the top of this file); ExecuteInline runs it here if it can.
    const bool synchronous = n == 1 && total == 1 && program.hasHostCalls();
    PJRT_Error* failed = nullptr;
    if (n == 1 && total == 1 && ExecuteInline(*loaded, devices[0], args, synchronous, &failed)) return failed;

    // Everything that can fail happens before anything is queued or donated.
    std::shared_ptr<ipu::ReplicaGroup> group;
    std::shared_ptr<RemoteLaunchReplicas> remote;
    if (total > n) {  // replicas in other processes: their posts come over the transport
      std::vector<int> local(replica_of, replica_of + n), processes;
      for (PJRT_Device* d : loaded->devices) {
        if (!d->addressable && std::find(processes.begin(), processes.end(), d->process_index) == processes.end())
          processes.push_back(d->process_index);
      }
      remote = RemoteLaunch(program.name(), processes);
      group = std::make_shared<ipu::ReplicaGroup>(static_cast<int>(total), std::move(local), remote);
    } else if (n > 1) {
      group = std::make_shared<ipu::ReplicaGroup>(static_cast<int>(n));
    }
    const size_t num_outputs = program.outputTypes().size();
    std::vector<std::shared_ptr<Replica>> replicas;
    replicas.reserve(n);
    for (size_t d = 0; d < n; ++d) {
      auto r = std::make_shared<Replica>();
      r->program = loaded->program;
      r->device = devices[d];
      r->index = replica_of[d];
      r->group = group;
      r->done = std::make_shared<Completion>();
      r->last_run_ns = loaded->last_run_ns;
      r->interrupts_seen = Interrupts().load(std::memory_order_relaxed);
      r->inputs.reserve(num_inputs);
      r->inputs_defined.reserve(num_inputs);
      r->outputs.reserve(num_outputs);
      for (size_t i = 0; i < num_inputs; ++i) AddArgument(program, i, args->argument_lists[d][i], r.get());
      for (size_t j = 0; j < num_outputs; ++j) {
        r->outputs.push_back(std::make_shared<ByteVector>());  // sized by the run, on the worker
      }
      replicas.push_back(std::move(r));
    }
    for (size_t d = 0; d < n; ++d) devices[d]->queue->Start();
    // The outputs exist, with their shapes, before their runs do (which may finish before Execute returns).
    std::vector<std::unique_ptr<PJRT_Buffer>> results;
    results.reserve(n * num_outputs);
    for (size_t d = 0; d < n; ++d) {
      for (size_t j = 0; j < num_outputs; ++j) {
        const ipu::TensorType& type = program.outputTypes()[j];
        results.emplace_back(
            NewBuffer(devices[d], FromIpuDType(type.dtype), type.shape, replicas[d]->outputs[j], replicas[d]->done));
      }
    }
    {
      // One launch goes onto all its queues before any other launch does (see PJRT_Client::launch_mutex).
      std::lock_guard<std::mutex> lock(loaded->client->launch_mutex);
      if (remote) remote->Number();
      for (size_t d = 0; d < n; ++d) {
        // jaxlib leaves deleting donated arrays to a C API plugin (pjrt-notes.md): after this, x.is_deleted() is
        // True, and the run holds the only other reference to the bytes.
        for (const auto& alias : program.aliases()) {
          PJRT_Buffer* donated = args->argument_lists[d][alias.first];
          std::lock_guard<std::mutex> buffer_lock(donated->mutex);
          DropBytes(donated);
        }
        if (program.hasOutfeed()) devices[d]->host->OutfeedProgramQueued();
        devices[d]->queue->Enqueue([r = replicas[d]] { Run(*r); });
      }
    }
    if (synchronous) {
      Completion& done = *replicas[0]->done;
      done.Wait();
      if (done.code() != 0 && Interrupts().load() == replicas[0]->interrupts_seen) {
        return MakeError(done.code(), done.message());
      }
    }
    for (size_t d = 0; d < n; ++d) {
      for (size_t j = 0; j < num_outputs; ++j) args->output_lists[d][j] = results[d * num_outputs + j].release();
      if (args->device_complete_events != nullptr) args->device_complete_events[d] = NewEvent(replicas[d]->done);
    }
    return nullptr;
  });
}
