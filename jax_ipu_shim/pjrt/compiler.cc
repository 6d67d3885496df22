// The bridge to the Python compiler front end: PJRT_Client_Compile calls the function that jax_ipu registered
// with JaxIpu_SetCompiler. ctypes takes the GIL itself, so the call is safe from any thread.
#include <atomic>

#include "ipu/c_handle.h"
#include "jax_ipu/c_api.h"
#include "plugin.h"

namespace {

// What the front end hands back for one compilation.
struct CompileResult {
  bool done = false;
  PJRT_Error_Code code = PJRT_Error_Code_INTERNAL;
  std::string program_or_message;
  std::string options;  // the emulator's compile options (JSON), if the front end gave them
  std::vector<int> device_ids;
};

std::atomic<JaxIpu_CompilerFn> g_compiler{nullptr};
std::atomic<JaxIpu_CompiledFn> g_compiled{nullptr};

}  // namespace


void JaxIpu_SetCompiler(JaxIpu_CompilerFn compiler) { g_compiler.store(compiler); }

void JaxIpu_SetCompiledHook(JaxIpu_CompiledFn hook) { g_compiled.store(hook); }

void JaxIpu_CompileResult_SetOptions(void* result, const char* options, size_t size) {
  static_cast<CompileResult*>(result)->options.assign(options, size);
}

// The program as the front end wrote it: the binary container (program.cc) or JSON text.
void JaxIpu_CompileResult_SetProgram(void* result, const char* program, size_t size) {
  auto* r = static_cast<CompileResult*>(result);
  r->done = true;
  r->code = static_cast<PJRT_Error_Code>(0);
  r->program_or_message.assign(program, size);
}

void JaxIpu_CompileResult_SetError(void* result, int code, const char* message, size_t size) {
  auto* r = static_cast<CompileResult*>(result);
  r->done = true;
  r->code = code > 0 && code <= PJRT_Error_Code_UNAUTHENTICATED ? static_cast<PJRT_Error_Code>(code)
                                                                : PJRT_Error_Code_INTERNAL;
  r->program_or_message.assign(message, size);
}

void JaxIpu_CompileResult_AddDevice(void* result, int device_id) {
  static_cast<CompileResult*>(result)->device_ids.push_back(device_id);
}

namespace jax_ipu {

std::string CompileToProgram(const std::string& module, const std::string& compile_options,
                             std::vector<int>* device_ids, ipu::CompileOptions* options) {
  JaxIpu_CompilerFn compiler = g_compiler.load();
  if (compiler == nullptr) {
    throw ipu::Error(ipu::ErrorCode::Internal,
                     "the ipu compiler front end is not registered: the backend must be created through "
                     "jax_plugins.ipu (pip install the jaxlib wheel built by jax-ipu)");
  }
  CompileResult result;
  compiler(module.data(), module.size(), compile_options.data(), compile_options.size(), &result);
  if (!result.done) { throw ipu::Error(ipu::ErrorCode::Internal, "the ipu compiler front end returned no result"); }
  if (result.code != 0) {
    ipu::ErrorCode code = ipu::ErrorCode::Internal;
    if (result.code == PJRT_Error_Code_INVALID_ARGUMENT) code = ipu::ErrorCode::InvalidArgument;
    if (result.code == PJRT_Error_Code_UNIMPLEMENTED) code = ipu::ErrorCode::Unimplemented;
    if (result.code == PJRT_Error_Code_RESOURCE_EXHAUSTED) code = ipu::ErrorCode::ResourceExhausted;
    throw ipu::Error(code, result.program_or_message);
  }
  *device_ids = std::move(result.device_ids);
  *options = ipu::CompileOptions::parse(result.options);
  return std::move(result.program_or_message);
}

void NotifyCompiled(const std::shared_ptr<const ipu::Executable>& executable, const std::string& program,
                    const std::vector<int>& device_ids) {
  JaxIpu_CompiledFn hook = g_compiled.load();
  if (hook == nullptr) return;
  hook(ipu::newExecutableHandle(executable), program.data(), program.size(), device_ids.data(), device_ids.size());
}

}  // namespace jax_ipu
