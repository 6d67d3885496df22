// Compilation of scalar regions (reduce bodies) into ScalarProgram instructions; see ipu/scalar_program.h.
#include "ipu/scalar_program.h"

#include <cstring>
#include <unordered_map>

#include "ipu/cost_model.h"
#include "ipu/dtype.h"
#include "ipu/json.h"
#include "ipu/registry.h"
#include "ipu/scalar_ops.h"

namespace ipu {

namespace {

template <class T>
inline T load(const ScalarReg* regs, int32_t r) {
  T v;
  std::memcpy(&v, regs + r, sizeof(T));
  return v;
}
template <class T>
inline void store(ScalarReg* regs, int32_t r, T v) {
  std::memcpy(regs + r, &v, sizeof(T));
}

// One instantiation per (functor, storage types): the functor is stateless, so the call inlines into the trampoline.
template <class F, class A, class O>
void exec1(ScalarReg* r, const ScalarInstr& i) {
  store<O>(r, i.dst, F{}(load<A>(r, i.a)));
}
template <class F, class A, class B, class O>
void exec2(ScalarReg* r, const ScalarInstr& i) {
  store<O>(r, i.dst, F{}(load<A>(r, i.a), load<B>(r, i.b)));
}
template <class F, class A, class B, class C, class O>
void exec3(ScalarReg* r, const ScalarInstr& i) {
  store<O>(r, i.dst, F{}(load<A>(r, i.a), load<B>(r, i.b), load<C>(r, i.c)));
}

[[noreturn]] void fail(ErrorCode code, const std::string& why) { throw Error(code, why); }

// A bitcast: every element type lives in the low bytes of its register, so copying the register reinterprets the
// value whatever its width (a consumer reads only its own type's bytes).
void copyRegister(ScalarReg* r, const ScalarInstr& i) { store<ScalarReg>(r, i.dst, load<ScalarReg>(r, i.a)); }

struct Value {
  int reg;
  DType dtype;
  const ValueDecl* decl;
};

}  // namespace

ScalarProgram ScalarProgram::compile(const Region& region, const std::vector<DType>& param_types,
                                     const std::vector<DType>& result_types, Numerics numerics) {
  ScalarProgram p;
  std::unordered_map<int64_t, Value> env;
  if (region.params.size() != param_types.size())
    fail(ErrorCode::InvalidArgument, "the body must take " + std::to_string(param_types.size()) + " scalar arguments");
  for (size_t i = 0; i < region.params.size(); ++i) {
    const ValueDecl& d = region.params[i];
    if (isComplex(param_types[i]))  // a register holds one real value; a complex pair is not interpreted
      fail(ErrorCode::Unimplemented,
           std::string(dtypeName(param_types[i])) + " values (emulated as pairs of " +
               dtypeName(complexPart(param_types[i])) +
               ") run only in single-op bodies (add, multiply); this body or comparator takes " + d.mlirType());
    DType dt;
    if (!parseDType(d.dtype, &dt) || dt != param_types[i] || !d.shape.empty())
      fail(ErrorCode::InvalidArgument, "body argument " + std::to_string(i) + " must be a " +
                                           TensorType{param_types[i], {}}.str() + ", not " + d.mlirType());
    if (!env.emplace(d.id, Value{p.num_registers_++, dt, &d}).second)
      fail(ErrorCode::InvalidArgument, "body argument %" + std::to_string(d.id) + " is declared twice");
  }

  p.num_params_ = p.num_registers_;
  for (const Op& op : region.body) {
    std::vector<const ValueDecl*> decls;
    std::vector<Value> args;
    for (int64_t id : op.operands) {
      auto it = env.find(id);
      if (it == env.end())
        fail(ErrorCode::InvalidArgument,
             "operand %" + std::to_string(id) + " of " + op.mlir + " in the body is not defined before its use");
      args.push_back(it->second);
      decls.push_back(it->second.decl);
    }
    const std::string sig = opSignature(op, decls);
    const OpInfo* info = findOp(op.op);
    if (!info)
      fail(ErrorCode::Unimplemented, "the emulator does not implement " + op.mlir + " (in the body: " + sig + ")");
    const OpFamily family = info->family;
    if (!isElementwiseFamily(family) && info->kind != OpKind::Constant && info->kind != OpKind::BitcastConvert)
      fail(ErrorCode::Unimplemented,
           "a body may use elementwise ops (unary, binary, compare, select, clamp, convert, bitcast_convert) and "
           "scalar constants; " +
               op.mlir + " is not implemented in a reduce body or sort comparator (" + sig + ")");
    if (op.results.size() != 1) fail(ErrorCode::InvalidArgument, sig + " in the body must have one result");
    const ValueDecl& res = op.results[0];
    DType out;
    if (!parseDType(res.dtype, &out))
      fail(ErrorCode::Unimplemented,
           "Unsupported element type " + res.dtype + " in " + sig + " : " + unsupportedDTypeAdvice(res.dtype));
    const int n = static_cast<int>(args.size());
    if (n < info->min_operands || (info->max_operands >= 0 && n > info->max_operands))
      fail(ErrorCode::InvalidArgument, sig + " in the body has the wrong number of operands");
    if (!res.shape.empty()) fail(ErrorCode::InvalidArgument, sig + " in the body must compute a scalar");
    for (const ValueDecl* d : decls)
      if (!d->shape.empty()) fail(ErrorCode::InvalidArgument, sig + " in the body must take scalars");
    // The registry's element types for the op (as lowerOp checks them outside bodies).
    DType checked = out;
    if (info->role == TypeRole::Operand0) checked = args[0].dtype;
    if (info->role == TypeRole::Operand1) checked = args[1].dtype;
    if (!(info->dtypes & dtypeBit(checked)))
      fail(ErrorCode::Unimplemented,
           std::string(info->name) + " is implemented for " + dtypeList(info->dtypes) + " (in the body: " + sig + ")");

    const int dst = p.num_registers_++;
    if (!env.emplace(res.id, Value{dst, out, &res}).second)
      fail(ErrorCode::InvalidArgument, "value %" + std::to_string(res.id) + " is defined twice in the body");

    if (info->kind == OpKind::Constant) {
      std::vector<uint8_t> bytes;
      if (!json::base64Decode(attrString(op, "value"), &bytes))
        fail(ErrorCode::InvalidArgument, sig + ": attribute \"value\" is not valid base64");
      if (bytes.size() != dtypeSize(out)) fail(ErrorCode::InvalidArgument, sig + ": the value must hold one element");
      ScalarReg bits = 0;
      std::memcpy(&bits, bytes.data(), bytes.size());
      if (out == DType::Bool) bits = bits ? 1u : 0u;
      p.constants_.emplace_back(dst, bits);
      continue;
    }

    if (info->kind == OpKind::BitcastConvert) {  // a reinterpretation of the register's bits: no cycles
      if (dtypeSize(args[0].dtype) != dtypeSize(out) || out == DType::Bool || args[0].dtype == DType::Bool)
        fail(ErrorCode::InvalidArgument, sig + ": bitcast_convert needs element types of one width");
      ScalarInstr ins;
      ins.dst = dst;
      ins.a = args[0].reg;
      ins.exec = &copyRegister;
      p.code_.push_back(ins);
      p.info_.push_back({1, out, info->name, "", ""});
      p.summary_ += (p.summary_.empty() ? "" : ",") + std::string(info->name);
      continue;
    }

    // Element types, as lowerElementwise requires them.
    const size_t main = (family == OpFamily::Select || family == OpFamily::Clamp) ? 1 : 0;
    const DType dt = args[main].dtype;
    DType expected_out = dt;
    if (family == OpFamily::Compare || info->kind == OpKind::IsFinite) expected_out = DType::Bool;
    if (family == OpFamily::Convert) expected_out = out;
    if (out != expected_out)
      fail(ErrorCode::InvalidArgument, sig + ": the result's element type should be " + dtypeName(expected_out));
    for (size_t i = 0; i < args.size() && family != OpFamily::Convert; ++i) {
      const DType want = (family == OpFamily::Select && i == 0) ? DType::Bool : dt;
      if (args[i].dtype != want)
        fail(ErrorCode::InvalidArgument,
             sig + ": operand " + std::to_string(i) + " should have element type " + dtypeName(want));
    }

    ScalarInstr ins;
    ins.dst = dst;
    ins.a = args[0].reg;
    ins.b = n > 1 ? args[1].reg : 0;
    ins.c = n > 2 ? args[2].reg : 0;
    switch (family) {
      case OpFamily::Unary:
        scalar::visitUnary(info->kind, dt, numerics, [&](auto f, auto a, auto r) {
          ins.exec = &exec1<decltype(f), typename decltype(a)::type, typename decltype(r)::type>;
        });
        break;
      case OpFamily::Binary: {
        scalar::ConstantOperand constant;
        const std::string which = attrString(op, "constant_operand", "");
        if (!scalar::parseConstantOperand(which, &constant))
          fail(ErrorCode::InvalidArgument,
               sig + ": unknown constant_operand '" + which + "' (expected \"lhs\" or \"rhs\")");
        scalar::visitBinary(
            info->kind, dt, numerics,
            [&](auto f, auto t) {
              using T = typename decltype(t)::type;
              ins.exec = &exec2<decltype(f), T, T, T>;
            },
            constant);
        break;
      }
      case OpFamily::Compare: {
        scalar::Direction d;
        const std::string dir = attrString(op, "comparison_direction");
        if (!scalar::parseDirection(dir, &d))
          fail(ErrorCode::InvalidArgument, sig + ": unknown comparison_direction '" + dir + "'");
        scalar::visitCompare(d, attrString(op, "compare_type", "NOTYPE"), dt, [&](auto f, auto t) {
          using T = typename decltype(t)::type;
          ins.exec = &exec2<decltype(f), T, T, uint8_t>;
        });
        break;
      }
      case OpFamily::Select:
        scalar::visitSelect(dt, [&](auto f, auto t) {
          using T = typename decltype(t)::type;
          ins.exec = &exec3<decltype(f), uint8_t, T, T, T>;
        });
        break;
      case OpFamily::Clamp:
        scalar::visitClamp(dt, numerics, [&](auto f, auto t) {
          using T = typename decltype(t)::type;
          ins.exec = &exec3<decltype(f), T, T, T, T>;
        });
        break;
      case OpFamily::Convert:
        scalar::visitConvert(dt, out, [&](auto f, auto a, auto r) {
          ins.exec = &exec1<decltype(f), typename decltype(a)::type, typename decltype(r)::type>;
        });
        break;
      default: break;
    }
    if (!ins.exec)
      fail(ErrorCode::Unimplemented,
           std::string(info->name) + " is implemented for " + dtypeList(info->dtypes) + " (in the body: " + sig + ")");
    p.code_.push_back(ins);
    InstrInfo meta{n, dt, info->name, "", ""};
    if (family == OpFamily::Compare) {
      meta.direction = attrString(op, "comparison_direction");
      meta.compare_type = attrString(op, "compare_type", "NOTYPE");
    }
    p.info_.push_back(meta);
    p.cycles_ += cost::elementwisePerElement(info->kind, dt);
    if (isFloat(dt)) p.flops_ += cost::flopsPerElement(info->kind);
    p.summary_ += (p.summary_.empty() ? "" : ",") + std::string(info->name);
  }

  if (region.results.size() != result_types.size())
    fail(ErrorCode::InvalidArgument, "the body must return " + std::to_string(result_types.size()) + " values");
  for (size_t i = 0; i < region.results.size(); ++i) {
    auto it = env.find(region.results[i]);
    if (it == env.end())
      fail(ErrorCode::InvalidArgument,
           "the body returns %" + std::to_string(region.results[i]) + ", which is not defined");
    if (it->second.dtype != result_types[i] || !it->second.decl->shape.empty())
      fail(ErrorCode::InvalidArgument, "body result " + std::to_string(i) + " must be a " +
                                           TensorType{result_types[i], {}}.str() + ", not " +
                                           it->second.decl->mlirType());
    p.results_.push_back(it->second.reg);
  }
  return p;
}

bool ScalarProgram::singleOp(std::string* op, std::vector<int>* params, std::string* direction) const {
  if (code_.size() != 1 || !constants_.empty() || results_.size() != 1 || results_[0] != code_[0].dst) return false;
  const ScalarInstr& in = code_[0];
  const int32_t ops[3] = {in.a, in.b, in.c};
  params->clear();
  for (int k = 0; k < info_[0].arity; ++k) {
    if (ops[k] >= num_params_) return false;
    params->push_back(ops[k]);
  }
  *op = info_[0].name;
  *direction = info_[0].direction;
  return true;
}

std::vector<size_t> ScalarProgram::sliceOf(int reg, size_t before) const {
  std::vector<char> needed(static_cast<size_t>(num_registers_), 0);
  needed[static_cast<size_t>(reg)] = 1;
  std::vector<size_t> slice;
  for (size_t i = before; i-- > 0;) {
    const ScalarInstr& in = code_[i];
    if (!needed[static_cast<size_t>(in.dst)]) continue;
    slice.push_back(i);
    needed[static_cast<size_t>(in.dst)] = 0;  // every instruction writes a register of its own
    const int32_t ops[3] = {in.a, in.b, in.c};
    for (int k = 0; k < info_[i].arity; ++k) needed[static_cast<size_t>(ops[k])] = 1;
  }
  std::reverse(slice.begin(), slice.end());
  return slice;
}

bool ScalarProgram::splitKeyCompare(ScalarProgram* key, KeyCompare* cmp) const {
  if (results_.size() != 1 || code_.empty() || num_registers_ < 2) return false;
  // The result must be written last, by a compare, and every param must come in an (lhs, rhs) pair.
  size_t last = code_.size() - 1;
  const InstrInfo& ci = info_[last];
  if (code_[last].dst != results_[0] || ci.direction.empty()) return false;
  if (ci.direction != "LT" && ci.direction != "GT") return false;
  const int params = num_params_;
  if (params % 2 != 0) return false;
  std::vector<int64_t> constant(static_cast<size_t>(num_registers_), -1);
  for (const auto& c : constants_) constant[static_cast<size_t>(c.first)] = c.second;

  // Do `a_reg` and `b_reg` compute the same function of the lhs and of the rhs params?
  auto mirrored = [&](int a_reg, int b_reg, std::vector<size_t>* a_slice) {
    *a_slice = sliceOf(a_reg, last);
    const std::vector<size_t> b_slice = sliceOf(b_reg, last);
    if (a_slice->size() != b_slice.size()) return false;
    std::vector<int> map(static_cast<size_t>(num_registers_), -1);  // lhs-side register -> rhs-side register
    for (int r = 0; r + 1 < params; r += 2) map[static_cast<size_t>(r)] = r + 1;
    auto same = [&](int x, int y) {
      if (map[static_cast<size_t>(x)] == y) return true;
      return constant[static_cast<size_t>(x)] >= 0 &&
             constant[static_cast<size_t>(x)] == constant[static_cast<size_t>(y)];
    };
    for (size_t k = 0; k < b_slice.size(); ++k) {
      const ScalarInstr& x = code_[(*a_slice)[k]];
      const ScalarInstr& y = code_[b_slice[k]];
      const InstrInfo& xi = info_[(*a_slice)[k]];
      const InstrInfo& yi = info_[b_slice[k]];
      if (x.exec != y.exec || xi.arity != yi.arity || xi.direction != yi.direction ||
          xi.compare_type != yi.compare_type)
        return false;
      const int32_t xo[3] = {x.a, x.b, x.c}, yo[3] = {y.a, y.b, y.c};
      for (int o = 0; o < xi.arity; ++o)
        if (!same(xo[o], yo[o])) return false;
      map[static_cast<size_t>(x.dst)] = y.dst;
    }
    return same(a_reg, b_reg);
  };
  std::vector<size_t> slice;
  cmp->direction = ci.direction;
  cmp->key_register = code_[last].a;
  if (!mirrored(code_[last].a, code_[last].b, &slice)) {
    // compare(rhs key, lhs key): the same order with the direction turned round.
    if (!mirrored(code_[last].b, code_[last].a, &slice)) return false;
    cmp->direction = ci.direction == "LT" ? "GT" : "LT";
    cmp->key_register = code_[last].b;
  }
  cmp->dtype = ci.dtype;
  cmp->compare_type = ci.compare_type;
  *key = *this;
  key->code_.clear();
  key->info_.clear();
  for (size_t i : slice) {
    key->code_.push_back(code_[i]);
    key->info_.push_back(info_[i]);
  }
  return true;
}

}  // namespace ipu
