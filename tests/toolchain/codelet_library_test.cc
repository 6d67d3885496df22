// Graph::addCodelets: codelets compiled from poplar::Vertex classes (jax_ipu.codelets) added to a graph by hand and
// run through an Engine. Usage: codelet_library_test <library> (test_graph_api.py compiles the library first).
// Prints one JSON line: the outputs, the run's cycles, and the error texts of a missing library and estimate.
#include <iostream>
#include <string>
#include <vector>

#include "ipu/poplar.h"

namespace poplar = ipu::poplar;

std::string errorOf(void (*f)(const std::string&), const std::string& arg) {
  try {
    f(arg);
  } catch (const std::exception& e) { return e.what(); }
  return "";
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) out += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
  return out + "\"";
}

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::string library = argv[1];
  poplar::Target target = poplar::IPUModel().createTarget();
  poplar::Graph graph(target);
  const std::vector<std::string> names = graph.addCodelets(library);
  poplar::Tensor x = graph.addVariable(poplar::FLOAT, {2, 3}, "x");
  poplar::Tensor y = graph.addVariable(poplar::FLOAT, {2, 3}, "y");
  poplar::ComputeSet cs = graph.addComputeSet("saxpy");
  for (unsigned t = 0; t < 2; ++t) {  // a vertex per tile, on that tile's row: y = 2 x + 1 (y starts at 1)
    graph.setTileMapping(x.slice(t, t + 1, 0), t);
    graph.setTileMapping(y.slice(t, t + 1, 0), t);
    poplar::VertexRef v = graph.addVertex(cs, "Axpy", {{"x", x.slice(t, t + 1, 0)}, {"y", y.slice(t, t + 1, 0)}});
    graph.setInitialValue(v["a"], 2.0);
    graph.setTileMapping(v, t);
  }
  graph.createHostWrite("x", x);
  graph.createHostWrite("y", y);
  graph.createHostRead("y", y);
  poplar::Engine engine(graph, poplar::program::Execute(cs));
  const float in[6] = {0, 1, 2, 3, 4, 5}, ones[6] = {1, 1, 1, 1, 1, 1};
  float out[6];
  engine.writeTensor("x", in, in + 6);
  engine.writeTensor("y", ones, ones + 6);
  engine.run(0);
  engine.readTensor("y", out, out + 6);
  std::cout << "{\"codelets\": [";
  for (size_t i = 0; i < names.size(); ++i) std::cout << (i ? ", " : "") << quoted(names[i]);
  std::cout << "], \"y\": [";
  for (int i = 0; i < 6; ++i) std::cout << (i ? ", " : "") << out[i];
  std::cout << "], \"compute_cycles\": " << engine.profile().compute_cycles << ", \"missing\": "
            << quoted(errorOf(
                   [](const std::string& p) {
                     poplar::Graph g(poplar::IPUModel().createTarget());
                     g.addCodelets(p + ".missing");
                   },
                   library))
            << "}" << std::endl;
  return 0;
}
