#pragma once
// The direct int8 convolution's register tile (int8_conv_direct.h), written once over a vector
// policy S and included by one .cpp per instruction set. Internal linkage and no standard-library
// templates, for the reason in conv_direct_kernels.h: a file compiled for AVX-512 must not hand
// the linker an inline function that another file would call on a CPU without it.
#include <immintrin.h>

#include <cstring>

#include "ember/tensor/cpu/int8_conv_direct.h"

namespace ember::cpu::int8_direct {
namespace {

constexpr int64_t kGroup = 4, kPanel = 16;  // bytes per word; output channels per weight panel

// RW loads and OB broadcasts per (group, tap) for OB * RW multiply-adds of 4 bytes per lane.
template <class S, int OB, int RW>
__attribute__((noinline)) void tile(const TileArgs& a, const uint8_t* x, const int8_t* w, int32_t* acc_out) {
  typename S::I acc[OB][RW];
#pragma GCC unroll 8
  for (int oo = 0; oo < OB; ++oo)
#pragma GCC unroll 4
    for (int r = 0; r < RW; ++r) acc[oo][r] = S::zero();
  for (int64_t g = 0; g < a.groups; ++g) {
    const uint8_t* xg = x + g * a.x_plane * kGroup;
    for (int64_t t = 0; t < a.taps; ++t) {
      const uint8_t* xt = xg + a.tap_offset[t] * kGroup;
      const int8_t* wt = w + (t * a.groups + g) * kPanel * kGroup;
      typename S::I xv[RW];
#pragma GCC unroll 4
      for (int r = 0; r < RW; ++r) xv[r] = S::load(xt + r * S::lanes * kGroup);
#pragma GCC unroll 8
      for (int oo = 0; oo < OB; ++oo) {
        int32_t word;
        std::memcpy(&word, wt + oo * kGroup, sizeof(word));  // (folds into the broadcast's load)
        const typename S::I wb = S::set1(word);
#pragma GCC unroll 4
        for (int r = 0; r < RW; ++r) acc[oo][r] = S::dot(acc[oo][r], xv[r], wb);
      }
    }
  }
#pragma GCC unroll 8
  for (int oo = 0; oo < OB; ++oo)
#pragma GCC unroll 4
    for (int r = 0; r < RW; ++r) S::store(acc_out + (oo * RW + r) * S::lanes, acc[oo][r]);
}

// The tile with RW vectors, or fewer for the plane's last, shorter span.
template <class S, int OB, int RW>
void tile_of(int64_t vectors, const TileArgs& a, const uint8_t* x, const int8_t* w, int32_t* acc) {
  if constexpr (RW > 1)
    if (vectors < RW) return tile_of<S, OB, RW - 1>(vectors, a, x, w, acc);
  tile<S, OB, RW>(a, x, w, acc);
}

}  // namespace
}  // namespace ember::cpu::int8_direct
