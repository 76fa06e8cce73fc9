// Tensor's methods beyond the op list (LibTorch's other forms of the same ops) and the
// operators: thin forwards to the public ops (the op list's methods are in autograd/ops.cpp).
#include "ember/autograd/functions.h"
#include "ember/autograd/grad_mode.h"
#include "ember/autograd/meta.h"

namespace ember {
namespace {
Tensor scalar_like(const Tensor& self, const Scalar& s) {
  return full({}, s, TensorOptions().dtype(result_type(self, s)).device(self.device()));
}
}  // namespace

Tensor Tensor::to(DType d, bool copy) const { return ember::to(*this, device(), d, false, copy); }
Tensor Tensor::to(Device dev, bool non_blocking, bool copy) const {
  return ember::to(*this, dev, dtype(), non_blocking, copy);
}
Tensor Tensor::to(Device dev, DType d, bool non_blocking, bool copy) const {
  return ember::to(*this, dev, d, non_blocking, copy);
}
Tensor Tensor::pin_memory() const {
  EMBER_CHECK(defined(), "pin_memory: the tensor is undefined");
  EMBER_CHECK(is_cpu(), "pin_memory: only CPU tensors can be pinned, this one is on ", device().str());
  if (is_pinned()) return *this;
  Tensor out = empty(sizes(), TensorOptions(dtype()).pinned_memory());
  out.copy_(*this);
  return out;
}

Tensor Tensor::repeat(const Shape& repeats) const {
  EMBER_CHECK(defined(), "repeat: the tensor is undefined");
  EMBER_CHECK(static_cast<int64_t>(repeats.size()) >= dim(), "repeat: the number of repeats (", repeats.size(),
              ") can not be smaller than the number of dimensions of the tensor (", dim(), "), shape ",
              shape_str(sizes()));
  for (int64_t r : repeats) EMBER_CHECK(r >= 0, "repeat: repeats must be non-negative, got ", shape_str(repeats));
  // [.., s, ..] -> [.., 1, s, ..] expanded to [.., r, s, ..], then merged into [.., r s, ..]:
  // one copy, and expand's gradient (a sum over the copies) comes with it.
  const size_t lead = repeats.size() - sizes().size();
  Shape padded(lead, 1), pairs, expanded, out;
  padded.insert(padded.end(), sizes().begin(), sizes().end());
  for (size_t i = 0; i < repeats.size(); ++i) {
    pairs.insert(pairs.end(), {1, padded[i]});
    expanded.insert(expanded.end(), {repeats[i], padded[i]});
    int64_t size = 0;
    EMBER_CHECK(!__builtin_mul_overflow(repeats[i], padded[i], &size), "repeat: ", repeats[i], " repeats of size ",
                padded[i], " overflow int64 (repeats ", shape_str(repeats), ", shape ", shape_str(sizes()), ")");
    out.push_back(size);
  }
  return reshape(pairs).expand(expanded).reshape(out);
}

bool Tensor::equal(const Tensor& other) const {
  EMBER_CHECK(defined() && other.defined(), "equal: a tensor is undefined");
  EMBER_CHECK(device() == other.device(), "equal: the tensors are on ", device(), " and ", other.device());
  if (sizes() != other.sizes()) return false;
  NoGradGuard no_grad;
  return ember::eq(*this, other).all().item<bool>();
}

Tensor Tensor::max() const {
  EMBER_CHECK(numel() > 0,
              "max: expected reduction dim to be specified for input.numel() == 0; specify the dim argument");
  return ember::amax(*this);
}
Tensor Tensor::min() const {
  EMBER_CHECK(numel() > 0,
              "min: expected reduction dim to be specified for input.numel() == 0; specify the dim argument");
  return ember::amin(*this);
}

Tensor& Tensor::add_(const Scalar& o, const Scalar& alpha) { return ember::add_(*this, scalar_like(*this, o), alpha); }
Tensor& Tensor::sub_(const Scalar& o, const Scalar& alpha) { return ember::sub_(*this, scalar_like(*this, o), alpha); }
Tensor& Tensor::mul_(const Scalar& o) { return ember::mul_(*this, scalar_like(*this, o)); }
Tensor& Tensor::div_(const Scalar& o) { return ember::div_(*this, scalar_like(*this, o)); }
Tensor& Tensor::clamp_(std::optional<Scalar> lo, std::optional<Scalar> hi) {
  const Tensor r = ember::clamp(*this, lo, hi);
  EMBER_CHECK(r.dtype() == dtype(), "clamp_: result type ", r.dtype(), " can't be cast to the desired output type ",
              dtype());
  return copy_(r);
}
Tensor& Tensor::masked_fill_(const Tensor& mask, const Scalar& v) { return copy_(ember::masked_fill(*this, mask, v)); }
Tensor& Tensor::relu_() { return copy_(ember::relu(*this)); }
#define EMBER_DEFINE_COMPARISON_INPLACE(op, name)                                           \
  Tensor& Tensor::name##_(const Tensor& other) { return copy_(ember::name(*this, other)); } \
  Tensor& Tensor::name##_(const Scalar& other) { return copy_(ember::name(*this, other)); }
EMBER_COMPARISON_OPERATORS(EMBER_DEFINE_COMPARISON_INPLACE)
#undef EMBER_DEFINE_COMPARISON_INPLACE

#define EMBER_DEFINE_OPERATOR(op, name)                                       \
  Tensor operator op(const Tensor& a, const Tensor& b) { return name(a, b); } \
  Tensor operator op(const Tensor& a, const Scalar& b) { return name(a, b); }
EMBER_ARITHMETIC_OPERATORS(EMBER_DEFINE_OPERATOR)
EMBER_COMPARISON_OPERATORS(EMBER_DEFINE_OPERATOR)
#undef EMBER_DEFINE_OPERATOR
#define EMBER_DEFINE_COMPOUND_OPERATOR(op, name)                              \
  Tensor& operator op##=(Tensor& a, const Tensor& b) { return a.name##_(b); } \
  Tensor& operator op##=(Tensor& a, const Scalar& b) { return a.name##_(b); }
EMBER_ARITHMETIC_OPERATORS(EMBER_DEFINE_COMPOUND_OPERATOR)
#undef EMBER_DEFINE_COMPOUND_OPERATOR
Tensor operator+(const Scalar& a, const Tensor& b) { return add(b, a); }
Tensor operator-(const Scalar& a, const Tensor& b) { return add(neg(b), a); }
Tensor operator*(const Scalar& a, const Tensor& b) { return mul(b, a); }
Tensor operator/(const Scalar& a, const Tensor& b) { return div(scalar_like(b, a), b); }
Tensor operator-(const Tensor& a) { return neg(a); }

// &, |, ~ on bool tensors are logical_and, logical_or, logical_not (LibTorch's masks); ember has
// no bitwise integer ops, so other dtypes are refused rather than read as truth values.
namespace {
void check_bool(const Tensor& t, const char* op) {
  EMBER_CHECK(t.defined() && t.dtype() == kBool, "operator", op, ": expected bool tensors (masks), got ",
              t.defined() ? detail::concat(t.dtype()) : std::string("an undefined tensor"),
              "; bitwise operations on integers are not in ember");
}
}  // namespace
Tensor operator&(const Tensor& a, const Tensor& b) {
  check_bool(a, "&");
  check_bool(b, "&");
  return logical_and(a, b);
}
Tensor operator|(const Tensor& a, const Tensor& b) {
  check_bool(a, "|");
  check_bool(b, "|");
  return logical_or(a, b);
}
Tensor operator~(const Tensor& a) {
  check_bool(a, "~");
  return logical_not(a);
}

}  // namespace ember
