#include "ipu/dtype.h"

#include <cmath>
#include <cstring>
#include <mutex>

namespace ipu {

size_t dtypeSize(DType dtype) {
  switch (dtype) {
    case DType::Bool: return 1;
    case DType::F16: return 2;
    case DType::F32:
    case DType::I32:
    case DType::U32: return 4;
    case DType::Token: return 0;
  }
  return 4;
}

const char* dtypeName(DType dtype) {
  switch (dtype) {
    case DType::Bool: return "bool";
    case DType::F16: return "f16";
    case DType::F32: return "f32";
    case DType::I32: return "i32";
    case DType::U32: return "u32";
    case DType::Token: return "token";
  }
  return "?";
}

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

bool parseDType(const std::string& name, DType* out) {
  static const struct { const char* name; DType dtype; } kTypes[] = {
      {"bool", DType::Bool}, {"f16", DType::F16}, {"f32", DType::F32}, {"i32", DType::I32}, {"u32", DType::U32},
      {"token", DType::Token}};
  for (const auto& t : kTypes) {
    if (name == t.name) {
      *out = t.dtype;
      return true;
    }
  }
  return false;
}

namespace {
// The front end's spellings of types the IPU lacks, with MLIR's name and the advice given to the user.
struct Unsupported { const char* name; const char* mlir; const char* advice; };
const Unsupported kUnsupported[] = {
    {"f64", "f64", "the IPU has no f64 hardware; use f32 (jax_enable_x64=False)"},
    {"i64", "i64", "the IPU has no 64-bit integer hardware; use i32 (jax_enable_x64=False)"},
    {"u64", "ui64", "the IPU has no 64-bit integer hardware; use u32 (jax_enable_x64=False)"},
    {"bf16", "bf16", "the emulated IPU has no bf16 arithmetic; use f16 or f32"},
    {"i8", "i8", "the emulator implements 8-bit integers only as i32; convert to i32"},
    {"u8", "ui8", "the emulator implements 8-bit integers only as u32; convert to u32"},
    {"i16", "i16", "the emulator implements 16-bit integers only as i32; convert to i32"},
    {"u16", "ui16", "the emulator implements 16-bit integers only as u32; convert to u32"},
    {"c64", "complex<f32>", "the IPU has no complex arithmetic; split into real and imaginary f32 parts"},
    {"c128", "complex<f64>", "the IPU has no complex or f64 arithmetic"},
};
}  // namespace

bool isKnownDTypeName(const std::string& name) {
  DType d;
  if (parseDType(name, &d)) return true;
  for (const auto& u : kUnsupported)
    if (name == u.name) return true;
  return false;
}

std::string unsupportedDTypeAdvice(const std::string& name) {
  for (const auto& u : kUnsupported)
    if (name == u.name) return u.advice;
  return "it is not an element type of the IPU program format";
}

std::string mlirElementName(const std::string& name) {
  if (name == "bool") return "i1";
  if (name == "u32") return "ui32";
  for (const auto& u : kUnsupported)
    if (name == u.name) return u.mlir;
  return name;
}

std::string mlirTensorType(const std::string& dtype_name, const std::vector<int64_t>& shape) {
  if (dtype_name == "token") return "!stablehlo.token";
  std::string s = "tensor<";
  for (int64_t d : shape) s += std::to_string(d) + "x";
  return s + mlirElementName(dtype_name) + ">";
}

uint16_t floatToHalf(float value) {
  uint32_t x;
  std::memcpy(&x, &value, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN (NaN stays NaN: quiet bit set, top payload bits kept)
    if (abs == 0x7f800000u) return sign | 0x7c00u;
    return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  }
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to infinity
  if (abs < 0x38800000u) {                         // below 2^-14: subnormal (or zero) in binary16
    float a;
    std::memcpy(&a, &abs, 4);
    // a * 2^24 is exact; nearbyint rounds it to nearest even in the default rounding mode.
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f)));
  }
  const uint32_t odd = (abs >> 13) & 1u;
  abs += 0xc8000fffu + odd;  // rebias the exponent (127 -> 15) and round the 13 dropped bits to nearest even
  return static_cast<uint16_t>(sign | (abs >> 13));
}

namespace {
float halfToFloatSlow(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    float f = std::ldexp(static_cast<float>(mant), -24);
    std::memcpy(&bits, &f, 4);
    bits |= sign;
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

const float* halfTable() {
  static const float* table = [] {
    float* t = new float[65536];
    for (uint32_t i = 0; i < 65536; ++i) t[i] = halfToFloatSlow(static_cast<uint16_t>(i));
    return t;
  }();
  return table;
}
}  // namespace

float halfToFloat(uint16_t bits) {
  static const float* table = halfTable();
  return table[bits];
}

}  // namespace ipu
