// The direct int8 convolution's tile for AVX2 (int8_conv_direct_kernels.h): 8 positions per
// register; vpmaddubsw multiplies each lane's 4 bytes pairwise into int16 and vpmaddwd by ones
// adds the pairs into int32 (7-bit activations never saturate it; Note [Int8 GEMM]). 16 ymm
// registers hold 4 x 2 accumulators beside the inputs, the broadcast, the ones and vpmaddubsw's
// result.
#include "ember/tensor/cpu/int8_conv_direct_kernels.h"

namespace ember::cpu::int8_direct {
namespace {

struct Avx2 {
  using I = __m256i;
  static constexpr int64_t lanes = kAvx2Lanes;
  static I zero() { return _mm256_setzero_si256(); }
  static I load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
  static void store(int32_t* p, I v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
  static I set1(int32_t x) { return _mm256_set1_epi32(x); }
  static I dot(I acc, I x, I w) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(x, w), _mm256_set1_epi16(1)));
  }
};

}  // namespace

void tile_avx2(int64_t vectors, const TileArgs& a, const uint8_t* x, const int8_t* w, int32_t* acc) {
  tile_of<Avx2, kAvx2Block, kAvx2Vectors>(vectors, a, x, w, acc);
}

}  // namespace ember::cpu::int8_direct
