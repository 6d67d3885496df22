// JaxIpu_DeviceStats: what the Python package reports about a device: host transfers and the last execution.
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "plugin.h"

namespace {
std::mutex g_client_mutex;
PJRT_Client* g_client = nullptr;

char* CopyString(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out != nullptr) std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

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
}  // namespace jax_ipu

// JSON for device `device_id` of the current client, or NULL if there is no such device. Free with JaxIpu_FreeString.
extern "C" __attribute__((visibility("default"))) char* JaxIpu_DeviceStats(int device_id) {
  try {
    std::lock_guard<std::mutex> lock(g_client_mutex);
    if (g_client == nullptr || device_id < 0 || static_cast<size_t>(device_id) >= g_client->devices.size()) {
      return nullptr;
    }
    PJRT_Device* device = g_client->devices[device_id].get();
    std::lock_guard<std::mutex> device_lock(device->transfer_mutex);
    std::string json = "{\"device\": " + std::to_string(device_id) +
                       ", \"bytes_to_device\": " + std::to_string(device->bytes_to_device) +
                       ", \"bytes_from_device\": " + std::to_string(device->bytes_from_device) +
                       ", \"executions\": " + std::to_string(device->executions) +
                       ", \"last_program\": " + Quoted(device->last_program) +
                       ", \"last_profile\": " + (device->executions ? device->last_profile.toJson() : "null") + "}";
    return CopyString(json);
  } catch (...) {
    return nullptr;
  }
}
