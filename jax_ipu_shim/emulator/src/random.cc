// stablehlo.rng: random numbers from the tiles' generators, as poprand::uniform and poprand::normal make them.
//
// Each tile makes the elements of the result it holds. Element i of execution r is drawn from Philox4x32-10 (the
// counter-based generator XLA:CPU expands rng into) with the counter (i, r) and a 64-bit key: the executable's seed
// XOR its replica's number. So a result's bits do not depend on how it is mapped onto tiles, every execution draws
// new numbers (rng is stateful, as on cpu: XLA keeps a state that every execution advances), and each replica draws
// its own. The seed is drawn once per executable from the host's entropy, as XLA:CPU draws its own; no bits are
// shared with cpu, whose stream differs from process to process.
//
//   UNIFORM, floats   a + (b - a) * u, u in [0, 1) from 23 random bits; a value the rounding carries to b is
//                     the largest one below b, so results lie in [a, b). 16-bit floats are made in f32 and
//                     rounded, as XLA:CPU makes them.
//   UNIFORM, integers a + (64 random bits mod (b - a)), in [a, b); a when b <= a (the spec leaves it open).
//   NORMAL, floats    a + b * z, z a standard normal from two uniforms (Box-Muller), as the IPU's hardware
//                     generator gives normals directly.
#include <atomic>
#include <cmath>
#include <cstring>
#include <random>

#include "ipu/cost_model.h"
#include "ipu/dtype.h"
#include "ipu/handlers.h"
#include "ipu/lowering.h"
#include "ipu/scalar_ops.h"
#include "ipu/special_functions.h"

namespace ipu {

namespace {

enum class Distribution { Uniform, Normal };

// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): four 32-bit words of
// counter, two of key.
struct Words {
  uint32_t w[4];
};

Words philox(uint64_t counter_lo, uint64_t counter_hi, uint64_t key) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c[4] = {static_cast<uint32_t>(counter_lo), static_cast<uint32_t>(counter_lo >> 32),
                   static_cast<uint32_t>(counter_hi), static_cast<uint32_t>(counter_hi >> 32)};
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kM0) * c[0], p1 = static_cast<uint64_t>(kM1) * c[2];
    const uint32_t next[4] = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k0, static_cast<uint32_t>(p1),
                              static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k1, static_cast<uint32_t>(p0)};
    for (int j = 0; j < 4; ++j) c[j] = next[j];
    k0 += kW0;
    k1 += kW1;
  }
  return {{c[0], c[1], c[2], c[3]}};
}

// [0, 1) from the top 23 bits of a word (the uniform floats XLA makes: a mantissa of random bits).
float unit(uint32_t word) { return static_cast<float>(word >> 9) * 0x1p-23f; }

template <DType D>
class RngKernel : public Kernel {
  using T = Storage<D>;

 public:
  RngKernel(int a, int b, int out, Distribution dist, uint64_t seed, int dyn)
      : a_(a), b_(b), out_(out), dist_(dist), seed_(seed), dyn_(dyn) {}
  // Each execution of the step takes the next execution number: a loop's every trip draws new numbers.
  void prepare(RunState& s) const override {
    s.dynamic[static_cast<size_t>(dyn_)] = static_cast<int64_t>(runs_.fetch_add(1, std::memory_order_relaxed));
  }
  void compute(RunState& s, int64_t begin, int64_t end) const override {
    const uint64_t run = static_cast<uint64_t>(s.dynamic[static_cast<size_t>(dyn_)]);
    const uint64_t key = seed_ ^ static_cast<uint64_t>(s.options ? s.options->replica : 0);
    const T a = s.at<T>(a_)[0], b = s.at<T>(b_)[0];
    T* out = s.at<T>(out_);
    for (int64_t i = begin; i < end; ++i) out[i] = sample(philox(static_cast<uint64_t>(i), run, key), a, b);
  }

 private:
  T sample(const Words& r, T a, T b) const {
    if constexpr (D == DType::F32 || isNarrowFloat(D)) {
      const float fa = scalar::convertValue<DType::F32, D>(a), fb = scalar::convertValue<DType::F32, D>(b);
      if (dist_ == Distribution::Normal) {
        const float u1 = unit(r.w[0]) + 0x1p-23f;  // (0, 1]: the logarithm stays finite
        const float z = std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853071795865f * unit(r.w[1]));
        return scalar::convertValue<D, DType::F32>(fa + fb * z);
      }
      const T v = scalar::convertValue<D, DType::F32>(fa + (fb - fa) * unit(r.w[0]));
      if (!(fa < fb) || scalar::convertValue<DType::F32, D>(v) < fb) return v;
      if constexpr (D == DType::F32) {
        return special::nextAfter(fb, fa);
      } else {  // the largest value below b, on the bits
        uint16_t bits_a, bits_b;
        std::memcpy(&bits_a, &a, 2);
        std::memcpy(&bits_b, &b, 2);
        const uint16_t below = special::nextAfterBits<uint16_t>(bits_b, bits_a, false, false, false);
        T out;
        std::memcpy(&out, &below, 2);
        return out;
      }
    } else {
      const int64_t lo = static_cast<int64_t>(a), range = static_cast<int64_t>(b) - lo;
      if (range <= 0) return a;
      const uint64_t bits = static_cast<uint64_t>(r.w[1]) << 32 | r.w[0];
      return static_cast<T>(lo + static_cast<int64_t>(bits % static_cast<uint64_t>(range)));
    }
  }

  int a_, b_, out_;
  Distribution dist_;
  uint64_t seed_;
  int dyn_;
  mutable std::atomic<uint64_t> runs_{0};  // executions so far: the one mutable state of a compiled program
};

Distribution readDistribution(Lowerer& lowerer, const OpContext& ctx) {
  const std::string name = attrString(*ctx.op, "rng_distribution");
  if (name == "UNIFORM") return Distribution::Uniform;
  if (name == "NORMAL") {
    if (!isFloat(ctx.out_types[0].dtype))
      lowerer.invalid(ctx, "rng_distribution NORMAL needs a floating-point result, not " +
                               std::string(dtypeName(ctx.out_types[0].dtype)));
    return Distribution::Normal;
  }
  lowerer.invalid(ctx, "rng_distribution must be UNIFORM or NORMAL, not '" + name + "'");
}

}  // namespace

std::vector<int> lowerRng(Lowerer& lowerer, OpContext& ctx) {
  if (ctx.out_types.size() != 1) lowerer.invalid(ctx, "expected one result");
  const TensorType& out = ctx.out_types[0];
  for (size_t i = 0; i < 2; ++i)
    if (!ctx.in_types[i].shape.empty() || ctx.in_types[i].dtype != out.dtype)
      lowerer.invalid(ctx, std::string(i ? "b" : "a") + " must be a scalar of the result's element type");
  const Distribution dist = readDistribution(lowerer, ctx);
  const int o = lowerer.newSlot(out);
  const int dyn = lowerer.newDynamic(1);
  const uint64_t seed = static_cast<uint64_t>(std::random_device{}()) << 32 | std::random_device{}();
  std::unique_ptr<Kernel> kernel;
  visitDType(out.dtype, [&](auto t) {
    constexpr DType D = decltype(t)::value;
    if constexpr (D != DType::Bool && !isComplex(D) && D != DType::Token)
      kernel = std::make_unique<RngKernel<D>>(ctx.in[0], ctx.in[1], o, dist, seed, dyn);
  });
  const TileMapping& work = lowerer.graph().slots[static_cast<size_t>(o)].mapping;
  std::vector<int64_t> recv;
  lowerer.exchangeScalar(&recv, work, ctx.in[0]);
  lowerer.exchangeScalar(&recv, work, ctx.in[1]);
  const int workers = lowerer.device().num_worker_contexts;
  std::vector<Superstep> steps;
  if (out.numElements() > 0)
    steps.push_back(lowerer.superstep(
        std::string(dist == Distribution::Normal ? "normal<" : "uniform<") + dtypeName(out.dtype) + ">", work, recv,
        [&](int, int64_t n) { return cost::random(out.dtype, n, workers); }));
  lowerer.emitExecute(ctx, std::move(kernel), std::move(steps), {o}, 0);
  return {o};
}

}  // namespace ipu
