// PJRT_TopologyDescription: the devices of the client (PJRT C API 0.90, jaxlib 0.12; empty for jaxlib 0.4.13's
// table). The client owns its topology.
#include "plugin.h"

#if JAX_IPU_PJRT_MINOR >= 90

using namespace jax_ipu;

PJRT_Error* PJRT_TopologyDescription_Destroy_Impl(PJRT_TopologyDescription_Destroy_Args*) {
  return nullptr;  // the client owns it
}

PJRT_Error* PJRT_TopologyDescription_PlatformName_Impl(PJRT_TopologyDescription_PlatformName_Args* args) {
  const std::string& name = args->topology->client->platform_name;
  args->platform_name = name.data();
  args->platform_name_size = name.size();
  return nullptr;
}

PJRT_Error* PJRT_TopologyDescription_PlatformVersion_Impl(PJRT_TopologyDescription_PlatformVersion_Args* args) {
  const std::string& version = args->topology->client->platform_version;
  args->platform_version = version.data();
  args->platform_version_size = version.size();
  return nullptr;
}

PJRT_Error* PJRT_TopologyDescription_GetDeviceDescriptions_Impl(
    PJRT_TopologyDescription_GetDeviceDescriptions_Args* args) {
  args->descriptions = args->topology->descriptions.data();
  args->num_descriptions = args->topology->descriptions.size();
  return nullptr;
}

PJRT_Error* PJRT_TopologyDescription_Attributes_Impl(PJRT_TopologyDescription_Attributes_Args* args) {
  args->attributes = nullptr;  // the per-device attributes say it all
  args->num_attributes = 0;
  return nullptr;
}

#endif  // JAX_IPU_PJRT_MINOR >= 90
