// The native order of sort's key comparators (sort_keys.cc): apart from sort.cc, since instantiating it for every
// key type and comparison is most of the sort's compile time, so the two compile side by side and a change to the
// lowering recompiles only sort.cc.
#ifndef JAX_IPU_EMULATOR_SRC_SORT_KEYS_H_
#define JAX_IPU_EMULATOR_SRC_SORT_KEYS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "ipu/scalar_program.h"

namespace ipu {
namespace sort_keys {

struct SortOperand {
  int in, out;
  size_t size;
};

// The native path for a comparator that is compare(LT or GT, key(lhs), key(rhs)) (ScalarProgram::splitKeyCompare):
// the key program runs once per element instead of the whole comparator twice per comparison, then the (key, index)
// pairs are stable-sorted by the compare's own functor. As that is a strict weak order (integer keys, or float keys
// without NaN), the stable order is unique, so this is exactly the interpreted comparator's result. Float keys with
// a NaN sort indices with the same functor and the same std::stable_sort as the interpreter, which calls it on the
// same pairs and so gives its result too.
class KeyOrder {
 public:
  virtual ~KeyOrder() = default;
  // idx[j]: the position in the slice of its j-th element in sorted order.
  virtual void order(const std::vector<const uint8_t*>& in, const std::vector<SortOperand>& ops, int64_t base,
                     int64_t stride, int64_t n, std::vector<int64_t>* idx) const = 0;
};

// The native order for `cmp`, or null when it is not a key comparison (the comparator is then interpreted).
std::shared_ptr<const KeyOrder> keyOrder(const ScalarProgram& cmp, int64_t n);

}  // namespace sort_keys
}  // namespace ipu

#endif  // JAX_IPU_EMULATOR_SRC_SORT_KEYS_H_
