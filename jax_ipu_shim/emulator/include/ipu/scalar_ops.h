// The per-element semantics of the elementwise ops (XLA:CPU's where StableHLO leaves a choice), written once.
//
// Every op is a stateless, default-constructible functor over host storage types (ipu::Storage<D>: bool and u8 are
// uint8_t, f16 and u16 uint16_t, so functors are chosen by DType, never by storage type). The visitors below pick the
// functor for an op kind and element type and hand it to a callback together with its storage types; the vector
// kernels (elementwise.cc, reduce.cc) and the scalar interpreter of reduce bodies (scalar_program.cc) are all built
// from them. An op on a type with no functor makes the visitor return false: a compile-time error, never a fallback.
#pragma once

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>

#include "ipu/complex_pow.h"
#include "ipu/cpu_features.h"
#include "ipu/dtype.h"
#include "ipu/numerics.h"
#include "ipu/registry.h"
#include "ipu/special_functions.h"
#include "ipu/xla_math.h"
#include "ipu/xla_math_avx2.h"

namespace ipu {
namespace scalar {

template <class T>
using Tag = TypeTag<T>;

// ---- helpers ----

// XLA's EmitFloatMax/Min: NaN in either operand propagates; otherwise lhs wins ties (so max(-0, +0) = -0), compared
// as the host compares (under XLA:CPU's denormals-are-zero a denormal equals 0) and returned as it is: jaxlib 0.4's
// maximum and minimum, elementwise and as a reduce's, a reduce_window's and a scatter's combiner (against a constant,
// see xlaConstant). clamp's maxps/minps return the bound on a tie (clampXlaDaz), so clip(denormal, 0, 1) is +0.
// f16 values are normal f32s; bf16 denormals are f32 denormals.
inline float maxXla(float a, float b) { return (a >= b || std::isnan(a)) ? a : b; }
inline float minXla(float a, float b) { return (a <= b || std::isnan(a)) ? a : b; }
inline bool isDenormal(float x) { return xla_math::floatToBits(x) != xla_math::floatToBits(xla_math::ftz_(x)); }
inline bool isZeroBits(float x) { return (xla_math::floatToBits(x) & 0x7fffffffu) == 0; }
inline float clampXlaDaz(float v, float l, float h) {
  if (std::isnan(v) || std::isnan(l) || std::isnan(h)) return minXla(maxXla(v, l), h);
  const float z = xla_math::ftz_(v), lo = xla_math::ftz_(l) < z ? z : l;  // a tie (+-0, a denormal) gives the bound
  return lo < xla_math::ftz_(h) ? lo : h;
}
// jaxlib 0.12's XLA:CPU (Numerics::Jaxlib012): IEEE 754-2019 maximum/minimum, -0 < +0 and NaN propagating. f32
// operands are read with denormals as zeros of their sign (so a denormal result is a zero too); f16 ones as they
// are (no f16 is an f32 denormal); bf16 ones as f32s are, except on an AVX512-FP16 core (hostIsFp16Core), where
// XLA:CPU computes them in bf16 and keeps a bf16 denormal (ieee16Daz: on an AMD EPYC with AVX2, jnp.maximum(x, -1.0)
// and jnp.clip(x, -1.0, 1.0) of a bf16 denormal are zeros on cpu, fuzz seed 20261901 #2606; on an AVX-512 host the
// elementwise ones keep the operand's bits: ieeeAvx512).
// Ordered on the bits, not by float comparison, so that the host's denormals-are-zero mode cannot change the answer.
inline int32_t ieeeOrderKey(float x) {
  const int32_t i = static_cast<int32_t>(xla_math::floatToBits(x));
  return i ^ ((i >> 31) & 0x7fffffff);
}
template <bool Daz>
inline float maxIeee(float a, float b) {
  if (Daz) a = xla_math::ftz_(a), b = xla_math::ftz_(b);
  if (std::isnan(a) || std::isnan(b)) return a + b;
  return ieeeOrderKey(a) >= ieeeOrderKey(b) ? a : b;
}
template <bool Daz>
inline float minIeee(float a, float b) {
  if (Daz) a = xla_math::ftz_(a), b = xla_math::ftz_(b);
  if (std::isnan(a) || std::isnan(b)) return a + b;
  return ieeeOrderKey(a) <= ieeeOrderKey(b) ? a : b;
}
// Whether jaxlib 0.12's maximum and minimum of the narrow float D read its denormals as zeros on this host.
template <DType D>
inline bool ieee16Daz() {
  return D == DType::BF16 && !hostIsFp16Core();
}
// Whether they follow ieeeAvx512 instead (an AVX-512 host without AVX512-FP16).
template <DType D>
inline bool ieee16Avx512() {
  return ieee16Daz<D>() && hostHasAvx512();
}
// jaxlib 0.12's bf16 maximum (minimum) on an AVX-512 host, in f32: LLVM's IEEE maximum keeps x where it is an exact +0
// (minimum: -0), told by its bits (vfpclass), and otherwise takes maxps(x, y): compared with denormals read as zeros,
// y on a tie, the bits as they are. Measured on an AMD EPYC of family 26, d a bf16 denormal: max(d, -d) is -d,
// max(+0, d) is +0, max(-0, d) is d, max(d, -1) is d; min(-0, d) is -0, min(+0, d) is d.
template <bool kMax>
inline float ieeeAvx512(float x, float y) {
  if (std::isnan(x) || std::isnan(y)) return x + y;
  const float a = xla_math::ftz_(x), b = xla_math::ftz_(y);
  if (kMax ? a > b : a < b) return x;
  if (kMax ? b > a : b < a) return y;
  return xla_math::floatToBits(x) == (kMax ? 0u : 0x80000000u) ? x : y;
}

// A maximum or minimum of x and a splat constant c, as LLVM lowers it knowing c. XLA's simplifier puts a
// commutative op's constant on the right; one that reaches the op through a call's parameter (jnp.clip's bound in
// jax 0.4.13) stays where it is. The front end writes the op so and marks it "constant_operand": "rhs" or "lhs".
//   jaxlib 0.4, c on the right (xlaConstant): against +0 (relu), maxps/minps, which read a denormal x as a zero of
//       its sign and return it so (arrays of 2 to 7 elements, left unvectorised, keep the denormal on cpu; the
//       emulator flushes at every size); against any other c, maxXla/minXla (x wins a tie, returned as it is).
//   jaxlib 0.4, c on the left (xlaConstantLhs): select(c >= x, c, x) as maxps/minps, both operands read with
//       denormals as zeros and returned so; a tie gives x when c is not a zero (maxps(c, x)) and c when it is
//       (maxps(x, c), signed zeros kept); a NaN x is returned, and a NaN c (jnp.clip(x, 0, nan)) is the result.
//   jaxlib 0.12, f32 (ieeeConstant; either side): against a c that is neither a zero nor NaN, no signed zero can tie
//       and no NaN come from c, so IEEE's maximum is one maxss/minss, which reads both operands with denormals as
//       zeros and returns x on a tie or when it is NaN (max(-0, 1e-40) is -0); against -inf (max) or +inf (min), x
//       itself; against a zero or NaN, maxIeee/minIeee.
enum class ConstantOperand { None, Lhs, Rhs };
inline bool parseConstantOperand(const std::string& s, ConstantOperand* out) {
  if (s == "lhs" || s == "rhs" || s.empty()) {
    *out = s.empty() ? ConstantOperand::None : s == "lhs" ? ConstantOperand::Lhs : ConstantOperand::Rhs;
    return true;
  }
  return false;
}
template <bool kMax>
inline float xlaConstant(float x, float c) {
  if (xla_math::floatToBits(c) == 0 && isDenormal(x)) return xla_math::ftz_(x);
  return kMax ? maxXla(x, c) : minXla(x, c);
}
template <bool kMax>
inline float xlaConstantLhs(float c, float x) {
  if (std::isnan(c)) return c;  // select(c >= x || isnan(c), c, x) folds to c
  const float a = xla_math::ftz_(c), b = xla_math::ftz_(x);
  if (std::isnan(b)) return b;
  if (isZeroBits(c)) return (kMax ? b > a : b < a) ? b : a;
  return (kMax ? a > b : a < b) ? a : b;
}
template <bool kMax>
inline float ieeeConstant(float x, float c) {
  if (c == (kMax ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity())) return x;
  if (isZeroBits(c) || std::isnan(c)) return kMax ? maxIeee<true>(x, c) : minIeee<true>(x, c);
  const float a = xla_math::ftz_(x), b = xla_math::ftz_(c);
  return (kMax ? b > a : b < a) ? b : a;  // compared as floats: -0 ties with +0; a NaN x is returned
}

// XLA's sign: copysign(x != 0 ? 1 : 0, x), NaN kept. Under XLA:CPU's denormals-are-zero a denormal compares equal
// to 0, so its sign is a zero of its sign (not the denormal itself); read through ftz_ so that the host's MXCSR mode
// cannot change it.
inline float signF(float x) {
  if (std::isnan(x)) return x;
  return std::copysign(xla_math::ftz_(x) != 0.0f ? 1.0f : 0.0f, x);
}

// Giles' single-precision erfinv, as chlo.erf_inv expands for f32: w = -log1p(-x^2) with XLA's log1p, a degree-8
// polynomial in w - 2.5 (w < 5) or sqrt(w) - 3 evaluated by Horner's rule with fused multiply-adds, times x; +-1
// give +-inf.
// erfInvPolynomial is p(w), which erfInv multiplies by x: XLA:CPU's fused loops contract that last product into an
// add or subtract reading erf_inv's result (elementwise.cc's erfInvFmaBlock).
inline float erfInvPolynomial(float x) {
  static const float kSmall[9] = {2.81022636e-08f, 3.43273939e-07f, -3.5233877e-06f, -4.39150654e-06f, 0.00021858087f,
                                  -0.00125372503f, -0.00417768164f, 0.246640727f,    1.50140941f};
  static const float kLarge[9] = {-0.000200214257f, 0.000100950558f, 0.00134934322f, -0.00367342844f, 0.00573950773f,
                                  -0.0076224613f,   0.00943887047f,  1.00167406f,    2.83297682f};
  const float w = -xla_math::log1p(-x * x);
  const bool small = w < 5.0f;
  const float* c = small ? kSmall : kLarge;
  const float t = small ? w - 2.5f : std::sqrt(w) - 3.0f;
  float p = c[0];
  for (int i = 1; i < 9; ++i) p = std::fma(p, t, c[i]);
  return p;
}
inline float erfInv(float x) {
  return std::fabs(x) == 1.0f ? x * std::numeric_limits<float>::infinity() : erfInvPolynomial(x) * x;
}

// Integers of every width wrap (two's complement) as XLA's do: computed in a 32-bit word (64 bits for i64/u64),
// truncated to the type.
template <class T>
using Unsigned = std::make_unsigned_t<T>;
template <class T>
constexpr uint32_t kBits = 8 * sizeof(T);
template <class T>
using Word = std::conditional_t<(sizeof(T) > 4), uint64_t, uint32_t>;

template <class T>
inline T wrapAdd(T a, T b) {
  return static_cast<T>(static_cast<Word<T>>(a) + static_cast<Word<T>>(b));
}
template <class T>
inline T wrapSub(T a, T b) {
  return static_cast<T>(static_cast<Word<T>>(a) - static_cast<Word<T>>(b));
}
template <class T>
inline T wrapMul(T a, T b) {
  return static_cast<T>(static_cast<Word<T>>(a) * static_cast<Word<T>>(b));
}

// XLA's division: x / 0 is all ones (-1 signed), MIN / -1 is MIN; x % 0 is x, MIN % -1 is 0.
template <class T>
inline T divI(T a, T b) {
  if (b == T(0)) return static_cast<T>(~Unsigned<T>(0));
  if constexpr (std::is_signed<T>::value)
    if (a == std::numeric_limits<T>::min() && b == T(-1)) return a;
  return static_cast<T>(a / b);
}
template <class T>
inline T remI(T a, T b) {
  if (b == T(0)) return a;
  if constexpr (std::is_signed<T>::value)
    if (a == std::numeric_limits<T>::min() && b == T(-1)) return T(0);
  return static_cast<T>(a % b);
}

// Exponentiation by squaring with wrap-around; a negative exponent gives 0 except for bases 1 and -1.
template <class W>
inline W powBits(W base, W exp) {
  W result = 1;
  while (exp) {
    if (exp & 1u) result *= base;
    base *= base;
    exp >>= 1;
  }
  return result;
}
template <class T>
inline T powI(T a, T b) {
  if constexpr (std::is_signed<T>::value)
    if (b < T(0)) return a == T(1) ? T(1) : a == T(-1) ? ((b & 1) ? T(-1) : T(1)) : T(0);
  return static_cast<T>(powBits<Word<T>>(static_cast<Word<T>>(a), static_cast<Word<T>>(static_cast<Unsigned<T>>(b))));
}

// Shift amounts are unsigned; shifting by the type's width or more gives 0 (or the sign, arithmetic right).
template <class T>
inline T shiftLeft(T a, T b) {
  const Word<T> n = static_cast<Unsigned<T>>(b);
  return n >= kBits<T> ? T(0) : static_cast<T>(static_cast<Word<T>>(a) << n);
}
template <class T>
inline T shiftRightArithmetic(T a, T b) {
  const Word<T> n = static_cast<Unsigned<T>>(b);
  const std::make_signed_t<Word<T>> sa = static_cast<std::make_signed_t<T>>(a);
  return static_cast<T>(sa >> std::min<Word<T>>(n, kBits<T> - 1));
}
template <class T>
inline T shiftRightLogical(T a, T b) {
  const Word<T> n = static_cast<Unsigned<T>>(b);
  return n >= kBits<T> ? T(0) : static_cast<T>(static_cast<Word<T>>(static_cast<Unsigned<T>>(a)) >> n);
}
template <class T>
inline T popcount(T x) {
  return static_cast<T>(__builtin_popcountll(static_cast<Unsigned<T>>(x)));
}
template <class T>
inline T countLeadingZeros(T x) {
  const uint64_t u = static_cast<Unsigned<T>>(x);
  return static_cast<T>(u == 0 ? kBits<T> : __builtin_clzll(u) - (64 - kBits<T>));
}

// Total order on floats as integers: -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN.
inline int32_t totalOrderKey(float f) {
  int32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits ^ ((bits >> 31) & 0x7fffffff);
}

// ---- the 16-bit float formats: stored in 16 bits, computed in f32, rounded to nearest even once per op ----

struct HalfFormat {
  using type = uint16_t;
  static float toFloat(uint16_t x) { return halfToFloat(x); }
  static uint16_t fromFloat(float f) { return floatToHalf(f); }
  static uint16_t bits(uint16_t x) { return x; }
  static uint16_t fromBits(uint16_t b) { return b; }
};
struct BFloat16Format {
  using type = BFloat16;
  static float toFloat(BFloat16 x) { return bfloat16BitsToFloat(x.bits); }
  static BFloat16 fromFloat(float f) { return BFloat16{floatToBFloat16Bits(f)}; }
  static uint16_t bits(BFloat16 x) { return x.bits; }
  static BFloat16 fromBits(uint16_t b) { return BFloat16{b}; }
};
template <DType D>
struct FloatFormat;
template <>
struct FloatFormat<DType::F16> : HalfFormat {};
template <>
struct FloatFormat<DType::BF16> : BFloat16Format {};

// ---- conversions between all element types, as XLA:CPU converts ----

// The value of a storage element as f32 (floats) or int64 (integers, bool).
template <DType D>
inline auto valueOf(Storage<D> x) {
  if constexpr (D == DType::F32 || D == DType::F64 || D == DType::U64) return x;  // f64 as itself, u64 unsigned
  else if constexpr (isNarrowFloat(D)) return FloatFormat<D>::toFloat(x);
  else return static_cast<int64_t>(x);
}

// f64 -> f32 rounded to odd (toward zero, the last bit set when inexact): rounding that to f16 or bf16 is the
// correctly rounded f64 -> f16/bf16 (f32 keeps more than two bits past theirs), with no double rounding.
inline float doubleToFloatOdd(double d) {
  float f = static_cast<float>(d);
  if (std::isnan(d) || static_cast<double>(f) == d) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits |= 1u;
  std::memcpy(&f, &bits, 4);
  return f;
}

template <DType To, DType From>
inline Storage<To> convertRealValue(Storage<From> x) {
  using T = Storage<To>;
  constexpr bool from_float = From == DType::F32 || From == DType::F64 || isNarrowFloat(From);
  const auto v = valueOf<From>(x);
  if constexpr (To == DType::Bool) {  // x != 0 (NaN is true)
    return v != 0;
  } else if constexpr (To == DType::F32 || To == DType::F64) {
    return static_cast<T>(v);  // correctly rounded
  } else if constexpr (isNarrowFloat(To)) {
    if constexpr (From == To) return x;
    // f64: XLA:CPU rounds once where LLVM has a direct conversion (AVX512-FP16: measured on a host with its CPUID
    // bit), and through f32, rounding twice, elsewhere (measured with jaxlib 0.4.13 and 0.12 on an AMD EPYC of
    // family 25: 1 + 2^-11 + 2^-40 becomes f16 1.0, not 1 + 2^-10; likewise bf16).
    else if constexpr (From == DType::F64)
      return FloatFormat<To>::fromFloat(hostHasAvx512Fp16() ? doubleToFloatOdd(v) : static_cast<float>(v));
    else return FloatFormat<To>::fromFloat(static_cast<float>(v));  // ints: exact below 2^24
  } else if constexpr (from_float) {  // float -> int: saturating to the target's range, NaN -> 0
    if (std::isnan(v)) return T(0);
    if (v >= static_cast<float>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    if (v <= static_cast<float>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
    return static_cast<T>(v);
  } else {  // int/bool -> int: two's complement wrap
    return static_cast<T>(static_cast<Unsigned<T>>(static_cast<uint64_t>(v)));
  }
}

// Complex <-> real types as XLA converts: to a real type the real part is converted, from one the imaginary part is
// 0; between c64 and c128 each part is converted.
template <DType To, DType From>
inline Storage<To> convertValue(Storage<From> x) {
  if constexpr (To == From) return x;
  else if constexpr (isComplex(From) && isComplex(To))
    return {convertRealValue<complexPart(To), complexPart(From)>(x.re),
            convertRealValue<complexPart(To), complexPart(From)>(x.im)};
  else if constexpr (isComplex(From)) return convertRealValue<To, complexPart(From)>(x.re);
  else if constexpr (isComplex(To)) return {convertRealValue<complexPart(To), From>(x), Storage<complexPart(To)>(0)};
  else return convertRealValue<To, From>(x);
}

// ---- the functors ----

// exp, expm1, log, log1p, tanh and logistic are XLA:CPU's own approximations (ipu/xla_math.h), erf, erfc, erf_inv,
// tan, lgamma and digamma the expansions chlo lowers to for cpu (ipu/special_functions.h): bit for bit backend="cpu"
// on an FMA host. tan is sin / cos, as chlo.tan expands; sin, cos and pow are libm's, as XLA:CPU calls them.
#define IPU_FLOAT_UNARY(Name, expr)                  \
  struct Name {                                      \
    float operator()(float x) const { return expr; } \
  };
// The same eight lanes at a time (ipu/xla_math_avx2.h), for the AVX2 element loops of ipu/kernels.h.
#ifdef IPU_HAVE_AVX2_MATH
#define IPU_FLOAT_UNARY_AVX2(Name, fn)                                             \
  struct Name {                                                                    \
    float operator()(float x) const { return xla_math::fn(x); }                    \
    IPU_AVX2_TARGET static __m256 avx2(__m256 x) { return xla_math::avx2::fn(x); } \
  };
#else
#define IPU_FLOAT_UNARY_AVX2(Name, fn) IPU_FLOAT_UNARY(Name, xla_math::fn(x))
#endif
IPU_FLOAT_UNARY(AbsF, std::fabs(x))
IPU_FLOAT_UNARY(NegateF, -x)
IPU_FLOAT_UNARY(SignF, signF(x))
IPU_FLOAT_UNARY_AVX2(ExpF, exp)
IPU_FLOAT_UNARY_AVX2(Expm1F, expm1)
IPU_FLOAT_UNARY_AVX2(LogF, log)
IPU_FLOAT_UNARY_AVX2(Log1pF, log1p)
// sqrt and 1 / sqrt are correctly rounded in IEEE arithmetic, one lane or eight: vsqrtps (and vdivps) give the
// scalar bits. (g++ does not vectorise std::sqrt, which may set errno.)
struct SqrtF {
  float operator()(float x) const { return std::sqrt(x); }
#ifdef IPU_HAVE_AVX2_MATH
  IPU_AVX2_TARGET static __m256 avx2(__m256 x) { return _mm256_sqrt_ps(x); }
#endif
};
struct RsqrtF {
  float operator()(float x) const { return 1.0f / std::sqrt(x); }
#ifdef IPU_HAVE_AVX2_MATH
  IPU_AVX2_TARGET static __m256 avx2(__m256 x) { return _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_sqrt_ps(x)); }
#endif
};
IPU_FLOAT_UNARY(CbrtF, std::cbrt(x))
// jaxlib 0.4's XLA:CPU cbrt: copysign(pow(|x|, 1/3), x) with libm's pow (so a denormal x, which libm reads under
// denormals-are-zero, keeps its sign: 8.9e-16, not cbrt's -5.6e-16; and pow's rounding of 1/3 shows in the last bits).
IPU_FLOAT_UNARY(Cbrt04F, std::copysign(std::pow(std::fabs(x), static_cast<float>(1.0 / 3.0)), x))
// ... of an f16 x: the exponent is f16's 1/3 (0x3555, 0.333251953125), as XLA builds the constant in the operand's
// type, so cpu's f16 cbrt is up to 3 ulps from the rounded cube root (2^-24 gives 2^-8 + 1 ulp); every f16 value
// bit for bit with cpu on an AMD EPYC of family 26 (fuzz seed 20270101 #406). bf16 is computed with f32's 1/3.
IPU_FLOAT_UNARY(Cbrt04F16, std::copysign(std::pow(std::fabs(x), 0.333251953125f), x))
// jaxlib 0.4.13's f16 expm1 and log1p: XLA's elemental formulas evaluated in f16, each step rounded to f16 (exp,
// tanh and log computed in f32 and rounded, constants in f16), where XLA:CPU upcasts the other f16 functions: every
// f16 value bit for bit with cpu (test_xla_bits.py). bf16 is computed in f32 and rounded once, as cpu computes it.
// e^x - 1 for |x| > 1/2, else tanh(x/2) (e^x + 1), and x where x/2 rounds to 0
struct Expm104F16 {
  float operator()(float x) const {
    const float e = roundF16(xla_math::exp(x)), half = roundF16(x * 0.5f);
    const float r =
        std::fabs(x) > 0.5f ? roundF16(e - 1.0f) : roundF16(roundF16(xla_math::tanh(half)) * roundF16(e + 1.0f));
    return half == 0.0f ? x : r;
  }
};
// Cephes' x - x^2/2 + x^3 P(x)/Q(x) for |x| < sqrt(2) - 1 (in f16: 0.4143), else log(1 + x)
struct Log1p04F16 {
  float operator()(float x) const {
    static constexpr double kP[] = {4.5270000862445199635215E-5, 4.9854102823193375972212E-1,
                                    6.5787325942061044846969E0,  2.9911919328553073277375E1,
                                    6.0949667980987787057556E1,  5.7112963590585538103336E1,
                                    2.0039553499201281259648E1};
    static constexpr double kQ[] = {1.0,
                                    1.5062909083469192043167E1,
                                    8.3047565967967209469434E1,
                                    2.2176239823732856465394E2,
                                    3.0909872225312059774938E2,
                                    2.1642788614495947685003E2,
                                    6.0118660497603843919306E1};
    float p = 0.0f, q = 0.0f;
    for (double c : kP) p = roundF16(roundF16(p * x) + roundF16(static_cast<float>(c)));
    for (double c : kQ) q = roundF16(roundF16(q * x) + roundF16(static_cast<float>(c)));
    const float x2 = roundF16(x * x);
    float small = roundF16(roundF16(x * x2) * roundF16(p / q));
    small = roundF16(x + roundF16(roundF16(-0.5f * x2) + small));
    return std::fabs(x) < 0.414306640625f ? small : roundF16(xla_math::log(roundF16(x + 1.0f)));
  }
};
IPU_FLOAT_UNARY_AVX2(TanhF, tanh)
IPU_FLOAT_UNARY_AVX2(LogisticF, logistic)
IPU_FLOAT_UNARY(SineF, std::sin(x))
IPU_FLOAT_UNARY(CosineF, std::cos(x))
IPU_FLOAT_UNARY(TanF, xla_math::ftz_(std::sin(xla_math::ftz_(x)) / std::cos(xla_math::ftz_(x))))
IPU_FLOAT_UNARY(FloorF, std::floor(x))
IPU_FLOAT_UNARY(CeilF, std::ceil(x))
IPU_FLOAT_UNARY(RoundEvenF, std::nearbyint(x))
IPU_FLOAT_UNARY(RoundAfzF, std::round(x))
IPU_FLOAT_UNARY(ErfF, xla_math::ftz_(special::erf(xla_math::ftz_(x))))
IPU_FLOAT_UNARY(ErfcF, special::erfc(x))
IPU_FLOAT_UNARY(SinhF, std::sinh(x))
// jaxlib 0.4's XLA:CPU sinh reads a denormal as a zero of its sign (its expansion is arithmetic on x).
IPU_FLOAT_UNARY(Sinh04F, std::sinh(xla_math::ftz_(x)))
IPU_FLOAT_UNARY(CoshF, std::cosh(x))
IPU_FLOAT_UNARY(AsinF, std::asin(x))
IPU_FLOAT_UNARY(AcosF, std::acos(x))
IPU_FLOAT_UNARY(AtanF, std::atan(x))
IPU_FLOAT_UNARY(AsinhF, std::asinh(x))
// jaxlib 0.4's XLA:CPU asinh reads a denormal as a zero of its sign (its expansion is arithmetic on x).
IPU_FLOAT_UNARY(Asinh04F, std::asinh(xla_math::ftz_(x)))
IPU_FLOAT_UNARY(AcoshF, std::acosh(x))
IPU_FLOAT_UNARY(AtanhF, std::atanh(x))
IPU_FLOAT_UNARY(ErfInvF, xla_math::ftz_(erfInv(xla_math::ftz_(x))))
IPU_FLOAT_UNARY(LgammaF, special::lgamma(xla_math::ftz_(x)))
IPU_FLOAT_UNARY(DigammaF, special::digamma(xla_math::ftz_(x)))
IPU_FLOAT_UNARY(BesselI1eF, special::besselI1e(x))
IPU_FLOAT_UNARY(Atan012F, xla_math::atan012(x))
// jaxlib 0.12's XLA:CPU has HLO tan and erf ops: tan is the host's tanf (f16 upcast and rounded once), erf its
// elemental emitter's (special::erf012). (tanf returns a denormal x as it is, with no arithmetic to flush it.)
IPU_FLOAT_UNARY(Tan012F, std::tan(x))
// jaxlib 0.12's XLA:CPU rsqrt, as its Rsqrt intrinsic computes it on this host: the host's rsqrtss approximation
// refined by Newton-Raphson steps in FMAs, g - g/2 (x g^2 - 1), one step on AMD and two elsewhere (XLA's count for
// its 8-lane vectors); the bare approximation below the smallest normal and at +inf; 1 / sqrt(x) without AVX. The
// approximation's bits are the CPU's own: like XLA:CPU's, these results depend on the host.
inline int rsqrt012Steps() {
  static const int steps = !hostHasAvx() ? 0 : hostIsAmd() ? 1 : 2;
  return steps;
}
inline float rsqrt012(float x) {
  const int steps = rsqrt012Steps();
  if (steps == 0) return 1.0f / std::sqrt(x);
  const float approx = hostRsqrtApprox(x);
  float g = approx;
  for (int i = 0; i < steps; ++i) {
    const float r2 = x * g, half = g * -0.5f;
    g = xla_math::fma_(half, xla_math::fma_(r2, g, -1.0f), g);
  }
  return (x < 1.17549435e-38f || x == std::numeric_limits<float>::infinity()) ? approx : g;
}
IPU_FLOAT_UNARY(Erf012F, special::erf012(x))
IPU_FLOAT_UNARY(Expm1012F, xla_math::expm1012(x))
// jaxlib 0.12's exp, logistic, log1p (ipu/xla_math.h) and rsqrt, eight lanes at a time where the host has AVX2
#ifdef IPU_HAVE_AVX2_MATH
#define IPU_FLOAT_UNARY_012(Name, scalar, vector)                   \
  struct Name {                                                     \
    float operator()(float x) const { return scalar; }              \
    IPU_AVX2_TARGET static __m256 avx2(__m256 x) { return vector; } \
  };
#else
#define IPU_FLOAT_UNARY_012(Name, scalar, vector) IPU_FLOAT_UNARY(Name, scalar)
#endif
IPU_FLOAT_UNARY_012(Exp012F, xla_math::exp012(x), xla_math::avx2::exp012(x))
IPU_FLOAT_UNARY_012(Logistic012F, xla_math::logistic012(x), xla_math::avx2::logistic012(x))
IPU_FLOAT_UNARY_012(Log1p012F, xla_math::log1p<true>(x), xla_math::avx2::log1p<true>(x))
IPU_FLOAT_UNARY_012(Rsqrt012F, rsqrt012(x), xla_math::avx2::rsqrt012(x, rsqrt012Steps()))
#undef IPU_FLOAT_UNARY_012
// jaxlib 0.12's tanh: Eigen's clamp (xla_math::kTanhClamp012)
struct Tanh012F {
  float operator()(float x) const { return xla_math::tanh(x, xla_math::kTanhClamp012); }
#ifdef IPU_HAVE_AVX2_MATH
  IPU_AVX2_TARGET static __m256 avx2(__m256 x) { return xla_math::avx2::tanh(x, xla_math::kTanhClamp012); }
#endif
};
#undef IPU_FLOAT_UNARY
#undef IPU_FLOAT_UNARY_AVX2

#define IPU_FLOAT_BINARY(Name, expr)                          \
  struct Name {                                               \
    float operator()(float x, float y) const { return expr; } \
  };
// The IEEE operations whose f32 and f64 forms are one expression (the emulated f64 uses the same functors).
#define IPU_REAL_BINARY(Name, expr)               \
  template <class T>                              \
  struct Name {                                   \
    T operator()(T x, T y) const { return expr; } \
  };                                              \
  using Name##F = Name<float>;                    \
  using Name##D = Name<double>;
IPU_REAL_BINARY(Add, x + y)
IPU_REAL_BINARY(Subtract, x - y)
IPU_REAL_BINARY(Multiply, x* y)
IPU_REAL_BINARY(Divide, x / y)
IPU_REAL_BINARY(Remainder, std::fmod(x, y))
IPU_REAL_BINARY(Power, std::pow(x, y))
IPU_REAL_BINARY(Atan2, std::atan2(x, y))
#undef IPU_REAL_BINARY
IPU_FLOAT_BINARY(MaximumF, maxXla(x, y))  // a reduce's, reduce_window's, scatter's combiner
IPU_FLOAT_BINARY(MinimumF, minXla(x, y))
IPU_FLOAT_BINARY(MaximumConstantF, xlaConstant<true>(x, y))
IPU_FLOAT_BINARY(MinimumConstantF, xlaConstant<false>(x, y))
IPU_FLOAT_BINARY(MaximumConstantLhsF, xlaConstantLhs<true>(x, y))
IPU_FLOAT_BINARY(MinimumConstantLhsF, xlaConstantLhs<false>(x, y))
IPU_FLOAT_BINARY(MaximumIeeeConstantF, ieeeConstant<true>(x, y))
IPU_FLOAT_BINARY(MinimumIeeeConstantF, ieeeConstant<false>(x, y))
IPU_FLOAT_BINARY(MaximumIeeeConstantLhsF, ieeeConstant<true>(y, x))
IPU_FLOAT_BINARY(MinimumIeeeConstantLhsF, ieeeConstant<false>(y, x))
#ifdef IPU_HAVE_AVX2_MATH
// maxIeee<true>/minIeee<true> eight lanes at a time, the same steps: denormals read as zeros, ordered on the bits
// (ieeeOrderKey), a NaN operand gives a + b.
IPU_AVX2_TARGET inline __m256i ieeeOrderKeys(__m256 x) {
  const __m256i i = _mm256_castps_si256(x);
  return _mm256_xor_si256(i, _mm256_and_si256(_mm256_srai_epi32(i, 31), _mm256_set1_epi32(0x7fffffff)));
}
template <bool kMax>
IPU_AVX2_TARGET inline __m256 pickIeeeDaz(__m256 a, __m256 b) {
  a = xla_math::avx2::ftz_(a);
  b = xla_math::avx2::ftz_(b);
  const __m256i ka = ieeeOrderKeys(a), kb = ieeeOrderKeys(b);
  const __m256 take_b = _mm256_castsi256_ps(kMax ? _mm256_cmpgt_epi32(kb, ka) : _mm256_cmpgt_epi32(ka, kb));
  const __m256 nan = _mm256_or_ps(_mm256_cmp_ps(a, a, _CMP_UNORD_Q), _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
  return _mm256_blendv_ps(_mm256_blendv_ps(a, b, take_b), _mm256_add_ps(a, b), nan);
}
#endif
struct MaximumIeeeF {
  float operator()(float x, float y) const { return maxIeee<true>(x, y); }
#ifdef IPU_HAVE_AVX2_MATH
  IPU_AVX2_TARGET static __m256 avx2(__m256 x, __m256 y) { return pickIeeeDaz<true>(x, y); }
#endif
};
struct MinimumIeeeF {
  float operator()(float x, float y) const { return minIeee<true>(x, y); }
#ifdef IPU_HAVE_AVX2_MATH
  IPU_AVX2_TARGET static __m256 avx2(__m256 x, __m256 y) { return pickIeeeDaz<false>(x, y); }
#endif
};
IPU_FLOAT_BINARY(MaximumIeee16F, maxIeee<false>(x, y))  // f16/bf16 widened to f32
IPU_FLOAT_BINARY(MinimumIeee16F, minIeee<false>(x, y))
IPU_FLOAT_BINARY(MaximumAvx512F, ieeeAvx512<true>(x, y))  // bf16 widened to f32 (ieee16Avx512)
IPU_FLOAT_BINARY(MinimumAvx512F, ieeeAvx512<false>(x, y))
IPU_FLOAT_BINARY(NextAfterF, special::nextAfter(x, y))
#undef IPU_FLOAT_BINARY

// f16/bf16 storage (Fmt: HalfFormat, BFloat16Format): computed in f32 and rounded to nearest even once per op.
template <class F, class Fmt = HalfFormat>
struct Half1 {
  using T = typename Fmt::type;
  T operator()(T x) const { return Fmt::fromFloat(F{}(Fmt::toFloat(x))); }
};
template <class F, class Fmt = HalfFormat>
struct Half2 {
  using T = typename Fmt::type;
  T operator()(T x, T y) const { return Fmt::fromFloat(F{}(Fmt::toFloat(x), Fmt::toFloat(y))); }
};

// chlo.tan expands to sin / cos in the operand's own type: on f16 sine and cosine are each rounded to it before the
// division, as jaxlib 0.4.13's XLA:CPU does. On bf16 it keeps them in f32 and rounds the quotient once (XLA's
// excess precision; measured on every element of bf16[4096] in [-9, 9]), which the generic Half1 does.
template <>
struct Half1<TanF, FloatFormat<DType::F16>> {
  using Fmt = HalfFormat;
  using T = typename Fmt::type;
  T operator()(T x) const {
    const float f = xla_math::ftz_(Fmt::toFloat(x));
    return Fmt::fromFloat(Fmt::toFloat(Fmt::fromFloat(std::sin(f))) / Fmt::toFloat(Fmt::fromFloat(std::cos(f))));
  }
};

// jaxlib 0.4.13's XLA:CPU computes an f16 rsqrt as 1 / sqrt in f16, sqrt rounded to it before the division.
// (jaxlib 0.12's, Rsqrt012F, upcasts and rounds once.)
template <>
struct Half1<RsqrtF, FloatFormat<DType::F16>> {
  using Fmt = HalfFormat;
  using T = typename Fmt::type;
  T operator()(T x) const { return Fmt::fromFloat(1.0f / Fmt::toFloat(Fmt::fromFloat(std::sqrt(Fmt::toFloat(x))))); }
};

// next_after steps the 16-bit format's bits, not f32 ones: no upcast.
template <class Fmt = HalfFormat>
struct NextAfter16 {
  using T = typename Fmt::type;
  T operator()(T x, T y) const {
    const float fx = Fmt::toFloat(x), fy = Fmt::toFloat(y);
    // the format's own quiet NaN (nextAfterBits knows f16's only)
    if (std::isnan(fx) || std::isnan(fy)) return Fmt::fromFloat(std::numeric_limits<float>::quiet_NaN());
    return Fmt::fromBits(
        special::nextAfterBits<uint16_t>(Fmt::bits(x), Fmt::bits(y), std::isnan(fx), std::isnan(fy), fx == fy));
  }
};
using NextAfterF16 = NextAfter16<HalfFormat>;

struct IsFiniteF32 {
  uint8_t operator()(float x) const { return uint8_t(std::isfinite(x)); }
};
template <class Fmt = HalfFormat>
struct IsFinite16 {
  uint8_t operator()(typename Fmt::type x) const { return uint8_t(std::isfinite(Fmt::toFloat(x))); }
};

#define IPU_INT_UNARY(Name, expr)            \
  template <class T>                         \
  struct Name {                              \
    T operator()(T x) const { return expr; } \
  };
IPU_INT_UNARY(AbsI, x < T(0) ? wrapSub<T>(T(0), x) : x)
IPU_INT_UNARY(NegateI, wrapSub<T>(T(0), x))
IPU_INT_UNARY(SignI, static_cast<T>((x > T(0)) - (x < T(0))))
IPU_INT_UNARY(NotI, static_cast<T>(~x))
IPU_INT_UNARY(PopcntI, popcount(x))
IPU_INT_UNARY(ClzI, countLeadingZeros(x))
#undef IPU_INT_UNARY

#define IPU_INT_BINARY(Name, expr)                \
  template <class T>                              \
  struct Name {                                   \
    T operator()(T x, T y) const { return expr; } \
  };
IPU_INT_BINARY(AddI, wrapAdd(x, y))
IPU_INT_BINARY(SubtractI, wrapSub(x, y))
IPU_INT_BINARY(MultiplyI, wrapMul(x, y))
IPU_INT_BINARY(DivideI, divI(x, y))
IPU_INT_BINARY(RemainderI, remI(x, y))
IPU_INT_BINARY(PowerI, powI(x, y))
IPU_INT_BINARY(MaximumI, x > y ? x : y)
IPU_INT_BINARY(MinimumI, x < y ? x : y)
IPU_INT_BINARY(AndI, static_cast<T>(x& y))
IPU_INT_BINARY(OrI, static_cast<T>(x | y))
IPU_INT_BINARY(XorI, static_cast<T>(x ^ y))
IPU_INT_BINARY(ShiftLeftI, shiftLeft(x, y))
IPU_INT_BINARY(ShiftRightArithmeticI, shiftRightArithmetic(x, y))
IPU_INT_BINARY(ShiftRightLogicalI, shiftRightLogical(x, y))
#undef IPU_INT_BINARY

// bool (0 or 1 in a byte): not, and/minimum, or/maximum, xor.
struct NotB {
  uint8_t operator()(uint8_t x) const { return uint8_t(x ^ 1u); }
};
struct AndB {
  uint8_t operator()(uint8_t x, uint8_t y) const { return uint8_t(x & y); }
};
struct OrB {
  uint8_t operator()(uint8_t x, uint8_t y) const { return uint8_t(x | y); }
};
struct XorB {
  uint8_t operator()(uint8_t x, uint8_t y) const { return uint8_t(x ^ y); }
};

enum class Direction { EQ, NE, GE, GT, LE, LT };

inline bool parseDirection(const std::string& s, Direction* d) {
  static const struct {
    const char* name;
    Direction d;
  } kDirs[] = {{"EQ", Direction::EQ}, {"NE", Direction::NE}, {"GE", Direction::GE},
               {"GT", Direction::GT}, {"LE", Direction::LE}, {"LT", Direction::LT}};
  for (const auto& x : kDirs)
    if (s == x.name) {
      *d = x.d;
      return true;
    }
  return false;
}

// Comparison keys: what a storage value compares as.
template <class T>
struct IdentityKey {
  T operator()(T x) const { return x; }
};
template <class Fmt>
struct FloatKey {
  float operator()(typename Fmt::type x) const { return Fmt::toFloat(x); }
};
struct TotalOrderF32Key {
  int32_t operator()(float x) const { return totalOrderKey(x); }
};
template <class Fmt>
struct TotalOrder16Key {  // exact: widening to f32 keeps the order and NaNs' signs
  int32_t operator()(typename Fmt::type x) const { return totalOrderKey(Fmt::toFloat(x)); }
};
template <class T, class K>
struct ReinterpretKey {  // compare_type SIGNED/UNSIGNED on an integer of the other signedness: the same bits
  K operator()(T x) const { return static_cast<K>(x); }
};

template <class T, class Key, class Cmp>
struct CompareOp {
  uint8_t operator()(T x, T y) const { return uint8_t(Cmp{}(Key{}(x), Key{}(y))); }
};

template <class T>
struct SelectOp {
  T operator()(uint8_t c, T x, T y) const { return c ? x : y; }
};

// clamp is min(max(x, lo), hi) with the numerics' maximum and minimum (Ieee: Numerics::Jaxlib012).
template <bool Ieee>
struct ClampF32 {
  float operator()(float l, float v, float h) const {
    return Ieee ? minIeee<true>(maxIeee<true>(v, l), h) : clampXlaDaz(v, l, h);
  }
};
template <class Fmt, bool Ieee, bool Daz = false>
struct Clamp16 {
  using T = typename Fmt::type;
  T operator()(T l, T v, T h) const {
    const float fl = Fmt::toFloat(l), fv = Fmt::toFloat(v), fh = Fmt::toFloat(h);
    return Fmt::fromFloat(Ieee ? minIeee<Daz>(maxIeee<Daz>(fv, fl), fh) : clampXlaDaz(fv, fl, fh));
  }
};
template <class T>
struct ClampI {
  T operator()(T l, T v, T h) const { return std::min(std::max(v, l), h); }
};

template <DType To, DType From>
struct ConvertOp {
  Storage<To> operator()(Storage<From> x) const { return convertValue<To, From>(x); }
};

// ---- c64 and c128: pairs of f32 or f64 (the IPU has no complex type; Poplar users ran the pair arithmetic) ----
// Computed as XLA:CPU's elemental IR emitter does (its NaN/inf results included): the 4-mul product (with the two
// fused multiply-adds XLA:CPU's LLVM contracts it to, which decide the infinities), Smith's division with C99's
// recovery of infinite results, |z| without overflow, tanh from e^2a - 1 and e^-2a - 1 (ctanh), pow in polar form
// from a^2 + b^2. Two exceptions, where XLA:CPU's formulas cancel: expm1 (it computes e^a cos b - 1) and the
// sinh/cosh of sin/cos (from e^b - e^-b) are computed accurately here, so small arguments keep their digits.
// One template over the part type R: f32 (c64) calls XLA:CPU's own exp, expm1 and log where it uses them (CMath),
// f64 (c128) libm's, as XLA:CPU computes f64 (its approximations are f32's).

// A denormal as a zero of its sign, told by the bits (the host's denormals-are-zero mode cannot change it).
inline double ftzD(double x) {
  uint64_t bits;
  std::memcpy(&bits, &x, 8);
  if ((bits & 0x7ff0000000000000ULL) == 0) bits &= 0x8000000000000000ULL;
  std::memcpy(&x, &bits, 8);
  return x;
}
template <class R>
struct CMath;
template <>
struct CMath<float> {
  using C = Complex64;
  static float expm1(float x) { return xla_math::expm1(x); }
  static float expm1012(float x) { return xla_math::expm1012(x); }
  static float exp(float x) { return xla_math::exp(x); }
  static float exp012(float x) { return xla_math::exp012(x); }
  static float log(float x) { return xla_math::log(x); }
  static float ftz(float x) { return xla_math::ftz_(x); }
};
template <>
struct CMath<double> {
  using C = Complex128;
  static double expm1(double x) { return std::expm1(x); }
  static double expm1012(double x) { return std::expm1(x); }
  static double exp(double x) { return std::exp(x); }
  static double exp012(double x) { return std::exp(x); }
  static double log(double x) { return std::log(x); }
  static double ftz(double x) { return ftzD(x); }  // (the run's MXCSR, as XLA:CPU's)
};
template <class C>
using PartOf = decltype(C::re);

template <class C>
inline C cmul(C x, C y) {
  return {std::fma(x.re, y.re, -(x.im * y.im)), std::fma(x.im, y.re, x.re * y.im)};
}
// jaxlib 0.12's XLA:CPU contracts the imaginary part's other product: a d fused, b c rounded.
template <class C>
inline C cmul012(C x, C y) {
  return {std::fma(x.re, y.re, -(x.im * y.im)), std::fma(x.re, y.im, x.im * y.re)};
}

// Smith's algorithm (scaling by the larger part of the divisor), then XLA's corner cases when the result is
// (NaN, NaN): a zero divisor gives signed infinities, an infinite numerator over a finite divisor an infinity, a
// finite numerator over an infinite divisor a signed zero.
template <class C>
inline C cdiv(C x, C y) {
  using R = PartOf<C>;
  const R a = x.re, b = x.im, c = y.re, d = y.im;
  C r;
  if (std::fabs(c) < std::fabs(d)) {
    const R ratio = c / d, den = c * ratio + d;
    r = {(a * ratio + b) / den, (b * ratio - a) / den};
  } else {
    const R ratio = d / c, den = d * ratio + c;
    r = {(b * ratio + a) / den, (b - a * ratio) / den};
  }
  if (!(std::isnan(r.re) && std::isnan(r.im))) return r;
  const R inf = std::numeric_limits<R>::infinity(), one = 1, zero = 0;
  if (c == 0 && d == 0 && (!std::isnan(a) || !std::isnan(b))) {
    const R s = std::copysign(inf, c);
    return {s * a, s * b};
  }
  if ((std::isinf(a) || std::isinf(b)) && std::isfinite(c) && std::isfinite(d)) {
    const R ai = std::copysign(std::isinf(a) ? one : zero, a), bi = std::copysign(std::isinf(b) ? one : zero, b);
    return {inf * (ai * c + bi * d), inf * (bi * c - ai * d)};
  }
  if ((std::isinf(c) || std::isinf(d)) && std::isfinite(a) && std::isfinite(b)) {
    const R ci = std::copysign(std::isinf(c) ? one : zero, c), di = std::copysign(std::isinf(d) ? one : zero, d);
    return {zero * (a * ci + b * di), zero * (b * ci - a * di)};
  }
  return r;
}

// |z| without overflow or underflow (hypot); a NaN part gives NaN even beside an infinite one, as XLA's
// max * sqrt(1 + (min/max)^2) does.
template <class C>
inline PartOf<C> cabs(C z) {
  if (std::isnan(z.re) || std::isnan(z.im)) return std::numeric_limits<PartOf<C>>::quiet_NaN();
  return std::hypot(z.re, z.im);
}

// log|z| without forming |z|^2.
template <class C>
inline PartOf<C> clogAbs(C z) {
  using R = PartOf<C>;
  const R a = std::fabs(z.re), b = std::fabs(z.im);
  const R mx = std::max(a, b), mn = std::min(a, b);
  if (!(mx > 0) || std::isinf(mx) || std::isnan(z.re) || std::isnan(z.im)) return std::log(cabs(z));
  const R r = mn / mx;
  return std::log(mx) + R(0.5) * std::log1p(r * r);
}

// e^(a+bi) = e^a (cos b + i sin b), with jaxlib 0.12's XLA:CPU exp (its real exp's).
template <class C>
inline C cexp(C z) {
  const PartOf<C> e = CMath<PartOf<C>>::exp012(z.re);  // no special case for b = 0: exp(inf + 0i) is inf + NaN i
  return {e * std::cos(z.im), e * std::sin(z.im)};
}
// ... and jaxlib 0.4's XLA:CPU: e^a its own exp (xla_math.h), as its real exp.
template <class C>
inline C cexp04(C z) {
  const PartOf<C> e = CMath<PartOf<C>>::exp(z.re);
  return {e * std::cos(z.im), e * std::sin(z.im)};
}
// Complex sinh and cosh as jax's chlo expansion writes them and XLA:CPU runs it, bit for bit:
// e^(z + log 1/2) -+ e^(log 1/2 - z), with the series' own exp, so that sinh cancels near 0 as cpu's does
// (sinh(1e-6 + 1e-6i) has real part 9.83e-7). jaxlib 0.4's XLA:CPU fuses each part's first product into its sum.
template <class C, bool k04, bool kSinh>
inline C csinhcoshChlo(C z) {
  using R = PartOf<C>;
  const R half_log = std::log(R(0.5)), sign = kSinh ? R(-1) : R(1);
  const C up{z.re + half_log, z.im + R(0)}, down{half_log - z.re, R(0) - z.im};
  const R e1 = k04 ? CMath<R>::exp(up.re) : CMath<R>::exp012(up.re);
  const R e2 = k04 ? CMath<R>::exp(down.re) : CMath<R>::exp012(down.re);
  const R c1 = std::cos(up.im), s1 = std::sin(up.im), c2 = std::cos(down.im), s2 = std::sin(down.im);
  if (k04) return {std::fma(e1, c1, sign * (e2 * c2)), std::fma(e1, s1, sign * (e2 * s2))};
  return {e1 * c1 + sign * (e2 * c2), e1 * s1 + sign * (e2 * s2)};
}
// expm1(a+bi) = (expm1(a) cos b + (cos b - 1)) + i exp(a) sin b, with cos b - 1 = -2 sin^2(b/2): exact for small z.
template <class C>
inline C cexpm1(C z) {
  using R = PartOf<C>;
  const R em1 = std::expm1(z.re), s = std::sin(R(0.5) * z.im);
  return {em1 * std::cos(z.im) - R(2) * s * s, (em1 + R(1)) * std::sin(z.im)};
}
// jaxlib 0.12's (its elemental emitter's): (expm1(a) cos b + cosm1(b)) + i (expm1(a) + 1) sin b, cos b = cosm1(b) + 1,
// the real part one fused multiply-add, the imaginary part 0 where b is; cosm1 is Cephes' polynomial in b^2 for
// b^2 <= 0.61685 and cos b - 1 beyond; expm1 is jaxlib 0.12's (xla_math::expm1012) for c64, libm's for c128.
template <class C>
inline C cexpm1012(C z) {
  using R = PartOf<C>;
  static constexpr double kCosm1[] = {4.7377507964246204691685E-14, -1.1470284843425359765671E-11,
                                      2.0876754287081521758361E-9,  -2.7557319214999787979814E-7,
                                      2.4801587301570552304991E-5,  -1.3888888888888872993737E-3,
                                      4.1666666666666666609054E-2};
  const R a = z.re, b = z.im, bb = b * b, b4 = bb * bb;
  R p = R(0);
  for (double c : kCosm1) p = std::fma(p, bb, static_cast<R>(c));
  const R cosm1 = bb > R(0.61685) ? std::cos(b) + R(-1) : std::fma(b4, p, R(-0.5) * bb);
  const R em1 = CMath<R>::expm1012(a);
  return {std::fma(em1, cosm1 + R(1), cosm1), b == R(0) ? R(0) : (em1 + R(1)) * std::sin(b)};
}
template <class C>
inline C clog(C z) {
  return {clogAbs(z), std::atan2(z.im, z.re)};
}
// log1p(a+bi) = 0.5 log1p(a(2+a) + b^2) + i atan2(b, 1+a) near 0; log of 1+z elsewhere.
template <class C>
inline C clog1p(C z) {
  using R = PartOf<C>;
  const R a = z.re, b = z.im;
  if (std::fabs(a) < R(0.5) && std::fabs(b) < R(0.5))
    return {R(0.5) * std::log1p(a * (R(2) + a) + b * b), std::atan2(b, R(1) + a)};
  return clog(C{R(1) + a, b});
}
// C99's csqrt (glibc's special values), computed in double (c64: then rounded): no std::complex, whose sqrt in
// libc++ (the release build's) forms |z| in float and overflows for |z| near FLT_MAX.
template <class C>
inline C csqrt(C z) {
  using R = PartOf<C>;
  const R a = z.re, b = z.im, zero = 0;
  if (std::isinf(b)) return {std::numeric_limits<R>::infinity(), b};  // x +- i inf -> inf +- i inf, even for NaN x
  if (std::isnan(a)) return {a, std::isnan(b) ? b : a};
  if (std::isinf(a)) {
    if (a > 0) return {a, std::isnan(b) ? b : std::copysign(zero, b)};  // +inf + iy -> +inf + i0
    return {std::isnan(b) ? b : zero, std::copysign(std::fabs(a), b)};  // -inf + iy -> 0 +- i inf
  }
  if (std::isnan(b)) return {b, b};
  if (a == zero && b == zero) return {zero, b};
  const double x = a, y = b;
  const double t = std::sqrt((std::fabs(x) + std::hypot(x, y)) * 0.5);
  if (x >= 0) return {static_cast<R>(t), static_cast<R>(y / (2 * t))};
  return {static_cast<R>(std::fabs(y) / (2 * t)), static_cast<R>(std::copysign(t, y))};
}
template <class C>
inline C crsqrt(C z) {
  return cdiv(C{1, 0}, csqrt(z));
}
// (tanh a + i tan b) / (1 + i tanh a tan b): what complex tan is computed from (as -i tanh(iz)).
template <class C>
inline C ctanhQuotient(C z) {
  const PartOf<C> ta = std::tanh(z.re), tb = std::tan(z.im);
  return cdiv(C{ta, tb}, C{1, ta * tb});
}
// Complex tanh as XLA:CPU computes it (EmitComplexTanh, both series):
//   tanh(a+bi) = (e^2a - e^-2a + 4i cos b sin b) / (e^2a + e^-2a - 2 + 4 cos^2 b),
// the exponentials as XLA's expm1 (e^2a - 1 and e^-2a - 1, so small a keeps its digits), a^2 for their sum when
// a^2 < 1e-8; where that sum overflows the real part is +-1 (the sign of a) and the imaginary part a signed zero or
// e^-2|a|-small (tanh(30+1i) is 1 + 1.59e-26i, not 1 - 2.7e-8i). jaxlib 0.12's c128 tanh sums the two expm1s at
// every a (kExpm1Sum: its results are within 2 ulps of numpy's); jaxlib 0.4.13's takes a^2 in f64 too, which is
// 4e-9 off there (tanh(8.3e-5 - 0.59i)). Then C99's special values: a finite a with an
// infinite or NaN b gives NaN + NaN i, an infinite a with such a b gives +-1 + 0i, and b = 0 keeps a +0 imaginary
// part (NaN + 0i for a NaN a).
template <bool kExpm1Sum, class C>
inline C ctanh(C z) {
  using R = PartOf<C>;
  using M = CMath<R>;
  const R a = z.re, b = z.im, inf = std::numeric_limits<R>::infinity();
  const R up = M::expm1(a + a), down = M::expm1(-(a + a));
  const R cb = std::cos(b), sb = std::sin(b);
  const R im_num = R(4) * (cb * sb);
  const R a2 = M::ftz(a * a);
  const R sum_m2 = !kExpm1Sum && a2 < R(1e-8) ? a2 : up + down;
  const R den = sum_m2 + (cb * cb) * R(4);
  R re = sum_m2 == inf ? std::copysign(R(1), a) : (up - down) / den;
  R im = im_num / den;
  const bool a_inf = std::fabs(a) == inf, sin_nan = std::isnan(im_num);
  if (sin_nan && !a_inf) re = std::numeric_limits<R>::quiet_NaN();
  if (b == R(0) || (a_inf && sin_nan)) im = R(0);
  return {re, im};
}
// sin(a+bi) = sin a cosh b + i cos a sinh b; cos(a+bi) = cos a cosh b - i sin a sinh b.
template <class C>
inline C csin(C z) {
  return {std::sin(z.re) * std::cosh(z.im), std::cos(z.re) * std::sinh(z.im)};
}
template <class C>
inline C ccos(C z) {
  return {std::cos(z.re) * std::cosh(z.im), -std::sin(z.re) * std::sinh(z.im)};
}
// jaxlib 0.4's XLA:CPU (its elemental emitter), bit for bit: with e = e^b (XLA's exp) and libm's sin and cos,
// sin(a+bi) = sin a (e/2 + 0.5/e) + i cos a (e/2 - 0.5/e), cos(a+bi) = cos a (0.5/e + e/2) - i sin a (e/2 - 0.5/e):
// e/2 - 0.5/e cancels near the real axis (sin(1e-6i) is 9.54e-7i on cpu), as cpu's does, and cos(0+bi)'s imaginary
// part is -0. (jaxlib 0.12's jax writes complex sin and cos as real ops itself.)
template <class C>
inline C csin04(C z) {
  using R = PartOf<C>;
  const R e = CMath<R>::exp(z.im), half_e = R(0.5) * e, half_inverse = R(0.5) / e;
  return {std::sin(z.re) * (half_e + half_inverse), std::cos(z.re) * (half_e - half_inverse)};
}
template <class C>
inline C ccos04(C z) {
  using R = PartOf<C>;
  const R e = CMath<R>::exp(z.im), half_e = R(0.5) * e, half_inverse = R(0.5) / e;
  return {std::cos(z.re) * (half_inverse + half_e), -std::sin(z.re) * (half_e - half_inverse)};
}
// The inverse trigonometric and hyperbolic functions: C99's (numpy's branch cuts), computed in double (c64: then
// rounded).
template <class C, class F>
inline C viaDouble(C z, F f) {
  const std::complex<double> r = f(std::complex<double>(z.re, z.im));
  return {static_cast<PartOf<C>>(r.real()), static_cast<PartOf<C>>(r.imag())};
}
// tan z = -i tanh(iz).
template <class C>
inline C ctan(C z) {
  const C t = ctanhQuotient(C{-z.im, z.re});
  return {t.im, -t.re};
}
// z / |z|, 0 for 0 (and NaN for NaN).
template <class C>
inline C csign(C z) {
  if (z.re == 0 && z.im == 0) return z;
  const PartOf<C> m = cabs(z);
  return {z.re / m, z.im / m};
}
// jaxlib 0.4's XLA:CPU complex power, bit for bit: x^y = (a^2+b^2)^(c/2) e^(-d arg x) (cos q + i sin q),
// q = c arg x + d/2 ln(a^2+b^2), with a^2 + b^2 = fma(a, a, b^2) (so its under- and overflows too), XLA's own exp and
// log (xla_math.h; libm's for c128), libm's pow, atan2, cos and sin, and c arg x fused into q; where a^2 + b^2 is 0
// (x = 0, or |x| < 1e-19 underflowing and flushed) and y is real and >= 0: 1 for y = 0, else 0, as XLA selects.
template <class C>
inline C cpow(C x, C y) {
  using R = PartOf<C>;
  using M = CMath<R>;
  const R aa_bb = M::ftz(std::fma(x.re, x.re, x.im * x.im)), th = std::atan2(x.im, x.re);
  if (aa_bb == R(0) && y.im == R(0) && y.re >= R(0)) return {y.re == R(0) ? R(1) : R(0), R(0)};
  const R coeff = std::pow(aa_bb, R(0.5) * y.re) * M::exp(-y.im * th);
  const R q = std::fma(y.re, th, R(0.5) * y.im * M::log(aa_bb));
  return {coeff * std::cos(q), coeff * std::sin(q)};
}

// jaxlib 0.12's complex power (ipu/complex_pow.h): finite for tiny and huge |z|, where 0.4's a^2 + b^2 under/overflows.
inline Complex64 cpow012(Complex64 x, Complex64 y) {
  Complex64 r;
  xla012::cpow(x.re, x.im, y.re, y.im, &r.re, &r.im);
  return r;
}
// The same algorithm in f64 (c128), with libm's exp, log, pow and atan2, as XLA:CPU computes f64, and denormals
// flushed as its run's MXCSR does: |z| = M sqrt(fma(m/M, m/M, 1)), z^w = e^(-d t) |z|^c (cos q, sin q) with
// q = fma(t, c, d log|z|), then complex_pow.h's special cases.
inline Complex128 cpow012(Complex128 x, Complex128 y) {
  using M = CMath<double>;
  const double inf = std::numeric_limits<double>::infinity();
  const double a = M::ftz(x.re), b = M::ftz(x.im), c = M::ftz(y.re), d = M::ftz(y.im);
  const double t = std::atan2(b, a);
  const double fa = std::fabs(a), fb = std::fabs(b);
  const double mx = std::isnan(fa) ? fa : (fa > fb ? fa : fb), mn = std::isnan(fa) ? fa : (fa < fb ? fa : fb);
  const double ratio = M::ftz(mn / mx);
  double r = mx * std::sqrt(std::fma(ratio, ratio, 1.0));
  if (std::isnan(r)) r = mn;
  const double coeff = M::ftz(std::exp(M::ftz(t * -d)) * M::ftz(std::pow(r, c)));
  const double q = M::ftz(std::fma(t, c, M::ftz(std::log(r) * d)));
  Complex128 z{M::ftz(coeff * std::cos(q)), M::ftz(coeff * std::sin(q))};
  if (r == 0.0 && d == 0.0 && 0.0 <= c) z = {c == 0.0 ? 1.0 : 0.0, 0.0};  // 0^c
  if (c == 0.0 && d == 0.0) z = {1.0, 0.0};                               // z^0
  if (a == 1.0 && b == 0.0) z = {1.0, 0.0};                               // 1^w
  if (a == inf && b == 0.0 && d == 0.0 && c > 0.0) z = {inf, 0.0};        // inf^c
  if (a == inf && b == 0.0 && d == 0.0 && c < 0.0) z = {0.0, 0.0};        // inf^-c
  return z;
}

#define IPU_COMPLEX_UNARY(Name, expr) \
  struct Name {                       \
    template <class C>                \
    C operator()(C x) const {         \
      return expr;                    \
    }                                 \
  };
IPU_COMPLEX_UNARY(NegateC, (C{-x.re, -x.im}))
IPU_COMPLEX_UNARY(SignC, csign(x))
IPU_COMPLEX_UNARY(ExpC, cexp(x))
IPU_COMPLEX_UNARY(Expm1C, cexpm1(x))
IPU_COMPLEX_UNARY(Expm1C012, cexpm1012(x))
IPU_COMPLEX_UNARY(LogC, clog(x))
IPU_COMPLEX_UNARY(Log1pC, clog1p(x))
IPU_COMPLEX_UNARY(SqrtC, csqrt(x))
IPU_COMPLEX_UNARY(RsqrtC, crsqrt(x))
IPU_COMPLEX_UNARY(SineC, csin(x))
IPU_COMPLEX_UNARY(CosineC, ccos(x))
IPU_COMPLEX_UNARY(Exp04C, cexp04(x))
IPU_COMPLEX_UNARY(SinhChloC, (csinhcoshChlo<C, false, true>(x)))
IPU_COMPLEX_UNARY(CoshChloC, (csinhcoshChlo<C, false, false>(x)))
IPU_COMPLEX_UNARY(Sinh04ChloC, (csinhcoshChlo<C, true, true>(x)))
IPU_COMPLEX_UNARY(Cosh04ChloC, (csinhcoshChlo<C, true, false>(x)))
IPU_COMPLEX_UNARY(Sine04C, csin04(x))
IPU_COMPLEX_UNARY(Cosine04C, ccos04(x))
IPU_COMPLEX_UNARY(TanC, ctan(x))
IPU_COMPLEX_UNARY(AsinC, viaDouble(x, [](const std::complex<double>& z) { return std::asin(z); }))
IPU_COMPLEX_UNARY(AcosC, viaDouble(x, [](const std::complex<double>& z) { return std::acos(z); }))
IPU_COMPLEX_UNARY(AtanC, viaDouble(x, [](const std::complex<double>& z) { return std::atan(z); }))
IPU_COMPLEX_UNARY(AsinhC, viaDouble(x, [](const std::complex<double>& z) { return std::asinh(z); }))
IPU_COMPLEX_UNARY(AcoshC, viaDouble(x, [](const std::complex<double>& z) { return std::acosh(z); }))
IPU_COMPLEX_UNARY(AtanhC, viaDouble(x, [](const std::complex<double>& z) { return std::atanh(z); }))
#undef IPU_COMPLEX_UNARY
template <bool kExpm1Sum>
struct TanhCOf {
  template <class C>
  C operator()(C x) const {
    return ctanh<kExpm1Sum>(x);
  }
};
using TanhC = TanhCOf<false>;

#define IPU_COMPLEX_BINARY(Name, expr) \
  struct Name {                        \
    template <class C>                 \
    C operator()(C x, C y) const {     \
      return expr;                     \
    }                                  \
  };
IPU_COMPLEX_BINARY(AddC, (C{x.re + y.re, x.im + y.im}))
IPU_COMPLEX_BINARY(SubtractC, (C{x.re - y.re, x.im - y.im}))
IPU_COMPLEX_BINARY(MultiplyC, cmul(x, y))
IPU_COMPLEX_BINARY(MultiplyC012, cmul012(x, y))
IPU_COMPLEX_BINARY(DivideC, cdiv(x, y))
IPU_COMPLEX_BINARY(PowerC, cpow(x, y))
#undef IPU_COMPLEX_BINARY
struct PowerC012 {
  template <class C>
  C operator()(C x, C y) const {
    return cpow012(x, y);
  }
};

struct AbsC {
  template <class C>
  PartOf<C> operator()(C x) const {
    return cabs(x);
  }
};
struct RealC {
  template <class C>
  PartOf<C> operator()(C x) const {
    return x.re;
  }
};
struct ImagC {
  template <class C>
  PartOf<C> operator()(C x) const {
    return x.im;
  }
};
struct MakeComplex {
  template <class R>
  typename CMath<R>::C operator()(R re, R im) const {
    return {re, im};
  }
};
// Complex numbers are not ordered: EQ and NE only (as XLA), part by part.
struct EqualC {
  template <class C>
  uint8_t operator()(C x, C y) const {
    return uint8_t(x.re == y.re && x.im == y.im);
  }
};
struct NotEqualC {
  template <class C>
  uint8_t operator()(C x, C y) const {
    return uint8_t(x.re != y.re || x.im != y.im);
  }
};

// ---- f64: software binary64 (the IPU has no f64 unit; dtype.h) ----
// The results are IEEE binary64's, as XLA:CPU computes f64: correctly rounded arithmetic, libm's functions, with
// denormals read and written as zeros (the run's MXCSR, as XLA:CPU's). Where chlo expands a special function for f64
// the result is the function's, to within its last bits: erf_inv by three Newton steps from the f32 estimate, digamma
// by recurrence and its asymptotic series.
constexpr double kPiD = 3.14159265358979323846;
inline double maxXlaD(double a, double b) { return (a >= b || std::isnan(a)) ? a : b; }
inline double minXlaD(double a, double b) { return (a <= b || std::isnan(a)) ? a : b; }
// Total order on doubles as integers, as totalOrderKey on floats: -NaN < -inf < ... < -0 < +0 < ... < +NaN.
inline int64_t totalOrderKeyD(double x) {
  int64_t bits;
  std::memcpy(&bits, &x, 8);
  return bits ^ ((bits >> 63) & 0x7fffffffffffffffLL);
}
// jaxlib 0.12's f64 maximum/minimum: IEEE 754-2019's (NaN propagates, -0 < +0) of the operands read with denormals
// as zeros, returned so (as its f32 ones).
template <bool kMax>
inline double ieeePickD(double a, double b) {
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  a = ftzD(a), b = ftzD(b);
  return (totalOrderKeyD(a) >= totalOrderKeyD(b)) == kMax ? a : b;
}
inline double signD(double x) { return std::isnan(x) ? x : std::copysign(x != 0.0 ? 1.0 : 0.0, x); }
inline double erfInvD(double x) {
  if (std::fabs(x) >= 1.0)
    return std::fabs(x) == 1.0 ? x * std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  double y = erfInv(static_cast<float>(x));
  if (!std::isfinite(y)) y = std::copysign(5.9, x);  // past f32's range: start near erf's last f64 digits
  for (int i = 0; i < 3; ++i) y -= (std::erf(y) - x) / (1.1283791670955126 * std::exp(-y * y));
  return y;
}
inline double digammaD(double x) {
  if (std::isnan(x) || x == -std::numeric_limits<double>::infinity()) return std::numeric_limits<double>::quiet_NaN();
  if (x <= 0.0 && x == std::floor(x)) return std::numeric_limits<double>::quiet_NaN();
  double shift = 0.0;
  if (x < 0.0) {  // reflection: psi(1 - x) - pi / tan(pi x)
    shift = -kPiD / std::tan(kPiD * x);
    x = 1.0 - x;
  }
  while (x < 10.0) shift -= 1.0 / x, x += 1.0;
  const double r = 1.0 / (x * x);
  const double series =
      r * (1.0 / 12 - r * (1.0 / 120 - r * (1.0 / 252 - r * (1.0 / 240 - r * (1.0 / 132 - r * (691.0 / 32760))))));
  return shift + std::log(x) - 0.5 / x - series;
}
#define IPU_DOUBLE_UNARY(Name, expr)                   \
  struct Name {                                        \
    double operator()(double x) const { return expr; } \
  };
IPU_DOUBLE_UNARY(AbsD, std::fabs(x))
IPU_DOUBLE_UNARY(NegateD, -x)
IPU_DOUBLE_UNARY(SignD, signD(x))
IPU_DOUBLE_UNARY(ExpD, std::exp(x))
IPU_DOUBLE_UNARY(Expm1D, std::expm1(x))
IPU_DOUBLE_UNARY(LogD, std::log(x))
IPU_DOUBLE_UNARY(Log1pD, std::log1p(x))
IPU_DOUBLE_UNARY(SqrtD, std::sqrt(x))
IPU_DOUBLE_UNARY(RsqrtD, 1.0 / std::sqrt(x))
IPU_DOUBLE_UNARY(CbrtD, std::cbrt(x))
IPU_DOUBLE_UNARY(TanhD, std::tanh(x))
IPU_DOUBLE_UNARY(LogisticD, 1.0 / (1.0 + std::exp(-x)))
IPU_DOUBLE_UNARY(SineD, std::sin(x))
IPU_DOUBLE_UNARY(CosineD, std::cos(x))
IPU_DOUBLE_UNARY(TanD, std::tan(x))
IPU_DOUBLE_UNARY(FloorD, std::floor(x))
IPU_DOUBLE_UNARY(CeilD, std::ceil(x))
IPU_DOUBLE_UNARY(RoundEvenD, std::nearbyint(x))
IPU_DOUBLE_UNARY(RoundAfzD, std::round(x))
IPU_DOUBLE_UNARY(ErfD, std::erf(x))
IPU_DOUBLE_UNARY(ErfcD, std::erfc(x))
IPU_DOUBLE_UNARY(SinhD, std::sinh(x))
IPU_DOUBLE_UNARY(CoshD, std::cosh(x))
IPU_DOUBLE_UNARY(AsinD, std::asin(x))
IPU_DOUBLE_UNARY(AcosD, std::acos(x))
IPU_DOUBLE_UNARY(AtanD, std::atan(x))
IPU_DOUBLE_UNARY(AsinhD, std::asinh(x))
IPU_DOUBLE_UNARY(AcoshD, std::acosh(x))
IPU_DOUBLE_UNARY(AtanhD, std::atanh(x))
IPU_DOUBLE_UNARY(ErfInvD, erfInvD(x))
IPU_DOUBLE_UNARY(LgammaD, std::lgamma(x))
IPU_DOUBLE_UNARY(DigammaD, digammaD(x))
struct IsFiniteF64 {
  uint8_t operator()(double x) const { return uint8_t(std::isfinite(x)); }
};
#define IPU_DOUBLE_BINARY(Name, expr)                            \
  struct Name {                                                  \
    double operator()(double x, double y) const { return expr; } \
  };
IPU_DOUBLE_BINARY(MaximumD, maxXlaD(x, y))
IPU_DOUBLE_BINARY(MinimumD, minXlaD(x, y))
IPU_DOUBLE_BINARY(MaximumIeeeD, ieeePickD<true>(x, y))
IPU_DOUBLE_BINARY(MinimumIeeeD, ieeePickD<false>(x, y))
IPU_DOUBLE_BINARY(NextAfterD, std::nextafter(x, y))
struct TotalOrderF64Key {
  int64_t operator()(double x) const { return totalOrderKeyD(x); }
};
template <bool Ieee>
struct ClampF64 {
  double operator()(double l, double v, double h) const {
    return Ieee ? ieeePickD<false>(ieeePickD<true>(v, l), h) : minXlaD(maxXlaD(v, l), h);
  }
};

// The f64 unary ops, and the binary ops that are no reducer's combiner (functor: the op's name + D).
// clang-format off
#define IPU_F64_UNARY_OPS(X)                                                                                     \
  X(Abs) X(Negate) X(Sign) X(Exp) X(Expm1) X(Log) X(Log1p) X(Sqrt) X(Rsqrt) X(Cbrt) X(Tanh) X(Logistic) X(Sine)  \
  X(Cosine) X(Tan) X(Floor) X(Ceil) X(RoundEven) X(RoundAfz) X(Erf) X(Erfc) X(Sinh) X(Cosh) X(Asin) X(Acos)     \
  X(Atan) X(Asinh) X(Acosh) X(Atanh) X(ErfInv) X(Lgamma) X(Digamma)
#define IPU_F64_BINARY_OPS(X) X(Subtract) X(Divide) X(Remainder) X(Power) X(Atan2) X(NextAfter)
// The switch case of one of them: a visitor's `f(functor)`.
#define IPU_F64_CASE(Op) case OpKind::Op: found = f(Op##D{}); break;
// clang-format on

// ---- visitors: op kind + element type -> functor and storage types ----

// The float functor F on element type D (f32 directly, f16/bf16 computed in f32 and rounded).
template <DType D, class F>
auto floatOp(F op) {
  if constexpr (D == DType::F32) return op;
  else if constexpr (isNarrowFloat(D)) return Half1<F, FloatFormat<D>>{};
}
template <DType D, class F>
auto floatOp2(F op) {
  if constexpr (D == DType::F32) return op;
  else if constexpr (isNarrowFloat(D)) return Half2<F, FloatFormat<D>>{};
}

// Unary ops: calls v(f, Tag<In>, Tag<Out>) with Out f(In), the functor of `numerics` (the program's: ipu/numerics.h).
// Returns false when `k` on `dt` has no functor.
template <class V>
bool visitUnary(OpKind k, DType dt, Numerics numerics, V&& v) {
  bool found = false;
  const bool v012 = numerics == Numerics::Jaxlib012;
  visitDType(dt, [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    using T = Storage<D>;
    if constexpr (D == DType::F32 || isNarrowFloat(D)) {
      if (k == OpKind::IsFinite) {
        if constexpr (D == DType::F32) v(IsFiniteF32{}, Tag<float>{}, Tag<uint8_t>{});
        else v(IsFinite16<FloatFormat<D>>{}, Tag<T>{}, Tag<uint8_t>{});
        found = true;
        return;
      }
      auto f = [&](auto op) {
        v(floatOp<D>(op), Tag<T>{}, Tag<T>{});
        return true;
      };
      switch (k) {
        case OpKind::Abs: found = f(AbsF{}); break;
        case OpKind::Negate: found = f(NegateF{}); break;
        case OpKind::Sign: found = f(SignF{}); break;
        case OpKind::Exp: found = v012 ? f(Exp012F{}) : f(ExpF{}); break;
        case OpKind::Expm1: found = v012 ? f(Expm1012F{}) : D == DType::F16 ? f(Expm104F16{}) : f(Expm1F{}); break;
        case OpKind::Log: found = f(LogF{}); break;
        case OpKind::Log1p: found = v012 ? f(Log1p012F{}) : D == DType::F16 ? f(Log1p04F16{}) : f(Log1pF{}); break;
        case OpKind::Sqrt: found = f(SqrtF{}); break;
        case OpKind::Rsqrt: found = v012 ? f(Rsqrt012F{}) : f(RsqrtF{}); break;
        case OpKind::Cbrt: found = v012 ? f(CbrtF{}) : D == DType::F16 ? f(Cbrt04F16{}) : f(Cbrt04F{}); break;
        case OpKind::Tanh: found = v012 ? f(Tanh012F{}) : f(TanhF{}); break;
        case OpKind::Logistic: found = v012 ? f(Logistic012F{}) : f(LogisticF{}); break;
        case OpKind::Sine: found = f(SineF{}); break;
        case OpKind::Cosine: found = f(CosineF{}); break;
        case OpKind::Tan: found = v012 ? f(Tan012F{}) : f(TanF{}); break;
        case OpKind::Floor: found = f(FloorF{}); break;
        case OpKind::Ceil: found = f(CeilF{}); break;
        case OpKind::RoundEven: found = f(RoundEvenF{}); break;
        case OpKind::RoundAfz: found = f(RoundAfzF{}); break;
        case OpKind::Erf: found = v012 ? f(Erf012F{}) : f(ErfF{}); break;
        case OpKind::Erfc: found = f(ErfcF{}); break;
        case OpKind::Sinh: found = v012 ? f(SinhF{}) : f(Sinh04F{}); break;
        case OpKind::Cosh: found = f(CoshF{}); break;
        case OpKind::Asin: found = f(AsinF{}); break;
        case OpKind::Acos: found = f(AcosF{}); break;
        case OpKind::Atan: found = v012 ? f(Atan012F{}) : f(AtanF{}); break;
        case OpKind::Asinh: found = v012 ? f(AsinhF{}) : f(Asinh04F{}); break;
        case OpKind::Acosh: found = f(AcoshF{}); break;
        case OpKind::Atanh: found = f(AtanhF{}); break;
        case OpKind::ErfInv: found = f(ErfInvF{}); break;
        case OpKind::Lgamma: found = f(LgammaF{}); break;
        case OpKind::Digamma: found = f(DigammaF{}); break;
        case OpKind::BesselI1e: found = f(BesselI1eF{}); break;
        default: break;
      }
    } else if constexpr (D == DType::F64) {
      if (k == OpKind::IsFinite) {
        v(IsFiniteF64{}, Tag<double>{}, Tag<uint8_t>{});
        found = true;
        return;
      }
      auto f = [&](auto op) { return v(op, Tag<double>{}, Tag<double>{}), true; };
      switch (k) {
        IPU_F64_UNARY_OPS(IPU_F64_CASE)
        default: break;
      }
    } else if constexpr (isComplex(D)) {
      auto f = [&](auto op) {
        v(op, Tag<T>{}, Tag<T>{});
        return true;
      };
      switch (k) {
        case OpKind::Abs:
          v(AbsC{}, Tag<T>{}, Tag<PartOf<T>>{});
          found = true;
          break;
        case OpKind::Negate: found = f(NegateC{}); break;
        case OpKind::Sign: found = f(SignC{}); break;
        case OpKind::Exp: found = v012 ? f(ExpC{}) : f(Exp04C{}); break;
        case OpKind::Expm1: found = v012 ? f(Expm1C012{}) : f(Expm1C{}); break;
        case OpKind::Log: found = f(LogC{}); break;
        case OpKind::Log1p: found = f(Log1pC{}); break;
        case OpKind::Sqrt: found = f(SqrtC{}); break;
        case OpKind::Rsqrt: found = f(RsqrtC{}); break;
        case OpKind::Tanh: found = D == DType::C128 && v012 ? f(TanhCOf<true>{}) : f(TanhC{}); break;
        case OpKind::Sine: found = v012 ? f(SineC{}) : f(Sine04C{}); break;
        case OpKind::Cosine: found = v012 ? f(CosineC{}) : f(Cosine04C{}); break;
        case OpKind::Sinh: found = v012 ? f(SinhChloC{}) : f(Sinh04ChloC{}); break;
        case OpKind::Cosh: found = v012 ? f(CoshChloC{}) : f(Cosh04ChloC{}); break;
        case OpKind::Tan: found = f(TanC{}); break;
        case OpKind::Asin: found = f(AsinC{}); break;
        case OpKind::Acos: found = f(AcosC{}); break;
        case OpKind::Atan: found = f(AtanC{}); break;
        case OpKind::Asinh: found = f(AsinhC{}); break;
        case OpKind::Acosh: found = f(AcoshC{}); break;
        case OpKind::Atanh: found = f(AtanhC{}); break;
        default: break;
      }
    } else if constexpr (D == DType::Bool) {
      if (k == OpKind::Not) {
        v(NotB{}, Tag<uint8_t>{}, Tag<uint8_t>{});
        found = true;
      }
    } else if constexpr (std::is_integral<T>::value) {
      auto f = [&](auto op) {
        v(op, Tag<T>{}, Tag<T>{});
        return true;
      };
      switch (k) {
        case OpKind::Abs: found = f(AbsI<T>{}); break;
        case OpKind::Negate: found = f(NegateI<T>{}); break;
        case OpKind::Sign: found = f(SignI<T>{}); break;
        case OpKind::Not: found = f(NotI<T>{}); break;
        case OpKind::Popcnt: found = f(PopcntI<T>{}); break;
        case OpKind::Clz: found = f(ClzI<T>{}); break;
        default: break;
      }
    }
  });
  return found;
}

// Binary ops: calls v(f, Tag<T>) with T f(T, T), the functor of `numerics`. Returns false when `k` on `dt` has no
// functor. `constant`: which operand is a splat constant (an elementwise op's "constant_operand"; see xlaConstant).
// `windowed`: the combiner of a reduce_window (and the cumulative ops built on it), where jaxlib 0.12's bf16 maximum
// and minimum read denormals as zeros on an AVX-512 host too (ieee16Avx512 is the elementwise ops' and reduce's).
// `kReducersOnly`: only the combiners of the reducer ops (isReducerKind: a reduce's, scatter's, collective's native
// kernel) are visited, and only theirs are instantiated, so that a kernel template built per combiner is not compiled
// for the ops no reduction runs; any other `k` is not found. visitBinaryOf<D> is the same for one element type D
// known when compiling: only D's functors are instantiated (a kernel template built per element type,
// reduceKernelOf<D>, visits its own type's alone; visitBinary instantiates every type's).
template <DType D, bool kReducersOnly = false, class V>
bool visitBinaryOf(OpKind k, Numerics numerics, V&& v, ConstantOperand constant = ConstantOperand::None,
                   bool windowed = false) {
  bool found = false;
  if (kReducersOnly && !isReducerKind(k)) return false;
  const bool v012 = numerics == Numerics::Jaxlib012;
  using T = Storage<D>;
  if constexpr (D == DType::F32 || isNarrowFloat(D)) {
    auto f = [&](auto op) {
      v(floatOp2<D>(op), Tag<T>{});
      return true;
    };
    switch (k) {
      case OpKind::Add: found = f(AddF{}); break;
      case OpKind::Subtract:
        if constexpr (!kReducersOnly) found = f(SubtractF{});
        break;
      case OpKind::Multiply: found = f(MultiplyF{}); break;
      case OpKind::Divide:
        if constexpr (!kReducersOnly) found = f(DivideF{});
        break;
      case OpKind::Remainder:
        if constexpr (!kReducersOnly) found = f(RemainderF{});
        break;
      case OpKind::Power:
        if constexpr (!kReducersOnly) found = f(PowerF{});
        break;
      case OpKind::Maximum:
        // A splat constant operand (an elementwise op's, never a reduction's: not instantiated for reducers).
        if constexpr (!kReducersOnly) {
          if (constant != ConstantOperand::None) {
            if (!v012) found = constant == ConstantOperand::Lhs ? f(MaximumConstantLhsF{}) : f(MaximumConstantF{});
            else if constexpr (D == DType::F32)
              found = constant == ConstantOperand::Lhs ? f(MaximumIeeeConstantLhsF{}) : f(MaximumIeeeConstantF{});
            if (found) break;
          }
        }
        if (!v012) found = f(MaximumF{});
        else if constexpr (D == DType::F32) found = f(MaximumIeeeF{});
        else if (ieee16Avx512<D>() && !windowed) found = f(MaximumAvx512F{});
        else if (ieee16Daz<D>()) found = f(MaximumIeeeF{});  // in f32: bf16 denormals read as zeros
        else found = f(MaximumIeee16F{});
        break;
      case OpKind::Minimum:
        if constexpr (!kReducersOnly) {  // as Maximum's
          if (constant != ConstantOperand::None) {
            if (!v012) found = constant == ConstantOperand::Lhs ? f(MinimumConstantLhsF{}) : f(MinimumConstantF{});
            else if constexpr (D == DType::F32)
              found = constant == ConstantOperand::Lhs ? f(MinimumIeeeConstantLhsF{}) : f(MinimumIeeeConstantF{});
            if (found) break;
          }
        }
        if (!v012) found = f(MinimumF{});
        else if constexpr (D == DType::F32) found = f(MinimumIeeeF{});
        else if (ieee16Avx512<D>() && !windowed) found = f(MinimumAvx512F{});
        else if (ieee16Daz<D>()) found = f(MinimumIeeeF{});  // in f32: bf16 denormals read as zeros
        else found = f(MinimumIeee16F{});
        break;
      case OpKind::Atan2:
        if constexpr (!kReducersOnly) found = f(Atan2F{});
        break;
      case OpKind::NextAfter:
        if constexpr (kReducersOnly) break;
        else if constexpr (D == DType::F32) found = f(NextAfterF{});
        else v(NextAfter16<FloatFormat<D>>{}, Tag<T>{}), found = true;
        break;
      default: break;
    }
  } else if constexpr (D == DType::F64) {  // the emulated f64: one functor per op, for both numerics but max/min
    auto f = [&](auto op) { return v(op, Tag<double>{}), true; };
    switch (k) {
      case OpKind::Add: found = f(AddD{}); break;
      case OpKind::Multiply: found = f(MultiplyD{}); break;
      case OpKind::Maximum: found = v012 ? f(MaximumIeeeD{}) : f(MaximumD{}); break;
      case OpKind::Minimum: found = v012 ? f(MinimumIeeeD{}) : f(MinimumD{}); break;
      default:
        if constexpr (!kReducersOnly) {
          switch (k) {
            IPU_F64_BINARY_OPS(IPU_F64_CASE)
            default: break;
          }
        }
        break;
    }
  } else if constexpr (isComplex(D)) {
    auto f = [&](auto op) {
      v(op, Tag<T>{});
      return true;
    };
    switch (k) {
      case OpKind::Add: found = f(AddC{}); break;
      case OpKind::Subtract:
        if constexpr (!kReducersOnly) found = f(SubtractC{});
        break;
      case OpKind::Multiply: found = v012 ? f(MultiplyC012{}) : f(MultiplyC{}); break;
      case OpKind::Divide:
        if constexpr (!kReducersOnly) found = f(DivideC{});
        break;
      case OpKind::Power:
        if constexpr (!kReducersOnly) found = v012 ? f(PowerC012{}) : f(PowerC{});
        break;
      default: break;
    }
  } else if constexpr (D == DType::Bool) {
    switch (k) {
      case OpKind::And:
      case OpKind::Minimum:
        v(AndB{}, Tag<uint8_t>{});
        found = true;
        break;
      case OpKind::Or:
      case OpKind::Maximum:
        v(OrB{}, Tag<uint8_t>{});
        found = true;
        break;
      case OpKind::Xor:
        if constexpr (!kReducersOnly) {
          v(XorB{}, Tag<uint8_t>{});
          found = true;
        }
        break;
      default: break;
    }
  } else if constexpr (std::is_integral<T>::value) {
    auto f = [&](auto op) {
      v(op, Tag<T>{});
      return true;
    };
    switch (k) {
      case OpKind::Add: found = f(AddI<T>{}); break;
      case OpKind::Subtract:
        if constexpr (!kReducersOnly) found = f(SubtractI<T>{});
        break;
      case OpKind::Multiply: found = f(MultiplyI<T>{}); break;
      case OpKind::Divide:
        if constexpr (!kReducersOnly) found = f(DivideI<T>{});
        break;
      case OpKind::Remainder:
        if constexpr (!kReducersOnly) found = f(RemainderI<T>{});
        break;
      case OpKind::Power:
        if constexpr (!kReducersOnly) found = f(PowerI<T>{});
        break;
      case OpKind::Maximum: found = f(MaximumI<T>{}); break;
      case OpKind::Minimum: found = f(MinimumI<T>{}); break;
      case OpKind::And: found = f(AndI<T>{}); break;
      case OpKind::Or: found = f(OrI<T>{}); break;
      case OpKind::Xor:
        if constexpr (!kReducersOnly) found = f(XorI<T>{});
        break;
      case OpKind::ShiftLeft:
        if constexpr (!kReducersOnly) found = f(ShiftLeftI<T>{});
        break;
      case OpKind::ShiftRightArithmetic:
        if constexpr (!kReducersOnly) found = f(ShiftRightArithmeticI<T>{});
        break;
      case OpKind::ShiftRightLogical:
        if constexpr (!kReducersOnly) found = f(ShiftRightLogicalI<T>{});
        break;
      default: break;
    }
  }
  return found;
}

template <bool kReducersOnly = false, class V>
bool visitBinary(OpKind k, DType dt, Numerics numerics, V&& v, ConstantOperand constant = ConstantOperand::None,
                 bool windowed = false) {
  bool found = false;
  visitDType(dt, [&](auto tag) {
    found = visitBinaryOf<decltype(tag)::value, kReducersOnly>(k, numerics, v, constant, windowed);
  });
  return found;
}

// compare: calls v(f, Tag<T>) with uint8_t f(T, T). `type` is the compare_type: TOTALORDER orders floats totally;
// SIGNED / UNSIGNED reinterpret the bits of integers; otherwise the dtype's own order.
template <class V>
bool visitCompare(Direction d, const std::string& type, DType dt, V&& v) {
  auto with = [&](auto tag, auto key) {
    using T = typename decltype(tag)::type;
    using Key = decltype(key);
    switch (d) {
      case Direction::EQ: v(CompareOp<T, Key, std::equal_to<>>{}, Tag<T>{}); break;
      case Direction::NE: v(CompareOp<T, Key, std::not_equal_to<>>{}, Tag<T>{}); break;
      case Direction::GE: v(CompareOp<T, Key, std::greater_equal<>>{}, Tag<T>{}); break;
      case Direction::GT: v(CompareOp<T, Key, std::greater<>>{}, Tag<T>{}); break;
      case Direction::LE: v(CompareOp<T, Key, std::less_equal<>>{}, Tag<T>{}); break;
      case Direction::LT: v(CompareOp<T, Key, std::less<>>{}, Tag<T>{}); break;
    }
  };
  const bool total = type == "TOTALORDER";
  return visitDType(dt, [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    using T = Storage<D>;
    if constexpr (D == DType::F32) {
      if (total) with(Tag<T>{}, TotalOrderF32Key{});
      else with(Tag<T>{}, IdentityKey<T>{});
    } else if constexpr (isNarrowFloat(D)) {
      if (total) with(Tag<T>{}, TotalOrder16Key<FloatFormat<D>>{});
      else with(Tag<T>{}, FloatKey<FloatFormat<D>>{});
    } else if constexpr (D == DType::F64) {
      if (total) with(Tag<T>{}, TotalOrderF64Key{});
      else with(Tag<T>{}, IdentityKey<T>{});
    } else if constexpr (isComplex(D)) {  // not ordered: EQ and NE only
      if (d == Direction::EQ) v(EqualC{}, Tag<T>{});
      if (d == Direction::NE) v(NotEqualC{}, Tag<T>{});
    } else if constexpr (std::is_integral<T>::value && D != DType::Bool) {
      if (type == "SIGNED") with(Tag<T>{}, ReinterpretKey<T, std::make_signed_t<T>>{});
      else if (type == "UNSIGNED") with(Tag<T>{}, ReinterpretKey<T, Unsigned<T>>{});
      else with(Tag<T>{}, IdentityKey<T>{});
    } else {
      with(Tag<T>{}, IdentityKey<T>{});
    }
  });
}

// select (dt: the type of the chosen values): calls v(f, Tag<T>) with T f(uint8_t, T, T). Selection moves bits, so
// the storage is keyed on size alone.
template <class V>
bool visitSelect(DType dt, V&& v) {
  switch (dtypeSize(dt)) {
    case 1: v(SelectOp<uint8_t>{}, Tag<uint8_t>{}); return true;
    case 2: v(SelectOp<uint16_t>{}, Tag<uint16_t>{}); return true;
    case 4: v(SelectOp<uint32_t>{}, Tag<uint32_t>{}); return true;
    case 8: v(SelectOp<uint64_t>{}, Tag<uint64_t>{}); return true;  // c64: a pair of f32 moves as one
    case 16: v(SelectOp<Complex128>{}, Tag<Complex128>{}); return true;  // c128: a pair of f64
    default: return false;
  }
}

// clamp(min, x, max): calls v(f, Tag<T>) with T f(T, T, T), the functor of `numerics`.
template <class V>
bool visitClamp(DType dt, Numerics numerics, V&& v) {
  bool found = false;
  const bool v012 = numerics == Numerics::Jaxlib012;
  visitDType(dt, [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    using T = Storage<D>;
    if constexpr (D == DType::F32) {
      if (v012) v(ClampF32<true>{}, Tag<T>{});
      else v(ClampF32<false>{}, Tag<T>{});
      found = true;
    } else if constexpr (isNarrowFloat(D)) {
      if (v012 && ieee16Daz<D>()) v(Clamp16<FloatFormat<D>, true, true>{}, Tag<T>{});
      else if (v012) v(Clamp16<FloatFormat<D>, true>{}, Tag<T>{});
      else v(Clamp16<FloatFormat<D>, false>{}, Tag<T>{});
      found = true;
    } else if constexpr (D == DType::F64) {
      if (v012) v(ClampF64<true>{}, Tag<T>{});
      else v(ClampF64<false>{}, Tag<T>{});
      found = true;
    } else if constexpr (D != DType::Bool && !isComplex(D)) {
      v(ClampI<T>{}, Tag<T>{}), found = true;
    }
  });
  return found;
}

// A conversion with fp8 on either side. From fp8: its exact value as f32, then as f32 converts (to integers
// saturating, NaN to 0; to bool != 0; to c64 as the real part). To fp8: rounded once from the source's exact value
// (c64: its real part; integers through f32, exact below 2^24, beyond every fp8's range). NaN into e5m2 keeps its
// sign from f32 and f64 and becomes 0x7f from the 16-bit floats and the other fp8 types, as XLA:CPU converts them
// (measured, both series: it converts those by binary16's bits).
template <DType To, DType From>
struct Float8ConvertOp {
  Storage<To> operator()(Storage<From> x) const {
    if constexpr (isFloat8(To)) {
      if constexpr (isFloat8(From)) return {fromWide(float8ToFloat(From, x.bits))};
      else if constexpr (isComplex(From)) return {float8FromDouble(To, x.re)};
      else if constexpr (From == DType::F64) return {float8FromDouble(To, x)};
      else if constexpr (isNarrowFloat(From)) return {fromWide(convertValue<DType::F32, From>(x))};
      else return {float8FromDouble(To, static_cast<double>(convertValue<DType::F32, From>(x)))};
    } else {
      return convertValue<To, DType::F32>(float8ToFloat(From, x.bits));
    }
  }
  static uint8_t fromWide(float v) {
    if (To == DType::F8E5M2 && std::isnan(v)) return 0x7f;
    return float8FromDouble(To, v);
  }
};

// A conversion with a sub-byte integer on either side (dtype.h), as XLA:CPU converts (measured, jaxlib 0.12): from
// one, its value as i32 converts; to one, an integer's or bool's low bits (two's complement wrap), a float's value
// truncated and saturated to the type's range with NaN 0 (c64, c128: the real part; fp8: its value).
template <DType To, DType From>
struct SubByteConvertOp {
  Storage<To> operator()(Storage<From> x) const {
    if constexpr (isSubByte(From)) {
      const int32_t v = subByteValue<From>(x);
      if constexpr (isSubByte(To)) return {wrap(v)};
      else if constexpr (isFloat8(To)) return Float8ConvertOp<To, DType::I32>{}(v);
      else return convertValue<To, DType::I32>(v);
    } else if constexpr (isFloat8(From)) {
      return {saturate(convertValue<DType::I32, DType::F32>(float8ToFloat(From, x.bits)))};
    } else if constexpr (std::is_integral<Storage<From>>::value && !isNarrowFloat(From)) {  // ints, bool
      return {wrap(static_cast<int64_t>(valueOf<From>(x)))};
    } else {
      return {saturate(convertValue<DType::I32, From>(x))};
    }
  }
  static uint8_t wrap(int64_t v) { return static_cast<uint8_t>(v & ((int64_t{1} << subByteBits(To)) - 1)); }
  static uint8_t saturate(int32_t v) {
    constexpr int bits = subByteBits(To);
    constexpr int32_t lo = subByteSigned(To) ? -(1 << (bits - 1)) : 0;
    constexpr int32_t hi = subByteSigned(To) ? (1 << (bits - 1)) - 1 : (1 << bits) - 1;
    return wrap(std::min(std::max(v, lo), hi));
  }
};

// A conversion with a type of one kind (`kind` visits its types: fp8's, the sub-byte integers') on either side and
// any type `others` visits on the other, by the kind's Op<To, From>: calls v(f, Tag<From>, Tag<To>).
template <template <DType, DType> class Op, class Kind, class Others, class V>
bool visitConvertOfKind(DType from, DType to, Kind kind, Others others, V&& v) {
  bool found = false;
  auto pair = [&](auto special, DType other, auto to_special) {
    constexpr DType S = decltype(special)::value;
    others(other, [&](auto t) {
      constexpr DType T = decltype(t)::value;
      if constexpr (decltype(to_special)::value) v(Op<S, T>{}, Tag<Storage<T>>{}, Tag<Storage<S>>{});
      else v(Op<T, S>{}, Tag<Storage<S>>{}, Tag<Storage<T>>{});
      found = true;
    });
  };
  if (!kind(from, [&](auto special) { pair(special, to, std::false_type{}); }))
    kind(to, [&](auto special) { pair(special, from, std::true_type{}); });
  return found;
}

// convert: calls v(f, Tag<From>, Tag<To>) with To f(From); fp8 and the sub-byte integers on either side (the other
// any type) included.
template <class V>
bool visitConvert(DType from, DType to, V&& v) {
  auto computed_or_fp8 = [](DType d, auto&& f) { return visitDType(d, f) || visitFloat8(d, f); };
  if (isSubByte(from) || isSubByte(to))
    return visitConvertOfKind<SubByteConvertOp>(
        from, to, [](DType d, auto&& f) { return visitSubByte(d, f); },
        [&](DType d, auto&& f) { return computed_or_fp8(d, f) || visitSubByte(d, f); }, v);
  if (isFloat8(from) || isFloat8(to))
    return visitConvertOfKind<Float8ConvertOp>(
        from, to, [](DType d, auto&& f) { return visitFloat8(d, f); }, computed_or_fp8, v);
  bool found = false;
  visitDType(from, [&](auto from_tag) {
    constexpr DType F = decltype(from_tag)::value;
    found = visitDType(to, [&](auto to_tag) {
      constexpr DType T = decltype(to_tag)::value;
      v(ConvertOp<T, F>{}, Tag<Storage<F>>{}, Tag<Storage<T>>{});
    });
  });
  return found;
}

// The identity of a single-op reduction (add/or: 0, multiply: 1, maximum: the lowest value, minimum: the highest,
// and: all ones) on `dt`, in the type's storage bits (zero-extended); false when it has none.
inline bool reductionIdentityBits(OpKind kind, DType dt, uint64_t* bits) {
  bool found = false;
  visitDType(dt, [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    using T = Storage<D>;
    if constexpr (isComplex(D)) {  // callers give complex pair identities themselves
      return;
    } else {
      constexpr bool flt = D == DType::F32 || D == DType::F64 || isNarrowFloat(D);
      T value{};
      auto fromF32 = [](float f) { return convertValue<D, DType::F32>(f); };
      switch (kind) {
        case OpKind::Add:
        case OpKind::Or:
          value = fromF32(0.0f);
          found = true;
          break;
        case OpKind::Multiply:
          value = fromF32(1.0f);
          found = true;
          break;
        case OpKind::Maximum:
          if constexpr (flt) value = fromF32(-std::numeric_limits<float>::infinity());
          else if constexpr (D != DType::Bool) value = std::numeric_limits<T>::lowest();
          found = true;
          break;
        case OpKind::Minimum:
          if constexpr (flt) value = fromF32(std::numeric_limits<float>::infinity());
          else if constexpr (D == DType::Bool) value = 1;
          else value = std::numeric_limits<T>::max();
          found = true;
          break;
        case OpKind::And:
          if constexpr (D == DType::Bool) value = 1, found = true;
          else if constexpr (!flt) value = static_cast<T>(~Unsigned<T>(0)), found = true;
          break;
        default: break;
      }
      *bits = 0;
      std::memcpy(bits, &value, sizeof(T));
    }
  });
  return found;
}

#undef IPU_F64_CASE
#undef IPU_F64_BINARY_OPS
#undef IPU_F64_UNARY_OPS

}  // namespace scalar
}  // namespace ipu
