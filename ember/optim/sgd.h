#pragma once
// SGD with momentum, dampening, Nesterov momentum, weight decay and maximize (torch.optim.SGD).
#include "ember/optim/optimizer.h"

namespace ember::optim {

class SGDOptions : public OptimizerCloneableOptions<SGDOptions> {
 public:
  SGDOptions(double lr) : lr_(lr) {}  // NOLINT: implicit, as LibTorch's: SGD(params, 0.01)
  EMBER_ARG(double, lr) = 0.0;
  EMBER_ARG(double, momentum) = 0.0;
  EMBER_ARG(double, dampening) = 0.0;
  EMBER_ARG(double, weight_decay) = 0.0;
  EMBER_ARG(bool, nesterov) = false;
  EMBER_ARG(bool, maximize) = false;

 public:
  std::map<std::string, double> to_map() const override;
  void from_map(const std::map<std::string, double>& values) override;
  void validate() const override;
  std::optional<double> get_momentum() const override { return momentum_; }
  void set_momentum(double m) override { momentum_ = m; }
};

// g = ±grad + wd·p; buf = g on the first step, then μ·buf + (1 − dampening)·g;
// p −= lr · (nesterov ? g + μ·buf : buf). State: "momentum_buffer" (when μ ≠ 0).
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, const SGDOptions& options);
  SGD(std::vector<ParamGroup> groups, const SGDOptions& options);
  Tensor step(const std::function<Tensor()>& closure = nullptr) override;
  bool skips_on_device() const override { return true; }
};

}  // namespace ember::optim
