// The PJRT objects of the ipu plugin, for jaxlib 0.4.13's C API (one small file per object kind beside this one).
//
// This layer only translates between PJRT and the emulator's public interface (ipu/emulator.h): it knows nothing
// about tiles. Every entry point catches everything and answers with a PJRT_Error: a plugin must never abort
// the user's process.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
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

// Runs `body`, turning any exception into a PJRT_Error (ipu::Error keeps its code, anything else is INTERNAL).
PJRT_Error* Guard(const char* function, const std::function<PJRT_Error*()>& body);

// The caller's struct must be at least as large as the part of it we read and write.
PJRT_Error* CheckStructSize(const char* function, size_t given, size_t needed);

}  // namespace jax_ipu

// ----------------------------------------------------------------------------------------------- events

// Work completes before the call that returns an event does, so events are born ready. An event still carries
// a status so that asynchronous execution can be added behind the same interface.
struct PJRT_Event {
  PJRT_Error_Code code = static_cast<PJRT_Error_Code>(0);  // 0: ok
  std::string message;
};

namespace jax_ipu {
PJRT_Event* ReadyEvent();
}

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

struct PJRT_Device {
  PJRT_DeviceDescription description;
  PJRT_Client* client = nullptr;
  int local_hardware_id = 0;
  // Host transfers, counted in the one place they pass through.
  std::mutex transfer_mutex;
  uint64_t bytes_to_device = 0;
  uint64_t bytes_from_device = 0;
  // The most recent execution on this device, for jax_ipu.last_execution().
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
};

namespace jax_ipu {
// Reads create options (version, num_tiles, num_devices) into a client. Throws ipu::Error on bad values.
std::unique_ptr<PJRT_Client> CreateClient(const PJRT_NamedValue* options, size_t num_options);
// The most recently created client, which JaxIpu_DeviceStats reports on (a process has one ipu client).
void SetCurrentClient(PJRT_Client* client);
void ForgetClient(PJRT_Client* client);
PJRT_Device* LookupDevice(PJRT_Client* client, int id);
}

// ----------------------------------------------------------------------------------------------- buffers

// A device array. Its bytes live in host memory (the emulator keeps no per-tile SRAM image between programs);
// donation and deletion release them.
struct PJRT_Buffer {
  PJRT_Device* device = nullptr;
  PJRT_Buffer_Type type = PJRT_Buffer_Type_INVALID;
  std::vector<int64_t> dims;
  std::mutex mutex;
  std::shared_ptr<std::vector<uint8_t>> data;  // null once deleted or donated
};

namespace jax_ipu {
size_t ElementSize(PJRT_Buffer_Type type);  // 0 for types the plugin cannot hold
const char* TypeName(PJRT_Buffer_Type type);
int XlaPrimitiveType(PJRT_Buffer_Type type);  // xla::PrimitiveType number
bool ToIpuDType(PJRT_Buffer_Type type, ipu::DType* out);
PJRT_Buffer_Type FromIpuDType(ipu::DType dtype);
int64_t NumElements(const std::vector<int64_t>& dims);
PJRT_Buffer* NewBuffer(PJRT_Device* device, PJRT_Buffer_Type type, std::vector<int64_t> dims,
                       std::shared_ptr<std::vector<uint8_t>> data);
}

// ----------------------------------------------------------------------------------------------- executables

struct PJRT_Executable {
  std::shared_ptr<const ipu::Executable> program;
  // Cost analysis, owned here because PJRT hands out pointers into it.
  std::vector<PJRT_NamedValue> cost_properties;
  std::vector<std::string> cost_names;
};

struct PJRT_LoadedExecutable {
  std::shared_ptr<const ipu::Executable> program;
  PJRT_Client* client = nullptr;
  std::vector<PJRT_Device*> devices;  // where it runs; one replica per device
  bool deleted = false;
};

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
