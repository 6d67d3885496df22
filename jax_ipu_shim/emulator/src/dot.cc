// dot_general as poplin plans a matmul. Plan policy: over grids pB*pM x pN x pK <= tiles of the [batch*M, N, K]
// iteration space (powers of two, tile-count divisors and whole dimensions), take the one with the fewest estimated
// cycles (AMP compute + exchange + syncs of both supersteps) whose per-tile working set (received operand blocks +
// partials + the partials received for the reduction; f32 partials, or f16 with poplin's partialsType half) is at
// most poplin's availableMemoryProportion (0.6) of a tile; when none is, the rows in the fewest chunks one after
// another that fit (poplin's serial split; dot_general only), else the smallest working set.
// Superstep 1: each tile receives an lhs block and an rhs block and computes a partial output block on the AMP;
// superstep 2 (when pK > 1 or the blocks are not where the output lives): each tile of the output's linear mapping
// receives the pK partials of its elements and reduces them, converting once to the result type.
// Operands are first viewed (or, when their layout or type requires it, copied) in canonical [batch, M, K] and
// [batch, K, N] layouts; the host kernel runs every block as a register-blocked, vectorised GEMM.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "ipu/cost_model.h"
#include "ipu/cpu_features.h"
#include "ipu/dtype.h"
#include "ipu/handlers.h"
#include "ipu/lowering.h"
#include "ipu/matmul.h"
#include "ipu/strided_copy.h"

namespace ipu {

namespace {

// Which input dimensions, in which order, form the canonical layout of one operand.
struct OperandLayout {
  std::vector<int64_t> shape;  // of the operand
  std::vector<int64_t> perm;  // canonical order of its dimensions
  bool identity() const {
    for (size_t i = 0; i < perm.size(); ++i)
      if (perm[i] != static_cast<int64_t>(i)) return false;
    return true;
  }
};


// Copies elements [b, e) of an operand in canonical order into y[b, e), converting to the accumulator type (the
// whole operand, or one host thread's share of it).
template <class In, class Acc>
void canonicalize(const In* x, Acc* y, const OperandLayout& l, int64_t b, int64_t e) {
  const size_t rank = l.shape.size();
  if (rank == 0) {
    if (b < e) y[0] = toAcc(x[0], static_cast<Acc*>(nullptr));
    return;
  }
  std::vector<int64_t> in_strides(rank, 1), shape(rank), strides(rank);
  for (size_t d = rank; d-- > 1;) in_strides[d - 1] = in_strides[d] * l.shape[d];
  for (size_t d = 0; d < rank; ++d) {
    shape[d] = l.shape[static_cast<size_t>(l.perm[d])];
    strides[d] = in_strides[static_cast<size_t>(l.perm[d])];
  }
  if (b >= e) return;
  if constexpr (std::is_same<In, uint16_t>::value && std::is_same<Acc, float>::value) {  // f16: a vector conversion
    if (l.identity()) return halvesToFloats(x + b, y + b, e - b);
  }
  copyStridedView<false>(x, y + b, shape, strides, 0, b, e, [](In v) { return toAcc(v, static_cast<Acc*>(nullptr)); });
}

// ---- host GEMM kernels. C[m x n] = A[m x k] B[k x n] with row strides lda, ldb, ldc. Every output element is a
// running sum over k in increasing order, so the host blocking (of k too) never changes a result. ----

constexpr int kMR = 6;  // rows of C per micro-kernel
constexpr int64_t kKC = 256;  // depth per pass: a 16 KB panel of B (32 KB at 16 lanes) stays in L1
// Small GEMMs (at most this many rows of C: an RNN step's [8, 64] x [64, 64]) read full panels of B in place: with
// one or two row blocks per panel, packing B would cost as much as the multiply-adds it serves.
constexpr int64_t kSmallM = 8;

// GCC vectors of 8 and 16 floats (not intrinsics: the compiler lowers them to the target's vector width); a
// micro-kernel keeps 2 x MR of them as accumulators in registers, so it computes 2 vectors' width of columns of C
// (kNR). The 16-float kernels run on AVX-512 hosts: every output element is the same fused sum over k in the same
// order at either width, so the width changes the host's speed only.
typedef float Vec8 __attribute__((vector_size(32)));
typedef float Vec16 __attribute__((vector_size(64)));
template <class V>
constexpr int kLanesOf = static_cast<int>(sizeof(V) / sizeof(float));
template <class V>
constexpr int kNR = 2 * kLanesOf<V>;

// acc + a * b, fused in gemmF32Fma's kernels (one rounding, at any optimisation level): clang's vector fma builtin, or
// GCC's fmaf per lane, which becomes vfmadd in gemmF32Fma's AVX2+FMA code. Elsewhere the product is rounded first.
template <bool kFma, class V>
inline __attribute__((always_inline)) void madd(V& acc, float a, const V& b) {
  if constexpr (kFma) {
#if defined(__clang__)
    acc = __builtin_elementwise_fma(a - V{}, b, acc);  // a - (+0) is a, -0 and NaN included
#else
    for (int i = 0; i < kLanesOf<V>; ++i) acc[i] = __builtin_fmaf(a, b[i], acc[i]);
#endif
  } else {
    acc += a * b;
  }
}

template <class V, int MR, bool kLoadC, bool kFma>
inline __attribute__((always_inline)) void microF32(const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                                                    int64_t ldc, int64_t kc) {
  V lo[MR], hi[MR];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    if (kLoadC) {
      __builtin_memcpy(&lo[r], C + r * ldc, sizeof(V));
      __builtin_memcpy(&hi[r], C + r * ldc + kLanesOf<V>, sizeof(V));
    } else {
      lo[r] = V{};
      hi[r] = V{};
    }
  }
  for (int64_t k = 0; k < kc; ++k) {
    V b0, b1;
    __builtin_memcpy(&b0, B + k * ldb, sizeof(V));
    __builtin_memcpy(&b1, B + k * ldb + kLanesOf<V>, sizeof(V));
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const float a = A[r * lda + k];
      madd<kFma>(lo[r], a, b0);
      madd<kFma>(hi[r], a, b1);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    __builtin_memcpy(C + r * ldc, &lo[r], sizeof(V));
    __builtin_memcpy(C + r * ldc + kLanesOf<V>, &hi[r], sizeof(V));
  }
}

// One or two rows of C (a matrix-vector product: an RNN step's [64] x [64, 64]) across NV vectors of columns of B
// read in place (64 or 32 columns: 8 independent 8-lane sums, or 4 of 16 lanes), enough to keep the FMA units busy
// where 2 x MR sums wait on each other.
template <class V, int MR, int NV, bool kLoadC, bool kFma>
inline __attribute__((always_inline)) void microF32Wide(const float* A, int64_t lda, const float* B, int64_t ldb,
                                                        float* C, int64_t ldc, int64_t kc) {
  V acc[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      if (kLoadC) __builtin_memcpy(&acc[r][v], C + r * ldc + kLanesOf<V> * v, sizeof(V));
      else acc[r][v] = V{};
    }
  for (int64_t k = 0; k < kc; ++k) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      V b;
      __builtin_memcpy(&b, B + k * ldb + kLanesOf<V> * v, sizeof(V));
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) madd<kFma>(acc[r][v], A[r * lda + k], b);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) __builtin_memcpy(C + r * ldc + kLanesOf<V> * v, &acc[r][v], sizeof(V));
}

template <class V, bool kLoadC, bool kFma>
inline __attribute__((always_inline)) void microF32Rows(int mr, const float* A, int64_t lda, const float* B,
                                                        int64_t ldb, float* C, int64_t ldc, int64_t kc) {
  switch (mr) {
    case 6: microF32<V, 6, kLoadC, kFma>(A, lda, B, ldb, C, ldc, kc); return;
    case 5: microF32<V, 5, kLoadC, kFma>(A, lda, B, ldb, C, ldc, kc); return;
    case 4: microF32<V, 4, kLoadC, kFma>(A, lda, B, ldb, C, ldc, kc); return;
    case 3: microF32<V, 3, kLoadC, kFma>(A, lda, B, ldb, C, ldc, kc); return;
    case 2: microF32<V, 2, kLoadC, kFma>(A, lda, B, ldb, C, ldc, kc); return;
    default: microF32<V, 1, kLoadC, kFma>(A, lda, B, ldb, C, ldc, kc); return;
  }
}

template <class V, bool kFma>
inline __attribute__((always_inline)) void gemmF32Body(const float* A, int64_t lda, const float* B, int64_t ldb,
                                                       float* C, int64_t ldc, int64_t m, int64_t n, int64_t k) {
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i) std::fill(C + i * ldc, C + i * ldc + n, 0.0f);
    return;
  }
  if (k == 1) {  // XLA rewrites a dot of one term per result into a multiply: the product itself (-0 stays -0)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) C[i * ldc + j] = A[i * lda] * B[j];
    return;
  }
  constexpr int64_t kNr = kNR<V>;
  alignas(64) float pad[kKC * kNr];  // a column panel of B, packed (and zero-padded to kNr columns)
  alignas(64) float tmp[kMR * kNr];  // the matching C rows
  const bool small = m <= kSmallM;
  // 7 or 8 rows run as 4 + the rest (not 6 + 1 or 2, whose kernels load B twice per 2 to 4 vector products).
  const int64_t rows = small && m > kMR ? 4 : kMR;
  for (int64_t k0 = 0; k0 < k; k0 += kKC) {
    const int64_t kc = std::min(kKC, k - k0);
    const bool first = k0 == 0;
    int64_t j_wide = 0;  // columns [0, j_wide) done by the wide kernel
    if (m <= 2) {
      const float* ap = A + k0;
      for (const int64_t w = m == 1 ? 64 : 32; j_wide + w <= n; j_wide += w) {
        const float* bp = B + k0 * ldb + j_wide;
        float* cp = C + j_wide;
        if (m == 1) {
          if (first) microF32Wide<V, 1, 64 / kLanesOf<V>, false, kFma>(ap, lda, bp, ldb, cp, ldc, kc);
          else microF32Wide<V, 1, 64 / kLanesOf<V>, true, kFma>(ap, lda, bp, ldb, cp, ldc, kc);
        } else {
          if (first) microF32Wide<V, 2, 32 / kLanesOf<V>, false, kFma>(ap, lda, bp, ldb, cp, ldc, kc);
          else microF32Wide<V, 2, 32 / kLanesOf<V>, true, kFma>(ap, lda, bp, ldb, cp, ldc, kc);
        }
      }
    }
    for (int64_t j0 = j_wide; j0 < n; j0 += kNr) {
      const int64_t nr = std::min<int64_t>(kNr, n - j0);
      const float* bp = B + k0 * ldb + j0;
      int64_t ldbp = ldb;
      if (nr < kNr || !small) {  // pack: contiguous rows avoid cache-set conflicts of a large ldb; zero-pad a tail
        for (int64_t kk = 0; kk < kc; ++kk) {
          float* row = pad + kk * kNr;
          if (nr == kNr) {  // one row copy: g++ makes the loop below a memcpy and a memset call per row
            __builtin_memcpy(row, bp + kk * ldb, sizeof(float) * kNr);
            continue;
          }
          for (int64_t j = 0; j < nr; ++j) row[j] = bp[kk * ldb + j];
          for (int64_t j = nr; j < kNr; ++j) row[j] = 0.0f;
        }
        bp = pad;
        ldbp = kNr;
      }
      for (int64_t i0 = 0; i0 < m; i0 += rows) {
        const int mr = static_cast<int>(std::min<int64_t>(rows, m - i0));
        const float* ap = A + i0 * lda + k0;
        float* cp = C + i0 * ldc + j0;
        if (nr == kNr) {
          if (first) microF32Rows<V, false, kFma>(mr, ap, lda, bp, ldbp, cp, ldc, kc);
          else microF32Rows<V, true, kFma>(mr, ap, lda, bp, ldbp, cp, ldc, kc);
          continue;
        }
        if (!first)
          for (int r = 0; r < mr; ++r) std::copy(cp + r * ldc, cp + r * ldc + nr, tmp + r * kNr);
        if (first) microF32Rows<V, false, kFma>(mr, ap, lda, bp, ldbp, tmp, kNr, kc);
        else microF32Rows<V, true, kFma>(mr, ap, lda, bp, ldbp, tmp, kNr, kc);
        for (int r = 0; r < mr; ++r) std::copy(tmp + r * kNr, tmp + r * kNr + nr, cp + r * ldc);
      }
    }
  }
}

void gemmF32Portable(const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc, int64_t m,
                     int64_t n, int64_t k) {
  gemmF32Body<Vec8, false>(A, lda, B, ldb, C, ldc, m, n, k);
}

#if defined(__x86_64__) && defined(__GNUC__)
// The same code for hosts with AVX2 and FMA, chosen at run time, each product added to its sum in one fused
// multiply-add (madd), as XLA:CPU's dot kernels do on such a host: [-3.4e38, -37] . [-11.1, 3.4e38] is inf (the
// first product overflows, the second is fused into it), where a rounded second product gives inf - inf = NaN.
// Without FMA the portable build runs, adding rounded products as XLA:CPU does there.
__attribute__((target("avx2,fma"))) void gemmF32Fma(const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                                                    int64_t ldc, int64_t m, int64_t n, int64_t k) {
  gemmF32Body<Vec8, true>(A, lda, B, ldb, C, ldc, m, n, k);
}
// ... and for AVX-512 hosts, 16 lanes at a time: the same fused multiply-adds in the same order per element. (clang
// 18 splits 512-bit vectors into two 256-bit ones unless the target names evex512, which g++ 12 does not know.)
#if defined(__clang__) && __clang_major__ >= 18
#define IPU_ZMM __attribute__((target("avx512f,avx512vl,evex512,avx2,fma")))
#else
#define IPU_ZMM __attribute__((target("avx512f,avx512vl,avx2,fma")))
#endif
IPU_ZMM void gemmF32Avx512(const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc, int64_t m,
                           int64_t n, int64_t k) {
  gemmF32Body<Vec16, true>(A, lda, B, ldb, C, ldc, m, n, k);
}
#undef IPU_ZMM
#endif


void gemmF32(const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc, int64_t m, int64_t n,
             int64_t k) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (hostHasAvx512() && hostHasFma()) return gemmF32Avx512(A, lda, B, ldb, C, ldc, m, n, k);
  if (hostHasAvx2() && hostHasFma()) return gemmF32Fma(A, lda, B, ldb, C, ldc, m, n, k);
#endif
  gemmF32Portable(A, lda, B, ldb, C, ldc, m, n, k);
}

// Integers (wrapping u32) and bools (OR of ANDs): i-k-j over rows of B, skipping zero multipliers (exact for these).
template <class Acc>
void gemmExact(const Acc* A, int64_t lda, const Acc* B, int64_t ldb, Acc* C, int64_t ldc, int64_t m, int64_t n,
               int64_t k) {
  for (int64_t i = 0; i < m; ++i) {
    Acc* __restrict c = C + i * ldc;
    std::fill(c, c + n, Acc(0));
    for (int64_t kk = 0; kk < k; ++kk) {
      const Acc x = A[i * lda + kk];
      if (x == 0) continue;
      const Acc* __restrict b = B + kk * ldb;
      if constexpr (std::is_same<Acc, uint8_t>::value) {
        for (int64_t j = 0; j < n; ++j) c[j] = static_cast<uint8_t>(c[j] | b[j]);  // x is 1
      } else {
        for (int64_t j = 0; j < n; ++j) c[j] += x * b[j];
      }
    }
  }
}

inline void gemm(const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc, int64_t m, int64_t n,
                 int64_t k) {
  gemmF32(A, lda, B, ldb, C, ldc, m, n, k);
}
inline void gemm(const uint32_t* A, int64_t lda, const uint32_t* B, int64_t ldb, uint32_t* C, int64_t ldc, int64_t m,
                 int64_t n, int64_t k) {
  gemmExact(A, lda, B, ldb, C, ldc, m, n, k);
}
inline void gemm(const uint8_t* A, int64_t lda, const uint8_t* B, int64_t ldb, uint8_t* C, int64_t ldc, int64_t m,
                 int64_t n, int64_t k) {
  gemmExact(A, lda, B, ldb, C, ldc, m, n, k);
}
inline void gemm(const uint64_t* A, int64_t lda, const uint64_t* B, int64_t ldb, uint64_t* C, int64_t ldc, int64_t m,
                 int64_t n, int64_t k) {
  gemmExact(A, lda, B, ldb, C, ldc, m, n, k);
}
// f64 (emulated in software): each element a fused sum over k in order, as the f32 kernels sum; i-k-j over rows of B.
// Inlined into an FMA build for FMA hosts, where the fused multiply-adds vectorise (elsewhere each is libm's fma).
__attribute__((always_inline)) inline void gemmF64Body(const double* A, int64_t lda, const double* B, int64_t ldb,
                                                       double* C, int64_t ldc, int64_t m, int64_t n, int64_t k) {
  for (int64_t i = 0; i < m; ++i) {
    double* __restrict c = C + i * ldc;
    for (int64_t j = 0; j < n; ++j) c[j] = 0.0;
    for (int64_t kk = 0; kk < k; ++kk) {
      const double x = A[i * lda + kk];
      const double* __restrict b = B + kk * ldb;
      for (int64_t j = 0; j < n; ++j) c[j] = __builtin_fma(x, b[j], c[j]);
    }
  }
}
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,fma"))) void gemmF64Fma(const double* A, int64_t lda, const double* B, int64_t ldb,
                                                    double* C, int64_t ldc, int64_t m, int64_t n, int64_t k) {
  gemmF64Body(A, lda, B, ldb, C, ldc, m, n, k);
}
#endif
inline void gemm(const double* A, int64_t lda, const double* B, int64_t ldb, double* C, int64_t ldc, int64_t m,
                 int64_t n, int64_t k) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (hostHasFma() && hostHasAvx2()) return gemmF64Fma(A, lda, B, ldb, C, ldc, m, n, k);
#endif
  gemmF64Body(A, lda, B, ldb, C, ldc, m, n, k);
}

// ---- the plan ----


// One dimension cut into `parts` blocks of `block` elements (the last may be shorter).
struct Split {
  int64_t parts = 1, block = 0;
  int64_t begin(int64_t i) const { return i * block; }
  int64_t size(int64_t i, int64_t dim) const {
    return std::max<int64_t>(0, std::min(dim, (i + 1) * block) - i * block);
  }
};

Split makeSplit(int64_t dim, int64_t parts) {
  Split s;
  if (dim <= 0) return s;  // one empty block
  s.block = ceilDiv(dim, std::max<int64_t>(1, std::min(parts, dim)));
  s.parts = ceilDiv(dim, s.block);
  return s;
}

struct DotPlan {
  int64_t B = 1, M = 1, N = 1, K = 1;
  // serial: M cut into row chunks computed one after another over every tile, each with the grid b, m, n, k (m over
  // a chunk's rows), their partials kept until one reduction of the whole output (poplin's serial split, by which it
  // fits a matmul whose blocks do not fit at once). One part (all M rows) unless no plan of the whole fits.
  Split serial, b, m, n, k;
  int64_t blocks() const { return b.parts * m.parts * n.parts * k.parts; }
  int64_t rowsBegin(int64_t chunk) const { return serial.begin(chunk); }
  int64_t rowsIn(int64_t chunk) const { return serial.size(chunk, M); }
  // Block p -> its index along each dimension (k fastest: the pK partials of an output block are neighbours).
  void coords(int64_t p, int64_t* ib, int64_t* im, int64_t* in, int64_t* ik) const {
    *ik = p % k.parts;
    p /= k.parts;
    *in = p % n.parts;
    p /= n.parts;
    *im = p % m.parts;
    *ib = p / m.parts;
  }
};

// Candidate part counts for a dimension: powers of two, divisors of the tile count, and the whole dimension.
std::vector<int64_t> candidates(int64_t dim, int64_t tiles) {
  std::vector<int64_t> c;
  const int64_t cap = std::max<int64_t>(1, std::min(dim, tiles));
  for (int64_t p = 1; p <= cap; p *= 2) c.push_back(p);
  for (int64_t p = tiles; p >= 1; p /= 2)
    if (p <= cap) c.push_back(p);
  c.push_back(cap);
  std::vector<int64_t> parts;
  for (int64_t p : c) parts.push_back(makeSplit(dim, p).parts);
  std::sort(parts.begin(), parts.end());
  parts.erase(std::unique(parts.begin(), parts.end()), parts.end());
  return parts;
}

// Elements of the region [b0,b1) x [r0,r1) x [c0,c1) of a row-major [*, R, C] array lying in flat range [lo, hi).
int64_t regionOverlap(int64_t R, int64_t C, int64_t b0, int64_t b1, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                      int64_t lo, int64_t hi) {
  if (lo >= hi || R <= 0 || C <= 0 || r0 >= r1 || c0 >= c1) return 0;
  const int64_t first_row = lo / C, last_row = (hi - 1) / C;
  b0 = std::max(b0, first_row / R);
  b1 = std::min(b1, last_row / R + 1);
  int64_t total = 0;
  for (int64_t bi = b0; bi < b1; ++bi) {
    const int64_t rs = std::max(bi * R + r0, first_row), re = std::min(bi * R + r1 - 1, last_row);
    for (int64_t row = rs; row <= re; ++row) {
      const int64_t s = std::max(row * C + c0, lo), e = std::min(row * C + c1, hi);
      if (e > s) total += e - s;
    }
  }
  return total;
}

struct PlanInputs {
  int64_t B, M, N, K;
  DType dt, partials;  // the operands' type and the partials' (partialsType)
  int64_t in_bytes, acc_bytes;
  int tiles, workers;
  double bytes_per_cycle;
  int64_t out_per_tile;  // elements per tile of the output's linear mapping
  int out_tiles;
  int64_t cap;  // per-tile working-set limit
  const DeviceDescription* device;  // the chip's AMP rates
};

// A plan's inputs for a [B] M x K x N product of `dt` into an output mapped as `omap` on `dev`: its operand and
// accumulator sizes, and the device's tiles, workers, exchange and per-tile working-set limit (poplin's
// availableMemoryProportion of a tile).
PlanInputs planInputs(int64_t B, int64_t M, int64_t N, int64_t K, DType dt, DType partials, const TileMapping& omap,
                      const DeviceDescription& dev, double memory_proportion) {
  return {B,
          M,
          N,
          K,
          dt,
          partials,
          static_cast<int64_t>(dtypeSize(dt)),
          static_cast<int64_t>(dtypeSize(partials)),
          dev.num_tiles,
          dev.num_worker_contexts,
          dev.exchange_bytes_per_cycle,
          omap.per_tile,
          omap.tilesUsed(),
          static_cast<int64_t>(static_cast<double>(dev.bytes_per_tile) *
                               (memory_proportion > 0 ? memory_proportion : cost::kAvailableMemoryProportion)),
          &dev};
}

// The cycles of a plan's last superstep (when it has one): each output tile receives its elements' pK partials
// and reduces them (pK > 1) or copies them into place. It depends on pK alone, so choosePlan works it out once
// per pK.
uint64_t reductionCycles(const PlanInputs& in, int64_t pk) {
  const int64_t recv2 = in.out_per_tile * pk * in.acc_bytes;
  return cost::exchange(recv2, in.bytes_per_cycle) + in.device->sync_cycles +
         (pk > 1 ? cost::reduce(in.partials, in.out_per_tile * pk, in.out_per_tile, in.workers)
                 : cost::copy(in.out_per_tile * in.acc_bytes, in.workers));
}

// The estimated cycles of a plan (interior blocks, no operand locality) and its per-tile working set: its row
// chunks' matmul supersteps one after another, each tile keeping its partial block of every chunk, then one
// reduction of the whole output (`reduction`: reductionCycles of the plan's pK).
void estimate(const PlanInputs& in, const DotPlan& p, uint64_t reduction, uint64_t* cycles, int64_t* working) {
  const int64_t bb = std::max<int64_t>(p.b.block, 1), bm = std::max<int64_t>(p.m.block, 1);
  const int64_t bn = std::max<int64_t>(p.n.block, 1), bk = p.k.block;
  const int64_t lhs = bb * bm * bk * in.in_bytes, rhs = bb * bk * bn * in.in_bytes, recv1 = lhs + rhs;
  const int64_t chunks = p.serial.parts, part = bb * bm * bn * in.acc_bytes * chunks;
  // Supertile neighbours (k fastest, then n, m) share their lhs block when k is not split and n is, their rhs
  // block when only m is (supertileExchangeBytes).
  const bool share_l = p.k.parts == 1 && p.n.parts > 1, share_r = p.k.parts == 1 && p.n.parts == 1 && p.m.parts > 1;
  const int64_t bus = recv1 - (share_l ? lhs / 2 : 0) - (share_r ? rhs / 2 : 0);
  const uint64_t c1 = cost::matmul(in.dt, bb * bm * bn, bk, *in.device) + cost::exchange(bus, in.bytes_per_cycle) +
                      in.device->sync_cycles;
  const bool second = p.k.parts > 1 || p.blocks() > 1 || in.out_tiles > 1 || chunks > 1;
  const int64_t recv2 = second ? in.out_per_tile * p.k.parts * in.acc_bytes : 0;
  *cycles = static_cast<uint64_t>(chunks) * c1 + (second ? reduction : 0);
  *working = std::max(recv1 + part, part + recv2) + 2 * cost::kVertexStateBytes;
}

// serial: whether row chunks may be computed one after another when no plan of the whole fits (dot_general's own
// kernel runs them; a convolution's planner does not).
DotPlan choosePlan(const PlanInputs& in, bool serial = false) {
  DotPlan best;
  best.B = in.B, best.M = in.M, best.N = in.N, best.K = in.K;
  bool have_fit = false;
  uint64_t best_cycles = 0;
  int64_t best_working = 0, best_blocks = 0;
  const int64_t T = in.tiles;
  const std::vector<int64_t> cb = candidates(in.B, T), cn = candidates(in.N, T);
  const std::vector<int64_t> ck = in.K > 0 ? candidates(in.K, T) : std::vector<int64_t>{1};
  // What does not depend on the other dimensions' parts, once per candidate (the search tries thousands of grids).
  const auto splits = [](int64_t dim, const std::vector<int64_t>& parts) {
    std::vector<Split> out;
    for (int64_t p : parts) out.push_back(makeSplit(dim, p));
    return out;
  };
  const std::vector<Split> sb = splits(in.B, cb), sn = splits(in.N, cn), sk = splits(in.K, ck);
  std::vector<uint64_t> reduction;
  for (const Split& k : sk) reduction.push_back(reductionCycles(in, k.parts));
  bool first = true;
  const auto search = [&](int64_t chunks) {
    const Split rows = makeSplit(in.M, chunks);
    if (rows.parts != chunks) return;  // the same row chunks as a smaller count
    const std::vector<int64_t> cm = candidates(std::max<int64_t>(rows.block, 1), T);
    const std::vector<Split> sm = splits(rows.block, cm);
    for (size_t ib = 0; ib < cb.size(); ++ib)
      for (size_t im = 0; im < cm.size(); ++im) {
        const int64_t pbm = cb[ib] * cm[im];
        if (pbm > T) break;
        for (size_t in_ = 0; in_ < cn.size(); ++in_) {
          const int64_t pbmn = pbm * cn[in_];
          if (pbmn > T) break;
          for (size_t ik = 0; ik < ck.size(); ++ik) {
            if (pbmn * ck[ik] > T) break;
            DotPlan p = best;
            p.serial = rows;
            p.b = sb[ib], p.m = sm[im], p.n = sn[in_], p.k = sk[ik];
            uint64_t cycles;
            int64_t working;
            estimate(in, p, reduction[ik], &cycles, &working);
            const bool fits = working <= in.cap;
            bool better;
            if (first) better = true;
            else if (fits != have_fit) better = fits;
            else if (fits) better = cycles < best_cycles || (cycles == best_cycles && p.blocks() < best_blocks);
            else better = working < best_working || (working == best_working && cycles < best_cycles);
            if (better) {
              best = p;
              best_cycles = cycles;
              best_working = working;
              best_blocks = p.blocks();
              have_fit = fits;
              first = false;
            }
          }
        }
      }
  };
  search(1);
  // No grid of the whole fits the working-set limit: as poplin does, the rows in chunks, the fewest that fit (and up to
  // twice as many, for a faster grid).
  int64_t fitted = 0;
  for (int64_t chunks = 2; serial && !(fitted && chunks > 2 * fitted) && chunks <= std::min<int64_t>(in.M, 256);
       ++chunks) {
    search(chunks);
    if (have_fit && !fitted) fitted = chunks;
  }
  return best;
}

// choosePlan(in, serial: true), once per compile for the same inputs (Lowerer::matmulPlans; the device is the
// compile's).
DotPlan choosePlanOnce(Lowerer& lowerer, const PlanInputs& in) {
  int64_t bpc = 0;
  static_assert(sizeof(bpc) == sizeof(in.bytes_per_cycle), "a double's bits as a key");
  std::memcpy(&bpc, &in.bytes_per_cycle, sizeof(bpc));
  const std::vector<int64_t> key{in.B,
                                 in.M,
                                 in.N,
                                 in.K,
                                 static_cast<int64_t>(in.dt),
                                 static_cast<int64_t>(in.partials),
                                 in.in_bytes,
                                 in.acc_bytes,
                                 in.tiles,
                                 in.workers,
                                 bpc,
                                 in.out_per_tile,
                                 in.out_tiles,
                                 in.cap};
  std::vector<int64_t>& known = lowerer.matmulPlans()[key];
  DotPlan p;
  Split* splits[] = {&p.serial, &p.b, &p.m, &p.n, &p.k};
  if (known.empty()) {
    p = choosePlan(in, /*serial=*/true);
    known = {p.B, p.M, p.N, p.K};
    for (const Split* s : splits) known.insert(known.end(), {s->parts, s->block});
    return p;
  }
  p.B = known[0], p.M = known[1], p.N = known[2], p.K = known[3];
  for (size_t i = 0; i < 5; ++i) *splits[i] = Split{known[4 + 2 * i], known[5 + 2 * i]};
  return p;
}

// Superstep 1: block p's partial [b, m, n] over its k range, into the output (pK = 1, same type) or the partials.
// Superstep 2: the pK partials of each output element summed in k order and converted once to the result type.
// With half partials (partialsType) each partial is rounded to f16 first: what its tile keeps and sends.
template <class In, class Acc, class Out>
class DotKernel : public Kernel {
 public:
  DotKernel(int lhs, int rhs, int out, OperandLayout l, OperandLayout r, DotPlan plan, int scratch_l, int scratch_r,
            int scratch_p, bool half_partials)
      : lhs_(lhs), rhs_(rhs), out_(out), l_(std::move(l)), r_(std::move(r)), plan_(plan), scratch_l_(scratch_l),
        scratch_r_(scratch_r), scratch_p_(scratch_p), half_partials_(half_partials) {}

  void prepare(RunState& s) const override {
    stage(s, lhs_, l_, scratch_l_);
    stage(s, rhs_, r_, scratch_r_);
    // Each K block's partials (pK > 1, unless each host block sums its own), or the sums before their conversion
    // (pK = 1 into another result type)
    int64_t planes = 0;
    if (plan_.k.parts > 1) planes = sumsInBlocks() ? 0 : plan_.k.parts;
    else if (!direct()) planes = 1;
    const size_t n = static_cast<size_t>(planes * plan_.B * plan_.M * plan_.N);
    std::vector<uint8_t>& buf = s.scratch[static_cast<size_t>(scratch_p_)];
    if (buf.size() < n * sizeof(Acc)) buf.resize(n * sizeof(Acc));
  }

  void compute(RunState& s, int64_t b, int64_t e) const override { computeStep(s, 0, b, e); }

  void computeStep(RunState& s, size_t step, int64_t b, int64_t e) const override {
    if (static_cast<int64_t>(step) < plan_.serial.parts) blocks(s, static_cast<int64_t>(step), b, e);
    else reduce(s, b, e);
  }

 private:
  static constexpr bool kSameType =
      std::is_same<In, Acc>::value || (std::is_same<In, int32_t>::value && std::is_same<Acc, uint32_t>::value);
  static constexpr bool kOutIsAcc =
      std::is_same<Out, Acc>::value || (std::is_same<Out, int32_t>::value && std::is_same<Acc, uint32_t>::value);
  bool direct() const { return kOutIsAcc && plan_.k.parts == 1; }

  // The host computes a chunk's matmul superstep in its own blocks: only the plan's k split decides which partial an
  // output's products are summed into (and so the rounding); its serial/batch/M/N split does not change any result.
  // The tiles [p0, p1) of a call stand for the same fraction of the chunk's host blocks, so that calls covering all
  // tiles once cover all its host blocks once. With pK > 1 and enough host blocks to share among the host threads,
  // a block computes its pK partials one after another and sums them at once (sumsInBlocks), with the partials
  // still in the host's cache; with fewer, each (partial, block) is an item of its own and the reduction superstep
  // sums them. Either way in k order, as the IPU's reduction superstep adds the tiles' partials.
  static constexpr int64_t kHostRows = 96, kHostCols = 256;
  int64_t hostColBlocks() const { return std::max<int64_t>(1, ceilDiv(plan_.N, kHostCols)); }
  int64_t hostRowBlocks(int64_t chunk) const { return std::max<int64_t>(1, ceilDiv(plan_.rowsIn(chunk), kHostRows)); }
  bool sumsInBlocks() const {
    return plan_.k.parts > 1 && plan_.B * hostRowBlocks(0) * hostColBlocks() >= kHostBlocksToShare;
  }

  void blocks(RunState& s, int64_t chunk, int64_t p0, int64_t p1) const {
    const DotPlan& P = plan_;
    const Acc* lhs = operand(s, lhs_, l_, scratch_l_);
    const Acc* rhs = operand(s, rhs_, r_, scratch_r_);
    const int64_t outs = P.B * P.M * P.N;
    const bool in_blocks = sumsInBlocks();
    const int64_t pk = P.k.parts, item_parts = in_blocks ? 1 : pk;
    Acc* part = direct() ? reinterpret_cast<Acc*>(s.at<Out>(out_))
                         : reinterpret_cast<Acc*>(s.scratch[static_cast<size_t>(scratch_p_)].data());
    Out* out = s.at<Out>(out_);
    const int64_t r0 = P.rowsBegin(chunk), r1 = r0 + P.rowsIn(chunk);
    const int64_t hm = hostRowBlocks(chunk), hn = hostColBlocks();
    const int64_t items = item_parts * P.B * hm * hn, tiles = P.blocks();
    // (one host block, as a loop's small matmul is: the call that covers the last tile computes it, without the
    // integer divisions of the general case, which cost as much as a 64 x 64 matrix-vector product's arithmetic)
    const int64_t i0 = items == 1 ? 0 : p0 * items / tiles, i1 = items == 1 ? (p1 == tiles) : p1 * items / tiles;
    std::vector<Acc> sum, partial;  // a host block's running sum of partials, and its next partial (in_blocks)
    if (in_blocks && i1 > i0) {
      sum.resize(static_cast<size_t>(kHostRows * kHostCols));
      partial.resize(sum.size());
    }
    for (int64_t it = i0; it < i1; ++it) {
      int64_t in = 0, im = 0, bi = 0, ik = 0;
      if (items > 1) {
        int64_t x = it;
        in = x % hn;
        x /= hn;
        im = x % hm;
        x /= hm;
        bi = x % P.B;
        ik = x / P.B;
      }
      const int64_t m0 = r0 + im * kHostRows, n0 = in * kHostCols;
      const int64_t mb = std::min(r1, m0 + kHostRows) - m0, nn = std::min(P.N, n0 + kHostCols) - n0;
      if (mb <= 0 || nn <= 0) continue;
      const int64_t o = (bi * P.M + m0) * P.N + n0;
      const Acc* a = lhs + (bi * P.M + m0) * P.K;
      const Acc* b = rhs + bi * P.K * P.N + n0;
      if (!in_blocks) {
        const int64_t k0 = P.k.begin(ik), kb = P.K > 0 ? P.k.size(ik, P.K) : 0;
        Acc* c = part + ik * outs + o;
        gemm(a + k0, P.K, b + k0 * P.N, P.N, c, P.N, mb, nn, kb);
        if (!direct() && pk == 1)  // pK = 1 but another result type: convert the block now
          for (int64_t i = 0; i < mb; ++i) convertRow(c + i * P.N, out + o + i * P.N, nn);
        continue;
      }
      for (ik = 0; ik < pk; ++ik) {
        const int64_t k0 = P.k.begin(ik), kb = P.k.size(ik, P.K);
        Acc* c = ik == 0 ? sum.data() : partial.data();
        gemm(a + k0, P.K, b + k0 * P.N, P.N, c, nn, mb, nn, kb);
        addPartial(sum.data(), c, mb * nn, ik == 0, half_partials_);
      }
      for (int64_t i = 0; i < mb; ++i) convertRow(sum.data() + i * nn, out + o + i * P.N, nn);
    }
  }

  // The reduction superstep where the blocks left their partials apart: output elements [b, e).
  void reduce(RunState& s, int64_t b, int64_t e) const {
    if (plan_.k.parts == 1 || sumsInBlocks()) return;  // the host's results are whole already
    const int64_t outs = plan_.B * plan_.M * plan_.N;
    const Acc* part = reinterpret_cast<const Acc*>(s.scratch[static_cast<size_t>(scratch_p_)].data());
    Out* out = s.at<Out>(out_);
    constexpr int64_t kChunk = 1024;
    Acc acc[kChunk];
    for (int64_t c0 = b; c0 < e; c0 += kChunk) {
      const int64_t len = std::min(kChunk, e - c0);
      std::copy(part + c0, part + c0 + len, acc);
      for (int64_t kp = 0; kp < plan_.k.parts; ++kp)
        addPartial(acc, part + kp * outs + c0, len, kp == 0, half_partials_);
      convertRow(acc, out + c0, len);
    }
  }

  // Accumulators -> results, rounding once (f16 rows as one vector conversion).
  static void convertRow(const Acc* a, Out* o, int64_t n) {
    if constexpr (std::is_same<Out, uint16_t>::value && std::is_same<Acc, float>::value) floatsToHalves(a, o, n);
    else
      for (int64_t j = 0; j < n; ++j) o[j] = fromAcc<Out>(a[j]);
  }

  // An operand copied into canonical layout (host speed only: the same elements, in the run's host threads when
  // it is large, as a superstep's tiles are).
  void stage(RunState& s, int slot, const OperandLayout& l, int scratch) const {
    if (kSameType && l.identity()) return;
    int64_t total = 1;
    for (int64_t d : l.shape) total *= d;
    std::vector<uint8_t>& buf = s.scratch[static_cast<size_t>(scratch)];
    buf.resize(static_cast<size_t>(total) * sizeof(Acc));
    const In* x = s.at<const In>(slot);
    Acc* y = reinterpret_cast<Acc*>(buf.data());
    forRanges(s, total, [&](int64_t b, int64_t e) { canonicalize(x, y, l, b, e); });
  }

  const Acc* operand(RunState& s, int slot, const OperandLayout& l, int scratch) const {
    if (kSameType && l.identity()) return s.at<const Acc>(slot);
    return reinterpret_cast<const Acc*>(s.scratch[static_cast<size_t>(scratch)].data());
  }

  int lhs_, rhs_, out_;
  OperandLayout l_, r_;
  DotPlan plan_;
  int scratch_l_, scratch_r_, scratch_p_;
  bool half_partials_;  // partialsType half: each partial rounded to f16 before the reduction
};

// A dot_general as a batched matmul: each operand's layout (batch, then free and contracting dimensions in the
// order the kernel reads them) and the sizes of the [batch, m, n, k] iteration space, checked against the result.
struct DotShape {
  OperandLayout lhs, rhs;
  int64_t batch = 1, m = 1, n = 1, k = 1;
};

// One operand's layout: its batch dimensions, then (lhs) free then contracting, or (rhs) contracting then free.
OperandLayout readLayout(const Lowerer& lowerer, const OpContext& ctx, const TensorType& t,
                         const std::vector<int64_t>& batch, const std::vector<int64_t>& contract, bool contract_last,
                         std::vector<int64_t>* free) {
  std::vector<bool> used(t.shape.size(), false);
  for (const auto* list : {&batch, &contract})
    for (int64_t d : *list) {
      if (d < 0 || d >= static_cast<int64_t>(t.shape.size()) || used[static_cast<size_t>(d)])
        lowerer.invalid(ctx, "dimension numbers are out of range or repeated");
      used[static_cast<size_t>(d)] = true;
    }
  for (size_t d = 0; d < t.shape.size(); ++d)
    if (!used[d]) free->push_back(static_cast<int64_t>(d));
  OperandLayout l;
  l.shape = t.shape;
  l.perm = batch;
  const std::vector<int64_t>& second = contract_last ? *free : contract;
  const std::vector<int64_t>& third = contract_last ? contract : *free;
  l.perm.insert(l.perm.end(), second.begin(), second.end());
  l.perm.insert(l.perm.end(), third.begin(), third.end());
  return l;
}

DotShape readDot(const Lowerer& lowerer, const OpContext& ctx) {
  const Op& op = *ctx.op;
  const TensorType& lhs = ctx.in_types[0];
  const TensorType& rhs = ctx.in_types[1];
  if (ctx.out_types.size() != 1) lowerer.invalid(ctx, "expected one result");
  const TensorType& out = ctx.out_types[0];
  const std::vector<int64_t> lb = attrInts(op, "lhs_batching_dimensions", false);
  const std::vector<int64_t> rb = attrInts(op, "rhs_batching_dimensions", false);
  const std::vector<int64_t> lc = attrInts(op, "lhs_contracting_dimensions", false);
  const std::vector<int64_t> rc = attrInts(op, "rhs_contracting_dimensions", false);
  if (lb.size() != rb.size() || lc.size() != rc.size())
    lowerer.invalid(ctx, "batching and contracting dimensions must pair up");
  std::vector<int64_t> lfree, rfree;
  DotShape d;
  d.lhs = readLayout(lowerer, ctx, lhs, lb, lc, true, &lfree);
  d.rhs = readLayout(lowerer, ctx, rhs, rb, rc, false, &rfree);
  auto size = [](const TensorType& t, int64_t dim) { return t.shape[static_cast<size_t>(dim)]; };
  std::vector<int64_t> expect;
  for (size_t i = 0; i < lb.size(); ++i) {
    if (size(lhs, lb[i]) != size(rhs, rb[i])) lowerer.invalid(ctx, "batch dimension sizes differ");
    d.batch *= size(lhs, lb[i]);
    expect.push_back(size(lhs, lb[i]));
  }
  for (size_t i = 0; i < lc.size(); ++i) {
    if (size(lhs, lc[i]) != size(rhs, rc[i])) lowerer.invalid(ctx, "contracting dimension sizes differ");
    d.k *= size(lhs, lc[i]);
  }
  for (int64_t x : lfree) {
    d.m *= size(lhs, x);
    expect.push_back(size(lhs, x));
  }
  for (int64_t x : rfree) {
    d.n *= size(rhs, x);
    expect.push_back(size(rhs, x));
  }
  if (expect != out.shape)
    lowerer.invalid(ctx, "the result shape should be " + mlirTensorType(dtypeName(out.dtype), expect));
  if (lhs.dtype != rhs.dtype) lowerer.unimplemented(ctx, "dot_general needs operands of one element type");
  return d;
}

// The plan's grid, as matmul.h describes it to convolution.
MatmulPlan gridOf(const DotPlan& p) {
  MatmulPlan out;
  out.b = {p.b.parts, p.b.block}, out.m = {p.m.parts, p.m.block}, out.n = {p.n.parts, p.n.block};
  out.k = {p.k.parts, p.k.block};
  return out;
}

// Superstep 1 (once per row chunk): tile p computes block p of the chunk. It receives the parts of its lhs and rhs
// blocks it does not hold (an operand already in canonical layout is read in place where the tile has it) and keeps
// a partial block (f32, or f16 with half partials). Last superstep (when needed): each tile of the output's mapping
// receives the pK partials of its elements, less those it made.
std::vector<Superstep> dotSteps(Lowerer& lowerer, const OpContext& ctx, const DotShape& d, const DotPlan& plan,
                                DType dt, DType partials, const TileMapping& omap) {
  const int workers = lowerer.device().num_worker_contexts;
  const int64_t in_bytes = static_cast<int64_t>(dtypeSize(dt));
  const int64_t acc_bytes = static_cast<int64_t>(dtypeSize(partials));
  const int64_t batch = d.batch, m = d.m, n = d.n, k = d.k;
  const TileMapping lmap = lowerer.graph().slots[static_cast<size_t>(ctx.in[0])].mapping;
  const TileMapping rmap = lowerer.graph().slots[static_cast<size_t>(ctx.in[1])].mapping;
  const bool l_local = d.lhs.identity(), r_local = d.rhs.identity();
  const int64_t P = plan.blocks(), chunks = plan.serial.parts;
  const size_t tiles = static_cast<size_t>(lowerer.device().num_tiles);
  // The region of [batch, m, n] block p of a chunk computes.
  struct Region {
    int64_t b0, nb, m0, mb, n0, nn, k0, kb;
  };
  const auto region = [&](int64_t chunk, int64_t p) {
    int64_t ib, im, in, ik;
    plan.coords(p, &ib, &im, &in, &ik);
    const int64_t rows = plan.rowsIn(chunk);
    return Region{plan.b.begin(ib),
                  plan.b.size(ib, batch),
                  plan.rowsBegin(chunk) + plan.m.begin(im),
                  plan.m.size(im, rows),
                  plan.n.begin(in),
                  plan.n.size(in, n),
                  plan.k.begin(ik),
                  k > 0 ? plan.k.size(ik, k) : 0};
  };
  std::vector<Superstep> steps;
  const size_t mark = lowerer.pendingStep().transient.size();
  TileMapping blocks;
  blocks.num_elements = P;
  blocks.per_tile = 1;
  // Memory: while a chunk's superstep runs a tile holds its received blocks and its partials of this chunk and the
  // ones before; during the last superstep its partials and the partials it receives.
  std::vector<int64_t> held(tiles, 0), peak(tiles, 0);
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    std::vector<int64_t> recv_l(tiles, 0), recv_r(tiles, 0), macs(tiles, 0), bouts(tiles, 0);
    for (int64_t p = 0; p < P; ++p) {
      const size_t t = static_cast<size_t>(p);
      const Region r = region(chunk, p);
      int64_t l_need = r.nb * r.mb * r.kb, r_need = r.nb * r.kb * r.nn;
      if (l_local)
        l_need -= regionOverlap(m, k, r.b0, r.b0 + r.nb, r.m0, r.m0 + r.mb, r.k0, r.k0 + r.kb,
                                lmap.begin(static_cast<int>(p)), lmap.end(static_cast<int>(p)));
      if (r_local)
        r_need -= regionOverlap(k, n, r.b0, r.b0 + r.nb, r.k0, r.k0 + r.kb, r.n0, r.n0 + r.nn,
                                rmap.begin(static_cast<int>(p)), rmap.end(static_cast<int>(p)));
      recv_l[t] = l_need * in_bytes;
      recv_r[t] = r_need * in_bytes;
      bouts[t] = r.nb * r.mb * r.nn;
      macs[t] = r.kb;
      held[t] += r.nb * r.mb * r.nn * acc_bytes;
      peak[t] = std::max(peak[t], recv_l[t] + recv_r[t] + held[t]);
    }
    const std::vector<int64_t> bus = supertileExchangeBytes(gridOf(plan), recv_l, recv_r);
    steps.push_back(lowerer.superstep(std::string("matmul<") + dtypeName(dt) + ">", blocks, bus, [&](int t, int64_t) {
      return cost::matmul(dt, bouts[static_cast<size_t>(t)], macs[static_cast<size_t>(t)], lowerer.device());
    }));
    steps.back().cost_weight = static_cast<double>(
        std::max<int64_t>(1, batch * plan.rowsIn(chunk) * n / P * std::max<int64_t>(1, k / plan.k.parts)));
  }
  std::vector<int64_t> recv2(tiles, 0);
  bool second = plan.k.parts > 1 || chunks > 1;
  for (int t = 0; t < omap.tilesUsed(); ++t) {
    const int64_t lo = omap.begin(t), hi = omap.end(t);
    int64_t local = 0;
    for (int64_t chunk = 0; t < P && chunk < chunks; ++chunk) {
      const Region r = region(chunk, t);
      local += regionOverlap(m, n, r.b0, r.b0 + r.nb, r.m0, r.m0 + r.mb, r.n0, r.n0 + r.nn, lo, hi);
    }
    recv2[static_cast<size_t>(t)] = ((hi - lo) * plan.k.parts - local) * acc_bytes;
    second = second || recv2[static_cast<size_t>(t)] > 0;
  }
  if (second) {
    const int64_t pk = plan.k.parts;
    steps.push_back(lowerer.superstep(
        std::string("matmulReduce<") + dtypeName(dt) + ">", omap, recv2,
        [&](int, int64_t e) {
          return pk > 1 ? cost::reduce(partials, e * pk, e, workers) : cost::copy(e * acc_bytes, workers);
        },
        /*computes=*/pk > 1));
    steps.back().cost_weight = static_cast<double>(pk);
  }
  // (lowerer.superstep() recorded only the receive buffers.)
  lowerer.pendingStep().transient.resize(mark);
  for (size_t t = 0; t < tiles; ++t) {
    const int64_t bytes = std::max(peak[t], second ? held[t] + recv2[t] : 0);
    if (bytes > 0) lowerer.pendingStep().transient.emplace_back(static_cast<int>(t), bytes);
  }
  return steps;
}

}  // namespace

std::vector<int> lowerDot(Lowerer& lowerer, OpContext& ctx) {
  const DotShape d = readDot(lowerer, ctx);
  const TensorType& out = ctx.out_types[0];
  const int o = lowerer.newSlot(out);
  const int sl = lowerer.newScratch(), sr = lowerer.newScratch(), sp = lowerer.newScratch();
  const DType dt = ctx.in_types[0].dtype;
  const bool half = lowerer.options().half_partials;
  const DType partials = partialsType(dt, out.dtype, half);
  const TileMapping omap = lowerer.graph().slots[static_cast<size_t>(o)].mapping;
  const DotPlan plan = choosePlanOnce(lowerer, planInputs(d.batch, d.m, d.n, d.k, dt, partials, omap, lowerer.device(),
                                                          lowerer.options().available_memory_proportion));

  std::unique_ptr<Kernel> kernel;
  visitMatmulTypes(dt, out.dtype, [&](auto i, auto a, auto r) {
    using K = DotKernel<typename decltype(i)::type, typename decltype(a)::type, typename decltype(r)::type>;
    kernel = std::make_unique<K>(ctx.in[0], ctx.in[1], o, d.lhs, d.rhs, plan, sl, sr, sp, partials == DType::F16);
  });
  // fp8 operands (the C600's AMP reads quarter): their exact values summed in f32, as XLA:CPU sums their f16
  // conversions; the result is a wider float (the front end computes an fp8 result in f16 and converts it).
  visitFloat8(dt, [&](auto q) {
    visitDType(out.dtype, [&](auto r) {
      constexpr DType R = decltype(r)::value;
      if constexpr (R == DType::F16 || R == DType::BF16 || R == DType::F32) {
        using K = DotKernel<Storage<decltype(q)::value>, float, Storage<R>>;
        kernel = std::make_unique<K>(ctx.in[0], ctx.in[1], o, d.lhs, d.rhs, plan, sl, sr, sp, false);
      }
    });
  });
  if (!kernel)
    lowerer.unimplemented(ctx,
                          std::string("dot_general needs a result of its operands' element type, or a wider one of the "
                                      "same kind (preferred_element_type); not ") +
                              dtypeName(dt) + " -> " + dtypeName(out.dtype));
  std::vector<Superstep> steps;
  if (d.batch * d.m * d.n > 0) steps = dotSteps(lowerer, ctx, d, plan, dt, partials, omap);
  const double flops = 2.0 * static_cast<double>(d.batch) * static_cast<double>(d.m) * static_cast<double>(d.n) *
                       static_cast<double>(d.k);
  lowerer.emitExecute(ctx, std::move(kernel), std::move(steps), {o}, isFloat(dt) ? flops : 0);
  return {o};
}

std::vector<int64_t> supertileExchangeBytes(const MatmulPlan& plan, const std::vector<int64_t>& lhs,
                                            const std::vector<int64_t>& rhs) {
  const int64_t pk = plan.k.parts, pn = plan.n.parts, pm = plan.m.parts;
  struct Coords {
    int64_t b, m, n, k;
  };
  const auto at = [&](int64_t p) { return Coords{p / (pk * pn * pm), p / (pk * pn) % pm, p / pk % pn, p % pk}; };
  std::vector<int64_t> out(lhs.size(), 0);
  for (size_t t = 0; t < lhs.size(); ++t) {
    int64_t shared_l = 0, shared_r = 0;
    const size_t q = t ^ 1;
    if (q < lhs.size() && static_cast<int64_t>(std::max(t, q)) < plan.blocks()) {
      const Coords a = at(static_cast<int64_t>(t)), b = at(static_cast<int64_t>(q));
      if (a.b == b.b && a.k == b.k && a.m == b.m) shared_l = std::min(lhs[t], lhs[q]);
      if (a.b == b.b && a.k == b.k && a.n == b.n) shared_r = std::min(rhs[t], rhs[q]);
    }
    out[t] = lhs[t] - shared_l + (shared_l + 1) / 2 + rhs[t] - shared_r + (shared_r + 1) / 2;
  }
  return out;
}

MatmulPlan planMatmul(int64_t B, int64_t M, int64_t N, int64_t K, DType dt, DType partials, const TileMapping& omap,
                      const DeviceDescription& device, double memory_proportion) {
  return gridOf(choosePlan(planInputs(B, M, N, K, dt, partials, omap, device, memory_proportion)));
}

void hostGemmF32(const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc, int64_t m, int64_t n,
                 int64_t k) {
  gemmF32(A, lda, B, ldb, C, ldc, m, n, k);
}

}  // namespace ipu
