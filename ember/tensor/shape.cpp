#include "ember/tensor/shape.h"

#include <functional>
#include <limits>
#include <numeric>
#include <sstream>

#include "ember/tensor/error.h"

namespace ember {

std::string shape_str(const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Shape& shape) { return os << shape_str(shape); }

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  const int64_t n = ndim == 0 ? 1 : ndim;
  EMBER_CHECK(dim >= -n && dim < n, op, ": dimension out of range (expected to be in range of [", -n, ", ", n - 1,
              "], but got ", dim, ")");
  return dim < 0 ? dim + n : dim;
}

int64_t checked_numel(const Shape& sizes, const char* op) {
  int64_t n = 1;
  for (int64_t s : sizes) {
    EMBER_CHECK(s >= 0, op, ": negative dimension ", s, " in shape ", shape_str(sizes));
  }
  for (int64_t s : sizes) {
    EMBER_CHECK(!__builtin_mul_overflow(n, s, &n), op, ": the number of elements of shape ", shape_str(sizes),
                " overflows int64");
  }
  return n;
}

Shape fold_leading(const Shape& sizes, int64_t keep) {
  EMBER_CHECK(keep >= 0 && keep <= static_cast<int64_t>(sizes.size()), "fold_leading: cannot keep ", keep,
              " dims of shape ", shape_str(sizes));
  const auto split = sizes.end() - keep;
  Shape out{std::accumulate(sizes.begin(), split, int64_t{1}, std::multiplies<int64_t>())};
  out.insert(out.end(), split, sizes.end());
  return out;
}

Shape contiguous_strides(const Shape& sizes) {
  Shape strides(sizes.size());
  int64_t s = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = s;
    // Only an empty tensor (a 0 among its sizes) can overflow here, since a non-empty one's
    // element count was checked: its strides address nothing, so they saturate.
    if (__builtin_mul_overflow(s, sizes[i] > 0 ? sizes[i] : 1, &s)) s = std::numeric_limits<int64_t>::max();
  }
  return strides;
}

int64_t storage_extent(const Shape& sizes, const Shape& strides, const char* op) {
  EMBER_CHECK(sizes.size() == strides.size(), op, ": sizes ", shape_str(sizes), " and strides ", shape_str(strides),
              " differ in length");
  if (checked_numel(sizes, op) == 0) return 0;
  int64_t extent = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    EMBER_CHECK(strides[i] >= 0, op, ": negative stride ", strides[i], " in ", shape_str(strides));
    int64_t span = 0;
    EMBER_CHECK(
        !__builtin_mul_overflow(sizes[i] - 1, strides[i], &span) && !__builtin_add_overflow(extent, span, &extent), op,
        ": sizes ", shape_str(sizes), " and strides ", shape_str(strides), " overflow");
  }
  return extent;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    EMBER_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", shape_str(a), " and ", shape_str(b),
                " cannot be broadcast (size ", da, " vs ", db, " at dimension ", i, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

bool is_contiguous_layout(const Shape& sizes, const Shape& strides) {
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 1) continue;  // stride of a size-1 dim does not matter
    if (sizes[i] == 0) return true;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

}  // namespace ember
