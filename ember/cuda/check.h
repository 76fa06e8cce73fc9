#pragma once
// Checked calls into the CUDA runtime, cuBLAS and cuDNN (CUDA builds only). A failure becomes an
// ember::Error with the statement, the library's own error string, the file and the line.
#include <cuda_runtime.h>

#include "ember/tensor/error.h"

namespace ember::detail {
[[noreturn]] void throw_cuda_error(cudaError_t error, const char* statement, const char* file, int line);
}  // namespace ember::detail

#define EMBER_CUDA_CHECK(statement)                                                         \
  do {                                                                                      \
    const cudaError_t ember_cuda_error_ = (statement);                                      \
    if (ember_cuda_error_ != cudaSuccess)                                                   \
      ::ember::detail::throw_cuda_error(ember_cuda_error_, #statement, __FILE__, __LINE__); \
  } while (0)

// After every kernel launch: a bad launch configuration surfaces here, not at the next sync.
#define EMBER_KERNEL_CHECK() EMBER_CUDA_CHECK(cudaGetLastError())
