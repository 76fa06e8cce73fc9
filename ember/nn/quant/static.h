#pragma once
// Static (post-training) quantization and quantization-aware training of Sequential models
// (torch.ao.quantization's eager mode: prepare -> calibrate -> convert, prepare_qat -> train ->
// convert).
//
// Note [Static int8 chains]: after convert, uint8 tensors flow between the layers, and each
// layer knows the scale and zero point of what it receives and of what it returns, fixed at
// calibration (PyTorch carries them inside its quantized tensors; a Sequential's order fixes them
// here, which is why static quantization takes a Sequential). The converted model starts with
// Quantize (float32 -> uint8) and ends with DeQuantize. Activations use 7 bits ([0, 127]) so
// that the int8 GEMM never saturates (Note [Int8 GEMM]); weights are qint8, symmetric, per output
// channel. A Linear or Conv2d followed by a ReLU becomes one layer that applies the ReLU before
// requantizing (PyTorch's fused LinearReLU / ConvReLU2d).
//
//     quantization::prepare(model);                 // observers on every layer's output
//     for (auto& batch : calibration) model(batch); // ranges seen
//     nn::Sequential int8 = quantization::convert(model);
#include <memory>

#include "ember/nn/modules/container.h"
#include "ember/nn/modules/conv_pool.h"
#include "ember/nn/modules/linear.h"
#include "ember/nn/quant/buffer_watch.h"
#include "ember/nn/quant/observer.h"

namespace ember::quantization {

// The fixed quantization of one activation (Note [Static int8 chains]).
struct ActivationParams {
  double scale = 1;
  int64_t zero_point = 0;
  int64_t quant_min = 0, quant_max = 127;
};

// The edges. Their scale and zero point are buffers (PyTorch's Quantize has them; DeQuantize
// has them here because ember's uint8 activations do not carry their own), so load_state_dict
// and to(device) reach them; `params` mirrors the buffers (refreshed on each forward).
class QuantizeImpl : public nn::Module {  // float32 -> uint8
 public:
  explicit QuantizeImpl(ActivationParams params);
  Tensor forward(const Tensor& x) override;
  void pretty_print(std::ostream& os) const override;
  ActivationParams params;
  Tensor scale, zero_point;

 private:
  BufferWatch watch_;  // of scale and zero_point, for params
};
class DeQuantizeImpl : public nn::Module {  // uint8 -> float32
 public:
  explicit DeQuantizeImpl(ActivationParams params);
  Tensor forward(const Tensor& q) override;
  void pretty_print(std::ostream& os) const override;
  ActivationParams params;
  Tensor scale, zero_point;

 private:
  BufferWatch watch_;
};

// The int8 layers. Buffers (PyTorch's names where it has them): weight (int8), weight_scale,
// weight_zero_point, bias (float32), scale and zero_point (of the output), input_scale and
// input_zero_point. What forward derives from them (the weight's packed form, `input` and
// `output`) is made on first use and again whenever load_state_dict or to(device) changes them
// (BufferWatch), so a converted model loads another one's state and moves between devices.
class QuantizedLinearImpl : public nn::Module {
 public:
  QuantizedLinearImpl(const nn::LinearImpl& linear, const Tensor& weight_scale, ActivationParams input,
                      ActivationParams output, bool relu);
  Tensor forward(const Tensor& x) override;  // uint8 [..., in] -> uint8 [..., out]
  void pretty_print(std::ostream& os) const override;
  int64_t in_features, out_features;
  ActivationParams input, output;
  bool relu;
  Tensor weight, weight_scale, weight_zero_point, bias, scale, zero_point, input_scale, input_zero_point;

 private:
  void refresh();  // input, output and packed_ from the buffers, where they changed
  Tensor packed_;
  BufferWatch watch_;
};
class QuantizedConv2dImpl : public nn::Module {
 public:
  QuantizedConv2dImpl(const nn::Conv2dImpl& conv, const Tensor& weight_scale, ActivationParams input,
                      ActivationParams output, bool relu);
  Tensor forward(const Tensor& x) override;  // uint8 [N, C, H, W] -> uint8 [N, O, Ho, Wo]
  void pretty_print(std::ostream& os) const override;
  nn::Conv2dOptions options;
  ActivationParams input, output;
  bool relu;
  Tensor weight, weight_scale, weight_zero_point, bias, scale, zero_point, input_scale, input_zero_point;

 private:
  void refresh();  // input, output and packed_ from the buffers, where they changed
  Tensor packed_;
  BufferWatch watch_;
};
class QuantizedReLUImpl : public nn::Module {  // max(q, zero point): the real max(x, 0)
 public:
  explicit QuantizedReLUImpl(int64_t zero_point);
  Tensor forward(const Tensor& q) override;
  Tensor zero_point;  // a buffer (int32 [1]): its input's zero point
};
class QuantizedMaxPool2dImpl : public nn::Module {  // max is monotonic: the same pool on the integers
 public:
  explicit QuantizedMaxPool2dImpl(nn::Pool2dOptions options) : Module("QuantizedMaxPool2d"), options(options) {}
  Tensor forward(const Tensor& q) override;
  nn::Pool2dOptions options;
};

// Quantization-aware training's layers: the forward uses the fake-quantized weight (qint8,
// symmetric per channel, straight-through gradients), so training sees int8's rounding.
class QatLinearImpl : public nn::LinearImpl {
 public:
  explicit QatLinearImpl(const nn::LinearImpl& linear);
  Tensor forward(const Tensor& x) override;
  std::shared_ptr<FakeQuantizeImpl> weight_fake_quant;
};
class QatConv2dImpl : public nn::Conv2dImpl {
 public:
  explicit QatConv2dImpl(const nn::Conv2dImpl& conv);
  Tensor forward(const Tensor& x) override;
  std::shared_ptr<FakeQuantizeImpl> weight_fake_quant;
};

// How calibration picks each activation's range: its min and max (PyTorch's default_qconfig), or
// the range that minimises the L2 quantization error of its histogram, trimming outliers
// (get_default_qconfig("x86")). Both [0, 127].
enum class Calibration { MinMax, Histogram };
// Observers on the input and on every layer's output of `model`.
void prepare(nn::SequentialImpl& model, Calibration calibration = Calibration::MinMax);
// Linear and Conv2d become their QAT forms (copies of their weights: make the optimizer after
// this), and FakeQuantize modules go on the input and every layer's output.
void prepare_qat(nn::SequentialImpl& model);
struct ConvertOptions {
  // A first Conv2d or Linear whose GEMM depth (in_channels * kh * kw, or in_features) is below
  // this stays float32, with its ReLU, and Quantize comes after it. 0 (the default): everything
  // int8, as PyTorch's convert. It paid when int8 convolutions were im2col + GEMM (the MNIST
  // CNN's one-channel first layer: 3.7 ms in float32, 12 ms in int8); the direct int8 kernels
  // of stride-1 convolutions make int8 faster there too (BENCHMARKS.md), so it is for layers
  // that take im2col (strided first layers) or want float32's accuracy.
  int64_t float_first_layer_below_depth = 0;
  ConvertOptions& keep_shallow_first_layer(int64_t depth = 32) { return float_first_layer_below_depth = depth, *this; }
};
// The int8 model from a prepared (and calibrated or trained) one (Note [Static int8 chains]).
// Layers without an int8 form are an error naming them; Dropout and Identity are dropped.
nn::Sequential convert(nn::SequentialImpl& model, const ConvertOptions& options = {});

}  // namespace ember::quantization
