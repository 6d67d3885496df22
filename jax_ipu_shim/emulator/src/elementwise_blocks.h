// The block functions of the elementwise families, one source each (elementwise_unary.cc, _binary.cc, _compare.cc,
// _convert.cc), each instantiating its family's kernels for every element type: elementwiseBlock (elementwise.cc)
// picks among them. Apart, they compile side by side in a cold build, and a change to one family, or to the
// lowering, recompiles no other.
#ifndef JAX_IPU_EMULATOR_SRC_ELEMENTWISE_BLOCKS_H_
#define JAX_IPU_EMULATOR_SRC_ELEMENTWISE_BLOCKS_H_

#include <string>

#include "ipu/dtype.h"
#include "ipu/kernels.h"
#include "ipu/numerics.h"
#include "ipu/registry.h"
#include "ipu/scalar_ops.h"

namespace ipu {
namespace elementwise_blocks {

// Each is null where the op has no kernel for the type.
BlockFn unary(OpKind kind, DType operand, Numerics numerics);
BlockFn binary(OpKind kind, DType operand, Numerics numerics, scalar::ConstantOperand constant);
// The same op of f32 with operand `side` one element (block2SplatF32); null for other types.
BlockFn binarySplat(OpKind kind, DType operand, Numerics numerics, scalar::ConstantOperand constant, int side);
BlockFn compare(scalar::Direction direction, const std::string& compare_type, DType operand);
BlockFn select(DType operand);
BlockFn clamp(DType operand, Numerics numerics);
BlockFn convert(DType operand, DType result);

}  // namespace elementwise_blocks
}  // namespace ipu

#endif  // JAX_IPU_EMULATOR_SRC_ELEMENTWISE_BLOCKS_H_
