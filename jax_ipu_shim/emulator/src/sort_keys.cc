// The native order of sort's key comparators, for every key type and comparison (sort_keys.h).
#include "sort_keys.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <type_traits>
#include <utility>

#include "ipu/scalar_ops.h"

namespace ipu {
namespace sort_keys {

namespace {

// Sorts the (key, position) pairs by key, stably, into `idx`. A template of the key's type and the comparison alone
// (not of the element type and key function of KeyOrderOf), so that the sorts are compiled once per key type.
template <class K, class Cmp>
void orderKeyed(std::vector<std::pair<K, uint32_t>>* keyed_pairs, bool nan, std::vector<int64_t>* idx) {
  std::vector<std::pair<K, uint32_t>>& keyed = *keyed_pairs;
  if (nan) {
    std::iota(idx->begin(), idx->end(), int64_t{0});
    std::stable_sort(idx->begin(), idx->end(), [&](int64_t x, int64_t y) {
      return Cmp{}(keyed[static_cast<size_t>(x)].first, keyed[static_cast<size_t>(y)].first);
    });
    return;
  }
  std::stable_sort(keyed.begin(), keyed.end(), [](const std::pair<K, uint32_t>& x, const std::pair<K, uint32_t>& y) {
    return Cmp{}(x.first, y.first);
  });
  for (size_t j = 0; j < keyed.size(); ++j) (*idx)[j] = keyed[j].second;
}

template <class T, class Key, class Cmp>
class KeyOrderOf : public KeyOrder {
 public:
  KeyOrderOf(ScalarProgram key, int key_register) : key_(std::move(key)), reg_(key_register) {}
  void order(const std::vector<const uint8_t*>& in, const std::vector<SortOperand>& ops, int64_t base, int64_t stride,
             int64_t n, std::vector<int64_t>* idx) const override {
    using K = decltype(Key{}(T{}));
    ScalarRegisters file(key_);
    uint8_t* r = file.bytes();
    const size_t at = kRegBytes * static_cast<size_t>(reg_);
    std::vector<std::pair<K, uint32_t>> keyed(static_cast<size_t>(n));
    bool nan = false;
    for (int64_t j = 0; j < n; ++j) {
      for (size_t k = 0; k < ops.size(); ++k)
        copyElement(r + 2 * kRegBytes * k, in[k] + (base + j * stride) * static_cast<int64_t>(ops[k].size),
                    ops[k].size);
      key_.run(file.data());
      T v;
      std::memcpy(&v, r + at, sizeof(T));
      const K kv = Key{}(v);
      if (std::is_floating_point<K>::value) nan = nan || kv != kv;
      keyed[static_cast<size_t>(j)] = {kv, static_cast<uint32_t>(j)};
    }
    orderKeyed<K, Cmp>(&keyed, nan, idx);
  }

 private:
  ScalarProgram key_;
  int reg_;
};

template <class T, class Key, class Cmp>
std::unique_ptr<KeyOrder> makeKeyOrder(scalar::CompareOp<T, Key, Cmp>, ScalarProgram key, int key_register) {
  // splitKeyCompare gives LT and GT alone (a strict weak order): no kernels for the other directions.
  if constexpr (std::is_same<Cmp, std::less<>>::value || std::is_same<Cmp, std::greater<>>::value) {
    return std::make_unique<KeyOrderOf<T, Key, Cmp>>(std::move(key), key_register);
  } else {
    return nullptr;
  }
}

// c64's EQ/NE are no order: such a comparator is interpreted.
template <class F>
std::unique_ptr<KeyOrder> makeKeyOrder(F, const ScalarProgram&, int) {
  return nullptr;
}

}  // namespace

std::shared_ptr<const KeyOrder> keyOrder(const ScalarProgram& cmp, int64_t n) {
  ScalarProgram key;
  ScalarProgram::KeyCompare kc;
  scalar::Direction d;
  if (n > int64_t{0xFFFFFFFF} || !cmp.splitKeyCompare(&key, &kc) || !scalar::parseDirection(kc.direction, &d))
    return nullptr;
  std::shared_ptr<const KeyOrder> order;
  scalar::visitCompare(d, kc.compare_type, kc.dtype,
                       [&](auto f, auto) { order = makeKeyOrder(f, key, kc.key_register); });
  return order;
}

}  // namespace sort_keys
}  // namespace ipu
