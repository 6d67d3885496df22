// The fusion pass: which ops of a region become one fused elementwise compute set (see ipu/fusion.h).
#include "ipu/fusion.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <numeric>
#include <string>
#include <unordered_map>

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
  // c64 is computed by the complex kernels (complex.cc), not the fused vertex: an op with a c64 result or operand
  // stays on its own. Binary, select and clamp operands have the result's type; unary, compare and convert may read
  // c64 into a real result (abs, eq, real part), so their operand's type must be known to be real.
  if (op.results[0].dtype == "c64") return Fusable::No;
  switch (info->family) {
    case OpFamily::Unary: case OpFamily::Compare: case OpFamily::Convert:
      for (int64_t id : op.operands) {
        auto it = dtype_of.find(id);
        if (it == dtype_of.end() || it->second == "c64") return Fusable::No;
      }
      return Fusable::Elementwise;
    case OpFamily::Binary: case OpFamily::Select: case OpFamily::Clamp:
      return Fusable::Elementwise;
    default: break;
  }
  if (info->kind == OpKind::BroadcastInDim && op.operands.size() == 1 && hasAttr(op, "broadcast_dimensions"))
    return Fusable::Broadcast;
  return Fusable::No;
}

int64_t elements(const ValueDecl& d) {
  return std::accumulate(d.shape.begin(), d.shape.end(), int64_t{1}, std::multiplies<int64_t>());
}

// Uses by distinct ops (x * x reads x once as far as fusion is concerned: both reads are in one vertex).
void countUses(const Region& region, std::unordered_map<int64_t, int>* uses) {
  for (const Op& op : region.body) {
    for (size_t i = 0; i < op.operands.size(); ++i)
      if (std::find(op.operands.begin(), op.operands.begin() + static_cast<std::ptrdiff_t>(i), op.operands[i]) ==
          op.operands.begin() + static_cast<std::ptrdiff_t>(i))
        ++(*uses)[op.operands[i]];
    for (const Region& r : op.regions) countUses(r, uses);
  }
  for (int64_t id : region.results) ++(*uses)[id];
}

int find(std::vector<int>* parent, int i) {
  while ((*parent)[static_cast<size_t>(i)] != i) i = (*parent)[static_cast<size_t>(i)] = (*parent)[static_cast<size_t>((*parent)[static_cast<size_t>(i)])];
  return i;
}

}  // namespace

bool fusionEnabled() {
  const char* env = std::getenv("JAX_IPU_FUSION");
  if (!env) return true;
  std::string v;
  for (const char* c = env; *c; ++c)
    if (!std::isspace(static_cast<unsigned char>(*c))) v += static_cast<char>(std::tolower(static_cast<unsigned char>(*c)));
  for (const char* t : {"", "1", "y", "yes", "t", "true", "on"})
    if (v == t) return true;
  for (const char* f : {"0", "n", "no", "f", "false", "off"})
    if (v == f) return false;
  throw Error(ErrorCode::InvalidArgument, "JAX_IPU_FUSION=" + std::string(env) +
                                              ": expected a boolean (1/true/yes/on to fuse elementwise ops, "
                                              "0/false/no/off to lower each op on its own)");
}

FusionPlan planFusion(const Region& region, bool enabled) {
  const size_t n = region.body.size();
  FusionPlan plan;
  plan.group_of.assign(n, -1);
  if (!enabled || n < 2) return plan;
  std::unordered_map<int64_t, int> uses;
  countUses(region, &uses);
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
  // Union each elementwise op with the producers of its single-use operands.
  std::vector<int> parent(n), size(n, 1);
  std::iota(parent.begin(), parent.end(), 0);
  for (size_t i = 0; i < n; ++i) {
    if (kind[i] != Fusable::Elementwise) continue;
    const Op& op = region.body[i];
    const int64_t count = elements(op.results[0]);
    for (int64_t id : op.operands) {
      auto p = producer.find(id);
      if (p == producer.end() || uses[id] != 1) continue;
      const size_t j = p->second;
      if (elements(region.body[j].results[0]) != count) continue;
      const int a = find(&parent, static_cast<int>(i)), b = find(&parent, static_cast<int>(j));
      if (a == b || static_cast<size_t>(size[static_cast<size_t>(a)] + size[static_cast<size_t>(b)]) > kMaxGroupOps) continue;
      parent[static_cast<size_t>(b)] = a;
      size[static_cast<size_t>(a)] += size[static_cast<size_t>(b)];
    }
  }
  std::unordered_map<int, int> group_id;
  for (size_t i = 0; i < n; ++i) {
    const int r = find(&parent, static_cast<int>(i));
    if (size[static_cast<size_t>(r)] < 2) continue;
    auto it = group_id.find(r);
    if (it == group_id.end()) {
      it = group_id.emplace(r, static_cast<int>(plan.groups.size())).first;
      plan.groups.emplace_back();
    }
    plan.group_of[i] = it->second;
    plan.groups[static_cast<size_t>(it->second)].push_back(i);
  }
  return plan;
}

}  // namespace ipu
