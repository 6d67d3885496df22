// Serialised executables (jax.experimental.serialize_executable, backend.serialize_executable, caches).
//
// The form is a short text header followed by the program it was compiled from:
//
//   jax-ipu-executable 2          magic and format version
//   device ipu2 1472              the chip and tile count it was lowered for
//   replicas 2                    replicas it runs as
//   devices 0 1                   the device ids it runs on, one replica each
//   options {"fusion":true,...}   the emulator's compile options it was lowered with (ipu::CompileOptions)
//   checksum 0123456789abcdef     FNV-1a (64 bits) of the options line's JSON, a newline and the program bytes
//   program 12345                 bytes of the program that follow (the binary container the front end wrote,
//                                 or "jax-ipu-program" JSON text)
//   {...}
//
// Loading lowers the program again for the client's IPU with the same options (the emulator's lowering is
// deterministic), so a loaded executable runs and costs exactly as the original. A blob for another chip or tile count
// is refused, and so is one whose program bytes (its ops, constants, shapes) no longer give its checksum: a changed
// byte never runs.
#include <algorithm>

#include "ipu/c_handle.h"
#include "plugin.h"

namespace jax_ipu {
namespace {

constexpr const char* kMagic = "jax-ipu-executable";
constexpr int kFormatVersion = 3;  // 2: the checksum line; 3: the options line

struct Header {
  std::string version;
  int num_tiles = 0;
  int replicas = 1;
  std::vector<int> device_ids;
  std::string options;
  std::string program;
};

// FNV-1a, 64 bits, as 16 hex digits: a checksum against damaged blobs (not a signature).
std::string Checksum(const std::string& bytes) {
  uint64_t h = Fnv1a64(bytes);
  static const char* kHex = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, h >>= 4) out[static_cast<size_t>(i)] = kHex[h & 15];
  return out;
}

ipu::Error Malformed(const std::string& what) {
  return ipu::Error(ipu::ErrorCode::InvalidArgument,
                    "not a loadable serialised ipu executable: " + what +
                        " (serialise it again with this jax-ipu from the compiled function)");
}

std::string Serialize(const ipu::Executable& program, const std::vector<int>& device_ids) {
  const ipu::DeviceDescription& device = program.device();
  std::string out = std::string(kMagic) + " " + std::to_string(kFormatVersion) + "\n";
  out += "device " + device.version + " " + std::to_string(device.num_tiles) + "\n";
  out += "replicas " + std::to_string(NumReplicas(program, device_ids.size())) + "\n";
  out += "devices";
  for (int id : device_ids) out += " " + std::to_string(id);
  const std::string& json = program.programJson();
  const std::string options = program.options().toJson();
  return out + "\noptions " + options + "\nchecksum " + Checksum(options + "\n" + json) + "\nprogram " +
         std::to_string(json.size()) + "\n" + json;
}

// The header, one line at a time: "key word word...".
class HeaderReader {
 public:
  explicit HeaderReader(const std::string& blob) : blob_(blob) {}

  // The words of the next line, which must start with `key`.
  std::vector<std::string> Line(const std::string& key) {
    const size_t end = blob_.find('\n', pos_);
    if (end == std::string::npos) throw Malformed("the header ends before its '" + key + "' line");
    const std::string line = blob_.substr(pos_, end - pos_);
    pos_ = end + 1;
    std::vector<std::string> words;
    for (size_t i = 0; i < line.size();) {
      const size_t space = std::min(line.find(' ', i), line.size());
      if (space > i) words.push_back(line.substr(i, space - i));
      i = space + 1;
    }
    if (words.empty() || words[0] != key) {
      throw Malformed("expected a '" + key + "' line, found '" + line.substr(0, 40) + "'");
    }
    words.erase(words.begin());
    return words;
  }
  std::string Rest() const { return blob_.substr(pos_); }

 private:
  const std::string& blob_;
  size_t pos_ = 0;
};

int64_t Number(const std::string& word, const std::string& what) {
  size_t used = 0;
  int64_t value = -1;
  try {
    value = std::stoll(word, &used);
  } catch (...) { used = 0; }
  if (used != word.size() || value < 0) throw Malformed("bad " + what + " '" + word + "'");
  return value;
}

Header Parse(const std::string& blob) {
  HeaderReader in(blob);
  std::vector<std::string> magic;
  try {
    magic = in.Line(kMagic);
  } catch (const ipu::Error&) { throw Malformed("it does not start with '" + std::string(kMagic) + "'"); }
  if (magic.size() != 1 || magic[0] != std::to_string(kFormatVersion)) {
    throw Malformed("its format version is '" + (magic.empty() ? "" : magic[0]) + "', this jax-ipu reads version " +
                    std::to_string(kFormatVersion));
  }
  Header h;
  const auto device = in.Line("device");
  if (device.size() != 2) throw Malformed("bad 'device' line");
  h.version = device[0];
  h.num_tiles = static_cast<int>(Number(device[1], "tile count"));
  const auto replicas = in.Line("replicas");
  if (replicas.size() != 1) throw Malformed("bad 'replicas' line");
  h.replicas = static_cast<int>(Number(replicas[0], "replica count"));
  for (const std::string& id : in.Line("devices")) h.device_ids.push_back(static_cast<int>(Number(id, "device id")));
  const auto options = in.Line("options");
  if (options.size() != 1) throw Malformed("bad 'options' line");
  h.options = options[0];
  const auto checksum = in.Line("checksum");
  if (checksum.size() != 1) throw Malformed("bad 'checksum' line");
  const auto program = in.Line("program");
  if (program.size() != 1) throw Malformed("bad 'program' line");
  h.program = in.Rest();
  if (h.program.size() != static_cast<size_t>(Number(program[0], "program size"))) {
    throw Malformed("the program is cut short or has trailing bytes");
  }
  const std::string summed = Checksum(h.options + "\n" + h.program);
  if (summed != checksum[0]) {
    throw Malformed("its program does not match its checksum (checksum " + checksum[0] + ", its options and program " +
                    "bytes give " + summed + "): it was changed or damaged after it was serialised");
  }
  return h;
}

}  // namespace
}  // namespace jax_ipu

using namespace jax_ipu;

PJRT_Error* PJRT_Executable_Serialize_Impl(PJRT_Executable_Serialize_Args* args) {
  return Guard("PJRT_Executable_Serialize", [&]() -> PJRT_Error* {
    const PJRT_Executable* e = args->executable;
    auto serialized = std::make_unique<PJRT_SerializedExecutable>();
    serialized->data = Serialize(*e->program, e->device_ids);
#if JAX_IPU_PJRT_MINOR >= 90
    // The newer tables hand the bytes out directly, with a deleter for what backs them.
    args->serialized_bytes = serialized->data.data();
    args->serialized_bytes_size = serialized->data.size();
    args->serialized_executable_deleter = [](PJRT_SerializedExecutable* s) { delete s; };
#endif
    args->serialized_executable = serialized.release();
    return nullptr;
  });
}

#if JAX_IPU_PJRT_MINOR == 0
PJRT_Error* PJRT_SerializedExecutable_Destroy_Impl(PJRT_SerializedExecutable_Destroy_Args* args) {
  delete args->serialized_executable;
  return nullptr;
}

PJRT_Error* PJRT_SerializedExecutable_Data_Impl(PJRT_SerializedExecutable_Data_Args* args) {
  args->data = args->serialized_executable->data.data();
  args->data_size = args->serialized_executable->data.size();
  return nullptr;
}
#endif

PJRT_Error* PJRT_Executable_DeserializeAndLoad_Impl(PJRT_Executable_DeserializeAndLoad_Args* args) {
  return Guard("PJRT_Executable_DeserializeAndLoad", [&]() -> PJRT_Error* {
    PJRT_Client* client = args->client;
    const Header h = Parse(std::string(args->serialized_executable, args->serialized_executable_size));
    const ipu::DeviceDescription& hardware = client->devices.front()->description.hardware;
    if (h.version != hardware.version || h.num_tiles != hardware.num_tiles) {
      return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,
                       "this serialised ipu executable was compiled for " + h.version + " with " +
                           std::to_string(h.num_tiles) + " tiles, but this process's IPUs are " + hardware.version +
                           " with " + std::to_string(hardware.num_tiles) +
                           " tiles: compile it again here, or set JAX_IPU_MODEL_VERSION / JAX_IPU_MODEL_NUM_TILES "
                           "to match");
    }
    std::vector<PJRT_Device*> devices;
    for (int id : h.device_ids) devices.push_back(LookupDevice(client, id));
    if (devices.empty()) devices.push_back(client->devices.front().get());
    auto loaded = std::make_unique<PJRT_LoadedExecutable>();
    ipu::CompileOptions options = ipu::CompileOptions::parse(h.options);
    options.trace = ipu::processTrace();
    loaded->program = ipu::Executable::compile(h.program, hardware, options);
    RequireBufferTypes(*loaded->program);
    loaded->client = client;
    loaded->devices = std::move(devices);
    SetAddressable(loaded.get());
    if (NumReplicas(*loaded->program, loaded->devices.size()) != h.replicas) {
      throw Malformed("it says " + std::to_string(h.replicas) + " replicas but its program and devices make " +
                      std::to_string(NumReplicas(*loaded->program, loaded->devices.size())));
    }
    args->loaded_executable = loaded.release();
    return nullptr;
  });
}
