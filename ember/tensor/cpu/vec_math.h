#pragma once
// exp, expm1, log, log1p and the functions built on them for 8 floats at once with AVX2 + FMA:
// what the float32 elementwise loops use for the ops whose scalar form calls libm one value at a
// time (tanh took 8.6 ms on 800K floats, relu 0.05 ms), softmax's exp, and randn's Box-Muller.
//
// exp: range reduction x = n ln2 + r with |r| <= ln2 / 2; then e^r - 1 = r q(r), q by its Taylor
// series to degree 6 (truncation error < 6e-9 relative, below float's 6e-8 epsilon), and 2^n
// built in the exponent bits. log: x = 2^k (1 + f) from the bits, then fdlibm's log(1 + f). Each
// function's error is a few units in the last place, measured against double in
// tests/test_ops.cpp (Elementwise.VectorFormsOfLibmOpsAreWithinAFewUlpsAndIndependentOfPlace);
// NaN gives NaN.
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#include <limits>
#define EMBER_HAVE_VEC_MATH 1

namespace ember::cpu {

constexpr float kInf = std::numeric_limits<float>::infinity();

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

// p[0] + p[1] t + ... + p[N-1] t^(N-1), by Horner's rule.
template <int N>
inline __m256 polynomial(const float (&p)[N], __m256 t) {
  __m256 y = _mm256_set1_ps(p[N - 1]);
  for (int i = N - 2; i >= 0; --i) y = _mm256_fmadd_ps(y, t, _mm256_set1_ps(p[i]));
  return y;
}

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

// e^x - 1 over the whole float range: expm1_8, and e^x itself above 88 (where the two are
// the same float), up to inf.
inline __m256 expm1_any8(__m256 x) {
  const __m256 big = _mm256_cmp_ps(x, _mm256_set1_ps(88.0f), _CMP_GT_OQ);
  return _mm256_blendv_ps(expm1_8(x), exp8(x), big);
}

// log(1 + f) for |f| <= 1/2: f - (f^2/2 - s (f^2/2 + R)) with s = f / (2 + f) and R = 2s^2/3 +
// 2s^4/5 + ... (|s| <= 1/5: six terms leave 1e-10 relative), fdlibm's arrangement, in which the
// small corrections carry the rounding errors.
inline __m256 log1p_small(__m256 f) {
  static const float r_p[] = {2.0f / 3, 2.0f / 5, 2.0f / 7, 2.0f / 9, 2.0f / 11, 2.0f / 13};  // R / s^2 in s^2
  const __m256 s = _mm256_div_ps(f, _mm256_add_ps(_mm256_set1_ps(2.0f), f)), t = _mm256_mul_ps(s, s);
  const __m256 r = _mm256_mul_ps(t, polynomial(r_p, t));
  const __m256 hfsq = _mm256_mul_ps(_mm256_set1_ps(0.5f), _mm256_mul_ps(f, f));
  return _mm256_sub_ps(f, _mm256_fnmadd_ps(s, _mm256_add_ps(hfsq, r), hfsq));
}

// k ln2 + y, with ln2 in two parts (k ln2_hi is exact for |k| < 2^15).
inline __m256 add_k_ln2(__m256 k, __m256 y) {
  const __m256 ln2_hi = _mm256_set1_ps(0.693359375f), ln2_lo = _mm256_set1_ps(-2.12194440e-4f);
  return _mm256_fmadd_ps(k, ln2_hi, _mm256_fmadd_ps(k, ln2_lo, y));
}

// log(x) = k ln2 + log(1 + f) with x = 2^k (1 + f), 1 + f in [sqrt(1/2), sqrt(2)) (subnormal x
// scaled by 2^23 first; f exact). 0 gives -inf, x < 0 NaN, inf inf.
inline __m256 log8(__m256 x) {
  const __m256 subnormal = _mm256_cmp_ps(x, _mm256_set1_ps(1.17549435e-38f), _CMP_LT_OQ);
  const __m256 xs = _mm256_blendv_ps(x, _mm256_mul_ps(x, _mm256_set1_ps(8388608.0f)), subnormal);  // 2^23
  const __m256i bits = _mm256_castps_si256(xs);
  // m in [1, 2) from the mantissa; halved, with k one more, where it is above sqrt(2)
  __m256 m = _mm256_castsi256_ps(
      _mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi32(0x007fffff)), _mm256_set1_epi32(0x3f800000)));
  __m256i k = _mm256_sub_epi32(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(127));
  k = _mm256_sub_epi32(k, _mm256_and_si256(_mm256_castps_si256(subnormal), _mm256_set1_epi32(23)));
  const __m256 above = _mm256_cmp_ps(m, _mm256_set1_ps(1.41421356f), _CMP_GT_OQ);
  m = _mm256_blendv_ps(m, _mm256_mul_ps(m, _mm256_set1_ps(0.5f)), above);
  k = _mm256_sub_epi32(k, _mm256_castps_si256(above));  // the mask is -1 where above
  __m256 y = add_k_ln2(_mm256_cvtepi32_ps(k), log1p_small(_mm256_sub_ps(m, _mm256_set1_ps(1.0f))));
  y = _mm256_blendv_ps(y, _mm256_set1_ps(-kInf), _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_EQ_OQ));
  y = _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, _mm256_set1_ps(kInf), _CMP_EQ_OQ));
  // x < 0 and NaN: NaN
  return _mm256_blendv_ps(y, _mm256_set1_ps(std::numeric_limits<float>::quiet_NaN()),
                          _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_NGE_UQ));
}

// log(1 + x): u = 1 + x rounded, and c its rounding error (exact, by Knuth's two-sum); then
// log(1 + x) = log(u) + log(1 + c/u) = log(u) + c/u to float's precision. x tiny gives u = 1 and
// c = x; -1 gives -inf, below NaN, inf inf.
inline __m256 log1p8(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 u = _mm256_add_ps(one, x), x_part = _mm256_sub_ps(u, one);
  const __m256 c = _mm256_add_ps(_mm256_sub_ps(one, _mm256_sub_ps(u, x_part)), _mm256_sub_ps(x, x_part));
  // c / u where it is a number: not at u = 0 (x = -1) or x = ±inf
  const __m256 finite = _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), _mm256_set1_ps(kInf), _CMP_LT_OQ);
  const __m256 used = _mm256_and_ps(finite, _mm256_cmp_ps(u, _mm256_setzero_ps(), _CMP_NEQ_OQ));
  return _mm256_add_ps(log8(u), _mm256_and_ps(used, _mm256_div_ps(c, u)));
}

// log(1 + e) for e in [0, 1], with no rounding before the kernel: f = e below 1/2, and above,
// log(1 + e) = ln2 + log(1 + f) with f = (e - 1) / 2 (exact: e - 1 by Sterbenz's lemma).
inline __m256 log1p_unit(__m256 e) {
  const __m256 upper = _mm256_cmp_ps(e, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  const __m256 f =
      _mm256_blendv_ps(e, _mm256_mul_ps(_mm256_sub_ps(e, _mm256_set1_ps(1.0f)), _mm256_set1_ps(0.5f)), upper);
  return add_k_ln2(_mm256_and_ps(upper, _mm256_set1_ps(1.0f)), log1p_small(f));
}

// PyTorch's softplus: x where beta x > threshold, else log(1 + e^(beta x)) / beta, evaluated as
// max(z, 0) + log(1 + e^-|z|) with z = beta x, the same function, whose e^-|z| never overflows.
inline __m256 softplus8(__m256 x, float beta, float threshold) {
  const __m256 z = _mm256_mul_ps(x, _mm256_set1_ps(beta));
  const __m256 e = exp8(_mm256_or_ps(z, _mm256_set1_ps(-0.0f)));  // e^-|z|
  const __m256 soft =
      _mm256_div_ps(_mm256_add_ps(_mm256_max_ps(z, _mm256_setzero_ps()), log1p_unit(e)), _mm256_set1_ps(beta));
  return keep_nan(_mm256_blendv_ps(soft, x, _mm256_cmp_ps(z, _mm256_set1_ps(threshold), _CMP_GT_OQ)), x);
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

// sigmoid(x) = 1 / (1 + e^-x), evaluated as s / (1 + e) with e = e^-|x| and s = 1 for x >= 0,
// e for x < 0: e never overflows, so results far left of 0 are subnormal numbers, not 0; and
// 1 - sigmoid(x) = rest / (1 + e), rest the other of 1 and e, without cancellation.
struct SigmoidParts {
  __m256 den, s, rest;
};
inline SigmoidParts sigmoid_parts(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 e = exp8(_mm256_or_ps(x, _mm256_set1_ps(-0.0f)));  // e^-|x|
  const __m256 negative = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
  return {_mm256_add_ps(one, e), _mm256_blendv_ps(one, e, negative), _mm256_blendv_ps(e, one, negative)};
}
inline __m256 sigmoid8(__m256 x) {
  const SigmoidParts p = sigmoid_parts(x);
  return _mm256_div_ps(p.s, p.den);
}
// silu(x) = x sigmoid(x).
inline __m256 silu8(__m256 x) {
  const SigmoidParts p = sigmoid_parts(x);
  return _mm256_div_ps(_mm256_mul_ps(x, p.s), p.den);
}

// x for x > 0, alpha (e^x - 1) elsewhere.
inline __m256 elu8(__m256 x, float alpha) {
  const __m256 neg = _mm256_mul_ps(_mm256_set1_ps(alpha), expm1_8(_mm256_min_ps(x, _mm256_setzero_ps())));
  return keep_nan(_mm256_blendv_ps(neg, x, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ)), x);
}

// elu's gradient: d where x > 0, d alpha e^x elsewhere (NaN for NaN x: e^x keeps it).
inline __m256 elu_backward8(__m256 d, __m256 x, float alpha) {
  const __m256 neg = _mm256_mul_ps(d, _mm256_mul_ps(_mm256_set1_ps(alpha), exp8(x)));
  return _mm256_blendv_ps(neg, d, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ));
}

// PyTorch's gelu(approximate="tanh"): x/2 (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3),
// evaluated as x sigmoid(2u) (the same function): sigmoid keeps the left tail's relative
// accuracy, where 1 + tanh(u) cancels.
inline __m256 gelu_tanh_inner2(__m256 x) {  // 2u
  const __m256 k2 = _mm256_set1_ps(1.59576912160573071176f), c = _mm256_set1_ps(0.044715f);
  return _mm256_mul_ps(k2, _mm256_fmadd_ps(_mm256_mul_ps(c, x), _mm256_mul_ps(x, x), x));
}
inline __m256 gelu_tanh8(__m256 x) { return _mm256_mul_ps(x, sigmoid8(gelu_tanh_inner2(x))); }

// The normal distribution's pieces that gelu and its gradient share, with z = x / sqrt(2) and
// a = |z|. For a < 1 (`center`), erf(z) = z P(z^2). Beyond, erfc(a) = e h / a with
// e = e^(-a^2) = e^(-x^2/2), which is also the density's shape, and h = a erfcx(a), a polynomial
// in (a - 2) / (a + 2). a^2 = x^2 / 2 is taken from x, exact, as its rounded value and the
// rounding error (an FMA), whose factor e^(-err) = 1 - err matters: the rounding of z or of a^2
// alone would cost 1e-5 at a = 9. P and h are Chebyshev interpolants from tools/fit_gelu.py, of
// relative error 5.5e-8 and 3e-8.
constexpr float kSqrtHalf = 0.70710678118654752f;
struct NormalParts {
  __m256 center;    // a < 1
  __m256 half_erf;  // erf(z) / 2 where a < 1
  __m256 e;         // e^(-x^2/2), |x| clamped to 11 sqrt(2) (e^(-121) is already 0 in float)
  __m256 h;         // a erfcx(a) where a >= 1, so that erfc(a) = e h / a
  __m256 ax;        // |x| clamped to [sqrt(2), 11 sqrt(2)], the tails' sqrt(2) a
};
inline NormalParts normal_parts(__m256 x) {
  static const float erf_p[] = {1.12837911f,    -0.376123428f,  0.112803169f,
                                -0.0267150551f, 0.00492176181f, -0.000564805989f};  // erf(z) / z in z^2 on [0, 1]
  static const float h_p[] = {0.510791361f,    0.167210922f,  -0.203844652f, 0.121519499f,    -0.0289739612f,
                              -0.00758348685f, 0.0048683621f, 0.0013731264f, -0.00145501073f, 0.000283416768f};
  const __m256 half = _mm256_set1_ps(0.5f), sign_bit = _mm256_set1_ps(-0.0f);
  const __m256 sqrt_half = _mm256_set1_ps(kSqrtHalf);
  NormalParts p;
  const __m256 z = _mm256_mul_ps(x, sqrt_half);
  p.center = _mm256_cmp_ps(_mm256_andnot_ps(sign_bit, z), _mm256_set1_ps(1.0f), _CMP_LT_OQ);
  p.half_erf = _mm256_mul_ps(half, _mm256_mul_ps(z, polynomial(erf_p, _mm256_mul_ps(z, z))));
  const __m256 ag = _mm256_min_ps(_mm256_andnot_ps(sign_bit, x), _mm256_set1_ps(15.5563492f));
  const __m256 x2 = _mm256_mul_ps(ag, ag);
  const __m256 sq = _mm256_mul_ps(half, x2), sq_err = _mm256_mul_ps(half, _mm256_fmsub_ps(ag, ag, x2));
  const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), sq));
  p.e = _mm256_fnmadd_ps(e, sq_err, e);  // e^(-sq) (1 - sq_err)
  const __m256 ax = _mm256_max_ps(ag, _mm256_set1_ps(1.41421356f));
  const __m256 two_sqrt2 = _mm256_set1_ps(2.82842712f);  // (a - 2) / (a + 2) = (|x| - 2 sqrt(2)) / (|x| + 2 sqrt(2))
  p.h = polynomial(h_p, _mm256_div_ps(_mm256_sub_ps(ax, two_sqrt2), _mm256_add_ps(ax, two_sqrt2)));
  p.ax = ax;
  return p;
}

// PyTorch's gelu (approximate="none"): x Φ(x), Φ(x) = 1/2 + erf(z) / 2. In the tails, gelu(x) =
// x - t for z > 1 and t for z < -1, t = x erfc(a) / 2 = ±e h / sqrt(2), the tiny factor e last
// so that nothing before it is subnormal: the left tail keeps its relative accuracy, where
// 1 + erf(z) would cancel.
inline __m256 gelu8(__m256 x) {
  const NormalParts p = normal_parts(x);
  const __m256 center = _mm256_mul_ps(x, _mm256_add_ps(_mm256_set1_ps(0.5f), p.half_erf));
  const __m256 signed_sqrt_half = _mm256_or_ps(_mm256_and_ps(_mm256_set1_ps(-0.0f), x), _mm256_set1_ps(kSqrtHalf));
  const __m256 t = _mm256_mul_ps(_mm256_mul_ps(signed_sqrt_half, p.h), p.e);
  // (+ 0 x: NaN at x = -inf, as x (1 + erf(z)) / 2 gives there, PyTorch's kernels included)
  const __m256 left = _mm256_add_ps(t, _mm256_mul_ps(_mm256_setzero_ps(), x));
  const __m256 tails = _mm256_blendv_ps(left, _mm256_sub_ps(x, t), _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ));
  return keep_nan(_mm256_blendv_ps(tails, center, p.center), x);
}

// gelu's gradient: d (Φ(x) + x φ(x)), φ(x) = e^(-x^2/2) / sqrt(2 pi).
inline __m256 gelu_backward8(__m256 d, __m256 x) {
  const NormalParts p = normal_parts(x);
  const __m256 half = _mm256_set1_ps(0.5f);
  // erfc(a) / 2 = e h / (2a) = e h / (sqrt(2) |x|)
  const __m256 h_over_ax = _mm256_div_ps(_mm256_mul_ps(p.h, _mm256_set1_ps(kSqrtHalf)), p.ax);
  const __m256 tail = _mm256_mul_ps(h_over_ax, p.e);
  const __m256 tails = _mm256_blendv_ps(tail, _mm256_sub_ps(_mm256_set1_ps(1.0f), tail),
                                        _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ));
  const __m256 cdf = _mm256_blendv_ps(tails, _mm256_add_ps(half, p.half_erf), p.center);
  const __m256 pdf = _mm256_mul_ps(p.e, _mm256_set1_ps(0.39894228040143267794f));
  return keep_nan(_mm256_mul_ps(d, _mm256_fmadd_ps(x, pdf, cdf)), x);
}

// gelu(x, "tanh")'s gradient: with s = sigmoid(2u) = (1 + tanh(u)) / 2, 1 - tanh(u)^2 =
// 4 s (1 - s), so d (s + x/2 4 s (1 - s) u') = d s (1 + 2x (1 - s) u'), u' = k (1 + 3c x^2);
// s and 1 - s each come from e^-|2u| without cancellation.
inline __m256 gelu_tanh_backward8(__m256 d, __m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const SigmoidParts p = sigmoid_parts(gelu_tanh_inner2(x));
  const __m256 s = _mm256_div_ps(p.s, p.den), rest = _mm256_div_ps(p.rest, p.den);
  const __m256 k = _mm256_set1_ps(0.79788456080286535588f), c3 = _mm256_set1_ps(3 * 0.044715f);
  const __m256 du = _mm256_mul_ps(k, _mm256_fmadd_ps(_mm256_mul_ps(c3, x), x, one));
  const __m256 x2 = _mm256_add_ps(x, x);
  return _mm256_mul_ps(d, _mm256_mul_ps(s, _mm256_fmadd_ps(_mm256_mul_ps(x2, rest), du, one)));
}

// sin and cos of theta in [0, 2 pi], Box-Muller's angle (not a general sin: large arguments would
// need a longer reduction). theta = k pi/2 + r with |r| <= pi/4, pi/2 in three parts (k pi/2_hi is
// exact for k <= 4, so r keeps its low bits); then Cephes' minimax polynomials for sin r and
// cos r, and the quadrant k mod 4 swaps and negates them: sin = S, C, -S, -C and cos = C, -S, -C,
// S for quadrants 0 to 3.
inline void sincos_circle8(__m256 theta, __m256* sin_out, __m256* cos_out) {
  const __m256 k = _mm256_round_ps(_mm256_mul_ps(theta, _mm256_set1_ps(0.63661977236758134f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(1.5703125f), theta);
  r = _mm256_fnmadd_ps(k, _mm256_set1_ps(4.837512969970703125e-4f), r);
  r = _mm256_fnmadd_ps(k, _mm256_set1_ps(7.54978995489188216e-8f), r);
  const __m256 z = _mm256_mul_ps(r, r);
  static constexpr float kSin[] = {-1.6666654611e-1f, 8.3321608736e-3f, -1.9515295891e-4f};
  static constexpr float kCos[] = {4.166664568298827e-2f, -1.388731625493765e-3f, 2.443315711809948e-5f};
  const __m256 sin_r = _mm256_fmadd_ps(_mm256_mul_ps(r, z), polynomial(kSin, z), r);
  const __m256 cos_r = _mm256_fmadd_ps(_mm256_mul_ps(z, z), polynomial(kCos, z),
                                       _mm256_fnmadd_ps(_mm256_set1_ps(0.5f), z, _mm256_set1_ps(1.0f)));
  const __m256i q = _mm256_cvtps_epi32(k);
  const __m256 swap =
      _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(q, _mm256_set1_epi32(1)), _mm256_set1_epi32(1)));
  // The sign bit from bit 1 of q (sin) and of q + 1 (cos).
  const __m256 sin_sign = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_and_si256(q, _mm256_set1_epi32(2)), 30));
  const __m256 cos_sign = _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_and_si256(_mm256_add_epi32(q, _mm256_set1_epi32(1)), _mm256_set1_epi32(2)), 30));
  *sin_out = _mm256_xor_ps(_mm256_blendv_ps(sin_r, cos_r, swap), sin_sign);
  *cos_out = _mm256_xor_ps(_mm256_blendv_ps(cos_r, sin_r, swap), cos_sign);
}

}  // namespace ember::cpu
#endif
