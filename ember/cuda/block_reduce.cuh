#pragma once
// The block-wide combine that CUDA reductions and softmax share: warp shuffles, then one value
// per warp through shared memory.
#include "ember/cuda/loops.cuh"

namespace ember::cuda {

template <class V>
__device__ __forceinline__ V shfl_down(V v, int offset) {
  return __shfl_down_sync(0xffffffffu, v, offset);
}
__device__ __forceinline__ bool shfl_down(bool v, int offset) {
  return __shfl_down_sync(0xffffffffu, static_cast<int>(v), offset) != 0;
}

// The block's combined value lands in thread 0.
template <class Op>
__device__ typename Op::Acc block_reduce(typename Op::Acc a) {
  using Acc = typename Op::Acc;
  __shared__ alignas(16) unsigned char storage[32 * sizeof(Acc)];
  Acc* warp_results = reinterpret_cast<Acc*>(storage);
  for (int offset = 16; offset > 0; offset /= 2) a = Op::combine(a, shfl_down(a, offset));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_results[warp] = a;
  __syncthreads();
  const int warps = (blockDim.x + 31) / 32;
  a = threadIdx.x < warps ? warp_results[threadIdx.x] : Op::init();
  if (warp == 0)
    for (int offset = 16; offset > 0; offset /= 2) a = Op::combine(a, shfl_down(a, offset));
  return a;
}

}  // namespace ember::cuda
