#include "ember/nn/utils.h"

#include <cmath>
#include <limits>

#include "ember/autograd/functions.h"
#include "ember/autograd/grad_mode.h"

namespace ember::nn::utils {

namespace {

Tensor p_norm(const Tensor& g, double p) {
  if (p == 1.0 || p == 2.0 || std::isinf(p)) return g.norm(p);
  return g.abs().pow(p).sum().pow(1.0 / p);
}

}  // namespace

Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  EMBER_CHECK(norm_type > 0, "clip_grad_norm_: norm_type must be > 0, got ", norm_type);
  EMBER_CHECK(max_norm >= 0, "clip_grad_norm_: max_norm must be >= 0, got ", max_norm);
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (const auto& p : parameters)
    if (p.defined() && p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return zeros({});
  // The norm of all gradients as one vector = the norm of the per-tensor norms.
  std::vector<Tensor> norms;
  for (const auto& g : grads) {
    EMBER_CHECK(g.device() == grads[0].device(), "clip_grad_norm_: gradients on ", grads[0].device(), " and ",
                g.device());
    norms.push_back(p_norm(g, norm_type).to(kFloat32));
  }
  const Tensor total = p_norm(stack(norms), norm_type);
  // Only the error check reads the norm on the host (on a GPU, a wait for every queued kernel);
  // the factor stays a tensor on the gradients' device, computed as PyTorch does, in float32.
  if (error_if_nonfinite) {
    const double total_value = total.item<double>();
    EMBER_CHECK(std::isfinite(total_value), "clip_grad_norm_: the total norm of order ", norm_type,
                " of the gradients is non-finite (", total_value,
                "), so it cannot be clipped; error_if_nonfinite=false scales them anyway");
  }
  const Tensor coef = (max_norm / (total + 1e-6)).clamp(std::nullopt, 1.0);
  for (auto& g : grads) {
    Tensor grad = g;
    grad.mul_(coef);  // unconditionally, as PyTorch does (a no-op factor of 1 when not clipping)
  }
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value) {
  EMBER_CHECK(clip_value >= 0, "clip_grad_value_: clip_value must be >= 0, got ", clip_value);
  NoGradGuard no_grad;
  for (const auto& p : parameters) {
    if (!p.defined() || !p.grad().defined()) continue;
    Tensor grad = p.grad();
    grad.clamp_(-clip_value, clip_value);
  }
}

Tensor parameters_to_vector(const std::vector<Tensor>& parameters) {
  std::vector<Tensor> flat;
  for (size_t i = 0; i < parameters.size(); ++i) {
    const Tensor& p = parameters[i];
    EMBER_CHECK(p.defined(), "parameters_to_vector: parameter ", i, " is undefined");
    EMBER_CHECK(p.device() == parameters[0].device(), "parameters_to_vector: parameter ", i, " is on ", p.device(),
                ", parameter 0 on ", parameters[0].device(), "; all must be on one device");
    flat.push_back(p.reshape({-1}));
  }
  EMBER_CHECK(!flat.empty(), "parameters_to_vector: no parameters");
  return cat(flat, 0);
}

void vector_to_parameters(const Tensor& vec, const std::vector<Tensor>& parameters) {
  EMBER_CHECK(vec.defined() && vec.dim() == 1, "vector_to_parameters: expected a 1-D vector, got ",
              vec.defined() ? shape_str(vec.sizes()) : std::string("an undefined tensor"));
  int64_t total = 0;
  for (const Tensor& p : parameters) {
    EMBER_CHECK(p.defined(), "vector_to_parameters: a parameter is undefined");
    total += p.numel();
  }
  EMBER_CHECK(total == vec.numel(), "vector_to_parameters: the parameters hold ", total, " elements, the vector ",
              vec.numel());
  NoGradGuard no_grad;
  int64_t offset = 0;
  for (const Tensor& p : parameters) {
    Tensor target = p.detach();
    target.copy_(vec.narrow(0, offset, p.numel()).view(p.sizes()));
    offset += p.numel();
  }
}

}  // namespace ember::nn::utils
