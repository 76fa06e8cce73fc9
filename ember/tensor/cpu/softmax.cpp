// softmax / log_softmax along one dim, numerically stable: exp(x - max) / sum.
#include <cmath>
#include <limits>
#include <vector>

#include "ember/tensor/cpu/cpu_backend.h"
#include "ember/tensor/cpu/vec_half.h"
#include "ember/tensor/cpu/vec_math.h"
#include "ember/tensor/dim_split.h"
#include "ember/tensor/parallel.h"

namespace ember::cpu {
namespace {

// One softmax "row": D elements, `stride` apart.
template <class T, bool kLog>
void softmax_row(const T* x, T* y, int64_t D, int64_t stride) {
  using M = opmath_t<T>;
  M mx = -std::numeric_limits<M>::infinity();
  for (int64_t d = 0; d < D; ++d) mx = std::max(mx, M(x[d * stride]));
  M sum = 0;
  if (kLog) {
    for (int64_t d = 0; d < D; ++d) sum += std::exp(M(x[d * stride]) - mx);
    const M shift = mx + std::log(sum);
    for (int64_t d = 0; d < D; ++d) y[d * stride] = T(M(x[d * stride]) - shift);
  } else {
    for (int64_t d = 0; d < D; ++d) {
      const M e = std::exp(M(x[d * stride]) - mx);
      y[d * stride] = T(e);
      sum += e;
    }
    const M inv = M(1) / sum;
    for (int64_t d = 0; d < D; ++d) y[d * stride] = T(M(y[d * stride]) * inv);
  }
}

#ifdef EMBER_HAVE_VEC_MATH
// The float fast path for a contiguous row: vector max, exp and sum (8 lanes at a time). y may be
// x (each pass reads an element before it writes it).
template <bool kLog>
void softmax_row_avx2(const float* x, float* y, int64_t D) {
  int64_t d = 0;
  __m256 vmax = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for (; d + 8 <= D; d += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(x + d));
  float lanes[8];
  _mm256_storeu_ps(lanes, vmax);
  float mx = lanes[0];
  for (int k = 1; k < 8; ++k) mx = std::max(mx, lanes[k]);
  for (; d < D; ++d) mx = std::max(mx, x[d]);
  const __m256 vmx = _mm256_set1_ps(mx);
  __m256 vsum = _mm256_setzero_ps();
  for (d = 0; d + 8 <= D; d += 8) {
    const __m256 e = exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(x + d), vmx));
    if (!kLog) _mm256_storeu_ps(y + d, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  _mm256_storeu_ps(lanes, vsum);
  float sum = 0;
  for (float l : lanes) sum += l;
  for (; d < D; ++d) {
    const float e = std::exp(x[d] - mx);
    if (!kLog) y[d] = e;
    sum += e;
  }
  if (kLog) {
    const __m256 shift = _mm256_set1_ps(mx + std::log(sum));
    for (d = 0; d + 8 <= D; d += 8) _mm256_storeu_ps(y + d, _mm256_sub_ps(_mm256_loadu_ps(x + d), shift));
    for (; d < D; ++d) y[d] = x[d] - (mx + std::log(sum));
  } else {
    const __m256 inv = _mm256_set1_ps(1.0f / sum);
    for (d = 0; d + 8 <= D; d += 8) _mm256_storeu_ps(y + d, _mm256_mul_ps(_mm256_loadu_ps(y + d), inv));
    for (; d < D; ++d) y[d] *= 1.0f / sum;
  }
}
#endif

template <class T, bool kLog>
void softmax_typed(const Tensor& in, const Tensor& out, int64_t dim) {
  const DimSplit split = split_at(in, dim);
  const int64_t outer = split.outer, D = split.size, inner = split.inner;
  const T* x = static_cast<const T*>(in.data_ptr());
  T* y = static_cast<T*>(out.data_ptr());
  parallel_for(0, outer * inner, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(D, 1)), [&](int64_t b, int64_t e) {
#ifdef EMBER_HAVE_VEC_MATH
    // 16-bit rows (autocast's attention): widened into a float32 row, computed there, rounded back.
    constexpr bool kHalf = std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>;
    std::vector<float> row(kHalf && inner == 1 ? static_cast<size_t>(D) : 0);
#endif
    for (int64_t r = b; r < e; ++r) {
      const int64_t o = r / inner, i = r % inner;
#ifdef EMBER_HAVE_VEC_MATH
      if constexpr (std::is_same_v<T, float>) {
        if (inner == 1) {
          softmax_row_avx2<kLog>(x + o * D, y + o * D, D);
          continue;
        }
      } else if constexpr (kHalf) {
        if (inner == 1) {
          widen_run(x + o * D, D, row.data());
          softmax_row_avx2<kLog>(row.data(), row.data(), D);
          narrow_run(row.data(), D, y + o * D);
          continue;
        }
      }
#endif
      softmax_row<T, kLog>(x + o * D * inner + i, y + o * D * inner + i, D, inner);
    }
  });
}

}  // namespace

// out = (log_)softmax(in) along dim; in, out contiguous
void CpuBackend::softmax(const Tensor& in, const Tensor& out, int64_t dim, bool log) {
  if (in.numel() == 0) return;
  EMBER_DISPATCH_FLOATING(in.dtype(), "softmax", [&] {
    if (log)
      softmax_typed<scalar_t, true>(in, out, dim);
    else
      softmax_typed<scalar_t, false>(in, out, dim);
  });
}

}  // namespace ember::cpu
