// Complex arithmetic: the IPU has no complex type, so c64 (complex<f32>) and c128 (complex<f64>, jax_enable_x64's)
// are held as interleaved pairs of f32 or f64 (XLA's and numpy's layout) and computed as the pair arithmetic a
// Poplar user would write: one compute set over the result's tile mapping, as the real elementwise ops
// (elementwise.cc), costed as the part type's ops each element needs (a product is 4 multiplies and 2 adds...; f64's
// are the emulated sequences of cost_model.cc). Also real, imag and complex, and the complex cases of unary, binary,
// compare and convert, which lowering.cc sends here. The per-element semantics are scalar_ops.h's (XLA:CPU's).
#include <algorithm>
#include <functional>
#include <type_traits>

#include "ipu/cost_model.h"
#include "ipu/dtype.h"
#include "ipu/handlers.h"
#include "ipu/kernels.h"
#include "ipu/lowering.h"
#include "ipu/scalar_ops.h"

namespace ipu {

using K = OpKind;

// Is this op one of complex.cc's: real/imag/complex/fft, or an elementwise op with a complex operand or result.
bool isComplexOp(const OpContext& ctx) {
  if (ctx.info->family == OpFamily::Complex) return true;
  switch (ctx.info->family) {
    case OpFamily::Unary:
    case OpFamily::Binary:
    case OpFamily::Compare:
    case OpFamily::Convert: break;
    default: return false;
  }
  for (const TensorType& t : ctx.in_types)
    if (isComplex(t.dtype)) return true;
  for (const TensorType& t : ctx.out_types)
    if (isComplex(t.dtype)) return true;
  return false;
}

namespace {

// The complex type an op computes on: its complex result's, else its first operand's.
DType complexTypeOf(const OpContext& ctx) {
  if (isComplex(ctx.out_types[0].dtype)) return ctx.out_types[0].dtype;
  return ctx.in_types.empty() ? DType::C64 : ctx.in_types[0].dtype;
}

// The element types each op takes and gives (the complex type unless it says otherwise), and the shapes, checked.
void checkComplexTypes(const Lowerer& lowerer, const OpContext& ctx) {
  if (ctx.out_types.size() != 1) lowerer.invalid(ctx, "expected one result");
  const TensorType& out = ctx.out_types[0];
  for (size_t i = 0; i < ctx.in.size(); ++i)
    if (ctx.in_types[i].shape != out.shape)
      lowerer.invalid(ctx, "operand " + std::to_string(i) + " does not have the result's shape");
  const DType complex =
      ctx.info->kind == K::Complex ? (out.dtype == DType::C128 ? DType::C128 : DType::C64) : complexTypeOf(ctx);
  const DType part = complexPart(complex);
  DType want_in = complex, want_out = complex;
  switch (ctx.info->kind) {
    case K::Real:
    case K::Imag:
    case K::Abs: want_out = part; break;
    case K::Complex: want_in = part; break;
    case K::Compare: want_out = DType::Bool; break;
    case K::Convert: want_in = ctx.in_types[0].dtype, want_out = out.dtype; break;
    default: break;
  }
  if (out.dtype != want_out)
    lowerer.invalid(ctx, "the result's element type should be " + std::string(dtypeName(want_out)));
  for (size_t i = 0; i < ctx.in.size(); ++i)
    if (ctx.in_types[i].dtype != want_in)
      lowerer.invalid(ctx, "operand " + std::to_string(i) + " should have element type " + dtypeName(want_in));
}

// The map vertex of an elementwise op over pairs of f32 or f64 (writing result slot o); its codelet's name in
// *codelet where it is not the op's own.
std::unique_ptr<Kernel> complexKernel(const Lowerer& lowerer, const OpContext& ctx, int o, std::string* codelet) {
  const OpKind kind = ctx.info->kind;
  const DType dt = ctx.in_types[0].dtype;
  const DType out = ctx.out_types[0].dtype;
  const std::vector<int>& in = ctx.in;
  std::unique_ptr<Kernel> kernel;
  switch (ctx.info->family) {
    // (The visitors reach every element type's functors: only those of complex types are compiled into kernels here.)
    case OpFamily::Unary:
      scalar::visitUnary(kind, dt, lowerer.numerics(), [&](auto f, auto a, auto r) {
        using A = typename decltype(a)::type;
        if constexpr (isComplexStorage<A>) kernel = map1<A, typename decltype(r)::type>(in[0], o, f);
      });
      break;
    case OpFamily::Binary: {
      auto make = [&](auto f, auto t) {
        using T = typename decltype(t)::type;
        kernel = map2<T, T, T>(in[0], in[1], o, f);
      };
      if (dt == DType::C128) scalar::visitBinaryOf<DType::C128>(kind, lowerer.numerics(), make);
      else scalar::visitBinaryOf<DType::C64>(kind, lowerer.numerics(), make);
      break;
    }
    case OpFamily::Compare: {
      const std::string dir = attrString(*ctx.op, "comparison_direction");
      auto compare = [&](auto tag) {
        using C = typename decltype(tag)::type;
        if (dir == "EQ") kernel = map2<C, C, uint8_t>(in[0], in[1], o, scalar::EqualC{});
        else if (dir == "NE") kernel = map2<C, C, uint8_t>(in[0], in[1], o, scalar::NotEqualC{});
        else
          lowerer.unimplemented(ctx, std::string("complex numbers are not ordered: compare on ") + dtypeName(dt) +
                                         " is EQ or NE, not " + dir);
      };
      if (dt == DType::C128) compare(TypeTag<Complex128>{});
      else compare(TypeTag<Complex64>{});
      *codelet = "compare" + dir + "<" + dtypeName(dt) + ">";
      break;
    }
    case OpFamily::Convert:
      scalar::visitConvert(dt, out, [&](auto f, auto a, auto r) {
        using A = typename decltype(a)::type;
        using R = typename decltype(r)::type;
        if constexpr (isComplexStorage<A> || isComplexStorage<R>) kernel = map1<A, R>(in[0], o, f);
      });
      *codelet = std::string("cast<") + dtypeName(dt) + "," + dtypeName(out) + ">";
      break;
    default: break;
  }
  if (!kernel)
    // The registry's element types already refused ops that have no complex form: an op it lists for complex types
    // that has no functor here is an emulator bug, named as such.
    lowerer.unimplemented(ctx, std::string(ctx.info->name) + " is listed for " + dtypeName(dt) +
                                   " in the op registry but has no " + dtypeName(dt) +
                                   " kernel (an emulator bug: please report it)");
  return kernel;
}

// The one compute set of a complex op: `make` returns the map vertex writing the result slot it is given (and may
// rename the codelet, "<op><c64>" by default), costed as the part type's ops its arithmetic takes.
using MakeKernel = std::function<std::unique_ptr<Kernel>(int o, std::string* codelet)>;

std::vector<int> emitPairMap(Lowerer& lowerer, OpContext& ctx, const MakeKernel& make) {
  checkComplexTypes(lowerer, ctx);
  const TensorType& out = ctx.out_types[0];
  const int o = lowerer.newSlotLike(out, ctx.in[0]);
  const DType complex = ctx.info->kind == K::Complex ? out.dtype : complexTypeOf(ctx);
  const DType part = complexPart(complex);
  std::string codelet = std::string(ctx.info->name) + "<" + dtypeName(complex) + ">";
  std::unique_ptr<Kernel> kernel = make(o, &codelet);
  const TileMapping work = lowerer.graph().slots[static_cast<size_t>(o)].mapping;
  std::vector<int64_t> recv;
  for (size_t i = 0; i < ctx.in.size(); ++i) lowerer.exchangeSameIndex(&recv, work, ctx.in[i]);
  const C64Cost& ops = ctx.info->c64;  // the registry row's part ops per element
  std::vector<Superstep> steps;
  const int workers = lowerer.device().num_worker_contexts;
  if (work.num_elements > 0) {
    steps.push_back(lowerer.superstep(codelet, work, recv, [&](int, int64_t n) {
      uint64_t cycles = 0;  // each part op of the pair arithmetic runs as its own vector loop over the n elements
      for (const F32OpCount& c : ops) cycles += cost::elementwise(c.kind, part, n * c.count, workers);
      return cycles;
    }));
    steps.back().cost_weight = ops.size() > 2 ? 8 : 1;
  }
  double flops = 0;
  for (const F32OpCount& c : ops) flops += cost::flopsPerElement(c.kind) * c.count;
  lowerer.emitExecute(ctx, std::move(kernel), std::move(steps), {o}, flops * static_cast<double>(out.numElements()));
  return {o};
}

}  // namespace

// A map over the parts of a c64 or c128 value: `make(TypeTag<Complex>, TypeTag<Part>)`.
template <class Make>
std::unique_ptr<Kernel> byComplexType(DType complex, Make&& make) {
  if (complex == DType::C128) return make(TypeTag<Complex128>{}, TypeTag<double>{});
  return make(TypeTag<Complex64>{}, TypeTag<float>{});
}

std::vector<int> lowerReal(Lowerer& lowerer, OpContext& ctx) {
  return emitPairMap(lowerer, ctx, [&](int o, std::string*) {
    return byComplexType(ctx.in_types[0].dtype, [&](auto c, auto r) {
      return map1<typename decltype(c)::type, typename decltype(r)::type>(ctx.in[0], o, scalar::RealC{});
    });
  });
}

std::vector<int> lowerImag(Lowerer& lowerer, OpContext& ctx) {
  return emitPairMap(lowerer, ctx, [&](int o, std::string*) {
    return byComplexType(ctx.in_types[0].dtype, [&](auto c, auto r) {
      return map1<typename decltype(c)::type, typename decltype(r)::type>(ctx.in[0], o, scalar::ImagC{});
    });
  });
}

std::vector<int> lowerComplex(Lowerer& lowerer, OpContext& ctx) {
  return emitPairMap(lowerer, ctx, [&](int o, std::string*) {
    return byComplexType(ctx.out_types[0].dtype, [&](auto c, auto r) {
      using C = typename decltype(c)::type;
      using R = typename decltype(r)::type;
      return map2<R, R, C>(ctx.in[0], ctx.in[1], o, scalar::MakeComplex{});
    });
  });
}

// Every elementwise op on c64 or c128 (Lowerer sends those here).
std::vector<int> lowerComplexElementwise(Lowerer& lowerer, OpContext& ctx) {
  return emitPairMap(lowerer, ctx,
                     [&](int o, std::string* codelet) { return complexKernel(lowerer, ctx, o, codelet); });
}

}  // namespace ipu
