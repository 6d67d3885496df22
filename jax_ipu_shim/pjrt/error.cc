// PJRT_Error: a status code and a message, owned by the caller until PJRT_Error_Destroy.
#include <cstdlib>
#include <cstring>
#include <exception>

#include "plugin.h"

namespace jax_ipu {

PJRT_Error* MakeError(PJRT_Error_Code code, std::string message) { return new PJRT_Error{code, std::move(message)}; }

PJRT_Error_Code ToPjrtCode(ipu::ErrorCode code) {
  switch (code) {
    case ipu::ErrorCode::InvalidArgument: return PJRT_Error_Code_INVALID_ARGUMENT;
    case ipu::ErrorCode::Unimplemented: return PJRT_Error_Code_UNIMPLEMENTED;
    case ipu::ErrorCode::ResourceExhausted: return PJRT_Error_Code_RESOURCE_EXHAUSTED;
    case ipu::ErrorCode::Cancelled: return PJRT_Error_Code_CANCELLED;
    case ipu::ErrorCode::Internal: break;
  }
  return PJRT_Error_Code_INTERNAL;
}

PJRT_Error* CurrentExceptionToError(const char* function) {
  try {
    throw;
  } catch (const ipu::Error& e) { return MakeError(ToPjrtCode(e.code()), e.what()); } catch (const std::bad_alloc&) {
    return MakeError(PJRT_Error_Code_RESOURCE_EXHAUSTED, std::string(function) + ": out of host memory");
  } catch (const std::exception& e) {
    return MakeError(PJRT_Error_Code_INTERNAL, std::string(function) + ": " + e.what());
  } catch (...) { return MakeError(PJRT_Error_Code_INTERNAL, std::string(function) + ": unknown failure"); }
}

char* CopyString(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out != nullptr) std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

PJRT_Error* CheckStructSize(const char* function, size_t given, size_t needed) {
  if (given >= needed) return nullptr;
  return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,
                   std::string(function) + ": argument struct is " + std::to_string(given) +
                       " bytes, the ipu plugin needs at least " + std::to_string(needed) +
                       ": this jaxlib does not match the plugin (built for jaxlib 0.4.13)");
}

}  // namespace jax_ipu

extern "C" void PJRT_Error_Destroy_Impl(PJRT_Error_Destroy_Args* args) { delete args->error; }

extern "C" void PJRT_Error_Message_Impl(PJRT_Error_Message_Args* args) {
  args->message = args->error->message.data();
  args->message_size = args->error->message.size();
}

PJRT_Error* PJRT_Error_GetCode_Impl(PJRT_Error_GetCode_Args* args) {
  args->code = args->error->code;
  return nullptr;
}
