// GradScaler (Note [GradScaler]): PyTorch's algorithm, with the unscale and the scale update as
// device kernels (native::amp_unscale_, native::amp_update_scale_).
#include "ember/optim/grad_scaler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ember/autograd/functions.h"
#include "ember/autograd/grad_mode.h"

namespace ember::amp {

// The growth tracker is an int32 on the device, as PyTorch's: the interval must fit it.
constexpr int64_t kMaxGrowthInterval = std::numeric_limits<int32_t>::max();

GradScaler::GradScaler(GradScalerOptions options) : options_(std::move(options)) {
  EMBER_CHECK(std::isfinite(options_.init_scale()) && options_.init_scale() > 0,
              "GradScaler: init_scale must be positive and finite, got ", options_.init_scale());
  EMBER_CHECK(std::isfinite(options_.growth_factor()) && options_.growth_factor() > 1.0,
              "GradScaler: the growth factor must be > 1.0 and finite, got ", options_.growth_factor());
  EMBER_CHECK(options_.backoff_factor() < 1.0 && options_.backoff_factor() > 0,
              "GradScaler: the backoff factor must be in (0, 1), got ", options_.backoff_factor());
  EMBER_CHECK(options_.growth_interval() > 0 && options_.growth_interval() <= kMaxGrowthInterval,
              "GradScaler: growth_interval must be in [1, ", kMaxGrowthInterval, "], got ", options_.growth_interval());
}

namespace {
// The sum of inf flags on `device` (device-to-device copies, no host read); undefined for none.
Tensor sum_on(const std::vector<Tensor>& flags, Device device) {
  Tensor sum;
  for (const Tensor& f : flags) {
    const Tensor here = f.to(device);
    sum = sum.defined() ? sum + here : here;
  }
  return sum;
}
}  // namespace

void GradScaler::lazy_init(Device device) {
  if (scale_.defined()) return;
  scale_ = full({}, options_.init_scale(), TensorOptions(kFloat32).device(device));
  growth_tracker_ = full({}, init_growth_tracker_, TensorOptions(kInt32).device(device));
  skipped_ = zeros({}, TensorOptions(kInt64).device(device));
}

Tensor GradScaler::scale(const Tensor& outputs) {
  if (!is_enabled()) return outputs;
  EMBER_CHECK(outputs.defined(), "GradScaler.scale: the tensor to scale is undefined");
  lazy_init(outputs.device());
  return outputs * (scale_.device() == outputs.device() ? scale_ : scale_.to(outputs.device()));
}

std::vector<Tensor> GradScaler::scale(const std::vector<Tensor>& outputs) {
  std::vector<Tensor> out;
  for (const Tensor& t : outputs) out.push_back(scale(t));
  return out;
}

void GradScaler::unscale_(optim::Optimizer& optimizer) {
  if (!is_enabled()) return;
  PerOptimizer& state = per_optimizer_[&optimizer];
  EMBER_CHECK(state.stage != Stage::unscaled,
              "GradScaler.unscale_: unscale_() has already been called on this optimizer since the last update()");
  EMBER_CHECK(state.stage != Stage::stepped, "GradScaler.unscale_: unscale_() is being called after step()");
  // A rank of a group may have scaled nothing: an earlier pipeline stage, whose gradients came
  // scaled from the later stages. Its scale starts where theirs does and moves with theirs.
  if (!scale_.defined() && options_.process_group()) {
    const auto params = optimizer.parameters();
    const auto with_grad =
        std::find_if(params.begin(), params.end(), [](const Tensor& p) { return p.grad().defined(); });
    lazy_init(with_grad != params.end() ? with_grad->grad().device() : Device(kCPU));
  }
  EMBER_CHECK(scale_.defined(),
              "GradScaler.unscale_: no loss was scaled in this iteration (call scaler.scale(loss) before backward)");
  NoGradGuard no_grad;
  const Tensor inv_scale = scale_.to(kFloat64).reciprocal().to(kFloat32);  // float32(1 / float64(scale))
  std::vector<std::pair<Device, TensorList>> per_device;
  for (const Tensor& p : optimizer.parameters()) {
    const Tensor& g = p.grad();
    if (!g.defined()) continue;
    EMBER_CHECK(g.dtype() != kFloat16,
                "GradScaler.unscale_: attempting to unscale float16 gradients; keep float32 parameters (autocast "
                "casts them for the ops that run in float16)");
    auto it = std::find_if(per_device.begin(), per_device.end(), [&](const auto& d) { return d.first == g.device(); });
    if (it == per_device.end()) it = per_device.insert(per_device.end(), {g.device(), {}});
    it->second.push_back(g);
  }
  for (auto& [device, grads] : per_device) {
    const Tensor found_inf = zeros({}, TensorOptions(kFloat32).device(device));
    native::amp_unscale_(grads, found_inf, inv_scale.device() == device ? inv_scale : inv_scale.to(device));
    state.found_inf.push_back(found_inf);
  }
  if (const auto& group = options_.process_group()) {
    // One flag on the scale's device, the max over the ranks (a rank without gradients joins
    // with a zero): every rank then skips or steps together, and their scales stay equal.
    Tensor agreed = sum_on(state.found_inf, scale_.device());
    if (!agreed.defined()) agreed = zeros({}, TensorOptions(kFloat32).device(scale_.device()));
    group->all_reduce(agreed, distributed::ReduceOp::MAX)->wait();
    state.found_inf = {agreed};
  }
  state.stage = Stage::unscaled;
}

void GradScaler::step(optim::Optimizer& optimizer) {
  if (!is_enabled()) {
    optimizer.step();
    return;
  }
  PerOptimizer& state = per_optimizer_[&optimizer];
  EMBER_CHECK(state.stage != Stage::stepped, "GradScaler.step: step() has already been called since the last update()");
  if (state.stage == Stage::ready) unscale_(optimizer);
  EMBER_CHECK(
      !state.found_inf.empty(),
      "GradScaler.step: no inf checks were recorded for this optimizer (none of its parameters has a gradient)");
  state.stage = Stage::stepped;
  // One flag for all the optimizer's devices, on the first one's (device-to-device copies).
  NoGradGuard no_grad;
  optimizer.step_unless(sum_on(state.found_inf, state.found_inf.front().device()));
}

void GradScaler::update(std::optional<double> new_scale) {
  if (!is_enabled()) return;
  EMBER_CHECK(scale_.defined(),
              "GradScaler.update: no loss was scaled in this iteration (call scaler.scale(loss) before backward)");
  NoGradGuard no_grad;
  std::vector<Tensor> flags;  // every inf flag of this iteration
  for (const auto& [opt, state] : per_optimizer_)
    flags.insert(flags.end(), state.found_inf.begin(), state.found_inf.end());
  const Tensor found = sum_on(flags, scale_.device());
  if (new_scale) {
    // PyTorch takes any float here; a NaN, infinite or non-positive scale would skip every step after it
    EMBER_CHECK(std::isfinite(*new_scale) && *new_scale > 0,
                "GradScaler.update: new_scale must be positive and finite, got ", *new_scale);
    scale_.fill_(*new_scale);
  } else {
    EMBER_CHECK(found.defined(), "GradScaler.update: no inf checks were recorded prior to update()");
    native::amp_update_scale_(scale_, growth_tracker_, found, options_.growth_factor(), options_.backoff_factor(),
                              options_.growth_interval());
  }
  if (found.defined()) skipped_.add_(found.ne(0).to(kInt64));
  per_optimizer_.clear();
}

double GradScaler::get_scale() const {
  if (!is_enabled()) return 1.0;
  return scale_.defined() ? scale_.item<double>() : options_.init_scale();
}

int64_t GradScaler::growth_tracker() const {
  return growth_tracker_.defined() ? growth_tracker_.item<int64_t>() : init_growth_tracker_;
}

int64_t GradScaler::skipped_steps() const { return skipped_.defined() ? skipped_.item<int64_t>() : 0; }

std::map<std::string, double> GradScaler::state_dict() const {
  if (!is_enabled()) return {};
  return {{"scale", get_scale()},
          {"growth_factor", options_.growth_factor()},
          {"backoff_factor", options_.backoff_factor()},
          {"growth_interval", static_cast<double>(options_.growth_interval())},
          {"_growth_tracker", static_cast<double>(growth_tracker())}};
}

void GradScaler::load_state_dict(const std::map<std::string, double>& state) {
  EMBER_CHECK(is_enabled(), "GradScaler.load_state_dict: this scaler is disabled");
  EMBER_CHECK(!state.empty(), "GradScaler.load_state_dict: the state is empty (it was saved from a disabled scaler)");
  auto value = [&](const char* key) {
    auto it = state.find(key);
    EMBER_CHECK(it != state.end(), "GradScaler.load_state_dict: the state has no '", key, "'");
    return it->second;
  };
  const double scale = value("scale"), growth = value("growth_factor"), backoff = value("backoff_factor");
  const int64_t interval = optim::whole_number(value("growth_interval"), 1, kMaxGrowthInterval,
                                               "GradScaler.load_state_dict: 'growth_interval'");
  const int64_t tracker =
      optim::whole_number(value("_growth_tracker"), 0, interval - 1, "GradScaler.load_state_dict: '_growth_tracker'");
  GradScalerOptions loaded = options_;
  loaded.init_scale(scale).growth_factor(growth).backoff_factor(backoff).growth_interval(interval);
  *this = GradScaler(loaded);  // validates the values
  init_growth_tracker_ = tracker;
}

}  // namespace ember::amp
