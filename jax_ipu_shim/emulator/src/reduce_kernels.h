// The vector kernels of reduce.cc (see the top of that file), private to the emulator's sources: the geometry, the
// tree of windowed folds, and ReduceKernel<S, F>, a template instantiated per element type and combiner. Each group
// of element types instantiates it in a source of its own (reduce_kernels_*.cc), so that they compile in parallel
// and a change to the lowering in reduce.cc recompiles none of them.
#pragma once

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

#include "ipu/cost_model.h"
#include "ipu/cpu_features.h"
#include "ipu/dtype.h"
#include "ipu/kernels.h"
#include "ipu/lowering.h"
#include "ipu/scalar_ops.h"
#include "ipu/scalar_program.h"

namespace ipu {
namespace reduce_kernels {

// The geometry of one reduction: result coordinates and reduced coordinates, each with its input strides.
struct ReduceGeometry {
  std::vector<int64_t> out_shape, out_strides;  // kept dims of the input, in order
  std::vector<int64_t> red_shape, red_strides;  // reduced dims, in order
  bool inner_reduced = false;  // the input's innermost dimension is reduced
  int64_t reduced_count = 1;
};

// The tree of a reduce (see the top of reduce.cc): the levels of windowed folds over the flattened reduced index, from
// the input to one value per output. A level folds windows of `w` of its `n` elements (stride w, `lo` pad elements
// before the first, none of them combined) into `o` partials; the last level is one window of everything left
// (n <= 32). A reduce of at most 32 elements per output has that level only: the plain sequential fold.
constexpr int64_t kTreeWindow = 32;

struct TreeLevel {
  int64_t n = 1, w = 1, lo = 0, o = 1;
  int64_t windowOf(int64_t r) const { return (r + lo) / w; }  // the partial element r goes to
  int64_t windowStart(int64_t j) const { return std::max<int64_t>(0, j * w - lo); }  // its first element
  int64_t windowEnd(int64_t j) const { return std::min(n, (j + 1) * w - lo); }  // one past its last element
};

struct ReduceTree {
  std::vector<TreeLevel> levels;
  bool tree() const { return levels.size() > 1; }
};

inline ReduceTree reduceTree(int64_t count, bool variadic) {
  ReduceTree t;
  int64_t n = std::max<int64_t>(count, 1);
  while (!variadic && n > kTreeWindow) {
    TreeLevel l;
    l.n = n;
    l.w = kTreeWindow;
    l.o = (n + kTreeWindow - 1) / kTreeWindow;
    l.lo = (l.o * kTreeWindow - n) / 2;  // XLA's MakePadding(kSame): half the pad low, rounded down
    t.levels.push_back(l);
    n = l.o;
  }
  TreeLevel last;
  last.n = last.w = n;
  t.levels.push_back(last);
  return t;
}

// Advances a multi-index over `shape`, keeping `offset` = sum idx_d * strides_d. Returns false on wrap-around.
inline bool advance(std::vector<int64_t>& idx, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                    int64_t& offset) {
  for (size_t d = shape.size(); d-- > 0;) {
    offset += strides[d];
    if (++idx[d] < shape[d]) return true;
    offset -= shape[d] * strides[d];
    idx[d] = 0;
  }
  return false;
}

inline int64_t offsetOf(int64_t i, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                        std::vector<int64_t>* idx) {
  idx->assign(shape.size(), 0);
  int64_t off = 0;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 0) return 0;
    (*idx)[d] = i % shape[d];
    i /= shape[d];
    off += (*idx)[d] * strides[d];
  }
  return off;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// f32 add, maximum and minimum over 8 rows of `inner` contiguous elements at once (8 outputs of a reduction over
// the innermost dimension): each 8x8 block is transposed in registers so that one vector holds element k of all
// 8 rows, combined into the 8 accumulators in k order: every output in its own order, so the scalar code's bits.
// maximum/minimum are XLA's (scalar::maxXla/minXla): acc wins ties and a NaN acc stays. A combiner with a vector
// form of its own, F::avx2(acc, x) (jaxlib 0.12's IEEE maximum/minimum), is that form (Vector).
enum class RowOp { Add, Max, Min, Vector };

template <RowOp kOp, class F>
__attribute__((target("avx2,fma"), always_inline)) inline __m256 rowOp(__m256 acc, __m256 x) {
  if constexpr (kOp == RowOp::Vector) return F::avx2(acc, x);
  if (kOp == RowOp::Add) return _mm256_add_ps(acc, x);
  const __m256 keep = _mm256_or_ps(_mm256_cmp_ps(acc, x, kOp == RowOp::Max ? _CMP_GE_OQ : _CMP_LE_OQ),
                                   _mm256_cmp_ps(acc, acc, _CMP_UNORD_Q));
  return _mm256_blendv_ps(x, acc, keep);
}

template <RowOp kOp, class F>
__attribute__((target("avx2,fma"))) void reduceRows8(const float* const* p, int64_t inner, float init, float* out,
                                                     const F& f) {
  __m256 acc = _mm256_set1_ps(init);
  int64_t k = 0;
  for (; k + 8 <= inner; k += 8) {
    const __m256 t0 = _mm256_unpacklo_ps(_mm256_loadu_ps(p[0] + k), _mm256_loadu_ps(p[1] + k));
    const __m256 t1 = _mm256_unpackhi_ps(_mm256_loadu_ps(p[0] + k), _mm256_loadu_ps(p[1] + k));
    const __m256 t2 = _mm256_unpacklo_ps(_mm256_loadu_ps(p[2] + k), _mm256_loadu_ps(p[3] + k));
    const __m256 t3 = _mm256_unpackhi_ps(_mm256_loadu_ps(p[2] + k), _mm256_loadu_ps(p[3] + k));
    const __m256 t4 = _mm256_unpacklo_ps(_mm256_loadu_ps(p[4] + k), _mm256_loadu_ps(p[5] + k));
    const __m256 t5 = _mm256_unpackhi_ps(_mm256_loadu_ps(p[4] + k), _mm256_loadu_ps(p[5] + k));
    const __m256 t6 = _mm256_unpacklo_ps(_mm256_loadu_ps(p[6] + k), _mm256_loadu_ps(p[7] + k));
    const __m256 t7 = _mm256_unpackhi_ps(_mm256_loadu_ps(p[6] + k), _mm256_loadu_ps(p[7] + k));
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    acc = rowOp<kOp, F>(acc, _mm256_permute2f128_ps(u0, u4, 0x20));  // element k of rows 0..7
    acc = rowOp<kOp, F>(acc, _mm256_permute2f128_ps(u1, u5, 0x20));
    acc = rowOp<kOp, F>(acc, _mm256_permute2f128_ps(u2, u6, 0x20));
    acc = rowOp<kOp, F>(acc, _mm256_permute2f128_ps(u3, u7, 0x20));
    acc = rowOp<kOp, F>(acc, _mm256_permute2f128_ps(u0, u4, 0x31));  // element k + 4
    acc = rowOp<kOp, F>(acc, _mm256_permute2f128_ps(u1, u5, 0x31));
    acc = rowOp<kOp, F>(acc, _mm256_permute2f128_ps(u2, u6, 0x31));
    acc = rowOp<kOp, F>(acc, _mm256_permute2f128_ps(u3, u7, 0x31));
  }
  _mm256_storeu_ps(out, acc);
  for (int j = 0; j < 8; ++j)
    for (int64_t kk = k; kk < inner; ++kk) out[j] = f(out[j], p[j][kk]);
}

template <class S, class F>
constexpr int rowOpOf() {
  if constexpr (!std::is_same<S, float>::value) return -1;
  else if constexpr (std::is_same<F, scalar::AddF>::value) return static_cast<int>(RowOp::Add);
  else if constexpr (std::is_same<F, scalar::MaximumF>::value) return static_cast<int>(RowOp::Max);
  else if constexpr (std::is_same<F, scalar::MinimumF>::value) return static_cast<int>(RowOp::Min);
  else if constexpr (HasAvx2Form2<F>::value) return static_cast<int>(RowOp::Vector);
  else return -1;
}

// An f32 sum window of `m` contiguous elements in lanes (ReduceKernel::windowFold): 8 lanes from -0, the last vector
// padded with -0 (which leaves a lane as it is), halved 8 -> 4 -> 2 -> 1, then init + that. The scalar code's bits.
__attribute__((target("avx2,fma"))) inline float windowSum8(const float* p, int64_t m, float init) {
  const __m256 id = _mm256_set1_ps(-0.0f);
  __m256 acc = id;
  int64_t k = 0;
  for (; k + 8 <= m; k += 8) acc = _mm256_add_ps(acc, _mm256_loadu_ps(p + k));
  if (k < m) {
    alignas(32) float tail[8];
    for (int j = 0; j < 8; ++j) tail[j] = k + j < m ? p[k + j] : -0.0f;
    acc = _mm256_add_ps(acc, _mm256_load_ps(tail));
  }
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));  // lane j + lane j + 4
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));  // lane j + lane j + 2
  h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));  // lane 0 + lane 1
  return init + _mm_cvtss_f32(h);
}

// The same window in 16 lanes (a host where LLVM vectorises with 512-bit vectors, wl_ 16): 16 lanes from -0, the
// last vector padded with -0, halved 16 -> 8 -> 4 -> 2 -> 1, then init + that. The scalar code's bits.
#if defined(__clang__) && __clang_major__ >= 18
#define IPU_TARGET_AVX512 "avx512f,evex512,avx2,fma"  // clang 18 splits the 512-bit registers out of avx512f
#else
#define IPU_TARGET_AVX512 "avx512f,avx2,fma"
#endif
__attribute__((target(IPU_TARGET_AVX512))) inline float windowSum16(const float* p, int64_t m, float init) {
  const __m512 id = _mm512_set1_ps(-0.0f);
  __m512 acc = id;
  int64_t k = 0;
  for (; k + 16 <= m; k += 16) acc = _mm512_add_ps(acc, _mm512_loadu_ps(p + k));
  if (k < m) {
    const __mmask16 tail = static_cast<__mmask16>((1u << (m - k)) - 1u);
    acc = _mm512_add_ps(acc, _mm512_mask_loadu_ps(id, tail, p + k));
  }
  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1));
  const __m256 a8 = _mm256_add_ps(_mm512_castps512_ps256(acc), hi);  // lane j + lane j + 8
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(a8), _mm256_extractf128_ps(a8, 1));  // lane j + lane j + 4
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));  // lane j + lane j + 2
  h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));  // lane 0 + lane 1
  return init + _mm_cvtss_f32(h);
}
#endif

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// The loads and the combining step of ReduceKernel::computeExtremum: denormals read as zeros for the IEEE combiners.
template <bool kDaz>
__attribute__((target("avx2,fma"), always_inline)) inline __m256 extremumRead(__m256 v) {
  if constexpr (kDaz) return xla_math::avx2::ftz_(v);
  return v;
}
template <int kExtremum>
__attribute__((target("avx2,fma"), always_inline)) inline __m256 extremumPick(__m256 a, __m256 b) {
  return kExtremum > 0 ? _mm256_max_ps(a, b) : _mm256_min_ps(a, b);
}
#endif

// Each output tile's outputs, accumulated in input order from the init value; f16 rounds after every step.
template <class S, class F>
class ReduceKernel : public Kernel {
 public:
  // `identity`: for a sum or product, the value lanes start from (-0 for a float sum: -0 + x is x for every x, +0
  // included); none (sequential windows) for the other combiners.
  ReduceKernel(int in, int init, int out, ReduceGeometry g, bool variadic, F f, std::optional<S> identity,
               Numerics numerics)
      : in_(in), init_(init), out_(out), g_(std::move(g)), tree_(reduceTree(g_.reduced_count, variadic)), f_(f),
        lanes_(identity.has_value()), identity_(identity.value_or(S{})),
        short_rows_(kF32Fold && numerics == Numerics::Jaxlib04 && g_.inner_reduced),
        nested_(kF32Fold && numerics == Numerics::Jaxlib04 && g_.red_shape.size() >= 2),
        strided_lanes_(lanes_ && (hostGathersFast() ||
                                  (numerics != Numerics::Jaxlib04 && g_.reduced_count > kTreeWindow * kTreeWindow))),
        unpadded_lanes_(lanes_ && numerics == Numerics::Jaxlib04 && !g_.inner_reduced),
        tail_lanes_(kF32Fold && lanes_ && numerics == Numerics::Jaxlib04 && !g_.inner_reduced &&
                    g_.red_shape.size() == 1 && hostHasAvx512()),
        large_input_(inputElements(g_) >= kLargeInput) {}

  bool rowReduction(int* reads, int* init, int* writes, int64_t* row) const override {
    // One reduced dimension, contiguous, and the kept ones outside it in row-major order: output j is row j.
    if (g_.red_shape.size() != 1 || g_.red_strides[0] != 1 || !g_.inner_reduced) return false;
    int64_t stride = g_.red_shape[0];
    for (size_t d = g_.out_shape.size(); d-- > 0; stride *= g_.out_shape[d])
      if (g_.out_shape[d] > 1 && g_.out_strides[d] != stride) return false;
    *reads = in_, *init = init_, *writes = out_, *row = g_.red_shape[0];
    return true;
  }

  void compute(RunState& s, int64_t b, int64_t e) const override {
    const S* x = s.at<const S>(in_);
    const S init = *s.at<const S>(init_);
    S* o = s.at<S>(out_);
    if (g_.reduced_count == 0) {
      for (int64_t i = b; i < e; ++i) o[i] = init;
      return;
    }
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if constexpr (kExtremum != 0) {
      if (g_.inner_reduced && g_.red_shape.size() == 1 && g_.red_strides.back() == 1 && hostHasAvx2())
        return computeExtremum(x, init, o, b, e);
    }
#endif
    computeOrdered(x, init, o, b, e);
  }

 private:
  // The maximum or minimum of f32 rows (XLA's, scalar::maxXla/minXla, or the IEEE ones with denormals read as
  // zeros, maxIeee<true>/minIeee<true>): +1 maximum, -1 minimum, 0 another combiner.
  static constexpr int kExtremum =
      !std::is_same<S, float>::value                                                             ? 0
      : std::is_same<F, scalar::MaximumF>::value || std::is_same<F, scalar::MaximumIeeeF>::value ? 1
      : std::is_same<F, scalar::MinimumF>::value || std::is_same<F, scalar::MinimumIeeeF>::value ? -1
                                                                                                 : 0;
  static constexpr bool kDaz =
      std::is_same<F, scalar::MaximumIeeeF>::value || std::is_same<F, scalar::MinimumIeeeF>::value;

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  // Rows of contiguous elements, each row's extremum in any order (four vector accumulators): both combiners order
  // the values totally but for the two zeros, which compare equal (maxXla keeps the first; the IEEE ones order -0
  // below +0, and a denormal reads as a zero of its sign), and NaNs, whose payload the first one decides. So a row
  // whose extremum is neither a zero nor NaN has the same bits in every order; any other row runs in the combiner's
  // own order (computeOrdered), as before.
  __attribute__((target("avx2,fma"))) void computeExtremum(const S* x, S init, S* o, int64_t b, int64_t e) const {
    std::vector<int64_t> oidx;
    int64_t base = offsetOf(b, g_.out_shape, g_.out_strides, &oidx);
    const int64_t m = g_.red_shape.back();
    const float start = kDaz ? xla_math::ftz_(init) : init;
    int64_t ordered = b;  // the first of the rows since the last fast one: run in order together, as one call
    for (int64_t i = b; i < e; ++i) {
      const float* p = x + base;
      __m256 a0 = _mm256_set1_ps(start), a1 = a0, a2 = a0, a3 = a0, nan = _mm256_setzero_ps();
      int64_t k = 0;
      for (; k + 32 <= m; k += 32) {
        const __m256 v0 = extremumRead<kDaz>(_mm256_loadu_ps(p + k)),
                     v1 = extremumRead<kDaz>(_mm256_loadu_ps(p + k + 8));
        const __m256 v2 = extremumRead<kDaz>(_mm256_loadu_ps(p + k + 16)),
                     v3 = extremumRead<kDaz>(_mm256_loadu_ps(p + k + 24));
        nan = _mm256_or_ps(nan, _mm256_or_ps(_mm256_cmp_ps(v0, v1, _CMP_UNORD_Q), _mm256_cmp_ps(v2, v3, _CMP_UNORD_Q)));
        a0 = extremumPick<kExtremum>(a0, v0), a1 = extremumPick<kExtremum>(a1, v1),
        a2 = extremumPick<kExtremum>(a2, v2), a3 = extremumPick<kExtremum>(a3, v3);
      }
      for (; k + 8 <= m; k += 8) {
        const __m256 v = extremumRead<kDaz>(_mm256_loadu_ps(p + k));
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        a0 = extremumPick<kExtremum>(a0, v);
      }
      alignas(32) float lanes[8];
      _mm256_store_ps(lanes, extremumPick<kExtremum>(extremumPick<kExtremum>(a0, a1), extremumPick<kExtremum>(a2, a3)));
      float r = lanes[0];
      bool odd = _mm256_movemask_ps(nan) != 0 || std::isnan(start);
      for (int j = 1; j < 8; ++j) r = kExtremum > 0 ? std::max(r, lanes[j]) : std::min(r, lanes[j]);
      for (; k < m; ++k) {
        const float v = kDaz ? xla_math::ftz_(p[k]) : p[k];
        odd = odd || std::isnan(v);
        r = kExtremum > 0 ? std::max(r, v) : std::min(r, v);
      }
      if (!odd && r != 0.0f) {
        if (ordered < i) computeOrdered(x, init, o, ordered, i);
        o[i] = r;
        ordered = i + 1;
      }
      advance(oidx, g_.out_shape, g_.out_strides, base);
    }
    if (ordered < e) computeOrdered(x, init, o, ordered, e);
  }
#endif

  void computeOrdered(const S* x, S init, S* o, int64_t b, int64_t e) const {
    if (nested_) return computeNested(x, init, o, b, e);
    if (tree_.tree()) return computeTree(x, init, o, b, e);
    std::vector<int64_t> oidx, ridx(g_.red_shape.size(), 0);
    if (g_.inner_reduced) {  // output-major: each output walks its reduced elements, innermost contiguous
      int64_t base = offsetOf(b, g_.out_shape, g_.out_strides, &oidx);
      const int64_t inner = g_.red_shape.back();
      const int64_t inner_stride = g_.red_strides.back();
      int64_t i = b;
      if (g_.red_shape.size() == 1 && !short_rows_) {
        // One reduced dimension: kLanes outputs at once, each still accumulated in its own order (the same
        // result), so their chains of dependent adds overlap instead of waiting on each other.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
        constexpr int kRowOp = rowOpOf<S, F>();
        if constexpr (kRowOp >= 0) {
          if (inner_stride == 1 && hostHasAvx2() && hostHasFma())
            for (; i + 8 <= e; i += 8) {
              const float* p[8];
              for (int j = 0; j < 8; ++j) {
                p[j] = x + base;
                advance(oidx, g_.out_shape, g_.out_strides, base);
              }
              reduceRows8<static_cast<RowOp>(kRowOp)>(p, inner, init, o + i, f_);
            }
        }
#endif
        for (; i + kLanes <= e; i += kLanes) {
          const S* p[kLanes];
          S acc[kLanes];
          for (int j = 0; j < kLanes; ++j) {
            p[j] = x + base;
            acc[j] = init;
            advance(oidx, g_.out_shape, g_.out_strides, base);
          }
          for (int64_t k = 0; k < inner; ++k)
            for (int j = 0; j < kLanes; ++j) acc[j] = f_(acc[j], p[j][k * inner_stride]);
          for (int j = 0; j < kLanes; ++j) o[i + j] = acc[j];
        }
      }
      for (; i < e; ++i) {
        S acc = init;
        std::fill(ridx.begin(), ridx.end(), 0);
        int64_t roff = 0;
        do {  // short_rows_: each row in the lanes XLA:CPU's vectorised loop folds it in
          const S* p = x + base + roff;
          acc = short_rows_ ? shortFold(p, inner_stride, inner, acc) : foldInOrder(p, inner_stride, inner, acc);
          ridx.back() = inner - 1;
          roff += (inner - 1) * inner_stride;
        } while (advance(ridx, g_.red_shape, g_.red_strides, roff));
        o[i] = acc;
        advance(oidx, g_.out_shape, g_.out_strides, base);
      }
      return;
    }
    // reduced-major: sweep the outputs once per reduced coordinate, a run of the innermost output dimension at a
    // time (each output still takes its reduced elements in order).
    std::vector<S> acc(static_cast<size_t>(e - b), init);
    const int64_t last = g_.out_shape.empty() ? 1 : g_.out_shape.back();
    const int64_t os = g_.out_strides.empty() ? 0 : g_.out_strides.back();
    int64_t roff = 0;
    do {
      for (int64_t i = b; i < e;) {
        const int64_t base = offsetOf(i, g_.out_shape, g_.out_strides, &oidx) + roff;
        const int64_t len = std::min(e - i, last - (oidx.empty() ? 0 : oidx.back()));
        S* a = acc.data() + (i - b);
        for (int64_t j = 0; j < len; ++j) a[j] = f_(a[j], x[base + j * os]);
        i += len;
      }
    } while (advance(ridx, g_.red_shape, g_.red_strides, roff));
    if (tail_lanes_ && last % 32 == 1 && (last > 1 || g_.red_shape[0] < 16)) {
      // jaxlib 0.4.13 on a 512-bit host: XLA:CPU's column loop takes the innermost output dimension 32 at a time,
      // and for a last piece of one element (the dimension's last output, when its size is 1 more than a multiple
      // of 32) LLVM vectorises the loop over the reduced rows instead: tailColumnFold. (An innermost dimension of 1
      // with 16 rows or more is vectorised otherwise, not measured: left in order.)
      for (int64_t i = b; i < e; ++i) {
        const int64_t base = offsetOf(i, g_.out_shape, g_.out_strides, &oidx);
        if (oidx.empty() || oidx.back() == last - 1)
          acc[static_cast<size_t>(i - b)] = tailColumnFold(x + base, g_.red_strides[0], g_.red_shape[0], init);
      }
    }
    std::copy(acc.begin(), acc.end(), o + b);
  }

 private:
  // One window's partial from `m` elements at stride `st`. A sum or product (lanes_) takes them in 8 lanes (wl_: 16
  // on a 512-bit host, measured on an AMD EPYC of family 26 with jnp.sum of f32[n] for n in 33..48): element
  // k into lane k % 8, each lane from the identity, the lanes halved 8 -> 4 -> 2 -> 1 (lane j with lane j + h), then
  // init combined with that: as XLA:CPU's LLVM vectorises a window's fold, so no partial sums more than 4 terms in a
  // row. Any other combiner (maximum, minimum, and, or: exact, where order only picks among equal values) folds
  // the elements in order from init, as XLA's reduce_window does.
  S windowFold(const S* p, int64_t st, int64_t m, S init) const {
    if (!lanes_) return foldInOrder(p, st, m, init);
    S a[kMaxLanes];
    std::fill(a, a + wl_, identity_);
    for (int64_t k = 0; k < m; ++k) a[k % wl_] = f_(a[k % wl_], p[k * st]);
    return f_(init, halveLanes(a, 1));
  }

  // jaxlib 0.4.13's XLA:CPU adds (multiplies) a row of at most 32 f32 elements (a reduce over the innermost dimension,
  // or the last level of its tree) as LLVM vectorises the loop, reassociating, with 256-bit vectors
  // (tests/conformance/test_reduce.py): up to 16 elements in one vector of 8 lanes (element k into lane k % 8, the
  // other lanes from the identity, the init value into lane 0 first), halved
  // 8 -> 4 -> 2 -> 1 (lane j with lane j + h); 17 to 32 elements, those up to the last multiple of 4 the same way in
  // 8 lanes when they are an even number of 4-element steps (two interleaved 4-lane vectors) and in 4 lanes when odd,
  // but a row of exactly 32 on a 512-bit host (wl_ 16): in 16 lanes (measured: 1 to 31 fold alike on both hosts),
  // then the rest added in order. (Up to 2 elements, and for the other combiners, this is the sequential fold.)
  S shortFold(const S* p, int64_t st, int64_t m, S init) const {
    S a[kMaxLanes];
    std::fill(a, a + kMaxLanes, identity_);
    a[0] = init;
    const int64_t main = m <= 16 ? m : m & ~int64_t(3);
    const int64_t w = m == 2 * kMaxLanes && wl_ == kMaxLanes ? kMaxLanes : m <= 16 || (main / 4) % 2 == 0 ? 8 : 4;
    for (int64_t k = 0; k < main; ++k) a[k % w] = f_(a[k % w], p[k * st]);
    for (int64_t h = w / 2; h > 0; h /= 2)
      for (int64_t j = 0; j < h; ++j) a[j] = f_(a[j], a[j + h]);
    S r = a[0];
    for (int64_t k = main; k < m; ++k) r = f_(r, p[k * st]);
    return r;
  }

  // jaxlib 0.4.13, an f32 sum or product over several dimensions (nested_): each output as XLA:CPU computes it
  // (tests/conformance/test_reduce.py::test_reductions_over_several_dimensions_fold_in_cpus_order).
  void computeNested(const S* x, S init, S* o, int64_t b, int64_t e) const {
    std::vector<int64_t> oidx;
    int64_t base = offsetOf(b, g_.out_shape, g_.out_strides, &oidx);
    for (int64_t i = b; i < e; ++i) {
      o[i] = foldNested(x + base, g_.red_shape, g_.red_strides, init, g_.inner_reduced);
      advance(oidx, g_.out_shape, g_.out_strides, base);
    }
  }

  // The elements of `shape` at `strides` from p, reduced as XLA:CPU's TreeReductionRewriter and loop emitters do:
  // dimensions of one element dropped first; while one is longer than 32, a reduce_window level (windows of 32 with
  // stride 32 along each such dimension, padded as XLA pads them, the whole of every other dimension) whose window
  // rows along the innermost dimension are folded into the window's running value, in 8 lanes by window position when
  // that dimension is windowed (pads take no lanes' values), as shortFold folds a row otherwise; then the partials
  // the same way; at most 32 per dimension left, a loop nest: with `inner_rows` (the input's innermost dimension is
  // reduced) folding each innermost row into the running value as shortFold does, else (vectorised across outputs)
  // each element in turn.
  S foldNested(const S* p, std::vector<int64_t> shape, std::vector<int64_t> strides, S init, bool inner_rows,
               bool first = true) const {
    for (size_t k = shape.size(); k-- > 0;)
      if (shape[k] == 1) {
        shape.erase(shape.begin() + static_cast<std::ptrdiff_t>(k));
        strides.erase(strides.begin() + static_cast<std::ptrdiff_t>(k));
      }
    if (shape.empty()) shape.assign(1, 1), strides.assign(1, 1);
    const size_t r = shape.size(), last = r - 1;
    std::vector<int64_t> lo(r, 0), hi(shape), idx(r);
    // Calls visit(offset) for every row start of the box [lo, hi) over the dimensions before the innermost.
    const auto rows = [&](const auto& visit) {
      for (size_t k = 0; k < last; ++k) {
        if (lo[k] >= hi[k]) return;
        idx[k] = lo[k];
      }
      for (;;) {
        int64_t off = 0;
        for (size_t k = 0; k < last; ++k) off += idx[k] * strides[k];
        visit(off);
        size_t k = last;
        while (k-- > 0 && ++idx[k] == hi[k]) idx[k] = lo[k];
        if (k == static_cast<size_t>(-1)) return;
      }
    };
    if (std::none_of(shape.begin(), shape.end(), [](int64_t d) { return d > kTreeWindow; })) {
      S acc = init;
      rows([&](int64_t off) {
        acc = inner_rows ? shortFold(p + off, strides[last], shape[last], acc)
                         : foldInOrder(p + off, strides[last], shape[last], acc);
      });
      return acc;
    }
    std::vector<int64_t> o(r), pad(r);
    for (size_t k = 0; k < r; ++k) {
      o[k] = shape[k] > kTreeWindow ? (shape[k] + kTreeWindow - 1) / kTreeWindow : 1;
      pad[k] = shape[k] > kTreeWindow ? (o[k] * kTreeWindow - shape[k]) / 2 : 0;  // MakePadding(kSame)'s low half
    }
    std::vector<S> partials;
    std::vector<int64_t> w(r, 0);
    for (;;) {
      for (size_t k = 0; k < r; ++k) {
        lo[k] = shape[k] > kTreeWindow ? std::max<int64_t>(0, w[k] * kTreeWindow - pad[k]) : 0;
        hi[k] = shape[k] > kTreeWindow ? std::min(shape[k], (w[k] + 1) * kTreeWindow - pad[k]) : shape[k];
      }
      S acc = init;
      rows([&](int64_t off) {
        if (shape[last] <= kTreeWindow) {
          acc = inner_rows || strided_lanes_ || !first ? shortFold(p + off, strides[last], shape[last], acc)
                                                       : foldInOrder(p + off, strides[last], shape[last], acc);
          return;
        }
        if (!inner_rows && !strided_lanes_ && first) {  // a strided window of the input, in order (strided_lanes_)
          acc = foldInOrder(p + off + lo[last] * strides[last], strides[last], hi[last] - lo[last], acc);
          return;
        }
        S a[kMaxLanes];
        std::fill(a, a + wl_, identity_);
        a[0] = acc;
        const int64_t start = w[last] * kTreeWindow - pad[last];  // the window's first position, maybe a pad
        for (int64_t q = lo[last]; q < hi[last]; ++q)
          a[(q - start) % wl_] = f_(a[(q - start) % wl_], p[off + q * strides[last]]);
        acc = halveLanes(a, 1);
      });
      partials.push_back(acc);
      size_t k = r;
      while (k-- > 0 && ++w[k] == o[k]) w[k] = 0;
      if (k == static_cast<size_t>(-1)) break;
    }
    std::vector<int64_t> pstrides(r, 1);
    for (size_t k = last; k-- > 0;) pstrides[k] = pstrides[k + 1] * o[k + 1];
    return foldNested(partials.data(), o, pstrides, init, inner_rows, /*first=*/false);
  }

  // `m` elements at stride `st`, folded in order from init.
  S foldInOrder(const S* p, int64_t st, int64_t m, S init) const {
    for (int64_t k = 0; k < m; ++k) init = f_(init, p[k * st]);
    return init;
  }

  // The window lanes (wl_) at stride `st` halved in place, 8 -> 4 -> 2 -> 1 (16 -> 8 -> ...) (lane j with lane
  // j + h); the last lane left.
  S halveLanes(S* a, int64_t st) const {
    for (int64_t h = wl_ / 2; h > 0; h /= 2)
      for (int64_t j = 0; j < h; ++j) a[j * st] = f_(a[j * st], a[(j + h) * st]);
    return a[0];
  }

  // The tree (ReduceTree): the first level's window partials straight from the input, the later levels over those
  // partials, laid out [partial][lane] for `lanes` outputs taken together.
  void computeTree(const S* x, S init, S* o, int64_t b, int64_t e) const {
    const TreeLevel& l0 = tree_.levels[0];
    std::vector<S> cur, next;
    std::vector<int64_t> oidx, ridx(g_.red_shape.size(), 0);
    if (g_.inner_reduced) {  // output-major: each output's reduced elements in order, a window at a time
      int64_t base = offsetOf(b, g_.out_shape, g_.out_strides, &oidx);
      const int64_t inner = g_.red_shape.back(), inner_stride = g_.red_strides.back();
      const bool one_row = g_.red_shape.size() == 1;
      int64_t i = b;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
      constexpr int kRowOp = rowOpOf<S, F>();
      if constexpr (kRowOp >= 0) {
        if (one_row && inner_stride == 1 && hostHasAvx2() && hostHasFma()) {
          if (lanes_ && kRowOp == static_cast<int>(RowOp::Add) && (wl_ == 8 || hostHasAvx512())) {
            for (; i < e; ++i) {  // each output's windows in vector lanes
              cur.resize(static_cast<size_t>(l0.o));
              for (int64_t jw = 0; jw < l0.o; ++jw) {
                const float* w = x + base + l0.windowStart(jw);
                const int64_t m = l0.windowEnd(jw) - l0.windowStart(jw);
                cur[static_cast<size_t>(jw)] = wl_ == 8 ? windowSum8(w, m, init) : windowSum16(w, m, init);
              }
              foldLevels(cur, next, 1, init, o + i);
              advance(oidx, g_.out_shape, g_.out_strides, base);
            }
          } else if (!lanes_) {
            for (; i + 8 <= e; i += 8) {  // 8 outputs at once, window by window, each window in order
              const float* p[8];
              for (int j = 0; j < 8; ++j) {
                p[j] = x + base;
                advance(oidx, g_.out_shape, g_.out_strides, base);
              }
              cur.resize(static_cast<size_t>(l0.o * 8));
              for (int64_t jw = 0; jw < l0.o; ++jw) {
                const float* q[8];
                for (int j = 0; j < 8; ++j) q[j] = p[j] + l0.windowStart(jw);
                reduceRows8<static_cast<RowOp>(kRowOp)>(q, l0.windowEnd(jw) - l0.windowStart(jw), init,
                                                        cur.data() + jw * 8, f_);
              }
              foldLevels(cur, next, 8, init, o + i);
            }
          }
        }
      }
#endif
      S window[kTreeWindow];
      for (; i < e; ++i) {
        cur.resize(static_cast<size_t>(l0.o));
        if (one_row) {
          for (int64_t jw = 0; jw < l0.o; ++jw)
            cur[static_cast<size_t>(jw)] = windowFold(x + base + l0.windowStart(jw) * inner_stride, inner_stride,
                                                      l0.windowEnd(jw) - l0.windowStart(jw), init);
        } else {  // windows may span rows: gather each window's elements, then fold it
          std::fill(ridx.begin(), ridx.end(), 0);
          int64_t roff = 0, r = 0, jw = 0, filled = 0;
          do {
            const S* p = x + base + roff;
            for (int64_t c = 0; c < inner; ++c, ++r) {
              window[filled++] = p[c * inner_stride];
              if (r + 1 == l0.windowEnd(jw)) {
                cur[static_cast<size_t>(jw++)] = windowFold(window, 1, filled, init);
                filled = 0;
              }
            }
            ridx.back() = inner - 1;
            roff += (inner - 1) * inner_stride;
          } while (advance(ridx, g_.red_shape, g_.red_strides, roff));
        }
        foldLevels(cur, next, 1, init, o + i);
        advance(oidx, g_.out_shape, g_.out_strides, base);
      }
      return;
    }
    // reduced-major: chunks of outputs swept once per reduced coordinate, each element into its window's lane
    // (element k of a window into lane k % 8, or one accumulator per window without lanes), then each window's lanes
    // combined as windowFold combines them.
    const int64_t last = g_.out_shape.empty() ? 1 : g_.out_shape.back();
    const int64_t os = g_.out_strides.empty() ? 0 : g_.out_strides.back();
    const bool lanes_here = stridedLanes(l0, /*first=*/true);
    const int64_t nl = lanes_here ? wl_ : 1;
    const int64_t chunk = std::max<int64_t>(1, (int64_t(1) << 20) / (l0.o * nl));
    std::vector<S> acc;
    for (int64_t c0 = b; c0 < e; c0 += chunk) {
      const int64_t c1 = std::min(e, c0 + chunk), lanes = c1 - c0;
      acc.assign(static_cast<size_t>(l0.o * nl * lanes), lanes_here ? identity_ : init);
      std::fill(ridx.begin(), ridx.end(), 0);
      int64_t roff = 0, r = 0;
      do {
        const int64_t jw = l0.windowOf(r);
        S* row = acc.data() + (jw * nl + (lanes_here ? (r - l0.windowStart(jw)) % wl_ : 0)) * lanes;
        ++r;
        for (int64_t i = c0; i < c1;) {
          const int64_t base = offsetOf(i, g_.out_shape, g_.out_strides, &oidx) + roff;
          const int64_t len = std::min(c1 - i, last - (oidx.empty() ? 0 : oidx.back()));
          S* a = row + (i - c0);
          for (int64_t j = 0; j < len; ++j) a[j] = f_(a[j], x[base + j * os]);
          i += len;
        }
      } while (advance(ridx, g_.red_shape, g_.red_strides, roff));
      cur.resize(static_cast<size_t>(l0.o * lanes));
      for (int64_t jw = 0; jw < l0.o; ++jw) {
        S* w = acc.data() + jw * nl * lanes;
        for (int64_t j = 0; j < lanes; ++j)
          cur[static_cast<size_t>(jw * lanes + j)] = lanes_here ? f_(init, halveLanes(w + j, lanes)) : w[j];
      }
      foldLevels(cur, next, lanes, init, o + c0);
    }
  }

  // One output of a column sum or product of m <= 32 rows (at stride st) in the lanes LLVM's vectorised loop over
  // the rows gives it on a host with AVX-512's masked gathers (measured on an AMD EPYC of family 26, jnp.prod and
  // jnp.sum over dimension 1 of f32[100, m, 1, 33], every m from 2 to 32, each output bit for bit; fuzz seed
  // 20270301 #1906; and on an Intel AVX-512 host, whose LLVM tuning prefers 256-bit vectors:
  // test_short_column_sums_fold_in_cpus_order): row r into lane r % n from the lane identity, n = 2 for m <= 4,
  // 4 for m <= 8, 8 for m <= 31, and for 32 the host's vector width (wl_: 16 lanes on a 512-bit host, else 8); up to
  // 16 rows in one masked vector, beyond that whole vectors of 8 and the last m % 8 rows folded in order after the
  // lanes; the lanes halved (lane j with lane j + n/2) down to one, then init combined with it.
  S tailColumnFold(const S* p, int64_t st, int64_t m, S init) const {
    const int64_t n = m <= 2 ? 1 : m <= 4 ? 2 : m <= 8 ? 4 : m < 32 ? 8 : wl_;
    const int64_t in_lanes = m > 16 && m < 32 ? m / 8 * 8 : m;
    S a[kMaxLanes];
    std::fill(a, a + n, identity_);
    for (int64_t r = 0; r < in_lanes; ++r) a[r % n] = f_(a[r % n], p[r * st]);
    for (int64_t h = n / 2; h > 0; h /= 2)
      for (int64_t j = 0; j < h; ++j) a[j] = f_(a[j], a[j + h]);
    S acc = f_(init, a[0]);
    for (int64_t r = in_lanes; r < m; ++r) acc = f_(acc, p[r * st]);
    return acc;
  }

  // The levels after the first, over partials laid out [partial][lane] (windows folded by windowFold, the last level
  // in order from init); writes each lane's result to out[lane].
  void foldLevels(std::vector<S>& cur, std::vector<S>& next, int64_t lanes, S init, S* out) const {
    for (size_t li = 1; li < tree_.levels.size(); ++li) {
      const TreeLevel& l = tree_.levels[li];
      next.resize(static_cast<size_t>(l.o * lanes));
      const bool last = li + 1 == tree_.levels.size();
      const bool in_lanes = !unpadded_lanes_ || stridedLanes(l, /*first=*/false);
      for (int64_t jw = 0; jw < l.o; ++jw)
        for (int64_t j = 0; j < lanes; ++j) {
          const S* p = cur.data() + l.windowStart(jw) * lanes + j;
          const int64_t m = l.windowEnd(jw) - l.windowStart(jw);
          next[static_cast<size_t>(jw * lanes + j)] =
              !last ? (in_lanes ? windowFold(p, lanes, m, init) : foldInOrder(p, lanes, m, init))
              : short_rows_ && g_.red_shape.size() == 1 ? shortFold(p, lanes, m, init)
                                                        : foldInOrder(p, lanes, m, init);
        }
      cur.swap(next);
    }
    std::copy(cur.begin(), cur.begin() + lanes, out);
  }

  static constexpr int kLanes = 8;
  // The lanes a window of 32 folds in: XLA:CPU's LLVM vectorises its loop with the host's vector width
  // (hostWideVectors: 16 lanes of 512 bits, else 8 of 256), as it does a row of exactly 32 (shortFold).
  static constexpr int kMaxLanes = 16;
  const int wl_ = hostWideVectors() ? kMaxLanes : 8;
  static constexpr bool kF32Fold = std::is_same<S, float>::value &&
                                   (std::is_same<F, scalar::AddF>::value || std::is_same<F, scalar::MultiplyF>::value);
  int in_, init_, out_;
  ReduceGeometry g_;
  ReduceTree tree_;
  F f_;
  bool lanes_;
  S identity_;
  bool short_rows_;  // jaxlib 0.4.13, an f32 sum or product over the innermost dimension: rows of up to 32 elements,
                     // and a one-dimension tree's last level, as shortFold folds them
  bool nested_;  // ... over several dimensions: computeNested
  // A sum's or product's first-level windows over input elements that are not contiguous (the innermost dimension
  // is kept: a column sum) in lanes too: XLA:CPU's LLVM vectorises that strided loop only with gathers
  // (hostGathersFast); else it folds each in order where the level is padded (unpadded_lanes_). The later levels, over
  // the partials, are strided as well: jaxlib 0.4.13 the same way, jaxlib 0.12 in lanes. jaxlib 0.12 there: in order
  // up to 1024 reduced rows (f32[40..300, n], each bit), lanes beyond, where neither order gives cpu's bits and the
  // lanes are the more accurate (a column sum of 10^6 rows of 3.7 is 0.8 from the exact sum, in order 2.5; cpu 0.45).
  bool strided_lanes_;
  // jaxlib 0.4.13, a sum's or product's strided levels on a host without fast gathers: a level whose windows need
  // no padding (its elements a multiple of 32) is vectorised all the same, its windows in 8 lanes, a padded one
  // folds each window in order (measured on an AMD EPYC with AVX2: jnp.sum(x, 0) of f32[n, c], c >= 9, bit for bit
  // for n = 64, 1024, 1280 (1280 -> 40 -> 2: lanes, then in order), 1000, 32768, 40000; fuzz seed 20261901 #868:
  // jnp.prod(x, 0) of f32[16384, 32]); but where the input has 2^22 elements or more, its first level folds each
  // window in order (f32[n, c] for n * c from 4,194,304 (131072 x 32, 65536 x 64, 4096 x 1024, 524288 x 9) up;
  // 130048 x 32 and 98304 x 33 still in lanes). stridedLanes tells, level by level.
  bool unpadded_lanes_;
  bool tail_lanes_;  // jaxlib 0.4.13 on an AVX-512 host, a column sum or product of <= 32 rows: tailColumnFold
  bool large_input_;
  static constexpr int64_t kLargeInput = int64_t(1) << 22;
  static int64_t inputElements(const ReduceGeometry& g) {
    int64_t n = g.reduced_count;
    for (int64_t d : g.out_shape) n *= d;
    return n;
  }
  bool stridedLanes(const TreeLevel& l, bool first) const {
    return strided_lanes_ || (unpadded_lanes_ && l.o * l.w == l.n && !(first && large_input_));
  }
};

template <class S, class F>
std::unique_ptr<Kernel> make(int in, int init, int out, const ReduceGeometry& g, bool variadic, F f,
                             std::optional<S> identity, Numerics numerics) {
  return std::make_unique<ReduceKernel<S, F>>(in, init, out, g, variadic, f, identity, numerics);
}

// The identity a sum's or a product's window lanes start from (ReduceKernel::windowFold): -0 for a sum (+0 for the
// integers), 1 for a product; none for a complex product (1 * inf is not exact there) or any other combiner.
template <DType D>
std::optional<Storage<D>> laneIdentity(OpKind kind) {
  if constexpr (isComplex(D)) {
    if (kind == OpKind::Add) return Storage<D>{-0.0, -0.0};
    return std::nullopt;
  } else {
    if (kind == OpKind::Add) return scalar::convertRealValue<D, DType::F32>(-0.0f);
    if (kind == OpKind::Multiply) return scalar::convertRealValue<D, DType::F32>(1.0f);
    return std::nullopt;
  }
}

// The vector kernel of combiner `kind` on element type D (reduce.cc's reduceKernel dispatches on the dtype); null
// where no vector kernel combines D so. f16 steps are computed in f32 and rounded, as XLA:CPU does per op.
template <DType D>
std::unique_ptr<Kernel> reduceKernelOf(OpKind kind, DType dt, Numerics numerics, int in, int init, int out,
                                       const ReduceGeometry& g, bool variadic) {
  std::unique_ptr<Kernel> kernel;
  std::optional<Storage<D>> identity;
  if constexpr (D != DType::Bool) identity = laneIdentity<D>(kind);
  // D's reducers alone (visitBinaryOf): f16, bf16 and u16 share their storage, and each source compiles only its own.
  if (dt != D) return kernel;
  scalar::visitBinaryOf<D, true>(kind, numerics, [&](auto f, auto t) {
    using S = typename decltype(t)::type;
    kernel = make<S>(in, init, out, g, variadic, f, identity, numerics);
  });
  return kernel;
}

// Instantiated in reduce_kernels_*.cc, one group of element types per source.
#define IPU_REDUCE_KERNEL_OF(D)                                                                                  \
  template std::unique_ptr<Kernel> reduceKernelOf<D>(OpKind kind, DType dt, Numerics numerics, int in, int init, \
                                                     int out, const ReduceGeometry& g, bool variadic)
extern IPU_REDUCE_KERNEL_OF(DType::Bool);
extern IPU_REDUCE_KERNEL_OF(DType::I8);
extern IPU_REDUCE_KERNEL_OF(DType::U8);
extern IPU_REDUCE_KERNEL_OF(DType::I16);
extern IPU_REDUCE_KERNEL_OF(DType::U16);
extern IPU_REDUCE_KERNEL_OF(DType::I32);
extern IPU_REDUCE_KERNEL_OF(DType::U32);
extern IPU_REDUCE_KERNEL_OF(DType::F16);
extern IPU_REDUCE_KERNEL_OF(DType::BF16);
extern IPU_REDUCE_KERNEL_OF(DType::F32);
extern IPU_REDUCE_KERNEL_OF(DType::C64);

}  // namespace reduce_kernels
}  // namespace ipu
