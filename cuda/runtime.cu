// Device queries through the CUDA runtime. This is also the first .cu file of the build:
// it proves the CUDA toolchain works wherever nvcc exists (CI compiles it).
#include <cuda_runtime.h>

#include "cuda/cuda.h"

namespace ember {
namespace cuda {

int device_count() {
  int n = 0;
  // No driver or no device is an answer (0), not an error.
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error state
    return 0;
  }
  return n;
}

bool is_available() { return device_count() > 0; }
bool built_with_cuda() { return true; }

}  // namespace cuda
}  // namespace ember
