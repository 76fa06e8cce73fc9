// Elementwise kernels on CUDA: binary and unary ops and where. Each op's math is its functor in
// tensor/elementwise_math.h (Note [Elementwise math]), shared with the CPU back end: one kernel
// per dtype switches on the op (uniform over a launch), so the ops cost no extra compile time.
// Contiguous operands take a vectorized path (16-byte loads and stores); any other layout
// (views, broadcasts) goes through the strided loop of cuda/loops.cuh.
#include <type_traits>

#include "ember/cuda/cuda.h"
#include "ember/cuda/cuda_backend.h"
#include "ember/cuda/loops.cuh"
#include "ember/tensor/elementwise_math.h"

namespace ember::cuda {
namespace {

// out[i] = f(a[i], b[i]) on dense operands; `a_scalar` / `b_scalar`: that input is one value.
template <class Out, class T, int V, class F>
__global__ void binary_dense(Out* out, const T* a, const T* b, bool a_scalar, bool b_scalar, int64_t n, F f) {
  const int64_t tid = blockIdx.x * int64_t{blockDim.x} + threadIdx.x, step = int64_t{gridDim.x} * blockDim.x;
  const int64_t nv = n / V;
  for (int64_t i = tid; i < nv; i += step) {
    Vec<T, V> x, y;
    if (a_scalar) {
#pragma unroll
      for (int j = 0; j < V; ++j) x.v[j] = *a;
    } else {
      x = reinterpret_cast<const Vec<T, V>*>(a)[i];
    }
    if (b_scalar) {
#pragma unroll
      for (int j = 0; j < V; ++j) y.v[j] = *b;
    } else {
      y = reinterpret_cast<const Vec<T, V>*>(b)[i];
    }
    Vec<Out, V> r;
#pragma unroll
    for (int j = 0; j < V; ++j) r.v[j] = f(x.v[j], y.v[j]);
    reinterpret_cast<Vec<Out, V>*>(out)[i] = r;
  }
  for (int64_t i = nv * V + tid; i < n; i += step) out[i] = f(a[a_scalar ? 0 : i], b[b_scalar ? 0 : i]);
}

// out = f(a, b) elementwise, choosing the dense (vectorized) or the strided path.
template <class Out, class T, class F>
void binary_apply(const Tensor& a, const Tensor& b, const Tensor& out, const F& f) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const OffsetCalc<3> calc = make_offset_calc<3>({&out, &a, &b}, "binary");
  auto dense_or_scalar = [&](int k, int64_t elem) {
    return calc.ndim == 1 && (calc.strides[0][k] == elem || calc.strides[0][k] == 0);
  };
  const bool dense = calc.ndim == 0 || (calc.strides[0][0] == int64_t{sizeof(Out)} && dense_or_scalar(1, sizeof(T)) &&
                                        dense_or_scalar(2, sizeof(T)));
  if (dense) {
    const bool a_scalar = calc.ndim == 1 && calc.strides[0][1] == 0,
               b_scalar = calc.ndim == 1 && calc.strides[0][2] == 0;
    auto* o = static_cast<Out*>(out.data_ptr());
    const auto* x = static_cast<const T*>(a.data_ptr());
    const auto* y = static_cast<const T*>(b.data_ptr());
    constexpr int V = 16 / sizeof(T) < 1 ? 1 : 16 / sizeof(T);
    const bool can_vec = aligned16(o) && (a_scalar || aligned16(x)) && (b_scalar || aligned16(y)) &&
                         sizeof(Out) * V <= 16 && 16 % (sizeof(Out) * V) == 0;
    if (can_vec)
      binary_dense<Out, T, V><<<grid_for(n, V), kBlock, 0, stream_of(out)>>>(o, x, y, a_scalar, b_scalar, n, f);
    else
      binary_dense<Out, T, 1><<<grid_for(n), kBlock, 0, stream_of(out)>>>(o, x, y, a_scalar, b_scalar, n, f);
    EMBER_KERNEL_CHECK();
    return;
  }
  launch_strided<3>({&out, &a, &b}, "binary", [f] __device__(char** p) {
    *reinterpret_cast<Out*>(p[0]) = f(*reinterpret_cast<const T*>(p[1]), *reinterpret_cast<const T*>(p[2]));
  });
}

template <class T, int V, class F>
__global__ void unary_dense(T* out, const T* a, int64_t n, F f) {
  const int64_t tid = blockIdx.x * int64_t{blockDim.x} + threadIdx.x, step = int64_t{gridDim.x} * blockDim.x;
  const int64_t nv = n / V;
  for (int64_t i = tid; i < nv; i += step) {
    Vec<T, V> x = reinterpret_cast<const Vec<T, V>*>(a)[i], r;
#pragma unroll
    for (int j = 0; j < V; ++j) r.v[j] = f(x.v[j]);
    reinterpret_cast<Vec<T, V>*>(out)[i] = r;
  }
  for (int64_t i = nv * V + tid; i < n; i += step) out[i] = f(a[i]);
}

template <class T, class F>
void unary_apply(const Tensor& a, const Tensor& out, const F& f) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const OffsetCalc<2> calc = make_offset_calc<2>({&out, &a}, "unary");
  if (all_contiguous<2>(calc, {&out, &a})) {
    auto* o = static_cast<T*>(out.data_ptr());
    const auto* x = static_cast<const T*>(a.data_ptr());
    constexpr int V = 16 / sizeof(T);
    if (aligned16(o) && aligned16(x))
      unary_dense<T, V><<<grid_for(n, V), kBlock, 0, stream_of(out)>>>(o, x, n, f);
    else
      unary_dense<T, 1><<<grid_for(n), kBlock, 0, stream_of(out)>>>(o, x, n, f);
    EMBER_KERNEL_CHECK();
    return;
  }
  launch_strided<2>({&out, &a}, "unary",
                    [f] __device__(char** p) { *reinterpret_cast<T*>(p[0]) = f(*reinterpret_cast<const T*>(p[1])); });
}

// The arithmetic binary ops, comparisons and unary ops of one dtype T, computed in its math type.
template <class T>
struct ArithmeticOp {
  using M = opmath_t<T>;
  BinaryOp op;
  M alpha;
  __device__ T operator()(T x, T y) const {
    return math::visit_binary<M>(op, alpha, [&](auto fn) { return convert<T>(fn(convert<M>(x), convert<M>(y))); });
  }
};
template <class T>
struct CompareOp {
  using M = opmath_t<T>;
  BinaryOp op;
  __device__ bool operator()(T x, T y) const {
    return math::visit_comparison<M>(op, [&](auto fn) { return fn(convert<M>(x), convert<M>(y)); });
  }
};
template <class T>
struct UnaryFn {
  using M = opmath_t<T>;
  UnaryOp op;
  double p0, p1;
  __device__ T operator()(T v) const {
    return math::visit_unary<M>(op, p0, p1, [&](auto fn) { return convert<T>(fn(convert<M>(v))); });
  }
};

}  // namespace

void CudaBackend::binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out, const Scalar& alpha) {
  DeviceGuard guard(out.device().index);
  EMBER_CUDA_DISPATCH_ALL(a.dtype(), "binary", [&] {
    using T = scalar_t;
    using M = opmath_t<T>;
    EMBER_CHECK(math::binary_supported<M>(op), "binary: op ", static_cast<int>(op), " is not defined for ", a.dtype(),
                " on CUDA");
    if (is_comparison(op)) return binary_apply<bool, T>(a, b, out, CompareOp<T>{op});
    binary_apply<T, T>(a, b, out, ArithmeticOp<T>{op, static_cast<M>(alpha.to<double>())});
  });
}

void CudaBackend::unary(UnaryOp op, const Tensor& a, const Tensor& out, double p0, double p1) {
  DeviceGuard guard(out.device().index);
  EMBER_CUDA_DISPATCH_ALL(a.dtype(), "unary", [&] {
    using T = scalar_t;
    EMBER_CHECK(math::unary_supported<opmath_t<T>>(op), "unary: op ", static_cast<int>(op), " is not defined for ",
                a.dtype(), " on CUDA");
    unary_apply<T>(a, out, UnaryFn<T>{op, p0, p1});
  });
}

void CudaBackend::where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  DeviceGuard guard(out.device().index);
  EMBER_CUDA_DISPATCH_BYTES(out.element_size(), [&] {
    launch_strided<4>({&out, &cond, &a, &b}, "where", [] __device__(char** p) {
      const bool c = *reinterpret_cast<const bool*>(p[1]);
      // A select of two pointers, not p[c ? 2 : 3]: indexing p at run time puts it in local memory.
      *reinterpret_cast<R*>(p[0]) = c ? *reinterpret_cast<const R*>(p[2]) : *reinterpret_cast<const R*>(p[3]);
    });
  });
}

}  // namespace ember::cuda
