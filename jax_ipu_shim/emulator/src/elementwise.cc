// Elementwise ops (unary, binary, compare, select, clamp, convert): one compute set over the result's tile
// mapping, which clones the main operand's, so that same-shaped operands need no exchange.
#include <cmath>
#include <cstring>
#include <limits>

#include "ipu/cost_model.h"
#include "ipu/dtype.h"
#include "ipu/kernels.h"
#include "ipu/lowering.h"

namespace ipu {

namespace {

// ---- scalar semantics (XLA:CPU's where StableHLO leaves a choice) ----

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

// ---- kernel builders per family and storage type ----

// A float function applied to f32 storage, or to f16 storage computed in f32 and rounded once.
template <class F>
std::unique_ptr<Kernel> floatUnary(DType dt, int a, int o, F f) {
  if (dt == DType::F32) return map1<float, float>(a, o, f);
  return map1<uint16_t, uint16_t>(a, o, [f](uint16_t x) { return floatToHalf(f(halfToFloat(x))); });
}

template <class F>
std::unique_ptr<Kernel> floatBinary(DType dt, int a, int b, int o, F f) {
  if (dt == DType::F32) return map2<float, float, float>(a, b, o, f);
  return map2<uint16_t, uint16_t, uint16_t>(
      a, b, o, [f](uint16_t x, uint16_t y) { return floatToHalf(f(halfToFloat(x), halfToFloat(y))); });
}

std::unique_ptr<Kernel> unaryFloat(OpKind k, DType dt, int a, int o) {
  switch (k) {
    case OpKind::Abs: return floatUnary(dt, a, o, [](float x) { return std::fabs(x); });
    case OpKind::Negate: return floatUnary(dt, a, o, [](float x) { return -x; });
    case OpKind::Sign: return floatUnary(dt, a, o, [](float x) { return signF(x); });
    case OpKind::Exp: return floatUnary(dt, a, o, [](float x) { return std::exp(x); });
    case OpKind::Expm1: return floatUnary(dt, a, o, [](float x) { return std::expm1(x); });
    case OpKind::Log: return floatUnary(dt, a, o, [](float x) { return std::log(x); });
    case OpKind::Log1p: return floatUnary(dt, a, o, [](float x) { return std::log1p(x); });
    case OpKind::Sqrt: return floatUnary(dt, a, o, [](float x) { return std::sqrt(x); });
    case OpKind::Rsqrt: return floatUnary(dt, a, o, [](float x) { return 1.0f / std::sqrt(x); });
    case OpKind::Cbrt: return floatUnary(dt, a, o, [](float x) { return std::cbrt(x); });
    case OpKind::Tanh: return floatUnary(dt, a, o, [](float x) { return std::tanh(x); });
    case OpKind::Logistic: return floatUnary(dt, a, o, [](float x) { return 1.0f / (1.0f + std::exp(-x)); });
    case OpKind::Sine: return floatUnary(dt, a, o, [](float x) { return std::sin(x); });
    case OpKind::Cosine: return floatUnary(dt, a, o, [](float x) { return std::cos(x); });
    case OpKind::Tan: return floatUnary(dt, a, o, [](float x) { return std::tan(x); });
    case OpKind::Floor: return floatUnary(dt, a, o, [](float x) { return std::floor(x); });
    case OpKind::Ceil: return floatUnary(dt, a, o, [](float x) { return std::ceil(x); });
    case OpKind::RoundEven: return floatUnary(dt, a, o, [](float x) { return std::nearbyint(x); });
    case OpKind::RoundAfz: return floatUnary(dt, a, o, [](float x) { return std::round(x); });
    case OpKind::Erf: return floatUnary(dt, a, o, [](float x) { return std::erf(x); });
    case OpKind::Erfc: return floatUnary(dt, a, o, [](float x) { return std::erfc(x); });
    case OpKind::Sinh: return floatUnary(dt, a, o, [](float x) { return std::sinh(x); });
    case OpKind::Cosh: return floatUnary(dt, a, o, [](float x) { return std::cosh(x); });
    case OpKind::Asin: return floatUnary(dt, a, o, [](float x) { return std::asin(x); });
    case OpKind::Acos: return floatUnary(dt, a, o, [](float x) { return std::acos(x); });
    case OpKind::Atan: return floatUnary(dt, a, o, [](float x) { return std::atan(x); });
    case OpKind::Asinh: return floatUnary(dt, a, o, [](float x) { return std::asinh(x); });
    case OpKind::Acosh: return floatUnary(dt, a, o, [](float x) { return std::acosh(x); });
    case OpKind::Atanh: return floatUnary(dt, a, o, [](float x) { return std::atanh(x); });
    case OpKind::ErfInv: return floatUnary(dt, a, o, [](float x) { return erfInv(x); });
    case OpKind::IsFinite:
      if (dt == DType::F32) return map1<float, uint8_t>(a, o, [](float x) { return uint8_t(std::isfinite(x)); });
      return map1<uint16_t, uint8_t>(a, o, [](uint16_t x) { return uint8_t((x & 0x7c00u) != 0x7c00u); });
    default: return nullptr;
  }
}

template <class T>
std::unique_ptr<Kernel> unaryInt(OpKind k, int a, int o) {
  switch (k) {
    case OpKind::Abs:
      return map1<T, T>(a, o, [](T x) { return x < T(0) ? wrapSub<T>(T(0), x) : x; });
    case OpKind::Negate: return map1<T, T>(a, o, [](T x) { return wrapSub<T>(T(0), x); });
    case OpKind::Sign: return map1<T, T>(a, o, [](T x) { return static_cast<T>((x > T(0)) - (x < T(0))); });
    case OpKind::Not: return map1<T, T>(a, o, [](T x) { return static_cast<T>(~x); });
    case OpKind::Popcnt:
      return map1<T, T>(a, o, [](T x) { return static_cast<T>(__builtin_popcount(static_cast<uint32_t>(x))); });
    case OpKind::Clz:
      return map1<T, T>(a, o, [](T x) {
        return static_cast<T>(x == T(0) ? 32 : __builtin_clz(static_cast<uint32_t>(x)));
      });
    default: return nullptr;
  }
}

std::unique_ptr<Kernel> binaryFloat(OpKind k, DType dt, int a, int b, int o) {
  switch (k) {
    case OpKind::Add: return floatBinary(dt, a, b, o, [](float x, float y) { return x + y; });
    case OpKind::Subtract: return floatBinary(dt, a, b, o, [](float x, float y) { return x - y; });
    case OpKind::Multiply: return floatBinary(dt, a, b, o, [](float x, float y) { return x * y; });
    case OpKind::Divide: return floatBinary(dt, a, b, o, [](float x, float y) { return x / y; });
    case OpKind::Remainder: return floatBinary(dt, a, b, o, [](float x, float y) { return std::fmod(x, y); });
    case OpKind::Power: return floatBinary(dt, a, b, o, [](float x, float y) { return std::pow(x, y); });
    case OpKind::Maximum: return floatBinary(dt, a, b, o, [](float x, float y) { return maxXla(x, y); });
    case OpKind::Minimum: return floatBinary(dt, a, b, o, [](float x, float y) { return minXla(x, y); });
    case OpKind::Atan2: return floatBinary(dt, a, b, o, [](float x, float y) { return std::atan2(x, y); });
    default: return nullptr;
  }
}

template <class T>
std::unique_ptr<Kernel> binaryInt(OpKind k, int a, int b, int o) {
  switch (k) {
    case OpKind::Add: return map2<T, T, T>(a, b, o, [](T x, T y) { return wrapAdd(x, y); });
    case OpKind::Subtract: return map2<T, T, T>(a, b, o, [](T x, T y) { return wrapSub(x, y); });
    case OpKind::Multiply: return map2<T, T, T>(a, b, o, [](T x, T y) { return wrapMul(x, y); });
    case OpKind::Divide: return map2<T, T, T>(a, b, o, [](T x, T y) { return divI(x, y); });
    case OpKind::Remainder: return map2<T, T, T>(a, b, o, [](T x, T y) { return remI(x, y); });
    case OpKind::Power: return map2<T, T, T>(a, b, o, [](T x, T y) { return powI(x, y); });
    case OpKind::Maximum: return map2<T, T, T>(a, b, o, [](T x, T y) { return x > y ? x : y; });
    case OpKind::Minimum: return map2<T, T, T>(a, b, o, [](T x, T y) { return x < y ? x : y; });
    case OpKind::And: return map2<T, T, T>(a, b, o, [](T x, T y) { return static_cast<T>(x & y); });
    case OpKind::Or: return map2<T, T, T>(a, b, o, [](T x, T y) { return static_cast<T>(x | y); });
    case OpKind::Xor: return map2<T, T, T>(a, b, o, [](T x, T y) { return static_cast<T>(x ^ y); });
    case OpKind::ShiftLeft: return map2<T, T, T>(a, b, o, [](T x, T y) { return shiftLeft(x, y); });
    case OpKind::ShiftRightArithmetic:
      return map2<T, T, T>(a, b, o, [](T x, T y) { return shiftRightArithmetic(x, y); });
    case OpKind::ShiftRightLogical:
      return map2<T, T, T>(a, b, o, [](T x, T y) { return shiftRightLogical(x, y); });
    default: return nullptr;
  }
}

std::unique_ptr<Kernel> bitwiseBool(OpKind k, int a, int o, int b) {
  using B = uint8_t;
  switch (k) {
    case OpKind::Not: return map1<B, B>(a, o, [](B x) { return B(x ^ 1u); });
    case OpKind::And: case OpKind::Minimum: return map2<B, B, B>(a, b, o, [](B x, B y) { return B(x & y); });
    case OpKind::Or: case OpKind::Maximum: return map2<B, B, B>(a, b, o, [](B x, B y) { return B(x | y); });
    case OpKind::Xor: return map2<B, B, B>(a, b, o, [](B x, B y) { return B(x ^ y); });
    default: return nullptr;
  }
}

// Total order on floats as integers: -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN.
inline int32_t totalOrderKey(float f) {
  int32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits ^ ((bits >> 31) & 0x7fffffff);
}

enum class Direction { EQ, NE, GE, GT, LE, LT };

template <class T, class Key>
std::unique_ptr<Kernel> compareWith(Direction d, int a, int b, int o, Key key) {
  using B = uint8_t;
  switch (d) {
    case Direction::EQ: return map2<T, T, B>(a, b, o, [key](T x, T y) { return B(key(x) == key(y)); });
    case Direction::NE: return map2<T, T, B>(a, b, o, [key](T x, T y) { return B(key(x) != key(y)); });
    case Direction::GE: return map2<T, T, B>(a, b, o, [key](T x, T y) { return B(key(x) >= key(y)); });
    case Direction::GT: return map2<T, T, B>(a, b, o, [key](T x, T y) { return B(key(x) > key(y)); });
    case Direction::LE: return map2<T, T, B>(a, b, o, [key](T x, T y) { return B(key(x) <= key(y)); });
    case Direction::LT: return map2<T, T, B>(a, b, o, [key](T x, T y) { return B(key(x) < key(y)); });
  }
  return nullptr;
}

std::unique_ptr<Kernel> compareKernel(Direction d, const std::string& type, DType dt, int a, int b, int o) {
  if (isFloat(dt)) {
    const bool total = type == "TOTALORDER";
    if (dt == DType::F32) {
      if (total) return compareWith<float>(d, a, b, o, [](float x) { return totalOrderKey(x); });
      return compareWith<float>(d, a, b, o, [](float x) { return x; });
    }
    if (total) return compareWith<uint16_t>(d, a, b, o, [](uint16_t x) { return totalOrderKey(halfToFloat(x)); });
    return compareWith<uint16_t>(d, a, b, o, [](uint16_t x) { return halfToFloat(x); });
  }
  // Integers: SIGNED/UNSIGNED reinterpret the 32 bits; otherwise the dtype's own signedness.
  bool is_signed = dt == DType::I32;
  if (type == "SIGNED") is_signed = true;
  if (type == "UNSIGNED") is_signed = false;
  if (dt == DType::Bool) return compareWith<uint8_t>(d, a, b, o, [](uint8_t x) { return x; });
  if (is_signed) return compareWith<uint32_t>(d, a, b, o, [](uint32_t x) { return static_cast<int32_t>(x); });
  return compareWith<uint32_t>(d, a, b, o, [](uint32_t x) { return x; });
}

template <class T>
std::unique_ptr<Kernel> selectKernel(int p, int a, int b, int o, int64_t ps) {
  return map3<uint8_t, T, T, T>(p, a, b, o, ps, 1, 1, [](uint8_t c, T x, T y) { return c ? x : y; });
}

std::unique_ptr<Kernel> clampKernel(DType dt, int lo, int x, int hi, int o, int64_t sl, int64_t sh) {
  switch (dt) {
    case DType::F32:
      return map3<float, float, float, float>(lo, x, hi, o, sl, 1, sh,
                                              [](float l, float v, float h) { return minXla(maxXla(v, l), h); });
    case DType::F16:
      return map3<uint16_t, uint16_t, uint16_t, uint16_t>(lo, x, hi, o, sl, 1, sh, [](uint16_t l, uint16_t v, uint16_t h) {
        return floatToHalf(minXla(maxXla(halfToFloat(v), halfToFloat(l)), halfToFloat(h)));
      });
    case DType::I32:
      return map3<int32_t, int32_t, int32_t, int32_t>(lo, x, hi, o, sl, 1, sh, [](int32_t l, int32_t v, int32_t h) {
        return std::min(std::max(v, l), h);
      });
    case DType::U32:
      return map3<uint32_t, uint32_t, uint32_t, uint32_t>(lo, x, hi, o, sl, 1, sh, [](uint32_t l, uint32_t v, uint32_t h) {
        return std::min(std::max(v, l), h);
      });
    default: return nullptr;
  }
}

template <class From>
std::unique_ptr<Kernel> convertFrom(DType to, int a, int o) {
  switch (to) {
    case DType::Bool: return map1<From, uint8_t>(a, o, [](From x) { return convertValue<uint8_t>(x); });
    case DType::F16: return map1<From, uint16_t>(a, o, [](From x) { return convertValue<uint16_t>(x); });
    case DType::F32: return map1<From, float>(a, o, [](From x) { return convertValue<float>(x); });
    case DType::I32: return map1<From, int32_t>(a, o, [](From x) { return convertValue<int32_t>(x); });
    case DType::U32: return map1<From, uint32_t>(a, o, [](From x) { return convertValue<uint32_t>(x); });
  }
  return nullptr;
}

std::unique_ptr<Kernel> convertKernel(DType from, DType to, int a, int o) {
  switch (from) {
    case DType::Bool: return convertFrom<uint8_t>(to, a, o);
    case DType::F16: return convertFrom<uint16_t>(to, a, o);
    case DType::F32: return convertFrom<float>(to, a, o);
    case DType::I32: return convertFrom<int32_t>(to, a, o);
    case DType::U32: return convertFrom<uint32_t>(to, a, o);
  }
  return nullptr;
}

bool parseDirection(const std::string& s, Direction* d) {
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

}  // namespace

std::vector<int> Lowerer::lowerElementwise(OpContext& ctx) {
  const OpKind kind = ctx.info->kind;
  const OpFamily family = ctx.info->family;
  if (ctx.out_types.size() != 1) invalid(ctx, "expected one result");
  const TensorType& out = ctx.out_types[0];
  const size_t main = (family == OpFamily::Select || family == OpFamily::Clamp) ? 1 : 0;
  const DType dt = ctx.in_types[main].dtype;
  // Shapes: every operand has the result's shape, except that select's predicate and clamp's bounds may be scalars.
  std::vector<int64_t> strides(ctx.in.size(), 1);
  for (size_t i = 0; i < ctx.in.size(); ++i) {
    const bool may_be_scalar = (family == OpFamily::Select && i == 0) || (family == OpFamily::Clamp && i != 1);
    if (may_be_scalar && ctx.in_types[i].shape.empty()) {
      strides[i] = 0;
      continue;
    }
    if (ctx.in_types[i].shape != out.shape) invalid(ctx, "operand " + std::to_string(i) + " does not have the result's shape");
  }
  // Element types.
  DType expected_out = dt;
  if (family == OpFamily::Compare || kind == OpKind::IsFinite) expected_out = DType::Bool;
  if (family == OpFamily::Convert) expected_out = out.dtype;
  if (out.dtype != expected_out) invalid(ctx, "the result's element type should be " + std::string(dtypeName(expected_out)));
  for (size_t i = 0; i < ctx.in.size(); ++i) {
    const DType want = (family == OpFamily::Select && i == 0) ? DType::Bool : dt;
    if (family != OpFamily::Convert && ctx.in_types[i].dtype != want)
      invalid(ctx, "operand " + std::to_string(i) + " should have element type " + dtypeName(want));
  }

  const int o = newSlotLike(out, ctx.in[main]);
  std::unique_ptr<Kernel> kernel;
  std::string codelet = std::string(ctx.info->name) + "<" + dtypeName(dt) + ">";
  switch (family) {
    case OpFamily::Unary:
      if (isFloat(dt)) kernel = unaryFloat(kind, dt, ctx.in[0], o);
      else if (dt == DType::I32) kernel = unaryInt<int32_t>(kind, ctx.in[0], o);
      else if (dt == DType::U32) kernel = unaryInt<uint32_t>(kind, ctx.in[0], o);
      else kernel = bitwiseBool(kind, ctx.in[0], o, ctx.in[0]);
      break;
    case OpFamily::Binary:
      if (isFloat(dt)) kernel = binaryFloat(kind, dt, ctx.in[0], ctx.in[1], o);
      else if (dt == DType::I32) kernel = binaryInt<int32_t>(kind, ctx.in[0], ctx.in[1], o);
      else if (dt == DType::U32) kernel = binaryInt<uint32_t>(kind, ctx.in[0], ctx.in[1], o);
      else kernel = bitwiseBool(kind, ctx.in[0], o, ctx.in[1]);
      break;
    case OpFamily::Compare: {
      Direction d;
      const std::string dir = attrString(*ctx.op, "comparison_direction");
      if (!parseDirection(dir, &d)) invalid(ctx, "unknown comparison_direction '" + dir + "'");
      const std::string type = attrString(*ctx.op, "compare_type", "NOTYPE");
      kernel = compareKernel(d, type, dt, ctx.in[0], ctx.in[1], o);
      codelet = "compare" + dir + "<" + dtypeName(dt) + ">";
      break;
    }
    case OpFamily::Select:
      switch (dt) {
        case DType::Bool: kernel = selectKernel<uint8_t>(ctx.in[0], ctx.in[1], ctx.in[2], o, strides[0]); break;
        case DType::F16: kernel = selectKernel<uint16_t>(ctx.in[0], ctx.in[1], ctx.in[2], o, strides[0]); break;
        default: kernel = selectKernel<uint32_t>(ctx.in[0], ctx.in[1], ctx.in[2], o, strides[0]); break;
      }
      break;
    case OpFamily::Clamp: kernel = clampKernel(dt, ctx.in[0], ctx.in[1], ctx.in[2], o, strides[0], strides[2]); break;
    case OpFamily::Convert:
      kernel = convertKernel(dt, out.dtype, ctx.in[0], o);
      codelet = std::string("cast<") + dtypeName(dt) + "," + dtypeName(out.dtype) + ">";
      break;
    default: break;
  }
  if (!kernel) unimplemented(ctx, std::string(ctx.info->name) + " is implemented for " + dtypeList(ctx.info->dtypes));

  const TileMapping work = graph().slots[static_cast<size_t>(o)].mapping;
  std::vector<int64_t> recv;
  for (size_t i = 0; i < ctx.in.size(); ++i) {
    if (strides[i] == 0 && out.numElements() > 0) exchangeScalar(&recv, work, ctx.in[i]);
    else exchangeSameIndex(&recv, work, ctx.in[i]);
  }
  std::vector<Superstep> steps;
  const int workers = device().num_worker_contexts;
  if (work.num_elements > 0) {
    steps.push_back(superstep(codelet, work, recv, [&](int, int64_t n) { return cost::elementwise(kind, dt, n, workers); }));
    const bool heavy = family == OpFamily::Unary && isFloat(dt) && kind != OpKind::Abs && kind != OpKind::Negate;
    steps.back().cost_weight = heavy ? 8 : 1;
  }
  const double flops = isFloat(dt) ? cost::flopsPerElement(kind) * static_cast<double>(out.numElements()) : 0;
  emitExecute(ctx, std::move(kernel), std::move(steps), {o}, flops);
  return {o};
}

}  // namespace ipu
