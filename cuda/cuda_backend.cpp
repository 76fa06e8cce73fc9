// The CUDA back end. In this revision it holds the device plumbing only: tensors can be
// described on a CUDA device, and every kernel throws a clear ember::Error naming
// itself. The kernels, caching allocator, cuBLAS and cuDNN arrive with the CUDA issue.
#include "cuda/cuda.h"
#include "tensor/backend.h"

namespace ember {
namespace {
class CudaBackend final : public Backend {
 public:
  const char* name() const override { return "CUDA (kernels arrive with the CUDA back-end issue)"; }
};
}  // namespace

Backend& cuda_backend() {
  static CudaBackend instance;
  return instance;
}

}  // namespace ember
