// Windowed ops, popnn::pooling's family: reduce_window (max/avg/sum pooling, windowed reductions),
// select_and_scatter (the gradient of max pooling), and two ops that move no data between elements:
// reduce_precision (elementwise rounding to a narrower float format) and optimization_barrier (an identity).
//
// Poplar's pooling plan: the output is mapped linearly over the tiles, each tile receives the input elements its
// outputs' windows cover that it does not hold (the halo of its part of the input) and its workers reduce one window
// per output. Semantics are StableHLO's (and XLA:CPU's order): the input is base-dilated (holes between elements)
// and padded (negative padding crops); padding and holes are skipped, not read as the init value; each output is
// accumulated from the init value over its window in row-major window order.
//
// select_and_scatter is two supersteps, as popnn's max-pool gradient: (1) per window (source element) the operand
// element selected in window order: the first one, replaced by each later candidate the select body does not keep
// (select(current, candidate) false); (2) per operand element, the init value combined with the source value of
// every window that selected it, windows in row-major order (XLA:CPU's scatter order).
#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

#include "ipu/cost_model.h"
#include "ipu/dtype.h"
#include "ipu/handlers.h"
#include "ipu/kernels.h"
#include "ipu/lowering.h"
#include "ipu/numerics.h"
#include "ipu/scalar_ops.h"
#include "ipu/scalar_program.h"

namespace ipu {

namespace {

// The geometry of a windowed op: a window of `size` elements spaced `win_dil` apart starts every `stride` elements
// of the base-dilated, padded input.
struct Window {
  std::vector<int64_t> in_shape, in_strides, out_shape, size, stride, base_dil, win_dil, pad_lo, pad_hi;

  size_t rank() const { return in_shape.size(); }
  int64_t outSize(size_t d) const {
    const int64_t dilated = in_shape[d] == 0 ? 0 : (in_shape[d] - 1) * base_dil[d] + 1;
    const int64_t padded = dilated + pad_lo[d] + pad_hi[d];
    const int64_t span = (size[d] - 1) * win_dil[d] + 1;
    return padded < span ? 0 : (padded - span) / stride[d] + 1;
  }
  // The input coordinate that window position k of output position o reads in dim d, or -1 (padding or a hole).
  int64_t source(size_t d, int64_t o, int64_t k) const {
    const int64_t p = o * stride[d] + k * win_dil[d] - pad_lo[d];
    if (base_dil[d] == 1) return p >= 0 && p < in_shape[d] ? p : -1;  // the usual case: no division
    if (p < 0 || p % base_dil[d] != 0) return -1;
    const int64_t q = p / base_dil[d];
    return q < in_shape[d] ? q : -1;
  }
  // The input offsets (coordinate x stride) that output coordinate o reads in dim d, in window order.
  void offsetsOf(size_t d, int64_t o, std::vector<int64_t>* v) const {
    v->clear();
    for (int64_t k = 0; k < size[d]; ++k) {
      const int64_t q = source(d, o, k);
      if (q >= 0) v->push_back(q * in_strides[d]);
    }
  }
  // Whether the window leaves the innermost dimension alone (one element, stride 1, no dilation or padding: max
  // pooling's channels). Then outputs next to each other along it read the same window offsets, each shifted by
  // one element of that dimension (forEachRun).
  bool innerUnit() const {
    if (rank() == 0) return false;
    const size_t d = rank() - 1;
    return size[d] == 1 && stride[d] == 1 && base_dil[d] == 1 && pad_lo[d] == 0 && pad_hi[d] == 0;
  }
};

// Calls f(offset) for every element of the product of the per-dim offset lists, row-major.
template <class F>
inline void forEachOffset(const std::vector<std::vector<int64_t>>& per_dim, F&& f) {
  const size_t r = per_dim.size();
  for (const auto& v : per_dim)
    if (v.empty()) return;
  size_t inline_k[8] = {};
  std::vector<size_t> heap_k(r > 8 ? r : 0, 0);
  size_t* k = r > 8 ? heap_k.data() : inline_k;
  for (;;) {
    int64_t off = 0;
    for (size_t d = 0; d < r; ++d) off += per_dim[d][k[d]];
    f(off);
    size_t d = r;
    while (d > 0 && ++k[d - 1] == per_dim[d - 1].size()) k[--d] = 0;
    if (d == 0) return;
  }
}

// The windows of outputs b, b + 1, ... in turn: an odometer over the output shape that recomputes a dim's offsets
// only when that dim's coordinate changes (mostly just the innermost), instead of dividing per output. It keeps the
// window's offsets flattened (row-major over the dims, the order the kernels combine them in); when only the
// innermost coordinate moves and its offsets just shift (no padding reached), the flat list shifts with them.
class WindowWalker {
 public:
  WindowWalker(const Window& w, int64_t b) : w_(w), o_(w.rank(), 0), offs_(w.rank()) { seek(b); }
  // To output b's window (as made at b), in the buffers it has.
  void seek(int64_t b) {
    for (size_t d = w_.rank(); d-- > 0;) {
      if (w_.out_shape[d] == 0) continue;
      o_[d] = b % w_.out_shape[d];
      b /= w_.out_shape[d];
    }
    for (size_t d = 0; d < w_.rank(); ++d) w_.offsetsOf(d, o_[d], &offs_[d]);
    flatten();
  }
  const std::vector<int64_t>& flat() const { return flat_; }
  void next() {
    for (size_t d = w_.rank(); d-- > 0;) {
      const bool carry = ++o_[d] >= w_.out_shape[d];
      if (carry) o_[d] = 0;
      if (!carry && d + 1 == w_.rank()) {
        prev_.swap(offs_[d]);
        w_.offsetsOf(d, o_[d], &offs_[d]);
        if (shifted(prev_, offs_[d])) return;
        flatten();
        return;
      }
      w_.offsetsOf(d, o_[d], &offs_[d]);
      if (!carry) {
        flatten();
        return;
      }
    }
    flatten();
  }

 private:
  // cur = prev + delta elementwise (and non-empty): shift the flat list by delta.
  bool shifted(const std::vector<int64_t>& prev, const std::vector<int64_t>& cur) {
    if (prev.size() != cur.size() || cur.empty() || flat_.empty()) return false;
    const int64_t delta = cur[0] - prev[0];
    for (size_t i = 1; i < cur.size(); ++i)
      if (cur[i] - prev[i] != delta) return false;
    for (int64_t& f : flat_) f += delta;
    return true;
  }
  void flatten() {
    flat_.clear();
    forEachOffset(offs_, [&](int64_t off) { flat_.push_back(off); });
  }

  const Window& w_;
  std::vector<int64_t> o_;
  std::vector<std::vector<int64_t>> offs_;
  std::vector<int64_t> prev_, flat_;
};

// For a window that leaves the innermost dimension alone (Window::innerUnit): outputs [b, e) in runs of at most
// kWindowRun along that dimension, as run(first output, n, window offsets of the first, the input stride of the
// innermost dimension); output first + k reads each offset + k * stride. A kernel then combines a run's window
// positions in window order for all its outputs at once: the same operations per output, in the same order.
constexpr int64_t kWindowRun = 64;
template <class Run>
void forEachRun(const Window& w, int64_t b, int64_t e, Run&& run) {
  const size_t last = w.rank() - 1;
  const int64_t row = w.out_shape[last];
  if (b >= e) return;
  WindowWalker walk(w, b);
  for (int64_t i = b; i < e;) {
    const int64_t n = std::min({e - i, row - i % row, kWindowRun});
    if (i != b) walk.seek(i);
    run(i, n, walk.flat(), w.in_strides[last]);
    i += n;
  }
}

// reduce_window with a single-op computation on storage type S.
template <class S, class F>
class ReduceWindowKernel : public Kernel {
 public:
  ReduceWindowKernel(int in, int init, int out, const Window& w, F f) : in_(in), init_(init), out_(out), w_(w), f_(f) {}
  void compute(RunState& s, int64_t b, int64_t e) const override {
    const S* x = s.at<const S>(in_);
    const S init = *s.at<const S>(init_);
    S* o = s.at<S>(out_);
    if (b < e && w_.innerUnit()) {  // max pooling over NHWC: a run of channels at a time
      forEachRun(w_, b, e, [&](int64_t first, int64_t n, const std::vector<int64_t>& offs, int64_t step) {
        S acc[kWindowRun];
        for (int64_t k = 0; k < n; ++k) acc[k] = init;
        for (int64_t off : offs)
          for (int64_t k = 0; k < n; ++k) acc[k] = f_(acc[k], x[off + k * step]);
        std::copy(acc, acc + n, o + first);
      });
      return;
    }
    WindowWalker walk(w_, b);
    for (int64_t i = b; i < e; ++i, walk.next()) {
      S acc = init;
      for (int64_t off : walk.flat()) acc = f_(acc, x[off]);
      o[i] = acc;
    }
  }

 private:
  int in_, init_, out_;
  Window w_;
  F f_;
};

std::unique_ptr<Kernel> windowKernel(const std::string& c, DType dt, Numerics numerics, int in, int init, int out,
                                     const Window& w) {
  if (!isReducer(c)) return nullptr;
  OpKind kind = findOp(c)->kind;
  if (dt == DType::Bool && kind == OpKind::Add) kind = OpKind::Or;  // XLA's bool convention, as reduce
  if (dt == DType::Bool && kind == OpKind::Multiply) kind = OpKind::And;
  if (isFloat(dt) && (kind == OpKind::And || kind == OpKind::Or)) return nullptr;
  std::unique_ptr<Kernel> kernel;
  scalar::visitBinary<true>(
      kind, dt, numerics,
      [&](auto f, auto t) {
        kernel = std::make_unique<ReduceWindowKernel<typename decltype(t)::type, decltype(f)>>(in, init, out, w, f);
      },
      scalar::ConstantOperand::None, /*windowed=*/true);
  return kernel;
}

// reduce_window with any other body (variadic argmax-pooling, logaddexp, ...): the N accumulators and the N window
// elements go into the body's registers 0..2N-1, its N results become the accumulators.
class BodyWindowKernel : public Kernel {
 public:
  struct Operand {
    int in, init, out;
    size_t size;
  };
  BodyWindowKernel(std::vector<Operand> ops, const Window& w, ScalarProgram body)
      : ops_(std::move(ops)), w_(w), body_(std::move(body)) {}
  void compute(RunState& s, int64_t b, int64_t e) const override {
    const size_t n = ops_.size();
    ScalarRegisters file(body_, static_cast<int>(2 * n));
    ScalarReg* regs = file.data();
    uint8_t* r = file.bytes();
    std::vector<ScalarReg> next(n);
    WindowWalker walk(w_, b);
    for (int64_t i = b; i < e; ++i, walk.next()) {
      for (size_t k = 0; k < n; ++k)
        copyElement(r + kRegBytes * k, s.ptr[static_cast<size_t>(ops_[k].init)], ops_[k].size);
      for (int64_t off : walk.flat()) {
        for (size_t k = 0; k < n; ++k)
          copyElement(r + kRegBytes * (n + k),
                      s.ptr[static_cast<size_t>(ops_[k].in)] + off * static_cast<int64_t>(ops_[k].size), ops_[k].size);
        body_.run(regs);
        for (size_t k = 0; k < n; ++k) next[k] = regs[body_.resultRegister(k)];  // results may sit in param registers
        for (size_t k = 0; k < n; ++k) regs[k] = next[k];
      }
      for (size_t k = 0; k < n; ++k)
        copyElement(s.ptr[static_cast<size_t>(ops_[k].out)] + i * static_cast<int64_t>(ops_[k].size), r + kRegBytes * k,
                    ops_[k].size);
    }
  }

 private:
  std::vector<Operand> ops_;
  Window w_;
  ScalarProgram body_;
};

// Max pooling's selection for a run of n windows side by side along an untouched innermost dimension: window k
// reads x[offs[o] + k * step] for each window position o in order; the first position is its first choice, and each
// later one replaces the choice unless the select keeps the current (current >= candidate for GE, > for GT, false
// for a NaN either side). chosen[k] and best[k] get the choice and its value.
template <bool kGe>
void selectRun(const float* x, const std::vector<int64_t>& offs, int64_t n, int64_t step, int32_t* chosen,
               float* best) {
  for (int64_t k = 0; k < n; ++k) {
    chosen[k] = static_cast<int32_t>(offs[0] + k * step);
    best[k] = x[offs[0] + k * step];
  }
  for (size_t o = 1; o < offs.size(); ++o) {
    for (int64_t k = 0; k < n; ++k) {
      const float c = x[offs[o] + k * step];
      if (kGe ? best[k] >= c : best[k] > c) continue;
      best[k] = c;
      chosen[k] = static_cast<int32_t>(offs[o] + k * step);
    }
  }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// The same for a step of 1, eight windows at a time in AVX2 registers (the same comparisons, so the same choices),
// the rest as above.
template <bool kGe>
__attribute__((target("avx2"))) void selectRunAvx2(const float* x, const std::vector<int64_t>& offs, int64_t n,
                                                   int32_t* chosen, float* best) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    __m256 b = _mm256_loadu_ps(x + offs[0] + k);
    __m256i c = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int32_t>(offs[0] + k)), lanes);
    for (size_t o = 1; o < offs.size(); ++o) {
      const __m256 v = _mm256_loadu_ps(x + offs[o] + k);
      const __m256 keep = _mm256_cmp_ps(b, v, kGe ? _CMP_GE_OQ : _CMP_GT_OQ);
      const __m256i at = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int32_t>(offs[o] + k)), lanes);
      b = _mm256_blendv_ps(v, b, keep);
      c = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(at), _mm256_castsi256_ps(c), keep));
    }
    _mm256_storeu_ps(best + k, b);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(chosen + k), c);
  }
  if (k < n) {
    std::vector<int64_t> rest(offs);
    for (int64_t& off : rest) off += k;
    selectRun<kGe>(x, rest, n - k, 1, chosen + k, best + k);
  }
}
#endif

// select_and_scatter: superstep 0 selects per window (source element), superstep 1 scatters per operand element.
class SelectAndScatterKernel : public Kernel {
 public:
  // The bodies max pooling's gradient has on f32 (select: compare GE or GT of (current, candidate) as floats;
  // scatter: add) run as native code instead of through their ScalarPrograms: the same operations in the same
  // order, so the same bits.
  enum class NativeSelect { None, Ge, Gt };
  enum class NativeScatter { None, Add, AddSwapped };  // acc + source, or source + acc (NaN payloads differ)

  SelectAndScatterKernel(int operand, int source, int init, int selected, int out, size_t size, const Window& w,
                         ScalarProgram select, ScalarProgram scatter, NativeSelect native_select,
                         NativeScatter native_scatter)
      : operand_(operand), source_(source), init_(init), selected_(selected), out_(out), size_(size), w_(w),
        select_(std::move(select)), scatter_(std::move(scatter)), native_select_(native_select),
        native_scatter_(native_scatter) {
    // Per dim and operand coordinate p, the windows containing p: o * stride - pad_lo <= p <= o * stride - pad_lo
    // + size - 1, clipped to the output.
    lo_.resize(w_.rank());
    hi_.resize(w_.rank());
    for (size_t d = 0; d < w_.rank(); ++d)
      for (int64_t p = 0; p < w_.in_shape[d]; ++p) {
        const int64_t first = p + w_.pad_lo[d] - w_.size[d] + 1;
        lo_[d].push_back(std::max<int64_t>(0, first <= 0 ? 0 : (first + w_.stride[d] - 1) / w_.stride[d]));
        hi_[d].push_back(
            std::min<int64_t>(w_.out_shape[d] - 1, p + w_.pad_lo[d] < 0 ? -1 : (p + w_.pad_lo[d]) / w_.stride[d]));
      }
  }

  void compute(RunState& s, int64_t b, int64_t e) const override { computeStep(s, 0, b, e); }
  void computeStep(RunState& s, size_t step, int64_t b, int64_t e) const override {
    if (step == 0) select(s, b, e);
    else scatter(s, b, e);
  }

 private:
  const uint8_t* element(const RunState& s, int slot, int64_t i) const {
    return s.ptr[static_cast<size_t>(slot)] + i * static_cast<int64_t>(size_);
  }

  template <bool kGe>
  void selectF32(RunState& s, int64_t b, int64_t e) const {
    const float* x = s.at<const float>(operand_);
    int32_t* sel = s.at<int32_t>(selected_);
    if (b < e && w_.innerUnit()) {  // a run of channels at a time (forEachRun), each window as below
      forEachRun(w_, b, e, [&](int64_t first, int64_t n, const std::vector<int64_t>& offs, int64_t step) {
        if (offs.empty()) {  // windows of padding only: nothing selected
          for (int64_t k = 0; k < n; ++k) sel[first + k] = -1;
          return;
        }
        int32_t chosen[kWindowRun];
        float best[kWindowRun];
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
        if (step == 1 && hostHasAvx2()) selectRunAvx2<kGe>(x, offs, n, chosen, best);
        else selectRun<kGe>(x, offs, n, step, chosen, best);
#else
        selectRun<kGe>(x, offs, n, step, chosen, best);
#endif
        for (int64_t k = 0; k < n; ++k) sel[first + k] = chosen[k];
      });
      return;
    }
    WindowWalker walk(w_, b);
    for (int64_t i = b; i < e; ++i, walk.next()) {
      int64_t chosen = -1;
      float best = 0;
      for (int64_t off : walk.flat()) {
        const float c = x[off];
        if (chosen >= 0 && (kGe ? best >= c : best > c)) continue;  // select(current, candidate) keeps the current
        chosen = off;
        best = c;
      }
      sel[i] = static_cast<int32_t>(chosen);
    }
  }

  void select(RunState& s, int64_t b, int64_t e) const {
    if (native_select_ == NativeSelect::Ge) return selectF32<true>(s, b, e);
    if (native_select_ == NativeSelect::Gt) return selectF32<false>(s, b, e);
    ScalarRegisters file(select_, 2);
    uint8_t* r = file.bytes();
    int32_t* sel = s.at<int32_t>(selected_);
    WindowWalker walk(w_, b);
    for (int64_t i = b; i < e; ++i, walk.next()) {
      int64_t chosen = -1;
      for (int64_t off : walk.flat()) {
        if (chosen < 0) {
          chosen = off;
          continue;
        }
        copyElement(r, element(s, operand_, chosen), size_);
        copyElement(r + kRegBytes, element(s, operand_, off), size_);
        select_.run(file.data());
        if (!(file.data()[select_.resultRegister(0)] & 0xff)) chosen = off;
      }
      sel[i] = static_cast<int32_t>(chosen);
    }
  }

  // Per operand element j: the init value, combined with the source of each window (row-major) that selected j.
  void scatter(RunState& s, int64_t b, int64_t e) const {
    if (native_scatter_ == NativeScatter::Add) return scatterWith(s, b, e, [](float acc, float x) { return acc + x; });
    if (native_scatter_ == NativeScatter::AddSwapped)
      return scatterWith(s, b, e, [](float acc, float x) { return x + acc; });
    ScalarRegisters file(scatter_, 2);
    uint8_t* r = file.bytes();
    ScalarReg* regs = file.data();
    scatterWith(s, b, e, [&](ScalarReg acc, ScalarReg x) {
      regs[0] = acc;
      std::memcpy(r + kRegBytes, &x, kRegBytes);
      scatter_.run(regs);
      return regs[scatter_.resultRegister(0)];
    });
  }

  // `combine(acc, source)` on registers (the interpreted body, registers as they hold elements) or on f32.
  // Window-major: out[b, e) = init, then each window (row-major) whose selected element is in [b, e) combines its
  // source into that element, so every element takes its windows' sources in row-major window order (XLA:CPU's).
  // Only the windows that can contain an element of [b, e) are visited: those whose first coordinate lies between
  // the first window of b's first operand coordinate and the last of e - 1's (lo_ and hi_ grow with it).
  template <class F>
  void scatterWith(RunState& s, int64_t b, int64_t e, F&& combine) const {
    using T = std::conditional_t<std::is_same<decltype(combine(0.0f, 0.0f)), float>::value, float, ScalarReg>;
    const int32_t* sel = s.at<const int32_t>(selected_);
    const int64_t size = static_cast<int64_t>(size_);
    const uint8_t* src = s.ptr[static_cast<size_t>(source_)];
    uint8_t* out = s.ptr[static_cast<size_t>(out_)];
    for (int64_t j = b; j < e; ++j) copyElement(out + j * size, element(s, init_, 0), size_);
    int64_t w0 = 0, w1 = 1, inner = 1;
    for (int64_t d : w_.out_shape) w1 *= d;
    for (size_t d = 1; d < w_.rank(); ++d) inner *= w_.in_shape[d];
    if (w_.rank() > 0 && w1 > 0 && inner > 0 && b < e) {
      const int64_t per = w1 / w_.out_shape[0];
      w0 = lo_[0][static_cast<size_t>(b / inner)] * per;
      w1 = std::max(w0, (hi_[0][static_cast<size_t>((e - 1) / inner)] + 1) * per);
    }
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t j = sel[w];
      if (j < b || j >= e) continue;
      T acc{}, x{};
      copyElement(reinterpret_cast<uint8_t*>(&acc), out + j * size, size_);
      copyElement(reinterpret_cast<uint8_t*>(&x), src + w * size, size_);
      acc = combine(acc, x);
      copyElement(out + j * size, reinterpret_cast<const uint8_t*>(&acc), size_);
    }
  }

  int operand_, source_, init_, selected_, out_;
  size_t size_;
  Window w_;
  ScalarProgram select_, scatter_;
  NativeSelect native_select_;
  NativeScatter native_scatter_;
  std::vector<std::vector<int64_t>> lo_, hi_;
};

// XLA's ReducePrecision on the bits of a float with E exponent and M mantissa bits: round the mantissa to
// `mant` bits (to nearest, ties to even), then values above the reduced format's range become infinity and values
// at or below its smallest normal exponent become zero (the reduced format keeps no subnormals); NaN stays NaN
// (jaxlib 0.4.13's XLA writes a NaN as infinity when no mantissa bits are left; jaxlib 0.12's keeps it: keep_nan).
template <class U, int E, int M>
struct ReducePrecisionF {
  int exp_bits, mant_bits;
  bool keep_nan;
  U operator()(U x) const {
    constexpr int kBits = 8 * sizeof(U);
    constexpr U kExpMask = static_cast<U>(((U(1) << E) - 1) << M);
    constexpr U kMantMask = static_cast<U>((U(1) << M) - 1);
    const bool nan = (x & kExpMask) == kExpMask && (x & kMantMask) != 0;
    U r = x;
    if (mant_bits < M) {
      const int drop = M - mant_bits;
      const U last = static_cast<U>(U(1) << drop);
      const U bias = static_cast<U>(((last >> 1) - 1) + ((r & last) >> drop));
      r = static_cast<U>((r + bias) & static_cast<U>(~(last - 1)));
    }
    if (exp_bits < E) {
      const U sign = static_cast<U>(U(1) << (kBits - 1));
      const int64_t src_bias = (int64_t(1) << (E - 1)) - 1;
      const int64_t reduced_bias = (int64_t(1) << (exp_bits - 1)) - 1;
      const int64_t exponent = static_cast<int64_t>((r & kExpMask) >> M);
      if (exponent > src_bias + reduced_bias) r = static_cast<U>((r & sign) | kExpMask);
      else if (exponent <= src_bias - reduced_bias) r = static_cast<U>(r & sign);
    }
    if (nan) r = mant_bits > 0 || keep_nan ? x : kExpMask;
    return r;
  }
};

// A region that is one binary op of its two params, returning its result: that op (else null); *swapped: its
// operands are (param 1, param 0).
const Op* binaryOfParams(const Region& r, bool* swapped) {
  if (r.params.size() != 2 || r.body.size() != 1 || r.results.size() != 1) return nullptr;
  const Op& op = r.body[0];
  if (op.operands.size() != 2 || op.results.size() != 1 || op.results[0].id != r.results[0] || !op.regions.empty())
    return nullptr;
  const int64_t a = r.params[0].id, b = r.params[1].id;
  if (op.operands[0] == a && op.operands[1] == b) *swapped = false;
  else if (op.operands[0] == b && op.operands[1] == a) *swapped = true;
  else return nullptr;
  return &op;
}

bool isF32Scalar(const ValueDecl& v) { return v.dtype == "f32" && v.shape.empty(); }

SelectAndScatterKernel::NativeSelect nativeSelect(const Region& r, DType dt) {
  using N = SelectAndScatterKernel::NativeSelect;
  bool swapped = false;
  const Op* op = binaryOfParams(r, &swapped);
  if (dt != DType::F32 || !op || swapped || op->op != "compare" || !isF32Scalar(r.params[0]) ||
      !isF32Scalar(r.params[1]))
    return N::None;
  const std::string type = attrString(*op, "compare_type", "NOTYPE");
  if (type != "NOTYPE" && type != "FLOAT") return N::None;  // TOTALORDER orders NaNs and zeros: interpreted
  const std::string dir = attrString(*op, "comparison_direction", "");
  return dir == "GE" ? N::Ge : dir == "GT" ? N::Gt : N::None;
}

SelectAndScatterKernel::NativeScatter nativeScatter(const Region& r, DType dt) {
  using N = SelectAndScatterKernel::NativeScatter;
  bool swapped = false;
  const Op* op = binaryOfParams(r, &swapped);
  if (dt != DType::F32 || !op || op->op != "add" || !isF32Scalar(r.params[0]) || !isF32Scalar(r.params[1]) ||
      op->results[0].dtype != "f32")
    return N::None;
  return swapped ? N::AddSwapped : N::Add;
}

// The window geometry of a reduce_window (every window attribute) or a select_and_scatter (no dilations), over
// operand 0's shape: validated, with the result shape it gives.
Window readWindow(Lowerer& lowerer, const OpContext& ctx, bool dilations) {
  const Op& op = *ctx.op;
  const TensorType& in0 = ctx.in_types[0];
  Window w;
  w.in_shape = in0.shape;
  w.in_strides = rowMajorStrides(in0.shape);
  const size_t rank = w.rank();
  auto list = [&](const char* name, int64_t fallback) {
    std::vector<int64_t> v = attrInts(op, name, false);
    if (v.empty()) v.assign(rank, fallback);
    if (v.size() != rank) lowerer.invalid(ctx, std::string(name) + " must have one entry per dimension of the input");
    for (int64_t x : v)
      if (x < 1) lowerer.invalid(ctx, std::string(name) + " must be positive");
    return v;
  };
  if (!op.attrs.find("window_dimensions")) lowerer.invalid(ctx, "the window_dimensions attribute is missing");
  w.size = list("window_dimensions", 1);
  w.stride = list("window_strides", 1);
  w.base_dil = dilations ? list("base_dilations", 1) : std::vector<int64_t>(rank, 1);
  w.win_dil = dilations ? list("window_dilations", 1) : std::vector<int64_t>(rank, 1);
  w.pad_lo.assign(rank, 0);
  w.pad_hi.assign(rank, 0);
  if (const json::Value* p = op.attrs.find("padding")) {
    bool ok = p->isArray() && p->array.size() == rank;
    for (size_t d = 0; ok && d < rank; ++d) {
      const json::Value& pair = p->array[d];
      ok = pair.isArray() && pair.array.size() == 2 && pair.array[0].is_integer && pair.array[1].is_integer;
      if (ok) w.pad_lo[d] = pair.array[0].integer, w.pad_hi[d] = pair.array[1].integer;
    }
    if (!ok) lowerer.invalid(ctx, "padding must be one [low, high] pair of integers per dimension");
  }
  for (size_t d = 0; d < rank; ++d) w.out_shape.push_back(w.outSize(d));
  return w;
}

// TileMapping::tileOf for elements that mostly follow each other: the last run found answers until one falls outside.
class TileOf {
 public:
  explicit TileOf(const TileMapping& m) : m_(m) {}
  int operator()(int64_t element) {
    if (element < lo_ || element >= hi_) {
      const int run = static_cast<int>(element / m_.per_tile);
      lo_ = m_.runBegin(run);
      hi_ = m_.runEnd(run);
      tile_ = m_.tileOfRun(run);
    }
    return tile_;
  }

 private:
  const TileMapping& m_;
  int64_t lo_ = 0, hi_ = 0;
  int tile_ = -1;
};

// Calls f(i, offset) for every input element the windows of outputs [b, e) read, each window in window order: runs
// of outputs along an untouched innermost dimension together (forEachRun), else output by output (a WindowWalker's
// odometer, not a division per output).
template <class F>
void forEachWindowElement(const Window& w, int64_t b, int64_t e, F&& f) {
  if (b >= e) return;
  if (w.innerUnit()) {
    forEachRun(w, b, e, [&](int64_t first, int64_t n, const std::vector<int64_t>& offsets, int64_t stride) {
      for (int64_t off : offsets)
        for (int64_t k = 0; k < n; ++k) f(first + k, off + k * stride);
    });
    return;
  }
  WindowWalker walk(w, b);
  for (int64_t i = b;;) {
    for (int64_t off : walk.flat()) f(i, off);
    if (++i == e) return;
    walk.next();
  }
}

// Per tile of `work` (one output per window of `w`): the window elements its outputs read, and the bytes of them
// it receives (distinct elements held elsewhere, once per tile) from an input mapped as `in_map`.
void windowTraffic(const Window& w, int tiles, const TileMapping& work, const TileMapping& in_map,
                   int64_t bytes_per_element, std::vector<int64_t>* reads, std::vector<int64_t>* recv) {
  reads->assign(static_cast<size_t>(tiles), 0);
  recv->resize(static_cast<size_t>(tiles), 0);
  std::vector<int> stamp(static_cast<size_t>(in_map.num_elements), -1);
  TileOf in_tile(in_map);
  for (int t = 0; t < work.tilesUsed(); ++t)
    forEachWindowElement(w, work.begin(t), work.end(t), [&](int64_t, int64_t off) {
      ++(*reads)[static_cast<size_t>(t)];
      if (stamp[static_cast<size_t>(off)] == t) return;
      stamp[static_cast<size_t>(off)] = t;
      if (in_tile(off) != t) (*recv)[static_cast<size_t>(t)] += bytes_per_element;
    });
}

}  // namespace

std::vector<int> lowerOptimizationBarrier(Lowerer& lowerer, OpContext& ctx) {
  // An identity that only orders a schedule: its results are its operands' slots (later uses of a result extend
  // the operand's live range, as for a reshape), and it runs nothing.
  if (ctx.out_types.size() != ctx.in.size()) lowerer.invalid(ctx, "optimization_barrier has one result per operand");
  for (size_t i = 0; i < ctx.in.size(); ++i)
    if (ctx.out_types[i].dtype != ctx.in_types[i].dtype || ctx.out_types[i].shape != ctx.in_types[i].shape)
      lowerer.invalid(ctx, "each result must have its operand's type");
  return ctx.in;
}

std::vector<int> lowerReducePrecision(Lowerer& lowerer, OpContext& ctx) {
  const Op& op = *ctx.op;
  const int workers = lowerer.device().num_worker_contexts;
  const TensorType& in = ctx.in_types[0];
  if (ctx.out_types.size() != 1 || ctx.out_types[0].dtype != in.dtype || ctx.out_types[0].shape != in.shape)
    lowerer.invalid(ctx, "the result must have the operand's type");
  const int64_t exp_bits = attrInt(op, "exponent_bits"), mant_bits = attrInt(op, "mantissa_bits");
  if (exp_bits < 1 || mant_bits < 0 || exp_bits > 64 || mant_bits > 64)
    lowerer.invalid(ctx, "exponent_bits must be at least 1 and mantissa_bits at least 0");
  const int o = lowerer.newSlotLike(ctx.out_types[0], ctx.in[0]);
  std::unique_ptr<Kernel> kernel;
  const int e = static_cast<int>(exp_bits), m = static_cast<int>(mant_bits);
  const bool keep = lowerer.numerics() == Numerics::Jaxlib012;
  if (in.dtype == DType::F32)
    kernel = map1<uint32_t, uint32_t>(ctx.in[0], o, ReducePrecisionF<uint32_t, 8, 23>{e, m, keep});
  else if (in.dtype == DType::F16)
    kernel = map1<uint16_t, uint16_t>(ctx.in[0], o, ReducePrecisionF<uint16_t, 5, 10>{e, m, keep});
  else if (in.dtype == DType::BF16)
    kernel = map1<uint16_t, uint16_t>(ctx.in[0], o, ReducePrecisionF<uint16_t, 8, 7>{e, m, keep});
  else
    lowerer.unimplemented(
        ctx, std::string("reduce_precision is implemented for f32, f16 and bf16, not ") + dtypeName(in.dtype));
  const TileMapping work = lowerer.graph().slots[static_cast<size_t>(o)].mapping;
  std::vector<Superstep> steps;
  if (work.num_elements > 0)
    steps.push_back(lowerer.superstep(
        std::string("popops::ReducePrecision<") + dtypeName(in.dtype) + ">", work, {},
        [&](int, int64_t n) { return cost::elementwise(OpKind::ReducePrecision, in.dtype, n, workers); }));
  lowerer.emitExecute(ctx, std::move(kernel), std::move(steps), {o}, 0);
  return {o};
}

// operand, source, init -> the operand's shape: each source element is scattered to the element its window selects.
std::vector<int> lowerSelectAndScatter(Lowerer& lowerer, OpContext& ctx) {
  const Op& op = *ctx.op;
  const int workers = lowerer.device().num_worker_contexts;
  const int tiles = lowerer.device().num_tiles;
  const TensorType& in0 = ctx.in_types[0];
  Window w = readWindow(lowerer, ctx, false);
  const int64_t elem_bytes = static_cast<int64_t>(dtypeSize(in0.dtype));
  const TensorType& source = ctx.in_types[1];
  const TensorType& init = ctx.in_types[2];
  if (source.shape != w.out_shape || source.dtype != in0.dtype)
    lowerer.invalid(ctx, "the source must have the operand's type and one element per window (shape " +
                             mlirTensorType(dtypeName(in0.dtype), w.out_shape) + ")");
  if (!init.shape.empty() || init.dtype != in0.dtype || ctx.out_types.size() != 1 ||
      ctx.out_types[0].dtype != in0.dtype || ctx.out_types[0].shape != in0.shape)
    lowerer.invalid(ctx, "the init value must be a scalar of the operand's type and the result the operand's type");
  if (in0.numElements() > std::numeric_limits<int32_t>::max())
    lowerer.unimplemented(ctx, "operands of more than 2^31 elements are not supported");
  if (op.regions.size() != 2) lowerer.invalid(ctx, "select_and_scatter has a select and a scatter region");
  const ScalarProgram select =
      lowerer.compileBody(ctx, op.regions[0], {in0.dtype, in0.dtype}, {DType::Bool}, "in a region");
  const ScalarProgram scatter =
      lowerer.compileBody(ctx, op.regions[1], {in0.dtype, in0.dtype}, {in0.dtype}, "in a region");
  const int out = lowerer.newSlotLike(ctx.out_types[0], ctx.in[0]);
  const int selected =
      lowerer.newSlotLike(TensorType{DType::I32, w.out_shape}, ctx.in[1]);  // per window: the chosen element
  const TileMapping src_map = lowerer.graph().slots[static_cast<size_t>(selected)].mapping;
  const TileMapping out_map = lowerer.graph().slots[static_cast<size_t>(out)].mapping;
  const TileMapping op_map = lowerer.graph().slots[static_cast<size_t>(ctx.in[0])].mapping;
  // Superstep 0 over the windows: each tile receives the operand elements its windows cover, and its sources.
  std::vector<int64_t> reads0, recv0;
  windowTraffic(w, tiles, src_map, op_map, elem_bytes, &reads0, &recv0);
  // Superstep 1 over the operand: each element reads the selection and source of every window containing it.
  std::vector<int64_t> reads1(static_cast<size_t>(tiles), 0), recv1(static_cast<size_t>(tiles), 0);
  {
    std::vector<int> stamp(static_cast<size_t>(src_map.num_elements), -1);
    const Slot& src_slot = lowerer.graph().slots[static_cast<size_t>(ctx.in[1])];
    TileOf out_tile(out_map), window_tile(src_map), source_tile(src_slot.mapping);
    for (int t = 0; t < src_map.tilesUsed(); ++t)  // the windows' elements, seen from the windows
      forEachWindowElement(w, src_map.begin(t), src_map.end(t), [&](int64_t i, int64_t off) {
        const int dest = out_tile(off);
        ++reads1[static_cast<size_t>(dest)];
        if (stamp[static_cast<size_t>(i)] == dest) return;
        stamp[static_cast<size_t>(i)] = dest;
        if (window_tile(i) != dest) recv1[static_cast<size_t>(dest)] += 4;
        if (source_tile(i) != dest) recv1[static_cast<size_t>(dest)] += elem_bytes;
      });
  }
  lowerer.exchangeScalar(&recv1, out_map, ctx.in[2]);
  std::vector<Superstep> steps;
  const std::string type = dtypeName(in0.dtype);
  steps.push_back(lowerer.superstep(
      "popnn::SelectWindow{" + select.summary() + "}<" + type + ">", src_map, recv0, [&](int t, int64_t m) {
        return cost::reduceBody(select.cyclesPerElement(), reads0[static_cast<size_t>(t)], m, workers);
      }));
  steps.push_back(lowerer.superstep(
      "popnn::MaxPoolingGrad{" + scatter.summary() + "}<" + type + ">", out_map, recv1, [&](int t, int64_t m) {
        return cost::reduceBody(scatter.cyclesPerElement() + 1, reads1[static_cast<size_t>(t)], m, workers);
      }));
  const double flops = isFloat(in0.dtype) ? scatter.flopsPerElement() * static_cast<double>(source.numElements()) : 0;
  auto kernel = std::make_unique<SelectAndScatterKernel>(
      ctx.in[0], ctx.in[1], ctx.in[2], selected, out, dtypeSize(in0.dtype), w, select, scatter,
      nativeSelect(op.regions[0], in0.dtype), nativeScatter(op.regions[1], in0.dtype));
  lowerer.emitExecute(ctx, std::move(kernel), std::move(steps), {out, selected}, flops);
  return {out};
}

// N inputs and N init values -> N results, one element per window.
namespace {

// The results' slots, after their types are checked against the inputs and the window (the outputs sit together).
std::vector<int> windowOutputs(Lowerer& lowerer, const OpContext& ctx, size_t n, const Window& w) {
  std::vector<int> outs;
  for (size_t i = 0; i < n; ++i) {
    const TensorType& in = ctx.in_types[i];
    const TensorType& init = ctx.in_types[n + i];
    if (in.shape != ctx.in_types[0].shape) lowerer.invalid(ctx, "all inputs must have the same shape");
    if (!init.shape.empty() || init.dtype != in.dtype || ctx.out_types[i].dtype != in.dtype ||
        ctx.out_types[i].shape != w.out_shape)
      lowerer.invalid(ctx, "init values must be scalars of their input's type and results of shape " +
                               mlirTensorType(dtypeName(in.dtype), w.out_shape) + " (from the window attributes)");
    outs.push_back(i == 0 ? lowerer.newSlot(ctx.out_types[i]) : lowerer.newSlotLike(ctx.out_types[i], outs[0]));
  }
  return outs;
}

// How a reduce_window computes: popnn's pooling vertex for a single-op computation, else the body interpreted
// (general).
struct PoolingVertex {
  std::unique_ptr<Kernel> kernel;
  std::string codelet;
  bool general = false;
  ScalarProgram body;  // general: the compiled body
};

PoolingVertex makePoolingVertex(Lowerer& lowerer, OpContext& ctx, size_t n, const std::vector<int>& outs,
                                const Window& w) {
  const Op& op = *ctx.op;
  std::vector<DType> types;
  std::string type_list;
  for (size_t i = 0; i < n; ++i) {
    types.push_back(ctx.in_types[i].dtype);
    type_list += (i ? "," : "") + std::string(dtypeName(types[i]));
  }
  const std::string computation = attrString(op, "computation", "");
  std::vector<std::unique_ptr<Kernel>> parts;
  for (size_t i = 0; i < n && !computation.empty(); ++i) {
    auto k = windowKernel(computation, types[i], lowerer.numerics(), ctx.in[i], ctx.in[n + i], outs[i], w);
    if (!k) {
      parts.clear();
      break;
    }
    parts.push_back(std::move(k));
  }
  PoolingVertex v;
  v.general = parts.empty();
  if (!v.general) {
    v.kernel = parts.size() == 1 ? std::move(parts[0]) : std::make_unique<KernelSequence>(std::move(parts));
    const char* name = computation == "maximum" ? "MaxPooling" : computation == "add" ? "SumPooling" : nullptr;
    v.codelet = name ? "popnn::" + std::string(name) + "<" + type_list + ">"
                     : "popnn::Pooling{" + computation + "}<" + type_list + ">";
    return v;
  }
  if (op.regions.size() != 1) lowerer.invalid(ctx, "reduce_window must have one body region");
  std::vector<DType> params = types;
  params.insert(params.end(), types.begin(), types.end());
  v.body = lowerer.compileBody(ctx, op.regions[0], params, types, "in the body");
  std::vector<BodyWindowKernel::Operand> operands;
  for (size_t i = 0; i < n; ++i) operands.push_back({ctx.in[i], ctx.in[n + i], outs[i], dtypeSize(types[i])});
  v.codelet = "popnn::Pooling{" + v.body.summary() + "}<" + type_list + ">";
  v.kernel = std::make_unique<BodyWindowKernel>(std::move(operands), w, v.body);
  return v;
}

}  // namespace

// Each output tile computes its outputs' windows from the input elements it receives.
std::vector<int> lowerReduceWindow(Lowerer& lowerer, OpContext& ctx) {
  const int workers = lowerer.device().num_worker_contexts;
  const size_t n = ctx.in.size() / 2;
  if (ctx.in.size() % 2 != 0 || ctx.out_types.size() != n)
    lowerer.invalid(ctx, "reduce_window takes N inputs and N init values and has N results");
  const DType dt = ctx.in_types[0].dtype;
  Window w = readWindow(lowerer, ctx, true);
  const std::vector<int> outs = windowOutputs(lowerer, ctx, n, w);
  PoolingVertex v = makePoolingVertex(lowerer, ctx, n, outs, w);

  const TileMapping out_map = lowerer.graph().slots[static_cast<size_t>(outs[0])].mapping;
  const TileMapping in_map = lowerer.graph().slots[static_cast<size_t>(ctx.in[0])].mapping;
  int64_t bytes_per_element = 0;  // one element of every input per window element
  for (size_t i = 0; i < n; ++i) bytes_per_element += static_cast<int64_t>(dtypeSize(ctx.in_types[i].dtype));
  std::vector<int64_t> reads, recv;
  windowTraffic(w, lowerer.device().num_tiles, out_map, in_map, bytes_per_element, &reads, &recv);
  for (size_t i = 0; i < n; ++i) lowerer.exchangeScalar(&recv, out_map, ctx.in[n + i]);
  int64_t total_reads = 0;
  for (int64_t r : reads) total_reads += r;
  std::vector<Superstep> steps;
  if (out_map.num_elements > 0) {
    steps.push_back(lowerer.superstep(v.codelet, out_map, recv, [&](int t, int64_t m) {
      const int64_t r = reads[static_cast<size_t>(t)];
      return v.general ? cost::reduceBody(v.body.cyclesPerElement(), r, m, workers)
                       : cost::reduce(dt, r * static_cast<int64_t>(n), m, workers);
    }));
    const double per_output =
        std::max<double>(1, static_cast<double>(total_reads) / static_cast<double>(out_map.num_elements));
    steps.back().cost_weight =
        per_output * (v.general ? std::max<double>(1, static_cast<double>(v.body.numInstructions())) : 1);
  }
  const double flops = v.general     ? v.body.flopsPerElement() * static_cast<double>(total_reads)
                       : isFloat(dt) ? static_cast<double>(total_reads * static_cast<int64_t>(n))
                                     : 0;
  lowerer.emitExecute(ctx, std::move(v.kernel), std::move(steps), outs, flops);
  return outs;
}

}  // namespace ipu
