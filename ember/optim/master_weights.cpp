// Float32 master weights (Note [Master weights]).
#include "ember/optim/master_weights.h"

#include "ember/autograd/functions.h"
#include "ember/autograd/grad_mode.h"

namespace ember::optim {

MasterWeights::MasterWeights(std::vector<Tensor> model_params) : model_(std::move(model_params)) {
  NoGradGuard no_grad;
  for (const Tensor& p : model_) {
    EMBER_CHECK(p.defined() && p.is_floating_point(), "MasterWeights: parameters must be floating point, got ",
                p.defined() ? dtype_name(p.dtype()) : "an undefined tensor");
    if (p.dtype() == kFloat32) {
      master_.push_back(p);
      continue;
    }
    Tensor m = p.to(kFloat32, /*copy=*/true);
    m.set_requires_grad(true);
    master_.push_back(m);
  }
}

void MasterWeights::copy_grads_to_master() {
  NoGradGuard no_grad;
  for (size_t i = 0; i < model_.size(); ++i) {
    if (master_[i].is_same(model_[i])) continue;
    const Tensor& g = model_[i].grad();
    if (!g.defined()) continue;
    Tensor& mg = master_[i].mutable_grad();
    if (mg.defined())
      mg.copy_(g);
    else
      mg = g.to(kFloat32, /*copy=*/true);
  }
}

void MasterWeights::copy_master_to_model() {
  NoGradGuard no_grad;
  for (size_t i = 0; i < model_.size(); ++i)
    if (!master_[i].is_same(model_[i])) model_[i].copy_(master_[i]);
}

void MasterWeights::zero_model_grads() {
  for (Tensor& p : model_) p.mutable_grad() = Tensor();
}

int64_t MasterWeights::bytes() const {
  int64_t n = 0;
  for (size_t i = 0; i < model_.size(); ++i)
    if (!master_[i].is_same(model_[i])) n += static_cast<int64_t>(master_[i].nbytes());
  return n;
}

}  // namespace ember::optim
