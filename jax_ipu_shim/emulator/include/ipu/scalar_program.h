// A region of scalar elementwise ops (a reduce body) compiled into straight-line code over a register file.
//
// Built once at compile time; running it touches no JSON and allocates nothing. Each register holds one element in
// its storage form (ipu/scalar_ops.h) in its low bytes. The op semantics are the shared functors of scalar_ops.h,
// so an interpreted body computes exactly what the vector kernels compute.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "ipu/emulator.h"
#include "ipu/program.h"

namespace ipu {

// A register: one element in its storage form, in its low bytes (8 bytes: the widest type, f64/i64/u64).
using ScalarReg = uint64_t;
constexpr size_t kRegBytes = sizeof(ScalarReg);

struct ScalarInstr;
using ScalarExec = void (*)(ScalarReg* regs, const ScalarInstr& instr);

// dst = op(a[, b[, c]]): `exec` is the op instantiated for its storage types.
struct ScalarInstr {
  ScalarExec exec = nullptr;
  int32_t dst = 0, a = 0, b = 0, c = 0;
};

class ScalarProgram {
 public:
  // Compiles `region`, whose params must be scalars of `param_types` (they get registers 0, 1, ...) and whose results
  // must be scalars of `result_types`. Allowed ops: every unary, binary, compare, select, clamp and convert the
  // registry has for the types used, scalar constants and bitcast_convert (also to/from i16/u16, which exist only
  // inside bodies: jax's f16 sort comparators use them). Throws Error(Unimplemented) naming any other op (or an
  // unsupported type), Error(InvalidArgument) for a malformed region; the message is the reason alone.
  // `numerics`: whose arithmetic the ops compute (the program's; ipu/numerics.h).
  static ScalarProgram compile(const Region& region, const std::vector<DType>& param_types,
                               const std::vector<DType>& result_types, Numerics numerics);

  int numRegisters() const { return num_registers_; }
  // Writes the constants into their registers; once per register file (no instruction overwrites them).
  void loadConstants(ScalarReg* regs) const {
    for (const auto& c : constants_) regs[c.first] = c.second;
  }
  void run(ScalarReg* regs) const {
    for (const ScalarInstr& i : code_) i.exec(regs, i);
  }
  int resultRegister(size_t i) const { return results_[i]; }
  size_t numInstructions() const { return code_.size(); }
  // Sum of the instructions' per-element cycles (cost::elementwisePerElement) and floating-point operations.
  double cyclesPerElement() const { return cycles_; }
  double flopsPerElement() const { return flops_; }
  const std::string& summary() const { return summary_; }  // the ops in order: "compare,compare,or,..."

  // Recognises a sort comparator of the form compare(LT or GT, key(lhs_0, lhs_1, ...), key(rhs_0, rhs_1, ...)), its
  // params in (lhs, rhs) pairs and both sides computed by the same instructions (jax's total-order comparator:
  // bitcasts and selects on each side, then one lt). The comparator is then "sort by key": on success `*key` runs only
  // the lhs side (lhs_k loaded into register 2k), leaving the key in register cmp->key_register.
  struct KeyCompare {
    int key_register = 0;
    DType dtype = DType::F32;  // the compare's operand type (an i16/u16 key: I32/U32, held extended)
    std::string direction, compare_type;
  };
  bool splitKeyCompare(ScalarProgram* key, KeyCompare* cmp) const;

  // The program as one op of its params and nothing else (a plain reduce, scatter or select body): result 0 =
  // op(param params[0], param params[1], ...). `*op` gets the op's name ("add", "compare", ...) and `*direction`
  // a compare's comparison_direction (else ""), so a caller can run its native kernel for exactly that op.
  bool singleOp(std::string* op, std::vector<int>* params, std::string* direction) const;

 private:
  // What splitKeyCompare needs to know of each instruction besides its trampoline.
  struct InstrInfo {
    int arity = 1;
    DType dtype = DType::F32;
    std::string name;
    std::string direction, compare_type;  // compares only
  };
  std::vector<InstrInfo> info_;  // parallel to code_
  // The instructions (in code order) that `reg`'s value, as instruction `before` reads it, depends on.
  std::vector<size_t> sliceOf(int reg, size_t before) const;
  std::vector<ScalarInstr> code_;
  std::vector<std::pair<int, ScalarReg>> constants_;  // (register, bits)
  std::vector<int> results_;
  int num_registers_ = 0;
  int num_params_ = 0;
  double cycles_ = 0;
  double flops_ = 0;
  std::string summary_;
};

// One kernel call's register file for a ScalarProgram, constants loaded: on the stack for the usual small bodies,
// on the heap only past kInline registers. At least `min_registers` (callers that address fixed slots).
class ScalarRegisters {
 public:
  explicit ScalarRegisters(const ScalarProgram& program, int min_registers = 0) {
    const int n = std::max(program.numRegisters(), min_registers);
    if (n > kInline) {
      heap_.assign(static_cast<size_t>(n), 0);
      regs_ = heap_.data();
    }
    program.loadConstants(regs_);
  }
  ScalarRegisters(const ScalarRegisters&) = delete;
  ScalarRegisters& operator=(const ScalarRegisters&) = delete;
  ScalarReg* data() { return regs_; }
  uint8_t* bytes() { return reinterpret_cast<uint8_t*>(regs_); }

 private:
  static constexpr int kInline = 64;
  ScalarReg inline_[kInline] = {};
  std::vector<ScalarReg> heap_;
  ScalarReg* regs_ = inline_;
};

// Copies one element of 1, 2, 4 or 8 bytes (the sizes of the IPU types) between a tensor and a program register.
inline void copyElement(uint8_t* dst, const uint8_t* src, size_t size) {
  switch (size) {
    case 1: *dst = *src; break;
    case 2: std::memcpy(dst, src, 2); break;
    case 4: std::memcpy(dst, src, 4); break;
    default: std::memcpy(dst, src, 8); break;
  }
}

}  // namespace ipu
