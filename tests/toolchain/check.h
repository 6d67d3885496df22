// CHECK for the C++ test programs here (graph_api_test.cc, cost_model_test.cc): a condition that fails prints its
// line and counts in `failures`; each program exits 1 if any failed.
#pragma once

#include <cstdio>

static int failures = 0;
#define CHECK(cond)                                               \
  do {                                                            \
    if (!(cond)) {                                                \
      std::printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                 \
    }                                                             \
  } while (0)
