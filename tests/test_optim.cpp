// Optimizers: trajectories against PyTorch (tools/gen_reference_nn.py: ten steps on the 2-D
// Rosenbrock function from (-1.5, 2) and on a small MLP with an MSE loss), PyTorch's
// hand-derivable first steps, option validation, parameter groups and state save/load.
#include <functional>
#include <memory>

#include "ember/tensor/parallel.h"
#include "helpers.h"

namespace ember {
namespace {

using OptimizerPtr = std::unique_ptr<optim::Optimizer>;
struct Config {
  std::function<OptimizerPtr(std::vector<Tensor>, double lr)> make;
  double rosen_lr, model_lr;
};

// The same configurations, under the same names, as OPTIMIZERS in tools/gen_reference_nn.py.
const std::map<std::string, Config>& configs() {
  using namespace optim;
  static const auto* table = new std::map<std::string, Config>{
      {"sgd", {[](auto p, double lr) { return std::make_unique<SGD>(p, SGDOptions(lr)); }, 1e-3, 0.1}},
      {"sgd_momentum",
       {[](auto p, double lr) { return std::make_unique<SGD>(p, SGDOptions(lr).momentum(0.9).dampening(0.1)); }, 1e-3,
        0.1}},
      {"sgd_nesterov",
       {[](auto p, double lr) { return std::make_unique<SGD>(p, SGDOptions(lr).momentum(0.9).nesterov(true)); }, 1e-3,
        0.1}},
      {"sgd_weight_decay",
       {[](auto p, double lr) { return std::make_unique<SGD>(p, SGDOptions(lr).momentum(0.5).weight_decay(0.1)); },
        1e-3, 0.1}},
      {"adam", {[](auto p, double lr) { return std::make_unique<Adam>(p, AdamOptions(lr)); }, 1e-2, 1e-2}},
      {"adam_amsgrad_l2",
       {[](auto p, double lr) { return std::make_unique<Adam>(p, AdamOptions(lr).amsgrad(true).weight_decay(0.1)); },
        1e-2, 1e-2}},
      {"adamw",
       {[](auto p, double lr) {
          return std::make_unique<AdamW>(p, AdamWOptions(lr).betas({0.8, 0.99}).weight_decay(0.1));
        },
        1e-2, 1e-2}},
      {"rmsprop", {[](auto p, double lr) { return std::make_unique<RMSprop>(p, RMSpropOptions(lr)); }, 1e-3, 1e-3}},
      {"rmsprop_centered_momentum",
       {[](auto p, double lr) {
          return std::make_unique<RMSprop>(p, RMSpropOptions(lr).momentum(0.5).centered(true).weight_decay(0.01));
        },
        1e-3, 1e-3}},
      {"adagrad", {[](auto p, double lr) { return std::make_unique<Adagrad>(p, AdagradOptions(lr)); }, 0.1, 0.05}},
      {"adagrad_decay_maximize",
       {[](auto p, double lr) {
          return std::make_unique<Adagrad>(
              p, AdagradOptions(lr).lr_decay(0.1).weight_decay(0.1).initial_accumulator_value(0.5).eps(1e-6).maximize(
                     true));
        },
        0.1, 0.05}},
      {"lbfgs", {[](auto p, double lr) { return std::make_unique<LBFGS>(p, LBFGSOptions(lr).max_iter(5)); }, 1.0, 1.0}},
      {"lbfgs_strong_wolfe",
       {[](auto p, double lr) {
          return std::make_unique<LBFGS>(p, LBFGSOptions(lr).max_iter(5).line_search_fn("strong_wolfe"));
        },
        1.0, 1.0}},
  };
  return *table;
}

Tensor rosenbrock(const Tensor& x) { return (1 - x[0]).square() + 100 * (x[1] - x[0].square()).square(); }

// Ten closure steps; the flattened parameters after each, as a [10, P] tensor.
Tensor trajectory(optim::Optimizer& opt, const std::vector<Tensor>& params, const std::function<Tensor()>& loss_fn) {
  std::vector<Tensor> rows;
  for (int i = 0; i < 10; ++i) {
    opt.step([&] {
      opt.zero_grad();
      Tensor loss = loss_fn();
      loss.backward();
      return loss;
    });
    std::vector<Tensor> flat;
    for (const auto& p : params) flat.push_back(p.detach().reshape({-1}));
    rows.push_back(cat(flat));
  }
  return stack(rows);
}

nn::Sequential small_model() {
  const auto& ref = testing::reference_nn();
  nn::Sequential model(nn::Linear(4, 8), nn::Tanh(), nn::Linear(8, 3));
  StateDict state;
  for (const char* key : {"0.weight", "0.bias", "2.weight", "2.bias"})
    state.insert(key, testing::ref_tensor(ref, std::string("optim.model.") + key).clone());
  model->load_state_dict(state);
  return model;
}

bool is_lbfgs(const std::string& name) { return name.compare(0, 5, "lbfgs") == 0; }

// float32, to 1e-5 relative. L-BFGS only for its first step: its later steps amplify float32
// rounding (PyTorch's dot products sum in another order) by orders of magnitude, so its ten
// steps are compared in float64, where the two implementations agree to 1e-8.
void expect_trajectory(const Tensor& path, const Tensor& expected, const std::string& name) {
  if (is_lbfgs(name))
    EXPECT_TRUE(testing::all_close(path[0], expected[0], 1e-5, 1e-6)) << name << " first step";
  else
    EXPECT_TRUE(testing::all_close(path, expected, 1e-5, 1e-6)) << name;
}

class OptimizerTrajectory : public ::testing::TestWithParam<std::string> {};

TEST_P(OptimizerTrajectory, RosenbrockMatchesPyTorch) {
  const Config& c = configs().at(GetParam());
  Tensor x = tensor<float>({-1.5f, 2.0f}).requires_grad_();
  auto opt = c.make({x}, c.rosen_lr);
  const Tensor path = trajectory(*opt, {x}, [&] { return rosenbrock(x); });
  expect_trajectory(path, testing::ref_tensor(testing::reference_nn(), "optim.rosen." + GetParam()), GetParam());
  if (!is_lbfgs(GetParam())) return;
  Tensor x64 = tensor<double>({-1.5, 2.0}).requires_grad_();
  auto opt64 = c.make({x64}, c.rosen_lr);
  const Tensor path64 = trajectory(*opt64, {x64}, [&] { return rosenbrock(x64); });
  EXPECT_TRUE(testing::all_close(path64, testing::ref_tensor(testing::reference_nn(), "optim.rosen64." + GetParam()),
                                 1e-8, 1e-10));
}

TEST_P(OptimizerTrajectory, SmallModelMatchesPyTorch) {
  const Config& c = configs().at(GetParam());
  const auto& ref = testing::reference_nn();
  nn::Sequential model = small_model();
  const Tensor x = testing::ref_tensor(ref, "optim.model.x"), y = testing::ref_tensor(ref, "optim.model.y");
  auto opt = c.make(model->parameters(), c.model_lr);
  const Tensor path = trajectory(*opt, model->parameters(), [&] { return nn::functional::mse_loss(model(x), y); });
  expect_trajectory(path, testing::ref_tensor(ref, "optim.model." + GetParam()), GetParam());
  if (!is_lbfgs(GetParam())) return;
  nn::Sequential model64 = small_model();
  model64->to(kFloat64);
  const Tensor x64 = x.to(kFloat64), y64 = y.to(kFloat64);
  auto opt64 = c.make(model64->parameters(), c.model_lr);
  const Tensor path64 =
      trajectory(*opt64, model64->parameters(), [&] { return nn::functional::mse_loss(model64(x64), y64); });
  EXPECT_TRUE(testing::all_close(path64, testing::ref_tensor(ref, "optim.model64." + GetParam()), 1e-8, 1e-10));
}

// The same trajectories from the CUDA kernels (one fused launch per step), where a GPU exists.
TEST_P(OptimizerTrajectory, SmallModelOnCudaMatchesPyTorch) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const Config& c = configs().at(GetParam());
  const auto& ref = testing::reference_nn();
  nn::Sequential model = small_model();
  model->to(kCUDA);
  const Tensor x = testing::ref_tensor(ref, "optim.model.x").cuda(),
               y = testing::ref_tensor(ref, "optim.model.y").cuda();
  auto opt = c.make(model->parameters(), c.model_lr);
  const Tensor path = trajectory(*opt, model->parameters(), [&] { return nn::functional::mse_loss(model(x), y); });
  const Tensor expected = testing::ref_tensor(ref, "optim.model." + GetParam());
  // (cuBLAS sums the products in another order: 1e-4 where the CPU test asks 1e-5)
  if (is_lbfgs(GetParam()))
    EXPECT_TRUE(testing::all_close(path[0].cpu(), expected[0], 1e-4, 1e-5)) << GetParam() << " first step";
  else
    EXPECT_TRUE(testing::all_close(path.cpu(), expected, 1e-4, 1e-5)) << GetParam();
}

std::vector<std::string> config_names() {
  std::vector<std::string> out;
  for (const auto& [name, c] : configs()) out.push_back(name);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Optim, OptimizerTrajectory, ::testing::ValuesIn(config_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// ---- PyTorch's first steps, derived by hand (REFERENCE-pytorch.md, section 3) ----

std::vector<double> sgd_constant_grad(const optim::SGDOptions& options) {
  Tensor p = ones({1}, kFloat64).requires_grad_();
  optim::SGD opt({p}, options);
  std::vector<double> out;
  for (int i = 0; i < 3; ++i) {
    p.mutable_grad() = ones({1}, kFloat64);
    opt.step();
    out.push_back(p.item<double>());
  }
  return out;
}

TEST(Optim, SgdMomentumDampeningNesterovFirstSteps) {
  const auto expect = [](std::vector<double> got, std::vector<double> want) {
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << "step " << i;
  };
  expect(sgd_constant_grad(optim::SGDOptions(0.1).momentum(0.9)), {0.9, 0.71, 0.439});
  expect(sgd_constant_grad(optim::SGDOptions(0.1).momentum(0.9).dampening(0.5)), {0.9, 0.76, 0.584});
  expect(sgd_constant_grad(optim::SGDOptions(0.1).momentum(0.9).nesterov(true)), {0.81, 0.539, 0.1951});
  expect(sgd_constant_grad(optim::SGDOptions(0.1).maximize(true)), {1.1, 1.2, 1.3});
}

TEST(Optim, AdamAndAdamWOnSquareFirstSteps) {
  auto run = [](optim::Optimizer& opt, Tensor& p) {
    std::vector<double> out;
    for (int i = 0; i < 3; ++i) {
      opt.zero_grad();
      (p * p).sum().backward();
      opt.step();
      out.push_back(p.item<double>());
    }
    return out;
  };
  Tensor a = ones({1}, kFloat64).requires_grad_();
  optim::Adam adam({a}, optim::AdamOptions(0.1));
  const auto adam_path = run(adam, a);
  Tensor w = ones({1}, kFloat64).requires_grad_();
  optim::AdamW adamw({w}, optim::AdamWOptions(0.1).weight_decay(0.01));
  const auto adamw_path = run(adamw, w);
  const double want_adam[] = {0.9000000005, 0.800412228692, 0.701586272946};
  const double want_adamw[] = {0.8990000005, 0.798519027169, 0.698911183158};
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(adam_path[i], want_adam[i], 1e-11);
    EXPECT_NEAR(adamw_path[i], want_adamw[i], 1e-11);
  }
}

TEST(Optim, LbfgsFirstIterationOnRosenbrock) {
  Tensor x = tensor<double>({1.5, 1.5}).requires_grad_();
  optim::LBFGS opt({x}, optim::LBFGSOptions().max_iter(1));
  const Tensor loss = opt.step([&] {
    opt.zero_grad();
    Tensor f = rosenbrock(x);
    f.backward();
    return f;
  });
  EXPECT_NEAR(loss.item<double>(), 56.5, 1e-12);
  EXPECT_NEAR(x[0].item<double>(), 0.749584026622, 1e-11);  // t = 1 / |g|₁ = 1 / 601
  EXPECT_NEAR(x[1].item<double>(), 1.749584026622, 1e-11);
}

TEST(Optim, LbfgsStrongWolfeConvergesOnRosenbrock) {
  Tensor x = tensor<double>({-1.5, 2.0}).requires_grad_();
  optim::LBFGS opt({x}, optim::LBFGSOptions().max_iter(100).line_search_fn("strong_wolfe"));
  auto closure = [&] {
    opt.zero_grad();
    Tensor f = rosenbrock(x);
    f.backward();
    return f;
  };
  for (int i = 0; i < 5; ++i) opt.step(closure);
  EXPECT_LT(rosenbrock(x).item<double>(), 1e-9);
  EXPECT_GT(opt.func_evals(), 10);
}

// ---- options, groups, state ----

TEST(Optim, BadOptionsThrowAtConstructionNamingTheOption) {
  Tensor p = zeros({2}).requires_grad_();
  using namespace optim;
  EXPECT_ERROR_CONTAINS(SGD({p}, SGDOptions(-0.1)), "invalid lr -0.1");
  EXPECT_ERROR_CONTAINS(SGD({p}, SGDOptions(0.1).nesterov(true)), "nesterov momentum requires a momentum > 0");
  EXPECT_ERROR_CONTAINS(Adam({p}, AdamOptions().betas({1.0, 0.999})), "invalid beta1 1");
  EXPECT_ERROR_CONTAINS(AdamW({p}, AdamWOptions().betas({0.9, -0.1})), "invalid beta2 -0.1");
  EXPECT_ERROR_CONTAINS(RMSprop({p}, RMSpropOptions().momentum(-1)), "invalid momentum -1");
  EXPECT_ERROR_CONTAINS(Adagrad({p}, AdagradOptions().lr_decay(-0.5)), "Adagrad: invalid lr_decay -0.5");
  EXPECT_ERROR_CONTAINS(Adagrad({p}, AdagradOptions().initial_accumulator_value(-1)),
                        "invalid initial_accumulator_value -1");
  EXPECT_ERROR_CONTAINS(LBFGS({p}, LBFGSOptions().line_search_fn("armijo")), "line_search_fn");
  Tensor q = zeros({2}).requires_grad_();
  EXPECT_ERROR_CONTAINS(LBFGS(std::vector<ParamGroup>{ParamGroup({p}), ParamGroup({q})}), "one parameter group only");
  EXPECT_ERROR_CONTAINS(SGD({p, p}, SGDOptions(0.1)), "appears twice");
  EXPECT_ERROR_CONTAINS(SGD({p * 2}, SGDOptions(0.1)), "leaf");
  // Counts past 2^53 (which state_dict's doubles cannot hold, and whose max_iter * 5 / 4, the
  // default max_eval, overflowed int64) are refused, at construction and at a step after an edit.
  EXPECT_ERROR_CONTAINS(LBFGS({p}, LBFGSOptions().max_iter(int64_t{1} << 62)),
                        "LBFGS: invalid max_iter 4611686018427387904 (must be in [1, 2^53])");
  EXPECT_ERROR_CONTAINS(LBFGS({p}, LBFGSOptions().history_size(int64_t{1} << 54)), "invalid history_size");
  LBFGS lbfgs({p});
  EXPECT_ERROR_CONTAINS(lbfgs.step(nullptr), "needs a closure");
  static_cast<LBFGSOptions&>(lbfgs.param_groups()[0].options()).max_iter(std::numeric_limits<int64_t>::max());
  EXPECT_ERROR_CONTAINS(lbfgs.step([&] { return p.sum(); }), "LBFGS: invalid max_iter 9223372036854775807");
}

TEST(Optim, ParamGroupsHaveTheirOwnOptions) {
  Tensor a = ones({3}).requires_grad_(), b = ones({3}).requires_grad_();
  std::vector<optim::ParamGroup> groups;
  groups.emplace_back(std::vector<Tensor>{a});
  groups.emplace_back(std::vector<Tensor>{b}, std::make_unique<optim::SGDOptions>(0.5));
  optim::SGD opt(groups, optim::SGDOptions(0.1));
  a.mutable_grad() = ones({3});
  b.mutable_grad() = ones({3});
  opt.step();
  EXPECT_FLOAT_EQ(a[0].item<float>(), 0.9f);
  EXPECT_FLOAT_EQ(b[0].item<float>(), 0.5f);
  Tensor c = ones({2}).requires_grad_();
  opt.add_param_group(optim::ParamGroup({c}));
  EXPECT_EQ(opt.param_groups().size(), 3u);
  EXPECT_DOUBLE_EQ(opt.param_groups()[2].options().get_lr(), 0.1);
  EXPECT_ERROR_CONTAINS(opt.add_param_group(optim::ParamGroup({a})), "appears twice");
  opt.zero_grad();
  EXPECT_FALSE(a.grad().defined());
}

TEST(Optim, ParametersWithoutGradientsAreSkipped) {
  Tensor a = ones({2}).requires_grad_(), b = ones({2}).requires_grad_();
  optim::Adam opt({a, b}, optim::AdamOptions(0.1));
  a.mutable_grad() = ones({2});
  opt.step();
  EXPECT_LT(a[0].item<float>(), 1.0f);
  EXPECT_EQ(b[0].item<float>(), 1.0f);
  EXPECT_EQ(opt.state_dict().metadata.count("state.1.step"), 0u);
}

TEST(Optim, NonContiguousGradientsAndParameters) {
  Tensor base = ones({4, 3}).requires_grad_();
  optim::SGD opt({base}, optim::SGDOptions(0.5).momentum(0.9));
  base.mutable_grad() = arange(12, kFloat32).reshape({3, 4}).t();  // transposed gradient
  opt.step();
  EXPECT_FLOAT_EQ(base[1][2].item<float>(), 1.0f - 0.5f * 9.0f);
}

// Adagrad's two per-group knobs by hand: the sum starts at the group's initial_accumulator_value,
// and the learning rate decays with each parameter's own step count.
TEST(Optim, AdagradAccumulatorStartsPerGroupAndTheRateDecaysPerStep) {
  Tensor a = ones({1}).requires_grad_(), b = ones({1}).requires_grad_();
  std::vector<optim::ParamGroup> groups;
  groups.emplace_back(std::vector<Tensor>{a}, optim::AdagradOptions(0.1).initial_accumulator_value(5).clone());
  groups.emplace_back(std::vector<Tensor>{b});
  optim::Adagrad opt(std::move(groups), optim::AdagradOptions(0.1).lr_decay(1.0).eps(0));
  a.mutable_grad() = full({1}, 2.0);
  b.mutable_grad() = full({1}, 2.0);
  opt.step();
  EXPECT_FLOAT_EQ(a.item<float>(), 1.0f - 0.1f * 2.0f / 3.0f);  // sum 5 + 4; lr_decay is group b's only
  EXPECT_FLOAT_EQ(b.item<float>(), 1.0f - 0.1f * 2.0f / 2.0f);  // sum 0 + 4
  opt.step();
  EXPECT_FLOAT_EQ(b.item<float>(), 0.9f - 0.05f * 2.0f / std::sqrt(8.0f));  // lr / (1 + 1 · lr_decay)
}

// A state saved after k steps and loaded into a fresh optimizer continues exactly as the
// original would have.
template <class MakeOpt>
void expect_resume_is_exact(MakeOpt make) {
  nn::Sequential model = small_model();
  const auto& ref = testing::reference_nn();
  const Tensor x = testing::ref_tensor(ref, "optim.model.x"), y = testing::ref_tensor(ref, "optim.model.y");
  auto opt = make(model->parameters());
  auto closure = [&](optim::Optimizer& o, nn::Sequential& m) {
    return [&] {
      o.zero_grad();
      Tensor loss = nn::functional::mse_loss(m(x), y);
      loss.backward();
      return loss;
    };
  };
  for (int i = 0; i < 3; ++i) opt->step(closure(*opt, model));
  const StateDict weights = model->state_dict();
  const optim::OptimizerState saved = opt->state_dict();
  nn::Sequential copy = small_model();
  {
    StateDict cloned;
    for (const auto& w : weights) cloned.insert(w.key(), w.value().clone());
    copy->load_state_dict(cloned);
  }
  auto resumed = make(copy->parameters());
  resumed->load_state_dict(saved);
  for (int i = 0; i < 3; ++i) {
    opt->step(closure(*opt, model));
    resumed->step(closure(*resumed, copy));
  }
  const auto a = model->parameters(), b = copy->parameters();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(testing::all_close(b[i], a[i], 0, 0)) << "parameter " << i;
}

TEST(Optim, StateDictResumesExactly) {
  using namespace optim;
  expect_resume_is_exact([](auto p) { return std::make_unique<SGD>(p, SGDOptions(0.1).momentum(0.9)); });
  expect_resume_is_exact([](auto p) { return std::make_unique<AdamW>(p, AdamWOptions(1e-2).amsgrad(true)); });
  expect_resume_is_exact([](auto p) { return std::make_unique<RMSprop>(p, RMSpropOptions().centered(true)); });
  expect_resume_is_exact([](auto p) { return std::make_unique<LBFGS>(p, LBFGSOptions().max_iter(3)); });
  expect_resume_is_exact([](auto p) {
    return std::make_unique<Adagrad>(p, AdagradOptions(0.1).lr_decay(0.5).initial_accumulator_value(1));
  });
}

TEST(Optim, LoadStateDictRejectsMismatches) {
  Tensor a = ones({2}).requires_grad_();
  optim::Adam adam({a});
  a.mutable_grad() = ones({2});
  adam.step();
  const optim::OptimizerState state = adam.state_dict();
  Tensor b = ones({3}).requires_grad_();
  optim::Adam other({b});
  EXPECT_ERROR_CONTAINS(other.load_state_dict(state), "has shape [2] but its parameter has shape [3]");
  optim::SGD sgd({a}, optim::SGDOptions(0.1));
  EXPECT_ERROR_CONTAINS(sgd.load_state_dict(state), "saved by Adam");
  optim::OptimizerState broken = state;
  broken.metadata["param_groups"] = "[{";
  EXPECT_ERROR_CONTAINS(adam.load_state_dict(broken), "not valid JSON");
}

// `state` with `from` replaced by `to` in its param_groups JSON.
optim::OptimizerState with_groups_edited(optim::OptimizerState state, const std::string& from, const std::string& to) {
  std::string& groups = state.metadata.at("param_groups");
  const size_t at = groups.find(from);
  EXPECT_NE(at, std::string::npos) << from << " in " << groups;
  if (at != std::string::npos) groups.replace(at, from.size(), to);
  return state;
}

// A checkpoint's numbers, hostile: an option missing from the state escaped as
// std::out_of_range, and L-BFGS's counts were cast from NaN or 1e300 to integers unchecked
// (undefined behaviour). Each is now an ember::Error, and the optimizer keeps its state.
TEST(Optim, HostileNumbersInAStateAreRefusedAndChangeNothing) {
  Tensor a = ones({2}).requires_grad_();
  optim::Adam adam({a}, optim::AdamOptions(0.5));
  a.mutable_grad() = ones({2});
  adam.step();
  EXPECT_ERROR_CONTAINS(adam.load_state_dict(with_groups_edited(adam.state_dict(), "\"eps\":", "\"other\":")),
                        "parameter group 0 has no option 'eps' in the state");
  EXPECT_EQ(adam.param_groups()[0].options().get_lr(), 0.5);

  Tensor w = ones({3}).requires_grad_();
  optim::LBFGS lbfgs({w}, optim::LBFGSOptions().max_iter(2));
  lbfgs.step([&] {
    lbfgs.zero_grad();
    Tensor loss = (w * w).sum();
    loss.backward();
    return loss;
  });
  const optim::OptimizerState good = lbfgs.state_dict();
  EXPECT_ERROR_CONTAINS(lbfgs.load_state_dict(with_groups_edited(good, "\"max_iter\":2.0", "\"max_iter\":1e300")),
                        "LBFGS: max_iter must be a whole number in [1, 9007199254740992], got 1e+300");
  EXPECT_ERROR_CONTAINS(lbfgs.load_state_dict(with_groups_edited(good, "\"max_iter\":2.0", "\"max_iter\":2.5")),
                        "LBFGS: max_iter must be a whole number");
  for (const char* key : {"lbfgs.n_iter", "lbfgs.func_evals"}) {
    optim::OptimizerState s = good;
    s.metadata[key] = "nan";
    EXPECT_ERROR_CONTAINS(lbfgs.load_state_dict(s), std::string(key) + " must be a whole number");
    s.metadata[key] = "-3";
    EXPECT_ERROR_CONTAINS(lbfgs.load_state_dict(s), std::string(key) + " must be a whole number");
  }
  // Refused loads changed nothing: the state saves as it did.
  const optim::OptimizerState after = lbfgs.state_dict();
  EXPECT_EQ(after.metadata, good.metadata);
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

// Bug (issue 19): a step over many tiny parameters opened a 2-thread parallel region every
// step, which on a loaded machine waits for a core each time. Below 2 · kGrainSize elements in
// all a fused step stays on the calling thread; a large one still spreads.
TEST(Optim, TinyStepsOpenNoParallelRegion) {
  if (get_num_threads() < 2) GTEST_SKIP() << "one thread: nothing to observe";
  std::vector<Tensor> tiny;
  for (int i = 0; i < 8; ++i) tiny.push_back(ones({5}).requires_grad_());
  optim::AdamW small_opt(tiny, optim::AdamWOptions(1e-2));
  for (Tensor& p : tiny) p.mutable_grad() = ones({5});
  const int64_t before = parallel_regions();
  for (int step = 0; step < 10; ++step) small_opt.step();
  EXPECT_EQ(parallel_regions(), before) << "10 steps of 8 x 5 elements";

  Tensor big = zeros({4 * kGrainSize}).requires_grad_();
  big.mutable_grad() = ones({4 * kGrainSize});
  optim::SGD big_opt({big}, optim::SGDOptions(0.1));
  const int64_t before_big = parallel_regions();
  big_opt.step();
  EXPECT_EQ(parallel_regions(), before_big + 1);
}

}  // namespace
}  // namespace ember
