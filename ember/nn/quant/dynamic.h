#pragma once
// Dynamic quantization (torch.ao.quantization.quantize_dynamic): Linear layers become
// DynamicQuantizedLinear, whose weight is stored as int8 (4x smaller) and whose input is
// quantized on every call with its own range, so no calibration is needed:
//   1. x's min and max -> uint8 scale and zero point (7 bits: Note [Int8 GEMM]),
//   2. x -> uint8, 3. the int8 GEMM, 4. y = s_x s_w (acc - z_x Σw) + bias, in float32.
// Inference only: the module records nothing on the tape.
//
//     auto model = ...;                                  // float32, trained
//     quantization::quantize_dynamic(model);             // every Linear, in place
//     Tensor y = model->forward(x);                      // int8 GEMMs inside
#include <memory>
#include <set>
#include <string>

#include "ember/nn/modules/linear.h"
#include "ember/nn/quant/buffer_watch.h"
#include "ember/nn/quant/observer.h"

namespace ember::quantization {

// Buffers: weight (int8 [out, in]), weight_scale (float32 [1] or [out]), weight_zero_point (int32,
// zeros: symmetric), bias (float32 [out], when the Linear had one). The packed form of the weight
// for the GEMM is made on first use and again whenever `weight` changes (load_state_dict).
class DynamicQuantizedLinearImpl : public nn::Module {
 public:
  // Quantizes `linear`'s weight: qint8 symmetric, per tensor or per output channel (PyTorch's
  // default_dynamic_qconfig and per_channel_dynamic_qconfig).
  explicit DynamicQuantizedLinearImpl(const nn::LinearImpl& linear, bool per_channel = false);
  Tensor forward(const Tensor& x) override;  // float32 [..., in] -> float32 [..., out]
  QTensor weight_quantized() const;          // the int8 weight with its scales
  void pretty_print(std::ostream& os) const override;

  int64_t in_features, out_features;
  bool reduce_range = true;  // quantize activations to 7 bits, as PyTorch's x86 back end does

  Tensor weight, weight_scale, weight_zero_point, bias;

 private:
  Tensor packed_;
  BufferWatch watch_;  // of weight, for packed_
};
EMBER_MODULE(DynamicQuantizedLinear);

// Replaces every Linear below `model` (and `model` itself, if it is one: then the result is the
// replacement) by a DynamicQuantizedLinear; returns the model. `types` names the module types to
// convert ({"Linear"}: the only type with a dynamic int8 form today).
std::shared_ptr<nn::Module> quantize_dynamic(const std::shared_ptr<nn::Module>& model,
                                             const std::set<std::string>& types = {"Linear"}, bool per_channel = false);

}  // namespace ember::quantization
