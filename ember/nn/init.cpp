#include "ember/nn/init.h"

#include <cmath>

#include "ember/autograd/grad_mode.h"
#include "ember/tensor/error.h"

namespace ember::nn::init {

double calculate_gain(const std::string& nonlinearity, double param) {
  if (nonlinearity == "linear" || nonlinearity == "conv2d" || nonlinearity == "sigmoid" || nonlinearity == "conv1d" ||
      nonlinearity == "conv3d")
    return 1.0;
  if (nonlinearity == "tanh") return 5.0 / 3.0;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") return std::sqrt(2.0 / (1.0 + param * param));
  if (nonlinearity == "selu") return 3.0 / 4.0;
  throw Error("calculate_gain: unsupported nonlinearity '" + nonlinearity + "'");
}

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& tensor) {
  EMBER_CHECK(tensor.defined() && tensor.dim() >= 2,
              "init: fan in and fan out need a tensor with at least 2 dimensions, got shape ",
              tensor.defined() ? shape_str(tensor.sizes()) : "undefined");
  int64_t receptive = 1;
  for (int64_t d = 2; d < tensor.dim(); ++d) receptive *= tensor.size(d);
  return {tensor.size(1) * receptive, tensor.size(0) * receptive};
}

namespace {

void check_floating(const Tensor& tensor, const char* fn) {
  EMBER_CHECK(tensor.defined(), "init.", fn, ": the tensor is undefined");
  EMBER_CHECK(tensor.is_floating_point(), "init.", fn, ": expects a floating tensor, got ", tensor.dtype());
}

int64_t fan_for(const Tensor& tensor, const std::string& mode, const char* fn) {
  EMBER_CHECK(mode == "fan_in" || mode == "fan_out", "init.", fn, ": mode must be 'fan_in' or 'fan_out', got '", mode,
              "'");
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(tensor);
  const int64_t fan = mode == "fan_in" ? fan_in : fan_out;
  EMBER_CHECK(fan > 0, "init.", fn, ": cannot initialise a tensor with zero elements, shape ",
              shape_str(tensor.sizes()));
  return fan;
}

}  // namespace

Tensor& uniform_(Tensor& tensor, double a, double b) {
  check_floating(tensor, "uniform_");
  NoGradGuard no_grad;
  return tensor.uniform_(a, b);
}

Tensor& normal_(Tensor& tensor, double mean, double std) {
  check_floating(tensor, "normal_");
  EMBER_CHECK(std >= 0, "init.normal_: std must be >= 0, got ", std);
  NoGradGuard no_grad;
  return tensor.normal_(mean, std);
}

Tensor& constant_(Tensor& tensor, double value) {
  EMBER_CHECK(tensor.defined(), "init.constant_: the tensor is undefined");
  NoGradGuard no_grad;
  return tensor.fill_(value);
}
Tensor& zeros_(Tensor& tensor) { return constant_(tensor, 0.0); }
Tensor& ones_(Tensor& tensor) { return constant_(tensor, 1.0); }

Tensor& xavier_uniform_(Tensor& tensor, double gain) {
  check_floating(tensor, "xavier_uniform_");
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(tensor);
  const double bound = gain * std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  return uniform_(tensor, -bound, bound);
}

Tensor& xavier_normal_(Tensor& tensor, double gain) {
  check_floating(tensor, "xavier_normal_");
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(tensor);
  return normal_(tensor, 0.0, gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out)));
}

Tensor& kaiming_uniform_(Tensor& tensor, double a, const std::string& mode, const std::string& nonlinearity) {
  check_floating(tensor, "kaiming_uniform_");
  const double fan = static_cast<double>(fan_for(tensor, mode, "kaiming_uniform_"));
  const double bound = calculate_gain(nonlinearity, a) * std::sqrt(3.0 / fan);
  return uniform_(tensor, -bound, bound);
}

Tensor& kaiming_normal_(Tensor& tensor, double a, const std::string& mode, const std::string& nonlinearity) {
  check_floating(tensor, "kaiming_normal_");
  const double fan = static_cast<double>(fan_for(tensor, mode, "kaiming_normal_"));
  return normal_(tensor, 0.0, calculate_gain(nonlinearity, a) / std::sqrt(fan));
}

}  // namespace ember::nn::init
