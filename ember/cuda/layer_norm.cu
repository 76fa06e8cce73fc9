// Layer normalization over the rows of [R, D] on CUDA (tensor/cpu/layer_norm.cpp on the CPU; Note
// [Fused layer_norm] in tensor/ops/normalization.cpp): one block per row for the forward and for
// the input's gradient, sums in M = opmath_t<T>; the weight's and bias's gradients are column
// sums over the rows, in a fixed number of row runs and then over the runs, so that they do not
// depend on the launch.
#include <algorithm>

#include "ember/cuda/block_reduce.cuh"
#include "ember/cuda/cuda.h"
#include "ember/cuda/cuda_backend.h"
#include "ember/tensor/ops.h"

namespace ember::cuda {
namespace {

template <class M>
struct AddOp {
  using Acc = M;
  __device__ static M init() { return M(0); }
  __device__ static M combine(M a, M b) { return a + b; }
};

// The block's sum of v, in every thread (`shared`: one M of the caller's shared memory).
template <class M>
__device__ M block_sum(M v, M& shared) {
  v = block_reduce<AddOp<M>>(v);
  if (threadIdx.x == 0) shared = v;
  __syncthreads();
  v = shared;
  __syncthreads();  // before anyone writes `shared` again
  return v;
}

// x [R, D] -> y [R, D], mean [R], rstd [R]: a block per row
template <class T, class M = opmath_t<T>>
__global__ void layer_norm_rows(const T* x, const M* w, const M* b, M eps, T* y, M* mean, M* rstd, int64_t R,
                                int64_t D) {
  __shared__ M shared;
  for (int64_t row = blockIdx.x; row < R; row += gridDim.x) {
    const T* xr = x + row * D;
    M s = 0;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) s += convert<M>(xr[d]);
    const M mu = block_sum(s, shared) / M(D);
    M q = 0;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      const M c = convert<M>(xr[d]) - mu;
      q += c * c;
    }
    const M rs = M(1) / sqrt(block_sum(q, shared) / M(D) + eps);
    if (threadIdx.x == 0) mean[row] = mu, rstd[row] = rs;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      M v = (convert<M>(xr[d]) - mu) * rs;
      if (w) v *= w[d];
      if (b) v += b[d];
      y[row * D + d] = convert<T>(v);
    }
  }
}

// dy, x [R, D] -> dx [R, D] = rstd (ĝ - Σ ĝ / D - x̂ Σ ĝ x̂ / D), x̂ = (x - mean) rstd, ĝ = dy w
template <class T, class M = opmath_t<T>>
__global__ void layer_norm_input_grad(const T* dy, const T* x, const M* mean, const M* rstd, const M* w, T* dx,
                                      int64_t R, int64_t D) {
  __shared__ M shared;
  for (int64_t row = blockIdx.x; row < R; row += gridDim.x) {
    const M mu = mean[row], rs = rstd[row];
    M sg = 0, sgx = 0;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      const M g = w ? convert<M>(dy[row * D + d]) * w[d] : convert<M>(dy[row * D + d]);
      sg += g;
      sgx += g * (convert<M>(x[row * D + d]) - mu) * rs;
    }
    const M mean_g = block_sum(sg, shared) / M(D), mean_gx = block_sum(sgx, shared) / M(D);
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      const M g = w ? convert<M>(dy[row * D + d]) * w[d] : convert<M>(dy[row * D + d]);
      const M xhat = (convert<M>(x[row * D + d]) - mu) * rs;
      dx[row * D + d] = convert<T>(rs * (g - mean_g - xhat * mean_gx));
    }
  }
}

// At most 64 runs of rows, fewer for wide rows so that the partials stay within 1M values.
constexpr int64_t kRuns = 64;
constexpr int64_t kPartialBudget = int64_t{1} << 20;

// partial_w, partial_b [runs, D]: run c's sums of dy x̂ and dy over its rows (a thread per column)
template <class T, class M = opmath_t<T>>
__global__ void layer_norm_affine_partials(const T* dy, const T* x, const M* mean, const M* rstd, M* partial_w,
                                           M* partial_b, int64_t R, int64_t D, int64_t runs) {
  const int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x, c = blockIdx.y;
  if (j >= D) return;
  M sw = 0, sb = 0;
  for (int64_t r = R * c / runs; r < R * (c + 1) / runs; ++r) {
    const M g = convert<M>(dy[r * D + j]);
    sw += g * (convert<M>(x[r * D + j]) - mean[r]) * rstd[r];
    sb += g;
  }
  if (partial_w) partial_w[c * D + j] = sw;
  if (partial_b) partial_b[c * D + j] = sb;
}

// out [D] = Σ over runs of partial [runs, D]
template <class M>
__global__ void sum_runs(const M* partial, M* out, int64_t D, int64_t runs) {
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < D; j += int64_t{gridDim.x} * blockDim.x) {
    M s = 0;
    for (int64_t c = 0; c < runs; ++c) s += partial[c * D + j];
    out[j] = s;
  }
}

template <class M>
const M* data_or_null(const Tensor& t) {
  return t.defined() ? static_cast<const M*>(t.data_ptr()) : nullptr;
}

}  // namespace

void CudaBackend::layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& out,
                             const Tensor& mean, const Tensor& rstd) {
  DeviceGuard guard(out.device().index);
  const int64_t R = x.size(0), D = x.size(1);
  if (R == 0) return;
  EMBER_CUDA_DISPATCH_FLOATING(x.dtype(), "layer_norm", [&] {
    using T = scalar_t;
    using M = opmath_t<T>;
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(R, 65535 * 8));
    layer_norm_rows<T><<<blocks, kBlock, 0, stream_of(out)>>>(
        static_cast<const T*>(x.data_ptr()), data_or_null<M>(weight), data_or_null<M>(bias), M(eps),
        static_cast<T*>(out.data_ptr()), static_cast<M*>(mean.data_ptr()), static_cast<M*>(rstd.data_ptr()), R, D);
    EMBER_KERNEL_CHECK();
  });
}

void CudaBackend::layer_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                                      const Tensor& weight, const Tensor& grad_input, const Tensor& grad_weight,
                                      const Tensor& grad_bias) {
  DeviceGuard guard(x.device().index);
  const int64_t R = x.size(0), D = x.size(1);
  if (R == 0 || D == 0) return;
  EMBER_CUDA_DISPATCH_FLOATING(x.dtype(), "layer_norm_backward", [&] {
    using T = scalar_t;
    using M = opmath_t<T>;
    const cudaStream_t stream = stream_of(x);
    const T* dy = static_cast<const T*>(grad_out.data_ptr());
    const T* xp = static_cast<const T*>(x.data_ptr());
    const M* mp = static_cast<const M*>(mean.data_ptr());
    const M* rp = static_cast<const M*>(rstd.data_ptr());
    if (grad_input.defined()) {
      const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(R, 65535 * 8));
      layer_norm_input_grad<T><<<blocks, kBlock, 0, stream>>>(dy, xp, mp, rp, data_or_null<M>(weight),
                                                              static_cast<T*>(grad_input.data_ptr()), R, D);
      EMBER_KERNEL_CHECK();
    }
    if (!grad_weight.defined() && !grad_bias.defined()) return;
    const int64_t runs = std::max<int64_t>(1, std::min({R, kRuns, kPartialBudget / D}));
    const TensorOptions options = TensorOptions(x.dtype() == kFloat64 ? kFloat64 : kFloat32).device(x.device());
    const Tensor partial_w = grad_weight.defined() ? empty({runs, D}, options) : Tensor();
    const Tensor partial_b = grad_bias.defined() ? empty({runs, D}, options) : Tensor();
    auto mutable_or_null = [](const Tensor& t) { return t.defined() ? static_cast<M*>(t.data_ptr()) : nullptr; };
    const dim3 grid(static_cast<unsigned>((D + kBlock - 1) / kBlock), static_cast<unsigned>(runs));
    layer_norm_affine_partials<T><<<grid, kBlock, 0, stream>>>(dy, xp, mp, rp, mutable_or_null(partial_w),
                                                               mutable_or_null(partial_b), R, D, runs);
    EMBER_KERNEL_CHECK();
    for (auto [partial, out] : {std::pair{&partial_w, &grad_weight}, std::pair{&partial_b, &grad_bias}}) {
      if (!out->defined()) continue;
      sum_runs<M><<<grid_for(D), kBlock, 0, stream>>>(static_cast<const M*>(partial->data_ptr()),
                                                      static_cast<M*>(out->data_ptr()), D, runs);
      EMBER_KERNEL_CHECK();
    }
  });
}

}  // namespace ember::cuda
