// TEMP(io): a minimal stand-in for the PJRT side of host streams and host callbacks, until the asynchronous PJRT
// layer (which implements the same C ABI) lands. Queues keyed by device id; execution is synchronous, so a program
// that waits on an empty infeed blocks its caller here.
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ipu/emulator.h"

#define JAXIPU_EXPORT extern "C" __attribute__((visibility("default")))

typedef int (*JaxIpu_HostCallbackFn)(int64_t id, size_t num_in, const void* const* in, size_t num_out,
                                     void* const* out, char* error, size_t error_size);

namespace jax_ipu {
namespace {

struct Entry {
  std::vector<ipu::TensorType> types;
  std::vector<std::vector<uint8_t>> data;
};

std::mutex mu;
std::condition_variable cv;
std::map<int, std::deque<Entry>> infeeds, outfeeds;
JaxIpu_HostCallbackFn host_callback = nullptr;

std::string typesString(const std::vector<ipu::TensorType>& types) {
  std::string s = "(";
  for (size_t i = 0; i < types.size(); ++i) s += (i ? ", " : "") + types[i].str();
  return s + ")";
}

bool sameTypes(const std::vector<ipu::TensorType>& a, const std::vector<ipu::TensorType>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].dtype != b[i].dtype || a[i].shape != b[i].shape) return false;
  return true;
}

std::vector<ipu::TensorType> parseTypes(size_t n, const char* const* dtypes, const int* ranks,
                                        const int64_t* const* dims) {
  static const char* kNames[] = {"bool", "f16", "f32", "i32", "u32"};
  std::vector<ipu::TensorType> types(n);
  for (size_t i = 0; i < n; ++i) {
    bool found = false;
    for (int d = 0; d < 5; ++d)
      if (dtypes[i] && std::strcmp(dtypes[i], kNames[d]) == 0) {
        types[i].dtype = static_cast<ipu::DType>(d);
        found = true;
      }
    if (!found)
      throw ipu::Error(ipu::ErrorCode::InvalidArgument, std::string("unsupported dtype ") + (dtypes[i] ? dtypes[i] : "?"));
    types[i].shape.assign(dims[i], dims[i] + ranks[i]);
  }
  return types;
}

char* copyString(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out) std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

class TempHost : public ipu::HostInterface {
 public:
  explicit TempHost(int device) : device_(device) {}
  void infeed(const std::string& program, const std::vector<ipu::TensorType>& types,
              const std::vector<void*>& dst) override {
    std::unique_lock<std::mutex> lock(mu);
    auto& q = infeeds[device_];
    while (q.empty()) {
      if (!cv.wait_for(lock, std::chrono::seconds(10), [&] { return !q.empty(); }))
        std::fprintf(stderr, "ipu %d: %s waits for an infeed of %s\n", device_, program.c_str(), typesString(types).c_str());
    }
    Entry e = std::move(q.front());
    q.pop_front();
    if (!sameTypes(e.types, types))
      throw ipu::Error(ipu::ErrorCode::InvalidArgument, "infeed of " + program + " expects " + typesString(types) +
                                                            " but the host fed " + typesString(e.types));
    for (size_t i = 0; i < dst.size(); ++i)
      if (!e.data[i].empty()) std::memcpy(dst[i], e.data[i].data(), e.data[i].size());
  }
  void outfeed(const std::string&, const std::vector<ipu::TensorType>& types,
               const std::vector<const void*>& src) override {
    Entry e;
    e.types = types;
    for (size_t i = 0; i < src.size(); ++i) {
      const uint8_t* p = static_cast<const uint8_t*>(src[i]);
      e.data.emplace_back(p, p + types[i].numBytes());
    }
    std::lock_guard<std::mutex> lock(mu);
    outfeeds[device_].push_back(std::move(e));
    cv.notify_all();
  }
  void callback(int64_t id, const std::vector<ipu::TensorType>&, const std::vector<const void*>& in,
                const std::vector<ipu::TensorType>&, const std::vector<void*>& out) override {
    JaxIpu_HostCallbackFn fn;
    {
      std::lock_guard<std::mutex> lock(mu);
      fn = host_callback;
    }
    if (!fn) throw ipu::Error(ipu::ErrorCode::Internal, "no host callback function is registered");
    char error[4096] = {0};
    if (fn(id, in.size(), in.data(), out.size(), out.data(), error, sizeof error) != 0)
      throw ipu::Error(ipu::ErrorCode::Internal, std::string("host callback failed: ") + error);
  }

 private:
  int device_;
};

}  // namespace

ipu::HostInterface* TempHostInterface(int device_id) {
  static std::mutex hosts_mu;
  static std::map<int, std::unique_ptr<TempHost>> hosts;
  std::lock_guard<std::mutex> lock(hosts_mu);
  auto& h = hosts[device_id];
  if (!h) h = std::make_unique<TempHost>(device_id);
  return h.get();
}

}  // namespace jax_ipu

using namespace jax_ipu;

JAXIPU_EXPORT int JaxIpu_InfeedPush(int device_id, size_t n, const char* const* dtypes, const int* ranks,
                                    const int64_t* const* dims, const void* const* data, char** error) {
  try {
    Entry e;
    e.types = parseTypes(n, dtypes, ranks, dims);
    for (size_t i = 0; i < n; ++i) {
      const uint8_t* p = static_cast<const uint8_t*>(data[i]);
      e.data.emplace_back(p, p + e.types[i].numBytes());
    }
    std::lock_guard<std::mutex> lock(mu);
    infeeds[device_id].push_back(std::move(e));
    cv.notify_all();
    return 0;
  } catch (const std::exception& ex) {
    if (error) *error = copyString(ex.what());
    return 1;
  }
}

JAXIPU_EXPORT int JaxIpu_OutfeedPop(int device_id, size_t n, const char* const* dtypes, const int* ranks,
                                    const int64_t* const* dims, void* const* data, double timeout_seconds,
                                    char** error) {
  try {
    std::vector<ipu::TensorType> types = parseTypes(n, dtypes, ranks, dims);
    std::unique_lock<std::mutex> lock(mu);
    auto& q = outfeeds[device_id];
    auto ready = [&] { return !q.empty(); };
    if (timeout_seconds >= 0) {
      if (!cv.wait_for(lock, std::chrono::duration<double>(timeout_seconds), ready))
        throw ipu::Error(ipu::ErrorCode::InvalidArgument, "timed out waiting for an outfeed");
    } else {
      cv.wait(lock, ready);
    }
    Entry& e = q.front();
    if (!sameTypes(e.types, types))
      throw ipu::Error(ipu::ErrorCode::InvalidArgument, "the outfeed holds " + typesString(e.types) + ", not " +
                                                            typesString(types));
    for (size_t i = 0; i < n; ++i)
      if (!e.data[i].empty()) std::memcpy(data[i], e.data[i].data(), e.data[i].size());
    q.pop_front();
    return 0;
  } catch (const std::exception& ex) {
    if (error) *error = copyString(ex.what());
    return 1;
  }
}

JAXIPU_EXPORT void JaxIpu_SetHostCallback(JaxIpu_HostCallbackFn fn) {
  std::lock_guard<std::mutex> lock(mu);
  host_callback = fn;
}

JAXIPU_EXPORT void JaxIpu_Synchronize(void) {}
