#include "ipu/cpu_features.h"

#include <cmath>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace ipu {

namespace {

#if defined(__x86_64__) && defined(__GNUC__)
bool osSavesYmm() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  if (!(ecx & (1u << 27)) || !(ecx & (1u << 28))) return false;  // OSXSAVE, AVX
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & 0x6) == 0x6;  // XMM and YMM state
}

// The opmask and ZMM state too (AVX-512 needs it).
bool osSavesZmm() {
  if (!osSavesYmm()) return false;
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & 0xE0) == 0xE0;
}
// CPUID leaf 7, subleaf 0: EBX and EDX.
bool leaf7(unsigned* ebx, unsigned* edx) {
  unsigned eax = 0, ecx = 0;
  return __get_cpuid_count(7, 0, &eax, ebx, &ecx, edx) != 0;
}

bool vendorIs(const char* name) {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return false;
  char vendor[13] = {};
  std::memcpy(vendor, &ebx, 4);
  std::memcpy(vendor + 4, &edx, 4);
  std::memcpy(vendor + 8, &ecx, 4);
  return std::strcmp(vendor, name) == 0;
}
#endif

}  // namespace

// The CPUID reads behind cpu_features.h's cached answers.
namespace detect {

#if defined(__x86_64__) && defined(__GNUC__)
bool avx2() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return osSavesYmm() && __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (ebx & (1u << 5)) != 0;
}
bool f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return osSavesYmm() && __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0;
}
bool fma() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return osSavesYmm() && __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 12)) != 0;
}
bool avx() { return osSavesYmm(); }
bool amd() { return vendorIs("AuthenticAMD"); }
bool fastGather() {
  unsigned ebx = 0, edx = 0;
  if (!osSavesYmm() || !leaf7(&ebx, &edx)) return false;
  const bool avx2 = (ebx & (1u << 5)) != 0, avx512f = (ebx & (1u << 16)) != 0, clflushopt = (ebx & (1u << 23)) != 0;
  if (avx512f && osSavesZmm()) return true;
  return avx2 && clflushopt && vendorIs("GenuineIntel");
}
bool wideVectors() {
  unsigned ebx = 0, edx = 0;
  return osSavesZmm() && leaf7(&ebx, &edx) && (ebx & (1u << 16)) && !vendorIs("GenuineIntel");
}
bool avx512() {
  const unsigned f_dq_vl = (1u << 16) | (1u << 17) | (1u << 31);
  unsigned ebx = 0, edx = 0;
  return osSavesZmm() && leaf7(&ebx, &edx) && (ebx & f_dq_vl) == f_dq_vl;
}
bool avx512Fp16() {
  unsigned ebx = 0, edx = 0;
  return osSavesZmm() && leaf7(&ebx, &edx) && (edx & (1u << 23));
}
bool fp16Core() {
  if (!avx512Fp16() || !vendorIs("GenuineIntel")) return false;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  const unsigned family = (eax >> 8) & 0xf, model = ((eax >> 4) & 0xf) | (((eax >> 16) & 0xf) << 4);
  // Sapphire Rapids, Emerald Rapids, Granite Rapids (LLVM's sapphirerapids, emeraldrapids, graniterapids)
  return family == 6 && (model == 0x8f || model == 0xcf || model == 0xad || model == 0xae);
}
#else
bool avx2() { return false; }
bool f16c() { return false; }
bool fma() { return false; }
bool avx() { return false; }
bool amd() { return false; }
bool fastGather() { return false; }
bool wideVectors() { return false; }
bool avx512() { return false; }
bool avx512Fp16() { return false; }
bool fp16Core() { return false; }
#endif

}  // namespace detect

float hostRsqrtApprox(float x) {
#if defined(__x86_64__) && defined(__GNUC__)
  return _mm_cvtss_f32(_mm_rsqrt_ss(_mm_set_ss(x)));
#else
  return 1.0f / std::sqrt(x);
#endif
}

}  // namespace ipu
