#include "ember/nn/modules/conv_pool.h"

#include <cmath>

#include "ember/nn/functional.h"
#include "ember/nn/init.h"

namespace ember::nn {

namespace {

std::ostream& operator<<(std::ostream& os, const Int2& v) { return os << "(" << v[0] << ", " << v[1] << ")"; }

// The options both convolutions refuse, named after the layer.
void check_conv_options(const char* layer, int64_t in, int64_t out, int64_t groups, const Int2& kernel) {
  EMBER_CHECK(in > 0 && out > 0, layer, ": channels must be > 0, got in_channels=", in, ", out_channels=", out);
  EMBER_CHECK(groups > 0 && in % groups == 0 && out % groups == 0, layer, ": in_channels (", in, ") and out_channels (",
              out, ") must be divisible by groups (", groups, ")");
  EMBER_CHECK(kernel[0] > 0 && kernel[1] > 0, layer, ": kernel_size must be > 0, got ", kernel[0], "x", kernel[1]);
}

// PyTorch's initialisation of both convolutions: kaiming-uniform (a = √5) weights, bias
// U(±1/√fan_in), fan_in from weight.size(1) (the transposed weight's out / groups too).
void reset_conv_parameters(Tensor& weight, Tensor& bias) {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(init::calculate_fan_in_and_fan_out(weight).first));
    init::uniform_(bias, -bound, bound);
  }
}

}  // namespace

Conv2dImpl::Conv2dImpl(int64_t in_channels, int64_t out_channels, int64_t kernel_size)
    : Conv2dImpl(Conv2dOptions(in_channels, out_channels, kernel_size)) {}

Conv2dImpl::Conv2dImpl(const Conv2dOptions& o) : Module("Conv2d"), options(o) {
  check_conv_options("Conv2d", o.in_channels_, o.out_channels_, o.groups_, o.kernel_size_);
  weight = register_parameter(
      "weight", empty({o.out_channels_, o.in_channels_ / o.groups_, o.kernel_size_[0], o.kernel_size_[1]}));
  bind_attribute("weight", weight);  // Note [Tensor attributes]
  if (o.bias_) bias = register_parameter("bias", empty({o.out_channels_}));
  bind_attribute("bias", bias);  // Note [Tensor attributes]
  reset_parameters();
}

void Conv2dImpl::reset_parameters() { reset_conv_parameters(weight, bias); }

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

Conv1dImpl::Conv1dImpl(int64_t in_channels, int64_t out_channels, int64_t kernel_size)
    : Conv1dImpl(Conv1dOptions(in_channels, out_channels, kernel_size)) {}

Conv1dImpl::Conv1dImpl(const Conv1dOptions& o) : Module("Conv1d"), options(o) {
  check_conv_options("Conv1d", o.in_channels_, o.out_channels_, o.groups_, {o.kernel_size_, o.kernel_size_});
  weight = register_parameter("weight", empty({o.out_channels_, o.in_channels_ / o.groups_, o.kernel_size_}));
  bind_attribute("weight", weight);  // Note [Tensor attributes]
  if (o.bias_) bias = register_parameter("bias", empty({o.out_channels_}));
  bind_attribute("bias", bias);  // Note [Tensor attributes]
  reset_parameters();
}

void Conv1dImpl::reset_parameters() { reset_conv_parameters(weight, bias); }

Tensor Conv1dImpl::forward(const Tensor& x) {
  const auto& o = options;
  return conv1d(x, weight, bias, o.stride_, o.padding_, o.dilation_, o.groups_);
}

void Conv1dImpl::pretty_print(std::ostream& os) const {
  const auto& o = options;
  os << "Conv1d(" << o.in_channels_ << ", " << o.out_channels_ << ", kernel_size=(" << o.kernel_size_ << ",), stride=("
     << o.stride_ << ",)";
  if (o.padding_ != 0) os << ", padding=(" << o.padding_ << ",)";
  if (o.dilation_ != 1) os << ", dilation=(" << o.dilation_ << ",)";
  if (o.groups_ != 1) os << ", groups=" << o.groups_;
  if (!o.bias_) os << ", bias=false";
  os << ")";
}

ConvTranspose2dImpl::ConvTranspose2dImpl(int64_t in_channels, int64_t out_channels, int64_t kernel_size)
    : ConvTranspose2dImpl(ConvTranspose2dOptions(in_channels, out_channels, kernel_size)) {}

ConvTranspose2dImpl::ConvTranspose2dImpl(const ConvTranspose2dOptions& o) : Module("ConvTranspose2d"), options(o) {
  check_conv_options("ConvTranspose2d", o.in_channels_, o.out_channels_, o.groups_, o.kernel_size_);
  weight = register_parameter(
      "weight", empty({o.in_channels_, o.out_channels_ / o.groups_, o.kernel_size_[0], o.kernel_size_[1]}));
  bind_attribute("weight", weight);  // Note [Tensor attributes]
  if (o.bias_) bias = register_parameter("bias", empty({o.out_channels_}));
  bind_attribute("bias", bias);
  reset_parameters();
}

void ConvTranspose2dImpl::reset_parameters() { reset_conv_parameters(weight, bias); }

Tensor ConvTranspose2dImpl::forward(const Tensor& x) {
  const auto& o = options;
  return conv_transpose2d(x, weight, bias, o.stride_, o.padding_, o.output_padding_, o.groups_, o.dilation_);
}

Tensor ConvTranspose2dImpl::forward(const Tensor& x, const Shape& output_size) {
  const auto& o = options;
  EMBER_CHECK(x.defined() && (x.dim() == 3 || x.dim() == 4), "ConvTranspose2d: expected a 3-D or 4-D input, got ",
              x.defined() ? shape_str(x.sizes()) : std::string("an undefined tensor"));
  EMBER_CHECK(output_size.size() == 2 || output_size.size() == static_cast<size_t>(x.dim()),
              "ConvTranspose2d: output_size must have 2 or ", x.dim(), " entries, got ", shape_str(output_size));
  Int2 output_padding{};
  for (int d = 0; d < 2; ++d) {
    const int64_t wanted = output_size[output_size.size() - 2 + d];
    const int64_t smallest =
        (x.size(x.dim() - 2 + d) - 1) * o.stride_[d] - 2 * o.padding_[d] + o.dilation_[d] * (o.kernel_size_[d] - 1) + 1;
    EMBER_CHECK(wanted >= smallest && wanted < smallest + o.stride_[d], "ConvTranspose2d: requested an output size of ",
                shape_str(output_size), ", but valid sizes range from ", smallest, " to ", smallest + o.stride_[d] - 1,
                " in dim ", d, " for an input of shape ", shape_str(x.sizes()));
    output_padding[d] = wanted - smallest;
  }
  return conv_transpose2d(x, weight, bias, o.stride_, o.padding_, output_padding, o.groups_, o.dilation_);
}

void ConvTranspose2dImpl::pretty_print(std::ostream& os) const {
  const auto& o = options;
  os << "ConvTranspose2d(" << o.in_channels_ << ", " << o.out_channels_ << ", kernel_size=" << o.kernel_size_
     << ", stride=" << o.stride_;
  if (o.padding_ != Int2{0, 0}) os << ", padding=" << o.padding_;
  if (o.output_padding_ != Int2{0, 0}) os << ", output_padding=" << o.output_padding_;
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

Tensor MaxPool1dImpl::forward(const Tensor& x) {
  const auto& o = options;
  return max_pool1d(x, o.kernel_size_, o.stride_, o.padding_, o.dilation_, o.ceil_mode_);
}

void MaxPool1dImpl::pretty_print(std::ostream& os) const {
  const auto& o = options;
  os << "MaxPool1d(kernel_size=" << o.kernel_size_ << ", stride=" << o.stride_.value_or(o.kernel_size_)
     << ", padding=" << o.padding_ << ", dilation=" << o.dilation_
     << ", ceil_mode=" << (o.ceil_mode_ ? "true" : "false") << ")";
}

Tensor AvgPool1dImpl::forward(const Tensor& x) {
  const auto& o = options;
  EMBER_CHECK(o.dilation_ == 1, "AvgPool1d: dilation is not a parameter of average pooling");
  return avg_pool1d(x, o.kernel_size_, o.stride_, o.padding_, o.ceil_mode_, o.count_include_pad_);
}

void AvgPool1dImpl::pretty_print(std::ostream& os) const {
  const auto& o = options;
  os << "AvgPool1d(kernel_size=" << o.kernel_size_ << ", stride=" << o.stride_.value_or(o.kernel_size_)
     << ", padding=" << o.padding_ << ")";
}

PaddingImpl::PaddingImpl(const char* type_name, const char* mode, size_t sides, PaddingOptions o)
    : Module(type_name), options(std::move(o)), mode_(mode) {
  EMBER_CHECK(options.padding_.size() == sides, type_name, ": expected ", sides, " padding amounts, got ",
              shape_str(options.padding_));
}

Tensor PaddingImpl::forward(const Tensor& x) {
  return functional::pad(x, functional::PadFuncOptions(options.padding_).mode(mode_).value(options.value_));
}

void PaddingImpl::pretty_print(std::ostream& os) const {
  const bool with_value = std::string(mode_) == "constant" && std::string(type_name()) != "ZeroPad2d";
  os << type_name() << (with_value ? "(padding=" : "(");
  for (size_t i = 0; i < options.padding_.size(); ++i) os << (i ? ", " : "(") << options.padding_[i];
  os << ")";
  if (with_value) os << ", value=" << options.value_;
  os << ")";
}

void AdaptiveAvgPool2dImpl::pretty_print(std::ostream& os) const {
  os << "AdaptiveAvgPool2d(output_size=" << output_size << ")";
}

}  // namespace ember::nn
