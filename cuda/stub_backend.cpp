// The CUDA back end of a build without CUDA: every kernel, and the allocator, throws
// "built without CUDA", so that CPU-only machines build and pass the whole suite.
#include "cuda/cuda.h"
#include "tensor/backend.h"

namespace ember {
namespace {
class NoCudaBackend final : public Backend {
 public:
  const char* name() const override { return "CUDA (ember was built without CUDA)"; }
};
}  // namespace

Backend& cuda_backend() {
  static NoCudaBackend instance;
  return instance;
}

namespace cuda {
bool is_available() { return false; }
int device_count() { return 0; }
bool built_with_cuda() { return false; }
}  // namespace cuda

}  // namespace ember
