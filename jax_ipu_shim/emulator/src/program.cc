// Parsing of the program document: every field is type-checked here so that later stages can trust the form.
#include "ipu/program.h"

#include <cstring>

#include "ipu/dtype.h"
#include "ipu/emulator.h"

namespace ipu {

namespace {

[[noreturn]] void malformed(const std::string& what) {
  throw Error(ErrorCode::InvalidArgument, "Malformed IPU program: " + what);
}

const json::Value& field(const json::Value& obj, const char* key, json::Value::Kind kind, const std::string& where) {
  const json::Value* v = obj.find(key);
  if (!v) malformed(where + " has no \"" + key + "\"");
  if (v->kind != kind) {
    malformed("\"" + std::string(key) + "\" of " + where + " must be " + json::Value::kindName(kind) + ", not " +
              json::Value::kindName(v->kind));
  }
  return *v;
}

int64_t toInt(const json::Value& v, const std::string& where) {
  if (v.kind != json::Value::Kind::Number || !v.is_integer) malformed(where + " must be an integer");
  return v.integer;
}

std::vector<int64_t> toInts(const json::Value& v, const std::string& where) {
  if (!v.isArray()) malformed(where + " must be an array of integers");
  std::vector<int64_t> out;
  for (const auto& e : v.array) out.push_back(toInt(e, where));
  return out;
}

ValueDecl parseDecl(const json::Value& v, const std::string& where) {
  if (!v.isObject()) malformed(where + " must be an object {id, dtype, shape}");
  ValueDecl d;
  d.id = toInt(field(v, "id", json::Value::Kind::Number, where), where + ".id");
  d.dtype = field(v, "dtype", json::Value::Kind::String, where).string;
  if (!isKnownDTypeName(d.dtype)) malformed(where + " has unknown dtype '" + d.dtype + "'");
  d.shape = toInts(field(v, "shape", json::Value::Kind::Array, where), where + ".shape");
  for (int64_t dim : d.shape)
    if (dim < 0) malformed(where + " has a negative dimension in its shape");
  // Guard the element count against overflow: no IPU holds more than 2^40 elements.
  double count = 1;
  for (int64_t dim : d.shape) count *= static_cast<double>(dim);
  if (count > 1099511627776.0) malformed(where + " is too large to be a tensor of an IPU program");
  return d;
}

struct Blobs;
Region parseRegion(const json::Value& v, const std::string& where, int depth, Blobs* blobs);

// The blobs of the container being parsed (moved out one by one as their references are resolved).
struct Blobs {
  std::vector<std::string> data;
  std::vector<bool> taken;
};

// {"blob": i} -> the bytes of blob i of `blobs` (each blob is referred to once: it is moved, not copied); `blobs` is
// null for a program given as JSON text.
void resolveBlob(json::Value* v, const std::string& where, Blobs* blobs) {
  if (!v->isObject() || v->object.size() != 1 || v->object[0].first != "blob") return;
  const json::Value& index = v->object[0].second;
  if (!blobs) malformed(where + " refers to a blob, but the program is JSON text without blobs");
  const int64_t n = static_cast<int64_t>(blobs->data.size());
  if (!index.is_integer || index.integer < 0 || index.integer >= n)
    malformed(where + " refers to blob " + std::to_string(index.integer) + " of " + std::to_string(n));
  const size_t i = static_cast<size_t>(index.integer);
  if (blobs->taken[i]) malformed(where + " refers to blob " + std::to_string(i) + " a second time");
  blobs->taken[i] = true;
  std::string& blob = blobs->data[i];
  json::Value bytes;
  bytes.kind = json::Value::Kind::Bytes;
  bytes.string = std::move(blob);
  *v = std::move(bytes);
}

Op parseOp(const json::Value& v, const std::string& where, int depth, Blobs* blobs) {
  if (!v.isObject()) malformed(where + " must be an object");
  Op op;
  op.op = field(v, "op", json::Value::Kind::String, where).string;
  std::string name = where + " (" + op.op + ")";
  const json::Value* mlir = v.find("mlir");
  op.mlir = mlir && mlir->isString() ? mlir->string : "stablehlo." + op.op;
  if (const json::Value* loc = v.find("loc")) {
    if (loc->isString()) op.loc = loc->string;
  }
  if (const json::Value* operands = v.find("operands")) op.operands = toInts(*operands, name + ".operands");
  if (const json::Value* results = v.find("results")) {
    if (!results->isArray()) malformed(name + ".results must be an array");
    for (size_t i = 0; i < results->array.size(); ++i)
      op.results.push_back(parseDecl(results->array[i], name + ".results[" + std::to_string(i) + "]"));
  }
  if (const json::Value* attrs = v.find("attrs")) {
    if (attrs->kind != json::Value::Kind::Null && !attrs->isObject()) malformed(name + ".attrs must be an object");
    op.attrs = *attrs;
    for (auto& kv : op.attrs.object) resolveBlob(&kv.second, name + ".attrs." + kv.first, blobs);
  }
  op.attrs.kind = json::Value::Kind::Object;
  if (const json::Value* regions = v.find("regions")) {
    if (!regions->isArray()) malformed(name + ".regions must be an array");
    for (size_t i = 0; i < regions->array.size(); ++i)
      op.regions.push_back(
          parseRegion(regions->array[i], name + ".regions[" + std::to_string(i) + "]", depth + 1, blobs));
  }
  return op;
}

Region parseRegion(const json::Value& v, const std::string& where, int depth, Blobs* blobs) {
  if (depth > 64) malformed(where + " nests regions too deeply");
  if (!v.isObject()) malformed(where + " must be an object {params, body, results}");
  Region r;
  if (const json::Value* params = v.find("params")) {
    if (!params->isArray()) malformed(where + ".params must be an array");
    for (size_t i = 0; i < params->array.size(); ++i)
      r.params.push_back(parseDecl(params->array[i], where + ".params[" + std::to_string(i) + "]"));
  }
  const json::Value& body = field(v, "body", json::Value::Kind::Array, where);
  for (size_t i = 0; i < body.array.size(); ++i)
    r.body.push_back(parseOp(body.array[i], where + ".body[" + std::to_string(i) + "]", depth, blobs));
  r.results = toInts(field(v, "results", json::Value::Kind::Array, where), where + ".results");
  return r;
}

}  // namespace

std::string ValueDecl::mlirType() const { return mlirTensorType(dtype, shape); }

const Function* Program::find(const std::string& fn) const {
  for (const Function& f : functions)
    if (f.name == fn) return &f;
  return nullptr;
}

namespace {
// The binary container: magic "JIPUPRG1", u64 document bytes, the JSON document, u64 blob count, then per blob a u64
// size and its bytes (all integers little-endian). Blobs carry constant payloads as raw bytes: no base64, no JSON
// escaping, one copy out of the container.
uint64_t readU64(const std::string& data, size_t* pos) {
  if (data.size() - *pos < 8) malformed("the binary program container ends early");
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(data[*pos + static_cast<size_t>(i)]);
  *pos += 8;
  return v;
}

bool isContainer(const std::string& data) {
  return data.size() >= sizeof kProgramContainerMagic &&
         std::memcmp(data.data(), kProgramContainerMagic, sizeof kProgramContainerMagic) == 0;
}

Program parseDocument(const json::Value& doc, Blobs* blobs);
}  // namespace

Program parseProgram(const std::string& text) {
  if (!isContainer(text)) return parseDocument(json::parse(text), nullptr);
  size_t pos = sizeof kProgramContainerMagic;
  const uint64_t doc_size = readU64(text, &pos);
  if (doc_size > text.size() - pos) malformed("the binary program container's document runs past its end");
  json::Value doc = json::parse(text.substr(pos, static_cast<size_t>(doc_size)));
  pos += static_cast<size_t>(doc_size);
  const uint64_t count = readU64(text, &pos);
  if (count > (text.size() - pos) / 8) malformed("the binary program container claims too many blobs");
  Blobs blobs;
  blobs.data.resize(static_cast<size_t>(count));
  blobs.taken.assign(static_cast<size_t>(count), false);
  for (std::string& blob : blobs.data) {
    const uint64_t size = readU64(text, &pos);
    if (size > text.size() - pos) malformed("a blob of the binary program container runs past its end");
    blob.assign(text, pos, static_cast<size_t>(size));
    pos += static_cast<size_t>(size);
  }
  if (pos != text.size()) malformed("the binary program container has trailing bytes");
  return parseDocument(doc, &blobs);
}

namespace {
// "shardings": {"params": [...], "results": [...]}, one {"tile": [...], "devices": [...], "replicate_last": bool}
// per entry parameter or result ({} when it is whole on every copy).
std::vector<TileSharding> parseShardings(const json::Value& doc, const char* key, size_t count, int partitions) {
  const std::string where = std::string("\"shardings\".") + key;
  const json::Value& list = field(doc, key, json::Value::Kind::Array, "\"shardings\"");
  if (list.array.size() != count)
    malformed(where + " has " + std::to_string(list.array.size()) + " entries for " + std::to_string(count));
  std::vector<TileSharding> out;
  for (const json::Value& v : list.array) {
    if (!v.isObject()) malformed(where + " must hold objects");
    TileSharding s;
    if (const json::Value* tile = v.find("tile")) s.tile = toInts(*tile, where + ".tile");
    if (const json::Value* devices = v.find("devices")) s.devices = toInts(*devices, where + ".devices");
    if (const json::Value* last = v.find("replicate_last"))
      s.replicate_last = last->kind == json::Value::Kind::Bool && last->boolean;
    if (const json::Value* last = v.find("last_tile_dims")) s.last_tile_dims = toInts(*last, where + ".last_tile_dims");
    if (const json::Value* whole = v.find("unreduced"))
      s.unreduced = whole->kind == json::Value::Kind::Bool && whole->boolean;
    int64_t pieces = s.tile.empty() ? 0 : 1;
    for (int64_t t : s.tile) pieces *= t;
    bool in_range = true;
    for (int64_t d : s.devices) in_range = in_range && d >= 0 && d < partitions;
    if (pieces != static_cast<int64_t>(s.devices.size()) || !in_range)
      malformed(where + ": a tiling needs one device (a partition id) per piece");
    out.push_back(std::move(s));
  }
  return out;
}

// A document field of raw bytes: a blob of the container ({"blob": i}) or base64 text.
std::string documentBytes(const json::Value& v, const std::string& where, Blobs* blobs) {
  json::Value copy = v;
  resolveBlob(&copy, where, blobs);
  if (copy.kind == json::Value::Kind::Bytes) return std::move(copy.string);
  std::vector<uint8_t> bytes;
  if (!copy.isString() || !json::base64Decode(copy.string, &bytes)) malformed(where + " must be base64 text or a blob");
  return std::string(bytes.begin(), bytes.end());
}

Program parseDocument(const json::Value& doc, Blobs* blobs) {
  if (!doc.isObject()) malformed("the document must be a JSON object");
  const json::Value* format = doc.find("format");
  if (!format || !format->isString() || format->string != "jax-ipu-program")
    malformed("\"format\" must be \"jax-ipu-program\"");
  const json::Value* version = doc.find("version");
  if (!version || !version->is_integer || version->integer != 1)
    malformed("\"version\" must be 1 (this emulator reads version 1 of the program format)");
  Program p;
  if (const json::Value* name = doc.find("name")) p.name = name->isString() ? name->string : "";
  p.entry = field(doc, "entry", json::Value::Kind::String, "the program").string;
  const json::Value& fns = field(doc, "functions", json::Value::Kind::Array, "the program");
  for (size_t i = 0; i < fns.array.size(); ++i) {
    const json::Value& f = fns.array[i];
    std::string where = "functions[" + std::to_string(i) + "]";
    if (!f.isObject()) malformed(where + " must be an object");
    Function fn;
    fn.name = field(f, "name", json::Value::Kind::String, where).string;
    if (p.find(fn.name)) malformed("function '" + fn.name + "' is defined twice");
    fn.region = parseRegion(f, "function '" + fn.name + "'", 0, blobs);
    p.functions.push_back(std::move(fn));
  }
  if (!p.find(p.entry)) malformed("the entry function '" + p.entry + "' is not among \"functions\"");
  if (const json::Value* aliases = doc.find("aliases")) {
    if (aliases->isArray()) {
      for (const auto& pair : aliases->array) {
        std::vector<int64_t> ab = toInts(pair, "an alias");
        if (ab.size() != 2) malformed("each alias must be [param_index, result_index]");
        const Region& entry = p.find(p.entry)->region;
        if (ab[0] < 0 || ab[0] >= static_cast<int64_t>(entry.params.size()) || ab[1] < 0 ||
            ab[1] >= static_cast<int64_t>(entry.results.size()))
          malformed("alias [" + std::to_string(ab[0]) + ", " + std::to_string(ab[1]) + "] is out of range");
        p.aliases.emplace_back(static_cast<int>(ab[0]), static_cast<int>(ab[1]));
      }
    } else if (aliases->kind != json::Value::Kind::Null) {
      malformed("\"aliases\" must be an array of [param_index, result_index] pairs");
    }
  }
  if (const json::Value* replicas = doc.find("replicas")) {
    const int64_t n = toInt(*replicas, "\"replicas\"");
    if (n < 1 || n > 1024) malformed("\"replicas\" must be between 1 and 1024, not " + std::to_string(n));
    p.replicas = static_cast<int>(n);
  }
  if (const json::Value* partitions = doc.find("partitions")) {
    const int64_t n = toInt(*partitions, "\"partitions\"");
    if (n < 1 || p.replicas % n != 0)
      malformed("\"partitions\" must divide \"replicas\" (" + std::to_string(p.replicas) + "), not be " +
                std::to_string(n));
    p.partitions = static_cast<int>(n);
  }
  if (const json::Value* hosts = doc.find("hosts")) {
    if (!hosts->isArray() || hosts->array.size() != static_cast<size_t>(p.replicas))
      malformed("\"hosts\" must list the host of each of the " + std::to_string(p.replicas) + " copies");
    for (const json::Value& h : hosts->array) p.hosts.push_back(static_cast<int>(toInt(h, "a host in \"hosts\"")));
  }
  if (const json::Value* shardings = doc.find("shardings")) {
    const Region& entry = p.find(p.entry)->region;
    p.param_shardings = parseShardings(*shardings, "params", entry.params.size(), p.partitions);
    p.result_shardings = parseShardings(*shardings, "results", entry.results.size(), p.partitions);
  }
  if (const json::Value* hlo = doc.find("partitioned_hlo"))
    p.partitioned_hlo = documentBytes(*hlo, "\"partitioned_hlo\"", blobs);
  if (const json::Value* numerics = doc.find("numerics")) {
    if (!numerics->isString() || !parseNumerics(numerics->string, &p.numerics))
      malformed(
          "\"numerics\" must be \"jaxlib-0.4\" or \"jaxlib-0.12\" (the jaxlib whose XLA:CPU arithmetic the "
          "program reproduces)");
  }
  if (p.name.empty()) p.name = p.entry;
  return p;
}
}  // namespace

namespace {
const json::Value& attr(const Op& op, const char* name) {
  const json::Value* v = op.attrs.find(name);
  if (!v) malformed(op.mlir + " is missing attribute \"" + name + "\"");
  return *v;
}
}  // namespace

bool hasAttr(const Op& op, const char* name) { return op.attrs.find(name) != nullptr; }

int64_t attrInt(const Op& op, const char* name) {
  return toInt(attr(op, name), "attribute \"" + std::string(name) + "\" of " + op.mlir);
}

bool attrBool(const Op& op, const char* name, bool default_value) {
  const json::Value* v = op.attrs.find(name);
  if (!v || v->kind == json::Value::Kind::Null) return default_value;
  if (v->kind != json::Value::Kind::Bool)
    malformed("attribute \"" + std::string(name) + "\" of " + op.mlir + " must be a boolean");
  return v->boolean;
}

std::string attrString(const Op& op, const char* name, const std::string& default_value) {
  const json::Value* v = op.attrs.find(name);
  if (!v && default_value != "\x01") return default_value;
  if (!v) attr(op, name);
  if (!v->isString()) malformed("attribute \"" + std::string(name) + "\" of " + op.mlir + " must be a string");
  return v->string;
}

std::vector<uint8_t> attrBytes(const Op& op, const char* name) {
  const json::Value& v = attr(op, name);
  if (v.kind == json::Value::Kind::Bytes) return std::vector<uint8_t>(v.string.begin(), v.string.end());
  std::vector<uint8_t> bytes;
  if (!v.isString() || !json::base64Decode(v.string, &bytes))
    malformed("attribute \"" + std::string(name) + "\" of " + op.mlir + " must be base64 text or a blob");
  return bytes;
}

std::vector<int64_t> attrInts(const Op& op, const char* name, bool required) {
  const json::Value* v = op.attrs.find(name);
  if (!v && !required) return {};
  return toInts(attr(op, name), "attribute \"" + std::string(name) + "\" of " + op.mlir);
}

}  // namespace ipu
