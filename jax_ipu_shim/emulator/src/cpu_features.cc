#include "ipu/cpu_features.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
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

bool detectAvx2() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return osSavesYmm() && __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (ebx & (1u << 5)) != 0;
}

bool detectF16C() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return osSavesYmm() && __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0;
}
bool detectFma() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return osSavesYmm() && __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 12)) != 0;
}
#else
bool detectAvx2() { return false; }
bool detectF16C() { return false; }
bool detectFma() { return false; }
#endif

}  // namespace

bool hostHasAvx2() {
  static const bool yes = detectAvx2();
  return yes;
}

bool hostHasF16C() {
  static const bool yes = detectF16C();
  return yes;
}

bool hostHasFma() {
  static const bool yes = detectFma();
  return yes;
}

}  // namespace ipu
