// The GradScaler's native ops: argument checks, then one kernel call per device.
#include "ember/tensor/ops/internal.h"

namespace ember::native {
namespace {
void check_one(const Tensor& t, DType dtype, const char* op, const char* what) {
  ops::check_defined(t, op, what);
  EMBER_CHECK(t.dtype() == dtype && t.numel() == 1, op, ": ", what, " must be one ", dtype, " element, got ", t.dtype(),
              " of shape ", shape_str(t.sizes()));
}
}  // namespace

void amp_unscale_(const TensorList& grads, const Tensor& found_inf, const Tensor& inv_scale) {
  check_one(found_inf, kFloat32, "amp_unscale_", "found_inf");
  check_one(inv_scale, kFloat32, "amp_unscale_", "inv_scale");
  ops::check_same_device({&found_inf, &inv_scale}, "amp_unscale_");
  TensorList dense;
  std::vector<std::pair<Tensor, Tensor>> copies;  // (gradient, its dense stand-in)
  for (const Tensor& g : grads) {
    ops::check_defined(g, "amp_unscale_", "gradient");
    EMBER_CHECK(g.is_floating_point(), "amp_unscale_: gradients must be floating point, got ", g.dtype());
    ops::check_same_device({&g, &found_inf}, "amp_unscale_");
    if (g.numel() == 0) continue;
    if (g.is_contiguous()) {
      dense.push_back(g);
    } else {
      dense.push_back(clone(g));
      copies.emplace_back(g, dense.back());
    }
  }
  if (dense.empty()) return;
  backend(found_inf.device()).amp_unscale(dense, found_inf, inv_scale);
  for (auto& [g, stand_in] : copies) {
    Tensor target = g;
    copy_(target, stand_in);
  }
}

void amp_update_scale_(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf, double growth,
                       double backoff, int64_t interval) {
  check_one(scale, kFloat32, "amp_update_scale_", "scale");
  check_one(growth_tracker, kInt32, "amp_update_scale_", "growth_tracker");
  check_one(found_inf, kFloat32, "amp_update_scale_", "found_inf");
  ops::check_same_device({&scale, &growth_tracker, &found_inf}, "amp_update_scale_");
  EMBER_CHECK(interval > 0, "amp_update_scale_: growth_interval must be positive, got ", interval);
  backend(scale.device()).amp_update_scale(scale, growth_tracker, found_inf, growth, backoff, interval);
}

}  // namespace ember::native
