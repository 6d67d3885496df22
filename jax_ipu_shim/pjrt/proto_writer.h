// A protobuf message written by hand in the wire format (the plugin links no protobuf library): fields appended in
// any order. For what the plugin hands jaxlib as protobuf bytes: an executable's HLO signature (hlo_signature.cc),
// its device assignment (executable.cc) and jax.profiler's XSpace (profiler.cc).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace jax_ipu {

class Proto {
 public:
  Proto& Int(int field, int64_t value) {  // int32, int64, uint64, enum and bool fields
    Key(field, 0);
    Varint(static_cast<uint64_t>(value));
    return *this;
  }
  Proto& Double(int field, double value) {
    Key(field, 1);
    char bytes[sizeof value];
    std::memcpy(bytes, &value, sizeof value);  // little-endian, as the wire format (the hosts we build for are)
    out_.append(bytes, sizeof value);
    return *this;
  }
  Proto& Bytes(int field, const std::string& value) {  // bytes and string fields
    Key(field, 2);
    Varint(value.size());
    out_ += value;
    return *this;
  }
  Proto& Message(int field, const Proto& value) { return Bytes(field, value.out_); }
  Proto& Raw(const std::string& fields) {  // fields already serialized (of this message's type)
    out_ += fields;
    return *this;
  }
  Proto& PackedInts(int field, const std::vector<int64_t>& values) {
    if (values.empty()) return *this;
    Proto packed;
    for (int64_t v : values) packed.Varint(static_cast<uint64_t>(v));
    return Bytes(field, packed.out_);
  }
  const std::string& str() const { return out_; }

 private:
  void Key(int field, int wire_type) { Varint(static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(wire_type)); }
  void Varint(uint64_t v) {
    for (; v >= 0x80; v >>= 7) out_ += static_cast<char>(v | 0x80);
    out_ += static_cast<char>(v);
  }
  std::string out_;
};

}  // namespace jax_ipu
