// Element types: sizes, names (ours and MLIR's) and the IEEE binary16 conversions the vector unit performs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ipu/emulator.h"

namespace ipu {

// Host storage of each element type: bool is one byte holding 0 or 1, f16 is the raw binary16 bits.
using BoolStorage = uint8_t;
using HalfStorage = uint16_t;

// Round-to-nearest-even conversion with IEEE overflow to infinity, subnormals and NaN payloads kept quiet.
uint16_t floatToHalf(float value);
float halfToFloat(uint16_t bits);  // exact (table lookup)

// Parses a program's dtype spelling. Returns false for spellings that are not one of the five IPU types or "token".
bool parseDType(const std::string& name, DType* out);
// True for every dtype spelling the program format knows, supported or not ("f64", "c64", ...).
bool isKnownDTypeName(const std::string& name);
// Why an unsupported dtype is unsupported, and what to use instead.
std::string unsupportedDTypeAdvice(const std::string& name);

// MLIR spelling of an element type given by program name: "f32" -> "f32", "u32" -> "ui32", "bool" -> "i1".
std::string mlirElementName(const std::string& name);
std::string mlirTensorType(const std::string& dtype_name, const std::vector<int64_t>& shape);

inline bool isFloat(DType d) { return d == DType::F16 || d == DType::F32; }
inline bool isInteger(DType d) { return d == DType::I32 || d == DType::U32; }
inline bool isToken(DType d) { return d == DType::Token; }

int64_t shapeElements(const std::vector<int64_t>& shape);
// Element strides of a dense row-major array of this shape.
std::vector<int64_t> rowMajorStrides(const std::vector<int64_t>& shape);

}  // namespace ipu
