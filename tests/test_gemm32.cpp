// ember's float32 GEMM (Note [float32 GEMM]), each register tile this CPU runs (AVX2's 6 x 16,
// AVX-512's 12 x 32): within float32's rounding bound of a float64 reference on every strip and
// panel edge, layout, alpha and beta, across K chunks and panel blocks; every output exactly one
// chain of FMAs in k order on every path (half-width panels, the transposed product, the three
// ways of storing); the two tiles' bits equal;
// NaN, beta = 0, thread counts, and the switches that choose between them and Eigen's GEMM.
// Skipped on CPUs without AVX2 (Eigen's GEMM runs there, and the other tests cover it).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ember/tensor/cpu/cpu.h"
#include "ember/tensor/cpu/cpu_backend.h"
#include "helpers.h"

namespace ember {
namespace {

using testing::all_close;

// The tiles this CPU runs; the test is skipped where there is none.
std::vector<cpu::Gemm32Kernel> own_kernels() {
  std::vector<cpu::Gemm32Kernel> kernels;
  for (auto k : {cpu::Gemm32Kernel::Avx2, cpu::Gemm32Kernel::Avx512})
    if (cpu::gemm32_kernel_available(k)) kernels.push_back(k);
  return kernels;
}
#define REQUIRE_OWN_GEMM() \
  if (own_kernels().empty()) GTEST_SKIP() << "this CPU has no AVX2: Eigen's GEMM only"

// c = alpha a @ b + beta c through one kernel: a [M, K], b [K, N], c [M, N] with unit column
// stride, or every other column of a wider matrix (the strided store).
Tensor run_kernel(cpu::Gemm32Kernel kernel, const Tensor& a, const Tensor& b, const Tensor& c0, double alpha,
                  double beta, bool strided_c = false) {
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  Tensor base = strided_c ? zeros({M, 2 * N}) : c0.clone();
  Tensor c = strided_c ? base.slice(1, 0, 2 * N, 2) : base;
  if (strided_c) {
    NoGradGuard g;
    c.copy_(c0);
  }
  cpu::gemm32_with(kernel, {a.data_ptr<float>(), a.stride(0), a.stride(1), b.data_ptr<float>(), b.stride(0),
                            b.stride(1), c.data_ptr<float>(), c.stride(0), c.stride(1), M, N, K,
                            static_cast<float>(alpha), static_cast<float>(beta)});
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

// Layout 0: both row-major; bit 1: a a transpose; bit 2: b a transpose; 4: a's columns every
// other one (neither layout: element by element).
Tensor operand(int64_t rows, int64_t cols, bool transposed, bool every_other = false) {
  if (every_other) return randn({rows, 2 * cols}).slice(1, 0, 2 * cols, 2);
  return transposed ? randn({cols, rows}).t() : randn({rows, cols});
}

TEST(Gemm32, EachTileIsOneFloat32SumFromFloat64OnEveryEdge) {
  REQUIRE_OWN_GEMM();
  manual_seed(32);
  // Rows around both strips (6, 12), columns around both panels (16, 32), depths 1 to 300 and
  // around the 8 x 8 transposes that pack A and B; K past one 4096-deep chunk, where beta must
  // apply once; and N past one 2 MiB block of panels at that depth.
  const std::vector<std::array<int64_t, 3>> shapes = {
      {1, 1, 1},     {4, 16, 7},  {5, 15, 3},     {6, 16, 8},    {7, 17, 50},    {11, 31, 1},   {12, 32, 64},
      {13, 33, 300}, {25, 17, 9}, {100, 64, 130}, {37, 100, 33}, {13, 40, 4100}, {7, 300, 4100}};
  for (auto kernel : own_kernels())
    for (auto [M, N, K] : shapes)
      for (int layout = 0; layout < 5; ++layout)
        for (auto [alpha, beta] : std::vector<std::pair<double, double>>{{1, 0}, {2, 0.5}, {1, 1}, {-0.5, -1}}) {
          SCOPED_TRACE(::testing::Message() << cpu::gemm32_kernel_name(kernel) << " " << M << "x" << N << "x" << K
                                            << " layout " << layout << " alpha " << alpha << " beta " << beta);
          const Tensor a = operand(M, K, layout & 1, layout == 4), b = operand(K, N, layout & 2);
          const Tensor c0 = randn({M, N});
          expect_within_rounding(run_kernel(kernel, a, b, c0, alpha, beta), a, b, c0, alpha, beta);
          if (layout == 0)
            expect_within_rounding(run_kernel(kernel, a, b, c0, alpha, beta, true), a, b, c0, alpha, beta);
        }
}

// Every output is alpha (a chain of FMAs in k order from zero), then beta c fused in: the same
// bits on every path. The shapes take the paths Note [float32 GEMM] names: the half-width last
// panel (N % 16 or N % 32 at most half a panel), the transposed product (128 x 49, where c^T =
// b^T a^T wastes less of the tiles; 49 x 128 is the same product unturned), and outputs stored
// by rows, strided (element by element) and transposed (through 8 x 8 transposes).
TEST(Gemm32, EveryOutputIsOneChainOfFmasOnEveryPath) {
  REQUIRE_OWN_GEMM();
  manual_seed(36);
  const std::vector<std::array<int64_t, 3>> shapes = {{128, 49, 70}, {49, 128, 70}, {1024, 49, 9}, {30, 40, 33},
                                                      {12, 48, 5},   {13, 65, 17},  {64, 196, 16}};
  for (auto kernel : own_kernels())
    for (auto [M, N, K] : shapes)
      for (int layout = 0; layout < 5; ++layout)
        for (int c_layout = 0; c_layout < 3; ++c_layout)  // rows, every other column, a transpose
          for (auto [alpha, beta] : std::vector<std::pair<float, float>>{{2, 0}, {0.5f, -1.5f}}) {
            SCOPED_TRACE(::testing::Message()
                         << cpu::gemm32_kernel_name(kernel) << " " << M << "x" << N << "x" << K << " layout " << layout
                         << " c layout " << c_layout << " alpha " << alpha << " beta " << beta);
            const Tensor a = operand(M, K, layout & 1, layout == 4), b = operand(K, N, layout & 2);
            const Tensor c0 = randn({M, N});
            Tensor c = c_layout == 0   ? c0.clone()
                       : c_layout == 1 ? zeros({M, 2 * N}).slice(1, 0, 2 * N, 2)
                                       : zeros({N, M}).t();
            if (c_layout != 0) {
              NoGradGuard g;
              c.copy_(c0);
            }
            cpu::gemm32_with(
                kernel, {a.data_ptr<float>(), a.stride(0), a.stride(1), b.data_ptr<float>(), b.stride(0), b.stride(1),
                         c.data_ptr<float>(), c.stride(0), c.stride(1), M, N, K, alpha, beta});
            const float *pa = a.data_ptr<float>(), *pb = b.data_ptr<float>(), *pc0 = c0.data_ptr<float>();
            const float* pc = c.data_ptr<float>();
            const int64_t as1 = a.stride(0), as2 = a.stride(1), bs1 = b.stride(0), bs2 = b.stride(1);
            const int64_t cs1 = c.stride(0), cs2 = c.stride(1);
            int64_t differ = 0;
            for (int64_t m = 0; m < M; ++m)
              for (int64_t n = 0; n < N; ++n) {
                float acc = 0;
                for (int64_t k = 0; k < K; ++k) acc = std::fma(pa[m * as1 + k * as2], pb[k * bs1 + n * bs2], acc);
                const float want = beta == 0 ? alpha * acc : std::fma(beta, pc0[m * N + n], alpha * acc);
                differ += pc[m * cs1 + n * cs2] != want;
              }
            EXPECT_EQ(differ, 0);
          }
}

// Both tiles compute each output as one chain of FMAs in k order, with the same K chunks: the
// same bits.
TEST(Gemm32, TheTwoTilesGiveTheSameBits) {
  if (own_kernels().size() < 2) GTEST_SKIP() << "this CPU has no AVX-512";
  manual_seed(35);
  for (auto [M, N, K] : std::vector<std::array<int64_t, 3>>{{13, 33, 300}, {64, 100, 4200}}) {
    const Tensor a = randn({M, K}), b = randn({N, K}).t(), c0 = randn({M, N});
    EXPECT_TRUE(all_close(run_kernel(cpu::Gemm32Kernel::Avx2, a, b, c0, 0.5, 2),
                          run_kernel(cpu::Gemm32Kernel::Avx512, a, b, c0, 0.5, 2), 0, 0));
  }
}

TEST(Gemm32, NanPropagatesAndBetaZeroIgnoresTheOutput) {
  REQUIRE_OWN_GEMM();
  Tensor a = ones({14, 5});
  {
    NoGradGuard g;
    a.select(0, 2).select(0, 3).fill_(std::nan(""));
  }
  const Tensor b = ones({5, 35});
  for (auto kernel : own_kernels()) {
    const Tensor got = run_kernel(kernel, a, b, full({14, 35}, std::nan("")), 1, 0);  // beta = 0: never read
    EXPECT_EQ((got != got).sum().item<int64_t>(), 35);                                // row 2, every column
    EXPECT_TRUE(all_close(got.select(0, 0), full({35}, 5.0f), 0, 0));
    EXPECT_TRUE(all_close(got.select(0, 13), full({35}, 5.0f), 0, 0));
  }
}

// One output, one chain of FMAs in k order on one thread: the same bits on 1 thread and on 2.
// [128, 300] x [300, 49] runs as the transposed product, its tasks split by panels instead of
// strips.
TEST(Gemm32, DoesNotDependOnTheThreadCount) {
  REQUIRE_OWN_GEMM();
  manual_seed(33);
  for (auto [M, N] : std::vector<std::pair<int64_t, int64_t>>{{130, 300}, {128, 49}}) {
    const Tensor a = randn({M, 300}), b = randn({N, 300}).t(), c0 = randn({M, N});
    for (auto kernel : own_kernels()) {
      set_num_threads(1);
      const Tensor one = run_kernel(kernel, a, b, c0, 1.5, 0.5);
      set_num_threads(2);
      EXPECT_TRUE(all_close(run_kernel(kernel, a, b, c0, 1.5, 0.5), one, 0, 0));
    }
  }
}

// matmul, bmm and addmm take the tile backends::cpu::max_isa() allows (the same bits as calling
// it), and Eigen's GEMM with the switch off (within rounding of it); a wrong choice is an error.
TEST(Gemm32, TheSwitchesChooseTheTileOrEigen) {
  REQUIRE_OWN_GEMM();
  manual_seed(34);
  const backends::cpu::Isa before = backends::cpu::max_isa();
  const Tensor x = randn({3, 64, 96}), w = randn({80, 96}), bias = randn({80});
  backends::cpu::set_own_float32_gemm(false);
  EXPECT_EQ(cpu::gemm32_kernel(), cpu::Gemm32Kernel::Eigen);
  EXPECT_FALSE(cpu::gemm32_applies(64, 80, 96));
  const Tensor eigen = matmul(x, w.t());
  backends::cpu::set_own_float32_gemm(true);
  for (auto kernel : own_kernels()) {
    SCOPED_TRACE(cpu::gemm32_kernel_name(kernel));
    backends::cpu::set_max_isa(kernel == cpu::Gemm32Kernel::Avx512 ? backends::cpu::Isa::avx512
                                                                   : backends::cpu::Isa::avx2);
    EXPECT_EQ(cpu::gemm32_kernel(), kernel);
    EXPECT_TRUE(cpu::gemm32_applies(64, 80, 96));
    const Tensor ours = matmul(x, w.t());
    for (int64_t i = 0; i < 3; ++i)
      EXPECT_TRUE(all_close(ours.select(0, i), run_kernel(kernel, x.select(0, i), w.t(), zeros({64, 80}), 1, 0), 0, 0));
    EXPECT_TRUE(all_close(ours, eigen, 1e-5, 1e-5));
    EXPECT_TRUE(all_close(addmm(bias, x.select(0, 1), w.t()), eigen.select(0, 1) + bias, 1e-5, 1e-5));
  }
  backends::cpu::set_max_isa(before);
  EXPECT_FALSE(cpu::gemm32_applies(3, 80, 96));    // too few rows: Eigen's
  EXPECT_TRUE(cpu::gemm32_applies(128, 10, 128));  // a 10-class head: the transposed product
  EXPECT_FALSE(cpu::gemm32_applies(128, 8, 128));  // too few columns, even transposed
  EXPECT_FALSE(cpu::gemm32_applies(12, 10, 512));  // too few of either
  EXPECT_FALSE(cpu::gemm32_applies(64, 80, 0));
  const Tensor a = ones({4, 4}), b = ones({4, 16}), c = zeros({4, 16});
  EXPECT_THROW(cpu::gemm32_with(cpu::Gemm32Kernel::Eigen, {a.data_ptr<float>(), 4, 1, b.data_ptr<float>(), 16, 1,
                                                           c.data_ptr<float>(), 16, 1, 4, 16, 4, 1.0f, 0.0f}),
               Error);
}

}  // namespace
}  // namespace ember
