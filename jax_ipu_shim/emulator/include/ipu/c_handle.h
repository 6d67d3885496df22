// The executable handle of the emulator's C API (capi.cc; the JaxIpu_* functions take it as void*), made from an
// executable that C++ already holds: PJRT hands one to jax_ipu's report hook (pjrt/compiler.cc).
#ifndef IPU_C_HANDLE_H_
#define IPU_C_HANDLE_H_

#include <memory>

#include "ipu/emulator.h"

namespace ipu {

// A handle sharing `executable`: JaxIpu_Destroy releases this share, not the executable's other owners.
void* newExecutableHandle(std::shared_ptr<const Executable> executable);

}  // namespace ipu

#endif  // IPU_C_HANDLE_H_
