#pragma once
// The elementwise ops' math, once for both back ends. Note [Elementwise math]: each op is a
// functor on one element in the op's math type M (float for float16/bfloat16, the type itself
// otherwise), callable on the host and, compiled by nvcc, on the device. The CPU back end
// (tensor/cpu/elementwise.cpp) runs one loop per op, so that the compiler vectorizes it; the
// CUDA back end (cuda/elementwise.cu) runs one kernel per dtype that switches on the op. Both
// go from the op's enum value to its functor through visit_unary / visit_binary /
// visit_comparison, so adding an op is: its enum value, its functor, its case (and its line in
// ops.def).
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#ifdef __CUDACC__
#define EMBER_HOST_DEVICE __host__ __device__
#else
#define EMBER_HOST_DEVICE
#endif

namespace ember {

// The unary elementwise kernels, named as their ops; parameters p0, p1 (clamp: min and max,
// NaN for none).
enum class UnaryOp : int8_t {
  neg,
  abs,
  exp,
  log,
  log1p,
  expm1,
  floor,
  ceil,
  round,  // half to even, as PyTorch rounds
  trunc,
  sqrt,
  rsqrt,
  sin,
  cos,
  tan,
  asin,
  acos,
  atan,
  sinh,
  cosh,
  asinh,
  acosh,
  atanh,
  log2,
  log10,
  exp2,
  tanh,
  sigmoid,
  relu,
  gelu,
  gelu_tanh,
  silu,
  sign,
  square,
  reciprocal,
  erf,
  erfinv,
  clamp,
  softplus,    // p0 = beta, p1 = threshold
  leaky_relu,  // p0 = negative_slope
  elu          // p0 = alpha
};
// Which dtypes a unary op computes in: all as they are, or floating (integers and bools as float32).
enum class UnaryDomain : int8_t { all, floating };

enum class BinaryOp : int8_t {
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Maximum,
  Minimum,
  Atan2,              // floating only: integers are promoted to float by the op
  Remainder,          // x - y floor(x / y): the sign of y, as Python's %
  Fmod,               // x - y trunc(x / y): the sign of x, as C's fmod (arithmetic ends: out has the inputs' dtype)
  TanhBackward,       // a = grad, b = tanh output: a * (1 - b^2)
  SigmoidBackward,    // a = grad, b = sigmoid output: a * b * (1 - b)
  ReluBackward,       // a = grad, b = relu output: b > 0 ? a : 0
  GeluBackward,       // a = grad, b = gelu's input x: a (Φ(x) + x φ(x))
  GeluTanhBackward,   // a = grad, b = x: the derivative of gelu(x, "tanh")
  LeakyReluBackward,  // a = grad, b = x, alpha = negative_slope: b > 0 ? a : a alpha
  EluBackward,        // a = grad, b = x, alpha: b > 0 ? a : a alpha e^b
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  LogicalAnd,
  LogicalOr  // out is bool
};
EMBER_HOST_DEVICE constexpr bool is_comparison(BinaryOp op) { return op >= BinaryOp::Eq; }

namespace math {

template <class M>
constexpr bool is_float_v = std::is_floating_point_v<M>;
// Integer arithmetic wraps on overflow, as in PyTorch (signed overflow is undefined in C++):
// it is done in the unsigned type of the same width.
template <class M>
constexpr bool wraps_v = std::is_integral_v<M> && !std::is_same_v<M, bool>;
template <class M>
using unsigned_of = std::make_unsigned_t<std::conditional_t<wraps_v<M>, M, int>>;

// ---- unary ----
template <class M>
struct Neg {  // -INT_MIN wraps to INT_MIN, as in PyTorch
  EMBER_HOST_DEVICE M operator()(M x) const {
    if constexpr (wraps_v<M>)
      return M(unsigned_of<M>(unsigned_of<M>(0) - unsigned_of<M>(x)));
    else
      return M(M(0) - x);
  }
};
template <class M>
struct Abs {  // |INT_MIN| wraps to INT_MIN, as in PyTorch
  EMBER_HOST_DEVICE M operator()(M x) const {
    if constexpr (std::is_unsigned_v<M>)
      return x;
    else
      return x < M(0) ? Neg<M>{}(x) : x;
  }
};
template <class M>
struct Sign {
  EMBER_HOST_DEVICE M operator()(M x) const {
    if constexpr (std::is_unsigned_v<M>)
      return M(x != M(0));
    else
      return x != x ? x : M((M(0) < x) - (x < M(0)));  // NaN stays NaN
  }
};
template <class M>
struct Mul;
template <class M>
struct Square {  // INT_MAX^2 wraps, as Mul does
  EMBER_HOST_DEVICE M operator()(M x) const { return Mul<M>{}(x, x); }
};
template <class M>
struct Relu {
  EMBER_HOST_DEVICE M operator()(M x) const { return x > M(0) || x != x ? x : M(0); }
};
template <class M>
struct Clamp {  // min(max(x, lo), hi) without branches; NaN propagates (both comparisons are false)
  M lo, hi;     // a missing bound is M's widest: -inf / inf, or the integer type's limits
  EMBER_HOST_DEVICE M operator()(M x) const {
    const M y = x < lo ? lo : x;
    return y > hi ? hi : y;
  }
};
template <class M>
struct Exp {
  EMBER_HOST_DEVICE M operator()(M x) const { return std::exp(x); }
};
template <class M>
struct Log {
  EMBER_HOST_DEVICE M operator()(M x) const { return std::log(x); }
};
template <class M>
struct Log1p {
  EMBER_HOST_DEVICE M operator()(M x) const { return std::log1p(x); }
};
template <class M>
struct Expm1 {
  EMBER_HOST_DEVICE M operator()(M x) const { return std::expm1(x); }
};
template <class M>
struct Floor {
  EMBER_HOST_DEVICE M operator()(M x) const { return std::floor(x); }
};
template <class M>
struct Ceil {
  EMBER_HOST_DEVICE M operator()(M x) const { return std::ceil(x); }
};
template <class M>
struct Round {  // nearbyint in the default rounding mode: halves go to the even neighbour
  EMBER_HOST_DEVICE M operator()(M x) const { return std::nearbyint(x); }
};
template <class M>
struct Trunc {
  EMBER_HOST_DEVICE M operator()(M x) const { return std::trunc(x); }
};
template <class M>
struct Sqrt {
  EMBER_HOST_DEVICE M operator()(M x) const { return std::sqrt(x); }
};
template <class M>
struct Rsqrt {
  EMBER_HOST_DEVICE M operator()(M x) const { return M(1) / std::sqrt(x); }
};
template <class M>
struct Sin {
  EMBER_HOST_DEVICE M operator()(M x) const { return std::sin(x); }
};
template <class M>
struct Cos {
  EMBER_HOST_DEVICE M operator()(M x) const { return std::cos(x); }
};
// The rest of the trigonometric, hyperbolic and logarithmic family: the C library's functions.
#define EMBER_LIBM_FUNCTOR(Name, fn)                                 \
  template <class M>                                                 \
  struct Name {                                                      \
    EMBER_HOST_DEVICE M operator()(M x) const { return std::fn(x); } \
  };
EMBER_LIBM_FUNCTOR(Tan, tan)
EMBER_LIBM_FUNCTOR(Asin, asin)
EMBER_LIBM_FUNCTOR(Acos, acos)
EMBER_LIBM_FUNCTOR(Atan, atan)
EMBER_LIBM_FUNCTOR(Sinh, sinh)
EMBER_LIBM_FUNCTOR(Cosh, cosh)
EMBER_LIBM_FUNCTOR(Asinh, asinh)
EMBER_LIBM_FUNCTOR(Acosh, acosh)
EMBER_LIBM_FUNCTOR(Atanh, atanh)
EMBER_LIBM_FUNCTOR(Log2, log2)
EMBER_LIBM_FUNCTOR(Log10, log10)
EMBER_LIBM_FUNCTOR(Exp2, exp2)
#undef EMBER_LIBM_FUNCTOR
template <class M>
struct Tanh {
  EMBER_HOST_DEVICE M operator()(M x) const { return std::tanh(x); }
};
template <class M>
struct Sigmoid {
  EMBER_HOST_DEVICE M operator()(M x) const { return M(1) / (M(1) + std::exp(-x)); }
};
template <class M>
struct Gelu {  // x Φ(x), Φ the normal CDF
  EMBER_HOST_DEVICE M operator()(M x) const { return M(0.5) * x * (M(1) + std::erf(x * M(0.70710678118654752440))); }
};
template <class M>
struct GeluTanh {  // PyTorch's approximate="tanh"
  EMBER_HOST_DEVICE M operator()(M x) const {
    const M k = M(0.79788456080286535588), c = M(0.044715);
    return M(0.5) * x * (M(1) + std::tanh(k * (x + c * x * x * x)));
  }
};
template <class M>
struct Silu {
  EMBER_HOST_DEVICE M operator()(M x) const { return x / (M(1) + std::exp(-x)); }
};
template <class M>
struct Reciprocal {
  EMBER_HOST_DEVICE M operator()(M x) const { return M(1) / x; }
};
template <class M>
struct Erf {
  EMBER_HOST_DEVICE M operator()(M x) const { return std::erf(x); }
};
// erf⁻¹(y): Giles' polynomial approximation ("Approximating the erfinv function", 2010; a few
// float ulps for float's range) for |y|, then Newton steps in double until they stop moving x
// (two from inside float's range; more past it, where the polynomial extrapolates). From 0.5 on
// a step solves log erfc(x) = log(1 - |y|) instead: 1 - |y| is exact there, where erf(x) - |y|
// would be all rounding, and the logarithm of the steep tail is nearly a parabola.
template <class M>
struct Erfinv {
  EMBER_HOST_DEVICE M operator()(M y) const {
    const double v = std::fabs(static_cast<double>(y));
    if (!(v < 1.0)) {  // NaN, or outside the open interval
      if (v == 1.0) return static_cast<M>(std::copysign(std::numeric_limits<double>::infinity(), double(y)));
      return static_cast<M>(std::numeric_limits<double>::quiet_NaN());
    }
    double w = -std::log((1.0 - v) * (1.0 + v)), p;
    if (w < 5.0) {
      w -= 2.5;
      p = 2.81022636e-08;
      p = 3.43273939e-07 + p * w;
      p = -3.5233877e-06 + p * w;
      p = -4.39150654e-06 + p * w;
      p = 0.00021858087 + p * w;
      p = -0.00125372503 + p * w;
      p = -0.00417768164 + p * w;
      p = 0.246640727 + p * w;
      p = 1.50140941 + p * w;
    } else {
      w = std::sqrt(w) - 3.0;
      p = -0.000200214257;
      p = 0.000100950558 + p * w;
      p = 0.00134934322 + p * w;
      p = -0.00367342844 + p * w;
      p = 0.00573950773 + p * w;
      p = -0.0076224613 + p * w;
      p = 0.00943887047 + p * w;
      p = 1.00167406 + p * w;
      p = 2.83297682 + p * w;
    }
    double x = p * v;
    for (int step = 0; step < 8; ++step) {                         // x -= (erf(x) - v) / erf'(x)
      const double slope = 1.1283791670955126 * std::exp(-x * x);  // erf'(x)
      double dx;
      if (v < 0.5) {
        dx = (std::erf(x) - v) / slope;
      } else {
        const double tail = std::erfc(x);
        dx = (std::log(1.0 - v) - std::log(tail)) * tail / slope;
      }
      x -= dx;
      if (std::fabs(dx) <= 1e-16 * std::fabs(x)) break;
    }
    return static_cast<M>(std::copysign(x, double(y)));
  }
};
template <class M>
struct Softplus {
  M beta, threshold;
  EMBER_HOST_DEVICE M operator()(M x) const { return x * beta > threshold ? x : std::log1p(std::exp(x * beta)) / beta; }
};
template <class M>
struct LeakyRelu {
  M negative_slope;
  EMBER_HOST_DEVICE M operator()(M x) const { return x > M(0) ? x : x * negative_slope; }
};
template <class M>
struct Elu {  // alpha (e^x - 1) for x <= 0
  M alpha;
  EMBER_HOST_DEVICE M operator()(M x) const { return x > M(0) ? x : alpha * std::expm1(x); }
};
template <class M>
struct Identity {  // what a visit falls back to for an op the dtype does not have (checked before)
  EMBER_HOST_DEVICE M operator()(M x) const { return x; }
};

// Whether `op` is defined on math type M (the native ops promote or refuse the rest).
template <class M>
EMBER_HOST_DEVICE constexpr bool unary_supported(UnaryOp op) {
  if constexpr (std::is_same_v<M, bool>) {
    return op == UnaryOp::abs || op == UnaryOp::sign || op == UnaryOp::square || op == UnaryOp::relu;
  } else if constexpr (!is_float_v<M>) {
    return op == UnaryOp::neg || op == UnaryOp::abs || op == UnaryOp::sign || op == UnaryOp::square ||
           op == UnaryOp::relu || op == UnaryOp::clamp;
  } else {
    return true;
  }
}

// f(the functor of `op` on M): the one place from an op's enum value to its math.
template <class M, class F>
EMBER_HOST_DEVICE decltype(auto) visit_unary(UnaryOp op, double p0, double p1, F&& f) {
  if constexpr (!std::is_same_v<M, bool>) {
    switch (op) {
      case UnaryOp::neg:
        return f(Neg<M>{});
      case UnaryOp::clamp: {  // p0, p1: the bounds, NaN where missing
        using limits = std::numeric_limits<M>;
        const M lowest = limits::has_infinity ? -limits::infinity() : limits::lowest();
        const M highest = limits::has_infinity ? limits::infinity() : limits::max();
        return f(Clamp<M>{p0 == p0 ? M(p0) : lowest, p1 == p1 ? M(p1) : highest});
      }
      default:
        break;
    }
  }
  switch (op) {
    case UnaryOp::abs:
      return f(Abs<M>{});
    case UnaryOp::sign:
      return f(Sign<M>{});
    case UnaryOp::square:
      return f(Square<M>{});
    case UnaryOp::relu:
      return f(Relu<M>{});
    default:
      break;
  }
  if constexpr (is_float_v<M>) {
    switch (op) {
      case UnaryOp::exp:
        return f(Exp<M>{});
      case UnaryOp::log:
        return f(Log<M>{});
      case UnaryOp::log1p:
        return f(Log1p<M>{});
      case UnaryOp::expm1:
        return f(Expm1<M>{});
      case UnaryOp::floor:  // integers are their own floor, ceil, round, trunc: Identity below
        return f(Floor<M>{});
      case UnaryOp::ceil:
        return f(Ceil<M>{});
      case UnaryOp::round:
        return f(Round<M>{});
      case UnaryOp::trunc:
        return f(Trunc<M>{});
      case UnaryOp::sqrt:
        return f(Sqrt<M>{});
      case UnaryOp::rsqrt:
        return f(Rsqrt<M>{});
      case UnaryOp::sin:
        return f(Sin<M>{});
      case UnaryOp::cos:
        return f(Cos<M>{});
      case UnaryOp::tan:
        return f(Tan<M>{});
      case UnaryOp::asin:
        return f(Asin<M>{});
      case UnaryOp::acos:
        return f(Acos<M>{});
      case UnaryOp::atan:
        return f(Atan<M>{});
      case UnaryOp::sinh:
        return f(Sinh<M>{});
      case UnaryOp::cosh:
        return f(Cosh<M>{});
      case UnaryOp::asinh:
        return f(Asinh<M>{});
      case UnaryOp::acosh:
        return f(Acosh<M>{});
      case UnaryOp::atanh:
        return f(Atanh<M>{});
      case UnaryOp::log2:
        return f(Log2<M>{});
      case UnaryOp::log10:
        return f(Log10<M>{});
      case UnaryOp::exp2:
        return f(Exp2<M>{});
      case UnaryOp::tanh:
        return f(Tanh<M>{});
      case UnaryOp::sigmoid:
        return f(Sigmoid<M>{});
      case UnaryOp::gelu:
        return f(Gelu<M>{});
      case UnaryOp::gelu_tanh:
        return f(GeluTanh<M>{});
      case UnaryOp::silu:
        return f(Silu<M>{});
      case UnaryOp::reciprocal:
        return f(Reciprocal<M>{});
      case UnaryOp::erf:
        return f(Erf<M>{});
      case UnaryOp::erfinv:
        return f(Erfinv<M>{});
      case UnaryOp::softplus:
        return f(Softplus<M>{M(p0), M(p1)});
      case UnaryOp::leaky_relu:
        return f(LeakyRelu<M>{M(p0)});
      case UnaryOp::elu:
        return f(Elu<M>{M(p0)});
      default:
        break;
    }
  }
  return f(Identity<M>{});
}

// ---- binary: arithmetic (out has the inputs' type) ----
template <class M>
EMBER_HOST_DEVICE M ipow(M base, int64_t e) {  // integer power, wrapping
  if (e < 0) return base == M(1) ? M(1) : base == M(-1) ? (e % 2 ? M(-1) : M(1)) : M(0);
  using U = unsigned_of<M>;
  U ub = static_cast<U>(base), ur = 1;
  while (e) {
    if (e & 1) ur = static_cast<U>(ur * ub);
    ub = static_cast<U>(ub * ub);
    e >>= 1;
  }
  return static_cast<M>(ur);
}

template <class M>
struct Add {  // x + alpha y
  M alpha;
  EMBER_HOST_DEVICE M operator()(M x, M y) const {
    if constexpr (wraps_v<M>) {
      using U = unsigned_of<M>;
      return M(U(U(x) + U(U(alpha) * U(y))));
    } else {
      return M(x + alpha * y);
    }
  }
};
template <class M>
struct Sub {  // x - alpha y
  M alpha;
  EMBER_HOST_DEVICE M operator()(M x, M y) const {
    if constexpr (wraps_v<M>) {
      using U = unsigned_of<M>;
      return M(U(U(x) - U(U(alpha) * U(y))));
    } else {
      return M(x - alpha * y);
    }
  }
};
template <class M>
struct Mul {
  EMBER_HOST_DEVICE M operator()(M x, M y) const {
    if constexpr (std::is_same_v<M, bool>)
      return x && y;
    else if constexpr (wraps_v<M>)
      return M(unsigned_of<M>(unsigned_of<M>(x) * unsigned_of<M>(y)));
    else
      return x * y;
  }
};
template <class M>
struct Div {  // floating only: integer true division is promoted to float by the op
  EMBER_HOST_DEVICE M operator()(M x, M y) const { return x / y; }
};
template <class M>
struct Pow {
  EMBER_HOST_DEVICE M operator()(M x, M y) const {
    if constexpr (is_float_v<M>)
      return std::pow(x, y);
    else
      return ipow<M>(x, static_cast<int64_t>(y));
  }
};
template <class M>
struct Maximum {  // NaN propagates
  EMBER_HOST_DEVICE M operator()(M x, M y) const { return (x > y || x != x) ? x : y; }
};
template <class M>
struct Minimum {
  EMBER_HOST_DEVICE M operator()(M x, M y) const { return (x < y || x != x) ? x : y; }
};
template <class M>
struct Atan2 {  // the angle of the point (y = x, x = y): atan2(self, other)
  EMBER_HOST_DEVICE M operator()(M x, M y) const { return std::atan2(x, y); }
};
// Integer division by 0 is refused on the CPU before the kernel runs (PyTorch's
// ZeroDivisionError); the kernels still return 0 for it rather than trap (CUDA does not check, as
// PyTorch's CUDA kernels do not), and 0 for x % -1, which traps on x86 when x is INT_MIN.
template <class M>
struct Fmod {
  EMBER_HOST_DEVICE M operator()(M x, M y) const {
    if constexpr (is_float_v<M>) {
      return std::fmod(x, y);
    } else if constexpr (std::is_signed_v<M>) {
      return y == M(0) || y == M(-1) ? M(0) : M(x % y);
    } else {
      return y == M(0) ? M(0) : M(x % y);
    }
  }
};
template <class M>
struct Remainder {  // fmod, moved by y when its sign differs from y's (PyTorch's formula)
  EMBER_HOST_DEVICE M operator()(M x, M y) const {
    M r = Fmod<M>{}(x, y);
    if constexpr (std::is_signed_v<M> || is_float_v<M>) {
      if (r != M(0) && ((y < M(0)) != (r < M(0)))) r = M(r + y);
    }
    return r;
  }
};
template <class M>
struct TanhBackward {  // d (1 - y^2)
  EMBER_HOST_DEVICE M operator()(M d, M y) const { return d * (M(1) - y * y); }
};
template <class M>
struct SigmoidBackward {  // d y (1 - y)
  EMBER_HOST_DEVICE M operator()(M d, M y) const { return d * y * (M(1) - y); }
};
template <class M>
struct GeluBackward {  // d (Φ(x) + x φ(x)), Φ and φ the normal CDF and density
  EMBER_HOST_DEVICE M operator()(M d, M x) const {
    const M cdf = M(0.5) * (M(1) + std::erf(x * M(0.70710678118654752440)));
    const M pdf = std::exp(M(-0.5) * x * x) * M(0.39894228040143267794);
    return d * (cdf + x * pdf);
  }
};
template <class M>
struct GeluTanhBackward {  // d/dx of x/2 (1 + tanh(k (x + c x^3))), times d
  EMBER_HOST_DEVICE M operator()(M d, M x) const {
    const M k = M(0.79788456080286535588), c = M(0.044715);
    const M t = std::tanh(k * (x + c * x * x * x));
    return d * (M(0.5) * (M(1) + t) + M(0.5) * x * (M(1) - t * t) * k * (M(1) + M(3) * c * x * x));
  }
};
template <class M>
struct LeakyReluBackward {  // x > 0 ? d : d slope (at 0 too, as PyTorch)
  M negative_slope;
  EMBER_HOST_DEVICE M operator()(M d, M x) const { return x > M(0) ? d : d * negative_slope; }
};
template <class M>
struct EluBackward {  // x > 0 ? d : d alpha e^x (at 0 too, as PyTorch)
  M alpha;
  EMBER_HOST_DEVICE M operator()(M d, M x) const { return x > M(0) ? d : d * (alpha * std::exp(x)); }
};
template <class M>
struct ReluBackward {  // y > 0 ? d : 0
  EMBER_HOST_DEVICE M operator()(M d, M y) const { return y > M(0) ? d : M(0); }
};
template <class M>
struct Second {  // the fallback of visit_binary, never reached (checked before)
  EMBER_HOST_DEVICE M operator()(M, M y) const { return y; }
};

template <class M>
EMBER_HOST_DEVICE constexpr bool binary_supported(BinaryOp op) {
  if (is_comparison(op)) return true;
  if constexpr (std::is_same_v<M, bool>) {
    return op == BinaryOp::Add || op == BinaryOp::Mul || op == BinaryOp::Maximum || op == BinaryOp::Minimum ||
           op == BinaryOp::ReluBackward;
  } else if constexpr (!is_float_v<M>) {
    return op != BinaryOp::Div && op != BinaryOp::Atan2 && op != BinaryOp::TanhBackward &&
           op != BinaryOp::SigmoidBackward && op != BinaryOp::GeluBackward && op != BinaryOp::GeluTanhBackward &&
           op != BinaryOp::LeakyReluBackward && op != BinaryOp::EluBackward;
  } else {
    return true;
  }
}

template <class M, class F>
EMBER_HOST_DEVICE decltype(auto) visit_binary(BinaryOp op, M alpha, F&& f) {
  switch (op) {
    case BinaryOp::Add:
      return f(Add<M>{alpha});
    case BinaryOp::Mul:
      return f(Mul<M>{});
    case BinaryOp::Maximum:
      return f(Maximum<M>{});
    case BinaryOp::Minimum:
      return f(Minimum<M>{});
    case BinaryOp::ReluBackward:
      return f(ReluBackward<M>{});
    default:
      break;
  }
  if constexpr (!std::is_same_v<M, bool>) {
    switch (op) {
      case BinaryOp::Sub:
        return f(Sub<M>{alpha});
      case BinaryOp::Pow:
        return f(Pow<M>{});
      case BinaryOp::Remainder:
        return f(Remainder<M>{});
      case BinaryOp::Fmod:
        return f(Fmod<M>{});
      default:
        break;
    }
  }
  if constexpr (is_float_v<M>) {
    switch (op) {
      case BinaryOp::Div:
        return f(Div<M>{});
      case BinaryOp::Atan2:
        return f(Atan2<M>{});
      case BinaryOp::TanhBackward:
        return f(TanhBackward<M>{});
      case BinaryOp::SigmoidBackward:
        return f(SigmoidBackward<M>{});
      case BinaryOp::GeluBackward:
        return f(GeluBackward<M>{});
      case BinaryOp::GeluTanhBackward:
        return f(GeluTanhBackward<M>{});
      case BinaryOp::LeakyReluBackward:
        return f(LeakyReluBackward<M>{alpha});
      case BinaryOp::EluBackward:
        return f(EluBackward<M>{alpha});
      default:
        break;
    }
  }
  return f(Second<M>{});
}

// ---- binary: comparisons and logical ops (out is bool) ----
template <class M>
struct Eq {
  EMBER_HOST_DEVICE bool operator()(M x, M y) const { return x == y; }
};
template <class M>
struct Ne {
  EMBER_HOST_DEVICE bool operator()(M x, M y) const { return x != y; }
};
template <class M>
struct Lt {
  EMBER_HOST_DEVICE bool operator()(M x, M y) const { return x < y; }
};
template <class M>
struct Le {
  EMBER_HOST_DEVICE bool operator()(M x, M y) const { return x <= y; }
};
template <class M>
struct Gt {
  EMBER_HOST_DEVICE bool operator()(M x, M y) const { return x > y; }
};
template <class M>
struct Ge {
  EMBER_HOST_DEVICE bool operator()(M x, M y) const { return x >= y; }
};
template <class M>
struct LogicalAnd {
  EMBER_HOST_DEVICE bool operator()(M x, M y) const { return x != M(0) && y != M(0); }
};
template <class M>
struct LogicalOr {
  EMBER_HOST_DEVICE bool operator()(M x, M y) const { return x != M(0) || y != M(0); }
};

template <class M, class F>
EMBER_HOST_DEVICE decltype(auto) visit_comparison(BinaryOp op, F&& f) {
  switch (op) {
    case BinaryOp::Eq:
      return f(Eq<M>{});
    case BinaryOp::Ne:
      return f(Ne<M>{});
    case BinaryOp::Lt:
      return f(Lt<M>{});
    case BinaryOp::Le:
      return f(Le<M>{});
    case BinaryOp::Gt:
      return f(Gt<M>{});
    case BinaryOp::Ge:
      return f(Ge<M>{});
    case BinaryOp::LogicalAnd:
      return f(LogicalAnd<M>{});
    default:
      return f(LogicalOr<M>{});
  }
}

}  // namespace math
}  // namespace ember
