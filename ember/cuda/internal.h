#pragma once
// What the CUDA back end's files share (CUDA builds only).
#include <cuda_runtime.h>

#include "ember/tensor/allocator.h"

namespace ember::cuda {
cudaStream_t stream_handle(int device);  // the calling thread's current stream on `device`
Allocator* device_memory(int device);    // the caching allocator of one device (runtime.cpp)
}  // namespace ember::cuda

namespace ember {
class Tensor;
namespace cuda {
// acc [M, N] int32 = a [M, K] int8 @ w [N, K]ᵀ int8 through cuBLASLt (matmul.cpp); K % 4 == 0.
void int8_matmul_tn(const Tensor& a, const Tensor& w, const Tensor& acc);
}  // namespace cuda
}  // namespace ember

namespace ember::cuda {}  // namespace ember::cuda
