#pragma once
// Shape arithmetic shared by every op: dim wrapping, checked element counts,
// contiguous strides and broadcasting.
#include <array>
#include <cstdint>
#include <vector>

namespace ember {

using Shape = std::vector<int64_t>;
// Two sizes, one per spatial dim (the kernel, stride, padding and dilation of 2-D ops).
using Int2 = std::array<int64_t, 2>;

// Wraps a possibly negative `dim` into [0, ndim); throws naming `op` when out of range.
// A 0-d tensor accepts dims -1 and 0, as PyTorch does.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
// Product of sizes; throws on a negative size or when the product overflows int64.
int64_t checked_numel(const Shape& sizes, const char* op);
Shape contiguous_strides(const Shape& sizes);
// Elements a (sizes, strides) layout spans from its first element: 1 + the largest offset,
// or 0 when empty. Throws naming `op` on a length mismatch, a negative stride or overflow.
int64_t storage_extent(const Shape& sizes, const Shape& strides, const char* op);
// NumPy broadcasting of two shapes; throws naming `op` and both shapes when they clash.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
bool is_contiguous_layout(const Shape& sizes, const Shape& strides);

}  // namespace ember
