// Collectives between the replicas of a launch over several IPUs, as Poplar's replicated graphs and GCL
// (gcl::allReduceCrossReplica, allGatherCrossReplica, reduceScatterCrossReplica, allToAllCrossReplica) do them:
// stablehlo all_reduce, all_gather, reduce_scatter, collective_permute, all_to_all, replica_id and partition_id.
//
// Running. A collective is an Execute step whose kernel does its work in prepare(), once per execution, on the run's
// thread. It posts this replica's operand to the launch's ReplicaGroup and gets every replica's back once all have
// arrived (so every source is final; a replica in another process sends a copy); it reads the sources of its replica
// group's members, writes only its own result, then waits at a barrier so that no replica overwrites a source that
// another is still reading. Every replica runs the same program, so a result slot names the same collective in each.
// Without a ReplicaGroup (one replica) a collective sees a group of one. A replica that reaches a different collective,
// or ends the program while others wait (the launcher's end-of-program exchange posts null), aborts the group: every
// replica then throws, none waits forever.
//
// Cost. The ring algorithms GCL uses between IPUs; every ring step is a BSP superstep of its own: an inter-IPU sync
// (DeviceDescription::interIpuSyncCycles: poplibs' 15 ns per hop, x2), the step's bytes over the IPU-Links
// (DeviceDescription::linkCycles: 10 links, 320 GB/s per chip, so 160 GB/s each way, plus a calibrated start-up
// latency; between IPUs of different hosts the ring's slowest hop, the IPU-Machines' GW-Links: 12.5 GB/s each way
// and a 2 us start, DeviceDescription::gatewayCycles), plus the on-chip exchange that moves each tile's 1/n share
// between the tile and the links (exchange_bytes_per_cycle per tile), plus, for reductions, the tiles combining what
// they received (the elementwise op's vertex cost). With n IPUs in a group and B bytes of operand per IPU:
//   all_reduce          ring reduce-scatter then ring all-gather: 2(n-1) steps of B/n bytes (2(n-1)/n of B per IPU)
//   reduce_scatter      n-1 steps of B/n bytes, each combining
//   all_gather          n-1 steps, each passing on one replica's block (B bytes)
//   all_to_all          n-1 steps, one per peer, of B/n bytes
//   collective_permute  one step of B bytes
// A group of one is an on-chip copy.
#include <algorithm>
#include <array>
#include <cstring>
#include <functional>

#include "ipu/cost_model.h"
#include "ipu/dtype.h"
#include "ipu/handlers.h"
#include "ipu/lowering.h"
#include "ipu/scalar_ops.h"
#include "ipu/scalar_program.h"

namespace ipu {

namespace {

using Shape = std::vector<int64_t>;

int64_t divUp(int64_t a, int64_t b) { return b <= 0 ? 0 : (a + b - 1) / b; }

// Calls fn(src, dst, count) with element offsets for each contiguous run of a box of shape `box` that starts at
// `src_at` in a row-major array of shape `src_shape` and at `dst_at` in one of shape `dst_shape`.
template <class F>
void forEachRun(const Shape& box, const Shape& src_shape, const Shape& src_at, const Shape& dst_shape,
                const Shape& dst_at, F fn) {
  for (int64_t b : box)
    if (b == 0) return;
  const Shape ss = rowMajorStrides(src_shape), ds = rowMajorStrides(dst_shape);
  // Trailing dimensions that the box covers whole in both arrays make one run with the next dimension in.
  size_t k = box.size();
  int64_t run = 1;
  while (k > 0 && box[k - 1] == src_shape[k - 1] && box[k - 1] == dst_shape[k - 1]) run *= box[--k];
  if (k > 0) run *= box[--k];
  int64_t so = 0, dof = 0;
  for (size_t d = 0; d < box.size(); ++d) {
    so += src_at[d] * ss[d];
    dof += dst_at[d] * ds[d];
  }
  Shape idx(k, 0);
  while (true) {
    fn(so, dof, run);
    size_t d = k;
    while (true) {
      if (d == 0) return;
      --d;
      so += ss[d];
      dof += ds[d];
      if (++idx[d] < box[d]) break;
      so -= box[d] * ss[d];
      dof -= box[d] * ds[d];
      idx[d] = 0;
    }
  }
}

Shape at(size_t rank, size_t dim, int64_t offset) {
  Shape s(rank, 0);
  if (dim < rank) s[dim] = offset;
  return s;
}

// acc[i] = f(acc[i], x[i]) for a computation's vector functor over its storage type.
using FoldFn = void (*)(uint8_t* acc, const uint8_t* x, int64_t n);

template <class T, class F>
void foldLoop(uint8_t* acc, const uint8_t* x, int64_t n) {
  T* a = reinterpret_cast<T*>(acc);
  const T* b = reinterpret_cast<const T*>(x);
  const F f{};
  for (int64_t i = 0; i < n; ++i) a[i] = f(a[i], b[i]);
}

// The identity of a single-op computation on `dt`, in the type's storage bits (up to 16: c128); false when it has
// none. Complex sums and products (psum, pprod of c64 and c128) start from (0, 0) and (1, 0).
using IdentityBits = std::array<uint8_t, 16>;
bool identityBits(OpKind kind, DType dt, IdentityBits* bits) {
  bits->fill(0);
  if (isComplex(dt)) {
    if (kind != OpKind::Add && kind != OpKind::Multiply) return false;
    const double re = kind == OpKind::Multiply ? 1.0 : 0.0;
    if (dt == DType::C128) {
      const Complex128 identity{re, 0.0};
      std::memcpy(bits->data(), &identity, sizeof identity);
    } else {
      const Complex64 identity{static_cast<float>(re), 0.0f};
      std::memcpy(bits->data(), &identity, sizeof identity);
    }
    return true;
  }
  uint64_t word = 0;
  if (!scalar::reductionIdentityBits(kind, dt, &word)) return false;
  std::memcpy(bits->data(), &word, sizeof word);
  return true;
}

// The op of a reduction body that is one add/multiply/maximum/minimum/and/or of its two arguments, or "".
std::string bodyComputation(const Op& op) {
  if (op.regions.size() != 1) return "";
  const Region& body = op.regions[0];
  if (body.params.size() != 2 || body.body.size() != 1 || body.results.size() != 1) return "";
  const Op& combine = body.body[0];
  if (combine.operands.size() != 2 || combine.results.size() != 1 || combine.results[0].id != body.results[0])
    return "";
  const int64_t a = body.params[0].id, b = body.params[1].id;
  const auto& x = combine.operands;
  if (!((x[0] == a && x[1] == b) || (x[0] == b && x[1] == a))) return "";
  return isReducer(combine.op) ? combine.op : "";
}

enum class Pattern { AllReduce, AllGather, ReduceScatter, AllToAll, Permute, ReplicaId, PartitionId };

// Everything a collective's kernel needs, fixed at compile time.
struct Plan {
  Pattern pattern = Pattern::AllReduce;
  std::string name;  // "stablehlo.all_reduce", for messages
  int in = -1, out = -1;
  Shape in_shape, out_shape;
  size_t element = 0;  // bytes per element
  int replicas = 1;  // copies of the program that run at once, one per IPU
  int partitions = 1;  // copy c is partition c % partitions of replica c / partitions
  std::vector<std::vector<int>> groups;  // replica ids of each group, in group order
  std::vector<int> group_of, position;  // per replica: its group and its place in it
  std::vector<int> source;  // collective_permute: per replica, who sends to it (-1: nobody)
  size_t dim = 0, concat_dim = 0;  // all_gather / reduce_scatter dimension; all_to_all: split and concat
  // Reductions: a vector fold from the computation's identity (as XLA:CPU accumulates), else the body interpreted
  // from the first member's value on.
  FoldFn fold = nullptr;
  IdentityBits identity{};
  ScalarProgram body;
  bool general = false;
};

class CollectiveKernel : public Kernel {
 public:
  explicit CollectiveKernel(Plan plan) : p_(std::move(plan)) {}

  void compute(RunState&, int64_t, int64_t) const override {}  // all done in prepare()

  void prepare(RunState& s) const override {
    ReplicaGroup* group = s.options ? s.options->replicas : nullptr;
    const int me = s.options ? s.options->replica : 0;
    const int size = group ? group->size() : 1;
    if (p_.pattern == Pattern::ReplicaId || p_.pattern == Pattern::PartitionId) {
      const int id = p_.pattern == Pattern::ReplicaId ? me / p_.partitions : me % p_.partitions;
      *s.at<uint32_t>(p_.out) = static_cast<uint32_t>(id);
      return;
    }
    if (size != p_.replicas || me < 0 || me >= size) {
      const std::string why = p_.name + " was compiled for " + std::to_string(p_.replicas) +
                              " replicas but runs as replica " + std::to_string(me) + " of " + std::to_string(size) +
                              ": run the program on as many IPUs as it was compiled for (jax.pmap over " +
                              std::to_string(p_.replicas) + " ipu devices)";
      if (group) group->abort(why);
      throw Error(ErrorCode::InvalidArgument, why);
    }
    // What this replica posts: the collective it is at (its result's slot: the same in every replica) and its
    // operand, which the others read (a replica in another process gets a copy).
    const size_t out_bytes = static_cast<size_t>(shapeElements(p_.out_shape)) * p_.element;
    const size_t in_bytes = static_cast<size_t>(shapeElements(p_.in_shape)) * p_.element;
    const ReplicaPost mine{p_.out, s.ptr[static_cast<size_t>(p_.in)], in_bytes};
    const std::vector<const ReplicaPost*> posts =
        group ? group->exchange(me, &mine) : std::vector<const ReplicaPost*>{&mine};
    for (int r = 0; r < size; ++r) {
      const ReplicaPost* q = posts[static_cast<size_t>(r)];
      if (q && q->tag == p_.out && q->size == in_bytes) continue;
      const std::string why =
          p_.name + ": replica " + std::to_string(r) +
          (!q                 ? " has ended the program"
           : q->tag != p_.out ? " is at a different collective"
                              : " posts " + std::to_string(q->size) + " bytes, not " + std::to_string(in_bytes) + ",") +
          " while replica " + std::to_string(me) +
          " waits here; every replica must run the same collectives in the same order";
      if (group) group->abort(why);
      throw Error(ErrorCode::InvalidArgument, why);
    }
    auto source = [&](int replica) -> const uint8_t* { return posts[static_cast<size_t>(replica)]->bytes; };
    // Others read our operand until the barrier: a result that shares its memory is staged until then.
    uint8_t* out = s.ptr[static_cast<size_t>(p_.out)];
    const uint8_t* in = source(me);
    std::vector<uint8_t> staged;
    uint8_t* dst = out;
    if (out_bytes && in_bytes && out < in + in_bytes && in < out + out_bytes) {
      staged.resize(out_bytes);
      dst = staged.data();
    }
    try {
      run(dst, me, source);
    } catch (const std::exception& e) {
      if (group) group->abort(p_.name + " failed on replica " + std::to_string(me) + ": " + e.what());
      throw;
    }
    if (group) group->barrier(me);
    if (!staged.empty()) std::memcpy(out, staged.data(), out_bytes);
  }

 private:
  void run(uint8_t* dst, int me, const std::function<const uint8_t*(int)>& source) const {
    const std::vector<int>& members = p_.groups[static_cast<size_t>(p_.group_of[static_cast<size_t>(me)])];
    const int64_t n = static_cast<int64_t>(members.size());
    const int64_t pos = p_.position[static_cast<size_t>(me)];
    const size_t rank = p_.in_shape.size();
    const size_t eb = p_.element;
    auto copy = [&](const Shape& box, const uint8_t* src, const Shape& src_at, const Shape& dst_at) {
      forEachRun(box, p_.in_shape, src_at, p_.out_shape, dst_at, [&](int64_t so, int64_t d, int64_t count) {
        std::memcpy(dst + static_cast<size_t>(d) * eb, src + static_cast<size_t>(so) * eb,
                    static_cast<size_t>(count) * eb);
      });
    };
    switch (p_.pattern) {
      case Pattern::AllReduce: return reduce(dst, members, source, Shape(rank, 0));
      case Pattern::ReduceScatter: return reduce(dst, members, source, at(rank, p_.dim, pos * p_.out_shape[p_.dim]));
      case Pattern::AllGather:
        for (int64_t k = 0; k < n; ++k)
          copy(p_.in_shape, source(members[static_cast<size_t>(k)]), Shape(rank, 0),
               at(rank, p_.dim, k * p_.in_shape[p_.dim]));
        return;
      case Pattern::AllToAll: {
        Shape chunk = p_.in_shape;
        chunk[p_.dim] /= n;
        for (int64_t k = 0; k < n; ++k)
          copy(chunk, source(members[static_cast<size_t>(k)]), at(rank, p_.dim, pos * chunk[p_.dim]),
               at(rank, p_.concat_dim, k * chunk[p_.concat_dim]));
        return;
      }
      case Pattern::Permute: {
        const int from = p_.source[static_cast<size_t>(me)];
        const size_t bytes = static_cast<size_t>(shapeElements(p_.out_shape)) * eb;
        if (from < 0) std::memset(dst, 0, bytes);  // a replica that receives nothing gets zeros (XLA)
        else if (bytes) std::memcpy(dst, source(from), bytes);
        return;
      }
      default: return;
    }
  }

  // dst = the members' boxes of the result's shape at `src_at` combined in group order.
  void reduce(uint8_t* dst, const std::vector<int>& members, const std::function<const uint8_t*(int)>& source,
              const Shape& src_at) const {
    const size_t eb = p_.element;
    const Shape zero(p_.out_shape.size(), 0);
    auto each = [&](const uint8_t* src, const std::function<void(uint8_t*, const uint8_t*, int64_t)>& op) {
      forEachRun(p_.out_shape, p_.in_shape, src_at, p_.out_shape, zero, [&](int64_t so, int64_t d, int64_t count) {
        op(dst + static_cast<size_t>(d) * eb, src + static_cast<size_t>(so) * eb, count);
      });
    };
    auto copy = [&](uint8_t* a, const uint8_t* x, int64_t count) {
      std::memcpy(a, x, static_cast<size_t>(count) * eb);
    };
    if (members.size() == 1) return each(source(members[0]), copy);  // passed through, as XLA drops such a reduction
    if (!p_.general) {
      const int64_t count = shapeElements(p_.out_shape);
      for (int64_t i = 0; i < count; ++i) std::memcpy(dst + static_cast<size_t>(i) * eb, p_.identity.data(), eb);
      for (int member : members) each(source(member), p_.fold);
      return;
    }
    ScalarRegisters file(p_.body, 2);
    uint8_t* r = file.bytes();
    ScalarReg* regs = file.data();
    const size_t result = kRegBytes * static_cast<size_t>(p_.body.resultRegister(0));
    each(source(members[0]), copy);
    for (size_t k = 1; k < members.size(); ++k) {
      each(source(members[k]), [&](uint8_t* a, const uint8_t* x, int64_t count) {
        for (int64_t i = 0; i < count; ++i) {
          copyElement(r, a + static_cast<size_t>(i) * eb, eb);
          copyElement(r + kRegBytes, x + static_cast<size_t>(i) * eb, eb);
          p_.body.run(regs);
          copyElement(a + static_cast<size_t>(i) * eb, r + result, eb);
        }
      });
    }
  }

  Plan p_;
};

// replica_groups: rows of replica ids, -1 padding uneven rows (as jax writes them). Absent or empty: all replicas in
// one group. A replica in no row is a group of its own. With one partition, use_global_device_ids changes nothing:
// a global device id is then the replica id.
void readGroups(const Lowerer& lowerer, const OpContext& ctx, Plan* p) {
  const int replicas = p->replicas;
  p->group_of.assign(static_cast<size_t>(replicas), -1);
  p->position.assign(static_cast<size_t>(replicas), 0);
  const json::Value* attr = ctx.op->attrs.find("replica_groups");
  if (attr && attr->kind != json::Value::Kind::Null && !attr->isArray())
    lowerer.invalid(ctx, "replica_groups must be a list of lists of replica ids");
  if (attr && attr->isArray()) {
    for (const json::Value& row : attr->array) {
      if (!row.isArray()) lowerer.invalid(ctx, "replica_groups must be a list of lists of replica ids");
      std::vector<int> group;
      for (const json::Value& v : row.array) {
        if (v.kind != json::Value::Kind::Number || !v.is_integer) lowerer.invalid(ctx, "replica ids must be integers");
        if (v.integer == -1) continue;
        if (v.integer < 0 || v.integer >= replicas)
          lowerer.invalid(ctx, "replica " + std::to_string(v.integer) +
                                   " in replica_groups is not one of the program's " + std::to_string(replicas) +
                                   " replicas");
        const int r = static_cast<int>(v.integer);
        if (p->group_of[static_cast<size_t>(r)] >= 0)
          lowerer.invalid(ctx, "replica " + std::to_string(r) + " is in more than one replica group");
        p->group_of[static_cast<size_t>(r)] = static_cast<int>(p->groups.size());
        p->position[static_cast<size_t>(r)] = static_cast<int>(group.size());
        group.push_back(r);
      }
      if (!group.empty()) p->groups.push_back(std::move(group));
    }
  }
  if (p->groups.empty()) {
    p->groups.emplace_back();
    for (int r = 0; r < replicas; ++r) {
      p->group_of[static_cast<size_t>(r)] = 0;
      p->position[static_cast<size_t>(r)] = r;
      p->groups[0].push_back(r);
    }
  }
  for (int r = 0; r < replicas; ++r) {
    if (p->group_of[static_cast<size_t>(r)] >= 0) continue;
    p->group_of[static_cast<size_t>(r)] = static_cast<int>(p->groups.size());
    p->groups.push_back({r});
  }
}

// source_target_pairs: [source, target] replica pairs; each replica sends to at most one and receives from at most one.
void readPairs(const Lowerer& lowerer, const OpContext& ctx, Plan* p, int64_t* pairs) {
  p->source.assign(static_cast<size_t>(p->replicas), -1);
  std::vector<bool> sends(static_cast<size_t>(p->replicas), false);
  const json::Value* attr = ctx.op->attrs.find("source_target_pairs");
  if (!attr || !attr->isArray()) lowerer.invalid(ctx, "source_target_pairs must be a list of [source, target] pairs");
  *pairs = 0;
  for (const json::Value& pair : attr->array) {
    if (!pair.isArray() || pair.array.size() != 2)
      lowerer.invalid(ctx, "each source_target_pair must be [source, target]");
    int64_t st[2];
    for (size_t i = 0; i < 2; ++i) {
      const json::Value& v = pair.array[i];
      if (v.kind != json::Value::Kind::Number || !v.is_integer || v.integer < 0 || v.integer >= p->replicas)
        lowerer.invalid(ctx, "source_target_pairs name a replica outside the program's " + std::to_string(p->replicas));
      st[i] = v.integer;
    }
    if (sends[static_cast<size_t>(st[0])] || p->source[static_cast<size_t>(st[1])] >= 0)
      lowerer.invalid(ctx, "a replica appears twice as a source or twice as a target in source_target_pairs");
    sends[static_cast<size_t>(st[0])] = true;
    p->source[static_cast<size_t>(st[1])] = static_cast<int>(st[0]);
    ++*pairs;
  }
  // Every replica forms its own group: the pattern only reads `source`.
  p->groups.clear();
  p->group_of.resize(static_cast<size_t>(p->replicas));
  p->position.assign(static_cast<size_t>(p->replicas), 0);
  for (int r = 0; r < p->replicas; ++r) {
    p->group_of[static_cast<size_t>(r)] = r;
    p->groups.push_back({r});
  }
}

// What every collective's plan starts from: its one result and the launch's replicas.
Plan begin(const Lowerer& lowerer, const OpContext& ctx, Pattern pattern) {
  if (ctx.out_types.size() != 1) lowerer.invalid(ctx, "a collective has one result");
  Plan p;
  p.pattern = pattern;
  p.name = ctx.op->mlir;
  p.replicas = lowerer.program().replicas;
  p.partitions = lowerer.program().partitions;
  p.out_shape = ctx.out_types[0].shape;
  return p;
}

// replica_id and partition_id: the copy's number, written by one vertex.
std::vector<int> lowerCopyNumber(Lowerer& lowerer, OpContext& ctx, Pattern pattern, const char* codelet) {
  Plan p = begin(lowerer, ctx, pattern);
  const TensorType& out = ctx.out_types[0];
  if (out.dtype != DType::U32 || !out.shape.empty()) lowerer.invalid(ctx, "the result must be a ui32 scalar");
  p.out = lowerer.newSlot(out);
  p.element = 4;
  const TileMapping work = lowerer.graph().slots[static_cast<size_t>(p.out)].mapping;
  const int workers = lowerer.device().num_worker_contexts;
  std::vector<Superstep> steps;
  steps.push_back(lowerer.superstep(codelet, work, {}, [&](int, int64_t) { return cost::copy(4, workers); }, false));
  const int o = p.out;
  lowerer.emitExecute(ctx, std::make_unique<CollectiveKernel>(std::move(p)), std::move(steps), {o}, 0);
  return {o};
}

// The plan of a collective that moves its operand: the operand, and the replica groups it moves within.
Plan beginMove(const Lowerer& lowerer, const OpContext& ctx, Pattern pattern) {
  Plan p = begin(lowerer, ctx, pattern);
  const TensorType& in = ctx.in_types[0];
  if (ctx.out_types[0].dtype != in.dtype) lowerer.invalid(ctx, "the result must have the operand's element type");
  p.in = ctx.in[0];
  p.in_shape = in.shape;
  p.element = dtypeSize(in.dtype);
  if (pattern != Pattern::Permute) readGroups(lowerer, ctx, &p);
  return p;
}

// The group size the result's shape is made for; where the shape depends on it (`uniform`), every group must have it.
int64_t groupSize(const Lowerer& lowerer, const OpContext& ctx, const Plan& p, bool uniform) {
  size_t n = 1;
  for (const auto& g : p.groups) n = std::max(n, g.size());
  if (uniform)
    for (const auto& g : p.groups)
      if (g.size() != n) lowerer.invalid(ctx, "every replica group must have the same size for " + ctx.op->mlir);
  return static_cast<int64_t>(n);
}

size_t dimension(const Lowerer& lowerer, const OpContext& ctx, const char* name) {
  const int64_t d = attrInt(*ctx.op, name);
  if (d < 0 || d >= static_cast<int64_t>(ctx.in_types[0].shape.size()))
    lowerer.invalid(ctx, std::string(name) + " is out of range");
  return static_cast<size_t>(d);
}

void checkResultShape(const Lowerer& lowerer, const OpContext& ctx, const Shape& want) {
  const TensorType& in = ctx.in_types[0];
  if (ctx.out_types[0].shape != want)
    lowerer.invalid(ctx, "the result shape must be " + TensorType{in.dtype, want}.str());
}

// all_reduce and reduce_scatter: how members combine. A body of one reducer op gets a vector fold from the op's
// identity (as XLA:CPU accumulates); anything else is interpreted (p->general). Returns the computation as the
// codelet names it ("add", "{...}") and sets *combine to the reducer.
std::string readCombiner(Lowerer& lowerer, OpContext& ctx, Plan* p, OpKind* combine) {
  const Op& op = *ctx.op;
  const DType dtype = ctx.in_types[0].dtype;
  std::string computation = attrString(op, "computation", "");
  if (computation.empty()) computation = bodyComputation(op);
  if (!computation.empty()) {
    *combine = findOp(computation)->kind;
    if (dtype == DType::Bool && *combine == OpKind::Add) *combine = OpKind::Or;
    if (dtype == DType::Bool && *combine == OpKind::Multiply) *combine = OpKind::And;
    IdentityBits identity{};
    if (identityBits(*combine, dtype, &identity)) {
      scalar::visitBinary<true>(*combine, dtype, lowerer.numerics(),
                                [&](auto f, auto t) { p->fold = &foldLoop<typename decltype(t)::type, decltype(f)>; });
      p->identity = identity;
    }
  }
  if (!p->fold) {
    if (op.regions.size() != 1) lowerer.invalid(ctx, op.mlir + " needs a reduction body region or a computation");
    p->body = lowerer.compileBody(ctx, op.regions[0], {dtype, dtype}, {dtype}, "in the reduction body", true);
    p->general = true;
    computation = "{" + p->body.summary() + "}";
  }
  return computation;
}

// The steps of a collective whose plan is complete: one superstep per ring step (see the top of the file), then
// the kernel. Making one gives the result its slot (sharing the operand's mapping where the shapes agree).
class Ring {
 public:
  Ring(Lowerer& lowerer, OpContext& ctx, Plan plan, OpKind combine = OpKind::Add)
      : lowerer_(lowerer), ctx_(ctx), p_(std::move(plan)), combine_(combine), dev_(lowerer.device()) {
    const TensorType& in = ctx.in_types[0];
    const TensorType& out = ctx.out_types[0];
    p_.out = out.shape == in.shape ? lowerer.newSlotLike(out, p_.in) : lowerer.newSlot(out);
    dtype_ = in.dtype;
    elements_ = in.numElements();
    bytes_ = elements_ * static_cast<int64_t>(p_.element);
    out_map_ = lowerer.graph().slots[static_cast<size_t>(p_.out)].mapping;
    in_map_ = lowerer.graph().slots[static_cast<size_t>(p_.in)].mapping;
    type_ = std::string("<") + dtypeName(in.dtype) + ">";
    // Whether a group has members on different hosts (program.hosts; jax.distributed).
    const std::vector<int>& hosts = lowerer.program().hosts;
    if (hosts.size() != static_cast<size_t>(p_.replicas)) return;
    auto host = [&](int r) { return hosts[static_cast<size_t>(r)]; };
    for (const std::vector<int>& g : p_.groups)
      for (int r : g) crosses_hosts_ = crosses_hosts_ || host(r) != host(g.front());
    for (size_t r = 0; r < p_.source.size(); ++r)
      if (p_.source[r] >= 0) crosses_hosts_ = crosses_hosts_ || host(p_.source[r]) != host(static_cast<int>(r));
  }

  const std::string& type() const { return type_; }
  int64_t bytes() const { return bytes_; }
  const TileMapping& outMap() const { return out_map_; }
  const TileMapping& inMap() const { return in_map_; }

  // Nothing crosses a link (`alone`: a group of one; or nothing to move): the result is copied (zeroed) on chip.
  bool onChip(bool alone) {
    if (!alone && bytes_ != 0) return false;
    const int workers = dev_.num_worker_contexts;
    const int64_t eb = static_cast<int64_t>(p_.element);
    steps_.push_back(lowerer_.superstep(
        std::string(ctx_.info->name) + type_, out_map_, {}, [&](int, int64_t m) { return cost::copy(m * eb, workers); },
        false));
    return true;
  }

  // One ring step: each tile of `work` exchanges 1/`split` of its elements with the links, `link_bytes` cross the
  // IPU-Links after a sync of `ipus` IPUs, and each tile then combines what it received if `combines`.
  void step(const std::string& codelet, const TileMapping& work, int64_t split, int64_t link_bytes, int ipus,
            bool combines) {
    const int64_t eb = static_cast<int64_t>(p_.element);
    const int workers = dev_.num_worker_contexts;
    std::vector<int64_t> recv(static_cast<size_t>(dev_.num_tiles), 0);
    for (int t = 0; t < work.tilesUsed(); ++t) recv[static_cast<size_t>(t)] = divUp(work.elementsOn(t), split) * eb;
    auto combineCycles = [&](int64_t elements) -> uint64_t {
      return p_.general ? cost::reduceBody(p_.body.cyclesPerElement(), elements, elements, workers)
                        : cost::elementwise(combine_, dtype_, elements, workers);
    };
    Superstep s = lowerer_.superstep(
        codelet, work, recv, [&](int, int64_t m) -> uint64_t { return combines ? combineCycles(divUp(m, split)) : 0; },
        false);
    // A ring over IPUs of several hosts waits for its slowest hop: the one between IPU-Machines (GW-Links).
    s.cost.exchange += crosses_hosts_ ? dev_.gatewayCycles(link_bytes) : dev_.linkCycles(link_bytes);
    s.cost.sync += dev_.interIpuSyncCycles(ipus);
    steps_.push_back(std::move(s));
  }

  // The flops of a ring reduction over groups of n: each member combines (n - 1) blocks of 1/n.
  double combineFlops(int64_t n) const {
    return isFloat(dtype_) ? static_cast<double>(n - 1) * static_cast<double>(divUp(elements_, n)) : 0;
  }

  std::vector<int> emit(double flops = 0) {
    const int o = p_.out;
    lowerer_.emitExecute(ctx_, std::make_unique<CollectiveKernel>(std::move(p_)), std::move(steps_), {o}, flops);
    return {o};
  }

 private:
  Lowerer& lowerer_;
  OpContext& ctx_;
  Plan p_;
  OpKind combine_;
  const DeviceDescription& dev_;
  DType dtype_ = DType::F32;
  int64_t elements_ = 0, bytes_ = 0;
  TileMapping out_map_, in_map_;
  std::string type_;
  bool crosses_hosts_ = false;
  std::vector<Superstep> steps_;
};

}  // namespace

std::vector<int> lowerReplicaId(Lowerer& lowerer, OpContext& ctx) {
  return lowerCopyNumber(lowerer, ctx, Pattern::ReplicaId, "replicaId");
}

std::vector<int> lowerPartitionId(Lowerer& lowerer, OpContext& ctx) {
  return lowerCopyNumber(lowerer, ctx, Pattern::PartitionId, "partitionId");
}

// Ring reduce-scatter, then ring all-gather.
std::vector<int> lowerAllReduce(Lowerer& lowerer, OpContext& ctx) {
  Plan p = beginMove(lowerer, ctx, Pattern::AllReduce);
  const int64_t n = groupSize(lowerer, ctx, p, false);
  checkResultShape(lowerer, ctx, p.in_shape);
  OpKind combine = OpKind::Add;
  const std::string computation = readCombiner(lowerer, ctx, &p, &combine);
  Ring ring(lowerer, ctx, std::move(p), combine);
  if (ring.onChip(n == 1)) return ring.emit();
  const std::string codelet = "allReduce" + computation + ring.type();
  for (int64_t k = 0; k + 1 < n; ++k)
    ring.step(codelet + ".reduceScatter", ring.outMap(), n, divUp(ring.bytes(), n), static_cast<int>(n), true);
  for (int64_t k = 0; k + 1 < n; ++k)
    ring.step(codelet + ".allGather", ring.outMap(), n, divUp(ring.bytes(), n), static_cast<int>(n), false);
  return ring.emit(ring.combineFlops(n));
}

std::vector<int> lowerReduceScatter(Lowerer& lowerer, OpContext& ctx) {
  Plan p = beginMove(lowerer, ctx, Pattern::ReduceScatter);
  const int64_t n = groupSize(lowerer, ctx, p, true);
  p.dim = dimension(lowerer, ctx, "scatter_dimension");
  Shape want = p.in_shape;
  if (want[p.dim] % n) lowerer.invalid(ctx, "the scatter dimension must divide by the group size " + std::to_string(n));
  want[p.dim] /= n;
  checkResultShape(lowerer, ctx, want);
  OpKind combine = OpKind::Add;
  const std::string computation = readCombiner(lowerer, ctx, &p, &combine);
  Ring ring(lowerer, ctx, std::move(p), combine);
  if (ring.onChip(n == 1)) return ring.emit();
  for (int64_t k = 0; k + 1 < n; ++k)
    ring.step("reduceScatter" + computation + ring.type(), ring.inMap(), n, divUp(ring.bytes(), n), static_cast<int>(n),
              true);
  return ring.emit(ring.combineFlops(n));
}

std::vector<int> lowerAllGather(Lowerer& lowerer, OpContext& ctx) {
  Plan p = beginMove(lowerer, ctx, Pattern::AllGather);
  const int64_t n = groupSize(lowerer, ctx, p, true);
  p.dim = dimension(lowerer, ctx, "all_gather_dim");
  Shape want = p.in_shape;
  want[p.dim] *= n;
  checkResultShape(lowerer, ctx, want);
  Ring ring(lowerer, ctx, std::move(p));
  if (ring.onChip(n == 1)) return ring.emit();
  for (int64_t k = 0; k + 1 < n; ++k)
    ring.step("allGather" + ring.type(), ring.outMap(), n, ring.bytes(), static_cast<int>(n), false);
  return ring.emit();
}

std::vector<int> lowerAllToAll(Lowerer& lowerer, OpContext& ctx) {
  Plan p = beginMove(lowerer, ctx, Pattern::AllToAll);
  const int64_t n = groupSize(lowerer, ctx, p, true);
  p.dim = dimension(lowerer, ctx, "split_dimension");
  p.concat_dim = dimension(lowerer, ctx, "concat_dimension");
  if (attrInt(*ctx.op, "split_count") != n)
    lowerer.invalid(ctx, "split_count must be the replica group size " + std::to_string(n));
  Shape want = p.in_shape;
  if (want[p.dim] % n) lowerer.invalid(ctx, "the split dimension must divide by split_count");
  want[p.dim] /= n;
  want[p.concat_dim] *= n;
  checkResultShape(lowerer, ctx, want);
  Ring ring(lowerer, ctx, std::move(p));
  if (ring.onChip(n == 1)) return ring.emit();
  for (int64_t k = 0; k + 1 < n; ++k)
    ring.step("allToAll" + ring.type(), ring.outMap(), n, divUp(ring.bytes(), n), static_cast<int>(n), false);
  return ring.emit();
}

// One step: the whole operand between the IPUs of each pair.
std::vector<int> lowerCollectivePermute(Lowerer& lowerer, OpContext& ctx) {
  Plan p = beginMove(lowerer, ctx, Pattern::Permute);
  int64_t pairs = 0;
  readPairs(lowerer, ctx, &p, &pairs);
  checkResultShape(lowerer, ctx, p.in_shape);
  const int replicas = p.replicas;
  Ring ring(lowerer, ctx, std::move(p));
  if (ring.onChip(pairs == 0 || replicas == 1)) return ring.emit();
  ring.step("permute" + ring.type(), ring.outMap(), 1, ring.bytes(), replicas, false);
  return ring.emit();
}

}  // namespace ipu
