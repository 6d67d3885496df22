// PJRT_Memory: each IPU's one memory space, "device" (PJRT C API 0.90, jaxlib 0.12; empty for jaxlib 0.4.13's
// table). InitMemories makes them, and the topology's device list, once the client's devices exist.
#include "plugin.h"

#if JAX_IPU_PJRT_MINOR >= 90

#include <cstring>

namespace jax_ipu {

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

using namespace jax_ipu;

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

#endif  // JAX_IPU_PJRT_MINOR >= 90
