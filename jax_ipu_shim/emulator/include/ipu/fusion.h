// Which elementwise ops of a region run fused, as one compute set with one vertex (Poplar's popops::map with an
// expression tree). Planned over a region's op list before it is lowered; the lowering (elementwise.cc) builds the
// fused vertex.
#pragma once

#include <cstddef>
#include <vector>

#include "ipu/program.h"

namespace ipu {

struct FusionPlan {
  static constexpr int kView = -2;          // a broadcast lowered only as a view of each group that reads it
  std::vector<int> group_of;                // op index -> group, -1: lowered on its own, or kView
  std::vector<std::vector<size_t>> groups;  // op indices in program order; the last one (the root) defines the result
};

// Groups elementwise ops (unary, binary, compare, select, clamp, convert, and broadcast_in_dim, which Poplar
// expresses as a view, not a compute set) whose intermediate results are read only by other members with as many
// elements: a DAG (a value may feed several members, as x does in x * x + x) whose only result leaves through its
// root, the group's last op. A value read by a nested region or returned by the region is not an intermediate.
// Groups of one op are not groups. A broadcast that joins no group but is read only by elementwise ops of its size
// is a view in each group that reads it (kView), not a tensor of its own.
FusionPlan planFusion(const Region& region, bool enabled);

}  // namespace ipu
