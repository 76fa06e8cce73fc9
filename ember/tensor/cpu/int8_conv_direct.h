#pragma once
// The direct int8 convolution's register tiles (Note [Direct int8 convolution] in
// int8_conv_direct.cpp), compiled once per instruction set as the float32 direct kernels are:
// int8_conv_direct_avx2.cpp, and int8_conv_direct_avx512.cpp where the compiler can target
// AVX-512 VNNI (EMBER_HAVE_AVX512_KERNELS). Plain data only across this line: those files must
// not share inline functions with the rest of ember (conv_direct_kernels.h says why).
#include <cstdint>

namespace ember::cpu::int8_direct {

// What a tile reads besides its input and weight pointers.
struct TileArgs {
  int64_t x_plane = 0, groups = 0, taps = 0;  // words per channel group's plane; groups; taps
  const int64_t* tap_offset = nullptr;        // [taps], in words
};

// acc [OB][vectors * lanes] (vectors <= RW) = Σ over groups g and taps t of the plane's words
// x[g * x_plane + tap_offset[t] + ...] · the OB output channels' weight words
// w[((t * groups + g) * 16 + oo) * 4] (each broadcast to all lanes).
constexpr int kAvx2Lanes = 8, kAvx2Block = 4, kAvx2Vectors = 2;
void tile_avx2(int64_t vectors, const TileArgs& a, const uint8_t* x, const int8_t* w, int32_t* acc);
constexpr int kVnniLanes = 16, kVnniBlock = 8, kVnniVectors = 3;
void tile_vnni(int64_t vectors, const TileArgs& a, const uint8_t* x, const int8_t* w, int32_t* acc);

}  // namespace ember::cpu::int8_direct
