// Affine quantization, the int8 GEMM and the int8 convolution on CUDA (Note [Affine
// quantization], Note [Int8 GEMM]): the CPU's math element for element (tensor/cpu/quant.cpp,
// int8_gemm.cpp, int8_conv.cpp), rounding half to even (rintf) as nearbyint does there.
//
// The GEMM runs on cuBLASLt's int8 kernels (matmul.cpp), which take signed bytes on both sides:
// the uint8 activation a is shifted to a - 128, so that Σ (a - z) w = Σ (a - 128) w - (z - 128) Σ w,
// and the weight's row sums (kept in the packed form) carry the correction. The packed weight:
// [N, K rounded up to 4] int8 (zero-padded: cuBLASLt's int8 layout needs K % 4 == 0), then, from
// the next multiple of 16 bytes, the N int32 row sums.
#include <algorithm>
#include <cmath>

#include "ember/cuda/cuda.h"
#include "ember/cuda/cuda_backend.h"
#include "ember/cuda/internal.h"
#include "ember/cuda/loops.cuh"
#include "ember/tensor/ops.h"

namespace ember::cuda {
namespace {

constexpr float kLimit = 2147483520.0f;  // the largest float below 2^31

struct Channels {  // flat index i of a contiguous tensor is in channel (i / inner) % count
  int64_t count = 1, inner = 1;
  Channels(const Tensor& x, int64_t axis) {
    if (axis < 0) return;
    count = x.size(axis);
    for (int64_t d = axis + 1; d < x.dim(); ++d) inner *= x.size(d);
  }
  __device__ int64_t of(int64_t i) const { return count == 1 ? 0 : (i / inner) % count; }
};

// x float32 -> q: clamp(rint(x * (1 / float(scale))) + z, lo, hi)
template <class Q, class S>
__global__ void quantize_kernel(const float* x, Q* q, int64_t n, const S* scale, const int32_t* zero_point, Channels ch,
                                int64_t lo, int64_t hi) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t c = ch.of(i);
    const float inv = 1.0f / static_cast<float>(scale[c]);
    const float r = fminf(fmaxf(x[i] * inv, -kLimit), kLimit);
    const int64_t v = static_cast<int64_t>(rintf(r)) + zero_point[c];
    q[i] = static_cast<Q>(v < lo ? lo : v > hi ? hi : v);
  }
}

// q -> float32: (q - z) * scale, in the scale's precision
template <class Q, class S>
__global__ void dequantize_kernel(const Q* q, float* y, int64_t n, const S* scale, const int32_t* zero_point,
                                  Channels ch) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t c = ch.of(i);
    y[i] = static_cast<float>(static_cast<S>(static_cast<int64_t>(q[i]) - zero_point[c]) * scale[c]);
  }
}

// x float32 -> out = (clamp(rint(x / s) + z) - z) * s, mask = inside [lo, hi] before the clamp
template <class S>
__global__ void fake_quantize_kernel(const float* x, float* out, bool* mask, int64_t n, const S* scale,
                                     const int32_t* zero_point, Channels ch, int64_t lo, int64_t hi) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t c = ch.of(i);
    const float s = static_cast<float>(scale[c]), inv = 1.0f / s;
    const int32_t z = zero_point[c];
    const int64_t v = static_cast<int64_t>(rintf(fminf(fmaxf(x[i] * inv, -kLimit), kLimit))) + z;
    out[i] = static_cast<float>((v < lo ? lo : v > hi ? hi : v) - z) * s;
    if (mask) mask[i] = v >= lo && v <= hi;
  }
}

// w [N, K] -> packed [N, Kp] (zero-padded) and row sums [N]; one thread per row (packing is once).
__global__ void pack_kernel(const int8_t* w, int64_t N, int64_t K, int64_t Kp, int8_t* packed, int32_t* row_sums) {
  const int64_t row = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (row >= N) return;
  int32_t sum = 0;
  for (int64_t k = 0; k < Kp; ++k) {
    const int8_t v = k < K ? w[row * K + k] : int8_t{0};
    packed[row * Kp + k] = v;
    sum += v;
  }
  row_sums[row] = sum;
}

// a uint8 [M, K] (row stride lda) -> a - 128 as int8 [M, Kp] (zero-padded)
__global__ void shift_kernel(const uint8_t* a, int64_t lda, int64_t M, int64_t K, int64_t Kp, int8_t* out) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < M * Kp; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t m = i / Kp, k = i % Kp;
    out[i] = k < K ? static_cast<int8_t>(static_cast<int32_t>(a[m * lda + k]) - 128) : int8_t{0};
  }
}

struct EpilogueArgs {
  int32_t zero_shift;  // a_zero_point - 128
  const int32_t* row_sums;
  float a_scale;
  const float* w_scale;
  bool per_channel;
  const float* bias;
  float inv_out_scale;
  int32_t out_zero_point;
  int64_t out_min, out_max;
  bool relu;
};

// One accumulated value of output column n -> out, as the CPU's Epilogue::store: the zero point's
// correction, then one fused multiply-add (the CPU writes it as std::fma so that every path rounds
// once), ReLU, and the uint8 requantization rounding half to even.
template <class Out>
__device__ void store(int32_t acc, int64_t n, const EpilogueArgs& e, Out* out) {
  const int32_t raw = acc - e.zero_shift * e.row_sums[n];
  if constexpr (std::is_same_v<Out, int32_t>) {
    *out = raw;
  } else {
    const float scale = __fmul_rn(e.a_scale, e.w_scale[e.per_channel ? n : 0]);
    float v = __fmaf_rn(static_cast<float>(raw), scale, e.bias ? e.bias[n] : 0.0f);
    if (e.relu) v = fmaxf(v, 0.0f);
    if constexpr (std::is_same_v<Out, float>) {
      *out = v;
    } else {
      const int64_t q =
          static_cast<int64_t>(rintf(fminf(fmaxf(__fmul_rn(v, e.inv_out_scale), -1e9f), 1e9f))) + e.out_zero_point;
      *out = static_cast<uint8_t>(q < e.out_min ? e.out_min : q > e.out_max ? e.out_max : q);
    }
  }
}

// acc [M, N] int32 -> out [M, N] (plane == 0), or, for the convolution, rows m = (image, pixel)
// of `plane` pixels each -> out NCHW [M / plane, N, plane] (the transpose done as it stores:
// writes in order, reads strided by N).
template <class Out>
__global__ void epilogue_kernel(const int32_t* acc, Out* out, int64_t M, int64_t N, int64_t plane, EpilogueArgs e) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < M * N; i += int64_t{gridDim.x} * blockDim.x) {
    int64_t m = i / N, n = i % N;
    if (plane > 0) {
      const int64_t pixel = i % plane, image = i / (plane * N);
      n = (i / plane) % N;
      m = image * plane + pixel;
    }
    store(acc[m * N + n], n, e, out + i);
  }
}

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// The scale's element type (float32, or float64 as per-channel scales may come) chosen at run time.
template <class F>
void with_scale_type(const Tensor& scale, const F& f) {
  if (scale.dtype() == kFloat64)
    f(static_cast<const double*>(scale.data_ptr()));
  else
    f(static_cast<const float*>(scale.data_ptr()));
}

}  // namespace

void CudaBackend::quantize(const Tensor& x, const QuantParams& p, const Tensor& out) {
  DeviceGuard guard(x.device().index);
  const int64_t n = x.numel();
  const Channels ch(x, p.axis);
  const auto* z = static_cast<const int32_t*>(p.zero_point.data_ptr());
  const auto* in = static_cast<const float*>(x.data_ptr());
  with_scale_type(p.scale, [&](auto* s) {
    switch (out.dtype()) {
      case kInt8:
        quantize_kernel<<<grid_for(n), kBlock, 0, stream_of(x)>>>(in, static_cast<int8_t*>(out.data_ptr()), n, s, z, ch,
                                                                  p.quant_min, p.quant_max);
        break;
      case kUInt8:
        quantize_kernel<<<grid_for(n), kBlock, 0, stream_of(x)>>>(in, static_cast<uint8_t*>(out.data_ptr()), n, s, z,
                                                                  ch, p.quant_min, p.quant_max);
        break;
      case kInt32:
        quantize_kernel<<<grid_for(n), kBlock, 0, stream_of(x)>>>(in, static_cast<int32_t*>(out.data_ptr()), n, s, z,
                                                                  ch, p.quant_min, p.quant_max);
        break;
      default:
        throw Error(detail::concat("quantize: cannot quantize to ", out.dtype(), " on CUDA"));
    }
  });
  EMBER_KERNEL_CHECK();
}

void CudaBackend::dequantize(const Tensor& q, const QuantParams& p, const Tensor& out) {
  DeviceGuard guard(q.device().index);
  const int64_t n = q.numel();
  const Channels ch(q, p.axis);
  const auto* z = static_cast<const int32_t*>(p.zero_point.data_ptr());
  auto* y = static_cast<float*>(out.data_ptr());
  with_scale_type(p.scale, [&](auto* s) {
    switch (q.dtype()) {
      case kInt8:
        dequantize_kernel<<<grid_for(n), kBlock, 0, stream_of(q)>>>(static_cast<const int8_t*>(q.data_ptr()), y, n, s,
                                                                    z, ch);
        break;
      case kUInt8:
        dequantize_kernel<<<grid_for(n), kBlock, 0, stream_of(q)>>>(static_cast<const uint8_t*>(q.data_ptr()), y, n, s,
                                                                    z, ch);
        break;
      case kInt32:
        dequantize_kernel<<<grid_for(n), kBlock, 0, stream_of(q)>>>(static_cast<const int32_t*>(q.data_ptr()), y, n, s,
                                                                    z, ch);
        break;
      default:
        throw Error(detail::concat("dequantize: cannot dequantize ", q.dtype(), " on CUDA"));
    }
  });
  EMBER_KERNEL_CHECK();
}

void CudaBackend::fake_quantize(const Tensor& x, const QuantParams& p, const Tensor& out, const Tensor& mask) {
  DeviceGuard guard(x.device().index);
  const int64_t n = x.numel();
  const Channels ch(x, p.axis);
  bool* m = mask.defined() ? static_cast<bool*>(mask.data_ptr()) : nullptr;
  with_scale_type(p.scale, [&](auto* s) {
    fake_quantize_kernel<<<grid_for(n), kBlock, 0, stream_of(x)>>>(
        static_cast<const float*>(x.data_ptr()), static_cast<float*>(out.data_ptr()), m, n, s,
        static_cast<const int32_t*>(p.zero_point.data_ptr()), ch, p.quant_min, p.quant_max);
  });
  EMBER_KERNEL_CHECK();
}

Tensor CudaBackend::int8_pack_weight(const Tensor& w) {
  DeviceGuard guard(w.device().index);
  const int64_t N = w.size(0), K = w.size(1), Kp = round_up(K, 4), sums_at = round_up(N * Kp, 16);
  Tensor packed = empty({sums_at + 4 * N}, TensorOptions(kInt8).device(w.device()));
  auto* base = static_cast<int8_t*>(packed.data_ptr());
  const unsigned blocks = static_cast<unsigned>(std::max<int64_t>(1, (N + kBlock - 1) / kBlock));
  pack_kernel<<<blocks, kBlock, 0, stream_of(w)>>>(static_cast<const int8_t*>(w.data_ptr()), N, K, Kp, base,
                                                   reinterpret_cast<int32_t*>(base + sums_at));
  EMBER_KERNEL_CHECK();
  return packed;
}

namespace {

EpilogueArgs epilogue_args(const Int8Epilogue& ep, const int32_t* row_sums) {
  EpilogueArgs e{};
  e.zero_shift = static_cast<int32_t>(ep.a_zero_point - 128);
  e.row_sums = row_sums;
  e.a_scale = static_cast<float>(ep.a_scale);
  e.w_scale = ep.w_scale.defined() ? static_cast<const float*>(ep.w_scale.data_ptr()) : nullptr;
  e.per_channel = ep.w_scale.defined() && ep.w_scale.numel() > 1;
  e.bias = ep.bias.defined() ? static_cast<const float*>(ep.bias.data_ptr()) : nullptr;
  e.inv_out_scale = 1.0f / static_cast<float>(ep.out_scale);
  e.out_zero_point = static_cast<int32_t>(ep.out_zero_point);
  e.out_min = std::max<int64_t>(ep.out_quant_min, 0);
  e.out_max = std::min<int64_t>(ep.out_quant_max, 255);
  e.relu = ep.relu;
  return e;
}

// out (from element `offset`) <- the epilogue of acc [M, N] (epilogue_kernel's layouts)
void run_epilogue(const Tensor& acc, const Tensor& out, int64_t offset, int64_t plane, const EpilogueArgs& e) {
  const int64_t M = acc.size(0), N = acc.size(1), n = M * N;
  const auto* a = static_cast<const int32_t*>(acc.data_ptr());
  const cudaStream_t stream = stream_of(out);
  switch (out.dtype()) {
    case kInt32:
      epilogue_kernel<<<grid_for(n), kBlock, 0, stream>>>(a, static_cast<int32_t*>(out.data_ptr()) + offset, M, N,
                                                          plane, e);
      break;
    case kFloat32:
      epilogue_kernel<<<grid_for(n), kBlock, 0, stream>>>(a, static_cast<float*>(out.data_ptr()) + offset, M, N, plane,
                                                          e);
      break;
    case kUInt8:
      epilogue_kernel<<<grid_for(n), kBlock, 0, stream>>>(a, static_cast<uint8_t*>(out.data_ptr()) + offset, M, N,
                                                          plane, e);
      break;
    default:
      throw Error(detail::concat("int8 epilogue: no ", out.dtype(), " output on CUDA"));
  }
  EMBER_KERNEL_CHECK();
}

// The packed weight's two parts (int8_pack_weight's layout) for N rows of K.
struct PackedView {
  Tensor weight;  // int8 [N, Kp]
  const int32_t* row_sums;
};
PackedView packed_view(const Tensor& w_packed, int64_t N, int64_t K, const char* op) {
  const int64_t Kp = round_up(K, 4), sums_at = round_up(N * Kp, 16);
  EMBER_CHECK(w_packed.numel() == sums_at + 4 * N, op, " on CUDA: the packed weight is for another shape (", N,
              " rows of ", K, " need ", sums_at + 4 * N, " bytes, got ", w_packed.numel(), ")");
  auto* base = static_cast<int8_t*>(w_packed.data_ptr());
  return {from_blob(base, {N, Kp}, TensorOptions(kInt8).device(w_packed.device())),
          reinterpret_cast<const int32_t*>(base + sums_at)};
}

// Geometry of the int8 convolution's im2col, in plain integers for the kernel.
struct ConvShape {
  int64_t C, H, W, kh, kw, Ho, Wo, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, K, Kp;
};

// x uint8 [images, C, H, W] -> cols int8 [images * Ho * Wo, Kp]: row (image, oh, ow), column
// (i, j, c) (taps, then channels: the packed weight's order) = x[image, c, h, w] - 128 at
// h = oh * stride - pad + i * dilation (and w alike), pad - 128 outside the image (the input's
// zero point, which stands for 0.0), 0 in the columns K..Kp. Writes in order; reads are
// scattered over the channels' planes (correct first; a channels-last input would read in order).
__global__ void im2col_shift_kernel(const uint8_t* x, int64_t rows, ConvShape s, int32_t pad, int8_t* cols) {
  const int64_t n = rows * s.Kp;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < n; idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t k = idx % s.Kp, row = idx / s.Kp;
    if (k >= s.K) {
      cols[idx] = 0;
      continue;
    }
    const int64_t c = k % s.C, tap = k / s.C, i = tap / s.kw, j = tap % s.kw;
    const int64_t pixel = row % (s.Ho * s.Wo), image = row / (s.Ho * s.Wo);
    const int64_t h = (pixel / s.Wo) * s.stride_h - s.pad_h + i * s.dil_h;
    const int64_t w = (pixel % s.Wo) * s.stride_w - s.pad_w + j * s.dil_w;
    const bool inside = h >= 0 && h < s.H && w >= 0 && w < s.W;
    const int32_t v = inside ? x[((image * s.C + c) * s.H + h) * s.W + w] : pad;
    cols[idx] = static_cast<int8_t>(v - 128);
  }
}

// im2col buffers of at most this many bytes (images go in chunks that fit).
constexpr int64_t kColsBudget = int64_t{256} << 20;

}  // namespace

void CudaBackend::int8_gemm(const Tensor& a, const Tensor& w_packed, const Int8Epilogue& ep, const Tensor& out) {
  DeviceGuard guard(a.device().index);
  const int64_t M = a.size(0), K = a.size(1), N = out.size(1), Kp = round_up(K, 4);
  const PackedView w = packed_view(w_packed, N, K, "int8_gemm");
  const Tensor shifted = empty({M, Kp}, TensorOptions(kInt8).device(a.device()));
  shift_kernel<<<grid_for(M * Kp), kBlock, 0, stream_of(a)>>>(static_cast<const uint8_t*>(a.data_ptr()), a.stride(0), M,
                                                              K, Kp, static_cast<int8_t*>(shifted.data_ptr()));
  EMBER_KERNEL_CHECK();
  const Tensor acc = empty({M, N}, TensorOptions(kInt32).device(a.device()));
  int8_matmul_tn(shifted, w.weight, acc);
  run_epilogue(acc, out, 0, 0, epilogue_args(ep, w.row_sums));
}

// im2col (shifted to signed bytes as it gathers) + cuBLASLt's int8 GEMM + the epilogue writing
// NCHW, a chunk of images at a time: the CPU's im2col path (tensor/cpu/int8_conv.cpp) on the GPU,
// the same bytes.
void CudaBackend::int8_conv2d(const Tensor& input, const Tensor& w_packed, std::array<int64_t, 2> kernel,
                              const Conv2dParams& p, const Int8Epilogue& ep, const Tensor& out) {
  DeviceGuard guard(input.device().index);
  ConvShape s{};
  s.C = input.size(1), s.H = input.size(2), s.W = input.size(3), s.kh = kernel[0], s.kw = kernel[1];
  s.Ho = out.size(2), s.Wo = out.size(3);
  s.stride_h = p.stride[0], s.stride_w = p.stride[1], s.pad_h = p.padding[0], s.pad_w = p.padding[1];
  s.dil_h = p.dilation[0], s.dil_w = p.dilation[1];
  s.K = s.C * s.kh * s.kw, s.Kp = round_up(s.K, 4);
  const int64_t images = input.size(0), O = out.size(1), P = s.Ho * s.Wo;
  const PackedView w = packed_view(w_packed, O, s.K, "int8_conv2d");
  const EpilogueArgs e = epilogue_args(ep, w.row_sums);
  const int64_t chunk = std::clamp<int64_t>(kColsBudget / std::max<int64_t>(1, P * s.Kp), 1, images);
  const auto* x = static_cast<const uint8_t*>(input.data_ptr());
  for (int64_t first = 0; first < images; first += chunk) {
    const int64_t count = std::min(chunk, images - first), rows = count * P;
    const Tensor cols = empty({rows, s.Kp}, TensorOptions(kInt8).device(input.device()));
    im2col_shift_kernel<<<grid_for(rows * s.Kp), kBlock, 0, stream_of(input)>>>(x + first * s.C * s.H * s.W, rows, s,
                                                                                static_cast<int32_t>(ep.a_zero_point),
                                                                                static_cast<int8_t*>(cols.data_ptr()));
    EMBER_KERNEL_CHECK();
    const Tensor acc = empty({rows, O}, TensorOptions(kInt32).device(input.device()));
    int8_matmul_tn(cols, w.weight, acc);
    run_epilogue(acc, out, first * O * P, P, e);
  }
}

}  // namespace ember::cuda
