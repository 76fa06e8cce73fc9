#include "ember/nn/modules/conv_pool.h"

#include <cmath>

#include "ember/nn/init.h"

namespace ember::nn {

namespace {

std::ostream& operator<<(std::ostream& os, const Int2& v) { return os << "(" << v[0] << ", " << v[1] << ")"; }

}  // namespace

Conv2dImpl::Conv2dImpl(int64_t in_channels, int64_t out_channels, int64_t kernel_size)
    : Conv2dImpl(Conv2dOptions(in_channels, out_channels, kernel_size)) {}

Conv2dImpl::Conv2dImpl(const Conv2dOptions& o) : Module("Conv2d"), options(o) {
  EMBER_CHECK(o.in_channels_ > 0 && o.out_channels_ > 0,
              "Conv2d: channels must be > 0, got in_channels=", o.in_channels_, ", out_channels=", o.out_channels_);
  EMBER_CHECK(o.groups_ > 0 && o.in_channels_ % o.groups_ == 0 && o.out_channels_ % o.groups_ == 0,
              "Conv2d: in_channels (", o.in_channels_, ") and out_channels (", o.out_channels_,
              ") must be divisible by groups (", o.groups_, ")");
  EMBER_CHECK(o.kernel_size_[0] > 0 && o.kernel_size_[1] > 0, "Conv2d: kernel_size must be > 0, got ",
              o.kernel_size_[0], "x", o.kernel_size_[1]);
  weight = register_parameter(
      "weight", empty({o.out_channels_, o.in_channels_ / o.groups_, o.kernel_size_[0], o.kernel_size_[1]}));
  bind_attribute("weight", weight);  // Note [Tensor attributes]
  if (o.bias_) bias = register_parameter("bias", empty({o.out_channels_}));
  bind_attribute("bias", bias);  // Note [Tensor attributes]
  reset_parameters();
}

void Conv2dImpl::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(init::calculate_fan_in_and_fan_out(weight).first));
    init::uniform_(bias, -bound, bound);
  }
}

Tensor Conv2dImpl::forward(const Tensor& x) {
  return conv2d(x, weight, bias, options.stride_, options.padding_, options.dilation_, options.groups_);
}

void Conv2dImpl::pretty_print(std::ostream& os) const {
  const auto& o = options;
  os << "Conv2d(" << o.in_channels_ << ", " << o.out_channels_ << ", kernel_size=" << o.kernel_size_
     << ", stride=" << o.stride_;
  if (o.padding_ != Int2{0, 0}) os << ", padding=" << o.padding_;
  if (o.dilation_ != Int2{1, 1}) os << ", dilation=" << o.dilation_;
  if (o.groups_ != 1) os << ", groups=" << o.groups_;
  if (!o.bias_) os << ", bias=false";
  os << ")";
}

Tensor MaxPool2dImpl::forward(const Tensor& x) {
  return max_pool2d(x, options.kernel_size_, options.stride_, options.padding_, options.dilation_, options.ceil_mode_);
}

void MaxPool2dImpl::pretty_print(std::ostream& os) const {
  os << "MaxPool2d(kernel_size=" << options.kernel_size_
     << ", stride=" << options.stride_.value_or(options.kernel_size_) << ", padding=" << options.padding_
     << ", dilation=" << options.dilation_ << ", ceil_mode=" << (options.ceil_mode_ ? "true" : "false") << ")";
}

Tensor AvgPool2dImpl::forward(const Tensor& x) {
  EMBER_CHECK(options.dilation_ == (Int2{1, 1}), "AvgPool2d: dilation is not a parameter of average pooling");
  return avg_pool2d(x, options.kernel_size_, options.stride_, options.padding_, options.ceil_mode_,
                    options.count_include_pad_);
}

void AvgPool2dImpl::pretty_print(std::ostream& os) const {
  os << "AvgPool2d(kernel_size=" << options.kernel_size_
     << ", stride=" << options.stride_.value_or(options.kernel_size_) << ", padding=" << options.padding_ << ")";
}

void AdaptiveAvgPool2dImpl::pretty_print(std::ostream& os) const {
  os << "AdaptiveAvgPool2d(output_size=" << output_size << ")";
}

}  // namespace ember::nn
