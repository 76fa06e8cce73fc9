// softmax / log_softmax along one dim, numerically stable: exp(x - max) / sum.
#include <cmath>
#include <limits>

#include "tensor/cpu/kernels.h"
#include "tensor/parallel.h"

namespace ember::cpu {
namespace {

// One softmax "row": D elements, `stride` apart.
template <class T, bool kLog>
void softmax_row(const T* x, T* y, int64_t D, int64_t stride) {
  using M = opmath_t<T>;
  M mx = -std::numeric_limits<M>::infinity();
  for (int64_t d = 0; d < D; ++d) mx = std::max(mx, M(x[d * stride]));
  M sum = 0;
  if (kLog) {
    for (int64_t d = 0; d < D; ++d) sum += std::exp(M(x[d * stride]) - mx);
    const M shift = mx + std::log(sum);
    for (int64_t d = 0; d < D; ++d) y[d * stride] = T(M(x[d * stride]) - shift);
  } else {
    for (int64_t d = 0; d < D; ++d) {
      const M e = std::exp(M(x[d * stride]) - mx);
      y[d * stride] = T(e);
      sum += e;
    }
    const M inv = M(1) / sum;
    for (int64_t d = 0; d < D; ++d) y[d * stride] = T(M(y[d * stride]) * inv);
  }
}

template <class T, bool kLog>
void softmax_typed(const Tensor& in, const Tensor& out, int64_t dim) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= in.size(d);
  for (int64_t d = dim + 1; d < in.dim(); ++d) inner *= in.size(d);
  const int64_t D = in.dim() == 0 ? 1 : in.size(dim);
  const T* x = static_cast<const T*>(in.data_ptr());
  T* y = static_cast<T*>(out.data_ptr());
  parallel_for(0, outer * inner, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(D, 1)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t o = r / inner, i = r % inner;
      softmax_row<T, kLog>(x + o * D * inner + i, y + o * D * inner + i, D, inner);
    }
  });
}

}  // namespace

// out = (log_)softmax(in) along dim; in, out contiguous
void softmax(const Tensor& in, const Tensor& out, int64_t dim, bool log) {
  if (in.numel() == 0) return;
  EMBER_DISPATCH_FLOATING(in.dtype(), "softmax", [&] {
    if (log) softmax_typed<scalar_t, true>(in, out, dim);
    else softmax_typed<scalar_t, false>(in, out, dim);
  });
}

}  // namespace ember::cpu
