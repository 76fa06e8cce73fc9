// Elementwise kernels: binary ops, unary ops, where. Each op is a small functor applied
// by one strided loop; the contiguous and scalar-broadcast runs are plain loops that the
// compiler vectorizes (AVX2) for float and double.
#include <cmath>
#include <type_traits>

#include "ember/tensor/cpu/kernels.h"
#include "ember/tensor/cpu/loops.h"

namespace ember::cpu {
namespace {

// Signed overflow is undefined in C++ but wraps in PyTorch: do integer math unsigned.
template <class T>
struct wrap {
  using type = opmath_t<T>;
};
template <>
struct wrap<int32_t> {
  using type = uint32_t;
};
template <>
struct wrap<int64_t> {
  using type = uint64_t;
};
template <class T>
using wrap_t = typename wrap<T>::type;

// out[i] = f(a[i], b[i]) over a 3-operand loop (out, a, b).
template <class Out, class T, class F>
void binary_loop(const Tensor& a, const Tensor& b, const Tensor& out, const F& f) {
  StridedLoop<3> loop({&out, &a, &b});
  loop.run([&f](const std::array<char*, 3>& p, const std::array<int64_t, 3>& st, int64_t n) {
    Out* o = reinterpret_cast<Out*>(p[0]);
    const T* x = reinterpret_cast<const T*>(p[1]);
    const T* y = reinterpret_cast<const T*>(p[2]);
    constexpr int64_t so = sizeof(Out), s = sizeof(T);
    if (st[0] == so && st[1] == s && st[2] == s) {
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
    } else if (st[0] == so && st[1] == s && st[2] == 0) {
      const T yv = *y;
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], yv);
    } else if (st[0] == so && st[1] == 0 && st[2] == s) {
      const T xv = *x;
      for (int64_t i = 0; i < n; ++i) o[i] = f(xv, y[i]);
    } else {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<Out*>(p[0] + i * st[0]) =
            f(*reinterpret_cast<const T*>(p[1] + i * st[1]), *reinterpret_cast<const T*>(p[2] + i * st[2]));
    }
  });
}

// out[i] = f(a[i]) over a 2-operand loop.
template <class T, class F>
void unary_loop(const Tensor& a, const Tensor& out, const F& f) {
  StridedLoop<2> loop({&out, &a});
  loop.run([&f](const std::array<char*, 2>& p, const std::array<int64_t, 2>& st, int64_t n) {
    if (st[0] == sizeof(T) && st[1] == sizeof(T)) {
      T* o = reinterpret_cast<T*>(p[0]);
      const T* x = reinterpret_cast<const T*>(p[1]);
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i]);
    } else {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<T*>(p[0] + i * st[0]) = f(*reinterpret_cast<const T*>(p[1] + i * st[1]));
    }
  });
}

template <class M>
inline M ipow(M base, int64_t e) {
  if (e < 0) return base == M(1) ? M(1) : base == M(-1) ? (e % 2 ? M(-1) : M(1)) : M(0);
  M r = 1;
  using U = std::make_unsigned_t<M>;
  U ub = static_cast<U>(base), ur = 1;
  while (e) {
    if (e & 1) ur = static_cast<U>(ur * ub);
    ub = static_cast<U>(ub * ub);
    e >>= 1;
  }
  r = static_cast<M>(ur);
  return r;
}

template <class T>
void binary_typed(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out, const Scalar& alpha_s) {
  using M = opmath_t<T>;
  using W = wrap_t<T>;
  constexpr bool is_float = !std::is_integral_v<T>;
  const M alpha = alpha_s.to<M>();
  auto cmp = [&](auto pred) { binary_loop<bool, T>(a, b, out, [pred](T x, T y) { return pred(M(x), M(y)); }); };
  switch (op) {
    case BinaryOp::Add:
      if (alpha == M(1)) return binary_loop<T, T>(a, b, out, [](T x, T y) { return T(W(M(x)) + W(M(y))); });
      return binary_loop<T, T>(a, b, out, [alpha](T x, T y) { return T(W(M(x)) + W(alpha) * W(M(y))); });
    case BinaryOp::Sub:
      if (alpha == M(1)) return binary_loop<T, T>(a, b, out, [](T x, T y) { return T(W(M(x)) - W(M(y))); });
      return binary_loop<T, T>(a, b, out, [alpha](T x, T y) { return T(W(M(x)) - W(alpha) * W(M(y))); });
    case BinaryOp::Mul:
      if constexpr (std::is_same_v<T, bool>)
        return binary_loop<T, T>(a, b, out, [](T x, T y) { return x && y; });
      else
        return binary_loop<T, T>(a, b, out, [](T x, T y) { return T(W(M(x)) * W(M(y))); });
    case BinaryOp::Div:
      if constexpr (is_float) return binary_loop<T, T>(a, b, out, [](T x, T y) { return T(M(x) / M(y)); });
      break;  // integer true division is promoted to float by the op
    case BinaryOp::Pow:
      if constexpr (is_float)
        return binary_loop<T, T>(a, b, out, [](T x, T y) { return T(std::pow(M(x), M(y))); });
      else if constexpr (!std::is_same_v<T, bool>)
        return binary_loop<T, T>(a, b, out, [](T x, T y) { return ipow<T>(x, static_cast<int64_t>(y)); });
      break;
    case BinaryOp::Maximum:  // NaN propagates
      return binary_loop<T, T>(a, b, out, [](T x, T y) { return (M(x) > M(y) || M(x) != M(x)) ? x : y; });
    case BinaryOp::Minimum:
      return binary_loop<T, T>(a, b, out, [](T x, T y) { return (M(x) < M(y) || M(x) != M(x)) ? x : y; });
    case BinaryOp::TanhBackward:
      if constexpr (is_float)
        return binary_loop<T, T>(a, b, out, [](T d, T y) { return T(M(d) * (M(1) - M(y) * M(y))); });
      break;
    case BinaryOp::SigmoidBackward:
      if constexpr (is_float)
        return binary_loop<T, T>(a, b, out, [](T d, T y) { return T(M(d) * M(y) * (M(1) - M(y))); });
      break;
    case BinaryOp::ReluBackward:
      return binary_loop<T, T>(a, b, out, [](T d, T y) { return M(y) > M(0) ? d : T(0); });
    case BinaryOp::Eq:
      return cmp([](M x, M y) { return x == y; });
    case BinaryOp::Ne:
      return cmp([](M x, M y) { return x != y; });
    case BinaryOp::Lt:
      return cmp([](M x, M y) { return x < y; });
    case BinaryOp::Le:
      return cmp([](M x, M y) { return x <= y; });
    case BinaryOp::Gt:
      return cmp([](M x, M y) { return x > y; });
    case BinaryOp::Ge:
      return cmp([](M x, M y) { return x >= y; });
    case BinaryOp::LogicalAnd:
      return cmp([](M x, M y) { return x != M(0) && y != M(0); });
    case BinaryOp::LogicalOr:
      return cmp([](M x, M y) { return x != M(0) || y != M(0); });
  }
  throw InternalError(detail::concat("binary: op ", static_cast<int>(op), " not defined for ", dtype_of<T>::value));
}

template <class M>
inline M gelu_erf(M x) {
  return M(0.5) * x * (M(1) + std::erf(x * M(0.70710678118654752440)));
}
template <class M>
inline M gelu_tanh(M x) {
  const M k = M(0.79788456080286535588), c = M(0.044715);
  return M(0.5) * x * (M(1) + std::tanh(k * (x + c * x * x * x)));
}

template <class T>
void unary_typed(UnaryOp op, const Tensor& a, const Tensor& out, double p0, double p1) {
  using M = opmath_t<T>;
  constexpr bool is_float = !std::is_integral_v<T>;
#define EMBER_UNARY(EXPR)                \
  return unary_loop<T>(a, out, [](T v) { \
    const M x = M(v);                    \
    return T(EXPR);                      \
  })
  switch (op) {
    case UnaryOp::neg:
      if constexpr (!std::is_same_v<T, bool>) EMBER_UNARY(M(0) - x);
      break;
    case UnaryOp::abs:
      EMBER_UNARY(x < M(0) ? M(0) - x : x);
    case UnaryOp::sign:
      EMBER_UNARY(x != x ? x : M((M(0) < x) - (x < M(0))));
    case UnaryOp::square:
      EMBER_UNARY(x * x);
    case UnaryOp::relu:
      EMBER_UNARY(x > M(0) || x != x ? x : M(0));
    case UnaryOp::clamp: {
      const bool has_lo = p0 == p0, has_hi = p1 == p1;
      const M lo = has_lo ? M(p0) : M(0), hi = has_hi ? M(p1) : M(0);
      return unary_loop<T>(a, out, [=](T v) {
        M x = M(v);
        if (x != x) return v;  // NaN propagates
        if (has_lo && x < lo) x = lo;
        if (has_hi && x > hi) x = hi;
        return T(x);
      });
    }
    default:
      break;
  }
  if constexpr (is_float) {
    switch (op) {
      case UnaryOp::exp:
        EMBER_UNARY(std::exp(x));
      case UnaryOp::log:
        EMBER_UNARY(std::log(x));
      case UnaryOp::log1p:
        EMBER_UNARY(std::log1p(x));
      case UnaryOp::sqrt:
        EMBER_UNARY(std::sqrt(x));
      case UnaryOp::rsqrt:
        EMBER_UNARY(M(1) / std::sqrt(x));
      case UnaryOp::sin:
        EMBER_UNARY(std::sin(x));
      case UnaryOp::cos:
        EMBER_UNARY(std::cos(x));
      case UnaryOp::tanh:
        EMBER_UNARY(std::tanh(x));
      case UnaryOp::sigmoid:
        EMBER_UNARY(M(1) / (M(1) + std::exp(-x)));
      case UnaryOp::gelu:
        EMBER_UNARY(gelu_erf(x));
      case UnaryOp::gelu_tanh:
        EMBER_UNARY(gelu_tanh(x));
      case UnaryOp::silu:
        EMBER_UNARY(x / (M(1) + std::exp(-x)));
      case UnaryOp::reciprocal:
        EMBER_UNARY(M(1) / x);
      case UnaryOp::erf:
        EMBER_UNARY(std::erf(x));
      default:
        break;
    }
  }
#undef EMBER_UNARY
  throw InternalError(detail::concat("unary: op ", static_cast<int>(op), " not defined for ", dtype_of<T>::value));
}

}  // namespace

// out = a op b   (a, b broadcast to out's shape)
void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out, const Scalar& alpha) {
  EMBER_DISPATCH_ALL(a.dtype(), "binary", [&] { binary_typed<scalar_t>(op, a, b, out, alpha); });
}

// out = op(a)
void unary(UnaryOp op, const Tensor& a, const Tensor& out, double p0, double p1) {
  EMBER_DISPATCH_ALL(a.dtype(), "unary", [&] { unary_typed<scalar_t>(op, a, out, p0, p1); });
}

// out = cond ? a : b
void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  StridedLoop<4> loop({&out, &cond, &a, &b});
  EMBER_DISPATCH_ALL(out.dtype(), "where", [&] {
    loop.run([](const std::array<char*, 4>& p, const std::array<int64_t, 4>& st, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        const bool c = *reinterpret_cast<const bool*>(p[1] + i * st[1]);
        *reinterpret_cast<scalar_t*>(p[0] + i * st[0]) =
            *reinterpret_cast<const scalar_t*>(p[c ? 2 : 3] + i * st[c ? 2 : 3]);
      }
    });
  });
}

}  // namespace ember::cpu
