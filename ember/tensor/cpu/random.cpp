// Random fills from Philox blocks (Note [Philox streams]). Element i of a float/half
// draw uses lane i % 4 of block offset + i / 4; doubles and 64-bit integers use two
// lanes each, so block offset + i / 2. tensor/ops/factory.cpp reserves exactly these blocks.
//
// The blocks are generated eight at a time with AVX2 (philox_words), the same words as the
// scalar philox4x32 that the CUDA back end runs, so both devices draw the same numbers; then
// each op turns a run of words into values in a flat loop.
#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "ember/tensor/cpu/cpu_backend.h"
#include "ember/tensor/cpu/vec_math.h"
#include "ember/tensor/generator.h"
#include "ember/tensor/parallel.h"

namespace ember::cpu {
namespace {

#if defined(__AVX2__)
// philox4x32's rounds for 8 x G blocks at once: lane j of c[g][0..3] is block first + 8g + j.
// A round needs the high and low halves of two 32x32-bit products; _mm256_mul_epu32 multiplies
// the even lanes into 64 bits, so the odd lanes take a second multiply after a shift. One group's
// round is a chain of dependent multiplies; G independent groups fill the multiplier's latency.
template <int G>
inline void philox_x8(uint64_t seed, uint64_t first, __m256i (&c)[G][4]) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i sign = _mm256_set1_epi32(INT32_MIN);
  for (int g = 0; g < G; ++g) {
    const uint64_t base = first + 8 * static_cast<uint64_t>(g);
    const __m256i base_lo = _mm256_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(base)));
    c[g][0] = _mm256_add_epi32(base_lo, lane);
    // The counter's high word gains 1 in the lanes whose low word wrapped past 2^32 - 1
    // (unsigned c0 < base_lo: compare with the sign bits flipped); the mask is -1 there.
    const __m256i wrapped = _mm256_cmpgt_epi32(_mm256_xor_si256(base_lo, sign), _mm256_xor_si256(c[g][0], sign));
    c[g][1] = _mm256_sub_epi32(_mm256_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(base >> 32))), wrapped);
    c[g][2] = c[g][3] = _mm256_setzero_si256();
  }
  __m256i k0 = _mm256_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(seed)));
  __m256i k1 = _mm256_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(seed >> 32)));
  const __m256i m0 = _mm256_set1_epi32(static_cast<int32_t>(0xD2511F53u));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int32_t>(0xCD9E8D57u));
  const __m256i w0 = _mm256_set1_epi32(static_cast<int32_t>(0x9E3779B9u));
  const __m256i w1 = _mm256_set1_epi32(static_cast<int32_t>(0xBB67AE85u));
  constexpr int kOdd = 0xAA;  // blend mask: lanes 1, 3, 5, 7
  const auto mul_hi_lo = [&](__m256i x, __m256i m, __m256i* hi, __m256i* lo) {
    const __m256i even = _mm256_mul_epu32(x, m), odd = _mm256_mul_epu32(_mm256_srli_epi64(x, 32), m);
    *hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, kOdd);
    *lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), kOdd);
  };
  for (int round = 0; round < 10; ++round) {
    for (int g = 0; g < G; ++g) {
      __m256i hi0, lo0, hi1, lo1;
      mul_hi_lo(c[g][0], m0, &hi0, &lo0);
      mul_hi_lo(c[g][2], m1, &hi1, &lo1);
      c[g][0] = _mm256_xor_si256(hi1, _mm256_xor_si256(c[g][1], k0));
      c[g][2] = _mm256_xor_si256(hi0, _mm256_xor_si256(c[g][3], k1));
      c[g][1] = lo1;
      c[g][3] = lo0;
    }
    k0 = _mm256_add_epi32(k0, w0);
    k1 = _mm256_add_epi32(k1, w1);
  }
}

// Stores eight blocks' words in block order: c[l] lane j goes to words[4 * j + l] (a 4 x 8
// transpose: pairs of words, then pairs of pairs, then the 128-bit halves).
inline void store_blocks_x8(const __m256i c[4], uint32_t* words) {
  const __m256i t0 = _mm256_unpacklo_epi32(c[0], c[1]), t1 = _mm256_unpackhi_epi32(c[0], c[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(c[2], c[3]), t3 = _mm256_unpackhi_epi32(c[2], c[3]);
  const __m256i b04 = _mm256_unpacklo_epi64(t0, t2), b15 = _mm256_unpackhi_epi64(t0, t2);
  const __m256i b26 = _mm256_unpacklo_epi64(t1, t3), b37 = _mm256_unpackhi_epi64(t1, t3);
  auto* out = reinterpret_cast<__m256i*>(words);
  _mm256_storeu_si256(out + 0, _mm256_permute2x128_si256(b04, b15, 0x20));
  _mm256_storeu_si256(out + 1, _mm256_permute2x128_si256(b26, b37, 0x20));
  _mm256_storeu_si256(out + 2, _mm256_permute2x128_si256(b04, b15, 0x31));
  _mm256_storeu_si256(out + 3, _mm256_permute2x128_si256(b26, b37, 0x31));
}
#endif

// The words of blocks [first, first + count) in block order: words[4 * b + l] is word l of
// block first + b.
void philox_words(uint64_t seed, uint64_t first, int64_t count, uint32_t* words) {
  int64_t b = 0;
#if defined(__AVX2__)
  constexpr int kGroups = 2;
  for (; b + 8 * kGroups <= count; b += 8 * kGroups) {
    __m256i c[kGroups][4];
    philox_x8(seed, first + static_cast<uint64_t>(b), c);
    for (int g = 0; g < kGroups; ++g) store_blocks_x8(c[g], words + 4 * (b + 8 * g));
  }
  for (; b + 8 <= count; b += 8) {
    __m256i c[1][4];
    philox_x8(seed, first + static_cast<uint64_t>(b), c);
    store_blocks_x8(c[0], words + 4 * b);
  }
#endif
  for (; b < count; ++b) {
    const auto r = philox4x32(seed, first + static_cast<uint64_t>(b));
    std::copy(r.begin(), r.end(), words + 4 * b);
  }
}

// Fills `out` (contiguous) from the blocks offset, offset + 1, ...: per_block elements each.
// run(y, words, count) writes the `count` elements y[0, count) from the words of their blocks,
// words[0] being the first word of y[0]'s block (runs start on a block's first element).
template <class T, class Run>
void fill_by_block(const Tensor& out, uint64_t seed, uint64_t offset, int64_t per_block, const Run& run) {
  constexpr int64_t kChunk = 64;  // blocks per run: 1 KiB of words, on the stack
  T* y = static_cast<T*>(out.data_ptr());
  const int64_t n = out.numel();
  const int64_t blocks = (n + per_block - 1) / per_block;
  parallel_for(0, blocks, kGrainSize / 4, [&](int64_t b, int64_t e) {
    alignas(32) uint32_t words[4 * kChunk];
    for (int64_t begin = b; begin < e; begin += kChunk) {
      const int64_t count = std::min(kChunk, e - begin);
      philox_words(seed, offset + static_cast<uint64_t>(begin), count, words);
      const int64_t first = begin * per_block;
      run(y + first, words, std::min(count * per_block, n - first));
    }
  });
}

constexpr double kTwoPi = 6.283185307179586476925286766559;

#if EMBER_HAVE_VEC_MATH
// Box-Muller for the 8 pairs of elements y[k, k + 16) (count - k of them kept) from the words
// w[k, k + 16): pair j's uniforms are words 2j and 2j + 1, and it makes rad cos(theta) and
// rad sin(theta). The last, partial group reads its words from a zero-padded copy, so an element's
// value does not depend on where the draw ends.
template <class T>
inline void box_muller16(const uint32_t* w, int64_t k, int64_t count, float mean, float std, T* y) {
  const int64_t n = std::min<int64_t>(16, count - k);
  alignas(32) uint32_t padded[16] = {};
  const uint32_t* words = w + k;
  if (n < 16)
    words = static_cast<const uint32_t*>(std::memcpy(padded, words, static_cast<size_t>((n + 1) / 2 * 2) * 4));
  const __m256 a = _mm256_castsi256_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(words)));
  const __m256 b = _mm256_castsi256_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(words + 8)));
  // Within each 128-bit half: the pairs' first words (even) and second words (odd). The unpacks
  // below undo exactly this order.
  const auto uniform = [](__m256 bits) {
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(_mm256_castps_si256(bits), 8)),
                         _mm256_set1_ps(1.0f / 16777216.0f));
  };
  const __m256 u1 = _mm256_sub_ps(_mm256_set1_ps(1.0f), uniform(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0))));
  const __m256 u2 = uniform(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
  const __m256 rad = _mm256_sqrt_ps(_mm256_mul_ps(_mm256_set1_ps(-2.0f), log8(u1)));
  __m256 sin_th, cos_th;
  sincos_circle8(_mm256_mul_ps(_mm256_set1_ps(static_cast<float>(kTwoPi)), u2), &sin_th, &cos_th);
  const __m256 scaled = _mm256_mul_ps(_mm256_set1_ps(std), rad);
  const __m256 first = _mm256_fmadd_ps(scaled, cos_th, _mm256_set1_ps(mean));
  const __m256 second = _mm256_fmadd_ps(scaled, sin_th, _mm256_set1_ps(mean));
  if constexpr (std::is_same_v<T, float>) {
    if (n == 16) {
      _mm256_storeu_ps(y + k, _mm256_unpacklo_ps(first, second));
      _mm256_storeu_ps(y + k + 8, _mm256_unpackhi_ps(first, second));
      return;
    }
  }
  alignas(32) float values[16];
  _mm256_store_ps(values, _mm256_unpacklo_ps(first, second));
  _mm256_store_ps(values + 8, _mm256_unpackhi_ps(first, second));
  for (int64_t j = 0; j < n; ++j) y[k + j] = T(values[j]);
}
#endif

}  // namespace

void CpuBackend::random_uniform(const Tensor& out, double from, double to, uint64_t seed, uint64_t offset) {
  EMBER_DISPATCH_FLOATING(out.dtype(), "uniform_", [&] {
    if constexpr (std::is_same_v<scalar_t, double>) {
      // uniform_double's 53 bits, (hi << 21) | (lo >> 11), as hi 2^21 + (lo >> 11) in double: exact,
      // and a form the compiler vectorizes (it does not vectorize the 64-bit integer's conversion).
      const double span = to - from;
      fill_by_block<double>(out, seed, offset, 2, [=](double* y, const uint32_t* w, int64_t count) {
        for (int64_t k = 0; k < count; ++k) {
          const double bits53 = static_cast<double>(w[2 * k]) * 2097152.0 + static_cast<double>(w[2 * k + 1] >> 11);
          y[k] = from + span * (bits53 * (1.0 / 9007199254740992.0));
        }
      });
    } else {
      const float lo = static_cast<float>(from), span = static_cast<float>(to - from);
      fill_by_block<scalar_t>(out, seed, offset, 4, [=](scalar_t* y, const uint32_t* w, int64_t count) {
        for (int64_t k = 0; k < count; ++k) y[k] = scalar_t(lo + span * uniform_float(w[k]));
      });
    }
  });
}

// Box-Muller: two uniforms (u1 in (0, 1]) make two normals, r cos(theta) and r sin(theta): the
// even element of a pair takes the cosine, the odd one the sine.
void CpuBackend::random_normal(const Tensor& out, double mean, double std, uint64_t seed, uint64_t offset) {
  EMBER_DISPATCH_FLOATING(out.dtype(), "normal_", [&] {
    if constexpr (std::is_same_v<scalar_t, double>) {
      // One pair per block: its four words make the two 53-bit uniforms.
      fill_by_block<double>(out, seed, offset, 2, [=](double* y, const uint32_t* w, int64_t count) {
        for (int64_t k = 0; k < count; k += 2) {
          const uint32_t* r = w + 2 * k;
          const double u1 = 1.0 - uniform_double(r[0], r[1]), u2 = uniform_double(r[2], r[3]);
          const double rad = std::sqrt(-2.0 * std::log(u1)), th = kTwoPi * u2;
          y[k] = mean + std * rad * std::cos(th);
          if (k + 1 < count) y[k + 1] = mean + std * rad * std::sin(th);
        }
      });
    } else {
      // Two pairs per block: words 0 and 1 make the first pair's uniforms, 2 and 3 the second's.
      const float m = static_cast<float>(mean), s = static_cast<float>(std);
      fill_by_block<scalar_t>(out, seed, offset, 4, [=](scalar_t* y, const uint32_t* w, int64_t count) {
#if EMBER_HAVE_VEC_MATH
        for (int64_t k = 0; k < count; k += 16) box_muller16(w, k, count, m, s, y);
#else
        for (int64_t k = 0; k < count; k += 2) {
          const float u1 = 1.0f - uniform_float(w[k]), u2 = uniform_float(w[k + 1]);
          const float rad = std::sqrt(-2.0f * std::log(u1)), th = static_cast<float>(kTwoPi) * u2;
          y[k] = scalar_t(m + s * rad * std::cos(th));
          if (k + 1 < count) y[k + 1] = scalar_t(m + s * rad * std::sin(th));
        }
#endif
      });
    }
  });
}

// Uniform integers in [low, high) from 64 random bits (bias below 2^-32 for any range).
void CpuBackend::random_int(const Tensor& out, int64_t low, int64_t high, uint64_t seed, uint64_t offset) {
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  EMBER_DISPATCH_ALL(out.dtype(), "randint", [&] {
    fill_by_block<scalar_t>(out, seed, offset, 2, [=](scalar_t* y, const uint32_t* w, int64_t count) {
      for (int64_t k = 0; k < count; ++k) {
        const uint64_t bits = (uint64_t{w[2 * k]} << 32) | w[2 * k + 1];
        const int64_t v = static_cast<int64_t>(static_cast<uint64_t>(low) + bits % range);
        if constexpr (std::is_same_v<scalar_t, bool>)
          y[k] = v != 0;
        else
          y[k] = scalar_t(static_cast<opmath_t<scalar_t>>(v));
      }
    });
  });
}

// value where the element's uniform draw u is below p, else 0. u = m / 2^24 (m the word's top 24
// bits) is below p exactly when m < ceil(p 2^24): an integer compare, with no rounding of u or p
// (for doubles, m is 53 bits and the bound ceil(p 2^53)).
void CpuBackend::random_bernoulli(const Tensor& out, double p, double value, uint64_t seed, uint64_t offset) {
  EMBER_DISPATCH_ALL(out.dtype(), "bernoulli_", [&] {
    const scalar_t on = Scalar(value).to<scalar_t>(), off = Scalar(0).to<scalar_t>();
    if (out.dtype() == kFloat64) {
      const uint64_t bound = static_cast<uint64_t>(std::ceil(p * 9007199254740992.0));
      fill_by_block<scalar_t>(out, seed, offset, 2, [=](scalar_t* y, const uint32_t* w, int64_t count) {
        for (int64_t k = 0; k < count; ++k)
          y[k] = (((uint64_t{w[2 * k]} << 32) | w[2 * k + 1]) >> 11) < bound ? on : off;
      });
    } else {
      const uint32_t bound = static_cast<uint32_t>(std::ceil(p * 16777216.0));
      fill_by_block<scalar_t>(out, seed, offset, 4, [=](scalar_t* y, const uint32_t* w, int64_t count) {
        for (int64_t k = 0; k < count; ++k) y[k] = (w[k] >> 8) < bound ? on : off;
      });
    }
  });
}

}  // namespace ember::cpu
