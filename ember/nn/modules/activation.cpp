#include "ember/nn/modules/activation.h"

#include "ember/autograd/grad_mode.h"

namespace ember::nn {

Tensor ReLUImpl::forward(const Tensor& x) {
  if (options.inplace_ && !(GradMode::is_enabled() && x.requires_grad())) {
    Tensor self = x;
    return self.relu_();
  }
  return relu(x);
}

GELUImpl::GELUImpl(std::string approximate) : Module("GELU"), approximate_(std::move(approximate)) {
  EMBER_CHECK(approximate_ == "none" || approximate_ == "tanh", "GELU: approximate must be 'none' or 'tanh', got '",
              approximate_, "'");
}

void GELUImpl::pretty_print(std::ostream& os) const {
  os << "GELU";
  if (approximate_ != "none") os << "(approximate='" << approximate_ << "')";
}

DropoutImpl::DropoutImpl(const DropoutOptions& options) : Module("Dropout"), options(options) {
  EMBER_CHECK(p() >= 0 && p() <= 1, "Dropout: p must be in [0, 1], got ", p());
}

Dropout2dImpl::Dropout2dImpl(const Dropout2dOptions& options) : Module("Dropout2d"), options(options) {
  EMBER_CHECK(p() >= 0 && p() <= 1, "Dropout2d: p must be in [0, 1], got ", p());
}

FunctionalImpl::FunctionalImpl(Function function) : Module("Functional"), function_(std::move(function)) {
  EMBER_CHECK(function_ != nullptr, "Functional: the function is empty");
}

UpsampleImpl::UpsampleImpl(const UpsampleOptions& options) : Module("Upsample"), options(options) {
  EMBER_CHECK(options.size_.has_value() != options.scale_factor_.has_value(),
              "Upsample: give exactly one of size and scale_factor");
}

void UpsampleImpl::pretty_print(std::ostream& os) const {
  os << "Upsample(";
  if (options.size_) os << "size=" << shape_str(*options.size_);
  if (options.scale_factor_) {
    os << "scale_factor=";
    for (size_t i = 0; i < options.scale_factor_->size(); ++i) os << (i ? ", " : "") << (*options.scale_factor_)[i];
  }
  os << ", mode='" << options.mode_ << "')";
}

PReLUImpl::PReLUImpl(const PReLUOptions& o) : Module("PReLU"), options(o) {
  EMBER_CHECK(o.num_parameters_ > 0, "PReLU: num_parameters must be > 0, got ", o.num_parameters_);
  weight = register_parameter("weight", empty({o.num_parameters_}));
  bind_attribute("weight", weight);  // Note [Tensor attributes]
  reset_parameters();
}

void PReLUImpl::reset_parameters() {
  NoGradGuard no_grad;
  weight.fill_(options.init_);
}

void PReLUImpl::pretty_print(std::ostream& os) const {
  os << "PReLU(num_parameters=" << options.num_parameters_ << ")";
}

}  // namespace ember::nn
