// The host side of an IPU's data streams (infeed, outfeed) and host functions (callbacks), and the C functions
// the Python package feeds and drains them with.
// (JaxIpu_InfeedPush, JaxIpu_OutfeedPop, JaxIpu_SetHostCallback, JaxIpu_Synchronize, JaxIpu_AtExit: declared
// and described in jax_ipu/c_api.h; the Python package calls them through ctypes, which releases the GIL).
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "ipu/dtype.h"
#include "jax_ipu/c_api.h"
#include "plugin.h"

namespace {

std::atomic<JaxIpu_HostCallbackFn> g_host_callback{nullptr};

// How long a run waits on an empty infeed between warnings (it goes on waiting, as an IPU waits on its host).
constexpr std::chrono::seconds kInfeedWarningPeriod(10);

bool SameTypes(const std::vector<jax_ipu::HostStreams::Array>& arrays, const std::vector<ipu::TensorType>& types) {
  if (arrays.size() != types.size()) return false;
  for (size_t i = 0; i < types.size(); ++i) {
    if (arrays[i].type.dtype != types[i].dtype || arrays[i].type.shape != types[i].shape) return false;
  }
  return true;
}

std::vector<ipu::TensorType> TypesOf(const std::vector<jax_ipu::HostStreams::Array>& arrays) {
  std::vector<ipu::TensorType> types;
  for (const auto& a : arrays) types.push_back(a.type);
  return types;
}

}  // namespace

namespace jax_ipu {

std::string ShapeString(const ipu::TensorType& type) {
  std::string s = std::string(ipu::dtypeName(type.dtype)) + "[";
  for (size_t i = 0; i < type.shape.size(); ++i) s += (i ? "," : "") + std::to_string(type.shape[i]);
  return s + "]";
}

std::string ShapesString(const std::vector<ipu::TensorType>& types) {
  std::string s = "(";
  for (size_t i = 0; i < types.size(); ++i) s += (i ? ", " : "") + ShapeString(types[i]);
  return s + ")";
}

void HostStreams::PushInfeed(Entry entry) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Array& a : entry) infeed_bytes += a.bytes.size();
    infeed_.push_back(std::move(entry));
  }
  cv_.notify_all();
}

void HostStreams::PopOutfeed(const std::vector<ipu::TensorType>& want, const std::vector<void*>& dst,
                             double timeout_seconds) {
  const std::string device = "ipu device " + std::to_string(device_id_);
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                    std::chrono::duration<double>(timeout_seconds >= 0 ? timeout_seconds : 0));
  const uint64_t interrupts = InterruptsSeenByThisThread();
  auto warn_at = start + kInfeedWarningPeriod;
  std::unique_lock<std::mutex> lock(mutex_);
  while (outfeed_.empty()) {
    ThrowIfInterrupted(interrupts,
                       device + ": transfer_from_outfeed, waiting for an outfeed of " + ShapesString(want) + ",");
    if (closed_) {
      throw ipu::Error(ipu::ErrorCode::Internal,
                       device + ": the ipu client was destroyed while waiting for an outfeed of " + ShapesString(want));
    }
    // Nothing can arrive once the program that would have filled the outfeed has failed and no other is pending.
    if (outfeed_programs_ == 0 && !last_outfeed_failure_.empty()) {
      throw ipu::Error(ipu::ErrorCode::InvalidArgument,
                       device + ": no outfeed of " + ShapesString(want) +
                           " can arrive: the program that would have filled it failed: " + last_outfeed_failure_);
    }
    auto until = std::chrono::steady_clock::now() + kInterruptPoll;
    if (timeout_seconds >= 0 && deadline < until) until = deadline;
    if (cv_.wait_until(lock, until) == std::cv_status::timeout && outfeed_.empty()) {
      const auto now = std::chrono::steady_clock::now();
      if (timeout_seconds >= 0 && now >= deadline) {
        throw ipu::Error(ipu::ErrorCode::Internal, device + ": no outfeed of " + ShapesString(want) +
                                                       " arrived within " + std::to_string(timeout_seconds) + " s");
      }
      if (now < warn_at) continue;
      warn_at += kInfeedWarningPeriod;
      const int waited = static_cast<int>(
          std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start).count());
      std::fprintf(stderr, "jax-ipu: %s: transfer_from_outfeed has waited %d s for an outfeed of %s%s\n",
                   device.c_str(), waited, ShapesString(want).c_str(),
                   outfeed_programs_ ? "" : "; no program that calls lax.outfeed is queued or running on the device");
      std::fflush(stderr);
    }
  }
  const Entry& entry = outfeed_.front();
  if (!SameTypes(entry, want)) {
    throw ipu::Error(ipu::ErrorCode::InvalidArgument, device + ": the oldest outfeed entry is " +
                                                          ShapesString(TypesOf(entry)) + " but " + ShapesString(want) +
                                                          " was asked for (the entry stays queued)");
  }
  for (size_t i = 0; i < entry.size(); ++i) {
    if (!entry[i].bytes.empty()) std::memcpy(dst[i], entry[i].bytes.data(), entry[i].bytes.size());
  }
  outfeed_.pop_front();
}

void HostStreams::OutfeedProgramQueued() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++outfeed_programs_;
}

void HostStreams::OutfeedProgramFinished(const std::string* failure) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    --outfeed_programs_;
    if (failure) {
      last_outfeed_failure_ = failure->empty() ? "unknown error" : *failure;
    } else {
      last_outfeed_failure_.clear();
    }
  }
  cv_.notify_all();
}

void HostStreams::Exiting() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    exiting_ = true;
  }
  cv_.notify_all();
}

void HostStreams::Close() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
  }
  cv_.notify_all();
}

void HostStreams::infeed(const std::string& program, const std::vector<ipu::TensorType>& types,
                         const std::vector<void*>& dst) {
  const std::string where = "ipu device " + std::to_string(device_id_) + ": program '" + program + "'";
  Entry entry;
  {
    const uint64_t interrupts = InterruptsSeenByThisThread();
    auto warn_at = std::chrono::steady_clock::now() + kInfeedWarningPeriod;
    std::unique_lock<std::mutex> lock(mutex_);
    int waited = 0;
    while (infeed_.empty()) {
      ThrowIfInterrupted(interrupts, where + ", waiting for an infeed of " + ShapesString(types) + ",");
      if (closed_) {
        throw ipu::Error(ipu::ErrorCode::Internal, where + " was waiting for an infeed of " + ShapesString(types) +
                                                       " when the ipu client was destroyed");
      }
      if (exiting_) {
        throw ipu::Error(ipu::ErrorCode::Cancelled, where + " was waiting for an infeed of " + ShapesString(types) +
                                                        " when the process exited: nothing can feed it any more");
      }
      if (cv_.wait_for(lock, kInterruptPoll) == std::cv_status::timeout && infeed_.empty() && !closed_ &&
          std::chrono::steady_clock::now() >= warn_at) {
        warn_at += kInfeedWarningPeriod;
        waited += static_cast<int>(kInfeedWarningPeriod.count());
        std::fprintf(stderr,
                     "jax-ipu: %s has waited %d s for an infeed of %s; feed it from another thread with "
                     "device.transfer_to_infeed(...)\n",
                     where.c_str(), waited, ShapesString(types).c_str());
        std::fflush(stderr);
      }
    }
    entry = std::move(infeed_.front());
    infeed_.pop_front();  // a mismatched entry is consumed too: the run fails on it, the next feed starts afresh
  }
  if (!SameTypes(entry, types)) {
    throw ipu::Error(ipu::ErrorCode::InvalidArgument, where + " expects an infeed of " + ShapesString(types) +
                                                          " but was fed " + ShapesString(TypesOf(entry)));
  }
  for (size_t i = 0; i < entry.size(); ++i) {
    if (!entry[i].bytes.empty()) std::memcpy(dst[i], entry[i].bytes.data(), entry[i].bytes.size());
  }
}

void HostStreams::outfeed(const std::string&, const std::vector<ipu::TensorType>& types,
                          const std::vector<const void*>& src) {
  Entry entry(types.size());
  for (size_t i = 0; i < types.size(); ++i) {
    entry[i].type = types[i];
    const auto* bytes = static_cast<const uint8_t*>(src[i]);
    entry[i].bytes.assign(bytes, bytes + types[i].numBytes());
    outfeed_bytes += entry[i].bytes.size();
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    outfeed_.push_back(std::move(entry));
  }
  cv_.notify_all();
}

// Host callbacks run on a thread of their own (one per device, started on first use) while the run waits for them,
// so that a Ctrl-C ends the wait even when a callback never returns: the run then fails, and the lane is left to
// the callback (a new lane serves the next one). A call's arguments and results are its own copies, so nothing a
// left callback writes later reaches memory that the run has given back.
//
// The two hand-offs of a call (the run to the lane, the lane back to the run) each spin for a while before they
// sleep on the condition variable: a loop that calls back every iteration (an io_callback feeding each step) would
// otherwise wait for the scheduler to wake a thread twice per call, tens of microseconds on a VM, where XLA:CPU calls
// its callbacks on its own thread. A spin yields the core on every turn and gives up after kHandOffSpin.
constexpr std::chrono::microseconds kHandOffSpin{200};

template <class Ready>
bool SpinUntil(const Ready& ready) {
  const auto until = std::chrono::steady_clock::now() + kHandOffSpin;
  while (!ready()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::yield();
  }
  return true;
}

struct CallbackLane {
  struct Call {
    int64_t id = 0;
    const WorkQueue* serving = nullptr;  // the queue whose run waits for the call
    std::vector<std::vector<uint8_t>> in, out;
    int status = 0;
    char error[2048] = {0};
    std::atomic<bool> done{false};  // set (release) after status, error and out are written
  };
  std::mutex mutex;
  std::condition_variable cv;
  std::shared_ptr<Call> call;      // the pending or running call, until done
  std::atomic<uint64_t> posted{0};  // calls posted so far (what the lane's spin watches)
  std::atomic<bool> left{false};    // the lane ends once its call returns

  static std::shared_ptr<CallbackLane> Start(int device_id) {
    auto lane = std::make_shared<CallbackLane>();
    std::thread([lane, device_id] {
      pthread_setname_np(pthread_self(), ("ipu" + std::to_string(device_id) + "-callback").substr(0, 15).c_str());
      lane->Loop();
    }).detach();  // never joined: a callback that never returns must not hold up the client or the process
    return lane;
  }

  void Post(std::shared_ptr<Call> next) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      call = std::move(next);
      posted.fetch_add(1, std::memory_order_release);
    }
    cv.notify_all();
  }

  void Loop() {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      if (!(left || (call && !call->done))) {  // idle: spin a while for the next call, then sleep
        lock.unlock();
        SpinUntil([&] { return left.load() || posted.load(std::memory_order_acquire) != seen; });
        lock.lock();
        cv.wait(lock, [this] { return left || (call && !call->done); });
      }
      if (!call || call->done) return;  // left, with nothing to run
      seen = posted.load(std::memory_order_relaxed);
      std::shared_ptr<Call> c = call;
      lock.unlock();
      {
        const Serving serving(c->serving);
        std::vector<const void*> in;
        std::vector<void*> out;
        for (const auto& b : c->in) in.push_back(b.data());
        for (auto& b : c->out) out.push_back(b.data());
        JaxIpu_HostCallbackFn fn = g_host_callback.load();
        c->status = fn(c->id, in.size(), in.data(), out.size(), out.data(), c->error, sizeof(c->error));
        c->error[sizeof(c->error) - 1] = '\0';
      }
      lock.lock();
      c->done.store(true, std::memory_order_release);
      cv.notify_all();
      if (left) return;
    }
  }
};

void HostStreams::callback(int64_t id, const std::vector<ipu::TensorType>& in_types, const std::vector<const void*>& in,
                           const std::vector<ipu::TensorType>& out_types, const std::vector<void*>& out) {
  const std::string where = "ipu device " + std::to_string(device_id_) + ": host callback " + std::to_string(id);
  if (g_host_callback.load() == nullptr) {
    throw ipu::Error(ipu::ErrorCode::Internal,
                     where +
                         " was called but no host callback handler is registered (JaxIpu_SetHostCallback; "
                         "the jax_ipu package registers it when the ipu backend starts)");
  }
  auto call = std::make_shared<CallbackLane::Call>();
  call->id = id;
  call->serving = ServingQueue();
  for (size_t i = 0; i < in.size(); ++i) {
    const auto* bytes = static_cast<const uint8_t*>(in[i]);
    call->in.emplace_back(bytes, bytes + in_types[i].numBytes());
  }
  for (size_t i = 0; i < out.size(); ++i) call->out.emplace_back(out_types[i].numBytes());
  std::shared_ptr<CallbackLane> lane;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!lane_) lane_ = CallbackLane::Start(device_id_);
    lane = lane_;
  }
  const uint64_t interrupts = InterruptsSeenByThisThread();
  lane->Post(call);
  SpinUntil([&] {
    return call->done.load(std::memory_order_acquire) || Interrupts().load(std::memory_order_relaxed) != interrupts;
  });
  {
    std::unique_lock<std::mutex> lock(lane->mutex);
    while (!call->done.load(std::memory_order_acquire)) {
      if (Interrupts().load(std::memory_order_relaxed) != interrupts) {
        lane->left = true;  // the callback keeps its lane; the next call gets a new one
        lock.unlock();
        {
          std::lock_guard<std::mutex> streams_lock(mutex_);
          if (lane_ == lane) lane_.reset();
        }
        ThrowIfInterrupted(interrupts, where + ", which had not returned,");
      }
      lane->cv.wait_for(lock, kInterruptPoll);
    }
    lane->call.reset();
  }
  if (call->status != 0) {
    throw ipu::Error(ipu::ErrorCode::Internal, call->error[0] ? std::string(call->error) : where + " failed");
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (!call->out[i].empty()) std::memcpy(out[i], call->out[i].data(), call->out[i].size());
  }
}

HostStreams::~HostStreams() {
  std::shared_ptr<CallbackLane> lane;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    lane.swap(lane_);
  }
  if (!lane) return;
  std::lock_guard<std::mutex> lock(lane->mutex);
  lane->left = true;  // its thread ends (now if idle, else after its call)
  lane->cv.notify_all();
}

}  // namespace jax_ipu

// ----------------------------------------------------------------------------------------------- C ABI

namespace {

// The host streams of a device of the current client, kept alive for the caller (who may block on them).
std::shared_ptr<jax_ipu::HostStreams> StreamsOf(int device_id) {
  std::shared_ptr<jax_ipu::HostStreams> streams;
  jax_ipu::WithCurrentClient([&](PJRT_Client* client) {
    if (client == nullptr) {
      throw ipu::Error(ipu::ErrorCode::InvalidArgument, "the ipu backend has not been created yet");
    }
    streams = jax_ipu::LookupDevice(client, device_id)->host;
  });
  return streams;
}

std::vector<ipu::TensorType> ParseTypes(size_t n, const char* const* dtypes, const int* ranks,
                                        const int64_t* const* dims) {
  std::vector<ipu::TensorType> types(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string name = dtypes[i] ? dtypes[i] : "";
    if (!ipu::parseDType(name, &types[i].dtype) || types[i].dtype == ipu::DType::Token) {
      std::string carried;
      for (const ipu::DTypeInfo& t : ipu::kDTypeTable)
        if (t.dtype != ipu::DType::Token) carried += std::string(carried.empty() ? "" : ", ") + t.name;
      throw ipu::Error(ipu::ErrorCode::InvalidArgument, "array " + std::to_string(i) + " has dtype '" + name +
                                                            "', which the ipu streams do not carry (" + carried + ")");
    }
    if (ranks[i] < 0) throw ipu::Error(ipu::ErrorCode::InvalidArgument, "negative rank");
    types[i].shape.assign(dims[i], dims[i] + ranks[i]);
    for (int64_t d : types[i].shape) {
      if (d < 0)
        throw ipu::Error(ipu::ErrorCode::InvalidArgument, "negative dimension in " + jax_ipu::ShapeString(types[i]));
    }
  }
  return types;
}

int Fail(char** error, const std::string& message) {
  if (error != nullptr) *error = jax_ipu::CopyString(message);
  return 1;
}

}  // namespace


int JaxIpu_InfeedPush(int device_id, size_t n, const char* const* dtypes, const int* ranks, const int64_t* const* dims,
                      const void* const* data, char** error) {
  try {
    const std::vector<ipu::TensorType> types = ParseTypes(n, dtypes, ranks, dims);
    jax_ipu::HostStreams::Entry entry(n);
    for (size_t i = 0; i < n; ++i) {
      entry[i].type = types[i];
      const auto* bytes = static_cast<const uint8_t*>(data[i]);
      entry[i].bytes.assign(bytes, bytes + types[i].numBytes());
    }
    StreamsOf(device_id)->PushInfeed(std::move(entry));
    return 0;
  } catch (const std::exception& e) { return Fail(error, e.what()); } catch (...) {
    return Fail(error, "JaxIpu_InfeedPush: unknown failure");
  }
}

int JaxIpu_OutfeedPop(int device_id, size_t n, const char* const* dtypes, const int* ranks, const int64_t* const* dims,
                      void* const* data, double timeout_seconds, char** error) {
  try {
    const std::vector<ipu::TensorType> types = ParseTypes(n, dtypes, ranks, dims);
    StreamsOf(device_id)->PopOutfeed(types, std::vector<void*>(data, data + n), timeout_seconds);
    return 0;
  } catch (const std::exception& e) { return Fail(error, e.what()); } catch (...) {
    return Fail(error, "JaxIpu_OutfeedPop: unknown failure");
  }
}

void JaxIpu_SetHostCallback(JaxIpu_HostCallbackFn fn) { g_host_callback.store(fn); }

void JaxIpu_AtExit(void) {
  try {
    jax_ipu::WithCurrentClient([&](PJRT_Client* client) {
      if (client == nullptr) return;
      for (const auto& device : client->devices)
        if (device->host) device->host->Exiting();
    });
  } catch (...) {}
  JaxIpu_Synchronize();
}

void JaxIpu_Synchronize(void) {
  try {
    std::vector<std::shared_ptr<jax_ipu::WorkQueue>> queues;
    jax_ipu::WithCurrentClient([&](PJRT_Client* client) {
      if (client == nullptr) return;
      for (const auto& device : client->devices) queues.push_back(device->queue);
    });
    // Without the client lock: work being drained may ask for device stats.
    for (const auto& queue : queues) queue->Drain();
  } catch (...) {}
}
