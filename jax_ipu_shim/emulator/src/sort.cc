// stablehlo.sort: N operands of one shape sorted together along `dimension` by a comparator region.
//
// Semantics are XLA:CPU's (its runtime KeyValueSort): every 1-D slice along the dimension sorts an int64 index array
// 0..n-1, calling the comparator with (lhs_0, rhs_0, lhs_1, rhs_1, ...); then every operand is permuted by the
// sorted indices. The sort is always stable: for is_stable (what jax emits) that is required, and for an unstable
// sort it is one of the allowed orders (XLA:CPU's own tie order there comes from its C++ library's std::sort and is
// not reproducible across libraries). The comparator is compiled into a ScalarProgram (the reduce-body interpreter), so
// it computes exactly what the elementwise ops compute, including jax's total-order float comparator (bitcasts to
// i32/u32, or to i16/u16 for f16).
//
// Placement, as popops sorts per slice: the slices are spread over the tiles (whole slices per tile); superstep 1
// exchanges each slice's elements to its tile and sorts there (~ n log2 n comparator calls per slice, slices shared
// among the tile's workers). The outputs are mapped slice-wise when the slices are contiguous (sorting the innermost
// dimension); otherwise they keep a linear mapping and superstep 2 exchanges the sorted elements back to it.
// A slice too big for a quarter of a tile's memory is sorted in place across the tiles that hold it instead, as a
// distributed bitonic sort: a local sort on every tile, then log2(P)(log2(P)+1)/2 merge supersteps in which every
// tile exchanges its block with a partner tile and keeps the lower or upper half.
#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <type_traits>

#include "ipu/cost_model.h"
#include "ipu/dtype.h"
#include "ipu/handlers.h"
#include "ipu/lowering.h"
#include "ipu/scalar_ops.h"
#include "ipu/scalar_program.h"
#include "sort_keys.h"

namespace ipu {

namespace {

using sort_keys::KeyOrder;
using sort_keys::keyOrder;
using sort_keys::SortOperand;

// Slice s of a shape viewed as [outer, n, inner]: element j at base(s) + j * inner.
struct SortGeometry {
  int64_t n = 0, inner = 1;
  int64_t base(int64_t s) const { return (s / inner) * n * inner + s % inner; }
};


class SortKernel : public Kernel {
 public:
  using Operand = SortOperand;
  // `sort_step`: the superstep that sorts. Its work is over slices, or (distributed) over elements, a call then
  // sorting the slices whose first element lies in its range.
  SortKernel(std::vector<Operand> ops, SortGeometry g, ScalarProgram cmp, size_t sort_step, bool distributed,
             int64_t slices)
      : ops_(std::move(ops)), g_(g), cmp_(std::move(cmp)), order_(keyOrder(cmp_, g_.n)), sort_step_(sort_step),
        distributed_(distributed), slices_(slices) {}

  void computeStep(RunState& s, size_t step, int64_t b, int64_t e) const override {
    if (step != sort_step_) return;
    if (!distributed_) return compute(s, b, e);
    for (int64_t sl = 0; sl < slices_; ++sl)
      if (g_.base(sl) >= b && g_.base(sl) < e) compute(s, sl, sl + 1);
  }

  void compute(RunState& s, int64_t b, int64_t e) const override {
    ScalarRegisters file(cmp_);
    ScalarReg* regs = file.data();
    uint8_t* r = reinterpret_cast<uint8_t*>(regs);
    const size_t result = kRegBytes * static_cast<size_t>(cmp_.resultRegister(0));
    std::vector<const uint8_t*> in(ops_.size());
    std::vector<uint8_t*> out(ops_.size());
    for (size_t k = 0; k < ops_.size(); ++k) {
      in[k] = s.ptr[static_cast<size_t>(ops_[k].in)];
      out[k] = s.ptr[static_cast<size_t>(ops_[k].out)];
    }
    std::vector<int64_t> idx(static_cast<size_t>(g_.n));
    const int64_t stride = g_.inner;
    for (int64_t sl = b; sl < e; ++sl) {
      const int64_t base = g_.base(sl);
      if (order_) {
        order_->order(in, ops_, base, stride, g_.n, &idx);
        permute(in, out, base, idx);
        continue;
      }
      std::iota(idx.begin(), idx.end(), int64_t{0});
      auto less = [&](int64_t x, int64_t y) {
        for (size_t k = 0; k < ops_.size(); ++k) {
          const int64_t size = static_cast<int64_t>(ops_[k].size);
          copyElement(r + 2 * kRegBytes * k, in[k] + (base + x * stride) * size, ops_[k].size);
          copyElement(r + 2 * kRegBytes * k + kRegBytes, in[k] + (base + y * stride) * size, ops_[k].size);
        }
        cmp_.run(regs);
        return r[result] != 0;
      };
      std::stable_sort(idx.begin(), idx.end(), less);
      permute(in, out, base, idx);
    }
  }

 private:
  void permute(const std::vector<const uint8_t*>& in, const std::vector<uint8_t*>& out, int64_t base,
               const std::vector<int64_t>& idx) const {
    const int64_t stride = g_.inner;
    for (size_t k = 0; k < ops_.size(); ++k) {
      const int64_t size = static_cast<int64_t>(ops_[k].size);
      for (int64_t j = 0; j < g_.n; ++j)
        copyElement(out[k] + (base + j * stride) * size, in[k] + (base + idx[static_cast<size_t>(j)] * stride) * size,
                    ops_[k].size);
    }
  }

  std::vector<Operand> ops_;
  SortGeometry g_;
  ScalarProgram cmp_;
  std::shared_ptr<const KeyOrder> order_;
  size_t sort_step_;
  bool distributed_;
  int64_t slices_;
};

// chlo.top_k: the k largest elements of each last-dimension slice, largest first, and their indices. XLA:CPU's
// order: a total order on the raw bits (-NaN < -inf < ... < -0.0 < 0.0 < ... < inf < NaN), ties to the smaller index;
// as that is a strict total order, std::partial_sort gives exactly XLA's result.
template <DType D>
int64_t topKKey(const uint8_t* p) {
  Storage<D> v;
  std::memcpy(&v, p, sizeof(v));
  if constexpr (D == DType::F32) {
    uint32_t x;
    std::memcpy(&x, &v, 4);
    return static_cast<int32_t>(x) < 0 ? static_cast<int32_t>(0x7FFFFFFFu - x) : static_cast<int32_t>(x);
  } else if constexpr (D == DType::F16 || D == DType::BF16) {  // the same total order on the 16 bits
    uint16_t x;
    std::memcpy(&x, &v, 2);
    return static_cast<int16_t>(x) < 0 ? static_cast<int16_t>(static_cast<uint16_t>(0x7FFFu - x))
                                       : static_cast<int16_t>(x);
  } else if constexpr (D == DType::F64) {  // the same total order on the 64 bits
    return scalar::totalOrderKeyD(v);
  } else if constexpr (D == DType::U64) {  // unsigned order as a signed key
    return static_cast<int64_t>(v ^ 0x8000000000000000ull);
  } else if constexpr (isComplex(D)) {  // top_k is not defined on complex numbers (the registry refuses it)
    return 0;
  } else {
    return static_cast<int64_t>(v);
  }
}

class TopKKernel : public Kernel {
 public:
  TopKKernel(int in, int values, int indices, size_t size, DType dtype, int64_t n, int64_t k)
      : in_(in), values_(values), indices_(indices), size_(size), dtype_(dtype), n_(n), k_(k) {}
  void compute(RunState& s, int64_t b, int64_t e) const override {
    visitDType(dtype_, [&](auto t) { run<decltype(t)::value>(s, b, e); });
  }

 private:
  template <DType S>
  void run(RunState& s, int64_t b, int64_t e) const {
    const uint8_t* in = s.ptr[static_cast<size_t>(in_)];
    uint8_t* values = s.ptr[static_cast<size_t>(values_)];
    int32_t* indices = s.at<int32_t>(indices_);
    std::vector<int32_t> idx(static_cast<size_t>(n_));
    std::vector<int64_t> key(static_cast<size_t>(n_));
    for (int64_t sl = b; sl < e; ++sl) {
      const uint8_t* x = in + sl * n_ * static_cast<int64_t>(size_);
      for (int64_t j = 0; j < n_; ++j) key[static_cast<size_t>(j)] = topKKey<S>(x + j * static_cast<int64_t>(size_));
      std::iota(idx.begin(), idx.end(), 0);
      std::partial_sort(idx.begin(), idx.begin() + k_, idx.end(), [&](int32_t a, int32_t c) {
        const int64_t ka = key[static_cast<size_t>(a)], kc = key[static_cast<size_t>(c)];
        return ka == kc ? a < c : ka > kc;
      });
      for (int64_t j = 0; j < k_; ++j) {
        const int32_t i = idx[static_cast<size_t>(j)];
        copyElement(values + (sl * k_ + j) * static_cast<int64_t>(size_), x + i * static_cast<int64_t>(size_), size_);
        indices[sl * k_ + j] = i;
      }
    }
  }

  int in_, values_, indices_;
  size_t size_;
  DType dtype_;
  int64_t n_, k_;
};

}  // namespace

// top_k's placement is sort's (whole last-dimension slices per tile); the outputs stay on the tiles that compute
// them. Cost: ~n ceil(log2(k + 1)) key comparisons per slice (a heap of k) plus computing n keys.
std::vector<int> lowerTopK(Lowerer& L, OpContext& ctx) {
  const TensorType& in = ctx.in_types[0];
  if (ctx.out_types.size() != 2) L.invalid(ctx, "top_k has two results (values, indices)");
  if (in.shape.empty()) L.invalid(ctx, "top_k needs an operand of rank 1 or more");
  const int64_t k = attrInt(*ctx.op, "k");
  const int64_t n = in.shape.back();
  std::vector<int64_t> out_shape = in.shape;
  out_shape.back() = k;
  if (k < 0 || k > n) L.invalid(ctx, "k must be in [0, " + std::to_string(n) + "]");
  if (ctx.out_types[0].shape != out_shape || ctx.out_types[0].dtype != in.dtype ||
      ctx.out_types[1].shape != out_shape || ctx.out_types[1].dtype != DType::I32)
    L.invalid(ctx, "the results must be the operand's type and i32 with the last dimension k");
  const size_t size = dtypeSize(in.dtype);
  const int64_t slices = n == 0 ? (in.numElements() == 0 ? shapeElements({in.shape.begin(), in.shape.end() - 1}) : 0)
                                : in.numElements() / n;
  const int tiles = L.device().num_tiles;
  const TileMapping work = TileMapping::linear(slices, std::max<size_t>(1, static_cast<size_t>(n) * size), tiles);
  const int values = L.newSlot(ctx.out_types[0]);
  const int indices = L.newSlot(ctx.out_types[1]);
  for (int slot : {values, indices}) {
    TileMapping& m = L.graph().slots[static_cast<size_t>(slot)].mapping;
    m.per_tile = std::max<int64_t>(1, work.per_tile * k);
  }
  std::vector<int64_t> recv(static_cast<size_t>(tiles), 0);
  const TileMapping& in_map = L.graph().slots[static_cast<size_t>(ctx.in[0])].mapping;
  for (int t = 0; t < work.tilesUsed(); ++t) {
    const int64_t b = work.begin(t) * n, e = work.end(t) * n;
    recv[static_cast<size_t>(t)] += (e - b - in_map.overlap(t, b, e)) * static_cast<int64_t>(size);
  }
  const int workers = L.device().num_worker_contexts;
  std::vector<Superstep> steps;
  if (slices > 0 && n > 0)
    steps.push_back(L.superstep(std::string("topk<") + dtypeName(in.dtype) + ">", work, recv,
                                [&](int, int64_t m) { return cost::topK(m, n, k, workers); }));
  if (!steps.empty()) steps.back().cost_weight = std::max(1.0, cost::topKSliceCycles(n, k));
  L.emitExecute(ctx, std::make_unique<TopKKernel>(ctx.in[0], values, indices, size, in.dtype, n, k), std::move(steps),
                {values, indices}, 0);
  return {values, indices};
}

namespace {

// What a sort lowering decides before its steps: the slices, the comparator, where the results live and which
// tiles sort.
struct SortPlan {
  SortGeometry g;
  int64_t elements = 0, slices = 0;
  std::vector<SortOperand> operands;
  std::vector<int> outs;
  std::string types;  // "f32,s32"
  bool distributed = false;  // slices too big for one tile: a local sort per tile, then bitonic merge rounds
  TileMapping work;
};

// The operands and results checked, the comparator compiled, the results given slots and the work its tiles.
SortPlan planSort(Lowerer& lowerer, OpContext& ctx, ScalarProgram* cmp) {
  const Op& op = *ctx.op;
  const size_t n_ops = ctx.in.size();
  if (ctx.out_types.size() != n_ops) lowerer.invalid(ctx, "sort must have one result per operand");
  const TensorType& in0 = ctx.in_types[0];
  const int64_t rank = static_cast<int64_t>(in0.shape.size());
  int64_t dim = attrInt(op, "dimension");
  if (dim < 0) dim += rank;
  if (dim < 0 || dim >= rank) lowerer.invalid(ctx, "dimension is out of range");
  for (size_t k = 0; k < n_ops; ++k) {
    if (ctx.in_types[k].shape != in0.shape) lowerer.invalid(ctx, "all operands must have the same shape");
    if (ctx.out_types[k].shape != in0.shape || ctx.out_types[k].dtype != ctx.in_types[k].dtype)
      lowerer.invalid(ctx, "each result must have its operand's type");
  }
  if (op.regions.size() != 1) lowerer.invalid(ctx, "sort must have one comparator region");
  std::vector<DType> params;
  for (size_t k = 0; k < n_ops; ++k) params.insert(params.end(), 2, ctx.in_types[k].dtype);
  *cmp = lowerer.compileBody(ctx, op.regions[0], params, {DType::Bool}, "in the comparator", true);

  SortPlan s;
  s.g.n = in0.shape[static_cast<size_t>(dim)];
  for (int64_t d = dim + 1; d < rank; ++d) s.g.inner *= in0.shape[static_cast<size_t>(d)];
  s.elements = in0.numElements();
  s.slices = s.g.n == 0 ? 0 : s.elements / s.g.n;
  int64_t slice_bytes = 0;
  for (size_t k = 0; k < n_ops; ++k) {
    const size_t size = dtypeSize(ctx.in_types[k].dtype);
    slice_bytes += s.g.n * static_cast<int64_t>(size);
    s.outs.push_back(k == 0 ? lowerer.newSlot(ctx.out_types[k]) : lowerer.newSlotLike(ctx.out_types[k], s.outs[0]));
    s.operands.push_back({ctx.in[k], s.outs[k], size});
    s.types += (k ? "," : "") + std::string(dtypeName(ctx.in_types[k].dtype));
  }
  const TileMapping slice_work =
      TileMapping::linear(s.slices, static_cast<size_t>(std::max<int64_t>(1, slice_bytes)), lowerer.device().num_tiles);
  // A tile holds every slice it sorts twice (in and out) at once; more than a quarter of its memory: distributed.
  s.distributed = 2 * slice_work.per_tile * slice_bytes > lowerer.device().bytes_per_tile / 4;
  if (!s.distributed && s.g.inner == 1) {  // contiguous slices: the outputs stay on the tiles that sort them
    for (int slot : s.outs) {
      TileMapping& m = lowerer.graph().slots[static_cast<size_t>(slot)].mapping;
      m.num_elements = s.elements;
      m.per_tile = std::max<int64_t>(1, slice_work.per_tile * s.g.n);
    }
  }
  s.work = s.distributed ? lowerer.graph().slots[static_cast<size_t>(s.outs[0])].mapping : slice_work;
  return s;
}

// Exchange: each tile receives the operand elements of its slices it does not hold, and (non-contiguous slices)
// each output tile receives (*back) the sorted elements it holds from the tiles that sorted them. Distributed: each
// tile first receives the operand elements at its output positions.
std::vector<int64_t> sortExchange(Lowerer& lowerer, const OpContext& ctx, const SortPlan& s,
                                  std::vector<int64_t>* back) {
  const int tiles = lowerer.device().num_tiles;
  std::vector<int64_t> recv(static_cast<size_t>(tiles), 0);
  back->assign(static_cast<size_t>(tiles), 0);
  const std::vector<Slot>& slots = lowerer.graph().slots;
  if (s.distributed) {
    for (int in : ctx.in) lowerer.exchangeSameIndex(&recv, slots[static_cast<size_t>(s.outs[0])].mapping, in);
    return recv;
  }
  for (int t = 0; t < s.work.tilesUsed(); ++t) {
    for (int64_t slice = s.work.begin(t); slice < s.work.end(t); ++slice) {
      const int64_t base = s.g.base(slice);
      for (int64_t j = 0; j < s.g.n; ++j) {
        const int64_t x = base + j * s.g.inner;
        for (const SortOperand& o : s.operands) {
          const int64_t size = static_cast<int64_t>(o.size);
          if (slots[static_cast<size_t>(o.in)].mapping.tileOf(x) != t) recv[static_cast<size_t>(t)] += size;
          const int owner = slots[static_cast<size_t>(o.out)].mapping.tileOf(x);
          if (owner != t) (*back)[static_cast<size_t>(owner)] += size;
        }
      }
    }
  }
  return recv;
}

}  // namespace

// Cycles (cost_model.h): a worker sorts whole slices (or its share of a tile's block), ~m ceil(log2 m)
// compare-exchange steps for m elements, each running the comparator on 2N loaded scalars, then permutes N
// operands; a tile's cycles are 6 x its busiest worker's plus the supervisor's.
std::vector<int> lowerSort(Lowerer& lowerer, OpContext& ctx) {
  ScalarProgram cmp;
  SortPlan s = planSort(lowerer, ctx, &cmp);
  std::vector<int64_t> back;
  const std::vector<int64_t> recv = sortExchange(lowerer, ctx, s, &back);
  const int workers = lowerer.device().num_worker_contexts;
  const TileMapping& out_map = lowerer.graph().slots[static_cast<size_t>(s.outs[0])].mapping;
  const int operand_count = static_cast<int>(s.operands.size());
  const double per_compare = cost::sortCompareCycles(cmp.cyclesPerElement(), operand_count);
  const double slice_cycles = cost::sortSliceCycles(s.g.n, per_compare, operand_count);
  const std::string codelet = "sort{" + cmp.summary() + "}<" + s.types + ">";
  std::vector<Superstep> steps;
  double comparisons = static_cast<double>(s.slices) * slice_cycles / per_compare;
  if (s.slices > 0 && !s.distributed) {
    steps.push_back(lowerer.superstep(codelet, s.work, recv, [&](int, int64_t m) {
      return cost::sortSlices(m, s.g.n, per_compare, operand_count, workers);
    }));
    steps.back().cost_weight = std::max(1.0, slice_cycles);
    if (std::any_of(back.begin(), back.end(), [](int64_t v) { return v > 0; }))
      steps.push_back(lowerer.superstep(codelet + ".writeback", out_map, back, [&](int t, int64_t) {
        return cost::copy(back[static_cast<size_t>(t)], workers);
      }));
  } else if (s.slices > 0) {
    // Local sort: each worker sorts 1/6 of the block, then the block is merged; then the bitonic merge rounds.
    const int p = out_map.tilesUsed();
    const int64_t rounds = cost::bitonicMergeRounds(p);
    steps.push_back(lowerer.superstep(
        codelet + ".local", s.work, recv,
        [&](int, int64_t m) { return cost::sortBlock(m, per_compare, operand_count, workers); }, rounds == 0));
    std::vector<int64_t> block(recv.size(), 0);  // each tile receives its partner's block
    for (int t = 0; t < p; ++t)
      for (const SortOperand& o : s.operands)
        block[static_cast<size_t>(t)] += out_map.elementsOn(t) * static_cast<int64_t>(o.size);
    size_t one_round = 0;  // the rounds reuse one receive buffer: its bytes are transient once
    for (int64_t r = 0; r < rounds; ++r) {
      steps.push_back(lowerer.superstep(
          codelet + ".merge", s.work, block,
          [&](int, int64_t m) { return cost::sortMergeRound(m, per_compare, workers); }, r + 1 == rounds));
      if (r == 0) one_round = lowerer.pendingStep().transient.size();
    }
    if (rounds > 0) lowerer.pendingStep().transient.resize(one_round);
    comparisons += static_cast<double>(rounds) * static_cast<double>(s.elements);
    for (Superstep& st : steps)
      st.cost_weight = std::max(1.0, slice_cycles / static_cast<double>(std::max<int64_t>(1, s.g.n)));
  }
  const double flops = cmp.flopsPerElement() * comparisons;
  const size_t sort_step = s.distributed && !steps.empty() ? steps.size() - 1 : 0;
  lowerer.emitExecute(
      ctx, std::make_unique<SortKernel>(std::move(s.operands), s.g, std::move(cmp), sort_step, s.distributed, s.slices),
      std::move(steps), s.outs, flops);
  return s.outs;
}

}  // namespace ipu
