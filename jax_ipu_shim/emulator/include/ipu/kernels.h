// Small kernel templates shared by the op families: elementwise maps over host storage types, and the fused
// elementwise vertex (popops' expression maps) that runs a small program of them over blocks.
#pragma once

#include <algorithm>
#include <cstring>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "ipu/cpu_features.h"
#include "ipu/graph.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

namespace ipu {

template <class A, class O, class F>
inline void mapLoop1(const A* __restrict a, O* __restrict o, int64_t b, int64_t e, const F& f) {
  for (int64_t i = b; i < e; ++i) o[i] = f(a[i]);
}

template <class A, class B, class O, class F>
inline void mapLoop2(const A* __restrict a, const B* __restrict x, O* __restrict o, int64_t b, int64_t e, const F& f) {
  for (int64_t i = b; i < e; ++i) o[i] = f(a[i], x[i]);
}

// o[i] = f(a[i]) over storage types A -> O.
template <class A, class O, class F>
class Map1Kernel : public Kernel {
 public:
  Map1Kernel(int a, int o, F f) : a_(a), o_(o), f_(f) {}
  void compute(RunState& s, int64_t b, int64_t e) const override { mapLoop1(s.at<const A>(a_), s.at<O>(o_), b, e, f_); }

 private:
  int a_, o_;
  F f_;
};

// o[i] = f(a[i], b[i]).
template <class A, class B, class O, class F>
class Map2Kernel : public Kernel {
 public:
  Map2Kernel(int a, int x, int o, F f) : a_(a), x_(x), o_(o), f_(f) {}
  void compute(RunState& s, int64_t b, int64_t e) const override {
    mapLoop2(s.at<const A>(a_), s.at<const B>(x_), s.at<O>(o_), b, e, f_);
  }

 private:
  int a_, x_, o_;
  F f_;
};

// o[i] = f(a[i*sa], b[i*sb], c[i*sc]) where a stride of 0 broadcasts a scalar operand.
template <class A, class B, class C, class O, class F>
class Map3Kernel : public Kernel {
 public:
  Map3Kernel(int a, int x, int c, int o, int64_t sa, int64_t sb, int64_t sc, F f)
      : a_(a), x_(x), c_(c), o_(o), sa_(sa), sb_(sb), sc_(sc), f_(f) {}
  void compute(RunState& s, int64_t b, int64_t e) const override {
    const A* a = s.at<const A>(a_);
    const B* x = s.at<const B>(x_);
    const C* c = s.at<const C>(c_);
    O* o = s.at<O>(o_);
    for (int64_t i = b; i < e; ++i) o[i] = f_(a[i * sa_], x[i * sb_], c[i * sc_]);
  }

 private:
  int a_, x_, c_, o_;
  int64_t sa_, sb_, sc_;
  F f_;
};

template <class A, class O, class F>
std::unique_ptr<Kernel> map1(int a, int o, F f) {
  return std::make_unique<Map1Kernel<A, O, F>>(a, o, f);
}
template <class A, class B, class O, class F>
std::unique_ptr<Kernel> map2(int a, int x, int o, F f) {
  return std::make_unique<Map2Kernel<A, B, O, F>>(a, x, o, f);
}
template <class A, class B, class C, class O, class F>
std::unique_ptr<Kernel> map3(int a, int x, int c, int o, int64_t sa, int64_t sb, int64_t sc, F f) {
  return std::make_unique<Map3Kernel<A, B, C, O, F>>(a, x, c, o, sa, sb, sc, f);
}

// ---- the fused elementwise vertex ----

// One elementwise op over a block of n contiguous elements: out[i] = f(args[0][i], ...). Instantiated from the
// functors of scalar_ops.h, so that each op is one tight loop the compiler can vectorise.
using BlockFn = void (*)(const void* const* args, void* out, int64_t n);

// g++ -O2 vectorises only loops that need no scalar epilogue: each block loop runs whole groups of kLanes elements
// (an inner loop of known trip count, which it vectorises) and then the few left over.
constexpr int64_t kLanes = 64;
#define IPU_BLOCK_LOOP(n, body)                 \
  do {                                          \
    int64_t i_ = 0;                             \
    for (; i_ + kLanes <= (n); i_ += kLanes)    \
      for (int64_t j_ = 0; j_ < kLanes; ++j_) { \
        const int64_t i = i_ + j_;              \
        body;                                   \
      }                                         \
    for (; i_ < (n); ++i_) {                    \
      const int64_t i = i_;                     \
      body;                                     \
    }                                           \
  } while (0)

// The loops take their pointers as __restrict parameters (g++ ignores restrict on local pointers). Each exists
// twice: for the portable x86-64 baseline (SSE2) and for AVX2 with FMA (twice the vector width, and the std::fma
// of xla_math.h as one instruction instead of a libm call), picked at run time. The build compiles with
// -ffp-contract=off, so only those explicit fused multiply-adds are fused, and both give the same bits.
#define IPU_DEFINE_LOOPS(Suffix, Attr)                                                                          \
  template <class A, class O, class F>                                                                          \
  Attr void loop1##Suffix(const A* __restrict a, O* __restrict o, int64_t n) {                                  \
    const F f{};                                                                                                \
    IPU_BLOCK_LOOP(n, o[i] = f(a[i]));                                                                          \
  }                                                                                                             \
  template <class A, class B, class O, class F>                                                                 \
  Attr void loop2##Suffix(const A* __restrict a, const B* __restrict x, O* __restrict o, int64_t n) {           \
    const F f{};                                                                                                \
    IPU_BLOCK_LOOP(n, o[i] = f(a[i], x[i]));                                                                    \
  }                                                                                                             \
  template <class F, int kSide>                                                                                 \
  Attr void loop2Splat##Suffix(const float* __restrict a, float x, float* __restrict o, int64_t n) {            \
    const F f{};                                                                                                \
    if (kSide == 0) IPU_BLOCK_LOOP(n, o[i] = f(x, a[i]));                                                       \
    else IPU_BLOCK_LOOP(n, o[i] = f(a[i], x));                                                                  \
  }                                                                                                             \
  template <class A, class B, class C, class O, class F>                                                        \
  Attr void loop3##Suffix(const A* __restrict a, const B* __restrict x, const C* __restrict c, O* __restrict o, \
                          int64_t n) {                                                                          \
    const F f{};                                                                                                \
    IPU_BLOCK_LOOP(n, o[i] = f(a[i], x[i], c[i]));                                                              \
  }
IPU_DEFINE_LOOPS(Base, )
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
IPU_DEFINE_LOOPS(Avx2, __attribute__((target("avx2,fma"))))
#define IPU_DISPATCH(loop, ...) (hostHasAvx2() && hostHasFma() ? loop##Avx2<__VA_ARGS__> : loop##Base<__VA_ARGS__>)

// f32 functors with a hand-vectorised form, F::avx2(__m256) (exp, log, tanh... of ipu/xla_math_avx2.h, which g++
// does not vectorise from the scalar code), or F::avx2(__m256, __m256) (jaxlib 0.12's maximum and minimum): whole
// vectors of 8 with it, the tail with the scalar form (same bits).
template <class F, class = void>
struct HasAvx2Form : std::false_type {};
template <class F>
struct HasAvx2Form<F, std::void_t<decltype(F::avx2(std::declval<__m256>()))>> : std::true_type {};

template <class F>
__attribute__((target("avx2,fma"))) void loop1Vec(const float* __restrict a, float* __restrict o, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(o + i, F::avx2(_mm256_loadu_ps(a + i)));
  const F f{};
  for (; i < n; ++i) o[i] = f(a[i]);
}
template <class F, class = void>
struct HasAvx2Form2 : std::false_type {};
template <class F>
struct HasAvx2Form2<F, std::void_t<decltype(F::avx2(std::declval<__m256>(), std::declval<__m256>()))>>
    : std::true_type {};

template <class F>
__attribute__((target("avx2,fma"))) void loop2Vec(const float* __restrict a, const float* __restrict b,
                                                  float* __restrict o, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(o + i, F::avx2(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  const F f{};
  for (; i < n; ++i) o[i] = f(a[i], b[i]);
}
template <class F, int kSide>
__attribute__((target("avx2,fma"))) void loop2SplatVec(const float* __restrict a, float x, float* __restrict o,
                                                       int64_t n) {
  const __m256 v = _mm256_set1_ps(x);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 w = _mm256_loadu_ps(a + i);
    _mm256_storeu_ps(o + i, kSide == 0 ? F::avx2(v, w) : F::avx2(w, v));
  }
  const F f{};
  for (; i < n; ++i) o[i] = kSide == 0 ? f(x, a[i]) : f(a[i], x);
}
#else
#define IPU_DISPATCH(loop, ...) loop##Base<__VA_ARGS__>
#endif
#undef IPU_DEFINE_LOOPS

// One element (a loop's counter, a scalar update: Executor::runLoop's calls) is the functor itself, the same code as
// the loops' last elements in either build.
template <class A, class O, class F>
void block1(const void* const* in, void* out, int64_t n) {
  if (n == 1) {
    *static_cast<O*>(out) = F{}(*static_cast<const A*>(in[0]));
    return;
  }
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if constexpr (std::is_same_v<A, float> && std::is_same_v<O, float> && HasAvx2Form<F>::value) {
    if (hostHasAvx2() && hostHasFma())
      return loop1Vec<F>(static_cast<const float*>(in[0]), static_cast<float*>(out), n);
  }
#endif
  IPU_DISPATCH(loop1, A, O, F)(static_cast<const A*>(in[0]), static_cast<O*>(out), n);
}
template <class A, class B, class O, class F>
void block2(const void* const* in, void* out, int64_t n) {
  if (n == 1) {
    *static_cast<O*>(out) = F{}(*static_cast<const A*>(in[0]), *static_cast<const B*>(in[1]));
    return;
  }
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if constexpr (std::is_same_v<A, float> && std::is_same_v<B, float> && std::is_same_v<O, float> &&
                HasAvx2Form2<F>::value) {
    if (hostHasAvx2() && hostHasFma())
      return loop2Vec<F>(static_cast<const float*>(in[0]), static_cast<const float*>(in[1]), static_cast<float*>(out),
                         n);
  }
#endif
  IPU_DISPATCH(loop2, A, B, O, F)(static_cast<const A*>(in[0]), static_cast<const B*>(in[1]), static_cast<O*>(out), n);
}
// block2 of f32 with operand kSide one element, read for every output element (a scalar, or a row's value under a
// layer norm): the same functor on the same values, so the same bits, without a block filled with the element.
template <class F, int kSide>
void block2SplatF32(const void* const* in, void* out, int64_t n) {
  const float* a = static_cast<const float*>(in[1 - kSide]);
  const float x = *static_cast<const float*>(in[kSide]);
  float* o = static_cast<float*>(out);
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if constexpr (HasAvx2Form2<F>::value) {
    if (hostHasAvx2() && hostHasFma()) return loop2SplatVec<F, kSide>(a, x, o, n);
  }
#endif
  IPU_DISPATCH(loop2Splat, F, kSide)(a, x, o, n);
}
template <class A, class B, class C, class O, class F>
void block3(const void* const* in, void* out, int64_t n) {
  if (n == 1) {
    *static_cast<O*>(out) =
        F{}(*static_cast<const A*>(in[0]), *static_cast<const B*>(in[1]), *static_cast<const C*>(in[2]));
    return;
  }
  IPU_DISPATCH(loop3, A, B, C, O, F)(static_cast<const A*>(in[0]), static_cast<const B*>(in[1]),
                                     static_cast<const C*>(in[2]), static_cast<O*>(out), n);
}

// popops::map with an expression tree: one vertex evaluates a chain of elementwise ops. The program's values are
// its inputs (slots read at the output's element index, or scalars broadcast) followed by the results of its
// instructions; the last instruction's result is the output. Intermediate results live only in block-sized
// registers (a few KB per host thread, in L1), never in a full-size tensor.
class FusedMapKernel : public Kernel {
 public:
  struct Input {
    int slot;
    int bytes;    // element size
    bool scalar;  // one element, broadcast to every output element
    // broadcast_in_dim (a view, as in Poplar): output element i reads the operand at sum_d index_d(i) * strides[d]
    // over the output's shape (stride 0 along broadcast dimensions). Empty: element i itself.
    std::vector<int64_t> shape, strides;
  };
  struct Instr {
    BlockFn fn;
    int args[3];  // value ids; -1: unused
    int bytes;    // result element size
    // fn with operand j one element (block2SplatF32), where the op has that form: used where a block reads that
    // operand as one element (a scalar, a row's value).
    BlockFn splat[2] = {nullptr, nullptr};
  };
  static constexpr int64_t kBlock = 512;

  FusedMapKernel(std::vector<Input> inputs, std::vector<Instr> instrs, int out)
      : inputs_(std::move(inputs)), instrs_(std::move(instrs)), out_(out) {
    for (const Input& in : inputs_) max_bytes_ = std::max(max_bytes_, in.bytes);
    for (const Instr& ins : instrs_) max_bytes_ = std::max(max_bytes_, ins.bytes);
    // Blocks end where the output's rows do when a view reads a run or one element per row (gamma or a row's mean
    // under a layer norm): each block then reads it in place or filled once, not gathered element by element.
    for (const Input& in : inputs_)
      if (!in.strides.empty() && in.shape.back() >= kMinRow && in.strides.back() <= 1) row_ = in.shape.back();
  }

  bool mapReads(std::vector<MapRead>* reads, int* writes) const override {
    reads->clear();
    for (const Input& in : inputs_) {
      const bool view = !in.strides.empty();
      reads->push_back(MapRead{in.slot, in.scalar, view ? &in.shape : nullptr, view ? &in.strides : nullptr});
    }
    *writes = out_;
    return true;
  }

  void compute(RunState& s, int64_t b, int64_t e) const override {
    const size_t ni = inputs_.size(), nk = instrs_.size();
    if (e - b == 1 && ni + nk <= kOneValues) return computeOne(s, b);
    bool any_scalar = false;
    for (const Input& in : inputs_) any_scalar = any_scalar || in.scalar || !in.strides.empty();
    if (nk == 1 && !any_scalar) {  // one op over contiguous operands: no registers needed
      const void* a[3] = {};
      for (int j = 0; j < 3; ++j)
        if (instrs_[0].args[j] >= 0) a[j] = at(s, inputs_[static_cast<size_t>(instrs_[0].args[j])], b);
      instrs_[0].fn(a, s.at<uint8_t>(out_) + b * instrs_[0].bytes, e - b);
      return;
    }
    // Registers: one block per scalar input and per instruction but the last, which writes the output directly.
    const int64_t block = std::min(kBlock, e - b);
    thread_local std::vector<uint64_t> regs;
    const size_t words = (static_cast<size_t>(block) * static_cast<size_t>(max_bytes_) + 7) / 8 + 1;
    if (regs.size() < (ni + nk) * words) regs.resize((ni + nk) * words);
    auto reg = [&](size_t i) { return reinterpret_cast<uint8_t*>(regs.data() + i * words); };
    thread_local std::vector<const void*> val;
    val.assign(ni + nk, nullptr);
    uint8_t* out = s.at<uint8_t>(out_);
    // Per input: the one element a block reads for every output element (a scalar, a row's statistic under a layer
    // norm), or null; and the element a register holds in every one of its first `filled` places, filled where an
    // instruction has no form that reads the element itself (once for the blocks of a row), or null.
    thread_local std::vector<const uint8_t*> one_of;
    one_of.assign(ni, nullptr);
    thread_local std::vector<std::pair<const uint8_t*, int64_t>> splat;
    splat.assign(ni, {nullptr, 0});
    const auto filled = [&](size_t i, int64_t n) -> const void* {
      if (splat[i].first != one_of[i] || splat[i].second < n) {
        fill(reg(i), one_of[i], inputs_[i].bytes, n);
        splat[i] = {one_of[i], n};
      }
      return reg(i);
    };
    for (int64_t p = b, n = 0; p < e; p += n) {
      n = std::min(block, e - p);
      if (row_ > 0) n = std::min(n, row_ - p % row_);
      for (size_t i = 0; i < ni; ++i) {
        const Input& in = inputs_[i];
        const uint8_t* src = s.at<const uint8_t>(in.slot);
        one_of[i] = nullptr;
        if (in.scalar) {
          one_of[i] = src;
        } else if (in.strides.empty()) {
          val[i] = at(s, in, p);
        } else if (const uint8_t* run = contiguousRun(src, in, p, n)) {
          val[i] = run;  // the block reads one run of the operand as it is (a row of gamma under a layer norm)
        } else if (const uint8_t* one = repeatedElement(src, in, p, n)) {
          one_of[i] = one;
        } else {
          gather(src, in, p, n, reg(i));
          splat[i].first = nullptr;
          val[i] = reg(i);
        }
      }
      for (size_t k = 0; k < nk; ++k) {
        const Instr& ins = instrs_[k];
        const void* a[3] = {};
        BlockFn fn = ins.fn;
        // An operand read as one element: the instruction's form for it, where it has one and the other operand is
        // a block; else the element filled into a block.
        int one = -1;
        for (int j = 0; j < 2; ++j) {
          const int v = ins.args[j];
          if (v >= 0 && static_cast<size_t>(v) < ni && one_of[static_cast<size_t>(v)] && ins.splat[j]) one = j;
        }
        const int other = ins.args[1 - std::max(one, 0)];
        if (one >= 0 && ins.args[2] < 0 && other >= 0 &&
            !(static_cast<size_t>(other) < ni && one_of[static_cast<size_t>(other)])) {
          fn = ins.splat[one];
          a[one] = one_of[static_cast<size_t>(ins.args[one])];
          a[1 - one] = val[static_cast<size_t>(other)];
        } else {
          for (int j = 0; j < 3; ++j) {
            const int v = ins.args[j];
            if (v < 0) continue;
            a[j] = static_cast<size_t>(v) < ni && one_of[static_cast<size_t>(v)] ? filled(static_cast<size_t>(v), n)
                                                                                 : val[static_cast<size_t>(v)];
          }
        }
        void* o = k + 1 == nk ? static_cast<void*>(out + p * ins.bytes) : static_cast<void*>(reg(ni + k));
        fn(a, o, n);
        val[ni + k] = o;
      }
    }
  }

 private:
  static constexpr size_t kOneValues = 32;
  static constexpr int64_t kMinRow = 256;  // shorter rows are not worth blocks of their own (a call per block)

  // One output element (a loop's counter, a scalar's update): each value is one element, read in place or held in
  // a register on the stack; the same instructions as the block path, so the same bits.
  void computeOne(RunState& s, int64_t i) const {
    alignas(16) uint64_t regs[kOneValues][2];
    const void* val[kOneValues];
    const size_t ni = inputs_.size();
    forOne(
        s, i, val, [&](size_t k) { return static_cast<void*>(regs[ni + k]); },
        [](BlockFn fn, const void* const* a, void* o) { fn(a, o, 1); });
  }

  // computeOne's calls, with their addresses resolved (prepare() does nothing here).
  bool directCalls(RunState& s, int64_t i, std::vector<DirectCall>* calls, DirectScratch* scratch) const override {
    std::vector<const void*> val(inputs_.size() + instrs_.size());
    forOne(
        s, i, val.data(), [&](size_t) { return static_cast<void*>(scratch->emplace_back().data()); },
        [&](BlockFn fn, const void* const* a, void* o) { calls->push_back(DirectCall{fn, {a[0], a[1], a[2]}, o}); });
    return true;
  }

  // The instructions that compute output element i alone, in order: emit(fn, args, out) for each, where `place(k)`
  // holds instruction k's result (the last one writes the output element). `val`: room for inputs + instructions.
  template <class Place, class Emit>
  void forOne(RunState& s, int64_t i, const void** val, Place&& place, Emit&& emit) const {
    const size_t ni = inputs_.size(), nk = instrs_.size();
    for (size_t j = 0; j < ni; ++j) {
      const Input& in = inputs_[j];
      // A scalar, or a broadcast view's element 0 (i = 0: every index is 0), or element i itself.
      val[j] = in.scalar || !in.strides.empty() ? s.at<const uint8_t>(in.slot) + (in.scalar ? 0 : viewOffset(in, i))
                                                : at(s, in, i);
    }
    uint8_t* out = s.at<uint8_t>(out_);
    for (size_t k = 0; k < nk; ++k) {
      const Instr& ins = instrs_[k];
      const void* a[3] = {};
      for (int j = 0; j < 3; ++j)
        if (ins.args[j] >= 0) a[j] = val[static_cast<size_t>(ins.args[j])];
      void* o = k + 1 == nk ? static_cast<void*>(out + i * ins.bytes) : place(k);
      emit(ins.fn, a, o);
      val[ni + k] = o;
    }
  }

  // The byte offset of output element i's operand element in a broadcast view.
  static int64_t viewOffset(const Input& in, int64_t i) {
    int64_t off = 0;
    for (size_t d = in.shape.size(); d-- > 0;) {
      off += (i % in.shape[d]) * in.strides[d];
      i /= in.shape[d];
    }
    return off * in.bytes;
  }

  static const void* at(const RunState& s, const Input& in, int64_t i) {
    return s.at<const uint8_t>(in.slot) + i * in.bytes;
  }

  // dst[0, n) = the one element at v / every stride-th element from a, for elements of 1, 2, 4 or 8 bytes.
  template <class T>
  static void fillT(uint8_t* dst, const uint8_t* v, int64_t n) {
    T x;
    std::memcpy(&x, v, sizeof(T));
    T* __restrict o = reinterpret_cast<T*>(dst);
    IPU_BLOCK_LOOP(n, o[i] = x);  // (std::fill stays a loop of scalar stores at g++ -O2: a row of a broadcast each)
  }
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  // 32 bytes a store where the host has AVX2 (the baseline build's loop stores 16): a scalar operand is filled once
  // per call, a row's value once per row.
  __attribute__((target("avx2"))) static void fill32Avx2(uint8_t* dst, const uint8_t* v, int64_t n) {
    uint32_t x;
    std::memcpy(&x, v, sizeof(x));
    const __m256i w = _mm256_set1_epi32(static_cast<int>(x));
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 4 * i), w);
    for (; i < n; ++i) std::memcpy(dst + 4 * i, &x, sizeof(x));
  }
#endif
  static void fill(uint8_t* dst, const uint8_t* v, int bytes, int64_t n) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (bytes == 4 && hostHasAvx2()) return fill32Avx2(dst, v, n);
#endif
    if (bytes == 8) fillT<uint64_t>(dst, v, n);
    else if (bytes == 4) fillT<uint32_t>(dst, v, n);
    else if (bytes == 2) fillT<uint16_t>(dst, v, n);
    else fillT<uint8_t>(dst, v, n);
  }
  template <class T>
  static void stridedT(uint8_t* dst, const uint8_t* a, int64_t stride, int64_t n) {
    T* o = reinterpret_cast<T*>(dst);
    for (int64_t j = 0; j < n; ++j) std::memcpy(o + j, a + static_cast<size_t>(j * stride) * sizeof(T), sizeof(T));
  }
  static void strided(uint8_t* dst, const uint8_t* a, int bytes, int64_t stride, int64_t n) {
    if (bytes == 8) stridedT<uint64_t>(dst, a, stride, n);
    else if (bytes == 4) stridedT<uint32_t>(dst, a, stride, n);
    else if (bytes == 2) stridedT<uint16_t>(dst, a, stride, n);
    else stridedT<uint8_t>(dst, a, stride, n);
  }

  // Where output elements [p, p + n) of a broadcast view are n consecutive elements of the operand (within one run
  // of a contiguous innermost dimension): their address, else null.
  static const uint8_t* contiguousRun(const uint8_t* src, const Input& in, int64_t p, int64_t n) {
    const size_t r = in.shape.size();
    if (r == 0 || in.strides[r - 1] != 1 || p % in.shape[r - 1] + n > in.shape[r - 1]) return nullptr;
    return src + viewOffset(in, p);  // bytes
  }

  // Where output elements [p, p + n) of a broadcast view all read one element of the operand (within one run of an
  // innermost dimension of stride 0: a row's mean under a layer norm): its address, else null.
  static const uint8_t* repeatedElement(const uint8_t* src, const Input& in, int64_t p, int64_t n) {
    const size_t r = in.shape.size();
    if (r == 0 || in.strides[r - 1] != 0 || p % in.shape[r - 1] + n > in.shape[r - 1]) return nullptr;
    return src + viewOffset(in, p);  // bytes
  }

  // Output elements [p, p + n) of a broadcast view into dst, a run of the innermost dimension at a time.
  static void gather(const uint8_t* src, const Input& in, int64_t p, int64_t n, uint8_t* dst) {
    const size_t r = in.shape.size();
    const size_t eb = static_cast<size_t>(in.bytes);
    int64_t small[8] = {};  // the index of element p (on the stack for the ranks programs have)
    std::vector<int64_t> large(r > 8 ? r : 0, 0);
    int64_t* ix = r > 8 ? large.data() : small;
    int64_t off = 0, rem = p;
    for (size_t d = r; d-- > 0;) {
      ix[d] = rem % in.shape[d];
      rem /= in.shape[d];
      off += ix[d] * in.strides[d];
    }
    const int64_t inner = in.shape[r - 1], stride = in.strides[r - 1];
    for (int64_t k = 0; k < n;) {
      const int64_t run = std::min(inner - ix[r - 1], n - k);
      uint8_t* o = dst + static_cast<size_t>(k) * eb;
      const uint8_t* a = src + static_cast<size_t>(off) * eb;
      if (stride == 1) std::memcpy(o, a, static_cast<size_t>(run) * eb);
      else if (stride == 0) fill(o, a, in.bytes, run);
      else strided(o, a, in.bytes, stride, run);
      k += run;
      off += (run - 1) * stride;  // now at the run's last element: step to the next index
      ix[r - 1] += run - 1;
      for (size_t d = r; d-- > 0;) {
        off += in.strides[d];
        if (++ix[d] < in.shape[d]) break;
        off -= in.strides[d] * in.shape[d];
        ix[d] = 0;
      }
    }
  }

  std::vector<Input> inputs_;
  std::vector<Instr> instrs_;
  int out_;
  int max_bytes_ = 4;  // the widest element of a register (8: an f64, i64 or u64 value)
  int64_t row_ = 0;     // the output's rows, where blocks end (0: blocks of kBlock)
};

}  // namespace ipu
