// 2-D convolution (im2col + GEMM) and pooling on NCHW tensors. All tensors arrive contiguous.
#include <Eigen/Core>
#include <cmath>
#include <limits>
#include <vector>

#include "ember/tensor/cpu/kernels.h"
#include "ember/tensor/ops.h"
#include "ember/tensor/parallel.h"

namespace ember::cpu {
namespace {

template <class T>
using MatR = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
template <class T>
using CMatR = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;

// sample(n, thread) for every n in [0, N): one sample per thread, each thread with its own
// workspace slot, Eigen serial inside; with one thread, Eigen parallelizes each product.
template <class F>
void for_each_sample(int64_t N, int threads, const F& sample) {
  if (threads > 1) {
#ifdef EMBER_WITH_OPENMP
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t n = 0; n < N; ++n) sample(n, omp_get_thread_num());
    return;
#endif
  }
  for (int64_t n = 0; n < N; ++n) sample(n, 0);
}

// col [Cg*kH*kW, Ho*Wo] <- x [Cg, H, W]: each column is one receptive field, zero-padded.
template <class T>
void im2col(const T* x, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW, int64_t Ho, int64_t Wo,
            const Conv2dParams& p, T* col) {
  for (int64_t c = 0; c < C; ++c)
    for (int64_t i = 0; i < kH; ++i)
      for (int64_t j = 0; j < kW; ++j) {
        T* row = col + ((c * kH + i) * kW + j) * Ho * Wo;
        for (int64_t oh = 0; oh < Ho; ++oh) {
          const int64_t h = oh * p.stride[0] - p.padding[0] + i * p.dilation[0];
          T* dst = row + oh * Wo;
          if (h < 0 || h >= H) {
            for (int64_t ow = 0; ow < Wo; ++ow) dst[ow] = T(0);
            continue;
          }
          const T* src = x + (c * H + h) * W;
          const int64_t w0 = j * p.dilation[1] - p.padding[1];
          for (int64_t ow = 0; ow < Wo; ++ow) {
            const int64_t w = ow * p.stride[1] + w0;
            dst[ow] = (w >= 0 && w < W) ? src[w] : T(0);
          }
        }
      }
}

// x [Cg, H, W] += col [Cg*kH*kW, Ho*Wo]: the adjoint of im2col (overlapping windows add up).
template <class T>
void col2im(const T* col, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW, int64_t Ho, int64_t Wo,
            const Conv2dParams& p, T* x) {
  for (int64_t c = 0; c < C; ++c)
    for (int64_t i = 0; i < kH; ++i)
      for (int64_t j = 0; j < kW; ++j) {
        const T* row = col + ((c * kH + i) * kW + j) * Ho * Wo;
        for (int64_t oh = 0; oh < Ho; ++oh) {
          const int64_t h = oh * p.stride[0] - p.padding[0] + i * p.dilation[0];
          if (h < 0 || h >= H) continue;
          T* dst = x + (c * H + h) * W;
          const int64_t w0 = j * p.dilation[1] - p.padding[1];
          for (int64_t ow = 0; ow < Wo; ++ow) {
            const int64_t w = ow * p.stride[1] + w0;
            if (w >= 0 && w < W) dst[w] += row[oh * Wo + ow];
          }
        }
      }
}

template <class T>
void conv2d_typed(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& out,
                  const Conv2dParams& p) {
  const int64_t N = input.size(0), C = input.size(1), H = input.size(2), W = input.size(3);
  const int64_t O = weight.size(0), kH = weight.size(2), kW = weight.size(3);
  const int64_t Ho = out.size(2), Wo = out.size(3), G = p.groups, Cg = C / G, Og = O / G;
  const int64_t rows = Cg * kH * kW, cols = Ho * Wo;
  const bool pointwise = kH == 1 && kW == 1 && p.stride[0] == 1 && p.stride[1] == 1 && p.padding[0] == 0 &&
                         p.padding[1] == 0;  // a 1x1 conv is a plain GEMM on the input
  const T* x = static_cast<const T*>(input.data_ptr());
  const T* w = static_cast<const T*>(weight.data_ptr());
  const T* b = bias.defined() ? static_cast<const T*>(bias.data_ptr()) : nullptr;
  T* y = static_cast<T*>(out.data_ptr());
  // Several samples at once: one per thread with its own column buffer, Eigen serial
  // inside. One sample: Eigen parallelizes the product itself.
  const int threads = static_cast<int>(std::min<int64_t>(parallel_threads(), N));
  Tensor workspace = pointwise ? Tensor() : empty({threads, rows * cols}, dtype_of<T>::value);
  auto sample = [&](int64_t n, int tid) {
    for (int64_t g = 0; g < G; ++g) {
      const T* xg = x + (n * C + g * Cg) * H * W;
      const T* colp = xg;
      if (!pointwise) {
        T* buf = static_cast<T*>(workspace.data_ptr()) + tid * rows * cols;
        im2col(xg, Cg, H, W, kH, kW, Ho, Wo, p, buf);
        colp = buf;
      }
      MatR<T> Y(y + (n * O + g * Og) * cols, Og, cols);
      Y.noalias() = CMatR<T>(w + g * Og * rows, Og, rows) * CMatR<T>(colp, rows, cols);
      if (b)
        for (int64_t o = 0; o < Og; ++o) Y.row(o).array() += b[g * Og + o];
    }
  };
  for_each_sample(N, threads, sample);
}

// dx (zeroed by the caller), dw, db from dy; any of them may be null.
template <class T>
void conv2d_backward_typed(const Tensor& input, const Tensor& weight, const Tensor& grad_out, T* dx, T* dw, T* db,
                           const Conv2dParams& p) {
  const int64_t N = input.size(0), C = input.size(1), H = input.size(2), W = input.size(3);
  const int64_t O = weight.size(0), kH = weight.size(2), kW = weight.size(3);
  const int64_t Ho = grad_out.size(2), Wo = grad_out.size(3), G = p.groups, Cg = C / G, Og = O / G;
  const int64_t rows = Cg * kH * kW, cols = Ho * Wo;
  const bool pointwise =
      kH == 1 && kW == 1 && p.stride[0] == 1 && p.stride[1] == 1 && p.padding[0] == 0 && p.padding[1] == 0;
  const T* x = static_cast<const T*>(input.data_ptr());
  const T* w = static_cast<const T*>(weight.data_ptr());
  const T* dy = static_cast<const T*>(grad_out.data_ptr());
  if (db)  // one output channel per task: the sum of its gradient over samples and positions
    parallel_for(0, O, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(N * cols, 1)), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        T s = T(0);
        for (int64_t n = 0; n < N; ++n) {
          const T* d = dy + (n * O + o) * cols;
          for (int64_t k = 0; k < cols; ++k) s += d[k];
        }
        db[o] = s;
      }
    });
  if (!dx && !dw) return;
  const int threads = static_cast<int>(std::min<int64_t>(parallel_threads(), N));
  // Per thread: a column buffer and, for dw, a partial sum over its samples.
  Tensor col_ws = empty({threads, pointwise ? 1 : rows * cols}, dtype_of<T>::value);
  Tensor dw_ws = dw ? zeros({threads, O * rows}, dtype_of<T>::value) : Tensor();
  auto sample = [&](int64_t n, int tid) {
    T* col = static_cast<T*>(col_ws.data_ptr()) + tid * (pointwise ? 1 : rows * cols);
    for (int64_t g = 0; g < G; ++g) {
      const T* xg = x + (n * C + g * Cg) * H * W;
      CMatR<T> Wg(w + g * Og * rows, Og, rows);
      CMatR<T> dY(dy + (n * O + g * Og) * cols, Og, cols);
      if (dw) {
        const T* colp = xg;
        if (!pointwise) {
          im2col(xg, Cg, H, W, kH, kW, Ho, Wo, p, col);
          colp = col;
        }
        MatR<T> dWg(static_cast<T*>(dw_ws.data_ptr()) + tid * O * rows + g * Og * rows, Og, rows);
        dWg.noalias() += dY * CMatR<T>(colp, rows, cols).transpose();
      }
      if (dx) {
        T* dxg = dx + (n * C + g * Cg) * H * W;
        if (pointwise) {
          MatR<T>(dxg, rows, cols).noalias() += Wg.transpose() * dY;
        } else {
          MatR<T>(col, rows, cols).noalias() = Wg.transpose() * dY;
          col2im(col, Cg, H, W, kH, kW, Ho, Wo, p, dxg);
        }
      }
    }
  };
  for_each_sample(N, threads, sample);
  if (dw) {
    const T* parts = static_cast<const T*>(dw_ws.data_ptr());
    for (int64_t k = 0; k < O * rows; ++k) {
      T s = T(0);
      for (int t = 0; t < threads; ++t) s += parts[t * O * rows + k];
      dw[k] = s;
    }
  }
}

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
  M best = -std::numeric_limits<M>::infinity();
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

// input [N, C, H, W], weight [O, C/g, kH, kW], bias [O] -> out [N, O, Ho, Wo]
void conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& out, const Conv2dParams& p) {
  switch (input.dtype()) {
    case kFloat32:
      return conv2d_typed<float>(input, weight, bias, out, p);
    case kFloat64:
      return conv2d_typed<double>(input, weight, bias, out, p);
    case kFloat16:
    case kBFloat16: {  // compute in float32
      Tensor of = empty(out.sizes(), kFloat32);
      conv2d_typed<float>(native::to(input, kFloat32), native::to(weight, kFloat32), bias.defined() ? native::to(bias, kFloat32) : bias, of, p);
      copy(of, out);
      return;
    }
    default:
      throw Error(detail::concat("conv2d: expected a floating point dtype, got ", input.dtype()));
  }
}

// in [N, C, H, W] -> out, indices [N, C, Ho, Wo]
void max_pool2d(const Tensor& in, const Tensor& out, const Tensor& indices, const Pool2dParams& p) {
  EMBER_DISPATCH_FLOATING(in.dtype(), "max_pool2d", [&] { max_pool_typed<scalar_t>(in, out, indices, p); });
}
// grad_out, indices [N, C, Ho, Wo] -> grad_in [N, C, H, W] (zeroed here)
void max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, const Tensor& grad_in) {
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
void avg_pool2d(const Tensor& in, const Tensor& out, const Pool2dParams& p) {
  EMBER_DISPATCH_FLOATING(in.dtype(), "avg_pool2d", [&] {
    average_pool<scalar_t, false>(in, out, [&](int64_t oh, int64_t ow, int64_t H, int64_t W, int64_t, int64_t) {
      return avg_window(oh, ow, H, W, p);
    });
  });
}
// grad_out [N, C, Ho, Wo] -> grad_in [N, C, H, W] (zeroed here)
void avg_pool2d_backward(const Tensor& grad_out, const Tensor& grad_in, const Pool2dParams& p) {
  fill(grad_in, 0);
  EMBER_DISPATCH_FLOATING(grad_in.dtype(), "avg_pool2d_backward", [&] {
    average_pool<scalar_t, true>(
        grad_in, grad_out,
        [&](int64_t oh, int64_t ow, int64_t H, int64_t W, int64_t, int64_t) { return avg_window(oh, ow, H, W, p); });
  });
}
// in [N, C, H, W] -> out [N, C, Ho, Wo]
void adaptive_avg_pool2d(const Tensor& in, const Tensor& out) {
  EMBER_DISPATCH_FLOATING(in.dtype(), "adaptive_avg_pool2d",
                          [&] { average_pool<scalar_t, false>(in, out, adaptive_window); });
}
// grad_out [N, C, Ho, Wo] -> grad_in [N, C, H, W] (zeroed here)
void adaptive_avg_pool2d_backward(const Tensor& grad_out, const Tensor& grad_in) {
  fill(grad_in, 0);
  EMBER_DISPATCH_FLOATING(grad_in.dtype(), "adaptive_avg_pool2d_backward",
                          [&] { average_pool<scalar_t, true>(grad_in, grad_out, adaptive_window); });
}

// The gradients of conv2d; grad_input is zeroed here, undefined outputs are skipped.
void conv2d_backward(const Tensor& input, const Tensor& weight, const Tensor& grad_out, const Tensor& grad_input,
                     const Tensor& grad_weight, const Tensor& grad_bias, const Conv2dParams& p) {
  if (grad_input.defined()) fill(grad_input, 0);
  auto ptr = [](const Tensor& t, auto* tag) {
    return t.defined() ? static_cast<decltype(tag)>(t.data_ptr()) : nullptr;
  };
  switch (input.dtype()) {
    case kFloat32:
      return conv2d_backward_typed<float>(input, weight, grad_out, ptr(grad_input, (float*)nullptr),
                                          ptr(grad_weight, (float*)nullptr), ptr(grad_bias, (float*)nullptr), p);
    case kFloat64:
      return conv2d_backward_typed<double>(input, weight, grad_out, ptr(grad_input, (double*)nullptr),
                                           ptr(grad_weight, (double*)nullptr), ptr(grad_bias, (double*)nullptr), p);
    default:
      throw Error(detail::concat("conv2d backward: expected float32 or float64, got ", input.dtype(),
                                 " (16-bit convolutions compute in float32 and are differentiated there)"));
  }
}

}  // namespace ember::cpu
