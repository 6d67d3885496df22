// ReduceKernel for bool and the 8-bit integers (see reduce_kernels.h).
#include "reduce_kernels.h"

namespace ipu {
namespace reduce_kernels {

IPU_REDUCE_KERNEL_OF(DType::Bool);
IPU_REDUCE_KERNEL_OF(DType::I8);
IPU_REDUCE_KERNEL_OF(DType::U8);

}  // namespace reduce_kernels
}  // namespace ipu
