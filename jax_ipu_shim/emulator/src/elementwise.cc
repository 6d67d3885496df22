// Elementwise ops (unary, binary, compare, select, clamp, convert): one compute set over the result's tile
// mapping, which clones the main operand's, so that same-shaped operands need no exchange. The per-element
// semantics live in ipu/scalar_ops.h, shared with the reduce kernels and the reduce-body interpreter.
#include "ipu/cost_model.h"
#include "ipu/dtype.h"
#include "ipu/kernels.h"
#include "ipu/lowering.h"
#include "ipu/scalar_ops.h"

namespace ipu {

std::vector<int> Lowerer::lowerElementwise(OpContext& ctx) {
  const OpKind kind = ctx.info->kind;
  const OpFamily family = ctx.info->family;
  if (ctx.out_types.size() != 1) invalid(ctx, "expected one result");
  const TensorType& out = ctx.out_types[0];
  const size_t main = (family == OpFamily::Select || family == OpFamily::Clamp) ? 1 : 0;
  const DType dt = ctx.in_types[main].dtype;
  // Shapes: every operand has the result's shape, except that select's predicate and clamp's bounds may be scalars.
  std::vector<int64_t> strides(ctx.in.size(), 1);
  for (size_t i = 0; i < ctx.in.size(); ++i) {
    const bool may_be_scalar = (family == OpFamily::Select && i == 0) || (family == OpFamily::Clamp && i != 1);
    if (may_be_scalar && ctx.in_types[i].shape.empty()) {
      strides[i] = 0;
      continue;
    }
    if (ctx.in_types[i].shape != out.shape) invalid(ctx, "operand " + std::to_string(i) + " does not have the result's shape");
  }
  // Element types.
  DType expected_out = dt;
  if (family == OpFamily::Compare || kind == OpKind::IsFinite) expected_out = DType::Bool;
  if (family == OpFamily::Convert) expected_out = out.dtype;
  if (out.dtype != expected_out) invalid(ctx, "the result's element type should be " + std::string(dtypeName(expected_out)));
  for (size_t i = 0; i < ctx.in.size(); ++i) {
    const DType want = (family == OpFamily::Select && i == 0) ? DType::Bool : dt;
    if (family != OpFamily::Convert && ctx.in_types[i].dtype != want)
      invalid(ctx, "operand " + std::to_string(i) + " should have element type " + dtypeName(want));
  }

  const int o = newSlotLike(out, ctx.in[main]);
  std::unique_ptr<Kernel> kernel;
  std::string codelet = std::string(ctx.info->name) + "<" + dtypeName(dt) + ">";
  const std::vector<int>& in = ctx.in;
  switch (family) {
    case OpFamily::Unary:
      scalar::visitUnary(kind, dt, [&](auto f, auto a, auto r) {
        kernel = map1<typename decltype(a)::type, typename decltype(r)::type>(in[0], o, f);
      });
      break;
    case OpFamily::Binary:
      scalar::visitBinary(kind, dt, [&](auto f, auto t) {
        using T = typename decltype(t)::type;
        kernel = map2<T, T, T>(in[0], in[1], o, f);
      });
      break;
    case OpFamily::Compare: {
      scalar::Direction d;
      const std::string dir = attrString(*ctx.op, "comparison_direction");
      if (!scalar::parseDirection(dir, &d)) invalid(ctx, "unknown comparison_direction '" + dir + "'");
      const std::string type = attrString(*ctx.op, "compare_type", "NOTYPE");
      scalar::visitCompare(d, type, dt, [&](auto f, auto t) {
        using T = typename decltype(t)::type;
        kernel = map2<T, T, uint8_t>(in[0], in[1], o, f);
      });
      codelet = "compare" + dir + "<" + dtypeName(dt) + ">";
      break;
    }
    case OpFamily::Select:
      scalar::visitSelect(dt, [&](auto f, auto t) {
        using T = typename decltype(t)::type;
        kernel = map3<uint8_t, T, T, T>(in[0], in[1], in[2], o, strides[0], 1, 1, f);
      });
      break;
    case OpFamily::Clamp:
      scalar::visitClamp(dt, [&](auto f, auto t) {
        using T = typename decltype(t)::type;
        kernel = map3<T, T, T, T>(in[0], in[1], in[2], o, strides[0], 1, strides[2], f);
      });
      break;
    case OpFamily::Convert:
      scalar::visitConvert(dt, out.dtype, [&](auto f, auto a, auto r) {
        kernel = map1<typename decltype(a)::type, typename decltype(r)::type>(in[0], o, f);
      });
      codelet = std::string("cast<") + dtypeName(dt) + "," + dtypeName(out.dtype) + ">";
      break;
    default: break;
  }
  if (!kernel) unimplemented(ctx, std::string(ctx.info->name) + " is implemented for " + dtypeList(ctx.info->dtypes));

  const TileMapping work = graph().slots[static_cast<size_t>(o)].mapping;
  std::vector<int64_t> recv;
  for (size_t i = 0; i < ctx.in.size(); ++i) {
    if (strides[i] == 0 && out.numElements() > 0) exchangeScalar(&recv, work, ctx.in[i]);
    else exchangeSameIndex(&recv, work, ctx.in[i]);
  }
  std::vector<Superstep> steps;
  const int workers = device().num_worker_contexts;
  if (work.num_elements > 0) {
    steps.push_back(superstep(codelet, work, recv, [&](int, int64_t n) { return cost::elementwise(kind, dt, n, workers); }));
    const bool heavy = family == OpFamily::Unary && isFloat(dt) && kind != OpKind::Abs && kind != OpKind::Negate;
    steps.back().cost_weight = heavy ? 8 : 1;
  }
  const double flops = isFloat(dt) ? cost::flopsPerElement(kind) * static_cast<double>(out.numElements()) : 0;
  emitExecute(ctx, std::move(kernel), std::move(steps), {o}, flops);
  return {o};
}

}  // namespace ipu
