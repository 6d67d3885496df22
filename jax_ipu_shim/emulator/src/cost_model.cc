// The per-vertex cycle estimates. Every worker gets a contiguous share of the tile's elements in whole vectors; a
// tile's cycles are 6 x the slowest worker's (the barrel-threaded pipeline runs each worker every 6th cycle) plus
// the supervisor's overhead. Figures marked (doc) come from docs/ipu-model.md (poplibs' estimators);
// every other number here is calibrated (unpublished, chosen to be plausible).
#include "ipu/cost_model.h"

#include <algorithm>
#include <cmath>

#include "ipu/dtype.h"

namespace ipu {
namespace cost {

namespace {

struct VectorCost {
  uint64_t fixed;       // per worker: call, pointer setup, loop prologue
  double per_vector;    // cycles per 64-bit vector (2 x f32, 4 x f16) or per element for 32-bit integers
};

int vectorWidth(DType dtype) {
  dtype = computeType(dtype);
  switch (dtype) {
    case DType::F16: return 4;
    case DType::F32: return 2;
    default: return 1;  // integers and bools go through the scalar pipeline
  }
}

// An op's figures from its registry row (ipu/registry.h ElementCost), for `dtype`.
VectorCost elementwiseCost(OpKind kind, DType dtype) {
  const ElementCost& c = opInfo(kind).cost;
  dtype = computeType(dtype);
  if (isWide64(dtype)) return {c.fixed, dtype == DType::F64 ? c.f64 : c.i64};  // per element (emulated)
  const double figure = dtype == DType::F16 ? c.f16 : isFloat(dtype) ? c.f32 : c.integer;
  return {c.fixed, c.per_element ? figure * vectorWidth(dtype) : figure};
}

// 6 x the slowest worker's cycles + the supervisor's, for `elements` elements in vectors of `width`.
uint64_t tileCycles(int64_t elements, int width, int workers, uint64_t fixed, double per_vector) {
  if (elements <= 0) return 0;
  const int64_t vectors = (elements + width - 1) / width;
  const int64_t per_worker = (vectors + workers - 1) / workers;
  const double worker = static_cast<double>(fixed) + per_vector * static_cast<double>(per_worker);
  return static_cast<uint64_t>(worker + 0.5) * static_cast<uint64_t>(workers) + kSupervisorCycles;
}

// A reduction's cycles per accumulator vector: 1 for floats, 2 per integer element; the emulated 64-bit types run
// their add's sequence per element (an i64 pair add, an f64 soft add).
double reducePerVector(DType dtype) {
  if (isWide64(dtype)) return opInfo(OpKind::Add).cost.*(dtype == DType::F64 ? &ElementCost::f64 : &ElementCost::i64);
  return isFloat(dtype) ? 1.0 : 2.0;
}

}  // namespace

uint64_t elementwise(OpKind kind, DType dtype, int64_t elements, int workers) {
  // The type that sets the vector width is the operand's; the caller passes the widest one.
  VectorCost c = elementwiseCost(kind, dtype);
  return tileCycles(elements, vectorWidth(dtype), workers, c.fixed, c.per_vector);
}

uint64_t elementwiseWorker(OpKind kind, DType dtype, int64_t elements) {
  const VectorCost c = elementwiseCost(kind, dtype);
  const int width = vectorWidth(dtype);
  const int64_t vectors = (std::max<int64_t>(elements, 0) + width - 1) / width;
  return static_cast<uint64_t>(static_cast<double>(c.fixed) + c.per_vector * static_cast<double>(vectors) + 0.5);
}

uint64_t reduceWorker(DType dtype, int64_t inputs) {
  dtype = computeType(dtype);
  const int width = dtype == DType::F16 ? 8 : dtype == DType::F32 ? 4 : 1;
  const double per = reducePerVector(dtype);
  const int64_t vectors = (std::max<int64_t>(inputs, 0) + width - 1) / width;
  return static_cast<uint64_t>(30.0 + per * static_cast<double>(vectors) + 0.5) + 2;  // + storing the output
}

double elementwisePerElement(OpKind kind, DType dtype) {
  return elementwiseCost(kind, dtype).per_vector / vectorWidth(dtype);
}

uint64_t copy(int64_t bytes, int workers) {
  // One 64-bit load/store pair per cycle and worker: a tile stores 8 bytes a cycle (fidelity row
  // chip.memory_write_bandwidth), and a worker's next access comes 6 cycles later (fidelity row tile.memory_latency).
  return tileCycles(bytes, 8, workers, 20, 1);
}

uint64_t random(DType dtype, int64_t elements, int workers) {
  const bool flt = isFloat(computeType(dtype));
  return tileCycles(elements, vectorWidth(dtype), workers, 29, flt ? 4 : 20);
}

uint64_t reduce(DType dtype, int64_t inputs, int64_t outputs, int workers) {
  dtype = computeType(dtype);
  // Accumulators are 4 wide in f32 and 8 in f16 (doc), one 128-bit load a cycle (fidelity row
  // chip.memory_read_bandwidth); integers reduce one element per 2 cycles.
  const int width = dtype == DType::F16 ? 8 : dtype == DType::F32 ? 4 : 1;
  const double per = reducePerVector(dtype);
  if (inputs <= 0) return 0;
  return tileCycles(inputs, width, workers, 30, per) + static_cast<uint64_t>(outputs) * 2;  // + storing outputs
}

uint64_t reduceBody(double body_cycles, int64_t inputs, int64_t outputs, int workers) {
  if (inputs <= 0) return 0;
  return tileCycles(inputs, 1, workers, 30, body_cycles) + static_cast<uint64_t>(outputs) * 2;  // + storing outputs
}

uint64_t matmul(DType dtype, int64_t outputs, int64_t depth, const DeviceDescription& device) {
  const bool quarter = isFloat8(dtype) && device.amp_f8_macs_per_cycle > 0;  // fp8 operands at the AMP's fp8 rate
  dtype = computeType(dtype);
  if (outputs <= 0) return 0;
  const int workers = device.num_worker_contexts;
  const uint64_t worker_fixed = 40;  // (doc)
  const uint64_t fixed = worker_fixed * static_cast<uint64_t>(workers) + kSupervisorCycles;
  depth = std::max<int64_t>(depth, 1);
  if (dtype == DType::F16 || dtype == DType::F32) {  // the AMP, whole passes of its input channels
    const bool half = dtype == DType::F16;
    const int64_t pass = half ? device.amp_f16_depth : device.amp_f32_depth;
    const double rate = quarter ? device.amp_f8_macs_per_cycle
                        : half  ? device.amp_f16_macs_per_cycle
                                : device.amp_f32_macs_per_cycle;
    const int64_t streamed = pass > 0 ? (depth + pass - 1) / pass * pass : depth;
    const double macs = static_cast<double>(outputs) * static_cast<double>(streamed);
    return static_cast<uint64_t>(std::ceil(macs / rate)) + fixed;
  }
  // No AMP path: the vector unit does one MAC per worker every 2 cycles (0.5 per tile cycle); the emulated 64-bit
  // types run one multiply-add's sequence per MAC, the tile issuing one instruction a cycle.
  const ElementCost& mul = opInfo(OpKind::Multiply).cost;
  const ElementCost& add = opInfo(OpKind::Add).cost;
  const double per_tile_macs_per_cycle = dtype == DType::F64 ? 1.0 / (mul.f64 + add.f64)
                                         : isWide64(dtype)   ? 1.0 / (mul.i64 + add.i64)
                                                             : 0.5;
  const double macs = static_cast<double>(outputs) * static_cast<double>(depth);
  const uint64_t per_output = 8;  // calibrated: storing each output, per worker
  const int64_t per_worker_outputs = (outputs + workers - 1) / workers;
  return static_cast<uint64_t>(macs / per_tile_macs_per_cycle) +
         per_output * static_cast<uint64_t>(per_worker_outputs) * static_cast<uint64_t>(workers) + fixed;
}

uint64_t vertexTile(std::vector<uint64_t> vertex_cycles, int workers) {
  std::sort(vertex_cycles.rbegin(), vertex_cycles.rend());
  std::vector<uint64_t> load(static_cast<size_t>(std::max(workers, 1)), 0);
  for (uint64_t c : vertex_cycles) *std::min_element(load.begin(), load.end()) += c;
  return *std::max_element(load.begin(), load.end()) * static_cast<uint64_t>(load.size()) + kSupervisorCycles;
}

namespace {

// 6 x the busiest worker's cycles + the supervisor's, for `units` units of `per_unit` cycles each shared among the
// workers, 30 cycles fixed per worker (call, loop setup; calibrated).
uint64_t workerUnits(int64_t units, double per_unit, int workers) {
  const int64_t per_worker = (units + workers - 1) / workers;
  const double worker = 30.0 + per_unit * static_cast<double>(per_worker);
  return static_cast<uint64_t>(worker + 0.5) * static_cast<uint64_t>(workers) + kSupervisorCycles;
}

double ceilLog2(double x) { return x > 1 ? std::ceil(std::log2(x)) : 0; }

}  // namespace

double sortCompareCycles(double comparator_cycles, int operands) {
  return comparator_cycles + 2.0 * static_cast<double>(operands) + 4.0;
}

double sortSliceCycles(int64_t n, double compare_cycles, int operands) {
  const double m = static_cast<double>(n);
  return m * (ceilLog2(m) * compare_cycles + 2.0 * static_cast<double>(operands));
}

uint64_t sortSlices(int64_t slices, int64_t n, double compare_cycles, int operands, int workers) {
  return workerUnits(slices, sortSliceCycles(n, compare_cycles, operands), workers);
}

uint64_t sortBlock(int64_t elements, double compare_cycles, int operands, int workers) {
  const int64_t per_worker = (elements + workers - 1) / workers;
  return workerUnits(workers, sortSliceCycles(per_worker, compare_cycles, operands), workers) +
         static_cast<uint64_t>(ceilLog2(static_cast<double>(workers)) * compare_cycles * static_cast<double>(elements));
}

uint64_t sortMergeRound(int64_t elements, double compare_cycles, int workers) {
  return workerUnits(elements, compare_cycles, workers);
}

int64_t bitonicMergeRounds(int tiles) {
  const int64_t log_p = static_cast<int64_t>(ceilLog2(static_cast<double>(tiles)));
  return log_p * (log_p + 1) / 2;
}

double topKSliceCycles(int64_t n, int64_t k) {
  return static_cast<double>(n) * (ceilLog2(static_cast<double>(k) + 1) * 6.0 + 4.0);
}

uint64_t topK(int64_t slices, int64_t n, int64_t k, int workers) {
  return workerUnits(slices, topKSliceCycles(n, k), workers);
}

uint64_t exchange(int64_t bytes, double bytes_per_cycle) {
  if (bytes <= 0) return 0;
  return static_cast<uint64_t>((static_cast<double>(bytes) + bytes_per_cycle - 1) / bytes_per_cycle);
}

double flopsPerElement(OpKind kind) { return opInfo(kind).cost.flops; }

}  // namespace cost
}  // namespace ipu
