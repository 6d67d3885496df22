// Host I/O: tokens, host streams and host functions.
//
// Tokens (create_token, after_all) only order effects: they are 0-byte values and lower to nothing. infeed and
// outfeed become StreamCopy steps (Poplar's host-to-device and device-to-host stream copies) and the custom call
// @jax_ipu_host_callback becomes a HostCall step. Their kernels do all their work in prepare(), on the run's
// thread, through RunState::options->host; each is costed as transfers over the host link.
#include "ipu/host_io.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "ipu/dtype.h"
#include "ipu/handlers.h"
#include "ipu/lowering.h"
#include "ipu/tile.h"

namespace ipu {

namespace {

// The one custom call target the emulator implements: a Python function registered by the jax_ipu package,
// named by the integer id in the op's backend_config.
constexpr const char* kHostCallbackTarget = "jax_ipu_host_callback";

std::string describe(const Op& op) { return op.mlir + (op.loc.empty() ? "" : " (at " + op.loc + ")"); }

// A kernel whose work is all in prepare(): there is no compute set.
class HostKernel : public Kernel {
 public:
  explicit HostKernel(std::string what) : what_(std::move(what)) {}
  void compute(RunState&, int64_t, int64_t) const override {}

 protected:
  HostInterface& host(const RunState& s) const {
    if (!s.options || !s.options->host)
      throw Error(ErrorCode::InvalidArgument,
                  what_ +
                      " needs the host, but this run has no host interface: infeed, outfeed and host callbacks "
                      "run only through jax's ipu backend, which serves them");
    return *s.options->host;
  }
  // Runs a host interface call, naming the step in any error it reports.
  template <class F>
  void call(F f) const {
    try {
      f();
    } catch (const Error& e) { throw Error(e.code(), what_ + ": " + e.what()); }
  }
  std::vector<void*> pointers(const RunState& s, const std::vector<int>& slots) const {
    std::vector<void*> out;
    for (int slot : slots) out.push_back(s.ptr[static_cast<size_t>(slot)]);
    return out;
  }

  std::string what_;
};

// A StreamCopy: host to device (infeed) fills the slots with the next infeed entry; device to host (outfeed)
// appends them as an outfeed entry.
class StreamCopyKernel : public HostKernel {
 public:
  StreamCopyKernel(bool to_device, std::string what, std::string program, std::vector<TensorType> types,
                   std::vector<int> slots)
      : HostKernel(std::move(what)), to_device_(to_device), program_(std::move(program)), types_(std::move(types)),
        slots_(std::move(slots)) {}
  bool toDevice() const { return to_device_; }
  void prepare(RunState& s) const override {
    HostInterface& h = host(s);
    std::vector<void*> p = pointers(s, slots_);
    if (to_device_) {
      call([&] { h.infeed(program_, types_, p); });
    } else {
      const std::vector<const void*> src(p.begin(), p.end());
      call([&] { h.outfeed(program_, types_, src); });
    }
  }

 private:
  bool to_device_;
  std::string program_;
  std::vector<TensorType> types_;
  std::vector<int> slots_;
};

class HostCallKernel : public HostKernel {
 public:
  HostCallKernel(std::string what, int64_t id, std::vector<TensorType> in_types, std::vector<int> in,
                 std::vector<TensorType> out_types, std::vector<int> out)
      : HostKernel(std::move(what)), id_(id), in_types_(std::move(in_types)), in_(std::move(in)),
        out_types_(std::move(out_types)), out_(std::move(out)) {}
  void prepare(RunState& s) const override {
    HostInterface& h = host(s);
    std::vector<void*> p = pointers(s, in_);
    std::vector<const void*> in(p.begin(), p.end());
    std::vector<void*> out = pointers(s, out_);
    call([&] { h.callback(id_, in_types_, in, out_types_, out); });
  }

 private:
  int64_t id_;
  std::vector<TensorType> in_types_;
  std::vector<int> in_;
  std::vector<TensorType> out_types_;
  std::vector<int> out_;
};

int64_t totalBytes(const std::vector<TensorType>& types) {
  int64_t n = 0;
  for (const TensorType& t : types) n += static_cast<int64_t>(t.numBytes());
  return n;
}

// Poplar's host stream buffers hold at most 128 MB (ipu-model.md).
constexpr int64_t kMaxStreamBytes = int64_t{128} << 20;

void walk(const Node& node, HostIOUse* use) {
  const Kernel* k = node.kernel.get();
  if (const auto* stream = dynamic_cast<const StreamCopyKernel*>(k))
    (stream->toDevice() ? use->infeed : use->outfeed) = true;
  if (k && dynamic_cast<const HostCallKernel*>(k)) use->callbacks = true;
  for (const auto& child : node.children) walk(*child, use);
}

}  // namespace

HostIOUse hostIOUse(const Node& root) {
  HostIOUse use;
  walk(root, &use);
  return use;
}

namespace {

// Every host I/O op: a token has no shape, wherever it appears.
void checkTokens(const Lowerer& lowerer, const OpContext& ctx) {
  for (const TensorType& t : ctx.in_types)
    if (isToken(t.dtype) && !t.shape.empty()) lowerer.invalid(ctx, "a token has no shape");
  for (const TensorType& t : ctx.out_types)
    if (isToken(t.dtype) && !t.shape.empty()) lowerer.invalid(ctx, "a token has no shape");
}

void allTokens(const Lowerer& lowerer, const OpContext& ctx, const std::vector<TensorType>& types,
               const std::string& which) {
  for (const TensorType& t : types)
    if (!isToken(t.dtype)) lowerer.invalid(ctx, which + " must be tokens");
}

// An op whose one result is a token: that token's new slot.
int tokenResult(Lowerer& lowerer, const OpContext& ctx) {
  if (ctx.out_types.size() != 1) lowerer.invalid(ctx, "the op has one result, a token");
  allTokens(lowerer, ctx, ctx.out_types, "its result");
  TensorType token_type;
  token_type.dtype = DType::Token;
  return lowerer.newSlot(token_type);
}

// A StreamCopy or HostCall step: uses the operands, defines `results`, costs `cycles` over the host link.
void emitHostStep(Lowerer& lowerer, OpContext& ctx, NodeKind kind, std::unique_ptr<Kernel> kernel,
                  const std::vector<int>& results, uint64_t cycles) {
  Node* node = lowerer.emitExecute(ctx, std::move(kernel), {}, results, 0);
  node->kind = kind;
  node->cost.exchange = cycles;
}

// A StreamCopy of the data (the values without the token) to or from the host, which one host stream buffer must
// hold: `slots` are the data's, `results` what the op defines.
void streamCopy(Lowerer& lowerer, OpContext& ctx, bool to_device, const std::vector<TensorType>& data,
                const std::vector<int>& slots, const std::vector<int>& results) {
  for (const TensorType& t : data)
    if (isToken(t.dtype)) lowerer.invalid(ctx, "only the last value may be a token");
  const int64_t bytes = totalBytes(data);
  if (bytes > kMaxStreamBytes)
    throw Error(ErrorCode::ResourceExhausted, "Out of memory. Single stream of length " + std::to_string(bytes) +
                                                  " in " + ctx.signature + ": a host stream buffer holds at most " +
                                                  std::to_string(kMaxStreamBytes) + " bytes; feed smaller batches" +
                                                  (ctx.op->loc.empty() ? "" : " (at " + ctx.op->loc + ")"));
  auto kernel = std::make_unique<StreamCopyKernel>(to_device, describe(*ctx.op), lowerer.program().name, data, slots);
  emitHostStep(lowerer, ctx, NodeKind::StreamCopy, std::move(kernel), results,
               lowerer.device().hostTransferCycles(bytes));
}

}  // namespace

std::vector<int> lowerCreateToken(Lowerer& lowerer, OpContext& ctx) {
  checkTokens(lowerer, ctx);
  return {tokenResult(lowerer, ctx)};
}

std::vector<int> lowerAfterAll(Lowerer& lowerer, OpContext& ctx) {
  checkTokens(lowerer, ctx);
  allTokens(lowerer, ctx, ctx.in_types, "its operands");
  return {tokenResult(lowerer, ctx)};
}

// (token) -> (data..., token)
std::vector<int> lowerInfeed(Lowerer& lowerer, OpContext& ctx) {
  checkTokens(lowerer, ctx);
  allTokens(lowerer, ctx, ctx.in_types, "its operand");
  if (ctx.out_types.empty() || !isToken(ctx.out_types.back().dtype))
    lowerer.invalid(ctx, "the last result must be a token");
  std::vector<TensorType> data(ctx.out_types.begin(), ctx.out_types.end() - 1);
  std::vector<int> results;
  for (const TensorType& t : ctx.out_types) results.push_back(lowerer.newSlot(t));
  streamCopy(lowerer, ctx, true, data, std::vector<int>(results.begin(), results.end() - 1), results);
  return results;
}

// (data..., token) -> token
std::vector<int> lowerOutfeed(Lowerer& lowerer, OpContext& ctx) {
  checkTokens(lowerer, ctx);
  if (ctx.in_types.empty() || !isToken(ctx.in_types.back().dtype))
    lowerer.invalid(ctx, "the last operand must be a token");
  const int token = tokenResult(lowerer, ctx);
  std::vector<TensorType> data(ctx.in_types.begin(), ctx.in_types.end() - 1);
  std::vector<int> slots(ctx.in.begin(), ctx.in.end() - 1);
  streamCopy(lowerer, ctx, false, data, slots, {token});
  return {token};
}

// A host callback (jax.debug.print, pure_callback, io_callback) or one of jax_ipu.tile's targets.
std::vector<int> lowerCustomCall(Lowerer& lowerer, OpContext& ctx) {
  checkTokens(lowerer, ctx);
  const Op& op = *ctx.op;
  const std::string target = attrString(op, "call_target_name", "");
  if (isTileTarget(target)) return lowerTileOp(lowerer, ctx, target);
  if (target != kHostCallbackTarget)
    lowerer.unimplemented(ctx, "the emulator does not implement the custom call target '" + target + "' (only " +
                                   kHostCallbackTarget +
                                   ", the host callbacks of jax.debug.print, jax.pure_callback "
                                   "and io_callback, and jax_ipu.tile's " +
                                   kTilePutTarget + ", " + kTileVertexTarget + " and " + kCycleCountTarget + ")");
  const std::string config = attrString(op, "backend_config", "");
  char* end = nullptr;
  errno = 0;
  const long long id = std::strtoll(config.c_str(), &end, 10);
  if (config.empty() || *end != '\0' || errno == ERANGE)
    lowerer.invalid(ctx, "backend_config must be the host callback's id (an integer), not '" + config + "'");
  // Tokens pass through (they order the call); the other values go to and come from the host function.
  std::vector<TensorType> in_types, out_types;
  std::vector<int> in, out, results;
  for (size_t i = 0; i < ctx.in.size(); ++i) {
    if (isToken(ctx.in_types[i].dtype)) continue;
    in_types.push_back(ctx.in_types[i]);
    in.push_back(ctx.in[i]);
  }
  for (const TensorType& t : ctx.out_types) {
    results.push_back(lowerer.newSlot(t));
    if (isToken(t.dtype)) continue;
    out_types.push_back(t);
    out.push_back(results.back());
  }
  // The device hands its operands to the host and waits for the answer even when there is no data: at least
  // one host-link latency each way.
  const uint64_t cycles = lowerer.device().hostTransferCycles(std::max<int64_t>(1, totalBytes(in_types))) +
                          lowerer.device().hostTransferCycles(std::max<int64_t>(1, totalBytes(out_types)));
  emitHostStep(lowerer, ctx, NodeKind::HostCall,
               std::make_unique<HostCallKernel>(describe(op), id, in_types, in, out_types, out), results, cycles);
  return results;
}

}  // namespace ipu
