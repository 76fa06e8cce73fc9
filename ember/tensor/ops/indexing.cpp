// Indexing ops: index_select, gather, scatter, scatter_add, nonzero, embedding, one_hot, tril/triu.
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "ember/tensor/memory_overlap.h"
#include "ember/tensor/ops/internal.h"

namespace ember::native {
namespace {

Tensor index_as_int64(const Tensor& index, const char* op, bool allow_int32) {
  ops::check_defined(index, op, "index");
  EMBER_CHECK(index.dtype() == kInt64 || (allow_int32 && index.dtype() == kInt32), op, ": expected an int64",
              allow_int32 ? " or int32" : "", " index tensor, but got ", index.dtype());
  return native::to(index, kInt64);
}

}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  ops::check_defined(x, "index_select");
  ops::check_same_device({&x, &index}, "index_select");
  const Tensor idx = index_as_int64(index, "index_select", true);
  EMBER_CHECK(idx.dim() <= 1, "index_select: index must be 0-D or 1-D, got shape ", shape_str(index.sizes()));
  const Tensor src = contiguous(x.dim() == 0 ? reshape(x, {1}) : x);
  dim = wrap_dim(dim, src.dim(), "index_select");
  Shape shape = src.sizes();
  shape[dim] = idx.numel();
  Tensor out = ops::empty_on(shape, x.dtype(), x.device());
  if (idx.numel() > 0) {
    EMBER_CHECK(src.size(dim) > 0, "index_select: cannot select from dimension ", dim, " of size 0");
    backend(x.device()).index_select(src, dim, native::reshape(idx, {-1}), out);
  }
  return x.dim() == 0 ? native::reshape(out, {}) : out;
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  ops::check_defined(x, "gather");
  ops::check_same_device({&x, &index}, "gather");
  const Tensor idx = index_as_int64(index, "gather", false);
  dim = wrap_dim(dim, x.dim(), "gather");
  EMBER_CHECK(idx.dim() == x.dim(), "gather: index tensor must have the same number of dimensions as input (",
              idx.dim(), " vs ", x.dim(), ")");
  for (int64_t d = 0; d < x.dim(); ++d)
    EMBER_CHECK(d == dim || idx.size(d) <= x.size(d), "gather: size of index ", shape_str(idx.sizes()),
                " exceeds the input's ", shape_str(x.sizes()), " at dimension ", d);
  Tensor out = ops::empty_on(idx.sizes(), x.dtype(), x.device());
  // A 0-d input (and index) is one element: the kernels see it as [1], as PyTorch does.
  auto one_d = [](const Tensor& t) { return t.dim() == 0 ? native::view(t, {1}) : t; };
  if (out.numel() > 0) backend(x.device()).gather(one_d(x), dim, one_d(idx), one_d(out));
  return out;
}

namespace {
// scatter_ and scatter_add_: the checks, then the kernel that adds or overwrites.
Tensor& scatter_checked(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, bool accumulate) {
  const char* op = accumulate ? "scatter_add" : "scatter";
  ops::check_defined(x, op);
  ops::check_defined(src, op, "src");
  ops::check_same_device({&x, &index, &src}, op);
  const Tensor idx = index_as_int64(index, op, false);
  dim = wrap_dim(dim, x.dim(), op);
  EMBER_CHECK(src.dtype() == x.dtype(), op, ": expected src dtype ", x.dtype(), ", got ", src.dtype());
  EMBER_CHECK(idx.dim() == x.dim() && src.dim() == x.dim(), op, ": index ", shape_str(idx.sizes()), ", src ",
              shape_str(src.sizes()), " and self ", shape_str(x.sizes()), " must have the same number of dimensions");
  for (int64_t d = 0; d < x.dim(); ++d)
    EMBER_CHECK(idx.size(d) <= src.size(d) && (d == dim || idx.size(d) <= x.size(d)), op, ": index of shape ",
                shape_str(idx.sizes()), " is larger than src ", shape_str(src.sizes()), " or self ",
                shape_str(x.sizes()), " at dimension ", d);
  const std::string inplace = std::string(op) + "_";
  assert_no_internal_overlap(x, inplace.c_str());  // Note [Memory overlap]
  assert_no_partial_overlap(x, src, inplace.c_str());
  auto one_d = [](const Tensor& t) { return t.dim() == 0 ? native::view(t, {1}) : t; };  // as in gather
  if (idx.numel() == 0) return x;
  if (accumulate)
    backend(x.device()).scatter_add(one_d(x), dim, one_d(idx), one_d(src));
  else
    backend(x.device()).scatter(one_d(x), dim, one_d(idx), one_d(src));
  return x;
}
}  // namespace

Tensor& scatter_add_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_checked(x, dim, index, src, true);
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  ops::check_defined(x, "scatter_add");
  Tensor out = native::clone(x);
  return scatter_add_(out, dim, index, src);
}

Tensor& scatter_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_checked(x, dim, index, src, false);
}

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  ops::check_defined(x, "scatter");
  Tensor out = native::clone(x);
  return scatter_(out, dim, index, src);
}

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  ops::check_defined(weight, "embedding", "weight");
  EMBER_CHECK(weight.dim() == 2, "embedding: weight must be 2-D [num_embeddings, embedding_dim], got shape ",
              shape_str(weight.sizes()));
  const Tensor idx = index_as_int64(indices, "embedding", true);
  Shape shape = idx.sizes();
  shape.push_back(weight.size(1));
  return view(index_select(weight, 0, reshape(idx, {-1})), shape);
}

Tensor one_hot(const Tensor& indices, int64_t num_classes) {
  const Tensor idx = index_as_int64(indices, "one_hot", false);
  if (idx.numel() > 0) {
    const int64_t lo = native::amin(idx).item<int64_t>(), hi = native::amax(idx).item<int64_t>();
    EMBER_CHECK(lo >= 0, "one_hot: class values must be non-negative, got ", lo);
    if (num_classes == -1) {  // (hi + 1 classes: a count that int64 can hold)
      EMBER_CHECK(hi < std::numeric_limits<int64_t>::max(), "one_hot: can not count ", hi,
                  " + 1 classes (int64 overflow); give num_classes");
      num_classes = hi + 1;
    }
    EMBER_CHECK(hi < num_classes, "one_hot: class values must be smaller than num_classes (", num_classes, "), got ",
                hi);
  } else {
    EMBER_CHECK(num_classes != -1, "one_hot: can not infer the number of classes from an empty tensor");
  }
  EMBER_CHECK(num_classes >= 0, "one_hot: num_classes must be non-negative or -1, got ", num_classes);
  return to(eq(unsqueeze(idx, -1), arange(num_classes, TensorOptions().dtype(kInt64).device(idx.device()))), kInt64);
}

// [count, dim] positions of the nonzero elements, row-major. The count decides the shape, so
// the values are read on the host: one copy of a bool mask back from a GPU (PyTorch's nonzero
// waits for the device too).
Tensor nonzero(const Tensor& x) {
  ops::check_defined(x, "nonzero");
  const Tensor mask = contiguous(to(x.dtype() == kBool ? x : ne(x, Scalar(0)), Device(kCPU), kBool));
  const auto* m = static_cast<const bool*>(mask.data_ptr());
  const int64_t n = mask.numel(), D = x.dim();
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) count += m[i] ? 1 : 0;
  Tensor out = ops::empty_on({count, D}, kInt64, Device(kCPU));
  auto* o = static_cast<int64_t*>(out.data_ptr());
  std::vector<int64_t> at(static_cast<size_t>(D), 0);  // the multi-index of element i
  for (int64_t i = 0; i < n; ++i) {
    if (m[i]) o = std::copy(at.begin(), at.end(), o);
    for (int64_t d = D - 1; d >= 0; --d) {  // the next multi-index, the last dim fastest
      if (++at[static_cast<size_t>(d)] < x.size(d)) break;
      at[static_cast<size_t>(d)] = 0;
    }
  }
  return x.is_cpu() ? out : to(out, x.device(), kInt64);
}

namespace {
// keep(i, j) = lower ? j - i <= k : j - i >= k over the last two dims.
Tensor triangle(const Tensor& x, int64_t k, bool lower, const char* op) {
  ops::check_defined(x, op);
  EMBER_CHECK(x.dim() >= 2, op, ": input must have at least 2 dimensions, got shape ", shape_str(x.sizes()));
  const TensorOptions opts = TensorOptions().dtype(kInt64).device(x.device());
  const Tensor rows = unsqueeze(arange(x.size(-2), opts), 1), cols = unsqueeze(arange(x.size(-1), opts), 0);
  const Tensor diff = sub(cols, rows);
  const Tensor keep = lower ? le(diff, k) : ge(diff, k);
  return where(keep, x, full({}, 0, TensorOptions().dtype(x.dtype()).device(x.device())));
}
}  // namespace

Tensor tril(const Tensor& x, int64_t diagonal) { return triangle(x, diagonal, true, "tril"); }
Tensor triu(const Tensor& x, int64_t diagonal) { return triangle(x, diagonal, false, "triu"); }

}  // namespace ember::native
