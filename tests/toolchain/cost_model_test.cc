// Tests of the cost model's internals (below the graph API: ipu/matmul.h), built with the emulator's objects and run
// by test_cost_model.py. Each CHECK prints what failed; the exit status is the number of failures.
#include <cstdint>
#include <cstdio>
#include <vector>

#include "check.h"
#include "ipu/matmul.h"

namespace {


// Tiles 2i and 2i+1 share an exchange bus: an operand block both receive crosses it once (poplibs'
// ExchangeEstimator; ipu-model.md), so its bytes count half on each; a matmul's blocks are in k, n, m order.
void supertileNeighboursShareTheirBlocks() {
  const std::vector<int64_t> lhs{100, 100, 100, 100}, rhs{40, 40, 40, 40};
  ipu::MatmulPlan n_split;  // neighbours differ in n: the same lhs block
  n_split.n.parts = 4;
  CHECK((ipu::supertileExchangeBytes(n_split, lhs, rhs) == std::vector<int64_t>{90, 90, 90, 90}));
  ipu::MatmulPlan m_split;  // in m: the same rhs block
  m_split.m.parts = 4;
  CHECK((ipu::supertileExchangeBytes(m_split, lhs, rhs) == std::vector<int64_t>{120, 120, 120, 120}));
  ipu::MatmulPlan k_split;  // in k: nothing in common
  k_split.k.parts = 2, k_split.n.parts = 2;
  CHECK((ipu::supertileExchangeBytes(k_split, lhs, rhs) == std::vector<int64_t>{140, 140, 140, 140}));
  ipu::MatmulPlan odd;  // three blocks: the third has no neighbour; what a tile holds already is not received
  odd.n.parts = 3;
  CHECK((ipu::supertileExchangeBytes(odd, {100, 60, 100}, {40, 40, 40}) == std::vector<int64_t>{110, 70, 140}));
}

}  // namespace

int main() {
  supertileNeighboursShareTheirBlocks();
  std::printf("%s: %d failure(s)\n", failures ? "FAILED" : "ok", failures);
  return failures ? 1 : 0;
}
