// ipu/xla_math.h eight lanes at a time, with AVX2 and FMA: the same operations in the same order, each fma_ one
// FMA instruction and each sel one blend, so that every lane gives the scalar version's bits (the vector kernels'
// test checks it). The element loops use these for whole vectors of f32 and the scalar versions for the tail.
#pragma once

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define IPU_HAVE_AVX2_MATH 1
#include <immintrin.h>

#include <cstdint>

#define IPU_AVX2 __attribute__((target("avx2,fma"), always_inline)) inline
// What a function calling these must be compiled for.
#define IPU_AVX2_TARGET __attribute__((target("avx2,fma")))

namespace ipu {
namespace xla_math {
namespace avx2 {

IPU_AVX2 __m256 set(float c) { return _mm256_set1_ps(c); }
IPU_AVX2 __m256 sel(__m256 c, __m256 a, __m256 b) { return _mm256_blendv_ps(b, a, c); }
// fmax_(x, c) = x < c ? c : x and fmin_(x, c) = c < x ? c : x: maxps/minps return their second operand when the
// comparison fails, so a NaN x passes through as it does in the scalar version.
IPU_AVX2 __m256 fmax_(__m256 x, __m256 c) { return _mm256_max_ps(c, x); }
IPU_AVX2 __m256 fmin_(__m256 x, __m256 c) { return _mm256_min_ps(c, x); }
IPU_AVX2 __m256 fabs_(__m256 x) { return _mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff))); }
IPU_AVX2 __m256 signOf(__m256 x) { return _mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(INT32_MIN))); }
IPU_AVX2 __m256 lt(__m256 a, __m256 b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
IPU_AVX2 __m256 gt(__m256 a, __m256 b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
IPU_AVX2 __m256 eq(__m256 a, __m256 b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
IPU_AVX2 __m256 isNan(__m256 x) { return _mm256_cmp_ps(x, x, _CMP_UNORD_Q); }
IPU_AVX2 __m256 ftz_(__m256 x) { return sel(lt(fabs_(x), set(1.17549435e-38f)), signOf(x), x); }
IPU_AVX2 __m256 floor_(__m256 x) {  // |x| < 2^23: truncate, then step down where that rounded up
  const __m256 t = _mm256_cvtepi32_ps(_mm256_cvttps_epi32(x));
  return _mm256_sub_ps(t, _mm256_and_ps(gt(t, x), set(1.0f)));
}

IPU_AVX2 __m256 expReduced(__m256 x) {
  __m256 z = _mm256_fmadd_ps(x, set(1.9875691500e-4f), set(1.3981999507e-3f));
  z = _mm256_fmadd_ps(z, x, set(8.3334519073e-3f));
  z = _mm256_fmadd_ps(z, x, set(4.1665795894e-2f));
  z = _mm256_fmadd_ps(z, x, set(1.6666665459e-1f));
  z = _mm256_fmadd_ps(z, x, set(5.0000001201e-1f));
  z = _mm256_fmadd_ps(z, _mm256_mul_ps(x, x), x);
  return _mm256_add_ps(set(1.0f), z);
}

IPU_AVX2 __m256 exp(__m256 in) {
  const __m256 x0 = fmin_(fmax_(in, set(-87.8f)), set(88.8f));
  __m256 n = floor_(_mm256_fmadd_ps(x0, set(1.44269504088896341f), set(0.5f)));
  n = fmin_(fmax_(n, set(-127.0f)), set(127.0f));
  __m256 x = _mm256_fnmadd_ps(n, set(0.693359375f), x0);  // fma(-n, c, x0)
  x = _mm256_fnmadd_ps(n, set(-2.12194440e-4f), x);
  const __m256 z = expReduced(x);
  const __m256i e = _mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127));
  const __m256 r = _mm256_mul_ps(z, _mm256_castsi256_ps(_mm256_slli_epi32(e, 23)));
  const __m256 zero = _mm256_or_ps(eq(n, set(-127.0f)), lt(r, set(1.17549435e-38f)));
  return sel(isNan(in), in, sel(zero, _mm256_setzero_ps(), r));
}

IPU_AVX2 __m256 exp012(__m256 in) {
  const __m256 x0 = fmin_(fmax_(in, set(-110.0f)), set(88.723f));
  const __m256 n = floor_(_mm256_fmadd_ps(x0, set(1.44269504088896341f), set(0.5f)));
  __m256 x = _mm256_fmadd_ps(n, set(-0.693145751953125f), x0);
  x = _mm256_fmadd_ps(n, set(-1.428606765330187045e-06f), x);
  const __m256 z = expReduced(x);
  const __m256i e = _mm256_cvttps_epi32(n);
  // e / 2 rounded toward zero, as the scalar version's integer division
  const __m256i half = _mm256_srai_epi32(_mm256_add_epi32(e, _mm256_srli_epi32(e, 31)), 1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 p1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, bias), 23));
  const __m256 p2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(e, half), bias), 23));
  const __m256 r = ftz_(_mm256_mul_ps(_mm256_mul_ps(z, p1), p2));
  return sel(isNan(in), in, sel(lt(in, set(-104.0f)), _mm256_setzero_ps(), r));
}

IPU_AVX2 __m256 log(__m256 in) {
  const __m256 t0 = fmax_(in, set(1.17549435e-38f));
  const __m256i bits = _mm256_castps_si256(t0);
  __m256 e = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(0x7f)));
  e = _mm256_add_ps(e, set(1.0f));
  const __m256 m = _mm256_castsi256_ps(
      _mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi32(~0x7f800000)), _mm256_set1_epi32(0x3f000000)));
  const __m256 small = lt(m, set(0.707106781186547524f));
  __m256 x = _mm256_sub_ps(m, set(1.0f));
  e = _mm256_sub_ps(e, _mm256_and_ps(small, set(1.0f)));
  x = _mm256_add_ps(x, _mm256_and_ps(small, m));
  const __m256 x2 = _mm256_mul_ps(x, x), x3 = _mm256_mul_ps(x2, x);
  __m256 y = _mm256_fmadd_ps(x, set(7.0376836292e-2f), set(-1.1514610310e-1f));
  __m256 y1 = _mm256_fmadd_ps(x, set(-1.2420140846e-1f), set(1.4249322787e-1f));
  __m256 y2 = _mm256_fmadd_ps(x, set(2.0000714765e-1f), set(-2.4999993993e-1f));
  y = _mm256_fmadd_ps(y, x, set(1.1676998740e-1f));
  y1 = _mm256_fmadd_ps(y1, x, set(-1.6668057665e-1f));
  y2 = _mm256_fmadd_ps(y2, x, set(3.3333331174e-1f));
  y = _mm256_fmadd_ps(y, x3, y1);
  y = _mm256_fmadd_ps(y, x3, y2);
  y = _mm256_fmadd_ps(y, x3, _mm256_mul_ps(set(-2.12194440e-4f), e));
  x = _mm256_fmadd_ps(set(-0.5f), x2, x);
  x = _mm256_add_ps(x, y);
  x = _mm256_fmadd_ps(set(0.693359375f), e, x);
  const __m256 inf = _mm256_castsi256_ps(_mm256_set1_epi32(0x7f800000));
  const __m256 nan = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000));
  const __m256 z = ftz_(in);
  // !(z > 0): the ordered greater-than fails for NaN too
  return sel(eq(z, _mm256_setzero_ps()), _mm256_sub_ps(_mm256_setzero_ps(), inf),
             sel(eq(z, inf), inf, sel(_mm256_cmp_ps(z, _mm256_setzero_ps(), _CMP_NGT_UQ), nan, x)));
}

IPU_AVX2 __m256 tanh(__m256 in, float clamp = kTanhClamp04) {
  const __m256 x = fmin_(fmax_(in, set(-clamp)), set(clamp));
  const __m256 x2 = _mm256_mul_ps(x, x);
  __m256 p = _mm256_fmadd_ps(x2, set(-2.76076847742355e-16f), set(2.00018790482477e-13f));
  p = _mm256_fmadd_ps(x2, p, set(-8.60467152213735e-11f));
  p = _mm256_fmadd_ps(x2, p, set(5.12229709037114e-08f));
  p = _mm256_fmadd_ps(x2, p, set(1.48572235717979e-05f));
  p = _mm256_fmadd_ps(x2, p, set(6.37261928875436e-04f));
  p = _mm256_fmadd_ps(x2, p, set(4.89352455891786e-03f));
  p = _mm256_mul_ps(x, p);
  __m256 q = _mm256_fmadd_ps(x2, set(1.19825839466702e-06f), set(1.18534705686654e-04f));
  q = _mm256_fmadd_ps(x2, q, set(2.26843463243900e-03f));
  q = _mm256_fmadd_ps(x2, q, set(4.89352518554385e-03f));
  return sel(_mm256_or_ps(lt(fabs_(in), set(0.0004f)), isNan(in)), in, _mm256_div_ps(p, q));
}

IPU_AVX2 __m256 logistic(__m256 x) {
  const __m256 neg = _mm256_xor_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(INT32_MIN)));
  return ftz_(_mm256_div_ps(set(1.0f), _mm256_add_ps(set(1.0f), exp(neg))));
}

IPU_AVX2 __m256 logistic012(__m256 x) {
  const __m256 neg = _mm256_xor_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(INT32_MIN)));
  return ftz_(_mm256_div_ps(set(1.0f), _mm256_add_ps(set(1.0f), exp012(neg))));
}

IPU_AVX2 __m256 expm1(__m256 x) {
  const __m256 e = exp(x), half = ftz_(_mm256_mul_ps(ftz_(x), set(0.5f)));
  const __m256 r = sel(gt(fabs_(x), set(0.5f)), _mm256_sub_ps(e, set(1.0f)),
                       ftz_(_mm256_mul_ps(tanh(half), _mm256_add_ps(e, set(1.0f)))));
  return sel(eq(half, _mm256_setzero_ps()), x, r);
}

template <bool kJaxlib012 = false>
IPU_AVX2 __m256 log1p(__m256 in) {
  const __m256 x = ftz_(in);
  const __m256 large = log(_mm256_add_ps(x, set(1.0f)));
  const __m256 x2 = _mm256_mul_ps(x, x);
  __m256 p = set(4.5270000862445199635215e-5f);
  p = _mm256_fmadd_ps(p, x, set(4.9854102823193375972212e-1f));
  p = _mm256_fmadd_ps(p, x, set(6.5787325942061044846969e0f));
  p = _mm256_fmadd_ps(p, x, set(2.9911919328553073277375e1f));
  p = _mm256_fmadd_ps(p, x, set(6.0949667980987787057556e1f));
  p = _mm256_fmadd_ps(p, x, set(5.7112963590585538103336e1f));
  p = _mm256_fmadd_ps(p, x, set(2.0039553499201281259648e1f));
  __m256 q = set(1.0f);
  q = _mm256_fmadd_ps(q, x, set(1.5062909083469192043167e1f));
  q = _mm256_fmadd_ps(q, x, set(8.3047565967967209469434e1f));
  q = _mm256_fmadd_ps(q, x, set(2.2176239823732856465394e2f));
  q = _mm256_fmadd_ps(q, x, set(3.0909872225312059774938e2f));
  q = _mm256_fmadd_ps(q, x, set(2.1642788614495947685003e2f));
  q = _mm256_fmadd_ps(q, x, set(6.0118660497603843919306e1f));
  const __m256 x3 = _mm256_mul_ps(x, x2), ratio = _mm256_div_ps(p, q), half_x2 = _mm256_mul_ps(set(-0.5f), x2);
  const __m256 small = _mm256_add_ps(
      x, kJaxlib012 ? _mm256_add_ps(_mm256_mul_ps(x3, ratio), half_x2) : _mm256_fmadd_ps(x3, ratio, half_x2));
  return sel(lt(fabs_(x), set(0.41421356237309504880f)), ftz_(small), large);
}

// jaxlib 0.12's rsqrt (scalar_ops.h: rsqrt012): vrsqrtps gives each lane the bits rsqrtss gives it on the same CPU.
IPU_AVX2 __m256 rsqrt012(__m256 x, int steps) {
  const __m256 approx = _mm256_rsqrt_ps(x);
  __m256 g = approx;
  for (int i = 0; i < steps; ++i) {
    const __m256 r2 = _mm256_mul_ps(x, g), half = _mm256_mul_ps(g, set(-0.5f));
    g = _mm256_fmadd_ps(half, _mm256_fmadd_ps(r2, g, set(-1.0f)), g);
  }
  const __m256 inf = _mm256_castsi256_ps(_mm256_set1_epi32(0x7f800000));
  return sel(_mm256_or_ps(lt(x, set(1.17549435e-38f)), eq(x, inf)), approx, g);
}

}  // namespace avx2
}  // namespace xla_math
}  // namespace ipu

#undef IPU_AVX2
#endif
