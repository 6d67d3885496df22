// The current client (the one the JaxIpu_* functions act on) and JaxIpu_DeviceStats: what the Python package
// reports about a device: host and IPU-Link transfers and the last execution.
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
  if (started_ns && ipu::trace::enabled()) {
    const std::string ipu = "ipu " + std::to_string(device->description.id);
    ipu::trace::record("Transfer", to_device ? "host to " + ipu : ipu + " to host", started_ns, ipu::trace::nowNs(),
                       "{\"device\": " + std::to_string(device->description.id) +
                           ", \"bytes\": " + std::to_string(bytes) + ", \"cycles\": " + std::to_string(cycles) + "}");
  }
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
}  // namespace jax_ipu

// JSON for device `device_id` of the current client, or NULL if there is no such device. Free with JaxIpu_FreeString.
char* JaxIpu_DeviceStats(int device_id) {
  try {
    std::lock_guard<std::mutex> lock(g_client_mutex);
    if (g_client == nullptr || device_id < 0 || static_cast<size_t>(device_id) >= g_client->devices.size()) {
      return nullptr;
    }
    PJRT_Device* device = g_client->devices[device_id].get();
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
                       ", \"executions\": " + std::to_string(device->executions) +
                       ", \"last_program\": " + Quoted(device->last_program) +
                       ", \"last_profile\": " + (device->executions ? device->last_profile.toJson() : "null") + "}";
    return jax_ipu::CopyString(json);
  } catch (...) { return nullptr; }
}
