#pragma once
// exp, expm1 and the functions built on them for 8 floats at once with AVX2 + FMA: what the
// float32 elementwise loops use for the ops whose scalar form calls libm one value at a time
// (tanh took 8.6 ms on 800K floats, relu 0.05 ms), and softmax's exp.
//
// Range reduction x = n ln2 + r with |r| <= ln2 / 2; then e^r - 1 = r q(r), q by its Taylor
// series to degree 6 (truncation error < 6e-9 relative, below float's 6e-8 epsilon), and 2^n
// built in the exponent bits. Each function's error is a few units in the last place, measured
// against double in tests/test_vec_math.cpp; NaN gives NaN.
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define EMBER_HAVE_VEC_MATH 1

namespace ember::cpu {

// n = round(x / ln2) and r = x - n ln2 (ln2 in two parts, so that r keeps its low bits).
inline __m256 reduce_ln2(__m256 x, __m256* n) {
  const __m256 log2e = _mm256_set1_ps(1.44269504088896341f);
  const __m256 ln2_hi = _mm256_set1_ps(0.693359375f), ln2_lo = _mm256_set1_ps(-2.12194440e-4f);
  *n = _mm256_round_ps(_mm256_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 r = _mm256_fnmadd_ps(*n, ln2_hi, x);
  return _mm256_fnmadd_ps(*n, ln2_lo, r);
}

// q(r) = (e^r - 1) / r = 1 + r/2 + r^2/6 + ... + r^6/7!, by Horner's rule.
inline __m256 expm1_quotient(__m256 r) {
  __m256 q = _mm256_set1_ps(1.0f / 5040);
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.0f / 720));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.0f / 120));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.0f / 24));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.0f / 6));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(0.5f));
  return _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.0f));
}

// 2^n for integers n in [-126, 127] (a normal float: exponent field n + 127, no mantissa).
inline __m256 pow2(__m256i n) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
}

inline __m256 keep_nan(__m256 y, __m256 x) { return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q)); }

// e^x for x <= 0 (softmax's x - max): below -87.3, where e^x leaves float's normal range, 0.
inline __m256 exp_nonpositive(__m256 x) {
  const __m256 lowest = _mm256_set1_ps(-87.3f);
  const __m256 under = _mm256_cmp_ps(x, lowest, _CMP_LT_OQ);
  __m256 n;
  const __m256 r = reduce_ln2(_mm256_max_ps(x, lowest), &n);
  const __m256 y =
      _mm256_mul_ps(_mm256_fmadd_ps(expm1_quotient(r), r, _mm256_set1_ps(1.0f)), pow2(_mm256_cvtps_epi32(n)));
  return keep_nan(_mm256_andnot_ps(under, y), x);
}

// e^x over the whole float range, subnormal results included. x is clamped to [-104, 89],
// beyond which e^x rounds to 0 or overflows to inf anyway; 2^n (n in [-150, 128]) is applied
// as two factors 2^(n/2) that are each a normal float, so the first product is exact and the
// second rounds once (into the subnormals, or to inf).
inline __m256 exp8(__m256 x) {
  const __m256 clamped = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-104.0f)), _mm256_set1_ps(89.0f));
  __m256 n;
  const __m256 r = reduce_ln2(clamped, &n);
  const __m256 p = _mm256_fmadd_ps(expm1_quotient(r), r, _mm256_set1_ps(1.0f));  // e^r
  const __m256i ni = _mm256_cvtps_epi32(n), half = _mm256_srai_epi32(ni, 1);
  return keep_nan(_mm256_mul_ps(_mm256_mul_ps(p, pow2(half)), pow2(_mm256_sub_epi32(ni, half))), x);
}

// e^x - 1 without cancellation near 0: 2^n (e^r - 1) + (2^n - 1), one rounding (an FMA), where
// 2^n - 1 is exact for |n| <= 24. x is clamped to [-87, 88]: below -87 the result rounds to -1;
// above 88 it stays e^88 - 1 (tanh and elu, the callers, never go there).
inline __m256 expm1_8(__m256 x) {
  const __m256 clamped = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
  __m256 n;
  const __m256 r = reduce_ln2(clamped, &n);
  const __m256 s = pow2(_mm256_cvtps_epi32(n));
  const __m256 y = _mm256_fmadd_ps(s, _mm256_mul_ps(r, expm1_quotient(r)), _mm256_sub_ps(s, _mm256_set1_ps(1.0f)));
  return keep_nan(y, x);
}

// tanh(x) = e / (e + 2) with e = e^(2|x|) - 1, and x's sign put back (tanh(-0) = -0). |x| is
// clamped to 10, where tanh already rounds to 1 (at 9 it does not yet).
inline __m256 tanh8(__m256 x) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 a = _mm256_min_ps(_mm256_andnot_ps(sign, x), _mm256_set1_ps(10.0f));
  const __m256 e = expm1_8(_mm256_add_ps(a, a));
  const __m256 t = _mm256_div_ps(e, _mm256_add_ps(e, _mm256_set1_ps(2.0f)));
  return keep_nan(_mm256_or_ps(t, _mm256_and_ps(sign, x)), x);
}

// sigmoid(x) = 1 / (1 + e^-x), evaluated as n / (1 + e) with e = e^-|x| and n = 1 for x >= 0,
// e for x < 0: e never overflows, so results far left of 0 are subnormal numbers, not 0.
inline __m256 sigmoid_parts(__m256 x, __m256* numerator) {
  const __m256 e = exp8(_mm256_or_ps(x, _mm256_set1_ps(-0.0f)));  // e^-|x|
  *numerator = _mm256_blendv_ps(_mm256_set1_ps(1.0f), e, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
  return _mm256_add_ps(_mm256_set1_ps(1.0f), e);
}
inline __m256 sigmoid8(__m256 x) {
  __m256 n;
  const __m256 d = sigmoid_parts(x, &n);
  return _mm256_div_ps(n, d);
}
// silu(x) = x sigmoid(x).
inline __m256 silu8(__m256 x) {
  __m256 n;
  const __m256 d = sigmoid_parts(x, &n);
  return _mm256_div_ps(_mm256_mul_ps(x, n), d);
}

// x for x > 0, alpha (e^x - 1) elsewhere.
inline __m256 elu8(__m256 x, float alpha) {
  const __m256 neg = _mm256_mul_ps(_mm256_set1_ps(alpha), expm1_8(_mm256_min_ps(x, _mm256_setzero_ps())));
  return keep_nan(_mm256_blendv_ps(neg, x, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ)), x);
}

// PyTorch's gelu(approximate="tanh"): x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
inline __m256 gelu_tanh8(__m256 x) {
  const __m256 k = _mm256_set1_ps(0.79788456080286535588f), c = _mm256_set1_ps(0.044715f);
  const __m256 inner = _mm256_mul_ps(k, _mm256_fmadd_ps(_mm256_mul_ps(c, x), _mm256_mul_ps(x, x), x));
  const __m256 half_x = _mm256_mul_ps(_mm256_set1_ps(0.5f), x);
  return _mm256_fmadd_ps(half_x, tanh8(inner), half_x);
}

// p[0] + p[1] t + ... + p[N-1] t^(N-1), by Horner's rule.
template <int N>
inline __m256 polynomial(const float (&p)[N], __m256 t) {
  __m256 y = _mm256_set1_ps(p[N - 1]);
  for (int i = N - 2; i >= 0; --i) y = _mm256_fmadd_ps(y, t, _mm256_set1_ps(p[i]));
  return y;
}

// PyTorch's gelu (approximate="none"): x Φ(x), with Φ(x) = (1 + erf(z)) / 2 and z = x / sqrt(2).
// For |z| < 1, erf(z) = z P(z^2). Beyond, with erfc(a) = e^(-a^2) h / a, gelu(x) is x - t for
// z > 1 and t for z < -1, where t = x erfc(|z|) / 2 = ±e^(-a^2) h / sqrt(2) (x / a = ±sqrt(2)):
// the left tail keeps its relative accuracy, where 1 + erf(z) would cancel. a^2 = x^2 / 2 is
// taken from x, exact, as its rounded value and the rounding error (an FMA), whose factor
// e^(-err) = 1 - err matters: the rounding of z or of a^2 alone would cost 1e-5 at a = 9. P and
// h (a polynomial in (a - 2) / (a + 2)) are Chebyshev interpolants from tools/fit_gelu.py, of
// relative error 5.5e-8 and 3e-8.
inline __m256 gelu8(__m256 x) {
  static const float erf_p[] = {1.12837911f,    -0.376123428f,  0.112803169f,
                                -0.0267150551f, 0.00492176181f, -0.000564805989f};  // erf(z) / z in z^2 on [0, 1]
  static const float h_p[] = {0.510791361f,    0.167210922f,  -0.203844652f, 0.121519499f,    -0.0289739612f,
                              -0.00758348685f, 0.0048683621f, 0.0013731264f, -0.00145501073f, 0.000283416768f};
  const __m256 one = _mm256_set1_ps(1.0f), half = _mm256_set1_ps(0.5f), sign_bit = _mm256_set1_ps(-0.0f);
  const __m256 z = _mm256_mul_ps(x, _mm256_set1_ps(0.70710678118654752f));
  const __m256 center =
      _mm256_mul_ps(x, _mm256_fmadd_ps(half, _mm256_mul_ps(z, polynomial(erf_p, _mm256_mul_ps(z, z))), half));
  // |x| clamped to [sqrt(2), 11 sqrt(2)], a to [1, 11]: e^(-121) is already 0 in float
  const __m256 ax = _mm256_min_ps(_mm256_max_ps(_mm256_andnot_ps(sign_bit, x), _mm256_set1_ps(1.41421356f)),
                                  _mm256_set1_ps(15.5563492f));
  const __m256 two_sqrt2 = _mm256_set1_ps(2.82842712f);  // (a - 2) / (a + 2) = (|x| - 2 sqrt(2)) / (|x| + 2 sqrt(2))
  const __m256 h = polynomial(h_p, _mm256_div_ps(_mm256_sub_ps(ax, two_sqrt2), _mm256_add_ps(ax, two_sqrt2)));
  const __m256 x2 = _mm256_mul_ps(ax, ax);
  const __m256 sq = _mm256_mul_ps(half, x2), sq_err = _mm256_mul_ps(half, _mm256_fmsub_ps(ax, ax, x2));
  const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), sq));
  const __m256 e_exact = _mm256_fnmadd_ps(e, sq_err, e);  // e^(-a^2) = e^(-sq) (1 - sq_err)
  // the tiny factor last, so that nothing before it is subnormal
  const __m256 t = _mm256_mul_ps(
      _mm256_mul_ps(_mm256_or_ps(_mm256_and_ps(sign_bit, x), _mm256_set1_ps(0.70710678118654752f)), h), e_exact);
  // (+ 0 x: NaN at x = -inf, as x (1 + erf(z)) / 2 gives there, PyTorch's kernels included)
  const __m256 left = _mm256_add_ps(t, _mm256_mul_ps(_mm256_setzero_ps(), x));
  const __m256 tails = _mm256_blendv_ps(left, _mm256_sub_ps(x, t), _mm256_cmp_ps(z, _mm256_setzero_ps(), _CMP_GT_OQ));
  const __m256 a = _mm256_andnot_ps(sign_bit, z);
  return keep_nan(_mm256_blendv_ps(tails, center, _mm256_cmp_ps(a, one, _CMP_LT_OQ)), x);
}

}  // namespace ember::cpu
#endif
