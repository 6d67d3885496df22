// The C API of the README: no exception crosses it; strings returned are malloc'ed for JaxIpu_FreeString.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "ipu/c_handle.h"
#include "ipu/emulator.h"
#include "ipu/json.h"
#include "ipu/memory.h"
#include "ipu/registry.h"
#include "ipu/trace.h"
#include "jax_ipu/c_api.h"


namespace {

// The host threads of the C API's runs (JaxIpu_Run: the emulator without PJRT, as tests and tools use it), made on
// the first run and kept: min(hardware threads, 8). (A PJRT client has its own, sized by its host_threads option.)
ipu::ThreadPool& runPool() {
  static ipu::ThreadPool* pool = new ipu::ThreadPool(ipu::ThreadPool::defaultThreads());
  return *pool;
}

// What a C handle points at: the executable and the profile of its most recent run.
struct Handle {
  std::shared_ptr<const ipu::Executable> executable;  // shared with PJRT's loaded executable (ipu/c_handle.h)
  std::mutex mu;
  ipu::RunProfile last;
};

char* copyString(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out) std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

const char* codeName(ipu::ErrorCode code) {
  switch (code) {
    case ipu::ErrorCode::InvalidArgument: return "INVALID_ARGUMENT";
    case ipu::ErrorCode::Unimplemented: return "UNIMPLEMENTED";
    case ipu::ErrorCode::ResourceExhausted: return "RESOURCE_EXHAUSTED";
    case ipu::ErrorCode::Internal: return "INTERNAL";
    case ipu::ErrorCode::Cancelled: return "CANCELLED";
  }
  return "INTERNAL";
}

// Error strings start with the code name and a colon so that callers can map them onto their error codes.
void setError(char** error, const std::string& message) {
  if (error) *error = copyString(message);
}

template <class F>
auto guarded(char** error, F f, decltype(f()) failure) -> decltype(f()) {
  if (error) *error = nullptr;
  try {
    return f();
  } catch (const ipu::Error& e) {
    setError(error, std::string(codeName(e.code())) + ": " + e.what());
  } catch (const std::bad_alloc&) {
    setError(error, "RESOURCE_EXHAUSTED: host out of memory");
  } catch (const std::exception& e) { setError(error, std::string("INTERNAL: ") + e.what()); } catch (...) {
    setError(error, "INTERNAL: unknown error");
  }
  return failure;
}

}  // namespace

namespace ipu {

void* newExecutableHandle(std::shared_ptr<const Executable> executable) {
  auto handle = std::make_unique<Handle>();
  handle->executable = std::move(executable);
  return handle.release();
}

// The process's PVTI timeline (JaxIpu_TraceEnable, JaxIpu_TraceTake): kept for the process, as the run pool is.
namespace {
Trace& pvtiTrace() {
  static Trace* trace = new Trace();
  return *trace;
}
std::atomic<bool> g_pvti_on{false};
}  // namespace

Trace* processTrace() { return g_pvti_on.load(std::memory_order_relaxed) ? &pvtiTrace() : nullptr; }
}  // namespace ipu

char* JaxIpu_DeviceInfo(const char* model, char** error) {
  return guarded(
      error,
      [&]() -> char* {
        return copyString(
            ipu::DeviceDescription::forModel(ipu::ModelParameters::parseJson(model ? model : "")).toJson());
      },
      nullptr);
}

void* JaxIpu_Compile(const char* program_json, size_t size, const char* model, const char* options, char** error) {
  return guarded(
      error,
      [&]() -> void* {
        if (!program_json) throw ipu::Error(ipu::ErrorCode::InvalidArgument, "Malformed IPU program: no program given");
        ipu::DeviceDescription device =
            ipu::DeviceDescription::forModel(ipu::ModelParameters::parseJson(model ? model : ""));
        auto handle = std::make_unique<Handle>();
        ipu::CompileOptions compile_options = ipu::CompileOptions::parse(options ? options : "");
        compile_options.trace = ipu::processTrace();
        handle->executable = ipu::Executable::compile(std::string(program_json, size), device, compile_options);
        return handle.release();
      },
      nullptr);
}

char* JaxIpu_ExecutableInfo(void* executable) {
  if (!executable) return nullptr;
  char* error = nullptr;
  char* out = guarded(
      &error, [&]() -> char* { return copyString(static_cast<Handle*>(executable)->executable->infoJson()); }, nullptr);
  std::free(error);
  return out;
}

// The graph part of a profile report (Executable::profileJson); NULL on failure.
char* JaxIpu_ExecutableProfile(void* executable) {
  if (!executable) return nullptr;
  char* error = nullptr;
  char* out = guarded(
      &error, [&]() -> char* { return copyString(static_cast<Handle*>(executable)->executable->profileJson()); },
      nullptr);
  std::free(error);
  return out;
}

int JaxIpu_Run(void* executable, const void* const* inputs, void* const* outputs, char** error) {
  return guarded(
      error,
      [&]() -> int {
        if (!executable) throw ipu::Error(ipu::ErrorCode::InvalidArgument, "JaxIpu_Run: null executable");
        Handle* h = static_cast<Handle*>(executable);
        const size_t n_in = h->executable->inputTypes().size(), n_out = h->executable->outputTypes().size();
        if ((n_in && !inputs) || (n_out && !outputs))
          throw ipu::Error(ipu::ErrorCode::InvalidArgument, "JaxIpu_Run: null input or output array");
        std::vector<const void*> in(inputs, inputs + n_in);
        std::vector<void*> out(outputs, outputs + n_out);
        ipu::RunOptions options;
        options.pool = &runPool();
        options.trace = ipu::processTrace();
        ipu::RunProfile profile = h->executable->run(in, out, options);
        std::lock_guard<std::mutex> lock(h->mu);
        h->last = profile;
        return 0;
      },
      1);
}

char* JaxIpu_LastRunProfile(void* executable) {
  if (!executable) return nullptr;
  Handle* h = static_cast<Handle*>(executable);
  try {
    std::lock_guard<std::mutex> lock(h->mu);
    return copyString(h->last.toJson());
  } catch (...) { return nullptr; }
}

void JaxIpu_Destroy(void* executable) { delete static_cast<Handle*>(executable); }

// The op registry (registryJson): the compiler front end learns the ops, families and dtypes from here.
char* JaxIpu_OpRegistry() {
  try {
    return copyString(ipu::registryJson());
  } catch (...) { return nullptr; }
}

// The host timeline (PVTI_OPTIONS): switch it on or off; take the spans recorded so far (JSON, see trace.h).
void JaxIpu_TraceEnable(int on) { ipu::g_pvti_on.store(on != 0); }
char* JaxIpu_TraceTake() {
  try {
    return copyString(ipu::pvtiTrace().takeJson());
  } catch (...) { return nullptr; }
}

void JaxIpu_FreeString(char* s) { std::free(s); }
