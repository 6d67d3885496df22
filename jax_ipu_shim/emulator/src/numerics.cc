#include "ipu/numerics.h"

namespace ipu {

bool parseNumerics(const std::string& name, Numerics* out) {
  if (name == "jaxlib-0.4") *out = Numerics::Jaxlib04;
  else if (name == "jaxlib-0.12") *out = Numerics::Jaxlib012;
  else return false;
  return true;
}

const char* numericsName(Numerics n) { return n == Numerics::Jaxlib012 ? "jaxlib-0.12" : "jaxlib-0.4"; }

}  // namespace ipu
