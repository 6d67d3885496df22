// Control flow as a program tree: while -> RepeatWhileTrue (trip count decided at run time), case -> Switch
// (an out-of-range index runs the last branch), call -> inlined (each call site gets its own values).
#include <algorithm>

#include "ipu/cost_model.h"
#include "ipu/dtype.h"
#include "ipu/handlers.h"
#include "ipu/lowering.h"

namespace ipu {

namespace {

bool sameLayout(const TensorType& a, const TensorType& b) {
  return a.dtype == b.dtype && a.numElements() == b.numElements();
}

// Whether an Execute node in `node`'s tree computes `result` in place over `operand` (Node::in_place), or correctly
// in the same storage (Node::same_index).
bool computesInPlace(const Node& node, int operand, int result) {
  for (const auto* pairs : {&node.in_place, &node.same_index})
    for (const auto& p : *pairs)
      if (p.first == operand && p.second == result) return true;
  for (const auto& c : node.children)
    if (computesInPlace(*c, operand, result)) return true;
  return false;
}

Cost decisionCost(const DeviceDescription& device) {
  Cost c;
  c.compute = cost::kControlCycles;
  c.sync = device.sync_cycles;  // the predicate / index is broadcast to every tile
  return c;
}

// The IPU updates a loop-carried tensor in place: the body's new value is written over the old one when nothing
// reads the old one afterwards, and the update copy then moves nothing. On the host the new value's slot shares the
// carried slot's bytes (Slot::share) when, in this iteration, every read of the carried value comes before the new
// value's first write, or at that write by a kernel that computes in place (Node::in_place, same_index). Only arena
// values the body itself defines qualify, each for one carried value, and only for a carried value that is not itself
// the new value of another (a shifted carry, (c1, c2) <- (c2, 0): the update copy reads c2 after the body wrote the 0).
// The copy keeps its cost: estimates do not change.
void shareCarriedStorage(Graph* graph, const std::vector<int>& carried, const std::vector<int>& next,
                         int64_t body_first, const Node& body) {
  std::vector<Slot>& slots = graph->slots;
  for (size_t i = 0; i < carried.size(); ++i) {
    const int c = carried[i], v = next[i];
    Slot& nv = slots[static_cast<size_t>(v)];
    if (nv.storage != Slot::Storage::Arena || nv.share >= 0 || nv.def < body_first || nv.type.numBytes() == 0) continue;
    if (std::count(next.begin(), next.end(), v) != 1 || std::count(carried.begin(), carried.end(), v) != 0) continue;
    if (std::count(next.begin(), next.end(), c) != 0) continue;  // read by the update copy, after v is written
    const int64_t last_read = slots[static_cast<size_t>(c)].last_use;  // before the update copy is emitted
    if (last_read > nv.def || (last_read == nv.def && !computesInPlace(body, c, v))) continue;
    nv.share = c;
  }
}

}  // namespace

std::vector<int> lowerCall(Lowerer& lowerer, OpContext& ctx) {
  const std::string callee = attrString(*ctx.op, "callee");
  const Function* fn = lowerer.function(callee);
  if (!fn) lowerer.invalid(ctx, "calls '" + callee + "', which is not among the program's functions");
  for (const std::string& active : lowerer.callStack())
    if (active == callee)
      lowerer.unimplemented(ctx, "recursive call to '" + callee + "' (the IPU has no call stack for recursion)");
  const Region& region = fn->region;
  if (region.params.size() != ctx.in.size())
    lowerer.invalid(ctx, "'" + callee + "' takes " + std::to_string(region.params.size()) + " arguments");
  Env env;
  for (size_t i = 0; i < region.params.size(); ++i) {
    const ValueDecl& p = region.params[i];
    TensorType t;
    t.dtype = lowerer.elementType(p.dtype, "parameter " + std::to_string(i) + " of " + callee);
    t.shape = p.shape;
    if (t.dtype != ctx.in_types[i].dtype || t.shape != ctx.in_types[i].shape)
      lowerer.invalid(
          ctx, "argument " + std::to_string(i) + " does not match parameter " + p.mlirType() + " of '" + callee + "'");
    env.slots[p.id] = ctx.in[i];  // the callee reads the caller's values in place
    env.decls[p.id] = &p;
  }
  lowerer.callStack().push_back(callee);
  std::vector<int> results = lowerer.lowerRegion(region, &env, ctx.seq);
  lowerer.callStack().pop_back();
  if (results.size() != ctx.out_types.size())
    lowerer.invalid(ctx, "'" + callee + "' returns " + std::to_string(results.size()) + " values");
  for (size_t i = 0; i < results.size(); ++i)
    if (!sameLayout(lowerer.graph().slots[static_cast<size_t>(results[i])].type, ctx.out_types[i]))
      lowerer.invalid(ctx,
                      "result " + std::to_string(i) + " of '" + callee + "' does not match the call's result type");
  return results;
}

std::vector<int> lowerWhile(Lowerer& lowerer, OpContext& ctx) {
  Env* env = ctx.env;
  const Op& op = *ctx.op;
  const size_t n = ctx.in.size();
  if (op.regions.size() != 2) lowerer.invalid(ctx, "while needs a cond and a body region");
  const Region& cond = op.regions[0];
  const Region& body = op.regions[1];
  if (cond.params.size() != n || body.params.size() != n || body.results.size() != n || ctx.out_types.size() != n)
    lowerer.invalid(ctx, "cond and body must take, and the body return, one value per loop-carried value");
  // Loop-carried values live in slots of their own, written by the init copy and by each iteration's update.
  std::vector<int> carried;
  std::vector<std::pair<int, int>> init;
  for (size_t i = 0; i < n; ++i) {
    if (ctx.out_types[i].dtype != ctx.in_types[i].dtype || ctx.out_types[i].shape != ctx.in_types[i].shape)
      lowerer.invalid(ctx, "result " + std::to_string(i) + " does not have its initial value's type");
    carried.push_back(lowerer.newSlotLike(ctx.in_types[i], ctx.in[i]));
    init.emplace_back(ctx.in[i], carried.back());
  }
  lowerer.emitCopy(ctx.seq, init, "while.init");

  auto bind = [&](const Region& r, Node* seq) {
    for (size_t i = 0; i < n; ++i) {
      const ValueDecl& p = r.params[i];
      if (p.dtype != dtypeName(ctx.in_types[i].dtype) || p.shape != ctx.in_types[i].shape)
        lowerer.invalid(ctx, "region parameter " + std::to_string(i) + " (" + p.mlirType() +
                                 ") does not match the loop-carried value");
      if (env->slots.count(p.id))
        lowerer.invalid(ctx, "region parameter %" + std::to_string(p.id) + " reuses a value id");
      env->slots[p.id] = carried[i];
      env->decls[p.id] = &p;
    }
    return lowerer.lowerRegion(r, env, seq);
  };

  auto loop = std::make_unique<Node>();
  loop->kind = NodeKind::RepeatWhileTrue;
  loop->name = op.mlir;
  loop->cost = decisionCost(lowerer.device());
  loop->children.push_back(std::make_unique<Node>());
  loop->children.push_back(std::make_unique<Node>());
  const int64_t first = lowerer.currentStep();
  std::vector<int> pred = bind(cond, loop->children[0].get());
  if (pred.size() != 1) lowerer.invalid(ctx, "the cond region must return one value");
  const TensorType& pt = lowerer.graph().slots[static_cast<size_t>(pred[0])].type;
  if (pt.dtype != DType::Bool || pt.numElements() != 1)
    lowerer.invalid(ctx, "the cond region must return a bool scalar");
  loop->slot = pred[0];
  lowerer.use(pred[0]);
  const int64_t body_first = lowerer.currentStep();
  std::vector<int> next = bind(body, loop->children[1].get());
  std::vector<std::pair<int, int>> update;
  for (size_t i = 0; i < n; ++i) {
    if (!sameLayout(lowerer.graph().slots[static_cast<size_t>(next[i])].type, ctx.in_types[i]))
      lowerer.invalid(ctx, "body result " + std::to_string(i) + " does not have the loop-carried value's type");
    update.emplace_back(next[i], carried[i]);
  }
  shareCarriedStorage(&lowerer.graph(), carried, next, body_first, *loop->children[1]);
  lowerer.emitCopy(loop->children[1].get(), update, "while.update");
  lowerer.graph().loops.emplace_back(first, lowerer.currentStep() - 1);
  ctx.seq->children.push_back(std::move(loop));
  return carried;
}

std::vector<int> lowerCase(Lowerer& lowerer, OpContext& ctx) {
  Env* env = ctx.env;
  const Op& op = *ctx.op;
  if (!ctx.in_types[0].shape.empty() || !isInteger(ctx.in_types[0].dtype))
    lowerer.invalid(ctx, "the index must be an integer scalar");
  if (op.regions.empty()) lowerer.invalid(ctx, "case needs at least one branch");
  std::vector<int> outs;
  for (const TensorType& t : ctx.out_types) outs.push_back(lowerer.newSlot(t));
  auto node = std::make_unique<Node>();
  node->kind = NodeKind::Switch;
  node->name = op.mlir;
  node->slot = ctx.in[0];
  node->cost = decisionCost(lowerer.device());
  lowerer.use(ctx.in[0]);
  for (size_t b = 0; b < op.regions.size(); ++b) {
    const Region& r = op.regions[b];
    if (!r.params.empty()) lowerer.invalid(ctx, "case branches take no parameters");
    auto seq = std::make_unique<Node>();
    seq->name = "branch " + std::to_string(b);
    std::vector<int> res = lowerer.lowerRegion(r, env, seq.get());
    if (res.size() != outs.size())
      lowerer.invalid(ctx, "branch " + std::to_string(b) + " returns the wrong number of values");
    std::vector<std::pair<int, int>> copies;
    for (size_t i = 0; i < res.size(); ++i) {
      if (!sameLayout(lowerer.graph().slots[static_cast<size_t>(res[i])].type, ctx.out_types[i]))
        lowerer.invalid(ctx, "branch " + std::to_string(b) + " result " + std::to_string(i) + " has the wrong type");
      copies.emplace_back(res[i], outs[i]);
    }
    lowerer.emitCopy(seq.get(), copies, "case.result");
    node->children.push_back(std::move(seq));
  }
  ctx.seq->children.push_back(std::move(node));
  return outs;
}

}  // namespace ipu
