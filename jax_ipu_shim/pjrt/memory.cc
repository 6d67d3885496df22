// What only the newer PJRT tables (API 0.90, jaxlib 0.12) have: plugin attributes, memory spaces, the topology,
// and the typed queries that replaced PJRT_Buffer_OnDeviceTrimmedShape. Empty when built for jaxlib 0.4.13's table.
#include "jax_ipu/c_api.h"
#include "plugin.h"

#if JAX_IPU_PJRT_MINOR >= 90

#include <cstring>

namespace jax_ipu {
namespace {

// The one memory kind every IPU has: jax compares kinds as strings, so it must be the same everywhere.
constexpr const char* kMemoryKind = "device";

// Which StableHLO the front end reads, as the Python plugin told us before jaxlib first asked (negotiated through
// the plugin attributes: jaxlib serialises the VHLO artifact it hands to Compile at this version).
struct StablehloVersions {
  std::mutex mutex;
  int64_t current[3] = {0, 0, 0};
  int64_t minimum[3] = {0, 0, 0};
  bool known = false;
  std::vector<PJRT_NamedValue> attributes;
};
StablehloVersions& Versions() {
  static StablehloVersions* versions = new StablehloVersions();  // never destroyed: jaxlib may ask at exit
  return *versions;
}

PJRT_NamedValue Int64List(const char* name, const int64_t* values, size_t n) {
  PJRT_NamedValue v{};
  v.struct_size = PJRT_NamedValue_STRUCT_SIZE;
  v.name = name;
  v.name_size = std::strlen(name);
  v.type = PJRT_NamedValue_kInt64List;
  v.int64_array_value = values;
  v.value_size = n;
  return v;
}

PJRT_NamedValue Int64(const char* name, int64_t value) {
  PJRT_NamedValue v{};
  v.struct_size = PJRT_NamedValue_STRUCT_SIZE;
  v.name = name;
  v.name_size = std::strlen(name);
  v.type = PJRT_NamedValue_kInt64;
  v.int64_value = value;
  v.value_size = 1;
  return v;
}

// PJRT's DeviceAssignmentProto (xla_data.proto) in protobuf wire format: replica_count = 1, computation_count = 2,
// computation_devices = 3 { replica_device_ids = 1 (packed) }. One computation, one replica per device.
void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

std::string DeviceAssignmentProto(const std::vector<PJRT_Device*>& devices) {
  std::string ids;
  for (PJRT_Device* d : devices) PutVarint(&ids, static_cast<uint64_t>(d->description.id));
  std::string computation;
  PutVarint(&computation, (1 << 3) | 2);  // replica_device_ids, length-delimited (packed)
  PutVarint(&computation, ids.size());
  computation += ids;
  std::string out;
  PutVarint(&out, (1 << 3) | 0);  // replica_count
  PutVarint(&out, devices.size());
  PutVarint(&out, (2 << 3) | 0);  // computation_count
  PutVarint(&out, 1);
  PutVarint(&out, (3 << 3) | 2);  // computation_devices
  PutVarint(&out, computation.size());
  out += computation;
  return out;
}

}  // namespace

void InitMemories(PJRT_Client* client) {
  for (size_t i = 0; i < client->devices.size(); ++i) {
    auto memory = std::make_unique<PJRT_Memory>();
    memory->id = static_cast<int>(i);
    memory->device = client->devices[i].get();
    memory->to_string = "MEMORY_SPACE_" + std::to_string(i);
    memory->debug_string = "IpuMemory(id=" + std::to_string(i) + ", kind=" + kMemoryKind +
                           ", device=" + std::to_string(i) + ", " +
                           std::to_string(memory->device->description.hardware.num_tiles) + " tiles)";
    client->devices[i]->memory = memory.get();
    if (client->devices[i]->addressable) client->memory_pointers.push_back(memory.get());
    client->memories.push_back(std::move(memory));
    client->topology.descriptions.push_back(&client->devices[i]->description);
  }
  client->topology.client = client;
}

}  // namespace jax_ipu

// Called by the Python plugin before jaxlib loads the table (jax_ipu/plugin.py): the StableHLO versions its
// front end reads, [current, minimum] as (major, minor, patch) each.
void JaxIpu_SetStablehloVersions(const int64_t* current, const int64_t* minimum) {
  jax_ipu::StablehloVersions& v = jax_ipu::Versions();
  std::lock_guard<std::mutex> lock(v.mutex);
  for (int i = 0; i < 3; ++i) {
    v.current[i] = current[i];
    v.minimum[i] = minimum[i];
  }
  v.known = true;
}

using namespace jax_ipu;

PJRT_Error* PJRT_Plugin_Initialize_Impl(PJRT_Plugin_Initialize_Args*) { return nullptr; }

PJRT_Error* PJRT_Plugin_Attributes_Impl(PJRT_Plugin_Attributes_Args* args) {
  StablehloVersions& v = Versions();
  std::lock_guard<std::mutex> lock(v.mutex);
  v.attributes.clear();
  if (v.known) {  // else jaxlib picks its default window, which the bundled deserializer reads too
    v.attributes.push_back(Int64List("stablehlo_current_version", v.current, 3));
    v.attributes.push_back(Int64List("stablehlo_minimum_version", v.minimum, 3));
  }
  args->attributes = v.attributes.data();
  args->num_attributes = v.attributes.size();
  return nullptr;
}

PJRT_Error* PJRT_Client_AddressableMemories_Impl(PJRT_Client_AddressableMemories_Args* args) {
  args->addressable_memories = args->client->memory_pointers.data();
  args->num_addressable_memories = args->client->memory_pointers.size();
  return nullptr;
}

PJRT_Error* PJRT_Client_TopologyDescription_Impl(PJRT_Client_TopologyDescription_Args* args) {
  args->topology = &args->client->topology;  // owned by the client; jaxlib does not destroy a client's topology
  return nullptr;
}

PJRT_Error* PJRT_Device_AddressableMemories_Impl(PJRT_Device_AddressableMemories_Args* args) {
  args->memories = &args->device->memory;
  args->num_memories = 1;
  return nullptr;
}

PJRT_Error* PJRT_Device_DefaultMemory_Impl(PJRT_Device_DefaultMemory_Args* args) {
  args->memory = args->device->memory;
  return nullptr;
}

PJRT_Error* PJRT_Memory_Id_Impl(PJRT_Memory_Id_Args* args) {
  args->id = args->memory->id;
  return nullptr;
}

PJRT_Error* PJRT_Memory_Kind_Impl(PJRT_Memory_Kind_Args* args) {
  args->kind = kMemoryKind;
  args->kind_size = std::strlen(kMemoryKind);
  return nullptr;
}

PJRT_Error* PJRT_Memory_Kind_Id_Impl(PJRT_Memory_Kind_Id_Args* args) {
  args->kind_id = 0;
  return nullptr;
}

PJRT_Error* PJRT_Memory_DebugString_Impl(PJRT_Memory_DebugString_Args* args) {
  args->debug_string = args->memory->debug_string.data();
  args->debug_string_size = args->memory->debug_string.size();
  return nullptr;
}

PJRT_Error* PJRT_Memory_ToString_Impl(PJRT_Memory_ToString_Args* args) {
  args->to_string = args->memory->to_string.data();
  args->to_string_size = args->memory->to_string.size();
  return nullptr;
}

PJRT_Error* PJRT_Memory_AddressableByDevices_Impl(PJRT_Memory_AddressableByDevices_Args* args) {
  args->devices = &args->memory->device;
  args->num_devices = 1;
  return nullptr;
}

PJRT_Error* PJRT_TopologyDescription_Destroy_Impl(PJRT_TopologyDescription_Destroy_Args*) {
  return nullptr;  // the client owns it
}

PJRT_Error* PJRT_TopologyDescription_PlatformName_Impl(PJRT_TopologyDescription_PlatformName_Args* args) {
  const std::string& name = args->topology->client->platform_name;
  args->platform_name = name.data();
  args->platform_name_size = name.size();
  return nullptr;
}

PJRT_Error* PJRT_TopologyDescription_PlatformVersion_Impl(PJRT_TopologyDescription_PlatformVersion_Args* args) {
  const std::string& version = args->topology->client->platform_version;
  args->platform_version = version.data();
  args->platform_version_size = version.size();
  return nullptr;
}

PJRT_Error* PJRT_TopologyDescription_GetDeviceDescriptions_Impl(
    PJRT_TopologyDescription_GetDeviceDescriptions_Args* args) {
  args->descriptions = args->topology->descriptions.data();
  args->num_descriptions = args->topology->descriptions.size();
  return nullptr;
}

PJRT_Error* PJRT_TopologyDescription_Attributes_Impl(PJRT_TopologyDescription_Attributes_Args* args) {
  args->attributes = nullptr;  // the per-device attributes say it all
  args->num_attributes = 0;
  return nullptr;
}

PJRT_Error* PJRT_Executable_OutputElementTypes_Impl(PJRT_Executable_OutputElementTypes_Args* args) {
  return Guard("PJRT_Executable_OutputElementTypes", [&]() -> PJRT_Error* {
    PJRT_Executable* e = args->executable;
    if (e->output_types.empty()) {
      for (const ipu::TensorType& t : e->program->outputTypes()) e->output_types.push_back(FromIpuDType(t.dtype));
    }
    args->output_types = e->output_types.data();
    args->num_output_types = e->output_types.size();
    return nullptr;
  });
}

PJRT_Error* PJRT_Executable_OutputDimensions_Impl(PJRT_Executable_OutputDimensions_Args* args) {
  PJRT_Executable* e = args->executable;
  if (e->output_dim_sizes.empty()) {
    for (const ipu::TensorType& t : e->program->outputTypes()) {
      e->output_dim_sizes.push_back(t.shape.size());
      e->output_dims.insert(e->output_dims.end(), t.shape.begin(), t.shape.end());
    }
  }
  args->num_outputs = e->output_dim_sizes.size();
  args->dims = e->output_dims.data();
  args->dim_sizes = e->output_dim_sizes.data();
  return nullptr;
}

PJRT_Error* PJRT_Executable_OutputMemoryKinds_Impl(PJRT_Executable_OutputMemoryKinds_Args* args) {
  PJRT_Executable* e = args->executable;
  const size_t n = e->program->outputTypes().size();
  e->output_kinds.assign(n, kMemoryKind);
  e->output_kind_sizes.assign(n, std::strlen(kMemoryKind));
  args->num_outputs = n;
  args->memory_kinds = e->output_kinds.data();
  args->memory_kind_sizes = e->output_kind_sizes.data();
  return nullptr;
}

PJRT_Error* PJRT_Executable_Fingerprint_Impl(PJRT_Executable_Fingerprint_Args* args) {
  args->executable_fingerprint = nullptr;  // no fingerprint: jaxlib then keys caches on the module itself
  args->executable_fingerprint_size = 0;
  return nullptr;
}

PJRT_Error* PJRT_LoadedExecutable_Fingerprint_Impl(PJRT_LoadedExecutable_Fingerprint_Args* args) {
  args->executable_fingerprint = nullptr;
  args->executable_fingerprint_size = 0;
  return nullptr;
}

PJRT_Error* PJRT_Executable_GetCompiledMemoryStats_Impl(PJRT_Executable_GetCompiledMemoryStats_Args* args) {
  return Guard("PJRT_Executable_GetCompiledMemoryStats", [&]() -> PJRT_Error* {
    const ipu::Executable& p = *args->executable->program;
    int64_t in = 0, out = 0;
    for (const ipu::TensorType& t : p.inputTypes()) in += static_cast<int64_t>(t.numBytes());
    for (const ipu::TensorType& t : p.outputTypes()) out += static_cast<int64_t>(t.numBytes());
    const int64_t total = static_cast<int64_t>(p.memory().total_bytes);
    args->generated_code_size_in_bytes = 0;
    args->argument_size_in_bytes = in;
    args->output_size_in_bytes = out;
    args->alias_size_in_bytes = 0;
    args->temp_size_in_bytes = total > in + out ? total - in - out : 0;
    args->host_generated_code_size_in_bytes = 0;
    args->host_argument_size_in_bytes = 0;
    args->host_output_size_in_bytes = 0;
    args->host_alias_size_in_bytes = 0;
    args->host_temp_size_in_bytes = 0;
    if (args->struct_size >= PJRT_STRUCT_SIZE(PJRT_Executable_GetCompiledMemoryStats_Args, total_size_in_bytes)) {
      args->peak_memory_in_bytes = total;
      args->total_size_in_bytes = total;
    }
    return nullptr;
  });
}

PJRT_Error* PJRT_LoadedExecutable_GetDeviceAssignment_Impl(PJRT_LoadedExecutable_GetDeviceAssignment_Args* args) {
  return Guard("PJRT_LoadedExecutable_GetDeviceAssignment", [&]() -> PJRT_Error* {
    auto* bytes = new std::string(DeviceAssignmentProto(args->executable->devices));
    args->serialized_bytes = bytes->data();
    args->serialized_bytes_size = bytes->size();
    args->serialized_device_assignment = reinterpret_cast<PJRT_DeviceAssignmentSerialized*>(bytes);
    args->serialized_device_assignment_deleter = [](PJRT_DeviceAssignmentSerialized* s) {
      delete reinterpret_cast<std::string*>(s);
    };
    return nullptr;
  });
}

PJRT_Error* PJRT_Buffer_ElementType_Impl(PJRT_Buffer_ElementType_Args* args) {
  args->type = args->buffer->type;
  return nullptr;
}

PJRT_Error* PJRT_Buffer_Dimensions_Impl(PJRT_Buffer_Dimensions_Args* args) {
  args->dims = args->buffer->dims.data();
  args->num_dims = args->buffer->dims.size();
  return nullptr;
}

PJRT_Error* PJRT_Buffer_UnpaddedDimensions_Impl(PJRT_Buffer_UnpaddedDimensions_Args* args) {
  args->unpadded_dims = args->buffer->dims.data();  // IPU arrays are never padded
  args->num_dims = args->buffer->dims.size();
  return nullptr;
}

PJRT_Error* PJRT_Buffer_DynamicDimensionIndices_Impl(PJRT_Buffer_DynamicDimensionIndices_Args* args) {
  args->dynamic_dim_indices = nullptr;  // static shapes only
  args->num_dynamic_dims = 0;
  return nullptr;
}

PJRT_Error* PJRT_Buffer_GetMemoryLayout_Impl(PJRT_Buffer_GetMemoryLayout_Args* args) {
  return Guard("PJRT_Buffer_GetMemoryLayout", [&]() -> PJRT_Error* {
    PJRT_Buffer* buffer = args->buffer;
    {
      std::lock_guard<std::mutex> lock(buffer->mutex);
      if (buffer->minor_to_major.size() != buffer->dims.size()) {
        const int64_t rank = static_cast<int64_t>(buffer->dims.size());
        buffer->minor_to_major.clear();
        for (int64_t i = rank - 1; i >= 0; --i) buffer->minor_to_major.push_back(i);  // row-major, untiled
      }
    }
    std::memset(&args->layout, 0, sizeof(args->layout));
    args->layout.struct_size = PJRT_Buffer_MemoryLayout_STRUCT_SIZE;
    args->layout.type = PJRT_Buffer_MemoryLayout_Type_Tiled;
    args->layout.tiled.struct_size = PJRT_Buffer_MemoryLayout_Tiled_STRUCT_SIZE;
    args->layout.tiled.minor_to_major = buffer->minor_to_major.data();
    args->layout.tiled.minor_to_major_size = buffer->minor_to_major.size();
    args->layout.tiled.num_tiles = 0;
    return nullptr;
  });
}

PJRT_Error* PJRT_Buffer_Memory_Impl(PJRT_Buffer_Memory_Args* args) {
  args->memory = args->buffer->device->memory;
  return nullptr;
}

PJRT_Error* PJRT_Buffer_CopyToMemory_Impl(PJRT_Buffer_CopyToMemory_Args* args) {
  // Every memory is its device's only one: a copy to a memory is a copy to that memory's device.
  PJRT_Buffer_CopyToDevice_Args copy{};
  copy.struct_size = PJRT_Buffer_CopyToDevice_Args_STRUCT_SIZE;
  copy.buffer = args->buffer;
  copy.dst_device = args->dst_memory->device;
  PJRT_Error* error = PJRT_Buffer_CopyToDevice_Impl(&copy);
  args->dst_buffer = copy.dst_buffer;
  return error;
}

#endif  // JAX_IPU_PJRT_MINOR >= 90
