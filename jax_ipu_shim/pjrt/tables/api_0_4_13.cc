// GetPjrtApi: the function table jaxlib 0.4.13 loads. Its layout comes from build_tools/gen_pjrt_api.py.
#include "../plugin.h"
#include "jax_ipu/c_api.h"

namespace {

// Functions no jaxlib 0.4.13 path we support calls: each answers with a clean error naming itself.
#define JAX_IPU_UNIMPLEMENTED(name, what)                                                               \
  PJRT_Error* name##_Unimplemented(name##_Args*) {                                                      \
    return jax_ipu::MakeError(PJRT_Error_Code_UNIMPLEMENTED,                                            \
                              std::string(#name ": ") + what + " is not supported on the ipu backend"); \
  }

JAX_IPU_UNIMPLEMENTED(PJRT_CopyToDeviceStream_AddChunk, "streaming copies to device")
JAX_IPU_UNIMPLEMENTED(PJRT_CopyToDeviceStream_TotalBytes, "streaming copies to device")
JAX_IPU_UNIMPLEMENTED(PJRT_CopyToDeviceStream_GranuleSize, "streaming copies to device")
JAX_IPU_UNIMPLEMENTED(PJRT_CopyToDeviceStream_CurrentBytes, "streaming copies to device")
JAX_IPU_UNIMPLEMENTED(PJRT_TopologyDescription_Create, "ahead-of-time topologies")
JAX_IPU_UNIMPLEMENTED(PJRT_TopologyDescription_Destroy, "ahead-of-time topologies")
JAX_IPU_UNIMPLEMENTED(PJRT_TopologyDescription_PlatformName, "ahead-of-time topologies")
JAX_IPU_UNIMPLEMENTED(PJRT_TopologyDescription_PlatformVersion, "ahead-of-time topologies")
JAX_IPU_UNIMPLEMENTED(PJRT_TopologyDescription_GetDeviceDescriptions, "ahead-of-time topologies")
JAX_IPU_UNIMPLEMENTED(PJRT_Compile, "compiling without a client (ahead of time)")

#undef JAX_IPU_UNIMPLEMENTED

PJRT_Api_0_4_13 MakeApi() {
  PJRT_Api_0_4_13 api{};
  api.struct_size = sizeof(PJRT_Api_0_4_13);
  api.pjrt_api_version.struct_size = sizeof(PJRT_Api_Version_0_4_13);
  api.pjrt_api_version.major_version = 0;
  api.pjrt_api_version.minor_version = 0;
#define SET(name) api.name = name##_Impl
#define SET_UNIMPLEMENTED(name) api.name = name##_Unimplemented
  SET(PJRT_Error_Destroy);
  SET(PJRT_Error_Message);
  SET(PJRT_Error_GetCode);
  SET(PJRT_Event_Destroy);
  SET(PJRT_Event_IsReady);
  SET(PJRT_Event_Error);
  SET(PJRT_Event_Await);
  SET(PJRT_Event_OnReady);
  SET(PJRT_Client_Create);
  SET(PJRT_Client_Destroy);
  SET(PJRT_Client_PlatformName);
  SET(PJRT_Client_ProcessIndex);
  SET(PJRT_Client_PlatformVersion);
  SET(PJRT_Client_Devices);
  SET(PJRT_Client_AddressableDevices);
  SET(PJRT_Client_LookupDevice);
  SET(PJRT_Client_LookupAddressableDevice);
  SET(PJRT_Client_Compile);
  SET(PJRT_Client_DefaultDeviceAssignment);
  SET(PJRT_Client_BufferFromHostBuffer);
  SET(PJRT_DeviceDescription_Id);
  SET(PJRT_DeviceDescription_ProcessIndex);
  SET(PJRT_DeviceDescription_Attributes);
  SET(PJRT_DeviceDescription_Kind);
  SET(PJRT_DeviceDescription_DebugString);
  SET(PJRT_DeviceDescription_ToString);
  SET(PJRT_Device_GetDescription);
  SET(PJRT_Device_IsAddressable);
  SET(PJRT_Device_LocalHardwareId);
  SET(PJRT_Device_MemoryStats);
  SET(PJRT_Executable_Destroy);
  SET(PJRT_Executable_Name);
  SET(PJRT_Executable_NumReplicas);
  SET(PJRT_Executable_NumPartitions);
  SET(PJRT_Executable_NumOutputs);
  SET(PJRT_Executable_SizeOfGeneratedCodeInBytes);
  SET(PJRT_Executable_GetCostAnalysis);
  SET(PJRT_Executable_OptimizedProgram);
  SET(PJRT_Executable_Serialize);
  SET(PJRT_LoadedExecutable_Destroy);
  SET(PJRT_LoadedExecutable_GetExecutable);
  SET(PJRT_LoadedExecutable_AddressableDevices);
  SET(PJRT_LoadedExecutable_Delete);
  SET(PJRT_LoadedExecutable_IsDeleted);
  SET(PJRT_LoadedExecutable_Execute);
  SET(PJRT_Executable_DeserializeAndLoad);
  SET(PJRT_SerializedExecutable_Destroy);
  SET(PJRT_SerializedExecutable_Data);
  SET(PJRT_Buffer_Destroy);
  SET(PJRT_Buffer_OnDeviceTrimmedShape);
  SET(PJRT_Buffer_OnDeviceSizeInBytes);
  SET(PJRT_Buffer_Device);
  SET(PJRT_Buffer_Delete);
  SET(PJRT_Buffer_IsDeleted);
  SET(PJRT_Buffer_CopyToDevice);
  SET(PJRT_Buffer_ToHostBuffer);
  SET(PJRT_Buffer_IsOnCpu);
  SET(PJRT_Buffer_ReadyEvent);
  SET(PJRT_Buffer_UnsafePointer);
  SET_UNIMPLEMENTED(PJRT_CopyToDeviceStream_AddChunk);
  SET_UNIMPLEMENTED(PJRT_CopyToDeviceStream_TotalBytes);
  SET_UNIMPLEMENTED(PJRT_CopyToDeviceStream_GranuleSize);
  SET_UNIMPLEMENTED(PJRT_CopyToDeviceStream_CurrentBytes);
  SET_UNIMPLEMENTED(PJRT_TopologyDescription_Create);
  SET_UNIMPLEMENTED(PJRT_TopologyDescription_Destroy);
  SET_UNIMPLEMENTED(PJRT_TopologyDescription_PlatformName);
  SET_UNIMPLEMENTED(PJRT_TopologyDescription_PlatformVersion);
  SET_UNIMPLEMENTED(PJRT_TopologyDescription_GetDeviceDescriptions);
  SET_UNIMPLEMENTED(PJRT_Compile);
#undef SET
#undef SET_UNIMPLEMENTED
  return api;
}

}  // namespace

extern "C" JAX_IPU_EXPORT const JaxIpu_PjrtApi* GetPjrtApi() {
  static const PJRT_Api_0_4_13 api = MakeApi();
  return &api;
}
