// Tests of the graph API (ipu/poplar.h), built with the emulator's objects and run by test_graph_api.py. Each CHECK
// that fails prints its line; the program exits 1 if any failed. Results are compared with what the host computes
// (exactly rounded ops only, so that they must be bit for bit), costs with the cost model's formulas.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "check.h"
#include "ipu/cost_model.h"
#include "ipu/poplar.h"

namespace poplar = ipu::poplar;
namespace program = ipu::poplar::program;
using poplar::FLOAT;
using poplar::INT;

namespace {


// The message of the ipu::Error `fn` throws ("" if none).
std::string errorOf(const std::function<void()>& fn, ipu::ErrorCode* code = nullptr) {
  try {
    fn();
  } catch (const ipu::Error& e) {
    if (code) *code = e.code();
    return e.what();
  }
  return "";
}
bool has(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return true;
  std::printf("  (message was: %s)\n", text.c_str());
  return false;
}

poplar::Target smallTarget(unsigned tiles = 4) {
  poplar::IPUModel model;
  model.tilesPerIPU = tiles;
  return model.createTarget();
}

template <class T>
std::vector<T> read(poplar::Engine& e, const std::string& handle, size_t n) {
  std::vector<T> out(n);
  e.readTensor(handle, out.data(), out.data() + n);
  return out;
}

void elementwiseMatchesTheHost() {
  poplar::Graph g(smallTarget());
  const std::vector<float> a = {1.5f, -2.0f, 3.25f, NAN, 0.0f, -0.0f, 1e30f, 7.0f};
  const std::vector<float> b = {0.5f, 4.0f, -3.25f, 1.0f, -0.0f, 0.0f, 1e30f, 2.0f};
  poplar::Tensor x = g.addConstant(FLOAT, {8}, a.data(), "x"), y = g.addConstant(FLOAT, {8}, b.data(), "y");
  poplar::Tensor sum = g.addVariable(FLOAT, {8}, "sum"), prod = g.addVariable(FLOAT, {8}, "prod");
  poplar::Tensor mx = g.addVariable(FLOAT, {8}, "max"), lt = g.addVariable(poplar::BOOL, {8}, "lt");
  poplar::Tensor root = g.addVariable(FLOAT, {8}, "root"), ints = g.addVariable(INT, {8}, "ints");
  poplar::Tensor total = g.addVariable(INT, {1}, "total");
  for (const auto& t : {x, y, sum, prod, mx, lt, root, ints, total}) g.setTileMapping(t, 1);
  poplar::ComputeSet cs = g.addComputeSet("ops"), cs2 = g.addComputeSet("reduce");
  for (auto v : {g.addVertex(cs, "popops::add", {{"in1", x}, {"in2", y}, {"out", sum}}),
                 g.addVertex(cs, "popops::multiply", {{"in1", x}, {"in2", y}, {"out", prod}}),
                 g.addVertex(cs, "popops::maximum", {{"in1", x}, {"in2", y}, {"out", mx}}),
                 g.addVertex(cs, "popops::compare_LT", {{"in1", x}, {"in2", y}, {"out", lt}}),
                 g.addVertex(cs, "popops::sqrt", {{"in", y}, {"out", root}}),
                 g.addVertex(cs, "popops::cast", {{"in", y}, {"out", ints}}),
                 g.addVertex(cs2, "popops::reduce_add", {{"in", ints}, {"out", total}})})
    g.setTileMapping(v, 1);
  for (const char* h : {"sum", "prod", "max", "lt", "root", "ints", "total"}) {
    const std::string name = h;
    for (const auto& t :
         {std::make_pair("sum", sum), std::make_pair("prod", prod), std::make_pair("max", mx), std::make_pair("lt", lt),
          std::make_pair("root", root), std::make_pair("ints", ints), std::make_pair("total", total)})
      if (name == t.first) g.createHostRead(name, t.second);
  }
  poplar::Engine e(g, program::Sequence{program::Execute(cs), program::Execute(cs2)});
  e.run();
  const auto s = read<float>(e, "sum", 8), p = read<float>(e, "prod", 8), m = read<float>(e, "max", 8);
  const auto r = read<float>(e, "root", 8);
  const auto l = read<uint8_t>(e, "lt", 8);
  const auto i = read<int32_t>(e, "ints", 8);
  int32_t expected_total = 0;
  for (size_t k = 0; k < 8; ++k) {
    const float want_s = a[k] + b[k], want_p = a[k] * b[k];
    CHECK(std::memcmp(&s[k], &want_s, 4) == 0 || (std::isnan(s[k]) && std::isnan(want_s)));
    CHECK(std::memcmp(&p[k], &want_p, 4) == 0 || (std::isnan(p[k]) && std::isnan(want_p)));
    // IEEE 754-2019 maximum: NaN propagates, +0 > -0.
    const float want_m = std::isnan(a[k]) || std::isnan(b[k]) ? NAN
                         : (a[k] == 0 && b[k] == 0)           ? (std::signbit(a[k]) ? b[k] : a[k])
                                                              : std::fmax(a[k], b[k]);
    CHECK((std::isnan(m[k]) && std::isnan(want_m)) || std::memcmp(&m[k], &want_m, 4) == 0);
    CHECK(l[k] == (a[k] < b[k] ? 1 : 0));
    const float want_r = std::sqrt(b[k]);
    CHECK((std::isnan(r[k]) && std::isnan(want_r)) || std::memcmp(&r[k], &want_r, 4) == 0);
    const int32_t want_i = b[k] >= 2147483648.0f ? 2147483647 : static_cast<int32_t>(b[k]);
    CHECK(i[k] == want_i);
    expected_total += want_i;
  }
  CHECK(read<int32_t>(e, "total", 1)[0] == expected_total);
}

void viewsShowTheirElements() {
  poplar::Graph g(smallTarget());
  std::vector<int32_t> values(24);
  std::iota(values.begin(), values.end(), 0);
  poplar::Tensor x = g.addConstant(INT, {2, 3, 4}, values.data(), "x");
  poplar::mapTensorLinearly(g, x);
  struct Case {
    const char* name;
    poplar::Tensor view;
    std::vector<int32_t> expected;
  };
  std::vector<Case> cases = {
      {"slice", x.slice({1, 1, 1}, {2, 3, 3}), {17, 18, 21, 22}},
      {"index", x[1][2], {20, 21, 22, 23}},
      {"dimShuffle", x.dimShuffle({2, 0, 1}).slice(0, 1, 0).flatten(), {0, 4, 8, 12, 16, 20}},
      {"reverse", x[0][0].reverse(0), {3, 2, 1, 0}},
      {"broadcast", x[0][0].slice(0, 2).broadcast(2, 0), {0, 1, 0, 1}},
      {"concat", poplar::concat(x[0][0].slice(0, 1), x[1][2].slice(3, 4)), {0, 23}},
      {"transpose", x[0].slice(0, 2, 1).transpose().flatten(), {0, 4, 8, 1, 5, 9}},
  };
  program::Sequence prog;
  for (Case& c : cases) {
    poplar::Tensor out = g.addVariable(INT, {c.expected.size()}, c.name);
    g.setTileMapping(out, 3);
    prog.add(program::Copy(c.view.flatten(), out));
    g.createHostRead(c.name, out);
  }
  poplar::Engine e(g, prog);
  e.run();
  for (const Case& c : cases) {
    const auto got = read<int32_t>(e, c.name, c.expected.size());
    if (got != c.expected) std::printf("  view %s\n", c.name);
    CHECK(got == c.expected);
  }
  // The tile mapping of a view: intervals of its own elements.
  const auto mapping = g.getTileMapping(x);
  size_t mapped = 0;
  for (const auto& tile : mapping)
    for (const auto& iv : tile) mapped += iv.size();
  CHECK(mapped == 24);
}

// A vertex reading elements of another tile waits for the exchange; a tile's workers share its vertices.
// A run of one popops::negate vertex on tile 0 of 64 floats held on tile `source`, on `target`.
ipu::RunProfile negateOnTile0(const poplar::Target& target, unsigned source) {
  poplar::Graph g(target);
  poplar::Tensor in = g.addVariable(FLOAT, {64}, "in"), out = g.addVariable(FLOAT, {64}, "out");
  g.setTileMapping(in, source);
  g.setTileMapping(out, 0);
  poplar::ComputeSet cs = g.addComputeSet("neg");
  g.setTileMapping(g.addVertex(cs, "popops::negate", {{"in", in}, {"out", out}}), 0);
  poplar::Engine e(g, program::Execute(cs));
  e.run();
  return e.profile();
}

void costsFollowTheModel() {
  const poplar::Target target = smallTarget();
  const auto& dev = target.device();
  auto costOf = [&](unsigned vertices, unsigned source_tile) {
    poplar::Graph g(target);
    poplar::Tensor in = g.addVariable(FLOAT, {vertices, 64}, "in"), out = g.addVariable(FLOAT, {vertices, 64}, "out");
    g.setTileMapping(in, source_tile);
    g.setTileMapping(out, 0);
    poplar::ComputeSet cs = g.addComputeSet("neg");
    for (unsigned v = 0; v < vertices; ++v)
      g.setTileMapping(g.addVertex(cs, "popops::negate", {{"in", in[v]}, {"out", out[v]}}), 0);
    poplar::Engine e(g, program::Execute(cs));
    e.run();
    return e.profile();
  };
  const uint64_t worker = ipu::cost::elementwiseWorker(ipu::OpKind::Negate, ipu::DType::F32, 64);
  const auto local = costOf(1, 0);
  CHECK(local.exchange_cycles == 0);
  CHECK(local.compute_cycles == worker * 6 + ipu::cost::kSupervisorCycles);
  CHECK(local.sync_cycles == dev.sync_cycles && dev.sync_cycles == 100);
  CHECK(costOf(6, 0).compute_cycles == local.compute_cycles);  // six workers, one vertex each
  CHECK(costOf(7, 0).compute_cycles == 2 * worker * 6 + ipu::cost::kSupervisorCycles);
  const auto remote = costOf(1, 2);
  CHECK(remote.exchange_cycles == ipu::cost::exchange(64 * 4, dev.exchange_bytes_per_cycle));
  CHECK(remote.exchange_cycles > 0);

  // IPUModel's exchange bandwidth and clock are the target's: a slower exchange costs more cycles; a faster clock
  // takes less time for them. Out of range, they are refused by name.
  poplar::IPUModel slow;
  slow.tilesPerIPU = 4;
  slow.exchangeBytesPerCycle = dev.exchange_bytes_per_cycle / 4;
  slow.tileClockFrequency = 2 * static_cast<double>(dev.tile_clock_frequency);
  const poplar::Target slow_target = slow.createTarget();
  CHECK(slow_target.device().exchange_bytes_per_cycle == dev.exchange_bytes_per_cycle / 4);
  CHECK(slow_target.getTileClockFrequency() == 2 * static_cast<double>(dev.tile_clock_frequency));
  const auto slow_run = negateOnTile0(slow_target, 2);
  CHECK(slow_run.exchange_cycles == ipu::cost::exchange(64 * 4, dev.exchange_bytes_per_cycle / 4));
  CHECK(slow_run.exchange_cycles > remote.exchange_cycles);
  poplar::IPUModel bad;
  bad.exchangeBytesPerCycle = -1;
  CHECK(has(errorOf([&] { bad.createTarget(); }), "IPUModel.exchangeBytesPerCycle = -1: a whole number"));
  bad.exchangeBytesPerCycle = 0;
  bad.tileClockFrequency = std::nan("");
  CHECK(has(errorOf([&] { bad.createTarget(); }), "IPUModel.tileClockFrequency = nan: a whole number"));
  bad.tileClockFrequency = 1000;  // the range of each parameter is the device table's (DeviceDescription::forModel)
  CHECK(has(errorOf([&] { bad.createTarget(); }), "IPU Model parameter tileClockFrequency = 1000: must be between"));
  bad.tileClockFrequency = 0;
  bad.memoryBytesPerTile = 100;
  CHECK(has(errorOf([&] { bad.createTarget(); }), "IPU Model parameter memoryBytesPerTile = 100"));

  // A slower sync costs each superstep more, as the target says.
  poplar::IPUModel slow_sync;
  slow_sync.tilesPerIPU = 4;
  slow_sync.globalSyncCycles = 1000;
  CHECK(slow_sync.createTarget().device().sync_cycles == 1000);
  CHECK(negateOnTile0(slow_sync.createTarget(), 0).sync_cycles == 1000);
}

void memoryIsChecked() {
  poplar::IPUModel model;
  model.tilesPerIPU = 4;
  model.memoryBytesPerTile = 4096;
  const poplar::Target target = model.createTarget();
  auto make = [&](const poplar::OptionFlags& options) {
    poplar::Graph g(target);
    poplar::Tensor big = g.addVariable(FLOAT, {2048}, "big");
    g.setTileMapping(big.slice(0, 100), 0);
    g.setTileMapping(big.slice(100, 2048), 3);
    poplar::Engine e(g, program::Sequence(), options);
    return e.memory();
  };
  ipu::ErrorCode code = ipu::ErrorCode::Internal;
  CHECK(has(errorOf([&] { make({}); }, &code), "Out of memory on tile 3"));
  CHECK(code == ipu::ErrorCode::ResourceExhausted);
  const ipu::MemoryReport report = make({{"debug.allowOutOfMemory", "true"}});
  CHECK(report.worst_tile == 3 && report.worst_bytes == 1948 * 4);
  CHECK(report.bytes_per_tile[0] == 400);
}

void errorsNameTheThing() {
  poplar::Graph g(smallTarget());
  poplar::Tensor x = g.addVariable(FLOAT, {4}, "x"), y = g.addVariable(FLOAT, {4}, "y");
  poplar::Tensor k = g.addConstant(FLOAT, {4}, 1.0, "k"), n = g.addVariable(INT, {4}, "n");
  g.setTileMapping(x, 0);
  g.setTileMapping(k, 0);
  g.setTileMapping(n, 0);
  CHECK(has(errorOf([&] { g.addVertex(g.addComputeSet(), "popops::no_such_op"); }),
            "unknown codelet 'popops::no_such_op'"));
  auto engineOf = [&](const std::function<program::Program()>& build) {
    return errorOf([&] { poplar::Engine e(g, build()); });
  };
  CHECK(has(engineOf([&] { return program::Copy(x, y); }), "tensor 'y' (f32) is not completely mapped"));
  g.setTileMapping(y.slice(0, 2), 0);
  g.setTileMapping(y.slice(2, 4), 1);
  CHECK(has(engineOf([&] {
              poplar::ComputeSet cs = g.addComputeSet("unconnected");
              g.setTileMapping(g.addVertex(cs, "popops::add", {{"in1", x}, {"out", x}}), 0);
              return program::Execute(cs);
            }),
            "input field 'in2' is not connected"));
  CHECK(has(engineOf([&] {
              poplar::ComputeSet cs = g.addComputeSet("types");
              g.setTileMapping(g.addVertex(cs, "popops::add", {{"in1", x}, {"in2", n}, {"out", x}}), 0);
              return program::Execute(cs);
            }),
            "field 'in2' is i32, not f32"));
  CHECK(has(engineOf([&] {
              poplar::ComputeSet cs = g.addComputeSet("twice");
              g.setTileMapping(g.addVertex(cs, "popops::negate", {{"in", k}, {"out", x}}), 0);
              g.setTileMapping(g.addVertex(cs, "popops::abs", {{"in", k}, {"out", x.slice(1, 2)}}), 0);
              return program::Execute(cs);
            }),
            "both write element 1 of 'x'"));
  // The writer reads what it writes, and a second vertex reads it too: every reader is checked, not the first.
  CHECK(has(engineOf([&] {
              poplar::ComputeSet cs = g.addComputeSet("second reader");
              g.setTileMapping(g.addVertex(cs, "popops::negate", {{"in", x}, {"out", x}}), 0);
              poplar::Tensor z = g.addVariable(FLOAT, {4}, "z");
              g.setTileMapping(z, 0);
              g.setTileMapping(g.addVertex(cs, "popops::abs", {{"in", x}, {"out", z}}), 0);
              return program::Execute(cs);
            }),
            "vertex 4 writes element 0 of 'x' that vertex 5 reads"));
  CHECK(has(engineOf([&] {
              poplar::ComputeSet cs = g.addComputeSet("remote");
              g.setTileMapping(g.addVertex(cs, "popops::negate", {{"in", x}, {"out", y}}), 0);
              return program::Execute(cs);
            }),
            "is connected to an element of 'y' on tile 1"));
  CHECK(has(engineOf([&] {
              poplar::ComputeSet cs = g.addComputeSet("constant");
              g.setTileMapping(g.addVertex(cs, "popops::negate", {{"in", x}, {"out", k}}), 0);
              return program::Execute(cs);
            }),
            "writes the constant 'k'"));
  CHECK(has(engineOf([&] {
              poplar::ComputeSet cs = g.addComputeSet("untiled");
              g.addVertex(cs, "popops::negate", {{"in", x}, {"out", x}});
              return program::Execute(cs);
            }),
            "has no tile"));
  CHECK(has(errorOf([&] { poplar::Engine e(g, program::Sequence(), {{"debug.instrument", "true"}}); }),
            "Unrecognised Engine option 'debug.instrument'"));
  CHECK(has(errorOf([&] { program::Copy(x, n); }), "must have the same element type"));
  CHECK(has(errorOf([&] { g.setTileMapping(x, 4); }), "tile 4 of 'x' (f32[4]) is not one of the target's 4 tiles"));
  CHECK(has(errorOf([&] { x.reshape({3}); }), "has 4 elements"));
  g.createHostRead("x", x);
  poplar::Engine e(g, program::Sequence());
  float two[2];
  CHECK(has(errorOf([&] { e.readTensor("x", two, two + 2); }), "a buffer of 8 bytes, the tensor 'x' (f32[4]) has 16"));
  CHECK(has(errorOf([&] { e.readTensor("nope", two, two + 2); }), "no tensor has the handle 'nope'"));
}

void controlStreamsAndHostFunctions() {
  poplar::Graph g(smallTarget());
  poplar::Tensor count = g.addVariable(INT, {1}, "count"), one = g.addConstant(INT, {1}, 1.0, "one");
  poplar::Tensor which = g.addVariable(INT, {1}, "which"), got = g.addVariable(INT, {1}, "got");
  poplar::Tensor data = g.addVariable(FLOAT, {3}, "data"), doubled = g.addVariable(FLOAT, {3}, "doubled");
  poplar::Tensor flag = g.addVariable(poplar::BOOL, {1}, "flag");
  for (const auto& t : {count, one, which, got, data, doubled, flag}) g.setTileMapping(t, 2);
  poplar::ComputeSet inc = g.addComputeSet("inc");
  g.setTileMapping(g.addVertex(inc, "popops::add", {{"in1", count}, {"in2", one}, {"out", count}}), 2);
  poplar::Tensor ten = g.addConstant(INT, {1}, 10.0, "ten"), twenty = g.addConstant(INT, {1}, 20.0, "twenty");
  poplar::Tensor none = g.addConstant(INT, {1}, -1.0, "none");
  for (const auto& t : {ten, twenty, none}) g.setTileMapping(t, 2);
  program::Switch choose(which[0], program::Copy(none, got));
  choose.add(1, program::Copy(ten, got)).add(2, program::Copy(twenty, got));
  poplar::DataStream in = g.addHostToDeviceFIFO("in", FLOAT, 3), out = g.addDeviceToHostFIFO("out", FLOAT, 3);
  poplar::HostFunction twice = g.addHostFunction("twice", {{FLOAT, 3}}, {{FLOAT, 3}});
  program::Sequence body{program::Execute(inc), program::Copy(in, data), program::Call(twice, {data}, {doubled}),
                         program::Copy(doubled, out)};
  program::Sequence prog{program::Repeat(3, body), choose, program::If(flag[0], program::Execute(inc))};
  poplar::Tensor cycles = poplar::cycleCount(g, prog, 2);
  g.createHostWrite("count", count);
  g.createHostWrite("which", which);
  g.createHostWrite("flag", flag);
  g.createHostRead("count", count);
  g.createHostRead("got", got);
  g.createHostRead("cycles", cycles);
  for (const char* threads : {"1", "2"}) {
    poplar::Engine e(g, prog, {{"emulator.hostThreads", threads}});
    std::vector<float> feed = {1, 2, 3, 4, 5, 6};  // two entries, used in turn: 1 2 3, 4 5 6, 1 2 3
    std::vector<std::vector<float>> outfed;
    e.connectStream("in", feed.data(), feed.data() + feed.size());
    e.connectStreamToCallback("out", [&](void* p) {
      const float* f = static_cast<const float*>(p);
      outfed.emplace_back(f, f + 3);
    });
    e.connectHostFunction("twice", [](const std::vector<const void*>& ins, const std::vector<void*>& outs) {
      for (int i = 0; i < 3; ++i) static_cast<float*>(outs[0])[i] = 2 * static_cast<const float*>(ins[0])[i];
    });
    const int32_t zero = 0, two = 2;
    const uint8_t yes = 1;
    e.writeTensor("count", &zero, &zero + 1);
    e.writeTensor("which", &two, &two + 1);
    e.writeTensor("flag", &yes, &yes + 1);
    e.run();
    CHECK(read<int32_t>(e, "count", 1)[0] == 4);  // three repeats and the If
    CHECK(read<int32_t>(e, "got", 1)[0] == 20);
    CHECK(outfed.size() == 3);
    CHECK(outfed.size() == 3 && outfed[0] == std::vector<float>({2, 4, 6}) &&
          outfed[1] == std::vector<float>({8, 10, 12}) && outfed[2] == std::vector<float>({2, 4, 6}));
    const auto c = read<uint32_t>(e, "cycles", 2);
    CHECK(c[0] == e.profile().total_cycles && c[1] == 0);
    const int32_t nine = 9;
    e.writeTensor("which", &nine, &nine + 1);
    e.run();
    CHECK(read<int32_t>(e, "got", 1)[0] == -1);
  }
  poplar::Engine unconnected(g, prog);
  CHECK(has(errorOf([&] { unconnected.run(); }), "stream 'in' is not connected"));
}

// A loop whose predicate is an int (nonzero: go on) of 512, then 256, then 0: read as the int it is, not as its
// first byte (which is 0 for 512 and 256). The loop's steps charge once it ends, as the executor charges them.
void loopOnAnIntegerPredicate() {
  poplar::Graph g(smallTarget());
  poplar::Tensor count = g.addVariable(INT, {1}, "count"), left = g.addVariable(INT, {1}, "left");
  poplar::Tensor step = g.addConstant(INT, {1}, 256.0, "step"), limit = g.addConstant(INT, {1}, 512.0, "limit");
  for (const auto& t : {count, left, step, limit}) g.setTileMapping(t, 1);
  poplar::ComputeSet cond = g.addComputeSet("left"), body = g.addComputeSet("count");
  g.setTileMapping(g.addVertex(cond, "popops::subtract", {{"in1", limit}, {"in2", count}, {"out", left}}), 1);
  g.setTileMapping(g.addVertex(body, "popops::add", {{"in1", count}, {"in2", step}, {"out", count}}), 1);
  g.createHostWrite("count", count);
  g.createHostRead("count", count);
  poplar::Engine e(g, program::RepeatWhileTrue(program::Execute(cond), left[0], program::Execute(body)));
  const int32_t zero = 0;
  e.writeTensor("count", &zero, &zero + 1);
  e.run();
  CHECK(read<int32_t>(e, "count", 1)[0] == 512);
  const ipu::RunProfile& p = e.profile();
  CHECK(p.steps.size() == 3 && p.steps[0].type == "RepeatWhileTrue" && p.steps[0].executions == 3 &&
        p.steps[1].name == "left" && p.steps[1].executions == 3 && p.steps[2].executions == 2);
  uint64_t total = 0;
  for (const auto& s : p.steps) total += s.compute_cycles + s.exchange_cycles + s.sync_cycles;
  CHECK(total == p.total_cycles && p.supersteps == 3 + 3 + 2);
}

}  // namespace

int main() {
  elementwiseMatchesTheHost();
  viewsShowTheirElements();
  costsFollowTheModel();
  memoryIsChecked();
  errorsNameTheThing();
  controlStreamsAndHostFunctions();
  loopOnAnIntegerPredicate();
  std::printf("%s: %d failure(s); %zu built-in codelets\n", failures ? "FAILED" : "ok", failures,
              poplar::builtinCodelets().size());
  return failures ? 1 : 0;
}
