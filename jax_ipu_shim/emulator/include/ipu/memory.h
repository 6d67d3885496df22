// Memory of a lowered program: per-tile accounting (the IPU Model's report) and the host arena of a run.
#pragma once

#include <string>
#include <utility>

#include "ipu/graph.h"

namespace ipu {

// The program steps [first, last] during which a slot's storage must be kept: from its definition to its last use,
// extended to the end of each loop that reads it but does not define it (the next iteration reads it again).
// Loop-carried values are defined by the loop's init copy, so they live over the whole loop. `first` is -1 for a
// slot defined before the program (params).
std::pair<int64_t, int64_t> liveRange(const Graph& graph, const Slot& slot);

// Bytes per tile at the program's peak: always-live tensors (params, results, constants) + tensors live at each
// step (their liveRange) + that step's exchange receive buffers + vertex state + code of each codelet type on the
// tile. A result computed in place (Node::in_place, Node::overwrites) at its operand's last read takes the
// operand's bytes, as Graphcore's XLA backend lays such ops out.
MemoryReport computeMemory(const Graph& graph);

// Marks the results that the program's `aliases` ([parameter, result] pairs: donated inputs) return in place of a
// parameter (Slot::donated), so that tile memory counts each donated variable once. Called before computeMemory.
void markDonatedResults(Graph* graph, const std::vector<std::pair<int, int>>& aliases);

// Throws Error(ResourceExhausted) in Poplar's words when a tile is over its memory, unless `allow_out_of_memory`
// (CompileOptions: Poplar's debug.allowOutOfMemory, for a profile report of a program too big).
void checkMemory(const MemoryReport& report, const DeviceDescription& device, bool allow_out_of_memory);

// The profile report's graph part as JSON (jax_ipu.report, "jax-ipu-profile" v1): per tile the bytes of each
// memory category at the tile's peak (variables = always-live tensors, not_always_live incl. the exchange buffers
// of the peak step, vertex_state, code; they add up to MemoryReport::bytes_per_tile), liveness per program step
// (bytes over all tiles and on the fullest tile while the step runs) and the program tree (Sequence, Execute,
// RepeatWhileTrue {cond, body}, Switch branches, ...) with step ids.
std::string profileJson(const Graph& graph);

// Whether an Execute node computes `result` in place over `operand` (Node::in_place): a result whose op is the last
// read of a donated input can then be computed in that input's buffer.
bool updatesInPlace(const Graph& graph, int operand, int result);

// The result of an op that updates its operand in place (Node::in_place) shares the operand's host bytes
// (Slot::share) when the op is the operand's last read and no loop runs the op without redefining the operand, so
// that the kernel writes only what changes. Host storage only (the per-tile memory report counts in-place results
// by its own rule, computeMemory); cycles are unchanged. Called by layoutArena.
void shareInPlaceResults(Graph* graph);

// Places the arena slots in a run's host arena: two slots share bytes only if their live ranges do not overlap
// (results live to the end of the program). Greedy by size, first fit over the offsets free during a slot's range.
// Sets Slot::offset, Graph::arena_bytes and Graph::peak_live_bytes.
void layoutArena(Graph* graph);

}  // namespace ipu
