#include "ember/nn/quant/static.h"

#include <cmath>
#include <ostream>

#include "ember/autograd/grad_mode.h"
#include "ember/nn/modules/activation.h"
#include "ember/nn/modules/norm.h"

namespace ember::quantization {
namespace {

Tensor scalar_buffer(double v) { return full({1}, v); }
Tensor int_buffer(int64_t v) { return full({1}, v, TensorOptions().dtype(kInt32)); }

// The parameters in a layer's buffers, on their device (the range is convert's).
QuantParams as_quant_params(const Tensor& scale, const Tensor& zero_point, const ActivationParams& range) {
  QuantParams p;
  p.scale = scale;
  p.zero_point = zero_point;
  p.quant_min = range.quant_min;
  p.quant_max = range.quant_max;
  return p;
}

// `range` with the scale and zero point a layer's buffers hold now (one host read where they are
// on a GPU, only when they changed), checked: they may come from a file.
ActivationParams read_params(const Tensor& scale, const Tensor& zero_point, ActivationParams range, const nn::Module& m,
                             const char* which) {
  EMBER_CHECK(scale.defined() && scale.numel() == 1 && scale.is_floating_point() && zero_point.defined() &&
                  zero_point.numel() == 1,
              m.type_name(), ": the ", which, " scale and zero point must be one float and one integer each");
  range.scale = scale.item<double>();
  range.zero_point = zero_point.item<int64_t>();
  EMBER_CHECK(std::isfinite(range.scale) && range.scale > 0, m.type_name(), ": the ", which,
              " scale must be positive and finite, got ", range.scale);
  EMBER_CHECK(range.zero_point >= range.quant_min && range.zero_point <= range.quant_max, m.type_name(), ": the ",
              which, " zero point ", range.zero_point, " is outside [", range.quant_min, ", ", range.quant_max, "]");
  return range;
}

void check_uint8(const Tensor& x, const nn::Module& m) {
  EMBER_CHECK(x.defined() && x.dtype() == kUInt8, m.type_name(),
              ": expects the uint8 activations of a converted model (its Quantize layer makes them from float32), "
              "got ",
              x.defined() ? dtype_name(x.dtype()) : "an undefined tensor");
}

// qint8, symmetric, per output channel: PyTorch's default_per_channel_weight_observer.
ObserverOptions weight_options() {
  return ObserverOptions().with_dtype(QDType::QInt8).with_qscheme(QScheme::PerChannelSymmetric).with_ch_axis(0);
}
// Activations: [0, 127], 7 bits (Note [Static int8 chains]).
ObserverOptions activation_options() { return ObserverOptions().with_range(0, 127); }

// The int8 weight and its per-channel scales; `scale` given (QAT: the fake quantizer's) or observed.
std::pair<Tensor, Tensor> quantized_weight(const Tensor& weight, Tensor scale) {
  NoGradGuard no_grad;
  const Tensor w = weight.detach().to(Device(kCPU), kFloat32).contiguous();
  if (!scale.defined()) {
    PerChannelMinMaxObserverImpl observer(weight_options());
    observer(w);
    scale = observer.calculate_qparams().first;
  }
  const Tensor zero = zeros({scale.numel()}, TensorOptions().dtype(kInt32));
  const QTensor q = quantize_per_channel(w, scale, zero, 0, QDType::QInt8);
  return {q.int_repr(), q.q_per_channel_scales().to(kFloat32)};
}

Int8Epilogue epilogue(const ActivationParams& in, const ActivationParams& out, const Tensor& w_scale,
                      const Tensor& bias, bool relu) {
  Int8Epilogue e;
  e.a_zero_point = in.zero_point;
  e.a_scale = in.scale;
  e.w_scale = w_scale;
  e.bias = bias;
  e.out_scale = out.scale;
  e.out_zero_point = out.zero_point;
  e.out_quant_min = out.quant_min;
  e.out_quant_max = out.quant_max;
  e.relu = relu;
  return e;
}

template <class Layer>
void register_params(Layer& m, const ActivationParams& in, const ActivationParams& out) {
  m.scale = m.register_buffer("scale", scalar_buffer(out.scale));
  m.zero_point = m.register_buffer("zero_point", int_buffer(out.zero_point));
  m.input_scale = m.register_buffer("input_scale", scalar_buffer(in.scale));
  m.input_zero_point = m.register_buffer("input_zero_point", int_buffer(in.zero_point));
}

// What an int8 layer's forward derives from its buffers, again where they changed.
template <class Layer, class Pack>
void refresh_layer(Layer& m, BufferWatch& watch, Tensor& packed, const Pack& pack) {
  watch.update({m.weight, m.scale, m.zero_point, m.input_scale, m.input_zero_point}, [&] {
    m.input = read_params(m.input_scale, m.input_zero_point, m.input, m, "input");
    m.output = read_params(m.scale, m.zero_point, m.output, m, "output");
    packed = pack(m.weight);
  });
}

std::string pair_str(const Int2& v) { return "(" + std::to_string(v[0]) + ", " + std::to_string(v[1]) + ")"; }

std::ostream& operator<<(std::ostream& os, const ActivationParams& a) {
  return os << "scale=" << a.scale << ", zero_point=" << a.zero_point;
}

}  // namespace

// ---- the edges ----

QuantizeImpl::QuantizeImpl(ActivationParams p) : Module("Quantize"), params(p) {
  scale = register_buffer("scale", scalar_buffer(p.scale));
  zero_point = register_buffer("zero_point", int_buffer(p.zero_point));
}
Tensor QuantizeImpl::forward(const Tensor& x) {
  EMBER_CHECK(x.defined() && x.is_floating_point(), "Quantize: expects a floating tensor");
  watch_.update({scale, zero_point}, [&] { params = read_params(scale, zero_point, params, *this, "output"); });
  return native::quantize_affine(x.detach().to(kFloat32), as_quant_params(scale, zero_point, params), kUInt8);
}
void QuantizeImpl::pretty_print(std::ostream& os) const { os << "Quantize(" << params << ", dtype=quint8)"; }

DeQuantizeImpl::DeQuantizeImpl(ActivationParams p) : Module("DeQuantize"), params(p) {
  scale = register_buffer("scale", scalar_buffer(p.scale));
  zero_point = register_buffer("zero_point", int_buffer(p.zero_point));
}
Tensor DeQuantizeImpl::forward(const Tensor& q) {
  check_uint8(q, *this);
  watch_.update({scale, zero_point}, [&] { params = read_params(scale, zero_point, params, *this, "input"); });
  return native::dequantize_affine(q, as_quant_params(scale, zero_point, params));
}
void DeQuantizeImpl::pretty_print(std::ostream& os) const { os << "DeQuantize()"; }

// ---- the int8 layers ----

QuantizedLinearImpl::QuantizedLinearImpl(const nn::LinearImpl& linear, const Tensor& scale, ActivationParams in,
                                         ActivationParams out, bool relu)
    : Module("QuantizedLinear"),
      in_features(linear.options.in_features_),
      out_features(linear.options.out_features_),
      input(in),
      output(out),
      relu(relu) {
  auto [w, s] = quantized_weight(linear.weight, scale);
  weight = register_buffer("weight", w);
  weight_scale = register_buffer("weight_scale", s);
  weight_zero_point = register_buffer("weight_zero_point", zeros({s.numel()}, TensorOptions().dtype(kInt32)));
  if (linear.bias.defined()) bias = register_buffer("bias", linear.bias.detach().to(kFloat32).clone());
  register_params(*this, in, out);
}

void QuantizedLinearImpl::refresh() { refresh_layer(*this, watch_, packed_, native::int8_pack_weight); }

Tensor QuantizedLinearImpl::forward(const Tensor& x) {
  check_uint8(x, *this);
  refresh();
  EMBER_CHECK(x.dim() >= 1 && x.size(-1) == in_features, "QuantizedLinear: expects input [..., ", in_features,
              "], got shape ", shape_str(x.sizes()));
  Shape shape = x.sizes();
  shape.back() = out_features;
  const Tensor rows = x.reshape({-1, in_features});
  return native::int8_gemm(rows, packed_, out_features, epilogue(input, output, weight_scale, bias, relu), kUInt8)
      .reshape(shape);
}

void QuantizedLinearImpl::pretty_print(std::ostream& os) const {
  os << (relu ? "QuantizedLinearReLU" : "QuantizedLinear") << "(in_features=" << in_features
     << ", out_features=" << out_features << ", " << output << ", qscheme=per_channel_affine)";
}

QuantizedConv2dImpl::QuantizedConv2dImpl(const nn::Conv2dImpl& conv, const Tensor& scale, ActivationParams in,
                                         ActivationParams out, bool relu)
    : Module("QuantizedConv2d"), options(conv.options), input(in), output(out), relu(relu) {
  EMBER_CHECK(conv.options.groups_ == 1, "QuantizedConv2d: grouped convolutions have no int8 form yet (groups ",
              conv.options.groups_, ")");
  auto [w, s] = quantized_weight(conv.weight, scale);  // [O, C, kh, kw]
  weight = register_buffer("weight", w);
  weight_scale = register_buffer("weight_scale", s);
  weight_zero_point = register_buffer("weight_zero_point", zeros({s.numel()}, TensorOptions().dtype(kInt32)));
  if (conv.bias.defined()) bias = register_buffer("bias", conv.bias.detach().to(kFloat32).clone());
  register_params(*this, in, out);
}

void QuantizedConv2dImpl::refresh() { refresh_layer(*this, watch_, packed_, native::int8_pack_conv_weight); }

Tensor QuantizedConv2dImpl::forward(const Tensor& x) {
  check_uint8(x, *this);
  refresh();
  EMBER_CHECK(x.dim() == 4 && x.size(1) == options.in_channels_, "QuantizedConv2d: expects input [N, ",
              options.in_channels_, ", H, W], got shape ", shape_str(x.sizes()));
  Conv2dParams p;
  p.stride = options.stride_;
  p.padding = options.padding_;
  p.dilation = options.dilation_;
  return native::int8_conv2d(x, packed_, options.out_channels_, options.kernel_size_, p,
                             epilogue(input, output, weight_scale, bias, relu), kUInt8);
}

void QuantizedConv2dImpl::pretty_print(std::ostream& os) const {
  os << (relu ? "QuantizedConvReLU2d" : "QuantizedConv2d") << "(" << options.in_channels_ << ", "
     << options.out_channels_ << ", kernel_size=" << pair_str(options.kernel_size_)
     << ", stride=" << pair_str(options.stride_);
  if (options.padding_ != Int2{0, 0}) os << ", padding=" << pair_str(options.padding_);
  os << ", " << output << ")";
}

QuantizedReLUImpl::QuantizedReLUImpl(int64_t zp) : Module("QuantizedReLU") {
  zero_point = register_buffer("zero_point", int_buffer(zp));
}
Tensor QuantizedReLUImpl::forward(const Tensor& q) {
  check_uint8(q, *this);
  EMBER_CHECK(zero_point.numel() == 1 && zero_point.device() == q.device(),
              "QuantizedReLU: expects its zero point [1] on ", q.device(), ", got shape ",
              shape_str(zero_point.sizes()), " on ", zero_point.device());
  return maximum(q, zero_point.to(kUInt8));
}

Tensor QuantizedMaxPool2dImpl::forward(const Tensor& q) {
  check_uint8(q, *this);
  return max_pool2d(q, options.kernel_size_, options.stride_, options.padding_, options.dilation_, options.ceil_mode_);
}

// ---- quantization-aware training ----

namespace {
template <class Qat, class Float>
void copy_state(Qat& qat, const Float& f) {
  NoGradGuard no_grad;
  qat.weight.copy_(f.weight);
  if (f.bias.defined()) qat.bias.copy_(f.bias);
}
}  // namespace

QatLinearImpl::QatLinearImpl(const nn::LinearImpl& linear) : LinearImpl(linear.options) {
  copy_state(*this, linear);
  weight_fake_quant = register_module("weight_fake_quant", std::make_shared<FakeQuantizeImpl>(weight_options()));
}
Tensor QatLinearImpl::forward(const Tensor& x) { return linear(x, (*weight_fake_quant)(weight), bias); }

QatConv2dImpl::QatConv2dImpl(const nn::Conv2dImpl& conv) : Conv2dImpl(conv.options) {
  copy_state(*this, conv);
  weight_fake_quant = register_module("weight_fake_quant", std::make_shared<FakeQuantizeImpl>(weight_options()));
}
Tensor QatConv2dImpl::forward(const Tensor& x) {
  return conv2d(x, (*weight_fake_quant)(weight), bias, options.stride_, options.padding_, options.dilation_,
                options.groups_);
}

// ---- prepare and convert ----

namespace {

// The activation post-process (an observer, or a FakeQuantize) of a module's output, called by a
// forward hook; the first layer also gets one for its input ("input_post_process").
template <class Make>
void attach(nn::SequentialImpl& model, const Make& make) {
  const auto children = model.children();
  EMBER_CHECK(!children.empty(), "quantization.prepare: the Sequential is empty");
  for (const auto& child : children) {
    EMBER_CHECK(child->find_module("activation_post_process") == nullptr, "quantization.prepare: ", child->type_name(),
                " is prepared already");
    auto post = child->register_module("activation_post_process", make());
    child->register_forward_hook(
        [post](nn::Module&, const TensorList&, const Tensor& out) -> std::optional<Tensor> { return (*post)(out); });
  }
  auto pre = children.front()->register_module("input_post_process", make());
  children.front()->register_forward_pre_hook(
      [pre](nn::Module&, const TensorList& inputs) -> std::optional<TensorList> {
        return TensorList{(*pre)(inputs.at(0))};
      });
}

ActivationParams params_of(nn::Module& post, const char* where) {
  ActivationParams a;
  Tensor scale, zero_point;
  if (auto* fq = post.as<FakeQuantizeImpl>()) {
    scale = fq->scale;
    zero_point = fq->zero_point;
    a.quant_min = fq->observer().quant_min();
    a.quant_max = fq->observer().quant_max();
  } else if (auto* obs = post.as<ObserverImpl>()) {
    std::tie(scale, zero_point) = obs->calculate_qparams();
    a.quant_min = obs->quant_min();
    a.quant_max = obs->quant_max();
    EMBER_CHECK(std::isfinite(obs->min_val.item<float>()), "quantization.convert: the observer of ", where,
                " saw no data; run calibration batches through the prepared model first");
  } else {
    throw Error(::ember::detail::concat("quantization.convert: ", where, " has no observer"));
  }
  a.scale = scale.item<double>();
  a.zero_point = zero_point.item<int64_t>();
  EMBER_CHECK(a.quant_max <= 127, "quantization.convert: activations of ", where, " use [", a.quant_min, ", ",
              a.quant_max, "]; int8 layers need 7 bits (Note [Int8 GEMM])");
  return a;
}

nn::Module& post_of(nn::Module& m, const std::string& name) {
  auto post = m.find_module("activation_post_process");
  EMBER_CHECK(post != nullptr, "quantization.convert: layer (", name, ") ", m.type_name(),
              " was not prepared (call prepare or prepare_qat first)");
  return *post;
}

}  // namespace

void prepare(nn::SequentialImpl& model, Calibration calibration) {
  attach(model, [calibration]() -> std::shared_ptr<nn::Module> {
    if (calibration == Calibration::Histogram)
      return std::make_shared<HistogramObserverImpl>(ObserverOptions().with_reduce_range(true));  // [0, 127]
    return std::make_shared<MinMaxObserverImpl>(activation_options());
  });
}

void prepare_qat(nn::SequentialImpl& model) {
  for (const auto& item : model.named_children()) {
    if (auto* lin = item.value()->as<nn::LinearImpl>(); lin && !item.value()->as<QatLinearImpl>())
      model.replace_module(item.key(), std::make_shared<QatLinearImpl>(*lin));
    else if (auto* conv = item.value()->as<nn::Conv2dImpl>(); conv && !item.value()->as<QatConv2dImpl>())
      model.replace_module(item.key(), std::make_shared<QatConv2dImpl>(*conv));
  }
  attach(model, [] {
    return std::make_shared<FakeQuantizeImpl>(default_activation_options());  // [0, 255] halved: [0, 127]
  });
}

namespace {
// GEMM depth of a Linear or Conv2d (0 for other modules).
int64_t gemm_depth(nn::Module& m) {
  if (auto* lin = m.as<nn::LinearImpl>()) return lin->options.in_features_;
  if (auto* conv = m.as<nn::Conv2dImpl>())
    return conv->options.in_channels_ / conv->options.groups_ * conv->options.kernel_size_[0] *
           conv->options.kernel_size_[1];
  return 0;
}
// A plain float32 copy of a (QAT or plain) Linear or Conv2d.
std::shared_ptr<nn::Module> float_copy(nn::Module& m) {
  std::shared_ptr<nn::Module> out;
  if (auto* lin = m.as<nn::LinearImpl>()) {
    auto copy = std::make_shared<nn::LinearImpl>(lin->options);
    copy->weight.copy_(lin->weight);
    if (lin->bias.defined()) copy->bias.copy_(lin->bias);
    out = copy;
  } else {
    auto* conv = m.as<nn::Conv2dImpl>();
    auto copy = std::make_shared<nn::Conv2dImpl>(conv->options);
    copy->weight.copy_(conv->weight);
    if (conv->bias.defined()) copy->bias.copy_(conv->bias);
    out = copy;
  }
  return out;
}
}  // namespace

nn::Sequential convert(nn::SequentialImpl& model, const ConvertOptions& options) {
  NoGradGuard no_grad;
  const auto children = model.named_children();
  EMBER_CHECK(children.size() > 0, "quantization.convert: the Sequential is empty");
  const std::vector<std::string> names = children.keys();
  auto first = children.values().front();
  auto input_post = first->find_module("input_post_process");
  EMBER_CHECK(input_post != nullptr, "quantization.convert: the model was not prepared (call prepare or prepare_qat)");
  ActivationParams current = params_of(*input_post, "the input");
  nn::Sequential out;
  size_t start = 0;
  const int64_t depth = gemm_depth(*first);
  if (depth > 0 && depth < options.float_first_layer_below_depth) {  // a shallow first layer stays float32
    out->push_back(float_copy(*first));
    start = 1;
    if (names.size() > 1 && children[names[1]]->as<nn::ReLUImpl>()) {
      out->push_back(nn::ReLU());
      start = 2;
    }
    EMBER_CHECK(start < names.size(), "quantization.convert: nothing is left to quantize after the first layer");
    current = params_of(post_of(*children[names[start - 1]], names[start - 1]), "the first float32 layer");
  }
  out->push_back(std::make_shared<QuantizeImpl>(current));
  for (size_t i = start; i < names.size(); ++i) {
    nn::Module& m = *children[names[i]];
    const std::string where = "(" + names[i] + ") " + m.type_name();
    const bool fuse_relu = i + 1 < names.size() && children[names[i + 1]]->as<nn::ReLUImpl>() != nullptr;
    if (m.as<nn::LinearImpl>() || m.as<nn::Conv2dImpl>()) {
      nn::Module& post = fuse_relu ? post_of(*children[names[i + 1]], names[i + 1]) : post_of(m, names[i]);
      const ActivationParams produced = params_of(post, where.c_str());
      Tensor weight_scale;
      if (auto* qat = m.as<QatLinearImpl>()) weight_scale = qat->weight_fake_quant->scale;
      if (auto* qat = m.as<QatConv2dImpl>()) weight_scale = qat->weight_fake_quant->scale;
      if (weight_scale.defined() && weight_scale.numel() == 1) weight_scale = Tensor();  // never ran: observe now
      if (auto* lin = m.as<nn::LinearImpl>())
        out->push_back(std::make_shared<QuantizedLinearImpl>(*lin, weight_scale, current, produced, fuse_relu));
      else
        out->push_back(
            std::make_shared<QuantizedConv2dImpl>(*m.as<nn::Conv2dImpl>(), weight_scale, current, produced, fuse_relu));
      current = produced;
      if (fuse_relu) ++i;
    } else if (m.as<nn::ReLUImpl>()) {
      out->push_back(std::make_shared<QuantizedReLUImpl>(current.zero_point));
    } else if (auto* pool = m.as<nn::MaxPool2dImpl>()) {
      out->push_back(std::make_shared<QuantizedMaxPool2dImpl>(pool->options));
    } else if (auto* flat = m.as<nn::FlattenImpl>()) {
      out->push_back(nn::Flatten(flat->start_dim(), flat->end_dim()));
    } else if (m.as<nn::DropoutImpl>() || m.as<nn::IdentityImpl>()) {
      continue;  // inference: identity
    } else {
      throw Error(::ember::detail::concat(
          "quantization.convert: ", where, " has no int8 form (int8 layers: Linear, Conv2d, ReLU, MaxPool2d, Flatten)",
          m.as<nn::BatchNormImpl>() ? "; fold it into the layer before it first (nn::utils::fuse_batch_norms)" : ""));
    }
  }
  out->push_back(std::make_shared<DeQuantizeImpl>(current));
  out->eval();
  return out;
}

}  // namespace ember::quantization
