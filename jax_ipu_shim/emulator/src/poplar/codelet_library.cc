// Loading codelets compiled into a shared library (ipu/codelet_library.h).
#include "ipu/codelet_library.h"

#include <dlfcn.h>

#include <cstring>
#include <memory>
#include <sstream>
#include <type_traits>

#include "ipu/dtype.h"

namespace ipu {
namespace poplar {

namespace {

// A connected field's elements on the vertex's tile, as the glue takes them.
struct AbiField {
  void* data;
  uint64_t size;
};

using TextFn = const char* (*)();
using FlagFn = int (*)();
using ComputeFn = int (*)(const AbiField*);
using CyclesFn = uint64_t (*)(const AbiField*);

[[noreturn]] void invalid(const std::string& path, const std::string& what) {
  throw Error(ErrorCode::InvalidArgument, "codelet library '" + path + "': " + what);
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, sep)) parts.push_back(part);
  return parts;
}

template <class Fn>
Fn symbol(void* handle, const std::string& path, const std::string& name) {
  void* p = dlsym(handle, name.c_str());
  if (!p) invalid(path, "it has no entry '" + name + "' (was it compiled by jax_ipu.codelets?)");
  Fn fn;
  std::memcpy(&fn, &p, sizeof fn);
  return fn;
}

// "x:in:vector:f32" -> the field.
LibraryField parseField(const std::string& path, const std::string& codelet, const std::string& text) {
  const std::vector<std::string> parts = split(text, ':');
  LibraryField f;
  DType type = DType::F32;
  const bool glue_type = parseDType(parts.size() == 4 ? parts[3] : "", &type) && type != DType::F16 &&
                         type != DType::BF16 && !isComplex(type) && type != DType::Token;
  if (parts.size() != 4 || (parts[2] != "vector" && parts[2] != "scalar") || !glue_type)
    invalid(path, "codelet '" + codelet + "' describes a field as '" + text + "'");
  f.spec.name = parts[0];
  f.vector = parts[2] == "vector";
  f.type = type;
  if (parts[1] == "in") {
    f.spec.direction = FieldDirection::Input;
  } else if (parts[1] == "out") {
    f.spec.direction = FieldDirection::Output;
  } else if (parts[1] == "inout") {
    f.spec.direction = FieldDirection::InOut;
  } else if (parts[1] == "value") {
    f.spec.value = true;
  } else {
    invalid(path, "codelet '" + codelet + "' gives field '" + parts[0] + "' the direction '" + parts[1] + "'");
  }
  return f;
}

// A value field's number, converted to the field's type, in storage the glue reads (parseField admits only the
// glue's element types: bool, the integers and f32).
void storeValue(double v, Type type, uint64_t* out) {
  *out = 0;
  visitDType(type, [&](auto t) {
    using S = typename decltype(t)::type;
    constexpr DType d = decltype(t)::value;
    if constexpr (std::is_arithmetic<S>::value && d != DType::F16) {
      const S x = d == DType::Bool ? static_cast<S>(v != 0) : static_cast<S>(v);
      std::memcpy(out, &x, sizeof x);
    }
  });
}

// The glue's arguments for one vertex: connected fields point at their data, values at `values`.
std::vector<AbiField> arguments(const std::vector<LibraryField>& fields, const VertexData& d,
                                std::vector<uint64_t>* values) {
  std::vector<AbiField> args;
  values->assign(fields.size(), 0);
  for (size_t i = 0; i < fields.size(); ++i) {
    const LibraryField& f = fields[i];
    if (f.spec.value) {
      storeValue(d.values.at(f.spec.name), f.type, &(*values)[i]);
      args.push_back({&(*values)[i], 1});
    } else {
      const VertexData::Field& data = d[f.spec.name];
      args.push_back({data.data, static_cast<uint64_t>(data.size)});
    }
  }
  return args;
}

}  // namespace

std::vector<LibraryCodelet> loadCodeletLibrary(const std::string& path) {
  void* raw = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!raw) {
    const char* why = dlerror();
    invalid(path, std::string("it does not load: ") + (why ? why : "dlopen failed"));
  }
  std::shared_ptr<void> handle(raw, [](void* h) { dlclose(h); });
  const std::string abi = symbol<TextFn>(raw, path, "jax_ipu_codelet_abi")();
  if (abi != kCodeletAbi)
    invalid(path, "its interface is '" + abi + "', this emulator's '" + std::string(kCodeletAbi) +
                      "': compile it again with this version of jax_ipu");
  std::vector<LibraryCodelet> out;
  for (const std::string& name : split(symbol<TextFn>(raw, path, "jax_ipu_codelet_names")(), ',')) {
    const std::string prefix = "jax_ipu_codelet_" + name + "_";
    LibraryCodelet c;
    c.name = name;
    for (const std::string& text : split(symbol<TextFn>(raw, path, prefix + "fields")(), ','))
      c.fields.push_back(parseField(path, name, text));
    c.has_cycles = symbol<FlagFn>(raw, path, prefix + "has_cycles")() != 0;
    const ComputeFn compute = symbol<ComputeFn>(raw, path, prefix + "compute");
    const CyclesFn cycles = symbol<CyclesFn>(raw, path, prefix + "cycles");
    for (const LibraryField& f : c.fields) c.codelet.fields.push_back(f.spec);
    const std::vector<LibraryField> fields = c.fields;
    c.codelet.check = [fields](const VertexData& d) -> std::string {
      for (const LibraryField& f : fields) {
        if (f.spec.value) continue;
        const VertexData::Field& got = d[f.spec.name];
        if (got.type != f.type)
          return "field '" + f.spec.name + "' is " + dtypeName(f.type) + " in the codelet, but is connected to " +
                 dtypeName(got.type) + " elements";
        if (!f.vector && got.size != 1)
          return "field '" + f.spec.name + "' is one element in the codelet, but is connected to " +
                 std::to_string(got.size);
      }
      return "";
    };
    c.codelet.compute = [handle, fields, compute, name](const VertexData& d) {
      std::vector<uint64_t> values;
      const std::vector<AbiField> args = arguments(fields, d, &values);
      const int ok = compute(args.data());
      if (ok != 1)
        throw Error(ErrorCode::Internal, "vertex '" + name + "': compute() " +
                                             (ok < 0 ? std::string("threw an exception") : "returned false"));
    };
    if (c.has_cycles)
      c.codelet.cycles = [handle, fields, cycles](const VertexData& d) {
        std::vector<uint64_t> values;
        const std::vector<AbiField> args = arguments(fields, d, &values);
        return cycles(args.data());
      };
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace poplar
}  // namespace ipu
