// The elementwise kernels of the op registry over blocks of contiguous elements: one function per (op, types,
// numerics), shared by the StableHLO lowering's fused vertex (elementwise.cc) and the graph API's popops codelets.
#pragma once

#include <string>

#include "ipu/kernels.h"
#include "ipu/registry.h"
#include "ipu/scalar_ops.h"

namespace ipu {

// What an elementwise op's kernel depends on besides its types.
struct ElementwiseSpec {
  scalar::ConstantOperand constant = scalar::ConstantOperand::None;  // binary: a splat constant operand's side
  scalar::Direction direction = scalar::Direction::EQ;               // compare
  std::string compare_type = "NOTYPE";                               // compare
};

// The block function of `info`'s op (family unary, binary, compare, select, clamp or convert) on operands of type
// `operand` (select, clamp: the values'), giving `result` (convert's target; the others' follows from the op), or
// null where the op has no kernel for that type.
BlockFn elementwiseBlock(const OpInfo& info, DType operand, DType result, Numerics numerics,
                         const ElementwiseSpec& spec = ElementwiseSpec());

}  // namespace ipu
