// Binary elementwise kernels for every element type (elementwise_blocks.h).
#include "elementwise_blocks.h"

namespace ipu {
namespace elementwise_blocks {

BlockFn binary(OpKind kind, DType operand, Numerics numerics, scalar::ConstantOperand constant) {
  BlockFn fn = nullptr;
  scalar::visitBinary(
      kind, operand, numerics,
      [&](auto f, auto t) {
        using T = typename decltype(t)::type;
        fn = &block2<T, T, T, decltype(f)>;
      },
      constant);
  return fn;
}

BlockFn binarySplat(OpKind kind, DType operand, Numerics numerics, scalar::ConstantOperand constant, int side) {
  BlockFn fn = nullptr;
  if (operand != DType::F32) return fn;
  scalar::visitBinaryOf<DType::F32>(
      kind, numerics,
      [&](auto f, auto) { fn = side == 0 ? &block2SplatF32<decltype(f), 0> : &block2SplatF32<decltype(f), 1>; },
      constant);
  return fn;
}

}  // namespace elementwise_blocks
}  // namespace ipu
