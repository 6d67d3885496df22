// GetPjrtApi: the PJRT C API 0.90 table jaxlib 0.12 loads (header of tensorflow-cpu 2.21.0, pinned in
// build_tools/pins.toml). Every slot is filled, in the header's order: what jaxlib calls on the paths we support
// is real; the rest answers with a clean error naming itself. The version reported is the header's own, 0.90:
// jaxlib trusts it to decide which functions exist, so it is never more than this table fills.
#include "../plugin.h"
#include "jax_ipu/c_api.h"

namespace {

#define JAX_IPU_UNIMPLEMENTED(name, what)                                                               \
  PJRT_Error* name##_Unimplemented(name##_Args*) {                                                      \
    return jax_ipu::MakeError(PJRT_Error_Code_UNIMPLEMENTED,                                            \
                              std::string(#name ": ") + what + " is not supported on the ipu backend"); \
  }

JAX_IPU_UNIMPLEMENTED(PJRT_Buffer_IncreaseExternalReferenceCount, "external references to device memory (DLPack)")
JAX_IPU_UNIMPLEMENTED(PJRT_Buffer_DecreaseExternalReferenceCount, "external references to device memory (DLPack)")
JAX_IPU_UNIMPLEMENTED(PJRT_Buffer_OpaqueDeviceMemoryDataPointer,
                      "raw device pointers (IPU memory is not host-addressable)")
JAX_IPU_UNIMPLEMENTED(PJRT_CopyToDeviceStream_Destroy, "streaming copies to device")
JAX_IPU_UNIMPLEMENTED(PJRT_CopyToDeviceStream_AddChunk, "streaming copies to device")
JAX_IPU_UNIMPLEMENTED(PJRT_CopyToDeviceStream_TotalBytes, "streaming copies to device")
JAX_IPU_UNIMPLEMENTED(PJRT_CopyToDeviceStream_GranuleSize, "streaming copies to device")
JAX_IPU_UNIMPLEMENTED(PJRT_CopyToDeviceStream_CurrentBytes, "streaming copies to device")
JAX_IPU_UNIMPLEMENTED(PJRT_TopologyDescription_Create, "ahead-of-time topologies without a client")
JAX_IPU_UNIMPLEMENTED(PJRT_TopologyDescription_Serialize, "serialising a topology")
JAX_IPU_UNIMPLEMENTED(PJRT_Compile, "compiling without a client (ahead of time)")
JAX_IPU_UNIMPLEMENTED(PJRT_Client_CreateViewOfDeviceBuffer, "views of foreign device memory")
JAX_IPU_UNIMPLEMENTED(PJRT_ExecuteContext_Create, "execute contexts (FFI user data)")
JAX_IPU_UNIMPLEMENTED(PJRT_ExecuteContext_Destroy, "execute contexts (FFI user data)")
JAX_IPU_UNIMPLEMENTED(PJRT_Buffer_CopyRawToHost, "raw byte-range reads")
JAX_IPU_UNIMPLEMENTED(PJRT_AsyncHostToDeviceTransferManager_Destroy, "asynchronous host-to-device transfer managers")
JAX_IPU_UNIMPLEMENTED(PJRT_AsyncHostToDeviceTransferManager_TransferData,
                      "asynchronous host-to-device transfer managers")
JAX_IPU_UNIMPLEMENTED(PJRT_Client_CreateBuffersForAsyncHostToDevice, "asynchronous host-to-device transfer managers")
JAX_IPU_UNIMPLEMENTED(PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer,
                      "asynchronous host-to-device transfer managers")
JAX_IPU_UNIMPLEMENTED(PJRT_AsyncHostToDeviceTransferManager_Device, "asynchronous host-to-device transfer managers")
JAX_IPU_UNIMPLEMENTED(PJRT_AsyncHostToDeviceTransferManager_BufferCount,
                      "asynchronous host-to-device transfer managers")
JAX_IPU_UNIMPLEMENTED(PJRT_AsyncHostToDeviceTransferManager_BufferSize, "asynchronous host-to-device transfer managers")
JAX_IPU_UNIMPLEMENTED(PJRT_AsyncHostToDeviceTransferManager_SetBufferError,
                      "asynchronous host-to-device transfer managers")
JAX_IPU_UNIMPLEMENTED(PJRT_AsyncHostToDeviceTransferManager_AddMetadata,
                      "asynchronous host-to-device transfer managers")
JAX_IPU_UNIMPLEMENTED(PJRT_Client_DmaMap, "DMA-mapped host memory")
JAX_IPU_UNIMPLEMENTED(PJRT_Client_DmaUnmap, "DMA-mapped host memory")
JAX_IPU_UNIMPLEMENTED(PJRT_Client_CreateUninitializedBuffer, "uninitialised buffers")
JAX_IPU_UNIMPLEMENTED(PJRT_Client_UpdateGlobalProcessInfo, "multi-process runs")
JAX_IPU_UNIMPLEMENTED(PJRT_TopologyDescription_Deserialize, "serialising a topology")
JAX_IPU_UNIMPLEMENTED(PJRT_Client_CreateAliasBuffer, "alias buffers")
JAX_IPU_UNIMPLEMENTED(PJRT_Client_FulfillAliasBuffer, "alias buffers")
JAX_IPU_UNIMPLEMENTED(PJRT_Client_CreateErrorBuffer, "error buffers")
JAX_IPU_UNIMPLEMENTED(PJRT_AsyncHostToDeviceTransferManager_TransferLiteral,
                      "asynchronous host-to-device transfer managers")
JAX_IPU_UNIMPLEMENTED(PJRT_Buffer_CopyRawToHostFuture, "raw byte-range reads")
JAX_IPU_UNIMPLEMENTED(PJRT_Device_PoisonExecution, "poisoning executions")
JAX_IPU_UNIMPLEMENTED(PJRT_Device_CreateAsyncTrackingEvent, "async tracking events")
JAX_IPU_UNIMPLEMENTED(PJRT_AsyncTrackingEvent_Destroy, "async tracking events")
JAX_IPU_UNIMPLEMENTED(PJRT_Executable_GetCompileOptions, "reading back compile options")
JAX_IPU_UNIMPLEMENTED(PJRT_Buffer_DonateWithControlDependency, "donation with control dependencies")
JAX_IPU_UNIMPLEMENTED(PJRT_Event_Create, "events created by the caller")
JAX_IPU_UNIMPLEMENTED(PJRT_Event_Set, "events created by the caller")

#undef JAX_IPU_UNIMPLEMENTED

PJRT_Api MakeApi() {
  PJRT_Api api{};
  api.struct_size = PJRT_Api_STRUCT_SIZE;
  api.pjrt_api_version.struct_size = PJRT_Api_Version_STRUCT_SIZE;
  api.pjrt_api_version.major_version = PJRT_API_MAJOR;
  api.pjrt_api_version.minor_version = PJRT_API_MINOR;
  api.extension_start = jax_ipu::ProfilerExtension();  // jax.profiler's IPU lanes (profiler.cc)
#define SET(name) api.name = name##_Impl
#define SET_UNIMPLEMENTED(name) api.name = name##_Unimplemented
  SET(PJRT_Error_Destroy);
  SET(PJRT_Error_Message);
  SET(PJRT_Error_GetCode);
  SET(PJRT_Plugin_Initialize);
  SET(PJRT_Plugin_Attributes);
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
  SET(PJRT_Client_AddressableMemories);
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
  SET(PJRT_Device_AddressableMemories);
  SET(PJRT_Device_DefaultMemory);
  SET(PJRT_Device_MemoryStats);
  SET(PJRT_Memory_Id);
  SET(PJRT_Memory_Kind);
  SET(PJRT_Memory_DebugString);
  SET(PJRT_Memory_ToString);
  SET(PJRT_Memory_AddressableByDevices);
  SET(PJRT_Executable_Destroy);
  SET(PJRT_Executable_Name);
  SET(PJRT_Executable_NumReplicas);
  SET(PJRT_Executable_NumPartitions);
  SET(PJRT_Executable_NumOutputs);
  SET(PJRT_Executable_SizeOfGeneratedCodeInBytes);
  SET(PJRT_Executable_GetCostAnalysis);
  SET(PJRT_Executable_OutputMemoryKinds);
  SET(PJRT_Executable_OptimizedProgram);
  SET(PJRT_Executable_Serialize);
  SET(PJRT_LoadedExecutable_Destroy);
  SET(PJRT_LoadedExecutable_GetExecutable);
  SET(PJRT_LoadedExecutable_AddressableDevices);
  SET(PJRT_LoadedExecutable_Delete);
  SET(PJRT_LoadedExecutable_IsDeleted);
  SET(PJRT_LoadedExecutable_Execute);
  SET(PJRT_Executable_DeserializeAndLoad);
  SET(PJRT_LoadedExecutable_Fingerprint);
  SET(PJRT_Buffer_Destroy);
  SET(PJRT_Buffer_ElementType);
  SET(PJRT_Buffer_Dimensions);
  SET(PJRT_Buffer_UnpaddedDimensions);
  SET(PJRT_Buffer_DynamicDimensionIndices);
  SET(PJRT_Buffer_GetMemoryLayout);
  SET(PJRT_Buffer_OnDeviceSizeInBytes);
  SET(PJRT_Buffer_Device);
  SET(PJRT_Buffer_Memory);
  SET(PJRT_Buffer_Delete);
  SET(PJRT_Buffer_IsDeleted);
  SET(PJRT_Buffer_CopyToDevice);
  SET(PJRT_Buffer_ToHostBuffer);
  SET(PJRT_Buffer_IsOnCpu);
  SET(PJRT_Buffer_ReadyEvent);
  SET(PJRT_Buffer_UnsafePointer);
  SET_UNIMPLEMENTED(PJRT_Buffer_IncreaseExternalReferenceCount);
  SET_UNIMPLEMENTED(PJRT_Buffer_DecreaseExternalReferenceCount);
  SET_UNIMPLEMENTED(PJRT_Buffer_OpaqueDeviceMemoryDataPointer);
  SET_UNIMPLEMENTED(PJRT_CopyToDeviceStream_Destroy);
  SET_UNIMPLEMENTED(PJRT_CopyToDeviceStream_AddChunk);
  SET_UNIMPLEMENTED(PJRT_CopyToDeviceStream_TotalBytes);
  SET_UNIMPLEMENTED(PJRT_CopyToDeviceStream_GranuleSize);
  SET_UNIMPLEMENTED(PJRT_CopyToDeviceStream_CurrentBytes);
  SET_UNIMPLEMENTED(PJRT_TopologyDescription_Create);
  SET(PJRT_TopologyDescription_Destroy);
  SET(PJRT_TopologyDescription_PlatformName);
  SET(PJRT_TopologyDescription_PlatformVersion);
  SET(PJRT_TopologyDescription_GetDeviceDescriptions);
  SET_UNIMPLEMENTED(PJRT_TopologyDescription_Serialize);
  SET(PJRT_TopologyDescription_Attributes);
  SET_UNIMPLEMENTED(PJRT_Compile);
  SET(PJRT_Executable_OutputElementTypes);
  SET(PJRT_Executable_OutputDimensions);
  SET(PJRT_Buffer_CopyToMemory);
  SET_UNIMPLEMENTED(PJRT_Client_CreateViewOfDeviceBuffer);
  SET(PJRT_Executable_Fingerprint);
  SET(PJRT_Client_TopologyDescription);
  SET(PJRT_Executable_GetCompiledMemoryStats);
  SET(PJRT_Memory_Kind_Id);
  SET_UNIMPLEMENTED(PJRT_ExecuteContext_Create);
  SET_UNIMPLEMENTED(PJRT_ExecuteContext_Destroy);
  SET_UNIMPLEMENTED(PJRT_Buffer_CopyRawToHost);
  SET_UNIMPLEMENTED(PJRT_AsyncHostToDeviceTransferManager_Destroy);
  SET_UNIMPLEMENTED(PJRT_AsyncHostToDeviceTransferManager_TransferData);
  SET_UNIMPLEMENTED(PJRT_Client_CreateBuffersForAsyncHostToDevice);
  SET_UNIMPLEMENTED(PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer);
  SET_UNIMPLEMENTED(PJRT_AsyncHostToDeviceTransferManager_Device);
  SET_UNIMPLEMENTED(PJRT_AsyncHostToDeviceTransferManager_BufferCount);
  SET_UNIMPLEMENTED(PJRT_AsyncHostToDeviceTransferManager_BufferSize);
  SET_UNIMPLEMENTED(PJRT_AsyncHostToDeviceTransferManager_SetBufferError);
  SET_UNIMPLEMENTED(PJRT_AsyncHostToDeviceTransferManager_AddMetadata);
  SET_UNIMPLEMENTED(PJRT_Client_DmaMap);
  SET_UNIMPLEMENTED(PJRT_Client_DmaUnmap);
  SET_UNIMPLEMENTED(PJRT_Client_CreateUninitializedBuffer);
  SET_UNIMPLEMENTED(PJRT_Client_UpdateGlobalProcessInfo);
  SET_UNIMPLEMENTED(PJRT_TopologyDescription_Deserialize);
  SET_UNIMPLEMENTED(PJRT_Client_CreateAliasBuffer);
  SET_UNIMPLEMENTED(PJRT_Client_FulfillAliasBuffer);
  SET(PJRT_LoadedExecutable_GetDeviceAssignment);
  SET_UNIMPLEMENTED(PJRT_Client_CreateErrorBuffer);
  SET_UNIMPLEMENTED(PJRT_AsyncHostToDeviceTransferManager_TransferLiteral);
  SET_UNIMPLEMENTED(PJRT_Buffer_CopyRawToHostFuture);
  SET_UNIMPLEMENTED(PJRT_Device_PoisonExecution);
  SET_UNIMPLEMENTED(PJRT_Device_CreateAsyncTrackingEvent);
  SET_UNIMPLEMENTED(PJRT_AsyncTrackingEvent_Destroy);
  SET_UNIMPLEMENTED(PJRT_Executable_GetCompileOptions);
  SET_UNIMPLEMENTED(PJRT_Buffer_DonateWithControlDependency);
  SET_UNIMPLEMENTED(PJRT_Event_Create);
  SET_UNIMPLEMENTED(PJRT_Event_Set);
#undef SET
#undef SET_UNIMPLEMENTED
  return api;
}

}  // namespace

static_assert(JAX_IPU_PJRT_MINOR == PJRT_API_MINOR, "the generated pjrt_api.h and the header disagree");

extern "C" JAX_IPU_EXPORT const JaxIpu_PjrtApi* GetPjrtApi() {
  static const PJRT_Api api = MakeApi();
  return &api;
}
