// Tensor's op methods and operators: thin forwards to the differentiable free functions
// of autograd/functions.h.
#include "ember/autograd/functions.h"
#include "ember/autograd/grad_mode.h"
#include "ember/autograd/meta.h"
#include "ember/cuda/cuda.h"
#include "ember/tensor/backend.h"

namespace ember {
namespace {
Tensor scalar_like(const Tensor& self, const Scalar& s) {
  return full({}, s, TensorOptions().dtype(result_type(self, s)).device(self.device()));
}
}  // namespace

// ---- conversion, copies and views ----
Tensor Tensor::to(DType d, bool copy) const { return ember::to(*this, device(), d, false, copy); }
Tensor Tensor::to(Device dev, bool non_blocking, bool copy) const {
  return ember::to(*this, dev, dtype(), non_blocking, copy);
}
Tensor Tensor::to(Device dev, DType d, bool non_blocking, bool copy) const {
  return ember::to(*this, dev, d, non_blocking, copy);
}
Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }
Tensor Tensor::clone() const { return ember::clone(*this); }
Tensor Tensor::pin_memory() const {
  EMBER_CHECK(defined(), "pin_memory: the tensor is undefined");
  EMBER_CHECK(is_cpu(), "pin_memory: only CPU tensors can be pinned, this one is on ", device().str());
  if (is_pinned()) return *this;
  Tensor out = empty(sizes(), TensorOptions(dtype()).pinned_memory());
  out.copy_(*this);
  return out;
}
bool Tensor::is_pinned() const { return cuda::is_pinned(*this); }
Tensor& Tensor::copy_(const Tensor& src) { return ember::copy_(*this, src); }
Tensor Tensor::view(const Shape& shape) const { return ember::view(*this, shape); }
Tensor Tensor::reshape(const Shape& shape) const { return ember::reshape(*this, shape); }
Tensor Tensor::transpose(int64_t d0, int64_t d1) const { return ember::transpose(*this, d0, d1); }
Tensor Tensor::t() const { return ember::t(*this); }
Tensor Tensor::permute(const Shape& dims) const { return ember::permute(*this, dims); }
Tensor Tensor::slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step) const {
  return ember::slice(*this, dim, start, end, step);
}
Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const {
  return ember::narrow(*this, dim, start, length);
}
Tensor Tensor::select(int64_t dim, int64_t index) const { return ember::select(*this, dim, index); }
Tensor Tensor::expand(const Shape& shape) const { return ember::expand(*this, shape); }
Tensor Tensor::squeeze() const { return ember::squeeze(*this); }
Tensor Tensor::squeeze(int64_t dim) const { return ember::squeeze(*this, dim); }
Tensor Tensor::unsqueeze(int64_t dim) const { return ember::unsqueeze(*this, dim); }
Tensor Tensor::flatten(int64_t start, int64_t end) const { return ember::flatten(*this, start, end); }
Tensor Tensor::unflatten(int64_t dim, const Shape& sizes) const { return ember::unflatten(*this, dim, sizes); }
Tensor Tensor::as_strided(const Shape& sizes, const Shape& strides, std::optional<int64_t> offset) const {
  return ember::as_strided(*this, sizes, strides, offset);
}
Tensor Tensor::movedim(int64_t source, int64_t destination) const { return ember::movedim(*this, source, destination); }

// ---- elementwise, reductions, linear algebra, indexing ----
Tensor Tensor::add(const Tensor& o, const Scalar& alpha) const { return ember::add(*this, o, alpha); }
Tensor Tensor::add(const Scalar& o, const Scalar& alpha) const { return ember::add(*this, o, alpha); }
Tensor Tensor::sub(const Tensor& o, const Scalar& alpha) const { return ember::sub(*this, o, alpha); }
Tensor Tensor::sub(const Scalar& o, const Scalar& alpha) const { return ember::sub(*this, o, alpha); }
Tensor Tensor::mul(const Tensor& o) const { return ember::mul(*this, o); }
Tensor Tensor::mul(const Scalar& o) const { return ember::mul(*this, o); }
Tensor Tensor::div(const Tensor& o) const { return ember::div(*this, o); }
Tensor Tensor::div(const Scalar& o) const { return ember::div(*this, o); }
Tensor Tensor::pow(const Tensor& o) const { return ember::pow(*this, o); }
Tensor Tensor::pow(const Scalar& o) const { return ember::pow(*this, o); }
Tensor Tensor::maximum(const Tensor& o) const { return ember::maximum(*this, o); }
Tensor Tensor::minimum(const Tensor& o) const { return ember::minimum(*this, o); }
Tensor Tensor::eq(const Tensor& o) const { return ember::eq(*this, o); }
Tensor Tensor::eq(const Scalar& o) const { return ember::eq(*this, o); }
Tensor Tensor::ne(const Tensor& o) const { return ember::ne(*this, o); }
Tensor Tensor::ne(const Scalar& o) const { return ember::ne(*this, o); }
Tensor Tensor::lt(const Tensor& o) const { return ember::lt(*this, o); }
Tensor Tensor::lt(const Scalar& o) const { return ember::lt(*this, o); }
Tensor Tensor::le(const Tensor& o) const { return ember::le(*this, o); }
Tensor Tensor::le(const Scalar& o) const { return ember::le(*this, o); }
Tensor Tensor::gt(const Tensor& o) const { return ember::gt(*this, o); }
Tensor Tensor::gt(const Scalar& o) const { return ember::gt(*this, o); }
Tensor Tensor::ge(const Tensor& o) const { return ember::ge(*this, o); }
Tensor Tensor::ge(const Scalar& o) const { return ember::ge(*this, o); }
Tensor Tensor::masked_fill(const Tensor& mask, const Scalar& v) const { return ember::masked_fill(*this, mask, v); }
Tensor Tensor::clamp(std::optional<Scalar> lo, std::optional<Scalar> hi) const { return ember::clamp(*this, lo, hi); }
Tensor Tensor::neg() const { return ember::neg(*this); }
Tensor Tensor::abs() const { return ember::abs(*this); }
Tensor Tensor::exp() const { return ember::exp(*this); }
Tensor Tensor::log() const { return ember::log(*this); }
Tensor Tensor::log1p() const { return ember::log1p(*this); }
Tensor Tensor::sqrt() const { return ember::sqrt(*this); }
Tensor Tensor::rsqrt() const { return ember::rsqrt(*this); }
Tensor Tensor::sin() const { return ember::sin(*this); }
Tensor Tensor::cos() const { return ember::cos(*this); }
Tensor Tensor::tanh() const { return ember::tanh(*this); }
Tensor Tensor::sigmoid() const { return ember::sigmoid(*this); }
Tensor Tensor::relu() const { return ember::relu(*this); }
Tensor Tensor::gelu(const std::string& approximate) const { return ember::gelu(*this, approximate); }
Tensor Tensor::silu() const { return ember::silu(*this); }
Tensor Tensor::sign() const { return ember::sign(*this); }
Tensor Tensor::square() const { return ember::square(*this); }
Tensor Tensor::reciprocal() const { return ember::reciprocal(*this); }

Tensor& Tensor::add_(const Tensor& o, const Scalar& alpha) { return ember::add_(*this, o, alpha); }
Tensor& Tensor::add_(const Scalar& o, const Scalar& alpha) { return ember::add_(*this, scalar_like(*this, o), alpha); }
Tensor& Tensor::sub_(const Tensor& o, const Scalar& alpha) { return ember::sub_(*this, o, alpha); }
Tensor& Tensor::sub_(const Scalar& o, const Scalar& alpha) { return ember::sub_(*this, scalar_like(*this, o), alpha); }
Tensor& Tensor::mul_(const Tensor& o) { return ember::mul_(*this, o); }
Tensor& Tensor::mul_(const Scalar& o) { return ember::mul_(*this, scalar_like(*this, o)); }
Tensor& Tensor::div_(const Tensor& o) { return ember::div_(*this, o); }
Tensor& Tensor::div_(const Scalar& o) { return ember::div_(*this, scalar_like(*this, o)); }
Tensor& Tensor::clamp_(std::optional<Scalar> lo, std::optional<Scalar> hi) {
  const Tensor r = ember::clamp(*this, lo, hi);
  EMBER_CHECK(r.dtype() == dtype(), "clamp_: result type ", r.dtype(), " can't be cast to the desired output type ",
              dtype());
  return copy_(r);
}
Tensor& Tensor::masked_fill_(const Tensor& mask, const Scalar& v) { return copy_(ember::masked_fill(*this, mask, v)); }
Tensor& Tensor::relu_() { return copy_(ember::relu(*this)); }
Tensor& Tensor::zero_() { return fill_(0); }
Tensor& Tensor::fill_(const Scalar& value) {
  autograd::check_inplace_allowed(*this, "fill_");
  if (numel() > 0) backend(device()).fill(*this, value);
  bump_version();
  return *this;
}

Tensor Tensor::sum(std::optional<DType> d) const { return ember::sum(*this, {}, false, d); }
Tensor Tensor::sum(const Shape& dims, bool keepdim, std::optional<DType> d) const {
  return ember::sum(*this, dims, keepdim, d);
}
Tensor Tensor::mean() const { return ember::mean(*this); }
Tensor Tensor::mean(const Shape& dims, bool keepdim) const { return ember::mean(*this, dims, keepdim); }
Tensor Tensor::prod() const { return ember::prod(*this); }
Tensor Tensor::prod(int64_t dim, bool keepdim) const { return ember::prod(*this, {dim}, keepdim); }
Tensor Tensor::max() const {
  EMBER_CHECK(numel() > 0,
              "max: expected reduction dim to be specified for input.numel() == 0; specify the dim argument");
  return ember::amax(*this);
}
std::tuple<Tensor, Tensor> Tensor::max(int64_t dim, bool keepdim) const { return ember::max(*this, dim, keepdim); }
Tensor Tensor::min() const {
  EMBER_CHECK(numel() > 0,
              "min: expected reduction dim to be specified for input.numel() == 0; specify the dim argument");
  return ember::amin(*this);
}
std::tuple<Tensor, Tensor> Tensor::min(int64_t dim, bool keepdim) const { return ember::min(*this, dim, keepdim); }
Tensor Tensor::amax(const Shape& dims, bool keepdim) const { return ember::amax(*this, dims, keepdim); }
Tensor Tensor::amin(const Shape& dims, bool keepdim) const { return ember::amin(*this, dims, keepdim); }
Tensor Tensor::argmax(std::optional<int64_t> dim, bool keepdim) const { return ember::argmax(*this, dim, keepdim); }
Tensor Tensor::argmin(std::optional<int64_t> dim, bool keepdim) const { return ember::argmin(*this, dim, keepdim); }
Tensor Tensor::var(const Shape& dims, bool unbiased, bool keepdim) const {
  return ember::var(*this, dims, unbiased, keepdim);
}
Tensor Tensor::std(const Shape& dims, bool unbiased, bool keepdim) const {
  return ember::std(*this, dims, unbiased, keepdim);
}
Tensor Tensor::norm(double p) const { return ember::norm(*this, p); }
Tensor Tensor::norm(double p, const Shape& dims, bool keepdim) const { return ember::norm(*this, p, dims, keepdim); }
Tensor Tensor::logsumexp(const Shape& dims, bool keepdim) const { return ember::logsumexp(*this, dims, keepdim); }
Tensor Tensor::all() const { return ember::all(*this); }
Tensor Tensor::any() const { return ember::any(*this); }

Tensor Tensor::matmul(const Tensor& o) const { return ember::matmul(*this, o); }
Tensor Tensor::mm(const Tensor& o) const { return ember::mm(*this, o); }
Tensor Tensor::bmm(const Tensor& o) const { return ember::bmm(*this, o); }
Tensor Tensor::softmax(int64_t dim) const { return ember::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return ember::log_softmax(*this, dim); }

Tensor Tensor::index_select(int64_t dim, const Tensor& index) const { return ember::index_select(*this, dim, index); }
Tensor Tensor::gather(int64_t dim, const Tensor& index) const { return ember::gather(*this, dim, index); }
Tensor Tensor::scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const {
  return ember::scatter_add(*this, dim, index, src);
}
Tensor& Tensor::scatter_add_(int64_t dim, const Tensor& index, const Tensor& src) {
  return ember::scatter_add_(*this, dim, index, src);
}
std::vector<Tensor> Tensor::split(int64_t size, int64_t dim) const { return ember::split(*this, size, dim); }
std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t dim) const { return ember::chunk(*this, chunks, dim); }
Tensor Tensor::tril(int64_t diagonal) const { return ember::tril(*this, diagonal); }
Tensor Tensor::triu(int64_t diagonal) const { return ember::triu(*this, diagonal); }

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, const Scalar& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Scalar& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Scalar& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Scalar& b) { return div(a, b); }
Tensor operator+(const Scalar& a, const Tensor& b) { return add(b, a); }
Tensor operator-(const Scalar& a, const Tensor& b) { return add(neg(b), a); }
Tensor operator*(const Scalar& a, const Tensor& b) { return mul(b, a); }
Tensor operator/(const Scalar& a, const Tensor& b) { return div(scalar_like(b, a), b); }
Tensor operator-(const Tensor& a) { return neg(a); }
Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator==(const Tensor& a, const Scalar& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Scalar& b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Scalar& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Scalar& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Scalar& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Scalar& b) { return ge(a, b); }
Tensor& operator+=(Tensor& a, const Tensor& b) { return a.add_(b); }
Tensor& operator-=(Tensor& a, const Tensor& b) { return a.sub_(b); }
Tensor& operator*=(Tensor& a, const Tensor& b) { return a.mul_(b); }
Tensor& operator/=(Tensor& a, const Tensor& b) { return a.div_(b); }
Tensor& operator+=(Tensor& a, const Scalar& b) { return a.add_(b); }
Tensor& operator-=(Tensor& a, const Scalar& b) { return a.sub_(b); }
Tensor& operator*=(Tensor& a, const Scalar& b) { return a.mul_(b); }
Tensor& operator/=(Tensor& a, const Scalar& b) { return a.div_(b); }

}  // namespace ember
