// A host timeline of what the emulator does (PVTI_OPTIONS in jax_ipu.backend.pvti): spans with the host thread that ran
// them, kept in memory until they are taken. The core records into the Trace its CompileOptions or RunOptions name
// (null: not traced, and nothing is measured); the process's PVTI timeline is owned by the C API (ipu/c_handle.h).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace ipu {

namespace trace {
int64_t nowNs();  // steady clock (CLOCK_MONOTONIC, as Python's time.monotonic_ns)
}  // namespace trace

class Trace {
 public:
  // `args_json`: a JSON object of the span's details ("" for none). Thread-safe. Past kMaxSpans spans not yet taken,
  // a span is dropped and counted, a bound on the memory of a long traced run.
  void record(const char* category, const std::string& name, int64_t start_ns, int64_t end_ns,
              const std::string& args_json);
  // {"dropped": N, "spans": [{"cat", "name", "start_ns", "end_ns", "tid", "args"}, ...]}, oldest first; clears them.
  std::string takeJson();

  static constexpr size_t kMaxSpans = size_t{1} << 20;

 private:
  struct Span {
    const char* category;
    std::string name, args;
    int64_t start_ns, end_ns;
    long tid;
  };
  std::mutex mu_;
  std::vector<Span> spans_;
  size_t dropped_ = 0;
};

}  // namespace ipu
