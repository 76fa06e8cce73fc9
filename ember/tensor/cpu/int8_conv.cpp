// The int8 convolution of statically quantized models, and the choice of its algorithm: the
// direct kernels (int8_conv_direct.cpp) for stride 1, else im2col of the uint8 input (padding
// with the input's zero point, which stands for 0.0) into [Ho * Wo, C * kh * kw] rows, the int8
// GEMM of int8_gemm.cpp with its requantizing epilogue, then the [pixels, O] result written back
// as NCHW. Images go to threads when there are enough of them; otherwise the GEMM splits its
// columns.
#include <cstring>
#include <vector>

#include "ember/tensor/cpu/cpu_backend.h"
#include "ember/tensor/cpu/int8_packed.h"
#include "ember/tensor/ops.h"
#include "ember/tensor/parallel.h"

namespace ember::cpu {
namespace {

// x [C, H, W] of one image -> cols [Ho * Wo, kh * kw * C], through the channels-last copy xt
// [H, W, C]: a tap of a pixel is then C consecutive bytes (one memcpy), where the planar layout
// made it C scattered ones. The weight is packed with the same (i, j, c) order of its columns.
// With few channels (a first layer) a tap is too short for a copy to pay: read in place.
void im2col_u8(const uint8_t* x, int64_t C, int64_t H, int64_t W, std::array<int64_t, 2> k, const Conv2dParams& p,
               int64_t Ho, int64_t Wo, uint8_t pad, uint8_t* xt, uint8_t* cols) {
  if (C < 8) {
    uint8_t* row = cols;
    for (int64_t oh = 0; oh < Ho; ++oh)
      for (int64_t ow = 0; ow < Wo; ++ow)
        for (int64_t i = 0; i < k[0]; ++i) {
          const int64_t h = oh * p.stride[0] - p.padding[0] + i * p.dilation[0];
          for (int64_t j = 0; j < k[1]; ++j) {
            const int64_t w = ow * p.stride[1] - p.padding[1] + j * p.dilation[1];
            const bool inside = h >= 0 && h < H && w >= 0 && w < W;
            for (int64_t c = 0; c < C; ++c) *row++ = inside ? x[(c * H + h) * W + w] : pad;
          }
        }
    return;
  }
  for (int64_t c = 0; c < C; ++c)
    for (int64_t hw = 0; hw < H * W; ++hw) xt[hw * C + c] = x[c * H * W + hw];
  const int64_t K = C * k[0] * k[1];
  for (int64_t oh = 0; oh < Ho; ++oh)
    for (int64_t ow = 0; ow < Wo; ++ow) {
      uint8_t* row = cols + (oh * Wo + ow) * K;
      for (int64_t i = 0; i < k[0]; ++i) {
        const int64_t h = oh * p.stride[0] - p.padding[0] + i * p.dilation[0];
        for (int64_t j = 0; j < k[1]; ++j, row += C) {
          const int64_t w = ow * p.stride[1] - p.padding[1] + j * p.dilation[1];
          if (h >= 0 && h < H && w >= 0 && w < W)
            std::memcpy(row, xt + (h * W + w) * C, static_cast<size_t>(C));
          else
            std::memset(row, pad, static_cast<size_t>(C));
        }
      }
    }
}

template <class T>
void pixels_to_planes(const T* pixels, int64_t P, int64_t O, T* planes) {  // [P, O] -> [O, P]
  for (int64_t o = 0; o < O; ++o)
    for (int64_t q = 0; q < P; ++q) planes[o * P + q] = pixels[q * O + o];
}

// im2col + the int8 GEMM with kernel k.
void int8_conv2d_im2col(Int8Kernel k, const Tensor& input, const Tensor& w_packed, std::array<int64_t, 2> kernel,
                        const Conv2dParams& p, const Int8Epilogue& e, const Tensor& out) {
  const int64_t N = input.size(0), C = input.size(1), H = input.size(2), W = input.size(3);
  const int64_t O = out.size(1), Ho = out.size(2), Wo = out.size(3), P = Ho * Wo, K = C * kernel[0] * kernel[1];
  // Checked here, not only in the GEMM: an Error thrown inside the parallel region below would
  // end the program (it cannot leave an OpenMP region).
  (void)int8::Packed::checked(w_packed, O, K, "int8_conv2d");
  const auto* x = input.data_ptr<uint8_t>();
  const bool to_float = out.dtype() == kFloat32;
  const size_t out_size = to_float ? sizeof(float) : sizeof(uint8_t);
  auto* y = static_cast<uint8_t*>(out.data_ptr());
  const auto pad = static_cast<uint8_t>(e.a_zero_point);
  auto one_image = [&](int64_t n) {
    std::vector<uint8_t> cols(static_cast<size_t>(P * K)), channels_last(static_cast<size_t>(C * H * W));
    std::vector<uint8_t> pixels(static_cast<size_t>(P * O) * out_size);
    im2col_u8(x + n * C * H * W, C, H, W, kernel, p, Ho, Wo, pad, channels_last.data(), cols.data());
    const Tensor a = from_blob(cols.data(), {P, K}, TensorOptions().dtype(kUInt8));
    const Tensor r = from_blob(pixels.data(), {P, O}, TensorOptions().dtype(out.dtype()));
    int8_gemm_with(k, a, w_packed, e, r);
    if (to_float)
      pixels_to_planes(reinterpret_cast<const float*>(pixels.data()), P, O, reinterpret_cast<float*>(y) + n * O * P);
    else
      pixels_to_planes(pixels.data(), P, O, y + n * O * P);
  };
  if (N >= parallel_threads()) {
    parallel_for(0, N, 1, [&](int64_t b, int64_t end) {
      for (int64_t n = b; n < end; ++n) one_image(n);
    });
  } else {
    for (int64_t n = 0; n < N; ++n) one_image(n);
  }
}

}  // namespace

// The direct kernels wherever they apply: no im2col matrix and no transposes, and (with VNNI)
// 2-4x faster on every layer measured (BENCHMARKS.md, "The direct int8 convolution").
void int8_conv2d_with(backends::cpu::ConvAlgorithm algorithm, Int8Kernel k, const Tensor& input, const Tensor& w_packed,
                      std::array<int64_t, 2> kernel, const Conv2dParams& p, const Int8Epilogue& e, const Tensor& out) {
  if (algorithm != backends::cpu::ConvAlgorithm::im2col_gemm && int8_direct_applies(p, k))
    return int8_conv2d_direct(k, input, w_packed, kernel, p, e, out);
  int8_conv2d_im2col(k, input, w_packed, kernel, p, e, out);
}

void CpuBackend::int8_conv2d(const Tensor& input, const Tensor& w_packed, std::array<int64_t, 2> kernel,
                             const Conv2dParams& p, const Int8Epilogue& e, const Tensor& out) {
  int8_conv2d_with(backends::cpu::conv_algorithm(), int8_gemm_kernel(), input, w_packed, kernel, p, e, out);
}

}  // namespace ember::cpu
