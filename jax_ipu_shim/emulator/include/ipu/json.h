// A small JSON reader and writer helpers: enough for the program format and the C API's reports.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ipu {
namespace json {

// A parsed JSON value. Objects keep their keys in document order; lookups are linear (objects here are small).
class Value {
 public:
  enum class Kind { Null, Bool, Number, String, Array, Object, Bytes };  // Bytes: a container blob, in `string`

  Kind kind = Kind::Null;
  bool boolean = false;
  double number = 0;
  bool is_integer = false;  // the number was written without fraction or exponent and fits in int64
  int64_t integer = 0;
  std::string string;
  std::vector<Value> array;
  std::vector<std::pair<std::string, Value>> object;

  bool isObject() const { return kind == Kind::Object; }
  bool isArray() const { return kind == Kind::Array; }
  bool isString() const { return kind == Kind::String; }
  const Value* find(const std::string& key) const;
  static const char* kindName(Kind kind);
};

// Throws Error(InvalidArgument) naming the offset and what was expected.
Value parse(const std::string& text);

std::string quote(const std::string& s);  // a JSON string literal

// Standard base64 (RFC 4648, '=' padding optional). Returns false on a malformed input.
bool base64Decode(const std::string& text, std::vector<uint8_t>* out);

}  // namespace json
}  // namespace ipu
