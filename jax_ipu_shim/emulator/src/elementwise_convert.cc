// Conversions between every pair of element types, fp8 included (elementwise_blocks.h).
#include "elementwise_blocks.h"

namespace ipu {
namespace elementwise_blocks {

BlockFn convert(DType operand, DType result) {
  BlockFn fn = nullptr;
  scalar::visitConvert(operand, result, [&](auto f, auto a, auto r) {
    fn = &block1<typename decltype(a)::type, typename decltype(r)::type, decltype(f)>;
  });
  return fn;
}

}  // namespace elementwise_blocks
}  // namespace ipu
