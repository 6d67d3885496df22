// poplar::Tensor: a view of graph elements. Every view is its own list of element ids in row-major order, so that a
// slice, reshape, dimShuffle or broadcast connects vertices and copies to exactly the elements it shows.
#include <algorithm>
#include <numeric>

#include "state.h"

namespace ipu {
namespace poplar {

namespace {

[[noreturn]] void invalid(const std::string& what) { throw Error(ErrorCode::InvalidArgument, what); }

size_t product(const std::vector<size_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), size_t{1}, [](size_t a, size_t b) { return a * b; });
}

std::vector<size_t> stridesOf(const std::vector<size_t>& shape) {
  std::vector<size_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

}  // namespace

Tensor::Tensor(const GraphState* owner, Type type, std::vector<size_t> shape, std::vector<int64_t> ids)
    : owner_(owner), type_(type), shape_(std::move(shape)),
      ids_(std::make_shared<const std::vector<int64_t>>(std::move(ids))) {}

Tensor Tensor::view(std::vector<size_t> shape, std::vector<int64_t> ids) const {
  return Tensor(owner_, type_, std::move(shape), std::move(ids));
}

const std::vector<int64_t>& Tensor::elements() const {
  if (!ids_) invalid("poplar::Tensor: an empty (default-constructed) tensor has no elements");
  return *ids_;
}

size_t Tensor::dim(unsigned i) const {
  if (i >= shape_.size())
    invalid("poplar::Tensor::dim(" + std::to_string(i) + "): the tensor " + shapeToString() + " has rank " +
            std::to_string(shape_.size()));
  return shape_[i];
}

std::string Tensor::shapeToString() const {
  std::string s = "[";
  for (size_t i = 0; i < shape_.size(); ++i) s += (i ? "," : "") + std::to_string(shape_[i]);
  return s + "]";
}

Tensor Tensor::slice(const std::vector<size_t>& begin, const std::vector<size_t>& end) const {
  if (begin.size() != shape_.size() || end.size() != shape_.size())
    invalid("poplar::Tensor::slice: give a begin and an end per dimension of " + shapeToString());
  std::vector<size_t> out(shape_.size());
  for (size_t d = 0; d < shape_.size(); ++d) {
    if (begin[d] > end[d] || end[d] > shape_[d])
      invalid("poplar::Tensor::slice: [" + std::to_string(begin[d]) + ", " + std::to_string(end[d]) +
              ") is not a range of dimension " + std::to_string(d) + " of " + shapeToString());
    out[d] = end[d] - begin[d];
  }
  const std::vector<int64_t>& src = elements();
  const std::vector<size_t> strides = stridesOf(shape_);
  std::vector<int64_t> ids;
  ids.reserve(product(out));
  std::vector<size_t> ix(out.size(), 0);
  const size_t n = product(out);
  for (size_t k = 0; k < n; ++k) {
    size_t off = 0;
    for (size_t d = 0; d < out.size(); ++d) off += (begin[d] + ix[d]) * strides[d];
    ids.push_back(src[off]);
    for (size_t d = out.size(); d-- > 0;) {
      if (++ix[d] < out[d]) break;
      ix[d] = 0;
    }
  }
  return view(std::move(out), std::move(ids));
}

Tensor Tensor::slice(size_t begin, size_t end, unsigned dimension) const {
  std::vector<size_t> b(shape_.size(), 0), e = shape_;
  if (dimension >= shape_.size())
    invalid("poplar::Tensor::slice: dimension " + std::to_string(dimension) + " of " + shapeToString());
  b[dimension] = begin;
  e[dimension] = end;
  return slice(b, e);
}

Tensor Tensor::operator[](size_t i) const {
  if (shape_.empty()) invalid("poplar::Tensor::operator[]: a scalar has no dimension to index");
  Tensor s = slice(i, i + 1, 0);
  return s.squeeze({0});
}

Tensor Tensor::index(const std::vector<size_t>& indices) const {
  Tensor t = *this;
  for (size_t i : indices) t = t[i];
  return t;
}

Tensor Tensor::reshape(const std::vector<size_t>& shape) const {
  if (product(shape) != numElements())
    invalid("poplar::Tensor::reshape: " + shapeToString() + " has " + std::to_string(numElements()) +
            " elements, not as many as the new shape");
  return view(shape, elements());
}

Tensor Tensor::dimShuffle(const std::vector<unsigned>& permutation) const {
  std::vector<unsigned> sorted = permutation;
  std::sort(sorted.begin(), sorted.end());
  for (size_t d = 0; d < sorted.size(); ++d)
    if (sorted.size() != shape_.size() || sorted[d] != d)
      invalid("poplar::Tensor::dimShuffle: the permutation must name each dimension of " + shapeToString() + " once");
  std::vector<size_t> out(shape_.size());
  for (size_t d = 0; d < out.size(); ++d) out[d] = shape_[permutation[d]];
  const std::vector<size_t> strides = stridesOf(shape_);
  const std::vector<int64_t>& src = elements();
  std::vector<int64_t> ids;
  ids.reserve(src.size());
  std::vector<size_t> ix(out.size(), 0);
  for (size_t k = 0; k < src.size(); ++k) {
    size_t off = 0;
    for (size_t d = 0; d < out.size(); ++d) off += ix[d] * strides[permutation[d]];
    ids.push_back(src[off]);
    for (size_t d = out.size(); d-- > 0;) {
      if (++ix[d] < out[d]) break;
      ix[d] = 0;
    }
  }
  return view(std::move(out), std::move(ids));
}

Tensor Tensor::transpose() const {
  if (shape_.size() != 2) invalid("poplar::Tensor::transpose: needs a rank 2 tensor, not " + shapeToString());
  return dimShuffle({1, 0});
}

Tensor Tensor::broadcast(unsigned times, unsigned dimension) const {
  if (dimension >= shape_.size())
    invalid("poplar::Tensor::broadcast: dimension " + std::to_string(dimension) + " of " + shapeToString());
  // Each slice along `dimension` repeated `times` in place: [a, b] broadcast 2 along 0 is [a, b, a, b]... by rows.
  std::vector<size_t> out = shape_;
  out[dimension] *= times;
  const std::vector<int64_t>& src = elements();
  size_t outer = 1, inner = 1;
  for (size_t d = 0; d < dimension; ++d) outer *= shape_[d];
  for (size_t d = dimension; d < shape_.size(); ++d) inner *= shape_[d];
  std::vector<int64_t> ids;
  ids.reserve(src.size() * times);
  for (size_t o = 0; o < outer; ++o)
    for (unsigned r = 0; r < times; ++r)
      ids.insert(ids.end(), src.begin() + static_cast<int64_t>(o * inner),
                 src.begin() + static_cast<int64_t>((o + 1) * inner));
  return view(std::move(out), std::move(ids));
}

Tensor Tensor::expand(const std::vector<size_t>& indices) const {
  std::vector<size_t> out = shape_;
  std::vector<size_t> sorted = indices;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i : sorted) {
    if (i > out.size()) invalid("poplar::Tensor::expand: position " + std::to_string(i) + " of " + shapeToString());
    out.insert(out.begin() + static_cast<int64_t>(i), 1);
  }
  return view(std::move(out), elements());
}

Tensor Tensor::squeeze(const std::vector<size_t>& dimensions) const {
  std::vector<size_t> out;
  for (size_t d = 0; d < shape_.size(); ++d) {
    const bool drop = std::find(dimensions.begin(), dimensions.end(), d) != dimensions.end();
    if (drop && shape_[d] != 1)
      invalid("poplar::Tensor::squeeze: dimension " + std::to_string(d) + " of " + shapeToString() + " is not 1");
    if (!drop) out.push_back(shape_[d]);
  }
  return view(std::move(out), elements());
}

Tensor Tensor::reverse(unsigned dimension) const {
  if (dimension >= shape_.size())
    invalid("poplar::Tensor::reverse: dimension " + std::to_string(dimension) + " of " + shapeToString());
  const std::vector<size_t> strides = stridesOf(shape_);
  const std::vector<int64_t>& src = elements();
  std::vector<int64_t> ids(src.size());
  for (size_t k = 0; k < src.size(); ++k) {
    const size_t i = (k / strides[dimension]) % shape_[dimension];
    const size_t j = shape_[dimension] - 1 - i;
    ids[k] = src[k + (j - i) * strides[dimension]];
  }
  return view(shape_, std::move(ids));
}

Tensor concat(const std::vector<Tensor>& tensors, unsigned dimension) {
  if (tensors.empty()) invalid("poplar::concat: no tensors");
  const Tensor& first = tensors[0];
  std::vector<size_t> out = first.shape();
  if (dimension >= out.size())
    invalid("poplar::concat: dimension " + std::to_string(dimension) + " of " + first.shapeToString());
  out[dimension] = 0;
  for (const Tensor& t : tensors) {
    if (t.owner_ != first.owner_ || t.elementType() != first.elementType() || t.rank() != first.rank())
      invalid("poplar::concat: tensors of one graph, one element type and one rank only");
    for (unsigned d = 0; d < t.rank(); ++d)
      if (d != dimension && t.dim(d) != first.dim(d))
        invalid("poplar::concat: " + t.shapeToString() + " and " + first.shapeToString() +
                " differ outside "
                "dimension " +
                std::to_string(dimension));
    out[dimension] += t.dim(dimension);
  }
  size_t outer = 1;
  for (size_t d = 0; d < dimension; ++d) outer *= out[d];
  std::vector<int64_t> ids;
  for (size_t o = 0; o < outer; ++o)
    for (const Tensor& t : tensors) {
      const size_t inner = t.numElements() / std::max<size_t>(outer, 1);
      const std::vector<int64_t>& src = t.elements();
      ids.insert(ids.end(), src.begin() + static_cast<int64_t>(o * inner),
                 src.begin() + static_cast<int64_t>((o + 1) * inner));
    }
  return first.view(std::move(out), std::move(ids));
}

}  // namespace poplar
}  // namespace ipu
