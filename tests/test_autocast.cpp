// Autocast (Note [Autocast]): the dtype each op list runs in, the weight-cast cache, nesting,
// threads, gradients of float32 leaves, and training under bfloat16 autocast that tracks float32.
#include <functional>
#include <thread>

#include "helpers.h"

namespace ember {
namespace {

using autocast::AutocastGuard;

// Counts the casts the autocast policy makes (calls of `to` one level below a user's op).
struct CastCounter : dispatch::Policy {
  int casts = 0;
  void before(dispatch::Call& call) override {
    if (call.op == dispatch::OpId::to && call.depth == 1) ++casts;
  }
};

TEST(Autocast, LowerPrecisionOpsRunInTheAutocastDtype) {
  const Tensor a = randn({4, 5}), b = randn({5, 3}), bias = randn({3}), w = randn({3, 5});
  const Tensor x = randn({2, 3, 6, 6}), k = randn({4, 3, 3, 3});
  AutocastGuard guard(kCPU);  // bfloat16 by default on the CPU
  EXPECT_EQ(mm(a, b).dtype(), kBFloat16);
  EXPECT_EQ(matmul(a, b).dtype(), kBFloat16);
  EXPECT_EQ(bmm(a.unsqueeze(0), b.unsqueeze(0)).dtype(), kBFloat16);
  EXPECT_EQ(addmm(bias, a, b).dtype(), kBFloat16);
  EXPECT_EQ(linear(a, w, bias).dtype(), kBFloat16);
  EXPECT_EQ(conv2d(x, k).dtype(), kBFloat16);
  EXPECT_TRUE(testing::all_close(mm(a, b).to(kFloat32), mm(a.to(kBFloat16), b.to(kBFloat16)).to(kFloat32)))
      << "the same as casting by hand";
}

TEST(Autocast, Float32OpsRunInFloat32AndTheRestKeepTheirDtype) {
  const Tensor h = randn({3, 4}).to(kBFloat16);
  AutocastGuard guard(kCPU);
  for (const auto& [name, out] : std::vector<std::pair<const char*, Tensor>>{{"exp", exp(h)},
                                                                             {"log", log(h.abs() + 1.0)},
                                                                             {"pow", pow(h, 2.0)},
                                                                             {"softmax", softmax(h, 1)},
                                                                             {"log_softmax", log_softmax(h, 1)},
                                                                             {"sum", h.sum()},
                                                                             {"mean", h.mean({1})},
                                                                             {"norm", h.norm()},
                                                                             {"logsumexp", h.logsumexp({1})},
                                                                             {"softplus", softplus(h)},
                                                                             {"log2", log2(h.abs() + 1.0)},
                                                                             {"log10", log10(h.abs() + 1.0)},
                                                                             {"tan", tan(h)},
                                                                             {"asin", asin(h * 0.1)},
                                                                             {"acos", acos(h * 0.1)},
                                                                             {"sinh", sinh(h)},
                                                                             {"cosh", cosh(h)},
                                                                             {"erfinv", erfinv(h * 0.1)},
                                                                             {"cumsum", h.cumsum(1)},
                                                                             {"cumprod", h.cumprod(1)}})
    EXPECT_EQ(out.dtype(), kFloat32) << name;
  EXPECT_EQ(relu(h).dtype(), kBFloat16) << "unlisted ops keep their input dtype";
  EXPECT_EQ(atan(h).dtype(), kBFloat16) << "atan is not on PyTorch's float32 list";
  EXPECT_EQ((h + randn({3, 4})).dtype(), kFloat32) << "binary ops promote to the widest input";
  EXPECT_EQ(cat({h, randn({3, 4})}).dtype(), kFloat32);
  const Tensor d = randn({3, 3}, kFloat64), i = ones({3, 3}, kInt64);
  EXPECT_EQ(mm(d, d).dtype(), kFloat64) << "float64 is left alone";
  EXPECT_EQ(mm(i, i).dtype(), kInt64) << "integers are left alone";
  EXPECT_EQ(autocast::policy_of(dispatch::OpId::mm), autocast::CastPolicy::lower_precision);
  EXPECT_EQ(autocast::policy_of(dispatch::OpId::add), autocast::CastPolicy::keep);
  EXPECT_EQ(autocast::policy_of(dispatch::OpId::native_layer_norm), autocast::CastPolicy::fp32);
  EXPECT_EQ(autocast::policy_of(dispatch::OpId::native_group_norm), autocast::CastPolicy::fp32);
}

// A model kept in 16 bits (module->to(kBFloat16), fp32 master weights) normalizes in float32
// and rounds once, as PyTorch's fused kernels accumulate in float: composed in 16 bits, the mean
// and the centered values were rounded themselves, and bfloat16 [8, 8.0625] normalized to
// [0, 1.41] instead of [-0.99, 0.99] (as PyTorch 1.13's CPU kernel still does; its CUDA one
// and later CPU ones do not). Gradients too: the float32 path's, rounded. Under autocast
// layer_norm's and group_norm's output is float32 (their float32 list), batch_norm's 16-bit.
TEST(Autocast, SixteenBitNormalizationsComputeInFloat32AndRoundOnce) {
  namespace F = nn::functional;
  for (DType dt : {kBFloat16, kFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor pair = tensor<float>({8.0f, 8.0625f}, Shape{1, 2});  // exact in both 16-bit types
    using Norm = std::function<Tensor(const Tensor&)>;
    for (const auto& [name, norm] : std::vector<std::pair<const char*, Norm>>{
             {"layer_norm", [](const Tensor& x) { return F::layer_norm(x, {2}); }},
             {"group_norm",
              [](const Tensor& x) {
                return F::group_norm(x.view({1, 2, 1}), 1).view({1, 2});
              }},
             {"batch_norm", [](const Tensor& x) {
                return F::batch_norm(x.view({2, 1}), Tensor(), Tensor(), Tensor(), Tensor(), true).view({1, 2});
              }}}) {
      SCOPED_TRACE(name);
      const Tensor x = pair.to(dt).requires_grad_(), x32 = pair.clone().requires_grad_();
      const Tensor y = norm(x), y32 = norm(x32);
      ASSERT_EQ(y.dtype(), dt);
      EXPECT_TRUE(testing::all_close(y, y32.to(dt), 0, 0));  // one rounding of float32's result
      EXPECT_NEAR(y.to(kFloat32).to_vector<float>()[0], -0.9949f, 0.01);
      const Tensor w = tensor<float>({1.5f, -0.25f}, Shape{1, 2});
      (y * w.to(dt)).sum().backward();
      (y32 * w).sum().backward();
      ASSERT_EQ(x.grad().dtype(), dt);
      EXPECT_TRUE(testing::all_close(x.grad().to(kFloat32), x32.grad(), 1e-2, 1e-2));
    }
    // Eval mode with float32 running statistics keeps the input's dtype (PyTorch's too).
    const Tensor eval = F::batch_norm(pair.to(dt).view({2, 1}), zeros({1}), ones({1}));
    EXPECT_EQ(eval.dtype(), dt);
    AutocastGuard guard(kCPU, dt);
    EXPECT_EQ(F::layer_norm(pair.to(dt), {2}).dtype(), kFloat32);
    EXPECT_EQ(F::group_norm(pair.to(dt).view({1, 2, 1}), 1).dtype(), kFloat32);
    // batch_norm is on no list, as in PyTorch: 16 bits in, 16 bits out, its sums in float32
    EXPECT_EQ(F::batch_norm(pair.to(dt).view({2, 1}), Tensor(), Tensor(), ones({1}), zeros({1}), true).dtype(), dt);
  }
}

TEST(Autocast, OnCudaFloat16ByDefaultAndTheCpuUntouched) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const Tensor a = randn({8, 8}), g = a.cuda();
  AutocastGuard guard(kCUDA);
  EXPECT_EQ(mm(g, g).dtype(), kFloat16);
  EXPECT_EQ(softmax(mm(g, g), 1).dtype(), kFloat32);
  EXPECT_EQ(mm(a, a).dtype(), kFloat32) << "CPU tensors under CUDA autocast";
  EXPECT_TRUE(
      testing::all_close(mm(g, g).cpu().to(kFloat32), mm(a.to(kFloat16), a.to(kFloat16)).to(kFloat32), 2e-3, 2e-3));
}

TEST(Autocast, Float16OnTheCpuToo) {
  AutocastGuard guard(kCPU, kFloat16);
  EXPECT_EQ(mm(randn({2, 2}), randn({2, 2})).dtype(), kFloat16);
  EXPECT_ERROR_CONTAINS(AutocastGuard(kCPU, kFloat64), "autocast: the dtype must be float16 or bfloat16");
}

TEST(Autocast, Float32LeavesGetFloat32Gradients) {
  manual_seed(0);
  nn::Linear fc(5, 3);
  const Tensor x = randn({4, 5});
  Tensor y;
  {
    AutocastGuard guard(kCPU);
    y = fc(x);
    EXPECT_EQ(y.dtype(), kBFloat16);
    y.to(kFloat32).pow(2.0).sum().backward();  // backward inside the region: no autocast there
  }
  ASSERT_TRUE(fc->weight.grad().defined());
  EXPECT_EQ(fc->weight.grad().dtype(), kFloat32);
  EXPECT_EQ(fc->bias.grad().dtype(), kFloat32);
  // The same gradient as the same computation written with explicit casts.
  const Tensor w = fc->weight.detach().requires_grad_(), b = fc->bias.detach().requires_grad_();
  linear(x.to(kBFloat16), w.to(kBFloat16), b.to(kBFloat16)).to(kFloat32).pow(2.0).sum().backward();
  EXPECT_TRUE(testing::all_close(fc->weight.grad(), w.grad(), 0, 0));
  EXPECT_TRUE(testing::all_close(fc->bias.grad(), b.grad(), 0, 0));
}

TEST(Autocast, EachWeightIsCastOncePerRegion) {
  nn::Sequential mlp(nn::Linear(8, 16), nn::ReLU(), nn::Linear(16, 4));
  const Tensor x = randn({2, 8});
  CastCounter counter;
  dispatch::PolicyGuard outer(counter);
  {
    AutocastGuard guard(kCPU);
    mlp(x);
    EXPECT_EQ(counter.casts, 5) << "two weights, two biases and the input (the hidden activation is bfloat16 already)";
    EXPECT_EQ(autocast::cached_casts(), 4);
    mlp(x);
    EXPECT_EQ(counter.casts, 6) << "the second forward casts only the input";
    {
      NoGradGuard no_grad;  // an in-place update makes the cached cast stale
      mlp->parameters()[0].mul_(2.0);
    }
    mlp(x);
    EXPECT_EQ(counter.casts, 8) << "the input and the changed weight";
  }
  EXPECT_EQ(autocast::cached_casts(), 0) << "the cache ends with the outermost region";
}

// Micro-batches inside one region (gradient accumulation, pipeline stages): each forward reuses
// the cached casts, and each backward runs through them again (a cast saves no tensor, so its
// node is not released). A bug fix: the second backward used to fail as "a second time".
TEST(Autocast, SeveralBackwardsInOneRegionShareTheCachedCasts) {
  nn::Linear linear(8, 4);
  const Tensor x = randn({2, 8});
  {
    AutocastGuard guard(kCPU);
    linear(x).to(kFloat32).sum().backward();
    const Tensor once = linear->weight.grad().clone();
    linear(x).to(kFloat32).sum().backward();
    EXPECT_EQ(autocast::cached_casts(), 2);
    EXPECT_TRUE(testing::all_close(linear->weight.grad(), once * 2.0, 0, 0));
  }
}

TEST(Autocast, GuardsNestAndRestore) {
  const Tensor a = randn({2, 2});
  EXPECT_FALSE(autocast::is_enabled(kCPU));
  AutocastGuard outer(kCPU);
  EXPECT_EQ(mm(a, a).dtype(), kBFloat16);
  {
    AutocastGuard off(kCPU, std::nullopt, /*enabled=*/false);
    EXPECT_FALSE(autocast::is_enabled(kCPU));
    EXPECT_EQ(mm(a, a).dtype(), kFloat32);
    AutocastGuard half(kCPU, kFloat16);
    EXPECT_EQ(mm(a, a).dtype(), kFloat16);
  }
  EXPECT_EQ(mm(a, a).dtype(), kBFloat16);
  EXPECT_EQ(autocast::get_autocast_dtype(kCPU), kBFloat16);
  EXPECT_FALSE(autocast::is_enabled(kCUDA)) << "one state per device type";
}

TEST(Autocast, ADisabledGuardInstallsNothing) {
  struct Seen : dispatch::Policy {
    int calls = 0;
    void before(dispatch::Call&) override { ++calls; }
  };
  AutocastGuard off(kCPU, std::nullopt, /*enabled=*/false);
  const Tensor a = randn({2, 2});
  EXPECT_EQ(mm(a, a).dtype(), kFloat32);
  {
    AutocastGuard on(kCPU);  // an enabled guard inside a disabled one installs the policy
    EXPECT_EQ(mm(a, a).dtype(), kBFloat16);
  }
  Seen seen;
  dispatch::PolicyGuard guard(seen);
  EXPECT_EQ(mm(a, a).dtype(), kFloat32);
  EXPECT_EQ(seen.calls, 1) << "only the test's own policy ran: a disabled guard costs nothing per op";
}

TEST(Autocast, BelongsToItsThread) {
  AutocastGuard guard(kCPU);
  DType other = kBool;
  std::thread t([&] { other = mm(randn({2, 2}), randn({2, 2})).dtype(); });
  t.join();
  EXPECT_EQ(other, kFloat32);
}

// 20 SGD steps of a model in float32 and, from the same weights, under bfloat16 autocast.
template <class MakeModel>
std::pair<float, float> losses_after_20_steps(MakeModel make, const Tensor& x, const Tensor& y) {
  float last[2];
  for (int amp = 0; amp < 2; ++amp) {
    manual_seed(7);
    auto model = make();
    optim::SGD opt(model->parameters(), optim::SGDOptions(0.05).momentum(0.9));
    for (int step = 0; step < 20; ++step) {
      opt.zero_grad();
      Tensor loss;
      {
        std::optional<AutocastGuard> guard;
        if (amp) guard.emplace(kCPU);
        loss = nn::functional::cross_entropy(model(x), y);
      }
      EXPECT_EQ(loss.dtype(), kFloat32) << "cross_entropy computes in float32 under autocast";
      loss.backward();
      opt.step();
      last[amp] = loss.item<float>();
    }
  }
  return {last[0], last[1]};
}

TEST(Autocast, TrainingUnderBfloat16TracksFloat32) {
  manual_seed(1);
  const Tensor x = randn({32, 20}), y = randint(0, 4, {32});
  const auto [mlp32, mlp16] =
      losses_after_20_steps([] { return nn::Sequential(nn::Linear(20, 64), nn::ReLU(), nn::Linear(64, 4)); }, x, y);
  EXPECT_NEAR(mlp16, mlp32, 1e-2 * mlp32) << "MLP";
  const Tensor img = randn({16, 1, 12, 12}), label = randint(0, 3, {16});
  const auto [cnn32, cnn16] = losses_after_20_steps(
      [] {
        return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 8, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2),
                              nn::Flatten(), nn::Linear(8 * 6 * 6, 3));
      },
      img, label);
  EXPECT_NEAR(cnn16, cnn32, 1e-2 * cnn32) << "CNN";
}

}  // namespace
}  // namespace ember
