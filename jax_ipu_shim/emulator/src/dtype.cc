#include "ipu/dtype.h"

#include "ipu/cpu_features.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include <cmath>
#include <cstring>
#include <mutex>

namespace ipu {

const DTypeInfo& dtypeInfo(DType dtype) {
  // Indexed by enumerator; built once from the table so that its row order is free.
  static const DTypeInfo* const* index = [] {
    static const DTypeInfo* rows[256] = {};
    for (const DTypeInfo& info : kDTypeTable) rows[static_cast<uint8_t>(info.dtype)] = &info;
    return rows;
  }();
  const DTypeInfo* info = index[static_cast<uint8_t>(dtype)];
  return info ? *info : kDTypeTable[0];
}

size_t dtypeSize(DType dtype) { return dtypeInfo(dtype).size; }
const char* dtypeName(DType dtype) { return dtypeInfo(dtype).name; }

int64_t shapeElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<int64_t> rowMajorStrides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

int64_t TensorType::numElements() const { return shapeElements(shape); }
size_t TensorType::numBytes() const { return static_cast<size_t>(numElements()) * dtypeSize(dtype); }
std::string TensorType::str() const { return mlirTensorType(dtypeName(dtype), shape); }

namespace {
// Every value of each fp8 format as an f32, indexed by format (the fp8 enumerators are the last five, in a row)
// and bits; built once.
int float8Index(DType d) { return static_cast<int>(d) - static_cast<int>(DType::F8E4M3FN); }
constexpr int kFloat8Formats = static_cast<int>(DType::F8E4M3B11FNUZ) - static_cast<int>(DType::F8E4M3FN) + 1;
struct Float8Tables {
  float value[kFloat8Formats][256];
  Float8Tables() {
    for (int f = 0; f < kFloat8Formats; ++f) {
      const DType d = static_cast<DType>(static_cast<int>(DType::F8E4M3FN) + f);
      for (int b = 0; b < 256; ++b) value[f][b] = decode(d, static_cast<uint8_t>(b));
    }
  }
  static float decode(DType d, uint8_t bits) {
    const Float8Format f = float8Format(d);
    const int field = (bits & 0x7f) >> f.mantissa;
    const int man = bits & ((1 << f.mantissa) - 1);
    const bool neg = (bits & 0x80) != 0;
    const int top = (1 << f.exponent) - 1;
    using S = Float8Format::Specials;
    const uint32_t nan = 0x7fc00000u;
    if (f.specials == S::Fnuz) {
      if (bits == 0x80) return bitsToFloat(nan);  // the one NaN: a positive quiet NaN, as XLA:CPU gives it
    } else if (f.specials == S::Fn) {
      if (field == top && man == (1 << f.mantissa) - 1) return bitsToFloat(nan | (neg ? 0x80000000u : 0));
    } else if (field == top) {  // e5m2: infinities, and NaNs read as the quiet NaN of their sign
      if (man != 0) return bitsToFloat(nan | (neg ? 0x80000000u : 0));
      return neg ? -HUGE_VALF : HUGE_VALF;
    }
    const double magnitude = field == 0 ? std::ldexp(man, 1 - f.bias - f.mantissa)
                                        : std::ldexp((1 << f.mantissa) + man, field - f.bias - f.mantissa);
    return static_cast<float>(neg ? -magnitude : magnitude);
  }
  static float bitsToFloat(uint32_t u) {
    float x;
    std::memcpy(&x, &u, 4);
    return x;
  }
};
const Float8Tables& float8Tables() {
  static const Float8Tables tables;
  return tables;
}
}  // namespace

float float8ToFloat(DType d, uint8_t bits) { return float8Tables().value[float8Index(d)][bits]; }

uint8_t float8FromDouble(DType d, double value) {
  using S = Float8Format::Specials;
  const Float8Format f = float8Format(d);
  const uint8_t sign = std::signbit(value) ? 0x80 : 0;
  const int ones = (1 << f.mantissa) - 1;
  const uint8_t nan = f.specials == S::Fnuz ? 0x80 : f.specials == S::Fn ? (sign | 0x7f) : (sign | 0x7e);
  const uint8_t overflow = f.specials == S::Ieee ? static_cast<uint8_t>(sign | (0x7f & ~ones)) : nan;  // inf
  if (std::isnan(value)) return nan;
  if (std::isinf(value)) return overflow;
  // Round once: the value in units of the last place of its binade (of the subnormals' below the smallest normal).
  const double a = std::fabs(value);
  const int emin = 1 - f.bias;
  int e = emin;
  if (a > 0) {
    std::frexp(a, &e);
    e = std::max(e - 1, emin);  // a in [2^e, 2^(e+1)), or a subnormal
  }
  double units = std::nearbyint(std::ldexp(a, f.mantissa - e));  // to nearest even (the default rounding mode)
  if (units >= std::ldexp(1.0, f.mantissa + 1)) {  // rounded up into the next binade
    units /= 2;
    ++e;
  }
  const int u = static_cast<int>(units);
  const int field = u < (1 << f.mantissa) ? 0 : e + f.bias;
  const int man = u & ones;
  const int top = (1 << f.exponent) - 1;
  if (field > top || (f.specials == S::Ieee && field == top) || (f.specials == S::Fn && field == top && man == ones))
    return overflow;
  if (field == 0 && man == 0) return f.specials == S::Fnuz ? 0 : sign;  // fnuz has no negative zero
  return static_cast<uint8_t>(sign | (field << f.mantissa) | man);
}

bool parseDType(const std::string& name, DType* out) {
  for (const DTypeInfo& t : kDTypeTable) {
    if (name == t.name) {
      *out = t.dtype;
      return true;
    }
  }
  return false;
}

bool isKnownDTypeName(const std::string& name) {
  DType d;
  return parseDType(name, &d);
}

std::string unsupportedDTypeAdvice(const std::string& name) {
  DType d;
  if (parseDType(name, &d) && isEmulated64(d))  // refused by CompileOptions::emulate_64bit = false
    return std::string("the IPU has no ") +
           (d == DType::F64    ? "f64"
            : d == DType::C128 ? "f64 (complex128's parts)"
                               : "64-bit integer") +
           " hardware and 64-bit emulation is off (compile option emulate_64bit); use " +
           (d == DType::F64    ? "f32"
            : d == DType::C128 ? "complex64"
            : d == DType::I64  ? "i32"
                               : "u32") +
           " (jax_enable_x64=False)";
  return "it is not an element type of the IPU program format";
}

std::string mlirElementName(const std::string& name) {
  for (const DTypeInfo& t : kDTypeTable)
    if (name == t.name) return t.mlir;
  return name;
}

std::string mlirTensorType(const std::string& dtype_name, const std::vector<int64_t>& shape) {
  if (dtype_name == "token") return "!stablehlo.token";
  std::string s = "tensor<";
  for (int64_t d : shape) s += std::to_string(d) + "x";
  return s + mlirElementName(dtype_name) + ">";
}

uint16_t floatToBFloat16Bits(float value) {
  uint32_t x;
  std::memcpy(&x, &value, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN: quiet, sign kept
  x += 0x7fffu + ((x >> 16) & 1u);  // round the 16 dropped bits to nearest even (overflow carries to infinity)
  return static_cast<uint16_t>(x >> 16);
}

float bfloat16BitsToFloat(uint16_t bits) {
  const uint32_t x = static_cast<uint32_t>(bits) << 16;
  float out;
  std::memcpy(&out, &x, 4);
  return out;
}

#if defined(__x86_64__) && defined(__GNUC__)
namespace {
const bool kF16C = hostHasF16C();

// VCVTPS2PH with round-to-nearest-even: the scalar floatToHalf's results, NaNs quieted the same way. Not used for
// half -> float: VCVTPH2PS quiets signalling NaNs, which the scalar conversion (like numpy) keeps.
__attribute__((target("avx,f16c"))) void floatsToHalvesF16C(const float* in, uint16_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) out[i] = floatToHalf(in[i]);
}
}  // namespace
#endif

void halvesToFloats(const uint16_t* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = halfToFloat(in[i]);
}

void floatsToHalves(const float* in, uint16_t* out, int64_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (kF16C) return floatsToHalvesF16C(in, out, n);
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = floatToHalf(in[i]);
}

}  // namespace ipu
