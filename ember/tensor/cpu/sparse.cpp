// A Linear with its weight in CSR, for pruned layers (nn/prune.h): only the stored weights cost.
// Blocks of 64 input rows are transposed to xt [K, 64], so that each stored weight w[n, k] adds
// w * xt[k, :] to 64 outputs at once (eight 8-lane FMAs into registers); output features go to the
// threads. Dense GEMM reuses each loaded value many times and this cannot, so it wins only above
// a crossover sparsity (measured in bench/quant_report, used by prune::sparsify).
#include <algorithm>
#include <vector>

#include "ember/tensor/cpu/cpu_backend.h"
#include "ember/tensor/parallel.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define EMBER_CSR_AVX2 1
#endif

namespace ember::cpu {
namespace {

constexpr int64_t kRows = 64;

// acc[0..64) = bias + Σ_j values[j] * xt[col[j], 0..64) for one output feature.
void feature_block(const float* xt, const int64_t* col, const float* values, int64_t begin, int64_t end, float bias,
                   float* acc) {
#ifdef EMBER_CSR_AVX2
  __m256 a[kRows / 8];
  for (auto& v : a) v = _mm256_set1_ps(bias);
  for (int64_t j = begin; j < end; ++j) {
    const __m256 w = _mm256_set1_ps(values[j]);
    const float* row = xt + col[j] * kRows;
#pragma GCC unroll 8
    for (int v = 0; v < kRows / 8; ++v) a[v] = _mm256_fmadd_ps(w, _mm256_loadu_ps(row + 8 * v), a[v]);
  }
#pragma GCC unroll 8
  for (int v = 0; v < kRows / 8; ++v) _mm256_storeu_ps(acc + 8 * v, a[v]);
#else
  std::fill(acc, acc + kRows, bias);
  for (int64_t j = begin; j < end; ++j) {
    const float w = values[j];
    const float* row = xt + col[j] * kRows;
    for (int64_t i = 0; i < kRows; ++i) acc[i] += w * row[i];
  }
#endif
}

}  // namespace

// x [M, K] -> out [M, N]; W [N, K] as crow [N + 1], col [nnz], values [nnz]
void CpuBackend::csr_linear(const Tensor& x, const Tensor& crow, const Tensor& col, const Tensor& values,
                            const Tensor& bias, const Tensor& out) {
  const int64_t M = x.size(0), K = x.size(1), N = out.size(1);
  const float* xp = x.data_ptr<float>();
  const int64_t* rows = crow.data_ptr<int64_t>();
  const int64_t* cols = col.data_ptr<int64_t>();
  const float* vals = values.data_ptr<float>();
  const float* b = bias.defined() ? bias.data_ptr<float>() : nullptr;
  float* y = out.data_ptr<float>();
  std::vector<float> xt(static_cast<size_t>(K * kRows));
  const int64_t nnz = rows[N];
  for (int64_t m0 = 0; m0 < M; m0 += kRows) {
    const int64_t mb = std::min(kRows, M - m0);
    std::fill(xt.begin(), xt.end(), 0.0f);
    for (int64_t i = 0; i < mb; ++i)
      for (int64_t k = 0; k < K; ++k) xt[k * kRows + i] = xp[(m0 + i) * K + k];
    // About 2 * kGrainSize multiply-adds per chunk of features before a second thread pays.
    const int64_t grain = std::max<int64_t>(1, 2 * kGrainSize * N / std::max<int64_t>(1, nnz * kRows));
    parallel_for(0, N, grain, [&](int64_t n0, int64_t n1) {
      alignas(32) float acc[kRows];
      for (int64_t n = n0; n < n1; ++n) {
        feature_block(xt.data(), cols, vals, rows[n], rows[n + 1], b ? b[n] : 0.0f, acc);
        for (int64_t i = 0; i < mb; ++i) y[(m0 + i) * N + n] = acc[i];
      }
    });
  }
}

}  // namespace ember::cpu
