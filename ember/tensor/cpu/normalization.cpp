// Layer, group and batch normalization (Note [Fused layer_norm] in tensor/ops/normalization.cpp):
// a row (a layer_norm row; a group_norm sample's group of channels; a batch_norm channel's
// planes) is read three times forward (its sum, its centered squares, the output) and twice
// backward (its sums, then the gradient), every sum in M = opmath_t<T> (batch_norm's planes then
// added in double); float32, float16 and bfloat16 go 8 values at a time, 16-bit ones widened on
// load and rounded once on store.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "ember/tensor/cpu/cpu_backend.h"
#include "ember/tensor/cpu/vec_half.h"
#include "ember/tensor/parallel.h"

namespace ember::cpu {
namespace {

#ifdef EMBER_HAVE_VEC_HALF
template <class T>
constexpr bool kVectorized = std::is_same_v<T, float> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

template <class T>
__m256 load_floats(const T* p) {
  if constexpr (std::is_same_v<T, float>)
    return _mm256_loadu_ps(p);
  else
    return widen8<std::is_same_v<T, BFloat16>>(reinterpret_cast<const uint16_t*>(p));
}
template <class T>
void store_floats(T* p, __m256 v) {
  if constexpr (std::is_same_v<T, float>)
    _mm256_storeu_ps(p, v);
  else
    store8(reinterpret_cast<uint16_t*>(p), narrow8<std::is_same_v<T, BFloat16>>(v));
}
float lane_sum(__m256 v) {
  const __m128 half = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 pair = _mm_add_ps(half, _mm_movehl_ps(half, half));
  return _mm_cvtss_f32(_mm_add_ss(pair, _mm_movehdup_ps(pair)));
}
#else
template <class T>
constexpr bool kVectorized = false;
#endif

// Σ x over a row of D values.
template <class T, class M = opmath_t<T>>
M row_sum(const T* x, int64_t D) {
  int64_t d = 0;
  M s = 0;
#ifdef EMBER_HAVE_VEC_HALF
  if constexpr (kVectorized<T>) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    for (; d + 16 <= D; d += 16) {
      s0 = _mm256_add_ps(s0, load_floats(x + d));
      s1 = _mm256_add_ps(s1, load_floats(x + d + 8));
    }
    for (; d + 8 <= D; d += 8) s0 = _mm256_add_ps(s0, load_floats(x + d));
    s = lane_sum(_mm256_add_ps(s0, s1));
  }
#endif
  for (; d < D; ++d) s += M(x[d]);
  return s;
}

// Σ (x - mean)² over a row: the second pass, which a variance from Σ x² - (Σ x)² / D would lose
// to cancellation when the mean is large against the spread.
template <class T, class M = opmath_t<T>>
M row_centered_squares(const T* x, int64_t D, M mean) {
  int64_t d = 0;
  M s = 0;
#ifdef EMBER_HAVE_VEC_HALF
  if constexpr (kVectorized<T>) {
    const __m256 mu = _mm256_set1_ps(mean);
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    for (; d + 16 <= D; d += 16) {
      const __m256 c0 = _mm256_sub_ps(load_floats(x + d), mu), c1 = _mm256_sub_ps(load_floats(x + d + 8), mu);
      s0 = _mm256_fmadd_ps(c0, c0, s0);
      s1 = _mm256_fmadd_ps(c1, c1, s1);
    }
    for (; d + 8 <= D; d += 8) {
      const __m256 c = _mm256_sub_ps(load_floats(x + d), mu);
      s0 = _mm256_fmadd_ps(c, c, s0);
    }
    s = lane_sum(_mm256_add_ps(s0, s1));
  }
#endif
  for (; d < D; ++d) s += (M(x[d]) - mean) * (M(x[d]) - mean);
  return s;
}

// y = (x - mean) * rstd * w + b over a row (w, b: D values of M, or null).
template <class T, class M = opmath_t<T>>
void row_normalize(const T* x, int64_t D, M mean, M rstd, const M* w, const M* b, T* y) {
  int64_t d = 0;
#ifdef EMBER_HAVE_VEC_HALF
  if constexpr (kVectorized<T>) {
    const __m256 mu = _mm256_set1_ps(mean), rs = _mm256_set1_ps(rstd);
    for (; d + 8 <= D; d += 8) {
      __m256 v = _mm256_mul_ps(_mm256_sub_ps(load_floats(x + d), mu), rs);
      if (w) v = _mm256_mul_ps(v, _mm256_loadu_ps(w + d));
      if (b) v = _mm256_add_ps(v, _mm256_loadu_ps(b + d));
      store_floats(y + d, v);
    }
  }
#endif
  for (; d < D; ++d) {
    M v = (M(x[d]) - mean) * rstd;
    if (w) v *= w[d];
    if (b) v += b[d];
    y[d] = T(v);
  }
}

// The statistics of R rows of D contiguous values into mean and rstd, each row then written by
// write_row(r, row, its mean, its rstd). Rows of no values get NaN statistics, as PyTorch's mean
// of an empty row.
template <class T, class WriteRow, class M = opmath_t<T>>
void normalize_rows(const T* x, int64_t R, int64_t D, double eps, M* mean, M* rstd, const WriteRow& write_row) {
  if (D == 0) {
    std::fill(mean, mean + R, std::numeric_limits<M>::quiet_NaN());
    std::fill(rstd, rstd + R, std::numeric_limits<M>::quiet_NaN());
    return;
  }
  parallel_for(0, R, std::max<int64_t>(1, kGrainSize / D), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * D;
      const M mu = row_sum(xr, D) / M(D);
      const M rs = M(1) / std::sqrt(row_centered_squares(xr, D, mu) / M(D) + M(eps));
      mean[r] = mu;
      rstd[r] = rs;
      write_row(r, xr, mu, rs);
    }
  });
}

template <class T, class M = opmath_t<T>>
void layer_norm_typed(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& out,
                      const Tensor& mean, const Tensor& rstd) {
  const int64_t R = x.size(0), D = x.size(1);
  T* yp = static_cast<T*>(out.data_ptr());
  const M* w = weight.defined() ? static_cast<const M*>(weight.data_ptr()) : nullptr;
  const M* b = bias.defined() ? static_cast<const M*>(bias.data_ptr()) : nullptr;
  normalize_rows(static_cast<const T*>(x.data_ptr()), R, D, eps, static_cast<M*>(mean.data_ptr()),
                 static_cast<M*>(rstd.data_ptr()),
                 [&](int64_t r, const T* xr, M mu, M rs) { row_normalize(xr, D, mu, rs, w, b, yp + r * D); });
}

// The backward of one row, with x̂ = (x - mean) rstd and ĝ = dy w:
//   dx = rstd (ĝ - Σ ĝ / D - x̂ Σ ĝ x̂ / D),
// and its share of dw = Σ_rows dy x̂ and db = Σ_rows dy added to pw and pb (null: not wanted).
template <class T, class M = opmath_t<T>>
void row_backward(const T* dy, const T* x, int64_t D, M mean, M rstd, const M* w, T* dx, M* pw, M* pb) {
  M sum_g = 0, sum_gx = 0;
  int64_t d = 0;
#ifdef EMBER_HAVE_VEC_HALF
  if constexpr (kVectorized<T>) {
    const __m256 mu = _mm256_set1_ps(mean), rs = _mm256_set1_ps(rstd);
    __m256 sg = _mm256_setzero_ps(), sgx = _mm256_setzero_ps();
    for (; d + 8 <= D; d += 8) {
      __m256 g = load_floats(dy + d);
      if (w) g = _mm256_mul_ps(g, _mm256_loadu_ps(w + d));
      const __m256 xhat = _mm256_mul_ps(_mm256_sub_ps(load_floats(x + d), mu), rs);
      sg = _mm256_add_ps(sg, g);
      sgx = _mm256_fmadd_ps(g, xhat, sgx);
    }
    sum_g = lane_sum(sg);
    sum_gx = lane_sum(sgx);
  }
#endif
  for (; d < D; ++d) {
    const M g = w ? M(dy[d]) * w[d] : M(dy[d]), xhat = (M(x[d]) - mean) * rstd;
    sum_g += g;
    sum_gx += g * xhat;
  }
  const M mean_g = sum_g / M(D), mean_gx = sum_gx / M(D);
  d = 0;
#ifdef EMBER_HAVE_VEC_HALF
  if constexpr (kVectorized<T>) {
    const __m256 mu = _mm256_set1_ps(mean), rs = _mm256_set1_ps(rstd);
    const __m256 mg = _mm256_set1_ps(mean_g), mgx = _mm256_set1_ps(mean_gx);
    for (; d + 8 <= D; d += 8) {
      const __m256 dyv = load_floats(dy + d), xhat = _mm256_mul_ps(_mm256_sub_ps(load_floats(x + d), mu), rs);
      if (dx) {
        const __m256 g = w ? _mm256_mul_ps(dyv, _mm256_loadu_ps(w + d)) : dyv;
        store_floats(dx + d, _mm256_mul_ps(rs, _mm256_sub_ps(_mm256_sub_ps(g, mg), _mm256_mul_ps(xhat, mgx))));
      }
      if (pw) _mm256_storeu_ps(pw + d, _mm256_fmadd_ps(dyv, xhat, _mm256_loadu_ps(pw + d)));
      if (pb) _mm256_storeu_ps(pb + d, _mm256_add_ps(dyv, _mm256_loadu_ps(pb + d)));
    }
  }
#endif
  for (; d < D; ++d) {
    const M xhat = (M(x[d]) - mean) * rstd;
    if (dx) dx[d] = T(rstd * ((w ? M(dy[d]) * w[d] : M(dy[d])) - mean_g - xhat * mean_gx));
    if (pw) pw[d] += M(dy[d]) * xhat;
    if (pb) pb[d] += M(dy[d]);
  }
}

// Rows go in at most kChunks runs, each summing its share of dw and db into a partial of its own;
// the partials are then added in run order, so the result does not depend on the thread count.
// Wide rows get fewer runs, so that the partials stay within kPartialBudget values (the count
// depends on the shape alone).
constexpr int64_t kChunks = 64;
constexpr int64_t kPartialBudget = int64_t{1} << 20;

template <class T, class M = opmath_t<T>>
void layer_norm_backward_typed(const Tensor& grad_out, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                               const Tensor& weight, const Tensor& grad_input, const Tensor& grad_weight,
                               const Tensor& grad_bias) {
  const int64_t R = x.size(0), D = x.size(1);
  if (D == 0) return;
  const T* dy = static_cast<const T*>(grad_out.data_ptr());
  const T* xp = static_cast<const T*>(x.data_ptr());
  const M* mp = static_cast<const M*>(mean.data_ptr());
  const M* rp = static_cast<const M*>(rstd.data_ptr());
  const M* w = weight.defined() ? static_cast<const M*>(weight.data_ptr()) : nullptr;
  T* dx = grad_input.defined() ? static_cast<T*>(grad_input.data_ptr()) : nullptr;
  const bool partials = grad_weight.defined() || grad_bias.defined();
  const int64_t chunks = std::max<int64_t>(1, std::min({R, kChunks, partials ? kPartialBudget / D : kChunks}));
  std::vector<M> partial_w(grad_weight.defined() ? static_cast<size_t>(chunks * D) : 0);
  std::vector<M> partial_b(grad_bias.defined() ? static_cast<size_t>(chunks * D) : 0);
  const int64_t rows_per_chunk = (R + chunks - 1) / chunks;
  parallel_for(0, chunks, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, rows_per_chunk * D)),
               [&](int64_t c0, int64_t c1) {
                 for (int64_t c = c0; c < c1; ++c) {
                   M* pw = partial_w.empty() ? nullptr : partial_w.data() + c * D;
                   M* pb = partial_b.empty() ? nullptr : partial_b.data() + c * D;
                   for (int64_t r = R * c / chunks; r < R * (c + 1) / chunks; ++r)
                     row_backward(dy + r * D, xp + r * D, D, mp[r], rp[r], w, dx ? dx + r * D : nullptr, pw, pb);
                 }
               });
  for (auto [partial, out] : {std::pair{&partial_w, &grad_weight}, std::pair{&partial_b, &grad_bias}}) {
    if (!out->defined()) continue;
    M* o = static_cast<M*>(out->data_ptr());
    parallel_for(0, D, kGrainSize / std::max<int64_t>(1, chunks), [&](int64_t j0, int64_t j1) {
      for (int64_t j = j0; j < j1; ++j) {
        M s = 0;
        for (int64_t c = 0; c < chunks; ++c) s += (*partial)[static_cast<size_t>(c * D + j)];
        o[j] = s;
      }
    });
  }
}

// ---- group_norm: rows of C / G channels of HW values each, an affine per channel ----

// y = (x - mean) * scale + shift over n values of one channel (scale = rstd w[c], shift = b[c]).
template <class T, class M = opmath_t<T>>
void run_scale_shift(const T* x, int64_t n, M mean, M scale, M shift, T* y) {
  int64_t d = 0;
#ifdef EMBER_HAVE_VEC_HALF
  if constexpr (kVectorized<T>) {
    const __m256 mu = _mm256_set1_ps(mean), sc = _mm256_set1_ps(scale), sh = _mm256_set1_ps(shift);
    for (; d + 8 <= n; d += 8) store_floats(y + d, _mm256_fmadd_ps(_mm256_sub_ps(load_floats(x + d), mu), sc, sh));
  }
#endif
  for (; d < n; ++d) y[d] = T((M(x[d]) - mean) * scale + shift);
}

template <class T, class M = opmath_t<T>>
void group_norm_typed(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t groups, double eps,
                      const Tensor& out, const Tensor& mean, const Tensor& rstd) {
  const int64_t N = x.size(0), C = x.size(1), HW = x.size(2), Cg = C / groups, D = Cg * HW, R = N * groups;
  T* yp = static_cast<T*>(out.data_ptr());
  const M* w = weight.defined() ? static_cast<const M*>(weight.data_ptr()) : nullptr;
  const M* b = bias.defined() ? static_cast<const M*>(bias.data_ptr()) : nullptr;
  normalize_rows(static_cast<const T*>(x.data_ptr()), R, D, eps, static_cast<M*>(mean.data_ptr()),
                 static_cast<M*>(rstd.data_ptr()), [&](int64_t r, const T* xr, M mu, M rs) {
                   for (int64_t c = (r % groups) * Cg, k = 0; k < Cg; ++c, ++k)
                     run_scale_shift(xr + k * HW, HW, mu, w ? rs * w[c] : rs, b ? b[c] : M(0), yp + r * D + k * HW);
                 });
}

// Σ dy and Σ dy x̂ over n values of one channel, x̂ = (x - mean) rstd.
template <class T, class M = opmath_t<T>>
std::pair<M, M> run_grad_sums(const T* dy, const T* x, int64_t n, M mean, M rstd) {
  M s_dy = 0, s_dyx = 0;
  int64_t d = 0;
#ifdef EMBER_HAVE_VEC_HALF
  if constexpr (kVectorized<T>) {
    const __m256 mu = _mm256_set1_ps(mean), rs = _mm256_set1_ps(rstd);
    __m256 a = _mm256_setzero_ps(), b = _mm256_setzero_ps();
    for (; d + 8 <= n; d += 8) {
      const __m256 g = load_floats(dy + d), xhat = _mm256_mul_ps(_mm256_sub_ps(load_floats(x + d), mu), rs);
      a = _mm256_add_ps(a, g);
      b = _mm256_fmadd_ps(g, xhat, b);
    }
    s_dy = lane_sum(a);
    s_dyx = lane_sum(b);
  }
#endif
  for (; d < n; ++d) {
    s_dy += M(dy[d]);
    s_dyx += M(dy[d]) * (M(x[d]) - mean) * rstd;
  }
  return {s_dy, s_dyx};
}

// dx = rstd (dy w_c - mean_g - x̂ mean_gx) over n values of one channel.
template <class T, class M = opmath_t<T>>
void run_input_grad(const T* dy, const T* x, int64_t n, M mean, M rstd, M wc, M mean_g, M mean_gx, T* dx) {
  int64_t d = 0;
#ifdef EMBER_HAVE_VEC_HALF
  if constexpr (kVectorized<T>) {
    const __m256 mu = _mm256_set1_ps(mean), rs = _mm256_set1_ps(rstd), w = _mm256_set1_ps(wc);
    const __m256 mg = _mm256_set1_ps(mean_g), mgx = _mm256_set1_ps(mean_gx);
    for (; d + 8 <= n; d += 8) {
      const __m256 xhat = _mm256_mul_ps(_mm256_sub_ps(load_floats(x + d), mu), rs);
      const __m256 g = _mm256_sub_ps(_mm256_fmsub_ps(load_floats(dy + d), w, mg), _mm256_mul_ps(xhat, mgx));
      store_floats(dx + d, _mm256_mul_ps(rs, g));
    }
  }
#endif
  for (; d < n; ++d) dx[d] = T(rstd * (M(dy[d]) * wc - mean_g - (M(x[d]) - mean) * rstd * mean_gx));
}

// Per row: each channel's Σ dy and Σ dy x̂ (kept per sample and channel: dw and db are their
// sums over the samples, added in sample order), the group's sums of ĝ = dy w and ĝ x̂ from
// them, then dx.
template <class T, class M = opmath_t<T>>
void group_norm_backward_typed(const Tensor& grad_out, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                               const Tensor& weight, int64_t groups, const Tensor& grad_input,
                               const Tensor& grad_weight, const Tensor& grad_bias) {
  const int64_t N = x.size(0), C = x.size(1), HW = x.size(2), Cg = C / groups, D = Cg * HW, R = N * groups;
  if (D == 0) return;
  const T* dy = static_cast<const T*>(grad_out.data_ptr());
  const T* xp = static_cast<const T*>(x.data_ptr());
  const M* mp = static_cast<const M*>(mean.data_ptr());
  const M* rp = static_cast<const M*>(rstd.data_ptr());
  const M* w = weight.defined() ? static_cast<const M*>(weight.data_ptr()) : nullptr;
  T* dx = grad_input.defined() ? static_cast<T*>(grad_input.data_ptr()) : nullptr;
  std::vector<M> sum_dy(static_cast<size_t>(N * C)), sum_dyx(static_cast<size_t>(N * C));
  parallel_for(0, R, std::max<int64_t>(1, kGrainSize / D), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t c0 = (r % groups) * Cg, at = (r / groups) * C + c0;
      M sum_g = 0, sum_gx = 0;
      for (int64_t k = 0; k < Cg; ++k) {
        const auto [s_dy, s_dyx] = run_grad_sums(dy + r * D + k * HW, xp + r * D + k * HW, HW, mp[r], rp[r]);
        sum_dy[static_cast<size_t>(at + k)] = s_dy;
        sum_dyx[static_cast<size_t>(at + k)] = s_dyx;
        sum_g += (w ? w[c0 + k] : M(1)) * s_dy;
        sum_gx += (w ? w[c0 + k] : M(1)) * s_dyx;
      }
      if (!dx) continue;
      for (int64_t k = 0; k < Cg; ++k)
        run_input_grad(dy + r * D + k * HW, xp + r * D + k * HW, HW, mp[r], rp[r], w ? w[c0 + k] : M(1), sum_g / M(D),
                       sum_gx / M(D), dx + r * D + k * HW);
    }
  });
  for (auto [sums, out] : {std::pair{&sum_dyx, &grad_weight}, std::pair{&sum_dy, &grad_bias}}) {
    if (!out->defined()) continue;
    M* o = static_cast<M*>(out->data_ptr());
    for (int64_t c = 0; c < C; ++c) {
      M s = 0;
      for (int64_t n = 0; n < N; ++n) s += (*sums)[static_cast<size_t>(n * C + c)];
      o[c] = s;
    }
  }
}

// ---- batch_norm: a channel is its N planes of HW contiguous values, plane p = n C + c ----

// Each channel's K sums over its planes, each plane's from plane_sums(p, c): the samples go in
// at most kChunks runs (a count that depends on N alone), a run's planes are added in order, and
// then the runs, so the bits do not depend on the thread count. In double: a channel may hold
// millions of values. Runs and channels are the parallel tasks, a run's channels side by side,
// so that planes of one value (BatchNorm1d) are read in memory order.
template <size_t K, class PlaneSums>
std::vector<std::array<double, K>> channel_sums(int64_t N, int64_t C, int64_t HW, const PlaneSums& plane_sums) {
  const int64_t runs = std::max<int64_t>(1, std::min(N, kChunks));
  std::vector<std::array<double, K>> partial(static_cast<size_t>(runs * C));
  const int64_t per_task = std::max<int64_t>(1, N / runs * HW);
  parallel_for(0, runs * C, std::max<int64_t>(1, kGrainSize / per_task), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t run = t / C, c = t % C;
      std::array<double, K> s{};
      for (int64_t n = N * run / runs; n < N * (run + 1) / runs; ++n) {
        const auto plane = plane_sums(n * C + c, c);
        for (size_t k = 0; k < K; ++k) s[k] += static_cast<double>(plane[k]);
      }
      partial[static_cast<size_t>(t)] = s;
    }
  });
  std::vector<std::array<double, K>> sums(static_cast<size_t>(C));
  for (int64_t run = 0; run < runs; ++run)
    for (int64_t c = 0; c < C; ++c)
      for (size_t k = 0; k < K; ++k) sums[static_cast<size_t>(c)][k] += partial[static_cast<size_t>(run * C + c)][k];
  return sums;
}

// ---- planes of one value (BatchNorm1d's [N, C]): a sample is a row of C channels ----
// There the per-plane loops above would spend their time on the calls and read across the rows,
// so these go along a row, 8 channels at a time, with per-channel coefficients.

// acc[j] += x[j], or (x[j] - mean[j])² where mean is given, over n channels
template <class T, class M>
void add_row(const T* x, int64_t n, const M* mean, M* acc) {
  int64_t j = 0;
#ifdef EMBER_HAVE_VEC_HALF
  if constexpr (kVectorized<T>) {
    for (; j + 8 <= n; j += 8) {
      __m256 v = load_floats(x + j);
      if (mean) {
        v = _mm256_sub_ps(v, _mm256_loadu_ps(mean + j));
        v = _mm256_mul_ps(v, v);
      }
      _mm256_storeu_ps(acc + j, _mm256_add_ps(_mm256_loadu_ps(acc + j), v));
    }
  }
#endif
  for (; j < n; ++j) acc[j] += mean ? (M(x[j]) - mean[j]) * (M(x[j]) - mean[j]) : M(x[j]);
}

// sum_dy[j] += dy[j] and sum_dyx[j] += dy[j] (x[j] - mean[j]) rstd[j] over n channels
template <class T, class M>
void add_grad_row(const T* dy, const T* x, int64_t n, const M* mean, const M* rstd, M* sum_dy, M* sum_dyx) {
  int64_t j = 0;
#ifdef EMBER_HAVE_VEC_HALF
  if constexpr (kVectorized<T>) {
    for (; j + 8 <= n; j += 8) {
      const __m256 g = load_floats(dy + j);
      const __m256 xhat =
          _mm256_mul_ps(_mm256_sub_ps(load_floats(x + j), _mm256_loadu_ps(mean + j)), _mm256_loadu_ps(rstd + j));
      _mm256_storeu_ps(sum_dy + j, _mm256_add_ps(_mm256_loadu_ps(sum_dy + j), g));
      _mm256_storeu_ps(sum_dyx + j, _mm256_fmadd_ps(g, xhat, _mm256_loadu_ps(sum_dyx + j)));
    }
  }
#endif
  for (; j < n; ++j) {
    sum_dy[j] += M(dy[j]);
    sum_dyx[j] += M(dy[j]) * (M(x[j]) - mean[j]) * rstd[j];
  }
}

// y[j] = (x[j] - mean[j]) scale[j] + shift[j] over n channels
template <class T, class M>
void row_scale_shift(const T* x, int64_t n, const M* mean, const M* scale, const M* shift, T* y) {
  int64_t j = 0;
#ifdef EMBER_HAVE_VEC_HALF
  if constexpr (kVectorized<T>) {
    for (; j + 8 <= n; j += 8) {
      const __m256 centered = _mm256_sub_ps(load_floats(x + j), _mm256_loadu_ps(mean + j));
      store_floats(y + j, _mm256_fmadd_ps(centered, _mm256_loadu_ps(scale + j), _mm256_loadu_ps(shift + j)));
    }
  }
#endif
  for (; j < n; ++j) y[j] = T((M(x[j]) - mean[j]) * scale[j] + shift[j]);
}

// dx[j] = a[j] dy[j] - e[j] - (x[j] - mean[j]) f[j] over n channels
template <class T, class M>
void row_input_grad(const T* dy, const T* x, int64_t n, const M* mean, const M* a, const M* e, const M* f, T* dx) {
  int64_t j = 0;
#ifdef EMBER_HAVE_VEC_HALF
  if constexpr (kVectorized<T>) {
    for (; j + 8 <= n; j += 8) {
      const __m256 centered = _mm256_sub_ps(load_floats(x + j), _mm256_loadu_ps(mean + j));
      const __m256 g = _mm256_fmsub_ps(load_floats(dy + j), _mm256_loadu_ps(a + j), _mm256_loadu_ps(e + j));
      store_floats(dx + j, _mm256_fnmadd_ps(centered, _mm256_loadu_ps(f + j), g));
    }
  }
#endif
  for (; j < n; ++j) dx[j] = T(M(dy[j]) * a[j] - e[j] - (M(x[j]) - mean[j]) * f[j]);
}

// Each channel's K sums over the rows, as channel_sums's: a task is a run of samples and a block
// of kColumns channels, its rows added by add_rows(n, c0, width, sums) into M lanes; the runs,
// at most 256 rows each (their count depends on N alone), are then added in order, in double.
constexpr int64_t kColumns = 256;

template <size_t K, class M, class AddRow>
std::vector<std::array<double, K>> column_sums(int64_t N, int64_t C, const AddRow& add_row) {
  const int64_t runs = std::max<int64_t>({1, std::min(N, kChunks), (N + 255) / 256});
  const int64_t blocks = (C + kColumns - 1) / kColumns;
  std::vector<M> partial(static_cast<size_t>(runs * int64_t{K} * C));  // [runs][K][C]
  parallel_for(0, runs * blocks, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, N / runs * kColumns)),
               [&](int64_t t0, int64_t t1) {
                 for (int64_t t = t0; t < t1; ++t) {
                   const int64_t run = t / blocks, c0 = t % blocks * kColumns, width = std::min(kColumns, C - c0);
                   std::array<M*, K> sums;
                   for (size_t k = 0; k < K; ++k) sums[k] = partial.data() + (run * int64_t{K} + int64_t(k)) * C + c0;
                   for (int64_t n = N * run / runs; n < N * (run + 1) / runs; ++n) add_row(n, c0, width, sums);
                 }
               });
  std::vector<std::array<double, K>> sums(static_cast<size_t>(C));
  for (int64_t run = 0; run < runs; ++run)
    for (size_t k = 0; k < K; ++k)
      for (int64_t c = 0; c < C; ++c)
        sums[static_cast<size_t>(c)][k] +=
            static_cast<double>(partial[static_cast<size_t>((run * int64_t{K} + int64_t(k)) * C + c)]);
  return sums;
}

template <class T, class M = opmath_t<T>>
void batch_norm_statistics_typed(const Tensor& x, const Tensor& mean, const Tensor& var) {
  const int64_t N = x.size(0), C = x.size(1), HW = x.size(2);
  const double count = static_cast<double>(N * HW);
  const T* xp = static_cast<const T*>(x.data_ptr());
  M* mp = static_cast<M*>(mean.data_ptr());
  M* vp = static_cast<M*>(var.data_ptr());
  // Σ x, then Σ (x - mean)², per channel
  auto sums_of = [&](const M* centered_on) {
    if (HW == 1)
      return column_sums<1, M>(N, C, [&](int64_t n, int64_t c0, int64_t width, std::array<M*, 1> sums) {
        add_row(xp + n * C + c0, width, centered_on ? centered_on + c0 : nullptr, sums[0]);
      });
    return channel_sums<1>(N, C, HW, [&](int64_t p, int64_t c) {
      return std::array{centered_on ? row_centered_squares(xp + p * HW, HW, centered_on[c]) : row_sum(xp + p * HW, HW)};
    });
  };
  const auto sums = sums_of(nullptr);
  for (int64_t c = 0; c < C; ++c) mp[c] = M(sums[static_cast<size_t>(c)][0] / count);
  const auto squares = sums_of(mp);
  for (int64_t c = 0; c < C; ++c) vp[c] = M(squares[static_cast<size_t>(c)][0] / count);
}

template <class T, class M = opmath_t<T>>
void batch_norm_typed(const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight, const Tensor& bias,
                      const Tensor& out) {
  const int64_t N = x.size(0), C = x.size(1), HW = x.size(2);
  const T* xp = static_cast<const T*>(x.data_ptr());
  T* yp = static_cast<T*>(out.data_ptr());
  const M* mp = static_cast<const M*>(mean.data_ptr());
  const M* rp = static_cast<const M*>(rstd.data_ptr());
  const M* w = weight.defined() ? static_cast<const M*>(weight.data_ptr()) : nullptr;
  const M* b = bias.defined() ? static_cast<const M*>(bias.data_ptr()) : nullptr;
  std::vector<M> scale(static_cast<size_t>(C)), shift(static_cast<size_t>(C));
  for (int64_t c = 0; c < C; ++c) {
    scale[static_cast<size_t>(c)] = w ? rp[c] * w[c] : rp[c];
    shift[static_cast<size_t>(c)] = b ? b[c] : M(0);
  }
  if (HW == 1) {
    parallel_for(0, N, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, C)), [&](int64_t n0, int64_t n1) {
      for (int64_t n = n0; n < n1; ++n) row_scale_shift(xp + n * C, C, mp, scale.data(), shift.data(), yp + n * C);
    });
    return;
  }
  parallel_for(0, N * C, std::max<int64_t>(1, kGrainSize / HW), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const size_t c = static_cast<size_t>(p % C);
      run_scale_shift(xp + p * HW, HW, mp[c], scale[c], shift[c], yp + p * HW);
    }
  });
}

// Each channel's Σ dy and Σ dy x̂ (dw and db themselves), then dx per plane: in training through
// the batch's statistics, rstd (ĝ - mean ĝ - x̂ mean ĝ x̂) with ĝ = dy w; in eval ĝ rstd.
template <class T, class M = opmath_t<T>>
void batch_norm_backward_typed(const Tensor& grad_out, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                               const Tensor& weight, bool training, const Tensor& grad_input, const Tensor& grad_weight,
                               const Tensor& grad_bias) {
  const int64_t N = x.size(0), C = x.size(1), HW = x.size(2);
  const double count = static_cast<double>(N * HW);
  const T* dy = static_cast<const T*>(grad_out.data_ptr());
  const T* xp = static_cast<const T*>(x.data_ptr());
  const M* mp = static_cast<const M*>(mean.data_ptr());
  const M* rp = static_cast<const M*>(rstd.data_ptr());
  const M* w = weight.defined() ? static_cast<const M*>(weight.data_ptr()) : nullptr;
  std::vector<std::array<double, 2>> sums(static_cast<size_t>(C));  // Σ dy, Σ dy x̂
  if ((training || grad_weight.defined() || grad_bias.defined()) && HW == 1) {
    sums = column_sums<2, M>(N, C, [&](int64_t n, int64_t c0, int64_t width, std::array<M*, 2> s) {
      add_grad_row(dy + n * C + c0, xp + n * C + c0, width, mp + c0, rp + c0, s[0], s[1]);
    });
  } else if (training || grad_weight.defined() || grad_bias.defined()) {
    sums = channel_sums<2>(N, C, HW, [&](int64_t p, int64_t c) {
      const auto [s_dy, s_dyx] = run_grad_sums(dy + p * HW, xp + p * HW, HW, mp[c], rp[c]);
      return std::array{s_dy, s_dyx};
    });
  }
  for (auto [k, out] : {std::pair{1, &grad_weight}, std::pair{0, &grad_bias}}) {
    if (!out->defined()) continue;
    M* o = static_cast<M*>(out->data_ptr());
    for (int64_t c = 0; c < C; ++c) o[c] = M(sums[static_cast<size_t>(c)][static_cast<size_t>(k)]);
  }
  if (!grad_input.defined()) return;
  T* dx = static_cast<T*>(grad_input.data_ptr());
  // per channel: ĝ = dy w's means (zero in eval: the statistics did not come from x)
  std::vector<M> mean_g(static_cast<size_t>(C)), mean_gx(static_cast<size_t>(C));
  for (int64_t c = 0; c < C; ++c) {
    const M wc = w ? w[c] : M(1);
    const auto& [s_dy, s_dyx] = sums[static_cast<size_t>(c)];
    mean_g[static_cast<size_t>(c)] = training ? M(wc * s_dy / count) : M(0);
    mean_gx[static_cast<size_t>(c)] = training ? M(wc * s_dyx / count) : M(0);
  }
  if (HW == 1) {  // dx = a dy - e - (x - mean) f with a = rstd w, e = rstd mean_g, f = rstd² mean_gx
    std::vector<M> a(static_cast<size_t>(C)), e(static_cast<size_t>(C)), f(static_cast<size_t>(C));
    for (int64_t c = 0; c < C; ++c) {
      const size_t i = static_cast<size_t>(c);
      a[i] = rp[c] * (w ? w[c] : M(1)), e[i] = rp[c] * mean_g[i], f[i] = rp[c] * rp[c] * mean_gx[i];
    }
    parallel_for(0, N, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, C)), [&](int64_t n0, int64_t n1) {
      for (int64_t n = n0; n < n1; ++n)
        row_input_grad(dy + n * C, xp + n * C, C, mp, a.data(), e.data(), f.data(), dx + n * C);
    });
    return;
  }
  parallel_for(0, N * C, std::max<int64_t>(1, kGrainSize / HW), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const size_t c = static_cast<size_t>(p % C);
      run_input_grad(dy + p * HW, xp + p * HW, HW, mp[c], rp[c], w ? w[c] : M(1), mean_g[c], mean_gx[c], dx + p * HW);
    }
  });
}

}  // namespace

// out [R, D] = layer_norm(x [R, D]), with mean and rstd [R]
void CpuBackend::layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& out,
                            const Tensor& mean, const Tensor& rstd) {
  EMBER_DISPATCH_FLOATING(x.dtype(), "layer_norm",
                          [&] { layer_norm_typed<scalar_t>(x, weight, bias, eps, out, mean, rstd); });
}

// grad_input [R, D], grad_weight, grad_bias [D] from grad_out [R, D]
void CpuBackend::layer_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                                     const Tensor& weight, const Tensor& grad_input, const Tensor& grad_weight,
                                     const Tensor& grad_bias) {
  EMBER_DISPATCH_FLOATING(x.dtype(), "layer_norm_backward", [&] {
    layer_norm_backward_typed<scalar_t>(grad_out, x, mean, rstd, weight, grad_input, grad_weight, grad_bias);
  });
}

// out [N, C, HW] = group_norm(x [N, C, HW]), with mean and rstd [N * groups]
void CpuBackend::group_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t groups, double eps,
                            const Tensor& out, const Tensor& mean, const Tensor& rstd) {
  EMBER_DISPATCH_FLOATING(x.dtype(), "group_norm",
                          [&] { group_norm_typed<scalar_t>(x, weight, bias, groups, eps, out, mean, rstd); });
}

// grad_input [N, C, HW], grad_weight, grad_bias [C] from grad_out [N, C, HW]
void CpuBackend::group_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                                     const Tensor& weight, int64_t groups, const Tensor& grad_input,
                                     const Tensor& grad_weight, const Tensor& grad_bias) {
  EMBER_DISPATCH_FLOATING(x.dtype(), "group_norm_backward", [&] {
    group_norm_backward_typed<scalar_t>(grad_out, x, mean, rstd, weight, groups, grad_input, grad_weight, grad_bias);
  });
}

// mean, var [C] = each channel's statistics of x [N, C, HW]
void CpuBackend::batch_norm_statistics(const Tensor& x, const Tensor& mean, const Tensor& var) {
  EMBER_DISPATCH_FLOATING(x.dtype(), "batch_norm", [&] { batch_norm_statistics_typed<scalar_t>(x, mean, var); });
}

// out [N, C, HW] = batch_norm(x [N, C, HW]) with mean and rstd [C]
void CpuBackend::batch_norm(const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& weight,
                            const Tensor& bias, const Tensor& out) {
  EMBER_DISPATCH_FLOATING(x.dtype(), "batch_norm",
                          [&] { batch_norm_typed<scalar_t>(x, mean, rstd, weight, bias, out); });
}

// grad_input [N, C, HW], grad_weight, grad_bias [C] from grad_out [N, C, HW]
void CpuBackend::batch_norm_backward(const Tensor& grad_out, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                                     const Tensor& weight, bool training, const Tensor& grad_input,
                                     const Tensor& grad_weight, const Tensor& grad_bias) {
  EMBER_DISPATCH_FLOATING(x.dtype(), "batch_norm_backward", [&] {
    batch_norm_backward_typed<scalar_t>(grad_out, x, mean, rstd, weight, training, grad_input, grad_weight, grad_bias);
  });
}

}  // namespace ember::cpu
