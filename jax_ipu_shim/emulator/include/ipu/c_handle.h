// What the emulator's C API (capi.cc) shares with the PJRT plugin: its executable handle (the JaxIpu_* functions take
// it as void*), made from an executable that C++ already holds (PJRT hands one to jax_ipu's report hook:
// pjrt/compiler.cc), and the process's PVTI timeline.
#ifndef IPU_C_HANDLE_H_
#define IPU_C_HANDLE_H_

#include <memory>

#include "ipu/emulator.h"
#include "ipu/trace.h"

namespace ipu {

// A handle sharing `executable`: JaxIpu_Destroy releases this share, not the executable's other owners.
void* newExecutableHandle(std::shared_ptr<const Executable> executable);

// The process's PVTI timeline while JaxIpu_TraceEnable has it on, else null: what the C API's and PJRT's compiles
// and runs put in their options' `trace`, and where PJRT records its transfers. Taken by JaxIpu_TraceTake.
Trace* processTrace();

}  // namespace ipu

#endif  // IPU_C_HANDLE_H_
