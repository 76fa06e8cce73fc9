// The direct int8 convolution's tiles for AVX2 (int8_conv_direct_kernels.h): 8 positions per
// register; vpmaddubsw multiplies the 4 bytes of each lane pairwise into int16 and vpmaddwd by
// ones adds the pairs into int32 (7-bit activations never saturate it; Note [Int8 GEMM]).
// 16 ymm registers hold 4 x 2 accumulators beside the inputs, the broadcast, the ones and
// vpmaddubsw's result.
#include "ember/tensor/cpu/int8_conv_direct_kernels.h"

namespace ember::cpu::int8_direct {
namespace {

struct Avx2 {
  using I = __m256i;
  using F = __m256;
  static constexpr int64_t lanes = 8;
  static I zero() { return _mm256_setzero_si256(); }
  static I load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
  static void store(int32_t* p, I v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
  static I set1(int32_t x) { return _mm256_set1_epi32(x); }
  static I dot(I acc, I x, I w) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(x, w), _mm256_set1_epi16(1)));
  }
  static F set1f(float x) { return _mm256_set1_ps(x); }
  static I sub(I a, I b) { return _mm256_sub_epi32(a, b); }
  static I add(I a, I b) { return _mm256_add_epi32(a, b); }
  static F to_float(I a) { return _mm256_cvtepi32_ps(a); }
  static I to_int(F a) { return _mm256_cvtps_epi32(a); }  // nearest, ties to even (as nearbyint)
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F mulf(F a, F b) { return _mm256_mul_ps(a, b); }
  static F maxf(F a, F b) { return _mm256_max_ps(a, b); }
  static F minf(F a, F b) { return _mm256_min_ps(a, b); }
  static I maxi(I a, I b) { return _mm256_max_epi32(a, b); }
  static I mini(I a, I b) { return _mm256_min_epi32(a, b); }
  static void storef(float* p, F v) { _mm256_storeu_ps(p, v); }
  // 8 int32 in [0, 255] -> 8 bytes: packs within each 128-bit lane, then the lanes' low words.
  static void store_bytes(uint8_t* p, I q) {
    const __m256i packed = _mm256_packus_epi16(_mm256_packs_epi32(q, q), _mm256_setzero_si256());
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p),
                     _mm_unpacklo_epi32(_mm256_castsi256_si128(packed), _mm256_extracti128_si256(packed, 1)));
  }
};

constexpr int kBlock = 4, kVectors = 2;

}  // namespace

Tiling tiling_avx2() { return {Avx2::lanes, kBlock}; }
void image_blocks_avx2(const Args& a) { image_blocks_of<Avx2, kBlock, kVectors>(a); }

}  // namespace ember::cpu::int8_direct
