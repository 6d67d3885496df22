// Host CPU features, for kernels that pick a vectorised variant at run time (AVX2 loops, F16C conversions).
// Read once with CPUID + XGETBV: __builtin_cpu_supports needs a compiler-rt symbol (__cpu_model) that zig's runtime,
// which links the release build, lacks. Both are false off x86-64.
#pragma once

namespace ipu {

bool hostHasAvx2();  // AVX2, and the OS saves YMM state
bool hostHasF16C();  // AVX + F16C, and the OS saves YMM state
bool hostHasFma();   // FMA3, and the OS saves YMM state
bool hostHasAvx();   // AVX, and the OS saves YMM state
bool hostIsAmd();    // CPUID's vendor is AuthenticAMD
// Whether LLVM vectorises a loop of strided loads with gathers on this host, as it decides for XLA:CPU, which
// compiles for the host's CPU (X86TTIImpl::supportsGather: AVX-512F, or AVX2 with the fast-gather tuning of Intel's
// cores from Skylake on, marked here by CLFLUSHOPT, which Skylake introduced). Where it does not (AMD's Zen 1-3),
// XLA:CPU folds a window over a dimension that is not the innermost one element at a time (reduce.cc).
bool hostGathersFast();
// AVX512-BF16, and the OS saves the opmask and ZMM state: LLVM computes a bf16 maximum or minimum in bf16 itself there
// (a bf16 denormal kept), elsewhere in f32 under XLA:CPU's denormals-are-zero mode (a bf16 denormal read as a zero):
// jaxlib 0.12's numerics (scalar_ops.h, ieee16Daz).
bool hostHasAvx512Bf16();

// The host's own approximate reciprocal square root (rsqrtss; 1/sqrt off x86-64): implementation-defined bits, which
// jaxlib 0.12's XLA:CPU starts its rsqrt from (scalar_ops.h: rsqrt012).
float hostRsqrtApprox(float x);

}  // namespace ipu
