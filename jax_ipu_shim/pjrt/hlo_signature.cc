// PJRT_Executable_OptimizedProgram: an HLO module that shows an IPU program's signature.
//
// jaxlib 0.4.13 reads the result shape of a deserialised executable from its "optimized HLO" (and
// compiled.as_text() prints it). An IPU program is a tile program, not HLO, so the module is what it is: the
// entry's parameters feeding one custom call, "jax_ipu.ipu_program", that returns the program's results.
//
// The module is written in protobuf's wire format by hand (the plugin links no protobuf library). Field numbers
// are those of xla/service/hlo.proto, xla/xla_data.proto and xla/xla.proto as of jaxlib 0.4.13.
#include <cstring>

#include "plugin.h"
#include "proto_writer.h"

namespace jax_ipu {
namespace {

constexpr int64_t kTuple = 13;  // xla::PrimitiveType

// ShapeProto of an array, with XLA's default (row-major) layout.
Proto ArrayShape(const ipu::TensorType& type) {
  const int64_t rank = static_cast<int64_t>(type.shape.size());
  std::vector<int64_t> minor_to_major, dynamic(rank, 0);
  for (int64_t d = rank - 1; d >= 0; --d) minor_to_major.push_back(d);
  Proto layout;
  layout.PackedInts(1, minor_to_major);                                      // LayoutProto.minor_to_major
  Proto shape;
  shape.Int(2, XlaPrimitiveType(FromIpuDType(type.dtype)));                  // element_type
  shape.PackedInts(3, type.shape);                                           // dimensions
  shape.Message(5, layout);                                                  // layout
  shape.PackedInts(6, dynamic);                                              // is_dynamic_dimension
  return shape;
}

// The result: one array, or a tuple of them (as jaxlib expects of a program with 0 or several results).
Proto ResultShape(const std::vector<ipu::TensorType>& outputs) {
  if (outputs.size() == 1) return ArrayShape(outputs[0]);
  Proto tuple;
  tuple.Int(2, kTuple);
  for (const auto& type : outputs) tuple.Message(4, ArrayShape(type));      // tuple_shapes
  return tuple;
}

Proto ProgramShape(const ipu::Executable& program) {
  Proto shape;
  for (const auto& type : program.inputTypes()) shape.Message(1, ArrayShape(type));  // parameters
  shape.Message(2, ResultShape(program.outputTypes()));                               // result
  for (size_t i = 0; i < program.inputTypes().size(); ++i) shape.Bytes(3, "p" + std::to_string(i));
  return shape;
}

// xla.OpSharding of a TileSharding: type = 1 (REPLICATED 0, TUPLE 2, OTHER 3), tile_assignment_dimensions = 3,
// tile_assignment_devices = 4, tuple_shardings = 5, replicate_on_last_tile_dim = 6, last_tile_dims = 8 (REPLICATED
// 0, UNREDUCED 6: the devices of that last tile dimension hold partial sums, jax's unreduced arrays).
Proto OpSharding(const ipu::TileSharding& sharding) {
  Proto out;
  if (sharding.unreduced) return out.Int(1, 6);  // type UNREDUCED: partial sums of the whole array on every device
  if (sharding.tile.empty()) return out.Int(1, 0);
  out.Int(1, 3).PackedInts(3, sharding.tile).PackedInts(4, sharding.devices);
  if (sharding.replicate_last) out.Int(6, 1);
  if (!sharding.last_tile_dims.empty()) out.PackedInts(8, sharding.last_tile_dims);
  return out;
}

std::string SignatureModule(const ipu::Executable& program, int num_replicas) {
  const int num_partitions = program.numPartitions();
  const int64_t num_params = static_cast<int64_t>(program.inputTypes().size());
  Proto computation;
  computation.Bytes(1, "main");                                              // HloComputationProto.name
  std::vector<int64_t> params;
  for (int64_t i = 0; i < num_params; ++i) {
    Proto param;                                                             // HloInstructionProto
    param.Bytes(1, "p" + std::to_string(i)).Bytes(2, "parameter").Message(3, ArrayShape(program.inputTypes()[i]));
    param.Int(9, i).Int(35, i + 1);                                          // parameter_number, id
    computation.Message(2, param);
    params.push_back(i + 1);
  }
  const int64_t root_id = num_params + 1;
  Proto call;
  call.Bytes(1, "ipu_program").Bytes(2, "custom-call").Message(3, ResultShape(program.outputTypes()));
  call.Bytes(28, "jax_ipu.ipu_program");                                     // custom_call_target
  call.Int(35, root_id).PackedInts(36, params);                              // id, operand_ids
  computation.Message(2, call);
  const Proto signature = ProgramShape(program);
  const int64_t computation_id = root_id + 1;
  computation.Message(4, signature).Int(5, computation_id).Int(6, root_id);  // program_shape, id, root_id

  Proto module;                                                              // HloModuleProto
  if (!program.partitionedHlo().empty()) {
    // a partitioned program: XLA's own module, what jax shows as the compiled program (its collectives)
    module.Raw(program.partitionedHlo());
  } else {
    module.Bytes(1, program.name()).Bytes(2, "main").Message(3, computation).Message(4, signature);
    module.Int(5, 1).Int(6, computation_id);                                 // id, entry_computation_id
  }
  // A program over several devices says how its global arrays are split: jax reads these (spmd_output_sharding
  // = 12, a tuple; spmd_parameters_shardings = 14) for a jit whose shardings it leaves to the compiler.
  if (!program.resultShardings().empty()) {
    Proto tuple;
    tuple.Int(1, 2);
    for (const auto& sharding : program.resultShardings()) tuple.Message(5, OpSharding(sharding));
    module.Message(12, tuple);
  }
  for (const auto& sharding : program.paramShardings()) module.Message(14, OpSharding(sharding));
  Proto config;                                                              // HloModuleConfigProto
  // layout, replicas, partitions, threads
  config.Message(1, signature).Int(4, num_replicas).Int(5, num_partitions).Int(12, -1);
  Proto with_config;                                                         // HloModuleProtoWithConfig
  with_config.Message(1, module).Message(2, config);
  return with_config.str();
}

}  // namespace
}  // namespace jax_ipu

using namespace jax_ipu;

PJRT_Error* PJRT_Executable_OptimizedProgram_Impl(PJRT_Executable_OptimizedProgram_Args* args) {
  return Guard("PJRT_Executable_OptimizedProgram", [&]() -> PJRT_Error* {
    static const std::string kFormat = "hlo_with_config";
    PJRT_Executable* e = args->executable;
    const std::string module = SignatureModule(*e->program, NumReplicas(*e->program, e->device_ids.size()));
    PJRT_Program* program = args->program;
    program->format = kFormat.data();
    program->format_size = kFormat.size();
    if (program->code == nullptr) {
      program->code_size = module.size();
      return nullptr;
    }
    if (program->code_size < module.size()) {
      return MakeError(PJRT_Error_Code_INVALID_ARGUMENT, "PJRT_Executable_OptimizedProgram: buffer too small");
    }
    std::memcpy(program->code, module.data(), module.size());
    program->code_size = module.size();
    return nullptr;
  });
}
