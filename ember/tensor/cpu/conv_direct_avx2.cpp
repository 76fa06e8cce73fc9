// The direct convolution's tiles for AVX2 + FMA. 16 ymm registers hold 4 x 3 accumulators,
// 3 input vectors and one broadcast weight (forward), 6 x 2 accumulators, 2 gradient vectors
// and one broadcast input (backward-weight).
#include "ember/tensor/cpu/conv_direct_kernels.h"

namespace ember::cpu::direct {
namespace {

struct Avx2 {
  using V = __m256;
  static constexpr int width = 8;
  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
};

constexpr int kForwardBlock = 4, kForwardVectors = 3, kWeightVectors = 2, kWeightEntries = 6;

}  // namespace

Tiling tiling_avx2() {
  return {Avx2::width, kForwardBlock, kForwardVectors * Avx2::width, kWeightVectors * Avx2::width};
}
void forward_avx2(const ForwardArgs& a) { forward_blocks<Avx2, kForwardBlock, kForwardVectors>(a); }
void weight_avx2(const WeightArgs& a) { weight_blocks<Avx2, kWeightVectors, kWeightEntries>(a); }

}  // namespace ember::cpu::direct
