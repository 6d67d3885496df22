// PJRT_Client: the emulated IPUs of one process, created from the options the Python plugin reads from flags.
#include <cstring>

#include "plugin.h"

namespace jax_ipu {

namespace {

std::string OptionName(const PJRT_NamedValue& option) { return std::string(option.name, option.name_size); }

int64_t IntOption(const PJRT_NamedValue& option) {
  if (option.type != PJRT_NamedValue_kInt64) {
    throw ipu::Error(ipu::ErrorCode::InvalidArgument,
                     "ipu client option '" + OptionName(option) + "' must be an integer");
  }
  return option.int64_value;
}

}  // namespace

std::unique_ptr<PJRT_Client> CreateClient(const PJRT_NamedValue* options, size_t num_options) {
  std::string version = "ipu2";
  int64_t num_tiles = 0;  // the chip's own
  int64_t num_devices = 1;
  for (size_t i = 0; i < num_options; ++i) {
    const PJRT_NamedValue& option = options[i];
    const std::string name = OptionName(option);
    if (name == "version") {
      if (option.type != PJRT_NamedValue_kString) {
        throw ipu::Error(ipu::ErrorCode::InvalidArgument, "ipu client option 'version' must be a string");
      }
      version.assign(option.string_value, option.value_size);
    } else if (name == "num_tiles") {
      num_tiles = IntOption(option);
    } else if (name == "num_devices") {
      num_devices = IntOption(option);
    } else {
      throw ipu::Error(ipu::ErrorCode::InvalidArgument,
                       "unknown ipu client option '" + name + "' (known: version, num_tiles, num_devices)");
    }
  }
  if (num_devices < 1 || num_devices > 64) {
    throw ipu::Error(ipu::ErrorCode::InvalidArgument,
                     "ipu device count " + std::to_string(num_devices) + " is out of range 1..64");
  }
  if (num_tiles < 0 || num_tiles > (1 << 20)) {
    throw ipu::Error(ipu::ErrorCode::InvalidArgument,
                     "ipu tile count " + std::to_string(num_tiles) + " is out of range");
  }
  const ipu::DeviceDescription hardware = ipu::DeviceDescription::forVersion(version, static_cast<int>(num_tiles));

  auto client = std::make_unique<PJRT_Client>();
  for (int id = 0; id < num_devices; ++id) {
    client->devices.push_back(std::make_unique<PJRT_Device>());
    InitDevice(client->devices.back().get(), client.get(), id, hardware);
    client->device_pointers.push_back(client->devices.back().get());
  }
  client->platform_version = "IPU Model emulator (jax-ipu; " + std::to_string(num_devices) + " x " +
                             hardware.version + ", " + std::to_string(hardware.num_tiles) + " tiles each)";
#if JAX_IPU_PJRT_MINOR >= 90
  InitMemories(client.get());
#endif
  return client;
}

void Enqueue(PJRT_Device* device, std::function<void()> item) {
  std::lock_guard<std::mutex> lock(device->client->launch_mutex);
  device->queue->Enqueue(std::move(item));
}

PJRT_Device* LookupDevice(PJRT_Client* client, int id) {
  if (id < 0 || static_cast<size_t>(id) >= client->devices.size()) {
    throw ipu::Error(ipu::ErrorCode::InvalidArgument,
                     "no ipu device with id " + std::to_string(id) + " (this process has " +
                         std::to_string(client->devices.size()) + "; see JAX_IPU_DEVICE_COUNT)");
  }
  return client->devices[id].get();
}

}  // namespace jax_ipu

PJRT_Client::~PJRT_Client() {
  // Runs waiting on an empty infeed fail (nobody is left to feed them); everything queued still runs, so no
  // event is left pending and no work is lost.
  for (auto& device : devices) device->host->Close();
  for (auto& device : devices) device->queue->Stop();
}

using namespace jax_ipu;

PJRT_Error* PJRT_Client_Create_Impl(PJRT_Client_Create_Args* args) {
  return Guard("PJRT_Client_Create", [&]() -> PJRT_Error* {
    args->client = CreateClient(args->create_options, args->num_options).release();
    SetCurrentClient(args->client);
    return nullptr;
  });
}

PJRT_Error* PJRT_Client_Destroy_Impl(PJRT_Client_Destroy_Args* args) {
  ForgetClient(args->client);
  delete args->client;
  return nullptr;
}

PJRT_Error* PJRT_Client_PlatformName_Impl(PJRT_Client_PlatformName_Args* args) {
  args->platform_name = args->client->platform_name.data();
  args->platform_name_size = args->client->platform_name.size();
  return nullptr;
}

PJRT_Error* PJRT_Client_ProcessIndex_Impl(PJRT_Client_ProcessIndex_Args* args) {
  args->process_index = 0;
  return nullptr;
}

PJRT_Error* PJRT_Client_PlatformVersion_Impl(PJRT_Client_PlatformVersion_Args* args) {
  args->platform_version = args->client->platform_version.data();
  args->platform_version_size = args->client->platform_version.size();
  return nullptr;
}

PJRT_Error* PJRT_Client_Devices_Impl(PJRT_Client_Devices_Args* args) {
  args->devices = args->client->device_pointers.data();
  args->num_devices = args->client->device_pointers.size();
  return nullptr;
}

PJRT_Error* PJRT_Client_AddressableDevices_Impl(PJRT_Client_AddressableDevices_Args* args) {
  args->addressable_devices = args->client->device_pointers.data();
  args->num_addressable_devices = args->client->device_pointers.size();
  return nullptr;
}

PJRT_Error* PJRT_Client_LookupDevice_Impl(PJRT_Client_LookupDevice_Args* args) {
  return Guard("PJRT_Client_LookupDevice", [&]() -> PJRT_Error* {
    args->device = LookupDevice(args->client, args->id);
    return nullptr;
  });
}

PJRT_Error* PJRT_Client_LookupAddressableDevice_Impl(PJRT_Client_LookupAddressableDevice_Args* args) {
  return Guard("PJRT_Client_LookupAddressableDevice", [&]() -> PJRT_Error* {
    args->addressable_device = LookupDevice(args->client, args->local_hardware_id);
    return nullptr;
  });
}

PJRT_Error* PJRT_Client_DefaultDeviceAssignment_Impl(PJRT_Client_DefaultDeviceAssignment_Args* args) {
  const size_t needed = static_cast<size_t>(args->num_replicas) * static_cast<size_t>(args->num_partitions);
  const size_t available = args->client->devices.size();
  if (needed > available) {
    return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,
                     std::to_string(needed) + " ipu devices requested (" + std::to_string(args->num_replicas) +
                         " replicas x " + std::to_string(args->num_partitions) + " partitions) but " +
                         std::to_string(available) + " exist; set JAX_IPU_DEVICE_COUNT");
  }
  if (args->default_assignment_size < needed) {
    return MakeError(PJRT_Error_Code_INVALID_ARGUMENT, "device assignment buffer too small");
  }
  for (size_t i = 0; i < needed; ++i) args->default_assignment[i] = static_cast<int>(i);
  return nullptr;
}

PJRT_Error* PJRT_Client_Compile_Impl(PJRT_Client_Compile_Args* args) {
  return Guard("PJRT_Client_Compile", [&]() -> PJRT_Error* {
    const PJRT_Program* program = args->program;
    const std::string format(program->format, program->format_size);
    if (format != "mlir") {
      return MakeError(PJRT_Error_Code_UNIMPLEMENTED,
                       "the ipu backend compiles StableHLO given as MLIR; it was given format '" + format + "'");
    }
    std::vector<int> device_ids;
    const std::string json = CompileToProgram(std::string(program->code, program->code_size),
                                              std::string(args->compile_options, args->compile_options_size),
                                              &device_ids);
    if (device_ids.empty()) device_ids.push_back(0);
    std::vector<PJRT_Device*> devices;
    for (int id : device_ids) devices.push_back(LookupDevice(args->client, id));
    // Devices of one client share one description, so one lowering serves them all.
    std::shared_ptr<const ipu::Executable> lowered =
        ipu::Executable::compile(json, devices.front()->description.hardware);
    auto loaded = std::make_unique<PJRT_LoadedExecutable>();
    loaded->program = std::move(lowered);
    loaded->client = args->client;
    loaded->devices = std::move(devices);
    args->executable = loaded.release();
    return nullptr;
  });
}
