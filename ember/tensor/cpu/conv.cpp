// 2-D convolution on NCHW tensors: im2col + GEMM (Eigen), forward and backward. All tensors
// arrive contiguous; float16/bfloat16 compute in float32.
#include <Eigen/Core>
#include <cmath>
#include <vector>

#include "ember/tensor/cpu/cpu_backend.h"
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

}  // namespace

// input [N, C, H, W], weight [O, C/g, kH, kW], bias [O] -> out [N, O, Ho, Wo]
void CpuBackend::conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& out,
                        const Conv2dParams& p) {
  switch (input.dtype()) {
    case kFloat32:
      return conv2d_typed<float>(input, weight, bias, out, p);
    case kFloat64:
      return conv2d_typed<double>(input, weight, bias, out, p);
    case kFloat16:
    case kBFloat16: {  // compute in float32
      Tensor of = empty(out.sizes(), kFloat32);
      conv2d_typed<float>(native::to(input, kFloat32), native::to(weight, kFloat32),
                          bias.defined() ? native::to(bias, kFloat32) : bias, of, p);
      copy(of, out);
      return;
    }
    default:
      throw Error(detail::concat("conv2d: expected a floating point dtype, got ", input.dtype()));
  }
}

// The gradients of conv2d; grad_input is zeroed here, undefined outputs are skipped.
void CpuBackend::conv2d_backward(const Tensor& input, const Tensor& weight, const Tensor& grad_out,
                                 const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                                 const Conv2dParams& p) {
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
