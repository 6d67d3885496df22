// PJRT_Executable and PJRT_LoadedExecutable: a program lowered onto IPU tiles, and running it.
#include <cstring>

#include "plugin.h"

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

std::string ShapeString(PJRT_Buffer_Type type, const std::vector<int64_t>& dims) {
  std::string s = TypeName(type);
  s += "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

// Checks that `buffer` is what parameter `index` of `program` takes, and returns its bytes.
std::shared_ptr<std::vector<uint8_t>> Argument(const ipu::Executable& program, size_t index, PJRT_Buffer* buffer) {
  const ipu::TensorType& want = program.inputTypes()[index];
  ipu::DType dtype;
  const bool known = ToIpuDType(buffer->type, &dtype);
  if (!known || dtype != want.dtype || buffer->dims != want.shape) {
    throw ipu::Error(ipu::ErrorCode::InvalidArgument,
                     "argument " + std::to_string(index) + " of " + program.name() + " is " +
                         ShapeString(buffer->type, buffer->dims) + " but the program takes " + want.str());
  }
  std::lock_guard<std::mutex> lock(buffer->mutex);
  if (!buffer->data) {
    throw ipu::Error(ipu::ErrorCode::InvalidArgument,
                     "argument " + std::to_string(index) + " of " + program.name() +
                         " has been deleted or donated to an earlier call");
  }
  return buffer->data;
}

// Runs `program` once on `device`: returns its output buffers and releases the inputs it was donated.
std::vector<PJRT_Buffer*> RunOnDevice(const ipu::Executable& program, PJRT_Device* device, PJRT_Buffer* const* args,
                                      size_t num_args) {
  const size_t num_inputs = program.inputTypes().size();
  if (num_args != num_inputs) {
    throw ipu::Error(ipu::ErrorCode::InvalidArgument, program.name() + " takes " + std::to_string(num_inputs) +
                                                          " arguments, " + std::to_string(num_args) + " given");
  }
  std::vector<std::shared_ptr<std::vector<uint8_t>>> inputs;
  std::vector<const void*> input_pointers;
  for (size_t i = 0; i < num_args; ++i) {
    inputs.push_back(Argument(program, i, args[i]));
    input_pointers.push_back(inputs.back()->data());
  }
  std::vector<std::shared_ptr<std::vector<uint8_t>>> outputs;
  std::vector<void*> output_pointers;
  for (const ipu::TensorType& type : program.outputTypes()) {
    outputs.push_back(std::make_shared<std::vector<uint8_t>>(type.numBytes()));
    output_pointers.push_back(outputs.back()->data());
  }
  const ipu::RunProfile profile = program.run(input_pointers, output_pointers);
  {
    std::lock_guard<std::mutex> lock(device->transfer_mutex);
    device->last_program = program.name();
    device->last_profile = profile;
    device->executions += 1;
  }

  // jaxlib leaves deleting donated arrays to a C API plugin (pjrt-notes.md): after this, x.is_deleted() is True.
  for (const auto& alias : program.aliases()) {
    PJRT_Buffer* donated = args[alias.first];
    std::lock_guard<std::mutex> lock(donated->mutex);
    donated->data.reset();
  }
  std::vector<PJRT_Buffer*> results;
  for (size_t j = 0; j < outputs.size(); ++j) {
    const ipu::TensorType& type = program.outputTypes()[j];
    results.push_back(NewBuffer(device, FromIpuDType(type.dtype), type.shape, std::move(outputs[j])));
  }
  return results;
}

}  // namespace
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
  args->num_replicas = 1;
  return nullptr;
}

PJRT_Error* PJRT_Executable_NumPartitions_Impl(PJRT_Executable_NumPartitions_Args* args) {
  args->num_partitions = 1;
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
      e->cost_names = {"flops", "ipu_estimated_cycles", "ipu_memory_bytes", "ipu_worst_tile",
                       "ipu_worst_tile_bytes"};
      e->cost_properties = {
          FloatValue(e->cost_names[0], p.flops()),
          FloatValue(e->cost_names[1], static_cast<double>(p.estimatedCycles())),
          FloatValue(e->cost_names[2], static_cast<double>(memory.total_bytes)),
          IntValue(e->cost_names[3], memory.worst_tile),
          IntValue(e->cost_names[4], memory.worst_bytes),
      };
    }
    args->num_properties = e->cost_properties.size();
    args->properties = e->cost_properties.data();
    return nullptr;
  });
}

PJRT_Error* PJRT_Executable_OptimizedProgram_Impl(PJRT_Executable_OptimizedProgram_Args*) {
  return MakeError(PJRT_Error_Code_UNIMPLEMENTED,
                   "the ipu backend has no optimized HLO to show (as_text()); its program is a Poplar-style "
                   "tile program");
}

PJRT_Error* PJRT_Executable_Serialize_Impl(PJRT_Executable_Serialize_Args*) {
  return MakeError(PJRT_Error_Code_UNIMPLEMENTED, "serializing ipu executables is not supported yet");
}

PJRT_Error* PJRT_Executable_DeserializeAndLoad_Impl(PJRT_Executable_DeserializeAndLoad_Args*) {
  return MakeError(PJRT_Error_Code_UNIMPLEMENTED, "deserializing ipu executables is not supported yet");
}

PJRT_Error* PJRT_SerializedExecutable_Destroy_Impl(PJRT_SerializedExecutable_Destroy_Args*) { return nullptr; }

PJRT_Error* PJRT_SerializedExecutable_Data_Impl(PJRT_SerializedExecutable_Data_Args*) {
  return MakeError(PJRT_Error_Code_UNIMPLEMENTED, "serializing ipu executables is not supported yet");
}

PJRT_Error* PJRT_LoadedExecutable_Destroy_Impl(PJRT_LoadedExecutable_Destroy_Args* args) {
  delete args->executable;
  return nullptr;
}

PJRT_Error* PJRT_LoadedExecutable_GetExecutable_Impl(PJRT_LoadedExecutable_GetExecutable_Args* args) {
  auto* executable = new PJRT_Executable();
  executable->program = args->loaded_executable->program;
  args->executable = executable;
  return nullptr;
}

PJRT_Error* PJRT_LoadedExecutable_AddressableDevices_Impl(PJRT_LoadedExecutable_AddressableDevices_Args* args) {
  args->addressable_devices = args->executable->devices.data();
  args->num_addressable_devices = args->executable->devices.size();
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

PJRT_Error* PJRT_LoadedExecutable_Execute_Impl(PJRT_LoadedExecutable_Execute_Args* args) {
  return Guard("PJRT_LoadedExecutable_Execute", [&]() -> PJRT_Error* {
    PJRT_LoadedExecutable* loaded = args->executable;
    if (loaded->deleted) {
      return MakeError(PJRT_Error_Code_INVALID_ARGUMENT, "the ipu executable has been deleted");
    }
    std::vector<PJRT_Device*> devices = loaded->devices;
    if (args->execute_device != nullptr) devices = {args->execute_device};
    if (args->num_devices != devices.size()) {
      return MakeError(PJRT_Error_Code_INVALID_ARGUMENT,
                       "executable compiled for " + std::to_string(devices.size()) + " ipu devices, launched on " +
                           std::to_string(args->num_devices));
    }
    // Run every device before handing out anything, so that a failure leaves no half-made outputs.
    std::vector<std::vector<PJRT_Buffer*>> results;
    try {
      for (size_t d = 0; d < devices.size(); ++d) {
        results.push_back(RunOnDevice(*loaded->program, devices[d], args->argument_lists[d], args->num_args));
      }
    } catch (...) {
      for (auto& list : results) {
        for (PJRT_Buffer* b : list) delete b;
      }
      throw;
    }
    for (size_t d = 0; d < devices.size(); ++d) {
      for (size_t j = 0; j < results[d].size(); ++j) args->output_lists[d][j] = results[d][j];
      if (args->device_complete_events != nullptr) args->device_complete_events[d] = ReadyEvent();
    }
    return nullptr;
  });
}
