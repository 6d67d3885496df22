// Copying a strided view of an array into row-major order: what a transpose, broadcast, slice and a matmul's operand
// staging do on the host. Host speed only: every element is the same copy (or conversion) in any order, so neither
// values nor estimated cycles depend on how it is done here.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

namespace ipu {

// Rows (and columns) of a transposed copy done together: 16 rows read each 64-byte line of an f32 source once, where
// row by row reads it once per element.
constexpr int64_t kTransposeRows = 16;

// o[i - b] = conv(x[base + sum_d idx_d(i) * strides[d]]) for the elements i in [b, e) of the view, in row-major order
// over `shape` (idx(i): i's index). Where the last dimension is strided and the one before it is contiguous in x (a
// transpose of the two minor dimensions: a dot's operand with its contracting dimension first, a gradient's
// transpose), whole rows are copied kTransposeRows at a time, in square blocks, so that each line of x and of o is
// touched once. `Same`: conv is the identity on one type (contiguous runs are one memcpy).
template <bool Same, class In, class Out, class Conv>
void copyStridedView(const In* x, Out* o, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                     int64_t base, int64_t b, int64_t e, Conv&& conv) {
  const size_t rank = shape.size();
  if (b >= e) return;
  if (rank == 0) {
    o[0] = conv(x[base]);
    return;
  }
  if (std::all_of(strides.begin(), strides.end(), [](int64_t s) { return s == 0; })) {
    std::fill(o, o + (e - b), conv(x[base]));  // a broadcast of one element (jnp.zeros): every element is x[base]
    return;
  }
  // The index of element b (on the stack for the ranks programs have: this runs once per step of a loop).
  int64_t small[8];
  std::vector<int64_t> large(rank > 8 ? rank : 0);
  int64_t* idx = rank > 8 ? large.data() : small;
  int64_t rest = b;
  for (size_t d = rank; d-- > 0;) {
    if (shape[d] == 0) return;
    idx[d] = rest % shape[d];
    rest /= shape[d];
  }
  int64_t src = base;
  for (size_t d = 0; d < rank; ++d) src += idx[d] * strides[d];
  const size_t last = rank - 1;
  const int64_t row = shape[last], inner = strides[last];
  const bool transposed = rank >= 2 && inner != 1 && strides[last - 1] == 1 && row > 1;
  // After idx[d] moved on by whole steps: carry into the dimensions before d.
  auto carry = [&](size_t d) {
    for (; d > 0 && idx[d] == shape[d]; --d) {
      src -= shape[d] * strides[d];
      idx[d] = 0;
      ++idx[d - 1];
      src += strides[d - 1];
    }
  };
  for (int64_t i = b; i < e;) {
    if (transposed && idx[last] == 0) {
      const int64_t rows = std::min({kTransposeRows, shape[last - 1] - idx[last - 1], (e - i) / row});
      if (rows >= 2) {
        Out* out = o + (i - b);
        // Through a tile on the stack, kTransposeRows columns at a time: the reads take whole lines of x, the writes
        // whole lines of o, each line once. (Stepping through o by columns instead would write kTransposeRows lines a
        // row apart, which a power-of-two row maps to the same cache set.)
        In tile[kTransposeRows * kTransposeRows];
        for (int64_t j0 = 0; j0 < row; j0 += kTransposeRows) {
          const int64_t cols = std::min(kTransposeRows, row - j0);
          for (int64_t j = 0; j < cols; ++j) {
            const In* column = x + src + (j0 + j) * inner;  // `rows` consecutive elements of x
            for (int64_t r = 0; r < rows; ++r) tile[j * kTransposeRows + r] = column[r];
          }
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t j = 0; j < cols; ++j) out[r * row + j0 + j] = conv(tile[j * kTransposeRows + r]);
        }
        i += rows * row;
        idx[last - 1] += rows;
        src += rows;  // strides[last - 1] == 1
        carry(last - 1);
        continue;
      }
    }
    const int64_t len = std::min(e - i, row - idx[last]);
    Out* out = o + (i - b);
    if (inner == 1) {
      if constexpr (Same) std::memcpy(out, x + src, static_cast<size_t>(len) * sizeof(In));
      else
        for (int64_t k = 0; k < len; ++k) out[k] = conv(x[src + k]);
    } else if (inner == 0) {
      std::fill(out, out + len, conv(x[src]));  // a row broadcast along its last dimension
    } else {
      for (int64_t k = 0; k < len; ++k) out[k] = conv(x[src + k * inner]);
    }
    i += len;
    src += len * inner;
    idx[last] += len;
    carry(last);
  }
}

}  // namespace ipu
