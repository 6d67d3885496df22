// XLA:CPU's own f32 approximations of exp, log, tanh and what XLA builds from them (logistic, expm1, log1p), so that
// the emulator's results are bit for bit those of backend="cpu" rather than libm's. Implemented from the algorithms
// XLA describes (cpu/polynomial_approximations.cc: Cephes-style exp and log; EmitFastTanh; the elemental emitter's
// expm1 and log1p; LogisticExpander), in XLA's operation order. Rounding is XLA:CPU's on a host with FMA (and the
// IPU's f32 units fuse multiply-adds too): LLVM contracts every multiply whose only use is an add or subtract into
// one fused multiply-add, so those steps are fma_ here and every other step rounds on its own; results below the
// smallest normal flush to zero as XLA:CPU's denormal mode does. Branch-free (every select picks between values
// already computed: trapping maths forbids speculating an operation) and free of libm calls other than fma.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace ipu {
namespace xla_math {

inline float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t floatToBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
// c ? a : b on the bits: g++ will not turn a ?: whose arm may trap (a multiply...) into a vector blend.
inline float sel(bool c, float a, float b) {
  const uint32_t m = 0u - static_cast<uint32_t>(c);
  return bitsToFloat((floatToBits(a) & m) | (floatToBits(b) & ~m));
}
inline float fmin_(float a, float b) { return sel(b < a, b, a); }
inline float fmax_(float a, float b) { return sel(a < b, b, a); }
// a * b + c rounded once, as XLA:CPU's LLVM contracts a multiply whose only use is an add on an FMA host.
inline float fma_(float a, float b, float c) { return std::fma(a, b, c); }
inline float fabs_(float x) { return bitsToFloat(floatToBits(x) & 0x7fffffffu); }
// XLA:CPU runs with denormals flushed to zero: a denormal operand of arithmetic reads as a zero of its sign (DAZ),
// a denormal result becomes one (FTZ). Selects and clamps move a denormal through unchanged.
inline float ftz_(float x) { return sel(fabs_(x) < 1.17549435e-38f, bitsToFloat(floatToBits(x) & 0x80000000u), x); }
inline float floor_(float x) {  // |x| < 2^23 here, or NaN (whose result the caller discards)
  // NaN converted to an integer is undefined behaviour: it converts a 0 instead.
  const float t = static_cast<float>(static_cast<int32_t>(sel(x != x, 0.0f, x)));
  return t - sel(t > x, 1.0f, 0.0f);
}

// e^a for |a| <= ln2 / 2: Cephes' degree-5 polynomial, as both series' exp evaluate it.
inline float expReduced(float x) {
  float z = fma_(x, 1.9875691500e-4f, 1.3981999507e-3f);
  z = fma_(z, x, 8.3334519073e-3f);
  z = fma_(z, x, 4.1665795894e-2f);
  z = fma_(z, x, 1.6666665459e-1f);
  z = fma_(z, x, 5.0000001201e-1f);
  z = fma_(z, x * x, x);
  return 1.0f + z;
}

// e^x = e^a * 2^n, n = floor(x log2(e) + 1/2) clamped to [-127, 127], a = x - n ln2 (ln2 in two parts), e^a by
// Cephes' degree-5 polynomial; the input is clamped to [-87.8, 88.8] first (denormal results flush to 0).
inline float exp(float in) {
  const float x0 = fmin_(fmax_(in, -87.8f), 88.8f);
  float n = floor_(fma_(x0, 1.44269504088896341f, 0.5f));
  n = fmin_(fmax_(n, -127.0f), 127.0f);
  float x = fma_(-n, 0.693359375f, x0);
  x = fma_(-n, -2.12194440e-4f, x);
  const float z = expReduced(x);
  const float pow2 = bitsToFloat(static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23);
  const float r = z * pow2;
  // XLA:CPU runs with denormals flushed to zero: a result below the smallest normal is 0. NaN propagates.
  return sel(in != in, in, sel((n == -127.0f) | (r < 1.17549435e-38f), 0.0f, r));
}

// jaxlib 0.12's XLA:CPU exp (Eigen's pexp_float on an FMA host): the same polynomial after a reduction by ln2 split
// as Eigen splits it for FMA, the input clamped above only (88.723), and the scaling by 2^n in two steps, so n may
// reach 128 and go below -126 (results below the smallest normal flush to zero; below -104 the result is 0).
inline float exp012(float in) {
  const float x0 = fmin_(fmax_(in, -110.0f), 88.723f);  // (the lower clamp only keeps floor_ in range)
  const float n = floor_(fma_(x0, 1.44269504088896341f, 0.5f));
  float x = fma_(n, -0.693145751953125f, x0);
  x = fma_(n, -1.428606765330187045e-06f, x);
  const float z = expReduced(x);
  const int32_t e = static_cast<int32_t>(n), half = e / 2;
  const float r = (z * bitsToFloat(static_cast<uint32_t>(half + 127) << 23)) *
                  bitsToFloat(static_cast<uint32_t>(e - half + 127) << 23);
  return sel(in != in, in, sel(in < -104.0f, 0.0f, ftz_(r)));
}

// log(x) = e ln2 + log(m), m in [sqrt(1/2), sqrt(2)): Cephes' degree-8 polynomial in m - 1, evaluated in three
// parts; ln2 in two parts. 0 -> -inf, +inf -> +inf, negative or NaN -> NaN.
inline float log(float in) {
  const float t0 = fmax_(in, 1.17549435e-38f);  // below the smallest normal: treated as it
  const uint32_t bits = floatToBits(t0);
  float e = static_cast<float>(static_cast<int32_t>(bits >> 23) - 0x7f) + 1.0f;
  const float m = bitsToFloat((bits & ~0x7f800000u) | floatToBits(0.5f));
  const bool small = m < 0.707106781186547524f;
  float x = m - 1.0f;
  e = e - sel(small, 1.0f, 0.0f);
  x = x + sel(small, m, 0.0f);
  const float x2 = x * x, x3 = x2 * x;
  float y = fma_(x, 7.0376836292e-2f, -1.1514610310e-1f);
  float y1 = fma_(x, -1.2420140846e-1f, 1.4249322787e-1f);
  float y2 = fma_(x, 2.0000714765e-1f, -2.4999993993e-1f);
  y = fma_(y, x, 1.1676998740e-1f);
  y1 = fma_(y1, x, -1.6668057665e-1f);
  y2 = fma_(y2, x, 3.3333331174e-1f);
  y = fma_(y, x3, y1);
  y = fma_(y, x3, y2);
  y = fma_(y, x3, -2.12194440e-4f * e);
  x = fma_(-0.5f, x2, x);
  x = x + y;
  x = fma_(0.693359375f, e, x);
  const float inf = bitsToFloat(0x7f800000u), nan = bitsToFloat(0x7fc00000u);
  const float z = ftz_(in);
  return sel(z == 0.0f, -inf, sel(z == inf, inf, sel(!(z > 0.0f), nan, x)));
}

// EmitFastTanh: x for |x| < 0.0004, else a [7/4] rational function of the input clamped to +-9 (XLA's bound: the
// result may pass +-1 by an ulp there, and does on cpu). jaxlib 0.12's XLA:CPU calls Eigen's ptanh_float instead:
// the same function in the same order, clamped where it reaches 1 with FMA (kTanhClamp012).
constexpr float kTanhClamp04 = 9.0f, kTanhClamp012 = 7.99881172180175781f;
inline float tanh(float in, float clamp = kTanhClamp04) {
  const float x = fmin_(fmax_(in, -clamp), clamp);
  const float x2 = x * x;
  float p = fma_(x2, -2.76076847742355e-16f, 2.00018790482477e-13f);
  p = fma_(x2, p, -8.60467152213735e-11f);
  p = fma_(x2, p, 5.12229709037114e-08f);
  p = fma_(x2, p, 1.48572235717979e-05f);
  p = fma_(x2, p, 6.37261928875436e-04f);
  p = fma_(x2, p, 4.89352455891786e-03f);
  p = x * p;
  float q = fma_(x2, 1.19825839466702e-06f, 1.18534705686654e-04f);
  q = fma_(x2, q, 2.26843463243900e-03f);
  q = fma_(x2, q, 4.89352518554385e-03f);
  return sel((fabs_(in) < 0.0004f) | (in != in), in, p / q);
}

// jaxlib 0.12's XLA:CPU atan (Eigen's generic_atan as XLA writes it for scalars): for |x| > 1 atan(x) = pi/2 -
// atan(1/|x|), atan of [0, 1] as x P(x^2) / Q(x^2) with [2/3] polynomials by Horner's rule, each step an FMA (the
// C++ XLA compiles contracts them), the sign copied back. (jaxlib 0.4.13 calls the host's atanf.)
inline float atan012(float in) {
  const float ax = fabs_(in);
  const bool large = ax > 1.0f;
  const float x = large ? 1.0f / ax : ax;
  const float x2 = x * x;
  const float p =
      fma_(fma_(1.12026982009410858154296875e-01f, x2, 7.296695709228515625e-01f), x2, 8.109951019287109375e-01f);
  const float q = fma_(fma_(fma_(1.00917108356952667236328125e-02f, x2, 2.8318560123443603515625e-01f), x2, 1.0f), x2,
                       8.109951019287109375e-01f);
  const float r = x * (p / q);
  return ftz_(std::copysign(large ? 1.5707963267948966f - r : r, in));
}

// LogisticExpander: 1 / (1 + exp(-x)), with each series' exp.
inline float logistic(float x) { return ftz_(1.0f / (1.0f + exp(-x))); }
inline float logistic012(float x) { return ftz_(1.0f / (1.0f + exp012(-x))); }

// expm1: tanh(x/2) (e^x + 1), which keeps the relative accuracy e^x - 1 loses to cancellation; e^x - 1 for
// |x| > 1/2, x where x/2 underflows to 0.
inline float expm1(float x) {
  const float e = exp(x), half = ftz_(ftz_(x) * 0.5f);
  const float r = sel(fabs_(x) > 0.5f, e - 1.0f, ftz_(tanh(half) * (e + 1.0f)));
  return sel(half == 0.0f, x, r);
}

// jaxlib 0.12's expm1 (XLA:CPU's own xla.expm1.f32 intrinsic): x = n ln2 + r, n = rint(x / ln2) of x clamped to
// [-18, 0x1.62e42ep+6 = 88.72283]; r = r_hi + r_lo exactly (ln2 in a 15-bit high part whose product with n is exact,
// the remainder renormalised by Fast2Sum); e^r - 1 = r_hi + tail, tail = r_lo + r_hi^2 / 2 + r_hi^3 q(r_hi) with a
// degree-4 minimax q; then 2^n e^r - 1 = ((2^n1 - 1) + 2^n1 r_hi + 2^n1 tail + the bits the first two sums rounded off)
// 2^n2 (n1 = min(n, 127): 2^128 is not a float). A zero (or denormal) x is returned as it is, x < -18 gives -1 and x
// above that +inf. Every multiply-add is fused, as the intrinsic's fmuladds are on an FMA host.
inline float expm1012(float in) {
  constexpr float kHi = 0x1.62e42ep+6f, kLo = -18.0f;
  const float x = sel(in < kLo, kLo, sel(in > kHi, kHi, in));  // NaN stays NaN
  const float n = std::rint(x * 0x1.715476p+0f);
  const float a = fma_(-n, 0x1.62e4p-1f, x), b = -n * 0x1.7f7d1cp-20f;
  const float r_hi = a + b, r_lo = b - (r_hi - a);  // Fast2Sum (|a| >= |b|)
  float q = fma_(0x1.a2ffc4p-13f, r_hi, 0x1.6d0ffap-10f);
  q = fma_(q, r_hi, 0x1.110fbp-7f);
  q = fma_(q, r_hi, 0x1.55551ap-5f);
  q = fma_(q, r_hi, 0x1.555556p-3f);
  const float tail = fma_(0.5f * r_hi, r_hi, fma_(r_hi * r_hi, r_hi * q, r_lo));
  const int32_t ni = static_cast<int32_t>(sel(n != n, 0.0f, n)), n1 = ni < 127 ? ni : 127;
  const float s1 = bitsToFloat(static_cast<uint32_t>(n1 + 127) << 23);
  const float s2 = bitsToFloat(static_cast<uint32_t>(ni - n1 + 127) << 23);
  const float s1m1 = s1 - 1.0f, s1m1_err = -1.0f - (s1m1 - s1);
  const float head = fma_(s1, r_hi, s1m1);
  const float head_err = fma_(s1, r_hi, s1m1 - head) + s1m1_err;
  const float r = (head + fma_(s1, tail, head_err)) * s2;
  return sel(ftz_(in) == 0.0f, in, sel(in < kLo, -1.0f, sel(in > kHi, std::numeric_limits<float>::infinity(), r)));
}

// log1p: for |x| < sqrt(2) - 1 Cephes' rational approximation x - x^2/2 + x^3 P(x)/Q(x), else log(1 + x).
// jaxlib 0.4.13 fuses the x^3 P/Q product into the subtraction of x^2/2; jaxlib 0.12 rounds it first (kJaxlib012).
template <bool kJaxlib012 = false>
inline float log1p(float in) {
  const float x = ftz_(in);
  const float large = log(x + 1.0f);
  const float x2 = x * x;
  float p = 4.5270000862445199635215e-5f;
  p = fma_(p, x, 4.9854102823193375972212e-1f);
  p = fma_(p, x, 6.5787325942061044846969e0f);
  p = fma_(p, x, 2.9911919328553073277375e1f);
  p = fma_(p, x, 6.0949667980987787057556e1f);
  p = fma_(p, x, 5.7112963590585538103336e1f);
  p = fma_(p, x, 2.0039553499201281259648e1f);
  float q = 1.0f;
  q = fma_(q, x, 1.5062909083469192043167e1f);
  q = fma_(q, x, 8.3047565967967209469434e1f);
  q = fma_(q, x, 2.2176239823732856465394e2f);
  q = fma_(q, x, 3.0909872225312059774938e2f);
  q = fma_(q, x, 2.1642788614495947685003e2f);
  q = fma_(q, x, 6.0118660497603843919306e1f);
  const float x3 = x * x2, ratio = p / q;
  const float small = x + (kJaxlib012 ? x3 * ratio - 0.5f * x2 : fma_(x3, ratio, -0.5f * x2));
  return sel(fabs_(x) < 0.41421356237309504880f, ftz_(small), large);
}

}  // namespace xla_math
}  // namespace ipu
