// Elementwise ops (unary, binary, compare, select, clamp, convert): one compute set over the result's tile
// mapping, which clones the main operand's, so that same-shaped operands need no exchange. The per-element
// semantics live in ipu/scalar_ops.h, shared with the reduce kernels and the reduce-body interpreter.
//
// A chain of them (ipu/fusion.h) is one compute set running one fused vertex, as popops::map does with an
// expression tree: see lowerElementwiseGroup for what that saves on the IPU. A lone op is a group of one.
#include "ipu/elementwise.h"

#include <cmath>
#include <functional>
#include <limits>
#include <tuple>
#include <unordered_map>

#include "elementwise_blocks.h"
#include "ipu/cost_model.h"
#include "ipu/cpu_features.h"
#include "ipu/dtype.h"
#include "ipu/handlers.h"
#include "ipu/kernels.h"
#include "ipu/lowering.h"
#include "ipu/scalar_ops.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

namespace ipu {

namespace {

enum class Fused { MulAdd, MulSub, NegMulAdd };  // a * b + c, a * b - c, c - a * b with one rounding

template <Fused F>
inline float fusedScalar(float a, float b, float c) {
  if constexpr (F == Fused::MulAdd) return std::fma(a, b, c);
  else if constexpr (F == Fused::MulSub) return std::fma(a, b, -c);
  else return std::fma(-a, b, c);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// a * b + c, a * b - c and c - a * b with one rounding (the fused vertex's contracted multiply-adds, below), with
// the FMA instructions.
template <Fused F>
__attribute__((target("avx2,fma"))) void fmaBlockFma(const void* const* args, void* out, int64_t n) {
  const float* __restrict a = static_cast<const float*>(args[0]);
  const float* __restrict b = static_cast<const float*>(args[1]);
  const float* __restrict c = static_cast<const float*>(args[2]);
  float* __restrict o = static_cast<float*>(out);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(a + i), y = _mm256_loadu_ps(b + i), z = _mm256_loadu_ps(c + i);
    __m256 r;
    if constexpr (F == Fused::MulAdd) r = _mm256_fmadd_ps(x, y, z);
    else if constexpr (F == Fused::MulSub) r = _mm256_fmsub_ps(x, y, z);
    else r = _mm256_fnmadd_ps(x, y, z);
    _mm256_storeu_ps(o + i, r);
  }
  for (; i < n; ++i) o[i] = fusedScalar<F>(a[i], b[i], c[i]);
}

#endif

template <Fused F>
void fmaBlockPortable(const void* const* args, void* out, int64_t n) {
  const float* a = static_cast<const float*>(args[0]);
  const float* b = static_cast<const float*>(args[1]);
  const float* c = static_cast<const float*>(args[2]);
  float* o = static_cast<float*>(out);
  for (int64_t i = 0; i < n; ++i) o[i] = fusedScalar<F>(a[i], b[i], c[i]);
}

// erf_inv(x) + c, erf_inv(x) - c and c - erf_inv(x) with erf_inv's last product (p(w) * x) contracted into the add,
// as jaxlib 0.4.13's XLA:CPU fused loop computes them (lax.erf_inv(x) + 3.0 is an ulp from the rounded sum on 3% of
// inputs, bit for bit this; fuzz seed 20271601 #25). Not jaxlib 0.12's (its erf_inv + c differs from the ipu's on
// 5% of inputs with or without this: open). Denormals are read and written as the unfused ops do.
template <Fused F>
inline float erfInvFused(float x, float c) {
  const float v = xla_math::ftz_(x);
  if (std::fabs(v) == 1.0f) {
    const float e = v * std::numeric_limits<float>::infinity();
    return F == Fused::MulAdd ? e + c : F == Fused::MulSub ? e - c : c - e;
  }
  return xla_math::ftz_(fusedScalar<F>(scalar::erfInvPolynomial(v), v, xla_math::ftz_(c)));
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
template <Fused F>
__attribute__((target("avx2,fma"))) void erfInvFmaBlockFma(const void* const* args, void* out, int64_t n) {
  const float* x = static_cast<const float*>(args[0]);
  const float* c = static_cast<const float*>(args[1]);
  float* o = static_cast<float*>(out);
  for (int64_t i = 0; i < n; ++i) o[i] = erfInvFused<F>(x[i], c[i]);
}
#endif

template <Fused F>
void erfInvFmaBlockPortable(const void* const* args, void* out, int64_t n) {
  const float* x = static_cast<const float*>(args[0]);
  const float* c = static_cast<const float*>(args[1]);
  float* o = static_cast<float*>(out);
  for (int64_t i = 0; i < n; ++i) o[i] = erfInvFused<F>(x[i], c[i]);
}

template <Fused F>
BlockFn erfInvFmaBlock() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (hostHasAvx2() && hostHasFma()) return &erfInvFmaBlockFma<F>;
#endif
  return &erfInvFmaBlockPortable<F>;
}

// The block function of a contracted multiply-add: vectorised where the host has FMA, std::fma (exact, in
// software where the host lacks it) elsewhere: the same bits either way.
template <Fused F>
BlockFn fmaBlock() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (hostHasAvx2() && hostHasFma()) return &fmaBlockFma<F>;
#endif
  return &fmaBlockPortable<F>;
}

// Which product of an f32 sum XLA:CPU contracts into a fused multiply-add (llvmContraction, measured per series by
// tests/conformance/test_fusion.py's sums of products of growing depth): LLVM's Reassociate gives each value of the
// fused loop a rank, and orders an add's two operands lowest rank first (a subtract stays as written); its DAG
// combiner then contracts the first operand if it is a product read once, else the second. A load's rank is its
// place among the loop body's loads, in the order XLA's emitter first reads each operand (depth first from the
// root, left to right); a constant's is 0; an op's is its operands' highest plus the instructions XLA writes for it
// on its longest path (a negation counts none), or, for a function XLA calls rather than writes inline, its own
// place among the loads.
struct LlvmRank {
  int depth = 1;
  bool called = false;
};
LlvmRank llvmRank(OpKind kind, Numerics n, DType to) {
  const bool v04 = n == Numerics::Jaxlib04;
  switch (kind) {
    case OpKind::Negate: return {0};
    case OpKind::Tanh:
    case OpKind::Atan: return {0, true};
    case OpKind::Atan2: return v04 ? LlvmRank{0, true} : LlvmRank{1};
    case OpKind::Asin: return v04 ? LlvmRank{0, true} : LlvmRank{8};
    case OpKind::Rsqrt: return v04 ? LlvmRank{2} : LlvmRank{0, true};
    case OpKind::Cbrt: return v04 ? LlvmRank{3} : LlvmRank{0, true};
    case OpKind::Log1p: return v04 ? LlvmRank{19} : LlvmRank{0, true};
    case OpKind::Tan: return {v04 ? 2 : 1};
    case OpKind::Logistic: return {3};
    case OpKind::Expm1: return {4};
    case OpKind::Erf: return {14};
    case OpKind::Erfc: return {v04 ? 24 : 27};
    case OpKind::ErfInv: return {22};
    case OpKind::Sign: return {v04 ? 4 : 7};
    case OpKind::Sinh: return {v04 ? 9 : 3};
    case OpKind::Cosh: return {3};
    case OpKind::Asinh: return {v04 ? 29 : 5};
    case OpKind::Acosh: return {4};
    case OpKind::Acos: return {8};
    case OpKind::Maximum:
    case OpKind::Minimum: return {v04 ? 3 : 1};
    case OpKind::Convert: return {to == DType::BF16 ? (v04 ? 7 : 3) : 1};  // XLA rounds to bf16 with integer ops
    default: return {1};
  }
}

// A function whose last instruction is a product by a power of two (e^a * 2^n; asinh's sign(x) * |asinh(x)|): as
// the first operand of a sum, that product is the one contracted, which rounds as the sum of its result does.
bool endsInExactProduct(OpKind kind) { return kind == OpKind::Exp || kind == OpKind::Asinh; }

}  // namespace

BlockFn elementwiseBlock(const OpInfo& info, DType operand, DType result, Numerics numerics,
                         const ElementwiseSpec& spec) {
  switch (info.family) {
    case OpFamily::Unary: return elementwise_blocks::unary(info.kind, operand, numerics);
    case OpFamily::Binary: return elementwise_blocks::binary(info.kind, operand, numerics, spec.constant);
    case OpFamily::Compare: return elementwise_blocks::compare(spec.direction, spec.compare_type, operand);
    case OpFamily::Select: return elementwise_blocks::select(operand);
    case OpFamily::Clamp: return elementwise_blocks::clamp(operand, numerics);
    case OpFamily::Convert: return elementwise_blocks::convert(operand, result);
    default: return nullptr;
  }
}

namespace {

// One elementwise op, checked, as an instruction of the fused vertex.
struct Member {
  BlockFn fn = nullptr;
  BlockFn splat[2] = {nullptr, nullptr};  // a binary op of f32 with operand j one element (FusedMapKernel::Instr)
  size_t main = 0;           // the operand whose type (and tile mapping) the op follows
  DType dt = DType::F32;     // the main operand's element type
  std::vector<bool> scalar;  // operand i is rank 0 and broadcast (select's predicate, clamp's bounds)
  std::string codelet;
  double weight = 1;         // host work per element, relative to an add
};

Member describe(const Lowerer& lowerer, const OpContext& ctx) {
  const OpKind kind = ctx.info->kind;
  const OpFamily family = ctx.info->family;
  if (ctx.out_types.size() != 1) lowerer.invalid(ctx, "expected one result");
  const TensorType& out = ctx.out_types[0];
  Member m;
  m.main = (family == OpFamily::Select || family == OpFamily::Clamp) ? 1 : 0;
  const DType dt = m.dt = ctx.in_types[m.main].dtype;
  // Shapes: every operand has the result's shape, except that select's predicate and clamp's bounds may be scalars.
  m.scalar.assign(ctx.in.size(), false);
  for (size_t i = 0; i < ctx.in.size(); ++i) {
    const bool may_be_scalar = (family == OpFamily::Select && i == 0) || (family == OpFamily::Clamp && i != 1);
    if (may_be_scalar && ctx.in_types[i].shape.empty()) {
      m.scalar[i] = true;
      continue;
    }
    if (ctx.in_types[i].shape != out.shape)
      lowerer.invalid(ctx, "operand " + std::to_string(i) + " does not have the result's shape");
  }
  // Element types.
  DType expected_out = dt;
  if (family == OpFamily::Compare || kind == OpKind::IsFinite) expected_out = DType::Bool;
  if (family == OpFamily::Convert) expected_out = out.dtype;
  if (out.dtype != expected_out)
    lowerer.invalid(ctx, "the result's element type should be " + std::string(dtypeName(expected_out)));
  for (size_t i = 0; i < ctx.in.size(); ++i) {
    const DType want = (family == OpFamily::Select && i == 0) ? DType::Bool : dt;
    if (family != OpFamily::Convert && ctx.in_types[i].dtype != want)
      lowerer.invalid(ctx, "operand " + std::to_string(i) + " should have element type " + dtypeName(want));
  }

  m.codelet = std::string(ctx.info->name) + "<" + dtypeName(dt) + ">";
  ElementwiseSpec spec;
  if (family == OpFamily::Binary) {
    const std::string which = attrString(*ctx.op, "constant_operand", "");
    if (!scalar::parseConstantOperand(which, &spec.constant))
      lowerer.invalid(ctx, "unknown constant_operand '" + which + "' (expected \"lhs\" or \"rhs\")");
  } else if (family == OpFamily::Compare) {
    const std::string dir = attrString(*ctx.op, "comparison_direction");
    if (!scalar::parseDirection(dir, &spec.direction))
      lowerer.invalid(ctx, "unknown comparison_direction '" + dir + "'");
    spec.compare_type = attrString(*ctx.op, "compare_type", "NOTYPE");
    m.codelet = "compare" + dir + "<" + dtypeName(dt) + ">";
  } else if (family == OpFamily::Convert) {
    m.codelet = std::string("cast<") + dtypeName(dt) + "," + dtypeName(out.dtype) + ">";
  }
  m.fn = elementwiseBlock(*ctx.info, dt, out.dtype, lowerer.numerics(), spec);
  if (family == OpFamily::Binary)
    for (int j = 0; j < 2; ++j)
      m.splat[j] = elementwise_blocks::binarySplat(kind, dt, lowerer.numerics(), spec.constant, j);
  if (!m.fn)
    lowerer.unimplemented(ctx, std::string(ctx.info->name) + " is implemented for " + dtypeList(ctx.info->dtypes));
  const bool heavy = family == OpFamily::Unary && isFloat(dt) && kind != OpKind::Abs && kind != OpKind::Negate;
  m.weight = heavy ? 8 : 1;
  return m;
}

}  // namespace

std::vector<int> lowerElementwise(Lowerer& lowerer, OpContext& ctx) {
  std::vector<OpContext> group{ctx};
  return {lowerer.lowerElementwiseGroup(group)};
}

// Cycles of the fused vertex, and what fusion saves on the IPU. Each op on its own is a compute set: a sync, the
// supervisor launching the workers of its vertex (kSupervisorCycles), each worker's fixed setup and its per-vector
// loop; its result is a full tensor in tile memory. The fused vertex (popops::map with an expression) is launched
// once and keeps intermediates in registers: it costs the sum of the members' elementwise() cycles (fixed setup and
// per-vector ALU work, including the loads and stores the estimators count) minus the supervisor launch of all
// but one, in one superstep: one sync. A broadcast_in_dim is a view in Poplar (no compute set): the elements of
// its operand that a tile reads are exchanged to it as an operand of the vertex (a scalar: its one element). Memory: no
// intermediate tensors, one vertex per tile instead of one per op, and the exchange receive buffers of the external
// operands only.
int Lowerer::lowerElementwiseGroup(std::vector<OpContext>& members) {
  OpContext& root = members.back();
  struct Value {
    int input = -1;  // an input of the vertex, or
    int instr = -1;  // the result of an instruction
    int model = -1;  // the slot whose tile mapping the value follows (-1: linear)
  };
  std::unordered_map<int64_t, Value> values;  // intermediate result id -> where it is
  std::vector<FusedMapKernel::Input> inputs;
  std::vector<FusedMapKernel::Instr> instrs;
  std::vector<std::pair<int, int>> args;       // per instruction operand: (input, instr), one of them -1
  std::vector<std::pair<int, bool>> reads;     // external operands as read, for the exchange
  std::vector<int> external;
  std::vector<std::tuple<int, std::vector<int64_t>, std::vector<int64_t>>> gathers;  // broadcast views read
  std::vector<std::pair<OpKind, DType>> costs;
  std::vector<bool> as_written;  // per instruction: an add LLVM leaves in the order written (llvmRank)
  std::vector<DType> result_types;
  std::string codelet, names;
  double flops = 0, weight = 0;
  auto addInput = [&](int slot, bool scalar) {
    reads.emplace_back(slot, scalar);
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].slot == slot && inputs[i].scalar == scalar && inputs[i].strides.empty()) return static_cast<int>(i);
    const Slot& s = graph().slots[static_cast<size_t>(slot)];
    inputs.push_back({slot, static_cast<int>(dtypeSize(s.type.dtype)), scalar, {}, {}});
    if (std::find(external.begin(), external.end(), slot) == external.end()) external.push_back(slot);
    return static_cast<int>(inputs.size() - 1);
  };
  int model = -1;
  for (OpContext& ctx : members) {
    names += (names.empty() ? "" : ", ") + ctx.op->mlir;
    const int64_t id = ctx.op->results[0].id;
    if (ctx.info->kind == OpKind::BroadcastInDim) {  // a view of its operand, read by the vertex
      const TensorType &in = ctx.in_types[0], &out = ctx.out_types[0];
      if (in.dtype != out.dtype || ctx.in[0] < 0) invalid(ctx, "the result's element type differs from the operand's");
      if (in.shape.empty()) {
        values[id] = Value{addInput(ctx.in[0], true), -1, -1};
        continue;
      }
      const std::vector<int64_t> dims = attrInts(*ctx.op, "broadcast_dimensions");
      if (dims.size() != in.shape.size())
        invalid(ctx, "broadcast_dimensions must name one result dimension per operand dimension");
      std::vector<int64_t> strides(out.shape.size(), 0);
      int64_t stride = 1;
      for (size_t i = dims.size(); i-- > 0;) {
        const int64_t d = dims[i];
        if (d < 0 || d >= static_cast<int64_t>(out.shape.size()) || strides[static_cast<size_t>(d)] != 0 ||
            (in.shape[i] != 1 && in.shape[i] != out.shape[static_cast<size_t>(d)]))
          invalid(ctx, "broadcast_dimensions are out of range, repeated, or name a dimension of another size");
        if (in.shape[i] != 1) strides[static_cast<size_t>(d)] = stride;
        stride *= in.shape[i];
      }
      inputs.push_back({ctx.in[0], static_cast<int>(dtypeSize(in.dtype)), false, out.shape, strides});
      if (std::find(external.begin(), external.end(), ctx.in[0]) == external.end()) external.push_back(ctx.in[0]);
      gathers.emplace_back(ctx.in[0], out.shape, strides);
      values[id] = Value{static_cast<int>(inputs.size() - 1), -1, -1};
      continue;
    }
    const Member m = describe(*this, ctx);
    FusedMapKernel::Instr ins{
        m.fn, {-1, -1, -1}, static_cast<int>(dtypeSize(ctx.out_types[0].dtype)), {m.splat[0], m.splat[1]}};
    int own_model = -1;
    for (size_t j = 0; j < ctx.in.size(); ++j) {
      int mdl;
      if (ctx.in[j] >= 0) {
        args.emplace_back(addInput(ctx.in[j], m.scalar[j]), -1);
        mdl = ctx.in[j];
      } else {
        const Value& v = values.at(ctx.op->operands[j]);
        args.emplace_back(v.input, v.instr);
        mdl = v.model;
      }
      ins.args[j] = static_cast<int>(args.size() - 1);  // fixed up below
      if (j == m.main) own_model = mdl;
    }
    values[id] = Value{-1, static_cast<int>(instrs.size()), own_model};
    model = own_model;
    instrs.push_back(ins);
    as_written.push_back(attrString(*ctx.op, "operand_order", "") == "as_written");
    result_types.push_back(ctx.out_types[0].dtype);
    costs.emplace_back(ctx.info->kind, m.dt);
    codelet += (codelet.empty() ? "" : ",") + m.codelet;
    weight += m.weight;
    if (isFloat(m.dt))
      flops += cost::flopsPerElement(ctx.info->kind) * static_cast<double>(ctx.out_types[0].numElements());
  }
  if (instrs.empty() || values.at(root.op->results[0].id).instr != static_cast<int>(instrs.size() - 1))
    invalid(root, "a fused group must end with an elementwise op");
  // Contract f32 products into the adds and subtracts that read them, as XLA:CPU's fused loops do on a host with FMA
  // (llvmContraction): the results then round as cpu's do. Host arithmetic only: the members' cycles (costs) and
  // memory are unchanged.
  const size_t computed = instrs.size();  // the members the IPU computes, whatever the host contracts
  std::vector<int> uses(instrs.size(), 0);
  for (const auto& ins : instrs)
    for (int a : ins.args)
      if (a >= 0 && args[static_cast<size_t>(a)].second >= 0)
        ++uses[static_cast<size_t>(args[static_cast<size_t>(a)].second)];
  // Ranks (llvmRank): of the instructions, then of the inputs; -1 until visited. A value another elementwise vertex
  // wrote is computed inside XLA's loop, from loads this vertex does not see: its rank, and the rank of what reads
  // it, are unknown, and a sum of it stays in the order written.
  constexpr int64_t kUnknown = int64_t{1} << 40;
  std::vector<int64_t> rank(instrs.size() + inputs.size(), -1);
  int64_t place = 0;  // loads and calls so far, in XLA's emission order
  const size_t n = instrs.size();
  auto valueOf = [&](int arg) {  // an instruction's index, or n + an input's
    const auto& r = args[static_cast<size_t>(arg)];
    return r.second >= 0 ? static_cast<size_t>(r.second) : n + static_cast<size_t>(r.first);
  };
  auto isConstant = [&](size_t v) {
    return v >= n && graph().slots[static_cast<size_t>(inputs[v - n].slot)].storage == Slot::Storage::Constant;
  };
  auto called = [&](size_t k) { return llvmRank(costs[k].first, numerics(), result_types[k]).called; };
  std::vector<int64_t> placed(n + inputs.size(), -1);  // a load's or a call's place, where the emitter is known
  // jaxlib 0.12's XLA:CPU writes a loop of arithmetic on arrays of the result's shape as jaxlib 0.4.13's does, in
  // the fused computation's order (depth first from the root), but one with a constant, a broadcast or other move,
  // or a compare or select with its loop emitter, which lists an op's operands breadth first from it (each
  // operand's operands last to first), then writes the list backwards: an operand it has not written yet is
  // written where an op first needs it.
  bool loop_emitter = false;
  if (numerics() == Numerics::Jaxlib012) {
    for (size_t i = 0; i < inputs.size(); ++i)
      loop_emitter |= isConstant(n + i) || inputs[i].scalar || !inputs[i].strides.empty();
    for (const auto& c : costs)
      loop_emitter |= c.first == OpKind::Compare || c.first == OpKind::Select || c.first == OpKind::Clamp;
  }
  if (loop_emitter) {
    std::vector<char> written(n + inputs.size(), 0);
    std::function<void(size_t)> write = [&](size_t v) {
      if (written[v]) return;
      if (v >= n) {
        written[v] = 1;
        if (!isConstant(v)) placed[v] = ++place;
        return;
      }
      std::vector<size_t> listed{v};
      std::vector<char> seen(n + inputs.size(), 0);
      seen[v] = 1;
      for (size_t i = 0; i < listed.size(); ++i) {
        if (listed[i] >= n) continue;
        const auto& a = instrs[listed[i]].args;
        for (int j = 2; j >= 0; --j)
          if (a[j] >= 0 && !written[valueOf(a[j])] && !seen[valueOf(a[j])]) {
            seen[valueOf(a[j])] = 1;
            listed.push_back(valueOf(a[j]));
          }
      }
      for (size_t i = listed.size(); i-- > 0;) {
        const size_t x = listed[i];
        if (written[x] || x >= n) {
          write(x);
          continue;
        }
        for (int a : instrs[x].args)
          if (a >= 0) write(valueOf(a));
        written[x] = 1;
        if (called(x)) placed[x] = ++place;
      }
    };
    write(n - 1);
  }
  std::function<int64_t(int)> rankOf = [&](int arg) -> int64_t {
    const size_t v = valueOf(arg);
    int64_t& known = rank[v];
    if (known >= 0) return known;
    if (v >= n) {
      if (elementwise_results_.count(inputs[v - n].slot)) return known = kUnknown;
      return known = isConstant(v) ? 0 : placed[v] >= 0 ? placed[v] : ++place;
    }
    int64_t highest = 0;
    for (int a : instrs[v].args)
      if (a >= 0) highest = std::max(highest, rankOf(a));
    const LlvmRank how = llvmRank(costs[v].first, numerics(), result_types[v]);
    return known = highest >= kUnknown ? kUnknown
                   : how.called        ? (placed[v] >= 0 ? placed[v] : ++place)
                                       : highest + how.depth;
  };
  for (int a : instrs.back().args)  // jaxlib 0.4.13's emitter asks the root for its value, depth first
    if (a >= 0) rankOf(a);
  std::vector<bool> contracted(instrs.size(), false);
  // Each member's uses for LLVM, whose CSE has made the products of the same two operands (a * b, b * a) one value:
  // a product read more than once is not contracted.
  std::vector<int> llvm_uses(uses);
  auto operands = [&](size_t i) {
    const auto a = args[static_cast<size_t>(instrs[i].args[0])], b = args[static_cast<size_t>(instrs[i].args[1])];
    return a < b ? std::make_pair(a, b) : std::make_pair(b, a);
  };
  for (size_t j = 0; j < n; ++j)
    if (costs[j].first == OpKind::Multiply)
      for (size_t i = 0; i < n; ++i)
        if (i != j && costs[i] == costs[j] && operands(i) == operands(j)) llvm_uses[j] += uses[i];
  auto isProductReadOnce = [&](int arg) {
    const int j = args[static_cast<size_t>(arg)].second;
    return j >= 0 && !contracted[static_cast<size_t>(j)] && llvm_uses[static_cast<size_t>(j)] == 1 &&
           costs[static_cast<size_t>(j)] == std::make_pair(OpKind::Multiply, DType::F32);
  };
  for (size_t k = 0; k < instrs.size(); ++k) {
    const OpKind kind = costs[k].first;
    if (costs[k].second != DType::F32 || (kind != OpKind::Add && kind != OpKind::Subtract)) continue;
    // LLVM's Reassociate orders an add's operands by rank, lowest first, unless InstCombine wrote it as it is
    // (as_written: a subtract of a negated product, cpu_loops.product_after_negated_product); its DAG combiner then
    // contracts the first operand if it is a product read once, else the second.
    int order[2] = {0, 1};
    const int64_t first = rankOf(instrs[k].args[0]), second = rankOf(instrs[k].args[1]);
    if (kind == OpKind::Add && !as_written[k] && first < kUnknown && second < first) std::swap(order[0], order[1]);
    for (int side : order) {
      const int j = args[static_cast<size_t>(instrs[k].args[side])].second;
      if (j < 0 || contracted[static_cast<size_t>(j)] || llvm_uses[static_cast<size_t>(j)] != 1 ||
          costs[static_cast<size_t>(j)].second != DType::F32)
        continue;
      const OpKind product = costs[static_cast<size_t>(j)].first;
      const int other = instrs[k].args[1 - side];
      if (product == OpKind::Multiply) {
        instrs[k].fn = kind == OpKind::Add ? fmaBlock<Fused::MulAdd>()
                       : side == 0         ? fmaBlock<Fused::MulSub>()      // a * b - c
                                           : fmaBlock<Fused::NegMulAdd>();  // c - a * b
        instrs[k].args[0] = instrs[static_cast<size_t>(j)].args[0];
        instrs[k].args[1] = instrs[static_cast<size_t>(j)].args[1];
        instrs[k].args[2] = other;
        instrs[k].splat[0] = instrs[k].splat[1] = nullptr;  // the add's own forms
      } else if (product == OpKind::ErfInv && numerics() == Numerics::Jaxlib04 && !isProductReadOnce(other)) {
        // Its last product, x * p(w), is read more than once in LLVM's graph, and of two products the combiner
        // contracts the one with fewer uses: erf_inv's only where the other operand is no product.
        instrs[k].fn = kind == OpKind::Add ? erfInvFmaBlock<Fused::MulAdd>()
                       : side == 0         ? erfInvFmaBlock<Fused::MulSub>()
                                           : erfInvFmaBlock<Fused::NegMulAdd>();
        instrs[k].args[0] = instrs[static_cast<size_t>(j)].args[0];
        instrs[k].args[1] = other;
        instrs[k].args[2] = -1;
        instrs[k].splat[0] = instrs[k].splat[1] = nullptr;
      } else if (endsInExactProduct(product)) {
        break;  // its last product by a power of two is contracted, which rounds as the sum of its result does
      } else {
        continue;
      }
      contracted[static_cast<size_t>(j)] = true;
      break;
    }
  }
  std::vector<int> renumbered(instrs.size(), -1);  // instructions left, in order
  {
    std::vector<FusedMapKernel::Instr> kept;
    for (size_t k = 0; k < instrs.size(); ++k)
      if (!contracted[k]) {
        renumbered[k] = static_cast<int>(kept.size());
        kept.push_back(instrs[k]);
      }
    instrs = std::move(kept);
  }
  for (auto& ins : instrs)
    for (int& a : ins.args)
      if (a >= 0) {
        const auto& r = args[static_cast<size_t>(a)];
        a = r.first >= 0 ? r.first : static_cast<int>(inputs.size()) + renumbered[static_cast<size_t>(r.second)];
      }
  if (computed > 1) codelet = "map{" + codelet + "}";

  const TensorType& out = root.out_types[0];
  const int o = model < 0 ? newSlot(out) : newSlotLike(out, model);
  const TileMapping work = graph().slots[static_cast<size_t>(o)].mapping;
  std::vector<int64_t> recv;
  for (const auto& r : reads) {
    if (r.second && out.numElements() > 0) exchangeScalar(&recv, work, r.first);
    else if (!r.second) exchangeSameIndex(&recv, work, r.first);
  }
  for (const auto& g : gathers)  // counted per tile interval and row (closed form), as a broadcast's own exchange is
    exchangeStrided(&recv, work, std::get<0>(g), std::get<1>(g), std::get<2>(g), 0);
  std::vector<Superstep> steps;
  const int workers = device().num_worker_contexts;
  if (work.num_elements > 0) {
    const uint64_t launches_saved = static_cast<uint64_t>(computed - 1) * cost::kSupervisorCycles;
    steps.push_back(superstep(codelet, work, recv, [&](int, int64_t n) {
      uint64_t c = 0;
      for (const auto& k : costs) c += cost::elementwise(k.first, k.second, n, workers);
      return c - launches_saved;
    }));
    steps.back().cost_weight = weight;
  }
  const int out_slot = o;
  // Operands read at the result's own index only (not as a scalar or a broadcast view, unless the result is one
  // element): the vertex computes the result correctly over them (Node::same_index).
  std::vector<std::pair<int, int>> same_index;
  const bool one = graph().slots[static_cast<size_t>(o)].type.numElements() == 1;
  for (int slot : external) {
    bool elementwise = true;
    for (const FusedMapKernel::Input& in : inputs)
      if (in.slot == slot && (in.scalar || !in.strides.empty()) && !one) elementwise = false;
    if (elementwise) same_index.emplace_back(slot, o);
  }
  // The operand whose tile memory the result takes when this step is its last read (Node::overwrites), as
  // Graphcore's XLA backend marks elementwise ops in place: a lone op's first operand, unless it is read twice or the
  // op is a select or clamp (not in place there); a fused group's first operand that it reads elementwise and that
  // has the result's type and tile mapping, as a lone op's must (computeMemory checks the rest).
  std::pair<int, int> overwrites{-1, -1};
  const OpContext* lone = computed == 1 ? &members.back() : nullptr;
  for (const auto& p : same_index) {
    const Slot &in = graph().slots[static_cast<size_t>(p.first)], &res = graph().slots[static_cast<size_t>(o)];
    if (lone && (p.first != lone->in[0] || std::count(lone->in.begin(), lone->in.end(), p.first) > 1 ||
                 lone->info->kind == OpKind::Select || lone->info->kind == OpKind::Clamp))
      break;
    if (in.type.dtype == res.type.dtype && in.mapping.sameAs(res.mapping)) {
      overwrites = p;
      break;
    }
    if (lone) break;
  }
  auto kernel = std::make_unique<FusedMapKernel>(std::move(inputs), std::move(instrs), out_slot);
  OpContext call = root;
  call.in = external;
  Node* node = emitExecute(call, std::move(kernel), std::move(steps), {o}, flops);
  node->same_index = std::move(same_index);
  node->overwrites = overwrites;
  if (members.size() > 1) node->name = "fused(" + names + ")";
  elementwise_results_.insert(o);
  return o;
}

}  // namespace ipu
