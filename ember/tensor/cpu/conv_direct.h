#pragma once
// Direct float32 convolution for stride 1 (any padding, dilation, groups): the kernels behind
// conv_direct.cpp, compiled once per instruction set (conv_direct_avx2.cpp, and
// conv_direct_avx512.cpp where the compiler can target AVX-512), chosen at run time.
//
// Note [Direct convolution on a padded flat plane]
// The input plane of one sample and one group is copied once into a zero-padded buffer
// xp [C][x_plane] of rows Wp wide, each row pad_w zeros then the W values (after pad_h rows of
// zeros). With stride 1, output (oh, ow) reads xp[c][j + offset(kh, kw)] at j = oh * Wp + ow and
// offset(kh, kw) = kh * dil_h * Wp + kw * dil_w: over the flat index j every tap of the kernel
// is one contiguous, shifted vector load, with no branch for the padding. A window that runs
// off a row's right end reads the next row's leading zeros, so one run of pad_w zeros pads both
// sides and Wp = W + pad_w, as long as pad_w <= dil_w * (kW - 1) (PyTorch's "same" padding and
// less; larger padding takes Wp = W + 2 * pad_w). The price is Wp - Wo junk columns per row
// (1 of 57 for 56 x 56, 3 x 3, pad 1), computed and dropped.
// A register tile holds OB output channels x RW vectors of j; each step loads RW input vectors
// and broadcasts OB weights (packed [C][taps][OB] per block) into OB * RW fused multiply-adds,
// so the convolution runs from L1 at the FMA units' rate without an im2col buffer (9x the
// input for 3 x 3) and writes NCHW directly.
// The backward-data pass is the same kernel on the output gradient with the kernel flipped and
// the channels swapped (a stride-1 convolution with padding dil * (k - 1) - pad). The
// backward-weight pass sums over output positions: dw[o][c][tap] = sum over (oh, ow) of
// dy[o][oh][ow] * xp[c][oh * Wp + ow + offset(tap)], with the gradient transposed to
// dyT [oh * Wo + ow][o] so that a vector runs over output channels: a tile broadcasts one input
// value per (c, tap) entry, visits real positions only and needs no horizontal sum.
// A non-finite input value reaches exactly the outputs whose windows hold it in the forward and
// backward-data passes (junk columns are dropped, padded weights feed only dropped channels).
#include <cstdint>

namespace ember::cpu::direct {

// One sample and one group, output-channel blocks [block_begin, block_end).
struct ForwardArgs {
  const float* xp = nullptr;  // [C][x_plane], zero-padded rows of width Wp
  int64_t x_plane = 0;
  const float* wpk = nullptr;           // [blocks][C][taps][OB], zero for channels past O
  const float* bias = nullptr;          // [O] or null
  const int64_t* tap_offset = nullptr;  // [taps]
  int64_t C = 0, O = 0, taps = 0, Wp = 0, Ho = 0, Wo = 0;
  float* y = nullptr;  // [O][Ho][Wo]
  int64_t block_begin = 0, block_end = 0;
};

// One sample and one group: dwT[c * taps + tap][o] += sum over (oh, ow) of
// dyT[oh * Wo + ow][o] * xp[c][oh * Wp + ow + offset(tap)], for output channels
// [block_begin, block_end) * weight_block.
struct WeightArgs {
  const float* dyT = nullptr;                // [Ho * Wo][Opad]: the output gradient transposed; channels past O zero
  int64_t Ho = 0, Wo = 0, Wp = 0, Opad = 0;  // Opad: O rounded up to whole blocks
  const float* xp = nullptr;                 // [C][x_plane] as in ForwardArgs
  int64_t x_plane = 0;
  const int64_t* tap_offset = nullptr;
  int64_t C = 0, taps = 0;
  float* dwT = nullptr;  // [C * taps][Opad], accumulated into
  int64_t block_begin = 0, block_end = 0;
};

// The tile shape of one instruction set; conv_direct.cpp sizes its buffers from it.
struct Tiling {
  int64_t width;          // floats per vector
  int64_t forward_block;  // OB: output channels per forward tile
  int64_t forward_span;   // RW * width: flat positions per forward tile
  int64_t weight_block;   // output channels per backward-weight tile (whole vectors)
};

Tiling tiling_avx2();
void forward_avx2(const ForwardArgs& a);
void weight_avx2(const WeightArgs& a);

// Defined where the compiler targets AVX-512 (EMBER_HAVE_AVX512_KERNELS).
Tiling tiling_avx512();
void forward_avx512(const ForwardArgs& a);
void weight_avx512(const WeightArgs& a);

}  // namespace ember::cpu::direct
