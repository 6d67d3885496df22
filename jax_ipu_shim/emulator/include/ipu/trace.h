// A host timeline of what the emulator does (PVTI_OPTIONS in jax_ipu.pvti): spans with the host thread that ran
// them, kept in memory until the C API's JaxIpu_TraceTake hands them over. Off unless enabled: enabled() is one
// relaxed atomic load, so that call sites cost nothing measurable when tracing is off.
#pragma once

#include <cstdint>
#include <string>

namespace ipu {
namespace trace {

bool enabled();
void enable(bool on);
int64_t nowNs();  // steady clock (CLOCK_MONOTONIC, as Python's time.monotonic_ns)
// `args_json`: a JSON object of the span's details ("" for none).
void record(const char* category, const std::string& name, int64_t start_ns, int64_t end_ns,
            const std::string& args_json);
std::string takeJson();  // the spans so far as a JSON array, oldest first; clears them

}  // namespace trace
}  // namespace ipu
