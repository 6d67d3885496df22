// Small kernel templates shared by the op families: elementwise maps over host storage types.
#pragma once

#include <memory>

#include "ipu/graph.h"

namespace ipu {

template <class A, class O, class F>
inline void mapLoop1(const A* __restrict a, O* __restrict o, int64_t b, int64_t e, const F& f) {
  for (int64_t i = b; i < e; ++i) o[i] = f(a[i]);
}

template <class A, class B, class O, class F>
inline void mapLoop2(const A* __restrict a, const B* __restrict x, O* __restrict o, int64_t b, int64_t e, const F& f) {
  for (int64_t i = b; i < e; ++i) o[i] = f(a[i], x[i]);
}

// o[i] = f(a[i]) over storage types A -> O.
template <class A, class O, class F>
class Map1Kernel : public Kernel {
 public:
  Map1Kernel(int a, int o, F f) : a_(a), o_(o), f_(f) {}
  void compute(RunState& s, int64_t b, int64_t e) const override { mapLoop1(s.at<const A>(a_), s.at<O>(o_), b, e, f_); }

 private:
  int a_, o_;
  F f_;
};

// o[i] = f(a[i], b[i]).
template <class A, class B, class O, class F>
class Map2Kernel : public Kernel {
 public:
  Map2Kernel(int a, int x, int o, F f) : a_(a), x_(x), o_(o), f_(f) {}
  void compute(RunState& s, int64_t b, int64_t e) const override {
    mapLoop2(s.at<const A>(a_), s.at<const B>(x_), s.at<O>(o_), b, e, f_);
  }

 private:
  int a_, x_, o_;
  F f_;
};

// o[i] = f(a[i*sa], b[i*sb], c[i*sc]) where a stride of 0 broadcasts a scalar operand.
template <class A, class B, class C, class O, class F>
class Map3Kernel : public Kernel {
 public:
  Map3Kernel(int a, int x, int c, int o, int64_t sa, int64_t sb, int64_t sc, F f)
      : a_(a), x_(x), c_(c), o_(o), sa_(sa), sb_(sb), sc_(sc), f_(f) {}
  void compute(RunState& s, int64_t b, int64_t e) const override {
    const A* a = s.at<const A>(a_);
    const B* x = s.at<const B>(x_);
    const C* c = s.at<const C>(c_);
    O* o = s.at<O>(o_);
    for (int64_t i = b; i < e; ++i) o[i] = f_(a[i * sa_], x[i * sb_], c[i * sc_]);
  }

 private:
  int a_, x_, c_, o_;
  int64_t sa_, sb_, sc_;
  F f_;
};

template <class A, class O, class F>
std::unique_ptr<Kernel> map1(int a, int o, F f) {
  return std::make_unique<Map1Kernel<A, O, F>>(a, o, f);
}
template <class A, class B, class O, class F>
std::unique_ptr<Kernel> map2(int a, int x, int o, F f) {
  return std::make_unique<Map2Kernel<A, B, O, F>>(a, x, o, f);
}
template <class A, class B, class C, class O, class F>
std::unique_ptr<Kernel> map3(int a, int x, int c, int o, int64_t sa, int64_t sb, int64_t sc, F f) {
  return std::make_unique<Map3Kernel<A, B, C, O, F>>(a, x, c, o, sa, sb, sc, f);
}

}  // namespace ipu
