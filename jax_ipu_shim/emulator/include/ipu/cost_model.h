// Cycle and memory cost figures: per-vertex estimates in the shape of poplibs' cycle estimators.
//
// Every figure says where it comes from: "ipu-model.md" (docs/ipu-model.md: published figures and the shapes of
// poplibs' estimators), "derived" (arithmetic on those), or "calibrated" (unpublished: chosen to be plausible and
// to keep estimates consistent across ops; change them freely). Link, host-link and inter-IPU sync figures are
// per chip and live in device.cc with the rest of the hardware table.
#pragma once

#include <cstdint>
#include <vector>

#include "ipu/emulator.h"
#include "ipu/registry.h"

namespace ipu {
namespace cost {

// ipu-model.md: a supervisor overhead of roughly 10-50 cycles per vertex (launching the workers of a multi-vertex);
// we take the top of that range.
constexpr uint64_t kSupervisorCycles = 50;
// Calibrated: reading the predicate / index of a RepeatWhileTrue or Switch on the supervisor (the broadcast to
// every tile is a sync, charged as DeviceDescription::sync_cycles).
constexpr uint64_t kControlCycles = 30;
// The share of a tile's memory a matmul or convolution plan may use for its temporaries (received operand blocks
// and partials): poplibs' poplin option availableMemoryProportion, its default (MatMul.hpp, Convolution.hpp: 0.6).
// A plan of the whole that needs more is computed in row chunks (dot.cc's serial split; fidelity rows
// chip.matmul_f16_4096x4096x2048 and the other whole-chip matmuls).
constexpr double kAvailableMemoryProportion = 0.6;
// Calibrated: vertex state per vertex (pointers to its operand regions and their sizes).
constexpr int64_t kVertexStateBytes = 32;
// Calibrated: code of each codelet type present on a tile (poplibs codelets are a few hundred bytes).
constexpr int64_t kCodeletCodeBytes = 384;

// A tile's compute cycles for a compute set of codelet vertices: their worker-cycle estimates shared among the
// tile's `workers` contexts longest first, the busiest worker's total times `workers` (the barrel gives each worker
// one cycle in `workers`), plus the supervisor's share. The graph API's Engine and jax_ipu.tile's vertices.
uint64_t vertexTile(std::vector<uint64_t> vertex_cycles, int workers);

// ipu-model.md (poplibs elementwise estimators): cycles of one tile running an elementwise op (unary, binary,
// compare, select, clamp, convert, copy) over `elements` outputs of type `dtype` spread over the tile's workers:
// 6 x the slowest worker (fixed + per 64-bit vector) + supervisor. The per-op figures are the op's registry row's
// (ElementCost, marked (doc) or calibrated in registry.cc).
uint64_t elementwise(OpKind kind, DType dtype, int64_t elements, int workers);
// One worker running an elementwise op over `elements` outputs (a vertex of the graph API): elementwise()'s per-worker
// figure, in worker cycles (a tile runs its workers in turn: 6 tile cycles per worker cycle).
uint64_t elementwiseWorker(OpKind kind, DType dtype, int64_t elements);
// One worker reducing `inputs` elements into one output: reduce()'s per-worker figure, in worker cycles.
uint64_t reduceWorker(DType dtype, int64_t inputs);
// The cycles per element that elementwise() charges for an op (its per-vector figure over the vector width): what
// one instruction of a scalar reduce body or sort comparator costs per element.
double elementwisePerElement(OpKind kind, DType dtype);
// Derived (ipu-model.md: one 64-bit vector op per worker per cycle): a copy of `bytes` bytes on one tile, one 64-bit
// load/store per worker per cycle, 20 cycles fixed per worker (calibrated). Shape ops' rearrangement after the
// exchange, Copy programs.
uint64_t copy(int64_t bytes, int workers);
// ipu-model.md (accumulators 4 wide in f32, 8 in f16; one vector per cycle); integers 2 cycles per element and
// 2 cycles per output stored (calibrated): reducing `inputs` elements into `outputs` accumulators on one tile.
uint64_t reduce(DType dtype, int64_t inputs, int64_t outputs, int workers);
// Calibrated (scalar code, one element per step): reducing `inputs` elements into `outputs` accumulators on one
// tile with a general (interpreted) body that costs `body_cycles` per element combined.
uint64_t reduceBody(double body_cycles, int64_t inputs, int64_t outputs, int workers);
// ipu-model.md (matmul is a 1x1 convolution on the AMP; per worker ~40 cycles + 4 (f16) or 8 (f32) per output
// position, the AMP's own rate: a position is a 16 x 16 f16 or 8 x 8 f32 block of multiply-adds): a matmul on one
// tile of `outputs` output elements with `depth` MACs each, at the chip's AMP rate (DeviceDescription: derived from
// its published peak; fidelity rows chip.peak_fp16/fp32 and tile.amp_fp16_*), the contraction rounded up to whole
// AMP passes, plus the fixed cost of the device's workers. Integers and the emulated 64-bit types have no AMP path
// (calibrated: one MAC per worker every 2 cycles; the 64-bit types one multiply-add sequence per MAC), and store each
// output (8 cycles per output per worker).
uint64_t matmul(DType dtype, int64_t outputs, int64_t depth, const DeviceDescription& device);
// Calibrated (poprand's shape: each worker draws 64 random bits per cycle from the tile's hardware generator, then
// scales and offsets them with one vector multiply-add): `elements` random numbers of `dtype` on one tile, 4 cycles
// per 64-bit vector of floats; integers take a software remainder, ~20 cycles per element.
uint64_t random(DType dtype, int64_t elements, int workers);
// ipu-model.md: exchange cycles = ceil(bytes / bytes-per-cycle) for one tile receiving `bytes`.
uint64_t exchange(int64_t bytes, double bytes_per_cycle);
// Floating-point operations an elementwise op performs per element, for the FLOP count (its registry row's
// ElementCost::flops).
double flopsPerElement(OpKind kind);

// ---- Sort and top_k (poplibs shape: popops sorts each slice on one tile; a slice too big for a tile is sorted
// across tiles as a distributed bitonic sort). A merge or bitonic sort of m elements is ~m ceil(log2 m)
// compare-exchange steps; the exchanges (slices gathered onto their tiles, partner blocks swapped) are costed by the
// supersteps that carry them, like any exchange.

// Calibrated: cycles of one compare-exchange step: the comparator (`comparator_cycles`, the cost of its scalar
// program), loading the 2 elements compared of each of `operands` operands, and 4 cycles of loop and swap.
double sortCompareCycles(double comparator_cycles, int operands);
// One worker sorting one slice of `n` elements: n ceil(log2 n) compare-exchange steps, then permuting the operands
// (2 cycles per element and operand: a load and a store).
double sortSliceCycles(int64_t n, double compare_cycles, int operands);
// One tile sorting `slices` whole slices of `n` elements, the slices shared among its workers (6 x the busiest
// worker + supervisor; 30 cycles fixed per worker, calibrated).
uint64_t sortSlices(int64_t slices, int64_t n, double compare_cycles, int operands, int workers);
// Distributed sort, first superstep: one tile sorting its block of `elements` (each worker sorts 1/workers of it,
// then the block is merged: ceil(log2 6) = 3 passes of compare-exchanges over the block).
uint64_t sortBlock(int64_t elements, double compare_cycles, int operands, int workers);
// Distributed sort, one merge round: a tile compares its block of `elements` with its partner's and keeps half.
uint64_t sortMergeRound(int64_t elements, double compare_cycles, int workers);
// Merge rounds of a bitonic sort over `tiles` blocks: log2(P) (log2(P) + 1) / 2, P rounded up to a power of 2.
int64_t bitonicMergeRounds(int tiles);
// top_k, one slice of `n`: keeping the best k in a heap, ~n (6 ceil(log2(k+1)) + 4) cycles (calibrated: a compare,
// a load and a sift of ceil(log2(k+1)) levels at ~6 cycles each).
double topKSliceCycles(int64_t n, int64_t k);
// One tile running top_k over `slices` whole slices, shared among its workers.
uint64_t topK(int64_t slices, int64_t n, int64_t k, int workers);

}  // namespace cost
}  // namespace ipu
