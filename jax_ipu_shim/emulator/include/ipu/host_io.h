// Host I/O of a lowered program: which host streams and host functions its program tree uses (host_io.cc).
#pragma once

#include "ipu/graph.h"

namespace ipu {

struct HostIOUse {
  bool infeed = false;     // a host-to-device StreamCopy (stablehlo.infeed)
  bool outfeed = false;    // a device-to-host StreamCopy (stablehlo.outfeed)
  bool callbacks = false;  // a HostCall (custom_call @jax_ipu_host_callback)
};

HostIOUse hostIOUse(const Node& root);

}  // namespace ipu
