// Elementwise kernels: binary ops, unary ops, where. Each op's math is its functor in
// tensor/elementwise_math.h (Note [Elementwise math]), applied by one strided loop per op; the
// contiguous and scalar-broadcast runs are plain loops that the compiler vectorizes (AVX2) for
// float and double, float16/bfloat16 runs go through float32 chunks (binary_loop_floats), and
// the float32 ops that call libm have vector forms (Note [Vector forms]).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "ember/tensor/cpu/cpu_backend.h"
#include "ember/tensor/cpu/loops.h"
#include "ember/tensor/cpu/vec_half.h"
#include "ember/tensor/cpu/vec_math.h"
#include "ember/tensor/elementwise_math.h"

namespace ember::cpu {
namespace {

// Note [Functor copies]: each loop copies its functor before it runs. An op's parameters
// (leaky_relu's slope, clamp's bounds) are members of the functor, and a loop that reads them
// through a reference must assume that its stores into the output may change them: it reloads
// them every element and does not vectorize. A local copy cannot be aliased. On [64, 64, 14, 14]
// float32, leaky_relu went from 2.1 ms to 0.05 ms, relu's time (its functor has no members);
// clamp also lost its branches (elementwise_math.h): 1.7 ms to 0.06 ms.

// out[i] = f(a[i], b[i]) over a 3-operand loop (out, a, b).
template <class Out, class T, class F>
void binary_loop(const Tensor& a, const Tensor& b, const Tensor& out, const F& fn) {
  StridedLoop<3> loop({&out, &a, &b});
  loop.run([&fn](const std::array<char*, 3>& p, const std::array<int64_t, 3>& st, int64_t n) {
    const F f = fn;  // Note [Functor copies]
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
void unary_loop(const Tensor& a, const Tensor& out, const F& fn) {
  StridedLoop<2> loop({&out, &a});
  loop.run([&fn](const std::array<char*, 2>& p, const std::array<int64_t, 2>& st, int64_t n) {
    const F f = fn;  // Note [Functor copies]
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

// Note [Vector forms]: a float32 op whose functor calls libm (exp, tanh, ...) runs one value at
// a time, 20-170x slower than relu on 800K floats, because the compiler cannot vectorize the
// call. Those ops have a vector form here (tensor/cpu/vec_math.h), used for every float32 and
// 16-bit element of the op, strided ones and a run's last partial group of 8 included, so that a
// value's result does not depend on where it sits in a tensor (or on the thread count). The
// functors stay the definition for double and for CUDA.
#ifdef EMBER_HAVE_VEC_MATH
inline __m256 vec_form(const math::Exp<float>&, __m256 x) { return exp8(x); }
inline __m256 vec_form(const math::Tanh<float>&, __m256 x) { return tanh8(x); }
inline __m256 vec_form(const math::Log<float>&, __m256 x) { return log8(x); }
inline __m256 vec_form(const math::Log1p<float>&, __m256 x) { return log1p8(x); }
inline __m256 vec_form(const math::Expm1<float>&, __m256 x) { return expm1_any8(x); }
inline __m256 vec_form(const math::Softplus<float>& f, __m256 x) { return softplus8(x, f.beta, f.threshold); }
inline __m256 vec_form(const math::Sigmoid<float>&, __m256 x) { return sigmoid8(x); }
inline __m256 vec_form(const math::Silu<float>&, __m256 x) { return silu8(x); }
inline __m256 vec_form(const math::Elu<float>& f, __m256 x) { return elu8(x, f.alpha); }
inline __m256 vec_form(const math::GeluTanh<float>&, __m256 x) { return gelu_tanh8(x); }
inline __m256 vec_form(const math::Gelu<float>&, __m256 x) { return gelu8(x); }
inline __m256 vec_form(const math::EluBackward<float>& f, __m256 d, __m256 x) { return elu_backward8(d, x, f.alpha); }
inline __m256 vec_form(const math::GeluBackward<float>&, __m256 d, __m256 x) { return gelu_backward8(d, x); }
inline __m256 vec_form(const math::GeluTanhBackward<float>&, __m256 d, __m256 x) { return gelu_tanh_backward8(d, x); }
// kHasVecForm<F, N>: whether op F has a vector form of N operands. (GCC warns that __m256's
// alignment attribute is dropped in the template argument; only the overload's existence is
// asked.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"
template <class F, int N, class = void>
constexpr bool kHasVecForm = false;
template <class F>
constexpr bool kHasVecForm<F, 1, std::void_t<decltype(vec_form(std::declval<const F&>(), __m256()))>> = true;
template <class F>
constexpr bool kHasVecForm<F, 2, std::void_t<decltype(vec_form(std::declval<const F&>(), __m256(), __m256()))>> = true;
#pragma GCC diagnostic pop

// The first m of 8 lanes (0 <= m <= 8), for a masked load or store.
inline __m256i first_lanes(int64_t m) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(m)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
#else
template <class F, int N>
constexpr bool kHasVecForm = false;
#endif

// y[i] = f(x[i]...) for n floats and one or two operands x (y may be the first): 8 at a time
// by the vector form where the op has one, the last partial group through masked loads and
// stores (its missing lanes read as 0, and are not written); else the functor.
template <class F, class... In>
void map_floats(const F& op, float* y, int64_t n, const In*... x) {
  static_assert((std::is_same_v<In, float> && ...), "map_floats maps floats");
  const F f = op;  // Note [Functor copies]
#ifdef EMBER_HAVE_VEC_MATH
  if constexpr (kHasVecForm<F, sizeof...(In)>) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, vec_form(f, _mm256_loadu_ps(x + i)...));
    if (i < n) {
      const __m256i lanes = first_lanes(n - i);
      _mm256_maskstore_ps(y + i, lanes, vec_form(f, _mm256_maskload_ps(x + i, lanes)...));
    }
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]...);
}

// float16 / bfloat16 (and float32 ops with a vector form) run in float32 chunks: each operand's
// chunk widened 8 at a time (F16C, or bfloat16's shift) where it is contiguous, the op applied
// to floats (map_floats: a loop that vectorizes, or the vector form), the results rounded 8 at a
// time. The same bits as converting one element at a time, which the compiler cannot vectorize
// for float16 (it ran 3x slower than bfloat16).
template <class T>
constexpr bool kHalf16 = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
constexpr int64_t kChunk = 256;  // floats per operand buffer, on the stack

// Elements [i0, i0 + m) of a strided run at p as floats: widened from a contiguous run, one
// value repeated (stride 0), or gathered.
template <class T>
void gather_chunk(const char* p, int64_t stride, int64_t i0, int64_t m, float* out) {
  if (stride == sizeof(T))
    widen_run(reinterpret_cast<const T*>(p) + i0, m, out);
  else if (stride == 0)
    std::fill(out, out + m, static_cast<float>(*reinterpret_cast<const T*>(p)));
  else
    for (int64_t i = 0; i < m; ++i) out[i] = static_cast<float>(*reinterpret_cast<const T*>(p + (i0 + i) * stride));
}

// ... and back: floats rounded to T into elements [i0, i0 + m) of a strided run.
template <class T>
void scatter_chunk(const float* in, int64_t m, char* p, int64_t stride, int64_t i0) {
  if (stride == sizeof(T))
    narrow_run(in, m, reinterpret_cast<T*>(p) + i0);
  else
    for (int64_t i = 0; i < m; ++i) *reinterpret_cast<T*>(p + (i0 + i) * stride) = T(in[i]);
}

// out[i] = T(fn(float(a[i]), float(b[i]))) for T float32, float16 or bfloat16; a contiguous
// float32 run is mapped where it lies.
template <class T, class Fn>
void binary_loop_floats(const Tensor& a, const Tensor& b, const Tensor& out, const Fn& fn) {
  StridedLoop<3> loop({&out, &a, &b});
  loop.run([&fn](const std::array<char*, 3>& p, const std::array<int64_t, 3>& st, int64_t n) {
    constexpr int64_t s = sizeof(T);
    if constexpr (std::is_same_v<T, float>)
      if (st[0] == s && st[1] == s && st[2] == s)
        return map_floats(fn, reinterpret_cast<float*>(p[0]), n, reinterpret_cast<const float*>(p[1]),
                          reinterpret_cast<const float*>(p[2]));
    float xs[kChunk], ys[kChunk];
    for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
      const int64_t m = std::min(kChunk, n - i0);
      gather_chunk<T>(p[1], st[1], i0, m, xs);
      gather_chunk<T>(p[2], st[2], i0, m, ys);
      map_floats(fn, xs, m, xs, ys);
      scatter_chunk<T>(xs, m, p[0], st[0], i0);
    }
  });
}

// out[i] = T(fn(float(a[i]))) for T float32, float16 or bfloat16, through float32 chunks, so
// that every element meets map_floats; a contiguous float32 run is mapped where it lies.
template <class T, class Fn>
void unary_loop_floats(const Tensor& a, const Tensor& out, const Fn& fn) {
  StridedLoop<2> loop({&out, &a});
  loop.run([&fn](const std::array<char*, 2>& p, const std::array<int64_t, 2>& st, int64_t n) {
    if constexpr (std::is_same_v<T, float>)
      if (st[0] == sizeof(T) && st[1] == sizeof(T))
        return map_floats(fn, reinterpret_cast<float*>(p[0]), n, reinterpret_cast<const float*>(p[1]));
    float xs[kChunk];
    for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
      const int64_t m = std::min(kChunk, n - i0);
      gather_chunk<T>(p[1], st[1], i0, m, xs);
      map_floats(fn, xs, m, xs);
      scatter_chunk<T>(xs, m, p[0], st[0], i0);
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
  math::visit_binary<M>(op, alpha.to<M>(), [&](auto fn) {
    if constexpr (kHalf16<T> || (std::is_same_v<T, float> && kHasVecForm<decltype(fn), 2>))
      binary_loop_floats<T>(a, b, out, fn);
    else
      binary_loop<T, T>(a, b, out, [fn](T x, T y) { return T(fn(M(x), M(y))); });
  });
}

template <class T>
void unary_typed(UnaryOp op, const Tensor& a, const Tensor& out, double p0, double p1) {
  using M = opmath_t<T>;
  if (!math::unary_supported<M>(op))
    throw InternalError(detail::concat("unary: op ", static_cast<int>(op), " not defined for ", dtype_of<T>::value));
  math::visit_unary<M>(op, p0, p1, [&](auto fn) {
    if constexpr (kHalf16<T> || (std::is_same_v<T, float> && kHasVecForm<decltype(fn), 1>))
      unary_loop_floats<T>(a, out, fn);
    else
      unary_loop<T>(a, out, [fn](T v) { return T(fn(M(v))); });
  });
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

namespace {
// out[i] = c[i] ? a[i] : b[i] on a run where out and c are contiguous and a and b each contiguous
// (SA, SB = 1) or one value repeated (0), as bits: (a & m) | (b & ~m), m all ones where c. The
// compiler vectorizes it where c is read as bytes (GCC 12 does not vectorize a bool's widening),
// 3-5x faster than the pointer select it replaced (BENCHMARKS.md).
template <class T, int SA, int SB>
void select_run(T* o, const bool* cond, const T* a, const T* b, int64_t n) {
  using U = std::conditional_t<
      sizeof(T) == 1, uint8_t,
      std::conditional_t<sizeof(T) == 2, uint16_t, std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>>;
  static_assert(sizeof(U) == sizeof(T));
  const auto* c = reinterpret_cast<const uint8_t*>(cond);  // 0 or 1
  for (int64_t i = 0; i < n; ++i) {
    U x, y;
    std::memcpy(&x, static_cast<const void*>(a + i * SA), sizeof(U));
    std::memcpy(&y, static_cast<const void*>(b + i * SB), sizeof(U));
    const U m = static_cast<U>(U(0) - U(c[i]));
    const U r = static_cast<U>((x & m) | (y & static_cast<U>(~m)));
    std::memcpy(static_cast<void*>(o + i), &r, sizeof(U));
  }
}
}  // namespace

// out = cond ? a : b
void CpuBackend::where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  StridedLoop<4> loop({&out, &cond, &a, &b});
  EMBER_DISPATCH_ALL(out.dtype(), "where", [&] {
    loop.run([](const std::array<char*, 4>& p, const std::array<int64_t, 4>& st, int64_t n) {
      constexpr int64_t s = sizeof(scalar_t);
      if (st[0] == s && st[1] == 1 && (st[2] == s || st[2] == 0) && (st[3] == s || st[3] == 0)) {
        auto* o = reinterpret_cast<scalar_t*>(p[0]);
        const auto* c = reinterpret_cast<const bool*>(p[1]);
        const auto* x = reinterpret_cast<const scalar_t*>(p[2]);
        const auto* y = reinterpret_cast<const scalar_t*>(p[3]);
        if (st[2] == s && st[3] == s) return select_run<scalar_t, 1, 1>(o, c, x, y, n);
        if (st[2] == s) return select_run<scalar_t, 1, 0>(o, c, x, y, n);
        if (st[3] == s) return select_run<scalar_t, 0, 1>(o, c, x, y, n);
        return select_run<scalar_t, 0, 0>(o, c, x, y, n);
      }
      for (int64_t i = 0; i < n; ++i) {
        const bool c = *reinterpret_cast<const bool*>(p[1] + i * st[1]);
        *reinterpret_cast<scalar_t*>(p[0] + i * st[0]) =
            *reinterpret_cast<const scalar_t*>(p[c ? 2 : 3] + i * st[c ? 2 : 3]);
      }
    });
  });
}

}  // namespace ember::cpu
