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

std::vector<int> lowerHostIO(Lowerer& lowerer, OpContext& ctx) {
  const Op& op = *ctx.op;
  const std::string what = describe(op);
  TensorType token_type;
  token_type.dtype = DType::Token;
  for (const TensorType& t : ctx.in_types)
    if (isToken(t.dtype) && !t.shape.empty()) lowerer.invalid(ctx, "a token has no shape");
  for (const TensorType& t : ctx.out_types)
    if (isToken(t.dtype) && !t.shape.empty()) lowerer.invalid(ctx, "a token has no shape");
  auto all_tokens = [&](const std::vector<TensorType>& types, const std::string& which) {
    for (const TensorType& t : types)
      if (!isToken(t.dtype)) lowerer.invalid(ctx, which + " must be tokens");
  };
  auto token_result = [&] {
    if (ctx.out_types.size() != 1) lowerer.invalid(ctx, "the op has one result, a token");
    all_tokens(ctx.out_types, "its result");
  };
  // A StreamCopy or HostCall step: uses the operands, defines `results`, costs `cycles` over the host link.
  auto emit = [&](NodeKind kind, std::unique_ptr<Kernel> kernel, const std::vector<int>& results, uint64_t cycles) {
    Node* node = lowerer.emitExecute(ctx, std::move(kernel), {}, results, 0);
    node->kind = kind;
    node->cost.exchange = cycles;
  };
  // A StreamCopy of `data` (the values without the token), which one host stream buffer must hold.
  auto stream_copy = [&](std::unique_ptr<Kernel> kernel, const std::vector<TensorType>& data,
                         const std::vector<int>& results) {
    for (const TensorType& t : data)
      if (isToken(t.dtype)) lowerer.invalid(ctx, "only the last value may be a token");
    const int64_t bytes = totalBytes(data);
    if (bytes > kMaxStreamBytes)
      throw Error(ErrorCode::ResourceExhausted, "Out of memory. Single stream of length " + std::to_string(bytes) +
                                                    " in " + ctx.signature + ": a host stream buffer holds at most " +
                                                    std::to_string(kMaxStreamBytes) + " bytes; feed smaller batches" +
                                                    (op.loc.empty() ? "" : " (at " + op.loc + ")"));
    emit(NodeKind::StreamCopy, std::move(kernel), results, lowerer.device().hostTransferCycles(bytes));
  };

  switch (ctx.info->kind) {
    case OpKind::CreateToken: token_result(); return {lowerer.newSlot(token_type)};

    case OpKind::AfterAll:
      all_tokens(ctx.in_types, "its operands");
      token_result();
      return {lowerer.newSlot(token_type)};

    case OpKind::Infeed: {
      // (token) -> (data..., token)
      all_tokens(ctx.in_types, "its operand");
      if (ctx.out_types.empty() || !isToken(ctx.out_types.back().dtype))
        lowerer.invalid(ctx, "the last result must be a token");
      std::vector<TensorType> data(ctx.out_types.begin(), ctx.out_types.end() - 1);
      std::vector<int> slots, results;
      for (const TensorType& t : ctx.out_types) results.push_back(lowerer.newSlot(t));
      slots.assign(results.begin(), results.end() - 1);
      stream_copy(std::make_unique<StreamCopyKernel>(true, what, lowerer.program().name, data, slots), data, results);
      return results;
    }

    case OpKind::Outfeed: {
      // (data..., token) -> token
      if (ctx.in_types.empty() || !isToken(ctx.in_types.back().dtype))
        lowerer.invalid(ctx, "the last operand must be a token");
      token_result();
      std::vector<TensorType> data(ctx.in_types.begin(), ctx.in_types.end() - 1);
      std::vector<int> slots(ctx.in.begin(), ctx.in.end() - 1);
      const int token = lowerer.newSlot(token_type);
      stream_copy(std::make_unique<StreamCopyKernel>(false, what, lowerer.program().name, data, slots), data, {token});
      return {token};
    }

    case OpKind::CustomCall: {
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
      emit(NodeKind::HostCall, std::make_unique<HostCallKernel>(what, id, in_types, in, out_types, out), results,
           cycles);
      return results;
    }

    default: break;
  }
  lowerer.unimplemented(ctx, "no host I/O lowering for " + op.mlir);
}

}  // namespace ipu
