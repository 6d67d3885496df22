// Per-tile memory accounting of a lowered program.
#pragma once

#include "ipu/graph.h"

namespace ipu {

// Bytes per tile at the program's peak: always-live tensors (params, results, constants) + tensors live at each
// step (from definition to last use; values read inside a loop stay live to the loop's end) + that step's exchange
// receive buffers + vertex state + code of each codelet type on the tile.
MemoryReport computeMemory(const Graph& graph);

// Throws Error(ResourceExhausted) in Poplar's words when a tile is over its memory.
void checkMemory(const MemoryReport& report, const DeviceDescription& device);

}  // namespace ipu
