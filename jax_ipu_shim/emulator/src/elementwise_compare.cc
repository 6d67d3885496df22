// Compare, select and clamp kernels for every element type (elementwise_blocks.h).
#include "elementwise_blocks.h"

namespace ipu {
namespace elementwise_blocks {

BlockFn compare(scalar::Direction direction, const std::string& compare_type, DType operand) {
  BlockFn fn = nullptr;
  scalar::visitCompare(direction, compare_type, operand, [&](auto f, auto t) {
    using T = typename decltype(t)::type;
    fn = &block2<T, T, uint8_t, decltype(f)>;
  });
  return fn;
}

BlockFn select(DType operand) {
  BlockFn fn = nullptr;
  scalar::visitSelect(operand, [&](auto f, auto t) {
    using T = typename decltype(t)::type;
    fn = &block3<uint8_t, T, T, T, decltype(f)>;
  });
  return fn;
}

BlockFn clamp(DType operand, Numerics numerics) {
  BlockFn fn = nullptr;
  scalar::visitClamp(operand, numerics, [&](auto f, auto t) {
    using T = typename decltype(t)::type;
    fn = &block3<T, T, T, T, decltype(f)>;
  });
  return fn;
}

}  // namespace elementwise_blocks
}  // namespace ipu
