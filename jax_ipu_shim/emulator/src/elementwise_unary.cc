// Unary elementwise kernels for every element type (elementwise_blocks.h).
#include "elementwise_blocks.h"

namespace ipu {
namespace elementwise_blocks {

BlockFn unary(OpKind kind, DType operand, Numerics numerics) {
  BlockFn fn = nullptr;
  scalar::visitUnary(kind, operand, numerics, [&](auto f, auto a, auto r) {
    fn = &block1<typename decltype(a)::type, typename decltype(r)::type, decltype(f)>;
  });
  return fn;
}

}  // namespace elementwise_blocks
}  // namespace ipu
