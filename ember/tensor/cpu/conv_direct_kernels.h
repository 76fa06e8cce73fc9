#pragma once
// The direct convolution's register tiles (Note [Direct convolution on a padded flat plane] in
// conv_direct.h), written once over a vector type S and included by one .cpp per instruction
// set. Everything here has internal linkage and uses no standard-library templates: a file
// compiled for AVX-512 must not hand the linker an inline function that another file, compiled
// for AVX2, would then call on a machine without AVX-512.
#include <immintrin.h>

#include "ember/tensor/cpu/conv_direct.h"

namespace ember::cpu::direct {
namespace {

inline int64_t min_i64(int64_t a, int64_t b) { return a < b ? a : b; }

// out [OB][RW * S::width] = bias + sum over c, taps of wpk[c][tap][oo] * xp[c][j0 + offset + ...]
template <class S, int OB, int RW>
inline void forward_tile(const float* xp, int64_t x_plane, const float* wpk, int64_t C, int64_t taps,
                         const int64_t* tap_offset, const float* bias, float* out) {
  constexpr int W = S::width;
  typename S::V acc[OB][RW];
  for (int oo = 0; oo < OB; ++oo) {
    const typename S::V b = bias ? S::set1(bias[oo]) : S::zero();
    for (int r = 0; r < RW; ++r) acc[oo][r] = b;
  }
  for (int64_t c = 0; c < C; ++c) {
    const float* xc = xp + c * x_plane;
    const float* wc = wpk + c * taps * OB;
    for (int64_t t = 0; t < taps; ++t) {
      const float* xt = xc + tap_offset[t];
      typename S::V xv[RW];
      for (int r = 0; r < RW; ++r) xv[r] = S::load(xt + r * W);
      for (int oo = 0; oo < OB; ++oo) {
        const typename S::V wv = S::set1(wc[t * OB + oo]);
        for (int r = 0; r < RW; ++r) acc[oo][r] = S::fma(wv, xv[r], acc[oo][r]);
      }
    }
  }
  for (int oo = 0; oo < OB; ++oo)
    for (int r = 0; r < RW; ++r) S::store(out + oo * RW * W + r * W, acc[oo][r]);
}

// forward_tile with RW, or for the plane's last, shorter span with fewer vectors.
template <class S, int OB, int RW>
inline void forward_tile_of(int64_t vectors, const float* xp, int64_t x_plane, const float* wpk, int64_t C,
                            int64_t taps, const int64_t* tap_offset, const float* bias, float* out) {
  if constexpr (RW > 1)
    if (vectors < RW) return forward_tile_of<S, OB, RW - 1>(vectors, xp, x_plane, wpk, C, taps, tap_offset, bias, out);
  forward_tile<S, OB, RW>(xp, x_plane, wpk, C, taps, tap_offset, bias, out);
}

// y [O][Ho][Wo] for the blocks of a: each tile computed into a small buffer, its valid columns
// (ow < Wo of every row the flat span crosses) copied out. The flat position is the outer loop,
// so one span's input window (C rows of about span + (kH - 1) * Wp floats) stays in L1 while
// every block's weights pass by.
template <class S, int OB, int RW>
void forward_blocks(const ForwardArgs& a) {
  constexpr int64_t span = RW * S::width;
  alignas(64) float tile[OB * span];
  const int64_t flat = a.Ho * a.Wp;
  for (int64_t j0 = 0; j0 < flat; j0 += span) {
    const int64_t j_end = min_i64(j0 + span, flat), vectors = (j_end - j0 + S::width - 1) / S::width;
    for (int64_t blk = a.block_begin; blk < a.block_end; ++blk) {
      const int64_t o0 = blk * OB, outs = min_i64(OB, a.O - o0);
      float bias[OB] = {};
      if (a.bias)
        for (int64_t oo = 0; oo < outs; ++oo) bias[oo] = a.bias[o0 + oo];
      forward_tile_of<S, OB, RW>(vectors, a.xp + j0, a.x_plane, a.wpk + blk * a.C * a.taps * OB, a.C, a.taps,
                                 a.tap_offset, a.bias ? bias : nullptr, tile);
      const int64_t stride = vectors * S::width;  // of the tile's rows
      for (int64_t j = j0; j < j_end;) {          // one row segment at a time
        const int64_t oh = j / a.Wp, ow = j - oh * a.Wp;
        const int64_t len = min_i64(a.Wp - ow, j_end - j), valid = min_i64(len, a.Wo - ow);
        for (int64_t oo = 0; oo < outs; ++oo) {
          const float* src = tile + oo * stride + (j - j0);
          float* dst = a.y + ((o0 + oo) * a.Ho + oh) * a.Wo + ow;
          for (int64_t k = 0; k < valid; ++k) dst[k] = src[k];
        }
        j += len;
      }
    }
  }
}

// dwT[e][o0 .. o0 + OV * width) += sum over output rows [oh0, oh1) and columns [0, Wo) of
// x_e[oh * Wp + ow] * dyT[oh * Wo + ow][o0 ...], for E entries e = (input channel, tap) whose
// input rows start at x[e]: each step loads OV gradient vectors and broadcasts E inputs into
// E * OV fused multiply-adds. Only real output positions are visited: no junk columns, and no
// horizontal sums.
template <class S, int OV, int E>
inline void weight_tile(const float* dyT, int64_t Opad, const float* const* x, int64_t oh0, int64_t oh1, int64_t Wo,
                        int64_t Wp, float* dwT, int64_t entries) {
  constexpr int W = S::width;
  typename S::V acc[E][OV];
  for (int e = 0; e < E; ++e)
    for (int v = 0; v < OV; ++v) acc[e][v] = S::zero();
  for (int64_t oh = oh0; oh < oh1; ++oh) {
    const float* d_row = dyT + oh * Wo * Opad;
    const int64_t x_row = oh * Wp;
    for (int64_t ow = 0; ow < Wo; ++ow) {
      typename S::V d[OV];
      for (int v = 0; v < OV; ++v) d[v] = S::load(d_row + ow * Opad + v * W);
      for (int e = 0; e < E; ++e) {
        const typename S::V xb = S::set1(x[e][x_row + ow]);
        for (int v = 0; v < OV; ++v) acc[e][v] = S::fma(xb, d[v], acc[e][v]);
      }
    }
  }
  for (int64_t e = 0; e < entries; ++e)
    for (int v = 0; v < OV; ++v) {
      float* out = dwT + e * Opad + v * W;
      S::store(out, S::add(S::load(out), acc[e][v]));
    }
}

// dwT for the output-channel blocks of a. The output rows go in chunks of about kWeightChunk
// positions, the outer loop, so a chunk of the gradient (kWeightChunk x Opad floats, 32 KB for
// 64 channels) stays in L1 while every (channel, tap) entry passes over it. A short last tile
// of entries repeats its first entry and drops the repeats.
constexpr int64_t kWeightChunk = 128;

template <class S, int OV, int E>
void weight_blocks(const WeightArgs& a) {
  const int64_t entries = a.C * a.taps, rows = a.Wo >= kWeightChunk ? 1 : kWeightChunk / a.Wo;
  for (int64_t oh0 = 0; oh0 < a.Ho; oh0 += rows) {
    const int64_t oh1 = min_i64(oh0 + rows, a.Ho);
    for (int64_t blk = a.block_begin; blk < a.block_end; ++blk) {
      const int64_t o0 = blk * OV * S::width;
      for (int64_t e0 = 0; e0 < entries; e0 += E) {
        const int64_t n = min_i64(E, entries - e0);
        const float* x[E];
        for (int64_t e = 0; e < E; ++e) {
          const int64_t ce = e < n ? e0 + e : e0, c = ce / a.taps, t = ce - c * a.taps;
          x[e] = a.xp + c * a.x_plane + a.tap_offset[t];
        }
        weight_tile<S, OV, E>(a.dyT + o0, a.Opad, x, oh0, oh1, a.Wo, a.Wp, a.dwT + e0 * a.Opad + o0, n);
      }
    }
  }
}

}  // namespace
}  // namespace ember::cpu::direct
