// The CHLO special functions jaxlib 0.4.13 emits (chlo.lgamma, chlo.digamma, chlo.bessel_i1e, chlo.next_after),
// computed the way XLA expands them before it compiles for cpu: the same fixed approximations (Lanczos series for
// lgamma and digamma, Cephes' Chebyshev series for i1e, integer steps on the bits for next_after), evaluated step by
// step in f32 with f32-rounded constants. Results then agree with XLA:CPU to the few ulp its own log, log1p and sin
// differ from the host's libm. f16 is upcast to f32 and rounded once by the caller, as XLA does; next_after works
// on the raw bits of its own width instead.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "ipu/xla_math.h"

namespace ipu {
namespace special {

// Lanczos' approximation with g = 7 and nine terms (the published constants XLA uses):
//   lgamma(z + 1) = log(2 pi) / 2 + (z + 1/2) log(t) - t + log(a(z)),  t = z + g + 1/2,
//   a(z) = c0 + sum_k ck / (z + k).
constexpr double kLanczosG = 7.0;
constexpr double kLanczosC0 = 0.99999999999980993227684700473478;
constexpr double kLanczosC[8] = {676.520368121885098567009190444019, -1259.13921672240287047156078755283,
                                 771.3234287776530788486528258894,   -176.61502916214059906584551354,
                                 12.507343278686904814458936853,     -0.13857109526572011689554707,
                                 9.984369578019570859563e-6,         1.50563273514931155834e-7};
constexpr double kPi = 3.14159265358979323846;

inline float f(double c) { return static_cast<float>(c); }  // a constant as XLA materialises it for f32

// log(t) for t = z + g + 1/2, as log(g + 1/2) + log1p(z / (g + 1/2)): XLA's way, more accurate than log(t).
// XLA's simplifier turns the division by a constant into a multiplication by its f32 reciprocal.
inline float lanczosLogT(float z) {
  return f(std::log(kLanczosG + 0.5)) + xla_math::log1p(z * (1.0f / f(kLanczosG + 0.5)));
}

// Reflection for x < 1/2 uses z = -x (lgamma(1 - x) then comes out of the series); otherwise z = x - 1.
inline float lanczosZ(float x) { return x < 0.5f ? -x : x - 1.0f; }

inline float lgamma(float x) {
  const float z = lanczosZ(x);
  float a = f(kLanczosC0);
  for (int k = 0; k < 8; ++k) a = a + f(kLanczosC[k]) / (z + static_cast<float>(k + 1));
  const float t = f(kLanczosG + 0.5) + z;
  const float log_t = lanczosLogT(z);
  // (z + 1/2) log(t) - t, written so that large t does not overflow.
  const float lg = std::fma((z + 0.5f) - t / log_t, log_t, f((std::log(2.0) + std::log(kPi)) / 2)) + xla_math::log(a);
  // lgamma(x) = log(pi) - lgamma(1 - x) - log|sin(pi x)|, with sin taken of the fractional part folded into
  // [0, 1/2] so that integers give exactly 0 (a pole: +inf) and pi * x never loses precision.
  const float ax = std::fabs(x);
  float frac = ax - std::floor(ax);
  if (0.5f < frac) frac = 1.0f - frac;
  const float denom = xla_math::log(std::sin(f(kPi) * frac));
  const float reflected = std::isfinite(denom) ? (f(std::log(kPi)) - denom) - lg : -denom;
  const float result = x < 0.5f ? reflected : lg;
  return std::isinf(x) ? std::numeric_limits<float>::infinity() : result;
}

inline float digamma(float x) {
  const float z = lanczosZ(x);
  float a = f(kLanczosC0), a_prime = 0.0f;  // a(z) and its derivative
  for (int k = 0; k < 8; ++k) {
    const float zk = z + static_cast<float>(k + 1);
    a_prime = a_prime - f(kLanczosC[k]) / (zk * zk);
    a = a + f(kLanczosC[k]) / zk;
  }
  const float t = f(kLanczosG + 0.5) + z;
  const float dg = (lanczosLogT(z) + a_prime / a) - f(kLanczosG) / t;
  // digamma(x) = digamma(1 - x) - pi cot(pi x); x shifted into [-1/2, 1/2] first (cot has period 1).
  const float reduced = x + std::fabs(std::floor(x + 0.5f));
  const float pix = f(kPi) * reduced;
  const float reflected = dg - (f(kPi) * std::cos(pix)) / std::sin(pix);
  const float result = x < 0.5f ? reflected : dg;
  // Poles at zero and the negative integers: NaN.
  return (x <= 0.0f && x == std::floor(x)) ? std::numeric_limits<float>::quiet_NaN() : result;
}

// A polynomial by Horner's rule, highest coefficient first, each step one fused multiply-add (XLA:CPU contracts
// the multiply and add of chlo's polynomial expansions).
template <int N>
inline float horner(float x, const float (&c)[N]) {
  float p = c[0];
  for (int i = 1; i < N; ++i) p = std::fma(p, x, c[i]);
  return p;
}

// erf for f32 (Eigen's approximation): x Alpha(x^2) / Beta(x^2) of x clamped to [-4, 4], the result clamped to
// [-1, 1] (near 4 the rational function overshoots 1 by an ulp).
inline float erf(float in) {
  static const float kAlpha[7] = {-2.72614225801306e-10f, 2.77068142495902e-08f,  -2.10102402082508e-06f,
                                  -5.69250639462346e-05f, -7.34990630326855e-04f, -2.95459980854025e-03f,
                                  -1.60960333262415e-02f};
  static const float kBeta[5] = {-1.45660718464996e-05f, -2.13374055278905e-04f, -1.68282697438203e-03f,
                                 -7.37332916720468e-03f, -1.42647390514189e-02f};
  const float x = xla_math::fmin_(xla_math::fmax_(in, -4.0f), 4.0f);
  const float x2 = x * x;
  const float num = xla_math::ftz_(x * horner(x2, kAlpha));
  return xla_math::fmin_(xla_math::fmax_(num / horner(x2, kBeta), -1.0f), 1.0f);
}

// jaxlib 0.12's XLA:CPU erf for f32 (its elemental emitter's, for the HLO erf op it now has): x P(x^2) / Q(x^2)
// with [4/6] polynomials by Horner's rule in FMAs, for |x| up to 3.8325 (erf's f32 value reaches 1 there, the
// comparison unordered so that NaN stays NaN), +-1 beyond; a denormal input reads as zero.
inline float erf012(float in) {
  static const float kP[5] = {0.00022905065861350646f, 0.0034082910107109506f, 0.050955695062380861f,
                              0.18520832239976145f, 1.128379143519084f};
  static const float kQ[7] = {-1.1791602954361697e-7f,
                              0.000023547966471313185f,
                              0.0010179625278914885f,
                              0.014070470171167667f,
                              0.11098505178285362f,
                              0.49746925110067538f,
                              1.0f};
  const float x = xla_math::ftz_(in), x2 = x * x;
  const float r = xla_math::ftz_((x * horner(x2, kP)) / horner(x2, kQ));
  return !(std::fabs(x) > 3.832506856900711f) ? r : std::copysign(1.0f, x);
}

// chlo.erfc for f32 (Cephes' erfcf): 1 - x T(x^2) for |x| < 1; otherwise e^(-x^2) / |x| times P(1/x^2) on [1, 2)
// or R(1/x^2) beyond, 0 once -x^2 < -maxlog, and 2 - erfc(|x|) for negative x.
inline float erfc(float x) {
  static const float kT[7] = {+7.853861353153693E-5f, -8.010193625184903E-4f, +5.188327685732524E-3f,
                              -2.685381193529856E-2f, +1.128358514861418E-1f, -3.761262582423300E-1f,
                              +1.128379165726710E+0f};
  static const float kP[9] = {+2.326819970068386E-2f, -1.387039388740657E-1f, +3.687424674597105E-1f,
                              -5.824733027278666E-1f, +6.210004621745983E-1f, -4.944515323274145E-1f,
                              +3.404879937665872E-1f, -2.741127028184656E-1f, +5.638259427386472E-1f};
  static const float kR[8] = {-1.047766399936249E+1f, +1.297719955372516E+1f, -7.495518717768503E+0f,
                              +2.921019019210786E+0f, -1.015265279202700E+0f, +4.218463358204948E-1f,
                              -2.820767439740514E-1f, +5.641895067754075E-1f};
  const float x2 = x * x, z = -x2, ax = std::fabs(x);
  const float rx2 = 1.0f / x2;
  const float poly = ax < 2.0f ? horner(rx2, kP) : horner(rx2, kR);
  float large = (xla_math::exp(z) * (1.0f / ax)) * poly;
  large = z < -88.72283905206835f ? 0.0f : xla_math::ftz_(large);
  large = x < 0.0f ? 2.0f - large : large;
  const float small = std::fma(-x, horner(x2, kT), 1.0f);
  return ax < 1.0f ? small : large;
}

// Chebyshev series sum c[0] T_{n-1}(x/2) + ... as Cephes' chbevl evaluates it (Clenshaw's recurrence).
template <int N>
inline float chebyshev(float x, const float (&c)[N]) {
  float b0 = 0.0f, b1 = 0.0f, b2 = 0.0f;
  for (int i = 0; i < N; ++i) {
    b2 = b1;
    b1 = b0;
    b0 = std::fma(x, b1, -b2) + c[i];
  }
  return (b0 - b2) * 0.5f;
}

// exp(-|x|) I1(x), Cephes' single-precision series: one on [0, 8] in x/2 - 2, one beyond 8 in 32/x - 2.
inline float besselI1e(float x) {
  static const float kA[17] = {9.38153738649577178388E-9f,  -4.44505912879632808065E-8f, 2.00329475355213526229E-7f,
                               -8.56872026469545474066E-7f, 3.47025130813767847674E-6f,  -1.32731636560394358279E-5f,
                               4.78156510755005422638E-5f,  -1.61760815825896745588E-4f, 5.12285956168575772895E-4f,
                               -1.51357245063125314899E-3f, 4.15642294431288815669E-3f,  -1.05640848946261981558E-2f,
                               2.47264490306265168283E-2f,  -5.29459812080949914269E-2f, 1.02643658689847095384E-1f,
                               -1.76416518357834055153E-1f, 2.52587186443633654823E-1f};
  static const float kB[7] = {-3.83538038596423702205E-9f, -2.63146884688951950684E-8f, -2.51223623787020892529E-7f,
                              -3.88256480887769039346E-6f, -1.10588938762623716291E-4f, -9.76109749136146840777E-3f,
                              7.78576235018280120474E-1f};
  const float z = std::fabs(x);
  // Both series are evaluated for every element (a vertex has no per-element branch); the select picks one.
  const float near = z * chebyshev(0.5f * z - 2.0f, kA);
  // XLA's simplifier rewrites a / sqrt(b) as a * rsqrt(b).
  const float far = chebyshev(32.0f / z - 2.0f, kB) * (1.0f / std::sqrt(z));
  const float y = z <= 8.0f ? near : far;
  const float sign = std::isnan(x) || x == 0.0f ? x : (x > 0.0f ? 1.0f : -1.0f);
  return sign * y;
}

// The next representable value after x in the direction of y, on the raw bits (Bits: uint32_t for f32, uint16_t
// for f16). NaN in either gives NaN; x == y gives y; from +-0 the smallest subnormal with y's sign.
template <class Bits>
inline Bits nextAfterBits(Bits x, Bits y, bool x_is_nan, bool y_is_nan, bool equal) {
  constexpr Bits kSign = static_cast<Bits>(Bits(1) << (8 * sizeof(Bits) - 1));
  constexpr Bits kQuietNan = sizeof(Bits) == 4 ? Bits(0x7fc00000u) : Bits(0x7e00u);
  if (x_is_nan || y_is_nan) return kQuietNan;
  if (equal) return y;
  const Bits x_abs = static_cast<Bits>(x & ~kSign), y_abs = static_cast<Bits>(y & ~kSign);
  if (x_abs == 0) return y_abs == 0 ? y : static_cast<Bits>((y & kSign) | 1u);
  const bool smaller = x_abs > y_abs || (x & kSign) != (y & kSign);
  return static_cast<Bits>(smaller ? x - 1u : x + 1u);
}

inline float nextAfter(float x, float y) {
  uint32_t xb, yb;
  std::memcpy(&xb, &x, 4);
  std::memcpy(&yb, &y, 4);
  const uint32_t r = nextAfterBits<uint32_t>(xb, yb, std::isnan(x), std::isnan(y), x == y);
  float out;
  std::memcpy(&out, &r, 4);
  return out;
}

}  // namespace special
}  // namespace ipu
