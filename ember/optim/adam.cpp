#include "ember/optim/adam.h"

#include "ember/autograd/grad_mode.h"
#include "ember/tensor/backend.h"
#include "ember/tensor/ops.h"

namespace ember::optim {

std::map<std::string, double> AdamOptions::to_map() const {
  return {{"lr", lr_},
          {"beta1", std::get<0>(betas_)},
          {"beta2", std::get<1>(betas_)},
          {"eps", eps_},
          {"weight_decay", weight_decay_},
          {"amsgrad", amsgrad_},
          {"maximize", maximize_}};
}

void AdamOptions::from_map(const std::map<std::string, double>& v) {
  lr_ = v.at("lr");
  betas_ = {v.at("beta1"), v.at("beta2")};
  eps_ = v.at("eps");
  weight_decay_ = v.at("weight_decay");
  amsgrad_ = v.at("amsgrad") != 0;
  maximize_ = v.at("maximize") != 0;
}

void AdamOptions::validate() const {
  EMBER_CHECK(lr_ >= 0, "Adam: invalid lr ", lr_, " (must be >= 0)");
  EMBER_CHECK(eps_ >= 0, "Adam: invalid eps ", eps_, " (must be >= 0)");
  const auto [b1, b2] = betas_;
  EMBER_CHECK(b1 >= 0 && b1 < 1, "Adam: invalid beta1 ", b1, " in betas (must be in [0, 1))");
  EMBER_CHECK(b2 >= 0 && b2 < 1, "Adam: invalid beta2 ", b2, " in betas (must be in [0, 1))");
  EMBER_CHECK(weight_decay_ >= 0, "Adam: invalid weight_decay ", weight_decay_, " (must be >= 0)");
}

Adam::Adam(std::vector<Tensor> params, const AdamOptions& options)
    : Adam(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options) {}
Adam::Adam(std::vector<ParamGroup> groups, const AdamOptions& options)
    : Adam("Adam", std::move(groups), options, false) {}
Adam::Adam(const char* type_name, std::vector<ParamGroup> groups, const AdamOptions& options, bool decoupled)
    : Optimizer(type_name, std::move(groups), options.clone()), decoupled_(decoupled) {}

AdamW::AdamW(std::vector<Tensor> params, const AdamWOptions& options)
    : AdamW(std::vector<ParamGroup>{ParamGroup(std::move(params))}, options) {}
AdamW::AdamW(std::vector<ParamGroup> groups, const AdamWOptions& options)
    : Adam("AdamW", std::move(groups), options, true) {}

Tensor Adam::step(const std::function<Tensor()>& closure) {
  const Tensor loss = evaluate(closure);
  NoGradGuard no_grad;
  for (auto& group : param_groups()) {
    const auto& o = static_cast<const AdamOptions&>(group.options());
    FusedOperands operands;
    PerDevice<AdamParam> batches;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      ParamState& state = state_of(p);
      const Tensor m = state.buffer("exp_avg", p), v = state.buffer("exp_avg_sq", p);
      const Tensor vmax = o.amsgrad() ? state.buffer("max_exp_avg_sq", p) : Tensor();
      const auto [param, grad] = operands.prepare(p);
      batches[p.device()].push_back(AdamParam{param, grad, m, v, vmax, state.step_count(p)});
    }
    for (auto& [device, items] : batches) {
      const AdamStep s{o.lr(),      std::get<0>(o.betas()), std::get<1>(o.betas()),
                       o.eps(),     o.weight_decay(),       decoupled_,
                       o.amsgrad(), o.maximize(),           found_inf_on(device)};
      backend(device).adam_step(items, s);
    }
    operands.finish();
  }
  return loss;
}

}  // namespace ember::optim
