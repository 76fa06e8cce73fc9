// Layer, group and batch normalization on CUDA (tensor/cpu/normalization.cpp on the CPU; Note
// [Fused layer_norm] in tensor/ops/normalization.cpp): one block per row (a layer_norm row; a
// group_norm sample's group of channels) for the forward and for the input's gradient, sums in
// M = opmath_t<T>; the weight's and bias's gradients are sums over the rows in a fixed order
// (layer_norm: column sums in a fixed number of row runs, then over the runs; group_norm: each
// sample's and channel's sums, then over the samples), so that they do not depend on the launch.
// batch_norm sums a channel in a block per (channel, run of samples), then adds the runs in order;
// its output and input gradient are elementwise.
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

// A row's mean and rstd in every thread of the block, written to mean[row] and rstd[row].
template <class T, class M>
__device__ void row_statistics(const T* xr, int64_t D, M eps, M& shared, M* mean, M* rstd, int64_t row, M& mu, M& rs) {
  M s = 0;
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) s += convert<M>(xr[d]);
  mu = block_sum(s, shared) / M(D);
  M q = 0;
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    const M c = convert<M>(xr[d]) - mu;
    q += c * c;
  }
  rs = M(1) / sqrt(block_sum(q, shared) / M(D) + eps);
  if (threadIdx.x == 0) mean[row] = mu, rstd[row] = rs;
}

// x [R, D] -> y [R, D], mean [R], rstd [R]: a block per row
template <class T, class M = opmath_t<T>>
__global__ void layer_norm_rows(const T* x, const M* w, const M* b, M eps, T* y, M* mean, M* rstd, int64_t R,
                                int64_t D) {
  __shared__ M shared;
  for (int64_t row = blockIdx.x; row < R; row += gridDim.x) {
    const T* xr = x + row * D;
    M mu, rs;
    row_statistics(xr, D, eps, shared, mean, rstd, row, mu, rs);
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

// out [D] = scale Σ over runs of partial [runs, D]
template <class M>
__global__ void sum_runs(const M* partial, M* out, int64_t D, int64_t runs, M scale = M(1)) {
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < D; j += int64_t{gridDim.x} * blockDim.x) {
    M s = 0;
    for (int64_t c = 0; c < runs; ++c) s += partial[c * D + j];
    out[j] = s * scale;
  }
}

// ---- group_norm: x [N, C, HW], rows of C / G channels, the affine per channel ----

// x -> y, mean [N * G], rstd [N * G]: a block per row of D = Cg * HW values
template <class T, class M = opmath_t<T>>
__global__ void group_norm_rows(const T* x, const M* w, const M* b, M eps, T* y, M* mean, M* rstd, int64_t R, int64_t G,
                                int64_t Cg, int64_t HW) {
  __shared__ M shared;
  const int64_t D = Cg * HW;
  for (int64_t row = blockIdx.x; row < R; row += gridDim.x) {
    const T* xr = x + row * D;
    M mu, rs;
    row_statistics(xr, D, eps, shared, mean, rstd, row, mu, rs);
    const int64_t c0 = (row % G) * Cg;
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      const int64_t c = c0 + d / HW;
      y[row * D + d] = convert<T>((convert<M>(xr[d]) - mu) * (w ? rs * w[c] : rs) + (b ? b[c] : M(0)));
    }
  }
}

// sum_dy, sum_dyx [N * C]: Σ dy and Σ dy x̂ over each sample's channel (a block per channel)
template <class T, class M = opmath_t<T>>
__global__ void group_norm_channel_sums(const T* dy, const T* x, const M* mean, const M* rstd, M* sum_dy, M* sum_dyx,
                                        int64_t NC, int64_t C, int64_t Cg, int64_t HW) {
  __shared__ M shared;
  for (int64_t nc = blockIdx.x; nc < NC; nc += gridDim.x) {
    const int64_t row = (nc / C) * (C / Cg) + (nc % C) / Cg;  // the sample's group
    const M mu = mean[row], rs = rstd[row];
    M a = 0, b = 0;
    for (int64_t d = threadIdx.x; d < HW; d += blockDim.x) {
      const M g = convert<M>(dy[nc * HW + d]);
      a += g;
      b += g * (convert<M>(x[nc * HW + d]) - mu) * rs;
    }
    a = block_sum(a, shared);
    b = block_sum(b, shared);
    if (threadIdx.x == 0) sum_dy[nc] = a, sum_dyx[nc] = b;
  }
}

// dx [N, C, HW] = rstd (dy w_c - Σ ĝ / D - x̂ Σ ĝ x̂ / D) over each row, from the channel sums
template <class T, class M = opmath_t<T>>
__global__ void group_norm_input_grad(const T* dy, const T* x, const M* mean, const M* rstd, const M* w,
                                      const M* sum_dy, const M* sum_dyx, T* dx, int64_t R, int64_t G, int64_t Cg,
                                      int64_t HW) {
  __shared__ M shared;
  const int64_t D = Cg * HW;
  for (int64_t row = blockIdx.x; row < R; row += gridDim.x) {
    const int64_t c0 = (row % G) * Cg, at = (row / G) * G * Cg + c0;
    M sg = 0, sgx = 0;
    for (int64_t k = threadIdx.x; k < Cg; k += blockDim.x) {
      sg += (w ? w[c0 + k] : M(1)) * sum_dy[at + k];
      sgx += (w ? w[c0 + k] : M(1)) * sum_dyx[at + k];
    }
    const M mean_g = block_sum(sg, shared) / M(D), mean_gx = block_sum(sgx, shared) / M(D);
    const M mu = mean[row], rs = rstd[row];
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
      const M wc = w ? w[c0 + d / HW] : M(1), xhat = (convert<M>(x[row * D + d]) - mu) * rs;
      dx[row * D + d] = convert<T>(rs * (convert<M>(dy[row * D + d]) * wc - mean_g - xhat * mean_gx));
    }
  }
}

// out [C] = Σ over samples of sums [N, C] (a thread per channel)
template <class M>
__global__ void sum_samples(const M* sums, M* out, int64_t N, int64_t C) {
  for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < C; c += int64_t{gridDim.x} * blockDim.x) {
    M s = 0;
    for (int64_t n = 0; n < N; ++n) s += sums[n * C + c];
    out[c] = s;
  }
}

// ---- batch_norm: x [N, C, HW], a channel's N planes of HW values; the samples in fixed runs ----

// At most 32 runs of samples (a count that depends on N alone): a block per (channel, run) sums
// its planes, then sum_runs adds the runs in order.
constexpr int64_t kSampleRuns = 32;

// partial [runs, C]: Σ x (mean null) or Σ (x - mean[c])² over run r's planes of channel c
template <class T, class M = opmath_t<T>>
__global__ void batch_norm_run_sums(const T* x, const M* mean, M* partial, int64_t N, int64_t C, int64_t HW,
                                    int64_t runs) {
  __shared__ M shared;
  const int64_t c = blockIdx.x, run = blockIdx.y, n0 = N * run / runs, n1 = N * (run + 1) / runs;
  const M mu = mean ? mean[c] : M(0);
  M s = 0;
  for (int64_t i = threadIdx.x; i < (n1 - n0) * HW; i += blockDim.x) {
    const M v = convert<M>(x[((n0 + i / HW) * C + c) * HW + i % HW]);
    s += mean ? (v - mu) * (v - mu) : v;
  }
  s = block_sum(s, shared);
  if (threadIdx.x == 0) partial[run * C + c] = s;
}

// partial_dy, partial_dyx [runs, C]: Σ dy and Σ dy x̂ over run r's planes of channel c
template <class T, class M = opmath_t<T>>
__global__ void batch_norm_run_grad_sums(const T* dy, const T* x, const M* mean, const M* rstd, M* partial_dy,
                                         M* partial_dyx, int64_t N, int64_t C, int64_t HW, int64_t runs) {
  __shared__ M shared;
  const int64_t c = blockIdx.x, run = blockIdx.y, n0 = N * run / runs, n1 = N * (run + 1) / runs;
  const M mu = mean[c], rs = rstd[c];
  M a = 0, b = 0;
  for (int64_t i = threadIdx.x; i < (n1 - n0) * HW; i += blockDim.x) {
    const int64_t at = ((n0 + i / HW) * C + c) * HW + i % HW;
    const M g = convert<M>(dy[at]);
    a += g;
    b += g * (convert<M>(x[at]) - mu) * rs;
  }
  a = block_sum(a, shared);
  b = block_sum(b, shared);
  if (threadIdx.x == 0) partial_dy[run * C + c] = a, partial_dyx[run * C + c] = b;
}

// y [N, C, HW] = (x - mean[c]) rstd[c] w[c] + b[c]
template <class T, class M = opmath_t<T>>
__global__ void batch_norm_apply(const T* x, const M* mean, const M* rstd, const M* w, const M* b, T* y, int64_t n,
                                 int64_t C, int64_t HW) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t c = i / HW % C;
    y[i] = convert<T>((convert<M>(x[i]) - mean[c]) * (w ? rstd[c] * w[c] : rstd[c]) + (b ? b[c] : M(0)));
  }
}

// dx [N, C, HW] = rstd (ĝ - Σ ĝ / count - x̂ Σ ĝ x̂ / count) in training (sums of the channel), ĝ rstd in eval
template <class T, class M = opmath_t<T>>
__global__ void batch_norm_input_grad(const T* dy, const T* x, const M* mean, const M* rstd, const M* w,
                                      const M* sum_dy, const M* sum_dyx, T* dx, int64_t n, int64_t C, int64_t HW,
                                      M inv_count) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t c = i / HW % C;
    const M wc = w ? w[c] : M(1), rs = rstd[c];
    M g = convert<M>(dy[i]) * wc;
    if (sum_dy) g -= wc * sum_dy[c] * inv_count + (convert<M>(x[i]) - mean[c]) * rs * wc * sum_dyx[c] * inv_count;
    dx[i] = convert<T>(rs * g);
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

void CudaBackend::group_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t groups, double eps,
                             const Tensor& out, const Tensor& mean, const Tensor& rstd) {
  DeviceGuard guard(out.device().index);
  const int64_t N = x.size(0), C = x.size(1), HW = x.size(2), R = N * groups;
  if (R == 0) return;
  EMBER_CUDA_DISPATCH_FLOATING(x.dtype(), "group_norm", [&] {
    using T = scalar_t;
    using M = opmath_t<T>;
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(R, 65535 * 8));
    group_norm_rows<T><<<blocks, kBlock, 0, stream_of(out)>>>(
        static_cast<const T*>(x.data_ptr()), data_or_null<M>(weight), data_or_null<M>(bias), M(eps),
        static_cast<T*>(out.data_ptr()), static_cast<M*>(mean.data_ptr()), static_cast<M*>(rstd.data_ptr()), R, groups,
        C / groups, HW);
    EMBER_KERNEL_CHECK();
  });
}

void CudaBackend::group_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                                      const Tensor& weight, int64_t groups, const Tensor& grad_input,
                                      const Tensor& grad_weight, const Tensor& grad_bias) {
  DeviceGuard guard(x.device().index);
  const int64_t N = x.size(0), C = x.size(1), HW = x.size(2), Cg = C / groups;
  if (N == 0 || C == 0 || HW == 0) return;
  EMBER_CUDA_DISPATCH_FLOATING(x.dtype(), "group_norm_backward", [&] {
    using T = scalar_t;
    using M = opmath_t<T>;
    const cudaStream_t stream = stream_of(x);
    const T* dy = static_cast<const T*>(grad_out.data_ptr());
    const T* xp = static_cast<const T*>(x.data_ptr());
    const M* mp = static_cast<const M*>(mean.data_ptr());
    const M* rp = static_cast<const M*>(rstd.data_ptr());
    const TensorOptions options = TensorOptions(x.dtype() == kFloat64 ? kFloat64 : kFloat32).device(x.device());
    const Tensor sum_dy = empty({N, C}, options), sum_dyx = empty({N, C}, options);
    M* sd = static_cast<M*>(sum_dy.data_ptr());
    M* sdx = static_cast<M*>(sum_dyx.data_ptr());
    group_norm_channel_sums<T><<<static_cast<unsigned>(std::min<int64_t>(N * C, 65535 * 8)), kBlock, 0, stream>>>(
        dy, xp, mp, rp, sd, sdx, N * C, C, Cg, HW);
    EMBER_KERNEL_CHECK();
    if (grad_input.defined()) {
      group_norm_input_grad<T><<<static_cast<unsigned>(std::min<int64_t>(N * groups, 65535 * 8)), kBlock, 0, stream>>>(
          dy, xp, mp, rp, data_or_null<M>(weight), sd, sdx, static_cast<T*>(grad_input.data_ptr()), N * groups, groups,
          Cg, HW);
      EMBER_KERNEL_CHECK();
    }
    for (auto [sums, out] : {std::pair{sdx, &grad_weight}, std::pair{sd, &grad_bias}}) {
      if (!out->defined()) continue;
      sum_samples<M><<<grid_for(C), kBlock, 0, stream>>>(sums, static_cast<M*>(out->data_ptr()), N, C);
      EMBER_KERNEL_CHECK();
    }
  });
}

void CudaBackend::batch_norm_statistics(const Tensor& x, const Tensor& mean, const Tensor& var) {
  DeviceGuard guard(x.device().index);
  const int64_t N = x.size(0), C = x.size(1), HW = x.size(2);
  if (N == 0 || C == 0 || HW == 0) return;
  EMBER_CUDA_DISPATCH_FLOATING(x.dtype(), "batch_norm", [&] {
    using T = scalar_t;
    using M = opmath_t<T>;
    const cudaStream_t stream = stream_of(x);
    const int64_t runs = std::min(N, kSampleRuns);
    const Tensor partial = empty({runs, C}, TensorOptions(mean.dtype()).device(x.device()));
    M* pp = static_cast<M*>(partial.data_ptr());
    M* mp = static_cast<M*>(mean.data_ptr());
    const M inv_count = M(1) / M(N * HW);
    const dim3 grid(static_cast<unsigned>(C), static_cast<unsigned>(runs));
    const T* xp = static_cast<const T*>(x.data_ptr());
    batch_norm_run_sums<T><<<grid, kBlock, 0, stream>>>(xp, static_cast<const M*>(nullptr), pp, N, C, HW, runs);
    EMBER_KERNEL_CHECK();
    sum_runs<M><<<grid_for(C), kBlock, 0, stream>>>(pp, mp, C, runs, inv_count);
    EMBER_KERNEL_CHECK();
    batch_norm_run_sums<T><<<grid, kBlock, 0, stream>>>(xp, mp, pp, N, C, HW, runs);
    EMBER_KERNEL_CHECK();
    sum_runs<M><<<grid_for(C), kBlock, 0, stream>>>(pp, static_cast<M*>(var.data_ptr()), C, runs, inv_count);
    EMBER_KERNEL_CHECK();
  });
}

void CudaBackend::batch_norm(const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight,
                             const Tensor& bias, const Tensor& out) {
  DeviceGuard guard(out.device().index);
  const int64_t n = x.numel();
  if (n == 0) return;
  EMBER_CUDA_DISPATCH_FLOATING(x.dtype(), "batch_norm", [&] {
    using T = scalar_t;
    using M = opmath_t<T>;
    batch_norm_apply<T><<<grid_for(n), kBlock, 0, stream_of(out)>>>(
        static_cast<const T*>(x.data_ptr()), static_cast<const M*>(mean.data_ptr()),
        static_cast<const M*>(rstd.data_ptr()), data_or_null<M>(weight), data_or_null<M>(bias),
        static_cast<T*>(out.data_ptr()), n, x.size(1), x.size(2));
    EMBER_KERNEL_CHECK();
  });
}

void CudaBackend::batch_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                                      const Tensor& weight, bool training, const Tensor& grad_input,
                                      const Tensor& grad_weight, const Tensor& grad_bias) {
  DeviceGuard guard(x.device().index);
  const int64_t N = x.size(0), C = x.size(1), HW = x.size(2);
  if (N == 0 || C == 0 || HW == 0) return;
  EMBER_CUDA_DISPATCH_FLOATING(x.dtype(), "batch_norm_backward", [&] {
    using T = scalar_t;
    using M = opmath_t<T>;
    const cudaStream_t stream = stream_of(x);
    const T* dy = static_cast<const T*>(grad_out.data_ptr());
    const T* xp = static_cast<const T*>(x.data_ptr());
    const M* mp = static_cast<const M*>(mean.data_ptr());
    const M* rp = static_cast<const M*>(rstd.data_ptr());
    const bool sums_needed = training || grad_weight.defined() || grad_bias.defined();
    // Σ dy and Σ dy x̂ per channel: grad_bias and grad_weight themselves, or buffers of their own
    const TensorOptions options = TensorOptions(mean.dtype()).device(x.device());
    const Tensor sum_dy = grad_bias.defined() ? grad_bias : sums_needed ? empty({C}, options) : Tensor();
    const Tensor sum_dyx = grad_weight.defined() ? grad_weight : sums_needed ? empty({C}, options) : Tensor();
    if (sums_needed) {
      const int64_t runs = std::min(N, kSampleRuns);
      const Tensor partial = empty({2, runs, C}, options);
      M* pp = static_cast<M*>(partial.data_ptr());
      const dim3 grid(static_cast<unsigned>(C), static_cast<unsigned>(runs));
      batch_norm_run_grad_sums<T><<<grid, kBlock, 0, stream>>>(dy, xp, mp, rp, pp, pp + runs * C, N, C, HW, runs);
      EMBER_KERNEL_CHECK();
      sum_runs<M><<<grid_for(C), kBlock, 0, stream>>>(pp, static_cast<M*>(sum_dy.data_ptr()), C, runs);
      EMBER_KERNEL_CHECK();
      sum_runs<M><<<grid_for(C), kBlock, 0, stream>>>(pp + runs * C, static_cast<M*>(sum_dyx.data_ptr()), C, runs);
      EMBER_KERNEL_CHECK();
    }
    if (!grad_input.defined()) return;
    const int64_t n = x.numel();
    batch_norm_input_grad<T><<<grid_for(n), kBlock, 0, stream>>>(
        dy, xp, mp, rp, data_or_null<M>(weight), training ? data_or_null<M>(sum_dy) : nullptr,
        training ? data_or_null<M>(sum_dyx) : nullptr, static_cast<T*>(grad_input.data_ptr()), n, C, HW,
        M(1) / M(N * HW));
    EMBER_KERNEL_CHECK();
  });
}

}  // namespace ember::cuda
