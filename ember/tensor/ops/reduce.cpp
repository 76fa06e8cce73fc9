// Reductions. Each one views the input as [K, R] rows (kept dims x reduced dims) and
// calls the reduce kernel; var/std/norm/logsumexp are composed from primitives.
#include <cmath>
#include <limits>

#include "ember/tensor/ops/internal.h"

namespace ember {
namespace ops {

std::vector<bool> reduction_mask(const Tensor& x, const Shape& dims, const char* op) {
  check_defined(x, op);
  std::vector<bool> mask(static_cast<size_t>(x.dim()), dims.empty());
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, x.dim(), op);
    if (x.dim() == 0) continue;
    EMBER_CHECK(!mask[w] || dims.empty(), op, ": dim ", w, " appears multiple times in the list of dims ",
                shape_str(dims));
    mask[w] = true;
  }
  return mask;
}

Shape reduced_shape(const Shape& sizes, const std::vector<bool>& reduced, bool keepdim) {
  Shape out;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (!reduced[d])
      out.push_back(sizes[d]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

Tensor as_rows(const Tensor& x, const std::vector<bool>& reduced) {
  Shape perm;
  int64_t K = 1, R = 1;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (!reduced[d]) {
      perm.push_back(d);
      K *= x.size(d);
    }
  for (int64_t d = 0; d < x.dim(); ++d)
    if (reduced[d]) {
      perm.push_back(d);
      R *= x.size(d);
    }
  return native::reshape(native::permute(x, perm), {K, R});  // a view whenever the layout allows
}

}  // namespace ops

namespace native {
namespace {

int64_t reduced_count(const Tensor& x, const std::vector<bool>& mask) {
  int64_t r = 1;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (mask[d]) r *= x.size(d);
  return r;
}

// Runs the kernel; out dtype given by the caller.
Tensor reduce_into(ReduceOp op, const Tensor& x, const std::vector<bool>& mask, bool keepdim, DType out_dtype) {
  Tensor out = ops::empty_on(ops::reduced_shape(x.sizes(), mask, keepdim), out_dtype, x.device());
  if (out.numel() > 0) backend(x.device()).reduce(op, ops::as_rows(x, mask), out, Tensor());
  return out;
}

void check_nonempty(const Tensor& x, const std::vector<bool>& mask, const char* op) {
  for (int64_t d = 0; d < x.dim(); ++d)
    EMBER_CHECK(!(mask[d] && x.size(d) == 0), op, ": expected reduction dim ", d,
                " to have non-zero size (input shape ", shape_str(x.sizes()), ")");
  EMBER_CHECK(x.numel() > 0 || x.dim() > 0, op, ": cannot reduce an empty tensor");
}

DType sum_dtype(DType d) { return is_floating(d) ? d : kInt64; }

void check_floating(const Tensor& x, const char* op) {
  EMBER_CHECK(x.is_floating_point(), op, ": input dtype must be a floating point dtype, got ", x.dtype());
}

}  // namespace

Tensor sum(const Tensor& x_in, const Shape& dims, bool keepdim, std::optional<DType> dtype) {
  const auto mask = ops::reduction_mask(x_in, dims, "sum");
  const Tensor x = dtype ? native::to(x_in, *dtype) : x_in;
  return reduce_into(ReduceOp::Sum, x, mask, keepdim, sum_dtype(x.dtype()));
}

Tensor mean(const Tensor& x, const Shape& dims, bool keepdim) {
  const auto mask = ops::reduction_mask(x, dims, "mean");
  EMBER_CHECK(x.is_floating_point(),
              "mean: could not infer output dtype; input dtype must be a floating point dtype, got ", x.dtype());
  const int64_t R = reduced_count(x, mask);
  if (x.dtype() == kFloat16 || x.dtype() == kBFloat16)  // divide before rounding to 16 bits
    return to(div(sum(x, dims, keepdim, kFloat32), static_cast<double>(R)), x.dtype());
  Tensor s = reduce_into(ReduceOp::Sum, x, mask, keepdim, x.dtype());
  return div_(s, full({}, static_cast<double>(R), TensorOptions(s.dtype()).device(s.device())));
}

Tensor prod(const Tensor& x, const Shape& dims, bool keepdim) {
  const auto mask = ops::reduction_mask(x, dims, "prod");
  return reduce_into(ReduceOp::Prod, x, mask, keepdim, sum_dtype(x.dtype()));
}

Tensor amax(const Tensor& x, const Shape& dims, bool keepdim) {
  const auto mask = ops::reduction_mask(x, dims, "amax");
  check_nonempty(x, mask, "amax");
  return reduce_into(ReduceOp::Max, x, mask, keepdim, x.dtype());
}

Tensor amin(const Tensor& x, const Shape& dims, bool keepdim) {
  const auto mask = ops::reduction_mask(x, dims, "amin");
  check_nonempty(x, mask, "amin");
  return reduce_into(ReduceOp::Min, x, mask, keepdim, x.dtype());
}

namespace {
std::tuple<Tensor, Tensor> extreme_with_index(const Tensor& x, int64_t dim, bool keepdim, ReduceOp op,
                                              const char* name) {
  const auto mask = ops::reduction_mask(x, {dim}, name);
  check_nonempty(x, mask, name);
  const Shape shape = ops::reduced_shape(x.sizes(), mask, keepdim);
  Tensor values = ops::empty_on(shape, x.dtype(), x.device());
  Tensor indices = ops::empty_on(shape, kInt64, x.device());
  if (values.numel() > 0) backend(x.device()).reduce(op, ops::as_rows(x, mask), values, indices);
  return {values, indices};
}

Tensor arg_extreme(const Tensor& x, std::optional<int64_t> dim, bool keepdim, ReduceOp op, const char* name) {
  ops::check_defined(x, name);
  if (!dim) {
    EMBER_CHECK(x.numel() > 0, name, ": expected a non-empty tensor (got shape ", shape_str(x.sizes()), ")");
    Tensor flat = native::reshape(x, {-1});
    Tensor out = reduce_into(op, flat, {true}, false, kInt64);
    return keepdim ? native::reshape(out, Shape(static_cast<size_t>(x.dim()), 1)) : out;
  }
  const auto mask = ops::reduction_mask(x, {*dim}, name);
  check_nonempty(x, mask, name);
  return reduce_into(op, x, mask, keepdim, kInt64);
}
}  // namespace

std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  return extreme_with_index(x, dim, keepdim, ReduceOp::Max, "max");
}
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  return extreme_with_index(x, dim, keepdim, ReduceOp::Min, "min");
}
Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_extreme(x, dim, keepdim, ReduceOp::ArgMax, "argmax");
}
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_extreme(x, dim, keepdim, ReduceOp::ArgMin, "argmin");
}

Tensor var(const Tensor& x, const Shape& dims, bool unbiased, bool keepdim) {
  const auto mask = ops::reduction_mask(x, dims, "var");
  check_floating(x, "var");
  const int64_t R = reduced_count(x, mask);
  const Tensor centered = sub(x, mean(x, dims, true));
  // R - 1 <= 0 gives inf or nan, as in PyTorch (which also warns).
  return div(sum(mul(centered, centered), dims, keepdim), static_cast<double>(R - (unbiased ? 1 : 0)));
}

Tensor std(const Tensor& x, const Shape& dims, bool unbiased, bool keepdim) {
  return sqrt(var(x, dims, unbiased, keepdim));
}

Tensor norm(const Tensor& x, double p, const Shape& dims, bool keepdim) {
  ops::reduction_mask(x, dims, "norm");
  check_floating(x, "norm");
  if (std::isinf(p)) {
    if (x.numel() == 0) return sum(native::abs(x), dims, keepdim);  // PyTorch: 0 for an empty input
    return p > 0 ? amax(native::abs(x), dims, keepdim) : amin(native::abs(x), dims, keepdim);
  }
  if (p == 2) return sqrt(sum(mul(x, x), dims, keepdim));
  if (p == 1) return sum(native::abs(x), dims, keepdim);
  if (p == 0) return sum(to(ne(x, 0), x.dtype()), dims, keepdim);
  return pow(sum(pow(native::abs(x), p), dims, keepdim), 1.0 / p);
}

Tensor logsumexp(const Tensor& x_in, const Shape& dims, bool keepdim) {
  const auto mask = ops::reduction_mask(x_in, dims, "logsumexp");
  const Tensor x = x_in.is_floating_point() ? x_in : native::to(x_in, default_float_dtype());
  if (reduced_count(x, mask) == 0 || x.numel() == 0)
    return full(ops::reduced_shape(x.sizes(), mask, keepdim), -std::numeric_limits<double>::infinity(),
                TensorOptions().dtype(x.dtype()).device(x.device()));
  Tensor m = amax(x, dims, true);
  m = where(eq(abs(m), std::numeric_limits<double>::infinity()), 0.0, m);  // all -inf rows stay -inf
  Tensor out = add(log(sum(exp(sub(x, m)), dims, true)), m);
  if (!keepdim) out = native::reshape(out, ops::reduced_shape(x.sizes(), mask, false));
  return out;
}

Tensor all(const Tensor& x, const Shape& dims, bool keepdim) {
  return reduce_into(ReduceOp::All, x, ops::reduction_mask(x, dims, "all"), keepdim, kBool);
}
Tensor any(const Tensor& x, const Shape& dims, bool keepdim) {
  return reduce_into(ReduceOp::Any, x, ops::reduction_mask(x, dims, "any"), keepdim, kBool);
}

}  // namespace native
}  // namespace ember
