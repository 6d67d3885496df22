// Elementwise ops (unary, binary, compare, select, clamp, convert): one compute set over the result's tile
// mapping, which clones the main operand's, so that same-shaped operands need no exchange. The per-element
// semantics live in ipu/scalar_ops.h, shared with the reduce kernels and the reduce-body interpreter.
//
// A chain of them (ipu/fusion.h) is one compute set running one fused vertex, as popops::map does with an
// expression tree: see lowerElementwiseGroup for what that saves on the IPU. A lone op is a group of one.
#include <cmath>
#include <tuple>
#include <unordered_map>

#include "ipu/cost_model.h"
#include "ipu/cpu_features.h"
#include "ipu/dtype.h"
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
// ---- XLA:CPU's f32 exp, log, tanh and logistic (ipu/xla_math.h) on whole AVX2 vectors ----
// The same functions on 8 lanes with AVX2 intrinsics, operation for operation (separate multiplies and adds, no FMA),
// so every lane gives the scalar version's bits. The compilers vectorise the scalar code too, but build each select
// from a compare, two masks and an or; vminps/vmaxps/vblendvps do each in one instruction. For fmin_(a, b) =
// b < a ? b : a, vminps(b, a) is exactly that (NaN in a picks a); fmax_(a, b) = a < b ? b : a is vmaxps(b, a).
#define IPU_AVX2 __attribute__((target("avx2"), always_inline)) inline
namespace avx2 {
using namespace xla_math;
IPU_AVX2 __m256 k(float c) { return _mm256_set1_ps(c); }
IPU_AVX2 __m256 mul(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
IPU_AVX2 __m256 add(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
IPU_AVX2 __m256 sub(__m256 a, __m256 b) { return _mm256_sub_ps(a, b); }
IPU_AVX2 __m256 sel(__m256 c, __m256 a, __m256 b) { return _mm256_blendv_ps(b, a, c); }
IPU_AVX2 __m256 fmin_(__m256 a, __m256 b) { return _mm256_min_ps(b, a); }
IPU_AVX2 __m256 fmax_(__m256 a, __m256 b) { return _mm256_max_ps(b, a); }
IPU_AVX2 __m256 isnan_(__m256 x) { return _mm256_cmp_ps(x, x, _CMP_UNORD_Q); }

IPU_AVX2 __m256 exp(__m256 in) {
  const __m256 x0 = fmin_(fmax_(in, k(-87.8f)), k(88.8f));
  const __m256 f = add(mul(x0, k(1.44269504088896341f)), k(0.5f));
  const __m256 t = _mm256_cvtepi32_ps(_mm256_cvttps_epi32(f));  // floor_
  __m256 n = sub(t, _mm256_and_ps(_mm256_cmp_ps(t, f, _CMP_GT_OQ), k(1.0f)));
  n = fmin_(fmax_(n, k(-127.0f)), k(127.0f));
  __m256 x = sub(x0, mul(n, k(0.693359375f)));
  x = sub(x, mul(n, k(-2.12194440e-4f)));
  __m256 z = add(mul(x, k(1.9875691500e-4f)), k(1.3981999507e-3f));
  z = add(mul(z, x), k(8.3334519073e-3f));
  z = add(mul(z, x), k(4.1665795894e-2f));
  z = add(mul(z, x), k(1.6666665459e-1f));
  z = add(mul(z, x), k(5.0000001201e-1f));
  z = add(mul(z, mul(x, x)), x);
  z = add(k(1.0f), z);
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23);
  const __m256 r = mul(z, _mm256_castsi256_ps(e));
  return sel(isnan_(in), in, sel(_mm256_cmp_ps(n, k(-127.0f), _CMP_EQ_OQ), k(0.0f), r));
}

IPU_AVX2 __m256 log(__m256 in) {
  const __m256i bits = _mm256_castps_si256(fmax_(in, k(1.17549435e-38f)));
  __m256 e = add(_mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(0x7f))), k(1.0f));
  const __m256 m = _mm256_castsi256_ps(_mm256_or_si256(_mm256_andnot_si256(_mm256_set1_epi32(0x7f800000), bits),
                                                       _mm256_castps_si256(k(0.5f))));
  const __m256 small = _mm256_cmp_ps(m, k(0.707106781186547524f), _CMP_LT_OQ);
  __m256 x = sub(m, k(1.0f));
  e = sub(e, _mm256_and_ps(small, k(1.0f)));
  x = add(x, _mm256_and_ps(small, m));
  const __m256 x2 = mul(x, x), x3 = mul(x2, x);
  __m256 y = add(mul(x, k(7.0376836292e-2f)), k(-1.1514610310e-1f));
  __m256 y1 = add(mul(x, k(-1.2420140846e-1f)), k(1.4249322787e-1f));
  __m256 y2 = add(mul(x, k(2.0000714765e-1f)), k(-2.4999993993e-1f));
  y = add(mul(y, x), k(1.1676998740e-1f));
  y1 = add(mul(y1, x), k(-1.6668057665e-1f));
  y2 = add(mul(y2, x), k(3.3333331174e-1f));
  y = add(mul(y, x3), y1);
  y = add(mul(y, x3), y2);
  y = mul(y, x3);
  y = add(y, mul(k(-2.12194440e-4f), e));
  x = sub(x, mul(k(0.5f), x2));
  x = add(x, y);
  x = add(x, mul(k(0.693359375f), e));
  const __m256 inf = _mm256_castsi256_ps(_mm256_set1_epi32(0x7f800000));
  const __m256 nan = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000));
  return sel(_mm256_cmp_ps(in, k(0.0f), _CMP_EQ_OQ), _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(0xff800000u))),
             sel(_mm256_cmp_ps(in, inf, _CMP_EQ_OQ), inf, sel(_mm256_cmp_ps(in, k(0.0f), _CMP_NGT_UQ), nan, x)));
}

IPU_AVX2 __m256 tanh(__m256 in) {
  const __m256 x = fmin_(fmax_(in, k(-7.90531110763549805f)), k(7.90531110763549805f));
  const __m256 x2 = mul(x, x);
  __m256 p = add(mul(x2, k(-2.76076847742355e-16f)), k(2.00018790482477e-13f));
  p = add(mul(x2, p), k(-8.60467152213735e-11f));
  p = add(mul(x2, p), k(5.12229709037114e-08f));
  p = add(mul(x2, p), k(1.48572235717979e-05f));
  p = add(mul(x2, p), k(6.37261928875436e-04f));
  p = add(mul(x2, p), k(4.89352455891786e-03f));
  p = mul(x, p);
  __m256 q = add(mul(x2, k(1.19825839466702e-06f)), k(1.18534705686654e-04f));
  q = add(mul(x2, q), k(2.26843463243900e-03f));
  q = add(mul(x2, q), k(4.89352518554385e-03f));
  const __m256 abs = _mm256_and_ps(in, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)));
  return sel(_mm256_or_ps(_mm256_cmp_ps(abs, k(0.0004f), _CMP_LT_OQ), isnan_(in)), in, _mm256_div_ps(p, q));
}

IPU_AVX2 __m256 logistic(__m256 x) {
  const __m256 neg = _mm256_xor_ps(x, k(-0.0f));
  return _mm256_div_ps(k(1.0f), add(k(1.0f), exp(neg)));
}
}  // namespace avx2
#undef IPU_AVX2

// The fused vertex's block function (BlockFn) of each: whole vectors with the AVX2 version, the rest with the
// scalar one (the same bits, so where a block ends never matters).
#define IPU_XLA_MATH_BLOCK(name)                                                                   \
  __attribute__((target("avx2"))) void name##BlockAvx2(const void* const* args, void* out, int64_t n) { \
    const float* __restrict a = static_cast<const float*>(args[0]);                                    \
    float* __restrict o = static_cast<float*>(out);                                                    \
    int64_t i = 0;                                                                                     \
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(o + i, avx2::name(_mm256_loadu_ps(a + i)));           \
    for (; i < n; ++i) o[i] = xla_math::name(a[i]);                                                    \
  }
IPU_XLA_MATH_BLOCK(exp)
IPU_XLA_MATH_BLOCK(log)
IPU_XLA_MATH_BLOCK(tanh)
IPU_XLA_MATH_BLOCK(logistic)
#undef IPU_XLA_MATH_BLOCK

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

// The vector block function of a unary f32 op, or null.
BlockFn xlaMathBlock(OpKind kind) {
  if (!hostHasAvx2()) return nullptr;
  switch (kind) {
    case OpKind::Exp: return &expBlockAvx2;
    case OpKind::Log: return &logBlockAvx2;
    case OpKind::Tanh: return &tanhBlockAvx2;
    case OpKind::Logistic: return &logisticBlockAvx2;
    default: return nullptr;
  }
}
#else
BlockFn xlaMathBlock(OpKind) { return nullptr; }
#endif

template <Fused F>
void fmaBlockPortable(const void* const* args, void* out, int64_t n) {
  const float* a = static_cast<const float*>(args[0]);
  const float* b = static_cast<const float*>(args[1]);
  const float* c = static_cast<const float*>(args[2]);
  float* o = static_cast<float*>(out);
  for (int64_t i = 0; i < n; ++i) o[i] = fusedScalar<F>(a[i], b[i], c[i]);
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

// One elementwise op, checked, as an instruction of the fused vertex.
struct Member {
  BlockFn fn = nullptr;
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
  if (out.dtype != expected_out) lowerer.invalid(ctx, "the result's element type should be " + std::string(dtypeName(expected_out)));
  for (size_t i = 0; i < ctx.in.size(); ++i) {
    const DType want = (family == OpFamily::Select && i == 0) ? DType::Bool : dt;
    if (family != OpFamily::Convert && ctx.in_types[i].dtype != want)
      lowerer.invalid(ctx, "operand " + std::to_string(i) + " should have element type " + dtypeName(want));
  }

  m.codelet = std::string(ctx.info->name) + "<" + dtypeName(dt) + ">";
  switch (family) {
    case OpFamily::Unary:
      scalar::visitUnary(kind, dt, [&](auto f, auto a, auto r) {
        m.fn = &block1<typename decltype(a)::type, typename decltype(r)::type, decltype(f)>;
      });
      if (dt == DType::F32)
        if (BlockFn v = xlaMathBlock(kind)) m.fn = v;
      break;
    case OpFamily::Binary:
      scalar::visitBinary(kind, dt, [&](auto f, auto t) {
        using T = typename decltype(t)::type;
        m.fn = &block2<T, T, T, decltype(f)>;
      });
      break;
    case OpFamily::Compare: {
      scalar::Direction d;
      const std::string dir = attrString(*ctx.op, "comparison_direction");
      if (!scalar::parseDirection(dir, &d)) lowerer.invalid(ctx, "unknown comparison_direction '" + dir + "'");
      const std::string type = attrString(*ctx.op, "compare_type", "NOTYPE");
      scalar::visitCompare(d, type, dt, [&](auto f, auto t) {
        using T = typename decltype(t)::type;
        m.fn = &block2<T, T, uint8_t, decltype(f)>;
      });
      m.codelet = "compare" + dir + "<" + dtypeName(dt) + ">";
      break;
    }
    case OpFamily::Select:
      scalar::visitSelect(dt, [&](auto f, auto t) {
        using T = typename decltype(t)::type;
        m.fn = &block3<uint8_t, T, T, T, decltype(f)>;
      });
      break;
    case OpFamily::Clamp:
      scalar::visitClamp(dt, [&](auto f, auto t) {
        using T = typename decltype(t)::type;
        m.fn = &block3<T, T, T, T, decltype(f)>;
      });
      break;
    case OpFamily::Convert:
      scalar::visitConvert(dt, out.dtype, [&](auto f, auto a, auto r) {
        m.fn = &block1<typename decltype(a)::type, typename decltype(r)::type, decltype(f)>;
      });
      m.codelet = std::string("cast<") + dtypeName(dt) + "," + dtypeName(out.dtype) + ">";
      break;
    default: break;
  }
  if (!m.fn) lowerer.unimplemented(ctx, std::string(ctx.info->name) + " is implemented for " + dtypeList(ctx.info->dtypes));
  const bool heavy = family == OpFamily::Unary && isFloat(dt) && kind != OpKind::Abs && kind != OpKind::Negate;
  m.weight = heavy ? 8 : 1;
  return m;
}

}  // namespace

std::vector<int> Lowerer::lowerElementwise(OpContext& ctx) {
  std::vector<OpContext> group{ctx};
  return {lowerElementwiseGroup(group)};
}

// Cycles of the fused vertex, and what fusion saves on the IPU. Each op on its own is a compute set: a sync, the
// supervisor launching the workers of its vertex (kSupervisorCycles), each worker's fixed setup and its per-vector
// loop; its result is a full tensor in tile memory. The fused vertex (popops::map with an expression) is launched
// once and keeps intermediates in registers: it costs the sum of the members' elementwise() cycles (fixed setup and
// per-vector ALU work, including the loads and stores the estimators count) minus the supervisor launch of all
// but one, in one superstep: one sync. A broadcast_in_dim is a view in Poplar (no compute set): the elements of
// its operand that a tile reads are exchanged to it as an operand of the vertex (a scalar: its one element). Memory: no intermediate tensors, one
// vertex per tile instead of one per op, and the exchange receive buffers of the external operands only.
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
      if (dims.size() != in.shape.size()) invalid(ctx, "broadcast_dimensions must name one result dimension per operand dimension");
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
    FusedMapKernel::Instr ins{m.fn, {-1, -1, -1}, static_cast<int>(dtypeSize(ctx.out_types[0].dtype))};
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
    costs.emplace_back(ctx.info->kind, m.dt);
    codelet += (codelet.empty() ? "" : ",") + m.codelet;
    weight += m.weight;
    if (isFloat(m.dt)) flops += cost::flopsPerElement(ctx.info->kind) * static_cast<double>(ctx.out_types[0].numElements());
  }
  if (instrs.empty() || values.at(root.op->results[0].id).instr != static_cast<int>(instrs.size() - 1))
    invalid(root, "a fused group must end with an elementwise op");
  // Contract each f32 multiply whose one user is an add or subtract of the vertex into one fused multiply-add, as
  // XLA:CPU's fused loops do on a host with FMA (LLVM contracts fmul into fadd/fsub when the product has one use):
  // the results then round as cpu's do. Host arithmetic only: the members' cycles (costs) and memory are unchanged.
  const size_t computed = instrs.size();  // the members the IPU computes, whatever the host contracts
  std::vector<int> uses(instrs.size(), 0);
  for (const auto& ins : instrs)
    for (int a : ins.args)
      if (a >= 0 && args[static_cast<size_t>(a)].second >= 0) ++uses[static_cast<size_t>(args[static_cast<size_t>(a)].second)];
  std::vector<bool> contracted(instrs.size(), false);
  for (size_t k = 0; k < instrs.size(); ++k) {
    const OpKind kind = costs[k].first;
    if (costs[k].second != DType::F32 || (kind != OpKind::Add && kind != OpKind::Subtract)) continue;
    for (int side = 0; side < 2; ++side) {
      const int j = args[static_cast<size_t>(instrs[k].args[side])].second;
      if (j < 0 || contracted[static_cast<size_t>(j)] || uses[static_cast<size_t>(j)] != 1 ||
          costs[static_cast<size_t>(j)].first != OpKind::Multiply || costs[static_cast<size_t>(j)].second != DType::F32)
        continue;
      const int other = instrs[k].args[1 - side];
      instrs[k].fn = kind == OpKind::Add ? fmaBlock<Fused::MulAdd>()
                     : side == 0         ? fmaBlock<Fused::MulSub>()      // a * b - c
                                         : fmaBlock<Fused::NegMulAdd>();  // c - a * b
      instrs[k].args[0] = instrs[static_cast<size_t>(j)].args[0];
      instrs[k].args[1] = instrs[static_cast<size_t>(j)].args[1];
      instrs[k].args[2] = other;
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
  auto kernel = std::make_unique<FusedMapKernel>(std::move(inputs), std::move(instrs), out_slot);
  OpContext call = root;
  call.in = external;
  Node* node = emitExecute(call, std::move(kernel), std::move(steps), {o}, flops);
  if (members.size() > 1) node->name = "fused(" + names + ")";
  return o;
}

}  // namespace ipu
