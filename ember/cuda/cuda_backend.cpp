// The CUDA back end's instance (cuda/cuda_backend.h; its kernels are in the family files) and
// its memory: a caching allocator per device, and pinned host memory (cuda/runtime.cpp).
#include "ember/cuda/cuda_backend.h"

#include "ember/cuda/cuda.h"
#include "ember/cuda/internal.h"

namespace ember {

Allocator* cuda::CudaBackend::allocator(int index) { return cuda::device_memory(index); }
Allocator* cuda::CudaBackend::pinned_host_allocator() { return cuda::pinned_allocator(); }

Backend& cuda_backend() {
  static cuda::CudaBackend instance;
  return instance;
}

}  // namespace ember
