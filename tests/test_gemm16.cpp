// The CPU's 16-bit GEMM (Note [16-bit GEMM]): every kernel against the portable one bit for bit
// (the bfloat16 dot-product kernel against the same rounding bound instead),
// exact where float32 sums are, one rounding from a float64 reference elsewhere, every layout
// and tile edge, alpha and beta, NaN, and the bytes it holds (no float32 copies of operands).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ember/tensor/cpu/cpu.h"
#include "ember/tensor/cpu/cpu_backend.h"
#include "helpers.h"

namespace ember {
namespace {

using testing::all_close;

constexpr cpu::Gemm16Kernel kKernels[] = {cpu::Gemm16Kernel::Portable, cpu::Gemm16Kernel::Avx2,
                                          cpu::Gemm16Kernel::Avx512};
constexpr DType kDtypes[] = {kBFloat16, kFloat16};

// [batch, rows, cols] in dtype, laid out transposed in memory when `transposed` (a view).
Tensor operand(int64_t batch, int64_t rows, int64_t cols, DType dtype, bool transposed) {
  if (transposed) return randn({batch, cols, rows}).to(dtype).transpose(1, 2);
  return randn({batch, rows, cols}).to(dtype);
}

Tensor run(cpu::Gemm16Kernel kernel, const Tensor& a, const Tensor& b, const Tensor& c0, double alpha, double beta) {
  Tensor c = c0.clone();
  cpu::gemm16_with(kernel, a, b, c, alpha, beta);
  return c;
}

// The same product in float64 from the widened operands: what one rounding of the exact sum gives.
Tensor reference(const Tensor& a, const Tensor& b, const Tensor& c0, double alpha, double beta) {
  Tensor r = matmul(a.to(kFloat64), b.to(kFloat64)) * alpha;
  if (beta != 0) r = r + c0.to(kFloat64) * beta;
  return r;
}

TEST(Gemm16, EveryKernelEqualsThePortableOneBitForBitOnEveryEdge) {
  manual_seed(16);
  // Rows around the 6-row tile, columns around the 16-column panel, depths 1 to 300; and one row
  // (the GEMV: columns around its 8- and 32-wide steps, depths around its 8 x 8 blocks).
  const std::vector<std::array<int64_t, 4>> shapes = {
      {1, 1, 1, 1},   {1, 5, 17, 7},   {1, 6, 16, 1}, {3, 7, 33, 130}, {2, 13, 40, 77}, {1, 64, 48, 300},
      {2, 1, 75, 77}, {1, 1, 64, 300}, {1, 1, 8, 8},  {1, 1, 7, 9},    {1, 1, 33, 1}};
  for (DType dtype : kDtypes)
    for (auto [B, M, N, K] : shapes)
      for (int layout = 0; layout < 4; ++layout)
        for (auto [alpha, beta] : std::vector<std::pair<double, double>>{{1, 0}, {2, 0.5}}) {
          SCOPED_TRACE(::testing::Message() << dtype << " " << B << "x" << M << "x" << N << "x" << K << " layout "
                                            << layout << " alpha " << alpha << " beta " << beta);
          const Tensor a = operand(B, M, K, dtype, layout & 1), b = operand(B, K, N, dtype, layout & 2);
          const Tensor c0 = randn({B, M, N}).to(dtype);
          const Tensor portable = run(cpu::Gemm16Kernel::Portable, a, b, c0, alpha, beta);
          for (auto kernel : kKernels) {
            if (!cpu::gemm16_kernel_available(kernel)) continue;
            EXPECT_TRUE(all_close(run(kernel, a, b, c0, alpha, beta), portable, 0, 0))
                << cpu::gemm16_kernel_name(kernel);
          }
          // One rounding of a float32 sum: within half a 16-bit ulp (at most 2^-8 of the value for
          // bfloat16's 8 significant bits, 2^-11 for float16's 11) of the float64 value, plus
          // float32's accumulation error. A float16 result below 2^-14 is subnormal, where the
          // step is 2^-24 whatever the value: half of it more (bfloat16's, 2^-133, is nothing).
          const double half_ulp = dtype == kBFloat16 ? 1.0 / 256 : 1.0 / 2048;
          const double half_subnormal_step = dtype == kFloat16 ? std::ldexp(1.0, -25) : 0.0;
          const Tensor expected = reference(a, b, c0, alpha, beta);
          const Tensor magnitude =
              matmul(a.to(kFloat64).abs(), b.to(kFloat64).abs()) * alpha + c0.to(kFloat64).abs() * beta;
          const Tensor err = (portable.to(kFloat64) - expected).abs();
          const Tensor bound = expected.abs() * half_ulp * 1.0001 + magnitude * (K * 1.2e-7) + half_subnormal_step;
          EXPECT_TRUE((err <= bound).all().item<bool>()) << "largest error " << (err - bound).max().item<double>();
        }
}

// The dot-product kernel (vdpbf16ps, bfloat16 only) adds each pair of products in its own order,
// so it is not held to the portable kernel's bits: it is held to the same bound of one rounding
// of a float32 sum, to at most one bfloat16 step from the portable result, and to NaN.
TEST(Gemm16, TheBf16DotProductKernelIsOneRoundingOfTheSumToo) {
  if (!cpu::gemm16_kernel_available(cpu::Gemm16Kernel::Avx512Bf16)) GTEST_SKIP() << "this CPU has no AVX-512 BF16";
  manual_seed(19);
  // Depths odd and even (the last pair half empty), rows and columns around the tiles.
  const std::vector<std::array<int64_t, 4>> shapes = {{1, 2, 1, 1},    {1, 5, 17, 7},   {1, 6, 16, 2},
                                                      {3, 7, 33, 131}, {2, 13, 40, 78}, {1, 64, 48, 301}};
  int64_t outputs = 0, equal = 0;
  for (auto [B, M, N, K] : shapes)
    for (int layout = 0; layout < 4; ++layout)
      for (auto [alpha, beta] : std::vector<std::pair<double, double>>{{1, 0}, {2, 0.5}}) {
        SCOPED_TRACE(::testing::Message() << B << "x" << M << "x" << N << "x" << K << " layout " << layout << " alpha "
                                          << alpha << " beta " << beta);
        const Tensor a = operand(B, M, K, kBFloat16, layout & 1), b = operand(B, K, N, kBFloat16, layout & 2);
        const Tensor c0 = randn({B, M, N}).to(kBFloat16);
        const Tensor dot = run(cpu::Gemm16Kernel::Avx512Bf16, a, b, c0, alpha, beta).to(kFloat64);
        const Tensor portable = run(cpu::Gemm16Kernel::Portable, a, b, c0, alpha, beta).to(kFloat64);
        const Tensor expected = reference(a, b, c0, alpha, beta);
        const Tensor magnitude =
            matmul(a.to(kFloat64).abs(), b.to(kFloat64).abs()) * alpha + c0.to(kFloat64).abs() * beta;
        const Tensor err = (dot - expected).abs();
        const Tensor bound = expected.abs() * (1.0 / 256) * 1.0001 + magnitude * ((K + 1) * 1.2e-7);
        EXPECT_TRUE((err <= bound).all().item<bool>()) << "largest error " << (err - bound).max().item<double>();
        // One bfloat16 step (2^-7 of the larger value at most) where the two float32 sums round apart.
        const Tensor step = maximum(dot.abs(), portable.abs()) * (1.0 / 128);
        EXPECT_TRUE(((dot - portable).abs() <= step).all().item<bool>());
        outputs += dot.numel();
        equal += dot.eq(portable).sum().item<int64_t>();
      }
  EXPECT_GT(static_cast<double>(equal) / static_cast<double>(outputs), 0.9) << equal << " of " << outputs;
  // NaN in A reaches its row; beta = 0 never reads the output.
  Tensor a = ones({1, 7, 5}).to(kBFloat16), b = ones({1, 5, 18}).to(kBFloat16);
  {
    NoGradGuard g;
    a.select(1, 2).select(1, 3).fill_(std::nan(""));
  }
  Tensor c = full({1, 7, 18}, std::nan("")).to(kBFloat16);
  cpu::gemm16_with(cpu::Gemm16Kernel::Avx512Bf16, a, b, c, 1.0, 0.0);
  const Tensor f = c.to(kFloat32).squeeze(0);
  EXPECT_EQ((f != f).sum().item<int64_t>(), 18);
  EXPECT_TRUE(all_close(f.select(0, 0), full({18}, 5.0), 0, 0));
  EXPECT_ERROR_CONTAINS(
      cpu::gemm16_with(cpu::Gemm16Kernel::Avx512Bf16, a.to(kFloat16), b.to(kFloat16), c.to(kFloat16), 1.0, 0.0),
      "kernel takes bfloat16 only, got float16");
}

TEST(Gemm16, IsExactWhereTheFloat32SumIs) {
  manual_seed(17);
  // Small integers: every product and partial sum is an exact float32, and each |sum| <= 4 * 4 *
  // 16 = 256 is an exact bfloat16 and float16.
  for (DType dtype : kDtypes) {
    const Tensor a = randint(-4, 5, {2, 9, 16}).to(dtype), b = randint(-4, 5, {2, 16, 21}).to(dtype);
    const Tensor expected = matmul(a.to(kInt64), b.to(kInt64));
    EXPECT_TRUE(all_close(matmul(a, b).to(kInt64), expected, 0, 0)) << dtype;
    EXPECT_TRUE(all_close(matmul(a.transpose(1, 2).contiguous().transpose(1, 2), b).to(kInt64), expected, 0, 0));
  }
}

TEST(Gemm16, TheOpsAboveItRoundOnceFromFloat32) {
  manual_seed(18);
  const Tensor a = randn({20, 70}), w = randn({30, 70}), bias = randn({30}), c = randn({20, 30});
  for (DType dtype : kDtypes) {
    SCOPED_TRACE(dtype);
    const Tensor ah = a.to(dtype), wh = w.to(dtype), bh = bias.to(dtype), ch = c.to(dtype);
    // linear: x @ w^T (a transposed operand, read in place) plus the bias (beta = 1)
    const Tensor lin = linear(ah, wh, bh);
    EXPECT_EQ(lin.dtype(), dtype);
    EXPECT_TRUE(all_close(lin.to(kFloat32), linear(ah.to(kFloat32), wh.to(kFloat32), bh.to(kFloat32)), 1e-2, 1e-2));
    const Tensor am = addmm(ch, ah, wh.t(), 0.5, 2.0);
    const Tensor expected = ch.to(kFloat32) * 0.5f + mm(ah.to(kFloat32), wh.to(kFloat32).t()) * 2.0f;
    EXPECT_TRUE(all_close(am.to(kFloat32), expected, 1e-2, 1e-2));
  }
}

TEST(Gemm16, NanPropagatesAndBetaZeroIgnoresTheOutput) {
  for (DType dtype : kDtypes) {
    Tensor a = ones({7, 5}).to(dtype), b = ones({5, 18}).to(dtype);
    {
      NoGradGuard g;
      a.select(0, 2).select(0, 3).fill_(std::nan(""));
    }
    Tensor c = full({1, 7, 18}, std::nan("")).to(dtype);  // beta = 0: never read
    for (auto kernel : kKernels) {
      if (!cpu::gemm16_kernel_available(kernel)) continue;
      SCOPED_TRACE(cpu::gemm16_kernel_name(kernel));
      cpu::gemm16_with(kernel, a.unsqueeze(0), b.unsqueeze(0), c, 1.0, 0.0);
      const Tensor f = c.to(kFloat32).squeeze(0);
      const Tensor row = f.select(0, 2);
      EXPECT_TRUE((row != row).all().item<bool>()) << "NaN != NaN";
      EXPECT_TRUE(all_close(f.select(0, 0), full({18}, 5.0), 0, 0));
      EXPECT_EQ((f != f).sum().item<int64_t>(), 18);
    }
  }
}

TEST(Gemm16, HoldsOnlyItsOutputAndBsPacked16BitCopy) {
  // A [96, 512] @ B [512, 256] in bfloat16: the output (96 * 256 * 2 bytes) and B packed in
  // panels of 16 columns (512 * 256 * 2) are all it allocates; widening the operands to float32
  // first held A, B and C again in four bytes each (and Eigen's own blocks).
  const Tensor a = randn({96, 512}).to(kBFloat16), b = randn({512, 256}).to(kBFloat16);
  const int64_t base = memory::stats(kCPU).current_bytes;
  memory::reset_peak();
  const Tensor c = matmul(a, b);
  EXPECT_EQ(memory::stats(kCPU).current_bytes - base, 96 * 256 * 2);
  EXPECT_EQ(memory::stats(kCPU).peak_bytes - base, 96 * 256 * 2 + 512 * 256 * 2);
}

TEST(Gemm16, RefusesMixedDtypesAndShapesByName) {
  const Tensor a = zeros({1, 2, 3}).to(kBFloat16), b = zeros({1, 3, 4}).to(kBFloat16);
  Tensor c = zeros({1, 2, 4}).to(kFloat16);
  EXPECT_THROW(cpu::gemm16_with(cpu::Gemm16Kernel::Portable, a, b, c, 1, 0), Error);
  Tensor c2 = zeros({1, 2, 5}).to(kBFloat16);
  try {
    cpu::gemm16_with(cpu::Gemm16Kernel::Portable, a, b, c2, 1, 0);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[1, 2, 5]"), std::string::npos) << e.what();
  }
}

// The widest kernel the CPU has runs, the instruction-set switch holds it to AVX2, and the
// dot-product switch decides whether bfloat16 takes vdpbf16ps.
TEST(Gemm16, TheIsaSwitchChoosesTheKernel) {
  if (!cpu::gemm16_kernel_available(cpu::Gemm16Kernel::Avx2)) GTEST_SKIP() << "no AVX2 kernel in this build";
  const backends::cpu::Isa before = backends::cpu::max_isa();
  backends::cpu::set_max_isa(backends::cpu::Isa::avx2);
  EXPECT_EQ(cpu::gemm16_kernel(kFloat16), cpu::Gemm16Kernel::Avx2);
  EXPECT_EQ(cpu::gemm16_kernel(kBFloat16), cpu::Gemm16Kernel::Avx2);
  backends::cpu::set_max_isa(backends::cpu::Isa::avx512);
  const bool wide = cpu::gemm16_kernel_available(cpu::Gemm16Kernel::Avx512);
  const bool dot = cpu::gemm16_kernel_available(cpu::Gemm16Kernel::Avx512Bf16);
  const cpu::Gemm16Kernel widest = wide ? cpu::Gemm16Kernel::Avx512 : cpu::Gemm16Kernel::Avx2;
  EXPECT_EQ(cpu::gemm16_kernel(kFloat16), widest);
  EXPECT_TRUE(backends::cpu::allow_bf16_dot_product());  // on by default
  EXPECT_EQ(cpu::gemm16_kernel(kBFloat16), dot ? cpu::Gemm16Kernel::Avx512Bf16 : widest);
  backends::cpu::set_allow_bf16_dot_product(false);
  EXPECT_EQ(cpu::gemm16_kernel(kBFloat16), widest);
  // Off, a bfloat16 matmul gives the portable kernel's bits on every CPU.
  manual_seed(20);
  const Tensor x = randn({1, 9, 37}).to(kBFloat16), w = randn({1, 37, 20}).to(kBFloat16);
  EXPECT_TRUE(
      all_close(matmul(x, w), run(cpu::Gemm16Kernel::Portable, x, w, zeros({1, 9, 20}).to(kBFloat16), 1, 0), 0, 0));
  backends::cpu::set_allow_bf16_dot_product(true);
  backends::cpu::set_max_isa(before);
  try {
    Tensor c = zeros({1, 2, 4}).to(kBFloat16);
    if (!wide) {
      cpu::gemm16_with(cpu::Gemm16Kernel::Avx512, zeros({1, 2, 3}).to(kBFloat16), zeros({1, 3, 4}).to(kBFloat16), c, 1,
                       0);
      FAIL() << "the AVX-512 kernel ran on a CPU without it";
    }
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("avx512"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ember
