// Factories: tensors from nothing, from numbers, from random draws or from memory.
#include <cmath>
#include <cstring>

#include "ember/tensor/generator.h"
#include "ember/tensor/ops/internal.h"

namespace ember {
namespace {
// requires_grad(true) in the options: the result becomes a leaf that requires grad, through the
// autograd layer's setter that the options carry (TensorOptions::mark_requires_grad_). Inner
// factory calls take the options without it (plain), so only the finished tensor is marked.
Tensor leaf(Tensor t, const TensorOptions& options) {
  if (options.mark_requires_grad_) options.mark_requires_grad_(t);
  return t;
}
TensorOptions plain(TensorOptions options) {
  options.mark_requires_grad_ = nullptr;
  return options;
}
// The options of a *_like factory: what they give, t's dtype and device where they give none.
TensorOptions like(const Tensor& t, TensorOptions options, const char* op) {
  EMBER_CHECK(t.defined(), op, ": the tensor is undefined");
  if (!options.has_dtype_) options = options.dtype(t.dtype());
  if (!options.has_device_) options = options.device(t.device());
  return options;
}
}  // namespace

Tensor empty(const Shape& sizes, TensorOptions options) {
  const int64_t n = checked_numel(sizes, "empty");
  const size_t elem = element_size(options.dtype_);
  EMBER_CHECK(n <= static_cast<int64_t>(SIZE_MAX / 2 / elem), "empty: shape ", shape_str(sizes),
              " needs more bytes than can be addressed");
  EMBER_CHECK(!options.pinned_memory_ || options.device_.is_cpu(), "empty: pinned memory is host memory, but device ",
              options.device_.str(), " was asked for");
  Allocator* allocator =
      options.pinned_memory_ ? backend(kCUDA).pinned_host_allocator() : allocator_for(options.device_);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<StorageImpl>(static_cast<size_t>(n) * elem, options.device_, allocator);
  impl->sizes = sizes;
  impl->strides = contiguous_strides(sizes);
  impl->dtype = options.dtype_;
  impl->device = options.device_;
  return leaf(Tensor(std::move(impl)), options);
}

Tensor empty_strided(const Shape& sizes, const Shape& strides, TensorOptions options) {
  const int64_t extent = storage_extent(sizes, strides, "empty_strided");
  Tensor base = empty({extent}, plain(options));
  return leaf(native::as_strided(base, sizes, strides, 0), options);
}

Tensor full(const Shape& sizes, const Scalar& value, TensorOptions options) {
  Tensor t = empty(sizes, plain(options));
  if (t.numel() > 0) backend(t.device()).fill(t, value);
  return leaf(t, options);
}
Tensor zeros(const Shape& sizes, TensorOptions options) { return full(sizes, 0, options); }
Tensor ones(const Shape& sizes, TensorOptions options) { return full(sizes, 1, options); }
Tensor scalar_tensor(const Scalar& value, TensorOptions options) { return full({}, value, options); }

namespace {
DType arange_dtype(const Scalar& a, const Scalar& b, const Scalar& c) {
  return (a.is_floating() || b.is_floating() || c.is_floating()) ? default_float_dtype() : kInt64;
}
}  // namespace

Tensor arange(const Scalar& end) { return arange(0, end, 1); }
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step) {
  return arange(start, end, step, arange_dtype(start, end, step));
}
Tensor arange(const Scalar& end, TensorOptions options) { return arange(0, end, 1, options); }
Tensor arange(const Scalar& start, const Scalar& end, TensorOptions options) { return arange(start, end, 1, options); }

Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, TensorOptions options) {
  const double s = start.to_double(), e = end.to_double(), st = step.to_double();
  EMBER_CHECK(st != 0, "arange: step must be nonzero");
  EMBER_CHECK(std::isfinite(s) && std::isfinite(e), "arange: unsupported range: ", s, " -> ", e);
  EMBER_CHECK((st > 0 && e >= s) || (st < 0 && e <= s),
              "arange: upper bound and larger bound inconsistent with step sign (start ", s, ", end ", e, ", step ", st,
              ")");
  const double count = std::ceil((e - s) / st);
  EMBER_CHECK(count < 9.0e18, "arange: the range ", s, " -> ", e, " with step ", st, " has too many elements");
  const int64_t n = static_cast<int64_t>(count);
  // Values are computed on the host in double (exact for integers up to 2^53), then cast.
  Tensor host = empty({n}, kFloat64);
  double* p = host.data_ptr<double>();
  for (int64_t i = 0; i < n; ++i) p[i] = s + static_cast<double>(i) * st;
  return leaf(native::to(host, options.device_, options.dtype_), options);
}

Tensor linspace(double start, double end, int64_t steps, TensorOptions options) {
  EMBER_CHECK(steps >= 0, "linspace: number of steps must be non-negative, got ", steps);
  Tensor host = empty({steps}, kFloat64);
  double* p = host.data_ptr<double>();
  const double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
  // Symmetric evaluation, as PyTorch does: the first half from start, the second from end.
  const int64_t half = steps == 1 ? 1 : steps / 2;
  for (int64_t i = 0; i < steps; ++i)
    p[i] = i < half ? start + step * static_cast<double>(i) : end - step * static_cast<double>(steps - 1 - i);
  return leaf(native::to(host, options.device_, options.dtype_), options);
}

Tensor eye(int64_t n, int64_t m, TensorOptions options) {
  if (m < 0) m = n;
  EMBER_CHECK(n >= 0, "eye: n must be greater or equal to 0, got ", n);
  Tensor out = zeros({n, m}, plain(options));
  const int64_t k = std::min(n, m);
  if (k > 0) {
    Tensor diagonal = native::as_strided(out, {k}, {m + 1}, out.storage_offset());
    native::fill_(diagonal, 1);
  }
  return leaf(out, options);
}

namespace {
// Philox blocks a draw of n elements uses (Note [Philox streams]).
uint64_t blocks_for(int64_t n, int64_t per_block) { return static_cast<uint64_t>((n + per_block - 1) / per_block); }
int64_t lanes_per_element_block(DType d) { return d == kFloat64 ? 2 : 4; }
}  // namespace

Tensor& Tensor::uniform_(double from, double to) {
  EMBER_CHECK(is_floating_point(), "uniform_: expects a floating point tensor, got ", dtype());
  EMBER_CHECK(from <= to, "uniform_: expects from <= to, but got from=", from, " > to=", to);
  Tensor target = is_contiguous() ? *this : empty(sizes(), TensorOptions().dtype(dtype()).device(device()));
  const auto [seed, offset] = default_generator().reserve(blocks_for(numel(), lanes_per_element_block(dtype())));
  backend(device()).random_uniform(target, from, to, seed, offset);
  if (!target.is_same(*this)) native::copy_(*this, target);
  bump_version();
  return *this;
}

Tensor& Tensor::normal_(double mean, double std) {
  EMBER_CHECK(is_floating_point(), "normal_: expects a floating point tensor, got ", dtype());
  EMBER_CHECK(std >= 0, "normal_: expects std >= 0.0, but found std ", std);
  Tensor target = is_contiguous() ? *this : empty(sizes(), TensorOptions().dtype(dtype()).device(device()));
  const auto [seed, offset] = default_generator().reserve(blocks_for(numel(), lanes_per_element_block(dtype())));
  backend(device()).random_normal(target, mean, std, seed, offset);
  if (!target.is_same(*this)) native::copy_(*this, target);
  bump_version();
  return *this;
}

namespace {
// Fills self (made contiguous through a copy if it is not) with `value` where the element's
// uniform draw is below p, 0 elsewhere; one Philox lane per element, as uniform_ (two for doubles).
Tensor& fill_bernoulli(Tensor& self, double p, double value) {
  Tensor target =
      self.is_contiguous() ? self : empty(self.sizes(), TensorOptions().dtype(self.dtype()).device(self.device()));
  const auto [seed, offset] =
      default_generator().reserve(blocks_for(self.numel(), lanes_per_element_block(self.dtype())));
  backend(self.device()).random_bernoulli(target, p, value, seed, offset);
  if (!target.is_same(self)) native::copy_(self, target);
  self.bump_version();
  return self;
}
}  // namespace

Tensor& Tensor::bernoulli_(double p) {
  ops::check_defined(*this, "bernoulli_");
  EMBER_CHECK(p >= 0 && p <= 1, "bernoulli_: expects p to be in [0, 1], but got p=", p);
  return fill_bernoulli(*this, p, 1.0);
}

Tensor dropout_mask(const Shape& sizes, double p, TensorOptions options) {
  EMBER_CHECK(is_floating(options.dtype_), "dropout_mask: expects a floating point dtype, got ", options.dtype_);
  EMBER_CHECK(p >= 0 && p < 1, "dropout_mask: expects p to be in [0, 1), but got p=", p);
  Tensor mask = empty(sizes, plain(options));
  return leaf(fill_bernoulli(mask, 1.0 - p, 1.0 / (1.0 - p)), options);
}

Tensor rand(const Shape& sizes, TensorOptions options) {
  return leaf(empty(sizes, plain(options)).uniform_(0, 1), options);
}
Tensor randn(const Shape& sizes, TensorOptions options) {
  return leaf(empty(sizes, plain(options)).normal_(0, 1), options);
}
Tensor rand_like(const Tensor& t, TensorOptions options) { return rand(t.sizes(), like(t, options, "rand_like")); }
Tensor randn_like(const Tensor& t, TensorOptions options) { return randn(t.sizes(), like(t, options, "randn_like")); }

Tensor randint(int64_t low, int64_t high, const Shape& sizes, TensorOptions options) {
  EMBER_CHECK(low < high, "randint: expects low < high, but got low=", low, ", high=", high);
  EMBER_CHECK(options.dtype_ != kBool || (low >= 0 && high <= 2), "randint: range [", low, ", ", high,
              ") does not fit dtype bool");
  Tensor out = empty(sizes, plain(options));
  const auto [seed, offset] = default_generator().reserve(blocks_for(out.numel(), 2));
  backend(out.device()).random_int(out, low, high, seed, offset);
  return leaf(out, options);
}

Tensor randperm(int64_t n, TensorOptions options) {
  EMBER_CHECK(n >= 0, "randperm: n must be non-negative, got ", n);
  // Fisher-Yates on the host; step i takes 64 bits from Philox block offset + i.
  Tensor host = arange(n, kInt64);
  int64_t* p = host.data_ptr<int64_t>();
  const auto [seed, offset] = default_generator().reserve(static_cast<uint64_t>(n));
  for (int64_t i = n - 1; i > 0; --i) {
    const auto r = philox4x32(seed, offset + static_cast<uint64_t>(i));
    const uint64_t bits = (uint64_t{r[0]} << 32) | r[1];
    std::swap(p[i], p[bits % static_cast<uint64_t>(i + 1)]);
  }
  return leaf(native::to(host, options.device_, options.dtype_), options);
}

Tensor empty_like(const Tensor& t, TensorOptions options) { return empty(t.sizes(), like(t, options, "empty_like")); }
Tensor zeros_like(const Tensor& t, TensorOptions options) { return zeros(t.sizes(), like(t, options, "zeros_like")); }
Tensor ones_like(const Tensor& t, TensorOptions options) { return ones(t.sizes(), like(t, options, "ones_like")); }
Tensor full_like(const Tensor& t, const Scalar& v, TensorOptions options) {
  return full(t.sizes(), v, like(t, options, "full_like"));
}

Tensor from_blob(void* data, const Shape& sizes, TensorOptions options) {
  return from_blob(data, sizes, contiguous_strides(sizes), nullptr, options);
}

Tensor from_blob(void* data, const Shape& sizes, const Shape& strides, std::function<void(void*)> deleter,
                 TensorOptions options) {
  const int64_t extent = storage_extent(sizes, strides, "from_blob");
  const int64_t n = checked_numel(sizes, "from_blob");
  EMBER_CHECK(data != nullptr || n == 0, "from_blob: data is a null pointer but shape ", shape_str(sizes), " has ", n,
              " elements");
  const size_t elem = element_size(options.dtype_);
  EMBER_CHECK(reinterpret_cast<uintptr_t>(data) % elem == 0, "from_blob: data pointer ", data,
              " is not aligned to the ", elem, "-byte elements of dtype ", options.dtype_);
  EMBER_CHECK(extent <= static_cast<int64_t>(SIZE_MAX / 2 / elem), "from_blob: shape ", shape_str(sizes),
              " spans more bytes than can be addressed");
  auto impl = std::make_shared<TensorImpl>();
  impl->storage =
      std::make_shared<StorageImpl>(data, static_cast<size_t>(extent) * elem, options.device_, std::move(deleter));
  impl->sizes = sizes;
  impl->strides = strides;
  impl->dtype = options.dtype_;
  impl->device = options.device_;
  return leaf(Tensor(std::move(impl)), options);
}

template <class T>
Tensor tensor(const std::vector<T>& values, std::optional<Shape> sizes) {
  const Shape shape = sizes.value_or(Shape{static_cast<int64_t>(values.size())});
  const int64_t n = checked_numel(shape, "tensor");
  EMBER_CHECK(n == static_cast<int64_t>(values.size()), "tensor: shape ", shape_str(shape), " holds ", n,
              " elements but ", values.size(), " values were given");
  Tensor out = empty(shape, dtype_of<T>::value);
  if constexpr (std::is_same_v<T, bool>) {
    bool* p = out.data_ptr<bool>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  } else if (n > 0) {
    std::memcpy(out.data_ptr(), values.data(), values.size() * sizeof(T));
  }
  return out;
}
template Tensor tensor<bool>(const std::vector<bool>&, std::optional<Shape>);
template Tensor tensor<uint8_t>(const std::vector<uint8_t>&, std::optional<Shape>);
template Tensor tensor<int8_t>(const std::vector<int8_t>&, std::optional<Shape>);
template Tensor tensor<int32_t>(const std::vector<int32_t>&, std::optional<Shape>);
template Tensor tensor<int64_t>(const std::vector<int64_t>&, std::optional<Shape>);
template Tensor tensor<Half>(const std::vector<Half>&, std::optional<Shape>);
template Tensor tensor<BFloat16>(const std::vector<BFloat16>&, std::optional<Shape>);
template Tensor tensor<float>(const std::vector<float>&, std::optional<Shape>);
template Tensor tensor<double>(const std::vector<double>&, std::optional<Shape>);

template <class T>
Tensor tensor(std::initializer_list<T> values, TensorOptions options) {
  const Tensor t = tensor(values);
  return leaf(native::to(t, options.device_, options.has_dtype_ ? options.dtype_ : t.dtype()), options);
}
template Tensor tensor<bool>(std::initializer_list<bool>, TensorOptions);
template Tensor tensor<int>(std::initializer_list<int>, TensorOptions);
template Tensor tensor<int64_t>(std::initializer_list<int64_t>, TensorOptions);
template Tensor tensor<float>(std::initializer_list<float>, TensorOptions);
template Tensor tensor<double>(std::initializer_list<double>, TensorOptions);

}  // namespace ember
