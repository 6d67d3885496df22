// ReduceKernel for f32, whose vector paths (rows of 8, windows of 8 and 16 lanes) are most of the code (see
// reduce_kernels.h).
#include "reduce_kernels.h"

namespace ipu {
namespace reduce_kernels {

IPU_REDUCE_KERNEL_OF(DType::F32);

}  // namespace reduce_kernels
}  // namespace ipu
