// ReduceKernel for f16, bf16 and complex64 (see reduce_kernels.h).
#include "reduce_kernels.h"

namespace ipu {
namespace reduce_kernels {

IPU_REDUCE_KERNEL_OF(DType::F16);
IPU_REDUCE_KERNEL_OF(DType::BF16);
IPU_REDUCE_KERNEL_OF(DType::C64);

}  // namespace reduce_kernels
}  // namespace ipu
