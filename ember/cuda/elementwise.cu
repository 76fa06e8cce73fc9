// Elementwise kernels on CUDA: copy (with casts), fill, binary and unary ops, where, and the
// random fills. Contiguous operands take a vectorized path (16-byte loads and stores); any
// other layout (views, broadcasts) goes through the strided loop of cuda/loops.cuh. The ops'
// semantics are the CPU's (tensor/cpu/elementwise.cpp), op for op.
#include <cstring>
#include <type_traits>

#include "ember/cuda/kernels.h"
#include "ember/cuda/loops.cuh"
#include "ember/tensor/generator.h"
#include "ember/tensor/ops.h"

namespace ember::cuda {
namespace {

template <int N>
struct Ptrs {
  char* p[N];
};
template <int N>
Ptrs<N> ptrs_of(const std::array<const Tensor*, N>& ops) {
  Ptrs<N> r;
  for (int k = 0; k < N; ++k) r.p[k] = static_cast<char*>(ops[k]->data_ptr());
  return r;
}

// f(pointers to element i of each operand), for every i, any layout.
template <int N, class F>
__global__ void strided_kernel(OffsetCalc<N> calc, Ptrs<N> base, int64_t n, F f) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    int64_t off[N];
    calc.get(i, off);
    char* p[N];
#pragma unroll
    for (int k = 0; k < N; ++k) p[k] = base.p[k] + off[k];
    f(p);
  }
}

template <int N, class F>
void launch_strided(const std::array<const Tensor*, N>& ops, const char* kernel, const F& f) {
  const int64_t n = ops[0]->numel();
  if (n == 0) return;
  const OffsetCalc<N> calc = make_offset_calc<N>(ops, kernel);
  strided_kernel<N><<<grid_for(n), kBlock, 0, stream_of(*ops[0])>>>(calc, ptrs_of<N>(ops), n, f);
  EMBER_KERNEL_CHECK();
}

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

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

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

// Signed overflow wraps, as in PyTorch: integer arithmetic is done unsigned.
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
__device__ T ipow(T base, int64_t e) {
  if (e < 0) return base == T(1) ? T(1) : base == T(-1) ? (e % 2 ? T(-1) : T(1)) : T(0);
  using U = std::make_unsigned_t<T>;
  U ub = static_cast<U>(base), ur = 1;
  while (e) {
    if (e & 1) ur = static_cast<U>(ur * ub);
    ub = static_cast<U>(ub * ub);
    e >>= 1;
  }
  return static_cast<T>(ur);
}

// The arithmetic binary ops of one dtype; the op is a run-time switch, uniform over a launch.
template <class T>
struct ArithmeticOp {
  using M = opmath_t<T>;
  using W = typename wrap<T>::type;
  BinaryOp op;
  M alpha;
  __device__ T operator()(T xt, T yt) const {
    const M x = convert<M>(xt), y = convert<M>(yt);
    if constexpr (std::is_same_v<T, bool>) {
      switch (op) {
        case BinaryOp::Add:
          return x || y;
        case BinaryOp::Mul:
          return x && y;
        case BinaryOp::Maximum:
          return x || y;
        case BinaryOp::Minimum:
          return x && y;
        case BinaryOp::ReluBackward:
          return y ? x : false;
        default:
          return false;  // rejected on the host
      }
    } else {
      switch (op) {
        case BinaryOp::Add:
          if constexpr (is_floating_v<T>)
            return convert<T>(x + alpha * y);
          else
            return T(W(x) + W(alpha) * W(y));
        case BinaryOp::Sub:
          if constexpr (is_floating_v<T>)
            return convert<T>(x - alpha * y);
          else
            return T(W(x) - W(alpha) * W(y));
        case BinaryOp::Mul:
          if constexpr (is_floating_v<T>)
            return convert<T>(x * y);
          else
            return T(W(x) * W(y));
        case BinaryOp::Div:
          return convert<T>(x / y);
        case BinaryOp::Pow:
          if constexpr (is_floating_v<T>)
            return convert<T>(pow(x, y));
          else
            return ipow<T>(xt, static_cast<int64_t>(yt));
        case BinaryOp::Maximum:
          return (x > y || x != x) ? xt : yt;
        case BinaryOp::Minimum:
          return (x < y || x != x) ? xt : yt;
        case BinaryOp::TanhBackward:
          return convert<T>(x * (M(1) - y * y));
        case BinaryOp::SigmoidBackward:
          return convert<T>(x * y * (M(1) - y));
        case BinaryOp::ReluBackward:
          return y > M(0) ? xt : convert<T>(M(0));
        default:
          return xt;  // comparisons use CompareOp
      }
    }
  }
};

template <class T>
struct CompareOp {
  using M = opmath_t<T>;
  BinaryOp op;
  __device__ bool operator()(T xt, T yt) const {
    const M x = convert<M>(xt), y = convert<M>(yt);
    switch (op) {
      case BinaryOp::Eq:
        return x == y;
      case BinaryOp::Ne:
        return x != y;
      case BinaryOp::Lt:
        return x < y;
      case BinaryOp::Le:
        return x <= y;
      case BinaryOp::Gt:
        return x > y;
      case BinaryOp::Ge:
        return x >= y;
      case BinaryOp::LogicalAnd:
        return x != M(0) && y != M(0);
      default:
        return x != M(0) || y != M(0);  // LogicalOr
    }
  }
};

template <class M>
__device__ M gelu_erf(M x) {
  return M(0.5) * x * (M(1) + erf(x * M(0.70710678118654752440)));
}
template <class M>
__device__ M gelu_tanh(M x) {
  const M k = M(0.79788456080286535588), c = M(0.044715);
  return M(0.5) * x * (M(1) + tanh(k * (x + c * x * x * x)));
}

template <class T>
struct UnaryFn {
  using M = opmath_t<T>;
  UnaryOp op;
  M lo, hi;
  bool has_lo, has_hi;
  __device__ T operator()(T v) const {
    const M x = convert<M>(v);
    if constexpr (std::is_same_v<T, bool>) {
      return v;  // abs, sign, square, relu of a bool: itself (others are rejected on the host)
    } else {
      switch (op) {
        case UnaryOp::neg:
          return convert<T>(M(0) - x);
        case UnaryOp::abs:
          if constexpr (std::is_unsigned_v<T>)
            return v;
          else
            return convert<T>(x < M(0) ? M(0) - x : x);
        case UnaryOp::sign:
          if constexpr (std::is_unsigned_v<T>)
            return convert<T>(M(x != M(0)));
          else
            return convert<T>(x != x ? x : M((M(0) < x) - (x < M(0))));
        case UnaryOp::square:
          return convert<T>(x * x);
        case UnaryOp::relu:
          return convert<T>(x > M(0) || x != x ? x : M(0));
        case UnaryOp::clamp: {
          if (x != x) return v;
          M y = x;
          if (has_lo && y < lo) y = lo;
          if (has_hi && y > hi) y = hi;
          return convert<T>(y);
        }
        default:
          break;
      }
      if constexpr (is_floating_v<T>) {
        switch (op) {
          case UnaryOp::exp:
            return convert<T>(exp(x));
          case UnaryOp::log:
            return convert<T>(log(x));
          case UnaryOp::log1p:
            return convert<T>(log1p(x));
          case UnaryOp::sqrt:
            return convert<T>(sqrt(x));
          case UnaryOp::rsqrt:
            return convert<T>(M(1) / sqrt(x));
          case UnaryOp::sin:
            return convert<T>(sin(x));
          case UnaryOp::cos:
            return convert<T>(cos(x));
          case UnaryOp::tanh:
            return convert<T>(tanh(x));
          case UnaryOp::sigmoid:
            return convert<T>(M(1) / (M(1) + exp(-x)));
          case UnaryOp::gelu:
            return convert<T>(gelu_erf(x));
          case UnaryOp::gelu_tanh:
            return convert<T>(gelu_tanh(x));
          case UnaryOp::silu:
            return convert<T>(x / (M(1) + exp(-x)));
          case UnaryOp::reciprocal:
            return convert<T>(M(1) / x);
          case UnaryOp::erf:
            return convert<T>(erf(x));
          default:
            break;
        }
      }
      return v;  // rejected on the host
    }
  }
};

bool float_only(UnaryOp op) {
  switch (op) {
    case UnaryOp::neg:
    case UnaryOp::abs:
    case UnaryOp::sign:
    case UnaryOp::square:
    case UnaryOp::relu:
    case UnaryOp::clamp:
      return false;
    default:
      return true;
  }
}

// A raw element of `bytes` bytes: copies and fills move bits without knowing the dtype.
template <int Bytes>
struct RawElem;
template <>
struct RawElem<1> {
  using type = uint8_t;
};
template <>
struct RawElem<2> {
  using type = uint16_t;
};
template <>
struct RawElem<4> {
  using type = uint32_t;
};
template <>
struct RawElem<8> {
  using type = uint64_t;
};

// R is an unsigned integer of BYTES bytes inside the body (extended lambdas cannot sit in a
// generic lambda, so this is a switch, not a template).
#define EMBER_CUDA_DISPATCH_BYTES(BYTES, ...)                                         \
  [&] {                                                                               \
    switch (BYTES) {                                                                  \
      case 1: {                                                                       \
        using R = RawElem<1>::type;                                                   \
        return __VA_ARGS__();                                                         \
      }                                                                               \
      case 2: {                                                                       \
        using R = RawElem<2>::type;                                                   \
        return __VA_ARGS__();                                                         \
      }                                                                               \
      case 4: {                                                                       \
        using R = RawElem<4>::type;                                                   \
        return __VA_ARGS__();                                                         \
      }                                                                               \
      case 8: {                                                                       \
        using R = RawElem<8>::type;                                                   \
        return __VA_ARGS__();                                                         \
      }                                                                               \
    }                                                                                 \
    throw InternalError(detail::concat("CUDA: no raw element of ", BYTES, " bytes")); \
  }()

template <class T>
__global__ void fill_dense(T* out, T value, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = value;
}

}  // namespace

void copy(const Tensor& src, const Tensor& dst) {
  if (dst.numel() == 0) return;
  if (src.dtype() == dst.dtype()) {
    if (src.is_contiguous() && dst.is_contiguous()) {
      EMBER_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), dst.numel() * dst.element_size(),
                                       cudaMemcpyDeviceToDevice, stream_of(dst)));
      return;
    }
    EMBER_CUDA_DISPATCH_BYTES(dst.element_size(), [&] {
      launch_strided<2>({&dst, &src}, "copy",
                        [] __device__(char** p) { *reinterpret_cast<R*>(p[0]) = *reinterpret_cast<const R*>(p[1]); });
    });
    return;
  }
  EMBER_CUDA_DISPATCH_ALL(src.dtype(), "copy", [&] {
    using S = scalar_t;
    EMBER_CUDA_DISPATCH_ALL(dst.dtype(), "copy", [&] {
      using D = scalar_t;
      launch_strided<2>({&dst, &src}, "copy", [] __device__(char** p) {
        *reinterpret_cast<D*>(p[0]) = convert<D>(convert<opmath_t<S>>(*reinterpret_cast<const S*>(p[1])));
      });
    });
  });
}

void fill(const Tensor& dst, const Scalar& value) {
  if (dst.numel() == 0) return;
  // The value in dst's dtype, converted on the host exactly as the CPU back end converts it.
  const Tensor host = full({}, value, TensorOptions(dst.dtype()));
  EMBER_CUDA_DISPATCH_BYTES(dst.element_size(), [&] {
    R bits;
    std::memcpy(&bits, host.data_ptr(), sizeof(R));
    if (dst.is_contiguous()) {
      fill_dense<R>
          <<<grid_for(dst.numel()), kBlock, 0, stream_of(dst)>>>(static_cast<R*>(dst.data_ptr()), bits, dst.numel());
      EMBER_KERNEL_CHECK();
    } else {
      launch_strided<1>({&dst}, "fill", [bits] __device__(char** p) { *reinterpret_cast<R*>(p[0]) = bits; });
    }
  });
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out, const Scalar& alpha) {
  EMBER_CUDA_DISPATCH_ALL(a.dtype(), "binary", [&] {
    using T = scalar_t;
    if (is_comparison(op)) return binary_apply<bool, T>(a, b, out, CompareOp<T>{op});
    if constexpr (!is_floating_v<T>) {
      EMBER_CHECK(op != BinaryOp::Div && op != BinaryOp::TanhBackward && op != BinaryOp::SigmoidBackward, "binary: op ",
                  static_cast<int>(op), " is not defined for ", a.dtype(), " on CUDA");
    }
    if constexpr (std::is_same_v<T, bool>) {
      EMBER_CHECK(op == BinaryOp::Add || op == BinaryOp::Mul || op == BinaryOp::Maximum || op == BinaryOp::Minimum ||
                      op == BinaryOp::ReluBackward,
                  "binary: op ", static_cast<int>(op), " is not defined for bool on CUDA");
    }
    using M = opmath_t<T>;
    binary_apply<T, T>(a, b, out, ArithmeticOp<T>{op, static_cast<M>(alpha.to<double>())});
  });
}

void unary(UnaryOp op, const Tensor& a, const Tensor& out, double p0, double p1) {
  EMBER_CUDA_DISPATCH_ALL(a.dtype(), "unary", [&] {
    using T = scalar_t;
    using M = opmath_t<T>;
    if constexpr (!is_floating_v<T>) {
      EMBER_CHECK(!float_only(op), "unary: op ", static_cast<int>(op), " is not defined for ", a.dtype(), " on CUDA");
    }
    if constexpr (std::is_same_v<T, bool>) {
      EMBER_CHECK(op != UnaryOp::neg && op != UnaryOp::clamp, "unary: op ", static_cast<int>(op),
                  " is not defined for bool on CUDA");
    }
    const bool has_lo = p0 == p0, has_hi = p1 == p1;
    unary_apply<T>(
        a, out, UnaryFn<T>{op, has_lo ? static_cast<M>(p0) : M(0), has_hi ? static_cast<M>(p1) : M(0), has_lo, has_hi});
  });
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  EMBER_CUDA_DISPATCH_BYTES(out.element_size(), [&] {
    launch_strided<4>({&out, &cond, &a, &b}, "where", [] __device__(char** p) {
      const bool c = *reinterpret_cast<const bool*>(p[1]);
      // A select of two pointers, not p[c ? 2 : 3]: indexing p at run time puts it in local memory.
      *reinterpret_cast<R*>(p[0]) = c ? *reinterpret_cast<const R*>(p[2]) : *reinterpret_cast<const R*>(p[3]);
    });
  });
}

// ---- random (Note [Philox streams]: the CPU's blocks and lanes, so the same numbers) ----

namespace {
template <class T, int PerBlock, class F>
__global__ void philox_fill(T* out, int64_t n, uint64_t seed, uint64_t offset, F value) {
  const int64_t blocks = (n + PerBlock - 1) / PerBlock;
  for (int64_t blk = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; blk < blocks;
       blk += int64_t{gridDim.x} * blockDim.x) {
    const auto r = philox4x32(seed, offset + static_cast<uint64_t>(blk));
#pragma unroll
    for (int lane = 0; lane < PerBlock; ++lane) {
      const int64_t i = blk * PerBlock + lane;
      if (i < n) out[i] = value(r, lane);
    }
  }
}

template <class T, int PerBlock, class F>
void launch_philox(const Tensor& out, uint64_t seed, uint64_t offset, const F& f) {
  const int64_t n = out.numel();
  if (n == 0) return;
  philox_fill<T, PerBlock><<<grid_for((n + PerBlock - 1) / PerBlock), kBlock, 0, stream_of(out)>>>(
      static_cast<T*>(out.data_ptr()), n, seed, offset, f);
  EMBER_KERNEL_CHECK();
}

constexpr double kTwoPi = 6.283185307179586476925286766559;
}  // namespace

void random_uniform(const Tensor& out, double from, double to, uint64_t seed, uint64_t offset) {
  EMBER_CUDA_DISPATCH_FLOATING(out.dtype(), "uniform_", [&] {
    using T = scalar_t;
    if constexpr (std::is_same_v<T, double>) {
      launch_philox<double, 2>(out, seed, offset, [=] __device__(const std::array<uint32_t, 4>& r, int lane) {
        return from + (to - from) * uniform_double(r[2 * lane], r[2 * lane + 1]);
      });
    } else {
      const float lo = static_cast<float>(from), span = static_cast<float>(to - from);
      launch_philox<T, 4>(out, seed, offset, [=] __device__(const std::array<uint32_t, 4>& r, int lane) {
        return convert<T>(lo + span * uniform_float(r[lane]));
      });
    }
  });
}

void random_normal(const Tensor& out, double mean, double std, uint64_t seed, uint64_t offset) {
  EMBER_CUDA_DISPATCH_FLOATING(out.dtype(), "normal_", [&] {
    using T = scalar_t;
    if constexpr (std::is_same_v<T, double>) {
      launch_philox<double, 2>(out, seed, offset, [=] __device__(const std::array<uint32_t, 4>& r, int lane) {
        const double u1 = 1.0 - uniform_double(r[0], r[1]), u2 = uniform_double(r[2], r[3]);
        const double rad = sqrt(-2.0 * log(u1)), th = kTwoPi * u2;
        return mean + std * rad * (lane == 0 ? cos(th) : sin(th));
      });
    } else {
      const float m = static_cast<float>(mean), s = static_cast<float>(std);
      launch_philox<T, 4>(out, seed, offset, [=] __device__(const std::array<uint32_t, 4>& r, int lane) {
        const int pair = lane / 2 * 2;
        const float u1 = 1.0f - uniform_float(r[pair]), u2 = uniform_float(r[pair + 1]);
        const float rad = sqrtf(-2.0f * logf(u1)), th = static_cast<float>(kTwoPi) * u2;
        return convert<T>(m + s * rad * (lane % 2 == 0 ? cosf(th) : sinf(th)));
      });
    }
  });
}

void random_int(const Tensor& out, int64_t low, int64_t high, uint64_t seed, uint64_t offset) {
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  EMBER_CUDA_DISPATCH_ALL(out.dtype(), "randint", [&] {
    using T = scalar_t;
    launch_philox<T, 2>(out, seed, offset, [=] __device__(const std::array<uint32_t, 4>& r, int lane) {
      const uint64_t bits = (uint64_t{r[2 * lane]} << 32) | r[2 * lane + 1];
      const int64_t v = static_cast<int64_t>(static_cast<uint64_t>(low) + bits % range);
      return convert<T>(static_cast<opmath_t<T>>(v));
    });
  });
}

}  // namespace ember::cuda
