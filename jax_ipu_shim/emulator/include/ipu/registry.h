// The op registry: the one table of which ops the emulator implements and for which element types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "ipu/emulator.h"
#include "ipu/program.h"

namespace ipu {

enum class OpKind {
  // unary elementwise
  Abs,
  Negate,
  Sign,
  Exp,
  Expm1,
  Log,
  Log1p,
  Sqrt,
  Rsqrt,
  Cbrt,
  Tanh,
  Logistic,
  Sine,
  Cosine,
  Tan,
  Floor,
  Ceil,
  RoundEven,
  RoundAfz,
  IsFinite,
  Not,
  Popcnt,
  Clz,
  Erf,
  Erfc,
  Sinh,
  Cosh,
  Asin,
  Acos,
  Atan,
  Asinh,
  Acosh,
  Atanh,
  ErfInv,
  Lgamma,
  Digamma,
  BesselI1e,
  // binary elementwise
  Add,
  Subtract,
  Multiply,
  Divide,
  Remainder,
  Power,
  Maximum,
  Minimum,
  Atan2,
  And,
  Or,
  Xor,
  ShiftLeft,
  ShiftRightArithmetic,
  ShiftRightLogical,
  NextAfter,
  Gather,
  Scatter,  // indexed data movement (gather_scatter.cc)
  // the rest
  Compare,
  Select,
  Clamp,
  Convert,
  BitcastConvert,
  Constant,
  Iota,
  BroadcastInDim,
  Reshape,
  Transpose,
  Reverse,
  Slice,
  DynamicSlice,
  DynamicUpdateSlice,
  Concatenate,
  Pad,
  DotGeneral,
  Reduce,
  Call,
  While,
  Case,
  Sort,
  TopK,
  Convolution,  // conv.cc
  CreateToken,
  AfterAll,
  Infeed,
  Outfeed,
  CustomCall,  // host_io.cc
  // collectives over the IPU-Links between replicas (collective.cc)
  AllReduce,
  AllGather,
  ReduceScatter,
  CollectivePermute,
  AllToAll,
  ReplicaId,
  PartitionId,
  ReduceWindow,
  SelectAndScatter,
  OptimizationBarrier,
  ReducePrecision,  // pooling and remat (window.cc)
  Real,
  Imag,
  Complex,
  Fft,  // c64 as pairs of f32 (complex.cc, fft.cc)
  Rng,  // random numbers (random.cc); the last kind (opInfo's index)
};

enum class OpFamily {
  Unary,
  Binary,
  Compare,
  Select,
  Clamp,
  Convert,
  Shape,
  Dot,
  Reduce,
  Control,
  Sort,
  Conv,
  HostIO,
  Collective,
  Window,
  Complex,
  Random
};

// Which value's element type the dtype set of an entry constrains.
enum class TypeRole { Operand0, Operand1, Result0, None };

constexpr unsigned dtypeBit(DType d) { return 1u << static_cast<unsigned>(d); }

class Lowerer;
struct OpContext;
// An op's lowering: appends its steps to ctx.seq and returns its results' slots. The handlers are ipu/handlers.h's.
using OpHandler = std::vector<int> (*)(Lowerer& lowerer, OpContext& ctx);

// What an elementwise op's vertex costs, in poplibs' estimator shape (cost_model.h's cost::elementwise reads it):
// `fixed` cycles per worker (call, pointer setup, loop prologue), then cycles per 64-bit vector of floats (2 x f32,
// bf16 computed as f32, or 4 x f16) or per element of an integer type (the scalar pipeline). Where `per_element`,
// the float figures are per element (software routines) and count once per lane of a vector. `flops`: floating-point
// operations per element for the FLOP count (XLA's convention: one per arithmetic op; data movement and bit
// operations none). Each figure's source is at its definition in registry.cc ("doc": docs/ipu-model.md, else
// calibrated).
// `i64` and `f64`: cycles per element of the emulated 64-bit types (dtype.h), the instruction sequences a worker
// runs: i64/u64 as pairs of 32-bit words (carries, cross-word shifts, 16-bit partial products), f64 as soft-float
// routines on the integer pipeline (registry.cc kSoft*). 0: the op has no 64-bit form.
struct ElementCost {
  uint16_t fixed = 17;
  float f32 = 3, f16 = 3, integer = 4;
  bool per_element = false;
  float flops = 1;
  float i64 = 0, f64 = 0;
};
// `c` with its 64-bit figures.
constexpr ElementCost wide64(ElementCost c, float i64, float f64) {
  c.i64 = i64;
  c.f64 = f64;
  return c;
}

// The f32 vector ops of one kind that one c64 element costs (Poplar's pair arithmetic: each runs as its own f32
// vector loop over the elements; complex.cc charges them and counts their flops). A c128 element costs the same
// ops in emulated f64.
struct F32OpCount {
  OpKind kind;
  int count;
};
struct C64Cost {
  static constexpr int kMax = 7;
  F32OpCount ops[kMax] = {};
  int n = 0;
  constexpr C64Cost(std::initializer_list<F32OpCount> list) {
    for (const F32OpCount& c : list) ops[n++] = c;
  }
  const F32OpCount* begin() const { return ops; }
  const F32OpCount* end() const { return ops + n; }
  size_t size() const { return static_cast<size_t>(n); }
};

struct OpInfo {
  const char* name;  // without dialect prefix
  OpKind kind;
  OpFamily family;
  unsigned dtypes;  // bitmask of dtypeBit()
  TypeRole role;
  int min_operands;
  int max_operands;  // -1: any number
  OpHandler lower;   // how the emulator lowers it (ipu/handlers.h)
  ElementCost cost = {};  // its vertex's cycle estimate, for the elementwise families (and a scalar body's op)
  C64Cost c64 = {{OpKind::Convert, 2}};  // on c64: its f32 ops per element (moves of parts by default)
};

// A binary op that, as the whole body of a reduce, reduce_window, all_reduce, reduce_scatter or scatter, runs as that
// op's native kernel (the front end names it in the op's "computation" attribute; kernels instantiate combiners for
// these alone: scalar::visitBinary<true>).
constexpr bool isReducerKind(OpKind kind) {
  return kind == OpKind::Add || kind == OpKind::Multiply || kind == OpKind::Maximum || kind == OpKind::Minimum ||
         kind == OpKind::And || kind == OpKind::Or;
}

// The families whose ops compute each result element from the operands' elements at that index: what XLA fuses
// into one loop and the emulator into one vertex (fusion.h), and what a reduce body or sort comparator may compute
// (scalar_program.h). The front end reads this from the registry (registryJson's "elementwise").
constexpr bool isElementwiseFamily(OpFamily family) {
  return family == OpFamily::Unary || family == OpFamily::Binary || family == OpFamily::Compare ||
         family == OpFamily::Select || family == OpFamily::Clamp || family == OpFamily::Convert;
}

// An op that only computes its results: one whose results nothing reads may be removed, as XLA's dead-code
// elimination removes it (the front end's dead_code pass reads this as "pure"). Calls, loops and conditionals (a body
// may do host I/O), host I/O and collectives (the host or another replica waits for them) stay, and so do random
// numbers (each rng advances the generator's state, as XLA's side-effecting rng does) and an optimization_barrier,
// which exists to be kept.
constexpr bool isPure(const OpInfo& info) {
  return info.family != OpFamily::Control && info.family != OpFamily::HostIO && info.family != OpFamily::Collective &&
         info.family != OpFamily::Random && info.kind != OpKind::OptimizationBarrier;
}

const OpInfo* findOp(const std::string& name);
const OpInfo& opInfo(OpKind kind);
std::vector<const OpInfo*> allOps();  // every row, in the table's order
std::string dtypeList(unsigned mask);  // "f16, f32"
const char* familyName(OpFamily family);  // "unary"
bool isReducer(const std::string& computation);  // a native reduce/scatter computation ("add", ...)
// The registry as JSON for the compiler front end (JaxIpu_OpRegistry): {"ops": [{"name", "family", "dtypes",
// "min_operands", "max_operands", "reducer", "elementwise", "pure"}...], "element_types": [{"name", "mlir", "bytes",
// "float", "int", "signed"}...] (kDTypeTable without the token), "host": {...}, "xla_cpu": {"tree_window"}}. The
// front end keeps no op list, no element type table and none of the reduce tree's geometry of its own.
std::string registryJson();

// "stablehlo.cosine(tensor<4xi32>) -> tensor<4xi32>" given the operand declarations.
std::string opSignature(const Op& op, const std::vector<const ValueDecl*>& operands);

}  // namespace ipu
