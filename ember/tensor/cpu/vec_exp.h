#pragma once
// exp(x) for 8 floats at once with AVX2 + FMA, for x <= 0 (softmax's x - max).
// Range reduction x = n ln2 + r with |r| <= ln2 / 2, then exp(r) by its Taylor series to
// degree 7 (truncation error < 6e-9 relative, below float's 6e-8 epsilon) and 2^n built
// in the exponent bits. Inputs below -87.3 (where exp underflows float's normal range)
// give 0; NaN gives NaN.
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define EMBER_HAVE_VEC_EXP 1

namespace ember::cpu {

inline __m256 exp_nonpositive(__m256 x) {
  const __m256 log2e = _mm256_set1_ps(1.44269504088896341f);
  const __m256 ln2_hi = _mm256_set1_ps(0.693359375f), ln2_lo = _mm256_set1_ps(-2.12194440e-4f);
  const __m256 lowest = _mm256_set1_ps(-87.3f);
  const __m256 nan_mask = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  const __m256 under = _mm256_cmp_ps(x, lowest, _CMP_LT_OQ);
  x = _mm256_max_ps(x, lowest);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, ln2_hi, x);  // x - n ln2, in two steps for accuracy
  r = _mm256_fnmadd_ps(n, ln2_lo, r);
  __m256 p = _mm256_set1_ps(1.0f / 5040);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
  y = _mm256_andnot_ps(under, y);                                            // underflow -> 0
  return _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_nanf("")), nan_mask);  // NaN -> NaN
}

}  // namespace ember::cpu
#endif
