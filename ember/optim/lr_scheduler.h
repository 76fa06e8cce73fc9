#pragma once
// Learning-rate schedulers (torch.optim.lr_scheduler). Construct one on an optimizer (it sets
// the lr of every group for step 0), then call step() once after each optimizer.step() (per
// epoch or per batch, as the schedule is meant). Each computes the next lr from the current
// one with PyTorch's recursive ("chainable") formulas, so the values match PyTorch's to
// rounding, and schedulers can be chained or run in sequence (SequentialLR).
#include <array>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ember/optim/optimizer.h"

namespace ember::optim {

class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  virtual void step();
  // Jumps to `epoch` with the closed form where the schedule has one (PyTorch's step(epoch)).
  virtual void step(int64_t epoch);
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }

  // last_epoch, step count, base and last lrs (and each scheduler's own state).
  virtual std::map<std::string, double> state_dict() const;
  virtual void load_state_dict(const std::map<std::string, double>& state);

 protected:
  // The lrs for last_epoch_ from the groups' current lrs (called right after last_epoch_ moved).
  virtual std::vector<double> get_lr() = 0;
  virtual std::optional<std::vector<double>> closed_form_lr() const { return std::nullopt; }
  // Step 0: derived constructors call this last (a base constructor cannot call get_lr()).
  void initial_step();
  void apply(const std::vector<double>& lrs);
  std::vector<double> group_lrs() const;
  friend class SequentialLR;

  Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  int64_t last_epoch_ = -1;
  int64_t step_count_ = 0;
  std::vector<double> last_lr_;
};

// lr · γ every step_size steps.
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;
  int64_t step_size_;
  double gamma_;
};

// lr · γ at each milestone (a milestone listed twice applies γ twice).
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1);

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;
  std::vector<int64_t> milestones_;  // sorted
  double gamma_;
};

// lr · γ every step.
class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(Optimizer& optimizer, double gamma);

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;
  double gamma_;
};

// η_min + (base − η_min)(1 + cos(π t / T_max)) / 2, continuing as a cosine wave past T_max.
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min = 0.0);

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;
  int64_t t_max_;
  double eta_min_;
};

// Warm-up: the lr factor goes linearly from start_factor to end_factor over total_iters steps.
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0, int64_t total_iters = 5);

 protected:
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;
  double start_factor_, end_factor_;
  int64_t total_iters_;
};

struct OneCycleLROptions {
  OneCycleLROptions(double max_lr, int64_t total_steps) : max_lr_(max_lr), total_steps_(total_steps) {}
  double max_lr_;
  int64_t total_steps_;
  double pct_start_ = 0.3;
  std::string anneal_strategy_ = "cos";  // or "linear"
  bool cycle_momentum_ = true;
  double base_momentum_ = 0.85, max_momentum_ = 0.95;
  double div_factor_ = 25.0, final_div_factor_ = 1e4;
  bool three_phase_ = false;
#define EMBER_ONECYCLE_SETTER(T, name) \
  OneCycleLROptions& name(T v) {       \
    name##_ = v;                       \
    return *this;                      \
  }
  EMBER_ONECYCLE_SETTER(double, pct_start)
  EMBER_ONECYCLE_SETTER(std::string, anneal_strategy)
  EMBER_ONECYCLE_SETTER(bool, cycle_momentum)
  EMBER_ONECYCLE_SETTER(double, base_momentum)
  EMBER_ONECYCLE_SETTER(double, max_momentum)
  EMBER_ONECYCLE_SETTER(double, div_factor)
  EMBER_ONECYCLE_SETTER(double, final_div_factor)
  EMBER_ONECYCLE_SETTER(bool, three_phase)
#undef EMBER_ONECYCLE_SETTER
};

// The 1cycle policy (Smith & Topin): lr rises from max_lr / div_factor to max_lr over
// pct_start of the steps, then anneals to initial / final_div_factor; momentum (SGD's
// momentum, Adam's beta1) moves the opposite way. Step once per batch, total_steps times.
class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& optimizer, const OneCycleLROptions& options);

 protected:
  std::vector<double> get_lr() override;

 private:
  struct Phase {
    double end_step;
    int start_lr, end_lr, start_momentum, end_momentum;  // indices into the per-group values
  };
  OneCycleLROptions options_;
  std::vector<Phase> phases_;
  // Per group: initial, max and min lr; max and base momentum.
  std::vector<std::array<double, 5>> values_;
};

// Runs schedulers[i] from milestones[i - 1] on (each restarted at its step 0 there).
class SequentialLR : public LRScheduler {
 public:
  SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
               std::vector<int64_t> milestones);
  void step() override;
  std::map<std::string, double> state_dict() const override;
  void load_state_dict(const std::map<std::string, double>& state) override;

 protected:
  std::vector<double> get_lr() override { return group_lrs(); }

 private:
  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
  std::vector<int64_t> milestones_;
};

}  // namespace ember::optim
