// GradScaler (Note [GradScaler]) against PyTorch's algorithm (REFERENCE-pytorch.md §1, the
// scenarios of PyTorch's own tests): the scale's growth and backoff, skipped steps that leave
// everything untouched, the stage errors, accumulation, clipping, several optimizers, the state
// dict, and float16 gradients that underflow without the scaler and survive with it.
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "ember/tensor/cpu/cpu_backend.h"
#include "helpers.h"

namespace ember {
namespace {

using amp::GradScaler;
using amp::GradScalerOptions;

// A one-parameter problem whose gradient is `g` (loss = sum(w * g)), scaled by the scaler.
void backward_with_gradient(GradScaler& scaler, Tensor w, const Tensor& g) {
  w.mutable_grad() = Tensor();
  scaler.scale((w * g).sum()).backward();
}

TEST(GradScaler, ScaleGrowsAndBacksOffAsPyTorch) {
  // PyTorch's test_grad_scaling_update_scale: scale 4, growth 2, backoff 0.25, interval 2.
  GradScaler scaler(GradScalerOptions().init_scale(4).growth_factor(2).backoff_factor(0.25).growth_interval(2));
  const Tensor w = ones({3}).requires_grad_();
  optim::SGD opt({w}, optim::SGDOptions(0.0));
  const std::vector<std::pair<double, int64_t>> expected = {{4, 1}, {8, 0}, {2, 0}};
  for (size_t i = 0; i < expected.size(); ++i) {
    const float bad = i == 2 ? std::numeric_limits<float>::infinity() : 1.0f;
    backward_with_gradient(scaler, w, tensor<float>({1, bad, 1}));
    scaler.step(opt);
    scaler.update();
    EXPECT_EQ(scaler.skipped_steps(), i == 2 ? 1 : 0) << "iteration " << i;
    EXPECT_EQ(scaler.get_scale(), expected[i].first) << "iteration " << i;
    EXPECT_EQ(scaler.growth_tracker(), expected[i].second) << "iteration " << i;
  }
}

TEST(GradScaler, UnscaleDividesTheGradientsInPlace) {
  GradScaler scaler(GradScalerOptions().init_scale(4));
  const Tensor w = ones({3}).requires_grad_();
  optim::SGD opt({w}, optim::SGDOptions(0.1));
  backward_with_gradient(scaler, w, tensor<float>({4, 8, 16}));
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{16, 32, 64}));
  scaler.unscale_(opt);
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{4, 8, 16}));  // inv 0.25, as PyTorch's test
  EXPECT_ERROR_CONTAINS(scaler.unscale_(opt), "unscale_() has already been called on this optimizer");
  scaler.step(opt);  // no second unscale
  EXPECT_TRUE(testing::all_close(w.detach(), tensor<float>({0.6f, 0.2f, -0.6f})));
  EXPECT_ERROR_CONTAINS(scaler.unscale_(opt), "unscale_() is being called after step()");
  EXPECT_ERROR_CONTAINS(scaler.step(opt), "step() has already been called since the last update()");
  scaler.update();
}

TEST(GradScaler, ASkippedStepLeavesParametersAndStateBitIdentical) {
  manual_seed(0);
  nn::Linear fc(4, 3);
  optim::AdamW opt(fc->parameters(), optim::AdamWOptions(1e-2));
  GradScaler scaler;
  const Tensor x = randn({8, 4});
  auto iteration = [&](bool poison) {
    opt.zero_grad();
    scaler.scale(fc(x).pow(2.0).mean()).backward();
    if (poison) {
      NoGradGuard no_grad;
      fc->weight.mutable_grad().view({-1}).narrow(0, 5, 1).fill_(std::nan(""));
    }
    const int64_t skipped = scaler.skipped_steps();
    scaler.step(opt);
    scaler.update();
    return scaler.skipped_steps() == skipped;  // stepped
  };
  ASSERT_TRUE(iteration(false));
  const StateDict params = fc->state_dict();
  std::vector<Tensor> before;
  for (const auto& item : params) before.push_back(item.value().clone());
  const optim::OptimizerState state = opt.state_dict();
  std::vector<Tensor> state_before;
  for (const auto& item : state.tensors) state_before.push_back(item.value().clone());
  const double scale = scaler.get_scale();

  EXPECT_FALSE(iteration(true));
  size_t i = 0;
  for (const auto& item : fc->state_dict())
    EXPECT_TRUE(testing::all_close(item.value(), before[i++], 0, 0)) << item.key();
  i = 0;
  const optim::OptimizerState after = opt.state_dict();
  for (const auto& item : after.tensors)
    EXPECT_TRUE(testing::all_close(item.value(), state_before[i++], 0, 0)) << item.key();
  EXPECT_EQ(after.metadata, state.metadata) << "the step counts did not move either";
  EXPECT_EQ(scaler.get_scale(), scale * 0.5);
}

// PyTorch's _run_scaling_case: init 128, growth 2, interval 1, four iterations with an inf
// injected in one; the parameters equal a float32 run that skips the same step. Injected in the
// first iteration too: a skipped first step must not count as one (SGD's momentum buffer starts
// as the gradient on the first real step; Adam's bias corrections count real steps only).
TEST(GradScaler, MatchesAnUnscaledRunThatSkipsTheSameStep) {
  const Tensor x = randn({16, 6}), y = randn({16, 2});
  using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;
  const std::vector<std::pair<const char*, MakeOptimizer>> optimizers = {
      {"SGD",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::SGD>(std::move(p), optim::SGDOptions(0.1).momentum(0.9).dampening(0.5));
       }},
      {"Adam",
       [](std::vector<Tensor> p) { return std::make_unique<optim::Adam>(std::move(p), optim::AdamOptions(0.01)); }},
      {"RMSprop",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::RMSprop>(std::move(p), optim::RMSpropOptions(0.01).momentum(0.5));
       }},
      {"Adagrad", [](std::vector<Tensor> p) {
         return std::make_unique<optim::Adagrad>(std::move(p), optim::AdagradOptions(0.05).lr_decay(0.1));
       }}};
  for (const auto& [name, make] : optimizers)
    for (int bad_iteration : {0, 1}) {
      std::vector<Tensor> final_params[2];
      for (int scaled = 0; scaled < 2; ++scaled) {
        manual_seed(3);
        nn::Sequential net(nn::Linear(6, 8), nn::Tanh(), nn::Linear(8, 2));
        const auto opt = make(net->parameters());
        GradScaler scaler(GradScalerOptions().init_scale(128).growth_factor(2).growth_interval(1).enabled(scaled == 1));
        for (int it = 0; it < 4; ++it) {
          opt->zero_grad();
          scaler.scale(nn::functional::mse_loss(net(x), y)).backward();
          if (it == bad_iteration) {
            if (!scaled) continue;  // the unscaled run simply skips this step
            NoGradGuard no_grad;
            net->parameters()[0].mutable_grad().view({-1}).narrow(0, 0, 1).fill_(
                std::numeric_limits<double>::infinity());
          }
          scaler.step(*opt);
          scaler.update();
        }
        if (scaled) {
          EXPECT_EQ(scaler.get_scale(), 512.0);  // one backoff, three growths
          EXPECT_EQ(scaler.skipped_steps(), 1);
        }
        for (const Tensor& p : net->parameters()) final_params[scaled].push_back(p.detach().clone());
      }
      for (size_t i = 0; i < final_params[0].size(); ++i)
        EXPECT_TRUE(testing::all_close(final_params[1][i], final_params[0][i], 0, 0))
            << name << ", inf in iteration " << bad_iteration << ", parameter " << i;
    }
}

// A stand-in for a GPU in host memory: the CPU's kernels, with every copy from "the device" to
// the host counted. On a real GPU each such copy is a wait for the device.
class HostDevice final : public cpu::CpuBackend {
 public:
  const char* name() const override { return "host-device"; }
  void copy_across(const Tensor& src, const Tensor& dst, bool) override {
    if (dst.device().is_cpu()) ++reads;
    std::memcpy(dst.data_ptr(), src.data_ptr(), dst.nbytes());
  }
  int reads = 0;
};

class DeviceScope {
 public:
  explicit DeviceScope(Backend& b) : previous_(backend(kCUDA)) { register_backend(kCUDA, b); }
  ~DeviceScope() { register_backend(kCUDA, previous_); }

 private:
  Backend& previous_;
};

// An optimizer without a fused kernel: the scaler reads the inf flag on the host for it.
class PlainSGD final : public optim::Optimizer {
 public:
  explicit PlainSGD(std::vector<Tensor> params)
      : Optimizer("PlainSGD", {optim::ParamGroup(std::move(params))}, optim::SGDOptions(0.1).clone()) {}
  Tensor step(const std::function<Tensor()>& = nullptr) override {
    NoGradGuard no_grad;
    for (Tensor& p : param_groups()[0].params()) p.sub_(p.grad() * 0.1);
    return Tensor();
  }
};

// The promise of Note [Fused optimizer steps]: unscale_, step and update with an overflow in
// the middle, and not one read from the device; the parameters still equal a run on the CPU.
TEST(GradScaler, AnIterationNeverWaitsForTheDevice) {
  for (const char* name : {"SGD", "AdamW", "RMSprop", "Adagrad", "PlainSGD"}) {
    std::vector<Tensor> final_params[2];
    for (int on_device = 0; on_device < 2; ++on_device) {
      HostDevice host_device;
      std::optional<DeviceScope> scope;
      if (on_device) scope.emplace(host_device);
      const Device device = on_device ? Device(kCUDA) : Device(kCPU);
      manual_seed(11);
      nn::Linear fc(4, 3);
      fc->to(device);
      const Tensor x = randn({8, 4}).to(device);
      std::unique_ptr<optim::Optimizer> opt;
      const std::string n = name;
      if (n == "SGD") opt = std::make_unique<optim::SGD>(fc->parameters(), optim::SGDOptions(0.1).momentum(0.9));
      if (n == "AdamW") opt = std::make_unique<optim::AdamW>(fc->parameters(), optim::AdamWOptions(0.01));
      if (n == "RMSprop") opt = std::make_unique<optim::RMSprop>(fc->parameters(), optim::RMSpropOptions(0.01));
      if (n == "Adagrad") opt = std::make_unique<optim::Adagrad>(fc->parameters(), optim::AdagradOptions(0.05));
      if (n == "PlainSGD") opt = std::make_unique<PlainSGD>(fc->parameters());
      GradScaler scaler(GradScalerOptions().growth_interval(2));
      for (int it = 0; it < 5; ++it) {
        opt->zero_grad();
        scaler.scale(fc(x).pow(2.0).mean()).backward();
        if (it == 2) {
          NoGradGuard no_grad;
          fc->weight.mutable_grad().view({-1}).narrow(0, 1, 1).fill_(std::numeric_limits<double>::infinity());
        }
        const int reads = host_device.reads;
        scaler.unscale_(*opt);
        scaler.step(*opt);
        scaler.update();
        if (on_device && n != "PlainSGD") EXPECT_EQ(host_device.reads, reads) << name << ", iteration " << it;
        if (on_device && n == "PlainSGD") EXPECT_EQ(host_device.reads, reads + 1) << "the one read of the inf flag";
      }
      EXPECT_EQ(scaler.skipped_steps(), 1) << name;
      EXPECT_EQ(scaler.get_scale(), 65536.0 * 2) << name;  // grown after 1, backed off at 2, grown after 4
      for (const Tensor& p : fc->parameters()) final_params[on_device].push_back(p.detach().cpu());
    }
    for (size_t i = 0; i < final_params[0].size(); ++i)
      EXPECT_TRUE(testing::all_close(final_params[1][i], final_params[0][i], 0, 0)) << name << ", parameter " << i;
  }
}

TEST(GradScaler, StepUnlessChecksItsFlag) {
  const Tensor w = ones({2}).requires_grad_();
  optim::SGD opt({w}, optim::SGDOptions(0.1));
  EXPECT_ERROR_CONTAINS(opt.step_unless(Tensor()), "SGD.step_unless: found_inf must be one float32");
  EXPECT_ERROR_CONTAINS(opt.step_unless(zeros({2})), "got [2] float32");
}

TEST(GradScaler, AccumulationClippingAndSeveralOptimizers) {
  manual_seed(5);
  const Tensor x = randn({8, 3}), y = randn({8, 1});
  // Two micro-batches, scale(loss / 2) each, one unscale, clipping the true gradients.
  std::vector<Tensor> result[2];
  for (int scaled = 0; scaled < 2; ++scaled) {
    manual_seed(6);
    nn::Linear fc(3, 1);
    optim::SGD opt(fc->parameters(), optim::SGDOptions(0.5));
    GradScaler scaler(GradScalerOptions().init_scale(1024).enabled(scaled == 1));
    opt.zero_grad();
    for (int micro = 0; micro < 2; ++micro)
      scaler.scale(nn::functional::mse_loss(fc(x.narrow(0, 4 * micro, 4)), y.narrow(0, 4 * micro, 4)) / 2.0).backward();
    scaler.unscale_(opt);
    nn::utils::clip_grad_norm_(fc->parameters(), 0.2);
    scaler.step(opt);
    scaler.update();
    for (const Tensor& p : fc->parameters()) result[scaled].push_back(p.detach().clone());
  }
  for (size_t i = 0; i < result[0].size(); ++i) EXPECT_TRUE(testing::all_close(result[1][i], result[0][i], 1e-6, 1e-7));

  // Two optimizers: each steps on its own inf check; update() backs off if either found one.
  const Tensor a = ones({2}).requires_grad_(), b = ones({2}).requires_grad_();
  optim::SGD opt_a({a}, optim::SGDOptions(0.1)), opt_b({b}, optim::SGDOptions(0.1));
  GradScaler scaler(GradScalerOptions().init_scale(8));
  scaler.scale((a * tensor<float>({1, 1})).sum() + (b * tensor<float>({1, std::nanf("")})).sum()).backward();
  scaler.step(opt_a);
  scaler.step(opt_b);
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 4.0);
  EXPECT_EQ(scaler.skipped_steps(), 1);
  EXPECT_EQ(a.detach().to_vector<float>(), (std::vector<float>{0.9f, 0.9f}));
  EXPECT_EQ(b.detach().to_vector<float>(), (std::vector<float>{1, 1}));
}

TEST(GradScaler, StateDictDisabledAndBadUse) {
  GradScaler scaler(GradScalerOptions().init_scale(32).growth_interval(3));
  const Tensor w = ones({1}).requires_grad_();
  optim::SGD opt({w}, optim::SGDOptions(0.1));
  backward_with_gradient(scaler, w, ones({1}));
  scaler.step(opt);
  scaler.update();
  const auto state = scaler.state_dict();
  EXPECT_EQ(state.at("scale"), 32.0);
  EXPECT_EQ(state.at("_growth_tracker"), 1.0);
  EXPECT_EQ(state.at("growth_interval"), 3.0);
  GradScaler restored;
  restored.load_state_dict(state);
  EXPECT_EQ(restored.get_scale(), 32.0);
  EXPECT_EQ(restored.growth_tracker(), 1);
  EXPECT_EQ(restored.state_dict(), state);
  EXPECT_ERROR_CONTAINS(restored.load_state_dict({{"scale", 2.0}}), "the state has no 'growth_factor'");

  GradScaler off(GradScalerOptions().enabled(false));
  const Tensor loss = (w * 3.0).sum();
  EXPECT_TRUE(off.scale(loss).is_same(loss));
  EXPECT_EQ(off.get_scale(), 1.0);
  EXPECT_TRUE(off.state_dict().empty());
  EXPECT_ERROR_CONTAINS(off.load_state_dict(state), "this scaler is disabled");

  EXPECT_ERROR_CONTAINS(GradScaler(GradScalerOptions().growth_factor(1.0)), "the growth factor must be > 1.0");
  EXPECT_ERROR_CONTAINS(GradScaler(GradScalerOptions().backoff_factor(1.5)), "the backoff factor must be in (0, 1)");
  GradScaler fresh;
  EXPECT_ERROR_CONTAINS(fresh.unscale_(opt), "no loss was scaled");
  EXPECT_ERROR_CONTAINS(fresh.update(), "no loss was scaled");
}

TEST(GradScaler, AHostileStateIsRefusedBeforeAnythingChanges) {
  // A checkpoint's scaler state arrives as doubles: NaN, huge or fractional counts used to be cast
  // to integers unchecked (undefined behaviour), and an infinite scale was accepted.
  GradScaler scaler(GradScalerOptions().init_scale(8).growth_interval(4));
  const std::map<std::string, double> good = {{"scale", 2.0},
                                              {"growth_factor", 2.0},
                                              {"backoff_factor", 0.5},
                                              {"growth_interval", 4.0},
                                              {"_growth_tracker", 3.0}};
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::vector<std::tuple<std::string, double, std::string>> bad = {
      {"_growth_tracker", nan, "'_growth_tracker' must be a whole number in [0, 3]"},
      {"_growth_tracker", 4.0, "'_growth_tracker' must be a whole number in [0, 3]"},
      {"_growth_tracker", -1.0, "'_growth_tracker' must be a whole number in [0, 3]"},
      {"_growth_tracker", 1.5, "'_growth_tracker' must be a whole number in [0, 3]"},
      {"growth_interval", 1e300, "'growth_interval' must be a whole number in [1, 2147483647]"},
      {"growth_interval", nan, "'growth_interval' must be a whole number in [1, 2147483647]"},
      {"growth_interval", 0.0, "'growth_interval' must be a whole number in [1, 2147483647]"},
      {"scale", inf, "init_scale must be positive and finite"},
      {"scale", nan, "init_scale must be positive and finite"},
      {"growth_factor", inf, "the growth factor must be > 1.0 and finite"},
      {"backoff_factor", nan, "the backoff factor must be in (0, 1)"},
  };
  for (const auto& [key, v, message] : bad) {
    auto state = good;
    state[key] = v;
    SCOPED_TRACE(key + " = " + std::to_string(v));
    EXPECT_ERROR_CONTAINS(scaler.load_state_dict(state), message);
    EXPECT_EQ(scaler.get_scale(), 8.0) << "a refused state changed the scaler";
    EXPECT_EQ(scaler.options().growth_interval(), 4);
  }
  scaler.load_state_dict(good);
  EXPECT_EQ(scaler.get_scale(), 2.0);
  const Tensor w = ones({1}).requires_grad_();
  optim::SGD opt({w}, optim::SGDOptions(0.1));
  backward_with_gradient(scaler, w, ones({1}));
  scaler.step(opt);
  for (double v : {0.0, -1.0, nan, inf})
    EXPECT_ERROR_CONTAINS(scaler.update(v), "GradScaler.update: new_scale must be positive and finite");
  scaler.update(4.0);
  EXPECT_EQ(scaler.get_scale(), 4.0);
  EXPECT_EQ(scaler.growth_tracker(), 3);
  EXPECT_ERROR_CONTAINS(GradScaler(GradScalerOptions().growth_interval(int64_t{1} << 31)),
                        "growth_interval must be in [1, 2147483647]");
}

TEST(GradScaler, TheScaleDoesNotGrowPastFloatRange) {
  // PyTorch's test_grad_scale_will_not_overflow: a growth that would overflow is not taken.
  GradScaler scaler(GradScalerOptions().init_scale(1e38).growth_factor(16).growth_interval(1));
  const Tensor w = ones({1}).requires_grad_();
  optim::SGD opt({w}, optim::SGDOptions(0.0));
  backward_with_gradient(scaler, w, tensor<float>({1e-30f}));
  scaler.step(opt);
  scaler.update();
  EXPECT_TRUE(std::isfinite(scaler.get_scale()));
  EXPECT_EQ(scaler.get_scale(), static_cast<double>(1e38f));
}

// The native op takes any int32 tracker: INT32_MAX + 1 overflowed (UBSan, found by the
// random-arguments test at 30000 draws); it wraps as PyTorch's int32 does, and the scale stays.
TEST(GradScaler, TheNativeUpdateWrapsATrackerAtInt32Max) {
  const Tensor scale = full({}, 8.0, TensorOptions(kFloat32)), found_inf = zeros({}, TensorOptions(kFloat32));
  const Tensor tracker = full({}, std::numeric_limits<int32_t>::max(), TensorOptions(kInt32));
  native::amp_update_scale_(scale, tracker, found_inf, 2.0, 0.5, 2000);
  EXPECT_EQ(tracker.item<int64_t>(), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(scale.item<float>(), 8.0f);
  native::amp_update_scale_(scale, tracker, found_inf, 2.0, 0.5, 2000);
  EXPECT_EQ(tracker.item<int64_t>(), std::numeric_limits<int32_t>::min() + 1);
}

// Loss scaling made visible: under float16 autocast, gradients of 1e-9 underflow to zero in
// float16 (its smallest subnormal is 6e-8); scaled by 2^16 they survive, and unscaled in
// float32 they are the true ones.
TEST(GradScaler, Float16GradientsUnderflowWithoutItAndSurviveWithIt) {
  manual_seed(2);
  const Tensor x = rand({16, 32}) + 0.5;
  int64_t nonzero[2];
  Tensor grads[2];
  for (int scaled = 0; scaled < 2; ++scaled) {
    manual_seed(4);
    nn::Linear fc(32, 8);
    optim::SGD opt(fc->parameters(), optim::SGDOptions(0.0));
    GradScaler scaler(GradScalerOptions().enabled(scaled == 1));
    Tensor loss;
    {
      autocast::AutocastGuard amp(kCPU, kFloat16);
      loss = fc(x).to(kFloat32).sum() * 1e-9;
    }
    scaler.scale(loss).backward();
    scaler.unscale_(opt);
    grads[scaled] = fc->weight.grad();
    nonzero[scaled] = (fc->weight.grad() != 0.0).sum().item<int64_t>();
  }
  EXPECT_EQ(nonzero[0], 0) << "every float16 gradient underflowed";
  EXPECT_EQ(nonzero[1], 8 * 32) << "all recovered";
  // The true gradient of sum(x w^T) * 1e-9 w.r.t. w is 1e-9 * column sums of x (to float16's precision).
  const Tensor expected = (x.sum({0}) * 1e-9).unsqueeze(0).expand({8, 32});
  EXPECT_TRUE(testing::all_close(grads[1], expected.contiguous(), 2e-3, 0));
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

// Note [Master weights]: a bfloat16 model's own parameters cannot take small steps; float32
// copies can, and the model follows them.
TEST(MasterWeights, SmallStepsSurviveInFloat32Copies) {
  nn::Linear fc(4, 1, /*bias=*/false);
  {
    NoGradGuard no_grad;
    fc->weight.fill_(1.0);
  }
  fc->to(kBFloat16);
  const Tensor x = ones({1, 4}, kBFloat16);
  // Alone: 100 steps of lr 1e-3 on a gradient of 1 move w = 1 by nothing (below bfloat16's half-ulp).
  optim::SGD plain(fc->parameters(), optim::SGDOptions(1e-3));
  for (int i = 0; i < 100; ++i) {
    plain.zero_grad();
    fc(x).sum().backward();
    plain.step();
  }
  EXPECT_EQ(fc->weight.to(kFloat32).to_vector<float>(), (std::vector<float>{1, 1, 1, 1}));
  // With master weights: they reach 1 - 0.1, and the model rounds that.
  const int64_t before = memory::stats().current_bytes;
  optim::MasterWeights master(fc->parameters());
  EXPECT_EQ(master.bytes(), 4 * 4);
  EXPECT_EQ(memory::stats().current_bytes - before, 4 * 4) << "exactly the float32 copies";
  optim::SGD opt(master.parameters(), optim::SGDOptions(1e-3));
  for (int i = 0; i < 100; ++i) {
    opt.zero_grad();
    master.zero_model_grads();
    fc(x).sum().backward();
    master.copy_grads_to_master();
    opt.step();
    master.copy_master_to_model();
  }
  EXPECT_NEAR(master.parameters()[0].detach().sum().item<double>(), 4 * 0.9, 1e-5);
  EXPECT_EQ(fc->weight.dtype(), kBFloat16);
  EXPECT_NEAR(fc->weight.to(kFloat32).sum().item<double>(), 4 * 0.9, 4 * 4e-3) << "rounded to bfloat16";
}

TEST(MasterWeights, AFloat16ModelTrainsWithTheScalerAndTracksFloat32) {
  manual_seed(8);
  const Tensor x = randn({32, 10}), y = randn({32, 1});
  double losses[2];
  for (int half = 0; half < 2; ++half) {
    manual_seed(9);
    nn::Sequential net(nn::Linear(10, 16), nn::Tanh(), nn::Linear(16, 1));
    if (half) net->to(kFloat16);
    optim::MasterWeights master(net->parameters());
    optim::Adam opt(master.parameters(), optim::AdamOptions(1e-2));
    amp::GradScaler scaler(amp::GradScalerOptions().enabled(half == 1));
    const Tensor xb = half ? x.to(kFloat16) : x;
    Tensor loss;
    for (int step = 0; step < 30; ++step) {
      opt.zero_grad();
      master.zero_model_grads();
      loss = nn::functional::mse_loss(net(xb).to(kFloat32), y);
      scaler.scale(loss).backward();
      master.copy_grads_to_master();
      scaler.step(opt);
      master.copy_master_to_model();  // unchanged master after a skipped step: the same values
      scaler.update();
    }
    losses[half] = loss.item<double>();
    if (!half) EXPECT_EQ(master.bytes(), 0) << "a float32 model needs no copies";
  }
  EXPECT_NEAR(losses[1], losses[0], 2e-2 * losses[0]);
}

}  // namespace
}  // namespace ember
