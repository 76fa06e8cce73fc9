// 2-D max, average and adaptive average pooling on NCHW tensors, forward and backward. All
// tensors arrive contiguous.
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "ember/tensor/cpu/cpu_backend.h"
#include "ember/tensor/parallel.h"

namespace ember::cpu {
namespace {

// The kernel taps [begin, end) of a pooling window starting at `origin` (stride and padding
// applied) that fall inside [0, size): out-of-bounds taps are skipped by the loop bounds, not
// tested per element.
inline std::pair<int64_t, int64_t> taps_inside(int64_t origin, int64_t kernel, int64_t dilation, int64_t size) {
  const int64_t begin = origin < 0 ? (-origin + dilation - 1) / dilation : 0;
  const int64_t end = std::min(kernel, (size - origin + dilation - 1) / dilation);
  return {begin, std::max(begin, end)};
}

// The maximum of a window and the first tap that holds it, in two branch-free passes (random
// data makes any `v > best` branch unpredictable; this is 2-4x faster). A NaN wins, as in
// PyTorch. Taps [i0, i1) x [j0, j1) at origin + i * dh * W + j * dw. KH, KW > 0 fix the tap
// counts at compile time (the common 2x2 and 3x3 windows, fully inside, get unrolled).
template <class T, int KH = 0, int KW = 0>
inline void window_max(const T* xp, int64_t origin, int64_t W, int64_t i0, int64_t i1, int64_t j0, int64_t j1,
                       int64_t dh, int64_t dw, T& out, int64_t& index) {
  using M = opmath_t<T>;
  if constexpr (KH > 0) {
    i0 = 0, i1 = KH, j0 = 0, j1 = KW;
  }
  M best =
      std::numeric_limits<M>::has_infinity ? -std::numeric_limits<M>::infinity() : std::numeric_limits<M>::lowest();
  int any_nan = 0;
  for (int64_t i = i0; i < i1; ++i)
    for (int64_t j = j0; j < j1; ++j) {
      const M v = M(xp[origin + i * dh * W + j * dw]);
      best = v > best ? v : best;
      any_nan |= (v != v);
    }
  int64_t at = origin + i0 * dh * W + j0 * dw;  // an empty window: its first tap
  for (int64_t i = i1 - 1; i >= i0; --i)
    for (int64_t j = j1 - 1; j >= j0; --j) {
      const int64_t pos = origin + i * dh * W + j * dw;
      const M v = M(xp[pos]);
      const int64_t hit = -static_cast<int64_t>(any_nan ? v != v : v == best);
      at = (pos & hit) | (at & ~hit);
    }
  out = any_nan ? T(std::numeric_limits<M>::quiet_NaN()) : T(best);
  index = at;
}

template <class T>
void max_pool_typed(const Tensor& in, const Tensor& out, const Tensor& indices, const Pool2dParams& p) {
  const int64_t planes = in.size(0) * in.size(1), H = in.size(2), W = in.size(3);
  const int64_t Ho = out.size(2), Wo = out.size(3);
  const int64_t kh = p.kernel[0], kw = p.kernel[1], dh = p.dilation[0], dw = p.dilation[1];
  const T* x = static_cast<const T*>(in.data_ptr());
  T* y = static_cast<T*>(out.data_ptr());
  int64_t* idx = static_cast<int64_t*>(indices.data_ptr());
  // The taps inside the input, per output row and column (the same for every plane; integer
  // divisions per output would cost more than the pooling itself).
  std::vector<std::pair<int64_t, int64_t>> rows(static_cast<size_t>(Ho)), cols(static_cast<size_t>(Wo));
  for (int64_t oh = 0; oh < Ho; ++oh) rows[oh] = taps_inside(oh * p.stride[0] - p.padding[0], kh, dh, H);
  for (int64_t ow = 0; ow < Wo; ++ow) cols[ow] = taps_inside(ow * p.stride[1] - p.padding[1], kw, dw, W);
  const bool dense = dh == 1 && dw == 1;
  parallel_for(0, planes, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(H * W, 1)), [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      const T* xp = x + pl * H * W;
      T* yp = y + pl * Ho * Wo;
      int64_t* ip = idx + pl * Ho * Wo;
      for (int64_t oh = 0; oh < Ho; ++oh) {
        const int64_t h0 = oh * p.stride[0] - p.padding[0];
        const auto [i0, i1] = rows[oh];
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const int64_t w0 = ow * p.stride[1] - p.padding[1];
          const auto [j0, j1] = cols[ow];
          const int64_t o = oh * Wo + ow, origin = h0 * W + w0;
          const bool inside = dense && i0 == 0 && i1 == kh && j0 == 0 && j1 == kw;
          if (inside && kh == 2 && kw == 2)
            window_max<T, 2, 2>(xp, origin, W, 0, 2, 0, 2, 1, 1, yp[o], ip[o]);
          else if (inside && kh == 3 && kw == 3)
            window_max<T, 3, 3>(xp, origin, W, 0, 3, 0, 3, 1, 1, yp[o], ip[o]);
          else
            window_max<T>(xp, origin, W, i0, i1, j0, j1, dh, dw, yp[o], ip[o]);
        }
      }
    }
  });
}

// An averaging window: rows [h0, h1), columns [w0, w1), and what its sum is divided by.
struct Window {
  int64_t h0, h1, w0, w1, divisor;
};

// avg_pool2d's window (PyTorch's rule: the divisor counts padding unless
// count_include_pad is off, but never the part of a ceil_mode window past the padding).
Window avg_window(int64_t oh, int64_t ow, int64_t H, int64_t W, const Pool2dParams& p) {
  Window w{oh * p.stride[0] - p.padding[0], 0, ow * p.stride[1] - p.padding[1], 0, 0};
  w.h1 = std::min(w.h0 + p.kernel[0], H + p.padding[0]);
  w.w1 = std::min(w.w0 + p.kernel[1], W + p.padding[1]);
  const int64_t padded_count = (w.h1 - w.h0) * (w.w1 - w.w0);
  w.h0 = std::max<int64_t>(w.h0, 0);
  w.w0 = std::max<int64_t>(w.w0, 0);
  w.h1 = std::min(w.h1, H);
  w.w1 = std::min(w.w1, W);
  w.divisor = p.count_include_pad ? padded_count : (w.h1 - w.h0) * (w.w1 - w.w0);
  return w;
}

// adaptive_avg_pool2d's window: [floor(o * H / Ho), ceil((o + 1) * H / Ho)).
Window adaptive_window(int64_t oh, int64_t ow, int64_t H, int64_t W, int64_t Ho, int64_t Wo) {
  Window w{oh * H / Ho, ((oh + 1) * H + Ho - 1) / Ho, ow * W / Wo, ((ow + 1) * W + Wo - 1) / Wo, 0};
  w.divisor = (w.h1 - w.h0) * (w.w1 - w.w0);
  return w;
}

// Forward: y[o] = sum(x[window(o)]) / divisor. Backward: x[window(o)] += y[o] / divisor
// (then `x` is the input gradient, zeroed by the caller, and `y` the output gradient).
// Planes are independent, so both run one plane per thread.
template <class T, bool kBackward, class WindowOf>
void average_pool(const Tensor& in, const Tensor& out, const WindowOf& window_of) {
  using M = opmath_t<T>;
  const int64_t planes = in.size(0) * in.size(1), H = in.size(2), W = in.size(3);
  const int64_t Ho = out.size(2), Wo = out.size(3);
  T* x = static_cast<T*>(in.data_ptr());
  T* y = static_cast<T*>(out.data_ptr());
  parallel_for(0, planes, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(H * W, 1)), [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      T* xp = x + pl * H * W;
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const Window w = window_of(oh, ow, H, W, Ho, Wo);
          T& yo = y[(pl * Ho + oh) * Wo + ow];
          if (kBackward) {
            if (w.divisor <= 0) continue;
            const M share = M(yo) / M(w.divisor);
            for (int64_t h = w.h0; h < w.h1; ++h)
              for (int64_t c = w.w0; c < w.w1; ++c) xp[h * W + c] = T(M(xp[h * W + c]) + share);
          } else {
            M sum = 0;
            for (int64_t h = w.h0; h < w.h1; ++h)
              for (int64_t c = w.w0; c < w.w1; ++c) sum += M(xp[h * W + c]);
            yo = T(w.divisor > 0 ? sum / M(w.divisor) : M(0));
          }
        }
    }
  });
}

}  // namespace

// in [N, C, H, W] -> out, indices [N, C, Ho, Wo]
void CpuBackend::max_pool2d(const Tensor& in, const Tensor& out, const Tensor& indices, const Pool2dParams& p) {
  if (in.dtype() == kUInt8) return max_pool_typed<uint8_t>(in, out, indices, p);  // quantized models' activations
  EMBER_DISPATCH_FLOATING(in.dtype(), "max_pool2d", [&] { max_pool_typed<scalar_t>(in, out, indices, p); });
}
// grad_out, indices [N, C, Ho, Wo] -> grad_in [N, C, H, W] (zeroed here)
void CpuBackend::max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, const Tensor& grad_in) {
  const int64_t planes = grad_in.size(0) * grad_in.size(1), HW = grad_in.size(2) * grad_in.size(3);
  const int64_t outs = grad_out.size(2) * grad_out.size(3);
  const int64_t* idx = static_cast<const int64_t*>(indices.data_ptr());
  for (int64_t k = 0; k < planes * outs; ++k)  // indices come from max_pool2d; check them anyway
    EMBER_CHECK(idx[k] >= 0 && idx[k] < HW, "max_pool2d_backward: index ", idx[k], " is outside a plane of ", HW,
                " elements");
  EMBER_DISPATCH_FLOATING(grad_in.dtype(), "max_pool2d_backward", [&] {
    const scalar_t* dy = static_cast<const scalar_t*>(grad_out.data_ptr());
    scalar_t* dx = static_cast<scalar_t*>(grad_in.data_ptr());
    parallel_for(0, planes, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(HW, 1)), [&](int64_t b, int64_t e) {
      for (int64_t pl = b; pl < e; ++pl) {
        scalar_t* dxp = dx + pl * HW;
        std::fill(dxp, dxp + HW, scalar_t(0));
        for (int64_t o = pl * outs; o < (pl + 1) * outs; ++o)
          dxp[idx[o]] = scalar_t(opmath_t<scalar_t>(dxp[idx[o]]) + opmath_t<scalar_t>(dy[o]));
      }
    });
  });
}

// in [N, C, H, W] -> out [N, C, Ho, Wo]
void CpuBackend::avg_pool2d(const Tensor& in, const Tensor& out, const Pool2dParams& p) {
  EMBER_DISPATCH_FLOATING(in.dtype(), "avg_pool2d", [&] {
    average_pool<scalar_t, false>(in, out, [&](int64_t oh, int64_t ow, int64_t H, int64_t W, int64_t, int64_t) {
      return avg_window(oh, ow, H, W, p);
    });
  });
}
// grad_out [N, C, Ho, Wo] -> grad_in [N, C, H, W] (zeroed here)
void CpuBackend::avg_pool2d_backward(const Tensor& grad_out, const Tensor& grad_in, const Pool2dParams& p) {
  fill(grad_in, 0);
  EMBER_DISPATCH_FLOATING(grad_in.dtype(), "avg_pool2d_backward", [&] {
    average_pool<scalar_t, true>(
        grad_in, grad_out,
        [&](int64_t oh, int64_t ow, int64_t H, int64_t W, int64_t, int64_t) { return avg_window(oh, ow, H, W, p); });
  });
}
// in [N, C, H, W] -> out [N, C, Ho, Wo]
void CpuBackend::adaptive_avg_pool2d(const Tensor& in, const Tensor& out) {
  EMBER_DISPATCH_FLOATING(in.dtype(), "adaptive_avg_pool2d",
                          [&] { average_pool<scalar_t, false>(in, out, adaptive_window); });
}
// grad_out [N, C, Ho, Wo] -> grad_in [N, C, H, W] (zeroed here)
void CpuBackend::adaptive_avg_pool2d_backward(const Tensor& grad_out, const Tensor& grad_in) {
  fill(grad_in, 0);
  EMBER_DISPATCH_FLOATING(grad_in.dtype(), "adaptive_avg_pool2d_backward",
                          [&] { average_pool<scalar_t, true>(grad_in, grad_out, adaptive_window); });
}

}  // namespace ember::cpu
