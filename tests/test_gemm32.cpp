// The float32 GEMM for CPUs with AVX-512 (Note [float32 GEMM on AVX-512]): within float32's
// rounding bound of a float64 reference on every strip and panel edge, layout, alpha and beta and
// across K chunks; NaN, beta = 0, thread counts, and the ISA switch that chooses it over Eigen's.
// Skipped on CPUs without AVX-512 (Eigen's GEMM runs there, and the other tests cover it).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ember/tensor/cpu/cpu.h"
#include "ember/tensor/cpu/cpu_backend.h"
#include "helpers.h"

namespace ember {
namespace {

using testing::all_close;

#define REQUIRE_AVX512_GEMM() \
  if (!cpu::gemm32_avx512_available()) GTEST_SKIP() << "this CPU (or EMBER_MAX_CPU_ISA) has no AVX-512 GEMM"

// c = alpha a @ b + beta c through the kernel itself: a [M, K], b [K, N], c [M, N] with unit
// column stride, or every other column of a wider matrix (the strided store).
Tensor run_kernel(const Tensor& a, const Tensor& b, const Tensor& c0, double alpha, double beta,
                  bool strided_c = false) {
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  Tensor base = strided_c ? zeros({M, 2 * N}) : c0.clone();
  Tensor c = strided_c ? base.slice(1, 0, 2 * N, 2) : base;
  if (strided_c) {
    NoGradGuard g;
    c.copy_(c0);
  }
  cpu::gemm32_avx512({a.data_ptr<float>(), a.stride(0), a.stride(1), b.data_ptr<float>(), b.stride(0), b.stride(1),
                      c.data_ptr<float>(), c.stride(0), c.stride(1), M, N, K, static_cast<float>(alpha),
                      static_cast<float>(beta)});
  return c.contiguous();
}

// |got - exact| within K + 2 roundings of float32 of the sum of the terms' magnitudes.
void expect_within_rounding(const Tensor& got, const Tensor& a, const Tensor& b, const Tensor& c0, double alpha,
                            double beta) {
  const Tensor a64 = a.to(kFloat64), b64 = b.to(kFloat64), c64 = c0.to(kFloat64);
  Tensor exact = matmul(a64, b64) * alpha, scale = matmul(a64.abs(), b64.abs()) * std::abs(alpha);
  if (beta != 0) {
    exact = exact + c64 * beta;
    scale = scale + c64.abs() * std::abs(beta);
  }
  const double eps = std::ldexp(1.0, -24) * static_cast<double>(a.size(1) + 2);
  const Tensor excess = (got.to(kFloat64) - exact).abs() - scale * eps;
  EXPECT_LE(excess.max().item<double>(), 1e-30);
}

TEST(Gemm32, TheAvx512KernelIsOneFloat32SumFromFloat64OnEveryEdge) {
  REQUIRE_AVX512_GEMM();
  manual_seed(32);
  // Rows around the 12-row strip, columns around the 32-column panel (and its 16-wide halves),
  // depths 1 to 300; and K past one 4096-deep chunk, where beta must apply once.
  const std::vector<std::array<int64_t, 3>> shapes = {{1, 1, 1},      {4, 16, 7},    {11, 31, 1},
                                                      {12, 32, 64},   {13, 33, 300}, {25, 17, 9},
                                                      {100, 64, 130}, {37, 100, 33}, {13, 40, 4100}};
  for (auto [M, N, K] : shapes)
    for (int layout = 0; layout < 4; ++layout)
      for (auto [alpha, beta] : std::vector<std::pair<double, double>>{{1, 0}, {2, 0.5}, {1, 1}, {-0.5, -1}}) {
        SCOPED_TRACE(::testing::Message()
                     << M << "x" << N << "x" << K << " layout " << layout << " alpha " << alpha << " beta " << beta);
        const Tensor a = layout & 1 ? randn({K, M}).t() : randn({M, K});
        const Tensor b = layout & 2 ? randn({N, K}).t() : randn({K, N});
        const Tensor c0 = randn({M, N});
        expect_within_rounding(run_kernel(a, b, c0, alpha, beta), a, b, c0, alpha, beta);
        if (layout == 0) expect_within_rounding(run_kernel(a, b, c0, alpha, beta, true), a, b, c0, alpha, beta);
      }
}

TEST(Gemm32, NanPropagatesAndBetaZeroIgnoresTheOutput) {
  REQUIRE_AVX512_GEMM();
  Tensor a = ones({14, 5});
  {
    NoGradGuard g;
    a.select(0, 2).select(0, 3).fill_(std::nan(""));
  }
  const Tensor b = ones({5, 35});
  const Tensor got = run_kernel(a, b, full({14, 35}, std::nan("")), 1, 0);  // beta = 0: never read
  EXPECT_EQ((got != got).sum().item<int64_t>(), 35);                        // row 2, every column
  EXPECT_TRUE(all_close(got.select(0, 0), full({35}, 5.0f), 0, 0));
  EXPECT_TRUE(all_close(got.select(0, 13), full({35}, 5.0f), 0, 0));
}

// One output, one chain of FMAs in k order on one thread: the same bits on 1 thread and on 2.
TEST(Gemm32, DoesNotDependOnTheThreadCount) {
  REQUIRE_AVX512_GEMM();
  manual_seed(33);
  const Tensor a = randn({130, 200}), b = randn({300, 200}).t(), c0 = randn({130, 300});
  set_num_threads(1);
  const Tensor one = run_kernel(a, b, c0, 1.5, 0.5);
  set_num_threads(2);
  EXPECT_TRUE(all_close(run_kernel(a, b, c0, 1.5, 0.5), one, 0, 0));
}

// matmul, bmm and addmm take the kernel under Isa::avx512 (the same bits as calling it) and
// Eigen's GEMM under Isa::avx2 (within rounding of it).
TEST(Gemm32, TheIsaSwitchChoosesItOverEigen) {
  REQUIRE_AVX512_GEMM();
  manual_seed(34);
  const backends::cpu::Isa before = backends::cpu::max_isa();
  const Tensor x = randn({3, 64, 96}), w = randn({80, 96}), bias = randn({80});
  backends::cpu::set_max_isa(backends::cpu::Isa::avx2);
  EXPECT_FALSE(cpu::gemm32_avx512_available());
  const Tensor eigen = matmul(x, w.t());
  backends::cpu::set_max_isa(backends::cpu::Isa::avx512);
  const Tensor ours = matmul(x, w.t());
  for (int64_t i = 0; i < 3; ++i)
    EXPECT_TRUE(all_close(ours.select(0, i), run_kernel(x.select(0, i), w.t(), zeros({64, 80}), 1, 0), 0, 0));
  EXPECT_TRUE(all_close(ours, eigen, 1e-5, 1e-5));
  EXPECT_TRUE(all_close(addmm(bias, x.select(0, 1), w.t()), eigen.select(0, 1) + bias, 1e-5, 1e-5));
  backends::cpu::set_max_isa(before);
}

}  // namespace
}  // namespace ember
