// The fused layer_norm, group_norm and batch_norm (Note [Fused layer_norm]): their statistics,
// their gradients in every dtype against loops in double, what their nodes keep, their
// independence of the thread count, and their errors. layer_norm's values over random shapes
// and views: Normalizations.RandomShapesViewsAndDimsMatchALoop (test_ops.cpp); first and second
// derivatives: the layer_norm, group_norm and batch_norm cases of test_gradcheck.cpp; PyTorch's
// values and gradients: test_reference_grads.cpp and test_nn_layers.cpp.
#include <cmath>
#include <limits>

#include "helpers.h"

namespace ember {
namespace {

namespace F = nn::functional;

// layer_norm of the rows of x [R, D] and its gradients for an output gradient dy, in double.
struct Reference {
  std::vector<double> y, mean, rstd, dx, dw, db;
  double dx_scale;  // the largest rstd |dy w|: what dx's terms are made of, though they may cancel
};
Reference reference(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b,
                    const std::vector<double>& dy, int64_t R, int64_t D, double eps) {
  Reference r;
  r.dx_scale = 0;
  r.y.resize(x.size()), r.dx.resize(x.size()), r.dw.assign(static_cast<size_t>(D), 0), r.db = r.dw;
  for (int64_t i = 0; i < R; ++i) {
    const double* row = x.data() + i * D;
    double mean = 0, var = 0;
    for (int64_t j = 0; j < D; ++j) mean += row[j] / double(D);
    for (int64_t j = 0; j < D; ++j) var += (row[j] - mean) * (row[j] - mean) / double(D);
    const double rstd = 1 / std::sqrt(var + eps);
    r.mean.push_back(mean), r.rstd.push_back(rstd);
    double sum_g = 0, sum_gx = 0;
    for (int64_t j = 0; j < D; ++j) {
      const double xhat = (row[j] - mean) * rstd, g = dy[i * D + j] * (w.empty() ? 1.0 : w[j]);
      r.y[i * D + j] = xhat * (w.empty() ? 1.0 : w[j]) + (b.empty() ? 0.0 : b[j]);
      sum_g += g, sum_gx += g * xhat;
      r.dx_scale = std::max(r.dx_scale, rstd * std::abs(g));
      r.dw[j] += dy[i * D + j] * xhat, r.db[j] += dy[i * D + j];
    }
    for (int64_t j = 0; j < D; ++j) {
      const double xhat = (row[j] - mean) * rstd, g = dy[i * D + j] * (w.empty() ? 1.0 : w[j]);
      r.dx[i * D + j] = rstd * (g - sum_g / double(D) - xhat * sum_gx / double(D));
    }
  }
  return r;
}

std::vector<double> values(const Tensor& t) { return t.to(kFloat64).contiguous().to_vector<double>(); }

// Every element within `rounding` of its own size plus `spread` of the largest, or of `scale`
// where that is larger (the sums' error).
::testing::AssertionResult near(const Tensor& got, const std::vector<double>& want, double rounding, double spread,
                                double scale = 0) {
  const auto g = values(got);
  if (g.size() != want.size()) return ::testing::AssertionFailure() << g.size() << " values, not " << want.size();
  double top = scale;
  for (double v : want) top = std::max(top, std::abs(v));
  for (size_t i = 0; i < g.size(); ++i)
    if (!(std::abs(g[i] - want[i]) <= rounding * std::abs(want[i]) + spread * top))
      return ::testing::AssertionFailure() << "element " << i << ": " << g[i] << " against " << want[i];
  return ::testing::AssertionSuccess();
}

TEST(LayerNorm, ValuesStatisticsAndGradientsMatchALoopInEveryDtype) {
  manual_seed(11);
  // odd widths reach the kernels' scalar tails; 300 rows make more runs than the backward's 64
  const std::vector<Shape> shapes{{3, 37}, {2, 3, 8}, {300, 5}, {4, 1}, {1, 131}};
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    const double rounding = dt == kBFloat16 ? 0x1p-8 : dt == kFloat16 ? 0x1p-11 : dt == kFloat32 ? 0x1p-24 : 0x1p-53;
    const double compute = dt == kFloat64 ? 0x1p-53 : 0x1p-24;
    const DType stats_dtype = dt == kFloat64 ? kFloat64 : kFloat32;
    for (const Shape& sizes : shapes)
      for (int affine = 0; affine < 4; ++affine) {  // neither, weight, bias, both
        const Shape normalized{sizes.back()};
        const int64_t D = sizes.back(), R = checked_numel(sizes, "test") / D;
        SCOPED_TRACE(detail::concat(dt, " ", shape_str(sizes), " affine ", affine));
        const Tensor x = (randn(sizes, kFloat64) * 2 + 3).to(dt).requires_grad_();
        const Tensor w = affine & 1 ? (randn(normalized, kFloat64) + 1).to(dt).requires_grad_() : Tensor();
        const Tensor b = affine & 2 ? randn(normalized, kFloat64).to(dt).requires_grad_() : Tensor();
        const Tensor dy = randn(sizes, kFloat64).to(dt);
        const Reference want = reference(values(x), w.defined() ? values(w) : std::vector<double>(),
                                         b.defined() ? values(b) : std::vector<double>(), values(dy), R, D, 1e-5);
        const auto [y, mean, rstd] = native_layer_norm(x, normalized, w, b, 1e-5);
        ASSERT_EQ(y.dtype(), dt);
        ASSERT_EQ(mean.dtype(), stats_dtype);
        Shape stats_sizes = sizes;
        stats_sizes.back() = 1;
        ASSERT_EQ(mean.sizes(), stats_sizes);
        ASSERT_EQ(rstd.sizes(), stats_sizes);
        // sums of D terms in the computing dtype, then the output's rounding
        const double spread = 8 * double(D + 4) * compute;
        EXPECT_TRUE(near(mean, want.mean, 0, spread));
        EXPECT_TRUE(near(rstd, want.rstd, spread, 0));
        EXPECT_TRUE(near(y, want.y, 2 * rounding, spread + 2 * rounding));
        y.backward(dy);
        // the gradients go through x̂ (rounded once) and the output's rounding; dx's terms cancel
        // where the row is one value; dw and db sum R rows
        EXPECT_TRUE(near(x.grad(), want.dx, 2 * rounding, 4 * spread + 4 * rounding, want.dx_scale));
        if (w.defined()) EXPECT_TRUE(near(w.grad(), want.dw, 2 * rounding, double(R) * spread + 2 * rounding));
        if (b.defined()) EXPECT_TRUE(near(b.grad(), want.db, 2 * rounding, double(R) * spread + 2 * rounding));
        if (w.defined()) ASSERT_EQ(w.grad().dtype(), dt);
      }
  }
}

// The node keeps the input itself and two values per row: the output and the statistics are
// all that a forward with grad allocates, in 16 bits no float32 copy of the input.
TEST(LayerNorm, AForwardWithGradAllocatesTheOutputAndTwoValuesPerRow) {
  for (DType dt : {kFloat32, kBFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor x = randn({64, 256}).to(dt).requires_grad_();
    const Tensor w = ones({256}).requires_grad_(), b = zeros({256}).requires_grad_();  // float32: master weights
    memory::empty_cache();
    const int64_t base = memory::stats().current_bytes;
    Tensor y = F::layer_norm(x, {256}, w, b);
    EXPECT_EQ(memory::stats().current_bytes - base, 64 * 256 * int64_t(element_size(dt)) + 2 * 64 * 4);
    y.sum().backward();
    y = Tensor();
    EXPECT_EQ(memory::stats().current_bytes - base, int64_t(x.grad().nbytes() + w.grad().nbytes() + b.grad().nbytes()))
        << "after backward only the gradients remain";
  }
}

// The weight's and bias's gradients sum the rows in fixed runs, added in order: the same bits
// with one thread or two.
// Wide rows too (20 000 values: 2^20 / 20 000 = 52 runs instead of 64, so that the partials stay
// within 2^20 values), and their gradients match float64's.
TEST(LayerNorm, GradientsDoNotDependOnTheThreadCount) {
  manual_seed(12);
  for (const Shape& sizes : {Shape{777, 45}, Shape{64, 20000}}) {
    SCOPED_TRACE(shape_str(sizes));
    const Shape normalized{sizes[1]};
    const Tensor x = randn(sizes), w = randn(normalized), b = randn(normalized), dy = randn(sizes);
    auto grads = [&](DType dt) {
      const Tensor xi = x.to(dt).detach().requires_grad_(), wi = w.to(dt).detach().requires_grad_(),
                   bi = b.to(dt).detach().requires_grad_();
      F::layer_norm(xi, normalized, wi, bi).backward(dy.to(dt));
      return std::vector<Tensor>{xi.grad(), wi.grad(), bi.grad()};
    };
    set_num_threads(1);
    const auto one = grads(kFloat32);
    set_num_threads(2);
    const auto two = grads(kFloat32);
    const auto exact = grads(kFloat64);
    for (size_t i = 0; i < one.size(); ++i) {
      EXPECT_TRUE(testing::all_close(one[i], two[i], 0, 0)) << i;
      EXPECT_TRUE(testing::all_close(two[i].to(kFloat64), exact[i], 1e-4, 1e-4)) << i;
    }
  }
}

TEST(LayerNorm, IntegersEmptyRowsAndBadArguments) {
  const Tensor ints = arange(6, kInt64).view({2, 3});
  const Tensor from_ints = F::layer_norm(ints, {3});
  EXPECT_EQ(from_ints.dtype(), kFloat32);
  EXPECT_TRUE(testing::all_close(from_ints, F::layer_norm(ints.to(kFloat32), {3}), 0, 0));
  // no rows: empty; empty rows: an empty output, NaN statistics (a mean of nothing)
  const Tensor no_rows = randn({0, 4}).requires_grad_();
  const Tensor w = ones({4}).requires_grad_();
  F::layer_norm(no_rows, {4}, w).sum().backward();
  EXPECT_EQ(no_rows.grad().sizes(), (Shape{0, 4}));
  EXPECT_TRUE(testing::all_close(w.grad(), zeros({4}), 0, 0));
  const auto [out, mean, rstd] = native_layer_norm(randn({3, 0}), {0}, Tensor(), Tensor(), 1e-5);
  EXPECT_EQ(out.sizes(), (Shape{3, 0}));
  EXPECT_TRUE(std::isnan(mean.view({-1}).to_vector<float>()[2]));
  const Tensor x = randn({2, 4});
  EXPECT_ERROR_CONTAINS(F::layer_norm(x, {3}),
                        "layer_norm: normalized_shape [3] must match the trailing dims of input [2, 4]");
  EXPECT_ERROR_CONTAINS(F::layer_norm(x, {}), "layer_norm: normalized_shape [] must match");
  EXPECT_ERROR_CONTAINS(F::layer_norm(x, {4}, ones({3})),
                        "layer_norm: weight of shape [3] must have normalized_shape [4]");
  EXPECT_ERROR_CONTAINS(F::layer_norm(x, {4}, Tensor(), ones({4}, kInt64)),
                        "layer_norm: bias must be floating point, got int64");
  EXPECT_ERROR_CONTAINS(native_layer_norm(Tensor(), {4}, Tensor(), Tensor(), 1e-5),
                        "layer_norm: the input tensor is undefined");
}

// group_norm of x [N, C, HW] in G groups and its gradients for dy, in double: a row is a sample's
// group, the affine per channel.
Reference group_reference(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b,
                          const std::vector<double>& dy, int64_t N, int64_t C, int64_t HW, int64_t G, double eps) {
  const int64_t Cg = C / G, D = Cg * HW;
  Reference r;
  r.dx_scale = 0;
  r.y.resize(x.size()), r.dx.resize(x.size()), r.dw.assign(static_cast<size_t>(C), 0), r.db = r.dw;
  for (int64_t row = 0; row < N * G; ++row) {
    const int64_t base = row * D, c0 = (row % G) * Cg;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < D; ++i) mean += x[base + i] / double(D);
    for (int64_t i = 0; i < D; ++i) var += (x[base + i] - mean) * (x[base + i] - mean) / double(D);
    const double rstd = 1 / std::sqrt(var + eps);
    r.mean.push_back(mean), r.rstd.push_back(rstd);
    double sum_g = 0, sum_gx = 0;
    for (int64_t i = 0; i < D; ++i) {
      const int64_t c = c0 + i / HW;
      const double xhat = (x[base + i] - mean) * rstd, wc = w.empty() ? 1.0 : w[c], g = dy[base + i] * wc;
      r.y[base + i] = xhat * wc + (b.empty() ? 0.0 : b[c]);
      sum_g += g, sum_gx += g * xhat;
      r.dx_scale = std::max(r.dx_scale, rstd * std::abs(g));
      r.dw[c] += dy[base + i] * xhat, r.db[c] += dy[base + i];
    }
    for (int64_t i = 0; i < D; ++i) {
      const double xhat = (x[base + i] - mean) * rstd, g = dy[base + i] * (w.empty() ? 1.0 : w[c0 + i / HW]);
      r.dx[base + i] = rstd * (g - sum_g / double(D) - xhat * sum_gx / double(D));
    }
  }
  return r;
}

TEST(GroupNorm, ValuesStatisticsAndGradientsMatchALoopInEveryDtype) {
  manual_seed(13);
  struct Case {
    Shape sizes;
    int64_t groups;
  };
  // 37 values per channel reach the scalar tails; one channel per group; one value per channel
  const std::vector<Case> cases{{{2, 6, 5}, 3}, {{1, 8, 37}, 2}, {{4, 6, 2, 3}, 6}, {{3, 4}, 2}, {{2, 4, 9}, 1}};
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    const double rounding = dt == kBFloat16 ? 0x1p-8 : dt == kFloat16 ? 0x1p-11 : dt == kFloat32 ? 0x1p-24 : 0x1p-53;
    const double compute = dt == kFloat64 ? 0x1p-53 : 0x1p-24;
    for (const Case& k : cases)
      for (int affine = 0; affine < 4; ++affine) {
        const int64_t N = k.sizes[0], C = k.sizes[1], HW = checked_numel(k.sizes, "test") / (N * C);
        SCOPED_TRACE(detail::concat(dt, " ", shape_str(k.sizes), " in ", k.groups, " groups, affine ", affine));
        const Tensor x = (randn(k.sizes, kFloat64) * 2 + 3).to(dt).requires_grad_();
        const Tensor w = affine & 1 ? (randn({C}, kFloat64) + 1).to(dt).requires_grad_() : Tensor();
        const Tensor b = affine & 2 ? randn({C}, kFloat64).to(dt).requires_grad_() : Tensor();
        const Tensor dy = randn(k.sizes, kFloat64).to(dt);
        const Reference want =
            group_reference(values(x), w.defined() ? values(w) : std::vector<double>(),
                            b.defined() ? values(b) : std::vector<double>(), values(dy), N, C, HW, k.groups, 1e-5);
        const auto [y, mean, rstd] = native_group_norm(x, w, b, k.groups, 1e-5);
        ASSERT_EQ(y.dtype(), dt);
        ASSERT_EQ(mean.dtype(), dt == kFloat64 ? kFloat64 : kFloat32);
        ASSERT_EQ(mean.sizes(), (Shape{N, k.groups}));
        const double spread = 8 * double(C / k.groups * HW + 4) * compute;
        EXPECT_TRUE(near(mean, want.mean, 0, spread));
        EXPECT_TRUE(near(rstd, want.rstd, spread, 0));
        EXPECT_TRUE(near(y, want.y, 2 * rounding, spread + 2 * rounding));
        y.backward(dy);
        EXPECT_TRUE(near(x.grad(), want.dx, 2 * rounding, 4 * spread + 4 * rounding, want.dx_scale));
        if (w.defined()) EXPECT_TRUE(near(w.grad(), want.dw, 2 * rounding, double(N) * spread + 2 * rounding));
        if (b.defined()) EXPECT_TRUE(near(b.grad(), want.db, 2 * rounding, double(N) * spread + 2 * rounding));
      }
  }
}

// As layer_norm's: the output and two values per group, no float32 copy of a 16-bit input; and
// the gradients are the same bits with one thread or two.
TEST(GroupNorm, AllocatesTheOutputAndTwoValuesPerGroupAndIgnoresTheThreadCount) {
  for (DType dt : {kFloat32, kBFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor x = randn({16, 32, 8, 8}).to(dt).requires_grad_();
    const Tensor w = ones({32}).requires_grad_(), b = zeros({32}).requires_grad_();
    memory::empty_cache();
    const int64_t base = memory::stats().current_bytes;
    Tensor y = F::group_norm(x, 4, w, b);
    EXPECT_EQ(memory::stats().current_bytes - base, 16 * 32 * 64 * int64_t(element_size(dt)) + 2 * 16 * 4 * 4);
  }
  manual_seed(14);
  const Tensor x = randn({33, 12, 50}), w = randn({12}), b = randn({12}), dy = randn({33, 12, 50});
  auto grads = [&] {
    const Tensor xi = x.detach().requires_grad_(), wi = w.detach().requires_grad_(), bi = b.detach().requires_grad_();
    F::group_norm(xi, 3, wi, bi).backward(dy);
    return std::vector<Tensor>{xi.grad(), wi.grad(), bi.grad()};
  };
  set_num_threads(1);
  const auto one = grads();
  set_num_threads(2);
  const auto two = grads();
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(testing::all_close(one[i], two[i], 0, 0)) << i;
}

TEST(GroupNorm, EmptyGroupsAndBadArguments) {
  const Tensor no_samples = randn({0, 4, 3}).requires_grad_(), w = ones({4}).requires_grad_();
  F::group_norm(no_samples, 2, w).sum().backward();
  EXPECT_EQ(no_samples.grad().sizes(), (Shape{0, 4, 3}));
  EXPECT_TRUE(testing::all_close(w.grad(), zeros({4}), 0, 0));
  const auto [out, mean, rstd] = native_group_norm(randn({2, 4, 0}), Tensor(), Tensor(), 2, 1e-5);
  EXPECT_EQ(out.sizes(), (Shape{2, 4, 0}));
  EXPECT_TRUE(std::isnan(mean.view({-1}).to_vector<float>()[3]));
  const Tensor x = randn({2, 6, 3});
  EXPECT_ERROR_CONTAINS(F::group_norm(x, 4), "group_norm: 6 channels are not divisible into 4 groups");
  EXPECT_ERROR_CONTAINS(F::group_norm(x, 0), "group_norm: 6 channels are not divisible into 0 groups");
  EXPECT_ERROR_CONTAINS(F::group_norm(randn({6}), 2), "group_norm: expects input [N, C, ...], got shape [6]");
  EXPECT_ERROR_CONTAINS(F::group_norm(x, 3, ones({3})), "group_norm: weight must have shape [6], got [3]");
  EXPECT_ERROR_CONTAINS(F::group_norm(x, 3, Tensor(), ones({6}, kInt32)),
                        "group_norm: bias must be floating point, got int32");
}

// batch_norm of x [N, C, HW] and its gradients for dy, in double: in training with the batch's
// statistics of each channel (over N and HW), else with the running mean rm and variance rv.
Reference batch_reference(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b,
                          const std::vector<double>& dy, int64_t N, int64_t C, int64_t HW, double eps, bool training,
                          const std::vector<double>& rm, const std::vector<double>& rv) {
  Reference r;
  r.dx_scale = 0;
  r.y.resize(x.size()), r.dx.resize(x.size()), r.dw.assign(static_cast<size_t>(C), 0), r.db = r.dw;
  const double count = double(N * HW);
  auto at = [&](int64_t n, int64_t c, int64_t j) { return static_cast<size_t>((n * C + c) * HW + j); };
  for (int64_t c = 0; c < C; ++c) {
    double mean = 0, var = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < HW; ++j) mean += x[at(n, c, j)] / count;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < HW; ++j) var += (x[at(n, c, j)] - mean) * (x[at(n, c, j)] - mean) / count;
    if (!training) mean = rm[c], var = rv[c];
    const double rstd = 1 / std::sqrt(var + eps), wc = w.empty() ? 1.0 : w[c];
    r.mean.push_back(mean), r.rstd.push_back(rstd);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < HW; ++j) {
        const double xhat = (x[at(n, c, j)] - mean) * rstd;
        r.y[at(n, c, j)] = xhat * wc + (b.empty() ? 0.0 : b[c]);
        r.dw[c] += dy[at(n, c, j)] * xhat, r.db[c] += dy[at(n, c, j)];
        r.dx_scale = std::max(r.dx_scale, rstd * std::abs(dy[at(n, c, j)] * wc));
      }
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < HW; ++j) {
        const double xhat = (x[at(n, c, j)] - mean) * rstd, g = dy[at(n, c, j)] * wc;
        r.dx[at(n, c, j)] = training ? rstd * (g - wc * r.db[c] / count - xhat * wc * r.dw[c] / count) : rstd * g;
      }
  }
  return r;
}

// Training and eval, every dtype and affine combination, the running statistics moved toward the
// batch's mean and unbiased variance. 70 samples make more runs than the CPU's 64 and the GPU's
// 32; [37, 3] and [300, 11] are BatchNorm1d's planes of one value, which the CPU reads along the
// rows (11 channels: 8 at a time, then a tail).
TEST(BatchNorm, ValuesStatisticsRunningStatisticsAndGradientsMatchALoopInEveryDtype) {
  manual_seed(15);
  const std::vector<Shape> shapes{{4, 3, 5}, {37, 3}, {300, 11}, {2, 3, 4, 5}, {70, 2, 3}, {1, 2, 37}};
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    const double rounding = dt == kBFloat16 ? 0x1p-8 : dt == kFloat16 ? 0x1p-11 : dt == kFloat32 ? 0x1p-24 : 0x1p-53;
    const double compute = dt == kFloat64 ? 0x1p-53 : 0x1p-24;
    const DType stats_dtype = dt == kFloat64 ? kFloat64 : kFloat32;
    for (const Shape& sizes : shapes)
      for (int training = 0; training < 2; ++training)
        for (int affine = 0; affine < 4; ++affine) {
          const int64_t N = sizes[0], C = sizes[1], HW = checked_numel(sizes, "test") / (N * C);
          SCOPED_TRACE(detail::concat(dt, " ", shape_str(sizes), training ? " training" : " eval", " affine ", affine));
          const Tensor x = (randn(sizes, kFloat64) * 2 + 3).to(dt).requires_grad_();
          const Tensor w = affine & 1 ? (randn({C}, kFloat64) + 1).to(dt).requires_grad_() : Tensor();
          const Tensor b = affine & 2 ? randn({C}, kFloat64).to(dt).requires_grad_() : Tensor();
          const Tensor dy = randn(sizes, kFloat64).to(dt);
          // running statistics of the computing dtype, as a module's buffers
          const Tensor rm = randn({C}, kFloat64).to(stats_dtype), rv = (rand({C}, kFloat64) + 0.5).to(stats_dtype);
          const std::vector<double> rm0 = values(rm), rv0 = values(rv);
          const Reference want = batch_reference(values(x), w.defined() ? values(w) : std::vector<double>(),
                                                 b.defined() ? values(b) : std::vector<double>(), values(dy), N, C, HW,
                                                 1e-5, training, rm0, rv0);
          const auto [y, mean, rstd] = native_batch_norm(x, w, b, rm, rv, training, 0.1, 1e-5);
          ASSERT_EQ(y.dtype(), dt);
          ASSERT_EQ(mean.dtype(), stats_dtype);
          ASSERT_EQ(mean.sizes(), (Shape{C}));
          ASSERT_EQ(rstd.sizes(), (Shape{C}));
          const double spread = 8 * double(N * HW + 4) * compute;
          EXPECT_TRUE(near(mean, want.mean, 0, spread));
          EXPECT_TRUE(near(rstd, want.rstd, spread, 0));
          EXPECT_TRUE(near(y, want.y, 2 * rounding, spread + 2 * rounding));
          std::vector<double> moved_mean = rm0, moved_var = rv0;
          if (training)
            for (int64_t c = 0; c < C; ++c) {
              const double unbiased = (1 / (want.rstd[c] * want.rstd[c]) - 1e-5) * double(N * HW) / double(N * HW - 1);
              moved_mean[c] = 0.9 * rm0[c] + 0.1 * want.mean[c];
              moved_var[c] = 0.9 * rv0[c] + 0.1 * unbiased;
            }
          EXPECT_TRUE(near(rm, moved_mean, 1e-6, spread));
          EXPECT_TRUE(near(rv, moved_var, 1e-5, spread));
          y.backward(dy);
          EXPECT_TRUE(near(x.grad(), want.dx, 2 * rounding, 4 * spread + 4 * rounding, want.dx_scale));
          if (w.defined()) EXPECT_TRUE(near(w.grad(), want.dw, 2 * rounding, 2 * spread + 2 * rounding));
          if (b.defined()) EXPECT_TRUE(near(b.grad(), want.db, 2 * rounding, 2 * spread + 2 * rounding));
          if (w.defined()) ASSERT_EQ(w.grad().dtype(), dt);
        }
  }
}

// The node keeps the input itself and two values per channel: a training forward with grad
// allocates only the output and those (the running statistics move in place), in 16 bits no
// float32 copy. The composed form kept the centered input, x̂ and the scaled output besides.
TEST(BatchNorm, AForwardWithGradAllocatesTheOutputAndTwoValuesPerChannel) {
  for (DType dt : {kFloat32, kBFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor x = randn({16, 32, 8, 8}).to(dt).requires_grad_();
    nn::BatchNorm2d bn(32);  // float32 parameters and running statistics
    memory::empty_cache();
    const int64_t base = memory::stats().current_bytes;
    Tensor y = bn(x);
    EXPECT_EQ(memory::stats().current_bytes - base, 16 * 32 * 64 * int64_t(element_size(dt)) + 2 * 32 * 4);
    y.sum().backward();
    y = Tensor();
    EXPECT_EQ(memory::stats().current_bytes - base,
              int64_t(x.grad().nbytes() + bn->weight.grad().nbytes() + bn->bias.grad().nbytes()))
        << "after backward only the gradients remain";
  }
}

// Each sample's plane is summed on its own and the planes added in fixed runs: the statistics,
// the running ones and all three gradients are the same bits with one thread or two, for planes
// of 50 values and of one (BatchNorm1d: runs of at most 256 rows, so 67 for 17 000 samples, and
// blocks of 256 channels, so three for 600); and float32's gradients match float64's.
TEST(BatchNorm, StatisticsAndGradientsDoNotDependOnTheThreadCount) {
  manual_seed(16);
  for (const Shape& sizes : {Shape{33, 12, 50}, Shape{1000, 24}, Shape{17000, 20}, Shape{40, 600}}) {
    SCOPED_TRACE(shape_str(sizes));
    const int64_t C = sizes[1];
    const Tensor x = randn(sizes) * 3 + 1, w = randn({C}), b = randn({C}), dy = randn(sizes);
    auto run = [&](DType dt) {
      const Tensor xi = x.to(dt).detach().requires_grad_(), wi = w.to(dt).detach().requires_grad_(),
                   bi = b.to(dt).detach().requires_grad_();
      Tensor rm = zeros({C}, dt), rv = ones({C}, dt);
      const auto [y, mean, rstd] = native_batch_norm(xi, wi, bi, rm, rv, true, 0.1, 1e-5);
      y.backward(dy.to(dt));
      return std::vector<Tensor>{y, mean, rstd, rm, rv, xi.grad(), wi.grad(), bi.grad()};
    };
    set_num_threads(1);
    const auto one = run(kFloat32);
    set_num_threads(2);
    const auto two = run(kFloat32);
    const auto exact = run(kFloat64);
    for (size_t i = 0; i < one.size(); ++i) {
      EXPECT_TRUE(testing::all_close(one[i], two[i], 0, 0)) << i;
      EXPECT_TRUE(testing::all_close(two[i].to(kFloat64), exact[i], 1e-4, 1e-4)) << i;
    }
  }
}

// The running statistics are moved in place: their versions say so, so that a backward that
// saved them refuses to run. Eval mode saves a copy of the running mean, not the buffer.
TEST(BatchNorm, RunningStatisticsMoveInPlaceAndEvalKeepsACopy) {
  Tensor rm = zeros({3}), rv = ones({3});
  const uint64_t v0 = rm.version(), w0 = rv.version();
  (void)F::batch_norm(randn({4, 3}), rm, rv, Tensor(), Tensor(), true);
  EXPECT_GT(rm.version(), v0);
  EXPECT_GT(rv.version(), w0);
  const Tensor x = randn({4, 3}).requires_grad_();
  const auto [y, mean, rstd] = native_batch_norm(x, Tensor(), Tensor(), rm, rv, false, 0.1, 1e-5);
  EXPECT_TRUE(testing::all_close(mean, rm, 0, 0));
  EXPECT_NE(mean.data_ptr(), rm.data_ptr());
  EXPECT_TRUE(testing::all_close(rstd, (rv + 1e-5).rsqrt(), 0, 0));
  // in eval the gradient is dy rstd: the statistics do not depend on x
  y.backward(ones({4, 3}));
  EXPECT_TRUE(testing::all_close(x.grad(), rstd.expand({4, 3}), 0, 0));
  // running statistics of another dtype than the input's keep theirs, moved in the wider one
  Tensor rm64 = zeros({3}, kFloat64), rv16 = ones({3}, kBFloat16);
  (void)F::batch_norm(full({2, 3}, 1.0), rm64, rv16, Tensor(), Tensor(), true, 0.5);
  EXPECT_EQ(rm64.dtype(), kFloat64);
  EXPECT_EQ(rv16.dtype(), kBFloat16);
  EXPECT_TRUE(testing::all_close(rm64, full({3}, 0.5, kFloat64), 0, 0));
  EXPECT_TRUE(testing::all_close(rv16.to(kFloat32), full({3}, 0.5), 0, 0));  // the unbiased variance is 0
}

TEST(BatchNorm, EmptyBatchesAndBadArguments) {
  // no samples: an empty output, the running statistics untouched (PyTorch's), zero gradients
  Tensor rm = full({4}, 2.0), rv = full({4}, 3.0);
  const Tensor no_samples = randn({0, 4, 3}).requires_grad_(), w = ones({4}).requires_grad_();
  F::batch_norm(no_samples, rm, rv, w, Tensor(), true).sum().backward();
  EXPECT_EQ(no_samples.grad().sizes(), (Shape{0, 4, 3}));
  EXPECT_TRUE(testing::all_close(w.grad(), zeros({4}), 0, 0));
  EXPECT_TRUE(testing::all_close(rm, full({4}, 2.0), 0, 0));
  EXPECT_TRUE(testing::all_close(rv, full({4}, 3.0), 0, 0));
  const auto [out, mean, rstd] =
      native_batch_norm(randn({2, 4, 0}), Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
  EXPECT_EQ(out.sizes(), (Shape{2, 4, 0}));
  EXPECT_TRUE(std::isnan(mean.to_vector<float>()[3]));
  EXPECT_EQ(F::batch_norm(arange(6, kInt64).view({3, 2}), Tensor(), Tensor(), Tensor(), Tensor(), true).dtype(),
            kFloat32);
  const Tensor x = randn({2, 3, 4});
  EXPECT_ERROR_CONTAINS(F::batch_norm(x, Tensor(), Tensor()),
                        "batch_norm: running_mean and running_var are needed in eval mode");
  EXPECT_ERROR_CONTAINS(F::batch_norm(x, zeros({3}), Tensor(), Tensor(), Tensor(), true),
                        "batch_norm: running_mean and running_var must be given together");
  EXPECT_ERROR_CONTAINS(F::batch_norm(x, zeros({4}), ones({4})),
                        "batch_norm: running_mean must have shape [3], got [4]");
  EXPECT_ERROR_CONTAINS(F::batch_norm(x, zeros({3}), ones({3}, kInt64)),
                        "batch_norm: running_var must be floating point, got int64");
  EXPECT_ERROR_CONTAINS(F::batch_norm(x, zeros({3}), ones({3}), ones({2})),
                        "batch_norm: weight must have shape [3], got [2]");
  EXPECT_ERROR_CONTAINS(F::batch_norm(randn({1, 3}), Tensor(), Tensor(), Tensor(), Tensor(), true),
                        "batch_norm: expected more than 1 value per channel when training, got input of shape [1, 3]");
  EXPECT_ERROR_CONTAINS(F::batch_norm(randn({3}), Tensor(), Tensor(), Tensor(), Tensor(), true),
                        "batch_norm: expects input [N, C, ...], got shape [3]");
  EXPECT_ERROR_CONTAINS(native_batch_norm(Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5),
                        "batch_norm: the input tensor is undefined");
  EXPECT_ERROR_CONTAINS(
      native::native_batch_norm_backward(x, x, zeros({2}), ones({3}), Tensor(), true, {true, false, false}),
      "batch_norm: statistics of shape [2] and dtype float32 for 3 channels of float32");
  EXPECT_ERROR_CONTAINS(
      native::native_batch_norm_backward(randn({2, 3}), x, zeros({3}), ones({3}), Tensor(), true, {true, false, false}),
      "batch_norm: gradient of shape [2, 3] for input of shape [2, 3, 4]");
}

}  // namespace
}  // namespace ember
