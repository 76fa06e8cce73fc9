#include "ember/nn/modules/activation.h"

namespace ember::nn {

GELUImpl::GELUImpl(std::string approximate) : Module("GELU"), approximate_(std::move(approximate)) {
  EMBER_CHECK(approximate_ == "none" || approximate_ == "tanh", "GELU: approximate must be 'none' or 'tanh', got '",
              approximate_, "'");
}

void GELUImpl::pretty_print(std::ostream& os) const {
  os << "GELU";
  if (approximate_ != "none") os << "(approximate='" << approximate_ << "')";
}

DropoutImpl::DropoutImpl(double p) : Module("Dropout"), p_(p) {
  EMBER_CHECK(p >= 0 && p <= 1, "Dropout: p must be in [0, 1], got ", p);
}

}  // namespace ember::nn
