#pragma once
// float16 and bfloat16 to and from float32, 8 values at once, with the scalar conversions'
// results (tensor/half.h): widening is exact; narrowing rounds to nearest, ties to even, and
// keeps NaN a quiet NaN. bfloat16 is float32's top half, so its conversions are integer shifts;
// float16 has F16C's vcvtph2ps / vcvtps2ph.
#if defined(__AVX2__) && defined(__F16C__)
#include <immintrin.h>

#include <cstdint>
#define EMBER_HAVE_VEC_HALF 1

namespace ember::cpu {

// 8 values in h (bfloat16 when kBf16, else float16) -> 8 floats.
template <bool kBf16>
inline __m256 widen8(__m128i h) {
  if constexpr (kBf16)
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  else
    return _mm256_cvtph_ps(h);
}
// ... from 8 values at p.
template <bool kBf16>
inline __m256 widen8(const uint16_t* p) {
  return widen8<kBf16>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// 8 floats -> 8 values (bfloat16 when kBf16, else float16).
template <bool kBf16>
inline __m128i narrow8(__m256 v) {
  if constexpr (kBf16) {
    // detail::float_to_bfloat16_bits: add 0x7FFF plus the kept part's lowest bit, keep the top half
    const __m256i bits = _mm256_castps_si256(v);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
    __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7FFF))), 16);
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x0040));
    rounded = _mm256_blendv_epi8(rounded, quiet, nan);
    // (packus works within 128-bit lanes: pack with itself, then take 64-bit pieces 0 and 2)
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(rounded, rounded), 0x08));
  } else {
    return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
}

inline void store8(uint16_t* p, __m128i v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v); }

}  // namespace ember::cpu
#endif

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ember/tensor/half.h"

namespace ember::cpu {

// n contiguous values to float32 (exact) and back (rounded as the scalar conversions round), 8 at
// a time where the CPU has AVX2 and F16C. T is float (a plain copy), Half or BFloat16.
template <class T>
inline void widen_run(const T* src, int64_t n, float* dst) {
  if constexpr (std::is_same_v<T, float>) {
    std::memcpy(dst, src, sizeof(float) * static_cast<size_t>(n));
  } else {
    int64_t i = 0;
#ifdef EMBER_HAVE_VEC_HALF
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(dst + i, widen8<std::is_same_v<T, BFloat16>>(reinterpret_cast<const uint16_t*>(src + i)));
#endif
    for (; i < n; ++i) dst[i] = static_cast<float>(src[i]);
  }
}

template <class T>
inline void narrow_run(const float* src, int64_t n, T* dst) {
  if constexpr (std::is_same_v<T, float>) {
    std::memcpy(dst, src, sizeof(float) * static_cast<size_t>(n));
  } else {
    int64_t i = 0;
#ifdef EMBER_HAVE_VEC_HALF
    for (; i + 8 <= n; i += 8)
      store8(reinterpret_cast<uint16_t*>(dst + i), narrow8<std::is_same_v<T, BFloat16>>(_mm256_loadu_ps(src + i)));
#endif
    for (; i < n; ++i) dst[i] = T(src[i]);
  }
}

}  // namespace ember::cpu
