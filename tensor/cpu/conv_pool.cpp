// 2-D convolution (im2col + GEMM) and pooling on NCHW tensors. All tensors arrive contiguous.
#include <Eigen/Core>
#include <cmath>
#include <limits>

#include "tensor/cpu/kernels.h"
#include "tensor/ops.h"
#include "tensor/parallel.h"

namespace ember::cpu {
namespace {

template <class T>
using MatR = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
template <class T>
using CMatR = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;

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
  if (threads > 1) {
#ifdef EMBER_WITH_OPENMP
#pragma omp parallel for num_threads(threads) schedule(static)
#endif
    for (int64_t n = 0; n < N; ++n) {
#ifdef EMBER_WITH_OPENMP
      sample(n, omp_get_thread_num());
#else
      sample(n, 0);
#endif
    }
  } else {
    for (int64_t n = 0; n < N; ++n) sample(n, 0);
  }
}

template <class T>
void max_pool_typed(const Tensor& in, const Tensor& out, const Tensor& indices, const Pool2dParams& p) {
  using M = opmath_t<T>;
  const int64_t planes = in.size(0) * in.size(1), H = in.size(2), W = in.size(3);
  const int64_t Ho = out.size(2), Wo = out.size(3);
  const T* x = static_cast<const T*>(in.data_ptr());
  T* y = static_cast<T*>(out.data_ptr());
  int64_t* idx = static_cast<int64_t*>(indices.data_ptr());
  parallel_for(0, planes, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(H * W, 1)), [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      const T* xp = x + pl * H * W;
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow) {
          M best = -std::numeric_limits<M>::infinity();
          int64_t at = -1;
          for (int64_t i = 0; i < p.kernel[0]; ++i) {
            const int64_t h = oh * p.stride[0] - p.padding[0] + i * p.dilation[0];
            if (h < 0 || h >= H) continue;
            for (int64_t j = 0; j < p.kernel[1]; ++j) {
              const int64_t w = ow * p.stride[1] - p.padding[1] + j * p.dilation[1];
              if (w < 0 || w >= W) continue;
              const M v = M(xp[h * W + w]);
              if (v > best || v != v || at < 0) {
                best = v;
                at = h * W + w;
                if (v != v) goto done;  // NaN wins, like PyTorch
              }
            }
          }
        done:
          y[(pl * Ho + oh) * Wo + ow] = T(best);
          idx[(pl * Ho + oh) * Wo + ow] = at;
        }
    }
  });
}

template <class T>
void avg_pool_typed(const Tensor& in, const Tensor& out, const Pool2dParams& p) {
  using M = opmath_t<T>;
  const int64_t planes = in.size(0) * in.size(1), H = in.size(2), W = in.size(3);
  const int64_t Ho = out.size(2), Wo = out.size(3);
  const T* x = static_cast<const T*>(in.data_ptr());
  T* y = static_cast<T*>(out.data_ptr());
  parallel_for(0, planes, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(H * W, 1)), [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      const T* xp = x + pl * H * W;
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow) {
          int64_t h0 = oh * p.stride[0] - p.padding[0], w0 = ow * p.stride[1] - p.padding[1];
          int64_t h1 = std::min(h0 + p.kernel[0], H + p.padding[0]), w1 = std::min(w0 + p.kernel[1], W + p.padding[1]);
          const int64_t padded_count = (h1 - h0) * (w1 - w0);
          h0 = std::max<int64_t>(h0, 0);
          w0 = std::max<int64_t>(w0, 0);
          h1 = std::min(h1, H);
          w1 = std::min(w1, W);
          M sum = 0;
          for (int64_t h = h0; h < h1; ++h)
            for (int64_t w = w0; w < w1; ++w) sum += M(xp[h * W + w]);
          const int64_t count = p.count_include_pad ? padded_count : (h1 - h0) * (w1 - w0);
          y[(pl * Ho + oh) * Wo + ow] = T(count > 0 ? sum / M(count) : M(0));
        }
    }
  });
}

template <class T>
void adaptive_avg_typed(const Tensor& in, const Tensor& out) {
  using M = opmath_t<T>;
  const int64_t planes = in.size(0) * in.size(1), H = in.size(2), W = in.size(3);
  const int64_t Ho = out.size(2), Wo = out.size(3);
  const T* x = static_cast<const T*>(in.data_ptr());
  T* y = static_cast<T*>(out.data_ptr());
  parallel_for(0, planes, 1, [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl)
      for (int64_t oh = 0; oh < Ho; ++oh) {
        const int64_t h0 = oh * H / Ho, h1 = ((oh + 1) * H + Ho - 1) / Ho;
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const int64_t w0 = ow * W / Wo, w1 = ((ow + 1) * W + Wo - 1) / Wo;
          M sum = 0;
          for (int64_t h = h0; h < h1; ++h)
            for (int64_t w = w0; w < w1; ++w) sum += M(x[(pl * H + h) * W + w]);
          y[(pl * Ho + oh) * Wo + ow] = T(sum / M((h1 - h0) * (w1 - w0)));
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
      conv2d_typed<float>(input.to(kFloat32), weight.to(kFloat32), bias.defined() ? bias.to(kFloat32) : bias, of, p);
      copy(of, out);
      return;
    }
    default:
      throw Error(detail::concat("conv2d: not implemented for dtype ", input.dtype()));
  }
}

// in [N, C, H, W] -> out, indices [N, C, Ho, Wo]
void max_pool2d(const Tensor& in, const Tensor& out, const Tensor& indices, const Pool2dParams& p) {
  EMBER_DISPATCH_FLOATING(in.dtype(), "max_pool2d", [&] { max_pool_typed<scalar_t>(in, out, indices, p); });
}
// in [N, C, H, W] -> out [N, C, Ho, Wo]
void avg_pool2d(const Tensor& in, const Tensor& out, const Pool2dParams& p) {
  EMBER_DISPATCH_FLOATING(in.dtype(), "avg_pool2d", [&] { avg_pool_typed<scalar_t>(in, out, p); });
}
// in [N, C, H, W] -> out [N, C, Ho, Wo]
void adaptive_avg_pool2d(const Tensor& in, const Tensor& out) {
  EMBER_DISPATCH_FLOATING(in.dtype(), "adaptive_avg_pool2d", [&] { adaptive_avg_typed<scalar_t>(in, out); });
}

}  // namespace ember::cpu
