// A hand-mapped stencil on the IPU Model through the graph API (ipu/poplar.h), as one writes it for Poplar.
//
// The heat equation on a 64 x 32 plate whose edges are held at fixed temperatures, solved by Jacobi iteration until
// no point moves by more than a tolerance. The rows are spread over 8 tiles; each interior row is a vertex of a
// custom codelet that reads its row and the rows above and below (a neighbour's boundary row comes over the
// exchange). The convergence test uses built-in codelets (popops::subtract, popops::abs, popops::reduce_maximum,
// popops::compare_GT): a per-tile maximum, then the maximum of those on tile 0. poplar::cycleCount times the loop.
//
// The host runs the same iteration in the same float arithmetic; the program prints one JSON line and exits 0 only
// if the IPU's plate is bit for bit the host's and the loop ran as many sweeps.
//
// Build and run (objects shared with the wheel's library):
//   python -m build_tools build-program examples/cpp/heat_stencil.cc && build/programs/heat_stencil
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <vector>

#include "ipu/poplar.h"

namespace poplar = ipu::poplar;
using poplar::FLOAT;

namespace {

constexpr unsigned kRows = 64, kCols = 32, kTiles = 8, kRowsPerTile = kRows / kTiles;
constexpr float kTolerance = 1e-3f;

// One row of a Jacobi sweep: the mean of the four neighbours of each interior point; the row's ends are fixed.
float sweepPoint(const float* up, const float* mid, const float* down, unsigned j) {
  return 0.25f * ((up[j] + down[j]) + (mid[j - 1] + mid[j + 1]));
}

poplar::Codelet heatRow() {
  poplar::Codelet c;
  c.fields = {{"up", poplar::FieldDirection::Input},
              {"mid", poplar::FieldDirection::Input},
              {"down", poplar::FieldDirection::Input},
              {"out", poplar::FieldDirection::Output}};
  c.check = [](const poplar::VertexData& d) -> std::string {
    for (const char* f : {"up", "mid", "down", "out"})
      if (d[f].type != FLOAT || d[f].size != d["out"].size) return std::string("field '") + f + "' must be float[n]";
    return d["out"].size < 2 ? "a row has at least two points" : "";
  };
  c.compute = [](const poplar::VertexData& d) {
    const float *up = d.data<float>("up"), *mid = d.data<float>("mid"), *down = d.data<float>("down");
    float* out = d.data<float>("out");
    const size_t n = d["out"].size;
    out[0] = mid[0];
    out[n - 1] = mid[n - 1];
    for (unsigned j = 1; j + 1 < n; ++j) out[j] = sweepPoint(up, mid, down, j);
  };
  // Worker cycles: 4 loads, 3 adds and a multiply per point, 2 points per 64-bit vector; 20 cycles of setup.
  c.cycles = [](const poplar::VertexData& d) { return uint64_t{20 + 4 * ((d["out"].size + 1) / 2)}; };
  return c;
}

std::vector<float> initialPlate() {
  std::vector<float> plate(kRows * kCols, 0.0f);
  for (unsigned j = 0; j < kCols; ++j) plate[j] = 100.0f;                         // the hot top edge
  for (unsigned i = 0; i < kRows; ++i) plate[i * kCols + kCols - 1] = 50.0f;      // a warm right edge
  return plate;
}

// The host's reference: the same sweeps (two per iteration, as the program's) until the largest change is small.
std::vector<float> reference(unsigned* iterations) {
  std::vector<float> u = initialPlate(), v = u;
  for (*iterations = 1;; ++*iterations) {
    for (int pass = 0; pass < 2; ++pass) {
      std::vector<float>& from = pass == 0 ? u : v;
      std::vector<float>& to = pass == 0 ? v : u;
      for (unsigned i = 1; i + 1 < kRows; ++i) {
        const float *up = &from[(i - 1) * kCols], *mid = &from[i * kCols], *down = &from[(i + 1) * kCols];
        to[i * kCols] = mid[0];
        to[i * kCols + kCols - 1] = mid[kCols - 1];
        for (unsigned j = 1; j + 1 < kCols; ++j) to[i * kCols + j] = sweepPoint(up, mid, down, j);
      }
    }
    float change = 0;
    for (size_t k = 0; k < u.size(); ++k) change = std::fmax(change, std::fabs(u[k] - v[k]));
    if (!(change > kTolerance)) return u;
  }
}

}  // namespace

int main() {
  poplar::Target target = poplar::IPUModel().createTarget();
  poplar::Graph graph(target);
  graph.addCodelet("HeatRow", heatRow());

  poplar::Tensor u = graph.addVariable(FLOAT, {kRows, kCols}, "u");
  poplar::Tensor v = graph.addVariable(FLOAT, {kRows, kCols}, "v");
  poplar::Tensor diff = graph.addVariable(FLOAT, {kRows, kCols}, "diff");
  poplar::Tensor partial = graph.addVariable(FLOAT, {kTiles}, "partial");
  poplar::Tensor change = graph.addVariable(FLOAT, {1}, "change");
  poplar::Tensor moving = graph.addVariable(poplar::BOOL, {1}, "moving");
  poplar::Tensor tolerance = graph.addConstant(FLOAT, {1}, kTolerance, "tolerance");
  for (unsigned t = 0; t < kTiles; ++t) {
    for (const poplar::Tensor& x : {u, v, diff})
      graph.setTileMapping(x.slice(t * kRowsPerTile, (t + 1) * kRowsPerTile), t);
    graph.setTileMapping(partial[t], t);
  }
  for (const poplar::Tensor& x : {change, moving, tolerance}) graph.setTileMapping(x, 0);

  // A sweep from `from` into `to`: a vertex per interior row, on the tile of the row it writes.
  auto sweep = [&](const poplar::Tensor& from, const poplar::Tensor& to, const std::string& name) {
    poplar::ComputeSet cs = graph.addComputeSet(name);
    for (unsigned i = 1; i + 1 < kRows; ++i) {
      poplar::VertexRef row = graph.addVertex(
          cs, "HeatRow", {{"up", from[i - 1]}, {"mid", from[i]}, {"down", from[i + 1]}, {"out", to[i]}});
      graph.setTileMapping(row, i / kRowsPerTile);
    }
    return cs;
  };
  poplar::ComputeSet uv = sweep(u, v, "sweep u->v"), vu = sweep(v, u, "sweep v->u");

  // |u - v| on every tile, its maximum per tile, the maximum of those, and whether it is above the tolerance.
  poplar::ComputeSet delta = graph.addComputeSet("delta"), local = graph.addComputeSet("local max");
  poplar::ComputeSet global = graph.addComputeSet("global max");
  for (unsigned t = 0; t < kTiles; ++t) {
    const poplar::Tensor rows = diff.slice(t * kRowsPerTile, (t + 1) * kRowsPerTile);
    poplar::VertexRef d = graph.addVertex(delta, "popops::subtract",
                                          {{"in1", u.slice(t * kRowsPerTile, (t + 1) * kRowsPerTile)},
                                           {"in2", v.slice(t * kRowsPerTile, (t + 1) * kRowsPerTile)},
                                           {"out", rows}});
    graph.setTileMapping(d, t);
    poplar::VertexRef a = graph.addVertex(local, "popops::abs", {{"in", rows}, {"out", rows}});
    graph.setTileMapping(a, t);
  }
  poplar::ComputeSet reduce = graph.addComputeSet("tile max");
  for (unsigned t = 0; t < kTiles; ++t) {
    poplar::VertexRef m = graph.addVertex(
        reduce, "popops::reduce_maximum",
        {{"in", diff.slice(t * kRowsPerTile, (t + 1) * kRowsPerTile).flatten()}, {"out", partial.slice(t, t + 1)}});
    graph.setTileMapping(m, t);
  }
  graph.setTileMapping(graph.addVertex(global, "popops::reduce_maximum", {{"in", partial}, {"out", change}}), 0);
  poplar::ComputeSet test = graph.addComputeSet("test");
  graph.setTileMapping(
      graph.addVertex(test, "popops::compare_GT", {{"in1", change}, {"in2", tolerance}, {"out", moving}}), 0);

  poplar::program::Sequence iteration{poplar::program::Execute(uv),     poplar::program::Execute(vu),
                                      poplar::program::Execute(delta),  poplar::program::Execute(local),
                                      poplar::program::Execute(reduce), poplar::program::Execute(global),
                                      poplar::program::Execute(test)};
  poplar::program::Sequence solve{poplar::program::Copy(u, v),
                                  poplar::program::RepeatWhileTrue(iteration, moving[0], poplar::program::Sequence())};
  poplar::Tensor cycles = poplar::cycleCount(graph, solve, 0, "solve cycles");

  graph.createHostWrite("u", u);
  graph.createHostRead("u", u);
  graph.createHostRead("cycles", cycles);
  std::vector<poplar::program::Program> programs{solve};
  poplar::Engine engine(graph, programs);

  std::vector<float> plate = initialPlate();
  engine.writeTensor("u", plate.data(), plate.data() + plate.size());
  engine.run(0);
  engine.readTensor("u", plate.data(), plate.data() + plate.size());
  uint32_t counted[2];
  engine.readTensor("cycles", counted, counted + 2);

  unsigned iterations = 0;
  const std::vector<float> expected = reference(&iterations);
  size_t differing = 0;
  for (size_t k = 0; k < plate.size(); ++k) differing += std::memcmp(&plate[k], &expected[k], sizeof(float)) != 0;
  uint64_t loop_runs = 0;
  for (const ipu::StepProfile& s : engine.profile().steps)
    if (s.type == "RepeatWhileTrue") loop_runs = s.executions;
  const uint64_t counter = counted[0] | (uint64_t{counted[1]} << 32);

  std::printf(
      "{\"iterations\": %u, \"ipu_iterations\": %llu, \"differing_points\": %zu, \"centre\": %.6f, "
      "\"cycles\": %llu, \"cycle_count\": %llu, \"worst_tile_bytes\": %lld}\n",
      iterations, static_cast<unsigned long long>(loop_runs), differing, plate[32 * kCols + 16],
      static_cast<unsigned long long>(engine.profile().total_cycles), static_cast<unsigned long long>(counter),
      static_cast<long long>(engine.memory().worst_bytes));
  if (std::getenv("HEAT_STENCIL_PROFILE")) engine.printProfileSummary(std::cout);
  return differing == 0 && loop_runs == iterations ? 0 : 1;
}
