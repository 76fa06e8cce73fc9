// softmax and log_softmax along one dim on CUDA (tensor/cpu/softmax.cpp on the CPU): rows along
// the last dim take one block each; any other dim, one thread per column.
#include <limits>

#include "ember/cuda/block_reduce.cuh"
#include "ember/cuda/cuda.h"
#include "ember/cuda/cuda_backend.h"
#include "ember/tensor/dim_split.h"

namespace ember::cuda {
namespace {

// Rows along the last dim (inner == 1): one block per row.
template <class T, bool kLog>
__global__ void softmax_last_dim(const T* x, T* y, int64_t rows, int64_t D) {
  using M = opmath_t<T>;
  struct MaxOp {
    using Acc = M;
    __device__ static M init() { return -std::numeric_limits<M>::infinity(); }
    __device__ static M combine(M a, M b) { return a > b || a != a ? a : b; }
  };
  struct AddOp {
    using Acc = M;
    __device__ static M init() { return M(0); }
    __device__ static M combine(M a, M b) { return a + b; }
  };
  __shared__ M shared_max, shared_sum;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * D;
    T* yr = y + row * D;
    M mx = MaxOp::init();
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) mx = MaxOp::combine(mx, convert<M>(xr[d]));
    mx = block_reduce<MaxOp>(mx);
    if (threadIdx.x == 0) shared_max = mx;
    __syncthreads();
    mx = shared_max;
    M sum = 0;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) sum += exp(convert<M>(xr[d]) - mx);
    sum = block_reduce<AddOp>(sum);
    if (threadIdx.x == 0) shared_sum = sum;
    __syncthreads();
    sum = shared_sum;
    const M shift = mx + log(sum), inv = M(1) / sum;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      const M v = convert<M>(xr[d]);
      yr[d] = convert<T>(kLog ? v - shift : exp(v - mx) * inv);
    }
    __syncthreads();
  }
}

// Any other dim: one thread per (outer, inner) column, D elements `inner` apart.
template <class T, bool kLog>
__global__ void softmax_strided(const T* x, T* y, int64_t outer, int64_t D, int64_t inner) {
  using M = opmath_t<T>;
  for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < outer * inner;
       c += int64_t{gridDim.x} * blockDim.x) {
    const int64_t base = (c / inner) * D * inner + c % inner;
    M mx = -std::numeric_limits<M>::infinity();
    for (int64_t d = 0; d < D; ++d) {
      const M v = convert<M>(x[base + d * inner]);
      mx = mx > v || mx != mx ? mx : v;
    }
    M sum = 0;
    for (int64_t d = 0; d < D; ++d) sum += exp(convert<M>(x[base + d * inner]) - mx);
    const M shift = mx + log(sum), inv = M(1) / sum;
    for (int64_t d = 0; d < D; ++d) {
      const M v = convert<M>(x[base + d * inner]);
      y[base + d * inner] = convert<T>(kLog ? v - shift : exp(v - mx) * inv);
    }
  }
}

}  // namespace

void CudaBackend::softmax(const Tensor& in, const Tensor& out, int64_t dim, bool log) {
  DeviceGuard guard(out.device().index);
  if (in.numel() == 0) return;
  const DimSplit split = split_at(in, dim);
  const int64_t outer = split.outer, D = split.size, inner = split.inner;
  EMBER_CUDA_DISPATCH_FLOATING(in.dtype(), "softmax", [&] {
    using T = scalar_t;
    const T* x = static_cast<const T*>(in.data_ptr());
    T* y = static_cast<T*>(out.data_ptr());
    const cudaStream_t stream = stream_of(out);
    if (inner == 1) {
      const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(outer, 65535 * 8));
      if (log)
        softmax_last_dim<T, true><<<blocks, kBlock, 0, stream>>>(x, y, outer, D);
      else
        softmax_last_dim<T, false><<<blocks, kBlock, 0, stream>>>(x, y, outer, D);
    } else if (log) {
      softmax_strided<T, true><<<grid_for(outer * inner), kBlock, 0, stream>>>(x, y, outer, D, inner);
    } else {
      softmax_strided<T, false><<<grid_for(outer * inner), kBlock, 0, stream>>>(x, y, outer, D, inner);
    }
    EMBER_KERNEL_CHECK();
  });
}

}  // namespace ember::cuda
