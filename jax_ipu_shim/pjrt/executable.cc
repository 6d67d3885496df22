// PJRT_Executable and PJRT_LoadedExecutable: a program lowered onto IPU tiles, what it costs, where it runs.
// Running it is in launch.cc, saving and loading it in serialize.cc.
#include <algorithm>
#include <cstring>

#include "plugin.h"
#include "proto_writer.h"

namespace jax_ipu {
namespace {

PJRT_NamedValue FloatValue(const std::string& name, double value) {
  PJRT_NamedValue v{};
  v.struct_size = PJRT_NamedValue_STRUCT_SIZE;
  v.name = name.c_str();
  v.name_size = name.size();
  v.type = PJRT_NamedValue_kFloat;
  v.float_value = static_cast<float>(value);
  v.value_size = 1;
  return v;
}

PJRT_NamedValue IntValue(const std::string& name, int64_t value) {
  PJRT_NamedValue v = FloatValue(name, 0);
  v.type = PJRT_NamedValue_kInt64;
  v.int64_value = value;
  return v;
}

}  // namespace

int NumReplicas(const ipu::Executable& program, size_t num_devices) {
  // The program runs one copy per device: replicas x partitions of them (ipu::Program::partitions).
  return std::max(program.numReplicas(), static_cast<int>(std::max<size_t>(num_devices, 1))) /
         std::max(program.numPartitions(), 1);
}

}  // namespace jax_ipu

using namespace jax_ipu;

PJRT_Error* PJRT_Executable_Destroy_Impl(PJRT_Executable_Destroy_Args* args) {
  delete args->executable;
  return nullptr;
}

PJRT_Error* PJRT_Executable_Name_Impl(PJRT_Executable_Name_Args* args) {
  const std::string& name = args->executable->program->name();
  args->executable_name = name.data();
  args->executable_name_size = name.size();
  return nullptr;
}

PJRT_Error* PJRT_Executable_NumReplicas_Impl(PJRT_Executable_NumReplicas_Args* args) {
  args->num_replicas = NumReplicas(*args->executable->program, args->executable->device_ids.size());
  return nullptr;
}

PJRT_Error* PJRT_Executable_NumPartitions_Impl(PJRT_Executable_NumPartitions_Args* args) {
  args->num_partitions = args->executable->program->numPartitions();
  return nullptr;
}

PJRT_Error* PJRT_Executable_NumOutputs_Impl(PJRT_Executable_NumOutputs_Args* args) {
  args->num_outputs = args->executable->program->outputTypes().size();
  return nullptr;
}

PJRT_Error* PJRT_Executable_SizeOfGeneratedCodeInBytes_Impl(PJRT_Executable_SizeOfGeneratedCodeInBytes_Args* args) {
  args->size_in_bytes = args->executable->program->memory().total_bytes;
  return nullptr;
}

PJRT_Error* PJRT_Executable_GetCostAnalysis_Impl(PJRT_Executable_GetCostAnalysis_Args* args) {
  return Guard("PJRT_Executable_GetCostAnalysis", [&]() -> PJRT_Error* {
    PJRT_Executable* e = args->executable;
    if (e->cost_properties.empty()) {
      const ipu::Executable& p = *e->program;
      const ipu::MemoryReport& memory = p.memory();
      std::vector<std::pair<std::string, double>> values = {
          {"flops", p.flops()},
          {"ipu_estimated_cycles", static_cast<double>(p.estimatedCycles())},
          {"ipu_memory_bytes", static_cast<double>(memory.total_bytes)},
          {"ipu_worst_tile", static_cast<double>(memory.worst_tile)},
          {"ipu_worst_tile_bytes", static_cast<double>(memory.worst_bytes)},
      };
      // The static trace: "ipu_step 3 stablehlo.dot_general (model.py:12)" -> the cycles of one execution.
      for (const ipu::StepProfile& st : p.staticSteps()) {
        values.emplace_back(
            "ipu_step " + std::to_string(st.id) + " " + st.name + (st.loc.empty() ? "" : " (" + st.loc + ")"),
            static_cast<double>(st.compute_cycles + st.exchange_cycles + st.sync_cycles));
      }
      // Names first: the properties point into the strings, which must not move afterwards.
      for (const auto& v : values) e->cost_names.push_back(v.first);
      for (size_t i = 0; i < values.size(); ++i) {
        const bool integer = e->cost_names[i] == "ipu_worst_tile" || e->cost_names[i] == "ipu_worst_tile_bytes";
        e->cost_properties.push_back(integer ? IntValue(e->cost_names[i], static_cast<int64_t>(values[i].second))
                                             : FloatValue(e->cost_names[i], values[i].second));
      }
    }
    args->num_properties = e->cost_properties.size();
    args->properties = e->cost_properties.data();
    return nullptr;
  });
}

PJRT_Error* PJRT_LoadedExecutable_Destroy_Impl(PJRT_LoadedExecutable_Destroy_Args* args) {
  delete args->executable;
  return nullptr;
}

PJRT_Error* PJRT_LoadedExecutable_GetExecutable_Impl(PJRT_LoadedExecutable_GetExecutable_Args* args) {
  auto* executable = new PJRT_Executable();
  executable->program = args->loaded_executable->program;
  for (PJRT_Device* device : args->loaded_executable->devices) {
    executable->device_ids.push_back(device->description.id);
  }
  args->executable = executable;
  return nullptr;
}

PJRT_Error* PJRT_LoadedExecutable_AddressableDevices_Impl(PJRT_LoadedExecutable_AddressableDevices_Args* args) {
  args->addressable_devices = args->executable->addressable.data();
  args->num_addressable_devices = args->executable->addressable.size();
  return nullptr;
}

PJRT_Error* PJRT_LoadedExecutable_Delete_Impl(PJRT_LoadedExecutable_Delete_Args* args) {
  args->executable->deleted = true;
  return nullptr;
}

PJRT_Error* PJRT_LoadedExecutable_IsDeleted_Impl(PJRT_LoadedExecutable_IsDeleted_Args* args) {
  args->is_deleted = args->executable->deleted;
  return nullptr;
}

// ---- what PJRT C API 0.90 (jaxlib 0.12) added: typed output queries, fingerprints, memory stats, the device
// assignment
#if JAX_IPU_PJRT_MINOR >= 90

namespace {

// PJRT's DeviceAssignmentProto (xla_data.proto): replica_count = 1, computation_count = 2, computation_devices = 3
// { replica_device_ids = 1 (packed) }. One computation, one replica per device.
std::string DeviceAssignmentProto(const std::vector<PJRT_Device*>& devices) {
  std::vector<int64_t> ids;
  for (PJRT_Device* d : devices) ids.push_back(d->description.id);
  Proto computation;
  computation.PackedInts(1, ids);
  Proto out;
  out.Int(1, static_cast<int64_t>(devices.size())).Int(2, 1).Message(3, computation);
  return out.str();
}

}  // namespace

PJRT_Error* PJRT_Executable_OutputElementTypes_Impl(PJRT_Executable_OutputElementTypes_Args* args) {
  return Guard("PJRT_Executable_OutputElementTypes", [&]() -> PJRT_Error* {
    PJRT_Executable* e = args->executable;
    if (e->output_types.empty()) {
      for (const ipu::TensorType& t : e->program->outputTypes()) e->output_types.push_back(FromIpuDType(t.dtype));
    }
    args->output_types = e->output_types.data();
    args->num_output_types = e->output_types.size();
    return nullptr;
  });
}

PJRT_Error* PJRT_Executable_OutputDimensions_Impl(PJRT_Executable_OutputDimensions_Args* args) {
  PJRT_Executable* e = args->executable;
  if (e->output_dim_sizes.empty()) {
    for (const ipu::TensorType& t : e->program->outputTypes()) {
      e->output_dim_sizes.push_back(t.shape.size());
      e->output_dims.insert(e->output_dims.end(), t.shape.begin(), t.shape.end());
    }
  }
  args->num_outputs = e->output_dim_sizes.size();
  args->dims = e->output_dims.data();
  args->dim_sizes = e->output_dim_sizes.data();
  return nullptr;
}

PJRT_Error* PJRT_Executable_OutputMemoryKinds_Impl(PJRT_Executable_OutputMemoryKinds_Args* args) {
  PJRT_Executable* e = args->executable;
  const size_t n = e->program->outputTypes().size();
  e->output_kinds.assign(n, kMemoryKind);
  e->output_kind_sizes.assign(n, std::strlen(kMemoryKind));
  args->num_outputs = n;
  args->memory_kinds = e->output_kinds.data();
  args->memory_kind_sizes = e->output_kind_sizes.data();
  return nullptr;
}

PJRT_Error* PJRT_Executable_Fingerprint_Impl(PJRT_Executable_Fingerprint_Args* args) {
  args->executable_fingerprint = nullptr;  // no fingerprint: jaxlib then keys caches on the module itself
  args->executable_fingerprint_size = 0;
  return nullptr;
}

PJRT_Error* PJRT_Executable_GetCompiledMemoryStats_Impl(PJRT_Executable_GetCompiledMemoryStats_Args* args) {
  return Guard("PJRT_Executable_GetCompiledMemoryStats", [&]() -> PJRT_Error* {
    const ipu::Executable& p = *args->executable->program;
    int64_t in = 0, out = 0;
    for (const ipu::TensorType& t : p.inputTypes()) in += static_cast<int64_t>(t.numBytes());
    for (const ipu::TensorType& t : p.outputTypes()) out += static_cast<int64_t>(t.numBytes());
    const int64_t total = static_cast<int64_t>(p.memory().total_bytes);
    args->generated_code_size_in_bytes = 0;
    args->argument_size_in_bytes = in;
    args->output_size_in_bytes = out;
    args->alias_size_in_bytes = 0;
    args->temp_size_in_bytes = total > in + out ? total - in - out : 0;
    args->host_generated_code_size_in_bytes = 0;
    args->host_argument_size_in_bytes = 0;
    args->host_output_size_in_bytes = 0;
    args->host_alias_size_in_bytes = 0;
    args->host_temp_size_in_bytes = 0;
    if (args->struct_size >= PJRT_STRUCT_SIZE(PJRT_Executable_GetCompiledMemoryStats_Args, total_size_in_bytes)) {
      args->peak_memory_in_bytes = total;
      args->total_size_in_bytes = total;
    }
    return nullptr;
  });
}

PJRT_Error* PJRT_LoadedExecutable_Fingerprint_Impl(PJRT_LoadedExecutable_Fingerprint_Args* args) {
  args->executable_fingerprint = nullptr;
  args->executable_fingerprint_size = 0;
  return nullptr;
}

PJRT_Error* PJRT_LoadedExecutable_GetDeviceAssignment_Impl(PJRT_LoadedExecutable_GetDeviceAssignment_Args* args) {
  return Guard("PJRT_LoadedExecutable_GetDeviceAssignment", [&]() -> PJRT_Error* {
    auto* bytes = new std::string(DeviceAssignmentProto(args->executable->devices));
    args->serialized_bytes = bytes->data();
    args->serialized_bytes_size = bytes->size();
    args->serialized_device_assignment = reinterpret_cast<PJRT_DeviceAssignmentSerialized*>(bytes);
    args->serialized_device_assignment_deleter = [](PJRT_DeviceAssignmentSerialized* s) {
      delete reinterpret_cast<std::string*>(s);
    };
    return nullptr;
  });
}

#endif  // JAX_IPU_PJRT_MINOR >= 90
