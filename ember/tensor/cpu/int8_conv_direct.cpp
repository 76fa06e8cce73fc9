// The direct int8 convolution for stride 1 (Note [Direct int8 convolution]): uint8 activations
// times int8 weights into int32 on the float32 direct convolution's padded flat plane, with the
// int8 GEMM's epilogue (int8_packed.h), written as NCHW rows. Here: the padded planes, the
// weight, threads and the choice of instruction set; the tiles are in
// int8_conv_direct_kernels.h, compiled once per instruction set.
//
// Note [Direct int8 convolution]
// The plane of conv_direct.h, in bytes, with the input channels in groups of four:
// xp [C4 / 4][x_plane][4], where word j of group g holds channels 4g .. 4g + 3 at flat position
// j. A 64-byte load at word j + offset(tap) is then 16 positions' four channels: one operand of
// AVX-512 VNNI's vpdpbusd, which multiplies it by one output channel's four weights of that tap
// and group (broadcast to all 16 lanes) and adds each lane's four products to an int32
// accumulator. A tile of OB output channels x RW such vectors costs RW loads and OB broadcasts
// per (group, tap) for OB * RW vpdpbusd, runs from L1, and needs neither im2col's matrix (9x the
// input for 3 x 3) nor the transposes of its [pixels, O] result: lanes are positions, so the
// epilogue requantizes rows of one output channel (its scale and bias broadcast) into NCHW.
// AVX2 runs the same tile, 8 positions per register, with vpmaddubsw + vpmaddwd (7-bit
// activations never saturate them; Note [Int8 GEMM] in int8_gemm.cpp).
// The int8 GEMM's packed weight serves as it is when C is a multiple of 4: its k order (taps,
// then channels) makes each group of four k one (tap, channel group), and the word of output
// channel o for group g sits at panel(o / 16) + (g * 16 + o % 16) * 4. Other channel counts (a
// first layer's single channel) are repacked per call with zero weights for the padding channels:
// four times the multiplies there, still far fewer instructions than its im2col and transposes.
// Padding and the padding channels hold the input's zero point, so a window's Σ (a - z) w is
// Σ a w - z Σ w with the weight's row sums, as in the GEMM; the junk columns of the flat plane
// are computed and dropped.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ember/tensor/cpu/conv_algorithms.h"
#include "ember/tensor/cpu/cpu_backend.h"
#include "ember/tensor/cpu/int8_conv_direct.h"
#include "ember/tensor/cpu/int8_packed.h"
#include "ember/tensor/ops.h"
#include "ember/tensor/parallel.h"

// The tiles exist where ember targets x86-64-v3 (EMBER_HAVE_DIRECT_CONV, as the float32 direct
// convolution's); the plane's packing below uses SSE2.
#ifdef EMBER_HAVE_DIRECT_CONV
#include <immintrin.h>
#define EMBER_INT8_DIRECT 1
#endif

namespace ember::cpu {

#ifdef EMBER_INT8_DIRECT
namespace {

using int8::Epilogue;
using int8::kGroup;
using int8::kPanel;
using int8::Packed;

// 16 positions of four channels' rows interleaved into 16 words (64 bytes): word w holds
// r0[w], r1[w], r2[w], r3[w].
inline void interleave4x16(const uint8_t* r0, const uint8_t* r1, const uint8_t* r2, const uint8_t* r3, uint8_t* dst) {
  auto load = [](const uint8_t* r) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(r)); };
  const __m128i a = load(r0), b = load(r1), c = load(r2), d = load(r3);
  const __m128i ab_lo = _mm_unpacklo_epi8(a, b), ab_hi = _mm_unpackhi_epi8(a, b);  // a0 b0 a1 b1 ...
  const __m128i cd_lo = _mm_unpacklo_epi8(c, d), cd_hi = _mm_unpackhi_epi8(c, d);
  auto store = [&](int i, __m128i v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 16 * i), v); };
  store(0, _mm_unpacklo_epi16(ab_lo, cd_lo));  // a0 b0 c0 d0 a1 b1 c1 d1 ...
  store(1, _mm_unpackhi_epi16(ab_lo, cd_lo));
  store(2, _mm_unpacklo_epi16(ab_hi, cd_hi));
  store(3, _mm_unpackhi_epi16(ab_hi, cd_hi));
}

// xp [groups][x_plane][4] <- x [C][H][W] of one image: everything the zero point first (padding,
// junk columns, padding channels), then each row's bytes interleaved four channels to a word.
// Full groups of four go 16 positions per step: a row's last step may write up to 15 words past
// the row, which are set back to the zero point before the next row is written (they are the
// row's padding and the next row's start, or what follows the plane; xp has 16 words to spare).
// The steps read up to 15 bytes past a row too, which is why `x_end` bounds them.
void pad_plane_u8(const uint8_t* x, const uint8_t* x_end, int64_t C, int64_t H, int64_t W, std::array<int64_t, 2> pad,
                  const FlatPlane& pl, int64_t groups, uint8_t zero_point, uint8_t* xp) {
  std::memset(xp, zero_point, static_cast<size_t>((groups * pl.x_plane + 16) * kGroup));
  for (int64_t g = 0; g < groups; ++g) {
    uint8_t* plane = xp + g * pl.x_plane * kGroup;
    const int64_t c0 = g * kGroup, real = std::min<int64_t>(kGroup, C - c0);
    for (int64_t h = 0; h < H; ++h) {
      uint8_t* row = plane + ((h + pad[0]) * pl.Wp + pad[1]) * kGroup;
      const uint8_t* src[kGroup];
      for (int64_t i = 0; i < kGroup; ++i) src[i] = x + ((c0 + std::min(i, real - 1)) * H + h) * W;
      int64_t w = 0;
      if (real == kGroup) {
        for (; w < W && src[3] + w + 16 <= x_end; w += 16)
          interleave4x16(src[0] + w, src[1] + w, src[2] + w, src[3] + w, row + w * kGroup);
        if (w > W) {  // the last step spilled
          std::memset(row + W * kGroup, zero_point, static_cast<size_t>((w - W) * kGroup));
          w = W;
        }
      }
      for (; w < W; ++w)
        for (int64_t i = 0; i < real; ++i) row[w * kGroup + i] = src[i][w];
    }
  }
}

// The int8 GEMM's packed weight with k = (tap, channel) regrouped as (tap, channel padded to
// C4): a copy with zero weights in the padding channels (the row sums do not change).
Tensor pad_weight_channels(const Packed& w, int64_t C, int64_t taps) {
  const int64_t C4 = (C + kGroup - 1) / kGroup * kGroup;
  Tensor plain = zeros({w.n, taps * C4}, TensorOptions().dtype(kInt8));
  int8_t* dst = plain.data_ptr<int8_t>();
  for (int64_t o = 0; o < w.n; ++o) {
    const int8_t* panel = w.panel(o / kPanel);
    for (int64_t t = 0; t < taps; ++t)
      for (int64_t c = 0; c < C; ++c) {
        const int64_t k = t * C + c;
        dst[o * taps * C4 + t * C4 + c] = panel[((k / kGroup) * kPanel + o % kPanel) * kGroup + k % kGroup];
      }
  }
  return int8::pack_weight(plain);
}

}  // namespace
#endif

bool int8_direct_applies(const Conv2dParams& p, Int8Kernel kernel) {
#ifdef EMBER_INT8_DIRECT
#ifdef EMBER_HAVE_AVX512_KERNELS
  const bool compiled = kernel == Int8Kernel::Avx2 || kernel == Int8Kernel::Avx512Vnni;
#else
  const bool compiled = kernel == Int8Kernel::Avx2;
#endif
  return p.stride[0] == 1 && p.stride[1] == 1 && p.groups == 1 && compiled && int8_kernel_available(kernel);
#else
  (void)p, (void)kernel;
  return false;
#endif
}

void int8_conv2d_direct(Int8Kernel kernel, const Tensor& input, const Tensor& w_packed,
                        std::array<int64_t, 2> kernel_size, const Conv2dParams& p, const Int8Epilogue& ep,
                        const Tensor& out) {
  EMBER_CHECK(int8_direct_applies(p, kernel), "int8_conv2d: the direct ", int8_kernel_name(kernel),
              " kernel does not apply (stride 1, groups 1, and a vector kernel this CPU has)");
#ifdef EMBER_INT8_DIRECT
  const int64_t N = input.size(0), C = input.size(1), H = input.size(2), W = input.size(3);
  const int64_t taps = kernel_size[0] * kernel_size[1], groups = (C + kGroup - 1) / kGroup;
  const Packed given(w_packed);
  const Tensor regrouped = C % kGroup == 0 ? w_packed : pad_weight_channels(given, C, taps);
  const Packed w(regrouped);
#ifdef EMBER_HAVE_AVX512_KERNELS
  const bool vnni = kernel == Int8Kernel::Avx512Vnni;
  const int8_direct::Tiling tiling = vnni ? int8_direct::tiling_vnni() : int8_direct::tiling_avx2();
  void (*blocks_of)(const int8_direct::Args&) = vnni ? int8_direct::image_blocks_vnni : int8_direct::image_blocks_avx2;
#else
  const int8_direct::Tiling tiling = int8_direct::tiling_avx2();
  void (*blocks_of)(const int8_direct::Args&) = int8_direct::image_blocks_avx2;
#endif
  const FlatPlane pl = make_flat_plane(H, W, kernel_size[0], kernel_size[1], p.padding, p.dilation, tiling.lanes);
  // The row sums are the given weight's (the same numbers; the padding adds zeros).
  const Epilogue e = int8::make_epilogue(ep, given, out);
  const int64_t blocks = (w.n + tiling.block - 1) / tiling.block;
  const size_t out_element = out.dtype() == kFloat32 ? sizeof(float) : 1;
  int8_direct::Args args;
  args.x_plane = pl.x_plane, args.groups = groups, args.taps = taps, args.tap_offset = pl.tap_offset.data();
  args.panels = w.panels, args.panel_bytes = w.k_padded * kPanel;
  args.O = w.n, args.Wp = pl.Wp, args.Ho = pl.Ho, args.Wo = pl.Wo;
  args.a_zero_point = e.a_zero_point, args.row_sums = e.row_sums, args.a_scale = e.a_scale;
  args.w_scale = e.w_scale, args.per_channel = e.per_channel, args.bias = e.bias, args.relu = e.relu;
  args.bytes = out.dtype() == kUInt8, args.inv_out_scale = e.inv_out_scale, args.out_zero_point = e.out_zero_point;
  args.out_min = static_cast<int32_t>(e.out_quant_min), args.out_max = static_cast<int32_t>(e.out_quant_max);
  const auto* x = input.data_ptr<uint8_t>();
  auto* y = static_cast<uint8_t*>(out.data_ptr());
  const auto zero_point = static_cast<uint8_t>(ep.a_zero_point);
  auto run = [&](const uint8_t* xp, int64_t n, int64_t b0, int64_t b1) {
    int8_direct::Args a = args;
    a.xp = xp, a.y = y + static_cast<size_t>(n * w.n * pl.Ho * pl.Wo) * out_element;
    a.block_begin = b0, a.block_end = b1;
    blocks_of(a);
  };
  const int64_t plane_bytes = (groups * pl.x_plane + 16) * kGroup;  // (+ 16 words: pad_plane_u8's last step)
  const uint8_t* x_end = x + N * C * H * W;
  const int threads = parallel_threads();
  if (N >= threads) {  // one image per thread at a time, each with its own plane
    Tensor planes = empty({threads, plane_bytes}, TensorOptions().dtype(kUInt8));
    for_each_task(N, threads, [&](int64_t n, int tid) {
      uint8_t* xp = planes.data_ptr<uint8_t>() + tid * plane_bytes;
      pad_plane_u8(x + n * C * H * W, x_end, C, H, W, p.padding, pl, groups, zero_point, xp);
      run(xp, n, 0, blocks);
    });
    return;
  }
  // Fewer images than threads (batch 1): the threads share a plane and split its blocks.
  Tensor plane = empty({plane_bytes}, TensorOptions().dtype(kUInt8));
  for (int64_t n = 0; n < N; ++n) {
    pad_plane_u8(x + n * C * H * W, x_end, C, H, W, p.padding, pl, groups, zero_point, plane.data_ptr<uint8_t>());
    parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) { run(plane.data_ptr<uint8_t>(), n, b0, b1); });
  }
#else
  (void)input, (void)w_packed, (void)kernel_size, (void)ep, (void)out;
#endif
}

}  // namespace ember::cpu
