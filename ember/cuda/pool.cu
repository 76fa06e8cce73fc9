// Pooling on CUDA: max (of floating or uint8 values, with PyTorch's flat h·W + w indices, or
// autograd's one-byte tap numbers), average and adaptive average, forward and backward; one thread
// per output element. Windows follow the CPU's rules (tensor/cpu/pool.cpp) exactly: the first
// maximal tap wins, a NaN wins over numbers, avg_pool2d's divisor counts padding unless
// count_include_pad is off. Backward passes scatter with atomic adds, since windows may overlap.
// Tensors are contiguous NCHW.
#include <limits>

#include "ember/cuda/cuda.h"
#include "ember/cuda/cuda_backend.h"
#include "ember/cuda/loops.cuh"

namespace ember::cuda {
namespace {

struct PoolShape {
  int64_t planes, H, W, Ho, Wo;
};
PoolShape shape_of(const Tensor& in, const Tensor& out) {
  return {in.size(0) * in.size(1), in.size(2), in.size(3), out.size(2), out.size(3)};
}

struct Window {
  int64_t h0, h1, w0, w1;
  double divisor;  // a window of padding may count more than int64 holds
};

// (the ends are min(start + kernel, size + padding) written so that no sum overflows, as on the CPU)
__device__ Window avg_window(int64_t oh, int64_t ow, int64_t H, int64_t W, const Pool2dParams& p) {
  Window w{oh * p.stride[0] - p.padding[0], 0, ow * p.stride[1] - p.padding[1], 0, 0};
  w.h1 = w.h0 + min(p.kernel[0], H + p.padding[0] - w.h0);
  w.w1 = w.w0 + min(p.kernel[1], W + p.padding[1] - w.w0);
  const double padded_count = double(w.h1 - w.h0) * double(w.w1 - w.w0);
  w.h0 = max(w.h0, int64_t{0});
  w.w0 = max(w.w0, int64_t{0});
  w.h1 = min(w.h1, H);
  w.w1 = min(w.w1, W);
  w.divisor = p.count_include_pad ? padded_count : double((w.h1 - w.h0) * (w.w1 - w.w0));
  return w;
}

__device__ Window adaptive_window(int64_t oh, int64_t ow, int64_t H, int64_t W, int64_t Ho, int64_t Wo) {
  Window w{oh * H / Ho, ((oh + 1) * H + Ho - 1) / Ho, ow * W / Wo, ((ow + 1) * W + Wo - 1) / Wo, 0};
  w.divisor = double((w.h1 - w.h0) * (w.w1 - w.w0));
  return w;
}

// The kernel taps [begin, end) of a max pool window starting at `origin` that fall inside
// [0, size), without overflow (as the CPU's taps_inside): a kernel of 2^62 taps over one column
// is a valid argument, and looping over all its taps would never end.
__device__ int64_t ceil_div(int64_t a, int64_t d) { return a / d + (a % d > 0 ? 1 : 0); }
__device__ void taps_inside(int64_t origin, int64_t kernel, int64_t dilation, int64_t size, int64_t& begin,
                            int64_t& end) {
  begin = origin < 0 ? ceil_div(-origin, dilation) : 0;
  end = max(begin, min(kernel, ceil_div(size - origin, dilation)));
}

// What max_pool2d records of each window's maximum (Backend::max_pool2d): nothing, its position
// in the plane (int64 indices, PyTorch's), or its tap number i * kw + j in the window (uint8).
enum IndexKind : int { kNoIndices, kPositions, kTaps };
IndexKind index_kind(const Tensor& indices) {
  if (!indices.defined()) return kNoIndices;
  return indices.dtype() == kUInt8 ? kTaps : kPositions;
}

template <class M>
__device__ M lowest() {
  if constexpr (std::numeric_limits<M>::has_infinity)
    return -std::numeric_limits<M>::infinity();
  else
    return std::numeric_limits<M>::lowest();
}

// out, indices [planes, Ho, Wo] <- max over each window of in [planes, H, W] (floating, or uint8:
// a statically quantized model's activations)
template <class T, int kIndices>
__global__ void max_pool_kernel(const T* in, T* out, void* indices, PoolShape s, Pool2dParams p) {
  using M = opmath_t<T>;
  const int64_t n = s.planes * s.Ho * s.Wo;
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < n; o += int64_t{gridDim.x} * blockDim.x) {
    const int64_t ow = o % s.Wo, oh = (o / s.Wo) % s.Ho, plane = o / (s.Wo * s.Ho);
    const T* x = in + plane * s.H * s.W;
    const int64_t h0 = oh * p.stride[0] - p.padding[0], w0 = ow * p.stride[1] - p.padding[1];
    int64_t i0, i1, j0, j1;
    taps_inside(h0, p.kernel[0], p.dilation[0], s.H, i0, i1);
    taps_inside(w0, p.kernel[1], p.dilation[1], s.W, j0, j1);
    M best = lowest<M>();
    int64_t at = -1, tap = 0;  // an empty window (dilation skips the input): index -1, as on the CPU
    bool nan = false;
    for (int64_t i = i0; i < i1 && !nan; ++i) {
      const int64_t h = h0 + i * p.dilation[0];
      for (int64_t j = j0; j < j1; ++j) {
        const int64_t w = w0 + j * p.dilation[1];
        const M v = convert<M>(x[h * s.W + w]);
        const bool is_nan = v != v;  // the first NaN wins
        if (is_nan || at < 0 || v > best) {
          best = v;
          at = h * s.W + w;
          if constexpr (kIndices == kTaps) tap = i * p.kernel[1] + j;  // at most 256 taps
        }
        if (is_nan) {
          nan = true;
          break;
        }
      }
    }
    out[o] = convert<T>(best);
    if constexpr (kIndices == kPositions) static_cast<int64_t*>(indices)[o] = at;
    if constexpr (kIndices == kTaps) static_cast<uint8_t*>(indices)[o] = static_cast<uint8_t>(tap);
  }
}

// grad_in[plane, position of indices[o]] += grad_out[o]   (grad_in zeroed first)
template <class T, int kIndices>
__global__ void max_pool_backward_kernel(const T* grad_out, const void* indices, T* grad_in, PoolShape s,
                                         Pool2dParams p) {
  const int64_t n = s.planes * s.Ho * s.Wo, HW = s.H * s.W;
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < n; o += int64_t{gridDim.x} * blockDim.x) {
    int64_t at;
    if constexpr (kIndices == kTaps) {
      const int64_t t = static_cast<const uint8_t*>(indices)[o];
      const int64_t ow = o % s.Wo, oh = (o / s.Wo) % s.Ho;
      const int64_t h = oh * p.stride[0] - p.padding[0] + (t / p.kernel[1]) * p.dilation[0];
      const int64_t w = ow * p.stride[1] - p.padding[1] + (t % p.kernel[1]) * p.dilation[1];
      if (t >= p.kernel[0] * p.kernel[1] || h < 0 || h >= s.H || w < 0 || w >= s.W) continue;
      at = h * s.W + w;
    } else {
      at = static_cast<const int64_t*>(indices)[o];
      if (at < 0 || at >= HW) continue;  // indices come from max_pool2d; a bad one is never written through
    }
    atomicAdd(grad_in + (o / (s.Ho * s.Wo)) * HW + at, grad_out[o]);
  }
}

// Forward: out[o] = mean over window(o). Backward: grad_in[window(o)] += grad_out[o] / divisor.
template <class T, bool kBackward, bool kAdaptive>
__global__ void avg_pool_kernel(T* x, T* y, PoolShape s, Pool2dParams p) {
  using M = opmath_t<T>;
  const int64_t n = s.planes * s.Ho * s.Wo;
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < n; o += int64_t{gridDim.x} * blockDim.x) {
    const int64_t ow = o % s.Wo, oh = (o / s.Wo) % s.Ho, plane = o / (s.Wo * s.Ho);
    const Window w = kAdaptive ? adaptive_window(oh, ow, s.H, s.W, s.Ho, s.Wo) : avg_window(oh, ow, s.H, s.W, p);
    T* xp = x + plane * s.H * s.W;
    if (kBackward) {
      if (w.divisor <= 0) continue;
      const M share = convert<M>(y[o]) / M(w.divisor);
      for (int64_t h = w.h0; h < w.h1; ++h)
        for (int64_t c = w.w0; c < w.w1; ++c) atomicAdd(xp + h * s.W + c, convert<T>(share));
    } else {
      M sum = 0;
      for (int64_t h = w.h0; h < w.h1; ++h)
        for (int64_t c = w.w0; c < w.w1; ++c) sum += convert<M>(xp[h * s.W + c]);
      y[o] = convert<T>(w.divisor > 0 ? sum / M(w.divisor) : M(0));
    }
  }
}

template <bool kBackward, bool kAdaptive>
void average(const Tensor& in, const Tensor& out, const Pool2dParams& p, const char* name) {
  const PoolShape s = shape_of(in, out);
  const int64_t n = s.planes * s.Ho * s.Wo;
  if (n == 0) return;
  EMBER_CUDA_DISPATCH_FLOATING(in.dtype(), name, [&] {
    using T = scalar_t;
    avg_pool_kernel<T, kBackward, kAdaptive><<<grid_for(n), kBlock, 0, stream_of(out)>>>(
        static_cast<T*>(in.data_ptr()), static_cast<T*>(out.data_ptr()), s, p);
  });
  EMBER_KERNEL_CHECK();
}

}  // namespace

void CudaBackend::max_pool2d(const Tensor& in, const Tensor& out, const Tensor& indices, const Pool2dParams& p) {
  DeviceGuard guard(out.device().index);
  const PoolShape s = shape_of(in, out);
  const int64_t n = s.planes * s.Ho * s.Wo;
  if (n == 0) return;
  void* idx = indices.defined() ? indices.data_ptr() : nullptr;
  auto pool = [&](auto zero) {
    using T = decltype(zero);
    const T* x = static_cast<const T*>(in.data_ptr());
    T* y = static_cast<T*>(out.data_ptr());
    const cudaStream_t stream = stream_of(out);
    switch (index_kind(indices)) {
      case kNoIndices:
        return max_pool_kernel<T, kNoIndices><<<grid_for(n), kBlock, 0, stream>>>(x, y, idx, s, p);
      case kPositions:
        return max_pool_kernel<T, kPositions><<<grid_for(n), kBlock, 0, stream>>>(x, y, idx, s, p);
      case kTaps:
        return max_pool_kernel<T, kTaps><<<grid_for(n), kBlock, 0, stream>>>(x, y, idx, s, p);
    }
  };
  if (in.dtype() == kUInt8)
    pool(uint8_t{});
  else
    EMBER_CUDA_DISPATCH_FLOATING(in.dtype(), "max_pool2d", [&] { pool(scalar_t{}); });
  EMBER_KERNEL_CHECK();
}

void CudaBackend::max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, const Tensor& grad_in,
                                      const Pool2dParams& p) {
  DeviceGuard guard(grad_in.device().index);
  fill(grad_in, 0);
  const PoolShape s = shape_of(grad_in, grad_out);
  const int64_t n = s.planes * s.Ho * s.Wo;
  if (n == 0) return;
  const void* idx = indices.data_ptr();
  EMBER_CUDA_DISPATCH_FLOATING(grad_in.dtype(), "max_pool2d_backward", [&] {
    using T = scalar_t;
    const T* dy = static_cast<const T*>(grad_out.data_ptr());
    T* dx = static_cast<T*>(grad_in.data_ptr());
    const cudaStream_t stream = stream_of(grad_in);
    if (index_kind(indices) == kTaps)
      max_pool_backward_kernel<T, kTaps><<<grid_for(n), kBlock, 0, stream>>>(dy, idx, dx, s, p);
    else
      max_pool_backward_kernel<T, kPositions><<<grid_for(n), kBlock, 0, stream>>>(dy, idx, dx, s, p);
  });
  EMBER_KERNEL_CHECK();
}

void CudaBackend::avg_pool2d(const Tensor& in, const Tensor& out, const Pool2dParams& p) {
  DeviceGuard guard(out.device().index);
  average<false, false>(in, out, p, "avg_pool2d");
}
void CudaBackend::avg_pool2d_backward(const Tensor& grad_out, const Tensor& grad_in, const Pool2dParams& p) {
  DeviceGuard guard(grad_in.device().index);
  fill(grad_in, 0);
  average<true, false>(grad_in, grad_out, p, "avg_pool2d_backward");
}
void CudaBackend::adaptive_avg_pool2d(const Tensor& in, const Tensor& out) {
  DeviceGuard guard(out.device().index);
  average<false, true>(in, out, Pool2dParams{}, "adaptive_avg_pool2d");
}
void CudaBackend::adaptive_avg_pool2d_backward(const Tensor& grad_out, const Tensor& grad_in) {
  DeviceGuard guard(grad_in.device().index);
  fill(grad_in, 0);
  average<true, true>(grad_in, grad_out, Pool2dParams{}, "adaptive_avg_pool2d_backward");
}

}  // namespace ember::cuda
