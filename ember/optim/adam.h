#pragma once
// Adam (weight decay as L2 on the gradient) and AdamW (decoupled weight decay), as
// torch.optim.Adam / AdamW, with amsgrad and maximize.
#include <tuple>

#include "ember/optim/optimizer.h"

namespace ember::optim {

class AdamOptions : public OptimizerCloneableOptions<AdamOptions> {
 public:
  using Betas = std::tuple<double, double>;
  AdamOptions(double lr = 1e-3) : lr_(lr) {}  // NOLINT: implicit, as LibTorch's: Adam(params, 1e-3)
  EMBER_ARG(double, lr) = 1e-3;
  EMBER_ARG(Betas, betas) = std::make_tuple(0.9, 0.999);
  EMBER_ARG(double, eps) = 1e-8;
  EMBER_ARG(double, weight_decay) = 0.0;
  EMBER_ARG(bool, amsgrad) = false;
  EMBER_ARG(bool, maximize) = false;

 public:
  std::map<std::string, double> to_map() const override;
  void from_map(const std::map<std::string, double>& values) override;
  void validate() const override;
  std::optional<double> get_momentum() const override { return std::get<0>(betas_); }
  void set_momentum(double m) override { std::get<0>(betas_) = m; }
};

// AdamW's options: Adam's, with weight_decay 1e-2 by default.
class AdamWOptions : public AdamOptions {
 public:
  AdamWOptions(double lr = 1e-3) : AdamOptions(lr) { weight_decay_ = 1e-2; }  // NOLINT: implicit
  std::unique_ptr<OptimizerOptions> clone() const override { return std::make_unique<AdamWOptions>(*this); }
  // The setters return AdamOptions&; these keep chains typed as AdamWOptions for the
  // AdamW constructor.
  AdamWOptions& lr(double v) { return AdamOptions::lr(v), *this; }
  double lr() const { return lr_; }
  AdamWOptions& betas(std::tuple<double, double> v) { return AdamOptions::betas(v), *this; }
  const std::tuple<double, double>& betas() const { return betas_; }
  AdamWOptions& eps(double v) { return AdamOptions::eps(v), *this; }
  double eps() const { return eps_; }
  AdamWOptions& weight_decay(double v) { return AdamOptions::weight_decay(v), *this; }
  double weight_decay() const { return weight_decay_; }
  AdamWOptions& amsgrad(bool v) { return AdamOptions::amsgrad(v), *this; }
  bool amsgrad() const { return amsgrad_; }
  AdamWOptions& maximize(bool v) { return AdamOptions::maximize(v), *this; }
  bool maximize() const { return maximize_; }
};

// t += 1; g = ±grad (+ wd·p for Adam; AdamW instead scales p by 1 − lr·wd);
// m = β1 m + (1 − β1) g; v = β2 v + (1 − β2) g²; v̂ = amsgrad ? max(v̂, v) : v;
// p −= lr / (1 − β1ᵗ) · m / (√v̂ / √(1 − β2ᵗ) + eps).
// State: "exp_avg", "exp_avg_sq" (and "max_exp_avg_sq"), and the step count.
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, const AdamOptions& options = AdamOptions());
  Adam(std::vector<ParamGroup> groups, const AdamOptions& options = AdamOptions());
  Tensor step(const std::function<Tensor()>& closure = nullptr) override;
  bool skips_on_device() const override { return true; }

 protected:
  Adam(const char* type_name, std::vector<ParamGroup> groups, const AdamOptions& options, bool decoupled);

 private:
  bool decoupled_;
};

class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, const AdamWOptions& options = AdamWOptions());
  AdamW(std::vector<ParamGroup> groups, const AdamWOptions& options = AdamWOptions());
};

}  // namespace ember::optim
