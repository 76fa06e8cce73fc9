// The direct int8 convolution's tiles for AVX-512 VNNI (int8_conv_direct_kernels.h), compiled
// with -mavx512f -mavx512vnni (this file only) and called only where the CPU has them: 16
// positions per register, one vpdpbusd per 64 multiply-adds; 32 zmm registers hold 8 x 3
// accumulators, 3 input vectors and the broadcast; the epilogue converts 16 lanes per step and
// narrows them to bytes with vpmovdb.
// GCC 12's AVX-512 intrinsics pass an undefined vector as their unused mask source and then warn
// that it may be used uninitialized (it is not: the mask is all ones).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "ember/tensor/cpu/int8_conv_direct_kernels.h"

namespace ember::cpu::int8_direct {
namespace {

struct Vnni {
  using I = __m512i;
  using F = __m512;
  static constexpr int64_t lanes = 16;
  static I zero() { return _mm512_setzero_si512(); }
  static I load(const void* p) { return _mm512_loadu_si512(p); }
  static void store(int32_t* p, I v) { _mm512_storeu_si512(p, v); }
  static I set1(int32_t x) { return _mm512_set1_epi32(x); }
  static I dot(I acc, I x, I w) { return _mm512_dpbusd_epi32(acc, x, w); }
  static F set1f(float x) { return _mm512_set1_ps(x); }
  static I sub(I a, I b) { return _mm512_sub_epi32(a, b); }
  static I add(I a, I b) { return _mm512_add_epi32(a, b); }
  static F to_float(I a) { return _mm512_cvtepi32_ps(a); }
  static I to_int(F a) { return _mm512_cvtps_epi32(a); }  // nearest, ties to even (as nearbyint)
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F mulf(F a, F b) { return _mm512_mul_ps(a, b); }
  static F maxf(F a, F b) { return _mm512_max_ps(a, b); }
  static F minf(F a, F b) { return _mm512_min_ps(a, b); }
  static I maxi(I a, I b) { return _mm512_max_epi32(a, b); }
  static I mini(I a, I b) { return _mm512_min_epi32(a, b); }
  static void storef(float* p, F v) { _mm512_storeu_ps(p, v); }
  // 16 int32 in [0, 255] -> 16 bytes (vpmovdb truncates; the clamp made that exact).
  static void store_bytes(uint8_t* p, I q) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(q)); }
};

constexpr int kBlock = 8, kVectors = 3;

}  // namespace

Tiling tiling_vnni() { return {Vnni::lanes, kBlock}; }
void image_blocks_vnni(const Args& a) { image_blocks_of<Vnni, kBlock, kVectors>(a); }

}  // namespace ember::cpu::int8_direct
