// The lowering driver: checks each op against the registry, dispatches to its family, and keeps the bookkeeping
// (slots, steps, liveness, exchange and vertex accounting) that all families share.
#include "ipu/lowering.h"

#include <algorithm>
#include <unordered_set>

#include "ipu/cost_model.h"
#include "ipu/dtype.h"
#include "ipu/engine.h"
#include "ipu/fusion.h"
#include "ipu/handlers.h"
#include "ipu/memory.h"

namespace ipu {

namespace {
// Why an fp8 value cannot be on this chip, and what to do.
std::string noFloat8Advice(DType d, const std::string& chip) {
  const std::string name = "float8_" + std::string(dtypeName(d)).substr(2);  // f8e4m3fn -> float8_e4m3fn
  return chip + " has no fp8: Poplar's quarter type (" + name +
         ") needs an IPU of architecture 21 (the C600's Mk2 IPU with FP8 support: JAX_IPU_MODEL_VERSION=ipu21); on " +
         chip + ", convert to float16 or bfloat16 first";
}
}  // namespace

namespace {
std::string atLoc(const Op* op) { return op && !op->loc.empty() ? " (at " + op->loc + ")" : ""; }

// Gives the nodes an op was lowered to its source location, and its name where they have none (nodes of nested ops
// have theirs already).
void stamp(Node* node, const Op& op) {
  if (node->loc.empty()) node->loc = op.loc;
  if (node->name.empty()) node->name = op.mlir;
  for (auto& child : node->children) stamp(child.get(), op);
}
}  // namespace

Lowerer::Lowerer(const Program& program, const DeviceDescription& device, const CompileOptions& options, Graph* graph)
    : program_(program), device_(device), options_(options), graph_(graph) {
  graph_->device = device;
  graph_->vertex_bytes.assign(static_cast<size_t>(device.num_tiles), 0);
  graph_->codelets.assign(static_cast<size_t>(device.num_tiles), {});
  graph_->root = std::make_unique<Node>();
  graph_->root->name = "main";
}

void Lowerer::invalid(const OpContext& ctx, const std::string& why) const {
  throw Error(ErrorCode::InvalidArgument, "Malformed IPU program: " + ctx.signature + ": " + why + atLoc(ctx.op));
}

ScalarProgram Lowerer::compileBody(const OpContext& ctx, const Region& region, const std::vector<DType>& params,
                                   const std::vector<DType>& results, const std::string& where,
                                   bool name_unimplemented) const {
  try {
    return ScalarProgram::compile(region, params, results, numerics());
  } catch (const Error& e) {
    if (e.code() == ErrorCode::Unimplemented) unimplemented(ctx, (name_unimplemented ? where + ": " : "") + e.what());
    invalid(ctx, where + ": " + e.what());
  }
}

void Lowerer::unimplemented(const OpContext& ctx, const std::string& why) const {
  throw Error(ErrorCode::Unimplemented,
              "Unsupported operation " + ctx.signature + " on the IPU: " + why + atLoc(ctx.op));
}

int Lowerer::newSlot(const TensorType& type) {
  Slot s;
  s.type = type;
  s.mapping = TileMapping::linear(type.numElements(), dtypeSize(type.dtype), device_.num_tiles);
  graph_->slots.push_back(s);
  return static_cast<int>(graph_->slots.size() - 1);
}

int Lowerer::newSlotLike(const TensorType& type, int like) {
  int slot = newSlot(type);
  const Slot& model = graph_->slots[static_cast<size_t>(like)];
  if (model.mapping.num_elements == type.numElements())
    graph_->slots[static_cast<size_t>(slot)].mapping = model.mapping;
  return slot;
}

int Lowerer::newConstant(const TensorType& type, std::vector<uint8_t> bytes) {
  Slot s;
  s.type = type;
  s.mapping = TileMapping::linear(type.numElements(), dtypeSize(type.dtype), device_.num_tiles);
  s.storage = Slot::Storage::Constant;
  s.index = static_cast<int>(graph_->constants.size());
  s.always_live = true;
  graph_->constants.push_back(std::move(bytes));
  graph_->slots.push_back(s);
  return static_cast<int>(graph_->slots.size() - 1);
}

void Lowerer::use(int slot) {
  Slot& s = graph_->slots[static_cast<size_t>(slot)];
  s.last_use = std::max(s.last_use, currentStep());
}

void Lowerer::define(int slot) {
  Slot& s = graph_->slots[static_cast<size_t>(slot)];
  if (s.def < 0) s.def = currentStep();
  s.last_use = std::max(s.last_use, currentStep());
}

void Lowerer::exchangeSameIndex(std::vector<int64_t>* recv, const TileMapping& work, int slot) const {
  const Slot& s = graph_->slots[static_cast<size_t>(slot)];
  if (s.mapping.sameAs(work)) return;  // all local
  const int64_t eb = static_cast<int64_t>(dtypeSize(s.type.dtype));
  recv->resize(static_cast<size_t>(device_.num_tiles), 0);
  for (int t = 0; t < work.tilesUsed(); ++t) {
    const int64_t b = work.begin(t), e = work.end(t);
    (*recv)[static_cast<size_t>(t)] += (e - b - s.mapping.overlap(t, b, e)) * eb;
  }
}

void Lowerer::exchangeScalar(std::vector<int64_t>* recv, const TileMapping& work, int slot) const {
  const Slot& s = graph_->slots[static_cast<size_t>(slot)];
  recv->resize(static_cast<size_t>(device_.num_tiles), 0);
  for (int t = 1; t < work.tilesUsed(); ++t)
    if (work.elementsOn(t) > 0) (*recv)[static_cast<size_t>(t)] += static_cast<int64_t>(dtypeSize(s.type.dtype));
}

void Lowerer::exchangeStrided(std::vector<int64_t>* recv, const TileMapping& work, int slot,
                              const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                              int64_t base) const {
  if (options_.exchange_per_element) {  // the per-element count, literally: the reference of the tests
    exchangeGather(recv, work, slot, [&](int64_t i) {
      int64_t src = base;
      for (size_t d = shape.size(); d-- > 0;) {
        src += (i % shape[d]) * strides[d];
        i /= shape[d];
      }
      return src;
    });
    return;
  }
  const Slot& s = graph_->slots[static_cast<size_t>(slot)];
  const int64_t eb = static_cast<int64_t>(dtypeSize(s.type.dtype)), total = s.mapping.num_elements;
  recv->resize(static_cast<size_t>(device_.num_tiles), 0);
  const StridedMap map(shape, strides, base);
  for (int t = 0; t < work.tilesUsed(); ++t) {
    const int64_t lo = s.mapping.begin(t), hi = s.mapping.end(t);
    int64_t remote = 0;  // distinct elements read that live on another tile (or nowhere: out of range)
    map.forEachRun(work.begin(t), work.end(t), [&](int64_t first, int64_t step, int64_t count) {
      remote += countInRange(first, step, count, 0, total) - countInRange(first, step, count, lo, hi);
    });
    (*recv)[static_cast<size_t>(t)] += remote * eb;
  }
}

void Lowerer::exchangeGather(std::vector<int64_t>* recv, const TileMapping& work, int slot,
                             const std::function<int64_t(int64_t)>& src) const {
  const Slot& s = graph_->slots[static_cast<size_t>(slot)];
  const int64_t eb = static_cast<int64_t>(dtypeSize(s.type.dtype));
  recv->resize(static_cast<size_t>(device_.num_tiles), 0);
  // The distinct remote sources of each tile: sorted per tile, so that the cost follows the output, not the operand
  // (a gather of a few rows from a large table does not touch every element of the table).
  std::vector<int64_t> remote;
  for (int t = 0; t < work.tilesUsed(); ++t) {
    remote.clear();
    for (int64_t i = work.begin(t); i < work.end(t); ++i) {
      const int64_t j = src(i);
      if (j >= 0 && j < s.mapping.num_elements && s.mapping.tileOf(j) != t) remote.push_back(j);
    }
    std::sort(remote.begin(), remote.end());
    (*recv)[static_cast<size_t>(t)] += (std::unique(remote.begin(), remote.end()) - remote.begin()) * eb;
  }
}

Superstep Lowerer::superstep(const std::string& codelet, const TileMapping& work, const std::vector<int64_t>& recv,
                             const std::function<uint64_t(int, int64_t)>& compute_cycles, bool computes) {
  Superstep step;
  step.name = codelet;
  step.work = work;
  step.computes = computes;
  int codelet_id = -1;
  for (size_t i = 0; i < graph_->codelet_names.size(); ++i)
    if (graph_->codelet_names[i] == codelet) codelet_id = static_cast<int>(i);
  if (codelet_id < 0) {
    graph_->codelet_names.push_back(codelet);
    codelet_id = static_cast<int>(graph_->codelet_names.size() - 1);
  }
  const int tiles = std::min(device_.num_tiles, std::max(work.tilesUsed(), static_cast<int>(recv.size())));
  uint64_t worst = 0;
  bool any = false;
  for (int t = 0; t < tiles; ++t) {
    const int64_t elems = t < work.tilesUsed() ? work.elementsOn(t) : 0;
    const int64_t bytes = static_cast<size_t>(t) < recv.size() ? recv[static_cast<size_t>(t)] : 0;
    if (elems == 0 && bytes == 0) continue;
    const uint64_t c = elems > 0 ? compute_cycles(t, elems) : 0;
    const uint64_t x = cost::exchange(bytes, device_.exchange_bytes_per_cycle);
    if (!any || c + x > worst) {
      worst = c + x;
      step.cost.compute = c;
      step.cost.exchange = x;
      any = true;
    }
    if (elems > 0) {
      graph_->vertex_bytes[static_cast<size_t>(t)] += cost::kVertexStateBytes;
      graph_->codelets[static_cast<size_t>(t)].insert(codelet_id);
    }
    if (bytes > 0) pending_.transient.emplace_back(t, bytes);
  }
  step.cost.sync = device_.sync_cycles;
  return step;
}

Node* Lowerer::emitExecute(OpContext& ctx, std::unique_ptr<Kernel> kernel, std::vector<Superstep> supersteps,
                           const std::vector<int>& results, double flops) {
  for (int slot : ctx.in) use(slot);
  for (int slot : results) define(slot);
  graph_->steps.push_back(std::move(pending_));
  pending_ = StepRecord();
  auto node = std::make_unique<Node>();
  node->kind = NodeKind::Execute;
  node->name = ctx.op ? ctx.op->mlir : "execute";
  node->kernel = std::move(kernel);
  node->supersteps = std::move(supersteps);
  node->flops = flops;
  auto wide = [&](int slot) { return isEmulated64(graph_->slots[static_cast<size_t>(slot)].type.dtype); };
  node->emulated_64bit =
      std::any_of(ctx.in.begin(), ctx.in.end(), wide) || std::any_of(results.begin(), results.end(), wide);
  Node* raw = node.get();
  ctx.seq->children.push_back(std::move(node));
  return raw;
}

Node* Lowerer::emitCopy(Node* seq, const std::vector<std::pair<int, int>>& copies, const std::string& name) {
  auto node = std::make_unique<Node>();
  node->kind = NodeKind::Copy;
  node->name = name;
  std::unordered_set<int> dsts;
  for (const auto& c : copies)
    if (c.first != c.second) {
      node->copies.push_back(c);
      node->copy_bytes.push_back(graph_->slots[static_cast<size_t>(c.first)].type.numBytes());
      dsts.insert(c.second);
    }
  bool overlap = false;
  for (const auto& c : node->copies) overlap = overlap || dsts.count(c.first);
  if (overlap)
    for (const auto& c : node->copies) node->temps.push_back(newSlot(graph_->slots[static_cast<size_t>(c.first)].type));
  // Cost: an on-tile copy of each tile's share, plus the exchange when source and destination are mapped apart.
  std::vector<int64_t> recv;
  std::vector<int64_t> bytes(static_cast<size_t>(device_.num_tiles), 0);
  for (const auto& c : node->copies) {
    const Slot& d = graph_->slots[static_cast<size_t>(c.second)];
    exchangeSameIndex(&recv, d.mapping, c.first);
    for (int t = 0; t < d.mapping.tilesUsed(); ++t)
      bytes[static_cast<size_t>(t)] += d.mapping.elementsOn(t) * static_cast<int64_t>(dtypeSize(d.type.dtype));
  }
  uint64_t worst = 0;
  for (int t = 0; t < device_.num_tiles; ++t) {
    const uint64_t c =
        bytes[static_cast<size_t>(t)] ? cost::copy(bytes[static_cast<size_t>(t)], device_.num_worker_contexts) : 0;
    const uint64_t x =
        recv.empty() ? 0 : cost::exchange(recv[static_cast<size_t>(t)], device_.exchange_bytes_per_cycle);
    if (c + x > worst) {
      worst = c + x;
      node->cost.compute = c;
      node->cost.exchange = x;
    }
    if (!recv.empty() && recv[static_cast<size_t>(t)] > 0)
      pending_.transient.emplace_back(t, recv[static_cast<size_t>(t)]);
  }
  node->cost.sync = node->copies.empty() ? 0 : device_.sync_cycles;
  for (const auto& c : node->copies) use(c.first);
  for (const auto& c : node->copies) define(c.second);
  for (int t : node->temps) define(t);
  graph_->steps.push_back(std::move(pending_));
  pending_ = StepRecord();
  Node* raw = node.get();
  seq->children.push_back(std::move(node));
  return raw;
}

std::vector<int> Lowerer::lowerRegion(const Region& region, Env* env, Node* seq) {
  const FusionPlan plan = planFusion(region, options_.fusion);
  for (size_t i = 0; i < region.body.size(); ++i) {
    const int g = plan.group_of[i];
    if (g == FusionPlan::kView) continue;  // lowered in each group that reads it
    if (g < 0) lowerOp(region.body[i], env, seq);
    else if (plan.groups[static_cast<size_t>(g)].back() == i)
      lowerFusedGroup(region, plan.groups[static_cast<size_t>(g)], env, seq);
    // other members are lowered with their group's root, the group's last op
  }
  std::vector<int> results;
  for (int64_t id : region.results) {
    auto it = env->slots.find(id);
    if (it == env->slots.end())
      throw Error(ErrorCode::InvalidArgument,
                  "Malformed IPU program: a region returns %" + std::to_string(id) + ", which is not defined");
    results.push_back(it->second);
  }
  return results;
}

void Lowerer::lowerOp(const Op& op, Env* env, Node* seq) {
  OpContext ctx = prepareOp(op, env, seq);
  const size_t first_node = seq->children.size();
  op_scratch_ = 0;
  std::vector<int> results = lowerWithHandler(ctx);
  for (size_t i = first_node; i < seq->children.size(); ++i) stamp(seq->children[i].get(), op);
  bindResults(ctx, results, env);
}

void Lowerer::lowerFusedGroup(const Region& region, const std::vector<size_t>& members, Env* env, Node* seq) {
  std::vector<OpContext> ctxs;
  for (size_t i : members) {
    ctxs.push_back(prepareOp(region.body[i], env, seq));
    if (i == members.back()) continue;
    auto bound = env->slots.find(region.body[i].results[0].id);
    if (bound == env->slots.end() || bound->second != -1) bindResults(ctxs.back(), {-1}, env);
    // (else a broadcast viewed by an earlier group too: FusionPlan::kView)
  }
  const size_t first_node = seq->children.size();
  op_scratch_ = 0;
  const int result = lowerElementwiseGroup(ctxs);
  for (size_t i = first_node; i < seq->children.size(); ++i) stamp(seq->children[i].get(), *ctxs.back().op);
  bindResults(ctxs.back(), {result}, env);
}

OpContext Lowerer::prepareOp(const Op& op, Env* env, Node* seq) {
  OpContext ctx;
  ctx.op = &op;
  ctx.seq = seq;
  ctx.env = env;
  std::vector<const ValueDecl*> decls;
  for (int64_t id : op.operands) {
    auto it = env->slots.find(id);
    if (it == env->slots.end())
      throw Error(ErrorCode::InvalidArgument, "Malformed IPU program: operand %" + std::to_string(id) + " of " +
                                                  op.mlir + " is not defined before its use" + atLoc(&op));
    ctx.in.push_back(it->second);
    decls.push_back(env->decls.at(id));
  }
  ctx.signature = opSignature(op, decls);
  // Element types first: an unsupported dtype is the most useful thing to tell the user.
  std::vector<const ValueDecl*> all = decls;
  for (const ValueDecl& r : op.results) all.push_back(&r);
  for (const ValueDecl* d : all) elementType(d->dtype, ctx.signature, atLoc(&op));
  for (const ValueDecl* d : decls) {
    TensorType t;
    parseDType(d->dtype, &t.dtype);
    t.shape = d->shape;
    ctx.in_types.push_back(t);
  }
  for (const ValueDecl& d : op.results) {
    TensorType t;
    parseDType(d.dtype, &t.dtype);
    t.shape = d.shape;
    ctx.out_types.push_back(t);
  }
  ctx.info = findOp(op.op);
  if (!ctx.info) unimplemented(ctx, "the emulator does not implement " + op.mlir);
  const int n = static_cast<int>(op.operands.size());
  if (n < ctx.info->min_operands || (ctx.info->max_operands >= 0 && n > ctx.info->max_operands))
    invalid(ctx, "wrong number of operands (" + std::to_string(n) + ")");
  const TensorType* checked = nullptr;
  switch (ctx.info->role) {
    case TypeRole::Operand0: checked = n > 0 ? &ctx.in_types[0] : nullptr; break;
    case TypeRole::Operand1: checked = n > 1 ? &ctx.in_types[1] : nullptr; break;
    case TypeRole::Result0: checked = ctx.out_types.empty() ? nullptr : &ctx.out_types[0]; break;
    case TypeRole::None: break;
  }
  if (ctx.info->role == TypeRole::Result0 && !checked) invalid(ctx, "the op must have a result");
  if (checked && !(ctx.info->dtypes & dtypeBit(checked->dtype)))
    unimplemented(ctx, std::string(ctx.info->name) + " is implemented for " + dtypeList(ctx.info->dtypes));
  return ctx;
}

void Lowerer::bindResults(const OpContext& ctx, const std::vector<int>& results, Env* env) {
  const Op& op = *ctx.op;
  if (results.size() != op.results.size()) invalid(ctx, "wrong number of results");
  for (size_t i = 0; i < results.size(); ++i) {
    const int64_t id = op.results[i].id;
    if (env->slots.count(id)) invalid(ctx, "value %" + std::to_string(id) + " is defined twice");
    env->slots[id] = results[i];
    env->decls[id] = &op.results[i];
  }
}

std::vector<int> Lowerer::lowerWithHandler(OpContext& ctx) {
  // Complex arithmetic (an elementwise op on c64 or c128 values) is computed on pairs of f32 or f64 by complex.cc,
  // whatever the op.
  if (ctx.info->family != OpFamily::Complex && isComplexOp(ctx)) return lowerComplexElementwise(*this, ctx);
  return ctx.info->lower(*this, ctx);
}

DType Lowerer::elementType(const std::string& name, const std::string& where, const std::string& after) const {
  DType d;
  std::string why;
  if (!parseDType(name, &d) || (isEmulated64(d) && !options_.emulate_64bit)) why = unsupportedDTypeAdvice(name);
  else if (isFloat8(d) && device_.amp_f8_macs_per_cycle == 0) why = noFloat8Advice(d, device_.version);
  if (!why.empty())
    throw Error(ErrorCode::Unimplemented, "Unsupported element type " + name + " in " + where + " : " + why + after);
  return d;
}

void Lowerer::lowerEntry() {
  const Function* entry = program_.find(program_.entry);
  Env env;
  const Region& region = entry->region;
  for (size_t i = 0; i < region.params.size(); ++i) {
    const ValueDecl& p = region.params[i];
    Slot s;
    s.type.dtype = elementType(p.dtype, "parameter " + std::to_string(i) + " (" + p.mlirType() + ") of " + entry->name);
    s.type.shape = p.shape;
    s.mapping = TileMapping::linear(s.type.numElements(), dtypeSize(s.type.dtype), device_.num_tiles);
    s.storage = Slot::Storage::Param;
    s.index = static_cast<int>(i);
    s.always_live = true;
    graph_->slots.push_back(s);
    const int slot = static_cast<int>(graph_->slots.size() - 1);
    if (env.slots.count(p.id))
      throw Error(ErrorCode::InvalidArgument, "Malformed IPU program: parameter %" + std::to_string(p.id) + " of " +
                                                  entry->name + " is declared twice");
    env.slots[p.id] = slot;
    env.decls[p.id] = &p;
    graph_->param_slots.push_back(slot);
  }
  call_stack_.push_back(entry->name);
  graph_->result_slots = lowerRegion(region, &env, graph_->root.get());
  for (int slot : graph_->result_slots) graph_->slots[static_cast<size_t>(slot)].always_live = true;
  for (int64_t id : region.results) {
    const ValueDecl* d = env.decls.at(id);
    TensorType t;
    parseDType(d->dtype, &t.dtype);
    t.shape = d->shape;
    graph_->result_types.push_back(t);
  }
  numberSteps(graph_->root.get());
  planRun(graph_->root.get());
  layoutArena(graph_);
}

void Lowerer::numberSteps(Node* node) {
  const bool step = node->kind != NodeKind::Sequence && !(node->kind == NodeKind::Copy && node->copies.empty());
  if (step) {
    node->id = static_cast<int>(graph_->step_nodes.size());
    graph_->step_nodes.push_back(node);
  }
  for (auto& child : node->children) numberSteps(child.get());
}

}  // namespace ipu
