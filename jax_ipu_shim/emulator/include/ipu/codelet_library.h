// Codelets compiled into a shared library: C++ classes deriving from poplar::Vertex (jax_ipu/include/
// poplar/Vertex.hpp), compiled with the glue jax_ipu.codelets writes. The library describes itself: its codelets'
// names, each one's fields (name, direction, vector or scalar, element type), and entries that bind a vertex's
// fields and run its compute() or its cycles() estimate. One loader serves the graph API (Graph::addCodelets) and
// jax_ipu.tile's custom vertices (ipu/tile.h).
#pragma once

#include <string>
#include <vector>

#include "ipu/poplar.h"

namespace ipu {
namespace poplar {

// The interface of the glue (jax_ipu/codelets.py ABI); a library of another version is refused.
constexpr const char* kCodeletAbi = "jax_ipu.codelet.1";

struct LibraryField {
  FieldSpec spec;
  bool vector = true;      // a Vector<T> (any number of elements) rather than exactly one element
  Type type = DType::F32;  // its elements' type
};

struct LibraryCodelet {
  std::string name;
  std::vector<LibraryField> fields;  // declaration order
  bool has_cycles = false;           // the class has a cycles() estimate; otherwise `codelet.cycles` is empty
  Codelet codelet;                   // checks types and sizes, computes (throwing Error when compute() fails)
};

// Every codelet the library at `path` defines, in its order. The library stays loaded while any codelet of it
// lives. Throws Error(InvalidArgument) naming the file and what is missing or wrong.
std::vector<LibraryCodelet> loadCodeletLibrary(const std::string& path);

}  // namespace poplar
}  // namespace ipu
