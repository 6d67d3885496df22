// Cycle and memory cost figures: per-vertex estimates in the shape of poplibs' cycle estimators.
#pragma once

#include <cstdint>

#include "ipu/emulator.h"
#include "ipu/registry.h"

namespace ipu {
namespace cost {

// Calibrated assumptions (unpublished figures; see docs/ipu-model.md for the published ones).
constexpr uint64_t kSyncCycles = 100;            // one on-chip sync; poplibs models only inter-IPU sync (15 ns/hop)
constexpr uint64_t kSupervisorCycles = 50;       // per vertex: launching the workers of a multi-vertex
constexpr uint64_t kControlCycles = 30;          // reading a predicate / index for RepeatWhileTrue and Switch
constexpr int64_t kVertexStateBytes = 32;        // per vertex: pointers to its operand regions and sizes
constexpr int64_t kCodeletCodeBytes = 384;       // per codelet type present on a tile (poplibs codelets: a few 100 B)

// Cycles of one tile running an elementwise op (unary, binary, compare, select, clamp, convert, copy) over
// `elements` outputs of type `dtype` spread over the tile's workers: 6 x slowest worker + supervisor.
uint64_t elementwise(OpKind kind, DType dtype, int64_t elements, int workers);
// The cycles per element that elementwise() charges for an op (its per-vector figure over the vector width): what
// one instruction of a scalar reduce body costs per element.
double elementwisePerElement(OpKind kind, DType dtype);
// A copy of `bytes` bytes on one tile (shape ops: the rearrangement after the exchange).
uint64_t copy(int64_t bytes, int workers);
// Reducing `inputs` elements into `outputs` accumulators on one tile.
uint64_t reduce(DType dtype, int64_t inputs, int64_t outputs, int workers);
// Reducing `inputs` elements into `outputs` accumulators on one tile with a general (interpreted) body that costs
// `body_cycles` per element combined: scalar code, one element per step.
uint64_t reduceBody(double body_cycles, int64_t inputs, int64_t outputs, int workers);
// A matmul on one tile: `outputs` output positions with `depth` MACs each, on the AMP for f16/f32.
uint64_t matmul(DType dtype, int64_t outputs, int64_t depth, int workers);
uint64_t exchange(int64_t bytes, double bytes_per_cycle);
// Floating-point operations an elementwise op performs per element (for the FLOP count).
double flopsPerElement(OpKind kind);

}  // namespace cost
}  // namespace ipu
