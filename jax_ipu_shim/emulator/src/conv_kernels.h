// The kernel of a convolution (conv_kernels_*.cc), apart from its lowering (conv.cc): instantiated for every pair of
// element types dot_general and convolution take (visitMatmulTypes), it compiles on its own, beside the lowering.
#ifndef JAX_IPU_EMULATOR_SRC_CONV_KERNELS_H_
#define JAX_IPU_EMULATOR_SRC_CONV_KERNELS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "ipu/dtype.h"
#include "ipu/kernels.h"

namespace ipu {
namespace conv_kernels {

// Everything about one convolution the kernel needs, with the operands' strides.
struct ConvGeom {
  int64_t rank = 0;                 // spatial rank
  int64_t in_batch = 0, out_batch = 0, groups = 1, fgc = 1, bgc = 1;
  int64_t cig = 0, cog = 0;         // kernel input features; output features per group
  std::vector<int64_t> in_size, k_size, out_size, stride, pad_lo, lhs_dil, rhs_dil, dilated;
  std::vector<bool> reverse;
  // element strides: input batch/feature/spatial; kernel in/out/spatial; output batch/feature/spatial
  int64_t is_b = 0, is_f = 0, ks_i = 0, ks_o = 0, os_b = 0, os_f = 0;
  std::vector<int64_t> is_s, ks_s, os_s;
  int64_t out_spatial = 1, k_spatial = 1;
  int64_t in_elements = 0;  // the input's
  bool half_partials = false;  // poplin's partialsType half: each f32 partial rounded to f16 before the reduction
  int64_t M() const { return out_batch * out_spatial; }
  int64_t K() const { return cig * k_spatial; }
};

// The host kernel of a convolution of `in` operands giving `out` (null where visitMatmulTypes has no such pair):
// slots lhs, rhs and out; the plan's K split (kparts blocks of kblock) over plan_blocks tiles; scratch slots for the
// kernel (in the accumulator type), the partials and the input converted to the accumulator type.
// The kernels accumulating in floats (conv_kernels_float.cc) and in integers (conv_kernels_int.cc): two sources,
// which compile side by side.
std::unique_ptr<Kernel> floatConvKernel(DType in, DType out, int lhs, int rhs, int out_slot, const ConvGeom& g,
                                        int64_t kparts, int64_t kblock, int64_t plan_blocks, int scratch_w,
                                        int scratch_p, int scratch_x);
std::unique_ptr<Kernel> intConvKernel(DType in, DType out, int lhs, int rhs, int out_slot, const ConvGeom& g,
                                      int64_t kparts, int64_t kblock, int64_t plan_blocks, int scratch_w, int scratch_p,
                                      int scratch_x);
inline std::unique_ptr<Kernel> convKernel(DType in, DType out, int lhs, int rhs, int out_slot, const ConvGeom& g,
                                          int64_t kparts, int64_t kblock, int64_t plan_blocks, int scratch_w,
                                          int scratch_p, int scratch_x) {
  auto make = isFloat(in) ? floatConvKernel : intConvKernel;
  return make(in, out, lhs, rhs, out_slot, g, kparts, kblock, plan_blocks, scratch_w, scratch_p, scratch_x);
}

}  // namespace conv_kernels
}  // namespace ipu

#endif  // JAX_IPU_EMULATOR_SRC_CONV_KERNELS_H_
