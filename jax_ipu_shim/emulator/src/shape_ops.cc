// Data-movement ops (broadcast, transpose, reverse, slice, dynamic slices, concatenate, pad, iota, constant, reshape,
// bitcast_convert).
// Poplar would express most as views; we materialise each as a copy into a linearly mapped result, so its cost is
// the exchange that brings the source elements to the tiles that hold the result, plus an on-tile copy.
#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>

#include "ipu/cost_model.h"
#include "ipu/dtype.h"
#include "ipu/handlers.h"
#include "ipu/lowering.h"
#include "ipu/scalar_ops.h"
#include "ipu/strided_copy.h"

namespace ipu {

namespace {


void unravel(int64_t i, const std::vector<int64_t>& shape, std::vector<int64_t>* idx) {
  idx->assign(shape.size(), 0);
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 0) return;
    (*idx)[d] = i % shape[d];
    i /= shape[d];
  }
}

// A run-time start index (an integer scalar of type `type`) clamped into [0, limit] as XLA does.
int64_t readStart(const RunState& s, int slot, DType type, int64_t limit) {
  return std::max<int64_t>(0, std::min(loadInteger(s.at<const uint8_t>(slot), type), limit));
}

// readStart of each dimension's start index.
void readStarts(const RunState& s, const std::vector<int>& slots, const std::vector<DType>& types,
                const std::vector<int64_t>& limits, int64_t* out) {
  for (size_t d = 0; d < slots.size(); ++d) out[d] = readStart(s, slots[d], types[d], limits[d]);
}

// A dynamic_slice's run-time offset: clamped start indices read from scalar operands.
struct DynamicOffset {
  int dyn = -1;  // index into RunState::dynamic; -1: no dynamic offset
  std::vector<int> starts;
  std::vector<DType> start_types;
  std::vector<int64_t> limits, in_strides;
};

// out[i] = in[base + dynamic offset + sum_d idx_d(i) * stride_d]: broadcast, transpose, slice and dynamic_slice.
template <class T>
class StridedGatherKernel : public Kernel {
 public:
  StridedGatherKernel(int in, int out, std::vector<int64_t> shape, std::vector<int64_t> strides, int64_t base,
                      DynamicOffset dynamic)
      : in_(in), out_(out), shape_(std::move(shape)), strides_(std::move(strides)), base_(base),
        dyn_(std::move(dynamic)) {}

  void prepare(RunState& s) const override {
    if (dyn_.dyn < 0) return;
    int64_t offset = 0;  // (no allocation: a loop's dynamic slice prepares once per iteration)
    for (size_t d = 0; d < dyn_.starts.size(); ++d)
      offset += readStart(s, dyn_.starts[d], dyn_.start_types[d], dyn_.limits[d]) * dyn_.in_strides[d];
    s.dynamic[static_cast<size_t>(dyn_.dyn)] = offset;
  }

  void compute(RunState& s, int64_t b, int64_t e) const override {
    const int64_t base = base_ + (dyn_.dyn >= 0 ? s.dynamic[static_cast<size_t>(dyn_.dyn)] : 0);
    copyStridedView<true>(s.at<const T>(in_), s.at<T>(out_) + b, shape_, strides_, base, b, e, [](T v) { return v; });
  }

 private:
  int in_, out_;
  std::vector<int64_t> shape_, strides_;
  int64_t base_;
  DynamicOffset dyn_;
};

// Padding: interior padding between elements, edge padding that may be negative (cropping).
template <class T>
class PadKernel : public Kernel {
 public:
  PadKernel(int in, int value, int out, std::vector<int64_t> in_shape, std::vector<int64_t> out_shape,
            std::vector<int64_t> low, std::vector<int64_t> interior)
      : in_(in), value_(value), out_(out), in_shape_(std::move(in_shape)), out_shape_(std::move(out_shape)),
        low_(std::move(low)), interior_(std::move(interior)), in_strides_(rowMajorStrides(in_shape_)) {}

  int64_t sourceOf(const std::vector<int64_t>& idx) const {
    int64_t src = 0;
    for (size_t d = 0; d < idx.size(); ++d) {
      int64_t q = idx[d] - low_[d];
      if (q < 0 || q % (interior_[d] + 1) != 0) return -1;
      q /= interior_[d] + 1;
      if (q >= in_shape_[d]) return -1;
      src += q * in_strides_[d];
    }
    return src;
  }
  int64_t sourceOf(int64_t i) const {
    std::vector<int64_t> idx;
    unravel(i, out_shape_, &idx);
    return sourceOf(idx);
  }

  void compute(RunState& s, int64_t b, int64_t e) const override {
    const T* x = s.at<const T>(in_);
    const T pad = *s.at<const T>(value_);
    T* o = s.at<T>(out_);
    std::vector<int64_t> idx;
    unravel(b, out_shape_, &idx);
    for (int64_t i = b; i < e; ++i) {
      const int64_t src = sourceOf(idx);
      o[i] = src < 0 ? pad : x[src];
      for (size_t d = idx.size(); d-- > 0;) {
        if (++idx[d] < out_shape_[d]) break;
        idx[d] = 0;
      }
    }
  }

 private:
  int in_, value_, out_;
  std::vector<int64_t> in_shape_, out_shape_, low_, interior_, in_strides_;
};

// Concatenation along one dimension: the result seen as [outer][sum of sizes][inner], copied in runs.
template <class T>
class ConcatKernel : public Kernel {
 public:
  ConcatKernel(std::vector<int> ins, int out, std::vector<int64_t> sizes, int64_t inner)
      : ins_(std::move(ins)), out_(out), sizes_(std::move(sizes)), inner_(inner) {
    int64_t total = 0;
    for (int64_t s : sizes_) {
      offsets_.push_back(total);
      total += s;
    }
    row_ = total * inner_;
  }

  // (operand, index within it) of output element i.
  std::pair<int, int64_t> sourceOf(int64_t i) const {
    const int64_t r = i / row_, c = i % row_;
    for (size_t j = 0; j < sizes_.size(); ++j)
      if (c < (offsets_[j] + sizes_[j]) * inner_)
        return {static_cast<int>(j), r * sizes_[j] * inner_ + (c - offsets_[j] * inner_)};
    return {-1, -1};
  }

  void compute(RunState& s, int64_t b, int64_t e) const override {
    T* o = s.at<T>(out_);
    for (int64_t i = b; i < e;) {
      const int64_t r = i / row_, c = i % row_;
      size_t j = 0;
      while (c >= (offsets_[j] + sizes_[j]) * inner_) ++j;
      const int64_t run_end = (offsets_[j] + sizes_[j]) * inner_;
      const int64_t len = std::min(e - i, run_end - c);
      const T* x = s.at<const T>(ins_[j]) + r * sizes_[j] * inner_ + (c - offsets_[j] * inner_);
      std::memcpy(o + i, x, static_cast<size_t>(len) * sizeof(T));
      i += len;
    }
  }

 private:
  std::vector<int> ins_;
  int out_;
  std::vector<int64_t> sizes_, offsets_;
  int64_t inner_, row_ = 1;
};

// dynamic_update_slice: the operand, with the update written at clamped run-time start indices.
template <class T>
class UpdateSliceKernel : public Kernel {
 public:
  UpdateSliceKernel(int x, int update, int out, std::vector<int64_t> shape, std::vector<int64_t> update_shape,
                    std::vector<int> starts, std::vector<DType> start_types, int dyn)
      : x_(x), update_(update), out_(out), shape_(std::move(shape)), update_shape_(std::move(update_shape)),
        update_strides_(rowMajorStrides(update_shape_)), starts_(std::move(starts)),
        start_types_(std::move(start_types)), dyn_(dyn) {
    for (size_t d = 0; d < shape_.size(); ++d) limits_.push_back(shape_[d] - update_shape_[d]);
    out_strides_ = rowMajorStrides(shape_);
    update_count_ = std::accumulate(update_shape_.begin(), update_shape_.end(), int64_t{1}, std::multiplies<int64_t>());
  }

  void prepare(RunState& s) const override { readStarts(s, starts_, start_types_, limits_, s.dynamic.data() + dyn_); }

  void compute(RunState& s, int64_t b, int64_t e) const override {
    const T* x = s.at<const T>(x_);
    const T* u = s.at<const T>(update_);
    T* o = s.at<T>(out_);
    const int64_t* start = s.dynamic.data() + dyn_;
    if (o == x) {  // in place (the loop's carried value): only the update's elements in [b, e) are written
      const size_t rank = update_shape_.size();
      if (rank == 0) {
        if (b <= 0 && 0 < e) o[0] = u[0];
        return;
      }
      // A row (the innermost dimension) of the update at a time: one copy of its part inside [b, e).
      const int64_t row = update_shape_[rank - 1];
      const int64_t rows = row == 0 ? 0 : update_count_ / row;
      int64_t q_small[8] = {};
      std::vector<int64_t> q_big(rank > 8 ? rank : 0, 0);
      int64_t* q = rank > 8 ? q_big.data() : q_small;
      for (int64_t r = 0; r < rows; ++r) {
        int64_t i = 0;
        for (size_t d = 0; d < rank; ++d) i += (start[d] + q[d]) * out_strides_[d];
        const int64_t lo = std::max(i, b), hi = std::min(i + row, e);
        if (lo < hi) std::memcpy(o + lo, u + r * row + (lo - i), static_cast<size_t>(hi - lo) * sizeof(T));
        for (size_t d = rank - 1; d-- > 0;) {
          if (++q[d] < update_shape_[d]) break;
          q[d] = 0;
        }
      }
      return;
    }
    std::vector<int64_t> idx;
    unravel(b, shape_, &idx);
    for (int64_t i = b; i < e; ++i) {
      int64_t src = 0;
      bool inside = true;
      for (size_t d = 0; d < idx.size() && inside; ++d) {
        const int64_t q = idx[d] - start[d];
        inside = q >= 0 && q < update_shape_[d];
        src += q * update_strides_[d];
      }
      o[i] = inside ? u[src] : x[i];
      for (size_t d = idx.size(); d-- > 0;) {
        if (++idx[d] < shape_[d]) break;
        idx[d] = 0;
      }
    }
  }

 private:
  int x_, update_, out_;
  std::vector<int64_t> shape_, update_shape_, update_strides_, limits_, out_strides_;
  int64_t update_count_ = 0;
  std::vector<int> starts_;
  std::vector<DType> start_types_;
  int dyn_;
};

// bitcast_convert between element types of different widths: the same bytes (row-major, little-endian, as XLA
// reads them), so output element i is the bytes [i * width, (i + 1) * width) of the operand.
class ByteCopyKernel : public Kernel {
 public:
  ByteCopyKernel(int in, int out, size_t width) : in_(in), out_(out), width_(width) {}
  void compute(RunState& s, int64_t b, int64_t e) const override {
    std::memcpy(s.at<uint8_t>(out_) + static_cast<size_t>(b) * width_,
                s.at<const uint8_t>(in_) + static_cast<size_t>(b) * width_, static_cast<size_t>(e - b) * width_);
  }

 private:
  int in_, out_;
  size_t width_;
};

// iota: each element's coordinate along one dimension, converted to the element type.
template <DType D>
class IotaKernel : public Kernel {
 public:
  IotaKernel(int out, int64_t stride, int64_t size) : out_(out), stride_(stride), size_(size) {}
  void compute(RunState& s, int64_t b, int64_t e) const override {
    Storage<D>* o = s.at<Storage<D>>(out_);
    for (int64_t i = b; i < e; ++i)  // as convert(i32 -> D): wraps in narrow integers, rounds in narrow floats
      o[i] = scalar::convertValue<D, DType::I32>(static_cast<int32_t>((i / stride_) % size_));
  }

 private:
  int out_;
  int64_t stride_, size_;
};

// Instantiates a kernel template for the storage type of `dtype` (moves are by element size, except iota).
template <template <class> class K, class... Args>
std::unique_ptr<Kernel> bySize(DType dtype, Args&&... args) {
  switch (dtypeSize(dtype)) {
    case 1: return std::make_unique<K<uint8_t>>(std::forward<Args>(args)...);
    case 2: return std::make_unique<K<uint16_t>>(std::forward<Args>(args)...);
    case 8: return std::make_unique<K<uint64_t>>(std::forward<Args>(args)...);  // c64
    case 16: return std::make_unique<K<Complex128>>(std::forward<Args>(args)...);  // c128
    default: return std::make_unique<K<uint32_t>>(std::forward<Args>(args)...);
  }
}


// What the data-moving handlers below share: the op's one result, a new slot for it and its tile mapping (where
// each element is written), the bytes each tile receives, and operand 0's row-major strides. Each handler fills
// `kernel` and `recv`; finishMove appends the one superstep of copies (popops copies: cost::copy per tile).
struct Move {
  const TensorType& out;
  const TensorType* in;  // operand 0's type (null for iota)
  int o = -1;
  TileMapping work;
  std::vector<int64_t> recv;
  std::vector<int64_t> in_strides;
  std::unique_ptr<Kernel> kernel;
};

const TensorType& oneResult(Lowerer& lowerer, const OpContext& ctx) {
  if (ctx.out_types.size() != 1) lowerer.invalid(ctx, "expected one result");
  return ctx.out_types[0];
}

// The result's slot; unless `retyped` (bitcast_convert), the result has operand 0's element type.
Move beginMove(Lowerer& lowerer, OpContext& ctx, bool retyped = false) {
  const TensorType& out = oneResult(lowerer, ctx);
  const TensorType* in = ctx.in_types.empty() ? nullptr : &ctx.in_types[0];
  if (!retyped && in && in->dtype != out.dtype)
    lowerer.invalid(ctx, "the result's element type differs from the operand's");
  Move m{out, in};
  m.o = lowerer.newSlot(out);
  m.work = lowerer.graph().slots[static_cast<size_t>(m.o)].mapping;
  if (in) m.in_strides = rowMajorStrides(in->shape);
  return m;
}

// Each result element i reads operand 0 at base + sum_d idx_d(i) * strides[d] (broadcast, transpose, slice...).
void gatherStrided(Lowerer& lowerer, OpContext& ctx, Move& m, const std::vector<int64_t>& strides, int64_t base,
                   DynamicOffset dynamic = {}) {
  lowerer.exchangeStrided(&m.recv, m.work, ctx.in[0], m.out.shape, strides, base);
  m.kernel = bySize<StridedGatherKernel>(m.out.dtype, ctx.in[0], m.o, m.out.shape, strides, base, std::move(dynamic));
}

// The superstep of copies (`codelet`<dtype>) that writes the result, over its tiles.
Node* finishMove(Lowerer& lowerer, OpContext& ctx, Move& m, const char* codelet = "copy") {
  std::vector<Superstep> steps;
  const int workers = lowerer.device().num_worker_contexts;
  const int64_t eb = static_cast<int64_t>(dtypeSize(m.out.dtype));
  if (m.out.numElements() > 0)
    steps.push_back(lowerer.superstep(std::string(codelet) + "<" + dtypeName(m.out.dtype) + ">", m.work, m.recv,
                                      [&](int, int64_t k) { return cost::copy(k * eb, workers); }));
  return lowerer.emitExecute(ctx, std::move(m.kernel), std::move(steps), {m.o}, 0);
}

}  // namespace

std::vector<int> lowerConstant(Lowerer& lowerer, OpContext& ctx) {
  const TensorType& out = oneResult(lowerer, ctx);
  std::vector<uint8_t> bytes = attrBytes(*ctx.op, "value");
  const size_t eb = dtypeSize(out.dtype);
  if (attrBool(*ctx.op, "splat", false)) {
    if (bytes.size() != eb) lowerer.invalid(ctx, "a splat value must hold exactly one element");
    std::vector<uint8_t> full(out.numBytes());
    for (size_t i = 0; i < full.size(); i += eb) std::memcpy(full.data() + i, bytes.data(), eb);
    bytes.swap(full);
  } else if (bytes.size() != out.numBytes()) {
    lowerer.invalid(ctx, "\"value\" holds " + std::to_string(bytes.size()) + " bytes but the result needs " +
                             std::to_string(out.numBytes()));
  }
  if (out.dtype == DType::Bool)
    for (uint8_t& b : bytes) b = b != 0;
  return {lowerer.newConstant(out, std::move(bytes))};
}

// The same bits read as another type: of the same width, shape unchanged (jax.random turns u32 bits into f32 this
// way); of another width, the narrower side has one more, innermost dimension of the width ratio.
std::vector<int> lowerBitcastConvert(Lowerer& lowerer, OpContext& ctx) {
  const TensorType& out = oneResult(lowerer, ctx);
  const TensorType* in = &ctx.in_types[0];
  const size_t wi = dtypeSize(in->dtype), wo = dtypeSize(out.dtype);
  std::vector<int64_t> expect = wi == wo ? in->shape : out.shape;
  if (wi < wo && !in->shape.empty()) expect = std::vector<int64_t>(in->shape.begin(), in->shape.end() - 1);
  if (wi > wo) (expect = in->shape).push_back(static_cast<int64_t>(wi / wo));
  const bool ok = wi == wo ? in->shape == out.shape
                  : wi < wo
                      ? !in->shape.empty() && in->shape.back() == static_cast<int64_t>(wo / wi) && expect == out.shape
                      : expect == out.shape;
  if (!ok || in->numBytes() != out.numBytes())
    lowerer.invalid(ctx, "bitcast_convert to " + std::string(dtypeName(out.dtype)) + " needs the shape " +
                             TensorType{out.dtype, expect}.str());
  if (wi == wo) {  // kernels move bytes by element size: a plain copy
    Move m = beginMove(lowerer, ctx, true);
    gatherStrided(lowerer, ctx, m, m.in_strides, 0);
    finishMove(lowerer, ctx, m);
    return {m.o};
  }
  const int o = lowerer.newSlot(out);
  const TileMapping work = lowerer.graph().slots[static_cast<size_t>(o)].mapping;
  std::vector<int64_t> recv;
  const int64_t ratio = static_cast<int64_t>(std::max(wi, wo) / std::min(wi, wo));
  if (wi > wo)  // each output reads part of one operand element
    lowerer.exchangeGather(&recv, work, ctx.in[0], [&](int64_t i) { return i / ratio; });
  else  // each output reads `ratio` operand elements
    for (int64_t k = 0; k < ratio; ++k)
      lowerer.exchangeGather(&recv, work, ctx.in[0], [&](int64_t i) { return i * ratio + k; });
  std::vector<Superstep> steps;
  if (work.num_elements > 0)
    steps.push_back(lowerer.superstep("bitcastConvert", work, recv, [&](int, int64_t m) {
      return cost::copy(m * static_cast<int64_t>(wo), lowerer.device().num_worker_contexts);
    }));
  lowerer.emitExecute(ctx, std::make_unique<ByteCopyKernel>(ctx.in[0], o, wo), std::move(steps), {o}, 0);
  return {o};
}

std::vector<int> lowerReshape(Lowerer& lowerer, OpContext& ctx) {
  const TensorType& out = oneResult(lowerer, ctx);
  if (ctx.in_types[0].dtype != out.dtype) lowerer.invalid(ctx, "the result's element type differs from the operand's");
  if (ctx.in_types[0].numElements() != out.numElements())
    lowerer.invalid(ctx, "reshape changes the number of elements");
  return {ctx.in[0]};  // a view: same bytes, same tile mapping
}

// A broadcast_in_dim from `in` to `out` whose dimensions keep their sizes and order, the rest of `out` being 1.
static bool insertsUnitDimensions(const TensorType& in, const TensorType& out, const std::vector<int64_t>& dims) {
  if (in.dtype != out.dtype || dims.size() != in.shape.size()) return false;
  int64_t previous = -1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] <= previous || dims[i] >= static_cast<int64_t>(out.shape.size())) return false;
    if (in.shape[i] != out.shape[static_cast<size_t>(dims[i])]) return false;
    previous = dims[i];
  }
  return in.numElements() == out.numElements();
}

std::vector<int> lowerBroadcastInDim(Lowerer& lowerer, OpContext& ctx) {
  // One that only inserts dimensions of size 1, keeping the operand's order, moves nothing: a reshape, a view of
  // the operand's bytes (XLA's simplifier makes it a reshape; Poplar's Tensor::expand is a view).
  const std::vector<int64_t> dims = attrInts(*ctx.op, "broadcast_dimensions");
  if (insertsUnitDimensions(ctx.in_types.at(0), ctx.out_types.at(0), dims)) return lowerReshape(lowerer, ctx);
  Move m = beginMove(lowerer, ctx);
  const size_t rank = m.out.shape.size();
  if (dims.size() != m.in->shape.size())
    lowerer.invalid(ctx, "broadcast_dimensions must name one result dimension per operand dimension");
  std::vector<int64_t> strides(rank, 0);
  std::vector<bool> seen(rank, false);
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0 || dims[i] >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(dims[i])])
      lowerer.invalid(ctx, "broadcast_dimensions are out of range or repeated");
    seen[static_cast<size_t>(dims[i])] = true;
    const int64_t d = m.in->shape[i];
    if (d != 1 && d != m.out.shape[static_cast<size_t>(dims[i])])
      lowerer.invalid(ctx, "operand dimension " + std::to_string(i) + " is neither 1 nor the result's size");
    strides[static_cast<size_t>(dims[i])] = d == 1 ? 0 : m.in_strides[i];
  }
  gatherStrided(lowerer, ctx, m, strides, 0);
  finishMove(lowerer, ctx, m);
  return {m.o};
}

// Reads each reversed dimension from its far end: a negative stride from a shifted base.
std::vector<int> lowerReverse(Lowerer& lowerer, OpContext& ctx) {
  Move m = beginMove(lowerer, ctx);
  const size_t rank = m.out.shape.size();
  std::vector<int64_t> strides = m.in_strides;
  int64_t base = 0;
  std::vector<bool> seen(rank, false);
  for (int64_t d : attrInts(*ctx.op, "dimensions")) {
    if (d < 0 || d >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(d)])
      lowerer.invalid(ctx, "dimensions are out of range or repeated");
    seen[static_cast<size_t>(d)] = true;
    if (m.in->shape[static_cast<size_t>(d)] > 0)
      base += (m.in->shape[static_cast<size_t>(d)] - 1) * m.in_strides[static_cast<size_t>(d)];
    strides[static_cast<size_t>(d)] = -m.in_strides[static_cast<size_t>(d)];
  }
  if (m.in->shape != m.out.shape) lowerer.invalid(ctx, "reverse keeps the operand's shape");
  gatherStrided(lowerer, ctx, m, strides, base);
  finishMove(lowerer, ctx, m);
  return {m.o};
}

std::vector<int> lowerTranspose(Lowerer& lowerer, OpContext& ctx) {
  Move m = beginMove(lowerer, ctx);
  const size_t rank = m.out.shape.size();
  const std::vector<int64_t> perm = attrInts(*ctx.op, "permutation");
  if (perm.size() != rank || m.in->shape.size() != rank) lowerer.invalid(ctx, "permutation has the wrong length");
  std::vector<bool> seen(rank, false);
  std::vector<int64_t> strides(rank);
  for (size_t d = 0; d < rank; ++d) {
    if (perm[d] < 0 || perm[d] >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(perm[d])])
      lowerer.invalid(ctx, "permutation is not a permutation");
    seen[static_cast<size_t>(perm[d])] = true;
    if (m.out.shape[d] != m.in->shape[static_cast<size_t>(perm[d])])
      lowerer.invalid(ctx, "result shape does not match the permutation");
    strides[d] = m.in_strides[static_cast<size_t>(perm[d])];
  }
  gatherStrided(lowerer, ctx, m, strides, 0);
  finishMove(lowerer, ctx, m);
  return {m.o};
}

std::vector<int> lowerSlice(Lowerer& lowerer, OpContext& ctx) {
  Move m = beginMove(lowerer, ctx);
  const size_t rank = m.out.shape.size();
  const std::vector<int64_t> start = attrInts(*ctx.op, "start_indices"), limit = attrInts(*ctx.op, "limit_indices");
  std::vector<int64_t> step = attrInts(*ctx.op, "strides", false);
  if (step.empty()) step.assign(rank, 1);
  if (start.size() != rank || limit.size() != rank || step.size() != rank || m.in->shape.size() != rank)
    lowerer.invalid(ctx, "start_indices, limit_indices and strides must have one entry per dimension");
  std::vector<int64_t> strides(rank);
  int64_t base = 0;
  for (size_t d = 0; d < rank; ++d) {
    if (start[d] < 0 || start[d] > limit[d] || limit[d] > m.in->shape[d] || step[d] < 1)
      lowerer.invalid(ctx, "slice bounds are out of range in dimension " + std::to_string(d));
    if (m.out.shape[d] != (limit[d] - start[d] + step[d] - 1) / step[d])
      lowerer.invalid(ctx, "result shape does not match the slice");
    base += start[d] * m.in_strides[d];
    strides[d] = m.in_strides[d] * step[d];
  }
  if (m.out.numElements() == 0) base = 0;
  gatherStrided(lowerer, ctx, m, strides, base);
  finishMove(lowerer, ctx, m);
  return {m.o};
}

std::vector<int> lowerDynamicSlice(Lowerer& lowerer, OpContext& ctx) {
  Move m = beginMove(lowerer, ctx);
  const size_t rank = m.out.shape.size();
  const std::vector<int64_t> sizes = attrInts(*ctx.op, "slice_sizes");
  if (ctx.in.size() != rank + 1 || m.in->shape.size() != rank || sizes.size() != rank)
    lowerer.invalid(ctx, "dynamic_slice needs one scalar start index and one slice size per dimension");
  DynamicOffset dynamic;
  for (size_t d = 0; d < rank; ++d) {
    const TensorType& st = ctx.in_types[d + 1];
    if (!st.shape.empty() || !isInteger(st.dtype)) lowerer.invalid(ctx, "start indices must be integer scalars");
    if (sizes[d] < 0 || sizes[d] > m.in->shape[d] || sizes[d] != m.out.shape[d])
      lowerer.invalid(ctx, "slice_sizes do not fit");
    dynamic.starts.push_back(ctx.in[d + 1]);
    dynamic.start_types.push_back(st.dtype);
    dynamic.limits.push_back(m.in->shape[d] - sizes[d]);
  }
  dynamic.dyn = lowerer.newDynamic(1);
  dynamic.in_strides = m.in_strides;
  gatherStrided(lowerer, ctx, m, m.in_strides, 0, std::move(dynamic));  // exchange estimated at start indices 0
  finishMove(lowerer, ctx, m);
  return {m.o};
}

std::vector<int> lowerDynamicUpdateSlice(Lowerer& lowerer, OpContext& ctx) {
  Move m = beginMove(lowerer, ctx);
  const TensorType& out = m.out;
  const size_t rank = out.shape.size();
  const TensorType& upd = ctx.in_types[1];
  if (ctx.in.size() != rank + 2 || m.in->shape != out.shape || upd.shape.size() != rank || upd.dtype != out.dtype)
    lowerer.invalid(ctx,
                    "dynamic_update_slice needs an operand, an update of the same rank and one start per dimension");
  std::vector<int> starts;
  std::vector<DType> start_types;
  for (size_t d = 0; d < rank; ++d) {
    const TensorType& st = ctx.in_types[d + 2];
    if (!st.shape.empty() || !isInteger(st.dtype)) lowerer.invalid(ctx, "start indices must be integer scalars");
    if (upd.shape[d] > out.shape[d]) lowerer.invalid(ctx, "the update is larger than the operand");
    starts.push_back(ctx.in[d + 2]);
    start_types.push_back(st.dtype);
  }
  const int dyn = lowerer.newDynamic(static_cast<int>(rank));
  m.kernel =
      bySize<UpdateSliceKernel>(out.dtype, ctx.in[0], ctx.in[1], m.o, out.shape, upd.shape, starts, start_types, dyn);
  lowerer.exchangeSameIndex(&m.recv, m.work, ctx.in[0]);
  const std::vector<int64_t> ustr = rowMajorStrides(upd.shape);
  const std::vector<int64_t> ostr = rowMajorStrides(out.shape);
  lowerer.exchangeGather(&m.recv, m.work, ctx.in[1], [&](int64_t i) {  // estimated at start indices 0
    int64_t src = 0;
    for (size_t d = 0; d < rank; ++d) {
      const int64_t q = (i / ostr[d]) % std::max<int64_t>(1, out.shape[d]);
      if (q >= upd.shape[d]) return int64_t(-1);
      src += q * ustr[d];
    }
    return src;
  });
  Node* node = finishMove(lowerer, ctx, m);
  if (std::count(ctx.in.begin() + 1, ctx.in.end(), ctx.in[0]) == 0)
    node->in_place.emplace_back(ctx.in[0], m.o);  // only the update's elements change: Poplar's dynamicUpdate
  return {m.o};
}

std::vector<int> lowerConcatenate(Lowerer& lowerer, OpContext& ctx) {
  Move m = beginMove(lowerer, ctx);
  const TensorType& out = m.out;
  const size_t rank = out.shape.size();
  const int64_t dim = attrInt(*ctx.op, "dimension");
  if (dim < 0 || dim >= static_cast<int64_t>(rank)) lowerer.invalid(ctx, "dimension is out of range");
  std::vector<int64_t> sizes;
  int64_t total = 0;
  for (const TensorType& t : ctx.in_types) {
    if (t.shape.size() != rank || t.dtype != out.dtype)
      lowerer.invalid(ctx, "operands must have the result's rank and type");
    for (size_t d = 0; d < rank; ++d)
      if (static_cast<int64_t>(d) != dim && t.shape[d] != out.shape[d])
        lowerer.invalid(ctx, "operand shapes differ outside the concatenated dimension");
    sizes.push_back(t.shape[static_cast<size_t>(dim)]);
    total += sizes.back();
  }
  if (total != out.shape[static_cast<size_t>(dim)])
    lowerer.invalid(ctx, "result size along the dimension is not the sum of the operands'");
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(dim) + 1; d < rank; ++d) inner *= out.shape[d];
  m.kernel = bySize<ConcatKernel>(out.dtype, ctx.in, m.o, sizes, inner);
  if (out.numElements() > 0) {
    ConcatKernel<uint8_t> probe(ctx.in, m.o, sizes, inner);  // same index arithmetic for every element size
    for (size_t j = 0; j < ctx.in.size(); ++j)
      lowerer.exchangeGather(&m.recv, m.work, ctx.in[j], [&](int64_t i) {
        auto src = probe.sourceOf(i);
        return src.first == static_cast<int>(j) ? src.second : int64_t(-1);
      });
  }
  finishMove(lowerer, ctx, m);
  return {m.o};
}

std::vector<int> lowerPad(Lowerer& lowerer, OpContext& ctx) {
  Move m = beginMove(lowerer, ctx);
  const TensorType& out = m.out;
  const size_t rank = out.shape.size();
  const std::vector<int64_t> lo = attrInts(*ctx.op, "edge_padding_low"), hi = attrInts(*ctx.op, "edge_padding_high");
  std::vector<int64_t> interior = attrInts(*ctx.op, "interior_padding", false);
  if (interior.empty()) interior.assign(rank, 0);
  if (lo.size() != rank || hi.size() != rank || interior.size() != rank || m.in->shape.size() != rank)
    lowerer.invalid(ctx, "padding attributes must have one entry per dimension");
  if (!ctx.in_types[1].shape.empty() || ctx.in_types[1].dtype != out.dtype)
    lowerer.invalid(ctx, "the padding value must be a scalar of the operand's type");
  for (size_t d = 0; d < rank; ++d) {
    if (interior[d] < 0) lowerer.invalid(ctx, "interior padding must be non-negative");
    const int64_t size = lo[d] + hi[d] + m.in->shape[d] + std::max<int64_t>(0, m.in->shape[d] - 1) * interior[d];
    if (size != out.shape[d]) lowerer.invalid(ctx, "result shape does not match the padding");
  }
  m.kernel = bySize<PadKernel>(out.dtype, ctx.in[0], ctx.in[1], m.o, m.in->shape, out.shape, lo, interior);
  PadKernel<uint8_t> probe(ctx.in[0], ctx.in[1], m.o, m.in->shape, out.shape, lo, interior);
  lowerer.exchangeGather(&m.recv, m.work, ctx.in[0], [&](int64_t i) { return probe.sourceOf(i); });
  if (out.numElements() > 0) lowerer.exchangeScalar(&m.recv, m.work, ctx.in[1]);
  finishMove(lowerer, ctx, m);
  return {m.o};
}

std::vector<int> lowerIota(Lowerer& lowerer, OpContext& ctx) {
  Move m = beginMove(lowerer, ctx);
  const int64_t dim = attrInt(*ctx.op, "iota_dimension");
  if (dim < 0 || dim >= static_cast<int64_t>(m.out.shape.size()))
    lowerer.invalid(ctx, "iota_dimension is out of range");
  const int64_t stride = rowMajorStrides(m.out.shape)[static_cast<size_t>(dim)];
  const int64_t size = std::max<int64_t>(1, m.out.shape[static_cast<size_t>(dim)]);
  if (!visitDType(m.out.dtype,
                  [&](auto t) { m.kernel = std::make_unique<IotaKernel<decltype(t)::value>>(m.o, stride, size); }))
    lowerer.unimplemented(ctx, "tokens are not computed on");
  finishMove(lowerer, ctx, m, "iota");
  return {m.o};
}

}  // namespace ipu
