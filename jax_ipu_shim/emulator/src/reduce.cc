// Reductions over any set of dimensions. Poplar's two-stage plan: each tile first reduces the input elements it
// holds into partials (one per output it touches); a second superstep exchanges the partials to the tiles that
// hold the outputs and reduces them there (with the init value folded in once); where that would give an output
// more than 32 partials, an intermediate stage on tiles across the IPU reduces them first (lowerReduce). A
// reduction whose input and output sit on one tile is a single superstep.
//
// A body that combines each input with one add/multiply/maximum/minimum/and/or gets a vector kernel per input; any
// other body (argmax's compare/select bodies, ...) is compiled into a ScalarProgram that combines all inputs at once.
// Either way each output's reduced elements, taken in row-major order, are combined as a tree of 32-element windows
// (ReduceTree, reduce_kernels.h): windows of 32 consecutive elements (the first shortened by half the pad, where
// XLA's SAME padding places it) each give a partial, then the partials the same way, until at most 32 are left, which
// are folded in order from the init value. This is XLA:CPU's TreeReductionRewriter (reduce_window of 32 with stride 32,
// again until a dimension is at most 32) applied to the reduced elements as one dimension: for a reduction over one
// dimension it is the tree XLA:CPU's HLO has; over several, XLA's first window folds 32 x (the other reduced
// dimensions) elements, where here no window holds more than 32. A sum or product folds each window in 8 lanes (16 on a
// host where LLVM vectorises with 512-bit vectors: hostWideVectors), as XLA:CPU's LLVM vectorises it (windowFold);
// other combiners fold it in order. A sum of 2^25 f32 ones is 2^25, as on cpu, not the 2^24 a single f32 accumulator
// stops at, and the error on random data is no larger than cpu's. With jaxlib 0.4.13 an f32 sum or product over the
// innermost dimension alone folds its rows of up to 32 elements (and its tree's last level) in the lanes of XLA:CPU's
// vectorised loop (shortFold), and one over several dimensions follows XLA's own tree, which windows each dimension
// longer than 32 (foldNested), so both are cpu's bits on a host with 256-bit vectors; other reductions of at most 32
// elements per output, and variadic ones (argmax: XLA leaves them alone too), fold in order from the init value, and
// can differ from cpu's in the last bits.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ipu/cost_model.h"
#include "ipu/dtype.h"
#include "ipu/handlers.h"
#include "ipu/kernels.h"
#include "ipu/lowering.h"
#include "ipu/scalar_program.h"
#include "reduce_kernels.h"

namespace ipu {

namespace {

using namespace reduce_kernels;  // NOLINT(build/namespaces): the kernels' geometry and tree, shared with them

// The vector kernel of a single-op computation on `dt`, or null. For bool, add is or and multiply is and (XLA's
// convention).
std::unique_ptr<Kernel> reduceKernel(const std::string& c, DType dt, Numerics numerics, int in, int init, int out,
                                     const ReduceGeometry& g, bool variadic) {
  if (!isReducer(c)) return nullptr;
  OpKind kind = findOp(c)->kind;
  if (dt == DType::Bool && kind == OpKind::Add) kind = OpKind::Or;
  if (dt == DType::Bool && kind == OpKind::Multiply) kind = OpKind::And;
  if (isFloat(dt) && (kind == OpKind::And || kind == OpKind::Or)) return nullptr;
  std::unique_ptr<Kernel> kernel;
  visitDType(dt, [&](auto tag) {
    kernel = reduceKernelOf<decltype(tag)::value>(kind, dt, numerics, in, init, out, g, variadic);
  });
  return kernel;
}

// A variadic reduce with a general body: every step loads the N accumulators (kept in the outputs) and the N input
// elements into the body's registers, runs the body and stores its N results as the new accumulators.
class BodyReduceKernel : public Kernel {
 public:
  struct Operand {
    int in, init, out;
    size_t size;
  };
  BodyReduceKernel(std::vector<Operand> ops, ReduceGeometry g, ScalarProgram body)
      : ops_(std::move(ops)), g_(std::move(g)), body_(std::move(body)) {}

  void compute(RunState& s, int64_t b, int64_t e) const override {
    for (const Operand& op : ops_)
      for (int64_t i = b; i < e; ++i)
        copyElement(s.ptr[static_cast<size_t>(op.out)] + i * static_cast<int64_t>(op.size),
                    s.ptr[static_cast<size_t>(op.init)], op.size);
    if (g_.reduced_count == 0) return;
    ScalarRegisters file(body_);
    ScalarReg* regs = file.data();
    std::vector<int64_t> oidx, ridx(g_.red_shape.size(), 0);
    if (g_.inner_reduced) {  // output-major: each output walks its reduced elements in row-major order
      int64_t base = offsetOf(b, g_.out_shape, g_.out_strides, &oidx);
      for (int64_t i = b; i < e; ++i) {
        std::fill(ridx.begin(), ridx.end(), 0);
        int64_t roff = 0;
        do step(s, regs, i, base + roff);
        while (advance(ridx, g_.red_shape, g_.red_strides, roff));
        advance(oidx, g_.out_shape, g_.out_strides, base);
      }
      return;
    }
    // reduced-major: sweep the outputs once per reduced coordinate (the same order per output).
    int64_t roff = 0;
    do {
      int64_t base = offsetOf(b, g_.out_shape, g_.out_strides, &oidx);
      for (int64_t i = b; i < e; ++i) {
        step(s, regs, i, base + roff);
        advance(oidx, g_.out_shape, g_.out_strides, base);
      }
    } while (advance(ridx, g_.red_shape, g_.red_strides, roff));
  }

 private:
  void step(RunState& s, ScalarReg* regs, int64_t i, int64_t x) const {
    const size_t n = ops_.size();
    uint8_t* r = reinterpret_cast<uint8_t*>(regs);
    for (size_t k = 0; k < n; ++k) {
      const Operand& op = ops_[k];
      const int64_t size = static_cast<int64_t>(op.size);
      copyElement(r + kRegBytes * k, s.ptr[static_cast<size_t>(op.out)] + i * size, op.size);
      copyElement(r + kRegBytes * (n + k), s.ptr[static_cast<size_t>(op.in)] + x * size, op.size);
    }
    body_.run(regs);
    for (size_t k = 0; k < n; ++k) {
      const Operand& op = ops_[k];
      copyElement(s.ptr[static_cast<size_t>(op.out)] + i * static_cast<int64_t>(op.size),
                  r + kRegBytes * static_cast<size_t>(body_.resultRegister(k)), op.size);
    }
  }

  std::vector<Operand> ops_;
  ReduceGeometry g_;
  ScalarProgram body_;
};

// The computation of a reduce body made of one op per input combining (acc_i, x_i), or "" if it is not that.
std::string inferComputation(const Op& op, size_t n) {
  if (op.regions.size() != 1) return "";
  const Region& body = op.regions[0];
  if (body.params.size() != 2 * n || body.results.size() != n || body.body.size() != n) return "";
  std::string kind;
  for (size_t i = 0; i < n; ++i) {
    const Op* def = nullptr;
    for (const Op& b : body.body)
      if (b.results.size() == 1 && b.results[0].id == body.results[i]) def = &b;
    if (!def || def->operands.size() != 2) return "";
    if (!kind.empty() && def->op != kind) return "";
    kind = def->op;
    const int64_t a = body.params[i].id, x = body.params[n + i].id;
    if (!((def->operands[0] == a && def->operands[1] == x) || (def->operands[0] == x && def->operands[1] == a)))
      return "";
  }
  return isReducer(kind) ? kind : "";
}

// The reduced dimensions (*reduced, by input dimension) and the geometry of the reduction, checked.
ReduceGeometry readGeometry(const Lowerer& lowerer, const OpContext& ctx, std::vector<bool>* reduced) {
  const TensorType& in0 = ctx.in_types[0];
  const size_t rank = in0.shape.size();
  reduced->assign(rank, false);
  for (int64_t d : attrInts(*ctx.op, "dimensions")) {
    if (d < 0 || d >= static_cast<int64_t>(rank) || (*reduced)[static_cast<size_t>(d)])
      lowerer.invalid(ctx, "dimensions are out of range or repeated");
    (*reduced)[static_cast<size_t>(d)] = true;
  }
  ReduceGeometry g;
  std::vector<int64_t> strides(rank, 1);
  for (size_t d = rank; d-- > 1;) strides[d - 1] = strides[d] * in0.shape[d];
  for (size_t d = 0; d < rank; ++d) {
    if ((*reduced)[d]) {
      g.red_shape.push_back(in0.shape[d]);
      g.red_strides.push_back(strides[d]);
      g.reduced_count *= in0.shape[d];
    } else {
      g.out_shape.push_back(in0.shape[d]);
      g.out_strides.push_back(strides[d]);
    }
  }
  // Dimensions of one element are no dimensions to XLA (it drops them before it lowers a reduce): the input's
  // innermost dimension is reduced when the last one with more than one element is (f32[4, 4, 1] over {0, 1}).
  size_t inner = rank;
  while (inner > 1 && in0.shape[inner - 1] == 1) --inner;
  g.inner_reduced = rank > 0 && (*reduced)[inner - 1];
  if (g.red_shape.empty()) {  // nothing reduced: a single (empty) reduced coordinate
    g.red_shape.push_back(1);
    g.red_strides.push_back(0);
  }
  return g;
}

// The results' slots, after their types are checked; the outputs sit together.
std::vector<int> makeOutputs(Lowerer& lowerer, const OpContext& ctx, size_t n, const ReduceGeometry& g) {
  std::vector<int> outs;
  for (size_t i = 0; i < n; ++i) {
    const TensorType& in = ctx.in_types[i];
    const TensorType& init = ctx.in_types[n + i];
    const TensorType& out = ctx.out_types[i];
    if (in.shape != ctx.in_types[0].shape) lowerer.invalid(ctx, "all inputs must have the same shape");
    if (!init.shape.empty() || init.dtype != in.dtype || out.dtype != in.dtype || out.shape != g.out_shape)
      lowerer.invalid(
          ctx,
          "init values must be scalars of the input's type and results the input's shape without the reduced "
          "dimensions");
    outs.push_back(i == 0 ? lowerer.newSlot(out) : lowerer.newSlotLike(out, outs[0]));
  }
  return outs;
}

// How a reduce computes: a single-op computation gets one vector kernel per input; anything else, the body
// interpreted (general).
struct ReduceVertex {
  std::unique_ptr<Kernel> kernel;
  std::string codelet;
  bool general = false;
  ScalarProgram body;  // general: the compiled body
};

ReduceVertex makeVertex(Lowerer& lowerer, OpContext& ctx, const std::string& computation, size_t n,
                        const std::vector<int>& outs, const ReduceGeometry& g) {
  ReduceVertex v;
  std::vector<std::unique_ptr<Kernel>> parts;
  for (size_t i = 0; i < n && !computation.empty(); ++i) {
    auto k = reduceKernel(computation, ctx.in_types[i].dtype, lowerer.numerics(), ctx.in[i], ctx.in[n + i], outs[i], g,
                          n > 1);
    if (!k) {
      parts.clear();
      break;
    }
    parts.push_back(std::move(k));
  }
  v.general = parts.empty();
  if (!v.general) {
    v.kernel = parts.size() == 1 ? std::move(parts[0]) : std::make_unique<KernelSequence>(std::move(parts));
    v.codelet = "reduce" + computation + "<" + dtypeName(ctx.in_types[0].dtype) + ">";
    return v;
  }
  const Op& op = *ctx.op;
  if (op.regions.size() != 1) lowerer.invalid(ctx, "reduce must have one body region");
  std::vector<DType> types;
  for (size_t i = 0; i < n; ++i) types.push_back(ctx.in_types[i].dtype);
  std::vector<DType> params = types;
  params.insert(params.end(), types.begin(), types.end());
  v.body = lowerer.compileBody(ctx, op.regions[0], params, types, "in the body");
  std::vector<BodyReduceKernel::Operand> operands;
  std::string type_list;
  for (size_t i = 0; i < n; ++i) {
    operands.push_back({ctx.in[i], ctx.in[n + i], outs[i], dtypeSize(types[i])});
    type_list += (i ? "," : "") + std::string(dtypeName(types[i]));
  }
  v.codelet = "reduce{" + v.body.summary() + "}<" + type_list + ">";
  v.kernel = std::make_unique<BodyReduceKernel>(std::move(operands), g, v.body);
  return v;
}

// The partials each input tile makes, and where they go: per tile, the partials made and taken and the bytes
// received; cross_tile when any partial changes tile.
struct Partials {
  std::vector<int64_t> made, taken, recv;
  int64_t bytes = 0;  // of one partial of every input, each in its accumulator type (f16 partials are f32)
  bool cross_tile = false;
};

Partials placePartials(const Lowerer& lowerer, const OpContext& ctx, size_t n, const ReduceGeometry& g,
                       const std::vector<bool>& reduced, const TileMapping& in_map, const TileMapping& out_map) {
  Partials p;
  for (size_t i = 0; i < n; ++i) p.bytes += static_cast<int64_t>(dtypeSize(dtypeInfo(ctx.in_types[i].dtype).acc));
  const size_t tiles = static_cast<size_t>(lowerer.device().num_tiles);
  p.made.assign(tiles, 0);
  p.taken.assign(tiles, 0);
  p.recv.assign(tiles, 0);
  // Input element i goes to output sum over kept dims of coordinate * output row stride: a strided map, whose distinct
  // images per input tile (the partials that tile makes) come as runs, each split over the output tiles it lands on.
  const size_t rank = reduced.size();
  std::vector<int64_t> out_row_strides(g.out_shape.size(), 1), to_out(rank, 0);
  for (size_t d = g.out_shape.size(); d-- > 1;) out_row_strides[d - 1] = out_row_strides[d] * g.out_shape[d];
  for (size_t d = 0, k = 0; d < rank; ++d)
    if (!reduced[d]) to_out[d] = out_row_strides[k++];
  const StridedMap to_output(ctx.in_types[0].shape, to_out, 0, lowerer.options().exchange_per_element);
  for (int t = 0; t < in_map.tilesUsed(); ++t) {
    to_output.forEachRun(in_map.begin(t), in_map.end(t), [&](int64_t first, int64_t step, int64_t count) {
      p.made[static_cast<size_t>(t)] += count;
      auto take = [&](int dest, int64_t taken) {
        p.taken[static_cast<size_t>(dest)] += taken;
        if (dest != t && taken > 0) {
          p.recv[static_cast<size_t>(dest)] += taken * p.bytes;
          p.cross_tile = true;
        }
      };
      if (step == 0 || step >= out_map.per_tile || out_map.isPlaced()) {  // at most one per output tile, or placed
        for (int64_t k = 0; k < count; ++k) take(out_map.tileOf(first + k * step), 1);
        return;
      }
      const int64_t last = first + (count - 1) * step;
      for (int d = out_map.tileOf(std::min(first, last)); d <= out_map.tileOf(std::max(first, last)); ++d)
        take(d, countInRange(first, step, count, out_map.begin(d), out_map.end(d)));
    });
  }
  p.cross_tile = p.cross_tile || in_map.tilesUsed() > 1;
  return p;
}

// Poplar's intermediate stage (popops' reduction plan goes on to an intermediate stage while the partials outnumber
// the outputs more than 32 times): an output tile whose outputs would each take more than kPartialsPerOutput
// partials gets them reduced first on tiles spread over the whole IPU, in pieces of `rows` partials of an output,
// so that it takes at most kPartialsPerOutput per output. Without it a reduction over a long outer axis sends
// every input tile's partial of each output to the output's tile (jnp.argmax(x, axis=0) of f16[8192, 1024]: 1,472
// partials of 8 bytes for each of the 64 outputs of a tile, 754 KB, more than the tile holds).
struct Intermediate {
  TileMapping pieces;  // (output, group of `rows` partials) units, spread; none: no intermediate stage
  int64_t rows = 0;
  std::vector<int64_t> recv;
};

Intermediate planIntermediate(const TileMapping& out_map, int tiles, Partials* p) {
  constexpr int64_t kPartialsPerOutput = 32;
  Intermediate mid;
  int64_t units = 0;
  for (int d = 0; d < out_map.tilesUsed(); ++d) {
    const size_t u = static_cast<size_t>(d);
    const int64_t outputs = out_map.elementsOn(d);
    const int64_t per_output = (p->taken[u] + outputs - 1) / outputs;
    if (per_output <= kPartialsPerOutput) continue;
    const int64_t rows = (per_output + kPartialsPerOutput - 1) / kPartialsPerOutput;
    const int64_t left = (per_output + rows - 1) / rows;  // partials per output after the intermediate stage
    mid.rows = std::max(mid.rows, rows);
    units += outputs * left;
    p->taken[u] = outputs * left;
    p->recv[u] = outputs * left * p->bytes;  // all from the intermediate tiles
  }
  if (units == 0) return mid;
  mid.pieces.num_elements = units;
  mid.pieces.per_tile = (units + tiles - 1) / tiles;
  mid.recv.assign(static_cast<size_t>(tiles), 0);
  for (int t = 0; t < mid.pieces.tilesUsed(); ++t)
    mid.recv[static_cast<size_t>(t)] = mid.pieces.elementsOn(t) * mid.rows * p->bytes;
  return mid;
}

}  // namespace

// Each input tile reduces what it holds into partials; the partials go to the outputs' tiles (through the
// intermediate stage where there are many), which reduce them into the results.
std::vector<int> lowerReduce(Lowerer& lowerer, OpContext& ctx) {
  const Op& op = *ctx.op;
  if (ctx.in.size() % 2 != 0) lowerer.invalid(ctx, "reduce takes N inputs and N init values");
  const size_t n = ctx.in.size() / 2;
  if (ctx.out_types.size() != n) lowerer.invalid(ctx, "reduce must have one result per input");
  std::string computation = attrString(op, "computation", "");
  if (computation.empty()) computation = inferComputation(op, n);
  std::vector<bool> reduced;
  const ReduceGeometry g = readGeometry(lowerer, ctx, &reduced);
  const std::vector<int> outs = makeOutputs(lowerer, ctx, n, g);
  ReduceVertex v = makeVertex(lowerer, ctx, computation, n, outs, g);

  const DType dt = ctx.in_types[0].dtype;
  const TileMapping in_map = lowerer.graph().slots[static_cast<size_t>(ctx.in[0])].mapping;
  const TileMapping out_map = lowerer.graph().slots[static_cast<size_t>(outs[0])].mapping;
  const int tiles = lowerer.device().num_tiles;
  Partials p = placePartials(lowerer, ctx, n, g, reduced, in_map, out_map);
  const Intermediate mid = p.cross_tile ? planIntermediate(out_map, tiles, &p) : Intermediate{};
  const TileMapping& pieces = mid.pieces;

  std::vector<Superstep> steps;
  const int workers = lowerer.device().num_worker_contexts;
  // Per-tile cycles of reducing `inputs` elements (of every input) into `outputs`.
  const double body_cycles = v.body.cyclesPerElement();
  auto cycles = [&](int64_t inputs, int64_t outputs) {
    return v.general ? cost::reduceBody(body_cycles, inputs, outputs, workers)
                     : cost::reduce(dt, inputs * static_cast<int64_t>(n), outputs, workers);
  };
  const int64_t in_elems = ctx.in_types[0].numElements();
  const double weight = std::max<double>(1, static_cast<double>(in_elems) / std::max<int64_t>(1, out_map.num_elements));
  if (out_map.num_elements > 0 && p.cross_tile) {
    const size_t mark = lowerer.pendingStep().transient.size();
    steps.push_back(lowerer.superstep(
        v.codelet + ".partials", in_map, {},
        [&](int t, int64_t m) { return cycles(m, p.made[static_cast<size_t>(t)]); }, false));
    if (pieces.num_elements > 0)
      steps.push_back(lowerer.superstep(
          v.codelet + ".intermediate", pieces, mid.recv, [&](int, int64_t m) { return cycles(m * mid.rows, m); },
          false));
    steps.push_back(lowerer.superstep(v.codelet, out_map, p.recv,
                                      [&](int t, int64_t m) { return cycles(p.taken[static_cast<size_t>(t)], m); }));
    if (pieces.num_elements > 0) {  // a tile's receive buffers of the two stages are not live together
      lowerer.pendingStep().transient.resize(mark);
      for (int t = 0; t < tiles; ++t) {
        const int64_t bytes = std::max(mid.recv[static_cast<size_t>(t)], p.recv[static_cast<size_t>(t)]);
        if (bytes > 0) lowerer.pendingStep().transient.emplace_back(t, bytes);
      }
    }
  } else if (out_map.num_elements > 0) {
    steps.push_back(lowerer.superstep(v.codelet, out_map, {}, [&](int, int64_t m) { return cycles(in_elems, m); }));
  }
  if (!steps.empty())
    steps.back().cost_weight =
        weight * (v.general ? std::max<double>(1, static_cast<double>(v.body.numInstructions())) : 1);
  const double flops = v.general     ? v.body.flopsPerElement() * static_cast<double>(in_elems)
                       : isFloat(dt) ? static_cast<double>(in_elems * static_cast<int64_t>(n))
                                     : 0;
  lowerer.emitExecute(ctx, std::move(v.kernel), std::move(steps), outs, flops);
  return outs;
}

}  // namespace ipu
