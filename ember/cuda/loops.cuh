#pragma once
// What the CUDA kernels share: the device types of ember's dtypes, the dtype switch, launch
// shapes, and the strided element loop (the device twin of tensor/cpu/loops.h).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>

#include "ember/cuda/check.h"
#include "ember/cuda/internal.h"
#include "ember/tensor/tensor.h"

namespace ember::cuda {

// ember::Half / BFloat16 have the layout of __half / __nv_bfloat16; kernels use the latter.
template <DType D>
struct device_type;
#define EMBER_DEVICE_TYPE(D, T) \
  template <>                   \
  struct device_type<D> {       \
    using type = T;             \
  };
EMBER_DEVICE_TYPE(kBool, bool)
EMBER_DEVICE_TYPE(kUInt8, uint8_t)
EMBER_DEVICE_TYPE(kInt8, int8_t)
EMBER_DEVICE_TYPE(kInt32, int32_t)
EMBER_DEVICE_TYPE(kInt64, int64_t)
EMBER_DEVICE_TYPE(kFloat16, __half)
EMBER_DEVICE_TYPE(kBFloat16, __nv_bfloat16)
EMBER_DEVICE_TYPE(kFloat32, float)
EMBER_DEVICE_TYPE(kFloat64, double)
#undef EMBER_DEVICE_TYPE

// Arithmetic happens in float for the 16-bit types, as on the CPU.
template <class T>
struct opmath {
  using type = T;
};
template <>
struct opmath<__half> {
  using type = float;
};
template <>
struct opmath<__nv_bfloat16> {
  using type = float;
};
template <class T>
using opmath_t = typename opmath<T>::type;

template <class T>
constexpr bool is_floating_v =
    std::is_floating_point_v<T> || std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

// Conversions through opmath that also work for __half / __nv_bfloat16.
template <class To, class From>
__device__ __forceinline__ To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<From, __half> || std::is_same_v<From, __nv_bfloat16>) {
    return convert<To>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, __half>) {
    return __float2half_rn(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, __nv_bfloat16>) {
    return __float2bfloat16_rn(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else {
    return static_cast<To>(v);
  }
}

#define EMBER_CUDA_CASE(D, ...)                     \
  case D: {                                         \
    using scalar_t = typename device_type<D>::type; \
    return __VA_ARGS__();                           \
  }
#define EMBER_CUDA_FLOAT_CASES(...)      \
  EMBER_CUDA_CASE(kFloat32, __VA_ARGS__) \
  EMBER_CUDA_CASE(kFloat64, __VA_ARGS__) \
  EMBER_CUDA_CASE(kFloat16, __VA_ARGS__) \
  EMBER_CUDA_CASE(kBFloat16, __VA_ARGS__)
#define EMBER_CUDA_INT_CASES(...)      \
  EMBER_CUDA_CASE(kUInt8, __VA_ARGS__) \
  EMBER_CUDA_CASE(kInt8, __VA_ARGS__)  \
  EMBER_CUDA_CASE(kInt32, __VA_ARGS__) \
  EMBER_CUDA_CASE(kInt64, __VA_ARGS__)
// scalar_t is the device type of DTYPE inside the body.
#define EMBER_CUDA_DISPATCH_ALL(DTYPE, NAME, ...)                                                   \
  [&] {                                                                                             \
    switch (DTYPE) {                                                                                \
      EMBER_CUDA_FLOAT_CASES(__VA_ARGS__)                                                           \
      EMBER_CUDA_INT_CASES(__VA_ARGS__)                                                             \
      EMBER_CUDA_CASE(kBool, __VA_ARGS__)                                                           \
    }                                                                                               \
    throw ::ember::Error(::ember::detail::concat(NAME, ": unsupported dtype ", DTYPE, " on CUDA")); \
  }()
#define EMBER_CUDA_DISPATCH_FLOATING(DTYPE, NAME, ...)                                                      \
  [&] {                                                                                                     \
    switch (DTYPE) {                                                                                        \
      EMBER_CUDA_FLOAT_CASES(__VA_ARGS__)                                                                   \
      default:                                                                                              \
        break;                                                                                              \
    }                                                                                                       \
    throw ::ember::Error(::ember::detail::concat(NAME, ": not implemented for dtype ", DTYPE, " on CUDA")); \
  }()

// V elements loaded or stored as one access (16 bytes at most: one vector instruction).
template <class T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};
template <class T>
constexpr int kVec16 = 16 / sizeof(T) < 1 ? 1 : static_cast<int>(16 / sizeof(T));  // elements per 16 bytes

constexpr int kBlock = 256;
// Enough blocks to fill the device a few times over; grid-stride loops do the rest.
inline unsigned grid_for(int64_t n, int per_thread = 1) {
  const int64_t blocks = (n + int64_t{kBlock} * per_thread - 1) / (int64_t{kBlock} * per_thread);
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks > 65535 * 8 ? 65535 * 8 : blocks);
}
inline cudaStream_t stream_of(const Tensor& t) { return stream_handle(t.device().index); }

// N operands of one shape (inputs broadcast by the op): byte offsets of element i in each.
// Note [Strided loops] applies: size-1 dims dropped, dims contiguous in every operand merged,
// so a contiguous tensor of any shape is one dimension.
constexpr int kMaxDims = 12;
template <int N>
struct OffsetCalc {
  int ndim = 0;
  int64_t sizes[kMaxDims];       // innermost first
  int64_t strides[kMaxDims][N];  // bytes
  __device__ __forceinline__ void get(int64_t linear, int64_t (&off)[N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = 0; d < ndim; ++d) {
      const int64_t i = linear % sizes[d];
      linear /= sizes[d];
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] += i * strides[d][k];
    }
  }
};

template <int N>
OffsetCalc<N> make_offset_calc(const std::array<const Tensor*, N>& ops, const char* kernel) {
  OffsetCalc<N> c;
  const Tensor& ref = *ops[0];
  for (int64_t d = ref.dim() - 1; d >= 0; --d) {
    const int64_t size = ref.sizes()[d];
    if (size == 1) continue;
    int64_t st[N];
    for (int k = 0; k < N; ++k) st[k] = ops[k]->strides()[d] * static_cast<int64_t>(ops[k]->element_size());
    if (c.ndim > 0) {
      bool mergeable = true;
      for (int k = 0; k < N; ++k) mergeable &= st[k] == c.strides[c.ndim - 1][k] * c.sizes[c.ndim - 1];
      if (mergeable) {
        c.sizes[c.ndim - 1] *= size;
        continue;
      }
    }
    EMBER_CHECK(c.ndim < kMaxDims, kernel, ": tensors with more than ", kMaxDims,
                " non-mergeable dimensions are not supported on CUDA (shape ", shape_str(ref.sizes()), ")");
    c.sizes[c.ndim] = size;
    for (int k = 0; k < N; ++k) c.strides[c.ndim][k] = st[k];
    ++c.ndim;
  }
  return c;
}

// True when every operand is one dense run (the vectorized path applies).
template <int N>
bool all_contiguous(const OffsetCalc<N>& c, const std::array<const Tensor*, N>& ops) {
  if (c.ndim == 0) return true;
  if (c.ndim > 1) return false;
  for (int k = 0; k < N; ++k)
    if (c.strides[0][k] != static_cast<int64_t>(ops[k]->element_size())) return false;
  return true;
}

// ---- the strided element loop: any layout, any number of operands ----
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

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// A raw element of `bytes` bytes: copies and fills move bits without knowing the dtype.
template <int Bytes>
using raw_elem_t =
    std::conditional_t<Bytes == 1, uint8_t,
                       std::conditional_t<Bytes == 2, uint16_t, std::conditional_t<Bytes == 4, uint32_t, uint64_t>>>;

// R is an unsigned integer of BYTES bytes inside the body (extended lambdas cannot sit in a
// generic lambda, so this is a switch, not a template).
#define EMBER_CUDA_BYTES_CASE(N, ...) \
  case N: {                           \
    using R = raw_elem_t<N>;          \
    return __VA_ARGS__();             \
  }
#define EMBER_CUDA_DISPATCH_BYTES(BYTES, ...)                                         \
  [&] {                                                                               \
    switch (BYTES) {                                                                  \
      EMBER_CUDA_BYTES_CASE(1, __VA_ARGS__)                                           \
      EMBER_CUDA_BYTES_CASE(2, __VA_ARGS__)                                           \
      EMBER_CUDA_BYTES_CASE(4, __VA_ARGS__)                                           \
      EMBER_CUDA_BYTES_CASE(8, __VA_ARGS__)                                           \
    }                                                                                 \
    throw InternalError(detail::concat("CUDA: no raw element of ", BYTES, " bytes")); \
  }()

}  // namespace ember::cuda
