// gather and scatter: data movement at run-time indices, with XLA's semantics.
//
// gather: each batch position of the indices selects a slice of the operand; its start indices are clamped so the
// slice stays inside the operand (XLA, and StableHLO's reference). The result is linearly mapped; the elements
// come from wherever the indices point, so the exchange is estimated as every gathered byte crossing tiles.
//
// scatter: the result starts as the operand (mapped like it) and each update window is combined into it in the
// order of the scatter indices (row-major), with the update computation: a recognised single op, "assign" (the
// update replaces the element: the last update wins), or any other body interpreted as a ScalarProgram. A window
// that does not fit entirely inside the operand is skipped, as XLA's scatter expander does.
#include <algorithm>
#include <cstring>

#include "ipu/cost_model.h"
#include "ipu/dtype.h"
#include "ipu/handlers.h"
#include "ipu/lowering.h"
#include "ipu/numerics.h"
#include "ipu/scalar_ops.h"
#include "ipu/scalar_program.h"

namespace ipu {

namespace {


// Walks the multi-index of a row-major shape from element `b`, keeping two linear combinations of it.
struct DualWalker {
  const std::vector<int64_t>& shape;
  const std::vector<int64_t>& s1;
  const std::vector<int64_t>& s2;
  std::vector<int64_t> idx;
  int64_t a = 0, c = 0;

  DualWalker(const std::vector<int64_t>& sh, const std::vector<int64_t>& x, const std::vector<int64_t>& y, int64_t b)
      : shape(sh), s1(x), s2(y), idx(sh.size(), 0) {
    for (size_t d = shape.size(); d-- > 0;) {
      if (shape[d] == 0) return;
      idx[d] = b % shape[d];
      b /= shape[d];
      a += idx[d] * s1[d];
      c += idx[d] * s2[d];
    }
  }
  void next() {
    for (size_t d = shape.size(); d-- > 0;) {
      a += s1[d];
      c += s2[d];
      if (++idx[d] < shape[d]) return;
      a -= shape[d] * s1[d];
      c -= shape[d] * s2[d];
      idx[d] = 0;
    }
  }
};

// Where the index vectors are: for batch position g (row-major over the batch shape), component k sits at
// base(g) + k * k_stride in the indices tensor.
struct IndexLayout {
  std::vector<int64_t> batch_shape;    // the indices' shape without index_vector_dim
  std::vector<int64_t> batch_strides;  // the indices' strides of those dimensions
  int64_t k_stride = 0;
  int64_t count = 1;  // number of batch positions
  DType dtype = DType::I32;
};

IndexLayout indexLayout(const TensorType& indices, int64_t ivd) {
  IndexLayout l;
  const std::vector<int64_t> st = rowMajorStrides(indices.shape);
  for (size_t d = 0; d < indices.shape.size(); ++d) {
    if (static_cast<int64_t>(d) == ivd) {
      l.k_stride = st[d];
      continue;
    }
    l.batch_shape.push_back(indices.shape[d]);
    l.batch_strides.push_back(st[d]);
    l.count *= indices.shape[d];
  }
  l.dtype = indices.dtype;
  return l;
}

// Per batch position: the linear operand offset of its slice / window start, or -1 for a skipped scatter window.
// starts[d] = index component k for d = dims_map[k]; clamped into [0, limit[d]] (gather) or checked (scatter).
struct StartPlan {
  int indices = -1;
  int scratch = -1;
  IndexLayout layout;
  std::vector<int64_t> dims_map;  // index component -> operand dimension
  std::vector<int64_t> limit;     // per operand dimension: operand size - slice/window size
  std::vector<int64_t> operand_strides;
  bool clamp = true;
  int windows = -1;  // scatter: the scratch of its update runs sorted by target

  void compute(RunState& s) const {
    std::vector<uint8_t>& buf = s.scratch[static_cast<size_t>(scratch)];
    buf.resize(static_cast<size_t>(layout.count) * sizeof(int64_t));
    int64_t* out = reinterpret_cast<int64_t*>(buf.data());
    const uint8_t* raw = s.ptr[static_cast<size_t>(indices)];
    const std::vector<int64_t> zero(layout.batch_shape.size(), 0);
    DualWalker w(layout.batch_shape, layout.batch_strides, zero, 0);
    std::vector<int64_t> start(limit.size());
    for (int64_t g = 0; g < layout.count; ++g, w.next()) {
      std::fill(start.begin(), start.end(), 0);
      for (size_t k = 0; k < dims_map.size(); ++k) {
        const int64_t at = w.a + static_cast<int64_t>(k) * layout.k_stride;
        start[static_cast<size_t>(dims_map[k])] =
            loadInteger(raw + at * static_cast<int64_t>(dtypeSize(layout.dtype)), layout.dtype);
      }
      int64_t off = 0;
      bool valid = true;
      for (size_t d = 0; d < start.size(); ++d) {
        int64_t v = start[d];
        if (clamp) v = std::max<int64_t>(0, std::min(v, limit[d]));
        else valid = valid && v >= 0 && v <= limit[d];
        off += v * operand_strides[d];
      }
      out[g] = valid ? off : -1;
    }
  }
  const int64_t* starts(const RunState& s) const {
    return reinterpret_cast<const int64_t*>(s.scratch[static_cast<size_t>(scratch)].data());
  }
};

// Splits a shape whose strides are (s1, s2) into outer dimensions and an inner run: the longest suffix of dimensions
// with s1 = 0 (one batch position) and s2 row-major contiguous, so a run is one memcpy-able row (an embedding row).
struct Runs {
  std::vector<int64_t> shape, s1, s2;  // the outer dimensions
  int64_t run = 1;
  Runs(const std::vector<int64_t>& sh, const std::vector<int64_t>& x, const std::vector<int64_t>& y) {
    size_t d = sh.size();
    while (d > 0 && x[d - 1] == 0 && y[d - 1] == run) run *= sh[--d];
    shape.assign(sh.begin(), sh.begin() + static_cast<std::ptrdiff_t>(d));
    s1.assign(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(d));
    s2.assign(y.begin(), y.begin() + static_cast<std::ptrdiff_t>(d));
  }
};

// out[i] = x[start[g(i)] + offset(i)], g and offset linear in the output's multi-index; copied a run at a time.
template <class T>
class GatherKernel : public Kernel {
 public:
  GatherKernel(int x, int out, StartPlan plan, const std::vector<int64_t>& out_shape,
               const std::vector<int64_t>& batch_strides, const std::vector<int64_t>& offset_strides)
      : x_(x), out_(out), plan_(std::move(plan)), runs_(out_shape, batch_strides, offset_strides) {}
  void prepare(RunState& s) const override { plan_.compute(s); }
  void compute(RunState& s, int64_t b, int64_t e) const override {
    const int64_t run = runs_.run;
    if (b >= e || run == 0) return;
    const T* x = s.at<const T>(x_);
    T* o = s.at<T>(out_);
    const int64_t* start = plan_.starts(s);
    DualWalker w(runs_.shape, runs_.s1, runs_.s2, b / run);
    for (int64_t i = b, r = b % run; i < e; r = 0, w.next()) {
      const int64_t len = std::min(run - r, e - i);
      std::memcpy(o + i, x + start[w.a] + w.c + r, static_cast<size_t>(len) * sizeof(T));
      i += len;
    }
  }

 private:
  int x_, out_;
  StartPlan plan_;
  Runs runs_;
};

// The shared walk of a scatter: copies the operand's [b, e) and calls apply(target, update index) for every update
// element whose target lies in [b, e), in update order. The updates go a run (a window row) at a time: prepare()
// sorts the runs by their first target, so a call visits only the runs that reach into its range, in update order.
class ScatterBase : public Kernel {
 public:
  ScatterBase(int x, int upd, int out, size_t elem, StartPlan plan, const std::vector<int64_t>& upd_shape,
              const std::vector<int64_t>& batch_strides, const std::vector<int64_t>& window_strides)
      : x_(x), upd_(upd), out_(out), elem_(elem), plan_(std::move(plan)),
        runs_(upd_shape, batch_strides, window_strides) {
    count_ = shapeElements(upd_shape);
  }
  void prepare(RunState& s) const override {
    plan_.compute(s);
    const int64_t* start = plan_.starts(s);
    std::vector<uint8_t>& buf = s.scratch[static_cast<size_t>(plan_.windows)];
    const int64_t runs = runs_.run == 0 ? 0 : count_ / runs_.run;
    buf.resize(static_cast<size_t>(runs) * sizeof(Target));
    Target* t = reinterpret_cast<Target*>(buf.data());
    size_t n = 0;
    DualWalker w(runs_.shape, runs_.s1, runs_.s2, 0);
    for (int64_t p = 0; p < runs; ++p, w.next())
      if (start[w.a] >= 0) t[n++] = Target{start[w.a] + w.c, p};
    sortByFirst(t, n);
    buf.resize(n * sizeof(Target));
  }

 protected:
  struct Target {
    int64_t first, run;  // the run's first target element, and the run's index in the updates
    bool operator<(const Target& o) const { return first != o.first ? first < o.first : run < o.run; }
  };

  // The runs [first, first + run) that meet [b, e), in update order (runs that overlap with different first targets
  // must still combine in the order of the updates); and the result's [b, e) copied from the operand unless they
  // share storage (Node::in_place: only the updated elements are written then). Not a template: walk's callers
  // are one per element type and combiner, and this (a sort) would be compiled again for each.
  std::vector<Target> hits(RunState& s, int64_t b, int64_t e) const {
    if (s.ptr[static_cast<size_t>(out_)] != s.ptr[static_cast<size_t>(x_)])
      std::memcpy(s.ptr[static_cast<size_t>(out_)] + b * static_cast<int64_t>(elem_),
                  s.ptr[static_cast<size_t>(x_)] + b * static_cast<int64_t>(elem_), static_cast<size_t>(e - b) * elem_);
    const int64_t run = runs_.run;
    const std::vector<uint8_t>& buf = s.scratch[static_cast<size_t>(plan_.windows)];
    const Target* all = reinterpret_cast<const Target*>(buf.data());
    const Target* end = all + buf.size() / sizeof(Target);
    const Target* lo = std::lower_bound(all, end, Target{b - run + 1, 0});
    const Target* hi = std::lower_bound(lo, end, Target{e, 0});
    std::vector<Target> found(lo, hi);
    if (found.size() == static_cast<size_t>(end - all) && !found.empty()) {
      // Every run (a call over the whole result): in update order by placing each at its run, which are distinct.
      const int64_t runs = run == 0 ? 0 : count_ / run;
      std::vector<int64_t> at(static_cast<size_t>(runs), -1);
      for (size_t i = 0; i < found.size(); ++i) at[static_cast<size_t>(found[i].run)] = static_cast<int64_t>(i);
      std::vector<Target> ordered;
      ordered.reserve(found.size());
      for (int64_t i : at)
        if (i >= 0) ordered.push_back(found[static_cast<size_t>(i)]);
      return ordered;
    }
    std::sort(found.begin(), found.end(), [](const Target& x, const Target& y) { return x.run < y.run; });
    return found;
  }

  // Sorts targets made in update order by first target, equal targets staying in update order (what sorting by
  // (first, run) gives): std::sort for a few, else a stable radix sort of 11-bit digits of `first`.
  static void sortByFirst(Target* t, size_t n) {
    if (n < 1024) {
      std::sort(t, t + n);
      return;
    }
    int64_t top = 0;
    for (size_t i = 0; i < n; ++i) top = std::max(top, t[i].first);
    std::vector<Target> other(n);
    Target* from = t;
    Target* to = other.data();
    for (int shift = 0; shift < 63 && (top >> shift) > 0; shift += 11) {
      size_t count[2049] = {};
      for (size_t i = 0; i < n; ++i) ++count[((from[i].first >> shift) & 2047) + 1];
      for (size_t d = 1; d < 2049; ++d) count[d] += count[d - 1];
      for (size_t i = 0; i < n; ++i) to[count[(from[i].first >> shift) & 2047]++] = from[i];
      std::swap(from, to);
    }
    if (from != t) std::copy(from, from + n, t);
  }

  template <class F>
  void walk(RunState& s, int64_t b, int64_t e, const F& apply) const {
    const int64_t run = runs_.run;
    for (const Target& h : hits(s, b, e)) {
      const int64_t from = std::max(h.first, b), to = std::min(h.first + run, e);
      const int64_t u = h.run * run - h.first;
      for (int64_t t = from; t < to; ++t) apply(t, u + t);
    }
  }
  int x_, upd_, out_;
  size_t elem_;
  StartPlan plan_;
  Runs runs_;
  int64_t count_ = 0;
};

template <class S, class F>
class ScatterKernel : public ScatterBase {
 public:
  template <class... A>
  ScatterKernel(F f, A&&... a) : ScatterBase(std::forward<A>(a)...), f_(f) {}
  void compute(RunState& s, int64_t b, int64_t e) const override {
    S* o = s.at<S>(out_);
    const S* u = s.at<const S>(upd_);
    walk(s, b, e, [&](int64_t t, int64_t k) { o[t] = f_(o[t], u[k]); });
  }

 private:
  F f_;
};

struct Assign {
  template <class T>
  T operator()(T, T b) const {
    return b;
  }
};

// A general update computation: (current, update) loaded into registers 0 and 1, the body run, its result stored.
class BodyScatterKernel : public ScatterBase {
 public:
  template <class... A>
  BodyScatterKernel(ScalarProgram body, A&&... a) : ScatterBase(std::forward<A>(a)...), body_(std::move(body)) {}
  void compute(RunState& s, int64_t b, int64_t e) const override {
    ScalarRegisters regs(body_, 2);
    uint8_t* r = regs.bytes();
    uint8_t* o = s.ptr[static_cast<size_t>(out_)];
    const uint8_t* u = s.ptr[static_cast<size_t>(upd_)];
    const int64_t es = static_cast<int64_t>(elem_);
    const size_t res = static_cast<size_t>(body_.resultRegister(0));
    walk(s, b, e, [&](int64_t t, int64_t k) {
      std::memcpy(r, o + t * es, elem_);
      std::memcpy(r + kRegBytes, u + k * es, elem_);
      body_.run(regs.data());
      std::memcpy(o + t * es, r + kRegBytes * res, elem_);
    });
  }

 private:
  ScalarProgram body_;
};

bool sortedUnique(const std::vector<int64_t>& v, int64_t limit) {
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] < 0 || v[i] >= limit || (i > 0 && v[i] <= v[i - 1])) return false;
  return true;
}

bool contains(const std::vector<int64_t>& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

std::string list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// What a gather and a scatter share: operand 0, the indices and the result checked; the plan of where each index
// vector starts (StartPlan, its scratch); the result's slot, its tile mapping and the bytes each tile receives.
struct Indexed {
  StartPlan plan;
  int64_t rank = 0, k_len = 0, eb = 0, n = 0;
  std::vector<int64_t> x_strides;
  int o = -1;
  TileMapping work;
  std::vector<int64_t> recv;
};

Indexed beginIndexed(Lowerer& lowerer, const OpContext& ctx, bool is_gather) {
  const Op& op = *ctx.op;
  if (ctx.out_types.size() != 1) lowerer.invalid(ctx, "expected one result");
  const TensorType& x = ctx.in_types[0];
  const TensorType& ind = ctx.in_types[1];
  const TensorType& out = ctx.out_types[0];
  Indexed ix;
  ix.rank = static_cast<int64_t>(x.shape.size());
  if (!isInteger(ind.dtype))
    lowerer.unimplemented(ctx, std::string(ctx.info->name) + " is implemented for i32 and u32 indices");
  if (out.dtype != x.dtype) lowerer.invalid(ctx, "the result's element type differs from the operand's");
  const int64_t ivd = attrInt(op, "index_vector_dim");
  const int64_t ind_rank = static_cast<int64_t>(ind.shape.size());
  if (ivd < 0 || ivd > ind_rank) lowerer.invalid(ctx, "index_vector_dim " + std::to_string(ivd) + " is out of range");
  ix.k_len = ivd < ind_rank ? ind.shape[static_cast<size_t>(ivd)] : 1;
  ix.x_strides = rowMajorStrides(x.shape);
  ix.eb = static_cast<int64_t>(dtypeSize(x.dtype));

  StartPlan& plan = ix.plan;
  plan.indices = ctx.in[1];
  plan.scratch = lowerer.newScratch();
  plan.layout = indexLayout(ind, ivd);
  plan.operand_strides = ix.x_strides;
  plan.clamp = is_gather;
  if (!is_gather) plan.windows = lowerer.newScratch();
  const char* map_name = is_gather ? "start_index_map" : "scatter_dims_to_operand_dims";
  plan.dims_map = attrInts(op, map_name);
  if (static_cast<int64_t>(plan.dims_map.size()) != ix.k_len)
    lowerer.invalid(ctx, std::string(map_name) + " " + list(plan.dims_map) +
                             " must have one entry per index component (" + std::to_string(ix.k_len) + ")");
  for (size_t k = 0; k < plan.dims_map.size(); ++k)
    if (plan.dims_map[k] < 0 || plan.dims_map[k] >= ix.rank ||
        contains({plan.dims_map.begin(), plan.dims_map.begin() + static_cast<std::ptrdiff_t>(k)}, plan.dims_map[k]))
      lowerer.invalid(ctx,
                      std::string(map_name) + " " + list(plan.dims_map) + " has an out-of-range or repeated dimension");

  ix.o = is_gather ? lowerer.newSlot(out) : lowerer.newSlotLike(out, ctx.in[0]);
  ix.work = lowerer.graph().slots[static_cast<size_t>(ix.o)].mapping;
  ix.n = out.numElements();
  ix.recv.assign(static_cast<size_t>(lowerer.device().num_tiles), 0);
  return ix;
}

// Where each update element lands: per update dimension its stride in the indices' batch (bstr) or in the operand
// (wstr, a window dimension). Also sets the plan's start limits (the operand's size less the window's).
struct UpdateLayout {
  std::vector<int64_t> bstr, wstr;
};

UpdateLayout readUpdateWindows(const Lowerer& lowerer, const OpContext& ctx, Indexed* ix) {
  const Op& op = *ctx.op;
  const TensorType& x = ctx.in_types[0];
  const TensorType& upd = ctx.in_types[2];
  const std::vector<int64_t> window_dims = attrInts(op, "update_window_dims");
  const std::vector<int64_t> inserted = attrInts(op, "inserted_window_dims");
  const int64_t upd_rank = static_cast<int64_t>(upd.shape.size());
  const std::vector<int64_t>& batch_shape = ix->plan.layout.batch_shape;
  if (!sortedUnique(window_dims, upd_rank))
    lowerer.invalid(ctx, "update_window_dims " + list(window_dims) + " must be sorted, unique update dimensions");
  if (!sortedUnique(inserted, ix->rank))
    lowerer.invalid(ctx, "inserted_window_dims " + list(inserted) + " must be sorted, unique operand dimensions");
  if (static_cast<int64_t>(window_dims.size() + inserted.size()) != ix->rank)
    lowerer.invalid(ctx, "update_window_dims and inserted_window_dims must together cover the operand's dimensions");
  if (upd_rank != static_cast<int64_t>(batch_shape.size() + window_dims.size()))
    lowerer.invalid(ctx, "the updates' rank is not the batch rank plus the number of update_window_dims");
  UpdateLayout u;
  u.bstr.assign(static_cast<size_t>(upd_rank), 0);
  u.wstr.assign(static_cast<size_t>(upd_rank), 0);
  std::vector<int64_t> wsize(static_cast<size_t>(ix->rank), 1);
  const std::vector<int64_t> batch_row = rowMajorStrides(batch_shape);
  size_t next_batch = 0;
  int64_t next_operand = 0;
  for (int64_t d = 0; d < upd_rank; ++d) {
    const int64_t size = upd.shape[static_cast<size_t>(d)];
    if (contains(window_dims, d)) {
      while (contains(inserted, next_operand)) ++next_operand;
      if (size > x.shape[static_cast<size_t>(next_operand)])
        lowerer.invalid(ctx, "update window dimension " + std::to_string(d) + " is larger than the operand's");
      wsize[static_cast<size_t>(next_operand)] = size;
      u.wstr[static_cast<size_t>(d)] = ix->x_strides[static_cast<size_t>(next_operand)];
      ++next_operand;
    } else {
      if (size != batch_shape[next_batch])
        lowerer.invalid(ctx, "update dimension " + std::to_string(d) + " does not match the indices' batch dimensions");
      u.bstr[static_cast<size_t>(d)] = batch_row[next_batch];
      ++next_batch;
    }
  }
  for (int64_t d = 0; d < ix->rank; ++d)
    ix->plan.limit.push_back(x.shape[static_cast<size_t>(d)] - wsize[static_cast<size_t>(d)]);
  return u;
}

// How a scatter combines an update with the element it lands on: a vector kernel for assign and the reducers,
// else (no computation attribute, or no vector kernel for the type) the update computation interpreted.
struct ScatterVertex {
  std::unique_ptr<Kernel> kernel;
  std::string codelet;  // "scatteradd<f32>", "scatter{...}<f32>"
  OpKind kind = OpKind::Add;  // the reducer
  ScalarProgram body;  // interpreted: the compiled update computation
  bool general = false;
};

template <typename S, typename F>
std::unique_ptr<Kernel> scatterKernel(F f, const OpContext& ctx, const Indexed& ix, const UpdateLayout& u) {
  return std::make_unique<ScatterKernel<S, F>>(f, ctx.in[0], ctx.in[2], ix.o, dtypeSize(ctx.in_types[0].dtype), ix.plan,
                                               ctx.in_types[2].shape, u.bstr, u.wstr);
}

ScatterVertex makeScatterVertex(Lowerer& lowerer, const OpContext& ctx, const Indexed& ix, const UpdateLayout& u) {
  const Op& op = *ctx.op;
  const DType dt = ctx.in_types[0].dtype;
  ScatterVertex v;
  const std::string computation = attrString(op, "computation", "");
  if (!computation.empty() && computation != "assign" && !isReducer(computation))
    lowerer.invalid(
        ctx, "unknown computation \"" + computation + "\" (expected assign, add, multiply, maximum, minimum, and, or)");
  if (computation == "assign") {
    switch (ix.eb) {
      case 1: v.kernel = scatterKernel<uint8_t>(Assign{}, ctx, ix, u); break;
      case 2: v.kernel = scatterKernel<uint16_t>(Assign{}, ctx, ix, u); break;
      case 8: v.kernel = scatterKernel<uint64_t>(Assign{}, ctx, ix, u); break;  // c64
      case 16: v.kernel = scatterKernel<Complex128>(Assign{}, ctx, ix, u); break;
      default: v.kernel = scatterKernel<uint32_t>(Assign{}, ctx, ix, u); break;
    }
  } else if (!computation.empty()) {
    v.kind = findOp(computation)->kind;
    if (dt == DType::Bool && v.kind == OpKind::Add) v.kind = OpKind::Or;
    if (dt == DType::Bool && v.kind == OpKind::Multiply) v.kind = OpKind::And;
    auto make = [&](auto f, auto t) {  // a vector kernel of the combiner f on storage type t
      v.kernel = scatterKernel<typename decltype(t)::type>(f, ctx, ix, u);
    };
    // jaxlib 0.12's XLA:CPU computes a bf16 scatter's maximum/minimum in f32, reading denormals as zeros (its
    // elementwise bf16 maximum, native on an AVX512-FP16 host, keeps them)
    const bool bf16_in_f32 = dt == DType::BF16 && lowerer.numerics() == Numerics::Jaxlib012;
    using BF16 = scalar::FloatFormat<DType::BF16>;
    const scalar::Tag<Storage<DType::BF16>> bf16;
    if (bf16_in_f32 && v.kind == OpKind::Maximum) make(scalar::Half2<scalar::MaximumIeeeF, BF16>{}, bf16);
    else if (bf16_in_f32 && v.kind == OpKind::Minimum) make(scalar::Half2<scalar::MinimumIeeeF, BF16>{}, bf16);
    else if (!(isFloat(dt) && (v.kind == OpKind::And || v.kind == OpKind::Or)))
      scalar::visitBinary<true>(v.kind, dt, lowerer.numerics(), make);
  }
  v.codelet = "scatter" + computation;
  if (!v.kernel) {
    if (op.regions.size() != 1) lowerer.invalid(ctx, "scatter must have one update computation region");
    v.body = lowerer.compileBody(ctx, op.regions[0], {dt, dt}, {dt}, "in the update computation");
    v.codelet = "scatter{" + v.body.summary() + "}";
    v.kernel = std::make_unique<BodyScatterKernel>(v.body, ctx.in[0], ctx.in[2], ix.o, dtypeSize(dt), ix.plan,
                                                   ctx.in_types[2].shape, u.bstr, u.wstr);
  }
  v.codelet += "<" + std::string(dtypeName(dt)) + ">";
  v.general = v.body.numInstructions() > 0 || computation.empty();
  return v;
}

}  // namespace

std::vector<int> lowerGather(Lowerer& lowerer, OpContext& ctx) {
  Indexed ix = beginIndexed(lowerer, ctx, true);
  const Op& op = *ctx.op;
  const TensorType& x = ctx.in_types[0];
  const TensorType& out = ctx.out_types[0];
  const int workers = lowerer.device().num_worker_contexts;
  std::unique_ptr<Kernel> kernel;
  std::vector<Superstep> steps;
  const std::vector<int64_t> offset_dims = attrInts(op, "offset_dims");
  const std::vector<int64_t> collapsed = attrInts(op, "collapsed_slice_dims");
  const std::vector<int64_t> sizes = attrInts(op, "slice_sizes");
  const int64_t out_rank = static_cast<int64_t>(out.shape.size());
  if (static_cast<int64_t>(sizes.size()) != ix.rank)
    lowerer.invalid(ctx, "slice_sizes " + list(sizes) + " must have one entry per operand dimension");
  if (!sortedUnique(collapsed, ix.rank))
    lowerer.invalid(ctx, "collapsed_slice_dims " + list(collapsed) + " must be sorted, unique operand dimensions");
  if (!sortedUnique(offset_dims, out_rank))
    lowerer.invalid(ctx, "offset_dims " + list(offset_dims) + " must be sorted, unique result dimensions");
  if (static_cast<int64_t>(offset_dims.size() + collapsed.size()) != ix.rank)
    lowerer.invalid(ctx, "offset_dims and collapsed_slice_dims must together cover the operand's dimensions");
  if (out_rank != static_cast<int64_t>(ix.plan.layout.batch_shape.size() + offset_dims.size()))
    lowerer.invalid(ctx, "the result's rank is not the batch rank plus the number of offset_dims");
  for (int64_t d = 0; d < ix.rank; ++d) {
    const int64_t sz = sizes[static_cast<size_t>(d)];
    if (sz < 0 || sz > x.shape[static_cast<size_t>(d)])
      lowerer.invalid(ctx, "slice_sizes " + list(sizes) + " do not fit the operand");
    if (contains(collapsed, d) && sz != 1) lowerer.invalid(ctx, "collapsed_slice_dims must have slice size 1");
    ix.plan.limit.push_back(x.shape[static_cast<size_t>(d)] - sz);
  }
  // Result dims: offset dims take the non-collapsed operand dims in order, batch dims the indices' batch dims.
  std::vector<int64_t> bstr(static_cast<size_t>(out_rank), 0), ostr(static_cast<size_t>(out_rank), 0);
  const std::vector<int64_t> batch_row = rowMajorStrides(ix.plan.layout.batch_shape);
  size_t next_batch = 0;
  int64_t next_operand = 0;
  for (int64_t d = 0; d < out_rank; ++d) {
    int64_t expect;
    if (contains(offset_dims, d)) {
      while (contains(collapsed, next_operand)) ++next_operand;
      expect = sizes[static_cast<size_t>(next_operand)];
      ostr[static_cast<size_t>(d)] = ix.x_strides[static_cast<size_t>(next_operand)];
      ++next_operand;
    } else {
      expect = ix.plan.layout.batch_shape[next_batch];
      bstr[static_cast<size_t>(d)] = batch_row[next_batch];
      ++next_batch;
    }
    if (out.shape[static_cast<size_t>(d)] != expect)
      lowerer.invalid(ctx, "result dimension " + std::to_string(d) + " should have size " + std::to_string(expect));
  }
  kernel = [&]() -> std::unique_ptr<Kernel> {
    switch (ix.eb) {
      case 1: return std::make_unique<GatherKernel<uint8_t>>(ctx.in[0], ix.o, ix.plan, out.shape, bstr, ostr);
      case 2: return std::make_unique<GatherKernel<uint16_t>>(ctx.in[0], ix.o, ix.plan, out.shape, bstr, ostr);
      case 8: return std::make_unique<GatherKernel<uint64_t>>(ctx.in[0], ix.o, ix.plan, out.shape, bstr, ostr);  // c64
      case 16: return std::make_unique<GatherKernel<Complex128>>(ctx.in[0], ix.o, ix.plan, out.shape, bstr, ostr);
      default: return std::make_unique<GatherKernel<uint32_t>>(ctx.in[0], ix.o, ix.plan, out.shape, bstr, ostr);
    }
  }();
  // Dynamic exchange: every gathered byte counted as received, plus the index vectors each tile reads.
  for (int t = 0; t < ix.work.tilesUsed(); ++t) ix.recv[static_cast<size_t>(t)] += ix.work.elementsOn(t) * ix.eb;
  if (ix.n > 0 && ix.plan.layout.count > 0) {
    const std::vector<int64_t> zero(static_cast<size_t>(out_rank), 0);
    for (int64_t k = 0; k < ix.k_len; ++k)
      lowerer.exchangeGather(&ix.recv, ix.work, ctx.in[1], [&](int64_t i) {
        DualWalker w(out.shape, bstr, zero, i);  // w.a: the batch position of element i
        int64_t at = k * ix.plan.layout.k_stride, g = w.a;
        for (size_t d = ix.plan.layout.batch_shape.size(); d-- > 0;) {
          at += (g % ix.plan.layout.batch_shape[d]) * ix.plan.layout.batch_strides[d];
          g /= ix.plan.layout.batch_shape[d];
        }
        return at;
      });
  }
  if (ix.n > 0)
    steps.push_back(lowerer.superstep("gather<" + std::string(dtypeName(out.dtype)) + ">", ix.work, ix.recv,
                                      [&](int, int64_t m) { return cost::copy(m * ix.eb, workers); }));
  lowerer.emitExecute(ctx, std::move(kernel), std::move(steps), {ix.o}, 0);
  return {ix.o};
}

// Each tile of the result updates the elements it holds: it receives the operand's share and (estimated as landing
// evenly over the result's tiles) its share of the updates and their indices.
std::vector<int> lowerScatter(Lowerer& lowerer, OpContext& ctx) {
  if (ctx.in.size() != 3)
    lowerer.unimplemented(ctx, "scatter is implemented for one operand and one updates tensor (not variadic)");
  Indexed ix = beginIndexed(lowerer, ctx, false);
  const TensorType& x = ctx.in_types[0];
  const TensorType& upd = ctx.in_types[2];
  if (upd.dtype != x.dtype) lowerer.invalid(ctx, "the updates' element type differs from the operand's");
  if (ctx.out_types[0].shape != x.shape) lowerer.invalid(ctx, "the result's shape differs from the operand's");
  const UpdateLayout u = readUpdateWindows(lowerer, ctx, &ix);
  ScatterVertex v = makeScatterVertex(lowerer, ctx, ix, u);
  const bool assign = attrString(*ctx.op, "computation", "") == "assign";
  const DType dt = x.dtype;
  const int workers = lowerer.device().num_worker_contexts;
  lowerer.exchangeSameIndex(&ix.recv, ix.work, ctx.in[0]);
  const int64_t upd_n = upd.numElements();
  const int64_t moved = upd_n * ix.eb + ctx.in_types[1].numElements() * 4;
  for (int t = 0; t < ix.work.tilesUsed() && ix.work.tilesUsed() > 1; ++t)
    ix.recv[static_cast<size_t>(t)] += (moved * ix.work.elementsOn(t) + ix.n - 1) / ix.n;
  const double body_cycles = v.body.cyclesPerElement();
  std::vector<Superstep> steps;
  if (ix.n > 0) {
    steps.push_back(lowerer.superstep(v.codelet, ix.work, ix.recv, [&](int, int64_t m) {
      const int64_t share = (upd_n * m + ix.n - 1) / ix.n;
      const uint64_t combine = v.general ? cost::reduceBody(std::max(1.0, body_cycles), share, 0, workers)
                               : assign  ? cost::copy(share * ix.eb, workers)
                                         : cost::elementwise(v.kind, dt, share, workers);
      return cost::copy(m * ix.eb, workers) + combine;
    }));
    steps.back().cost_weight = std::max<double>(1, static_cast<double>(upd_n) / std::max<int64_t>(1, ix.n));
  }
  const double flops = v.general                  ? v.body.flopsPerElement() * static_cast<double>(upd_n)
                       : (isFloat(dt) && !assign) ? static_cast<double>(upd_n)
                                                  : 0;
  Node* node = lowerer.emitExecute(ctx, std::move(v.kernel), std::move(steps), {ix.o}, flops);
  // A scatter reads each operand element only to write the same result element: it can update the operand in
  // place, as Poplar's multiUpdate/multiUpdateAdd do, when its indices and updates are other values.
  if (ctx.in[1] != ctx.in[0] && ctx.in[2] != ctx.in[0]) node->in_place.emplace_back(ctx.in[0], ix.o);
  return {ix.o};
}

}  // namespace ipu
