// The current client (the one the JaxIpu_* functions act on) and JaxIpu_DeviceStats: what the Python package
// reports about a device: host and IPU-Link transfers and the last execution.
#include "ipu/c_handle.h"
#include "ipu/trace.h"
#include "jax_ipu/c_api.h"
#include "plugin.h"

namespace {
std::mutex g_client_mutex;
PJRT_Client* g_client = nullptr;

std::string Quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}
}  // namespace

namespace jax_ipu {
void SetCurrentClient(PJRT_Client* client) {
  std::lock_guard<std::mutex> lock(g_client_mutex);
  g_client = client;
}

void ForgetClient(PJRT_Client* client) {
  std::lock_guard<std::mutex> lock(g_client_mutex);
  if (g_client == client) g_client = nullptr;
}

void WithCurrentClient(const std::function<void(PJRT_Client*)>& body) {
  std::lock_guard<std::mutex> lock(g_client_mutex);
  body(g_client);
}

void CountHostTransfer(PJRT_Device* device, size_t bytes, bool to_device, int64_t started_ns) {
  const uint64_t cycles = device->description.hardware.hostTransferCycles(static_cast<int64_t>(bytes));
  if (ipu::Trace* trace = started_ns ? ipu::processTrace() : nullptr) {
    const std::string ipu = "ipu " + std::to_string(device->description.id);
    trace->record("Transfer", to_device ? "host to " + ipu : ipu + " to host", started_ns, ipu::trace::nowNs(),
                  "{\"device\": " + std::to_string(device->description.id) + ", \"bytes\": " + std::to_string(bytes) +
                      ", \"cycles\": " + std::to_string(cycles) + "}");
  }
  if (started_ns && Profiling()) ProfileTransfer(device, bytes, cycles, to_device, started_ns);
  std::lock_guard<std::mutex> lock(device->stats_mutex);
  (to_device ? device->counters.bytes_to_device : device->counters.bytes_from_device) += bytes;
  device->counters.host_transfer_cycles += cycles;
}

void CountLinkTransfer(PJRT_Device* device, size_t bytes) {
  const uint64_t cycles = device->description.hardware.linkCycles(static_cast<int64_t>(bytes));
  std::lock_guard<std::mutex> lock(device->stats_mutex);
  device->counters.bytes_over_links += bytes;
  device->counters.link_cycles += cycles;
}

namespace {
void UpdatePeak(DeviceCounters& c, int64_t program_bytes) {
  c.peak_bytes = std::max(c.peak_bytes, c.array_bytes + program_bytes);
}

int64_t LoadedProgramBytes(const DeviceCounters& c) {
  const std::shared_ptr<const ipu::Executable> program = c.loaded.lock();
  return program ? program->memory().total_bytes : 0;
}
}  // namespace

void CountArray(PJRT_Buffer* buffer) {
  const int64_t bytes = NumElements(buffer->dims) * static_cast<int64_t>(ElementSize(buffer->type));
  PJRT_Device* device = buffer->device;
  std::lock_guard<std::mutex> lock(device->stats_mutex);
  DeviceCounters& c = device->counters;
  buffer->counted_bytes = bytes;
  c.array_bytes += bytes;
  c.allocs += 1;
  c.largest_alloc = std::max(c.largest_alloc, bytes);
  UpdatePeak(c, LoadedProgramBytes(c));
}

void UncountArray(PJRT_Buffer* buffer) {
  PJRT_Device* device = buffer->device;
  std::lock_guard<std::mutex> lock(device->stats_mutex);
  device->counters.array_bytes -= std::exchange(buffer->counted_bytes, 0);
}

void DropBytes(PJRT_Buffer* buffer) {
  buffer->data.reset();
  UncountArray(buffer);
}

void CountLoadedProgram(PJRT_Device* device, const std::shared_ptr<const ipu::Executable>& program) {
  DeviceCounters& c = device->counters;
  if (c.loaded.lock() == program) return;
  c.loaded = program;
  const int64_t bytes = program->memory().total_bytes;
  c.allocs += 1;
  c.largest_alloc = std::max(c.largest_alloc, bytes);
  UpdatePeak(c, bytes);
}

MemoryUse DeviceMemoryUse(PJRT_Device* device) {
  const ipu::DeviceDescription& hardware = device->description.hardware;
  std::lock_guard<std::mutex> lock(device->stats_mutex);
  const DeviceCounters& c = device->counters;
  MemoryUse use;
  const std::shared_ptr<const ipu::Executable> program = c.loaded.lock();
  if (program) {
    use.program_bytes = program->memory().total_bytes;
    use.largest_tile_bytes = program->memory().worst_bytes;
  }
  use.bytes_in_use = c.array_bytes + use.program_bytes;
  use.peak_bytes_in_use = c.peak_bytes;
  use.largest_alloc_size = c.largest_alloc;
  use.num_allocs = c.allocs;
  use.tile_bytes_limit = hardware.bytes_per_tile;
  use.bytes_limit = hardware.bytes_per_tile * hardware.num_tiles;
  return use;
}
}  // namespace jax_ipu

// JSON for device `device_id` of the current client, or NULL if there is no such device. Free with JaxIpu_FreeString.
char* JaxIpu_DeviceStats(int device_id) {
  try {
    std::lock_guard<std::mutex> lock(g_client_mutex);
    if (g_client == nullptr || device_id < 0 || static_cast<size_t>(device_id) >= g_client->devices.size()) {
      return nullptr;
    }
    PJRT_Device* device = g_client->devices[device_id].get();
    const jax_ipu::MemoryUse m = jax_ipu::DeviceMemoryUse(device);
    const std::string memory = "{\"bytes_in_use\": " + std::to_string(m.bytes_in_use) +
                               ", \"program_bytes\": " + std::to_string(m.program_bytes) +
                               ", \"largest_tile_bytes_in_use\": " + std::to_string(m.largest_tile_bytes) +
                               ", \"tile_bytes_limit\": " + std::to_string(m.tile_bytes_limit) + "}";
    std::lock_guard<std::mutex> device_lock(device->stats_mutex);
    const DeviceCounters& c = device->counters;
    std::string json = "{\"device\": " + std::to_string(device_id) +
                       ", \"bytes_to_device\": " + std::to_string(c.bytes_to_device) +
                       ", \"bytes_from_device\": " + std::to_string(c.bytes_from_device) +
                       ", \"host_transfer_cycles\": " + std::to_string(c.host_transfer_cycles) +
                       ", \"bytes_over_links\": " + std::to_string(c.bytes_over_links) +
                       ", \"link_cycles\": " + std::to_string(c.link_cycles) +
                       ", \"infeed_bytes\": " + std::to_string(device->host->infeed_bytes.load()) +
                       ", \"outfeed_bytes\": " + std::to_string(device->host->outfeed_bytes.load()) +
                       ", \"memory\": " + memory + ", \"executions\": " + std::to_string(device->executions) +
                       ", \"last_program\": " + Quoted(device->last_program) +
                       ", \"last_profile\": " + (device->executions ? device->last_profile.toJson() : "null") + "}";
    return jax_ipu::CopyString(json);
  } catch (...) { return nullptr; }
}
