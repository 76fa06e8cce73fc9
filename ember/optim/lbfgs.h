#pragma once
// L-BFGS (torch.optim.LBFGS, after minFunc): a quasi-Newton method that keeps the last
// history_size curvature pairs (s, y) and, optionally, chooses the step with a strong-Wolfe
// line search. One parameter group only; step() needs a closure that zeroes the gradients,
// computes the loss, calls backward() and returns the loss.
#include <deque>
#include <optional>

#include "ember/optim/optimizer.h"

namespace ember::optim {

class LBFGSOptions : public OptimizerCloneableOptions<LBFGSOptions> {
 public:
  LBFGSOptions(double lr = 1.0) : lr_(lr) {}  // NOLINT: implicit
  EMBER_ARG(double, lr) = 1.0;
  EMBER_ARG(int64_t, max_iter) = 20;
  EMBER_ARG(std::optional<int64_t>, max_eval) = std::nullopt;  // default max_iter * 5 / 4
  EMBER_ARG(double, tolerance_grad) = 1e-7;
  EMBER_ARG(double, tolerance_change) = 1e-9;
  EMBER_ARG(int64_t, history_size) = 100;
  EMBER_ARG(std::optional<std::string>, line_search_fn) = std::nullopt;  // nullopt or "strong_wolfe"

 public:
  std::map<std::string, double> to_map() const override;
  void from_map(const std::map<std::string, double>& values) override;
  void validate() const override;
};

class LBFGS : public Optimizer {
 public:
  LBFGS(std::vector<Tensor> params, const LBFGSOptions& options = LBFGSOptions());
  LBFGS(std::vector<ParamGroup> groups, const LBFGSOptions& options = LBFGSOptions());
  // Up to max_iter iterations; returns the loss of the first closure evaluation.
  Tensor step(const std::function<Tensor()>& closure) override;

  int64_t func_evals() const { return func_evals_; }  // closure evaluations over all steps
  int64_t n_iter() const { return n_iter_; }          // iterations over all steps

 protected:
  void save_extra(OptimizerState& state) const override;
  void load_extra(const OptimizerState& state) override;

 private:
  // The flattened parameters and gradient (one vector over all parameters).
  Tensor gather_flat_grad() const;
  void add_to_params(double step_size, const Tensor& direction);
  std::vector<Tensor> clone_params() const;
  void set_params(const std::vector<Tensor>& values);
  // Moves to x + t·d, evaluates loss and flat gradient, and moves back to x.
  std::pair<double, Tensor> directional_evaluate(const std::function<Tensor()>& closure, const std::vector<Tensor>& x,
                                                 double t, const Tensor& d);
  // Rounds a scalar to the parameters' precision, where PyTorch keeps it in a 0-d tensor.
  double r(double v) const;
  double dot(const Tensor& a, const Tensor& b) const;

  int64_t func_evals_ = 0, n_iter_ = 0;
  Tensor d_, prev_flat_grad_;
  double t_ = 0, h_diag_ = 1, prev_loss_ = 0;
  std::deque<Tensor> old_dirs_, old_stps_;
  std::deque<double> ro_;
};

}  // namespace ember::optim
