// Elementwise ops: argument checks, broadcasting and type promotion, then one kernel call.
#include <cmath>

#include "ember/tensor/memory_overlap.h"
#include "ember/tensor/ops/internal.h"

namespace ember::native {
namespace {

enum Category { kBoolCat = 0, kIntCat = 1, kFloatCat = 2 };
Category category(DType d) { return d == kBool ? kBoolCat : is_floating(d) ? kFloatCat : kIntCat; }

// PyTorch's combine_categories: a lower-priority operand (0-d tensor, then Scalar) changes
// the result only when it is of a higher category.
std::optional<DType> combine(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (is_floating(*higher)) return higher;
  if (*higher == kBool || is_floating(*lower)) return promote_types(*higher, *lower);
  return higher;
}

struct Operand {
  const Tensor* tensor = nullptr;
  const Scalar* scalar = nullptr;
};

}  // namespace

DType result_type_of(std::initializer_list<Operand> operands) {
  std::optional<DType> dimensioned, zero_dim, wrapped;
  auto fold = [](std::optional<DType>& acc, DType d) { acc = acc ? promote_types(*acc, d) : d; };
  for (const Operand& o : operands) {
    if (o.tensor)
      fold(o.tensor->dim() > 0 ? dimensioned : zero_dim, o.tensor->dtype());
    else
      fold(wrapped, o.scalar->default_dtype());
  }
  return *combine(combine(dimensioned, zero_dim), wrapped);
}

namespace {

// Whether a result of dtype `from` may be written into a tensor of dtype `to` (in-place ops).
bool can_cast(DType from, DType to) { return category(from) <= category(to); }

const char* binary_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add:
      return "add";
    case BinaryOp::Sub:
      return "sub";
    case BinaryOp::Mul:
      return "mul";
    case BinaryOp::Div:
      return "div";
    case BinaryOp::Pow:
      return "pow";
    case BinaryOp::Maximum:
      return "maximum";
    case BinaryOp::Minimum:
      return "minimum";
    case BinaryOp::Atan2:
      return "atan2";
    case BinaryOp::Remainder:
      return "remainder";
    case BinaryOp::Fmod:
      return "fmod";
    case BinaryOp::TanhBackward:
      return "tanh_backward";
    case BinaryOp::SigmoidBackward:
      return "sigmoid_backward";
    case BinaryOp::ReluBackward:
      return "relu_backward";
    case BinaryOp::GeluBackward:
    case BinaryOp::GeluTanhBackward:
      return "gelu_backward";
    case BinaryOp::LeakyReluBackward:
      return "leaky_relu_backward";
    case BinaryOp::EluBackward:
      return "elu_backward";
    case BinaryOp::Eq:
      return "eq";
    case BinaryOp::Ne:
      return "ne";
    case BinaryOp::Lt:
      return "lt";
    case BinaryOp::Le:
      return "le";
    case BinaryOp::Gt:
      return "gt";
    case BinaryOp::Ge:
      return "ge";
    case BinaryOp::LogicalAnd:
      return "logical_and";
    case BinaryOp::LogicalOr:
      return "logical_or";
  }
  return "binary";  // a switch over every op: the compiler warns when one is missing
}

Tensor as_dtype(const Tensor& t, DType d) { return t.dtype() == d ? t : native::to(t, d); }

void check_binary_args(BinaryOp op, DType common, const Scalar& alpha) {
  const char* name = binary_name(op);
  EMBER_CHECK(!(op == BinaryOp::Sub && common == kBool), name,
              ": subtraction, the `-` operator, with two bool tensors is not supported; use logical_xor");
  EMBER_CHECK(!(alpha.is_floating() && !is_floating(common)), name,
              ": for integral input tensors, argument alpha must not be a floating point number");
  EMBER_CHECK(!((op == BinaryOp::Pow || op == BinaryOp::Remainder || op == BinaryOp::Fmod) && common == kBool), name,
              ": not implemented for dtype bool");
}

// Integer remainder and fmod by zero: PyTorch's CPU kernels raise ZeroDivisionError. The check
// reads the divisor on the host, so it runs on the CPU only (PyTorch's CUDA kernels do not check).
void check_integer_divisor(BinaryOp op, const Tensor& divisor, DType common) {
  if ((op != BinaryOp::Remainder && op != BinaryOp::Fmod) || is_floating(common) || !divisor.is_cpu()) return;
  if (divisor.numel() == 0) return;
  EMBER_CHECK(!native::any(native::eq(divisor, Scalar(0))).item<bool>(), binary_name(op),
              ": ZeroDivisionError (an integer divisor is 0; dtype ", common, ")");
}

// The compute dtype of `op` on operands whose promoted type is `common`.
DType compute_dtype(BinaryOp op, DType common) {
  return (op == BinaryOp::Div || op == BinaryOp::Atan2) && !is_floating(common) ? default_float_dtype() : common;
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b, DType common, const Scalar& alpha = 1) {
  const char* name = binary_name(op);
  ops::check_defined(a, name);
  ops::check_defined(b, name);
  ops::check_same_device({&a, &b}, name);
  check_binary_args(op, common, alpha);
  const DType compute = compute_dtype(op, common);
  const Shape shape = broadcast_shapes(a.sizes(), b.sizes(), name);
  check_integer_divisor(op, b, compute);
  Tensor out = ops::empty_on(shape, is_comparison(op) ? kBool : compute, a.device());
  if (out.numel() == 0) return out;
  backend(a.device()).binary(op, expand(as_dtype(a, compute), shape), expand(as_dtype(b, compute), shape), out, alpha);
  return out;
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b, const Scalar& alpha = 1) {
  ops::check_defined(a, binary_name(op));
  ops::check_defined(b, binary_name(op));
  return binary(op, a, b, result_type_of({{&a, nullptr}, {&b, nullptr}}), alpha);
}

Tensor binary(BinaryOp op, const Tensor& a, const Scalar& b, const Scalar& alpha = 1) {
  ops::check_defined(a, binary_name(op));
  const DType common = result_type_of({{&a, nullptr}, {nullptr, &b}});
  if (!a.is_cpu()) return binary(op, a, full({}, b, TensorOptions().dtype(common).device(a.device())), common, alpha);
  // On the CPU the scalar lives on the stack: no allocation for the 0-d operand.
  alignas(8) unsigned char value[8];
  EMBER_DISPATCH_ALL(common, binary_name(op), [&] { *reinterpret_cast<scalar_t*>(value) = b.to<scalar_t>(); });
  return binary(op, a, from_blob(value, {}, common), common, alpha);
}

// self = self op other, computed in the promoted type and cast back to self's dtype.
Tensor& binary_(BinaryOp op, Tensor& self, const Tensor& other, const Scalar& alpha) {
  const char* name = binary_name(op);
  ops::check_defined(self, name);
  ops::check_defined(other, name);
  ops::check_same_device({&self, &other}, name);
  const DType common = compute_dtype(op, result_type_of({{&self, nullptr}, {&other, nullptr}}));
  check_binary_args(op, common, alpha);
  EMBER_CHECK(can_cast(common, self.dtype()), name, "_: result type ", common,
              " can't be cast to the desired output type ", self.dtype());
  const Shape shape = broadcast_shapes(self.sizes(), other.sizes(), name);
  check_integer_divisor(op, other, common);
  EMBER_CHECK(shape == self.sizes(), name, "_: output with shape ", shape_str(self.sizes()),
              " doesn't match the broadcast shape ", shape_str(shape));
  if (self.numel() == 0) return self;
  assert_no_internal_overlap(self, name, "_");  // Note [Memory overlap]
  assert_no_partial_overlap(self, other, name, "_");
  const Tensor o = expand(as_dtype(other, common), shape);
  if (common == self.dtype()) {
    backend(self.device()).binary(op, self, o, self, alpha);
  } else {
    Tensor tmp = ops::empty_on(shape, common, self.device());
    backend(self.device()).binary(op, as_dtype(self, common), o, tmp, alpha);
    backend(self.device()).copy(tmp, self);
  }
  return self;
}

Tensor unary(UnaryOp op, const Tensor& x, const char* name, bool floating, double p0 = 0, double p1 = 0) {
  ops::check_defined(x, name);
  const Tensor in = floating && !x.is_floating_point() ? native::to(x, default_float_dtype()) : x;
  Tensor out = empty_like(in);
  if (out.numel() > 0) backend(x.device()).unary(op, in, out, p0, p1);
  return out;
}

Tensor unary_op(UnaryOp op, UnaryDomain domain, const char* name, const Tensor& x, const Scalar& p0 = 0,
                const Scalar& p1 = 0) {
  const bool rounding = op == UnaryOp::floor || op == UnaryOp::ceil || op == UnaryOp::round || op == UnaryOp::trunc;
  if (rounding && x.defined() && !x.is_floating_point()) {  // integers are already whole: a copy, as PyTorch's
    EMBER_CHECK(x.dtype() != kBool, name, ": not implemented for bool tensors");
    return native::clone(x);
  }
  return unary(op, x, name, domain == UnaryDomain::floating, p0.to_double(), p1.to_double());
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) { return binary(BinaryOp::Add, a, b, alpha); }
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) { return binary(BinaryOp::Sub, a, b, alpha); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Div, a, b); }
Tensor pow(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Pow, a, b); }
Tensor maximum(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Minimum, a, b); }
Tensor atan2(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Atan2, a, b); }
Tensor remainder(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Remainder, a, b); }
Tensor remainder(const Tensor& a, const Scalar& b) { return binary(BinaryOp::Remainder, a, b); }
Tensor fmod(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Fmod, a, b); }
Tensor fmod(const Tensor& a, const Scalar& b) { return binary(BinaryOp::Fmod, a, b); }
Tensor eq(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Ge, a, b); }
Tensor logical_and(const Tensor& a, const Tensor& b) { return binary(BinaryOp::LogicalAnd, a, b); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return binary(BinaryOp::LogicalOr, a, b); }
Tensor logical_not(const Tensor& a) { return eq(a, Scalar(0)); }
Tensor tanh_backward(const Tensor& grad, const Tensor& out) { return binary(BinaryOp::TanhBackward, grad, out); }
Tensor sigmoid_backward(const Tensor& grad, const Tensor& out) { return binary(BinaryOp::SigmoidBackward, grad, out); }
Tensor relu_backward(const Tensor& grad, const Tensor& out) { return binary(BinaryOp::ReluBackward, grad, out); }
namespace {
// The gradients taken from the op's input (self): both defined and floating.
void check_backward_from_input(const Tensor& grad, const Tensor& self, const char* op) {
  ops::check_defined(grad, op);
  ops::check_defined(self, op);
  EMBER_CHECK(grad.is_floating_point() && self.is_floating_point(), op, ": expects floating point tensors, got grad ",
              grad.dtype(), " and self ", self.dtype());
}
}  // namespace
Tensor leaky_relu_backward(const Tensor& grad, const Tensor& self, const Scalar& negative_slope) {
  check_backward_from_input(grad, self, "leaky_relu_backward");
  return binary(BinaryOp::LeakyReluBackward, grad, self, negative_slope);
}
Tensor elu_backward(const Tensor& grad, const Tensor& self, const Scalar& alpha) {
  check_backward_from_input(grad, self, "elu_backward");
  return binary(BinaryOp::EluBackward, grad, self, alpha);
}
Tensor gelu_backward(const Tensor& grad, const Tensor& self, const std::string& approximate) {
  EMBER_CHECK(approximate == "none" || approximate == "tanh",
              "gelu_backward: approximate must be 'none' or 'tanh', got '", approximate, "'");
  check_backward_from_input(grad, self, "gelu_backward");
  return binary(approximate == "tanh" ? BinaryOp::GeluTanhBackward : BinaryOp::GeluBackward, grad, self);
}

Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha) { return binary(BinaryOp::Add, a, b, alpha); }
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha) { return binary(BinaryOp::Sub, a, b, alpha); }
Tensor mul(const Tensor& a, const Scalar& b) { return binary(BinaryOp::Mul, a, b); }
Tensor div(const Tensor& a, const Scalar& b) { return binary(BinaryOp::Div, a, b); }
// A floating tensor to the exponents that have a cheaper op takes it, as PyTorch's pow kernel
// does: x^2 = x x (70x faster than std::pow on 800K floats), x^0.5 = sqrt(x), x^-0.5 = rsqrt(x),
// x^-1 = 1/x, x^1 = a copy (and x^3, x^-2 below). The values are PyTorch's too: sqrt(-0) is -0
// and sqrt(-inf) NaN, where std::pow gives +0 and inf.
Tensor pow(const Tensor& a, const Scalar& b) {
  ops::check_defined(a, "pow");
  EMBER_CHECK(!(is_integral(a.dtype(), false) && !b.is_floating() && b.to_int64() < 0),
              "pow: integers to negative integer powers are not allowed");
  if (a.is_floating_point()) {
    const double e = b.to_double();
    if (e == 2) return square(a);
    if (e == 0.5) return sqrt(a);
    if (e == -0.5) return rsqrt(a);
    if (e == -1) return reciprocal(a);
    if (e == 1) return clone(a);
    // (x x) x and 1 / (x x), PyTorch's for float and double; in 16 bits the square would round
    // once more than its kernel does
    if (a.dtype() == kFloat32 || a.dtype() == kFloat64) {
      if (e == 3) return mul(square(a), a);
      if (e == -2) return reciprocal(square(a));
    }
  }
  return binary(BinaryOp::Pow, a, b);
}
Tensor pow(const Scalar& a, const Tensor& b) {
  ops::check_defined(b, "pow");
  const DType common = result_type(b, a);
  return binary(BinaryOp::Pow, full({}, a, TensorOptions().dtype(common).device(b.device())), b, common);
}
Tensor eq(const Tensor& a, const Scalar& b) { return binary(BinaryOp::Eq, a, b); }
Tensor ne(const Tensor& a, const Scalar& b) { return binary(BinaryOp::Ne, a, b); }
Tensor lt(const Tensor& a, const Scalar& b) { return binary(BinaryOp::Lt, a, b); }
Tensor le(const Tensor& a, const Scalar& b) { return binary(BinaryOp::Le, a, b); }
Tensor gt(const Tensor& a, const Scalar& b) { return binary(BinaryOp::Gt, a, b); }
Tensor ge(const Tensor& a, const Scalar& b) { return binary(BinaryOp::Ge, a, b); }

Tensor& add_(Tensor& self, const Tensor& other, const Scalar& alpha) {
  return binary_(BinaryOp::Add, self, other, alpha);
}
Tensor& sub_(Tensor& self, const Tensor& other, const Scalar& alpha) {
  return binary_(BinaryOp::Sub, self, other, alpha);
}
Tensor& mul_(Tensor& self, const Tensor& other) { return binary_(BinaryOp::Mul, self, other, 1); }
Tensor& div_(Tensor& self, const Tensor& other) { return binary_(BinaryOp::Div, self, other, 1); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  ops::check_defined(cond, "where", "condition");
  ops::check_defined(a, "where");
  ops::check_defined(b, "where");
  ops::check_same_device({&cond, &a, &b}, "where");
  EMBER_CHECK(cond.dtype() == kBool, "where: expected condition to be a bool tensor, but got ", cond.dtype());
  const DType common = result_type(a, b);
  const Shape shape = broadcast_shapes(broadcast_shapes(cond.sizes(), a.sizes(), "where"), b.sizes(), "where");
  Tensor out = ops::empty_on(shape, common, a.device());
  if (out.numel() > 0)
    backend(a.device())
        .where(expand(cond, shape), expand(as_dtype(a, common), shape), expand(as_dtype(b, common), shape), out);
  return out;
}
Tensor where(const Tensor& cond, const Tensor& a, const Scalar& b) {
  ops::check_defined(a, "where");
  return where(cond, a, full({}, b, TensorOptions().dtype(result_type(a, b)).device(a.device())));
}
Tensor where(const Tensor& cond, const Scalar& a, const Tensor& b) {
  ops::check_defined(b, "where");
  return where(cond, full({}, a, TensorOptions().dtype(result_type(b, a)).device(b.device())), b);
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value) {
  ops::check_defined(x, "masked_fill");
  ops::check_defined(mask, "masked_fill", "mask");
  EMBER_CHECK(mask.dtype() == kBool, "masked_fill: expected a bool mask, but got ", mask.dtype());
  EMBER_CHECK(broadcast_shapes(x.sizes(), mask.sizes(), "masked_fill") == x.sizes(), "masked_fill: mask of shape ",
              shape_str(mask.sizes()), " cannot be broadcast to the input's shape ", shape_str(x.sizes()));
  EMBER_CHECK(!(value.is_floating() && !x.is_floating_point()), "masked_fill: value cannot be converted to type ",
              x.dtype(), " without overflow");
  return where(mask, full({}, value, TensorOptions().dtype(x.dtype()).device(x.device())), x);
}

Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  ops::check_defined(x, "clamp");
  EMBER_CHECK(min || max, "clamp: at least one of 'min' or 'max' must not be None");
  EMBER_CHECK(x.dtype() != kBool, "clamp: not implemented for dtype bool");
  DType d = x.dtype();
  if (min) d = result_type_of({{&x, nullptr}, {nullptr, &*min}});
  if (max) d = promote_types(d, result_type_of({{&x, nullptr}, {nullptr, &*max}}));
  const double nan = std::nan("");
  return unary(UnaryOp::clamp, as_dtype(x, d), "clamp", false, min ? min->to_double() : nan,
               max ? max->to_double() : nan);
}

Tensor neg(const Tensor& x) {
  ops::check_defined(x, "neg");
  EMBER_CHECK(x.dtype() != kBool,
              "neg: negation, the `-` operator, on a bool tensor is not supported; use logical_not");
  return unary(UnaryOp::neg, x, "neg", false);
}
Tensor square(const Tensor& x) {
  return x.dtype() == kBool ? square(to(x, kInt64)) : unary(UnaryOp::square, x, "square", false);
}
Tensor relu(const Tensor& x) {
  ops::check_defined(x, "relu");
  EMBER_CHECK(x.dtype() != kBool, "relu: not implemented for dtype bool");
  return unary(UnaryOp::relu, x, "relu", false);
}
// The EMBER_UNARY ops of ops.def: one kernel each (their math: tensor/cpu/elementwise.cpp, cuda/elementwise.cu).
#define EMBER_UNARY(name, domain, params, args) \
  Tensor name params { return unary_op(UnaryOp::name, UnaryDomain::domain, #name, EMBER_UNPAREN args); }
#include "ember/tensor/ops.def"

Tensor gelu(const Tensor& x, const std::string& approximate) {
  EMBER_CHECK(approximate == "none" || approximate == "tanh", "gelu: approximate must be 'none' or 'tanh', got '",
              approximate, "'");
  ops::check_defined(x, "gelu");
  EMBER_CHECK(x.is_floating_point(), "gelu: expects a floating point tensor, got ", x.dtype());
  return unary(approximate == "tanh" ? UnaryOp::gelu_tanh : UnaryOp::gelu, x, "gelu", true);
}

}  // namespace ember::native

namespace ember {
DType result_type(const Tensor& a, const Tensor& b) { return native::result_type_of({{&a, nullptr}, {&b, nullptr}}); }
DType result_type(const Tensor& a, const Scalar& b) { return native::result_type_of({{&a, nullptr}, {nullptr, &b}}); }
}  // namespace ember
