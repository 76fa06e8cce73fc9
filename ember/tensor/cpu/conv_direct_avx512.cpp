// The direct convolution's tiles for AVX-512F, compiled with -mavx512f (this file only) and
// called only where the CPU has it. 32 zmm registers hold 8 x 3 accumulators, 3 input vectors
// and one broadcast weight (forward), 12 x 2 accumulators, 2 gradient vectors and one
// broadcast input (backward-weight).
#include "ember/tensor/cpu/conv_direct_kernels.h"

namespace ember::cpu::direct {
namespace {

struct Avx512 {
  using V = __m512;
  static constexpr int width = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
};

constexpr int kForwardBlock = 8, kForwardVectors = 3, kWeightVectors = 2, kWeightEntries = 12;

}  // namespace

Tiling tiling_avx512() {
  return {Avx512::width, kForwardBlock, kForwardVectors * Avx512::width, kWeightVectors * Avx512::width};
}
void forward_avx512(const ForwardArgs& a) { forward_blocks<Avx512, kForwardBlock, kForwardVectors>(a); }
void weight_avx512(const WeightArgs& a) { weight_blocks<Avx512, kWeightVectors, kWeightEntries>(a); }

}  // namespace ember::cpu::direct
