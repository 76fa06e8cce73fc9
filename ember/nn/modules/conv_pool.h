#pragma once
// Conv1d, Conv2d, ConvTranspose2d, the pooling layers and the padding layers.
#include <array>
#include <optional>

#include "ember/nn/module.h"
#include "ember/tensor/arg.h"

namespace ember::nn {

struct Conv2dOptions {
  Conv2dOptions(int64_t in_channels, int64_t out_channels, Int2 kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  Conv2dOptions(int64_t in_channels, int64_t out_channels, int64_t kernel_size)
      : Conv2dOptions(in_channels, out_channels, Int2{kernel_size, kernel_size}) {}
  int64_t in_channels_, out_channels_;
  Int2 kernel_size_;
  EMBER_ARG(Int2, stride) = {1, 1};
  EMBER_ARG(Int2, padding) = {0, 0};
  EMBER_ARG(Int2, dilation) = {1, 1};
  EMBER_ARG(int64_t, groups) = 1;
  EMBER_ARG(bool, bias) = true;
  // One number for both dims, as in LibTorch's ExpandingArray.
  Conv2dOptions& stride(int64_t s) { return stride(Int2{s, s}); }
  Conv2dOptions& padding(int64_t p) { return padding(Int2{p, p}); }
  Conv2dOptions& dilation(int64_t d) { return dilation(Int2{d, d}); }
};

// weight [out, in / groups, kh, kw], bias [out]; initialised as PyTorch (kaiming-uniform a = √5,
// bias U(±1/√fan_in)).
class Conv2dImpl : public Module {
 public:
  Conv2dImpl(int64_t in_channels, int64_t out_channels, int64_t kernel_size);
  explicit Conv2dImpl(const Conv2dOptions& options);
  Tensor forward(const Tensor& x) override;  // [N, in, H, W] -> [N, out, H', W']
  void reset_parameters();
  void pretty_print(std::ostream& os) const override;

  Conv2dOptions options;
  Tensor weight, bias;
};
EMBER_MODULE(Conv2d);

struct Conv1dOptions {
  Conv1dOptions(int64_t in_channels, int64_t out_channels, int64_t kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  int64_t in_channels_, out_channels_, kernel_size_;
  EMBER_ARG(int64_t, stride) = 1;
  EMBER_ARG(int64_t, padding) = 0;
  EMBER_ARG(int64_t, dilation) = 1;
  EMBER_ARG(int64_t, groups) = 1;
  EMBER_ARG(bool, bias) = true;
};

// weight [out, in / groups, k], bias [out]; initialised as Conv2d. conv1d runs as conv2d on
// [N, in, 1, L] (autograd/composites.cpp).
class Conv1dImpl : public Module {
 public:
  Conv1dImpl(int64_t in_channels, int64_t out_channels, int64_t kernel_size);
  explicit Conv1dImpl(const Conv1dOptions& options);
  Tensor forward(const Tensor& x) override;  // [N, in, L] -> [N, out, L']
  void reset_parameters();
  void pretty_print(std::ostream& os) const override;

  Conv1dOptions options;
  Tensor weight, bias;
};
EMBER_MODULE(Conv1d);

struct ConvTranspose2dOptions {
  ConvTranspose2dOptions(int64_t in_channels, int64_t out_channels, Int2 kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  ConvTranspose2dOptions(int64_t in_channels, int64_t out_channels, int64_t kernel_size)
      : ConvTranspose2dOptions(in_channels, out_channels, Int2{kernel_size, kernel_size}) {}
  int64_t in_channels_, out_channels_;
  Int2 kernel_size_;
  EMBER_ARG(Int2, stride) = {1, 1};
  EMBER_ARG(Int2, padding) = {0, 0};
  EMBER_ARG(Int2, output_padding) = {0, 0};  // added to one side of the output (< stride or dilation)
  EMBER_ARG(int64_t, groups) = 1;
  EMBER_ARG(bool, bias) = true;
  EMBER_ARG(Int2, dilation) = {1, 1};
  ConvTranspose2dOptions& stride(int64_t s) { return stride(Int2{s, s}); }
  ConvTranspose2dOptions& padding(int64_t p) { return padding(Int2{p, p}); }
  ConvTranspose2dOptions& output_padding(int64_t p) { return output_padding(Int2{p, p}); }
  ConvTranspose2dOptions& dilation(int64_t d) { return dilation(Int2{d, d}); }
};

// The transposed convolution (conv_transpose2d: the adjoint of Conv2d in its input, which
// upsamples by the stride). weight [in, out / groups, kh, kw], bias [out]; initialised as
// PyTorch (kaiming-uniform a = √5 with fan_in = out / groups · kh · kw, bias U(±1/√fan_in)).
class ConvTranspose2dImpl : public Module {
 public:
  ConvTranspose2dImpl(int64_t in_channels, int64_t out_channels, int64_t kernel_size);
  explicit ConvTranspose2dImpl(const ConvTranspose2dOptions& options);
  Tensor forward(const Tensor& x) override;  // [N, in, H, W] -> [N, out, H', W']
  // output_size: the wanted [H', W'] (or the whole output shape); it picks the output padding
  // among the sizes this stride gives, as PyTorch's forward(input, output_size).
  Tensor forward(const Tensor& x, const Shape& output_size);
  void reset_parameters();
  void pretty_print(std::ostream& os) const override;

  ConvTranspose2dOptions options;
  Tensor weight, bias;
};
EMBER_MODULE(ConvTranspose2d);

struct Pool2dOptions {
  Pool2dOptions(Int2 kernel_size) : kernel_size_(kernel_size) {}                  // NOLINT: implicit by design
  Pool2dOptions(int64_t kernel_size) : kernel_size_{kernel_size, kernel_size} {}  // NOLINT
  Int2 kernel_size_;
  EMBER_ARG(std::optional<Int2>, stride);  // default: kernel_size
  EMBER_ARG(Int2, padding) = {0, 0};
  EMBER_ARG(Int2, dilation) = {1, 1};
  EMBER_ARG(bool, ceil_mode) = false;
  EMBER_ARG(bool, count_include_pad) = true;  // AvgPool2d only
  Pool2dOptions& stride(Int2 s) { return stride(std::optional<Int2>(s)); }
  Pool2dOptions& stride(int64_t s) { return stride(Int2{s, s}); }
  Pool2dOptions& padding(int64_t p) { return padding(Int2{p, p}); }
};

using MaxPool2dOptions = Pool2dOptions;  // LibTorch's names
using AvgPool2dOptions = Pool2dOptions;

class MaxPool2dImpl : public Module {
 public:
  explicit MaxPool2dImpl(const Pool2dOptions& options) : Module("MaxPool2d"), options(options) {}
  Tensor forward(const Tensor& x) override;
  void pretty_print(std::ostream& os) const override;
  Pool2dOptions options;
};
EMBER_MODULE(MaxPool2d);

class AvgPool2dImpl : public Module {
 public:
  explicit AvgPool2dImpl(const Pool2dOptions& options) : Module("AvgPool2d"), options(options) {}
  Tensor forward(const Tensor& x) override;
  void pretty_print(std::ostream& os) const override;
  Pool2dOptions options;
};
EMBER_MODULE(AvgPool2d);

struct Pool1dOptions {
  Pool1dOptions(int64_t kernel_size) : kernel_size_(kernel_size) {}  // NOLINT: implicit by design
  int64_t kernel_size_;
  EMBER_ARG(std::optional<int64_t>, stride);  // default: kernel_size
  EMBER_ARG(int64_t, padding) = 0;
  EMBER_ARG(int64_t, dilation) = 1;
  EMBER_ARG(bool, ceil_mode) = false;
  EMBER_ARG(bool, count_include_pad) = true;  // AvgPool1d only
  Pool1dOptions& stride(int64_t s) { return stride(std::optional<int64_t>(s)); }
};
using MaxPool1dOptions = Pool1dOptions;  // LibTorch's names
using AvgPool1dOptions = Pool1dOptions;

class MaxPool1dImpl : public Module {  // [N, C, L] -> [N, C, L']
 public:
  explicit MaxPool1dImpl(const Pool1dOptions& options) : Module("MaxPool1d"), options(options) {}
  Tensor forward(const Tensor& x) override;
  void pretty_print(std::ostream& os) const override;
  Pool1dOptions options;
};
EMBER_MODULE(MaxPool1d);

class AvgPool1dImpl : public Module {
 public:
  explicit AvgPool1dImpl(const Pool1dOptions& options) : Module("AvgPool1d"), options(options) {}
  Tensor forward(const Tensor& x) override;
  void pretty_print(std::ostream& os) const override;
  Pool1dOptions options;
};
EMBER_MODULE(AvgPool1d);

struct AdaptiveAvgPool2dOptions {
  AdaptiveAvgPool2dOptions(Int2 output_size) : output_size_(output_size) {}  // NOLINT: implicit, as LibTorch's
  EMBER_ARG(Int2, output_size);
};
class AdaptiveAvgPool2dImpl : public Module {
 public:
  explicit AdaptiveAvgPool2dImpl(Int2 output_size) : Module("AdaptiveAvgPool2d"), output_size(output_size) {}
  explicit AdaptiveAvgPool2dImpl(int64_t output_size) : AdaptiveAvgPool2dImpl(Int2{output_size, output_size}) {}
  explicit AdaptiveAvgPool2dImpl(const AdaptiveAvgPool2dOptions& options)
      : AdaptiveAvgPool2dImpl(options.output_size_) {}
  Tensor forward(const Tensor& x) override { return adaptive_avg_pool2d(x, output_size); }
  void pretty_print(std::ostream& os) const override;
  Int2 output_size;
};
EMBER_MODULE(AdaptiveAvgPool2d);

// The padding layers: F::pad with a fixed amount per side and mode. The 1-D ones pad the last
// dim ({left, right}), the 2-D ones the last two ({left, right, top, bottom}); one number pads
// every side by it.
struct PaddingOptions {
  PaddingOptions(Shape padding) : padding_(std::move(padding)) {}  // NOLINT: implicit, as LibTorch's
  EMBER_ARG(Shape, padding);
  EMBER_ARG(double, value) = 0.0;  // the constant layers only
};
class PaddingImpl : public Module {
 public:
  // `sides`: 2 (1-D) or 4 (2-D); `mode`: F::pad's.
  PaddingImpl(const char* type_name, const char* mode, size_t sides, PaddingOptions options);
  Tensor forward(const Tensor& x) override;
  void pretty_print(std::ostream& os) const override;
  PaddingOptions options;

 private:
  const char* mode_;
};
#define EMBER_PADDING_LAYER(Name, mode, sides)                                                          \
  struct Name##Options : PaddingOptions {                                                               \
    Name##Options(int64_t p) : PaddingOptions(Shape(sides, p)) {} /* NOLINT: implicit, as LibTorch's */ \
    Name##Options(Shape p) : PaddingOptions(std::move(p)) {}      /* NOLINT */                          \
    Name##Options(Shape p, double v) : PaddingOptions(std::move(p)) { value_ = v; }                     \
  };                                                                                                    \
  class Name##Impl : public PaddingImpl {                                                               \
   public:                                                                                              \
    explicit Name##Impl(const Name##Options& options) : PaddingImpl(#Name, mode, sides, options) {}     \
    Name##Impl(Shape p, double v) : Name##Impl(Name##Options(std::move(p), v)) {}                       \
    Name##Impl(int64_t p, double v) : Name##Impl(Name##Options(Shape(sides, p), v)) {}                  \
  };                                                                                                    \
  EMBER_MODULE(Name)
EMBER_PADDING_LAYER(ZeroPad2d, "constant", 4);
EMBER_PADDING_LAYER(ConstantPad1d, "constant", 2);
EMBER_PADDING_LAYER(ConstantPad2d, "constant", 4);
EMBER_PADDING_LAYER(ReflectionPad1d, "reflect", 2);
EMBER_PADDING_LAYER(ReflectionPad2d, "reflect", 4);
EMBER_PADDING_LAYER(ReplicationPad1d, "replicate", 2);
EMBER_PADDING_LAYER(ReplicationPad2d, "replicate", 4);
#undef EMBER_PADDING_LAYER

}  // namespace ember::nn
