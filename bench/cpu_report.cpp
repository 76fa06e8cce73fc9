// The CPU back end against this machine's ceilings, side by side in one run:
//   GEMM through ember::matmul vs Eigen's GEMM called directly (same buffers, same threads);
//   add / mul / sum of 16M floats vs a plain OpenMP triad loop (the bandwidth ceiling);
//   the FMA peak, for scale; and the serial/parallel crossover behind kGrainSize.
// Every result is checked before it is timed. Prints markdown rows for BENCHMARKS.md.
//   build/bench/bench/cpu_report [threads]
#include <immintrin.h>
#include <omp.h>

#include <Eigen/Core>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <ember/ember.h>
#include "ember/tensor/parallel.h"

#include "timing.h"

using namespace ember;
using bench::fmt;
using bench::median_seconds;

namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Peak single-precision FMA throughput: 10 independent 8-lane FMA chains per thread.
double fma_peak_gflops() {
  const int64_t iters = 20'000'000;
  double secs = median_seconds(
      [&] {
#pragma omp parallel
        {
          __m256 acc[10];
          for (auto& a : acc) a = _mm256_set1_ps(1.0f);
          const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
          for (int64_t i = 0; i < iters; ++i)
            for (auto& a : acc) a = _mm256_fmadd_ps(a, m, c);
          float sink[8];
          __m256 s = acc[0];
          for (int k = 1; k < 10; ++k) s = _mm256_add_ps(s, acc[k]);
          _mm256_storeu_ps(sink, s);
          if (sink[0] == 42.0f) std::printf(" ");
        }
      },
      3, 1);
  return 2.0 * 8 * 10 * static_cast<double>(iters) * omp_get_max_threads() / secs / 1e9;
}

void gemm(int64_t n) {
  manual_seed(0);
  const Tensor a = randn({n, n}), b = randn({n, n});
  RowMat c_eigen(n, n);
  Eigen::Map<const RowMat> A(a.data_ptr<float>(), n, n), B(b.data_ptr<float>(), n, n);
  Tensor c = matmul(a, b);
  c_eigen.noalias() = A * B;
  const float diff = (c - from_blob(c_eigen.data(), {n, n})).abs().max().item<float>();
  if (diff > 1e-3f * std::sqrt(static_cast<float>(n))) {
    std::printf("GEMM %lld: ember and Eigen disagree by %g\n", static_cast<long long>(n), diff);
    std::exit(1);
  }
  const auto t =
      bench::interleaved_medians({[&] { c = matmul(a, b); }, [&] { c_eigen.noalias() = A * B; }}, n >= 2048 ? 5 : 11);
  const double t_ember = t[0], t_eigen = t[1];
  const double flop = 2.0 * n * n * n;
  bench::row("float32 GEMM " + std::to_string(n) + "^3 (GFLOP/s)", fmt("%.1f", flop / t_ember / 1e9),
             fmt("%.1f (Eigen direct)", flop / t_eigen / 1e9), t_eigen / t_ember, ">= 0.90");
}

void bandwidth() {
  const int64_t n = 16 << 20;  // 16M floats = 64 MiB per operand
  Tensor a = rand({n}), b = rand({n});
  // The triad runs on buffers from the same allocator as ember's tensors.
  Tensor xt = empty({n}), yt = empty({n}), zt = empty({n});
  float *x = xt.data_ptr<float>(), *y = yt.data_ptr<float>(), *z = zt.data_ptr<float>();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    x[i] = 1.0f;
    y[i] = 2.0f;
    z[i] = 0.0f;
  }
  Tensor c = a + b;
  {
    const float *pa = a.data_ptr<float>(), *pb = b.data_ptr<float>(), *pc = c.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i)
      if (pc[i] != pa[i] + pb[i]) {
        std::printf("add: wrong result at %lld\n", static_cast<long long>(i));
        std::exit(1);
      }
  }
  double ref_sum = 0;
  for (float v : a.to_vector<float>()) ref_sum += v;
  if (std::fabs(a.sum().item<double>() - ref_sum) > 1e-6 * std::fabs(ref_sum)) {
    std::printf("sum: %.9g != %.9g\n", a.sum().item<double>(), ref_sum);
    std::exit(1);
  }
  Tensor s;
  // The ceiling is a plain triad (2 reads + 1 write per element), timed in turn with
  // ember's ops so that all of them see the same machine state.
  const auto t = bench::interleaved_medians({
      [&] {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; ++i) z[i] = x[i] + 0.5f * y[i];
      },
      [&] { c = a + b; },
      [&] { c = a * b; },
      [&] { a.add_(b); },
      [&] { s = a.sum(); },
  });
  const double bytes = 3.0 * 4 * n, triad_gbs = bytes / t[0] / 1e9;
  const std::string ceiling = fmt("%.1f (triad)", triad_gbs);
  bench::row("triad z = x + s*y, 16M floats (GB/s)", "-", fmt("%.1f", triad_gbs), 1.0, "the ceiling");
  bench::row("add a + b, 16M floats (GB/s)", fmt("%.1f", bytes / t[1] / 1e9), ceiling, t[0] / t[1], ">= 0.80");
  bench::row("mul a * b, 16M floats (GB/s)", fmt("%.1f", bytes / t[2] / 1e9), ceiling, t[0] / t[2], ">= 0.80");
  bench::row("in-place a += b, 16M floats (GB/s)", fmt("%.1f", bytes / t[3] / 1e9), ceiling, t[0] / t[3], ">= 0.80");
  // A sum reads one stream: its bytes/s against the triad's.
  const double sum_gbs = 4.0 * n / t[4] / 1e9;
  bench::row("sum of 16M floats (GB/s read)", fmt("%.1f", sum_gbs), ceiling, sum_gbs / triad_gbs, ">= 0.80");
}

// Where two threads start to beat one for a contiguous add (the evidence behind
// kGrainSize): the same loop over a fresh output, serial and split over 2 OpenMP threads,
// and ember's own add (which goes parallel from 2 * kGrainSize elements) beside them.
void grain_sweep() {
  std::printf(
      "\n| elements | serial loop (us) | 2-thread loop (us) | speed-up | ember add (us) |\n|---|---|---|---|---|\n");
  for (int64_t n : {8192, 16384, 32768, 65536, 131072, 262144, 524288}) {
    const Tensor a = rand({n}), b = rand({n});
    const float* pa = a.data_ptr<float>();
    const float* pb = b.data_ptr<float>();
    const double t1 = median_seconds(
                          [&] {
                            for (int k = 0; k < 100; ++k) {
                              Tensor out = empty({n});
                              float* po = out.data_ptr<float>();
                              for (int64_t i = 0; i < n; ++i) po[i] = pa[i] + pb[i];
                            }
                          },
                          7) /
                      100;
    const double t2 = median_seconds(
                          [&] {
                            for (int k = 0; k < 100; ++k) {
                              Tensor out = empty({n});
                              float* po = out.data_ptr<float>();
#pragma omp parallel for num_threads(2) schedule(static)
                              for (int64_t i = 0; i < n; ++i) po[i] = pa[i] + pb[i];
                            }
                          },
                          7) /
                      100;
    Tensor c;
    const double te = median_seconds(
                          [&] {
                            for (int k = 0; k < 100; ++k) c = a + b;
                          },
                          7) /
                      100;
    std::printf("| %lld | %.2f | %.2f | %.2f | %.2f |\n", static_cast<long long>(n), t1 * 1e6, t2 * 1e6, t1 / t2,
                te * 1e6);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  set_num_threads(threads);
  std::printf("ember CPU report: %d threads, kGrainSize %lld\n\n", threads, static_cast<long long>(kGrainSize));
  std::printf("| benchmark | ember | ceiling / reference | ratio | target |\n|---|---|---|---|---|\n");
  std::printf("| FMA peak (GFLOP/s) | - | %.1f | - | for scale |\n", fma_peak_gflops());
  gemm(1024);
  gemm(2048);
  bandwidth();
  grain_sweep();
  return 0;
}
