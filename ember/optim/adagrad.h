#pragma once
// Adagrad (torch.optim.Adagrad): each element's step shrinks with the sum of its squared gradients.
#include "ember/optim/optimizer.h"

namespace ember::optim {

class AdagradOptions : public OptimizerCloneableOptions<AdagradOptions> {
 public:
  AdagradOptions(double lr = 1e-2) : lr_(lr) {}  // NOLINT: implicit, as LibTorch's
  EMBER_ARG(double, lr) = 1e-2;
  EMBER_ARG(double, lr_decay) = 0.0;
  EMBER_ARG(double, weight_decay) = 0.0;
  EMBER_ARG(double, initial_accumulator_value) = 0.0;
  EMBER_ARG(double, eps) = 1e-10;
  EMBER_ARG(bool, maximize) = false;

 public:
  std::map<std::string, double> to_map() const override;
  void from_map(const std::map<std::string, double>& values) override;
  void validate() const override;
};

// g = ±grad + wd·p; sum += g²; p −= lr / (1 + (step − 1)·lr_decay) · g / (√sum + eps).
// State: "sum", which starts at initial_accumulator_value (of the parameter's group).
class Adagrad : public Optimizer {
 public:
  Adagrad(std::vector<Tensor> params, const AdagradOptions& options = AdagradOptions());
  Adagrad(std::vector<ParamGroup> groups, const AdagradOptions& options = AdagradOptions());
  Tensor step(const std::function<Tensor()>& closure = nullptr) override;
  bool skips_on_device() const override { return true; }
};

}  // namespace ember::optim
