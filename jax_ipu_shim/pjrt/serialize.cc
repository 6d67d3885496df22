// Serialised executables (jax.experimental.serialize_executable, backend.serialize_executable, caches).
//
// The form is a short text header followed by the program it was compiled from:
//
//   jax-ipu-executable 1          magic and format version
//   device ipu2 1472              the chip and tile count it was lowered for
//   replicas 2                    replicas it runs as
//   devices 0 1                   the device ids it runs on, one replica each
//   program 12345                 bytes of "jax-ipu-program" JSON that follow
//   {...}
//
// Loading lowers the program again for the client's IPU (the emulator's lowering is deterministic), so a loaded
// executable runs and costs exactly as the original. A blob for another chip or tile count is refused.
#include <sstream>

#include "plugin.h"

namespace jax_ipu {
namespace {

constexpr const char* kMagic = "jax-ipu-executable";
constexpr int kFormatVersion = 1;

struct Header {
  std::string version;
  int num_tiles = 0;
  int replicas = 1;
  std::vector<int> device_ids;
  std::string program;
};

ipu::Error Malformed(const std::string& what) {
  return ipu::Error(ipu::ErrorCode::InvalidArgument,
                    "not a loadable serialised ipu executable: " + what +
                        " (serialise it again with this jax-ipu from the compiled function)");
}

std::string Serialize(const ipu::Executable& program, const std::vector<int>& device_ids) {
  std::ostringstream out;
  const ipu::DeviceDescription& device = program.device();
  out << kMagic << " " << kFormatVersion << "\n";
  out << "device " << device.version << " " << device.num_tiles << "\n";
  out << "replicas " << NumReplicas(program, device_ids.size()) << "\n";
  out << "devices";
  for (int id : device_ids) out << " " << id;
  out << "\n";
  const std::string& json = program.programJson();
  out << "program " << json.size() << "\n" << json;
  return out.str();
}

// Reads one "key values..." header line.
std::istringstream Line(std::istream& in, const std::string& key) {
  std::string line;
  if (!std::getline(in, line)) throw Malformed("the header ends before its '" + key + "' line");
  std::istringstream fields(line);
  std::string word;
  fields >> word;
  if (word != key) throw Malformed("expected a '" + key + "' line, found '" + line.substr(0, 40) + "'");
  return fields;
}

Header Parse(const std::string& blob) {
  std::istringstream in(blob);
  std::string magic;
  if (!std::getline(in, magic) || magic.rfind(std::string(kMagic) + " ", 0) != 0) {
    throw Malformed("it does not start with '" + std::string(kMagic) + "'");
  }
  int version = 0;
  if (!(std::istringstream(magic.substr(std::string(kMagic).size())) >> version) || version != kFormatVersion) {
    throw Malformed("its format version is '" + magic.substr(std::string(kMagic).size() + 1) +
                    "', this jax-ipu reads version " + std::to_string(kFormatVersion));
  }
  Header h;
  if (!(Line(in, "device") >> h.version >> h.num_tiles)) throw Malformed("bad 'device' line");
  if (!(Line(in, "replicas") >> h.replicas) || h.replicas < 1) throw Malformed("bad 'replicas' line");
  auto ids = Line(in, "devices");
  for (int id; ids >> id;) h.device_ids.push_back(id);
  size_t size = 0;
  if (!(Line(in, "program") >> size)) throw Malformed("bad 'program' line");
  const size_t start = static_cast<size_t>(in.tellg());
  if (in.tellg() < 0 || blob.size() - start != size) throw Malformed("the program is cut short or has trailing bytes");
  h.program = blob.substr(start);
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
    args->serialized_executable = serialized.release();
    return nullptr;
  });
}

PJRT_Error* PJRT_SerializedExecutable_Destroy_Impl(PJRT_SerializedExecutable_Destroy_Args* args) {
  delete args->serialized_executable;
  return nullptr;
}

PJRT_Error* PJRT_SerializedExecutable_Data_Impl(PJRT_SerializedExecutable_Data_Args* args) {
  args->data = args->serialized_executable->data.data();
  args->data_size = args->serialized_executable->data.size();
  return nullptr;
}

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
    loaded->program = ipu::Executable::compile(h.program, hardware);
    loaded->client = client;
    loaded->devices = std::move(devices);
    if (NumReplicas(*loaded->program, loaded->devices.size()) != h.replicas) {
      throw Malformed("it says " + std::to_string(h.replicas) + " replicas but its program and devices make " +
                      std::to_string(NumReplicas(*loaded->program, loaded->devices.size())));
    }
    args->loaded_executable = loaded.release();
    return nullptr;
  });
}
