// Reductions over the rows of a [K, R] view on CUDA (tensor/cpu/reduce.cpp on the CPU).
// Note [CUDA reduction schedules]:
//  - short rows (R < 64), or many rows laid across memory: one thread per row, serially;
//  - otherwise one block per row: each thread strides over the row, the block combines with
//    warp shuffles then shared memory;
//  - few long rows (a full sum): each row is split over G blocks that write partial results,
//    and a second kernel combines them, so a 256M-element sum still fills the device.
// Floats accumulate in float (double for double) as PyTorch's CUDA kernels do; integers in
// int64, wrapping. Max/min propagate NaN; arg reductions return the first extreme index.
#include <array>
#include <atomic>
#include <limits>

#include "ember/cuda/block_reduce.cuh"
#include "ember/cuda/cuda.h"
#include "ember/cuda/cuda_backend.h"
#include "ember/cuda/loops.cuh"
#include "ember/tensor/dim_split.h"
#include "ember/tensor/ops.h"

namespace ember::cuda {
namespace {

template <class T>
using acc_t =
    std::conditional_t<std::is_integral_v<T>, int64_t, std::conditional_t<std::is_same_v<T, double>, double, float>>;

template <class T>
struct SumOp {
  using Acc = acc_t<T>;
  using Out = std::conditional_t<std::is_integral_v<Acc>, int64_t, T>;
  __device__ static Acc init() { return Acc(0); }
  __device__ static Acc combine(Acc a, Acc b) {
    if constexpr (std::is_integral_v<Acc>)
      return Acc(uint64_t(a) + uint64_t(b));
    else
      return a + b;
  }
  __device__ static Acc step(Acc a, T x, int64_t) { return combine(a, convert<Acc>(x)); }
  __device__ static Out value(Acc a) { return convert<Out>(a); }
  __device__ static int64_t index(Acc) { return 0; }
};
template <class T>
struct ProdOp : SumOp<T> {
  using Acc = acc_t<T>;
  __device__ static Acc init() { return Acc(1); }
  __device__ static Acc combine(Acc a, Acc b) {
    if constexpr (std::is_integral_v<Acc>)
      return Acc(uint64_t(a) * uint64_t(b));
    else
      return a * b;
  }
  __device__ static Acc step(Acc a, T x, int64_t) { return combine(a, convert<Acc>(x)); }
};
template <class T, bool kAll>
struct LogicalOp {
  using Acc = bool;
  using Out = bool;
  __device__ static Acc init() { return kAll; }
  __device__ static Acc combine(Acc a, Acc b) { return kAll ? a && b : a || b; }
  __device__ static Acc step(Acc a, T x, int64_t) { return combine(a, convert<opmath_t<T>>(x) != opmath_t<T>(0)); }
  __device__ static Out value(Acc a) { return a; }
  __device__ static int64_t index(Acc) { return 0; }
};

// A value and where it was: max/min with indices, argmax/argmin.
template <class M>
struct ValueIndex {
  M v;
  int64_t i;
};
template <class M>
__device__ __forceinline__ ValueIndex<M> shfl_down(ValueIndex<M> a, int offset) {
  return {cuda::shfl_down(a.v, offset), cuda::shfl_down(a.i, offset)};
}
template <class T, bool kMax>
struct ExtremeOp {
  using M = opmath_t<T>;
  using Acc = ValueIndex<M>;
  using Out = T;
  __device__ static Acc init() {
    if constexpr (std::is_same_v<M, bool>)
      return {!kMax, std::numeric_limits<int64_t>::max()};
    else if constexpr (std::numeric_limits<M>::has_infinity)
      return {kMax ? -std::numeric_limits<M>::infinity() : std::numeric_limits<M>::infinity(),
              std::numeric_limits<int64_t>::max()};
    else
      return {kMax ? std::numeric_limits<M>::lowest() : std::numeric_limits<M>::max(),
              std::numeric_limits<int64_t>::max()};
  }
  // NaN is the most extreme; among equals the first index wins (whatever the combining order).
  __device__ static Acc combine(Acc a, Acc b) {
    const bool a_nan = a.v != a.v, b_nan = b.v != b.v;
    if (a_nan || b_nan) return (a_nan && (!b_nan || a.i < b.i)) ? a : b;
    if (kMax ? b.v > a.v : b.v < a.v) return b;
    if (b.v == a.v && b.i < a.i) return b;
    return a;
  }
  __device__ static Acc step(Acc a, T x, int64_t i) { return combine(a, Acc{convert<M>(x), i}); }
  __device__ static Out value(Acc a) { return convert<T>(a.v); }
  __device__ static int64_t index(Acc a) { return a.i; }
};

template <class Op>
__device__ void write_result(typename Op::Acc a, int64_t k, typename Op::Out* out, int64_t* indices) {
  if (out) out[k] = Op::value(a);
  if (indices) indices[k] = Op::index(a);
}

// One thread per row.
template <class T, class Op>
__global__ void reduce_short_rows(const T* x, int64_t K, int64_t R, int64_t sK, int64_t sR, typename Op::Out* out,
                                  int64_t* indices) {
  for (int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; k < K; k += int64_t{gridDim.x} * blockDim.x) {
    auto a = Op::init();
    for (int64_t r = 0; r < R; ++r) a = Op::step(a, x[k * sK + r * sR], r);
    write_result<Op>(a, k, out, indices);
  }
}

// Block (g, row): part g of G of each row it visits, `chunk` elements long. G == 1 writes
// results, else partials [K, G]. `vec`: the rows are dense and they and the chunks start on 16
// bytes, so the block reads 16-byte vectors.
template <class T, class Op>
__global__ void reduce_long_rows(const T* x, int64_t K, int64_t R, int64_t sK, int64_t sR, int G, int64_t chunk,
                                 bool vec, typename Op::Out* out, int64_t* indices, typename Op::Acc* partial) {
  constexpr int V = kVec16<T>;
  const int64_t begin = blockIdx.x * chunk, end = min(R, begin + chunk), step = blockDim.x;
  for (int64_t k = blockIdx.y; k < K; k += gridDim.y) {
    const T* row = x + k * sK;
    auto a = Op::init();
    int64_t r = begin + threadIdx.x;
    if (vec && end > begin) {
      // Two 16-byte loads in flight per thread and iteration, then the scalar tail.
      const auto* rv = reinterpret_cast<const Vec<T, V>*>(row + begin);
      const int64_t nv = (end - begin) / V;
      int64_t j = threadIdx.x;
      for (; j + step < nv; j += 2 * step) {
        const Vec<T, V> u = rv[j], w = rv[j + step];
#pragma unroll
        for (int e = 0; e < V; ++e) a = Op::step(a, u.v[e], begin + j * V + e);
#pragma unroll
        for (int e = 0; e < V; ++e) a = Op::step(a, w.v[e], begin + (j + step) * V + e);
      }
      for (; j < nv; j += step) {
        const Vec<T, V> u = rv[j];
#pragma unroll
        for (int e = 0; e < V; ++e) a = Op::step(a, u.v[e], begin + j * V + e);
      }
      r = begin + nv * V + threadIdx.x;
    } else {
      // kUnroll loads issued before any is used: memory-bound rows need many bytes in flight.
      constexpr int kUnroll = 4;
      for (; r + (kUnroll - 1) * step < end; r += kUnroll * step) {
        T v[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) v[u] = row[(r + u * step) * sR];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) a = Op::step(a, v[u], r + u * step);
      }
    }
    for (; r < end; r += step) a = Op::step(a, row[r * sR], r);
    a = block_reduce<Op>(a);
    if (threadIdx.x == 0) {
      if (G == 1)
        write_result<Op>(a, k, out, indices);
      else
        partial[k * G + blockIdx.x] = a;
    }
    __syncthreads();  // the shared storage is reused for the next row
  }
}

template <class Op>
__global__ void reduce_partials(const typename Op::Acc* partial, int64_t K, int G, typename Op::Out* out,
                                int64_t* indices) {
  for (int64_t k = blockIdx.x; k < K; k += gridDim.x) {
    auto a = Op::init();
    for (int g = threadIdx.x; g < G; g += blockDim.x) a = Op::combine(a, partial[k * G + g]);
    a = block_reduce<Op>(a);
    if (threadIdx.x == 0) write_result<Op>(a, k, out, indices);
    __syncthreads();
  }
}

int multiprocessor_count(int device) {
  static std::array<std::atomic<int>, 64> counts{};
  EMBER_CHECK(device >= 0 && device < 64, "reduce: device ", device, " out of range");
  if (counts[device] == 0) {
    int n = 0;
    EMBER_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
    counts[device] = n;
  }
  return counts[device];
}

template <class T, class Op>
void reduce_with(const Tensor& in, typename Op::Out* out, int64_t* indices, const Tensor& device_of) {
  const int64_t K = in.size(0), R = in.size(1), sK = in.stride(0), sR = in.stride(1);
  const T* x = static_cast<const T*>(in.data_ptr());
  const cudaStream_t stream = stream_of(device_of);
  if (K == 0) return;
  // Thread per row also when the rows run across memory (sK == 1, e.g. a sum over dim 0):
  // neighbouring threads then read neighbouring elements, where a block per row would not.
  if (R < 64 || (sK == 1 && sR != 1 && K >= 4096)) {
    reduce_short_rows<T, Op><<<grid_for(K), kBlock, 0, stream>>>(x, K, R, sK, sR, out, indices);
    EMBER_KERNEL_CHECK();
    return;
  }
  // Aim at 8 blocks of 256 threads per SM (a full SM); split rows only when there are too few.
  const int64_t target_blocks = 8 * multiprocessor_count(device_of.device().index);
  const int G =
      K >= target_blocks ? 1 : static_cast<int>(std::min<int64_t>((target_blocks + K - 1) / K, (R + 4095) / 4096));
  const dim3 grid(G, static_cast<unsigned>(std::min<int64_t>(K, 65535)));
  constexpr int V = kVec16<T>;
  const bool vec = sR == 1 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                   (K == 1 || (sK * static_cast<int64_t>(sizeof(T))) % 16 == 0);
  int64_t chunk = (R + G - 1) / G;
  if (vec) chunk = (chunk + V - 1) / V * V;  // every chunk starts on 16 bytes
  if (G == 1) {
    reduce_long_rows<T, Op><<<grid, kBlock, 0, stream>>>(x, K, R, sK, sR, 1, chunk, vec, out, indices, nullptr);
    EMBER_KERNEL_CHECK();
    return;
  }
  using Acc = typename Op::Acc;
  const Tensor partial =
      empty({static_cast<int64_t>(K * G * sizeof(Acc))}, TensorOptions(kUInt8).device(device_of.device()));
  Acc* p = static_cast<Acc*>(partial.data_ptr());
  reduce_long_rows<T, Op><<<grid, kBlock, 0, stream>>>(x, K, R, sK, sR, G, chunk, vec, out, indices, p);
  EMBER_KERNEL_CHECK();
  reduce_partials<Op><<<static_cast<unsigned>(std::min<int64_t>(K, 65535)), kBlock, 0, stream>>>(p, K, G, out, indices);
  EMBER_KERNEL_CHECK();
}

template <class T>
void reduce_typed(ReduceOp op, const Tensor& in, const Tensor& out, const Tensor& indices) {
  auto* idx = indices.defined() ? static_cast<int64_t*>(indices.data_ptr()) : nullptr;
  auto out_as = [&](auto* tag) { return static_cast<std::remove_pointer_t<decltype(tag)>*>(out.data_ptr()); };
  switch (op) {
    case ReduceOp::Sum:
      return reduce_with<T, SumOp<T>>(in, out_as((typename SumOp<T>::Out*)nullptr), nullptr, out);
    case ReduceOp::Prod:
      return reduce_with<T, ProdOp<T>>(in, out_as((typename SumOp<T>::Out*)nullptr), nullptr, out);
    case ReduceOp::All:
      return reduce_with<T, LogicalOp<T, true>>(in, out_as((bool*)nullptr), nullptr, out);
    case ReduceOp::Any:
      return reduce_with<T, LogicalOp<T, false>>(in, out_as((bool*)nullptr), nullptr, out);
    case ReduceOp::Max:
      return reduce_with<T, ExtremeOp<T, true>>(in, out_as((T*)nullptr), idx, out);
    case ReduceOp::Min:
      return reduce_with<T, ExtremeOp<T, false>>(in, out_as((T*)nullptr), idx, out);
    case ReduceOp::ArgMax:
      return reduce_with<T, ExtremeOp<T, true>>(in, nullptr, static_cast<int64_t*>(out.data_ptr()), out);
    case ReduceOp::ArgMin:
      return reduce_with<T, ExtremeOp<T, false>>(in, nullptr, static_cast<int64_t*>(out.data_ptr()), out);
  }
}

}  // namespace

void CudaBackend::reduce(ReduceOp op, const Tensor& in, const Tensor& out, const Tensor& indices) {
  DeviceGuard guard(in.device().index);
  EMBER_CUDA_DISPATCH_ALL(in.dtype(), "reduce", [&] { reduce_typed<scalar_t>(op, in, out, indices); });
}

// ---- scans and sorting along one dim: x [outer, D, inner] contiguous (tensor/cpu/sort.cpp) ----
namespace {

// One thread per line, serially along D, accumulated as the reductions are (float for float);
// sums or (kProduct) products.
template <class T, bool kProduct>
__global__ void scan_kernel(const T* x, T* out, int64_t outer, int64_t D, int64_t inner, bool reverse) {
  for (int64_t line = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; line < outer * inner;
       line += int64_t{gridDim.x} * blockDim.x) {
    const int64_t base = (line / inner) * D * inner + line % inner;
    acc_t<T> acc = kProduct ? 1 : 0;
    for (int64_t j = 0; j < D; ++j) {
      const int64_t at = base + (reverse ? D - 1 - j : j) * inner;
      if constexpr (kProduct)
        acc = ProdOp<T>::combine(acc, convert<acc_t<T>>(x[at]));
      else
        acc = SumOp<T>::combine(acc, convert<acc_t<T>>(x[at]));
      out[at] = convert<T>(acc);
    }
  }
}

constexpr int kSortMax = 1024;  // the longest line one block sorts in shared memory

// Whether (a, ia) comes before (b, ib): by value (NaN above every number), then by index, a total
// order, so the bitonic network's result is the stable sort's.
template <class K>
__device__ bool sorts_before(K a, int ia, K b, int ib, bool descending) {
  const bool a_nan = a != a, b_nan = b != b;  // (never true for integers)
  const bool lt = !a_nan && (b_nan || a < b), gt = !b_nan && (a_nan || b < a);
  if (descending ? gt : lt) return true;
  if (descending ? lt : gt) return false;
  return ia < ib;
}

// One block per line of D <= kSortMax values: padded to P (a power of two) with entries that sort
// last, a bitonic network in shared memory, then the first D written out.
template <class T>
__global__ void sort_lines_kernel(const T* x, T* values, int64_t* indices, int64_t lines, int64_t D, int64_t inner,
                                  int P, bool descending) {
  using K = opmath_t<T>;
  extern __shared__ unsigned char shared[];
  K* key = reinterpret_cast<K*>(shared);
  int* pos = reinterpret_cast<int*>(key + P);  // the element's index in the line; D and above: padding
  for (int64_t line = blockIdx.x; line < lines; line += gridDim.x) {
    const int64_t base = (line / inner) * D * inner + line % inner;
    for (int t = threadIdx.x; t < P; t += blockDim.x) {
      pos[t] = t;
      key[t] = t < D ? convert<K>(x[base + t * inner]) : K(0);
    }
    __syncthreads();
    for (int k = 2; k <= P; k <<= 1)
      for (int j = k >> 1; j > 0; j >>= 1) {
        for (int t = threadIdx.x; t < P; t += blockDim.x) {
          const int u = t ^ j;
          if (u <= t) continue;
          // Padding sorts after everything; real entries by sorts_before.
          const bool u_first = pos[u] >= D   ? false
                               : pos[t] >= D ? true
                                             : sorts_before(key[u], pos[u], key[t], pos[t], descending);
          if (((t & k) == 0) == u_first) {  // ascending run: u must not precede t; descending: the reverse
            const K kk = key[t];
            key[t] = key[u], key[u] = kk;
            const int pp = pos[t];
            pos[t] = pos[u], pos[u] = pp;
          }
        }
        __syncthreads();
      }
    for (int t = threadIdx.x; t < D; t += blockDim.x) {
      values[base + t * inner] = x[base + int64_t{pos[t]} * inner];
      indices[base + t * inner] = pos[t];
    }
    __syncthreads();  // before the next line overwrites the shared arrays
  }
}

}  // namespace

void CudaBackend::cumsum(const Tensor& x, int64_t dim, bool reverse, const Tensor& out) {
  DeviceGuard guard(x.device().index);
  const DimSplit s = split_at(x, dim);
  const int64_t lines = s.outer * s.inner;
  if (lines == 0 || s.size == 0) return;
  EMBER_CUDA_DISPATCH_ALL(x.dtype(), "cumsum", [&] {
    scan_kernel<scalar_t, false><<<grid_for(lines), kBlock, 0, stream_of(x)>>>(
        static_cast<const scalar_t*>(x.data_ptr()), static_cast<scalar_t*>(out.data_ptr()), s.outer, s.size, s.inner,
        reverse);
  });
  EMBER_KERNEL_CHECK();
}

void CudaBackend::cumprod(const Tensor& x, int64_t dim, const Tensor& out) {
  DeviceGuard guard(x.device().index);
  const DimSplit s = split_at(x, dim);
  const int64_t lines = s.outer * s.inner;
  if (lines == 0 || s.size == 0) return;
  EMBER_CUDA_DISPATCH_ALL(x.dtype(), "cumprod", [&] {
    scan_kernel<scalar_t, true><<<grid_for(lines), kBlock, 0, stream_of(x)>>>(
        static_cast<const scalar_t*>(x.data_ptr()), static_cast<scalar_t*>(out.data_ptr()), s.outer, s.size, s.inner,
        false);
  });
  EMBER_KERNEL_CHECK();
}

// Lines of up to kSortMax values sort on the device, a block each; longer ones are sorted by the
// CPU back end and copied back (planned: a device merge of sorted blocks). For the first K < D of
// each line (topk), the whole line is sorted and its head copied.
void CudaBackend::sort(const Tensor& x, int64_t dim, bool descending, const Tensor& values, const Tensor& indices) {
  DeviceGuard guard(x.device().index);
  const DimSplit s = split_at(x, dim);
  const int64_t lines = s.outer * s.inner, K = values.dim() == 0 ? 1 : values.size(dim);
  if (lines == 0 || s.size == 0 || K == 0) return;
  Tensor values_out = values, indices_out = indices;  // (handles to the caller's tensors)
  if (s.size > kSortMax) {
    const Tensor host = native::to(x, Device(kCPU), x.dtype());
    const Tensor v = empty(values.sizes(), TensorOptions(x.dtype())), i = empty(values.sizes(), TensorOptions(kInt64));
    backend(DeviceType::CPU).sort(host, dim, descending, v, i);
    native::copy_(values_out, v);
    native::copy_(indices_out, i);
    return;
  }
  const bool head = K < s.size;
  const Tensor v = head ? empty(x.sizes(), TensorOptions(x.dtype()).device(x.device())) : values;
  const Tensor i = head ? empty(x.sizes(), TensorOptions(kInt64).device(x.device())) : indices;
  int P = 1;
  while (P < s.size) P <<= 1;
  EMBER_CUDA_DISPATCH_ALL(x.dtype(), "sort", [&] {
    const size_t bytes = static_cast<size_t>(P) * (sizeof(opmath_t<scalar_t>) + sizeof(int));
    const auto blocks = static_cast<unsigned>(std::min<int64_t>(lines, 65535 * 8));
    sort_lines_kernel<scalar_t><<<blocks, std::min(P, kBlock), bytes, stream_of(x)>>>(
        static_cast<const scalar_t*>(x.data_ptr()), static_cast<scalar_t*>(v.data_ptr()),
        static_cast<int64_t*>(i.data_ptr()), lines, s.size, s.inner, P, descending);
  });
  EMBER_KERNEL_CHECK();
  if (head) {
    native::copy_(values_out, native::narrow(v, dim, 0, K));
    native::copy_(indices_out, native::narrow(i, dim, 0, K));
  }
}

}  // namespace ember::cuda
