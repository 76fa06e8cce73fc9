// Elementwise ops, forward beside backward. `d` is the gradient of the op's output.
#include <cmath>

#include "ember/autograd/function_helpers.h"

namespace ember {

Tensor sum_to(const Tensor& g, const Shape& sizes) {
  if (g.sizes() == sizes) return g;
  const int64_t lead = g.dim() - static_cast<int64_t>(sizes.size());
  Shape dims;
  for (int64_t i = 0; i < g.dim(); ++i)
    if (i < lead || (sizes[i - lead] == 1 && g.size(i) != 1)) dims.push_back(i);
  if (building_graph()) return ember::reshape(dims.empty() ? g : ember::sum(g, dims, true), sizes);
  const Tensor r = dims.empty() ? g : native::sum(g, dims, true);
  return native::reshape(r, sizes);
}

Tensor autograd::add(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  Tensor out = forward([&] { return native::add(a, b, alpha); });
  if (needs_grad(a, b))
    record_fn(
        "AddBackward", {&a, &b}, {&out},
        [la = Like(a), lb = Like(b), alpha](std::vector<Tensor>& d) {
          return std::vector<Tensor>{fit(d[0], la.sizes, la.dtype), fit(d[0] * alpha, lb.sizes, lb.dtype)};
        },
        kDifferentiable);
  return out;
}

Tensor autograd::sub(const Tensor& a, const Tensor& b, const Scalar& alpha) {
  Tensor out = forward([&] { return native::sub(a, b, alpha); });
  if (needs_grad(a, b))
    record_fn(
        "SubBackward", {&a, &b}, {&out},
        [la = Like(a), lb = Like(b), alpha](std::vector<Tensor>& d) {
          return std::vector<Tensor>{fit(d[0], la.sizes, la.dtype),
                                     fit(d[0] * (-alpha.to_double()), lb.sizes, lb.dtype)};
        },
        kDifferentiable);
  return out;
}

Tensor autograd::mul(const Tensor& a, const Tensor& b) {
  Tensor out = forward([&] { return native::mul(a, b); });
  if (needs_grad(a, b))
    record_fn(
        "MulBackward", {&a, &b}, {&out},
        // Each factor is saved only if the other one needs a gradient.
        [la = Like(a), lb = Like(b), sa = b.requires_grad() ? SavedTensor(a) : SavedTensor(),
         sb = a.requires_grad() ? SavedTensor(b) : SavedTensor()](std::vector<Tensor>& d) {
          const Tensor x = sa.unpack("mul"), y = sb.unpack("mul");
          return std::vector<Tensor>{y.defined() ? fit(d[0] * y, la.sizes, la.dtype) : Tensor(),
                                     x.defined() ? fit(d[0] * x, lb.sizes, lb.dtype) : Tensor()};
        },
        kDifferentiable);
  return out;
}

Tensor autograd::div(const Tensor& a, const Tensor& b) {
  Tensor out = forward([&] { return native::div(a, b); });
  if (needs_grad(a, b))
    record_fn(
        "DivBackward", {&a, &b}, {&out},
        [la = Like(a), lb = Like(b), sa = SavedTensor(a), sb = SavedTensor(b)](std::vector<Tensor>& d) {
          const Tensor bb = sb.unpack("div");
          return std::vector<Tensor>{fit(d[0] / bb, la.sizes, la.dtype),
                                     fit(-d[0] * sa.unpack("div") / (bb * bb), lb.sizes, lb.dtype)};
        },
        kDifferentiable);
  return out;
}

Tensor autograd::pow(const Tensor& a, const Tensor& b) {
  Tensor out = forward([&] { return native::pow(a, b); });
  if (needs_grad(a, b))
    record_fn(
        "PowBackward", {&a, &b}, {&out},
        [la = Like(a), lb = Like(b), sa = SavedTensor(a), sb = SavedTensor(b),
         so = SavedTensor::output(out)](std::vector<Tensor>& d) {
          const Tensor x = sa.unpack("pow"), e = sb.unpack("pow"), y = so.unpack("pow");
          const Tensor ga = d[0] * e * ember::pow(x, e - 1.0);
          // d/de x^e = x^e log x, taken as 0 where x == 0 and e >= 0 (PyTorch's convention).
          const Tensor gb = ember::where(logical_and(x == 0.0, e >= 0.0), 0.0, d[0] * y * ember::log(x));
          return std::vector<Tensor>{fit(ga, la.sizes, la.dtype), fit(gb, lb.sizes, lb.dtype)};
        },
        kDifferentiable);
  return out;
}

// maximum/minimum: the gradient goes to the winning input; ties split it evenly, as
// PyTorch does. `wins(x, y)` is x > y for maximum, x < y for minimum.
namespace {
Tensor extreme_of_two(const char* name, Tensor (*native_fn)(const Tensor&, const Tensor&),
                      Tensor (*wins)(const Tensor&, const Tensor&), const Tensor& a, const Tensor& b) {
  Tensor out = forward([&] { return native_fn(a, b); });
  if (needs_grad(a, b))
    record_fn(
        name, {&a, &b}, {&out},
        [name, wins, la = Like(a), lb = Like(b), sa = SavedTensor(a), sb = SavedTensor(b)](std::vector<Tensor>& d) {
          const Tensor x = sa.unpack(name), y = sb.unpack(name);
          const Tensor wa = native::add(wins(x, y).to(d[0].dtype()), (x == y).to(d[0].dtype()) * 0.5);
          return std::vector<Tensor>{fit(d[0] * wa, la.sizes, la.dtype), fit(d[0] * (1.0 - wa), lb.sizes, lb.dtype)};
        },
        kDifferentiable);
  return out;
}
}  // namespace

Tensor autograd::maximum(const Tensor& a, const Tensor& b) {
  return extreme_of_two("MaximumBackward", native::maximum, native::gt, a, b);
}
Tensor autograd::minimum(const Tensor& a, const Tensor& b) {
  return extreme_of_two("MinimumBackward", native::minimum, native::lt, a, b);
}

// d atan2(a, b) = (b da - a db) / (a^2 + b^2)
Tensor autograd::atan2(const Tensor& a, const Tensor& b) {
  Tensor out = forward([&] { return native::atan2(a, b); });
  if (needs_grad(a, b))
    record_fn(
        "Atan2Backward", {&a, &b}, {&out},
        [la = Like(a), lb = Like(b), sa = SavedTensor(a), sb = SavedTensor(b)](std::vector<Tensor>& d) {
          const Tensor x = sa.unpack("atan2"), y = sb.unpack("atan2");
          const Tensor g = d[0] / (x * x + y * y);
          return std::vector<Tensor>{fit(g * y, la.sizes, la.dtype), fit(-g * x, lb.sizes, lb.dtype)};
        },
        kDifferentiable);
  return out;
}

// remainder and fmod: a - b q with q = floor(a / b) or trunc(a / b), a step function; so
// d/da = 1 and d/db = -q, as PyTorch's formulas.
namespace {
Tensor remainder_like(const char* name, Tensor (*native_fn)(const Tensor&, const Tensor&),
                      Tensor (*quotient)(const Tensor&), const Tensor& a, const Tensor& b) {
  Tensor out = forward([&] { return native_fn(a, b); });
  if (needs_grad(a, b) && out.is_floating_point())
    record_fn(
        name, {&a, &b}, {&out},
        [name, quotient, la = Like(a), lb = Like(b), b_grad = b.requires_grad(),
         sa = b.requires_grad() ? SavedTensor(a) : SavedTensor(),
         sb = b.requires_grad() ? SavedTensor(b) : SavedTensor()](std::vector<Tensor>& d) {
          Tensor gb;  // only b's gradient reads the saved inputs
          if (b_grad) gb = fit(-d[0] * quotient(sa.unpack(name) / sb.unpack(name)), lb.sizes, lb.dtype);
          return std::vector<Tensor>{fit(d[0], la.sizes, la.dtype), gb};
        },
        kDifferentiable);
  return out;
}
}  // namespace

Tensor autograd::remainder(const Tensor& a, const Tensor& b) {
  return remainder_like("RemainderBackward", native::remainder, ember::floor, a, b);
}
Tensor autograd::fmod(const Tensor& a, const Tensor& b) {
  return remainder_like("FmodBackward", native::fmod, ember::trunc, a, b);
}
Tensor autograd::remainder(const Tensor& a, const Scalar& b) {
  Tensor out = forward([&] { return native::remainder(a, b); });
  if (needs_grad(a) && out.is_floating_point())
    record_fn(
        "RemainderBackward", {&a}, {&out},
        [la = Like(a)](std::vector<Tensor>& d) { return std::vector<Tensor>{fit(d[0], la.sizes, la.dtype)}; },
        kDifferentiable);
  return out;
}
Tensor autograd::fmod(const Tensor& a, const Scalar& b) {
  Tensor out = forward([&] { return native::fmod(a, b); });
  if (needs_grad(a) && out.is_floating_point())
    record_fn(
        "FmodBackward", {&a}, {&out},
        [la = Like(a)](std::vector<Tensor>& d) { return std::vector<Tensor>{fit(d[0], la.sizes, la.dtype)}; },
        kDifferentiable);
  return out;
}

// Scalar forms: the scalar is a constant.
Tensor autograd::add(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  Tensor out = forward([&] { return native::add(a, b, alpha); });
  if (needs_grad(a))
    record_fn(
        "AddBackward", {&a}, {&out},
        [la = Like(a)](std::vector<Tensor>& d) { return std::vector<Tensor>{fit(d[0], la.sizes, la.dtype)}; },
        kDifferentiable);
  return out;
}
Tensor autograd::sub(const Tensor& a, const Scalar& b, const Scalar& alpha) {
  return ember::add(a, -b.to_double() * alpha.to_double());
}
Tensor autograd::mul(const Tensor& a, const Scalar& b) {
  Tensor out = forward([&] { return native::mul(a, b); });
  if (needs_grad(a))
    record_fn(
        "MulBackward", {&a}, {&out},
        [la = Like(a), b](std::vector<Tensor>& d) { return std::vector<Tensor>{fit(d[0] * b, la.sizes, la.dtype)}; },
        kDifferentiable);
  return out;
}
Tensor autograd::div(const Tensor& a, const Scalar& b) {
  Tensor out = forward([&] { return native::div(a, b); });
  if (needs_grad(a))
    record_fn(
        "DivBackward", {&a}, {&out},
        [la = Like(a), b](std::vector<Tensor>& d) { return std::vector<Tensor>{fit(d[0] / b, la.sizes, la.dtype)}; },
        kDifferentiable);
  return out;
}
Tensor autograd::pow(const Tensor& a, const Scalar& e) {
  Tensor out = forward([&] { return native::pow(a, e); });
  if (needs_grad(a))
    record_fn(
        "PowBackward", {&a}, {&out},
        [la = Like(a), sa = SavedTensor(a), e](std::vector<Tensor>& d) {
          const double ev = e.to_double();
          if (ev == 0) return std::vector<Tensor>{la.zeros()};
          return std::vector<Tensor>{fit(d[0] * ev * ember::pow(sa.unpack("pow"), ev - 1.0), la.sizes, la.dtype)};
        },
        kDifferentiable);
  return out;
}
Tensor autograd::pow(const Scalar& s, const Tensor& b) {
  Tensor out = forward([&] { return native::pow(s, b); });
  if (needs_grad(b))
    record_fn(
        "PowBackward", {&b}, {&out},
        [lb = Like(b), so = SavedTensor::output(out), s](std::vector<Tensor>& d) {
          return std::vector<Tensor>{fit(d[0] * so.unpack("pow") * std::log(s.to_double()), lb.sizes, lb.dtype)};
        },
        kDifferentiable);
  return out;
}

Tensor autograd::where(const Tensor& c, const Tensor& a, const Tensor& b) {
  Tensor out = forward([&] { return native::where(c, a, b); });
  if (needs_grad(a, b))
    record_fn(
        "WhereBackward", {&a, &b}, {&out},
        [la = Like(a), lb = Like(b), sc = SavedTensor(c)](std::vector<Tensor>& d) {
          const Tensor cond = sc.unpack("where");
          return std::vector<Tensor>{fit(ember::where(cond, d[0], 0.0), la.sizes, la.dtype),
                                     fit(ember::where(cond, 0.0, d[0]), lb.sizes, lb.dtype)};
        },
        kDifferentiable);
  return out;
}
Tensor autograd::where(const Tensor& c, const Tensor& a, const Scalar& b) {
  return ember::where(c, a, full({}, b, TensorOptions().dtype(result_type(a, b)).device(a.device())));
}
Tensor autograd::where(const Tensor& c, const Scalar& a, const Tensor& b) {
  return ember::where(c, full({}, a, TensorOptions().dtype(result_type(b, a)).device(b.device())), b);
}

Tensor autograd::masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value) {
  Tensor out = forward([&] { return native::masked_fill(x, mask, value); });
  if (needs_grad(x))
    record_fn(
        "MaskedFillBackward", {&x}, {&out},
        [lx = Like(x), sm = SavedTensor(mask)](std::vector<Tensor>& d) {
          return std::vector<Tensor>{fit(ember::where(sm.unpack("masked_fill"), 0.0, d[0]), lx.sizes, lx.dtype)};
        },
        kDifferentiable);
  return out;
}

Tensor autograd::clamp(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  Tensor out = forward([&] { return native::clamp(x, lo, hi); });
  if (needs_grad(x))
    record_fn(
        "ClampBackward", {&x}, {&out},
        [lx = Like(x), sx = SavedTensor(x), lo, hi](std::vector<Tensor>& d) {
          const Tensor v = sx.unpack("clamp");
          Tensor keep = ones_like(v).to(kBool);
          if (lo) keep = logical_and(keep, v >= *lo);
          if (hi) keep = logical_and(keep, v <= *hi);
          return std::vector<Tensor>{fit(ember::where(keep, d[0], 0.0), lx.sizes, lx.dtype)};
        },
        kDifferentiable);
  return out;
}

// ---- unary: y = f(x), dx = d * f'(x), written with the saved input or output ----
namespace {
using UnaryBackward = Tensor (*)(const Tensor& d, const Tensor& x, const Tensor& y);
enum Saves { kInput = 1, kOutput = 2 };  // what a unary backward reads: save only that

Tensor unary(const char* name, Tensor (*native_fn)(const Tensor&), const Tensor& x, int saves, UnaryBackward backward) {
  Tensor out = forward([&] { return native_fn(x); });
  if (needs_grad(x) && out.is_floating_point())
    record_fn(
        name, {&x}, {&out},
        [name, backward, lx = Like(x), sx = (saves & kInput) ? SavedTensor(x) : SavedTensor(),
         so = (saves & kOutput) ? SavedTensor::output(out) : SavedTensor()](std::vector<Tensor>& d) {
          return std::vector<Tensor>{fit(backward(d[0], sx.unpack(name), so.unpack(name)), lx.sizes, lx.dtype)};
        },
        kDifferentiable);
  return out;
}

Tensor normal_pdf(const Tensor& x) { return ember::exp(x * x * -0.5) * 0.3989422804014327; }
}  // namespace

Tensor autograd::neg(const Tensor& x) {
  return unary("NegBackward", native::neg, x, 0, [](const Tensor& d, const Tensor&, const Tensor&) { return -d; });
}
Tensor autograd::abs(const Tensor& x) {
  return unary("AbsBackward", native::abs, x, kInput,
               [](const Tensor& d, const Tensor& v, const Tensor&) { return d * ember::sign(v); });
}
Tensor autograd::sign(const Tensor& x) {
  return unary("SignBackward", native::sign, x, 0,
               [](const Tensor& d, const Tensor&, const Tensor&) { return zeros_like(d); });
}
Tensor autograd::square(const Tensor& x) {
  return unary("SquareBackward", native::square, x, kInput,
               [](const Tensor& d, const Tensor& v, const Tensor&) { return d * v * 2.0; });
}
Tensor autograd::relu(const Tensor& x) {
  return unary("ReluBackward", native::relu, x, kOutput, [](const Tensor& d, const Tensor&, const Tensor& y) {
    return building_graph() ? ember::where(y > 0.0, d, 0.0) : native::relu_backward(d, y);
  });
}
Tensor autograd::exp(const Tensor& x) {
  return unary("ExpBackward", native::exp, x, kOutput,
               [](const Tensor& d, const Tensor&, const Tensor& y) { return d * y; });
}
Tensor autograd::log(const Tensor& x) {
  return unary("LogBackward", native::log, x, kInput,
               [](const Tensor& d, const Tensor& v, const Tensor&) { return d / v; });
}
Tensor autograd::log1p(const Tensor& x) {
  return unary("Log1pBackward", native::log1p, x, kInput,
               [](const Tensor& d, const Tensor& v, const Tensor&) { return d / (v + 1.0); });
}
Tensor autograd::expm1(const Tensor& x) {
  return unary("Expm1Backward", native::expm1, x, kOutput,
               [](const Tensor& d, const Tensor&, const Tensor& y) { return d * (y + 1.0); });
}
#define EMBER_STEP_FUNCTION(name, node)                                                        \
  Tensor autograd::name(const Tensor& x) {                                                     \
    return unary(node, native::name, x, 0,                                                     \
                 [](const Tensor& d, const Tensor&, const Tensor&) { return zeros_like(d); }); \
  }
EMBER_STEP_FUNCTION(floor, "FloorBackward")
EMBER_STEP_FUNCTION(ceil, "CeilBackward")
EMBER_STEP_FUNCTION(round, "RoundBackward")
EMBER_STEP_FUNCTION(trunc, "TruncBackward")
#undef EMBER_STEP_FUNCTION
Tensor autograd::sqrt(const Tensor& x) {
  return unary("SqrtBackward", native::sqrt, x, kOutput,
               [](const Tensor& d, const Tensor&, const Tensor& y) { return d / (y * 2.0); });
}
Tensor autograd::rsqrt(const Tensor& x) {
  return unary("RsqrtBackward", native::rsqrt, x, kOutput,
               [](const Tensor& d, const Tensor&, const Tensor& y) { return d * y * y * y * -0.5; });
}
Tensor autograd::sin(const Tensor& x) {
  return unary("SinBackward", native::sin, x, kInput,
               [](const Tensor& d, const Tensor& v, const Tensor&) { return d * ember::cos(v); });
}
Tensor autograd::cos(const Tensor& x) {
  return unary("CosBackward", native::cos, x, kInput,
               [](const Tensor& d, const Tensor& v, const Tensor&) { return -d * ember::sin(v); });
}
Tensor autograd::tan(const Tensor& x) {  // 1 + tan^2
  return unary("TanBackward", native::tan, x, kOutput,
               [](const Tensor& d, const Tensor&, const Tensor& y) { return d * (y * y + 1.0); });
}
Tensor autograd::asin(const Tensor& x) {  // 1 / sqrt(1 - x^2)
  return unary("AsinBackward", native::asin, x, kInput,
               [](const Tensor& d, const Tensor& v, const Tensor&) { return d * ember::rsqrt(1.0 - v * v); });
}
Tensor autograd::acos(const Tensor& x) {  // -1 / sqrt(1 - x^2)
  return unary("AcosBackward", native::acos, x, kInput,
               [](const Tensor& d, const Tensor& v, const Tensor&) { return -d * ember::rsqrt(1.0 - v * v); });
}
Tensor autograd::atan(const Tensor& x) {  // 1 / (1 + x^2)
  return unary("AtanBackward", native::atan, x, kInput,
               [](const Tensor& d, const Tensor& v, const Tensor&) { return d / (v * v + 1.0); });
}
Tensor autograd::sinh(const Tensor& x) {
  return unary("SinhBackward", native::sinh, x, kInput,
               [](const Tensor& d, const Tensor& v, const Tensor&) { return d * ember::cosh(v); });
}
Tensor autograd::cosh(const Tensor& x) {
  return unary("CoshBackward", native::cosh, x, kInput,
               [](const Tensor& d, const Tensor& v, const Tensor&) { return d * ember::sinh(v); });
}
Tensor autograd::asinh(const Tensor& x) {  // 1 / sqrt(x^2 + 1)
  return unary("AsinhBackward", native::asinh, x, kInput,
               [](const Tensor& d, const Tensor& v, const Tensor&) { return d * ember::rsqrt(v * v + 1.0); });
}
Tensor autograd::acosh(const Tensor& x) {  // 1 / sqrt(x^2 - 1)
  return unary("AcoshBackward", native::acosh, x, kInput,
               [](const Tensor& d, const Tensor& v, const Tensor&) { return d * ember::rsqrt(v * v - 1.0); });
}
Tensor autograd::atanh(const Tensor& x) {  // 1 / (1 - x^2)
  return unary("AtanhBackward", native::atanh, x, kInput,
               [](const Tensor& d, const Tensor& v, const Tensor&) { return d / (1.0 - v * v); });
}
Tensor autograd::log2(const Tensor& x) {  // 1 / (x ln 2)
  return unary("Log2Backward", native::log2, x, kInput,
               [](const Tensor& d, const Tensor& v, const Tensor&) { return d / (v * 0.6931471805599453); });
}
Tensor autograd::log10(const Tensor& x) {  // 1 / (x ln 10)
  return unary("Log10Backward", native::log10, x, kInput,
               [](const Tensor& d, const Tensor& v, const Tensor&) { return d / (v * 2.302585092994046); });
}
Tensor autograd::exp2(const Tensor& x) {  // 2^x ln 2
  return unary("Exp2Backward", native::exp2, x, kOutput,
               [](const Tensor& d, const Tensor&, const Tensor& y) { return d * y * 0.6931471805599453; });
}
Tensor autograd::tanh(const Tensor& x) {
  return unary("TanhBackward", native::tanh, x, kOutput, [](const Tensor& d, const Tensor&, const Tensor& y) {
    return building_graph() ? d * (1.0 - y * y) : native::tanh_backward(d, y);
  });
}
Tensor autograd::sigmoid(const Tensor& x) {
  return unary("SigmoidBackward", native::sigmoid, x, kOutput, [](const Tensor& d, const Tensor&, const Tensor& y) {
    return building_graph() ? d * y * (1.0 - y) : native::sigmoid_backward(d, y);
  });
}
Tensor autograd::silu(const Tensor& x) {
  return unary("SiluBackward", native::silu, x, kInput, [](const Tensor& d, const Tensor& v, const Tensor&) {
    const Tensor s = ember::sigmoid(v);
    return d * s * (1.0 + v * (1.0 - s));
  });
}
Tensor autograd::reciprocal(const Tensor& x) {
  return unary("ReciprocalBackward", native::reciprocal, x, kOutput,
               [](const Tensor& d, const Tensor&, const Tensor& y) { return -d * y * y; });
}
Tensor autograd::erf(const Tensor& x) {
  return unary("ErfBackward", native::erf, x, kInput, [](const Tensor& d, const Tensor& v, const Tensor&) {
    return d * ember::exp(-(v * v)) * 1.1283791670955126;  // 2 / ember::sqrt(pi)
  });
}
Tensor autograd::erfinv(const Tensor& x) {  // √π / 2 · exp(erfinv(x)²)
  return unary("ErfinvBackward", native::erfinv, x, kOutput, [](const Tensor& d, const Tensor&, const Tensor& y) {
    return d * ember::exp(y * y) * 0.88622692545275801;
  });
}
Tensor autograd::gelu(const Tensor& x, const std::string& approximate) {
  EMBER_CHECK(approximate == "none" || approximate == "tanh", "gelu: approximate must be 'none' or 'tanh', got '",
              approximate, "'");
  if (approximate == "tanh") {
    return unary(
        "GeluBackward", [](const Tensor& v) { return native::gelu(v, "tanh"); }, x, kInput,
        [](const Tensor& d, const Tensor& v, const Tensor&) {
          if (!building_graph()) return native::gelu_backward(d, v, "tanh");
          const double k = 0.7978845608028654, c = 0.044715;
          const Tensor inner = (v + v * v * v * c) * k;
          const Tensor t = ember::tanh(inner);
          const Tensor dinner = (1.0 + v * v * (3.0 * c)) * k;
          return d * ((1.0 + t) * 0.5 + v * 0.5 * (1.0 - t * t) * dinner);
        });
  }
  return unary(
      "GeluBackward", [](const Tensor& v) { return native::gelu(v, "none"); }, x, kInput,
      [](const Tensor& d, const Tensor& v, const Tensor&) {
        if (!building_graph()) return native::gelu_backward(d, v, "none");
        const Tensor cdf = (1.0 + ember::erf(v * 0.7071067811865476)) * 0.5;
        return d * (cdf + v * normal_pdf(v));
      });
}

// d softplus / dx = sigmoid(beta x), and 1 where the op is the identity (beta x > threshold).
Tensor autograd::softplus(const Tensor& x, const Scalar& beta, const Scalar& threshold) {
  Tensor out = forward([&] { return native::softplus(x, beta, threshold); });
  if (needs_grad(x))
    record_fn(
        "SoftplusBackward", {&x}, {&out},
        [lx = Like(x), sx = SavedTensor(x), beta, threshold](std::vector<Tensor>& d) {
          const Tensor bx = sx.unpack("softplus") * beta;
          const Tensor g = ember::where(bx > threshold, d[0], d[0] * ember::sigmoid(bx));
          return std::vector<Tensor>{fit(g, lx.sizes, lx.dtype)};
        },
        kDifferentiable);
  return out;
}

// d leaky_relu / dx = 1 where x > 0, negative_slope elsewhere (at 0 too, as PyTorch).
Tensor autograd::leaky_relu(const Tensor& x, const Scalar& negative_slope) {
  Tensor out = forward([&] { return native::leaky_relu(x, negative_slope); });
  if (needs_grad(x))
    record_fn(
        "LeakyReluBackward", {&x}, {&out},
        [lx = Like(x), sx = SavedTensor(x), negative_slope](std::vector<Tensor>& d) {
          const Tensor v = sx.unpack("leaky_relu");
          const Tensor g = building_graph() ? ember::where(v > 0.0, d[0], d[0] * negative_slope)
                                            : native::leaky_relu_backward(d[0], v, negative_slope);
          return std::vector<Tensor>{fit(g, lx.sizes, lx.dtype)};
        },
        kDifferentiable);
  return out;
}

// d elu / dx = 1 where x > 0, alpha e^x elsewhere.
Tensor autograd::elu(const Tensor& x, const Scalar& alpha) {
  Tensor out = forward([&] { return native::elu(x, alpha); });
  if (needs_grad(x))
    record_fn(
        "EluBackward", {&x}, {&out},
        [lx = Like(x), sx = SavedTensor(x), alpha](std::vector<Tensor>& d) {
          const Tensor v = sx.unpack("elu");
          const Tensor g = building_graph() ? ember::where(v > 0.0, d[0], d[0] * ember::exp(v) * alpha)
                                            : native::elu_backward(d[0], v, alpha);
          return std::vector<Tensor>{fit(g, lx.sizes, lx.dtype)};
        },
        kDifferentiable);
  return out;
}

// In place: the tape does not rewrite history, so these refuse tensors that require grad
// while grad mode is on (for a leaf that is also PyTorch's rule).
namespace {
void check_inplace(const Tensor& self, const char* op) {
  if (!GradMode::is_enabled() || !self.requires_grad()) return;
  EMBER_CHECK(!self.is_leaf(), op,
              ": a leaf tensor that requires grad is being used in an in-place operation; "
              "wrap the update in NoGradGuard (as optimizers do)");
  throw Error(detail::concat(op, ": in-place operations on tensors that are part of the tape (output of ",
                             self.grad_fn()->name(), ") are not supported; use the out-of-place op"));
}
}  // namespace

void autograd::check_inplace_allowed(const Tensor& self, const char* op) { check_inplace(self, op); }

Tensor& autograd::add_(Tensor& self, const Tensor& other, const Scalar& alpha) {
  check_inplace(self, "add_");
  native::add_(self, other, alpha);
  self.bump_version();
  return self;
}
Tensor& autograd::sub_(Tensor& self, const Tensor& other, const Scalar& alpha) {
  check_inplace(self, "sub_");
  native::sub_(self, other, alpha);
  self.bump_version();
  return self;
}
Tensor& autograd::mul_(Tensor& self, const Tensor& other) {
  check_inplace(self, "mul_");
  native::mul_(self, other);
  self.bump_version();
  return self;
}
Tensor& autograd::div_(Tensor& self, const Tensor& other) {
  check_inplace(self, "div_");
  native::div_(self, other);
  self.bump_version();
  return self;
}

}  // namespace ember
