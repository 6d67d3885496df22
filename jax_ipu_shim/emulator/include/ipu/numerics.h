// Which XLA:CPU the emulator's arithmetic reproduces. The emulator computes what backend="cpu" computes, bit for bit
// where it can, and XLA:CPU changed its floating-point semantics between the two jaxlib series jax-ipu serves:
//
//   Jaxlib04  jaxlib 0.4.13: maximum/minimum are selects (lhs wins ties, denormals pass through); exp, log, tanh...
//             are XLA's own polynomials (ipu/xla_math.h).
//   Jaxlib012 jaxlib 0.12: maximum/minimum are IEEE 754-2019's maximum/minimum of operands read with denormals as
//             zeros (-0 < +0, NaN propagates), as clamp and reductions built on them; exp, logistic, tanh, log1p
//             and atan follow Eigen's or XLA's newer code (xla_math::exp012...), erf XLA's HLO erf
//             (special::erf012), tan the host's tanf.
//
// A program document names its numerics ("numerics": "jaxlib-0.4" or "jaxlib-0.12"; absent: jaxlib-0.4), chosen by
// the front end for the jaxlib it runs under (jax_ipu._jax). Op kernels are chosen while a program is lowered: the
// lowering passes the program's numerics to the visitors of ipu/scalar_ops.h (Lowerer::numerics()); nothing is
// process- or thread-wide.
#pragma once

#include <string>

namespace ipu {

enum class Numerics { Jaxlib04, Jaxlib012 };

// "jaxlib-0.4" / "jaxlib-0.12"; false for any other name.
bool parseNumerics(const std::string& name, Numerics* out);
const char* numericsName(Numerics n);

}  // namespace ipu
