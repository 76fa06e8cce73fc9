#pragma once
// An 8 x 8 block of floats transposed in AVX registers: the transposing copy (copy.cpp) and the
// direct convolution's gradient layout (conv_direct.cpp).
#ifdef __AVX2__
#include <immintrin.h>

#include <cstdint>

namespace ember::cpu {

// dst[c][r] = rows[r][c] for eight rows of eight 4-byte elements (dst's stride in elements), in
// registers: unpack pairs, then quads, then swap 128-bit halves.
inline void transpose8x8_32(const float* const (&rows)[8], float* dst, int64_t ds) {
  __m256 r[8], t[8];
  for (int k = 0; k < 8; ++k) r[k] = _mm256_loadu_ps(rows[k]);
  for (int k = 0; k < 8; k += 2) {
    t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
    t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
  }
  for (int k = 0; k < 8; k += 4) {
    r[k] = _mm256_shuffle_ps(t[k], t[k + 2], 0x44);
    r[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], 0xEE);
    r[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0x44);
    r[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0xEE);
  }
  for (int k = 0; k < 4; ++k) {
    _mm256_storeu_ps(dst + k * ds, _mm256_permute2f128_ps(r[k], r[k + 4], 0x20));
    _mm256_storeu_ps(dst + (k + 4) * ds, _mm256_permute2f128_ps(r[k], r[k + 4], 0x31));
  }
}

// dst[c][r] = src[r][c] for an 8x8 block (strides in elements).
inline void transpose8x8_32(const float* src, int64_t ss, float* dst, int64_t ds) {
  const float* const rows[8] = {src,          src + ss,     src + 2 * ss, src + 3 * ss,
                                src + 4 * ss, src + 5 * ss, src + 6 * ss, src + 7 * ss};
  transpose8x8_32(rows, dst, ds);
}

}  // namespace ember::cpu
#endif
