// The host timeline's spans (ipu/trace.h).
#include "ipu/trace.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>

#include "ipu/json.h"

namespace ipu {

int64_t trace::nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void Trace::record(const char* category, const std::string& name, int64_t start_ns, int64_t end_ns,
                   const std::string& args_json) {
  thread_local const long tid = static_cast<long>(syscall(SYS_gettid));  // one syscall per thread
  std::lock_guard<std::mutex> lock(mu_);
  if (spans_.size() >= kMaxSpans) {
    ++dropped_;
    return;
  }
  spans_.push_back(Span{category, name, args_json, start_ns, end_ns, tid});
}

std::string Trace::takeJson() {
  std::vector<Span> spans;
  size_t dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    spans.swap(spans_);
    dropped = dropped_;
    dropped_ = 0;
  }
  std::string s = "{\"dropped\": " + std::to_string(dropped) + ", \"spans\": [";
  for (size_t i = 0; i < spans.size(); ++i) {
    const Span& p = spans[i];
    s += (i ? ", " : "") + std::string("{\"cat\": ") + json::quote(p.category) + ", \"name\": " + json::quote(p.name) +
         ", \"start_ns\": " + std::to_string(p.start_ns) + ", \"end_ns\": " + std::to_string(p.end_ns) +
         ", \"tid\": " + std::to_string(p.tid) + ", \"args\": " + (p.args.empty() ? "{}" : p.args) + "}";
  }
  return s + "]}";
}

}  // namespace ipu
