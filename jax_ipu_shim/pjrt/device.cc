// PJRT_Device and PJRT_DeviceDescription: one emulated IPU and the properties jax shows for it.
#include <cstddef>
#include <cstring>

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

// device.memory_stats(): the live arrays on the IPU and the program loaded on it (stats.cc), against its SRAM.
// Nothing is reserved ahead (a GPU allocator's pools); the free figures are per tile, so left unset. jax_ipu adds
// the busiest tile's bytes in Python.
PJRT_Error* PJRT_Device_MemoryStats_Impl(PJRT_Device_MemoryStats_Args* args) {
  return Guard("PJRT_Device_MemoryStats", [&]() -> PJRT_Error* {
    const size_t needed = offsetof(PJRT_Device_MemoryStats_Args, bytes_limit_is_set) + sizeof(bool);
    if (PJRT_Error* e = CheckStructSize("PJRT_Device_MemoryStats", args->struct_size, needed)) return e;
    const MemoryUse use = DeviceMemoryUse(args->device);
    const size_t outputs = offsetof(PJRT_Device_MemoryStats_Args, bytes_in_use);
    std::memset(reinterpret_cast<char*>(args) + outputs, 0, args->struct_size - outputs);  // every "is set" false
    args->bytes_in_use = use.bytes_in_use;
    args->peak_bytes_in_use = use.peak_bytes_in_use;
    args->peak_bytes_in_use_is_set = true;
    args->num_allocs = use.num_allocs;
    args->num_allocs_is_set = true;
    args->largest_alloc_size = use.largest_alloc_size;
    args->largest_alloc_size_is_set = true;
    args->bytes_limit = use.bytes_limit;
    args->bytes_limit_is_set = true;
    if (args->struct_size >= offsetof(PJRT_Device_MemoryStats_Args, peak_bytes_reserved_is_set) + sizeof(bool)) {
      args->bytes_reserved_is_set = true;  // 0
      args->peak_bytes_reserved_is_set = true;
    }
    return nullptr;
  });
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
