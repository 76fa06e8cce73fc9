#pragma once
// An 8 x 8 block of floats transposed in AVX registers: the transposing copy (copy.cpp) and the
// direct convolution's gradient layout (conv_direct.cpp).
#ifdef __AVX2__
#include <immintrin.h>

#include <cstdint>

namespace ember::cpu {

// dst[c][r] = src[r][c] for an 8x8 block of 4-byte elements (strides in elements), in
// registers: unpack pairs, then quads, then swap 128-bit halves.
inline void transpose8x8_32(const float* src, int64_t ss, float* dst, int64_t ds) {
  __m256 r[8], t[8];
  for (int k = 0; k < 8; ++k) r[k] = _mm256_loadu_ps(src + k * ss);
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

}  // namespace ember::cpu
#endif
