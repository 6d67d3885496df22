// jaxlib 0.12's XLA:CPU complex power, (a + bi)^(c + di), as its ElementalIrEmitter::EmitComplexPower emits it and the
// object code jaxlib 0.12.0.1 compiles for a c64 power runs it (checked bit for bit against backend="cpu" on ~260k
// finite cases: random magnitudes 1e-40..1e38 and an edge grid of zeros, denormals, infinities and NaN):
//
//   r = |z| = M sqrt(fma(m/M, m/M, 1)) (M, m the larger and smaller of |a|, |b|; no overflow or underflow of a^2+b^2)
//   t = atan2(b, a) (the host's libm), P = pow(r, c) (libm), E = XLA's exp(-d t), L = XLA's log(r)
//   q = fma(c, t, d L);  z^w = E P (cos q, sin q)
//   special cases, a later one winning: |z| = 0, d = 0, c >= 0 -> (c == 0, 0); w = 0 -> 1; z = 1 -> 1;
//   z = +inf, d = 0 -> (inf, 0) for c > 0 and 0 for c < 0.
//
// jaxlib 0.4's formula (scalar_ops.h cpowF) forms a^2 + b^2, so z = 1e-30 gives NaN there where 0.12 gives 1e15 for
// z^-0.5. XLA:CPU runs with denormals flushed: every operand reads a denormal as a zero of its sign and every result
// is flushed, except that libm's atan2 sees the raw bits (atan2DazGlibc). When w is a constant of the jitted program,
// LLVM folds pow(r, 0.5) into sqrt and reassociates q for c < 0, so such programs can differ from cpu by an ulp.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "ipu/xla_math.h"

namespace ipu {
namespace xla012 {

using xla_math::bitsToFloat;
using xla_math::floatToBits;
using xla_math::ftz_;

// x86 maxps/minps: q when either is NaN.
inline float maxps(float p, float q) { return p > q ? p : q; }
inline float minps(float p, float q) { return p < q ? p : q; }

// XLA:CPU's inlined f32 exp of the complex power: Cephes' polynomial, input clamped to [-87.8, 88.8], n to
// [-127, 128] (2^128 as 2^127 * 2), denormal results flushed.
inline float exp(float x) {
  x = minps(88.8f, maxps(-87.8f, x));
  if (std::isnan(x)) return x;
  const float n = minps(128.0f, maxps(-127.0f, std::floor(std::fma(x, 1.44269504088896341f, 0.5f))));
  float r = std::fma(n, -0.693145751953125f, x);
  r = std::fma(n, -1.4286067653301877e-6f, r);
  float z = std::fma(r, 1.9875691500e-4f, 1.3981999507e-3f);
  z = std::fma(z, r, 8.3334519073e-3f);
  z = std::fma(z, r, 4.1665795894e-2f);
  z = std::fma(z, r, 1.6666665459e-1f);
  z = std::fma(z, r, 0.5f);
  z = 1.0f + std::fma(z, r * r, r);
  const uint32_t biased = static_cast<uint32_t>(static_cast<int>(n) + 127) << 23;
  const uint32_t pow2 = biased < 0x7f000000u ? biased : 0x7f000000u;
  return ftz_(bitsToFloat(floatToBits(z) + (biased - pow2)) * bitsToFloat(pow2));
}

// XLA:CPU's inlined f32 log (Cephes' plog polynomial): log 0 = -inf, log inf = inf, negative or NaN -> NaN.
inline float log(float in) {
  if (in == 0.0f) return -std::numeric_limits<float>::infinity();
  if (in == std::numeric_limits<float>::infinity()) return in;
  if (!(0.0f < in)) return bitsToFloat(0xffffffffu);
  const uint32_t bits = floatToBits(maxps(in, std::numeric_limits<float>::min()));
  float e = 1.0f + static_cast<float>(static_cast<int32_t>(bits >> 23) - 127);
  float m = bitsToFloat((bits & 0x807fffffu) | 0x3f000000u);  // in [0.5, 1)
  const bool lt = m < 0.707106769f;
  m = (m - 1.0f) + (lt ? m : 0.0f);
  e = e - (lt ? 1.0f : 0.0f);
  const float x2 = m * m, x3 = x2 * m;
  float y = std::fma(m, 7.0376836292e-2f, -1.1514610310e-1f);
  float y1 = std::fma(m, -1.2420140846e-1f, 1.4249322787e-1f);
  float y2 = std::fma(m, 2.0000714765e-1f, -2.4999993993e-1f);
  y = std::fma(y, m, 1.1676998740e-1f);
  y1 = std::fma(y1, m, -1.6668057665e-1f);
  y2 = std::fma(y2, m, 3.3333331174e-1f);
  y1 = std::fma(y, x3, y1);
  y = std::fma(y1, x3, y2);
  const float t = std::fma(y, x3, e * -2.12194440e-4f);
  const float u = std::fma(-x2, 0.5f, m) + t;
  return std::fma(e, 0.693359375f, u);
}

// XLA's complex abs: M sqrt(1 + (m/M)^2), NaN -> m.
inline float cabs(float a, float b) {
  const float fa = std::fabs(a), fb = std::fabs(b);
  const float mx = std::isnan(fa) ? fa : maxps(fa, fb), mn = std::isnan(fa) ? fa : minps(fa, fb);
  const float q = ftz_(mn / mx);
  const float r = mx * std::sqrt(std::fma(q, q, 1.0f));
  return std::isnan(r) ? mn : r;
}

inline bool denormal(float x) { return x != 0.0f && std::fabs(x) < std::numeric_limits<float>::min(); }

// glibc's atan2f called with raw operand bits under DAZ: it tests for zero on the bits (a denormal is not zero
// there) but divides with the denormal read as 0. x denormal: +-pi/2 (one ulp below for x < 0); y denormal: as a
// signed zero; both: NaN.
inline float atan2DazGlibc(float y, float x) {
  const bool yd = denormal(y), xd = denormal(x);
  if (std::isnan(x) || std::isnan(y) || (!yd && !xd)) return ftz_(std::atan2(y, x));
  if (yd && xd) return std::numeric_limits<float>::quiet_NaN();
  if (yd) return x == 0.0f ? std::atan2(y, x) : std::atan2(std::copysign(0.0f, y), x);
  if (y == 0.0f || std::isinf(y)) return std::atan2(y, x);
  const float v = bitsToFloat(std::signbit(x) ? 0x3fc90fdau : 0x3fc90fdbu);
  return std::signbit(y) ? -v : v;
}

// (a + bi)^(c + di) -> {re, im}.
inline void cpow(float a, float b, float c, float d, float* re_out, float* im_out) {
  const float inf = std::numeric_limits<float>::infinity();
  const float t = atan2DazGlibc(b, a);
  a = ftz_(a), b = ftz_(b), c = ftz_(c), d = ftz_(d);
  const float r = cabs(a, b);
  const float coeff = ftz_(xla012::exp(ftz_(t * -d)) * ftz_(std::pow(r, c)));
  const float q = ftz_(std::fma(t, c, ftz_(xla012::log(r) * d)));
  float re = ftz_(coeff * std::cos(q)), im = ftz_(coeff * std::sin(q));
  if (r == 0.0f && d == 0.0f && 0.0f <= c) re = c == 0.0f ? 1.0f : 0.0f, im = 0.0f;  // 0^c
  if (c == 0.0f && d == 0.0f) re = 1.0f, im = 0.0f;                                  // z^0
  if (a == 1.0f && b == 0.0f) re = 1.0f, im = 0.0f;                                  // 1^w
  if (a == inf && b == 0.0f && d == 0.0f && c > 0.0f) re = inf, im = 0.0f;           // inf^c
  if (a == inf && b == 0.0f && d == 0.0f && c < 0.0f) re = 0.0f, im = 0.0f;          // inf^-c
  *re_out = re;
  *im_out = im;
}

}  // namespace xla012
}  // namespace ipu
