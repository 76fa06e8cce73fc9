// LibTorch's ops that are compositions of the op list's: each is a few public (recorded) ops, so
// its gradient comes with them and it runs on every device the ops run on. Where a composite
// copies more than a kernel of its own would, the comment says so.
#include <cmath>
#include <limits>

#include "ember/autograd/functions.h"
#include "ember/autograd/grad_mode.h"

namespace ember {

Tensor clamp_min(const Tensor& x, const Scalar& min) { return clamp(x, min, std::nullopt); }
Tensor clamp_max(const Tensor& x, const Scalar& max) { return clamp(x, std::nullopt, max); }
Tensor max(const Tensor& a, const Tensor& b) { return maximum(a, b); }
Tensor min(const Tensor& a, const Tensor& b) { return minimum(a, b); }

Tensor dot(const Tensor& a, const Tensor& b) {
  EMBER_CHECK(a.defined() && b.defined(), "dot: a tensor is undefined");
  EMBER_CHECK(a.dim() == 1 && b.dim() == 1, "dot: 1D tensors expected, but got ", a.dim(), "D and ", b.dim(),
              "D tensors (shapes ", shape_str(a.sizes()), " and ", shape_str(b.sizes()), ")");
  EMBER_CHECK(a.size(0) == b.size(0), "dot: inconsistent tensor size, expected tensor [", a.size(0), "] and src [",
              b.size(0), "] to have the same number of elements, but got ", a.size(0), " and ", b.size(0),
              " elements respectively");
  EMBER_CHECK(a.dtype() == b.dtype(), "dot: expected both vectors to have same dtype, but found ", a.dtype(), " and ",
              b.dtype());
  return matmul(a, b);  // [n] @ [n] -> [], one GEMV
}

Tensor outer(const Tensor& a, const Tensor& b) {
  EMBER_CHECK(a.defined() && b.defined(), "outer: a tensor is undefined");
  EMBER_CHECK(a.dim() == 1 && b.dim() == 1, "outer: expected 1-D tensors, got shapes ", shape_str(a.sizes()), " and ",
              shape_str(b.sizes()));
  return mul(a.unsqueeze(1), b.unsqueeze(0));  // [n, 1] * [1, m] -> [n, m], PyTorch's own composition
}

namespace {
// The positions of `dims` in x, wrapped, each once.
std::vector<int64_t> distinct_dims(const Tensor& x, const Shape& dims, const char* op) {
  std::vector<int64_t> out;
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, x.dim(), op);
    for (int64_t seen : out) EMBER_CHECK(seen != w, op, ": dim ", w, " appears multiple times in the list of dims");
    out.push_back(w);
  }
  return out;
}
}  // namespace

// One index_select per flipped dim with the reversed positions (ember's strides are never
// negative, so a flip cannot be a view): a copy per dim, its gradient the same flip.
Tensor flip(const Tensor& x, const Shape& dims) {
  EMBER_CHECK(x.defined(), "flip: the tensor is undefined");
  Tensor out = x;
  for (int64_t d : distinct_dims(x, dims, "flip")) {
    if (x.dim() == 0 || x.size(d) <= 1) continue;
    const Tensor reversed = arange(x.size(d) - 1, -1, -1, TensorOptions(kInt64).device(x.device()));
    out = out.index_select(d, reversed);
  }
  return out.is_same(x) ? x.clone() : out;
}

// Each rolled dim: its last `shift` entries moved to the front, cat of two narrows. Without
// dims, the flattened tensor rolls and takes x's shape back.
Tensor roll(const Tensor& x, const Shape& shifts, const Shape& dims) {
  EMBER_CHECK(x.defined(), "roll: the tensor is undefined");
  if (dims.empty()) {
    EMBER_CHECK(shifts.size() == 1, "roll: without dims, expected one shift, got ", shape_str(shifts));
    return roll(x.flatten(), shifts, {0}).view(x.sizes());
  }
  EMBER_CHECK(shifts.size() == dims.size(), "roll: shifts and dimensions must align. shifts: ", shifts.size(),
              ", dims: ", dims.size());
  const std::vector<int64_t> wrapped = distinct_dims(x, dims, "roll");
  Tensor out = x;
  for (size_t i = 0; i < wrapped.size(); ++i) {
    const int64_t d = wrapped[i], n = x.dim() == 0 ? 1 : x.size(d);
    if (n == 0) continue;
    const int64_t s = ((shifts[i] % n) + n) % n;
    if (s == 0) continue;
    out = cat({out.narrow(d, n - s, s), out.narrow(d, 0, n - s)}, d);
  }
  return out.is_same(x) ? x.clone() : out;
}

// [.., n, ..] -> [.., n, r, ..] by expand, merged into [.., n r, ..]: one copy; expand's
// gradient sums the copies back. Without a dim the flattened tensor repeats.
Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim) {
  EMBER_CHECK(x.defined(), "repeat_interleave: the tensor is undefined");
  EMBER_CHECK(repeats >= 0, "repeat_interleave: repeats can not be negative, got ", repeats);
  const Tensor in = dim ? x : x.flatten();
  const int64_t d = dim ? wrap_dim(*dim, in.dim(), "repeat_interleave") : 0;
  if (in.dim() == 0) return repeat_interleave(in.reshape({1}), repeats, 0);
  int64_t size = 0;
  EMBER_CHECK(!__builtin_mul_overflow(in.size(d), repeats, &size), "repeat_interleave: ", repeats, " repeats of size ",
              in.size(d), " overflow int64");
  Shape expanded = in.sizes();
  expanded.insert(expanded.begin() + d + 1, repeats);
  Shape merged = in.sizes();
  merged[d] = size;
  return in.unsqueeze(d + 1).expand(expanded).reshape(merged);
}

// The positions repeated: [0] * r0 + [1] * r1 + ..., read on the host (the output's length
// depends on the values, as PyTorch's CUDA version also waits for them).
Tensor repeat_interleave(const Tensor& repeats) {
  EMBER_CHECK(repeats.defined(), "repeat_interleave: the repeats tensor is undefined");
  EMBER_CHECK(repeats.dim() <= 1, "repeat_interleave: repeats must be 0-dim or 1-dim tensor, got shape ",
              shape_str(repeats.sizes()));
  EMBER_CHECK(repeats.dtype() == kInt64 || repeats.dtype() == kInt32,
              "repeat_interleave: repeats has to be Long or Int tensor, got ", repeats.dtype());
  const std::vector<int64_t> counts = repeats.to_vector<int64_t>();
  std::vector<int64_t> positions;
  for (size_t i = 0; i < counts.size(); ++i) {
    EMBER_CHECK(counts[i] >= 0, "repeat_interleave: repeats can not be negative, got ", counts[i]);
    EMBER_CHECK(positions.size() + static_cast<uint64_t>(counts[i]) < (uint64_t{1} << 40),
                "repeat_interleave: the repeats sum to more elements than ember allocates");
    positions.insert(positions.end(), static_cast<size_t>(counts[i]), static_cast<int64_t>(i));
  }
  return tensor(positions).to(repeats.device());
}

Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim) {
  EMBER_CHECK(x.defined() && repeats.defined(), "repeat_interleave: a tensor is undefined");
  const Tensor in = dim ? x : x.flatten();
  const int64_t d = dim ? wrap_dim(*dim, in.dim(), "repeat_interleave") : 0;
  if (in.dim() == 0) return repeat_interleave(in.reshape({1}), repeats, 0);
  EMBER_CHECK(repeats.numel() == 1 || repeats.numel() == in.size(d),
              "repeat_interleave: repeats must have the "
              "same size as input along dim, but got repeats of shape ",
              shape_str(repeats.sizes()), " and input ", shape_str(in.sizes()), " along dim ", d);
  if (repeats.numel() == 1 && repeats.dim() <= 1) {
    EMBER_CHECK(repeats.dtype() == kInt64 || repeats.dtype() == kInt32,
                "repeat_interleave: repeats has to be Long or Int tensor, got ", repeats.dtype());
    return repeat_interleave(in, repeats.item<int64_t>(), d);
  }
  return in.index_select(d, repeat_interleave(repeats));  // one copy, index_select's gradient
}

// NaN is the one value unequal to itself; inf is the one finite-looking value whose difference
// with itself is NaN. Integers and bools are never NaN nor infinite.
Tensor isnan(const Tensor& x) {
  EMBER_CHECK(x.defined(), "isnan: the tensor is undefined");
  return ne(x, x);
}
Tensor isinf(const Tensor& x) {
  EMBER_CHECK(x.defined(), "isinf: the tensor is undefined");
  if (!x.is_floating_point()) return zeros_like(x, kBool);
  NoGradGuard no_grad;
  return eq(x.abs(), std::numeric_limits<double>::infinity());
}
Tensor isfinite(const Tensor& x) {
  EMBER_CHECK(x.defined(), "isfinite: the tensor is undefined");
  if (!x.is_floating_point()) return ones_like(x, kBool);
  NoGradGuard no_grad;
  return eq(sub(x, x), 0);
}

// |a - b| <= atol + rtol |b|, or equal (infinities of one sign), or both NaN with equal_nan.
Tensor isclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  EMBER_CHECK(a.defined() && b.defined(), "isclose: a tensor is undefined");
  EMBER_CHECK(a.dtype() == b.dtype(), "isclose: ", a.dtype(), " did not match ", b.dtype());
  EMBER_CHECK(rtol >= 0 && atol >= 0, "isclose: rtol and atol must be non-negative, got rtol=", rtol, " atol=", atol);
  NoGradGuard no_grad;
  Tensor close = eq(a, b);
  if (equal_nan) close = logical_or(close, logical_and(isnan(a), isnan(b)));
  if (!a.is_floating_point()) {
    if (rtol == 0 && atol == 0) return close;
    const Tensor da = a.to(kFloat64), db = b.to(kFloat64);
    return logical_or(close, le(sub(da, db).abs(), add(mul(db.abs(), rtol), atol)));
  }
  // Where a or b is infinite and they are unequal, the difference is inf or NaN: never close.
  const Tensor within = le(sub(a, b).abs(), add(mul(b.abs(), rtol), atol));
  return logical_or(close, logical_and(within, isfinite(sub(a, b))));
}
bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  return isclose(a, b, rtol, atol, equal_nan).all().item<bool>();
}

// base ** linspace(start, end, steps), computed in float64 and then cast, as PyTorch computes
// it in the accumulate type.
Tensor logspace(double start, double end, int64_t steps, double base, TensorOptions options) {
  EMBER_CHECK(steps >= 0, "logspace: number of steps must be non-negative, got ", steps);
  const DType out = options.has_dtype_ ? options.dtype_ : default_float_dtype();
  EMBER_CHECK(is_floating(out), "logspace: expected a floating dtype, got ", out);
  const Tensor exponents = linspace(start, end, steps, kFloat64);
  std::vector<double> values = exponents.to_vector<double>();
  for (double& v : values) v = std::pow(base, v);
  return tensor(values).to(options.device_, out).set_requires_grad(options.requires_grad());
}

// One view per index along dim, that dim removed: select's views, so gradients flow.
std::vector<Tensor> unbind(const Tensor& x, int64_t dim) {
  EMBER_CHECK(x.defined(), "unbind: the tensor is undefined");
  EMBER_CHECK(x.dim() > 0, "unbind: a 0-d tensor has no dimension to unbind");
  const int64_t d = wrap_dim(dim, x.dim(), "unbind");
  std::vector<Tensor> out;
  for (int64_t i = 0; i < x.size(d); ++i) out.push_back(x.select(d, i));
  return out;
}

// start + weight (end - start), PyTorch's formula for a scalar or a tensor weight.
Tensor lerp(const Tensor& start, const Tensor& end, const Scalar& weight) {
  EMBER_CHECK(start.defined() && end.defined(), "lerp: a tensor is undefined");
  return add(start, mul(sub(end, start), weight));
}
Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight) {
  EMBER_CHECK(start.defined() && end.defined() && weight.defined(), "lerp: a tensor is undefined");
  return add(start, mul(sub(end, start), weight));
}

// The diagonal of the (dim1, dim2) matrices as the last dim: those two dims moved to the end,
// merged, and every (m + 1)-th element taken from the offset's first (a view when the merge is
// one, as for a contiguous matrix; PyTorch's diagonal is always a view).
Tensor diagonal(const Tensor& x, int64_t offset, int64_t dim1, int64_t dim2) {
  EMBER_CHECK(x.defined(), "diagonal: the tensor is undefined");
  EMBER_CHECK(x.dim() >= 2, "diagonal: expected a tensor of at least 2 dims, got shape ", shape_str(x.sizes()));
  const int64_t d1 = wrap_dim(dim1, x.dim(), "diagonal"), d2 = wrap_dim(dim2, x.dim(), "diagonal");
  EMBER_CHECK(d1 != d2, "diagonal: dimensions cannot be identical ", dim1, ", ", dim2);
  Shape order;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != d1 && d != d2) order.push_back(d);
  order.push_back(d1);
  order.push_back(d2);
  const Tensor m = x.permute(order);  // [..., n, c]
  const int64_t n = x.size(d1), c = x.size(d2);
  const int64_t length = std::max<int64_t>(0, offset >= 0 ? std::min(n, c - offset) : std::min(n + offset, c));
  const Tensor flat = m.flatten(-2);  // [..., n c]
  if (length == 0) return flat.narrow(-1, 0, 0);
  const int64_t start = offset >= 0 ? offset : -offset * c;
  return flat.slice(-1, start, start + (length - 1) * (c + 1) + 1, c + 1);
}

// A vector -> the square matrix with it on the `diagonal`-th diagonal; a matrix -> that diagonal.
Tensor diag(const Tensor& x, int64_t diagonal) {
  EMBER_CHECK(x.defined(), "diag: the tensor is undefined");
  EMBER_CHECK(x.dim() == 1 || x.dim() == 2, "diag: expected a 1-D or 2-D tensor, got shape ", shape_str(x.sizes()));
  if (x.dim() == 2) return ember::diagonal(x, diagonal);
  const int64_t n = x.size(0), most = std::numeric_limits<int64_t>::max();
  EMBER_CHECK(diagonal >= n - most && diagonal <= most - n, "diag: diagonal ", diagonal,
              " is too far from the main one for a vector of size ", n);
  const int64_t k = std::abs(diagonal);
  const TensorOptions like = TensorOptions().dtype(x.dtype()).device(x.device());
  // where, not a product with eye: an inf on the diagonal leaves zeros (not NaN) beside it.
  Tensor m = where(eye(n, n, TensorOptions().dtype(kBool).device(x.device())), x.unsqueeze(0), zeros({}, like));
  if (k == 0) return m;
  const Tensor columns = zeros({n, k}, like), rows = zeros({k, n + k}, like);
  m = diagonal > 0 ? cat({columns, m}, 1) : cat({m, columns}, 1);  // [n, n + k]
  return diagonal > 0 ? cat({m, rows}, 0) : cat({rows, m}, 0);
}

Tensor trace(const Tensor& x) {
  EMBER_CHECK(x.defined(), "trace: the tensor is undefined");
  EMBER_CHECK(x.dim() == 2, "trace: expected a matrix, got shape ", shape_str(x.sizes()));
  return ember::diagonal(x).sum();
}

std::tuple<Tensor, Tensor> var_mean(const Tensor& x, const Shape& dims, bool unbiased, bool keepdim) {
  return {var(x, dims, unbiased, keepdim), mean(x, dims, keepdim)};
}
std::tuple<Tensor, Tensor> std_mean(const Tensor& x, const Shape& dims, bool unbiased, bool keepdim) {
  return {ember::std(x, dims, unbiased, keepdim), mean(x, dims, keepdim)};
}

// median: a stable sort puts NaNs last in their order, so the slice's k-th sorted element is its
// lower median, or, at n - (NaN count), its first NaN. The value is gathered from x at the chosen
// index, so the gradient goes there. (A selection kernel would not sort the whole slice.)
namespace {
std::tuple<Tensor, Tensor> median_along(const Tensor& x, int64_t dim, bool keepdim, bool skip_nan, const char* op) {
  EMBER_CHECK(x.defined(), op, ": the tensor is undefined");
  const Tensor lines = x.dim() == 0 ? x.reshape({1}) : x;
  const int64_t d = dim < 0 ? dim + lines.dim() : dim;
  EMBER_CHECK(d >= 0 && d < lines.dim(), op, ": dim ", dim, " is out of range for a tensor of shape ",
              shape_str(x.sizes()));
  const int64_t n = lines.size(d);
  EMBER_CHECK(n > 0, op, ": expected reduction dim ", d, " to have non-zero size, got shape ", shape_str(x.sizes()));
  const Tensor order = std::get<1>(lines.sort(d));
  const Tensor nans = lines.isnan().sum(Shape{d}, true);  // int64 [.., 1, ..]
  // The lower median of the counted elements is at (count - 1) / 2 in the sorted slice. (A slice
  // of NaNs only counts them all, as PyTorch's nanmedian does: its middle NaN.)
  const Tensor all = full(nans.sizes(), n, TensorOptions(kInt64).device(x.device()));
  const Tensor counted = skip_nan ? where(nans < n, n - nans, all) : all;
  Tensor k = ((counted - 1).to(kFloat64) * 0.5).floor().to(kInt64);
  if (!skip_nan) k = where(nans > 0, n - nans, k);  // the first NaN
  const Tensor index = order.gather(d, k);
  Tensor values = lines.gather(d, index), indices = index;
  if (!keepdim || x.dim() == 0) {
    values = values.squeeze(d);
    indices = indices.squeeze(d);
  }
  return {values, indices};
}

Tensor median_all(const Tensor& x, bool skip_nan, const char* op) {
  EMBER_CHECK(x.defined(), op, ": the tensor is undefined");
  if (x.numel() == 0) {
    EMBER_CHECK(is_floating(x.dtype()), op, ": the median of an empty ", dtype_name(x.dtype()), " tensor");
    return full({}, std::numeric_limits<double>::quiet_NaN(), TensorOptions(x.dtype()).device(x.device()));
  }
  return std::get<0>(median_along(x.reshape({-1}), 0, false, skip_nan, op));
}
}  // namespace

Tensor median(const Tensor& x) { return median_all(x, false, "median"); }
std::tuple<Tensor, Tensor> median(const Tensor& x, int64_t dim, bool keepdim) {
  return median_along(x, dim, keepdim, false, "median");
}
Tensor nanmedian(const Tensor& x) { return median_all(x, true, "nanmedian"); }
std::tuple<Tensor, Tensor> nanmedian(const Tensor& x, int64_t dim, bool keepdim) {
  return median_along(x, dim, keepdim, true, "nanmedian");
}

// The 1-D convolution and pooling: the 2-D ops on [N, C, 1, L] with [1, k] windows.
namespace {
Tensor as_2d(const Tensor& x, const char* op) {
  EMBER_CHECK(x.defined(), op, ": the input is undefined");
  EMBER_CHECK(x.dim() == 2 || x.dim() == 3, op, ": expected a 2-D (unbatched) or 3-D (batched) input, got shape ",
              shape_str(x.sizes()));
  return x.unsqueeze(-2);
}
}  // namespace

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride, int64_t padding,
              int64_t dilation, int64_t groups) {
  EMBER_CHECK(weight.defined() && weight.dim() == 3, "conv1d: expected a 3-D weight [out, in / groups, k], got ",
              weight.defined() ? shape_str(weight.sizes()) : std::string("an undefined tensor"));
  return conv2d(as_2d(x, "conv1d"), weight.unsqueeze(2), bias, {1, stride}, {0, padding}, {1, dilation}, groups)
      .squeeze(-2);
}

Tensor max_pool1d(const Tensor& x, int64_t kernel, std::optional<int64_t> stride, int64_t padding, int64_t dilation,
                  bool ceil_mode) {
  return max_pool2d(as_2d(x, "max_pool1d"), {1, kernel}, Int2{1, stride.value_or(kernel)}, {0, padding}, {1, dilation},
                    ceil_mode)
      .squeeze(-2);
}

Tensor avg_pool1d(const Tensor& x, int64_t kernel, std::optional<int64_t> stride, int64_t padding, bool ceil_mode,
                  bool count_include_pad) {
  return avg_pool2d(as_2d(x, "avg_pool1d"), {1, kernel}, Int2{1, stride.value_or(kernel)}, {0, padding}, ceil_mode,
                    count_include_pad)
      .squeeze(-2);
}

// Tensor's methods for the composites above.
Tensor Tensor::clamp_min(const Scalar& min) const { return ember::clamp_min(*this, min); }
Tensor Tensor::clamp_max(const Scalar& max) const { return ember::clamp_max(*this, max); }
Tensor Tensor::max(const Tensor& other) const { return ember::maximum(*this, other); }
Tensor Tensor::min(const Tensor& other) const { return ember::minimum(*this, other); }
Tensor Tensor::dot(const Tensor& other) const { return ember::dot(*this, other); }
Tensor Tensor::outer(const Tensor& other) const { return ember::outer(*this, other); }
Tensor Tensor::flip(const Shape& dims) const { return ember::flip(*this, dims); }
Tensor Tensor::roll(const Shape& shifts, const Shape& dims) const { return ember::roll(*this, shifts, dims); }
Tensor Tensor::repeat_interleave(int64_t repeats, std::optional<int64_t> dim) const {
  return ember::repeat_interleave(*this, repeats, dim);
}
Tensor Tensor::repeat_interleave(const Tensor& repeats, std::optional<int64_t> dim) const {
  return ember::repeat_interleave(*this, repeats, dim);
}
Tensor Tensor::isnan() const { return ember::isnan(*this); }
Tensor Tensor::isinf() const { return ember::isinf(*this); }
Tensor Tensor::isfinite() const { return ember::isfinite(*this); }
Tensor Tensor::isclose(const Tensor& other, double rtol, double atol, bool equal_nan) const {
  return ember::isclose(*this, other, rtol, atol, equal_nan);
}
bool Tensor::allclose(const Tensor& other, double rtol, double atol, bool equal_nan) const {
  return ember::allclose(*this, other, rtol, atol, equal_nan);
}
TensorList Tensor::split(const Shape& sizes, int64_t dim) const { return ember::split_with_sizes(*this, sizes, dim); }
std::vector<Tensor> Tensor::unbind(int64_t dim) const { return ember::unbind(*this, dim); }
Tensor Tensor::lerp(const Tensor& end, const Scalar& weight) const { return ember::lerp(*this, end, weight); }
Tensor Tensor::lerp(const Tensor& end, const Tensor& weight) const { return ember::lerp(*this, end, weight); }
Tensor Tensor::clip(std::optional<Scalar> min, std::optional<Scalar> max) const {
  return ember::clamp(*this, min, max);
}
Tensor Tensor::swapaxes(int64_t dim0, int64_t dim1) const { return ember::transpose(*this, dim0, dim1); }
Tensor Tensor::new_zeros(const Shape& sizes) const { return zeros(sizes, TensorOptions(dtype()).device(device())); }
Tensor Tensor::new_ones(const Shape& sizes) const { return ones(sizes, TensorOptions(dtype()).device(device())); }
Tensor Tensor::new_empty(const Shape& sizes) const { return empty(sizes, TensorOptions(dtype()).device(device())); }
Tensor Tensor::new_full(const Shape& sizes, const Scalar& value) const {
  return full(sizes, value, TensorOptions(dtype()).device(device()));
}

Tensor Tensor::diagonal(int64_t offset, int64_t dim1, int64_t dim2) const {
  return ember::diagonal(*this, offset, dim1, dim2);
}
Tensor Tensor::diag(int64_t diagonal) const { return ember::diag(*this, diagonal); }
Tensor Tensor::trace() const { return ember::trace(*this); }
Tensor Tensor::median() const { return ember::median(*this); }
std::tuple<Tensor, Tensor> Tensor::median(int64_t dim, bool keepdim) const {
  return ember::median(*this, dim, keepdim);
}
Tensor Tensor::nanmedian() const { return ember::nanmedian(*this); }
std::tuple<Tensor, Tensor> Tensor::nanmedian(int64_t dim, bool keepdim) const {
  return ember::nanmedian(*this, dim, keepdim);
}

}  // namespace ember
