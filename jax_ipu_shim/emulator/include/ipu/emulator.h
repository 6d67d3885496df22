// The emulator's public C++ interface: programs in; results, memory maps and cycle estimates out.
//
// This is all that the PJRT layer (and any other client) may include. It knows nothing of JAX, MLIR or PJRT.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace ipu {

// Element types the emulated IPU stores. Everything else in a program is rejected by name at compile time.
enum class DType : uint8_t { Bool, F16, F32, I32, U32 };

size_t dtypeSize(DType dtype);
const char* dtypeName(DType dtype);  // "bool", "f16", "f32", "i32", "u32"

struct TensorType {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;

  int64_t numElements() const;
  size_t numBytes() const;
  std::string str() const;  // MLIR spelling, e.g. "tensor<2x3xf32>", "tensor<i1>"
};

// What kind of failure an Error is; the PJRT layer maps it onto its error codes.
enum class ErrorCode { InvalidArgument, Unimplemented, ResourceExhausted, Internal };

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

// One IPU: the single place that holds hardware parameters. Several devices are a list of these.
struct DeviceDescription {
  std::string version;             // "ipu1", "ipu2", "ipu21"
  int num_tiles = 0;               // tiles in use (the IPU Model may use fewer than the chip has)
  int tiles_per_chip = 0;          // tiles the chip has
  int64_t bytes_per_tile = 0;      // SRAM per tile
  int num_worker_contexts = 0;     // hardware worker threads per tile
  int64_t tile_clock_frequency = 0;  // Hz
  double exchange_bytes_per_cycle = 0;  // per tile

  // num_tiles == 0 means all tiles of the chip. Throws Error(InvalidArgument) for an unknown version or a tile
  // count outside 1..tiles_per_chip, naming the value and what is allowed.
  static DeviceDescription forVersion(const std::string& version, int num_tiles);
  std::string toJson() const;
};

// Per-tile memory of a compiled program (peak over the program's steps).
struct MemoryReport {
  std::vector<int64_t> bytes_per_tile;
  int worst_tile = 0;
  int64_t worst_bytes = 0;
  int64_t total_bytes = 0;
};

// Cycle estimate of one execution, split the way a BSP superstep is.
struct RunProfile {
  uint64_t total_cycles = 0;
  uint64_t compute_cycles = 0;
  uint64_t exchange_cycles = 0;
  uint64_t sync_cycles = 0;
  uint64_t supersteps = 0;
  std::string toJson() const;
};

// A program lowered onto a device's tiles. Immutable after compile; run() may be called from several threads.
class Executable {
 public:
  // Parses a "jax-ipu-program" v1 JSON document (see jax_ipu_shim/README.md) and lowers it onto `device`.
  // Throws Error: InvalidArgument for a malformed program, Unimplemented for an op or dtype the emulator lacks
  // (naming the op and its types), ResourceExhausted for a program that does not fit in tile memory
  // ("Out of memory on tile N: X bytes used but tiles only have B bytes of memory").
  static std::unique_ptr<Executable> compile(const std::string& program_json, const DeviceDescription& device);

  virtual ~Executable() = default;
  virtual const std::string& name() const = 0;
  virtual const DeviceDescription& device() const = 0;
  virtual const std::vector<TensorType>& inputTypes() const = 0;
  virtual const std::vector<TensorType>& outputTypes() const = 0;
  // (param index, result index) pairs: donated inputs whose buffers the outputs may reuse.
  virtual const std::vector<std::pair<int, int>>& aliases() const = 0;
  virtual const MemoryReport& memory() const = 0;
  virtual uint64_t estimatedCycles() const = 0;  // static: loop bodies counted once
  virtual double flops() const = 0;              // static
  virtual std::string infoJson() const = 0;      // inputs, outputs, memory summary, estimates

  // inputs[i] points at inputTypes()[i].numBytes() bytes; outputs[j] at outputTypes()[j].numBytes() writable bytes.
  // Throws Error on failure; never aborts.
  virtual RunProfile run(const std::vector<const void*>& inputs, const std::vector<void*>& outputs) const = 0;
};

}  // namespace ipu
