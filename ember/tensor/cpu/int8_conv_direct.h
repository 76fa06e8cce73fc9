#pragma once
// The direct int8 convolution's tiles (Note [Direct int8 convolution] in int8_conv_direct.cpp):
// what int8_conv_direct.cpp hands them, and the entry points of the files that compile them,
// once per instruction set (int8_conv_direct_avx2.cpp; int8_conv_direct_avx512.cpp where the
// compiler can target AVX-512 VNNI). Plain data only: these files must not share inline
// functions with the rest of ember (conv_direct_kernels.h says why).
#include <cstdint>

namespace ember::cpu::int8_direct {

// One image's convolution for output-channel blocks [block_begin, block_end).
struct Args {
  const uint8_t* xp = nullptr;  // [groups][x_plane][4]: the padded plane, four channels to a word
  int64_t x_plane = 0, groups = 0, taps = 0;
  const int64_t* tap_offset = nullptr;  // [taps], in words
  // The int8 GEMM's packed weight (int8_packed.h): panels of 16 output channels, k_padded * 16 bytes each,
  // k = (tap, group, channel of the group).
  const int8_t* panels = nullptr;
  int64_t panel_bytes = 0;
  int64_t O = 0, Wp = 0, Ho = 0, Wo = 0;
  // The epilogue (int8::Epilogue's arithmetic): v = max(fma(acc - zero_term[o], scale[o], bias[o]), floor);
  // uint8 out: clamp(round(v * inv_out_scale) + out_zero_point, out_min, out_max).
  int32_t a_zero_point = 0;
  const int32_t* row_sums = nullptr;  // [O]: Σ w[o], for the zero-point term
  float a_scale = 1;
  const float* w_scale = nullptr;  // [1] or [O]
  bool per_channel = false;
  const float* bias = nullptr;      // [O] or null
  bool relu = false, bytes = true;  // bytes: uint8 out, else float32
  float inv_out_scale = 1;
  int32_t out_zero_point = 0, out_min = 0, out_max = 255;
  void* y = nullptr;  // [O][Ho][Wo] of this image
  int64_t block_begin = 0, block_end = 0;
};

// The tile shape of one instruction set.
struct Tiling {
  int64_t lanes;  // positions per vector
  int64_t block;  // output channels per tile (divides 16, so a block's weight words are contiguous)
};

Tiling tiling_avx2();
void image_blocks_avx2(const Args& a);
// Defined where the compiler targets AVX-512 VNNI (EMBER_HAVE_AVX512_KERNELS).
Tiling tiling_vnni();
void image_blocks_vnni(const Args& a);

}  // namespace ember::cpu::int8_direct
