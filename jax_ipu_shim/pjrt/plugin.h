// The PJRT objects of the ipu plugin, for jaxlib 0.4.13's C API (one small file per object kind beside this one).
//
// This layer only translates between PJRT and the emulator's public interface (ipu/emulator.h): it knows nothing
// about tiles. Every entry point catches everything and answers with a PJRT_Error: a plugin must never abort
// the user's process.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ipu/emulator.h"
#include "pjrt_api_0_4_13.h"

// ----------------------------------------------------------------------------------------------- errors

struct PJRT_Error {
  PJRT_Error_Code code;
  std::string message;
};

namespace jax_ipu {

PJRT_Error* MakeError(PJRT_Error_Code code, std::string message);
PJRT_Error_Code ToPjrtCode(ipu::ErrorCode code);

// Inside a catch block: the exception being handled as a PJRT_Error (ipu::Error keeps its code, anything else is
// INTERNAL), naming `function`.
PJRT_Error* CurrentExceptionToError(const char* function);

// Runs `body`, turning any exception into a PJRT_Error. A template, not a std::function: it wraps every call on the
// dispatch path.
template <class Body>
PJRT_Error* Guard(const char* function, Body&& body) {
  try {
    return body();
  } catch (...) {
    return CurrentExceptionToError(function);
  }
}

// A malloc'ed copy for the caller to free with JaxIpu_FreeString (null if out of memory).
char* CopyString(const std::string& s);

// The caller's struct must be at least as large as the part of it we read and write.
PJRT_Error* CheckStructSize(const char* function, size_t given, size_t needed);

}  // namespace jax_ipu

// ----------------------------------------------------------------------------------------------- events

namespace jax_ipu {

// The outcome of one piece of asynchronous work (a run, a transfer): pending until Set() once, then ok or failed
// with a code and message. Shared by the work, the buffers it defines and every PJRT_Event handed out for it,
// so that destroying an event never cancels what waits on it.
class Completion {
 public:
  using Callback = std::function<void(PJRT_Error_Code code, const std::string& message)>;
  // Ok and ready: one shared instance (nothing changes a ready completion).
  static std::shared_ptr<Completion> Ready();

  // Completes (code 0: ok) and then calls every OnReady callback on this thread, outside the lock.
  void Set(PJRT_Error_Code code, std::string message);
  void SetFrom(const Completion& other) { Set(other.code_, other.message_); }  // `other` must be ready
  bool IsReady();
  void Wait();
  // After Wait(): 0 if ok, else the error.
  PJRT_Error_Code code() const { return code_; }
  const std::string& message() const { return message_; }
  PJRT_Error* ToError();  // waits; null if ok, else a new PJRT_Error carrying the failure
  // Calls `callback` once ready: at once, on this thread, if it already is.
  void OnReady(Callback callback);

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  // Set (release) once code_ and message_ are final: readers that see it true read them without the lock.
  std::atomic<bool> ready_{false};
  PJRT_Error_Code code_ = static_cast<PJRT_Error_Code>(0);
  std::string message_;
  std::vector<Callback> callbacks_;
};

}  // namespace jax_ipu

// What jaxlib holds and destroys: a handle on a completion.
struct PJRT_Event {
  std::shared_ptr<jax_ipu::Completion> completion;
};

namespace jax_ipu {
PJRT_Event* NewEvent(std::shared_ptr<Completion> completion);
PJRT_Event* ReadyEvent();
}  // namespace jax_ipu

// ----------------------------------------------------------------------------------------------- work queues

namespace jax_ipu {

// One IPU's stream of work, run in order by one worker thread (Poplar: an engine runs one program at a time on a
// device). The thread starts with the first item; Stop() runs everything still queued, then joins it.
// Always made with std::make_shared: the thread holds the queue alive.
class WorkQueue : public std::enable_shared_from_this<WorkQueue> {
 public:
  explicit WorkQueue(std::string name) : name_(std::move(name)) {}
  ~WorkQueue() { Stop(); }
  // Starts the worker thread if it is not running (throws if it cannot, or if the queue is stopping).
  void Start();
  void Enqueue(std::function<void()> item);
  // Blocks until everything queued before the call has run.
  void Drain();
  // Nothing queued or running (a hint: another thread may queue work right after).
  bool Idle() const { return pending_.load(std::memory_order_acquire) == 0; }
  void Stop();

 private:
  void Loop();
  std::string name_;
  std::mutex mutex_;
  std::condition_variable cv_;       // work arrived, or stop
  std::condition_variable idle_cv_;  // an item finished
  std::deque<std::function<void()>> items_;
  uint64_t enqueued_ = 0, finished_ = 0;
  std::atomic<size_t> queued_{0};     // items_.size(), readable without the lock
  std::atomic<uint64_t> pending_{0};  // queued or running
  bool sleeping_ = false;             // the worker waits on cv_ (else it is busy or about to look again)
  bool stopping_ = false;
  std::thread thread_;
};

// The host side of one IPU's data streams and host functions (ipu::HostInterface), shared by the runs on its
// worker and the JaxIpu_InfeedPush/OutfeedPop callers (which may outlive the client: hence shared, and Close()).
class HostStreams : public ipu::HostInterface {
 public:
  explicit HostStreams(int device_id) : device_id_(device_id) {}
  struct Array {
    ipu::TensorType type;
    std::vector<uint8_t> bytes;
  };
  using Entry = std::vector<Array>;

  void PushInfeed(Entry entry);
  // The oldest outfeed entry if it matches `want` (copied into `dst`), waiting while the outfeed is empty (a
  // reader may start before the program that fills it is even dispatched). Throws ipu::Error (the entry stays
  // queued) on a type mismatch, a timeout (seconds >= 0), or when a program that would have outfed has failed
  // and none is queued or running any more, so that nothing can arrive.
  void PopOutfeed(const std::vector<ipu::TensorType>& want, const std::vector<void*>& dst, double timeout_seconds);
  // A program that outfeeds was queued, or has finished (with `failure` set if it failed).
  void OutfeedProgramQueued();
  void OutfeedProgramFinished(const std::string* failure);
  // The client is going away: waits fail instead of hanging.
  void Close();

  void infeed(const std::string& program, const std::vector<ipu::TensorType>& types,
              const std::vector<void*>& dst) override;
  void outfeed(const std::string& program, const std::vector<ipu::TensorType>& types,
               const std::vector<const void*>& src) override;
  void callback(int64_t id, const std::vector<ipu::TensorType>& in_types, const std::vector<const void*>& in,
                const std::vector<ipu::TensorType>& out_types, const std::vector<void*>& out) override;

  std::atomic<uint64_t> infeed_bytes{0}, outfeed_bytes{0};  // pushed by the host, pushed by programs

 private:
  const int device_id_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Entry> infeed_, outfeed_;
  int outfeed_programs_ = 0;
  std::string last_outfeed_failure_;  // the error of the newest program that outfeeds, if it failed
  bool closed_ = false;
};

std::string ShapeString(const ipu::TensorType& type);  // f32[3,4]
std::string ShapesString(const std::vector<ipu::TensorType>& types);  // (f32[3,4], i32[])

}  // namespace jax_ipu

// ----------------------------------------------------------------------------------------------- devices

struct PJRT_DeviceDescription {
  int id = 0;
  ipu::DeviceDescription hardware;
  std::string kind;          // Graphcore-IPUModel(ipu2)-NumTiles(1472)
  std::string to_string;     // IpuDevice(id=0, num_tiles=1472, version=ipu2)
  std::string debug_string;
  // Attributes jax exposes as device properties; `attribute_names` / `attribute_strings` own their text.
  std::vector<PJRT_NamedValue> attributes;
  std::vector<std::string> attribute_names;
  std::vector<std::string> attribute_strings;
};

// Counters JaxIpu_DeviceStats reports, under PJRT_Device::stats_mutex.
struct DeviceCounters {
  uint64_t bytes_to_device = 0;    // host link, in
  uint64_t bytes_from_device = 0;  // host link, out
  uint64_t host_transfer_cycles = 0;
  uint64_t bytes_over_links = 0;   // IPU-Links, sent or received
  uint64_t link_cycles = 0;
};

struct PJRT_Device {
  PJRT_DeviceDescription description;
  PJRT_Client* client = nullptr;
  int local_hardware_id = 0;
  std::shared_ptr<jax_ipu::HostStreams> host;
  std::shared_ptr<jax_ipu::WorkQueue> queue;
  std::mutex stats_mutex;
  DeviceCounters counters;
  // The most recent execution that finished on this device, for jax_ipu.last_execution().
  std::string last_program;
  ipu::RunProfile last_profile;
  uint64_t executions = 0;
};

namespace jax_ipu {
void InitDevice(PJRT_Device* device, PJRT_Client* client, int id, const ipu::DeviceDescription& hardware);
}

// ----------------------------------------------------------------------------------------------- client

struct PJRT_Client {
  std::vector<std::unique_ptr<PJRT_Device>> devices;
  std::vector<PJRT_Device*> device_pointers;
  std::string platform_name = "ipu";
  std::string platform_version;
  // Held while work goes onto device queues, so that launches over several IPUs are queued in one order on all
  // of them (two launches queued in different orders on two IPUs would deadlock their collectives).
  std::mutex launch_mutex;
  ~PJRT_Client();  // finishes all queued work first
};

namespace jax_ipu {
// Reads create options (version, num_tiles, num_devices) into a client. Throws ipu::Error on bad values.
std::unique_ptr<PJRT_Client> CreateClient(const PJRT_NamedValue* options, size_t num_options);
// The most recently created client, which the JaxIpu_* functions act on (a process has one ipu client).
void SetCurrentClient(PJRT_Client* client);
void ForgetClient(PJRT_Client* client);
// Runs `body` with the current client (null if none) under the lock that keeps it alive.
void WithCurrentClient(const std::function<void(PJRT_Client*)>& body);
PJRT_Device* LookupDevice(PJRT_Client* client, int id);
// Queues `item` on `device` (under the client's launch mutex).
void Enqueue(PJRT_Device* device, std::function<void()> item);
}

// ----------------------------------------------------------------------------------------------- buffers

namespace jax_ipu {
// An allocator whose new elements are left uninitialised: a device array's bytes are always written in full (by a
// transfer or by the run that defines them) before anything reads them, so zero-filling them first is wasted work.
template <class T>
struct UninitializedAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <class U>
  UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
using ByteVector = std::vector<uint8_t, UninitializedAllocator<uint8_t>>;
}  // namespace jax_ipu

// A device array. Its bytes live in host memory (the emulator keeps no per-tile SRAM image between programs).
// `data` is filled by the work that defines the buffer; `defined` completes when it has (or failed).
// Donation and deletion drop the buffer's reference to its bytes; queued work keeps its own.
struct PJRT_Buffer {
  PJRT_Device* device = nullptr;
  PJRT_Buffer_Type type = PJRT_Buffer_Type_INVALID;
  std::vector<int64_t> dims;
  std::mutex mutex;
  std::shared_ptr<jax_ipu::ByteVector> data;  // null once deleted or donated
  std::shared_ptr<jax_ipu::Completion> defined;
};

namespace jax_ipu {
using Bytes = std::shared_ptr<ByteVector>;
// memcpy, split over the host threads ($JAX_IPU_HOST_THREADS) when it is large (staging big arrays to and from
// the device); a small copy stays on the calling thread.
void ParallelCopy(void* dst, const void* src, size_t bytes);
size_t ElementSize(PJRT_Buffer_Type type);  // 0 for types the plugin cannot hold
const char* TypeName(PJRT_Buffer_Type type);
int XlaPrimitiveType(PJRT_Buffer_Type type);  // xla::PrimitiveType number
bool ToIpuDType(PJRT_Buffer_Type type, ipu::DType* out);
PJRT_Buffer_Type FromIpuDType(ipu::DType dtype);
int64_t NumElements(const std::vector<int64_t>& dims);
PJRT_Buffer* NewBuffer(PJRT_Device* device, PJRT_Buffer_Type type, std::vector<int64_t> dims, Bytes data,
                       std::shared_ptr<Completion> defined);
// The one place transfers are counted and costed: over the host link (to or from the device), or over the
// IPU-Links (call it for both ends of a copy between IPUs).
// `started_ns` (ipu::trace::nowNs() when the copy began, or 0): a "Transfer" span on the PVTI timeline.
void CountHostTransfer(PJRT_Device* device, size_t bytes, bool to_device, int64_t started_ns = 0);
void CountLinkTransfer(PJRT_Device* device, size_t bytes);
}

// ----------------------------------------------------------------------------------------------- executables

struct PJRT_Executable {
  std::shared_ptr<const ipu::Executable> program;
  std::vector<int> device_ids;  // the devices it was compiled for, one replica each
  // Cost analysis, owned here because PJRT hands out pointers into it.
  std::vector<PJRT_NamedValue> cost_properties;
  std::vector<std::string> cost_names;
};

struct PJRT_LoadedExecutable {
  std::shared_ptr<const ipu::Executable> program;
  PJRT_Client* client = nullptr;
  std::vector<PJRT_Device*> devices;  // where it runs; one replica per device
  bool deleted = false;
  // Host time of its latest run (ns; -1: never run), shared with queued runs. See launch.cc (cheap programs).
  std::shared_ptr<std::atomic<int64_t>> last_run_ns = std::make_shared<std::atomic<int64_t>>(-1);
};

struct PJRT_SerializedExecutable {
  std::string data;
};

namespace jax_ipu {
// Replicas a program runs as: what it was compiled for, or the devices it was compiled onto if more.
int NumReplicas(const ipu::Executable& program, size_t num_devices);
}

// ----------------------------------------------------------------------------------------------- compiler

namespace jax_ipu {
// Turns a StableHLO module into an IPU program (JSON) by calling the Python front end that registered itself
// with JaxIpu_SetCompiler. Fills `device_ids` with the devices the program was compiled for (empty: default).
std::string CompileToProgram(const std::string& module, const std::string& compile_options,
                             std::vector<int>* device_ids);
}

// ----------------------------------------------------------------------------------------------- entry points

// Every PJRT function the table points at; defined in the file of its object kind.
#define JAX_IPU_PJRT_FUNCTION(name) PJRT_Error* name##_Impl(name##_Args* args)
extern "C" {
void PJRT_Error_Destroy_Impl(PJRT_Error_Destroy_Args* args);
void PJRT_Error_Message_Impl(PJRT_Error_Message_Args* args);
}
JAX_IPU_PJRT_FUNCTION(PJRT_Error_GetCode);
JAX_IPU_PJRT_FUNCTION(PJRT_Event_Destroy);
JAX_IPU_PJRT_FUNCTION(PJRT_Event_IsReady);
JAX_IPU_PJRT_FUNCTION(PJRT_Event_Error);
JAX_IPU_PJRT_FUNCTION(PJRT_Event_Await);
JAX_IPU_PJRT_FUNCTION(PJRT_Event_OnReady);
JAX_IPU_PJRT_FUNCTION(PJRT_Client_Create);
JAX_IPU_PJRT_FUNCTION(PJRT_Client_Destroy);
JAX_IPU_PJRT_FUNCTION(PJRT_Client_PlatformName);
JAX_IPU_PJRT_FUNCTION(PJRT_Client_ProcessIndex);
JAX_IPU_PJRT_FUNCTION(PJRT_Client_PlatformVersion);
JAX_IPU_PJRT_FUNCTION(PJRT_Client_Devices);
JAX_IPU_PJRT_FUNCTION(PJRT_Client_AddressableDevices);
JAX_IPU_PJRT_FUNCTION(PJRT_Client_LookupDevice);
JAX_IPU_PJRT_FUNCTION(PJRT_Client_LookupAddressableDevice);
JAX_IPU_PJRT_FUNCTION(PJRT_Client_Compile);
JAX_IPU_PJRT_FUNCTION(PJRT_Client_DefaultDeviceAssignment);
JAX_IPU_PJRT_FUNCTION(PJRT_Client_BufferFromHostBuffer);
JAX_IPU_PJRT_FUNCTION(PJRT_DeviceDescription_Id);
JAX_IPU_PJRT_FUNCTION(PJRT_DeviceDescription_ProcessIndex);
JAX_IPU_PJRT_FUNCTION(PJRT_DeviceDescription_Attributes);
JAX_IPU_PJRT_FUNCTION(PJRT_DeviceDescription_Kind);
JAX_IPU_PJRT_FUNCTION(PJRT_DeviceDescription_DebugString);
JAX_IPU_PJRT_FUNCTION(PJRT_DeviceDescription_ToString);
JAX_IPU_PJRT_FUNCTION(PJRT_Device_GetDescription);
JAX_IPU_PJRT_FUNCTION(PJRT_Device_IsAddressable);
JAX_IPU_PJRT_FUNCTION(PJRT_Device_LocalHardwareId);
JAX_IPU_PJRT_FUNCTION(PJRT_Device_MemoryStats);
JAX_IPU_PJRT_FUNCTION(PJRT_Executable_Destroy);
JAX_IPU_PJRT_FUNCTION(PJRT_Executable_Name);
JAX_IPU_PJRT_FUNCTION(PJRT_Executable_NumReplicas);
JAX_IPU_PJRT_FUNCTION(PJRT_Executable_NumPartitions);
JAX_IPU_PJRT_FUNCTION(PJRT_Executable_NumOutputs);
JAX_IPU_PJRT_FUNCTION(PJRT_Executable_SizeOfGeneratedCodeInBytes);
JAX_IPU_PJRT_FUNCTION(PJRT_Executable_GetCostAnalysis);
JAX_IPU_PJRT_FUNCTION(PJRT_Executable_OptimizedProgram);
JAX_IPU_PJRT_FUNCTION(PJRT_Executable_Serialize);
JAX_IPU_PJRT_FUNCTION(PJRT_LoadedExecutable_Destroy);
JAX_IPU_PJRT_FUNCTION(PJRT_LoadedExecutable_GetExecutable);
JAX_IPU_PJRT_FUNCTION(PJRT_LoadedExecutable_AddressableDevices);
JAX_IPU_PJRT_FUNCTION(PJRT_LoadedExecutable_Delete);
JAX_IPU_PJRT_FUNCTION(PJRT_LoadedExecutable_IsDeleted);
JAX_IPU_PJRT_FUNCTION(PJRT_LoadedExecutable_Execute);
JAX_IPU_PJRT_FUNCTION(PJRT_Executable_DeserializeAndLoad);
JAX_IPU_PJRT_FUNCTION(PJRT_SerializedExecutable_Destroy);
JAX_IPU_PJRT_FUNCTION(PJRT_SerializedExecutable_Data);
JAX_IPU_PJRT_FUNCTION(PJRT_Buffer_Destroy);
JAX_IPU_PJRT_FUNCTION(PJRT_Buffer_OnDeviceTrimmedShape);
JAX_IPU_PJRT_FUNCTION(PJRT_Buffer_OnDeviceSizeInBytes);
JAX_IPU_PJRT_FUNCTION(PJRT_Buffer_Device);
JAX_IPU_PJRT_FUNCTION(PJRT_Buffer_Delete);
JAX_IPU_PJRT_FUNCTION(PJRT_Buffer_IsDeleted);
JAX_IPU_PJRT_FUNCTION(PJRT_Buffer_CopyToDevice);
JAX_IPU_PJRT_FUNCTION(PJRT_Buffer_ToHostBuffer);
JAX_IPU_PJRT_FUNCTION(PJRT_Buffer_IsOnCpu);
JAX_IPU_PJRT_FUNCTION(PJRT_Buffer_ReadyEvent);
JAX_IPU_PJRT_FUNCTION(PJRT_Buffer_UnsafePointer);
