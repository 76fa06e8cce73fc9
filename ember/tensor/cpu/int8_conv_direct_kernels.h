#pragma once
// The direct int8 convolution's register tiles and epilogue (Note [Direct int8 convolution] in
// int8_conv_direct.cpp), written once over a vector policy S and included by one .cpp per
// instruction set. Internal linkage and no standard-library templates, for the reason in
// conv_direct_kernels.h: a file compiled for AVX-512 must not hand the linker an inline
// function that another file would call on a CPU without it.
#include <immintrin.h>

#include <cstring>

#include "ember/tensor/cpu/int8_conv_direct.h"

namespace ember::cpu::int8_direct {
namespace {

constexpr int64_t kGroup = 4, kPanel = 16;  // bytes per word; output channels per weight panel

inline int64_t min_i64(int64_t a, int64_t b) { return a < b ? a : b; }

// acc [OB][RW * lanes] = Σ over groups, taps of the plane's words [offset + ...] · the OB
// channels' weight words w (each broadcast to all lanes): RW loads and OB broadcasts per
// (group, tap) for OB * RW multiply-adds of 4 bytes per lane.
template <class S, int OB, int RW>
__attribute__((noinline)) void tile(const Args& a, const uint8_t* x, const int8_t* w, int32_t* acc_out) {
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

// tile with RW vectors, or fewer for the plane's last, shorter span.
template <class S, int OB, int RW>
inline void tile_of(int64_t vectors, const Args& a, const uint8_t* x, const int8_t* w, int32_t* acc) {
  if constexpr (RW > 1)
    if (vectors < RW) return tile_of<S, OB, RW - 1>(vectors, a, x, w, acc);
  tile<S, OB, RW>(a, x, w, acc);
}

// The epilogue's constants, made once per call, and one output channel's, once per tile: the
// row segments between them are short, so nothing is set up per segment.
template <class S>
struct Constants {
  typename S::F floor;                     // 0 with a fused ReLU, else -inf (max with it changes nothing)
  typename S::F inv_out_scale, low, high;  // (the clamp keeps the conversion inside int32)
  typename S::I out_zero_point, out_min, out_max;
  explicit Constants(const Args& a)
      : floor(S::set1f(a.relu ? 0.0f : -__builtin_inff())),
        inv_out_scale(S::set1f(a.inv_out_scale)),
        low(S::set1f(-1e9f)),
        high(S::set1f(1e9f)),
        out_zero_point(S::set1(a.out_zero_point)),
        out_min(S::set1(a.out_min)),
        out_max(S::set1(a.out_max)) {}
};

template <class S>
struct Channel {
  typename S::I zero_term;    // a_zero_point * Σ w[o]
  typename S::F scale, bias;  // bias 0 without one, as int8::Epilogue::store
  Channel() = default;
  Channel(const Args& a, int64_t o)
      : zero_term(S::set1(a.a_zero_point * a.row_sums[o])),
        scale(S::set1f(a.a_scale * a.w_scale[a.per_channel ? o : 0])),
        bias(S::set1f(a.bias ? a.bias[o] : 0.0f)) {}
};

// out[0 .. n) of one output channel from acc[0 .. n), in int8::Epilogue::store's order of
// operations (one fused multiply-add), so that every path gives the same bytes and floats.
// With `spill`, the last partial vector is stored whole: up to lanes - 1 elements past n are
// written, which the caller writes again later (acc must hold them too); without, it goes
// through a buffer.
template <class S, bool BYTES>
inline void epilogue_segment(const Constants<S>& k, const Channel<S>& c, const int32_t* acc, int64_t n, void* out,
                             bool spill) {
  constexpr int64_t L = S::lanes;
  for (int64_t i = 0; i < n; i += L) {
    const typename S::F v =
        S::maxf(S::fma(S::to_float(S::sub(S::load(acc + i), c.zero_term)), c.scale, c.bias), k.floor);
    const bool whole = i + L <= n || spill;
    if constexpr (BYTES) {
      const typename S::F r = S::minf(S::maxf(S::mulf(v, k.inv_out_scale), k.low), k.high);
      const typename S::I q = S::mini(S::maxi(S::add(S::to_int(r), k.out_zero_point), k.out_min), k.out_max);
      uint8_t* y = static_cast<uint8_t*>(out) + i;
      if (whole) {
        S::store_bytes(y, q);
        continue;
      }
      alignas(64) uint8_t last[L];
      S::store_bytes(last, q);
      std::memcpy(y, last, static_cast<size_t>(n - i));
    } else {
      float* y = static_cast<float*>(out) + i;
      if (whole) {
        S::storef(y, v);
        continue;
      }
      alignas(64) float last[L];
      S::storef(last, v);
      std::memcpy(y, last, sizeof(float) * static_cast<size_t>(n - i));
    }
  }
}

// y of one image for the blocks of a: per span of flat positions (the outer loop, so its input
// window stays in L1 while every block's weights pass by), each block's tile, then its epilogue
// straight into each row segment of the span (ow < Wo). A segment's last vector may spill past
// its end onto elements that a later segment of the same channel writes again, never past the
// channel's plane (where another channel or image begins, perhaps another thread's).
template <class S, int OB, int RW, bool BYTES>
void image_blocks(const Args& a) {
  constexpr int64_t lanes = S::lanes, span = RW * lanes;
  constexpr size_t element = BYTES ? 1 : sizeof(float);
  alignas(64) int32_t acc[OB * span + lanes];  // (+ lanes: a spilling vector of the last row reads past it)
  const int64_t flat = a.Ho * a.Wp, plane = a.Ho * a.Wo;
  const Constants<S> k(a);
  Channel<S> channel[OB];
  for (int64_t j0 = 0; j0 < flat; j0 += span) {
    const int64_t j_end = min_i64(j0 + span, flat), vectors = (j_end - j0 + lanes - 1) / lanes;
    const int64_t stride = vectors * lanes;  // of the tile's rows
    for (int64_t blk = a.block_begin; blk < a.block_end; ++blk) {
      const int64_t o0 = blk * OB, outs = min_i64(OB, a.O - o0);
      // The block's words: panel o0 / 16, columns from o0 % 16 (+ (group * 16 + oo) * 4 per word).
      const int8_t* w = a.panels + (o0 / kPanel) * a.panel_bytes + (o0 % kPanel) * kGroup;
      tile_of<S, OB, RW>(vectors, a, a.xp + j0 * kGroup, w, acc);
      for (int64_t oo = 0; oo < outs; ++oo) channel[oo] = Channel<S>(a, o0 + oo);
      for (int64_t j = j0; j < j_end;) {  // one row segment at a time
        const int64_t oh = j / a.Wp, ow = j - oh * a.Wp;
        const int64_t len = min_i64(a.Wp - ow, j_end - j), valid = min_i64(len, a.Wo - ow);
        const int64_t at = oh * a.Wo + ow;               // in the output plane
        const bool spill = at + valid + lanes <= plane;  // a later segment rewrites what a whole vector spills onto
        for (int64_t oo = 0; oo < outs && valid > 0; ++oo)
          epilogue_segment<S, BYTES>(k, channel[oo], acc + oo * stride + (j - j0), valid,
                                     static_cast<uint8_t*>(a.y) + static_cast<size_t>((o0 + oo) * plane + at) * element,
                                     spill);
        j += len;
      }
    }
  }
}

template <class S, int OB, int RW>
void image_blocks_of(const Args& a) {
  if (a.bytes)
    image_blocks<S, OB, RW, true>(a);
  else
    image_blocks<S, OB, RW, false>(a);
}

}  // namespace
}  // namespace ember::cpu::int8_direct
