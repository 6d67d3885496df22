// jax.profiler's view of the IPUs: while a profiling session runs, every run of a program and every host transfer
// is recorded, and the session's data is an XSpace (TSL's profile format, tsl/profiler/protobuf/xplane.proto) with
// one plane per IPU, which jax writes into its traces beside the host's plane:
//   - "Runs (host time)": each run, named by its program, from its start to its end on the host, with its replica
//     and its estimated IPU cycles and time at the chip's clock;
//   - "Steps (IPU time)": the per-step trace of each run (compute sets, exchanges, syncs, stream copies, host calls,
//     collectives, as jax_ipu.last_execution() gives it), laid end to end from the run's start at the chip's clock:
//     a step that ran several times (a loop body's) is one span with all its executions' cycles;
//   - "Transfers": host <-> device copies, with their bytes and cycles.
// jaxlib 0.12 asks for it through the PJRT profiler extension (jax.profiler.start_trace, trace, start_server and
// TensorBoard see it with no extra call); for jaxlib 0.4.13, which has no such extension, jax_ipu.backend.profiler
// records through JaxIpu_Profile* and adds the planes to the trace files jax wrote.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "ipu/c_handle.h"
#include "ipu/trace.h"
#include "jax_ipu/c_api.h"
#include "plugin.h"
#include "proto_writer.h"
#if JAX_IPU_PJRT_MINOR >= 90
#include "xla/pjrt/c/pjrt_c_api_profiler_extension.h"
#endif

namespace jax_ipu {
namespace {

struct RunRecord {
  int device = 0;
  int replica = 0;
  std::string program;
  int64_t start_ns = 0, end_ns = 0;  // steady clock (ipu::trace::nowNs)
  int64_t clock_hz = 0;
  ipu::RunProfile profile;
};

struct TransferRecord {
  int device = 0;
  bool to_device = false;
  uint64_t bytes = 0, cycles = 0;
  int64_t start_ns = 0, end_ns = 0;
};

}  // namespace

// One profiling session's records.
struct ProfileSession {
  bool running = false;
  int64_t realtime_minus_steady_ns = 0;  // TSL's timestamps are wall-clock nanoseconds
  std::vector<RunRecord> runs;
  std::vector<TransferRecord> transfers;
};

namespace {

// TSL's prefix for the device planes of a PJRT plugin; the ordinal is the jax device id. Plane ids only need to be
// distinct from the host's.
const char kProfilePlanePrefix[] = "/device:CUSTOM:";
constexpr int kProfilePlaneIdBase = 1000;

std::mutex g_sessions_mutex;
std::vector<ProfileSession*> g_sessions;  // the running ones
std::atomic<int> g_running{0};

int64_t RealtimeMinusSteady() {
  const int64_t real =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  return real - ipu::trace::nowNs();
}

// An XPlane under construction: event and stat names get metadata ids on first use.
class Plane {
 public:
  struct Stat {
    std::string name;
    enum { Int, Double, Str } kind;
    int64_t i = 0;
    double d = 0;
    std::string s;
  };
  struct Event {
    std::string name;
    int64_t start_ns = 0;  // wall clock
    int64_t duration_ps = 0;
    std::vector<Stat> stats;
  };

  void add(const std::string& line, Event event) {
    for (auto& l : lines_) {
      if (l.first == line) return l.second.push_back(std::move(event));
    }
    lines_.push_back({line, {std::move(event)}});
  }

  std::string serialize(int id, const std::string& name) {
    Proto plane;
    plane.Int(1, id).Bytes(2, name);
    int line_id = 0;
    for (const auto& l : lines_) {
      int64_t begin = l.second.front().start_ns;
      for (const Event& e : l.second) begin = std::min(begin, e.start_ns);
      Proto line;
      line.Int(1, line_id).Int(10, line_id);
      line.Bytes(2, l.first).Bytes(11, l.first).Int(3, begin);
      ++line_id;
      for (const Event& e : l.second) {
        Proto event;
        event.Int(1, metadataId(event_ids_, e.name));
        event.Int(2, (e.start_ns - begin) * 1000).Int(3, e.duration_ps);
        for (const Stat& s : e.stats) {
          Proto stat;
          stat.Int(1, metadataId(stat_ids_, s.name));
          if (s.kind == Stat::Int) stat.Int(4, s.i);
          if (s.kind == Stat::Double) stat.Double(2, s.d);
          if (s.kind == Stat::Str) stat.Bytes(5, s.s);
          event.Message(4, stat);
        }
        line.Message(4, event);
      }
      plane.Message(3, line);
    }
    for (size_t i = 0; i < event_ids_.size(); ++i) {  // map<int64, XEventMetadata>: entries {key, value}
      Proto metadata;
      metadata.Int(1, static_cast<int64_t>(i + 1)).Bytes(2, event_ids_[i]).Bytes(4, event_ids_[i]);
      plane.Message(4, Proto().Int(1, static_cast<int64_t>(i + 1)).Message(2, metadata));
    }
    for (size_t i = 0; i < stat_ids_.size(); ++i) {  // map<int64, XStatMetadata>
      Proto metadata;
      metadata.Int(1, static_cast<int64_t>(i + 1)).Bytes(2, stat_ids_[i]);
      plane.Message(5, Proto().Int(1, static_cast<int64_t>(i + 1)).Message(2, metadata));
    }
    return plane.str();
  }

 private:
  static int64_t metadataId(std::vector<std::string>& names, const std::string& name) {
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == name) return static_cast<int64_t>(i + 1);
    }
    names.push_back(name);
    return static_cast<int64_t>(names.size());
  }
  std::vector<std::pair<std::string, std::vector<Event>>> lines_;
  std::vector<std::string> event_ids_, stat_ids_;
};

Plane::Stat IntStat(const std::string& name, int64_t v) { return {name, Plane::Stat::Int, v, 0, ""}; }
Plane::Stat DoubleStat(const std::string& name, double v) { return {name, Plane::Stat::Double, 0, v, ""}; }
Plane::Stat StrStat(const std::string& name, const std::string& v) { return {name, Plane::Stat::Str, 0, 0, v}; }

int64_t Cycles_ps(uint64_t cycles, int64_t clock_hz) {
  return clock_hz > 0 ? static_cast<int64_t>(static_cast<double>(cycles) * 1e12 / static_cast<double>(clock_hz)) : 0;
}

}  // namespace

bool Profiling() { return g_running.load(std::memory_order_relaxed) > 0; }

int64_t SpanStartNs() { return ipu::processTrace() || Profiling() ? ipu::trace::nowNs() : 0; }

void ProfileRun(PJRT_Device* device, int replica, const std::string& program, int64_t start_ns, int64_t end_ns,
                const ipu::RunProfile& profile) {
  std::lock_guard<std::mutex> lock(g_sessions_mutex);
  for (ProfileSession* s : g_sessions) {
    RunRecord r;
    r.device = device->description.id;
    r.replica = replica;
    r.program = program;
    r.start_ns = start_ns;
    r.end_ns = end_ns;
    r.clock_hz = device->description.hardware.tile_clock_frequency;
    r.profile = profile;
    s->runs.push_back(std::move(r));
  }
}

void ProfileTransfer(PJRT_Device* device, size_t bytes, uint64_t cycles, bool to_device, int64_t start_ns) {
  const int64_t end_ns = ipu::trace::nowNs();
  std::lock_guard<std::mutex> lock(g_sessions_mutex);
  for (ProfileSession* s : g_sessions) {
    s->transfers.push_back({device->description.id, to_device, bytes, cycles, start_ns, end_ns});
  }
}

ProfileSession* ProfileCreate() { return new ProfileSession(); }

void ProfileStart(ProfileSession* session) {
  std::lock_guard<std::mutex> lock(g_sessions_mutex);
  if (session->running) return;
  session->running = true;
  session->realtime_minus_steady_ns = RealtimeMinusSteady();
  g_sessions.push_back(session);
  g_running.fetch_add(1);
}

void ProfileStop(ProfileSession* session) {
  std::lock_guard<std::mutex> lock(g_sessions_mutex);
  if (!session->running) return;
  session->running = false;
  g_sessions.erase(std::find(g_sessions.begin(), g_sessions.end(), session));
  g_running.fetch_sub(1);
}

void ProfileDestroy(ProfileSession* session) {
  ProfileStop(session);
  delete session;
}

// The session's XSpace: field 1 (planes) of each IPU that ran or transferred something, in device order.
// Timestamps are wall-clock nanoseconds since `origin_ns` (0: since the epoch, which TSL then shifts to its
// session's start).
std::string ProfileXSpace(ProfileSession* session, int64_t origin_ns) {
  std::lock_guard<std::mutex> lock(g_sessions_mutex);
  const int64_t to_real = session->realtime_minus_steady_ns - origin_ns;
  std::vector<std::pair<int, Plane>> planes;
  auto plane = [&](int device) -> Plane& {
    for (auto& p : planes) {
      if (p.first == device) return p.second;
    }
    planes.emplace_back(device, Plane());
    return planes.back().second;
  };
  for (const RunRecord& r : session->runs) {
    const ipu::RunProfile& p = r.profile;
    Plane::Event run{r.program, r.start_ns + to_real, (r.end_ns - r.start_ns) * 1000, {}};
    run.stats = {IntStat("replica", r.replica),
                 IntStat("ipu_cycles", static_cast<int64_t>(p.total_cycles)),
                 DoubleStat("ipu_time_us", static_cast<double>(Cycles_ps(p.total_cycles, r.clock_hz)) / 1e6),
                 IntStat("compute_cycles", static_cast<int64_t>(p.compute_cycles)),
                 IntStat("exchange_cycles", static_cast<int64_t>(p.exchange_cycles)),
                 IntStat("sync_cycles", static_cast<int64_t>(p.sync_cycles)),
                 IntStat("supersteps", static_cast<int64_t>(p.supersteps))};
    Plane& target = plane(r.device);
    target.add("Runs (host time)", std::move(run));
    int64_t at_ps = 0;  // from the run's start, at the chip's clock
    for (const ipu::StepProfile& st : p.steps) {
      const uint64_t cycles = st.compute_cycles + st.exchange_cycles + st.sync_cycles;
      const int64_t duration = Cycles_ps(cycles, r.clock_hz);
      Plane::Event step{st.type + " " + st.name, r.start_ns + to_real + at_ps / 1000, duration, {}};
      step.stats = {StrStat("program", r.program),
                    IntStat("step", st.id),
                    IntStat("cycles", static_cast<int64_t>(cycles)),
                    IntStat("compute_cycles", static_cast<int64_t>(st.compute_cycles)),
                    IntStat("exchange_cycles", static_cast<int64_t>(st.exchange_cycles)),
                    IntStat("sync_cycles", static_cast<int64_t>(st.sync_cycles)),
                    IntStat("executions", static_cast<int64_t>(st.executions)),
                    IntStat("supersteps", static_cast<int64_t>(st.supersteps))};
      if (!st.loc.empty()) step.stats.push_back(StrStat("source", st.loc));
      target.add("Steps (IPU time)", std::move(step));
      at_ps += duration;
    }
  }
  for (const TransferRecord& t : session->transfers) {
    Plane::Event copy{
        t.to_device ? "host to ipu" : "ipu to host", t.start_ns + to_real, (t.end_ns - t.start_ns) * 1000, {}};
    copy.stats = {IntStat("bytes", static_cast<int64_t>(t.bytes)),
                  IntStat("ipu_cycles", static_cast<int64_t>(t.cycles))};
    plane(t.device).add("Transfers", std::move(copy));
  }
  std::sort(planes.begin(), planes.end(),
            [](const std::pair<int, Plane>& a, const std::pair<int, Plane>& b) { return a.first < b.first; });
  Proto space;
  for (auto& p : planes) {
    space.Bytes(1, p.second.serialize(kProfilePlaneIdBase + p.first, kProfilePlanePrefix + std::to_string(p.first)));
  }
  return space.str();
}

}  // namespace jax_ipu

// ---- for jaxlib 0.4.13, whose PJRT API has no profiler extension (jax_ipu.backend.profiler)

void* JaxIpu_ProfileStart(void) {
  try {
    jax_ipu::ProfileSession* session = jax_ipu::ProfileCreate();
    jax_ipu::ProfileStart(session);
    return session;
  } catch (...) { return nullptr; }
}

int JaxIpu_ProfileStop(void* session, int64_t origin_ns, char** xspace, size_t* size) {
  auto* s = static_cast<jax_ipu::ProfileSession*>(session);
  try {
    jax_ipu::ProfileStop(s);
    const std::string data = jax_ipu::ProfileXSpace(s, origin_ns);
    jax_ipu::ProfileDestroy(s);
    *xspace = static_cast<char*>(std::malloc(data.size() + 1));
    if (*xspace == nullptr) return 1;
    std::memcpy(*xspace, data.data(), data.size());
    *size = data.size();
    return 0;
  } catch (...) {
    jax_ipu::ProfileDestroy(s);
    return 1;
  }
}

// ---- jaxlib 0.12: the PJRT profiler extension (PLUGIN_Profiler_Api), which jax registers with TSL's profiler
#if JAX_IPU_PJRT_MINOR >= 90

struct PLUGIN_Profiler {
  jax_ipu::ProfileSession* session = nullptr;
  std::string data;  // the XSpace of CollectData's first call, which jaxlib reads in place
};

struct PLUGIN_Profiler_Error {
  int code = 0;
  std::string message;
};

namespace {

PLUGIN_Profiler_Error* ProfilerError(const char* function) {
  try {
    throw;
  } catch (const std::exception& e) {
    return new PLUGIN_Profiler_Error{13, std::string(function) + ": " + e.what()};  // INTERNAL
  } catch (...) { return new PLUGIN_Profiler_Error{13, std::string(function) + " failed"}; }
}

void ErrorDestroy(PLUGIN_Profiler_Error_Destroy_Args* args) { delete args->error; }

void ErrorMessage(PLUGIN_Profiler_Error_Message_Args* args) {
  args->message = args->error->message.c_str();
  args->message_size = args->error->message.size();
}

PLUGIN_Profiler_Error* ErrorGetCode(PLUGIN_Profiler_Error_GetCode_Args* args) {
  args->code = args->error->code;
  return nullptr;
}

PLUGIN_Profiler_Error* Create(PLUGIN_Profiler_Create_Args* args) {
  try {
    args->profiler = new PLUGIN_Profiler{jax_ipu::ProfileCreate(), ""};
    return nullptr;
  } catch (...) { return ProfilerError("PLUGIN_Profiler_Create"); }
}

PLUGIN_Profiler_Error* Destroy(PLUGIN_Profiler_Destroy_Args* args) {
  if (args->profiler != nullptr) jax_ipu::ProfileDestroy(args->profiler->session);
  delete args->profiler;
  return nullptr;
}

PLUGIN_Profiler_Error* Start(PLUGIN_Profiler_Start_Args* args) {
  try {
    jax_ipu::ProfileStart(args->profiler->session);
    return nullptr;
  } catch (...) { return ProfilerError("PLUGIN_Profiler_Start"); }
}

PLUGIN_Profiler_Error* Stop(PLUGIN_Profiler_Stop_Args* args) {
  try {
    jax_ipu::ProfileStop(args->profiler->session);
    return nullptr;
  } catch (...) { return ProfilerError("PLUGIN_Profiler_Stop"); }
}

PLUGIN_Profiler_Error* CollectData(PLUGIN_Profiler_CollectData_Args* args) {
  try {
    // The first call (no buffer) serialises the session and points `buffer` at the profiler's copy, which jaxlib
    // parses (XLA's own plugins answer so); a caller that brings its own buffer to a second call gets it copied.
    PLUGIN_Profiler* p = args->profiler;
    if (args->buffer == nullptr) {
      p->data = jax_ipu::ProfileXSpace(p->session, 0);
      args->buffer = reinterpret_cast<uint8_t*>(&p->data[0]);
    } else if (args->buffer != reinterpret_cast<uint8_t*>(&p->data[0])) {
      std::memcpy(args->buffer, p->data.data(), p->data.size());
    }
    args->buffer_size_in_bytes = p->data.size();
    return nullptr;
  } catch (...) { return ProfilerError("PLUGIN_Profiler_CollectData"); }
}

PLUGIN_Profiler_Api MakeProfilerApi() {
  PLUGIN_Profiler_Api api{};
  api.struct_size = PLUGIN_Profiler_Api_STRUCT_SIZE;
  api.error_destroy = ErrorDestroy;
  api.error_message = ErrorMessage;
  api.error_get_code = ErrorGetCode;
  api.create = Create;
  api.destroy = Destroy;
  api.start = Start;
  api.stop = Stop;
  api.collect_data = CollectData;
  return api;
}

}  // namespace

namespace jax_ipu {
PJRT_Extension_Base* ProfilerExtension() {
  static PLUGIN_Profiler_Api api = MakeProfilerApi();
  static PJRT_Profiler_Extension extension = [] {
    PJRT_Profiler_Extension e{};
    e.base.struct_size = PJRT_Profiler_Extension_STRUCT_SIZE;
    e.base.type = PJRT_Extension_Type_Profiler;
    e.base.next = nullptr;
    e.profiler_api = &api;
    e.traceme_context_id = 0;
    return e;
  }();
  return &extension.base;
}
}  // namespace jax_ipu

#endif  // JAX_IPU_PJRT_MINOR >= 90
