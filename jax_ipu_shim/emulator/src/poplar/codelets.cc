// The built-in codelets: popops' elementwise and reduction vertices, one per op of the registry (ipu/registry.h),
// computing with the StableHLO lowering's kernels (ipu/elementwise.h) and costed by the same estimators
// (ipu/cost_model.h). Nothing here lists ops: a new elementwise op in the registry is a new codelet.
//
//   popops::<unary op>      in -> out               (popops::exponential, popops::sqrt, popops::is_finite, ...)
//   popops::<binary op>     in1, in2 -> out         (popops::add, popops::maximum, popops::shift_left, ...)
//   popops::compare_<DIR>   in1, in2 -> out (bool)  (DIR: EQ NE GE GT LE LT)
//   popops::select          pred (bool), in1, in2 -> out: pred ? in1 : in2
//   popops::clamp           lo, in, hi -> out
//   popops::cast            in -> out, of any two types
//   popops::reduce_<op>     in -> out (one element) for each reducer op (add, multiply, maximum, minimum, and, or)
//
// Vertices compute with the IPU's float semantics: denormals flushed to zero; maximum and minimum are IEEE 754-2019's
// (NaN propagates); 16-bit floats are computed in f32 and rounded once per op.
#include <algorithm>
#include <cstring>
#include <map>

#include "ipu/cost_model.h"
#include "ipu/dtype.h"
#include "ipu/elementwise.h"
#include "state.h"

namespace ipu {
namespace poplar {

namespace {

constexpr Numerics kNumerics = Numerics::Jaxlib012;  // IEEE maximum/minimum, as the IPU's f32 max/min instructions

using Data = VertexData;

std::string sizes(const Data& d, const std::vector<std::string>& names, const std::string& out) {
  for (const std::string& n : names)
    if (d[n].size != d[out].size)
      return "field '" + n + "' has " + std::to_string(d[n].size) + " elements and '" + out + "' " +
             std::to_string(d[out].size) + ": they must have as many";
  return "";
}

std::string types(const Data& d, const std::vector<std::string>& names, Type want) {
  for (const std::string& n : names)
    if (d[n].type != want) return "field '" + n + "' is " + dtypeName(d[n].type) + ", not " + dtypeName(want);
  return "";
}

FieldSpec in(const std::string& name) { return {name, FieldDirection::Input, false}; }
FieldSpec out(const std::string& name) { return {name, FieldDirection::Output, false}; }

// An elementwise codelet: `fields` in kernel argument order, then "out"; the kernel chosen for the main operand's
// type (`main`), the result's type following the op.
Codelet elementwise(const OpInfo& info, std::vector<std::string> args, size_t main, ElementwiseSpec spec) {
  Codelet c;
  for (const std::string& a : args) c.fields.push_back(in(a));
  c.fields.push_back(out("out"));
  auto result = [info](const Data& d, Type operand) {
    if (info.family == OpFamily::Compare || info.kind == OpKind::IsFinite) return DType::Bool;
    if (info.family == OpFamily::Convert) return d["out"].type;
    return operand;
  };
  c.check = [info, args, main, spec, result](const Data& d) -> std::string {
    const Type t = d[args[main]].type;
    std::string e = sizes(d, args, "out");
    if (!e.empty()) return e;
    if (info.family != OpFamily::Convert) {
      std::vector<std::string> same;
      for (size_t i = 0; i < args.size(); ++i)
        if (!(info.family == OpFamily::Select && i == 0)) same.push_back(args[i]);
      if (!(e = types(d, same, t)).empty()) return e;
      if (info.family == OpFamily::Select && d[args[0]].type != DType::Bool)
        return "field '" + args[0] + "' must be bool";
    }
    if (d["out"].type != result(d, t))
      return "field 'out' is " + std::string(dtypeName(d["out"].type)) + ", not " + dtypeName(result(d, t));
    if (!elementwiseBlock(info, t, d["out"].type, kNumerics, spec))
      return "popops::" + std::string(info.name) + " is implemented for " + dtypeList(info.dtypes) + ", not " +
             dtypeName(t);
    return "";
  };
  c.compute = [info, args, main, spec](const Data& d) {
    const BlockFn fn = elementwiseBlock(info, d[args[main]].type, d["out"].type, kNumerics, spec);
    const void* a[3] = {};
    for (size_t i = 0; i < args.size(); ++i) a[i] = d[args[i]].data;
    fn(a, d["out"].data, static_cast<int64_t>(d["out"].size));
  };
  c.cycles = [info, args, main](const Data& d) {
    return cost::elementwiseWorker(info.kind, d[args[main]].type, static_cast<int64_t>(d["out"].size));
  };
  return c;
}

// reduce_<op>: folds `in` in order into out[0], in f32 for the 16-bit floats (rounded once), from the op's identity.
Codelet reduction(const OpInfo& info) {
  Codelet c;
  c.fields = {in("in"), out("out")};
  c.check = [info](const Data& d) -> std::string {
    if (d["out"].size != 1) return "field 'out' must have one element, not " + std::to_string(d["out"].size);
    if (d["in"].type != d["out"].type)
      return "fields 'in' and 'out' have different types (" + std::string(dtypeName(d["in"].type)) + ", " +
             dtypeName(d["out"].type) + ")";
    uint64_t bits;
    if (!elementwiseBlock(info, computeType(d["in"].type), computeType(d["in"].type), kNumerics) ||
        !scalar::reductionIdentityBits(info.kind, d["in"].type, &bits))
      return "popops::reduce_" + std::string(info.name) + " is implemented for " + dtypeList(info.dtypes) + ", not " +
             dtypeName(d["in"].type);
    return "";
  };
  c.compute = [info](const Data& d) {
    const Type t = d["in"].type, acc = computeType(t);
    const size_t eb = dtypeSize(acc);
    const OpInfo& convert = opInfo(OpKind::Convert);
    std::vector<uint8_t> values(d["in"].size * eb);
    if (acc != t) {
      const void* a[1] = {d["in"].data};
      elementwiseBlock(convert, t, acc, kNumerics)(a, values.data(), static_cast<int64_t>(d["in"].size));
    } else if (!values.empty()) {
      std::memcpy(values.data(), d["in"].data, values.size());
    }
    uint64_t bits = 0;
    scalar::reductionIdentityBits(info.kind, acc, &bits);
    uint8_t total[8] = {};
    std::memcpy(total, &bits, eb);
    const BlockFn fn = elementwiseBlock(info, acc, acc, kNumerics);
    for (size_t i = 0; i < d["in"].size; ++i) {
      const void* a[2] = {total, values.data() + i * eb};
      fn(a, total, 1);
    }
    if (acc != t) {
      const void* a[1] = {total};
      elementwiseBlock(convert, acc, t, kNumerics)(a, d["out"].data, 1);
    } else {
      std::memcpy(d["out"].data, total, eb);
    }
  };
  c.cycles = [](const Data& d) { return cost::reduceWorker(d["in"].type, static_cast<int64_t>(d["in"].size)); };
  return c;
}

std::map<std::string, Codelet> makeBuiltins() {
  std::map<std::string, Codelet> all;
  static const char* kDirections[] = {"EQ", "NE", "GE", "GT", "LE", "LT"};
  for (const OpInfo* info : allOps()) {
    const std::string name = info->name;
    switch (info->family) {
      case OpFamily::Unary: all["popops::" + name] = elementwise(*info, {"in"}, 0, {}); break;
      case OpFamily::Binary:
        if (info->kind == OpKind::Gather || info->kind == OpKind::Scatter) break;
        all["popops::" + name] = elementwise(*info, {"in1", "in2"}, 0, {});
        if (isReducer(info->name)) all["popops::reduce_" + name] = reduction(*info);
        break;
      case OpFamily::Compare:
        for (const char* dir : kDirections) {
          ElementwiseSpec spec;
          scalar::parseDirection(dir, &spec.direction);
          all[std::string("popops::compare_") + dir] = elementwise(*info, {"in1", "in2"}, 0, spec);
        }
        break;
      case OpFamily::Select: all["popops::select"] = elementwise(*info, {"pred", "in1", "in2"}, 1, {}); break;
      case OpFamily::Clamp: all["popops::clamp"] = elementwise(*info, {"lo", "in", "hi"}, 1, {}); break;
      case OpFamily::Convert: all["popops::cast"] = elementwise(*info, {"in"}, 0, {}); break;
      default: break;
    }
  }
  return all;
}

const std::map<std::string, Codelet>& builtins() {
  static const std::map<std::string, Codelet> all = makeBuiltins();  // immutable after its first use
  return all;
}

}  // namespace

const Codelet* builtinCodelet(const std::string& name) {
  auto it = builtins().find(name);
  return it == builtins().end() ? nullptr : &it->second;
}

std::vector<std::string> builtinCodelets() {
  std::vector<std::string> names;
  for (const auto& c : builtins()) names.push_back(c.first);
  return names;
}

}  // namespace poplar
}  // namespace ipu
