#include "ipu/registry.h"

#include "ipu/cpu_features.h"
#include "ipu/dtype.h"
#include "ipu/handlers.h"
#include "ipu/json.h"

namespace ipu {

namespace {

// Masks by kind, from the dtype table: H the 16-bit floats (f16, bf16: computed in f32), I/U every signed/unsigned
// integer width.
constexpr unsigned maskOf(bool (*pred)(const DTypeInfo&)) {
  unsigned m = 0;
  for (const DTypeInfo& t : kDTypeTable)
    if (pred(t)) m |= dtypeBit(t.dtype);
  return m;
}
constexpr unsigned B = dtypeBit(DType::Bool);
constexpr unsigned H = maskOf([](const DTypeInfo& t) { return t.is_float && t.size == 2; });
constexpr unsigned F = dtypeBit(DType::F32);
constexpr unsigned I = maskOf([](const DTypeInfo& t) { return t.is_int && t.is_signed; });
constexpr unsigned U = maskOf([](const DTypeInfo& t) { return t.is_int && !t.is_signed; });
constexpr unsigned FLOAT = H | F;
constexpr unsigned INT = I | U;
constexpr unsigned NUM = FLOAT | INT;
constexpr unsigned ALL = NUM | B;
// c64 (pairs of f32): the ops that move data carry it, and complex.cc computes its arithmetic.
constexpr unsigned C = dtypeBit(DType::C64);
constexpr unsigned ANY = ALL | C;

using K = OpKind;
using Fam = OpFamily;
using R = TypeRole;

const OpInfo kOps[] = {
    {"abs", K::Abs, Fam::Unary, FLOAT | I | C, R::Operand0, 1, 1, lowerElementwise},
    {"negate", K::Negate, Fam::Unary, NUM | C, R::Operand0, 1, 1, lowerElementwise},
    {"sign", K::Sign, Fam::Unary, FLOAT | I | C, R::Operand0, 1, 1, lowerElementwise},
    {"exponential", K::Exp, Fam::Unary, FLOAT | C, R::Operand0, 1, 1, lowerElementwise},
    {"exponential_minus_one", K::Expm1, Fam::Unary, FLOAT | C, R::Operand0, 1, 1, lowerElementwise},
    {"log", K::Log, Fam::Unary, FLOAT | C, R::Operand0, 1, 1, lowerElementwise},
    {"log_plus_one", K::Log1p, Fam::Unary, FLOAT | C, R::Operand0, 1, 1, lowerElementwise},
    {"sqrt", K::Sqrt, Fam::Unary, FLOAT | C, R::Operand0, 1, 1, lowerElementwise},
    {"rsqrt", K::Rsqrt, Fam::Unary, FLOAT | C, R::Operand0, 1, 1, lowerElementwise},
    {"cbrt", K::Cbrt, Fam::Unary, FLOAT, R::Operand0, 1, 1, lowerElementwise},
    {"tanh", K::Tanh, Fam::Unary, FLOAT | C, R::Operand0, 1, 1, lowerElementwise},
    {"logistic", K::Logistic, Fam::Unary, FLOAT, R::Operand0, 1, 1, lowerElementwise},
    {"sine", K::Sine, Fam::Unary, FLOAT | C, R::Operand0, 1, 1, lowerElementwise},
    {"cosine", K::Cosine, Fam::Unary, FLOAT | C, R::Operand0, 1, 1, lowerElementwise},
    {"tan", K::Tan, Fam::Unary, FLOAT | C, R::Operand0, 1, 1, lowerElementwise},
    {"floor", K::Floor, Fam::Unary, FLOAT, R::Operand0, 1, 1, lowerElementwise},
    {"ceil", K::Ceil, Fam::Unary, FLOAT, R::Operand0, 1, 1, lowerElementwise},
    {"round_nearest_even", K::RoundEven, Fam::Unary, FLOAT, R::Operand0, 1, 1, lowerElementwise},
    {"round_nearest_afz", K::RoundAfz, Fam::Unary, FLOAT, R::Operand0, 1, 1, lowerElementwise},
    {"is_finite", K::IsFinite, Fam::Unary, FLOAT, R::Operand0, 1, 1, lowerElementwise},
    {"not", K::Not, Fam::Unary, B | INT, R::Operand0, 1, 1, lowerElementwise},
    {"popcnt", K::Popcnt, Fam::Unary, INT, R::Operand0, 1, 1, lowerElementwise},
    {"count_leading_zeros", K::Clz, Fam::Unary, INT, R::Operand0, 1, 1, lowerElementwise},
    {"erf", K::Erf, Fam::Unary, FLOAT, R::Operand0, 1, 1, lowerElementwise},
    {"erfc", K::Erfc, Fam::Unary, FLOAT, R::Operand0, 1, 1, lowerElementwise},
    {"sinh", K::Sinh, Fam::Unary, FLOAT | C, R::Operand0, 1, 1, lowerElementwise},
    {"cosh", K::Cosh, Fam::Unary, FLOAT | C, R::Operand0, 1, 1, lowerElementwise},
    {"asin", K::Asin, Fam::Unary, FLOAT | C, R::Operand0, 1, 1, lowerElementwise},
    {"acos", K::Acos, Fam::Unary, FLOAT | C, R::Operand0, 1, 1, lowerElementwise},
    {"atan", K::Atan, Fam::Unary, FLOAT | C, R::Operand0, 1, 1, lowerElementwise},
    {"asinh", K::Asinh, Fam::Unary, FLOAT | C, R::Operand0, 1, 1, lowerElementwise},
    {"acosh", K::Acosh, Fam::Unary, FLOAT | C, R::Operand0, 1, 1, lowerElementwise},
    {"atanh", K::Atanh, Fam::Unary, FLOAT | C, R::Operand0, 1, 1, lowerElementwise},
    {"erf_inv", K::ErfInv, Fam::Unary, FLOAT, R::Operand0, 1, 1, lowerElementwise},
    {"lgamma", K::Lgamma, Fam::Unary, FLOAT, R::Operand0, 1, 1, lowerElementwise},
    {"digamma", K::Digamma, Fam::Unary, FLOAT, R::Operand0, 1, 1, lowerElementwise},
    {"bessel_i1e", K::BesselI1e, Fam::Unary, FLOAT, R::Operand0, 1, 1, lowerElementwise},

    {"add", K::Add, Fam::Binary, NUM | C, R::Operand0, 2, 2, lowerElementwise},
    {"subtract", K::Subtract, Fam::Binary, NUM | C, R::Operand0, 2, 2, lowerElementwise},
    {"multiply", K::Multiply, Fam::Binary, NUM | C, R::Operand0, 2, 2, lowerElementwise},
    {"divide", K::Divide, Fam::Binary, NUM | C, R::Operand0, 2, 2, lowerElementwise},
    {"remainder", K::Remainder, Fam::Binary, NUM, R::Operand0, 2, 2, lowerElementwise},
    {"power", K::Power, Fam::Binary, NUM | C, R::Operand0, 2, 2, lowerElementwise},
    {"maximum", K::Maximum, Fam::Binary, ALL, R::Operand0, 2, 2, lowerElementwise},
    {"minimum", K::Minimum, Fam::Binary, ALL, R::Operand0, 2, 2, lowerElementwise},
    {"atan2", K::Atan2, Fam::Binary, FLOAT, R::Operand0, 2, 2, lowerElementwise},
    {"and", K::And, Fam::Binary, B | INT, R::Operand0, 2, 2, lowerElementwise},
    {"or", K::Or, Fam::Binary, B | INT, R::Operand0, 2, 2, lowerElementwise},
    {"xor", K::Xor, Fam::Binary, B | INT, R::Operand0, 2, 2, lowerElementwise},
    {"shift_left", K::ShiftLeft, Fam::Binary, INT, R::Operand0, 2, 2, lowerElementwise},
    {"shift_right_arithmetic", K::ShiftRightArithmetic, Fam::Binary, INT, R::Operand0, 2, 2, lowerElementwise},
    {"shift_right_logical", K::ShiftRightLogical, Fam::Binary, INT, R::Operand0, 2, 2, lowerElementwise},
    {"next_after", K::NextAfter, Fam::Binary, FLOAT, R::Operand0, 2, 2, lowerElementwise},

    {"compare", K::Compare, Fam::Compare, ANY, R::Operand0, 2, 2, lowerElementwise},
    {"select", K::Select, Fam::Select, ANY, R::Operand1, 3, 3, lowerElementwise},
    {"clamp", K::Clamp, Fam::Clamp, NUM, R::Operand1, 3, 3, lowerElementwise},
    {"convert", K::Convert, Fam::Convert, ANY, R::Operand0, 1, 1, lowerElementwise},
    {"bitcast_convert", K::BitcastConvert, Fam::Shape, ALL, R::Operand0, 1, 1, lowerBitcastConvert},
    {"constant", K::Constant, Fam::Shape, ANY, R::Result0, 0, 0, lowerConstant},
    {"iota", K::Iota, Fam::Shape, ANY, R::Result0, 0, 0, lowerIota},
    {"broadcast_in_dim", K::BroadcastInDim, Fam::Shape, ANY, R::Operand0, 1, 1, lowerBroadcastInDim},
    {"reshape", K::Reshape, Fam::Shape, ANY, R::Operand0, 1, 1, lowerReshape},
    {"transpose", K::Transpose, Fam::Shape, ANY, R::Operand0, 1, 1, lowerTranspose},
    {"reverse", K::Reverse, Fam::Shape, ANY, R::Operand0, 1, 1, lowerReverse},
    {"slice", K::Slice, Fam::Shape, ANY, R::Operand0, 1, 1, lowerSlice},
    {"dynamic_slice", K::DynamicSlice, Fam::Shape, ANY, R::Operand0, 1, -1, lowerDynamicSlice},
    {"dynamic_update_slice", K::DynamicUpdateSlice, Fam::Shape, ANY, R::Operand0, 2, -1, lowerDynamicUpdateSlice},
    {"gather", K::Gather, Fam::Shape, ANY, R::Operand0, 2, 2, lowerGather},
    {"scatter", K::Scatter, Fam::Shape, ANY, R::Operand0, 3, -1, lowerScatter},
    {"concatenate", K::Concatenate, Fam::Shape, ANY, R::Operand0, 1, -1, lowerConcatenate},
    {"pad", K::Pad, Fam::Shape, ANY, R::Operand0, 2, 2, lowerPad},
    {"dot_general", K::DotGeneral, Fam::Dot, ALL, R::Operand0, 2, 2, lowerDot},  // c64: four f32 dots (front end)
    {"convolution", K::Convolution, Fam::Conv, ALL, R::Operand0, 2, 2, lowerConv},
    {"reduce", K::Reduce, Fam::Reduce, ANY, R::Operand0, 2, -1, lowerReduce},
    {"call", K::Call, Fam::Control, ANY, R::None, 0, -1, lowerCall},
    {"while", K::While, Fam::Control, ANY, R::None, 0, -1, lowerWhile},
    {"case", K::Case, Fam::Control, ANY, R::None, 1, 1, lowerCase},
    {"sort", K::Sort, Fam::Sort, ALL, R::Operand0, 1, -1, lowerSort},
    {"top_k", K::TopK, Fam::Sort, ALL, R::Operand0, 1, 1, lowerTopK},
    // Host I/O (host_io.cc): tokens order them; their operands and results may be of any type.
    {"create_token", K::CreateToken, Fam::HostIO, ANY, R::None, 0, 0, lowerCreateToken},
    {"after_all", K::AfterAll, Fam::HostIO, ANY, R::None, 0, -1, lowerAfterAll},
    {"infeed", K::Infeed, Fam::HostIO, ANY, R::None, 1, 1, lowerInfeed},
    {"outfeed", K::Outfeed, Fam::HostIO, ANY, R::None, 1, -1, lowerOutfeed},
    {"custom_call", K::CustomCall, Fam::HostIO, ANY, R::None, 0, -1, lowerCustomCall},
    {"all_reduce", K::AllReduce, Fam::Collective, ANY, R::Operand0, 1, 1, lowerAllReduce},
    {"all_gather", K::AllGather, Fam::Collective, ANY, R::Operand0, 1, 1, lowerAllGather},
    {"reduce_scatter", K::ReduceScatter, Fam::Collective, ANY, R::Operand0, 1, 1, lowerReduceScatter},
    {"collective_permute", K::CollectivePermute, Fam::Collective, ANY, R::Operand0, 1, 1, lowerCollectivePermute},
    {"all_to_all", K::AllToAll, Fam::Collective, ANY, R::Operand0, 1, 1, lowerAllToAll},
    {"replica_id", K::ReplicaId, Fam::Collective, U, R::Result0, 0, 0, lowerReplicaId},
    {"partition_id", K::PartitionId, Fam::Collective, U, R::Result0, 0, 0, lowerPartitionId},
    // Pooling and remat (window.cc): operands of an optimization_barrier may be of any type, tokens included.
    {"reduce_window", K::ReduceWindow, Fam::Window, ALL, R::Operand0, 2, -1, lowerReduceWindow},
    {"select_and_scatter", K::SelectAndScatter, Fam::Window, ALL, R::Operand0, 3, 3, lowerSelectAndScatter},
    {"optimization_barrier", K::OptimizationBarrier, Fam::Window, ANY, R::None, 0, -1, lowerOptimizationBarrier},
    {"reduce_precision", K::ReducePrecision, Fam::Window, FLOAT, R::Operand0, 1, 1, lowerReducePrecision},
    // c64 as pairs of f32 (complex.cc, fft.cc)
    {"real", K::Real, Fam::Complex, C, R::Operand0, 1, 1, lowerReal},
    {"imag", K::Imag, Fam::Complex, C, R::Operand0, 1, 1, lowerImag},
    {"complex", K::Complex, Fam::Complex, F, R::Operand0, 2, 2, lowerComplex},
    {"fft", K::Fft, Fam::Complex, F | C, R::Operand0, 1, 1, lowerFft},
    // random numbers (random.cc): a, b; the front end drops the shape operand, which the result's type states
    {"rng", K::Rng, Fam::Random, NUM, R::Result0, 2, 2, lowerRng},
};

}  // namespace

const OpInfo* findOp(const std::string& name) {
  for (const OpInfo& info : kOps)
    if (name == info.name) return &info;
  return nullptr;
}

std::vector<const OpInfo*> allOps() {
  std::vector<const OpInfo*> all;
  for (const OpInfo& info : kOps) all.push_back(&info);
  return all;
}

const OpInfo& opInfo(OpKind kind) {
  for (const OpInfo& info : kOps)
    if (info.kind == kind) return info;
  return kOps[0];
}

std::string dtypeList(unsigned mask) {
  std::string out;
  for (const DTypeInfo& t : kDTypeTable) {
    if (!(mask & dtypeBit(t.dtype))) continue;
    if (!out.empty()) out += ", ";
    out += t.name;
  }
  return out;
}

const char* familyName(OpFamily family) {
  switch (family) {
    case OpFamily::Unary: return "unary";
    case OpFamily::Binary: return "binary";
    case OpFamily::Compare: return "compare";
    case OpFamily::Select: return "select";
    case OpFamily::Clamp: return "clamp";
    case OpFamily::Convert: return "convert";
    case OpFamily::Shape: return "shape";
    case OpFamily::Dot: return "dot";
    case OpFamily::Reduce: return "reduce";
    case OpFamily::Control: return "control";
    case OpFamily::Sort: return "sort";
    case OpFamily::Conv: return "conv";
    case OpFamily::HostIO: return "host_io";
    case OpFamily::Collective: return "collective";
    case OpFamily::Window: return "window";
    case OpFamily::Complex: return "complex";
    case OpFamily::Random: return "random";
  }
  return "?";
}

bool isReducer(const std::string& computation) {
  const OpInfo* info = findOp(computation);
  return info && info->family == OpFamily::Binary && isReducerKind(info->kind);
}

std::string registryJson() {
  std::string out = "{\"ops\":[";
  for (const OpInfo& info : kOps) {
    if (&info != kOps) out += ",";
    std::string dtypes;
    const std::string list = dtypeList(info.dtypes);  // "f16, f32"
    for (size_t b = 0; b < list.size();) {
      size_t e = list.find(", ", b);
      if (e == std::string::npos) e = list.size();
      dtypes += (dtypes.empty() ? "" : ",") + json::quote(list.substr(b, e - b));
      b = e + 2;
    }
    out += "{\"name\":" + json::quote(info.name) + ",\"family\":" + json::quote(familyName(info.family)) +
           ",\"dtypes\":[" + dtypes + "],\"min_operands\":" + std::to_string(info.min_operands) +
           ",\"max_operands\":" + std::to_string(info.max_operands) +
           ",\"reducer\":" + (isReducer(info.name) ? "true" : "false") +
           ",\"elementwise\":" + (isElementwiseFamily(info.family) ? "true" : "false") +
           ",\"pure\":" + (isPure(info) ? "true" : "false") + "}";
  }
  out += "],\"element_types\":[";
  bool first = true;
  for (const DTypeInfo& t : kDTypeTable) {
    if (t.dtype == DType::Token) continue;  // a program value, never an array's element
    out += std::string(first ? "" : ",") + "{\"name\":" + json::quote(t.name) + ",\"mlir\":" + json::quote(t.mlir) +
           ",\"bytes\":" + std::to_string(t.size) + ",\"float\":" + (t.is_float ? "true" : "false") +
           ",\"int\":" + (t.is_int ? "true" : "false") + ",\"signed\":" + (t.is_signed ? "true" : "false") + "}";
    first = false;
  }
  // What the front end's rewrites (and the tests) need to know of the XLA:CPU this host runs (cpu_features.h).
  return out + "],\"host\":{\"wide_vectors\":" + (hostWideVectors() ? "true" : "false") +
         ",\"avx512\":" + (hostHasAvx512() ? "true" : "false") +
         ",\"avx512_fp16\":" + (hostHasAvx512Fp16() ? "true" : "false") +
         ",\"gathers_fast\":" + (hostGathersFast() ? "true" : "false") + "}}";
}

std::string opSignature(const Op& op, const std::vector<const ValueDecl*>& operands) {
  std::string s = op.mlir + "(";
  for (size_t i = 0; i < operands.size(); ++i) {
    if (i) s += ", ";
    s += operands[i] ? operands[i]->mlirType() : "?";
  }
  s += ") -> ";
  if (op.results.size() != 1) s += "(";
  for (size_t i = 0; i < op.results.size(); ++i) {
    if (i) s += ", ";
    s += op.results[i].mlirType();
  }
  if (op.results.size() != 1) s += ")";
  return s;
}

}  // namespace ipu
