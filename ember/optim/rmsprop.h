#pragma once
// RMSprop (torch.optim.RMSprop), with centering, momentum and weight decay.
#include "ember/optim/optimizer.h"

namespace ember::optim {

class RMSpropOptions : public OptimizerCloneableOptions<RMSpropOptions> {
 public:
  RMSpropOptions(double lr = 1e-2) : lr_(lr) {}  // NOLINT: implicit
  EMBER_ARG(double, lr) = 1e-2;
  EMBER_ARG(double, alpha) = 0.99;
  EMBER_ARG(double, eps) = 1e-8;
  EMBER_ARG(double, weight_decay) = 0.0;
  EMBER_ARG(double, momentum) = 0.0;
  EMBER_ARG(bool, centered) = false;
  EMBER_ARG(bool, maximize) = false;

 public:
  std::map<std::string, double> to_map() const override;
  void from_map(const std::map<std::string, double>& values) override;
  void validate() const override;
  std::optional<double> get_momentum() const override { return momentum_; }
  void set_momentum(double m) override { momentum_ = m; }
};

// g = ±grad + wd·p; v = α v + (1 − α) g²; centered: ḡ = α ḡ + (1 − α) g, v − ḡ² in place of v;
// p −= lr · g / (√v + eps), through buf = μ buf + g / (√v + eps) when μ > 0.
// State: "square_avg" (and "grad_avg", "momentum_buffer").
class RMSprop : public Optimizer {
 public:
  RMSprop(std::vector<Tensor> params, const RMSpropOptions& options = RMSpropOptions());
  RMSprop(std::vector<ParamGroup> groups, const RMSpropOptions& options = RMSpropOptions());
  Tensor step(const std::function<Tensor()>& closure = nullptr) override;
  bool skips_on_device() const override { return true; }
};

}  // namespace ember::optim
