// LR schedulers: 100 steps against PyTorch's values (tools/gen_reference_nn.py, SCHEDULERS),
// state save/load, bad options.
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "helpers.h"

namespace ember {
namespace {

using SchedulerPtr = std::shared_ptr<optim::LRScheduler>;

// The same schedules, under the same names, as SCHEDULERS in tools/gen_reference_nn.py.
const std::map<std::string, std::function<SchedulerPtr(optim::Optimizer&)>>& schedules() {
  using namespace optim;
  static const auto* table = new std::map<std::string, std::function<SchedulerPtr(Optimizer&)>>{
      {"step", [](Optimizer& o) { return std::make_shared<StepLR>(o, 7, 0.5); }},
      {"multistep",
       [](Optimizer& o) {
         return std::make_shared<MultiStepLR>(o, std::vector<int64_t>{10, 30, 30, 60}, 0.3);
       }},
      {"exponential", [](Optimizer& o) { return std::make_shared<ExponentialLR>(o, 0.95); }},
      {"cosine", [](Optimizer& o) { return std::make_shared<CosineAnnealingLR>(o, 30, 0.001); }},
      {"linear", [](Optimizer& o) { return std::make_shared<LinearLR>(o, 0.25, 1.0, 10); }},
      {"onecycle", [](Optimizer& o) { return std::make_shared<OneCycleLR>(o, OneCycleLROptions(1.0, 100)); }},
      {"onecycle_three_phase_linear",
       [](Optimizer& o) {
         return std::make_shared<OneCycleLR>(
             o, OneCycleLROptions(0.5, 100).pct_start(0.25).anneal_strategy("linear").three_phase(true));
       }},
      {"sequential",
       [](Optimizer& o) {
         auto warmup = std::make_shared<LinearLR>(o, 0.1, 1.0, 5);
         auto cosine = std::make_shared<CosineAnnealingLR>(o, 20);
         return std::make_shared<SequentialLR>(o, std::vector<SchedulerPtr>{warmup, cosine}, std::vector<int64_t>{5});
       }},
  };
  return *table;
}

std::vector<std::string> schedule_names() {
  std::vector<std::string> out;
  for (const auto& [name, f] : schedules()) out.push_back(name);
  return out;
}

class SchedulerTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SchedulerTest, HundredStepsMatchPyTorch) {
  Tensor p = zeros({1}).requires_grad_();
  optim::SGD opt({p}, optim::SGDOptions(0.1).momentum(0.9));
  SchedulerPtr sched = schedules().at(GetParam())(opt);
  std::vector<double> lrs{opt.param_groups()[0].options().get_lr()};
  std::vector<double> momenta{*opt.param_groups()[0].options().get_momentum()};
  for (int i = 0; i < 100; ++i) {
    opt.step();
    sched->step();
    lrs.push_back(opt.param_groups()[0].options().get_lr());
    momenta.push_back(*opt.param_groups()[0].options().get_momentum());
    EXPECT_DOUBLE_EQ(sched->get_last_lr()[0], lrs.back());
  }
  const auto& ref = testing::reference_nn();
  EXPECT_TRUE(testing::all_close(tensor<double>(lrs), testing::ref_tensor(ref, "sched." + GetParam()), 1e-12, 1e-15));
  EXPECT_TRUE(testing::all_close(tensor<double>(momenta), testing::ref_tensor(ref, "sched." + GetParam() + ".momentum"),
                                 1e-12, 1e-15));
}

INSTANTIATE_TEST_SUITE_P(Optim, SchedulerTest, ::testing::ValuesIn(schedule_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(LRScheduler, StateDictResumesTheSchedule) {
  for (const auto& name : schedule_names()) {
    Tensor p = zeros({1}).requires_grad_();
    optim::SGD opt({p}, optim::SGDOptions(0.1).momentum(0.9));
    SchedulerPtr sched = schedules().at(name)(opt);
    for (int i = 0; i < 37; ++i) sched->step();
    const auto state = sched->state_dict();
    const double lr = opt.param_groups()[0].options().get_lr();

    Tensor q = zeros({1}).requires_grad_();
    optim::SGD opt2({q}, optim::SGDOptions(0.1).momentum(0.9));
    SchedulerPtr resumed = schedules().at(name)(opt2);
    resumed->load_state_dict(state);
    opt2.param_groups()[0].options().set_lr(lr);  // the optimizer's state carries its lr
    opt2.param_groups()[0].options().set_momentum(*opt.param_groups()[0].options().get_momentum());
    for (int i = 0; i < 20; ++i) {
      sched->step();
      resumed->step();
      EXPECT_DOUBLE_EQ(resumed->get_last_lr()[0], sched->get_last_lr()[0]) << name << " step " << 38 + i;
    }
  }
}

// A checkpoint's scheduler state, hostile: NaN or huge epochs were cast to int64 unchecked
// (undefined behaviour); now refused, with the scheduler unchanged.
TEST(LRScheduler, HostileStateIsRefusedAndChangesNothing) {
  Tensor p = zeros({1}).requires_grad_();
  optim::SGD sgd({p}, optim::SGDOptions(0.1));
  optim::StepLR sched(sgd, 3, 0.5);
  for (int i = 0; i < 4; ++i) sched.step();
  const auto good = sched.state_dict();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<std::pair<std::string, double>> bad = {
      {"last_epoch", nan}, {"last_epoch", 1e300}, {"last_epoch", -2},
      {"step_count", 0.5}, {"base_lr.0", nan},    {"last_lr.0", std::numeric_limits<double>::infinity()}};
  for (const auto& [key, value] : bad) {
    auto state = good;
    state[key] = value;
    SCOPED_TRACE(key);
    EXPECT_ERROR_CONTAINS(sched.load_state_dict(state), key.rfind("last_epoch", 0) == 0 || key == "step_count"
                                                            ? key + " must be a whole number"
                                                            : "are not finite");
    EXPECT_EQ(sched.state_dict(), good);
  }
}

TEST(LRScheduler, BadOptionsThrow) {
  Tensor p = zeros({1}).requires_grad_();
  optim::SGD sgd({p}, optim::SGDOptions(0.1));
  EXPECT_ERROR_CONTAINS(optim::StepLR(sgd, 0), "step_size must be > 0");
  EXPECT_ERROR_CONTAINS(optim::CosineAnnealingLR(sgd, 0), "T_max must be in [1, 2^53], got 0");
  EXPECT_ERROR_CONTAINS(optim::LinearLR(sgd, 1.5), "start_factor");
  EXPECT_ERROR_CONTAINS(optim::OneCycleLR(sgd, optim::OneCycleLROptions(1.0, 10).anneal_strategy("exp")),
                        "anneal_strategy");
  EXPECT_ERROR_CONTAINS(optim::OneCycleLR(sgd, optim::OneCycleLROptions(1.0, 10).pct_start(1.5)), "pct_start");
  optim::OneCycleLR one(sgd, optim::OneCycleLROptions(1.0, 3).cycle_momentum(false));
  for (int i = 0; i < 3; ++i) one.step();
  EXPECT_ERROR_CONTAINS(one.step(), "total steps is 3");
  auto a = std::make_shared<optim::StepLR>(sgd, 2);
  EXPECT_ERROR_CONTAINS(optim::SequentialLR(sgd, {a}, {5}), "one milestone fewer");
}

// Epochs stay in [-1, 2^53], what state_dict holds exactly: step(INT64_MAX) and then step()
// overflowed last_epoch, and CosineAnnealingLR's 2 T_max overflowed for T_max = 2^62 (UBSan,
// found by the random-arguments test). 2^53 itself is still a schedule's epoch.
TEST(LRScheduler, EpochsPast2To53AreRefusedNotOverflowed) {
  Tensor p = zeros({1}).requires_grad_();
  optim::SGD sgd({p}, optim::SGDOptions(0.1));
  const int64_t limit = int64_t{1} << 53;
  EXPECT_ERROR_CONTAINS(optim::CosineAnnealingLR(sgd, int64_t{1} << 62), "T_max must be in [1, 2^53], got");
  optim::CosineAnnealingLR cosine(sgd, limit);
  cosine.step(limit);
  EXPECT_EQ(cosine.last_epoch(), limit);
  EXPECT_NEAR(cosine.get_last_lr()[0], 0.0, 1e-12);  // the bottom of the wave at T_max
  EXPECT_ERROR_CONTAINS(cosine.step(), "cannot step past epoch 2^53");
  EXPECT_ERROR_CONTAINS(cosine.step(std::numeric_limits<int64_t>::max()), "epoch must be in [-1, 2^53], got");
  EXPECT_ERROR_CONTAINS(cosine.step(std::numeric_limits<int64_t>::min()), "epoch must be in [-1, 2^53], got");
  EXPECT_EQ(cosine.last_epoch(), limit);
  auto first = std::make_shared<optim::ExponentialLR>(sgd, 0.5);
  optim::SequentialLR sequence(sgd, {first}, {});
  auto state = sequence.state_dict();
  state["last_epoch"] = static_cast<double>(limit);
  sequence.load_state_dict(state);
  EXPECT_ERROR_CONTAINS(sequence.step(), "SequentialLR.step: cannot step past epoch 2^53");
}

}  // namespace
}  // namespace ember
