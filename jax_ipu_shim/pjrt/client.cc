// PJRT_Client: the emulated IPUs of one process, created from the options the Python plugin reads from flags.
#include <cstring>

#include "ipu/c_handle.h"
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

std::vector<std::string> Split(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    out.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string StringOption(const PJRT_NamedValue& option) {
  if (option.type != PJRT_NamedValue_kString) {
    throw ipu::Error(ipu::ErrorCode::InvalidArgument,
                     "ipu client option '" + OptionName(option) + "' must be a string");
  }
  return std::string(option.string_value, option.value_size);
}

std::unique_ptr<PJRT_Client> CreateClient(const PJRT_NamedValue* options, size_t num_options) {
  ipu::ModelParameters model;  // version, num_tiles and the IPU Model's other parameters (0: the chip's own)
  int64_t num_devices = 1;
  // Several processes (jax.distributed; jax_ipu/backend/multihost.py): this one's index, every process's address and
  // device count, and how long a collective waits for another process.
  int64_t process_index = 0;
  std::vector<std::string> peers;
  std::vector<std::string> process_devices;
  int64_t timeout_seconds = 300;
  int64_t host_threads = ipu::ThreadPool::defaultThreads();  // jax_ipu.config: JAX_IPU_HOST_THREADS
  for (size_t i = 0; i < num_options; ++i) {
    const PJRT_NamedValue& option = options[i];
    const std::string name = OptionName(option);
    if (name == "version") {
      model.version = StringOption(option);
    } else if (ipu::ModelParameters{}.set(name, 0)) {  // one of the IPU Model's parameters
      model.set(name, IntOption(option));
    } else if (name == "num_devices") {
      num_devices = IntOption(option);
    } else if (name == "process_index") {
      process_index = IntOption(option);
    } else if (name == "peers") {
      peers = Split(StringOption(option));
    } else if (name == "process_devices") {
      process_devices = Split(StringOption(option));
    } else if (name == "collective_timeout") {
      timeout_seconds = IntOption(option);
    } else if (name == "host_threads") {
      host_threads = IntOption(option);
    } else {
      throw ipu::Error(ipu::ErrorCode::InvalidArgument,
                       "unknown ipu client option '" + name + "' (known: " + ipu::ModelParameters::names() +
                           ", num_devices, process_index, peers, process_devices, collective_timeout, host_threads)");
    }
  }
  if (num_devices < 1 || num_devices > 64) {
    throw ipu::Error(ipu::ErrorCode::InvalidArgument,
                     "ipu device count " + std::to_string(num_devices) + " is out of range 1..64");
  }
  if (host_threads < 1 || host_threads > 256) {
    throw ipu::Error(ipu::ErrorCode::InvalidArgument,
                     "ipu host threads " + std::to_string(host_threads) + " are out of range 1..256");
  }
  // One process unless told otherwise: its devices are all there is.
  std::vector<int64_t> counts{num_devices};
  if (!peers.empty()) {
    counts.clear();
    for (const std::string& c : process_devices) counts.push_back(std::stoll(c));
    if (counts.size() != peers.size() || process_index < 0 || process_index >= static_cast<int64_t>(peers.size()) ||
        counts[static_cast<size_t>(process_index)] != num_devices) {
      throw ipu::Error(ipu::ErrorCode::InvalidArgument, "ipu client options: process " + std::to_string(process_index) +
                                                            " of " + std::to_string(peers.size()) +
                                                            " processes, with device counts for " +
                                                            std::to_string(counts.size()) + ", do not agree");
    }
  }
  const ipu::DeviceDescription hardware = ipu::DeviceDescription::forModel(model);

  auto client = std::make_unique<PJRT_Client>();
  client->process_index = static_cast<int>(process_index);
  client->num_processes = static_cast<int>(counts.size());
  client->pool = std::make_unique<ipu::ThreadPool>(static_cast<int>(host_threads));
  int id = 0;
  for (size_t p = 0; p < counts.size(); ++p) {
    for (int64_t local = 0; local < counts[p]; ++local, ++id) {
      client->devices.push_back(std::make_unique<PJRT_Device>());
      PJRT_Device* device = client->devices.back().get();
      InitDevice(device, client.get(), id, hardware);
      device->local_hardware_id = static_cast<int>(local);
      device->process_index = device->description.process_index = static_cast<int>(p);
      device->addressable = static_cast<int64_t>(p) == process_index;
      client->device_pointers.push_back(device);
      if (device->addressable) client->addressable_pointers.push_back(device);
    }
  }
  client->platform_version =
      "IPU Model emulator (jax-ipu; " + std::to_string(num_devices) + " x " + hardware.version + ", " +
      std::to_string(hardware.num_tiles) + " tiles each" +
      (model.settings().empty() ? std::string() : ", " + model.settings()) +
      (counts.size() > 1 ? ", process " + std::to_string(process_index) + " of " + std::to_string(counts.size())
                         : std::string()) +
      ")";
#if JAX_IPU_PJRT_MINOR >= 90
  InitMemories(client.get());
#endif
  if (counts.size() > 1) TransportConnect(static_cast<int>(process_index), peers, static_cast<double>(timeout_seconds));
  return client;
}

void Enqueue(PJRT_Device* device, std::function<void()> item) {
  std::lock_guard<std::mutex> lock(device->client->launch_mutex);
  device->queue->Enqueue(std::move(item));
}

void SetAddressable(PJRT_LoadedExecutable* loaded) {
  loaded->addressable.clear();
  loaded->addressable_replicas.clear();
  for (size_t r = 0; r < loaded->devices.size(); ++r) {
    if (!loaded->devices[r]->addressable) continue;
    loaded->addressable.push_back(loaded->devices[r]);
    loaded->addressable_replicas.push_back(static_cast<int>(r));
  }
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
  args->process_index = args->client->process_index;
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
  args->addressable_devices = args->client->addressable_pointers.data();
  args->num_addressable_devices = args->client->addressable_pointers.size();
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
    const auto& mine = args->client->addressable_pointers;
    if (args->local_hardware_id < 0 || static_cast<size_t>(args->local_hardware_id) >= mine.size()) {
      throw ipu::Error(ipu::ErrorCode::InvalidArgument,
                       "no ipu device with local hardware id " + std::to_string(args->local_hardware_id) +
                           " in this process (it has " + std::to_string(mine.size()) + ")");
    }
    args->addressable_device = mine[static_cast<size_t>(args->local_hardware_id)];
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
    ipu::CompileOptions options;
    const std::string json =
        CompileToProgram(std::string(program->code, program->code_size),
                         std::string(args->compile_options, args->compile_options_size), &device_ids, &options);
    if (device_ids.empty()) device_ids.push_back(args->client->addressable_pointers.front()->description.id);
    std::vector<PJRT_Device*> devices;
    for (int id : device_ids) devices.push_back(LookupDevice(args->client, id));
    options.trace = ipu::processTrace();
    // Devices of one client share one description, so one lowering serves them all.
    std::shared_ptr<const ipu::Executable> lowered =
        ipu::Executable::compile(json, devices.front()->description.hardware, options);
    RequireBufferTypes(*lowered);
    NotifyCompiled(lowered, json, device_ids);
    auto loaded = std::make_unique<PJRT_LoadedExecutable>();
    loaded->program = std::move(lowered);
    loaded->client = args->client;
    loaded->devices = std::move(devices);
    SetAddressable(loaded.get());
    args->executable = loaded.release();
    return nullptr;
  });
}

// ---- what PJRT C API 0.90 (jaxlib 0.12) added: the client's memories and topology
#if JAX_IPU_PJRT_MINOR >= 90

PJRT_Error* PJRT_Client_AddressableMemories_Impl(PJRT_Client_AddressableMemories_Args* args) {
  args->addressable_memories = args->client->memory_pointers.data();
  args->num_addressable_memories = args->client->memory_pointers.size();
  return nullptr;
}

PJRT_Error* PJRT_Client_TopologyDescription_Impl(PJRT_Client_TopologyDescription_Args* args) {
  args->topology = &args->client->topology;  // owned by the client; jaxlib does not destroy a client's topology
  return nullptr;
}

#endif  // JAX_IPU_PJRT_MINOR >= 90
