// Convolution kernels accumulating in f32 or f64 (conv_kernels.h).
#include "conv_kernels_impl.h"

namespace ipu {
namespace conv_kernels {

std::unique_ptr<Kernel> floatConvKernel(DType in, DType out, int lhs, int rhs, int out_slot, const ConvGeom& g,
                                        int64_t kparts, int64_t kblock, int64_t plan_blocks, int scratch_w,
                                        int scratch_p, int scratch_x) {
  return convKernelOf<std::is_floating_point>(in, out, lhs, rhs, out_slot, g, kparts, kblock, plan_blocks, scratch_w,
                                              scratch_p, scratch_x);
}

}  // namespace conv_kernels
}  // namespace ipu
