#pragma once
// Shape arithmetic shared by every op: dim wrapping, checked element counts,
// contiguous strides and broadcasting.
#include <array>
#include <cstdint>
#include <iosfwd>
#include <type_traits>
#include <utility>
#include <vector>

namespace ember {

// The sizes (or strides) of a tensor: a std::vector<int64_t> in every way, and its own type so
// that ember's operator<< is found for it: `std::cout << x.sizes()` prints "[2, 3]", as
// LibTorch's IntArrayRef does. vec() is IntArrayRef's copy out.
struct Shape : std::vector<int64_t> {
  using std::vector<int64_t>::vector;
  Shape() = default;
  Shape(const std::vector<int64_t>& v) : std::vector<int64_t>(v) {}        // NOLINT: implicit by design
  Shape(std::vector<int64_t>&& v) : std::vector<int64_t>(std::move(v)) {}  // NOLINT: implicit by design
  std::vector<int64_t> vec() const { return *this; }
};
std::ostream& operator<<(std::ostream& os, const Shape& shape);
// LibTorch's name for what sizes() returns (there a view, here the sizes themselves).
using IntArrayRef = Shape;
// Two sizes, one per spatial dim (the kernel, stride, padding and dilation of 2-D ops). One
// number stands for both, as LibTorch's ExpandingArray<2> takes it: max_pool2d(x, 2).
struct Int2 : std::array<int64_t, 2> {
  constexpr Int2() : std::array<int64_t, 2>{0, 0} {}
  constexpr Int2(int64_t both) : std::array<int64_t, 2>{both, both} {}  // NOLINT: implicit by design
  constexpr Int2(int64_t h, int64_t w) : std::array<int64_t, 2>{h, w} {}
  constexpr Int2(const std::array<int64_t, 2>& a) : std::array<int64_t, 2>(a) {}  // NOLINT
};

namespace detail {
// Enables LibTorch's integer-for-a-list forms (x.sum(1), zeros(n), x.view(-1)): a template that
// takes only integers, so that a braced list, {} included, still picks the Shape overload.
template <class I>
using if_index = std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int>;
}  // namespace detail

// Wraps a possibly negative `dim` into [0, ndim); throws naming `op` when out of range.
// A 0-d tensor accepts dims -1 and 0, as PyTorch does.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
// Product of sizes; throws on a negative size or when the product overflows int64.
int64_t checked_numel(const Shape& sizes, const char* op);
Shape contiguous_strides(const Shape& sizes);
// The shape that folds all but the last `keep` dims into one: [2, 3, 4] with keep 1 -> [6, 4].
// Unlike reshape({-1, n}) it is defined when n is 0 (Linear(0, n) on [b, 0], as in PyTorch).
Shape fold_leading(const Shape& sizes, int64_t keep = 1);
// Elements a (sizes, strides) layout spans from its first element: 1 + the largest offset,
// or 0 when empty. Throws naming `op` on a length mismatch, a negative stride or overflow.
int64_t storage_extent(const Shape& sizes, const Shape& strides, const char* op);
// NumPy broadcasting of two shapes; throws naming `op` and both shapes when they clash.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
bool is_contiguous_layout(const Shape& sizes, const Shape& strides);

}  // namespace ember
