#pragma once
// What the CUDA back end's files share (CUDA builds only).
#include <cuda_runtime.h>

#include "ember/tensor/allocator.h"

namespace ember::cuda {
cudaStream_t stream_handle(int device);  // the calling thread's current stream on `device`
Allocator* device_memory(int device);    // the caching allocator of one device (runtime.cpp)
}  // namespace ember::cuda
