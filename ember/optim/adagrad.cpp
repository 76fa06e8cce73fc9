#include "ember/optim/adagrad.h"

#include "ember/autograd/grad_mode.h"
#include "ember/tensor/backend.h"
#include "ember/tensor/ops.h"

namespace ember::optim {

std::map<std::string, double> AdagradOptions::to_map() const {
  return {{"lr", lr_},
          {"lr_decay", lr_decay_},
          {"weight_decay", weight_decay_},
          {"initial_accumulator_value", initial_accumulator_value_},
          {"eps", eps_},
          {"maximize", maximize_}};
}

void AdagradOptions::from_map(const std::map<std::string, double>& v) {
  lr_ = v.at("lr");
  lr_decay_ = v.at("lr_decay");
  weight_decay_ = v.at("weight_decay");
  initial_accumulator_value_ = v.at("initial_accumulator_value");
  eps_ = v.at("eps");
  maximize_ = v.at("maximize") != 0;
}

void AdagradOptions::validate() const {
  EMBER_CHECK(lr_ >= 0, "Adagrad: invalid lr ", lr_, " (must be >= 0)");
  EMBER_CHECK(lr_decay_ >= 0, "Adagrad: invalid lr_decay ", lr_decay_, " (must be >= 0)");
  EMBER_CHECK(weight_decay_ >= 0, "Adagrad: invalid weight_decay ", weight_decay_, " (must be >= 0)");
  EMBER_CHECK(initial_accumulator_value_ >= 0, "Adagrad: invalid initial_accumulator_value ",
              initial_accumulator_value_, " (must be >= 0)");
  EMBER_CHECK(eps_ >= 0, "Adagrad: invalid eps ", eps_, " (must be >= 0)");
}

Adagrad::Adagrad(std::vector<Tensor> params, const AdagradOptions& options)
    : Adagrad(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options) {}
Adagrad::Adagrad(std::vector<ParamGroup> groups, const AdagradOptions& options)
    : Optimizer("Adagrad", std::move(groups), options.clone()) {}

Tensor Adagrad::step(const std::function<Tensor()>& closure) {
  const Tensor loss = evaluate(closure);
  NoGradGuard no_grad;
  for (auto& group : param_groups()) {
    const auto& o = static_cast<const AdagradOptions&>(group.options());
    FusedOperands operands;
    PerDevice<AdagradParam> batches;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      ParamState& state = state_of(p);
      // PyTorch fills the sum when the optimizer is built; ember at the first step that needs it
      // (a state dict loaded before that supplies its own).
      const bool fresh = state.buffers.find("sum") == nullptr;
      Tensor sum = state.buffer("sum", p);
      if (fresh && o.initial_accumulator_value() != 0) sum.fill_(o.initial_accumulator_value());
      const auto [param, grad] = operands.prepare(p);
      batches[p.device()].push_back(AdagradParam{param, grad, sum, state.step_count(p)});
    }
    for (auto& [device, items] : batches) {
      const AdagradStep s{o.lr(), o.lr_decay(), o.weight_decay(), o.eps(), o.maximize(), found_inf_on(device)};
      backend(device).adagrad_step(items, s);
    }
    operands.finish();
  }
  return loss;
}

}  // namespace ember::optim
