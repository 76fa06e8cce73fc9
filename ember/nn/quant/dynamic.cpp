#include "ember/nn/quant/dynamic.h"

#include <ostream>

#include "ember/autograd/grad_mode.h"

namespace ember::quantization {

DynamicQuantizedLinearImpl::DynamicQuantizedLinearImpl(const nn::LinearImpl& linear, bool per_channel)
    : Module("DynamicQuantizedLinear"),
      in_features(linear.options.in_features_),
      out_features(linear.options.out_features_) {
  NoGradGuard no_grad;
  const Tensor w = linear.weight.detach().to(Device(kCPU), kFloat32);
  // PyTorch's default_weight_observer / default_per_channel_weight_observer.
  const ObserverOptions options =
      ObserverOptions()
          .with_dtype(QDType::QInt8)
          .with_qscheme(per_channel ? QScheme::PerChannelSymmetric : QScheme::PerTensorSymmetric);
  std::shared_ptr<ObserverImpl> observer;
  if (per_channel)
    observer = std::make_shared<PerChannelMinMaxObserverImpl>(options);
  else
    observer = std::make_shared<MinMaxObserverImpl>(options);
  (*observer)(w);
  auto [scale, zero_point] = observer->calculate_qparams();
  const QTensor q = per_channel ? quantize_per_channel(w, scale, zero_point, 0, QDType::QInt8)
                                : quantize_per_tensor(w, scale.item<double>(), 0, QDType::QInt8);
  weight = register_buffer("weight", q.int_repr());
  weight_scale = register_buffer("weight_scale", scale);
  weight_zero_point = register_buffer("weight_zero_point", zero_point);
  if (linear.bias.defined()) bias = register_buffer("bias", linear.bias.detach().to(Device(kCPU), kFloat32).clone());
}

QTensor DynamicQuantizedLinearImpl::weight_quantized() const {
  return QTensor(weight, weight_scale, weight_zero_point, weight_scale.numel() > 1 ? 0 : -1, QDType::QInt8);
}

Tensor DynamicQuantizedLinearImpl::forward(const Tensor& x) {
  EMBER_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == in_features, "DynamicQuantizedLinear: expects input [..., ",
              in_features, "], got ", x.defined() ? shape_str(x.sizes()) : std::string("an undefined tensor"));
  EMBER_CHECK(x.is_floating_point(), "DynamicQuantizedLinear: expects a floating tensor, got ", x.dtype());
  EMBER_CHECK(x.device() == weight.device(), "DynamicQuantizedLinear: the input is on ", x.device(), ", the layer on ",
              weight.device(), " (move it with to())");
  NoGradGuard no_grad;
  const Tensor rows = x.detach().to(kFloat32).reshape({-1, in_features}).contiguous();
  Shape out_shape = x.sizes();
  out_shape.back() = out_features;
  if (rows.size(0) == 0) return zeros(out_shape, TensorOptions().device(x.device()));
  // 1. The batch's own range -> uint8 parameters (fbgemm's choice, 7 bits with reduce_range).
  const TensorQParams qp =
      choose_quantization_params(rows.amin().item<float>(), rows.amax().item<float>(), 0, 255, reduce_range);
  // 2. Quantize the activation, 3. multiply in int8, 4. dequantize and add the bias in one epilogue.
  QuantParams act;
  act.scale = full({1}, qp.scale, TensorOptions().device(x.device()));
  act.zero_point = full({1}, qp.zero_point, TensorOptions().dtype(kInt32).device(x.device()));
  act.quant_min = 0;
  act.quant_max = 255;
  const Tensor xq = native::quantize_affine(rows, act, kUInt8);
  Int8Epilogue e;
  e.a_zero_point = qp.zero_point;
  e.a_scale = qp.scale;
  e.w_scale = weight_scale;
  e.bias = bias;
  watch_.update({weight}, [&] { packed_ = native::int8_pack_weight(weight); });
  return native::int8_gemm(xq, packed_, out_features, e, kFloat32).reshape(out_shape);
}

void DynamicQuantizedLinearImpl::pretty_print(std::ostream& os) const {
  os << "DynamicQuantizedLinear(in_features=" << in_features << ", out_features=" << out_features
     << ", dtype=qint8, qscheme=" << (weight_scale.numel() > 1 ? "per_channel_affine" : "per_tensor_affine") << ")";
}

std::shared_ptr<nn::Module> quantize_dynamic(const std::shared_ptr<nn::Module>& model,
                                             const std::set<std::string>& types, bool per_channel) {
  EMBER_CHECK(model != nullptr, "quantize_dynamic: the model is null");
  for (const auto& t : types)
    EMBER_CHECK(t == "Linear", "quantize_dynamic: no dynamic int8 form for '", t, "' (only Linear has one)");
  auto convert = [&](nn::Module& m) -> std::shared_ptr<nn::Module> {
    if (!types.count(m.type_name())) return nullptr;
    auto* linear = m.as<nn::LinearImpl>();
    return linear ? std::make_shared<DynamicQuantizedLinearImpl>(*linear, per_channel) : nullptr;
  };
  if (auto root = convert(*model)) return root;
  std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>> replacements;
  for (const auto& item : model->named_modules())
    if (!item.key().empty())
      if (auto q = convert(*item.value())) replacements.emplace_back(item.key(), q);
  for (auto& [name, q] : replacements) model->replace_module(name, q);
  return model;
}

}  // namespace ember::quantization
