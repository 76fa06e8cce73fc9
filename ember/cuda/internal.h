#pragma once
// What the CUDA back end's files share (CUDA builds only).
#include <cuda_runtime.h>

namespace ember::cuda {
cudaStream_t stream_handle(int device);  // the calling thread's current stream on `device`
}  // namespace ember::cuda
