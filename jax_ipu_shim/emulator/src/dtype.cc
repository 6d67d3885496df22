#include "ipu/dtype.h"

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

bool parseDType(const std::string& name, DType* out) {
  for (const DTypeInfo& t : kDTypeTable) {
    if (name == t.name) {
      *out = t.dtype;
      return true;
    }
  }
  return false;
}

namespace {
// The front end's spellings of types the IPU lacks, with MLIR's name and the advice given to the user (c64 is in
// kDTypeTable: emulated as pairs of f32).
struct Unsupported { const char* name; const char* mlir; const char* advice; };
const Unsupported kUnsupported[] = {
    {"f64", "f64", "the IPU has no f64 hardware; use f32 (jax_enable_x64=False)"},
    {"i64", "i64", "the IPU has no 64-bit integer hardware; use i32 (jax_enable_x64=False)"},
    {"u64", "ui64", "the IPU has no 64-bit integer hardware; use u32 (jax_enable_x64=False)"},
    {"c128", "complex<f64>", "the IPU has no f64 hardware; use complex64 (emulated as pairs of f32; "
                             "jax_enable_x64=False)"},
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
  for (const DTypeInfo& t : kDTypeTable)
    if (name == t.name) return t.mlir;
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
