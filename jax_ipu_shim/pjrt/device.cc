// PJRT_Device and PJRT_DeviceDescription: one emulated IPU and the properties jax shows for it.
#include "plugin.h"

namespace jax_ipu {

void InitDevice(PJRT_Device* device, PJRT_Client* client, int id, const ipu::DeviceDescription& hardware) {
  device->client = client;
  device->local_hardware_id = id;
  device->host = std::make_shared<HostStreams>(id);
  device->queue = std::make_shared<WorkQueue>("ipu" + std::to_string(id));
  PJRT_DeviceDescription& d = device->description;
  d.id = id;
  d.hardware = hardware;
  const std::string tiles = std::to_string(hardware.num_tiles);
  // There is no IPU hardware here: every device is the IPU Model, and says so the way Poplar's does.
  d.kind = "Graphcore-IPUModel(" + hardware.version + ")-NumTiles(" + tiles + ")";
  d.to_string = "IpuDevice(id=" + std::to_string(id) + ", num_tiles=" + tiles + ", version=" + hardware.version + ")";
  // str(device) prints the debug string: keep it the terse form users know from Graphcore's client.
  d.debug_string = d.to_string;

  const std::pair<const char*, int64_t> ints[] = {
      {"num_tiles", hardware.num_tiles},
      {"tiles_per_chip", hardware.tiles_per_chip},
      {"bytes_per_tile", hardware.bytes_per_tile},
      {"num_worker_contexts", hardware.num_worker_contexts},
      {"tile_clock_frequency", hardware.tile_clock_frequency},
      {"is_ipu_model", 1},
  };
  const std::pair<const char*, std::string> strings[] = {{"version", hardware.version}};
  d.attribute_names.reserve(std::size(ints) + std::size(strings));
  d.attribute_strings.reserve(std::size(strings));
  for (const auto& [name, value] : ints) {
    d.attribute_names.emplace_back(name);
    PJRT_NamedValue v{};
    v.struct_size = PJRT_NamedValue_STRUCT_SIZE;
    v.type = PJRT_NamedValue_kInt64;
    v.int64_value = value;
    v.value_size = 1;
    d.attributes.push_back(v);
  }
  for (const auto& [name, value] : strings) {
    d.attribute_names.emplace_back(name);
    d.attribute_strings.push_back(value);
    PJRT_NamedValue v{};
    v.struct_size = PJRT_NamedValue_STRUCT_SIZE;
    v.type = PJRT_NamedValue_kString;
    v.string_value = d.attribute_strings.back().c_str();
    v.value_size = d.attribute_strings.back().size();
    d.attributes.push_back(v);
  }
  for (size_t i = 0; i < d.attributes.size(); ++i) {
    d.attributes[i].name = d.attribute_names[i].c_str();
    d.attributes[i].name_size = d.attribute_names[i].size();
  }
}

}  // namespace jax_ipu

using namespace jax_ipu;

PJRT_Error* PJRT_DeviceDescription_Id_Impl(PJRT_DeviceDescription_Id_Args* args) {
  args->id = args->device_description->id;
  return nullptr;
}

PJRT_Error* PJRT_DeviceDescription_ProcessIndex_Impl(PJRT_DeviceDescription_ProcessIndex_Args* args) {
  args->process_index = args->device_description->process_index;
  return nullptr;
}

PJRT_Error* PJRT_DeviceDescription_Attributes_Impl(PJRT_DeviceDescription_Attributes_Args* args) {
  args->num_attributes = args->device_description->attributes.size();
  args->attributes = args->device_description->attributes.data();
  return nullptr;
}

PJRT_Error* PJRT_DeviceDescription_Kind_Impl(PJRT_DeviceDescription_Kind_Args* args) {
  args->device_kind = args->device_description->kind.data();
  args->device_kind_size = args->device_description->kind.size();
  return nullptr;
}

PJRT_Error* PJRT_DeviceDescription_DebugString_Impl(PJRT_DeviceDescription_DebugString_Args* args) {
  args->debug_string = args->device_description->debug_string.data();
  args->debug_string_size = args->device_description->debug_string.size();
  return nullptr;
}

PJRT_Error* PJRT_DeviceDescription_ToString_Impl(PJRT_DeviceDescription_ToString_Args* args) {
  args->to_string = args->device_description->to_string.data();
  args->to_string_size = args->device_description->to_string.size();
  return nullptr;
}

PJRT_Error* PJRT_Device_GetDescription_Impl(PJRT_Device_GetDescription_Args* args) {
  args->device_description = &args->device->description;
  return nullptr;
}

PJRT_Error* PJRT_Device_IsAddressable_Impl(PJRT_Device_IsAddressable_Args* args) {
  args->is_addressable = args->device->addressable;
  return nullptr;
}

PJRT_Error* PJRT_Device_LocalHardwareId_Impl(PJRT_Device_LocalHardwareId_Args* args) {
  args->local_hardware_id = args->device->local_hardware_id;
  return nullptr;
}

PJRT_Error* PJRT_Device_MemoryStats_Impl(PJRT_Device_MemoryStats_Args*) {
  return MakeError(PJRT_Error_Code_UNIMPLEMENTED,
                   "memory_stats() is not available on the ipu backend: tile memory is reported per program "
                   "(compiled.cost_analysis() and the profile report)");
}

// ---- what PJRT C API 0.90 (jaxlib 0.12) added: the device's memory
#if JAX_IPU_PJRT_MINOR >= 90

PJRT_Error* PJRT_Device_AddressableMemories_Impl(PJRT_Device_AddressableMemories_Args* args) {
  args->memories = &args->device->memory;
  args->num_memories = 1;
  return nullptr;
}

PJRT_Error* PJRT_Device_DefaultMemory_Impl(PJRT_Device_DefaultMemory_Args* args) {
  args->memory = args->device->memory;
  return nullptr;
}

#endif  // JAX_IPU_PJRT_MINOR >= 90
