// convolution as poplin plans it: a matmul per group. Per group g (feature_group_count * batch_group_count of them,
// at most one > 1) the convolution is the GEMM [M = out_batch * out_spatial] x [N = out_features / groups] over
// [K = kernel_in_features * kernel_spatial] of the input windows (im2col) and the kernel; dot.cc's planner chooses
// the grid of the [groups, M, N, K] iteration space.
// Superstep 1: each tile receives the input elements of its windows and its kernel block and computes a partial
// block (f32 for floats, wrapping u32 for ints, OR of ANDs for bool) into a canonical [kparts, groups, M, N] buffer;
// with poplin's partialsType half (an f16 convolution) the partials are kept and sent as f16, each rounded once.
// Superstep 2: each tile of the output's linear mapping receives the pK partials of its elements, sums them in k
// order and converts once to the result type, in the output's layout.
// Semantics are StableHLO's: the input is dilated (lhs_dilation) and padded (negative padding crops); the window is
// dilated (rhs_dilation) and reversed where window_reversal says; strides step the window; out-of-range positions
// read zero. Host kernel: im2col of 96 rows at a time into a scratch buffer, then dot.cc's f32 GEMM (exact loops for
// ints and bool).
#include <algorithm>
#include <type_traits>

#include "conv_kernels.h"
#include "ipu/cost_model.h"
#include "ipu/dtype.h"
#include "ipu/handlers.h"
#include "ipu/lowering.h"
#include "ipu/matmul.h"

namespace ipu {

namespace {


using conv_kernels::ConvGeom;

// The dimension numbers: which dimension of input, kernel and result is batch, feature and spatial.
struct ConvDims {
  int64_t ib = 0, ifd = 0, ki = 0, ko = 0, ob = 0, ofd = 0;
  std::vector<int64_t> isd, ksd, osd;
};

ConvDims readDims(const Lowerer& lowerer, const OpContext& ctx, size_t rank) {
  const Op& op = *ctx.op;
  const int64_t S = static_cast<int64_t>(rank) - 2;
  ConvDims d;
  d.ib = attrInt(op, "input_batch_dimension"), d.ifd = attrInt(op, "input_feature_dimension");
  d.ki = attrInt(op, "kernel_input_feature_dimension"), d.ko = attrInt(op, "kernel_output_feature_dimension");
  d.ob = attrInt(op, "output_batch_dimension"), d.ofd = attrInt(op, "output_feature_dimension");
  d.isd = attrInts(op, "input_spatial_dimensions"), d.ksd = attrInts(op, "kernel_spatial_dimensions");
  d.osd = attrInts(op, "output_spatial_dimensions");
  auto checkPerm = [&](int64_t a, int64_t b, const std::vector<int64_t>& sp, const char* what) {
    std::vector<bool> used(rank, false);
    std::vector<int64_t> all = sp;
    all.push_back(a);
    all.push_back(b);
    if (static_cast<int64_t>(sp.size()) != S)
      lowerer.invalid(ctx, std::string(what) + " spatial dimensions do not match the rank");
    for (int64_t x : all) {
      if (x < 0 || x >= static_cast<int64_t>(rank) || used[static_cast<size_t>(x)])
        lowerer.invalid(ctx, std::string(what) + " dimension numbers are out of range or repeated");
      used[static_cast<size_t>(x)] = true;
    }
  };
  checkPerm(d.ib, d.ifd, d.isd, "input");
  checkPerm(d.ki, d.ko, d.ksd, "kernel");
  checkPerm(d.ob, d.ofd, d.osd, "output");
  return d;
}

// The window: strides, dilations, reversal and padding (the high padding in *pad_hi), one entry per spatial dim.
void readWindow(const Lowerer& lowerer, const OpContext& ctx, ConvGeom* g, std::vector<int64_t>* pad_hi) {
  const Op& op = *ctx.op;
  const int64_t S = g->rank;
  auto window = [&](const char* name, int64_t dflt) {
    std::vector<int64_t> v = attrInts(op, name, false);
    if (v.empty() && S > 0) v.assign(static_cast<size_t>(S), dflt);
    if (static_cast<int64_t>(v.size()) != S)
      lowerer.invalid(ctx, std::string(name) + " must have one entry per spatial dimension");
    return v;
  };
  g->stride = window("window_strides", 1);
  g->lhs_dil = window("lhs_dilation", 1);
  g->rhs_dil = window("rhs_dilation", 1);
  std::vector<int64_t> rev(static_cast<size_t>(S), 0);
  if (const json::Value* r = op.attrs.find("window_reversal")) {
    bool ok = r->isArray() && static_cast<int64_t>(r->array.size()) == S;
    for (size_t d = 0; ok && d < r->array.size(); ++d) {
      const json::Value& v = r->array[d];
      ok = v.kind == json::Value::Kind::Bool || v.is_integer;
      if (ok) rev[d] = v.kind == json::Value::Kind::Bool ? v.boolean : v.integer != 0;
    }
    if (!ok) lowerer.invalid(ctx, "window_reversal must be one bool per spatial dimension");
  }
  for (size_t d = 0; d < static_cast<size_t>(S); ++d) {
    if (g->stride[d] < 1 || g->lhs_dil[d] < 1 || g->rhs_dil[d] < 1)
      lowerer.invalid(ctx, "strides and dilations must be positive");
    g->reverse.push_back(rev[d] != 0);
  }
  pad_hi->assign(static_cast<size_t>(S), 0);
  g->pad_lo.assign(static_cast<size_t>(S), 0);
  if (const json::Value* p = op.attrs.find("padding")) {
    bool ok = p->isArray() && static_cast<int64_t>(p->array.size()) == S;
    for (size_t d = 0; ok && d < p->array.size(); ++d) {
      const json::Value& pair = p->array[d];
      ok = pair.isArray() && pair.array.size() == 2 && pair.array[0].is_integer && pair.array[1].is_integer;
      if (ok) g->pad_lo[d] = pair.array[0].integer, (*pad_hi)[d] = pair.array[1].integer;
    }
    if (!ok) lowerer.invalid(ctx, "padding must be one [low, high] pair of integers per spatial dimension");
  }
}

// Everything the kernel needs, checked against the result's shape: dimension numbers, window, group counts, sizes
// and the operands' strides.
ConvGeom readConv(const Lowerer& lowerer, const OpContext& ctx) {
  const Op& op = *ctx.op;
  const TensorType& lhs = ctx.in_types[0];
  const TensorType& rhs = ctx.in_types[1];
  if (ctx.out_types.size() != 1) lowerer.invalid(ctx, "expected one result");
  const TensorType& out = ctx.out_types[0];
  const size_t rank = lhs.shape.size();
  if (rank < 2 || rhs.shape.size() != rank || out.shape.size() != rank)
    lowerer.invalid(ctx, "input, kernel and result must have one rank of at least 2");
  const ConvDims dn = readDims(lowerer, ctx, rank);
  ConvGeom g;
  g.rank = static_cast<int64_t>(rank) - 2;
  g.in_elements = lhs.numElements();
  std::vector<int64_t> pad_hi;
  readWindow(lowerer, ctx, &g, &pad_hi);
  g.fgc = attrInt(op, "feature_group_count");
  g.bgc = attrInt(op, "batch_group_count");
  if (g.fgc < 1 || g.bgc < 1 || (g.fgc > 1 && g.bgc > 1))
    lowerer.invalid(ctx, "feature_group_count and batch_group_count must be positive and not both above 1");
  g.groups = g.fgc * g.bgc;
  auto at = [](const std::vector<int64_t>& v, int64_t d) { return v[static_cast<size_t>(d)]; };
  const int64_t N = at(lhs.shape, dn.ib), C = at(lhs.shape, dn.ifd);
  g.cig = at(rhs.shape, dn.ki);
  const int64_t Co = at(rhs.shape, dn.ko);
  if (C != g.cig * g.fgc)
    lowerer.invalid(ctx, "input features must be kernel input features times feature_group_count");
  if (Co % g.groups != 0) lowerer.invalid(ctx, "kernel output features must divide by the group counts");
  if (N % g.bgc != 0) lowerer.invalid(ctx, "the input batch must divide by batch_group_count");
  g.cog = Co / g.groups;
  g.in_batch = N;
  g.out_batch = N / g.bgc;
  std::vector<int64_t> expect(rank);
  expect[static_cast<size_t>(dn.ob)] = g.out_batch;
  expect[static_cast<size_t>(dn.ofd)] = Co;
  for (size_t d = 0; d < static_cast<size_t>(g.rank); ++d) {
    const int64_t in = at(lhs.shape, dn.isd[d]), k = at(rhs.shape, dn.ksd[d]);
    const int64_t dil = in == 0 ? 0 : (in - 1) * g.lhs_dil[d] + 1;
    const int64_t padded = g.pad_lo[d] + dil + pad_hi[d];
    const int64_t win = k == 0 ? 0 : (k - 1) * g.rhs_dil[d] + 1;
    const int64_t o = padded < win ? 0 : (padded - win) / g.stride[d] + 1;
    g.in_size.push_back(in);
    g.k_size.push_back(k);
    g.dilated.push_back(dil);
    g.out_size.push_back(o);
    expect[static_cast<size_t>(dn.osd[d])] = o;
    g.out_spatial *= o;
    g.k_spatial *= k;
  }
  if (expect != out.shape)
    lowerer.invalid(ctx, "the result shape should be " + mlirTensorType(dtypeName(out.dtype), expect));
  if (lhs.dtype != rhs.dtype) lowerer.unimplemented(ctx, "convolution needs operands of one element type");
  const std::vector<int64_t> ist = rowMajorStrides(lhs.shape), kst = rowMajorStrides(rhs.shape),
                             ost = rowMajorStrides(out.shape);
  g.is_b = at(ist, dn.ib), g.is_f = at(ist, dn.ifd);
  g.ks_i = at(kst, dn.ki), g.ks_o = at(kst, dn.ko);
  g.os_b = at(ost, dn.ob), g.os_f = at(ost, dn.ofd);
  for (size_t d = 0; d < static_cast<size_t>(g.rank); ++d) {
    g.is_s.push_back(at(ist, dn.isd[d]));
    g.ks_s.push_back(at(kst, dn.ksd[d]));
    g.os_s.push_back(at(ost, dn.osd[d]));
  }
  return g;
}

// The two supersteps (cost_model.h; the top of the file): block p = (group, M block, N block, K block) receives the
// input elements its windows read (about mb rows' share of the input plane per input feature of its K block; at
// most mb * kb) and its kernel block and computes a partial; then each output tile reduces its outputs' K partials.
std::vector<Superstep> convSteps(Lowerer& lowerer, const ConvGeom& g, const MatmulPlan& plan, DType dt, DType partials,
                                 const TileMapping& omap) {
  const int workers = lowerer.device().num_worker_contexts;
  const int64_t in_bytes = static_cast<int64_t>(dtypeSize(dt));
  const int64_t acc_bytes = static_cast<int64_t>(dtypeSize(partials));
  const int64_t M = g.M(), K = g.K(), Ng = g.cog, G = g.groups;
  const int64_t kparts = K > 0 ? plan.k.parts : 1;
  const int64_t P = std::max<int64_t>(1, plan.blocks());
  const size_t tiles = static_cast<size_t>(lowerer.device().num_tiles);
  std::vector<int64_t> recv1(tiles, 0), part(tiles, 0), recv2(tiles, 0), macs(tiles, 0), bouts(tiles, 0);
  std::vector<int64_t> recv_in(tiles, 0), recv_k(tiles, 0);
  int64_t in_spatial = 1;
  for (int64_t s : g.in_size) in_spatial *= s;
  auto split = [](const MatmulSplit& s, int64_t i, int64_t dimsz) {
    return std::max<int64_t>(0, std::min(dimsz, (i + 1) * s.block) - i * s.block);
  };
  for (int64_t p = 0; p < P && p < static_cast<int64_t>(tiles); ++p) {
    int64_t x = p;
    const int64_t ik = x % plan.k.parts;
    x /= plan.k.parts;
    const int64_t in = x % plan.n.parts;
    x /= plan.n.parts;
    const int64_t im = x % plan.m.parts, igb = x / plan.m.parts;
    const int64_t nb = split(plan.b, igb, G), mb = split(plan.m, im, M), nn = split(plan.n, in, Ng);
    const int64_t kb = K > 0 ? split(plan.k, ik, K) : 0;
    const int64_t feats = g.k_spatial > 0 ? std::min(g.cig, ceilDiv(kb, g.k_spatial) + 1) : 0;
    const int64_t rows_share = g.out_spatial > 0 ? ceilDiv(mb * in_spatial, g.out_spatial) : 0;
    const int64_t windows = std::min(mb * kb, rows_share * feats + mb * g.k_spatial);
    const size_t t = static_cast<size_t>(p);
    recv_in[t] = nb * windows * in_bytes;
    recv_k[t] = nb * kb * nn * in_bytes;
    recv1[t] = recv_in[t] + recv_k[t];
    bouts[t] = nb * mb * nn;
    macs[t] = kb;
    part[t] = nb * mb * nn * acc_bytes;
  }
  for (int t = 0; t < omap.tilesUsed(); ++t) recv2[static_cast<size_t>(t)] = omap.elementsOn(t) * kparts * acc_bytes;
  std::vector<Superstep> steps;
  const size_t mark = lowerer.pendingStep().transient.size();
  TileMapping blocks;
  blocks.num_elements = P;
  blocks.per_tile = 1;
  const std::vector<int64_t> bus = supertileExchangeBytes(plan, recv_in, recv_k);
  steps.push_back(lowerer.superstep(std::string("conv<") + dtypeName(dt) + ">", blocks, bus, [&](int t, int64_t) {
    return cost::matmul(dt, bouts[static_cast<size_t>(t)], macs[static_cast<size_t>(t)], lowerer.device());
  }));
  steps.back().cost_weight =
      static_cast<double>(std::max<int64_t>(1, G * M * Ng / P * std::max<int64_t>(1, K / kparts)));
  steps.push_back(lowerer.superstep(std::string("convReduce<") + dtypeName(dt) + ">", omap, recv2, [&](int, int64_t e) {
    return kparts > 1 ? cost::reduce(partials, e * kparts, e, workers) : cost::copy(e * acc_bytes, workers);
  }));
  steps.back().cost_weight = static_cast<double>(kparts + g.rank + 2);
  // Memory: superstep 1 holds the received windows and kernel block and the partial; superstep 2 the partial and
  // the partials received.
  lowerer.pendingStep().transient.resize(mark);
  for (size_t t = 0; t < tiles; ++t) {
    const int64_t bytes = std::max(recv1[t] + part[t], part[t] + recv2[t]);
    if (bytes > 0) lowerer.pendingStep().transient.emplace_back(static_cast<int>(t), bytes);
  }
  return steps;
}

}  // namespace

// A matmul per group over the input windows (im2col), planned as dot.cc plans a matmul.
std::vector<int> lowerConv(Lowerer& lowerer, OpContext& ctx) {
  ConvGeom g = readConv(lowerer, ctx);
  const TensorType& out = ctx.out_types[0];
  const int o = lowerer.newSlot(out);
  const int sw = lowerer.newScratch(), sp = lowerer.newScratch(), sx = lowerer.newScratch();
  const DType dt = ctx.in_types[0].dtype;
  const DType partials = partialsType(dt, out.dtype, lowerer.options().half_partials);
  g.half_partials = partials == DType::F16;
  const TileMapping omap = lowerer.graph().slots[static_cast<size_t>(o)].mapping;
  const int64_t M = g.M(), K = g.K(), Ng = g.cog, G = g.groups;
  const MatmulPlan plan =
      planMatmul(G, M, Ng, K, dt, partials, omap, lowerer.device(), lowerer.options().available_memory_proportion);
  const int64_t kparts = K > 0 ? plan.k.parts : 1, kblock = K > 0 ? plan.k.block : 0;
  const int64_t P = std::max<int64_t>(1, plan.blocks());

  std::unique_ptr<Kernel> kernel =
      conv_kernels::convKernel(dt, out.dtype, ctx.in[0], ctx.in[1], o, g, kparts, kblock, P, sw, sp, sx);
  if (!kernel)
    lowerer.unimplemented(ctx,
                          std::string("convolution needs a result of its operands' element type, or a wider one of the "
                                      "same kind (preferred_element_type); not ") +
                              dtypeName(dt) + " -> " + dtypeName(out.dtype));
  std::vector<Superstep> steps;
  if (out.numElements() > 0) steps = convSteps(lowerer, g, plan, dt, partials, omap);
  const double flops =
      2.0 * static_cast<double>(G) * static_cast<double>(M) * static_cast<double>(Ng) * static_cast<double>(K);
  lowerer.emitExecute(ctx, std::move(kernel), std::move(steps), {o}, isFloat(dt) ? flops : 0);
  return {o};
}

}  // namespace ipu
