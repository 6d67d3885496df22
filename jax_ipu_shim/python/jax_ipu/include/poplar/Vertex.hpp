// Poplar's vertex vocabulary for custom codelets run by the emulator (jax_ipu.tile.vertex compiles a source that
// includes this header). A codelet is a class deriving from poplar::Vertex whose fields are its connections:
//
//   #include <poplar/Vertex.hpp>
//
//   class Saxpy : public poplar::Vertex {
//    public:
//     poplar::Input<poplar::Vector<float>> x;
//     poplar::Input<poplar::Vector<float>> y;
//     poplar::Output<poplar::Vector<float>> out;
//     float a;                                      // a value field: a constant given when the vertex is mapped
//
//     bool compute() {
//       for (unsigned i = 0; i < out.size(); ++i) out[i] = a * x[i] + y[i];
//       return true;                                // false: the vertex failed (the run stops with an error)
//     }
//     // Optional: the cycle estimate of one worker running this vertex (Poplar's getCyclesEstimate); the sizes
//     // of the connected fields are set, their data is not.
//     std::uint64_t cycles() const { return 20 + 2 * out.size(); }
//   };
//
// Fields: Input / Output / InOut of a Vector<T> (the tile's row of a tile-sharded array) or of a T (an array of one
// element per tile), and plain members of type T (values). T is float, int, unsigned, short, unsigned short,
// signed char, unsigned char or bool (f32, i32, u32, i16, u16, i8, u8, bool). The template parameters Poplar's
// Vector takes after T (layout, alignment) are accepted and mean nothing here.
//
// Not an IPU compiler: the codelet is compiled for the host and runs in the emulator's process, with the IPU's
// float semantics around it (denormals flushed). Code that writes outside its fields' elements is not caught.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace poplar {

class Vertex {};

enum class VectorLayout { ONE_PTR, SPAN, SCALED_PTR32, SCALED_PTR64, COMPACT_PTR, COMPACT_DELTAN };

template <class T, VectorLayout L = VectorLayout::SPAN, unsigned Align = alignof(T), bool Interleaved = false>
class Vector;

namespace detail {

// What the emulator hands a vertex's connected field: its elements on this tile.
struct Bound {
  void* data = nullptr;
  std::size_t size = 0;
};

template <class T, bool Writable>
class VectorView {
 public:
  using Element = typename std::conditional<Writable, T, const T>::type;
  std::size_t size() const { return bound_.size; }
  Element& operator[](std::size_t i) const { return static_cast<Element*>(bound_.data)[i]; }
  Element* data() const { return static_cast<Element*>(bound_.data); }
  Element* begin() const { return data(); }
  Element* end() const { return data() + size(); }
  void jaxIpuBind(Bound b) { bound_ = b; }

 private:
  Bound bound_;
};

template <class T, bool Writable>
class ScalarView {
 public:
  using Element = typename std::conditional<Writable, T, const T>::type;
  operator T() const { return *static_cast<const T*>(bound_.data); }
  Element& operator*() const { return *static_cast<Element*>(bound_.data); }
  template <bool W = Writable, class = typename std::enable_if<W>::type>
  ScalarView& operator=(T value) {
    *static_cast<T*>(bound_.data) = value;
    return *this;
  }
  void jaxIpuBind(Bound b) { bound_ = b; }

 private:
  Bound bound_;
};

template <class F, bool Writable>
struct FieldOf {
  using type = ScalarView<F, Writable>;
};
template <class T, VectorLayout L, unsigned A, bool I, bool Writable>
struct FieldOf<Vector<T, L, A, I>, Writable> {
  using type = VectorView<T, Writable>;
};

}  // namespace detail

template <class F>
class Input : public detail::FieldOf<F, false>::type {};
template <class F>
class Output : public detail::FieldOf<F, true>::type {
 public:
  using detail::FieldOf<F, true>::type::operator=;
};
template <class F>
class InOut : public detail::FieldOf<F, true>::type {
 public:
  using detail::FieldOf<F, true>::type::operator=;
};

}  // namespace poplar
