// Convolution kernels of integers and bools (wrapping sums, OR of ANDs) (conv_kernels.h).
#include "conv_kernels_impl.h"

namespace ipu {
namespace conv_kernels {

std::unique_ptr<Kernel> intConvKernel(DType in, DType out, int lhs, int rhs, int out_slot, const ConvGeom& g,
                                      int64_t kparts, int64_t kblock, int64_t plan_blocks, int scratch_w, int scratch_p,
                                      int scratch_x) {
  return convKernelOf<std::is_integral>(in, out, lhs, rhs, out_slot, g, kparts, kblock, plan_blocks, scratch_w,
                                        scratch_p, scratch_x);
}

}  // namespace conv_kernels
}  // namespace ipu
