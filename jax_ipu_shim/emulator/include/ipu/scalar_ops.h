// The per-element semantics of the elementwise ops (XLA:CPU's where StableHLO leaves a choice), written once.
//
// Every op is a stateless, default-constructible functor over host storage types (bool: uint8_t, f16: the uint16_t
// bits, f32: float, i32: int32_t, u32: uint32_t). The visitors below pick the functor for an op kind and element
// type and hand it to a callback together with its storage types; the vector kernels (elementwise.cc, reduce.cc)
// and the scalar interpreter of reduce bodies (scalar_program.cc) are all built from them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>

#include "ipu/dtype.h"
#include "ipu/registry.h"
#include "ipu/special_functions.h"
#include "ipu/xla_math.h"

namespace ipu {
namespace scalar {

template <class T>
struct Tag {
  using type = T;
};

// ---- helpers ----

// XLA's EmitFloatMax/Min: NaN in either operand propagates; otherwise lhs wins ties (so max(-0, +0) = -0).
inline float maxXla(float a, float b) { return (a >= b || std::isnan(a)) ? a : b; }
inline float minXla(float a, float b) { return (a <= b || std::isnan(a)) ? a : b; }

inline float signF(float x) { return std::isnan(x) || x == 0.0f ? x : (x > 0.0f ? 1.0f : -1.0f); }

// Giles' single-precision erfinv, the approximation XLA uses for f32; +-1 give +-inf.
inline float erfInv(float x) {
  if (std::fabs(x) == 1.0f) return x * std::numeric_limits<float>::infinity();
  float w = -std::log((1.0f - x) * (1.0f + x));
  float p;
  if (w < 5.0f) {
    w = w - 2.5f;
    p = 2.81022636e-08f;
    p = 3.43273939e-07f + p * w;
    p = -3.5233877e-06f + p * w;
    p = -4.39150654e-06f + p * w;
    p = 0.00021858087f + p * w;
    p = -0.00125372503f + p * w;
    p = -0.00417768164f + p * w;
    p = 0.246640727f + p * w;
    p = 1.50140941f + p * w;
  } else {
    w = std::sqrt(w) - 3.0f;
    p = -0.000200214257f;
    p = 0.000100950558f + p * w;
    p = 0.00134934322f + p * w;
    p = -0.00367342844f + p * w;
    p = 0.00573950773f + p * w;
    p = -0.0076224613f + p * w;
    p = 0.00943887047f + p * w;
    p = 1.00167406f + p * w;
    p = 2.83297682f + p * w;
  }
  return p * x;
}

template <class T>
inline T wrapAdd(T a, T b) { return static_cast<T>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b)); }
template <class T>
inline T wrapSub(T a, T b) { return static_cast<T>(static_cast<uint32_t>(a) - static_cast<uint32_t>(b)); }
template <class T>
inline T wrapMul(T a, T b) { return static_cast<T>(static_cast<uint32_t>(a) * static_cast<uint32_t>(b)); }

inline int32_t divI(int32_t a, int32_t b) {
  if (b == 0) return -1;
  if (a == std::numeric_limits<int32_t>::min() && b == -1) return a;
  return a / b;
}
inline uint32_t divI(uint32_t a, uint32_t b) { return b == 0 ? 0xffffffffu : a / b; }
inline int32_t remI(int32_t a, int32_t b) {
  if (b == 0) return a;
  if (a == std::numeric_limits<int32_t>::min() && b == -1) return 0;
  return a % b;
}
inline uint32_t remI(uint32_t a, uint32_t b) { return b == 0 ? a : a % b; }

// Exponentiation by squaring with wrap-around; a negative exponent gives 0 except for bases 1 and -1.
inline uint32_t powBits(uint32_t base, uint32_t exp) {
  uint32_t result = 1;
  while (exp) {
    if (exp & 1u) result *= base;
    base *= base;
    exp >>= 1;
  }
  return result;
}
inline int32_t powI(int32_t a, int32_t b) {
  if (b < 0) return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
  return static_cast<int32_t>(powBits(static_cast<uint32_t>(a), static_cast<uint32_t>(b)));
}
inline uint32_t powI(uint32_t a, uint32_t b) { return powBits(a, b); }

template <class T>
inline T shiftLeft(T a, T b) {
  return static_cast<uint32_t>(b) >= 32 ? T(0) : static_cast<T>(static_cast<uint32_t>(a) << static_cast<uint32_t>(b));
}
template <class T>
inline T shiftRightArithmetic(T a, T b) {
  const int32_t sa = static_cast<int32_t>(a);
  if (static_cast<uint32_t>(b) >= 32) return static_cast<T>(sa < 0 ? -1 : 0);
  return static_cast<T>(sa >> static_cast<uint32_t>(b));
}
template <class T>
inline T shiftRightLogical(T a, T b) {
  return static_cast<uint32_t>(b) >= 32 ? T(0) : static_cast<T>(static_cast<uint32_t>(a) >> static_cast<uint32_t>(b));
}

// Total order on floats as integers: -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN.
inline int32_t totalOrderKey(float f) {
  int32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits ^ ((bits >> 31) & 0x7fffffff);
}

// ---- conversions between the five storage types ----

inline float toFloat(float x) { return x; }
inline float toFloat(uint16_t h) { return halfToFloat(h); }

template <class To, class From>
inline To convertValue(From x) {
  constexpr bool from_half = std::is_same<From, uint16_t>::value;
  constexpr bool from_float = std::is_same<From, float>::value || from_half;
  if constexpr (std::is_same<To, uint8_t>::value) {  // to bool: x != 0 (NaN is true)
    if constexpr (from_half) return halfToFloat(x) != 0.0f;
    else return x != From(0);
  } else if constexpr (std::is_same<To, float>::value) {
    if constexpr (from_half) return halfToFloat(x);
    else return static_cast<float>(x);
  } else if constexpr (std::is_same<To, uint16_t>::value) {
    if constexpr (from_half) return x;
    else return floatToHalf(static_cast<float>(x));  // ints: exact below 2^24, and f16 overflows long before
  } else if constexpr (from_float) {  // float -> int: saturating, NaN -> 0
    const float f = toFloat(x);
    if (std::isnan(f)) return To(0);
    if constexpr (std::is_same<To, int32_t>::value) {
      if (f >= 2147483648.0f) return std::numeric_limits<int32_t>::max();
      if (f <= -2147483648.0f) return std::numeric_limits<int32_t>::min();
      return static_cast<int32_t>(f);
    } else {
      if (f >= 4294967296.0f) return std::numeric_limits<uint32_t>::max();
      if (f <= 0.0f) return 0u;
      return static_cast<uint32_t>(f);
    }
  } else {  // int/bool -> int: two's complement wrap
    return static_cast<To>(static_cast<uint32_t>(x));
  }
}

// ---- the functors ----

// exp, log, log1p, tanh and logistic are XLA:CPU's own approximations (ipu/xla_math.h): closer to backend="cpu"
// than libm and vectorisable. expm1 stays libm's: XLA's expm1 of this jaxlib is not the one xla_math.h knows.
#define IPU_FLOAT_UNARY(Name, expr) \
  struct Name {                     \
    float operator()(float x) const { return expr; } \
  };
IPU_FLOAT_UNARY(AbsF, std::fabs(x))
IPU_FLOAT_UNARY(NegateF, -x)
IPU_FLOAT_UNARY(SignF, signF(x))
IPU_FLOAT_UNARY(ExpF, xla_math::exp(x))
IPU_FLOAT_UNARY(Expm1F, std::expm1(x))
IPU_FLOAT_UNARY(LogF, xla_math::log(x))
IPU_FLOAT_UNARY(Log1pF, xla_math::log1p(x))
IPU_FLOAT_UNARY(SqrtF, std::sqrt(x))
IPU_FLOAT_UNARY(RsqrtF, 1.0f / std::sqrt(x))
IPU_FLOAT_UNARY(CbrtF, std::cbrt(x))
IPU_FLOAT_UNARY(TanhF, xla_math::tanh(x))
IPU_FLOAT_UNARY(LogisticF, xla_math::logistic(x))
IPU_FLOAT_UNARY(SineF, std::sin(x))
IPU_FLOAT_UNARY(CosineF, std::cos(x))
IPU_FLOAT_UNARY(TanF, std::tan(x))
IPU_FLOAT_UNARY(FloorF, std::floor(x))
IPU_FLOAT_UNARY(CeilF, std::ceil(x))
IPU_FLOAT_UNARY(RoundEvenF, std::nearbyint(x))
IPU_FLOAT_UNARY(RoundAfzF, std::round(x))
IPU_FLOAT_UNARY(ErfF, std::erf(x))
IPU_FLOAT_UNARY(ErfcF, std::erfc(x))
IPU_FLOAT_UNARY(SinhF, std::sinh(x))
IPU_FLOAT_UNARY(CoshF, std::cosh(x))
IPU_FLOAT_UNARY(AsinF, std::asin(x))
IPU_FLOAT_UNARY(AcosF, std::acos(x))
IPU_FLOAT_UNARY(AtanF, std::atan(x))
IPU_FLOAT_UNARY(AsinhF, std::asinh(x))
IPU_FLOAT_UNARY(AcoshF, std::acosh(x))
IPU_FLOAT_UNARY(AtanhF, std::atanh(x))
IPU_FLOAT_UNARY(ErfInvF, erfInv(x))
IPU_FLOAT_UNARY(LgammaF, special::lgamma(x))
IPU_FLOAT_UNARY(DigammaF, special::digamma(x))
IPU_FLOAT_UNARY(BesselI1eF, special::besselI1e(x))
#undef IPU_FLOAT_UNARY

#define IPU_FLOAT_BINARY(Name, expr) \
  struct Name {                      \
    float operator()(float x, float y) const { return expr; } \
  };
IPU_FLOAT_BINARY(AddF, x + y)
IPU_FLOAT_BINARY(SubtractF, x - y)
IPU_FLOAT_BINARY(MultiplyF, x * y)
IPU_FLOAT_BINARY(DivideF, x / y)
IPU_FLOAT_BINARY(RemainderF, std::fmod(x, y))
IPU_FLOAT_BINARY(PowerF, std::pow(x, y))
IPU_FLOAT_BINARY(MaximumF, maxXla(x, y))
IPU_FLOAT_BINARY(MinimumF, minXla(x, y))
IPU_FLOAT_BINARY(Atan2F, std::atan2(x, y))
IPU_FLOAT_BINARY(NextAfterF, special::nextAfter(x, y))
#undef IPU_FLOAT_BINARY

// f16 storage: computed in f32 and rounded to nearest even once per op.
template <class F>
struct Half1 {
  uint16_t operator()(uint16_t x) const { return floatToHalf(F{}(halfToFloat(x))); }
};
template <class F>
struct Half2 {
  uint16_t operator()(uint16_t x, uint16_t y) const { return floatToHalf(F{}(halfToFloat(x), halfToFloat(y))); }
};

// next_after steps f16 bits, not f32 ones: no upcast.
struct NextAfterF16 {
  uint16_t operator()(uint16_t x, uint16_t y) const {
    const float fx = halfToFloat(x), fy = halfToFloat(y);
    return special::nextAfterBits<uint16_t>(x, y, std::isnan(fx), std::isnan(fy), fx == fy);
  }
};

struct IsFiniteF32 {
  uint8_t operator()(float x) const { return uint8_t(std::isfinite(x)); }
};
struct IsFiniteF16 {
  uint8_t operator()(uint16_t x) const { return uint8_t((x & 0x7c00u) != 0x7c00u); }
};

#define IPU_INT_UNARY(Name, expr) \
  template <class T>              \
  struct Name {                   \
    T operator()(T x) const { return expr; } \
  };
IPU_INT_UNARY(AbsI, x < T(0) ? wrapSub<T>(T(0), x) : x)
IPU_INT_UNARY(NegateI, wrapSub<T>(T(0), x))
IPU_INT_UNARY(SignI, static_cast<T>((x > T(0)) - (x < T(0))))
IPU_INT_UNARY(NotI, static_cast<T>(~x))
IPU_INT_UNARY(PopcntI, static_cast<T>(__builtin_popcount(static_cast<uint32_t>(x))))
IPU_INT_UNARY(ClzI, static_cast<T>(x == T(0) ? 32 : __builtin_clz(static_cast<uint32_t>(x))))
#undef IPU_INT_UNARY

#define IPU_INT_BINARY(Name, expr) \
  template <class T>               \
  struct Name {                    \
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
IPU_INT_BINARY(AndI, static_cast<T>(x & y))
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
  static const struct { const char* name; Direction d; } kDirs[] = {
      {"EQ", Direction::EQ}, {"NE", Direction::NE}, {"GE", Direction::GE},
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
struct HalfKey {
  float operator()(uint16_t x) const { return halfToFloat(x); }
};
struct TotalOrderF32Key {
  int32_t operator()(float x) const { return totalOrderKey(x); }
};
struct TotalOrderF16Key {
  int32_t operator()(uint16_t x) const { return totalOrderKey(halfToFloat(x)); }
};
struct SignedKey {
  int32_t operator()(uint32_t x) const { return static_cast<int32_t>(x); }
};

template <class T, class Key, class Cmp>
struct CompareOp {
  uint8_t operator()(T x, T y) const { return uint8_t(Cmp{}(Key{}(x), Key{}(y))); }
};

template <class T>
struct SelectOp {
  T operator()(uint8_t c, T x, T y) const { return c ? x : y; }
};

struct ClampF32 {
  float operator()(float l, float v, float h) const { return minXla(maxXla(v, l), h); }
};
struct ClampF16 {
  uint16_t operator()(uint16_t l, uint16_t v, uint16_t h) const {
    return floatToHalf(minXla(maxXla(halfToFloat(v), halfToFloat(l)), halfToFloat(h)));
  }
};
template <class T>
struct ClampI {
  T operator()(T l, T v, T h) const { return std::min(std::max(v, l), h); }
};

template <class To, class From>
struct ConvertOp {
  To operator()(From x) const { return convertValue<To>(x); }
};

// ---- visitors: op kind + element type -> functor and storage types ----

// Unary ops: calls v(f, Tag<In>, Tag<Out>) with Out f(In). Returns false when `k` on `dt` has no functor.
template <class V>
bool visitUnary(OpKind k, DType dt, V&& v) {
  if (isFloat(dt)) {
    if (k == OpKind::IsFinite) {
      if (dt == DType::F32) v(IsFiniteF32{}, Tag<float>{}, Tag<uint8_t>{});
      else v(IsFiniteF16{}, Tag<uint16_t>{}, Tag<uint8_t>{});
      return true;
    }
    auto f = [&](auto op) {
      using F = decltype(op);
      if (dt == DType::F32) v(op, Tag<float>{}, Tag<float>{});
      else v(Half1<F>{}, Tag<uint16_t>{}, Tag<uint16_t>{});
      return true;
    };
    switch (k) {
      case OpKind::Abs: return f(AbsF{});
      case OpKind::Negate: return f(NegateF{});
      case OpKind::Sign: return f(SignF{});
      case OpKind::Exp: return f(ExpF{});
      case OpKind::Expm1: return f(Expm1F{});
      case OpKind::Log: return f(LogF{});
      case OpKind::Log1p: return f(Log1pF{});
      case OpKind::Sqrt: return f(SqrtF{});
      case OpKind::Rsqrt: return f(RsqrtF{});
      case OpKind::Cbrt: return f(CbrtF{});
      case OpKind::Tanh: return f(TanhF{});
      case OpKind::Logistic: return f(LogisticF{});
      case OpKind::Sine: return f(SineF{});
      case OpKind::Cosine: return f(CosineF{});
      case OpKind::Tan: return f(TanF{});
      case OpKind::Floor: return f(FloorF{});
      case OpKind::Ceil: return f(CeilF{});
      case OpKind::RoundEven: return f(RoundEvenF{});
      case OpKind::RoundAfz: return f(RoundAfzF{});
      case OpKind::Erf: return f(ErfF{});
      case OpKind::Erfc: return f(ErfcF{});
      case OpKind::Sinh: return f(SinhF{});
      case OpKind::Cosh: return f(CoshF{});
      case OpKind::Asin: return f(AsinF{});
      case OpKind::Acos: return f(AcosF{});
      case OpKind::Atan: return f(AtanF{});
      case OpKind::Asinh: return f(AsinhF{});
      case OpKind::Acosh: return f(AcoshF{});
      case OpKind::Atanh: return f(AtanhF{});
      case OpKind::ErfInv: return f(ErfInvF{});
      case OpKind::Lgamma: return f(LgammaF{});
      case OpKind::Digamma: return f(DigammaF{});
      case OpKind::BesselI1e: return f(BesselI1eF{});
      default: return false;
    }
  }
  if (dt == DType::Bool) {
    if (k != OpKind::Not) return false;
    v(NotB{}, Tag<uint8_t>{}, Tag<uint8_t>{});
    return true;
  }
  auto ints = [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto f = [&](auto op) {
      v(op, Tag<T>{}, Tag<T>{});
      return true;
    };
    switch (k) {
      case OpKind::Abs: return f(AbsI<T>{});
      case OpKind::Negate: return f(NegateI<T>{});
      case OpKind::Sign: return f(SignI<T>{});
      case OpKind::Not: return f(NotI<T>{});
      case OpKind::Popcnt: return f(PopcntI<T>{});
      case OpKind::Clz: return f(ClzI<T>{});
      default: return false;
    }
  };
  return dt == DType::I32 ? ints(Tag<int32_t>{}) : ints(Tag<uint32_t>{});
}

// Binary ops: calls v(f, Tag<T>) with T f(T, T). Returns false when `k` on `dt` has no functor.
template <class V>
bool visitBinary(OpKind k, DType dt, V&& v) {
  if (isFloat(dt)) {
    if (k == OpKind::NextAfter && dt == DType::F16) {
      v(NextAfterF16{}, Tag<uint16_t>{});
      return true;
    }
    auto f = [&](auto op) {
      using F = decltype(op);
      if (dt == DType::F32) v(op, Tag<float>{});
      else v(Half2<F>{}, Tag<uint16_t>{});
      return true;
    };
    switch (k) {
      case OpKind::Add: return f(AddF{});
      case OpKind::Subtract: return f(SubtractF{});
      case OpKind::Multiply: return f(MultiplyF{});
      case OpKind::Divide: return f(DivideF{});
      case OpKind::Remainder: return f(RemainderF{});
      case OpKind::Power: return f(PowerF{});
      case OpKind::Maximum: return f(MaximumF{});
      case OpKind::Minimum: return f(MinimumF{});
      case OpKind::Atan2: return f(Atan2F{});
      case OpKind::NextAfter: return f(NextAfterF{});
      default: return false;
    }
  }
  if (dt == DType::Bool) {
    switch (k) {
      case OpKind::And: case OpKind::Minimum: v(AndB{}, Tag<uint8_t>{}); return true;
      case OpKind::Or: case OpKind::Maximum: v(OrB{}, Tag<uint8_t>{}); return true;
      case OpKind::Xor: v(XorB{}, Tag<uint8_t>{}); return true;
      default: return false;
    }
  }
  auto ints = [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto f = [&](auto op) {
      v(op, Tag<T>{});
      return true;
    };
    switch (k) {
      case OpKind::Add: return f(AddI<T>{});
      case OpKind::Subtract: return f(SubtractI<T>{});
      case OpKind::Multiply: return f(MultiplyI<T>{});
      case OpKind::Divide: return f(DivideI<T>{});
      case OpKind::Remainder: return f(RemainderI<T>{});
      case OpKind::Power: return f(PowerI<T>{});
      case OpKind::Maximum: return f(MaximumI<T>{});
      case OpKind::Minimum: return f(MinimumI<T>{});
      case OpKind::And: return f(AndI<T>{});
      case OpKind::Or: return f(OrI<T>{});
      case OpKind::Xor: return f(XorI<T>{});
      case OpKind::ShiftLeft: return f(ShiftLeftI<T>{});
      case OpKind::ShiftRightArithmetic: return f(ShiftRightArithmeticI<T>{});
      case OpKind::ShiftRightLogical: return f(ShiftRightLogicalI<T>{});
      default: return false;
    }
  };
  return dt == DType::I32 ? ints(Tag<int32_t>{}) : ints(Tag<uint32_t>{});
}

// compare: calls v(f, Tag<T>) with uint8_t f(T, T). `type` is the compare_type: TOTALORDER orders floats totally;
// SIGNED / UNSIGNED reinterpret the 32 bits of integers; otherwise the dtype's own order. Integers use uint32_t
// storage for both signednesses.
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
    return true;
  };
  const bool total = type == "TOTALORDER";
  switch (dt) {
    case DType::F32: return total ? with(Tag<float>{}, TotalOrderF32Key{}) : with(Tag<float>{}, IdentityKey<float>{});
    case DType::F16: return total ? with(Tag<uint16_t>{}, TotalOrderF16Key{}) : with(Tag<uint16_t>{}, HalfKey{});
    case DType::Bool: return with(Tag<uint8_t>{}, IdentityKey<uint8_t>{});
    case DType::I32: case DType::U32: {
      bool is_signed = dt == DType::I32;
      if (type == "SIGNED") is_signed = true;
      if (type == "UNSIGNED") is_signed = false;
      return is_signed ? with(Tag<uint32_t>{}, SignedKey{}) : with(Tag<uint32_t>{}, IdentityKey<uint32_t>{});
    }
    case DType::Token: return false;  // tokens are never computed on
  }
  return false;
}

// select (dt: the type of the chosen values): calls v(f, Tag<T>) with T f(uint8_t, T, T).
template <class V>
bool visitSelect(DType dt, V&& v) {
  switch (dt) {
    case DType::Bool: v(SelectOp<uint8_t>{}, Tag<uint8_t>{}); return true;
    case DType::F16: v(SelectOp<uint16_t>{}, Tag<uint16_t>{}); return true;
    default: v(SelectOp<uint32_t>{}, Tag<uint32_t>{}); return true;  // f32, i32, u32: the 32 bits
  }
}

// clamp(min, x, max): calls v(f, Tag<T>) with T f(T, T, T).
template <class V>
bool visitClamp(DType dt, V&& v) {
  switch (dt) {
    case DType::F32: v(ClampF32{}, Tag<float>{}); return true;
    case DType::F16: v(ClampF16{}, Tag<uint16_t>{}); return true;
    case DType::I32: v(ClampI<int32_t>{}, Tag<int32_t>{}); return true;
    case DType::U32: v(ClampI<uint32_t>{}, Tag<uint32_t>{}); return true;
    default: return false;
  }
}

// convert: calls v(f, Tag<From>, Tag<To>) with To f(From).
template <class V>
bool visitConvert(DType from, DType to, V&& v) {
  auto target = [&](auto from_tag) {
    using From = typename decltype(from_tag)::type;
    switch (to) {
      case DType::Bool: v(ConvertOp<uint8_t, From>{}, from_tag, Tag<uint8_t>{}); break;
      case DType::F16: v(ConvertOp<uint16_t, From>{}, from_tag, Tag<uint16_t>{}); break;
      case DType::F32: v(ConvertOp<float, From>{}, from_tag, Tag<float>{}); break;
      case DType::I32: v(ConvertOp<int32_t, From>{}, from_tag, Tag<int32_t>{}); break;
      case DType::U32: v(ConvertOp<uint32_t, From>{}, from_tag, Tag<uint32_t>{}); break;
      case DType::Token: return false;
    }
    return true;
  };
  switch (from) {
    case DType::Bool: return target(Tag<uint8_t>{});
    case DType::F16: return target(Tag<uint16_t>{});
    case DType::F32: return target(Tag<float>{});
    case DType::I32: return target(Tag<int32_t>{});
    case DType::U32: return target(Tag<uint32_t>{});
    case DType::Token: return false;
  }
  return false;
}

}  // namespace scalar
}  // namespace ipu
