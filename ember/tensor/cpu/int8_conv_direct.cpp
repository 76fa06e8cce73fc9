// The direct int8 convolution for stride 1 (Note [Direct int8 convolution]): uint8 activations
// times int8 weights into int32 on the float32 direct convolution's padded flat plane, with the
// int8 GEMM's epilogue (int8_packed.h), written as NCHW rows.
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
// activations never saturate them; Note [Int8 GEMM] in int8_gemm.cpp). The tiles are compiled
// once per instruction set (int8_conv_direct.h); this file packs, threads and requantizes.
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
#include "ember/tensor/cpu/int8_packed.h"
#include "ember/tensor/ops.h"
#include "ember/tensor/parallel.h"

// The tiles exist where ember targets x86-64-v3 (EMBER_HAVE_DIRECT_CONV, as the float32 direct
// convolution's); the epilogue and the plane's packing here use AVX2 and SSE2.
#ifdef EMBER_HAVE_DIRECT_CONV
#include <immintrin.h>

#include "ember/tensor/cpu/int8_conv_direct.h"
#define EMBER_INT8_DIRECT 1
#endif

namespace ember::cpu {

#ifdef EMBER_INT8_DIRECT
namespace {

using int8::Epilogue;
using int8::kGroup;
using int8::kPanel;
using int8::Packed;

// What one image's tiles read and write.
struct Args {
  const uint8_t* xp;           // [groups][x_plane][4]
  int8_direct::TileArgs tile;  // x_plane, groups, taps, tap_offset
  const Packed* w;             // k order (tap, group, channel of the group)
  int64_t O, Wp, Ho, Wo;
  const Epilogue* e;
  void* y;  // [O][Ho][Wo] of this image, uint8 or float32
};

// The 4 weights of output channel o for (tap, group) as one word.
inline const int8_t* weight_words(const Packed& w, int64_t o0) {
  return w.panel(o0 / kPanel) + (o0 % kPanel) * kGroup;  // + (g * kPanel + oo) * kGroup
}

// The epilogue's constants (Epilogue::store's arithmetic, 8 lanes at a time), made once per
// call, and those of one output channel, once per tile: the segments between them are short
// (a row of the output), so nothing is set up per segment.
struct EpilogueVectors {
  bool relu;                   // float32 out: max(v, 0), NaN to 0 (vmaxps, as Epilogue::store)
  __m256 inv_out_scale, high;  // (the upper clamp keeps the conversion inside int32)
  __m256i out_zero_point, out_min, out_max;
  // uint8 out: the ReLU is the lower clamp at the zero point, and nothing clamps below. Both are
  // exact rewrites of Epilogue::store: with inv_out_scale > 0, max(v, 0) * inv = max(v * inv, 0),
  // which rounds to max(q, 0) before the zero point is added; and a value below -2^31 converts to
  // INT32_MIN (vcvtps2dq's "indefinite"), which the lower clamp takes to out_min as -1e9 would.
  explicit EpilogueVectors(const Epilogue& e)
      : relu(e.relu),
        inv_out_scale(_mm256_set1_ps(e.inv_out_scale)),
        high(_mm256_set1_ps(1e9f)),
        out_zero_point(_mm256_set1_epi32(e.out_zero_point)),
        out_min(_mm256_set1_epi32(
            static_cast<int32_t>(e.relu ? std::max<int64_t>(e.out_quant_min, e.out_zero_point) : e.out_quant_min))),
        out_max(_mm256_set1_epi32(static_cast<int32_t>(e.out_quant_max))) {}
};

struct ChannelVectors {
  __m256i zero_term;   // a_zero_point * Σ w[o]
  __m256 scale, bias;  // bias 0 without one, as in Epilogue::store
  ChannelVectors() = default;
  ChannelVectors(const Epilogue& e, int64_t o)
      : zero_term(_mm256_set1_epi32(e.a_zero_point * e.row_sums[o])),
        scale(_mm256_set1_ps(e.a_scale * e.w_scale[e.per_channel ? o : 0])),
        bias(_mm256_set1_ps(e.bias ? e.bias[o] : 0.0f)) {}
};

// 8 accumulators -> 8 values of one channel, in the order of operations of Epilogue::store, so
// that every path gives the same bytes: one fused multiply-add, then (uint8 out) one multiply.
inline __m256 dequantized(const ChannelVectors& c, const int32_t* acc) {
  const __m256i raw = _mm256_sub_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc)), c.zero_term);
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(raw), c.scale, c.bias);
}
inline __m256 activated(const EpilogueVectors& k, __m256 v) {
  return k.relu ? _mm256_max_ps(v, _mm256_setzero_ps()) : v;
}
inline __m256i requantized(const EpilogueVectors& k, const ChannelVectors& c, const int32_t* acc) {
  // (vminps returns its second operand when one is NaN: here the NaN, which converts to
  // INT32_MIN and so clamps to out_min, as Epilogue::store's lower clamp takes it)
  const __m256 r = _mm256_min_ps(k.high, _mm256_mul_ps(dequantized(c, acc), k.inv_out_scale));
  return _mm256_min_epi32(_mm256_max_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(r), k.out_zero_point), k.out_min),
                          k.out_max);
}

// out[0 .. n) of one output channel from acc[0 .. n). With `spill`, the last partial vector is
// stored whole: up to 15 elements past n are written, which the caller writes again later (acc
// must hold them too); without, it goes through a buffer.
template <bool BYTES>
inline void epilogue_segment(const EpilogueVectors& k, const ChannelVectors& c, const int32_t* acc, int64_t n,
                             void* out, bool spill) {
  if constexpr (BYTES) {
    auto* y = static_cast<uint8_t*>(out);
    int64_t i = 0;
    for (; i + 16 <= n || (spill && i < n); i += 16) {
      // 16 int32 in [0, 255] -> 16 bytes in order (the packs work within 128-bit lanes)
      const __m256i words = _mm256_permute4x64_epi64(
          _mm256_packs_epi32(requantized(k, c, acc + i), requantized(k, c, acc + i + 8)), 0xD8);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                       _mm_packus_epi16(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1)));
    }
    for (; i < n; i += 8) {
      const __m256i q = requantized(k, c, acc + i);
      const __m256i packed = _mm256_packus_epi16(_mm256_packs_epi32(q, q), _mm256_setzero_si256());
      alignas(16) uint8_t last[16];
      _mm_store_si128(reinterpret_cast<__m128i*>(last),
                      _mm_unpacklo_epi32(_mm256_castsi256_si128(packed), _mm256_extracti128_si256(packed, 1)));
      std::memcpy(y + i, last, static_cast<size_t>(std::min<int64_t>(8, n - i)));
    }
  } else {
    auto* y = static_cast<float*>(out);
    int64_t i = 0;
    for (; i + 8 <= n || (spill && i < n); i += 8) _mm256_storeu_ps(y + i, activated(k, dequantized(c, acc + i)));
    if (i < n) {
      alignas(32) float last[8];
      _mm256_store_ps(last, activated(k, dequantized(c, acc + i)));
      std::memcpy(y + i, last, sizeof(float) * static_cast<size_t>(n - i));
    }
  }
}

// y of one image for output-channel blocks [block_begin, block_end): per span of flat positions
// (the outer loop, so its input window stays in L1 while every block's weights pass by), each
// block's tile, then its epilogue straight into each row segment of the span (ow < Wo). A
// segment's last vector may spill past its end into elements that a later segment of the same
// channel writes again, never past the channel's plane (where another channel or image begins,
// perhaps another thread's).
template <int OB, int RW, bool VNNI, bool BYTES>
void image_blocks(const Args& a, int64_t block_begin, int64_t block_end) {
  constexpr int64_t lanes = VNNI ? 16 : 8, span = RW * lanes;
  constexpr size_t element = BYTES ? 1 : sizeof(float);
  alignas(64) int32_t acc[OB * span + 16];  // (+ 16: a spilling vector of the last row reads past it)
  const int64_t flat = a.Ho * a.Wp, plane = a.Ho * a.Wo;
  const EpilogueVectors k(*a.e);
  ChannelVectors channel[OB];
  for (int64_t j0 = 0; j0 < flat; j0 += span) {
    const int64_t j_end = std::min(j0 + span, flat), vectors = (j_end - j0 + lanes - 1) / lanes;
    const int64_t stride = vectors * lanes;  // of the tile's rows
    for (int64_t blk = block_begin; blk < block_end; ++blk) {
      const int64_t o0 = blk * OB, outs = std::min<int64_t>(OB, a.O - o0);
      const int8_t* w = weight_words(*a.w, o0);
      if constexpr (VNNI)
        int8_direct::tile_vnni(vectors, a.tile, a.xp + j0 * kGroup, w, acc);
      else
        int8_direct::tile_avx2(vectors, a.tile, a.xp + j0 * kGroup, w, acc);
      for (int64_t oo = 0; oo < outs; ++oo) channel[oo] = ChannelVectors(*a.e, o0 + oo);
      for (int64_t j = j0; j < j_end;) {  // one row segment at a time
        const int64_t oh = j / a.Wp, ow = j - oh * a.Wp;
        const int64_t len = std::min(a.Wp - ow, j_end - j), valid = std::min(len, a.Wo - ow);
        const int64_t at = oh * a.Wo + ow;            // in the output plane
        const bool spill = at + valid + 16 <= plane;  // a later segment writes what a whole vector spills onto
        for (int64_t oo = 0; oo < outs && valid > 0; ++oo)
          epilogue_segment<BYTES>(k, channel[oo], acc + oo * stride + (j - j0), valid,
                                  static_cast<uint8_t*>(a.y) + static_cast<size_t>((o0 + oo) * plane + at) * element,
                                  spill);
        j += len;
      }
    }
  }
}

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
  const bool built = kernel == Int8Kernel::Avx2 || kernel == Int8Kernel::Avx512Vnni;
#else
  const bool built = kernel == Int8Kernel::Avx2;
#endif
  return p.stride[0] == 1 && p.stride[1] == 1 && p.groups == 1 && built && int8_kernel_available(kernel);
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
  const Packed given = Packed::checked(w_packed, out.size(1), C * taps, "int8_conv2d");
  const Tensor regrouped = C % kGroup == 0 ? w_packed : pad_weight_channels(given, C, taps);
  const Packed w(regrouped);
  const bool vnni = kernel == Int8Kernel::Avx512Vnni;
  const FlatPlane pl = make_flat_plane(H, W, kernel_size[0], kernel_size[1], p.padding, p.dilation,
                                       vnni ? int8_direct::kVnniLanes : int8_direct::kAvx2Lanes);
  // The row sums are the given weight's (the same numbers; the padding adds zeros).
  const Epilogue e = int8::make_epilogue(ep, given, out);
  const int64_t OB = vnni ? int8_direct::kVnniBlock : int8_direct::kAvx2Block, blocks = (w.n + OB - 1) / OB;
  const size_t out_element = out.dtype() == kFloat32 ? sizeof(float) : 1;
  const auto* x = input.data_ptr<uint8_t>();
  auto* y = static_cast<uint8_t*>(out.data_ptr());
  const auto zero_point = static_cast<uint8_t>(ep.a_zero_point);
  auto run = [&](const uint8_t* xp, int64_t n, int64_t b0, int64_t b1) {
    const Args a{xp,
                 {pl.x_plane, groups, taps, pl.tap_offset.data()},
                 &w,
                 w.n,
                 pl.Wp,
                 pl.Ho,
                 pl.Wo,
                 &e,
                 y + static_cast<size_t>(n * w.n * pl.Ho * pl.Wo) * out_element};
    using namespace int8_direct;
    const bool bytes = out.dtype() == kUInt8;
    if (vnni && bytes)
      image_blocks<kVnniBlock, kVnniVectors, true, true>(a, b0, b1);
    else if (vnni)
      image_blocks<kVnniBlock, kVnniVectors, true, false>(a, b0, b1);
    else if (bytes)
      image_blocks<kAvx2Block, kAvx2Vectors, false, true>(a, b0, b1);
    else
      image_blocks<kAvx2Block, kAvx2Vectors, false, false>(a, b0, b1);
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
