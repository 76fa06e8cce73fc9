#include "ember/optim/rmsprop.h"

#include "ember/autograd/grad_mode.h"
#include "ember/tensor/backend.h"
#include "ember/tensor/ops.h"

namespace ember::optim {

std::map<std::string, double> RMSpropOptions::to_map() const {
  return {{"lr", lr_},
          {"alpha", alpha_},
          {"eps", eps_},
          {"weight_decay", weight_decay_},
          {"momentum", momentum_},
          {"centered", centered_},
          {"maximize", maximize_}};
}

void RMSpropOptions::from_map(const std::map<std::string, double>& v) {
  lr_ = v.at("lr");
  alpha_ = v.at("alpha");
  eps_ = v.at("eps");
  weight_decay_ = v.at("weight_decay");
  momentum_ = v.at("momentum");
  centered_ = v.at("centered") != 0;
  maximize_ = v.at("maximize") != 0;
}

void RMSpropOptions::validate() const {
  EMBER_CHECK(lr_ >= 0, "RMSprop: invalid lr ", lr_, " (must be >= 0)");
  EMBER_CHECK(eps_ >= 0, "RMSprop: invalid eps ", eps_, " (must be >= 0)");
  EMBER_CHECK(momentum_ >= 0, "RMSprop: invalid momentum ", momentum_, " (must be >= 0)");
  EMBER_CHECK(weight_decay_ >= 0, "RMSprop: invalid weight_decay ", weight_decay_, " (must be >= 0)");
  EMBER_CHECK(alpha_ >= 0, "RMSprop: invalid alpha ", alpha_, " (must be >= 0)");
}

RMSprop::RMSprop(std::vector<Tensor> params, const RMSpropOptions& options)
    : RMSprop(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options) {}
RMSprop::RMSprop(std::vector<ParamGroup> groups, const RMSpropOptions& options)
    : Optimizer("RMSprop", std::move(groups), options.clone()) {}

Tensor RMSprop::step(const std::function<Tensor()>& closure) {
  const Tensor loss = evaluate(closure);
  NoGradGuard no_grad;
  for (auto& group : param_groups()) {
    const auto& o = static_cast<const RMSpropOptions&>(group.options());
    FusedOperands operands;
    PerDevice<RmspropParam> batches;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      ParamState& state = state_of(p);
      const Tensor square_avg = state.buffer("square_avg", p);
      const Tensor grad_avg = o.centered() ? state.buffer("grad_avg", p) : Tensor();
      const Tensor momentum_buffer = o.momentum() > 0 ? state.buffer("momentum_buffer", p) : Tensor();
      const auto [param, grad] = operands.prepare(p);
      batches[p.device()].push_back(
          RmspropParam{param, grad, square_avg, grad_avg, momentum_buffer, state.step_count(p)});
    }
    for (auto& [device, items] : batches) {
      const RmspropStep s{o.lr(),       o.alpha(),    o.eps(),      o.weight_decay(),
                          o.momentum(), o.centered(), o.maximize(), found_inf_on(device)};
      backend(device).rmsprop_step(items, s);
    }
    operands.finish();
  }
  return loss;
}

}  // namespace ember::optim
