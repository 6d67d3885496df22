#include "ipu/registry.h"

#include "ipu/cpu_features.h"
#include "ipu/dtype.h"
#include "ipu/handlers.h"
#include "ipu/json.h"
#include "reduce_kernels.h"

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
constexpr unsigned D = dtypeBit(DType::F64);  // emulated in software (dtype.h)
constexpr unsigned I = maskOf([](const DTypeInfo& t) { return t.is_int && t.is_signed; });
constexpr unsigned U = maskOf([](const DTypeInfo& t) { return t.is_int && !t.is_signed; });
constexpr unsigned FLOAT = H | F | D;
constexpr unsigned INT = I | U;
constexpr unsigned NUM = FLOAT | INT;
constexpr unsigned ALL = NUM | B;
// c64 and c128 (pairs of f32, f64): the ops that move data carry them, and complex.cc computes their arithmetic.
constexpr unsigned C = dtypeBit(DType::C64) | dtypeBit(DType::C128);
constexpr unsigned ANY = ALL | C;
// fp8 (on chips that have it: dtype.h): moved as bytes by the ops that only move data, converted, and read by
// dot_general; the front end computes every other op on it in f16.
constexpr unsigned Q = maskOf([](const DTypeInfo& t) { return t.storage == StorageKind::Float8; });
// The sub-byte integers likewise: moved and converted; the front end computes every other op on them in 8 bits.
constexpr unsigned S = maskOf([](const DTypeInfo& t) { return t.storage == StorageKind::SubByte; });
constexpr unsigned MOVED = ANY | Q | S;

using K = OpKind;
using Fam = OpFamily;
using R = TypeRole;

// The emulated f64 (ipu/registry.h ElementCost::f64): soft-float routines on a worker's 32-bit integer pipeline, as
// compiler-rt's for 32-bit targets run them (unpack sign/exponent/mantissa pairs, align, add with carries, normalise,
// round, pack), per element in worker instructions (calibrated from those routines' lengths). The IPU multiplies
// 32 x 32 -> 32 bits, so a 53-bit product is 16 partial products of 16-bit halves. A transcendental is its f64
// routine's multiply-adds (a degree-~13 polynomial plus range reduction) in these units.
constexpr float kSoftAdd = 60, kSoftMul = 80, kSoftDiv = 250, kSoftSqrt = 300, kSoftFma = kSoftAdd + kSoftMul;
constexpr float kSoftPoly = 16 * kSoftFma;  // exp, log and friends: ~16 multiply-adds
// The vertex costs of the elementwise ops (ipu/registry.h ElementCost): {fixed, f32 vector, f16 vector, integer
// element, per element, flops}, then (wide64) i64/u64 and f64 per element. i64/u64 as 32-bit pairs: an add is two
// adds and a carry (cmpult + add), a bit op two, a compare the high words then the low ones, a multiply 16-bit
// partial products (the low 64 bits of lo x lo, plus two cross products), a divide a 64-step shift-subtract loop.
constexpr ElementCost kSimple = wide64({17, 3, 3, 4}, 8, 20);                  // (doc) simple unary, 3 per vector
constexpr ElementCost kMove = wide64({17, 3, 3, 4, false, 0}, 6, 6);           // no arithmetic: abs, negate, bit ops
constexpr ElementCost kArith = wide64({29, 3, 3, 7}, 11, kSoftAdd);            // (doc) 3 per vector; int add ~7
constexpr ElementCost kMultiply = wide64({29, 3, 3, 7}, 24, kSoftMul);         // (doc) as kArith in 32 bits
constexpr ElementCost kCompare = wide64({29, 3, 3, 4}, 10, 16);                // (doc) max ~3 per 2 f32; ints 4
constexpr ElementCost kBits = wide64({29, 3, 3, 4, false, 0}, 8, 8);           // and/or/xor, shifts, select
constexpr ElementCost kDivide = wide64({29, 10, 21, 40}, 400, kSoftDiv);       // (doc) floats; ints in software
constexpr ElementCost kRemainder = wide64({29, 30, 30, 40}, 400, 2 * kSoftDiv);
constexpr ElementCost kPower = wide64({40, 60, 60, 60}, 200, 2 * kSoftPoly);
constexpr ElementCost kAtan2 = wide64({40, 120, 120, 120}, 0, kSoftDiv + kSoftPoly);
constexpr ElementCost kExp = wide64({33, 6, 6, 6}, 0, kSoftPoly);              // (doc)
constexpr ElementCost kLog = wide64({33, 8, 8, 8}, 0, kSoftPoly);
constexpr ElementCost kTanh = wide64({17, 12, 12, 12}, 0, kSoftPoly + kSoftDiv);  // (doc)
constexpr ElementCost kLogistic = wide64({17, 14, 14, 14}, 0, kSoftPoly + kSoftDiv);
constexpr ElementCost kSqrt = wide64({17, 10, 10, 10}, 0, kSoftSqrt);          // (doc)
constexpr ElementCost kCbrt = wide64({17, 40, 40, 40}, 0, 2 * kSoftPoly);
constexpr ElementCost kTrig = wide64({17, 2300, 2300, 2300, true}, 0, 4 * kSoftPoly);  // (doc) f32: ~2,300
constexpr ElementCost kPolynomial = wide64({17, 200, 200, 200, true}, 0, 2 * kSoftPoly);  // software polynomial
// CHLO special functions, software routines per element (calibrated): lgamma and digamma are a 9-term Lanczos series
// (8 and 16 divides) plus log1p, log and the reflection's sin (and cos); i1e two Chebyshev series (24
// multiply-adds), a divide and a sqrt; next_after a few integer ops on the bits.
constexpr ElementCost kLgamma = wide64({17, 2600, 2600, 2600, true}, 0, 8 * kSoftPoly + 8 * kSoftDiv);
constexpr ElementCost kDigamma = wide64({17, 5000, 5000, 5000, true}, 0, 8 * kSoftPoly + 16 * kSoftDiv);
constexpr ElementCost kBesselI1e{17, 150, 150, 150, true};
constexpr ElementCost kNextAfter = wide64({29, 12, 12, 12, true}, 0, 24);
constexpr ElementCost kConvert = wide64({17, 2, 2, 2, false, 0}, 8, 30);  // (doc) f16<->f32 ~2 per 4 elements
constexpr ElementCost kClamp = wide64({29, 3, 3, 4, false, 2}, 20, 32);

// The part ops one complex element costs (ipu/registry.h C64Cost: Poplar's pair arithmetic, each part op, f32 or
// c128's emulated f64, its own vector loop over the elements; a transcendental part is one such op, as popops runs
// it). Ops not named move parts (real, imag, complex, convert): two moves.
constexpr C64Cost kC64AddSub{{K::Add, 2}};
constexpr C64Cost kC64Negate{{K::Negate, 2}};
constexpr C64Cost kC64Multiply{{K::Multiply, 4}, {K::Add, 2}};
constexpr C64Cost kC64Divide{{K::Divide, 3}, {K::Multiply, 3}, {K::Add, 3}, {K::Abs, 2}};  // Smith's algorithm
constexpr C64Cost kC64Abs{{K::Abs, 2}, {K::Divide, 1}, {K::Multiply, 2}, {K::Add, 1}, {K::Sqrt, 1}};
constexpr C64Cost kC64Sign{{K::Abs, 2}, {K::Divide, 3}, {K::Multiply, 2}, {K::Add, 1}, {K::Sqrt, 1}};
constexpr C64Cost kC64Exp{{K::Exp, 1}, {K::Cosine, 1}, {K::Sine, 1}, {K::Multiply, 2}};
constexpr C64Cost kC64Expm1{{K::Expm1, 1}, {K::Cosine, 1}, {K::Sine, 2}, {K::Multiply, 5}, {K::Add, 2}};
constexpr C64Cost kC64Log{{K::Abs, 2}, {K::Divide, 1}, {K::Multiply, 2}, {K::Log, 1}, {K::Log1p, 1}, {K::Atan2, 1}};
constexpr C64Cost kC64Log1p{{K::Multiply, 3}, {K::Add, 3}, {K::Log1p, 1}, {K::Atan2, 1}};
constexpr C64Cost kC64Sqrt{{K::Abs, 2}, {K::Sqrt, 2}, {K::Divide, 2}, {K::Multiply, 2}, {K::Add, 2}};
constexpr C64Cost kC64Rsqrt{{K::Abs, 2}, {K::Sqrt, 2}, {K::Divide, 5}, {K::Multiply, 5}, {K::Add, 5}};
constexpr C64Cost kC64Tan{{K::Tanh, 1}, {K::Tan, 1}, {K::Multiply, 6}, {K::Add, 2}, {K::Divide, 2}};
constexpr C64Cost kC64Trig{{K::Sine, 1}, {K::Cosine, 1}, {K::Sinh, 1}, {K::Cosh, 1}, {K::Multiply, 2}};
constexpr C64Cost kC64Inverse{
    // log and sqrt of c64
    {K::Log, 1}, {K::Sqrt, 2}, {K::Atan2, 2}, {K::Abs, 2}, {K::Multiply, 6}, {K::Add, 6}, {K::Divide, 2}};
constexpr C64Cost kC64Power{{K::Log, 1},    {K::Log1p, 1}, {K::Atan2, 1},   {K::Exp, 1},
                            {K::Cosine, 1}, {K::Sine, 1},  {K::Multiply, 8}};
constexpr C64Cost kC64Compare{{K::Compare, 2}, {K::And, 1}};

const OpInfo kOps[] = {
    {"abs", K::Abs, Fam::Unary, FLOAT | I | C, R::Operand0, 1, 1, lowerElementwise, kMove, kC64Abs},
    {"negate", K::Negate, Fam::Unary, NUM | C, R::Operand0, 1, 1, lowerElementwise, kMove, kC64Negate},
    {"sign", K::Sign, Fam::Unary, FLOAT | I | C, R::Operand0, 1, 1, lowerElementwise, kSimple, kC64Sign},
    {"exponential", K::Exp, Fam::Unary, FLOAT | C, R::Operand0, 1, 1, lowerElementwise, kExp, kC64Exp},
    {"exponential_minus_one", K::Expm1, Fam::Unary, FLOAT | C, R::Operand0, 1, 1, lowerElementwise, kExp, kC64Expm1},
    {"log", K::Log, Fam::Unary, FLOAT | C, R::Operand0, 1, 1, lowerElementwise, kLog, kC64Log},
    {"log_plus_one", K::Log1p, Fam::Unary, FLOAT | C, R::Operand0, 1, 1, lowerElementwise, kLog, kC64Log1p},
    {"sqrt", K::Sqrt, Fam::Unary, FLOAT | C, R::Operand0, 1, 1, lowerElementwise, kSqrt, kC64Sqrt},
    {"rsqrt", K::Rsqrt, Fam::Unary, FLOAT | C, R::Operand0, 1, 1, lowerElementwise, kSqrt, kC64Rsqrt},
    {"cbrt", K::Cbrt, Fam::Unary, FLOAT, R::Operand0, 1, 1, lowerElementwise, kCbrt},
    {"tanh", K::Tanh, Fam::Unary, FLOAT | C, R::Operand0, 1, 1, lowerElementwise, kTanh, kC64Tan},
    {"logistic", K::Logistic, Fam::Unary, FLOAT, R::Operand0, 1, 1, lowerElementwise, kLogistic},
    {"sine", K::Sine, Fam::Unary, FLOAT | C, R::Operand0, 1, 1, lowerElementwise, kTrig, kC64Trig},
    {"cosine", K::Cosine, Fam::Unary, FLOAT | C, R::Operand0, 1, 1, lowerElementwise, kTrig, kC64Trig},
    {"tan", K::Tan, Fam::Unary, FLOAT | C, R::Operand0, 1, 1, lowerElementwise, kTrig, kC64Tan},
    {"floor", K::Floor, Fam::Unary, FLOAT, R::Operand0, 1, 1, lowerElementwise, kSimple},
    {"ceil", K::Ceil, Fam::Unary, FLOAT, R::Operand0, 1, 1, lowerElementwise, kSimple},
    {"round_nearest_even", K::RoundEven, Fam::Unary, FLOAT, R::Operand0, 1, 1, lowerElementwise, kSimple},
    {"round_nearest_afz", K::RoundAfz, Fam::Unary, FLOAT, R::Operand0, 1, 1, lowerElementwise, kSimple},
    {"is_finite", K::IsFinite, Fam::Unary, FLOAT, R::Operand0, 1, 1, lowerElementwise, kMove},
    {"not", K::Not, Fam::Unary, B | INT, R::Operand0, 1, 1, lowerElementwise, kMove},
    {"popcnt", K::Popcnt, Fam::Unary, INT, R::Operand0, 1, 1, lowerElementwise, kMove},
    {"count_leading_zeros", K::Clz, Fam::Unary, INT, R::Operand0, 1, 1, lowerElementwise, kMove},
    {"erf", K::Erf, Fam::Unary, FLOAT, R::Operand0, 1, 1, lowerElementwise, kPolynomial},
    {"erfc", K::Erfc, Fam::Unary, FLOAT, R::Operand0, 1, 1, lowerElementwise, kPolynomial},
    {"sinh", K::Sinh, Fam::Unary, FLOAT | C, R::Operand0, 1, 1, lowerElementwise, kPolynomial, kC64Trig},
    {"cosh", K::Cosh, Fam::Unary, FLOAT | C, R::Operand0, 1, 1, lowerElementwise, kPolynomial, kC64Trig},
    {"asin", K::Asin, Fam::Unary, FLOAT | C, R::Operand0, 1, 1, lowerElementwise, kPolynomial, kC64Inverse},
    {"acos", K::Acos, Fam::Unary, FLOAT | C, R::Operand0, 1, 1, lowerElementwise, kPolynomial, kC64Inverse},
    {"atan", K::Atan, Fam::Unary, FLOAT | C, R::Operand0, 1, 1, lowerElementwise, kPolynomial, kC64Inverse},
    {"asinh", K::Asinh, Fam::Unary, FLOAT | C, R::Operand0, 1, 1, lowerElementwise, kPolynomial, kC64Inverse},
    {"acosh", K::Acosh, Fam::Unary, FLOAT | C, R::Operand0, 1, 1, lowerElementwise, kPolynomial, kC64Inverse},
    {"atanh", K::Atanh, Fam::Unary, FLOAT | C, R::Operand0, 1, 1, lowerElementwise, kPolynomial, kC64Inverse},
    {"erf_inv", K::ErfInv, Fam::Unary, FLOAT, R::Operand0, 1, 1, lowerElementwise, kPolynomial},
    {"lgamma", K::Lgamma, Fam::Unary, FLOAT, R::Operand0, 1, 1, lowerElementwise, kLgamma},
    {"digamma", K::Digamma, Fam::Unary, FLOAT, R::Operand0, 1, 1, lowerElementwise, kDigamma},
    {"bessel_i1e", K::BesselI1e, Fam::Unary, H | F, R::Operand0, 1, 1, lowerElementwise, kBesselI1e},

    {"add", K::Add, Fam::Binary, NUM | C, R::Operand0, 2, 2, lowerElementwise, kArith, kC64AddSub},
    {"subtract", K::Subtract, Fam::Binary, NUM | C, R::Operand0, 2, 2, lowerElementwise, kArith, kC64AddSub},
    {"multiply", K::Multiply, Fam::Binary, NUM | C, R::Operand0, 2, 2, lowerElementwise, kMultiply, kC64Multiply},
    {"divide", K::Divide, Fam::Binary, NUM | C, R::Operand0, 2, 2, lowerElementwise, kDivide, kC64Divide},
    {"remainder", K::Remainder, Fam::Binary, NUM, R::Operand0, 2, 2, lowerElementwise, kRemainder},
    {"power", K::Power, Fam::Binary, NUM | C, R::Operand0, 2, 2, lowerElementwise, kPower, kC64Power},
    {"maximum", K::Maximum, Fam::Binary, ALL, R::Operand0, 2, 2, lowerElementwise, kCompare},
    {"minimum", K::Minimum, Fam::Binary, ALL, R::Operand0, 2, 2, lowerElementwise, kCompare},
    {"atan2", K::Atan2, Fam::Binary, FLOAT, R::Operand0, 2, 2, lowerElementwise, kAtan2},
    {"and", K::And, Fam::Binary, B | INT, R::Operand0, 2, 2, lowerElementwise, kBits},
    {"or", K::Or, Fam::Binary, B | INT, R::Operand0, 2, 2, lowerElementwise, kBits},
    {"xor", K::Xor, Fam::Binary, B | INT, R::Operand0, 2, 2, lowerElementwise, kBits},
    {"shift_left", K::ShiftLeft, Fam::Binary, INT, R::Operand0, 2, 2, lowerElementwise, kBits},
    {"shift_right_arithmetic", K::ShiftRightArithmetic, Fam::Binary, INT, R::Operand0, 2, 2, lowerElementwise, kBits},
    {"shift_right_logical", K::ShiftRightLogical, Fam::Binary, INT, R::Operand0, 2, 2, lowerElementwise, kBits},
    {"next_after", K::NextAfter, Fam::Binary, FLOAT, R::Operand0, 2, 2, lowerElementwise, kNextAfter},

    {"compare", K::Compare, Fam::Compare, ANY, R::Operand0, 2, 2, lowerElementwise, kCompare, kC64Compare},
    {"select", K::Select, Fam::Select, ANY, R::Operand1, 3, 3, lowerElementwise, kBits},
    {"clamp", K::Clamp, Fam::Clamp, NUM, R::Operand1, 3, 3, lowerElementwise, kClamp},
    {"convert", K::Convert, Fam::Convert, MOVED, R::Operand0, 1, 1, lowerElementwise, kConvert},
    {"bitcast_convert", K::BitcastConvert, Fam::Shape, ALL | Q, R::Operand0, 1, 1, lowerBitcastConvert},
    {"constant", K::Constant, Fam::Shape, MOVED, R::Result0, 0, 0, lowerConstant},
    {"iota", K::Iota, Fam::Shape, ANY, R::Result0, 0, 0, lowerIota},
    {"broadcast_in_dim", K::BroadcastInDim, Fam::Shape, MOVED, R::Operand0, 1, 1, lowerBroadcastInDim},
    {"reshape", K::Reshape, Fam::Shape, MOVED, R::Operand0, 1, 1, lowerReshape},
    {"transpose", K::Transpose, Fam::Shape, MOVED, R::Operand0, 1, 1, lowerTranspose},
    {"reverse", K::Reverse, Fam::Shape, MOVED, R::Operand0, 1, 1, lowerReverse},
    {"slice", K::Slice, Fam::Shape, MOVED, R::Operand0, 1, 1, lowerSlice},
    {"dynamic_slice", K::DynamicSlice, Fam::Shape, MOVED, R::Operand0, 1, -1, lowerDynamicSlice},
    {"dynamic_update_slice", K::DynamicUpdateSlice, Fam::Shape, MOVED, R::Operand0, 2, -1, lowerDynamicUpdateSlice},
    {"gather", K::Gather, Fam::Shape, MOVED, R::Operand0, 2, 2, lowerGather},
    {"scatter", K::Scatter, Fam::Shape, ANY, R::Operand0, 3, -1, lowerScatter},
    {"concatenate", K::Concatenate, Fam::Shape, MOVED, R::Operand0, 1, -1, lowerConcatenate},
    {"pad", K::Pad, Fam::Shape, MOVED, R::Operand0, 2, 2, lowerPad},
    {"dot_general", K::DotGeneral, Fam::Dot, ALL | Q, R::Operand0, 2, 2, lowerDot},  // c64: four f32 dots (front end)
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
    {"all_gather", K::AllGather, Fam::Collective, MOVED, R::Operand0, 1, 1, lowerAllGather},
    {"reduce_scatter", K::ReduceScatter, Fam::Collective, ANY, R::Operand0, 1, 1, lowerReduceScatter},
    {"collective_permute", K::CollectivePermute, Fam::Collective, MOVED, R::Operand0, 1, 1, lowerCollectivePermute},
    {"all_to_all", K::AllToAll, Fam::Collective, MOVED, R::Operand0, 1, 1, lowerAllToAll},
    {"replica_id", K::ReplicaId, Fam::Collective, U, R::Result0, 0, 0, lowerReplicaId},
    {"partition_id", K::PartitionId, Fam::Collective, U, R::Result0, 0, 0, lowerPartitionId},
    // Pooling and remat (window.cc): operands of an optimization_barrier may be of any type, tokens included.
    {"reduce_window", K::ReduceWindow, Fam::Window, ALL, R::Operand0, 2, -1, lowerReduceWindow},
    {"select_and_scatter", K::SelectAndScatter, Fam::Window, ALL, R::Operand0, 3, 3, lowerSelectAndScatter},
    {"optimization_barrier", K::OptimizationBarrier, Fam::Window, ANY, R::None, 0, -1, lowerOptimizationBarrier},
    {"reduce_precision", K::ReducePrecision, Fam::Window, H | F, R::Operand0, 1, 1, lowerReducePrecision},
    // c64 and c128 as pairs of f32 and f64 (complex.cc, fft.cc)
    {"real", K::Real, Fam::Complex, C, R::Operand0, 1, 1, lowerReal},
    {"imag", K::Imag, Fam::Complex, C, R::Operand0, 1, 1, lowerImag},
    {"complex", K::Complex, Fam::Complex, F | D, R::Operand0, 2, 2, lowerComplex},
    {"fft", K::Fft, Fam::Complex, F | D | C, R::Operand0, 1, 1, lowerFft},
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
  // By kind, in constant time: the cost model asks once per tile of every elementwise step.
  static const std::vector<const OpInfo*> by_kind = [] {
    std::vector<const OpInfo*> index(static_cast<size_t>(OpKind::Rng) + 1, &kOps[0]);
    for (const OpInfo& info : kOps) index.at(static_cast<size_t>(info.kind)) = &info;
    return index;
  }();
  const size_t k = static_cast<size_t>(kind);
  return k < by_kind.size() ? *by_kind[k] : kOps[0];
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
           // (a sub-byte integer is an integer to its users, though no kernel computes on it: dtype.h)
           ",\"int\":" + (t.is_int || isSubByte(t.dtype) ? "true" : "false") +
           ",\"bits\":" + std::to_string(isSubByte(t.dtype) ? subByteBits(t.dtype) : 8 * t.size) +
           ",\"signed\":" + (t.is_signed ? "true" : "false") + "}";
    first = false;
  }
  // What the front end's rewrites (and the tests) need to know of the XLA:CPU this host runs (cpu_features.h).
  return out + "],\"host\":{\"wide_vectors\":" + (hostWideVectors() ? "true" : "false") +
         ",\"avx512\":" + (hostHasAvx512() ? "true" : "false") +
         ",\"avx512_fp16\":" + (hostHasAvx512Fp16() ? "true" : "false") +
         ",\"gathers_fast\":" + (hostGathersFast() ? "true" : "false") +
         // XLA:CPU's TreeReductionRewriter window: a reduce with a longer reduced dimension is not one fused loop
         "},\"xla_cpu\":{\"tree_window\":" + std::to_string(reduce_kernels::kTreeWindow) + "}}";
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
