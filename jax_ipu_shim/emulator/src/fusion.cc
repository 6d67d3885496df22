// The fusion pass: which ops of a region become one fused elementwise compute set (see ipu/fusion.h).
#include "ipu/fusion.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "ipu/dtype.h"
#include "ipu/emulator.h"
#include "ipu/registry.h"

namespace ipu {

namespace {

constexpr size_t kMaxGroupOps = 48;  // keeps a fused vertex's registers (one block per value) within L1

enum class Fusable { No, Elementwise, Broadcast };

// `dtype_of`: the dtypes of the values defined in the region (params and results); captured values are not in it.
Fusable fusable(const Op& op, const std::unordered_map<int64_t, std::string>& dtype_of) {
  const OpInfo* info = findOp(op.op);
  if (!info || op.results.size() != 1 || !op.regions.empty()) return Fusable::No;
  // c64 and c128 are computed by the complex kernels (complex.cc), not the fused vertex: an op with a complex result
  // or operand stays on its own. Binary, select and clamp operands have the result's type; unary, compare and convert
  // may read a complex value into a real result (abs, eq, real part), so their operand's type must be known to be real.
  // fp8 likewise: its conversions are vertices of their own (as popops' casts of quarter are); so are the sub-byte
  // integers'.
  auto apart = [](const std::string& dtype) {
    DType d;
    return parseDType(dtype, &d) && (isComplex(d) || isFloat8(d) || isSubByte(d));
  };
  if (apart(op.results[0].dtype)) return Fusable::No;
  if (isElementwiseFamily(info->family)) {
    if (info->family == OpFamily::Unary || info->family == OpFamily::Compare || info->family == OpFamily::Convert)
      for (int64_t id : op.operands) {
        auto it = dtype_of.find(id);
        if (it == dtype_of.end() || apart(it->second)) return Fusable::No;
      }
    return Fusable::Elementwise;
  }
  if (info->kind == OpKind::BroadcastInDim && op.operands.size() == 1 && hasAttr(op, "broadcast_dimensions"))
    return Fusable::Broadcast;
  return Fusable::No;
}

// An f32 multiply read only by an add or subtract: one fused multiply-add in the vertex, as on cpu.
bool contractible(const Op& product, const Op& user) {
  const OpInfo *p = findOp(product.op), *u = findOp(user.op);
  return p && u && p->kind == OpKind::Multiply && (u->kind == OpKind::Add || u->kind == OpKind::Subtract) &&
         product.results[0].dtype == "f32" && user.results[0].dtype == "f32";
}

int64_t elements(const ValueDecl& d) {
  return std::accumulate(d.shape.begin(), d.shape.end(), int64_t{1}, std::multiplies<int64_t>());
}

// Who reads each value: the ops of the region (each once: x * x reads x once, in one vertex), and whether anything
// else does (an op's nested region, or the region's results), which keeps the value out of a group's inside.
struct Readers {
  std::unordered_map<int64_t, std::vector<size_t>> ops;
  std::unordered_set<int64_t> escaping;
};

void markRead(const Region& region, std::unordered_set<int64_t>* read) {
  for (const Op& op : region.body) {
    read->insert(op.operands.begin(), op.operands.end());
    for (const Region& r : op.regions) markRead(r, read);
  }
  read->insert(region.results.begin(), region.results.end());
}

Readers readers(const Region& region) {
  Readers r;
  for (size_t i = 0; i < region.body.size(); ++i) {
    const Op& op = region.body[i];
    for (size_t k = 0; k < op.operands.size(); ++k)
      if (std::find(op.operands.begin(), op.operands.begin() + static_cast<std::ptrdiff_t>(k), op.operands[k]) ==
          op.operands.begin() + static_cast<std::ptrdiff_t>(k))
        r.ops[op.operands[k]].push_back(i);
    for (const Region& nested : op.regions) markRead(nested, &r.escaping);
  }
  r.escaping.insert(region.results.begin(), region.results.end());
  return r;
}

int find(std::vector<int>* parent, int i) {
  while ((*parent)[static_cast<size_t>(i)] != i)
    i = (*parent)[static_cast<size_t>(i)] = (*parent)[static_cast<size_t>((*parent)[static_cast<size_t>(i)])];
  return i;
}

}  // namespace

FusionPlan planFusion(const Region& region, bool enabled) {
  const size_t n = region.body.size();
  FusionPlan plan;
  plan.group_of.assign(n, -1);
  if (!enabled || n < 2) return plan;
  const Readers read = readers(region);
  std::unordered_map<int64_t, std::string> dtype_of;
  for (const ValueDecl& p : region.params) dtype_of[p.id] = p.dtype;
  for (const Op& op : region.body)
    for (const ValueDecl& r : op.results) dtype_of[r.id] = r.dtype;
  std::vector<Fusable> kind(n);
  std::unordered_map<int64_t, size_t> producer;  // result id of a fusable op -> its index
  for (size_t i = 0; i < n; ++i) {
    kind[i] = fusable(region.body[i], dtype_of);
    if (kind[i] != Fusable::No) producer[region.body[i].results[0].id] = i;
  }
  // Union each elementwise op with the producers of its operands that nothing outside its group reads: a DAG (x
  // read by several members) whose only result leaves through its root. Consumers before producers, until nothing
  // joins: a value's readers are in the group before the value is.
  std::vector<int> parent(n), size(n, 1);
  std::iota(parent.begin(), parent.end(), 0);
  for (bool joined = true; joined;) {
    joined = false;
    for (size_t i = n; i-- > 0;) {
      if (kind[i] != Fusable::Elementwise) continue;
      const Op& op = region.body[i];
      const int64_t count = elements(op.results[0]);
      for (int64_t id : op.operands) {
        auto p = producer.find(id);
        if (p == producer.end() || read.escaping.count(id)) continue;
        const size_t j = p->second;
        if (elements(region.body[j].results[0]) != count) continue;
        const int a = find(&parent, static_cast<int>(i)), b = find(&parent, static_cast<int>(j));
        const std::vector<size_t>& users = read.ops.at(id);
        // A multiply-add the vertex contracts (elementwise.cc) joins past the size cap, as XLA:CPU's fused loop
        // contracts it wherever it is: the results then round as cpu's do whatever the grouping.
        if (a == b ||
            (static_cast<size_t>(size[static_cast<size_t>(a)] + size[static_cast<size_t>(b)]) > kMaxGroupOps &&
             !(users.size() == 1 && contractible(region.body[j], op))))
          continue;
        // (A value a broadcast reads stays outside: the broadcast, a view, reads a tensor.)
        if (!std::all_of(users.begin(), users.end(), [&](size_t u) {
              return kind[u] != Fusable::Broadcast && find(&parent, static_cast<int>(u)) == a;
            }))
          continue;
        parent[static_cast<size_t>(b)] = a;
        size[static_cast<size_t>(a)] += size[static_cast<size_t>(b)];
        joined = true;
      }
    }
  }
  // A broadcast left on its own whose readers are all elementwise ops of its size is a view of each of their
  // groups (as in Poplar, where it has no compute set and no memory of its own), not a materialised tensor: a
  // constant broadcast once and read by several groups (jax's polynomial coefficients) costs each group an operand.
  std::vector<bool> shared(n, false);
  for (size_t j = 0; j < n; ++j) {
    if (kind[j] != Fusable::Broadcast || size[static_cast<size_t>(find(&parent, static_cast<int>(j)))] > 1) continue;
    const int64_t id = region.body[j].results[0].id;
    auto users = read.ops.find(id);
    shared[j] = !read.escaping.count(id) && users != read.ops.end() &&
                std::all_of(users->second.begin(), users->second.end(), [&](size_t u) {
                  return kind[u] == Fusable::Elementwise &&
                         elements(region.body[u].results[0]) == elements(region.body[j].results[0]);
                });
  }
  std::unordered_map<int, int> group_id;
  auto groupOf = [&](size_t i) {  // the plan's group of op i's union-find set, made on first use
    const int r = find(&parent, static_cast<int>(i));
    auto it = group_id.find(r);
    if (it == group_id.end()) {
      it = group_id.emplace(r, static_cast<int>(plan.groups.size())).first;
      plan.groups.emplace_back();
    }
    return it->second;
  };
  for (size_t i = 0; i < n; ++i) {
    if (shared[i]) {
      plan.group_of[i] = FusionPlan::kView;
      for (size_t u : read.ops.at(region.body[i].results[0].id))
        plan.groups[static_cast<size_t>(groupOf(u))].push_back(i);
      continue;
    }
    const bool reads_view =
        std::any_of(region.body[i].operands.begin(), region.body[i].operands.end(), [&](int64_t id) {
          auto p = producer.find(id);
          return p != producer.end() && shared[p->second];
        });
    if (size[static_cast<size_t>(find(&parent, static_cast<int>(i)))] < 2 && !reads_view) continue;
    plan.group_of[i] = groupOf(i);
    plan.groups[static_cast<size_t>(plan.group_of[i])].push_back(i);
  }
  for (auto& g : plan.groups) {  // program order; a view read by two members of a group is in it once
    std::sort(g.begin(), g.end());
    g.erase(std::unique(g.begin(), g.end()), g.end());
  }
  return plan;
}

}  // namespace ipu
