// Elementwise kernels: binary ops, unary ops, where. Each op's math is its functor in
// tensor/elementwise_math.h (Note [Elementwise math]), applied by one strided loop per op; the
// contiguous and scalar-broadcast runs are plain loops that the compiler vectorizes (AVX2) for
// float and double.
#include <cmath>
#include <type_traits>

#include "ember/tensor/cpu/cpu_backend.h"
#include "ember/tensor/cpu/loops.h"
#include "ember/tensor/elementwise_math.h"

namespace ember::cpu {
namespace {

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

template <class T>
void binary_typed(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out, const Scalar& alpha) {
  using M = opmath_t<T>;
  if (!math::binary_supported<M>(op))
    throw InternalError(detail::concat("binary: op ", static_cast<int>(op), " not defined for ", dtype_of<T>::value));
  if (is_comparison(op))
    return math::visit_comparison<M>(
        op, [&](auto fn) { binary_loop<bool, T>(a, b, out, [fn](T x, T y) { return fn(M(x), M(y)); }); });
  math::visit_binary<M>(op, alpha.to<M>(),
                        [&](auto fn) { binary_loop<T, T>(a, b, out, [fn](T x, T y) { return T(fn(M(x), M(y))); }); });
}

template <class T>
void unary_typed(UnaryOp op, const Tensor& a, const Tensor& out, double p0, double p1) {
  using M = opmath_t<T>;
  if (!math::unary_supported<M>(op))
    throw InternalError(detail::concat("unary: op ", static_cast<int>(op), " not defined for ", dtype_of<T>::value));
  math::visit_unary<M>(op, p0, p1, [&](auto fn) { unary_loop<T>(a, out, [fn](T v) { return T(fn(M(v))); }); });
}

}  // namespace

// out = a op b   (a, b broadcast to out's shape)
void CpuBackend::binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out, const Scalar& alpha) {
  EMBER_DISPATCH_ALL(a.dtype(), "binary", [&] { binary_typed<scalar_t>(op, a, b, out, alpha); });
}

// out = op(a)
void CpuBackend::unary(UnaryOp op, const Tensor& a, const Tensor& out, double p0, double p1) {
  EMBER_DISPATCH_ALL(a.dtype(), "unary", [&] { unary_typed<scalar_t>(op, a, out, p0, p1); });
}

// out = cond ? a : b
void CpuBackend::where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
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
