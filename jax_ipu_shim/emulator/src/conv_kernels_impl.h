// conv_kernels_float.cc's and conv_kernels_int.cc's templates: the kernel of a convolution (conv_kernels.h).
#ifndef JAX_IPU_EMULATOR_SRC_CONV_KERNELS_IMPL_H_
#define JAX_IPU_EMULATOR_SRC_CONV_KERNELS_IMPL_H_

#include <algorithm>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "conv_kernels.h"
#include "ipu/matmul.h"

namespace ipu {
namespace conv_kernels {

// Per spatial dim d: for output position o and window position k, the input index read, or -1 (padding, a hole of
// the lhs dilation, or outside the input).
inline std::vector<std::vector<int64_t>> windowTables(const ConvGeom& g) {
  std::vector<std::vector<int64_t>> t(static_cast<size_t>(g.rank));
  for (size_t d = 0; d < t.size(); ++d) {
    const int64_t O = g.out_size[d], Kd = g.k_size[d];
    t[d].assign(static_cast<size_t>(O * Kd), -1);
    for (int64_t o = 0; o < O; ++o)
      for (int64_t k = 0; k < Kd; ++k) {
        const int64_t q = o * g.stride[d] + k * g.rhs_dil[d] - g.pad_lo[d];
        if (q < 0 || q >= g.dilated[d] || q % g.lhs_dil[d] != 0) continue;
        t[d][static_cast<size_t>(o * Kd + k)] = q / g.lhs_dil[d];
      }
  }
  return t;
}

template <class Acc>
void gemmConv(const Acc* A, const Acc* B, Acc* C, int64_t m, int64_t n, int64_t k) {
  if constexpr (std::is_same<Acc, float>::value) {
    hostGemmF32(A, k, B, n, C, n, m, n, k);
  } else {
    for (int64_t i = 0; i < m; ++i) {
      Acc* c = C + i * n;
      std::fill(c, c + n, Acc(0));
      for (int64_t kk = 0; kk < k; ++kk) {
        const Acc x = A[i * k + kk];
        if (x == 0) continue;
        const Acc* b = B + kk * n;
        if constexpr (std::is_same<Acc, uint8_t>::value) {
          for (int64_t j = 0; j < n; ++j) c[j] = static_cast<uint8_t>(c[j] | b[j]);
        } else {
          for (int64_t j = 0; j < n; ++j) c[j] += x * b[j];
        }
      }
    }
  }
}

// The part of a convolution's kernel that depends on the accumulator type alone: the window tables, the im2col of
// an input already in that type, the GEMMs into the partials. (ConvKernel adds the element types of the operands
// and the result, so that this, the heavy part, is compiled once per accumulator type.)
template <class Acc>
class ConvCore : public Kernel {
 protected:
  ConvCore(int lhs, int rhs, int out, ConvGeom g, int64_t kparts, int64_t kblock, int64_t plan_blocks, int scratch_w,
           int scratch_p, int scratch_x)
      : lhs_(lhs), rhs_(rhs), out_(out), g_(std::move(g)), kparts_(kparts), kblock_(kblock), plan_blocks_(plan_blocks),
        scratch_w_(scratch_w), scratch_p_(scratch_p), scratch_x_(scratch_x), tables_(windowTables(g_)),
        order_(columnOrder(g_, kblock_)) {
    const int64_t ks = std::max<int64_t>(1, g_.k_spatial);
    // Per window position (row-major over the window), its index along each spatial dim.
    window_index_.resize(static_cast<size_t>(g_.k_spatial * g_.rank));
    for (int64_t kf = 0; kf < g_.k_spatial; ++kf)
      for (int64_t d = g_.rank, rest = kf; d-- > 0;) {
        window_index_[static_cast<size_t>(kf * g_.rank + d)] = rest % g_.k_size[static_cast<size_t>(d)];
        rest /= g_.k_size[static_cast<size_t>(d)];
      }
    // Runs of columns that read consecutive features at one window position, none across a K block (what a row's
    // im2col copies at once: with features innermost, a contiguous piece of the input). Column c holds feature
    // order_[c] / ks (its offset in the input: times is_f) at window position order_[c] % ks.
    for (size_t c = 0; c < order_.size(); ++c) {
      const int64_t position = order_[c] % ks, feature = order_[c] / ks * g_.is_f;
      const bool boundary = kblock_ > 0 && static_cast<int64_t>(c) % kblock_ == 0;
      if (c == 0 || boundary || position != runs_.back().position ||
          feature != runs_.back().feature + runs_.back().len * g_.is_f)
        runs_.push_back({static_cast<int64_t>(c), 0, position, feature});
      ++runs_.back().len;
    }
  }

  // The columns of K in the order the partials add them. K is (input feature, window position), and the plan's K
  // blocks are ranges of it (each partial a share of the input features, as poplibs splits a convolution's input
  // channels over tiles); within a block the products are added window position by window position, each
  // position's features in a run, as the IPU's convolution vertices accumulate (each kernel position's input
  // channels through the AMP) and as XLA:CPU's does (Eigen's patches, channels innermost): order[k0 + q] is the
  // (feature * k_spatial + position) of the block's q-th column.
  static std::vector<int64_t> columnOrder(const ConvGeom& g, int64_t kblock) {
    const int64_t K = g.K(), ks = std::max<int64_t>(1, g.k_spatial);
    std::vector<int64_t> order(static_cast<size_t>(K));
    for (int64_t k0 = 0; k0 < K; k0 += std::max<int64_t>(1, kblock)) {
      const int64_t k1 = std::min(K, k0 + std::max<int64_t>(1, kblock));
      int64_t q = k0;
      for (int64_t kf = 0; kf < ks; ++kf)
        for (int64_t ci = k0 / ks; ci * ks + kf < k1; ++ci)
          if (ci * ks + kf >= k0) order[static_cast<size_t>(q++)] = ci * ks + kf;
    }
    return order;
  }

  static constexpr int64_t kHostRows = 96;
  int64_t hostRowBlocks() const { return std::max<int64_t>(1, ceilDiv(g_.M(), kHostRows)); }
  // Whether each host block sums its own K partials (pK > 1 and enough blocks to share among the host threads),
  // leaving the sum in the first partial's place; else each (partial, block) is an item of its own and the last
  // superstep sums them. Either way in k order, as the IPU's reduction superstep adds the tiles' partials.
  bool sumsInBlocks() const { return kparts_ > 1 && g_.groups * hostRowBlocks() >= kHostBlocksToShare; }
  int64_t partialPlanes() const { return sumsInBlocks() ? 1 : kparts_; }

  // Host items: (k part, group, 96-row block), or (group, 96-row block) where blocks sum their own partials; the
  // plan's tiles [p0, p1) stand for the same fraction of them.
  void blocks(RunState& s, const Acc* x, int64_t p0, int64_t p1) const {
    const int64_t M = g_.M(), N = g_.cog, K = g_.K();
    const int64_t hm = hostRowBlocks();
    const bool in_blocks = sumsInBlocks();
    const int64_t items = partialPlanes() * g_.groups * hm;
    const int64_t i0 = p0 * items / plan_blocks_, i1 = p1 * items / plan_blocks_;
    const Acc* w = reinterpret_cast<const Acc*>(s.scratch[static_cast<size_t>(scratch_w_)].data());
    Acc* part = reinterpret_cast<Acc*>(s.scratch[static_cast<size_t>(scratch_p_)].data());
    std::vector<Acc> a, partial(in_blocks && i1 > i0 ? static_cast<size_t>(kHostRows * N) : 0);
    std::vector<int64_t> os(static_cast<size_t>(g_.rank));
    for (int64_t it = i0; it < i1; ++it) {
      const int64_t im = it % hm, gi = (it / hm) % g_.groups;
      const int64_t m0 = im * kHostRows, mb = std::min(M, m0 + kHostRows) - m0;
      if (mb <= 0) continue;
      const int64_t first = in_blocks ? 0 : it / hm / g_.groups, last = in_blocks ? kparts_ : first + 1;
      for (int64_t ik = first; ik < last; ++ik) {
        Acc* sum = part + (gi * M + m0) * N;
        Acc* c = !in_blocks ? part + ((ik * g_.groups + gi) * M + m0) * N : ik == 0 ? sum : partial.data();
        im2colGemm(x, w, c, gi, m0, mb, ik, os, a);
        if (in_blocks) addPartial(sum, c, mb * N, ik == 0, g_.half_partials);
      }
    }
  }

  // One host block's product over the K block ik: its rows' im2col, then the GEMM into c (rows of N).
  void im2colGemm(const Acc* x, const Acc* w, Acc* c, int64_t gi, int64_t m0, int64_t mb, int64_t ik,
                  std::vector<int64_t>& os, std::vector<Acc>& a) const {
    const int64_t N = g_.cog, K = g_.K();
    const int64_t k0 = std::min(K, ik * kblock_), kb = std::min(K, k0 + kblock_) - k0;
    a.resize(static_cast<size_t>(mb * std::max<int64_t>(kb, 1)));  // every element is written below
    // The runs of the block's columns, and what the loop over them reads, in locals the stores below cannot alias.
    const auto before = [](const ColumnRun& run, int64_t col) { return run.col < col; };
    const auto run_at = [&](int64_t col) {
      return runs_.data() + (std::lower_bound(runs_.begin(), runs_.end(), col, before) - runs_.begin());
    };
    const ColumnRun *first_run = run_at(k0), *last_run = run_at(k0 + kb);
    const int64_t is_f = g_.is_f, rank = g_.rank;
    const int64_t* is_s = g_.is_s.data();
    std::vector<const int64_t*> row_tables(static_cast<size_t>(rank));
    const bool every_position = g_.k_spatial <= 2 * (last_run - first_run);
    std::vector<int64_t> offs(every_position ? static_cast<size_t>(std::max<int64_t>(1, g_.k_spatial)) : 0);
    const int64_t fbase = g_.fgc > 1 ? gi * g_.cig : 0;
    const int64_t bbase = g_.bgc > 1 ? gi * g_.out_batch : 0;
    for (int64_t r = 0; r < mb; ++r) {
      const int64_t row = m0 + r, n = row / g_.out_spatial;
      int64_t rem = row % g_.out_spatial;
      for (int64_t d = g_.rank; d-- > 0;) {
        os[static_cast<size_t>(d)] = rem % g_.out_size[static_cast<size_t>(d)];
        rem /= g_.out_size[static_cast<size_t>(d)];
      }
      // Per dim, the input index each window position of this row reads (or -1): its row of the dim's table.
      for (int64_t d = 0; d < rank; ++d) {
        const size_t du = static_cast<size_t>(d);
        row_tables[du] = tables_[du].data() + os[du] * g_.k_size[du];
      }
      // Where the block's runs cover the window positions (a forward convolution's few), or half of them, the
      // offset of each position once, built a dim at a time (each position's offset so far, times the next dim's
      // positions); else (a weight gradient's window, the whole image, of which a K block holds a few positions) per
      // run.
      if (every_position) {
        offs[0] = 0;
        for (int64_t d = 0, positions = 1; d < rank; positions *= g_.k_size[static_cast<size_t>(d)], ++d) {
          const int64_t kd = g_.k_size[static_cast<size_t>(d)];
          const int64_t* table = row_tables[static_cast<size_t>(d)];
          for (int64_t q = positions; q-- > 0;) {
            const int64_t prefix = offs[static_cast<size_t>(q)];
            for (int64_t k = kd; k-- > 0;)
              offs[static_cast<size_t>(q * kd + k)] = prefix < 0 || table[k] < 0 ? -1 : prefix + table[k] * is_s[d];
          }
        }
      }
      const int64_t base = (bbase + n) * g_.is_b + fbase * g_.is_f;
      // Columns k0.. of the row, in order_'s order, a run at a time; a position in the padding reads zero. (Loops
      // of their own: most runs are a few features long, shorter than a library copy's call.)
      Acc* arow = a.data() + r * kb;
      for (const ColumnRun* run = first_run; run != last_run; ++run) {
        Acc* __restrict dst = arow + (run->col - k0);
        // The run's window position's offset in the input, or -1 (padding, a hole of the lhs dilation, outside)
        int64_t off = 0;
        if (every_position) {
          off = offs[static_cast<size_t>(run->position)];
        } else {
          const int64_t* at = window_index_.data() + run->position * rank;
          for (int64_t d = 0; d < rank && off >= 0; ++d) {
            const int64_t i = row_tables[static_cast<size_t>(d)][at[d]];
            off = i < 0 ? -1 : off + i * is_s[d];
          }
        }
        const int64_t len = run->len;
        if (off < 0) {
          for (int64_t j = 0; j < len; ++j) dst[j] = Acc(0);
        } else {
          const Acc* __restrict src = x + base + run->feature + off;
          if (is_f == 1)
            for (int64_t j = 0; j < len; ++j) dst[j] = src[j];
          else
            for (int64_t j = 0; j < len; ++j) dst[j] = src[j * is_f];
        }
      }
    }
    gemmConv(a.data(), w + (gi * K + k0) * N, c, mb, N, kb);
  }

  int lhs_, rhs_, out_;
  ConvGeom g_;
  int64_t kparts_, kblock_, plan_blocks_;
  int scratch_w_, scratch_p_, scratch_x_;
  std::vector<std::vector<int64_t>> tables_;
  std::vector<int64_t> order_;
  std::vector<int64_t> window_index_;  // [window position][spatial dim]: the position's index along the dim
  struct ColumnRun {
    int64_t col, len, position, feature;  // columns [col, col + len): window position, the first one's feature offset
  };
  std::vector<ColumnRun> runs_;
};

template <class In, class Acc, class Out>
class ConvKernel : public ConvCore<Acc> {
  using Base = ConvCore<Acc>;
  using Base::g_, Base::kparts_, Base::lhs_, Base::out_, Base::rhs_, Base::scratch_p_, Base::scratch_w_,
      Base::scratch_x_;

 public:
  template <class... A>
  explicit ConvKernel(A&&... a) : Base(std::forward<A>(a)...) {}

  // The kernel as [groups][K][N] in the accumulator type (window reversal applied; K in order_'s order, as the
  // columns of blocks()), and room for the partials.
  void prepare(RunState& s) const override {
    const int64_t K = g_.K(), N = g_.cog;
    std::vector<uint8_t>& wb = s.scratch[static_cast<size_t>(scratch_w_)];
    wb.resize(static_cast<size_t>(g_.groups * K * N) * sizeof(Acc));
    Acc* w = reinterpret_cast<Acc*>(wb.data());
    const In* src = s.at<const In>(rhs_);
    std::vector<int64_t> offsets(static_cast<size_t>(g_.k_spatial));  // of each window position in the kernel
    for (int64_t kf = 0; kf < g_.k_spatial; ++kf) {
      int64_t off = 0, rem = kf;
      for (int64_t d = g_.rank; d-- > 0;) {
        const size_t du = static_cast<size_t>(d);
        int64_t k = rem % g_.k_size[du];
        rem /= g_.k_size[du];
        if (g_.reverse[du]) k = g_.k_size[du] - 1 - k;
        off += k * g_.ks_s[du];
      }
      offsets[static_cast<size_t>(kf)] = off;
    }
    for (int64_t q = 0; q < K; ++q) {  // column q holds feature ci at window position kf (order_)
      const int64_t ci = this->order_[static_cast<size_t>(q)] / g_.k_spatial;
      const int64_t off = offsets[static_cast<size_t>(this->order_[static_cast<size_t>(q)] % g_.k_spatial)];
      for (int64_t gi = 0; gi < g_.groups; ++gi)
        for (int64_t j = 0; j < N; ++j)
          w[(gi * K + q) * N + j] = toAcc(src[off + ci * g_.ks_i + (gi * N + j) * g_.ks_o], static_cast<Acc*>(nullptr));
    }
    if constexpr (!std::is_same<In, Acc>::value) {  // the input in the accumulator type, converted once
      const In* x = s.at<const In>(lhs_);
      std::vector<uint8_t>& xb = s.scratch[static_cast<size_t>(scratch_x_)];
      xb.resize(static_cast<size_t>(g_.in_elements) * sizeof(Acc));
      Acc* xa = reinterpret_cast<Acc*>(xb.data());
      forRanges(s, g_.in_elements, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) xa[i] = toAcc(x[i], static_cast<Acc*>(nullptr));
      });
    }
    std::vector<uint8_t>& pb = s.scratch[static_cast<size_t>(scratch_p_)];
    const size_t bytes = static_cast<size_t>(this->partialPlanes() * g_.groups * g_.M() * N) * sizeof(Acc);
    if (pb.size() < bytes) pb.resize(bytes);
  }

  void compute(RunState& s, int64_t b, int64_t e) const override { computeStep(s, 0, b, e); }

  void computeStep(RunState& s, size_t step, int64_t b, int64_t e) const override {
    if (step == 0) {
      const Acc* x = std::is_same<In, Acc>::value
                         ? s.at<const Acc>(lhs_)
                         : reinterpret_cast<const Acc*>(s.scratch[static_cast<size_t>(scratch_x_)].data());
      this->blocks(s, x, b, e);
    } else {
      reduce(s, b, e);
    }
  }

 private:
  // Output elements [b, e) in the output's layout: the sum of their pK partials, converted once.
  void reduce(RunState& s, int64_t b, int64_t e) const {
    const int64_t M = g_.M(), N = g_.cog, plane = g_.groups * M * N;
    const Acc* part = reinterpret_cast<const Acc*>(s.scratch[static_cast<size_t>(scratch_p_)].data());
    Out* out = s.at<Out>(out_);
    // Where the host blocks summed their partials the sum is in the first partial's place, each partial rounded
    // already (partialsType half: what a tile keeps and sends is its partial rounded to f16).
    const bool summed = this->sumsInBlocks(), half = g_.half_partials && !summed;
    const int64_t kparts = summed ? 1 : kparts_;
    auto sum = [&](int64_t i, int64_t idx) {
      const auto partial = [&](int64_t at) {
        if constexpr (std::is_same<Acc, float>::value) return half ? roundF16(part[at]) : part[at];
        else return part[at];
      };
      Acc acc = partial(idx);
      for (int64_t kp = 1; kp < kparts; ++kp) {
        if constexpr (std::is_same<Acc, uint8_t>::value) acc = static_cast<uint8_t>(acc | part[kp * plane + idx]);
        else acc += partial(kp * plane + idx);
      }
      // XLA:CPU's convolution (Eigen's contraction) adds each product to a sum that starts at +0, so products that
      // are all -0 sum to +0; the gemm here starts from the first product.
      if constexpr (std::is_floating_point<Acc>::value) acc += Acc(0);
      out[i] = fromAcc<Out>(acc);
    };
    if (g_.groups == 1 && b < e) {
      // One group: the partial's index is linear in the output coordinates, so walk them with an odometer over the
      // output's dims (outermost first) instead of dividing per element.
      struct Dim {
        int64_t stride, extent, coeff;
      };
      std::vector<Dim> dims{{g_.os_b, g_.out_batch, g_.out_spatial * N}, {g_.os_f, N, 1}};
      for (int64_t d = 0, c = N * g_.out_spatial; d < g_.rank; ++d) {
        const size_t du = static_cast<size_t>(d);
        c /= std::max<int64_t>(1, g_.out_size[du]);
        dims.push_back({g_.os_s[du], g_.out_size[du], c});
      }
      std::stable_sort(dims.begin(), dims.end(), [](const Dim& x, const Dim& y) { return x.stride > y.stride; });
      if (std::all_of(dims.begin(), dims.end(), [](const Dim& d) { return d.stride == d.coeff; })) {
        // The output in the partials' own order ([batch, spatial, feature]); one partial (or their sum) a loop the
        // compiler can vectorise.
        if (kparts == 1 && !half) {
          for (int64_t i = b; i < e; ++i) {
            Acc acc = part[i];
            if constexpr (std::is_floating_point<Acc>::value) acc += Acc(0);  // as sum() below
            out[i] = fromAcc<Out>(acc);
          }
        } else {
          for (int64_t i = b; i < e; ++i) sum(i, i);
        }
        return;
      }
      std::vector<int64_t> at(dims.size());
      int64_t idx = 0;
      for (size_t d = 0; d < dims.size(); ++d) {
        at[d] = (b / dims[d].stride) % dims[d].extent;
        idx += at[d] * dims[d].coeff;
      }
      for (int64_t i = b; i < e; ++i) {
        sum(i, idx);
        for (size_t d = dims.size(); d-- > 0;) {
          idx += dims[d].coeff;
          if (++at[d] < dims[d].extent) break;
          idx -= dims[d].extent * dims[d].coeff;
          at[d] = 0;
        }
      }
      return;
    }
    for (int64_t i = b; i < e; ++i) {
      int64_t n = (i / g_.os_b) % g_.out_batch, o = (i / g_.os_f) % (g_.groups * N), srow = 0;
      for (int64_t d = 0; d < g_.rank; ++d) {
        const size_t du = static_cast<size_t>(d);
        srow = srow * g_.out_size[du] + (i / g_.os_s[du]) % g_.out_size[du];
      }
      const int64_t gi = o / N, j = o % N;
      sum(i, (gi * M + n * g_.out_spatial + srow) * N + j);
    }
  }
};

// convKernel for the element types `in` for which Want<its C++ type> holds, else null.
template <template <class> class Want>
std::unique_ptr<Kernel> convKernelOf(DType in, DType out, int lhs, int rhs, int out_slot, const ConvGeom& g,
                                     int64_t kparts, int64_t kblock, int64_t plan_blocks, int scratch_w, int scratch_p,
                                     int scratch_x) {
  std::unique_ptr<Kernel> kernel;
  visitMatmulTypes(in, out, [&](auto i, auto a, auto r) {
    using In = typename decltype(i)::type;
    if constexpr (Want<typename decltype(a)::type>::value) {
      using K = ConvKernel<In, typename decltype(a)::type, typename decltype(r)::type>;
      kernel = std::make_unique<K>(lhs, rhs, out_slot, g, kparts, kblock, plan_blocks, scratch_w, scratch_p, scratch_x);
    }
  });
  return kernel;
}

}  // namespace conv_kernels
}  // namespace ipu

#endif  // JAX_IPU_EMULATOR_SRC_CONV_KERNELS_IMPL_H_
