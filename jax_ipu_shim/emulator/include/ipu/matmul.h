// The matmul planner and host f32 GEMM of dot.cc, for the other ops poplibs plans as matmuls (convolution).
#pragma once

#include <cstdint>
#include <type_traits>

#include "ipu/dtype.h"

namespace ipu {

struct DeviceDescription;  // ipu/emulator.h
struct TileMapping;        // ipu/mapping.h

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Element type -> accumulator of matmul-like ops (the pointer only picks the overload, so f16 and u16, both
// uint16_t, are told apart by their accumulators): f32 for the floats (f16 and bf16 rounded once at the end),
// wrapping u32 for every integer, and u8 (OR of ANDs) for bool.
inline float toAcc(float x, float*) { return x; }
inline float toAcc(uint16_t x, float*) { return halfToFloat(x); }
inline float toAcc(BFloat16 x, float*) { return bfloat16BitsToFloat(x.bits); }
template <DType D>
inline float toAcc(Float8<D> x, float*) {  // fp8 operands (dot.cc): exact
  return float8ToFloat(D, x.bits);
}
template <class T, class = std::enable_if_t<std::is_integral<T>::value>>
inline uint32_t toAcc(T x, uint32_t*) {
  return static_cast<uint32_t>(static_cast<int64_t>(x));
}
inline uint8_t toAcc(uint8_t x, uint8_t*) { return x; }
// The 64-bit types (emulated): f64 sums in f64, i64/u64 wrap in 64 bits.
inline double toAcc(double x, double*) { return x; }
inline double toAcc(float x, double*) { return x; }
inline double toAcc(uint16_t x, double*) { return halfToFloat(x); }
inline double toAcc(BFloat16 x, double*) { return bfloat16BitsToFloat(x.bits); }
template <class T, class = std::enable_if_t<std::is_integral<T>::value>>
inline uint64_t toAcc(T x, uint64_t*) {
  return static_cast<uint64_t>(x);
}

// Accumulator -> element type, rounding f16/bf16 once; integers wrap to the result's width.
template <class Out, class Acc>
inline Out fromAcc(Acc a) {
  if constexpr (std::is_same<Out, uint16_t>::value && std::is_same<Acc, float>::value) return floatToHalf(a);
  else if constexpr (std::is_same<Out, BFloat16>::value) return BFloat16{floatToBFloat16Bits(a)};
  else return static_cast<Out>(a);
}

// The element types a dot_general or convolution of `in` operands may give (the same type, or preferred_element_type:
// a float widened to another float, an integer to another integer of the same signedness). constexpr: the kernels
// are instantiated for these pairs alone.
constexpr bool matmulTypes(DType in, DType out) {
  // Indices, not pointers into the table: gcc does not fold a pointer-to-element compared with nullptr.
  int a = -1, r = -1;
  for (int i = 0; i < static_cast<int>(sizeof(kDTypeTable) / sizeof(kDTypeTable[0])); ++i) {
    if (kDTypeTable[i].dtype == in) a = i;
    if (kDTypeTable[i].dtype == out) r = i;
  }
  if (a < 0 || r < 0) return false;
  const DTypeInfo &ai = kDTypeTable[a], &ri = kDTypeTable[r];
  return in == out || (ai.is_float && ri.is_float) || (ai.is_int && ri.is_int && ai.is_signed == ri.is_signed);
}

// dot_general/convolution element types: calls v(Tag<In>, Tag<Acc>, Tag<Out>) for operands of `in` and a result of
// `out` (matmulTypes); false for any other pair.
template <class V>
bool visitMatmulTypes(DType in, DType out, V&& v) {
  if (!matmulTypes(in, out) || in == DType::Token || isComplex(in) || isComplex(out))
    return false;  // c64 GEMM is not dot.cc's
  return visitDType(in, [&](auto it) {
    using IT = std::decay_t<decltype(it)>;
    if constexpr (!isComplex(IT::value)) {
      using I = typename IT::type;
      constexpr bool is_float = IT::value == DType::F32 || isNarrowFloat(IT::value);  // by DType: f16 is uint16_t
      using Acc32 =
          std::conditional_t<IT::value == DType::Bool, uint8_t, std::conditional_t<is_float, float, uint32_t>>;
      using Acc64 = std::conditional_t<IT::value == DType::F64, double, uint64_t>;
      using Acc = std::conditional_t<isWide64(IT::value), Acc64, Acc32>;
      visitDType(out, [&](auto ot) {
        using OT = std::decay_t<decltype(ot)>;
        using O = typename OT::type;
        // an f64 result of f32 operands sums in f64; a wider integer result in 64 bits
        if constexpr (matmulTypes(IT::value, OT::value) && !isComplex(OT::value)) {
          if constexpr (isWide64(OT::value) && !isWide64(IT::value) && IT::value != DType::Bool)
            v(TypeTag<I>{}, TypeTag<std::conditional_t<OT::value == DType::F64, double, uint64_t>>{}, TypeTag<O>{});
          else v(TypeTag<I>{}, TypeTag<Acc>{}, TypeTag<O>{});
        }
      });
    }
  });
}

// One dimension cut into `parts` blocks of `block` elements (the last may be shorter).
struct MatmulSplit {
  int64_t parts = 1, block = 0;
};

// dot.cc's plan of a [B, M, N, K] matmul: the grid pB*pM x pN x pK over tiles (see dot.cc for the policy).
struct MatmulPlan {
  MatmulSplit b, m, n, k;
  int64_t blocks() const { return b.parts * m.parts * n.parts * k.parts; }
};

// The exchange of a plan's first superstep, as bytes at one tile's rate: tiles 2i and 2i+1 (a supertile) share an
// exchange bus, and data both receive crosses it once, at twice the rate (poplibs' ExchangeEstimator, which its
// matmul and convolution planners use; ipu-model.md). Block p is on tile p, in plan order (k fastest, then n, m,
// b); `lhs` and `rhs` are the bytes of each block's operands its tile does not hold. Two neighbours share their lhs
// block when they differ only in n, their rhs block when they differ only in m; the shared bytes count half.
std::vector<int64_t> supertileExchangeBytes(const MatmulPlan& plan, const std::vector<int64_t>& lhs,
                                            const std::vector<int64_t>& rhs);

// The type a matmul's or convolution's partials are kept, exchanged and reduced in (poplin's partialsType): f16 when
// half partials are asked for (CompileOptions::half_partials) and the operands and the result are f16, else the
// operands' accumulator type (f32 for floats).
inline DType partialsType(DType in, DType out, bool half_partials) {
  return half_partials && in == DType::F16 && out == DType::F16 ? DType::F16 : dtypeInfo(in).acc;
}

// The host blocks a matmul's or convolution's superstep needs before each block sums its own K partials (else each
// partial is a host item of its own, summed by the reduction superstep): enough for the chunks a superstep is cut
// into on 2 host threads (ThreadPool: 4 a thread).
constexpr int64_t kHostBlocksToShare = 8;

// sum (+)= partial over n elements, as a matmul's or convolution's reduction superstep adds the next tile's partial
// of a K split to the ones before it (OR for bool; with half partials each partial rounded to f16 first). `first`:
// sum holds the first partial itself (rounded here with half partials; `partial` is not read).
template <class Acc>
void addPartial(Acc* sum, const Acc* partial, int64_t n, bool first, bool half_partials) {
  if constexpr (std::is_same<Acc, float>::value) {
    if (half_partials) {
      if (first)
        for (int64_t j = 0; j < n; ++j) sum[j] = roundF16(sum[j]);
      else
        for (int64_t j = 0; j < n; ++j) sum[j] += roundF16(partial[j]);
      return;
    }
  }
  if (first) return;
  if constexpr (std::is_same<Acc, uint8_t>::value) {
    for (int64_t j = 0; j < n; ++j) sum[j] = static_cast<uint8_t>(sum[j] | partial[j]);
  } else {
    for (int64_t j = 0; j < n; ++j) sum[j] += partial[j];
  }
}

// omap: the output's linear mapping; the tiles, workers, exchange and AMP rates are the device's; partials: the type
// of the partials (partialsType); memory_proportion: the share of a tile for the plan's temporaries
// (CompileOptions::available_memory_proportion; 0: poplin's default).
MatmulPlan planMatmul(int64_t B, int64_t M, int64_t N, int64_t K, DType dt, DType partials, const TileMapping& omap,
                      const DeviceDescription& device, double memory_proportion);

// C[m x n] = A[m x k] B[k x n] (row strides lda, ldb, ldc), each element a running f32 sum over k in order.
void hostGemmF32(const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc, int64_t m, int64_t n,
                 int64_t k);

}  // namespace ipu
