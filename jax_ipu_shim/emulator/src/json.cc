#include "ipu/json.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "ipu/emulator.h"

namespace ipu {
namespace json {

const Value* Value::find(const std::string& key) const {
  if (kind != Kind::Object) return nullptr;
  for (const auto& kv : object)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

const char* Value::kindName(Kind kind) {
  switch (kind) {
    case Kind::Null: return "null";
    case Kind::Bool: return "a boolean";
    case Kind::Number: return "a number";
    case Kind::String: return "a string";
    case Kind::Array: return "an array";
    case Kind::Object: return "an object";
    case Kind::Bytes: return "raw bytes";
  }
  return "?";
}

namespace {

// Recursive-descent parser with a depth limit, so that hostile input cannot overflow the stack.
class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {}

  Value parseDocument() {
    Value v = parseValue(0);
    skipSpace();
    if (pos_ != s_.size()) fail("end of document");
    return v;
  }

 private:
  static constexpr int kMaxDepth = 512;

  [[noreturn]] void fail(const char* expected) {
    std::string found = pos_ < s_.size() ? std::string("'") + s_[pos_] + "'" : std::string("end of input");
    throw Error(ErrorCode::InvalidArgument, "Malformed IPU program: JSON parse error at offset " +
                                                std::to_string(pos_) + ": expected " + expected + ", found " + found);
  }

  void skipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t')) ++pos_;
  }

  bool consume(char c) {
    skipSpace();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  void expectWord(const char* word) {
    size_t n = std::strlen(word);
    if (s_.compare(pos_, n, word) != 0) fail("a JSON value");
    pos_ += n;
  }

  Value parseValue(int depth) {
    if (depth > kMaxDepth) fail("less deeply nested JSON");
    skipSpace();
    if (pos_ >= s_.size()) fail("a JSON value");
    Value v;
    char c = s_[pos_];
    if (c == '{') {
      ++pos_;
      v.kind = Value::Kind::Object;
      if (consume('}')) return v;
      do {
        skipSpace();
        if (pos_ >= s_.size() || s_[pos_] != '"') fail("a string key");
        std::string key = parseString();
        if (!consume(':')) fail("':'");
        v.object.emplace_back(std::move(key), parseValue(depth + 1));
      } while (consume(','));
      if (!consume('}')) fail("',' or '}'");
    } else if (c == '[') {
      ++pos_;
      v.kind = Value::Kind::Array;
      if (consume(']')) return v;
      do { v.array.push_back(parseValue(depth + 1)); } while (consume(','));
      if (!consume(']')) fail("',' or ']'");
    } else if (c == '"') {
      v.kind = Value::Kind::String;
      v.string = parseString();
    } else if (c == 't') {
      expectWord("true");
      v.kind = Value::Kind::Bool;
      v.boolean = true;
    } else if (c == 'f') {
      expectWord("false");
      v.kind = Value::Kind::Bool;
    } else if (c == 'n') {
      expectWord("null");
    } else {
      parseNumber(&v);
    }
    return v;
  }

  void parseNumber(Value* v) {
    size_t start = pos_;
    if (pos_ < s_.size() && s_[pos_] == '-') ++pos_;
    size_t digits = pos_;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    if (pos_ == digits) fail("a JSON value");
    bool integral = true;
    if (pos_ < s_.size() && s_[pos_] == '.') {
      integral = false;
      ++pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      integral = false;
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    }
    std::string text = s_.substr(start, pos_ - start);
    v->kind = Value::Kind::Number;
    v->number = std::strtod(text.c_str(), nullptr);
    if (integral && pos_ - digits <= 18) {
      v->is_integer = true;
      v->integer = std::strtoll(text.c_str(), nullptr, 10);
    }
  }

  static void appendUtf8(std::string* out, uint32_t cp) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
      out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
  }

  uint32_t parseHex4() {
    if (pos_ + 4 > s_.size()) fail("four hex digits");
    uint32_t cp = 0;
    for (int i = 0; i < 4; ++i) {
      char h = s_[pos_++];
      cp <<= 4;
      if (h >= '0' && h <= '9') cp |= static_cast<uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f') cp |= static_cast<uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') cp |= static_cast<uint32_t>(h - 'A' + 10);
      else fail("a hex digit");
    }
    return cp;
  }

  std::string parseString() {
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) fail("a closing '\"'");
      char c = s_[pos_++];
      if (c == '"') return out;
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (pos_ >= s_.size()) fail("an escape character");
      char e = s_[pos_++];
      switch (e) {
        case '"': out.push_back('"'); break;
        case '\\': out.push_back('\\'); break;
        case '/': out.push_back('/'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'u': {
          uint32_t cp = parseHex4();
          if (cp >= 0xd800 && cp < 0xdc00 && s_.compare(pos_, 2, "\\u") == 0) {
            pos_ += 2;
            uint32_t lo = parseHex4();
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          }
          appendUtf8(&out, cp);
          break;
        }
        default: --pos_; fail("a valid escape");
      }
    }
  }

  const std::string& s_;
  size_t pos_ = 0;
};

}  // namespace

Value parse(const std::string& text) { return Parser(text).parseDocument(); }

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  return out + "\"";
}

bool base64Decode(const std::string& text, std::vector<uint8_t>* out) {
  out->clear();
  out->reserve(text.size() / 4 * 3);
  uint32_t acc = 0;
  int bits = 0;
  size_t padding = 0;
  for (char c : text) {
    int v;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    else if (c >= '0' && c <= '9') v = c - '0' + 52;
    else if (c == '+' || c == '-') v = 62;
    else if (c == '/' || c == '_') v = 63;
    else if (c == '=') {
      ++padding;
      continue;
    } else if (c == '\n' || c == '\r' || c == ' ') continue;
    else return false;
    if (padding) return false;  // data after padding
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<uint8_t>((acc >> bits) & 0xffu));
    }
  }
  return bits < 6 && padding <= 2;
}

}  // namespace json
}  // namespace ipu
