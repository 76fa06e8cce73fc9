#include "ember/nn/modules/linear.h"

#include <cmath>

#include "ember/autograd/grad_mode.h"
#include "ember/nn/init.h"

namespace ember::nn {

LinearImpl::LinearImpl(int64_t in_features, int64_t out_features, bool bias)
    : LinearImpl(LinearOptions(in_features, out_features).bias(bias)) {}

LinearImpl::LinearImpl(const LinearOptions& o) : Module("Linear"), options(o) {
  EMBER_CHECK(o.in_features_ >= 0 && o.out_features_ >= 0,
              "Linear: features must be >= 0, got in_features=", o.in_features_, ", out_features=", o.out_features_);
  weight = register_parameter("weight", empty({o.out_features_, o.in_features_}));
  bind_attribute("weight", weight);  // Note [Tensor attributes]
  if (o.bias_) bias = register_parameter("bias", empty({o.out_features_}));
  bind_attribute("bias", bias);  // Note [Tensor attributes]
  reset_parameters();
}

void LinearImpl::reset_parameters() {
  if (weight.numel() == 0) return;
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(options.in_features_));
    init::uniform_(bias, -bound, bound);
  }
}

Tensor LinearImpl::forward(const Tensor& x) {
  EMBER_CHECK(x.dim() >= 1 && x.size(-1) == options.in_features_, "Linear: expects input [..., ", options.in_features_,
              "], got shape ", shape_str(x.sizes()));
  return linear(x, weight, bias);
}

void LinearImpl::pretty_print(std::ostream& os) const {
  os << "Linear(in_features=" << options.in_features_ << ", out_features=" << options.out_features_
     << ", bias=" << (options.bias_ ? "true" : "false") << ")";
}

}  // namespace ember::nn
