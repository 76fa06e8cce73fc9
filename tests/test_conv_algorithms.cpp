// The CPU's float32 convolution algorithms (tensor/cpu/conv.cpp, conv_direct.cpp): every pass
// of im2col + GEMM and of the direct kernels, with each instruction set this CPU has, against a
// naive loop in double (DESIGN habit 7), over strides, paddings, dilations, groups, odd sizes,
// one sample and channel counts that fill no whole register block; and the switches of
// backends::cpu (forced algorithm, benchmark mode, the widest instruction set).
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "helpers.h"

namespace ember {
namespace {

namespace bc = backends::cpu;
using testing::all_close;

struct Case {
  int64_t N, C, H, W, O, kH, kW, stride, pad_h, pad_w, dil, groups;
};

// Restores the back end's switches however a test ends.
struct SwitchesGuard {
  bc::ConvAlgorithm algorithm = bc::conv_algorithm();
  bool benchmark = bc::benchmark();
  bc::Isa isa = bc::max_isa();
  ~SwitchesGuard() {
    bc::set_conv_algorithm(algorithm);
    bc::set_benchmark(benchmark);
    bc::set_max_isa(isa);
  }
};

struct Reference {
  Tensor y, dx, dw, db;
};

// y = conv(x, w) + b and, for the output gradient dy, dx, dw, db: plain loops in double.
Reference naive(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& dy, const Case& k) {
  const int64_t Cg = k.C / k.groups, Og = k.O / k.groups;
  const int64_t Ho = dy.size(2), Wo = dy.size(3);
  const auto X = x.to(kFloat64).to_vector<double>(), Wt = w.to(kFloat64).to_vector<double>();
  const auto B = b.to(kFloat64).to_vector<double>(), DY = dy.to(kFloat64).to_vector<double>();
  std::vector<double> Y(DY.size(), 0.0), DX(X.size(), 0.0), DW(Wt.size(), 0.0), DB(B.size(), 0.0);
  for (int64_t n = 0; n < k.N; ++n)
    for (int64_t o = 0; o < k.O; ++o) {
      const int64_t g = o / Og;
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const int64_t yi = ((n * k.O + o) * Ho + oh) * Wo + ow;
          double s = B[o];
          DB[o] += DY[yi];
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t i = 0; i < k.kH; ++i)
              for (int64_t j = 0; j < k.kW; ++j) {
                const int64_t h = oh * k.stride - k.pad_h + i * k.dil, ww = ow * k.stride - k.pad_w + j * k.dil;
                if (h < 0 || h >= k.H || ww < 0 || ww >= k.W) continue;
                const int64_t xi = ((n * k.C + g * Cg + c) * k.H + h) * k.W + ww;
                const int64_t wi = ((o * Cg + c) * k.kH + i) * k.kW + j;
                s += X[xi] * Wt[wi];
                DX[xi] += DY[yi] * Wt[wi];
                DW[wi] += DY[yi] * X[xi];
              }
          Y[yi] = s;
        }
    }
  return {tensor(Y, dy.sizes()), tensor(DX, x.sizes()), tensor(DW, w.sizes()), tensor(DB, b.sizes())};
}

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      // N, C, H, W, O, kH, kW, stride, pad_h, pad_w, dil, groups
      {2, 3, 11, 9, 5, 3, 3, 1, 1, 1, 1, 1},     // odd sizes, channels past one block
      {3, 1, 28, 28, 32, 3, 3, 1, 1, 1, 1, 1},   // a CNN's first layer
      {2, 16, 14, 14, 20, 3, 3, 1, 1, 1, 1, 1},  // 20 outputs: a partial block in every kernel
      {1, 8, 10, 13, 9, 3, 3, 1, 1, 1, 1, 1},    // one sample: threads split the blocks
      {2, 4, 9, 7, 6, 5, 5, 1, 2, 2, 1, 1},      // 5 x 5: taps past one tile of entries
      {2, 4, 9, 10, 6, 3, 2, 1, 0, 1, 1, 1},     // rectangular kernel, padding per axis
      {2, 6, 12, 11, 4, 3, 3, 1, 2, 2, 2, 1},    // dilation 2
      {2, 6, 8, 8, 6, 3, 3, 1, 1, 1, 1, 2},      // groups
      {2, 4, 7, 7, 4, 3, 3, 1, 1, 1, 1, 4},      // depthwise
      {2, 3, 8, 9, 5, 3, 3, 1, 0, 0, 1, 1},      // no padding
      {2, 3, 8, 9, 5, 3, 3, 1, 3, 3, 1, 1},      // padding past dil * (k - 1): backward-data falls back
      {2, 5, 6, 7, 7, 1, 1, 1, 0, 0, 1, 1},      // 1 x 1
      {2, 3, 11, 9, 5, 3, 3, 2, 1, 1, 1, 1},     // stride 2: im2col + GEMM only
      {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1},      // the smallest
  };
  return all;
}

std::string describe(const Case& k, const char* algorithm) {
  return detail::concat(algorithm, " on ", bc::isa(), ": N", k.N, " C", k.C, " ", k.H, "x", k.W, " O", k.O, " k", k.kH,
                        "x", k.kW, " stride ", k.stride, " pad ", k.pad_h, ",", k.pad_w, " dil ", k.dil, " groups ",
                        k.groups);
}

void expect_all_passes_match(const Case& k, const char* algorithm) {
  manual_seed(static_cast<uint64_t>(k.C * 131 + k.H * 7 + k.O));
  const Tensor x = randn({k.N, k.C, k.H, k.W}), w = randn({k.O, k.C / k.groups, k.kH, k.kW}), b = randn({k.O});
  const Tensor y = conv2d(x, w, b, {k.stride, k.stride}, {k.pad_h, k.pad_w}, {k.dil, k.dil}, k.groups);
  const Tensor dy = randn_like(y);
  const Reference ref = naive(x, w, b, dy, k);
  const auto [dx, dw, db] = native::conv2d_backward(x, w, dy, {k.stride, k.stride}, {k.pad_h, k.pad_w}, {k.dil, k.dil},
                                                    k.groups, {true, true, true});
  SCOPED_TRACE(describe(k, algorithm));
  EXPECT_TRUE(all_close(y, ref.y.to(kFloat32), 1e-4, 1e-4));
  EXPECT_TRUE(all_close(dx, ref.dx.to(kFloat32), 1e-4, 1e-4));
  EXPECT_TRUE(all_close(dw, ref.dw.to(kFloat32), 1e-4, 1e-4));
  EXPECT_TRUE(all_close(db, ref.db.to(kFloat32), 1e-4, 1e-4));
  // Each pass alone (the autograd layer asks for what it needs) gives the same.
  const auto [dx_only, no_w, no_b] = native::conv2d_backward(x, w, dy, {k.stride, k.stride}, {k.pad_h, k.pad_w},
                                                             {k.dil, k.dil}, k.groups, {true, false, false});
  EXPECT_TRUE(all_close(dx_only, dx, 0, 0));
  EXPECT_FALSE(no_w.defined() || no_b.defined());
}

TEST(ConvAlgorithms, EveryPassOfEveryAlgorithmMatchesTheNaiveLoop) {
  SwitchesGuard guard;
  for (bc::Isa isa : testing::cpu_isas()) {
    bc::set_max_isa(isa);
    for (const Case& k : cases()) {
      bc::set_conv_algorithm(bc::ConvAlgorithm::im2col_gemm);
      expect_all_passes_match(k, "im2col + GEMM");
      bc::set_conv_algorithm(bc::ConvAlgorithm::direct);
      expect_all_passes_match(k, "direct");
      bc::set_conv_algorithm(bc::ConvAlgorithm::automatic);
      expect_all_passes_match(k, "heuristic");
    }
  }
}

TEST(ConvAlgorithms, IsaNamesWhatRuns) {
  SwitchesGuard guard;
  bc::set_max_isa(bc::Isa::avx2);
  const std::string capped = bc::isa();
  EXPECT_TRUE(capped == "avx2" || capped == "none") << capped;  // "none" off x86-64
  bc::set_max_isa(bc::Isa::avx512);
  const std::string best = bc::isa();
  EXPECT_TRUE(best == "avx512" || best == capped) << best;
}

TEST(ConvAlgorithms, BenchmarkModeSearchesOncePerConfigurationAndPass) {
  SwitchesGuard guard;
  bc::set_benchmark(true);
  bc::clear_benchmark_cache();
  manual_seed(3);
  const Tensor x = randn({2, 4, 10, 10}), w = randn({6, 4, 3, 3}), b = randn({6});
  const Tensor y = conv2d(x, w, b, {1, 1}, {1, 1});
  EXPECT_EQ(bc::benchmark_stats().searches, 1);
  EXPECT_EQ(bc::benchmark_stats().hits, 0);
  const Tensor y2 = conv2d(x, w, b, {1, 1}, {1, 1});
  EXPECT_EQ(bc::benchmark_stats().searches, 1);
  EXPECT_EQ(bc::benchmark_stats().hits, 1);
  EXPECT_TRUE(all_close(y, y2, 1e-6, 1e-6));
  // The backward passes are configurations of their own; bias's gradient has one algorithm.
  const Tensor dy = randn_like(y);
  (void)native::conv2d_backward(x, w, dy, {1, 1}, {1, 1}, {1, 1}, 1, {true, true, true});
  EXPECT_EQ(bc::benchmark_stats().searches, 3);
  // Another shape searches again; stride 2 has one algorithm and never searches.
  (void)conv2d(randn({3, 4, 10, 10}), w, b, {1, 1}, {1, 1});
  (void)conv2d(x, w, b, {2, 2}, {1, 1});
  EXPECT_EQ(bc::benchmark_stats().searches, 4);
  // The result under benchmark mode is the naive loop's.
  const Reference ref = naive(x, w, b, dy, {2, 4, 10, 10, 6, 3, 3, 1, 1, 1, 1, 1});
  EXPECT_TRUE(all_close(y, ref.y.to(kFloat32), 1e-4, 1e-4));
  bc::clear_benchmark_cache();
  EXPECT_EQ(bc::benchmark_stats().searches, 0);
  EXPECT_EQ(bc::benchmark_stats().hits, 0);
}

// The bits of a tensor (16-bit values widened exactly), for comparisons that must be exact.
std::vector<float> bits_of(const Tensor& t) { return t.to(kFloat32).to_vector<float>(); }

// A float16 / bfloat16 convolution (autocast's) reads its 16-bit tensors as they are, widened as
// the kernels gather them, computes in float32 and rounds each result once: so every pass gives
// exactly the float32 pass on the widened tensors, rounded (with no float32 copy of the input).
// The bias gradient sums the same values in the same order but from a buffer of its own, where
// Eigen's vectorized sum may split its head differently: within one 16-bit step there.
void expect_half_passes_equal_float_rounded(const Case& k, DType dt, const char* algorithm) {
  manual_seed(static_cast<uint64_t>(k.C * 17 + k.H * 3 + k.O));
  const Int2 stride{k.stride, k.stride}, pad{k.pad_h, k.pad_w}, dil{k.dil, k.dil};
  const Tensor x = randn({k.N, k.C, k.H, k.W}).to(dt), w = randn({k.O, k.C / k.groups, k.kH, k.kW}).to(dt);
  const Tensor b = randn({k.O}).to(dt);
  const Tensor y = conv2d(x, w, b, stride, pad, dil, k.groups);
  const Tensor dy = randn_like(y);
  const auto [dx, dw, db] = native::conv2d_backward(x, w, dy, stride, pad, dil, k.groups, {true, true, true});
  const Tensor x32 = x.to(kFloat32), w32 = w.to(kFloat32), dy32 = dy.to(kFloat32);
  const Tensor y32 = conv2d(x32, w32, b.to(kFloat32), stride, pad, dil, k.groups);
  const auto [dx32, dw32, db32] =
      native::conv2d_backward(x32, w32, dy32, stride, pad, dil, k.groups, {true, true, true});
  SCOPED_TRACE(detail::concat(describe(k, algorithm), " in ", dt));
  ASSERT_EQ(y.dtype(), dt);
  ASSERT_EQ(dx.dtype(), dt);
  ASSERT_EQ(dw.dtype(), dt);
  EXPECT_EQ(bits_of(y), bits_of(y32.to(dt)));
  EXPECT_EQ(bits_of(dx), bits_of(dx32.to(dt)));
  EXPECT_EQ(bits_of(dw), bits_of(dw32.to(dt)));
  EXPECT_TRUE(all_close(db.to(kFloat32), db32.to(dt).to(kFloat32), dt == kBFloat16 ? 8e-3 : 1e-3, 1e-3));
}

TEST(ConvAlgorithms, HalfPrecisionPassesEqualTheFloatPassOnWidenedTensorsRounded) {
  SwitchesGuard guard;
  for (bc::Isa isa : testing::cpu_isas()) {
    bc::set_max_isa(isa);
    for (const Case& k : cases())
      for (DType dt : {kBFloat16, kFloat16}) {
        bc::set_conv_algorithm(bc::ConvAlgorithm::im2col_gemm);
        expect_half_passes_equal_float_rounded(k, dt, "im2col + GEMM");
        bc::set_conv_algorithm(bc::ConvAlgorithm::direct);
        expect_half_passes_equal_float_rounded(k, dt, "direct");
      }
  }
}

// And the transient memory shows it: a 16-bit forward allocates less than a float32 copy of its
// input would take (its workspace: per thread, a padded plane or the receptive fields, and one
// sample's float32 outputs).
TEST(ConvAlgorithms, HalfPrecisionForwardHoldsNoFloatCopies) {
  SwitchesGuard guard;
  manual_seed(6);
  const Tensor x = randn({32, 16, 24, 24}).to(kBFloat16), w = randn({32, 16, 3, 3}).to(kBFloat16);
  for (bc::ConvAlgorithm algorithm : {bc::ConvAlgorithm::direct, bc::ConvAlgorithm::im2col_gemm}) {
    bc::set_conv_algorithm(algorithm);
    const int64_t before = memory::stats().current_bytes;
    memory::reset_peak();
    const Tensor y = conv2d(x, w, {}, {1, 1}, {1, 1});
    const int64_t transient = memory::stats().peak_bytes - before - static_cast<int64_t>(y.nbytes());
    // A float32 copy of the input would be 1.2 MB, of the output 2.4 MB (the old path held both).
    // im2col holds a float32 column buffer and output block per thread, and the float32 GEMM its
    // packed panels (1.5 MB in all on 2 threads): less than the output's copy alone.
    EXPECT_LT(transient, 2 * static_cast<int64_t>(y.nbytes())) << static_cast<int>(algorithm);
  }
}

TEST(ConvAlgorithms, NanInTheInputReachesTheOutputsItTouches) {
  SwitchesGuard guard;
  bc::set_conv_algorithm(bc::ConvAlgorithm::direct);
  std::vector<float> values(36, 0.0f);
  values[2 * 6 + 3] = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = tensor(values, Shape{1, 1, 6, 6});
  const Tensor y = conv2d(x, ones({1, 1, 3, 3}), {}, {1, 1}, {1, 1});
  const auto v = y.to_vector<float>();
  for (int64_t oh = 0; oh < 6; ++oh)
    for (int64_t ow = 0; ow < 6; ++ow) {
      const bool touched = std::abs(oh - 2) <= 1 && std::abs(ow - 3) <= 1;
      EXPECT_EQ(std::isnan(v[oh * 6 + ow]), touched) << oh << "," << ow;
    }
}

// conv_transpose2d with an output_padding of the stride or more (allowed below the dilation) hands
// conv2d_backward a gradient smaller than conv2d's output for the shapes: the direct weight pass
// read it as if it were whole, past its end (ASan, found by the random-arguments test at 30000
// draws). Every algorithm, forward and gradients, against float64's (naive loops), in float32.
TEST(ConvAlgorithms, TransposedConvolutionWithOutputPaddingBeyondTheStrideMatchesFloat64) {
  SwitchesGuard guard;
  manual_seed(5);
  const Tensor x = randn({2, 4, 5, 6}, kFloat64), w = randn({4, 6, 3, 2}, kFloat64), b = randn({6}, kFloat64);
  auto run = [&](DType dt) {
    Tensor xr = x.to(dt).detach(), wr = w.to(dt).detach(), br = b.to(dt).detach();
    for (Tensor* t : {&xr, &wr, &br}) t->set_requires_grad(true);
    const Tensor y = conv_transpose2d(xr, wr, br, {1, 1}, {1, 0}, {1, 1}, 1, {2, 2});
    y.square().sum().backward();
    return std::vector<Tensor>{y, xr.grad(), wr.grad(), br.grad()};
  };
  const std::vector<Tensor> expected = run(kFloat64);
  EXPECT_EQ(expected[0].sizes(), (Shape{2, 6, 8, 9}));  // (5 - 1) - 2 + 2 (3 - 1) + 1 + 1, ...
  for (bc::ConvAlgorithm algorithm : {bc::ConvAlgorithm::direct, bc::ConvAlgorithm::im2col_gemm}) {
    bc::set_conv_algorithm(algorithm);
    const std::vector<Tensor> got = run(kFloat32);
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(all_close(got[i].to(kFloat64), expected[i], 1e-4, 1e-4 * expected[i].abs().max().item<double>()))
          << (algorithm == bc::ConvAlgorithm::direct ? "direct" : "im2col") << ", output " << i;
  }
}

// Beyond the chosen cases: valid configurations drawn at random (seeded), small enough to run
// every algorithm on each: sizes 1-9, kernels 1-4 per axis, stride and dilation 1-3, padding up
// to past the kernel's reach, groups dividing both channel counts. Each applicability rule of
// the direct kernels (stride, padding, whole gradients) meets the shapes on either side of it;
// the draws take turns over the instruction sets this CPU has.
struct Drawn {
  std::mt19937_64 rng;
  int64_t in(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); }
};

TEST(ConvAlgorithms, RandomValidConfigurationsMatchTheNaiveLoop) {
  SwitchesGuard guard;
  Drawn d{std::mt19937_64(2026)};
  const std::vector<bc::Isa> isas = testing::cpu_isas();
  for (int draw = 0; draw < 150; ++draw) {
    Case k{};
    k.groups = d.in(1, 3);
    k.C = k.groups * d.in(1, 3), k.O = k.groups * d.in(1, 3), k.N = d.in(1, 3);
    k.kH = d.in(1, 4), k.kW = d.in(1, 4), k.stride = d.in(1, 3), k.dil = d.in(1, 3);
    k.pad_h = d.in(0, k.dil * (k.kH - 1) + 1), k.pad_w = d.in(0, k.dil * (k.kW - 1) + 1);
    // an input at least as large as the dilated kernel after padding
    k.H = std::max<int64_t>(1, k.dil * (k.kH - 1) + 1 - 2 * k.pad_h) + d.in(0, 6);
    k.W = std::max<int64_t>(1, k.dil * (k.kW - 1) + 1 - 2 * k.pad_w) + d.in(0, 6);
    bc::set_max_isa(isas[static_cast<size_t>(draw) % isas.size()]);
    for (auto [algorithm, name] :
         {std::pair{bc::ConvAlgorithm::im2col_gemm, "im2col + GEMM"}, std::pair{bc::ConvAlgorithm::direct, "direct"},
          std::pair{bc::ConvAlgorithm::automatic, "heuristic"}}) {
      bc::set_conv_algorithm(algorithm);
      expect_all_passes_match(k, name);
    }
  }
}

// The same for conv_transpose2d (conv2d_backward's passes on its input, and output_padding's
// smaller gradients), float32 against float64 (whose loops are the naive ones), forward and the
// three gradients, with per-axis strides and dilations.
TEST(ConvAlgorithms, RandomTransposedConvolutionsMatchFloat64) {
  SwitchesGuard guard;
  Drawn d{std::mt19937_64(2027)};
  for (int draw = 0; draw < 150; ++draw) {
    const int64_t groups = d.in(1, 2), C = groups * d.in(1, 3), O = groups * d.in(1, 3);
    const Int2 kernel{d.in(1, 4), d.in(1, 4)}, stride{d.in(1, 3), d.in(1, 3)}, dilation{d.in(1, 3), d.in(1, 3)};
    Int2 padding{}, output_padding{};
    for (int a = 0; a < 2; ++a) {
      padding[a] = d.in(0, dilation[a] * (kernel[a] - 1));
      output_padding[a] = d.in(0, std::max(stride[a], dilation[a]) - 1);
    }
    manual_seed(static_cast<uint64_t>(draw));
    const Tensor x = randn({d.in(1, 2), C, d.in(1, 6), d.in(1, 6)}, kFloat64);
    const Tensor w = randn({C, O / groups, kernel[0], kernel[1]}, kFloat64), b = randn({O}, kFloat64);
    auto run = [&](DType dt) {
      Tensor xr = x.to(dt).detach(), wr = w.to(dt).detach(), br = b.to(dt).detach();
      for (Tensor* t : {&xr, &wr, &br}) t->set_requires_grad(true);
      Tensor y;
      try {
        y = conv_transpose2d(xr, wr, br, stride, padding, output_padding, groups, dilation);
      } catch (const Error&) {
        return std::vector<Tensor>{};  // an empty output: refused alike in both dtypes
      }
      y.square().sum().backward();
      return std::vector<Tensor>{y, xr.grad(), wr.grad(), br.grad()};
    };
    const std::vector<Tensor> expected = run(kFloat64);
    auto pair = [](Int2 v) { return detail::concat(v[0], ",", v[1]); };
    SCOPED_TRACE(detail::concat("draw ", draw, ": x ", shape_str(x.sizes()), " w ", shape_str(w.sizes()), " stride ",
                                pair(stride), " padding ", pair(padding), " output_padding ", pair(output_padding),
                                " dilation ", pair(dilation), " groups ", groups));
    for (bc::ConvAlgorithm algorithm : {bc::ConvAlgorithm::direct, bc::ConvAlgorithm::im2col_gemm}) {
      bc::set_conv_algorithm(algorithm);
      const std::vector<Tensor> got = run(kFloat32);
      ASSERT_EQ(got.size(), expected.size());
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_TRUE(
            all_close(got[i].to(kFloat64), expected[i], 1e-4, 1e-4 * expected[i].abs().max().item<double>() + 1e-6))
            << (algorithm == bc::ConvAlgorithm::direct ? "direct" : "im2col") << ", output " << i;
    }
  }
}

// An empty batch has no input gradient to zero: memset was passed its null data pointer (UBSan,
// found by the random-arguments test). Its weight and bias gradients are zeros, as in PyTorch.
TEST(ConvAlgorithms, EmptyBatchBackwardGivesEmptyAndZeroGradients) {
  for (DType dt : {kFloat32, kBFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor x = zeros({0, 2, 4, 4}, dt), w = ones({3, 2, 3, 3}, dt), dy = zeros({0, 3, 2, 2}, dt);
    const auto [dx, dw, db] = native::conv2d_backward(x, w, dy, {1, 1}, {0, 0}, {1, 1}, 1, {true, true, true});
    EXPECT_EQ(dx.sizes(), (Shape{0, 2, 4, 4}));
    EXPECT_EQ(dw.sizes(), (Shape{3, 2, 3, 3}));
    EXPECT_EQ(dw.abs().sum().item<float>(), 0.0f);
    EXPECT_EQ(db.sizes(), (Shape{3}));
    EXPECT_EQ(db.abs().sum().item<float>(), 0.0f);
  }
}

}  // namespace
}  // namespace ember
