#pragma once
// Weight initialisation (torch.nn.init). Every function fills `tensor` in place without
// recording on the tape, draws from ember's Philox generator, and returns the tensor.
// fan_in/fan_out of a [out, in, k...] weight are in * prod(k) and out * prod(k).
#include <string>
#include <utility>

#include "ember/tensor/tensor.h"

namespace ember::nn::init {

// PyTorch's recommended gains: linear/conv/sigmoid 1, tanh 5/3, relu √2,
// leaky_relu √(2 / (1 + a²)) with a = param (default 0.01), selu 3/4.
double calculate_gain(const std::string& nonlinearity, double param = 0.01);
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& tensor);

Tensor& uniform_(Tensor& tensor, double a = 0.0, double b = 1.0);
Tensor& normal_(Tensor& tensor, double mean = 0.0, double std = 1.0);
Tensor& constant_(Tensor& tensor, double value);
Tensor& zeros_(Tensor& tensor);
Tensor& ones_(Tensor& tensor);
// U(-b, b) with b = gain · √(6 / (fan_in + fan_out)).
Tensor& xavier_uniform_(Tensor& tensor, double gain = 1.0);
// N(0, σ²) with σ = gain · √(2 / (fan_in + fan_out)).
Tensor& xavier_normal_(Tensor& tensor, double gain = 1.0);
// U(-b, b) with b = gain · √(3 / fan), gain = calculate_gain(nonlinearity, a),
// fan = fan_in (mode "fan_in") or fan_out (mode "fan_out").
Tensor& kaiming_uniform_(Tensor& tensor, double a = 0.0, const std::string& mode = "fan_in",
                         const std::string& nonlinearity = "leaky_relu");
// N(0, σ²) with σ = gain / √fan.
Tensor& kaiming_normal_(Tensor& tensor, double a = 0.0, const std::string& mode = "fan_in",
                        const std::string& nonlinearity = "leaky_relu");

}  // namespace ember::nn::init
