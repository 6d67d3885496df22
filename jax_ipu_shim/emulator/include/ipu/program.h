// The "jax-ipu-program" v1 document as C++ structures (see jax_ipu_shim/README.md), parsed and checked for form.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ipu/json.h"
#include "ipu/numerics.h"

namespace ipu {

// A value's declaration. The dtype is kept as spelled so that unsupported types can be named in errors.
struct ValueDecl {
  int64_t id = 0;
  std::string dtype;
  std::vector<int64_t> shape;
  std::string mlirType() const;
};

struct Region;

struct Op {
  std::string op;    // "add"
  std::string mlir;  // "stablehlo.add"
  std::string loc;   // optional source location
  std::vector<int64_t> operands;
  std::vector<ValueDecl> results;
  json::Value attrs;  // an object (possibly empty)
  std::vector<Region> regions;
};

// A function body or an op's region: params, ops, and the operands of its terminator.
struct Region {
  std::vector<ValueDecl> params;
  std::vector<Op> body;
  std::vector<int64_t> results;
};

// How one of the entry's parameters or results, as a global array, is split over the program's copies (jax's
// tiled HloSharding): dimension d in tile[d] pieces, the pieces in row-major order of `tile` going to `devices`
// (partition ids); with replicate_last, the last entry of `tile` counts the copies that hold the same piece. Empty
// `tile`: every copy holds the whole array.
struct TileSharding {
  std::vector<int64_t> tile;
  std::vector<int64_t> devices;
  bool replicate_last = false;  // the last tile dimension counts devices holding the same piece
  // The kinds of the last tile dimensions (xla.OpSharding last_tile_dims: REPLICATED 0, UNREDUCED 6) when one holds
  // partial sums of the piece (jax's unreduced arrays), with or without one of copies; else empty.
  std::vector<int64_t> last_tile_dims;
  bool unreduced = false;  // not tiled: every device holds a partial sum of the whole array (XLA's {unreduced})
};

struct Function {
  std::string name;
  Region region;
};

struct Program {
  std::string name;
  std::string entry;
  std::vector<Function> functions;
  std::vector<std::pair<int, int>> aliases;
  int replicas = 1;  // IPUs the program runs on at once, one copy each (its collectives span them)
  // Of those copies, how many make one replica: copy c is partition c % partitions of replica c / partitions
  // (partitions > 1: a jit partitioned by XLA's SPMD partitioner, one partition per IPU; compiler/partitioner.py).
  int partitions = 1;
  // The host (process) of each copy, for programs over IPUs of several hosts (jax.distributed): collectives between
  // hosts cross the IPU-Machines' GW-Links. Empty: every copy on one host.
  std::vector<int> hosts;
  // The entry's parameters and results as global arrays (partitions > 1), for PJRT to report; empty otherwise.
  std::vector<TileSharding> param_shardings, result_shardings;
  // XLA's partitioned program (partitions > 1): its HloModuleProto, without its input/output aliases and SPMD
  // shardings (PJRT adds the program's own), for jax's view of the compiled program (as_text); empty otherwise.
  std::string partitioned_hlo;
  // Which XLA:CPU's arithmetic the kernels reproduce (ipu/numerics.h): "numerics" in the document.
  Numerics numerics = Numerics::Jaxlib04;
  const Function* find(const std::string& name) const;
};

// Throws Error(InvalidArgument) naming the first thing that is malformed.
// `text` is the JSON document, or the binary container the front end writes (program.cc): the same document followed
// by the raw byte blobs that its {"blob": index} attribute values refer to (constant payloads, never base64).
Program parseProgram(const std::string& text);
constexpr char kProgramContainerMagic[8] = {'J', 'I', 'P', 'U', 'P', 'R', 'G', '1'};

// Attribute accessors; each throws Error(InvalidArgument) naming the op and attribute when missing or mistyped.
int64_t attrInt(const Op& op, const char* name);
bool attrBool(const Op& op, const char* name, bool default_value);
std::string attrString(const Op& op, const char* name, const std::string& default_value = "\x01");
std::vector<int64_t> attrInts(const Op& op, const char* name, bool required = true);
// Raw bytes: a blob of the binary container, or (JSON text) a base64 string.
std::vector<uint8_t> attrBytes(const Op& op, const char* name);
bool hasAttr(const Op& op, const char* name);

}  // namespace ipu
