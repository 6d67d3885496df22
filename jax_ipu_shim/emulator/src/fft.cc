// stablehlo.fft (FFT, IFFT, RFFT, IRFFT over the 1 to 3 innermost dimensions; any lengths).
//
// Placement, as a Poplar user maps a batch of transforms: the batch (the leading dimensions) is spread over the
// tiles, whole transforms per tile, so a transform needs no exchange beyond bringing its operand to its tile; the
// result stays where it was computed. A transform is computed in double (twiddles too) and rounded to f32 once (c64;
// c128, jax_enable_x64's, keeps the double):
// iterative radix-2 for power-of-two lengths, Bluestein's chirp-z (three power-of-two transforms of m >= 2n-1) for
// every other length. IFFT and IRFFT scale by 1/N (XLA's convention). A transform too big for a quarter of a tile's
// memory is not split across tiles (no four-step FFT): it still runs on one tile, which the memory report then shows
// as over budget.
// Cost: 5 N log2 N flops per complex transform of N points (2.5 N log2 N for the real ones), at the f32 vector
// rate (c128: the emulated f64 multiply's); Bluestein charges its three transforms of m points and 3m complex
// products.
#include <cmath>
#include <complex>
#include <vector>

#include "ipu/cost_model.h"
#include "ipu/dtype.h"
#include "ipu/handlers.h"
#include "ipu/lowering.h"

namespace ipu {

namespace {

using cd = std::complex<double>;
enum class FftType { FFT, IFFT, RFFT, IRFFT };

bool isPow2(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

// In-place radix-2 decimation in time; sign -1 forward, +1 inverse (unscaled).
void radix2(std::vector<cd>& a, int sign) {
  const size_t n = a.size();
  for (size_t i = 1, j = 0; i < n; ++i) {
    size_t bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) std::swap(a[i], a[j]);
  }
  for (size_t len = 2; len <= n; len <<= 1) {
    const double ang = sign * 2.0 * M_PI / static_cast<double>(len);
    for (size_t k = 0; k < len / 2; ++k) {
      const cd w(std::cos(ang * static_cast<double>(k)), std::sin(ang * static_cast<double>(k)));
      for (size_t i = 0; i < n; i += len) {
        const cd u = a[i + k], v = a[i + k + len / 2] * w;
        a[i + k] = u + v;
        a[i + k + len / 2] = u - v;
      }
    }
  }
}

// Any length: radix-2 or Bluestein. Unscaled.
void dft(std::vector<cd>& a, int sign) {
  const int64_t n = static_cast<int64_t>(a.size());
  if (n <= 1) return;
  if (isPow2(n)) return radix2(a, sign);
  int64_t m = 1;
  while (m < 2 * n - 1) m <<= 1;
  // chirp w_k = exp(sign i pi k^2 / n), k^2 taken mod 2n so that the angle stays small and exact
  std::vector<cd> w(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    const int64_t k2 = (k * k) % (2 * n);
    const double ang = sign * M_PI * static_cast<double>(k2) / static_cast<double>(n);
    w[static_cast<size_t>(k)] = cd(std::cos(ang), std::sin(ang));
  }
  std::vector<cd> x(static_cast<size_t>(m)), y(static_cast<size_t>(m));
  for (int64_t k = 0; k < n; ++k) x[static_cast<size_t>(k)] = a[static_cast<size_t>(k)] * w[static_cast<size_t>(k)];
  y[0] = std::conj(w[0]);
  for (int64_t k = 1; k < n; ++k)
    y[static_cast<size_t>(k)] = y[static_cast<size_t>(m - k)] = std::conj(w[static_cast<size_t>(k)]);
  radix2(x, -1);
  radix2(y, -1);
  for (int64_t k = 0; k < m; ++k) x[static_cast<size_t>(k)] *= y[static_cast<size_t>(k)];
  radix2(x, 1);
  for (int64_t k = 0; k < n; ++k)
    a[static_cast<size_t>(k)] = x[static_cast<size_t>(k)] * w[static_cast<size_t>(k)] / static_cast<double>(m);
}

// Transforms `data` (row-major, shape `dims`) along every axis in place.
void dftAxes(std::vector<cd>& data, const std::vector<int64_t>& dims, int sign, size_t first_axis, size_t end_axis) {
  std::vector<cd> line;
  for (size_t ax = first_axis; ax < end_axis; ++ax) {
    int64_t inner = 1;
    for (size_t d = ax + 1; d < dims.size(); ++d) inner *= dims[d];
    const int64_t n = dims[ax], outer = static_cast<int64_t>(data.size()) / std::max<int64_t>(1, n * inner);
    line.resize(static_cast<size_t>(n));
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t base = o * n * inner + i;
        for (int64_t k = 0; k < n; ++k) line[static_cast<size_t>(k)] = data[static_cast<size_t>(base + k * inner)];
        dft(line, sign);
        for (int64_t k = 0; k < n; ++k) data[static_cast<size_t>(base + k * inner)] = line[static_cast<size_t>(k)];
      }
  }
}

// C, R: the complex and real element types (Complex64 and float, or Complex128 and double).
template <class C, class R>
class FftKernel : public Kernel {
 public:
  FftKernel(int in, int out, FftType type, std::vector<int64_t> lengths)
      : in_(in), out_(out), type_(type), len_(std::move(lengths)) {
    n_ = 1;
    for (int64_t l : len_) n_ *= l;
    half_ = len_.back() / 2 + 1;
    const int64_t spectrum = len_.back() ? n_ / len_.back() * half_ : 0;  // elements of a half spectrum
    in_per_ = type_ == FftType::IRFFT ? spectrum : n_;
    out_per_ = type_ == FftType::RFFT ? spectrum : n_;
  }

  // [b, e): transforms (batch entries).
  void compute(RunState& s, int64_t b, int64_t e) const override {
    std::vector<cd> data(static_cast<size_t>(n_));
    const size_t r = len_.size();
    for (int64_t t = b; t < e; ++t) {
      if (type_ == FftType::FFT || type_ == FftType::IFFT) {
        const C* x = s.at<const C>(in_) + t * in_per_;
        for (int64_t i = 0; i < n_; ++i) data[static_cast<size_t>(i)] = cd(x[i].re, x[i].im);
        dftAxes(data, len_, type_ == FftType::FFT ? -1 : 1, 0, r);
        C* y = s.at<C>(out_) + t * out_per_;
        const double scale = type_ == FftType::IFFT ? 1.0 / static_cast<double>(n_) : 1.0;
        for (int64_t i = 0; i < n_; ++i)
          y[i] = {static_cast<R>(data[static_cast<size_t>(i)].real() * scale),
                  static_cast<R>(data[static_cast<size_t>(i)].imag() * scale)};
      } else if (type_ == FftType::RFFT) {
        const R* x = s.at<const R>(in_) + t * in_per_;
        for (int64_t i = 0; i < n_; ++i) data[static_cast<size_t>(i)] = cd(x[i], 0.0);
        dftAxes(data, len_, -1, 0, r);
        // keep the first len/2+1 entries of the innermost axis (the rest is their conjugate mirror)
        C* y = s.at<C>(out_) + t * out_per_;
        const int64_t last = len_.back();
        for (int64_t row = 0; row < n_ / last; ++row)
          for (int64_t k = 0; k < half_; ++k) {
            const cd v = data[static_cast<size_t>(row * last + k)];
            y[row * half_ + k] = {static_cast<R>(v.real()), static_cast<R>(v.imag())};
          }
      } else {  // IRFFT: inverse over the outer axes on the half spectrum, then Hermitian-extend the innermost axis
        const C* x = s.at<const C>(in_) + t * in_per_;
        const int64_t last = len_.back(), rows = n_ / last;
        std::vector<int64_t> hdims = len_;
        hdims.back() = half_;
        std::vector<cd> h(static_cast<size_t>(rows * half_));
        for (int64_t i = 0; i < rows * half_; ++i) h[static_cast<size_t>(i)] = cd(x[i].re, x[i].im);
        dftAxes(h, hdims, 1, 0, r - 1);
        std::vector<cd> line(static_cast<size_t>(last));
        R* y = s.at<R>(out_) + t * out_per_;
        const double scale = 1.0 / static_cast<double>(n_);
        for (int64_t row = 0; row < rows; ++row) {
          for (int64_t k = 0; k < last; ++k)
            line[static_cast<size_t>(k)] = k < half_ ? h[static_cast<size_t>(row * half_ + k)]
                                                     : std::conj(h[static_cast<size_t>(row * half_ + last - k)]);
          dft(line, 1);
          for (int64_t k = 0; k < last; ++k)
            y[row * last + k] = static_cast<R>(line[static_cast<size_t>(k)].real() * scale);
        }
      }
    }
  }

 private:
  int in_, out_;
  FftType type_;
  std::vector<int64_t> len_;
  int64_t n_ = 1, half_ = 1, in_per_ = 1, out_per_ = 1;
};

// f32 flops of one complex transform of n points: 5 n log2 n (radix-2), or Bluestein's 3 transforms of m plus
// 3m complex products (6 flops each).
double transformFlops(int64_t n) {
  if (n <= 1) return 0;
  if (isPow2(n)) return 5.0 * static_cast<double>(n) * std::log2(static_cast<double>(n));
  int64_t m = 1;
  while (m < 2 * n - 1) m <<= 1;
  return 3 * transformFlops(m) + 18.0 * static_cast<double>(m);
}

}  // namespace

std::vector<int> lowerFft(Lowerer& lowerer, OpContext& ctx) {
  const TensorType& in = ctx.in_types[0];
  if (ctx.out_types.size() != 1) lowerer.invalid(ctx, "fft has one result");
  const TensorType& out = ctx.out_types[0];
  const std::string type_name = attrString(*ctx.op, "fft_type");
  FftType type;
  if (type_name == "FFT") type = FftType::FFT;
  else if (type_name == "IFFT") type = FftType::IFFT;
  else if (type_name == "RFFT") type = FftType::RFFT;
  else if (type_name == "IRFFT") type = FftType::IRFFT;
  else lowerer.invalid(ctx, "unknown fft_type '" + type_name + "' (FFT, IFFT, RFFT or IRFFT)");
  const std::vector<int64_t> len = attrInts(*ctx.op, "fft_length");
  if (len.empty() || len.size() > 3 || len.size() > in.shape.size())
    lowerer.invalid(ctx, "fft_length must name 1 to 3 innermost dimensions of the operand");
  for (int64_t l : len)  // a length of 0 transforms empty arrays into empty arrays, as XLA does
    if (l < 0) lowerer.invalid(ctx, "fft_length entries must not be negative");
  const size_t r = len.size(), rank = in.shape.size();
  // Shapes: the batch dims are shared; the transformed dims are fft_length, except the innermost of the half
  // spectrum (RFFT's result, IRFFT's operand): len/2+1.
  std::vector<int64_t> full(in.shape.begin(), in.shape.end() - static_cast<std::ptrdiff_t>(r));
  full.insert(full.end(), len.begin(), len.end());
  std::vector<int64_t> half = full;
  half.back() = len.back() / 2 + 1;
  const bool real_in = type == FftType::RFFT, real_out = type == FftType::IRFFT;
  const std::vector<int64_t>& want_in = type == FftType::IRFFT ? half : full;
  const std::vector<int64_t>& want_out = type == FftType::RFFT ? half : full;
  // c64 with f32 (the real transforms' real side), or c128 with f64
  const bool wide = in.dtype == DType::C128 || in.dtype == DType::F64;
  const DType complex = wide ? DType::C128 : DType::C64, part = complexPart(complex);
  if (in.shape != want_in || in.dtype != (real_in ? part : complex))
    lowerer.invalid(ctx,
                    "the operand must be " + TensorType{real_in ? part : complex, want_in}.str() + " for " + type_name);
  if (out.shape != want_out || out.dtype != (real_out ? part : complex))
    lowerer.invalid(
        ctx, "the result must be " + TensorType{real_out ? part : complex, want_out}.str() + " for " + type_name);

  int64_t n = 1;
  for (int64_t l : len) n *= l;
  const int64_t batch = shapeElements({in.shape.begin(), in.shape.begin() + static_cast<std::ptrdiff_t>(rank - r)});
  const int64_t in_per = in.numElements() / std::max<int64_t>(1, batch),
                out_per = out.numElements() / std::max<int64_t>(1, batch);
  const int64_t in_eb = static_cast<int64_t>(dtypeSize(in.dtype)), out_eb = static_cast<int64_t>(dtypeSize(out.dtype));
  const int tiles = lowerer.device().num_tiles;
  // whole transforms per tile; the result is mapped with them
  const TileMapping work =
      TileMapping::linear(batch, static_cast<size_t>(std::max<int64_t>(1, out_per * out_eb)), tiles);
  const int o = lowerer.newSlot(out);
  lowerer.graph().slots[static_cast<size_t>(o)].mapping.per_tile = std::max<int64_t>(1, work.per_tile * out_per);
  std::vector<int64_t> recv(static_cast<size_t>(tiles), 0);
  const TileMapping& in_map = lowerer.graph().slots[static_cast<size_t>(ctx.in[0])].mapping;
  for (int t = 0; t < work.tilesUsed(); ++t) {
    const int64_t b = work.begin(t) * in_per, e = work.end(t) * in_per;
    recv[static_cast<size_t>(t)] += (e - b - in_map.overlap(t, b, e)) * in_eb;
  }
  // flops of one transform: each axis transforms (n / len) lines; the real transforms do about half the work
  double flops = 0;
  for (int64_t l : len)
    if (l > 0) flops += static_cast<double>(n / l) * transformFlops(l);
  if (real_in || real_out) flops *= 0.5;
  const int workers = lowerer.device().num_worker_contexts;
  std::vector<Superstep> steps;
  if (batch > 0 && n > 0) {
    steps.push_back(lowerer.superstep(std::string("fft<") + type_name + ">", work, recv, [&](int, int64_t m) {
      // the tile's transforms are shared among its workers; flops at the f32 vector rate (one flop per element of
      // an f32 vector op; c128's at the emulated f64 multiply's)
      return cost::elementwise(OpKind::Multiply, part, static_cast<int64_t>(flops) * m, workers);
    }));
    steps.back().cost_weight = std::max(1.0, flops / static_cast<double>(std::max<int64_t>(1, out_per)));
  }
  std::unique_ptr<Kernel> kernel;
  if (wide) kernel = std::make_unique<FftKernel<Complex128, double>>(ctx.in[0], o, type, len);
  else kernel = std::make_unique<FftKernel<Complex64, float>>(ctx.in[0], o, type, len);
  lowerer.emitExecute(ctx, std::move(kernel), std::move(steps), {o}, flops * static_cast<double>(batch));
  return {o};
}

}  // namespace ipu
