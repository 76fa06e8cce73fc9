// softmax / log_softmax: integer inputs compute in float32, as in PyTorch.
#include "ember/tensor/ops/internal.h"

namespace ember::native {
namespace {
Tensor softmax_impl(const Tensor& x, int64_t dim, bool log, const char* op) {
  ops::check_defined(x, op);
  dim = wrap_dim(dim, x.dim(), op);
  const Tensor in = contiguous(x.is_floating_point() ? x : to(x, default_float_dtype()));
  Tensor out = empty_like(in);
  if (out.numel() > 0) backend(x.device()).softmax(in, out, dim, log);
  return out;
}
}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_impl(x, dim, false, "softmax"); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_impl(x, dim, true, "log_softmax"); }

}  // namespace ember::native
