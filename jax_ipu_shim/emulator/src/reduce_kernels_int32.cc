// ReduceKernel for the 32-bit integers (see reduce_kernels.h).
#include "reduce_kernels.h"

namespace ipu {
namespace reduce_kernels {

IPU_REDUCE_KERNEL_OF(DType::I32);
IPU_REDUCE_KERNEL_OF(DType::U32);

}  // namespace reduce_kernels
}  // namespace ipu
