// Scans and sorting along one dim: cumsum, cumprod, sort, argsort, topk. Checks, shapes and dtypes, then
// the back end's cumsum, cumprod or sort kernel on a contiguous copy ([outer, D, inner]).
#include "ember/tensor/ops/internal.h"

namespace ember::native {
namespace {

// x contiguous, with a 0-d tensor as [1] (PyTorch takes dim 0 or -1 of a 0-d tensor).
Tensor lines_of(const Tensor& x) { return contiguous(x.dim() == 0 ? reshape(x, {1}) : x); }
Tensor shaped_like(const Tensor& out, const Tensor& x) { return x.dim() == 0 ? reshape(out, {}) : out; }

// cumsum's and cumprod's shared half: the dtype rule and the [outer, D, inner] copy.
Tensor scan(const Tensor& x, int64_t dim, std::optional<DType> dtype, bool reverse, bool product, const char* op) {
  ops::check_defined(x, op);
  dim = wrap_dim(dim, x.dim(), op);
  const DType out_dtype = dtype ? *dtype : (is_floating(x.dtype()) ? x.dtype() : kInt64);
  EMBER_CHECK(out_dtype != kBool, op, ": cannot accumulate in bool; give an integer or floating dtype");
  const Tensor src = lines_of(to(x, out_dtype));
  Tensor out = ops::empty_on(src.sizes(), out_dtype, x.device());
  if (out.numel() > 0) {
    if (product)
      backend(x.device()).cumprod(src, dim, out);
    else
      backend(x.device()).cumsum(src, dim, reverse, out);
  }
  return shaped_like(out, x);
}

}  // namespace

Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return scan(x, dim, dtype, false, false, "cumsum");
}
Tensor cumsum_reverse(const Tensor& x, int64_t dim) { return scan(x, dim, x.dtype(), true, false, "cumsum"); }
Tensor cumprod(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return scan(x, dim, dtype, false, true, "cumprod");
}

std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending) {
  ops::check_defined(x, "sort");
  dim = wrap_dim(dim, x.dim(), "sort");
  const Tensor src = lines_of(x);
  Tensor values = ops::empty_on(src.sizes(), x.dtype(), x.device());
  Tensor indices = ops::empty_on(src.sizes(), kInt64, x.device());
  if (src.numel() > 0) backend(x.device()).sort(src, dim, descending, values, indices);
  return {shaped_like(values, x), shaped_like(indices, x)};
}

Tensor argsort(const Tensor& x, int64_t dim, bool descending) { return std::get<1>(sort(x, dim, descending)); }

// The sort kernel asked for the first k of each line only (a partial sort on the CPU).
std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool /*sorted*/) {
  ops::check_defined(x, "topk");
  dim = wrap_dim(dim, x.dim(), "topk");
  const int64_t n = x.dim() == 0 ? 1 : x.size(dim);
  EMBER_CHECK(k >= 0 && k <= n, "topk: k (", k, ") must be in [0, ", n, "], the size of dimension ", dim,
              " of the input of shape ", shape_str(x.sizes()));
  const Tensor src = lines_of(x);
  Shape shape = src.sizes();
  shape[static_cast<size_t>(dim)] = k;
  Tensor values = ops::empty_on(shape, x.dtype(), x.device()), indices = ops::empty_on(shape, kInt64, x.device());
  if (values.numel() > 0) backend(x.device()).sort(src, dim, largest, values, indices);
  return {shaped_like(values, x), shaped_like(indices, x)};
}

}  // namespace ember::native
