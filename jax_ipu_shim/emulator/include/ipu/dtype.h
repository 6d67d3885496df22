// Element types: the one trait table every kernel, the PJRT layer and the Python side derive their dtype facts from,
// their host storage types, and the IEEE binary16 / bfloat16 conversions the vector unit performs.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "ipu/emulator.h"

namespace ipu {

// How an element is held in host memory, and so how a kernel computes on it.
enum class StorageKind : uint8_t {
  Token,
  Bool,
  Int,
  Float32,
  Half,
  BFloat16,
  Complex64,
  Float64,
  Float8,
  Complex128,
  SubByte
};

// One row per element type. `acc` is the accumulator matmul-like ops and reductions of partials use (f32 for the
// 16-bit floats, rounded once at the end; i32/u32 wrapping for integers; bool for bool).
struct DTypeInfo {
  DType dtype;
  const char* name;  // the program format's spelling
  const char* mlir;  // MLIR's element type
  uint8_t size;      // bytes
  StorageKind storage;
  bool is_float, is_signed, is_int;
  DType acc;
};

// The table. A new element type is one row here, one enumerator in emulator.h, one StorageOf specialization below
// and its functors in scalar_ops.h. c64 is emulated as a pair of f32 (the IPU has no complex type; Poplar users
// keep real and imaginary parts as f32 and run the pair arithmetic): it is neither float nor int here, its
// arithmetic is complex.cc's.
inline constexpr DTypeInfo kDTypeTable[] = {
    {DType::Bool, "bool", "i1", 1, StorageKind::Bool, false, false, false, DType::Bool},
    {DType::I8, "i8", "i8", 1, StorageKind::Int, false, true, true, DType::I32},
    {DType::U8, "u8", "ui8", 1, StorageKind::Int, false, false, true, DType::U32},
    {DType::I16, "i16", "i16", 2, StorageKind::Int, false, true, true, DType::I32},
    {DType::U16, "u16", "ui16", 2, StorageKind::Int, false, false, true, DType::U32},
    {DType::I32, "i32", "i32", 4, StorageKind::Int, false, true, true, DType::I32},
    {DType::U32, "u32", "ui32", 4, StorageKind::Int, false, false, true, DType::U32},
    {DType::F16, "f16", "f16", 2, StorageKind::Half, true, true, false, DType::F32},
    {DType::BF16, "bf16", "bf16", 2, StorageKind::BFloat16, true, true, false, DType::F32},
    {DType::F32, "f32", "f32", 4, StorageKind::Float32, true, true, false, DType::F32},
    {DType::C64, "c64", "complex<f32>", 8, StorageKind::Complex64, false, true, false, DType::C64},
    // The 64-bit types (jax_enable_x64), emulated: the IPU has no 64-bit hardware. i64/u64 run as pairs of 32-bit
    // words and f64 as software routines on them (soft-float, IEEE binary64 results); the cost model charges those
    // instruction sequences (registry.h Wide64Cost). CompileOptions::refuse_64bit refuses them, as Poplar does.
    {DType::F64, "f64", "f64", 8, StorageKind::Float64, true, true, false, DType::F64},
    {DType::I64, "i64", "i64", 8, StorageKind::Int, false, true, true, DType::I64},
    {DType::U64, "u64", "ui64", 8, StorageKind::Int, false, false, true, DType::U64},
    // c128 (jax_enable_x64's complex type): pairs of emulated f64, as c64 is pairs of f32; complex.cc's arithmetic
    // in binary64, each f64 op costed as the software sequence it is.
    {DType::C128, "c128", "complex<f64>", 16, StorageKind::Complex128, false, true, false, DType::C128},
    // fp8, Poplar's quarter type: on chips that have it (DeviceDescription::amp_f8_macs_per_cycle; elsewhere refused
    // by name). The IPU converts it and its AMP multiplies it; no other arithmetic exists on it ("no arithmetic
    // operations are supported on this type"), so a program moves it as bytes, converts it, and passes it to
    // dot_general; the front end computes every other op on it in f16, as XLA:CPU's FloatNormalization does. The fnuz
    // formats are Poplar's F143 and F152 (scale 0; e4m3b11fnuz is F143 with scale -3); e4m3fn and e5m2 (OCP) differ
    // from them in their bias and special values only.
    {DType::F8E4M3FN, "f8e4m3fn", "f8E4M3FN", 1, StorageKind::Float8, true, true, false, DType::F32},
    {DType::F8E5M2, "f8e5m2", "f8E5M2", 1, StorageKind::Float8, true, true, false, DType::F32},
    {DType::F8E4M3FNUZ, "f8e4m3fnuz", "f8E4M3FNUZ", 1, StorageKind::Float8, true, true, false, DType::F32},
    {DType::F8E5M2FNUZ, "f8e5m2fnuz", "f8E5M2FNUZ", 1, StorageKind::Float8, true, true, false, DType::F32},
    {DType::F8E4M3B11FNUZ, "f8e4m3b11fnuz", "f8E4M3B11FNUZ", 1, StorageKind::Float8, true, true, false, DType::F32},
    // The sub-byte integers (jax's int4, uint4, int2, uint2; quantised weights): the IPU has no such type, so a value
    // is held one element per byte, its bits in the low bits (the rest zero, as ml_dtypes and jax hand them over),
    // and only moved and converted here (to them: integers wrap, floats saturate and NaN is 0, as XLA:CPU converts).
    // The front end computes every other op on them in i8 or u8 and wraps the result, as LLVM legalises XLA:CPU's
    // i4 arithmetic (passes/narrow_types.py). Not integers for the op table: no kernel computes on them.
    {DType::I4, "i4", "i4", 1, StorageKind::SubByte, false, true, false, DType::I32},
    {DType::U4, "u4", "ui4", 1, StorageKind::SubByte, false, false, false, DType::U32},
    {DType::I2, "i2", "i2", 1, StorageKind::SubByte, false, true, false, DType::I32},
    {DType::U2, "u2", "ui2", 1, StorageKind::SubByte, false, false, false, DType::U32},
    {DType::Token, "token", "!stablehlo.token", 0, StorageKind::Token, false, false, false, DType::Token},
};

const DTypeInfo& dtypeInfo(DType d);

// bfloat16 storage: distinct from the integers' and f16's uint16_t so that no overload or `is_same` test keyed on
// storage types can take it for either.
struct BFloat16 {
  uint16_t bits;
};
// Host storage of each element type: bool is one byte holding 0 or 1, f16 the raw binary16 bits (so kernels must
// select f16 by DType, never by storage: u16 is uint16_t too), bf16 its bits in a BFloat16.
// c64: real and imaginary f32 parts interleaved, as XLA and numpy store complex64.
struct Complex64 {
  float re, im;
};
// c128: real and imaginary f64 parts interleaved, as XLA and numpy store complex128.
struct Complex128 {
  double re, im;
};
using BoolStorage = uint8_t;
using HalfStorage = uint16_t;
// The fp8 enumerators (emulator.h), and the sub-byte integers (the dtype table's SubByte rows) with their width.
constexpr bool isFloat8(DType d) { return d >= DType::F8E4M3FN && d <= DType::F8E4M3B11FNUZ; }
constexpr bool isSubByte(DType d) { return d >= DType::I4 && d <= DType::U2; }
constexpr int subByteBits(DType d) { return d == DType::I4 || d == DType::U4 ? 4 : 2; }
constexpr bool subByteSigned(DType d) { return d == DType::I4 || d == DType::I2; }
// fp8 and the sub-byte integers are held in one byte, a type per format, so that no kernel keyed on storage types
// takes one for u8 or for another format: fp8 its bits, a sub-byte integer its bits in the low bits.
template <DType D>
struct Float8 {
  uint8_t bits;
};
template <DType D>
struct SubByte {
  uint8_t bits;
};
// The types held in a byte take the primary template; the others are specialised below.
template <DType D>
struct StorageOf {
  static_assert(isFloat8(D) || isSubByte(D), "an element type without a host storage type");
  using type = std::conditional_t<isFloat8(D), Float8<D>, SubByte<D>>;
};
template <>
struct StorageOf<DType::Bool> {
  using type = uint8_t;
};
template <>
struct StorageOf<DType::I8> {
  using type = int8_t;
};
template <>
struct StorageOf<DType::U8> {
  using type = uint8_t;
};
template <>
struct StorageOf<DType::I16> {
  using type = int16_t;
};
template <>
struct StorageOf<DType::U16> {
  using type = uint16_t;
};
template <>
struct StorageOf<DType::I32> {
  using type = int32_t;
};
template <>
struct StorageOf<DType::U32> {
  using type = uint32_t;
};
template <>
struct StorageOf<DType::F16> {
  using type = uint16_t;
};
template <>
struct StorageOf<DType::BF16> {
  using type = BFloat16;
};
template <>
struct StorageOf<DType::F32> {
  using type = float;
};
template <>
struct StorageOf<DType::C64> {
  using type = Complex64;
};
template <>
struct StorageOf<DType::C128> {
  using type = Complex128;
};
template <>
struct StorageOf<DType::F64> {
  using type = double;
};
template <>
struct StorageOf<DType::I64> {
  using type = int64_t;
};
template <>
struct StorageOf<DType::U64> {
  using type = uint64_t;
};
template <DType D>
using Storage = typename StorageOf<D>::type;
// A sub-byte element's value from its bits: sign-extended from its top bit when signed.
template <DType D>
constexpr int32_t subByteValue(SubByte<D> x) {
  constexpr int bits = subByteBits(D);
  const int32_t low = x.bits & ((1 << bits) - 1);
  return subByteSigned(D) && (low >> (bits - 1)) ? low - (1 << bits) : low;
}

// A type as a value, for visitors' callbacks.
template <class T>
struct TypeTag {
  using type = T;
};

// A DType as a type, for visitors: v(DTypeTag<D>{}) sees D as a constant expression.
template <DType D>
struct DTypeTag {
  static constexpr DType value = D;
  using type = Storage<D>;
};

// The one switch over computable element types: calls v(DTypeTag<D>{}) and returns true, or false for Token, the
// fp8 types (moved as bytes; their conversions and dot_general operands are visitFloat8's) and the sub-byte integers
// (moved as bytes; their conversions are visitSubByte's).
template <class V>
bool visitDType(DType d, V&& v) {
  switch (d) {
    case DType::Bool: v(DTypeTag<DType::Bool>{}); return true;
    case DType::I8: v(DTypeTag<DType::I8>{}); return true;
    case DType::U8: v(DTypeTag<DType::U8>{}); return true;
    case DType::I16: v(DTypeTag<DType::I16>{}); return true;
    case DType::U16: v(DTypeTag<DType::U16>{}); return true;
    case DType::I32: v(DTypeTag<DType::I32>{}); return true;
    case DType::U32: v(DTypeTag<DType::U32>{}); return true;
    case DType::F16: v(DTypeTag<DType::F16>{}); return true;
    case DType::BF16: v(DTypeTag<DType::BF16>{}); return true;
    case DType::F32: v(DTypeTag<DType::F32>{}); return true;
    case DType::C64: v(DTypeTag<DType::C64>{}); return true;
    case DType::F64: v(DTypeTag<DType::F64>{}); return true;
    case DType::I64: v(DTypeTag<DType::I64>{}); return true;
    case DType::U64: v(DTypeTag<DType::U64>{}); return true;
    case DType::C128: v(DTypeTag<DType::C128>{}); return true;
    case DType::Token:
    case DType::F8E4M3FN:
    case DType::F8E5M2:
    case DType::F8E4M3FNUZ:
    case DType::F8E5M2FNUZ:
    case DType::F8E4M3B11FNUZ:
    case DType::I4:
    case DType::U4:
    case DType::I2:
    case DType::U2: return false;
  }
  return false;
}

// The same over the fp8 types alone: calls v(DTypeTag<D>{}) and returns true, or false for any other type.
template <class V>
bool visitFloat8(DType d, V&& v) {
  switch (d) {
    case DType::F8E4M3FN: v(DTypeTag<DType::F8E4M3FN>{}); return true;
    case DType::F8E5M2: v(DTypeTag<DType::F8E5M2>{}); return true;
    case DType::F8E4M3FNUZ: v(DTypeTag<DType::F8E4M3FNUZ>{}); return true;
    case DType::F8E5M2FNUZ: v(DTypeTag<DType::F8E5M2FNUZ>{}); return true;
    case DType::F8E4M3B11FNUZ: v(DTypeTag<DType::F8E4M3B11FNUZ>{}); return true;
    default: return false;
  }
}

// The same over the sub-byte integers alone.
template <class V>
bool visitSubByte(DType d, V&& v) {
  switch (d) {
    case DType::I4: v(DTypeTag<DType::I4>{}); return true;
    case DType::U4: v(DTypeTag<DType::U4>{}); return true;
    case DType::I2: v(DTypeTag<DType::I2>{}); return true;
    case DType::U2: v(DTypeTag<DType::U2>{}); return true;
    default: return false;
  }
}

// An integer (or bool) element at `p` as int64, sign- or zero-extended by its dtype: how indices and starts are read.
inline int64_t loadInteger(const void* p, DType d) {
  int64_t out = 0;
  const bool computable = visitDType(d, [&](auto t) {
    using T = typename decltype(t)::type;
    if constexpr (std::is_integral<T>::value) {
      T v;
      std::memcpy(&v, p, sizeof(T));
      out = static_cast<int64_t>(v);
    }
  });
  if (!computable)
    visitSubByte(d, [&](auto t) {
      constexpr DType D = decltype(t)::value;
      out = subByteValue<D>(SubByte<D>{*static_cast<const uint8_t*>(p)});
    });
  return out;
}

// Round-to-nearest-even conversion with IEEE overflow to infinity, subnormals and NaN payloads kept quiet.
// Inline: kernels convert every element of f16 tensors.
inline uint16_t floatToHalf(float value) {
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

// Exact. Exponent and mantissa move into place and the exponent is rebiased (15 -> 127); a subnormal half is
// renormalised by one exact f32 subtraction (every value involved is a normal f32, so flushing denormals, as runs
// do, cannot change it); a NaN keeps its payload and comes out quiet, as F16C's vcvtph2ps (XLA:CPU's convert) gives
// it: pow(1, y) of a signalling f16 NaN y is then 1 on both (fuzz seed 20281901 #2399).
inline float halfToFloat(uint16_t bits) {
  uint32_t o = static_cast<uint32_t>(bits & 0x7fffu) << 13;
  const uint32_t exp = o & 0x0f800000u;
  o += (127u - 15u) << 23;
  if (exp == 0x0f800000u) {
    o += (128u - 16u) << 23;  // inf / NaN: exponent all ones
    if (o & 0x007fffffu) o |= 0x00400000u;  // NaN: quiet
  } else if (exp == 0) {      // zero / subnormal: 2^-14 * (1 + m/1024) - 2^-14 = m * 2^-24
    o += 1u << 23;
    float f;
    std::memcpy(&f, &o, 4);
    f -= 6.103515625e-05f;
    std::memcpy(&o, &f, 4);
  }
  o |= static_cast<uint32_t>(bits & 0x8000u) << 16;
  float out;
  std::memcpy(&out, &o, 4);
  return out;
}

// x rounded to the nearest f16 (ties to even) and back: what keeping an f32 value in f16 does to it.
inline float roundF16(float x) { return halfToFloat(floatToHalf(x)); }

// The same over arrays (F16C where the host has it, else the scalar code): identical results.
void halvesToFloats(const uint16_t* in, float* out, int64_t n);
void floatsToHalves(const float* in, uint16_t* out, int64_t n);
uint16_t floatToBFloat16Bits(float value);  // round to nearest even; NaN stays a quiet NaN
float bfloat16BitsToFloat(uint16_t bits);   // exact

// Parses a program's dtype spelling. Returns false for spellings that are not an IPU type or "token".
bool parseDType(const std::string& name, DType* out);
// True for every dtype spelling the program format knows, supported or not ("f64", "c64", ...).
bool isKnownDTypeName(const std::string& name);
// Why an unsupported dtype is unsupported, and what to use instead.
std::string unsupportedDTypeAdvice(const std::string& name);

// MLIR spelling of an element type given by program name: "f32" -> "f32", "u32" -> "ui32", "bool" -> "i1".
std::string mlirElementName(const std::string& name);
std::string mlirTensorType(const std::string& dtype_name, const std::vector<int64_t>& shape);

inline bool isFloat(DType d) { return dtypeInfo(d).is_float; }
inline bool isInteger(DType d) { return dtypeInfo(d).is_int; }
inline bool isSigned(DType d) { return dtypeInfo(d).is_signed; }
inline bool isToken(DType d) { return d == DType::Token; }
constexpr bool isComplex(DType d) { return d == DType::C64 || d == DType::C128; }
// The element type of a complex type's parts (c64: f32, c128: f64).
constexpr DType complexPart(DType d) { return d == DType::C128 ? DType::F64 : DType::F32; }
// A complex type's storage (Complex64 or Complex128).
template <class T>
constexpr bool isComplexStorage = std::is_same<T, Complex64>::value || std::is_same<T, Complex128>::value;
// f16 and bf16: stored in 16 bits, computed in f32 and rounded once per op.
constexpr bool isNarrowFloat(DType d) { return d == DType::F16 || d == DType::BF16; }
// The emulated 64-bit types: no IPU hardware computes them (dtype table above).
constexpr bool isWide64(DType d) { return d == DType::F64 || d == DType::I64 || d == DType::U64; }
// The types jax_enable_x64 brings: the 64-bit ones and c128 (pairs of f64), refused when 64-bit emulation is off.
constexpr bool isEmulated64(DType d) { return isWide64(d) || d == DType::C128; }
// The type the IPU's vector unit computes a value of `d` in, for costs: bf16 and c64 (pairs) in f32 (it has no
// bf16 or complex arithmetic, as Poplar users cast or split), every other type in itself.
// fp8 converts on the vector unit as f16 does (the C600's IPU has no other fp8 arithmetic); a sub-byte integer as
// the byte it is held in.
inline DType computeType(DType d) {
  return d == DType::BF16 || d == DType::C64 ? DType::F32
         : d == DType::C128                  ? DType::F64
         : isFloat8(d)                       ? DType::F16
         : isSubByte(d)                      ? (isSigned(d) ? DType::I8 : DType::U8)
                                             : d;
}

// An fp8 format: 1 sign bit, `exponent` and `mantissa` bits, the exponent's bias, and its special values: IEEE
// (e5m2: the top exponent holds the infinities and NaNs), FN (no infinities; S.1111.111 is NaN: e4m3fn) or FNUZ (no
// infinities, no negative zero; 0x80 is the one NaN: Poplar's F143/F152). No format has denormal flushing: its
// subnormals are values.
struct Float8Format {
  enum class Specials : uint8_t { Ieee, Fn, Fnuz };
  int exponent, mantissa, bias;
  Specials specials;
};
constexpr Float8Format float8Format(DType d) {
  using S = Float8Format::Specials;
  return d == DType::F8E4M3FN     ? Float8Format{4, 3, 7, S::Fn}
         : d == DType::F8E5M2     ? Float8Format{5, 2, 15, S::Ieee}
         : d == DType::F8E4M3FNUZ ? Float8Format{4, 3, 8, S::Fnuz}
         : d == DType::F8E5M2FNUZ ? Float8Format{5, 2, 16, S::Fnuz}
                                  : Float8Format{4, 3, 11, S::Fnuz};  // e4m3b11fnuz
}
// The value of an fp8 element: exact (every fp8 value is an f32). NaN comes out as XLA:CPU gives it (dtype.cc).
float float8ToFloat(DType d, uint8_t bits);
// `value` rounded to nearest even once; beyond the largest finite value, infinity (e5m2) or NaN; NaN keeps its sign
// where the format has one (dtype.cc).
uint8_t float8FromDouble(DType d, double value);

int64_t shapeElements(const std::vector<int64_t>& shape);
// Element strides of a dense row-major array of this shape.
std::vector<int64_t> rowMajorStrides(const std::vector<int64_t>& shape);

}  // namespace ipu
