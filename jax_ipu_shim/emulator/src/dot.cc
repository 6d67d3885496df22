// dot_general as Poplar plans a matmul: the result is mapped linearly over tiles and each tile computes its own
// outputs on the AMP, after an exchange brings it the lhs rows and rhs columns those outputs need.
// Operands are first rearranged into canonical [batch, M, K] and [batch, K, N] layouts (the exchange's job).
#include "ipu/cost_model.h"
#include "ipu/dtype.h"
#include "ipu/lowering.h"

namespace ipu {

namespace {

// Which input dimensions, in which order, form the canonical layout of one operand.
struct OperandLayout {
  std::vector<int64_t> shape;  // of the operand
  std::vector<int64_t> perm;   // canonical order of its dimensions
  bool identity() const {
    for (size_t i = 0; i < perm.size(); ++i)
      if (perm[i] != static_cast<int64_t>(i)) return false;
    return true;
  }
};

inline float toAcc(float x, float*) { return x; }
inline float toAcc(uint16_t x, float*) { return halfToFloat(x); }
inline uint32_t toAcc(int32_t x, uint32_t*) { return static_cast<uint32_t>(x); }
inline uint32_t toAcc(uint32_t x, uint32_t*) { return x; }
inline uint8_t toAcc(uint8_t x, uint8_t*) { return x; }

template <class Out, class Acc>
inline Out fromAcc(Acc a) {
  if constexpr (std::is_same<Out, uint16_t>::value) return floatToHalf(a);
  else return static_cast<Out>(a);
}

// Copies an operand into canonical order, converting to the accumulator type.
template <class In, class Acc>
void canonicalize(const In* x, Acc* y, const OperandLayout& l) {
  const size_t rank = l.shape.size();
  if (rank == 0) {
    y[0] = toAcc(x[0], static_cast<Acc*>(nullptr));
    return;
  }
  std::vector<int64_t> in_strides(rank, 1), shape(rank), strides(rank);
  for (size_t d = rank; d-- > 1;) in_strides[d - 1] = in_strides[d] * l.shape[d];
  int64_t total = 1;
  for (size_t d = 0; d < rank; ++d) {
    shape[d] = l.shape[static_cast<size_t>(l.perm[d])];
    strides[d] = in_strides[static_cast<size_t>(l.perm[d])];
    total *= shape[d];
  }
  if (total == 0) return;
  std::vector<int64_t> idx(rank, 0);
  int64_t src = 0;
  for (int64_t i = 0; i < total; ++i) {
    y[i] = toAcc(x[src], static_cast<Acc*>(nullptr));
    for (size_t d = rank; d-- > 0;) {
      src += strides[d];
      if (++idx[d] < shape[d]) break;
      src -= shape[d] * strides[d];
      idx[d] = 0;
    }
  }
}

// Each tile's outputs as rows of [batch, M, N]: accumulate lhs[k] * rhs[k, n] over k in the accumulator type
// (f32 for f16/f32, wrapping u32 for integers, OR of ANDs for bool), then convert once to the result type.
template <class In, class Acc, class Out>
class DotKernel : public Kernel {
 public:
  DotKernel(int lhs, int rhs, int out, OperandLayout l, OperandLayout r, int64_t m, int64_t k, int64_t n,
            int scratch_l, int scratch_r)
      : lhs_(lhs), rhs_(rhs), out_(out), l_(std::move(l)), r_(std::move(r)), m_(m), k_(k), n_(n),
        scratch_l_(scratch_l), scratch_r_(scratch_r) {}

  void prepare(RunState& s) const override {
    stage(s, lhs_, l_, scratch_l_);
    stage(s, rhs_, r_, scratch_r_);
  }

  void compute(RunState& s, int64_t b, int64_t e) const override {
    const Acc* lhs = operand(s, lhs_, l_, scratch_l_);
    const Acc* rhs = operand(s, rhs_, r_, scratch_r_);
    Out* o = s.at<Out>(out_);
    std::vector<Acc> acc;
    for (int64_t i = b; i < e;) {
      const int64_t row = i / n_, n0 = i % n_, n1 = std::min(n_, n0 + (e - i));
      const int64_t batch = row / m_;
      const Acc* lrow = lhs + row * k_;
      const Acc* rbatch = rhs + batch * k_ * n_;
      acc.assign(static_cast<size_t>(n1 - n0), Acc(0));
      Acc* a = acc.data();
      const int64_t len = n1 - n0;
      for (int64_t k = 0; k < k_; ++k) {
        const Acc x = lrow[k];
        const Acc* r = rbatch + k * n_ + n0;
        if constexpr (std::is_same<Acc, uint8_t>::value) {
          for (int64_t j = 0; j < len; ++j) a[j] = static_cast<uint8_t>(a[j] | (x & r[j]));
        } else {
          for (int64_t j = 0; j < len; ++j) a[j] += x * r[j];
        }
      }
      for (int64_t j = 0; j < len; ++j) o[i + j] = fromAcc<Out>(a[j]);
      i += len;
    }
  }

 private:
  static constexpr bool kSameType = std::is_same<In, Acc>::value || (std::is_same<In, int32_t>::value && std::is_same<Acc, uint32_t>::value);

  void stage(RunState& s, int slot, const OperandLayout& l, int scratch) const {
    if (kSameType && l.identity()) return;
    int64_t total = 1;
    for (int64_t d : l.shape) total *= d;
    std::vector<uint8_t>& buf = s.scratch[static_cast<size_t>(scratch)];
    buf.resize(static_cast<size_t>(total) * sizeof(Acc));
    canonicalize(s.at<const In>(slot), reinterpret_cast<Acc*>(buf.data()), l);
  }

  const Acc* operand(RunState& s, int slot, const OperandLayout& l, int scratch) const {
    if (kSameType && l.identity()) return s.at<const Acc>(slot);
    return reinterpret_cast<const Acc*>(s.scratch[static_cast<size_t>(scratch)].data());
  }

  int lhs_, rhs_, out_;
  OperandLayout l_, r_;
  int64_t m_, k_, n_;
  int scratch_l_, scratch_r_;
};

}  // namespace

std::vector<int> Lowerer::lowerDot(OpContext& ctx) {
  const Op& op = *ctx.op;
  const TensorType& lhs = ctx.in_types[0];
  const TensorType& rhs = ctx.in_types[1];
  if (ctx.out_types.size() != 1) invalid(ctx, "expected one result");
  const TensorType& out = ctx.out_types[0];
  const std::vector<int64_t> lb = attrInts(op, "lhs_batching_dimensions", false);
  const std::vector<int64_t> rb = attrInts(op, "rhs_batching_dimensions", false);
  const std::vector<int64_t> lc = attrInts(op, "lhs_contracting_dimensions", false);
  const std::vector<int64_t> rc = attrInts(op, "rhs_contracting_dimensions", false);
  if (lb.size() != rb.size() || lc.size() != rc.size()) invalid(ctx, "batching and contracting dimensions must pair up");

  auto layout = [&](const TensorType& t, const std::vector<int64_t>& batch, const std::vector<int64_t>& contract,
                    bool contract_last, std::vector<int64_t>* free) {
    std::vector<bool> used(t.shape.size(), false);
    for (const auto* list : {&batch, &contract})
      for (int64_t d : *list) {
        if (d < 0 || d >= static_cast<int64_t>(t.shape.size()) || used[static_cast<size_t>(d)])
          invalid(ctx, "dimension numbers are out of range or repeated");
        used[static_cast<size_t>(d)] = true;
      }
    for (size_t d = 0; d < t.shape.size(); ++d)
      if (!used[d]) free->push_back(static_cast<int64_t>(d));
    OperandLayout l;
    l.shape = t.shape;
    l.perm = batch;
    const std::vector<int64_t>& second = contract_last ? *free : contract;
    const std::vector<int64_t>& third = contract_last ? contract : *free;
    l.perm.insert(l.perm.end(), second.begin(), second.end());
    l.perm.insert(l.perm.end(), third.begin(), third.end());
    return l;
  };
  std::vector<int64_t> lfree, rfree;
  OperandLayout ll = layout(lhs, lb, lc, true, &lfree);
  OperandLayout rl = layout(rhs, rb, rc, false, &rfree);
  int64_t batch = 1, m = 1, k = 1, n = 1;
  std::vector<int64_t> expect;
  for (size_t i = 0; i < lb.size(); ++i) {
    const int64_t s = lhs.shape[static_cast<size_t>(lb[i])];
    if (s != rhs.shape[static_cast<size_t>(rb[i])]) invalid(ctx, "batch dimension sizes differ");
    batch *= s;
    expect.push_back(s);
  }
  for (size_t i = 0; i < lc.size(); ++i) {
    const int64_t s = lhs.shape[static_cast<size_t>(lc[i])];
    if (s != rhs.shape[static_cast<size_t>(rc[i])]) invalid(ctx, "contracting dimension sizes differ");
    k *= s;
  }
  for (int64_t d : lfree) {
    m *= lhs.shape[static_cast<size_t>(d)];
    expect.push_back(lhs.shape[static_cast<size_t>(d)]);
  }
  for (int64_t d : rfree) {
    n *= rhs.shape[static_cast<size_t>(d)];
    expect.push_back(rhs.shape[static_cast<size_t>(d)]);
  }
  if (expect != out.shape) invalid(ctx, "the result shape should be " + mlirTensorType(dtypeName(out.dtype), expect));
  if (lhs.dtype != rhs.dtype) unimplemented(ctx, "dot_general needs operands of one element type");

  const int o = newSlot(out);
  const int sl = newScratch(), sr = newScratch();
  std::unique_ptr<Kernel> kernel;
  const DType dt = lhs.dtype;
  if (dt == DType::F32 && out.dtype == DType::F32)
    kernel = std::make_unique<DotKernel<float, float, float>>(ctx.in[0], ctx.in[1], o, ll, rl, m, k, n, sl, sr);
  else if (dt == DType::F16 && out.dtype == DType::F16)
    kernel = std::make_unique<DotKernel<uint16_t, float, uint16_t>>(ctx.in[0], ctx.in[1], o, ll, rl, m, k, n, sl, sr);
  else if (dt == DType::F16 && out.dtype == DType::F32)
    kernel = std::make_unique<DotKernel<uint16_t, float, float>>(ctx.in[0], ctx.in[1], o, ll, rl, m, k, n, sl, sr);
  else if (dt == DType::I32 && out.dtype == DType::I32)
    kernel = std::make_unique<DotKernel<int32_t, uint32_t, int32_t>>(ctx.in[0], ctx.in[1], o, ll, rl, m, k, n, sl, sr);
  else if (dt == DType::U32 && out.dtype == DType::U32)
    kernel = std::make_unique<DotKernel<uint32_t, uint32_t, uint32_t>>(ctx.in[0], ctx.in[1], o, ll, rl, m, k, n, sl, sr);
  else if (dt == DType::Bool && out.dtype == DType::Bool)
    kernel = std::make_unique<DotKernel<uint8_t, uint8_t, uint8_t>>(ctx.in[0], ctx.in[1], o, ll, rl, m, k, n, sl, sr);
  else
    unimplemented(ctx, std::string("dot_general is implemented for f16, f32, i32, u32 and bool operands with a result of "
                                   "the same type (or f32 from f16); not ") + dtypeName(dt) + " -> " + dtypeName(out.dtype));

  // Exchange: each tile needs the lhs rows and rhs columns of its outputs, less what it already holds.
  const TileMapping work = graph().slots[static_cast<size_t>(o)].mapping;
  const TileMapping lmap = graph().slots[static_cast<size_t>(ctx.in[0])].mapping;
  const TileMapping rmap = graph().slots[static_cast<size_t>(ctx.in[1])].mapping;
  const int64_t eb = static_cast<int64_t>(dtypeSize(dt));
  std::vector<int64_t> recv(static_cast<size_t>(device().num_tiles), 0);
  for (int t = 0; t < work.tilesUsed() && n > 0; ++t) {
    const int64_t b = work.begin(t), e = work.end(t);
    const int64_t rows = (e - 1) / n - b / n + 1;
    const int64_t batches = (e - 1) / (m * n) - b / (m * n) + 1;
    const int64_t cols = std::min(n, e - b) * batches;
    const int64_t need_l = rows * k, need_r = cols * k;
    recv[static_cast<size_t>(t)] = (std::max<int64_t>(0, need_l - lmap.elementsOn(t)) +
                                    std::max<int64_t>(0, need_r - rmap.elementsOn(t))) * eb;
  }
  std::vector<Superstep> steps;
  const int workers = device().num_worker_contexts;
  if (work.num_elements > 0) {
    steps.push_back(superstep(std::string("matmul<") + dtypeName(dt) + ">", work, recv,
                              [&](int, int64_t outs) { return cost::matmul(dt, outs, k, workers); }));
    steps.back().cost_weight = static_cast<double>(std::max<int64_t>(1, k));
  }
  const double flops = 2.0 * static_cast<double>(batch) * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  emitExecute(ctx, std::move(kernel), std::move(steps), {o}, isFloat(dt) ? flops : 0);
  return {o};
}

}  // namespace ipu
