// PJRT_Plugin: initialisation, and the attributes jaxlib reads before it compiles (PJRT C API 0.90, jaxlib 0.12: the
// StableHLO versions the front end reads; empty for jaxlib 0.4.13's table, which has neither).
#include "jax_ipu/c_api.h"
#include "plugin.h"

#if JAX_IPU_PJRT_MINOR >= 90

#include <cstring>

namespace jax_ipu {
namespace {

// Which StableHLO the front end reads, as the Python plugin told us before jaxlib first asked (negotiated through
// the plugin attributes: jaxlib serialises the VHLO artifact it hands to Compile at this version).
struct StablehloVersions {
  std::mutex mutex;
  int64_t current[3] = {0, 0, 0};
  int64_t minimum[3] = {0, 0, 0};
  bool known = false;
  std::vector<PJRT_NamedValue> attributes;
};
StablehloVersions& Versions() {
  static StablehloVersions* versions = new StablehloVersions();  // never destroyed: jaxlib may ask at exit
  return *versions;
}

PJRT_NamedValue Int64List(const char* name, const int64_t* values, size_t n) {
  PJRT_NamedValue v{};
  v.struct_size = PJRT_NamedValue_STRUCT_SIZE;
  v.name = name;
  v.name_size = std::strlen(name);
  v.type = PJRT_NamedValue_kInt64List;
  v.int64_array_value = values;
  v.value_size = n;
  return v;
}

}  // namespace
}  // namespace jax_ipu

// Called by the Python plugin before jaxlib loads the table (jax_ipu/backend/plugin.py): the StableHLO versions its
// front end reads, [current, minimum] as (major, minor, patch) each.
void JaxIpu_SetStablehloVersions(const int64_t* current, const int64_t* minimum) {
  jax_ipu::StablehloVersions& v = jax_ipu::Versions();
  std::lock_guard<std::mutex> lock(v.mutex);
  for (int i = 0; i < 3; ++i) {
    v.current[i] = current[i];
    v.minimum[i] = minimum[i];
  }
  v.known = true;
}

using namespace jax_ipu;

PJRT_Error* PJRT_Plugin_Initialize_Impl(PJRT_Plugin_Initialize_Args*) { return nullptr; }

PJRT_Error* PJRT_Plugin_Attributes_Impl(PJRT_Plugin_Attributes_Args* args) {
  StablehloVersions& v = Versions();
  std::lock_guard<std::mutex> lock(v.mutex);
  v.attributes.clear();
  if (v.known) {  // else jaxlib picks its default window, which the bundled deserializer reads too
    v.attributes.push_back(Int64List("stablehlo_current_version", v.current, 3));
    v.attributes.push_back(Int64List("stablehlo_minimum_version", v.minimum, 3));
  }
  args->attributes = v.attributes.data();
  args->num_attributes = v.attributes.size();
  return nullptr;
}

#endif  // JAX_IPU_PJRT_MINOR >= 90
