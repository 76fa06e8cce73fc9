#include "ember/optim/optimizer.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "ember/autograd/grad_mode.h"
#include "ember/tensor/ops.h"

namespace ember::optim {

int64_t whole_number(double value, int64_t lo, int64_t hi, const std::string& what) {
  EMBER_CHECK(value >= static_cast<double>(lo) && value <= static_cast<double>(hi) && value == std::floor(value), what,
              " must be a whole number in [", lo, ", ", hi, "], got ", value);
  return static_cast<int64_t>(value);
}

Optimizer::Optimizer(std::string type_name, std::vector<ParamGroup> groups, std::unique_ptr<OptimizerOptions> defaults)
    : type_name_(std::move(type_name)), defaults_(std::move(defaults)) {
  EMBER_ASSERT(defaults_ != nullptr, "optimizer without defaults");
  defaults_->validate();
  for (auto& g : groups) add_param_group(std::move(g));
}

void Optimizer::add_param_group(ParamGroup group) {
  EMBER_CHECK(!group.params().empty(), type_name_, ": a parameter group has no parameters");
  std::unordered_set<const TensorImpl*> seen;
  for (const auto& g : groups_)
    for (const auto& p : g.params()) seen.insert(p.impl().get());
  for (const auto& p : group.params()) {
    EMBER_CHECK(p.defined(), type_name_, ": a parameter is undefined");
    EMBER_CHECK(p.is_leaf(), type_name_, ": can only optimize leaf tensors (a parameter has a grad_fn)");
    EMBER_CHECK(p.is_floating_point(), type_name_, ": can only optimize floating tensors, got ", p.dtype());
    EMBER_CHECK(seen.insert(p.impl().get()).second, type_name_,
                ": a parameter appears twice (in one group or in two groups)");
  }
  if (!group.has_options()) group.set_options(defaults_->clone());
  group.options().validate();
  groups_.push_back(std::move(group));
}

std::vector<Tensor> Optimizer::parameters() const {
  std::vector<Tensor> out;
  for (const auto& g : groups_) out.insert(out.end(), g.params().begin(), g.params().end());
  return out;
}

void Optimizer::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (auto& g : groups_)
    for (auto& p : g.params()) {
      if (!p.grad().defined()) continue;
      if (set_to_none)
        p.mutable_grad() = Tensor();
      else
        p.mutable_grad().zero_();
    }
}

OptimizerState Optimizer::state_dict() const {
  OptimizerState out;
  out.metadata["optimizer"] = type_name_;
  nlohmann::ordered_json groups = nlohmann::ordered_json::array();
  int64_t index = 0;
  for (const auto& g : groups_) {
    nlohmann::ordered_json group;
    for (const auto& [k, v] : g.options().to_map()) group["options"][k] = v;
    group["params"] = nlohmann::ordered_json::array();
    for (const auto& p : g.params()) {
      group["params"].push_back(index);
      auto it = state_.find(p.impl().get());
      if (it != state_.end()) {
        const std::string prefix = "state." + std::to_string(index) + ".";
        const Tensor& step = it->second.step;
        out.metadata[prefix + "step"] = std::to_string(step.defined() ? step.item<int64_t>() : 0);
        for (const auto& b : it->second.buffers) out.tensors.insert(prefix + b.key(), b.value());
      }
      ++index;
    }
    groups.push_back(group);
  }
  out.metadata["param_groups"] = groups.dump();
  save_extra(out);
  return out;
}

void Optimizer::load_state_dict(const OptimizerState& state) {
  auto meta = [&](const std::string& key) -> const std::string& {
    auto it = state.metadata.find(key);
    EMBER_CHECK(it != state.metadata.end(), type_name_, ".load_state_dict: the state has no '", key, "' entry");
    return it->second;
  };
  EMBER_CHECK(meta("optimizer") == type_name_, type_name_, ".load_state_dict: the state was saved by ",
              meta("optimizer"));
  nlohmann::json groups;
  try {
    groups = nlohmann::json::parse(meta("param_groups"));
  } catch (const nlohmann::json::exception& e) {
    throw Error(type_name_ + ".load_state_dict: param_groups is not valid JSON: " + e.what());
  }
  EMBER_CHECK(groups.is_array() && groups.size() == groups_.size(), type_name_, ".load_state_dict: the state has ",
              groups.is_array() ? groups.size() : 0, " parameter groups, the optimizer ", groups_.size());
  // Validate everything first, so that a failed load leaves the optimizer unchanged.
  std::vector<std::unique_ptr<OptimizerOptions>> new_options;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const auto& g = groups[gi];
    EMBER_CHECK(g.is_object() && g.contains("params") && g["params"].is_array() && g.contains("options") &&
                    g["options"].is_object(),
                type_name_, ".load_state_dict: parameter group ", gi, " is malformed");
    EMBER_CHECK(g["params"].size() == groups_[gi].params().size(), type_name_, ".load_state_dict: parameter group ", gi,
                " has ", g["params"].size(), " parameters in the state, ", groups_[gi].params().size(),
                " in the optimizer");
    std::map<std::string, double> values;
    for (const auto& [k, v] : g["options"].items()) {
      EMBER_CHECK(v.is_number(), type_name_, ".load_state_dict: option '", k, "' is not a number");
      values[k] = v.get<double>();  // JSON has no NaN or inf, and its parser refuses overflow
    }
    // Every option the group has must be in the state (from_map reads them all).
    for (const auto& [k, v] : groups_[gi].options().to_map())
      EMBER_CHECK(values.count(k), type_name_, ".load_state_dict: parameter group ", gi, " has no option '", k,
                  "' in the state");
    auto options = groups_[gi].options().clone();
    options->from_map(values);
    options->validate();
    new_options.push_back(std::move(options));
  }
  std::unordered_map<TensorImpl*, ParamState> new_state;
  int64_t index = 0;
  for (const auto& g : groups_)
    for (const auto& p : g.params()) {
      const std::string prefix = "state." + std::to_string(index++) + ".";
      auto step = state.metadata.find(prefix + "step");
      if (step == state.metadata.end()) continue;
      ParamState s;
      int64_t steps = 0;
      try {
        size_t used = 0;
        steps = std::stoll(step->second, &used);
        EMBER_CHECK(used == step->second.size() && steps >= 0, "");
      } catch (const std::exception&) {
        throw Error(type_name_ + ".load_state_dict: '" + prefix + "step' is not a non-negative integer: '" +
                    step->second + "'");
      }
      s.step = full({}, steps, TensorOptions(kInt64).device(p.device()));
      for (const auto& item : state.tensors) {
        if (item.key().compare(0, prefix.size(), prefix) != 0) continue;
        EMBER_CHECK(item.value().sizes() == p.sizes(), type_name_, ".load_state_dict: '", item.key(), "' has shape ",
                    shape_str(item.value().sizes()), " but its parameter has shape ", shape_str(p.sizes()));
        s.buffers.insert(item.key().substr(prefix.size()), item.value().to(p.device(), p.dtype(), false, true));
      }
      new_state.emplace(p.impl().get(), std::move(s));
    }
  load_extra(state);
  for (size_t gi = 0; gi < groups_.size(); ++gi) groups_[gi].set_options(std::move(new_options[gi]));
  state_ = std::move(new_state);
}

Tensor Optimizer::ParamState::buffer(const char* name, const Tensor& param) {
  if (Tensor* b = buffers.find(name)) return *b;
  return buffers.insert(name, zeros(param.sizes(), TensorOptions(param.dtype()).device(param.device())));
}

const Tensor& Optimizer::ParamState::step_count(const Tensor& param) {
  if (!step.defined()) step = zeros({}, TensorOptions(kInt64).device(param.device()));
  return step;
}

void Optimizer::step_unless(const Tensor& found_inf) {
  EMBER_CHECK(found_inf.defined() && found_inf.numel() == 1 && found_inf.dtype() == kFloat32, type_name_,
              ".step_unless: found_inf must be one float32, got ",
              found_inf.defined() ? shape_str(found_inf.sizes()) : "an undefined tensor", " ",
              found_inf.defined() ? dtype_name(found_inf.dtype()) : "");
  if (!skips_on_device()) {
    if (found_inf.item<float>() == 0) step();
    return;
  }
  struct Reset {
    Tensor& flag;
    ~Reset() { flag = Tensor(); }
  } reset{found_inf_};
  found_inf_ = found_inf;
  step();
}

Tensor Optimizer::found_inf_on(Device device) const {
  if (!found_inf_.defined() || found_inf_.device() == device) return found_inf_;
  return found_inf_.to(device);  // device to device: no host read
}

Tensor Optimizer::evaluate(const std::function<Tensor()>& closure) {
  if (!closure) return Tensor();
  EnableGradGuard grad;
  return closure();
}

FusedOperands::Operand FusedOperands::prepare(const Tensor& param) {
  const Tensor& grad = param.grad();
  EMBER_CHECK(grad.sizes() == param.sizes(), "optimizer step: the gradient has shape ", shape_str(grad.sizes()),
              " but the parameter has shape ", shape_str(param.sizes()));
  EMBER_CHECK(grad.dtype() == param.dtype() && grad.device() == param.device(), "optimizer step: the gradient is ",
              grad.dtype(), " on ", grad.device(), ", the parameter ", param.dtype(), " on ", param.device());
  params_.push_back(param);
  if (param.is_contiguous()) return {param, grad.contiguous()};
  Tensor stand_in = param.contiguous();
  stand_ins_.emplace_back(param, stand_in);
  return {stand_in, grad.contiguous()};
}

void FusedOperands::finish() {
  for (auto& [param, stand_in] : stand_ins_) native::copy_(param, stand_in);
  for (const auto& p : params_) p.bump_version();
  params_.clear();
  stand_ins_.clear();
}

}  // namespace ember::optim
