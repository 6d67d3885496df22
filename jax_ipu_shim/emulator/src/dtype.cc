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
struct Unsupported {
  const char* name;
  const char* mlir;
  const char* advice;
};
const Unsupported kUnsupported[] = {
    {"c128", "complex<f64>",
     "the emulator does not run complex128 yet; use complex64 (emulated as pairs of f32; "
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
  DType d;
  if (parseDType(name, &d) && isWide64(d))  // refused by CompileOptions::emulate_64bit = false
    return std::string("the IPU has no ") + (d == DType::F64 ? "f64" : "64-bit integer") +
           " hardware and 64-bit emulation is off (compile option emulate_64bit); use " +
           (d == DType::F64   ? "f32"
            : d == DType::I64 ? "i32"
                              : "u32") +
           " (jax_enable_x64=False)";
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
