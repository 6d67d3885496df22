// Which elementwise ops of a region run fused, as one compute set with one vertex (Poplar's popops::map with an
// expression tree). Planned over a region's op list before it is lowered; the lowering (elementwise.cc) builds the
// fused vertex.
#pragma once

#include <cstddef>
#include <vector>

#include "ipu/program.h"

namespace ipu {

struct FusionPlan {
  std::vector<int> group_of;                // op index -> group, or -1: lowered on its own
  std::vector<std::vector<size_t>> groups;  // op indices in program order; the last one (the root) defines the result
};

// $JAX_IPU_FUSION: unset/empty or a true spelling (1, true, yes, on...) fuses; a false one (0, false, no, off...)
// lowers every op on its own. Anything else throws Error(InvalidArgument) naming the flag.
bool fusionEnabled();

// Groups chains of elementwise ops (unary, binary, compare, select, clamp, convert, and broadcast_in_dim, which
// Poplar expresses as a view, not a compute set) whose intermediate results have exactly one user, another member
// with as many elements: a tree whose only result leaves through its root. Users are the ops of the region and its
// nested regions that read a value (x * x has one) and the region's results. Groups of one op are not groups.
FusionPlan planFusion(const Region& region, bool enabled);

}  // namespace ipu
