// Winograd F(2x2, 3x3) convolution (Lavin & Gray, "Fast Algorithms for Convolutional Neural
// Networks", 2015) for 3x3 kernels with stride 1: each 2x2 output tile costs 16 instead of 36
// multiplications per (input, output) channel pair. Per tile, with d the 4x4 input patch and
// g the 3x3 kernel:
//     Y = Aᵀ [ (G g Gᵀ) ⊙ (Bᵀ d B) ] A
// and the sum over input channels of the elementwise product is 16 GEMMs, one per position
// ξ of the 4x4 transformed tile: M[ξ] [O, tiles] = U[ξ] [O, C] x V[ξ] [C, tiles].
// The input gradient of a stride-1 convolution is itself such a convolution (of the output
// gradient with the flipped, transposed kernel), so conv2d_backward uses this path too.
#include <Eigen/Core>
#include <atomic>

#include "tensor/cpu/kernels.h"
#include "tensor/parallel.h"

#ifdef EMBER_WITH_OPENMP
#include <omp.h>
#endif

namespace ember::cpu {

namespace {

std::atomic<bool> winograd_on{true};

template <class T>
using MatR = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
template <class T>
using CMatR = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;

// U [16, O, C] <- G g Gᵀ for every 3x3 kernel g = w[o, c] (flip: the kernel rotated by 180°
// with o and c swapped, w [C, O, 3, 3] read as [O, C], for the input gradient).
template <class T>
void transform_weights(const T* w, int64_t O, int64_t C, bool flip, T* U) {
  for (int64_t o = 0; o < O; ++o)
    for (int64_t c = 0; c < C; ++c) {
      T g[3][3];
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
          g[i][j] = flip ? w[((c * O + o) * 3 + (2 - i)) * 3 + (2 - j)] : w[((o * C + c) * 3 + i) * 3 + j];
      T gg[4][3];  // G g
      for (int j = 0; j < 3; ++j) {
        gg[0][j] = g[0][j];
        gg[1][j] = T(0.5) * (g[0][j] + g[1][j] + g[2][j]);
        gg[2][j] = T(0.5) * (g[0][j] - g[1][j] + g[2][j]);
        gg[3][j] = g[2][j];
      }
      for (int i = 0; i < 4; ++i) {  // (G g) Gᵀ
        const T u[4] = {gg[i][0], T(0.5) * (gg[i][0] + gg[i][1] + gg[i][2]), T(0.5) * (gg[i][0] - gg[i][1] + gg[i][2]),
                        gg[i][2]};
        for (int j = 0; j < 4; ++j) U[((i * 4 + j) * O + o) * C + c] = u[j];
      }
    }
}

// V [16, C, ld] (columns [col0, col0 + tiles)) <- Bᵀ d B for every tile of one sample.
template <class T>
void transform_input(const T* x, int64_t C, int64_t H, int64_t W, int64_t ph, int64_t pw, int64_t th, int64_t tw, T* V,
                     int64_t ld, int64_t col0) {
  for (int64_t c = 0; c < C; ++c) {
    const T* xc = x + c * H * W;
    for (int64_t ty = 0; ty < th; ++ty)
      for (int64_t tx = 0; tx < tw; ++tx) {
        T d[4][4];
        const int64_t h0 = 2 * ty - ph, w0 = 2 * tx - pw;
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 4; ++j) {
            const int64_t h = h0 + i, w = w0 + j;
            d[i][j] = (h >= 0 && h < H && w >= 0 && w < W) ? xc[h * W + w] : T(0);
          }
        T bd[4][4];  // Bᵀ d
        for (int j = 0; j < 4; ++j) {
          bd[0][j] = d[0][j] - d[2][j];
          bd[1][j] = d[1][j] + d[2][j];
          bd[2][j] = d[2][j] - d[1][j];
          bd[3][j] = d[1][j] - d[3][j];
        }
        const int64_t col = col0 + ty * tw + tx;
        for (int i = 0; i < 4; ++i) {  // (Bᵀ d) B
          const T v[4] = {bd[i][0] - bd[i][2], bd[i][1] + bd[i][2], bd[i][2] - bd[i][1], bd[i][1] - bd[i][3]};
          for (int j = 0; j < 4; ++j) V[((i * 4 + j) * C + c) * ld + col] = v[j];
        }
      }
  }
}

// y [O, Ho, Wo] of one sample <- Aᵀ m A (+ bias) for every tile, m from M [16, O, ld].
template <class T>
void transform_output(const T* M, int64_t O, int64_t Ho, int64_t Wo, int64_t th, int64_t tw, const T* bias, T* y,
                      int64_t ld, int64_t col0) {
  for (int64_t o = 0; o < O; ++o) {
    const T b = bias ? bias[o] : T(0);
    T* yo = y + o * Ho * Wo;
    for (int64_t ty = 0; ty < th; ++ty)
      for (int64_t tx = 0; tx < tw; ++tx) {
        const int64_t col = col0 + ty * tw + tx;
        T m[4][4];
        for (int k = 0; k < 16; ++k) m[k / 4][k % 4] = M[(k * O + o) * ld + col];
        T s[2][4];  // Aᵀ m
        for (int j = 0; j < 4; ++j) {
          s[0][j] = m[0][j] + m[1][j] + m[2][j];
          s[1][j] = m[1][j] - m[2][j] - m[3][j];
        }
        for (int i = 0; i < 2; ++i) {
          const int64_t h = 2 * ty + i;
          if (h >= Ho) break;
          const T out[2] = {s[i][0] + s[i][1] + s[i][2], s[i][1] - s[i][2] - s[i][3]};
          for (int j = 0; j < 2; ++j) {
            const int64_t w = 2 * tx + j;
            if (w < Wo) yo[h * Wo + w] = out[j] + b;
          }
        }
      }
  }
}

template <class T>
void winograd_typed(const T* x, const T* w, const T* bias, T* y, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O,
                    int64_t ph, int64_t pw, bool flip) {
  const int64_t Ho = H + 2 * ph - 2, Wo = W + 2 * pw - 2, th = (Ho + 1) / 2, tw = (Wo + 1) / 2;
  const int64_t tiles = th * tw;
  std::vector<T> U(static_cast<size_t>(16 * O * C));
  transform_weights(w, O, C, flip, U.data());
  const int threads = static_cast<int>(std::min<int64_t>(parallel_threads(), N));
  // Samples per block: ~1024 tile columns per GEMM, at least one block per thread.
  const int64_t B =
      std::max<int64_t>(1, std::min<int64_t>(std::max<int64_t>(1, 1024 / tiles), (N + threads - 1) / threads));
  const int64_t ld = B * tiles, blocks = (N + B - 1) / B;
  std::vector<T> V(static_cast<size_t>(threads * 16 * C * ld)), M(static_cast<size_t>(threads * 16 * O * ld));
  auto block = [&](int64_t k, int tid) {
    const int64_t n0 = k * B, n1 = std::min(N, n0 + B), cols = (n1 - n0) * tiles;
    T* v = V.data() + tid * 16 * C * ld;
    T* m = M.data() + tid * 16 * O * ld;
    for (int64_t n = n0; n < n1; ++n)
      transform_input(x + n * C * H * W, C, H, W, ph, pw, th, tw, v, ld, (n - n0) * tiles);
    using Stride = Eigen::OuterStride<>;
    for (int xi = 0; xi < 16; ++xi) {
      Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, 0, Stride> vm(
          v + xi * C * ld, C, cols, Stride(ld));
      Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, 0, Stride> mm(m + xi * O * ld, O,
                                                                                                  cols, Stride(ld));
      mm.noalias() = CMatR<T>(U.data() + xi * O * C, O, C) * vm;
    }
    for (int64_t n = n0; n < n1; ++n)
      transform_output(m, O, Ho, Wo, th, tw, bias, y + n * O * Ho * Wo, ld, (n - n0) * tiles);
  };
  if (threads > 1) {
#ifdef EMBER_WITH_OPENMP
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t k = 0; k < blocks; ++k) block(k, omp_get_thread_num());
    return;
#endif
  }
  for (int64_t k = 0; k < blocks; ++k) block(k, 0);
}

}  // namespace

void set_winograd_enabled(bool enabled) { winograd_on = enabled; }

bool winograd_applies(const Tensor& input, const Tensor& weight, const Conv2dParams& p) {
  // Channels below 8 leave the GEMMs too thin to beat im2col (the first layer of a CNN).
  return winograd_on && (input.dtype() == kFloat32 || input.dtype() == kFloat64) && weight.size(2) == 3 &&
         weight.size(3) == 3 && p.stride[0] == 1 && p.stride[1] == 1 && p.dilation[0] == 1 && p.dilation[1] == 1 &&
         p.groups == 1 && p.padding[0] <= 2 && p.padding[1] <= 2 && input.size(1) >= 8 && weight.size(0) >= 8;
}

// out [N, O, Ho, Wo] = conv2d(input [N, C, H, W], weight [O, C, 3, 3]) + bias, stride 1
void winograd_conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& out,
                     const Conv2dParams& p) {
  EMBER_DISPATCH_FLOATING(input.dtype(), "winograd_conv2d", [&] {
    if constexpr (std::is_same<scalar_t, float>::value || std::is_same<scalar_t, double>::value) {
      winograd_typed<scalar_t>(static_cast<const scalar_t*>(input.data_ptr()),
                               static_cast<const scalar_t*>(weight.data_ptr()),
                               bias.defined() ? static_cast<const scalar_t*>(bias.data_ptr()) : nullptr,
                               static_cast<scalar_t*>(out.data_ptr()), input.size(0), input.size(1), input.size(2),
                               input.size(3), weight.size(0), p.padding[0], p.padding[1], false);
    } else {
      throw Error("winograd_conv2d: float32 and float64 only");
    }
  });
}

// grad_input [N, C, H, W] = conv2d(grad_out [N, O, Ho, Wo], flipped weight [C, O, 3, 3]),
// padding 2 - p: the input gradient of a stride-1 3x3 convolution.
void winograd_conv2d_input_grad(const Tensor& grad_out, const Tensor& weight, const Tensor& grad_input,
                                const Conv2dParams& p) {
  EMBER_DISPATCH_FLOATING(grad_out.dtype(), "winograd_conv2d_input_grad", [&] {
    if constexpr (std::is_same<scalar_t, float>::value || std::is_same<scalar_t, double>::value) {
      winograd_typed<scalar_t>(
          static_cast<const scalar_t*>(grad_out.data_ptr()), static_cast<const scalar_t*>(weight.data_ptr()), nullptr,
          static_cast<scalar_t*>(grad_input.data_ptr()), grad_out.size(0), grad_out.size(1), grad_out.size(2),
          grad_out.size(3), weight.size(1), 2 - p.padding[0], 2 - p.padding[1], true);
    } else {
      throw Error("winograd_conv2d_input_grad: float32 and float64 only");
    }
  });
}

}  // namespace ember::cpu
