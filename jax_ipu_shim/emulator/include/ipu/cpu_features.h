// Host CPU features, for kernels that pick a vectorised variant at run time (AVX2 loops, F16C conversions).
// Read once with CPUID + XGETBV: __builtin_cpu_supports needs a compiler-rt symbol (__cpu_model) that zig's runtime,
// which links the release build, lacks. Both are false off x86-64.
#pragma once

namespace ipu {

inline bool hostHasAvx2();  // AVX2, and the OS saves YMM state
inline bool hostHasF16C();  // AVX + F16C, and the OS saves YMM state
inline bool hostHasFma();   // FMA3, and the OS saves YMM state
inline bool hostHasAvx();   // AVX, and the OS saves YMM state
inline bool hostIsAmd();    // CPUID's vendor is AuthenticAMD
// Whether LLVM vectorises a loop of strided loads with gathers on this host, as it decides for XLA:CPU, which
// compiles for the host's CPU (X86TTIImpl::supportsGather: AVX-512F, or AVX2 with the fast-gather tuning of Intel's
// cores from Skylake on, marked here by CLFLUSHOPT, which Skylake introduced). Where it does not (AMD's Zen 1-3),
// XLA:CPU folds a window over a dimension that is not the innermost one element at a time (reduce.cc).
inline bool hostGathersFast();
// Whether LLVM vectorises XLA:CPU's loops with 512-bit vectors on this host: AVX-512F with the opmask and ZMM state
// saved by the OS, on a core whose LLVM tuning does not prefer 256-bit vectors (Intel's AVX-512 cores do; measured on
// an AMD EPYC of family 26: a sum window of 32 folds in 16 lanes, reduce.cc).
inline bool hostWideVectors();
// AVX-512F, VL and DQ with the opmask and ZMM state saved by the OS: LLVM's X86 code for XLA:CPU then selects with
// masked moves (a select it folded into arithmetic comes back as a masked op that leaves the kept operand as it is)
// and tests a float's class by its bits (vfpclass: a denormal is not a zero there), and vectorises a column sum's
// last output over its rows with masked gathers (reduce_kernels.h, tailColumnFold); whatever the vector width.
inline bool hostHasAvx512();
// AVX512-FP16, and the OS saves the opmask and ZMM state. jaxlib 0.12's XLA:CPU computes a bf16 maximum or minimum
// in f32 under its denormals-are-zero mode (a bf16 denormal read as a zero: measured on an AMD EPYC with AVX2 only,
// and on one of family 26 with AVX512-BF16), but kept bf16 denormals on an earlier host with AVX512-BF16, which by
// elimination had AVX512-FP16 too (Intel's Sapphire Rapids): scalar_ops.h, ieee16Daz.
inline bool hostHasAvx512Fp16();
// AVX512-FP16 on a core whose CPUID model LLVM names as one that has it (Sapphire Rapids and later Xeons). jaxlib
// 0.12's XLA:CPU computes bf16 maxima and minima in bf16, keeping denormals, only there: on a host whose CPUID sets
// the AVX512-FP16 bit but names model 0xA7 (LLVM's rocketlake, which has none: a virtual machine's CPU of
// 2026-12-02), it reads them as zeros as on any AVX-512 host (test_denormals.py's bf16 extrema).
inline bool hostIsFp16Core();

// CPUID is read once per feature: the answers are function-local statics of inline functions, so that a kernel's
// check is a load and a branch (kernels test them per call, on the hot path of small loop bodies).
namespace detect {
bool avx2();
bool f16c();
bool fma();
bool avx();
bool amd();
bool fastGather();
bool wideVectors();
bool avx512();
bool avx512Fp16();
bool fp16Core();
}  // namespace detect
inline bool hostHasAvx2() {
  static const bool yes = detect::avx2();
  return yes;
}
inline bool hostHasF16C() {
  static const bool yes = detect::f16c();
  return yes;
}
inline bool hostHasFma() {
  static const bool yes = detect::fma();
  return yes;
}
inline bool hostHasAvx() {
  static const bool yes = detect::avx();
  return yes;
}
inline bool hostIsAmd() {
  static const bool yes = detect::amd();
  return yes;
}
inline bool hostGathersFast() {
  static const bool yes = detect::fastGather();
  return yes;
}
inline bool hostWideVectors() {
  static const bool yes = detect::wideVectors();
  return yes;
}
inline bool hostHasAvx512() {
  static const bool yes = detect::avx512();
  return yes;
}
inline bool hostHasAvx512Fp16() {
  static const bool yes = detect::avx512Fp16();
  return yes;
}

// The host's own approximate reciprocal square root (rsqrtss; 1/sqrt off x86-64): implementation-defined bits, which
// jaxlib 0.12's XLA:CPU starts its rsqrt from (scalar_ops.h: rsqrt012).
float hostRsqrtApprox(float x);

inline bool hostIsFp16Core() {
  static const bool yes = detect::fp16Core();
  return yes;
}

}  // namespace ipu
