#include "ember/optim/sgd.h"

#include "ember/autograd/grad_mode.h"
#include "ember/tensor/backend.h"
#include "ember/tensor/ops.h"

namespace ember::optim {

std::map<std::string, double> SGDOptions::to_map() const {
  return {{"lr", lr_},
          {"momentum", momentum_},
          {"dampening", dampening_},
          {"weight_decay", weight_decay_},
          {"nesterov", nesterov_},
          {"maximize", maximize_}};
}

void SGDOptions::from_map(const std::map<std::string, double>& v) {
  lr_ = v.at("lr");
  momentum_ = v.at("momentum");
  dampening_ = v.at("dampening");
  weight_decay_ = v.at("weight_decay");
  nesterov_ = v.at("nesterov") != 0;
  maximize_ = v.at("maximize") != 0;
}

void SGDOptions::validate() const {
  EMBER_CHECK(lr_ >= 0, "SGD: invalid lr ", lr_, " (must be >= 0)");
  EMBER_CHECK(momentum_ >= 0, "SGD: invalid momentum ", momentum_, " (must be >= 0)");
  EMBER_CHECK(weight_decay_ >= 0, "SGD: invalid weight_decay ", weight_decay_, " (must be >= 0)");
  EMBER_CHECK(!nesterov_ || (momentum_ > 0 && dampening_ == 0),
              "SGD: nesterov momentum requires a momentum > 0 and zero dampening, got momentum ", momentum_,
              " and dampening ", dampening_);
}

SGD::SGD(std::vector<Tensor> params, const SGDOptions& options)
    : SGD(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options) {}

SGD::SGD(std::vector<ParamGroup> groups, const SGDOptions& options)
    : Optimizer("SGD", std::move(groups), options.clone()) {}

Tensor SGD::step(const std::function<Tensor()>& closure) {
  const Tensor loss = evaluate(closure);
  NoGradGuard no_grad;
  for (auto& group : param_groups()) {
    const auto& o = static_cast<const SGDOptions&>(group.options());
    FusedOperands operands;
    PerDevice<SgdParam> batches;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      ParamState& state = state_of(p);
      const auto [param, grad] = operands.prepare(p);
      // The buffer's first value is the gradient (the kernel sees step count 1).
      const Tensor buffer = o.momentum() != 0 ? state.buffer("momentum_buffer", p) : Tensor();
      batches[p.device()].push_back(SgdParam{param, grad, buffer, state.step_count(p)});
    }
    for (auto& [device, items] : batches) {
      const SgdStep s{o.lr(),       o.momentum(), o.dampening(),       o.weight_decay(),
                      o.nesterov(), o.maximize(), found_inf_on(device)};
      backend(device).sgd_step(items, s);
    }
    operands.finish();
  }
  return loss;
}

}  // namespace ember::optim
