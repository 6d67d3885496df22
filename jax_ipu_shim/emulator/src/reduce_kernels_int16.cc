// ReduceKernel for the 16-bit integers (see reduce_kernels.h).
#include "reduce_kernels.h"

namespace ipu {
namespace reduce_kernels {

IPU_REDUCE_KERNEL_OF(DType::I16);
IPU_REDUCE_KERNEL_OF(DType::U16);

}  // namespace reduce_kernels
}  // namespace ipu
