#include "ember/nn/quant/observer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <ostream>

#include "ember/autograd/grad_mode.h"

namespace ember::quantization {

std::pair<int64_t, int64_t> quant_range(const ObserverOptions& o) {
  EMBER_CHECK(o.quant_min.has_value() == o.quant_max.has_value(),
              "observer: give both quant_min and quant_max, or neither");
  if (o.quant_min) {
    int64_t lo = *o.quant_min, hi = *o.quant_max;
    EMBER_CHECK(lo <= 0 && 0 <= hi, "observer: the quantization range [", lo, ", ", hi, "] must include 0");
    EMBER_CHECK(lo < hi, "observer: quant_min must be less than quant_max, got [", lo, ", ", hi, "]");
    const auto [dlo, dhi] = qdtype_range(o.dtype);
    EMBER_CHECK(lo >= dlo && hi <= dhi, "observer: the range [", lo, ", ", hi, "] does not fit ", qdtype_name(o.dtype));
    // Python's floor division, as PyTorch halves a custom range.
    auto floor_half = [](int64_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); };
    if (o.reduce_range) lo = floor_half(lo), hi = floor_half(hi);
    // (a range of one value has no scale: (max - min) / 0, then a NaN zero point)
    EMBER_CHECK(lo < hi, "observer: the range [", *o.quant_min, ", ", *o.quant_max,
                "] is a single value once halved by reduce_range");
    return {lo, hi};
  }
  switch (o.dtype) {
    case QDType::QInt8:
      return o.reduce_range ? std::pair<int64_t, int64_t>{-64, 63} : std::pair<int64_t, int64_t>{-128, 127};
    case QDType::QUInt8:
      return o.reduce_range ? std::pair<int64_t, int64_t>{0, 127} : std::pair<int64_t, int64_t>{0, 255};
    case QDType::QInt32:
      return qdtype_range(QDType::QInt32);
  }
  return {0, 0};
}

ObserverOptions default_activation_options() {
  return ObserverOptions().with_dtype(QDType::QUInt8).with_range(0, 255).with_reduce_range(true);
}
ObserverOptions default_weight_options() {
  return ObserverOptions().with_dtype(QDType::QInt8).with_range(-128, 127).with_qscheme(QScheme::PerTensorSymmetric);
}
ObserverOptions default_per_channel_weight_options() {
  return ObserverOptions().with_dtype(QDType::QInt8).with_range(-128, 127).with_qscheme(QScheme::PerChannelSymmetric);
}

// ---- observers ----

ObserverImpl::ObserverImpl(std::string type_name, ObserverOptions options)
    : Module(std::move(type_name)), options_(options) {
  std::tie(quant_min_, quant_max_) = quant_range(options_);
  EMBER_CHECK(options_.averaging_constant > 0 && options_.averaging_constant <= 1,
              "observer: averaging_constant must be in (0, 1], got ", options_.averaging_constant);
  eps = register_buffer("eps", full({1}, std::numeric_limits<float>::epsilon()));
  if (is_per_channel(options_.qscheme)) {
    min_val = register_buffer("min_val", empty({0}));
    max_val = register_buffer("max_val", empty({0}));
  } else {
    min_val = register_buffer("min_val", full({}, std::numeric_limits<float>::infinity()));
    max_val = register_buffer("max_val", full({}, -std::numeric_limits<float>::infinity()));
  }
}

std::pair<Tensor, Tensor> ObserverImpl::batch_range(const Tensor& x) const { return {x.amin(), x.amax()}; }

Tensor ObserverImpl::forward(const Tensor& x) {
  if (x.numel() == 0) return x;
  NoGradGuard no_grad;
  const Tensor in = x.detach().to(kFloat32);
  auto [lo, hi] = batch_range(in);
  // set_data keeps each buffer's identity, so the registered buffer and the member stay one tensor.
  const Tensor& min_buf = min_val;
  const Tensor& max_buf = max_val;
  const bool fresh =
      min_buf.numel() == 0 || (min_buf.dim() == 0 && std::isinf(min_buf.item<float>()) && min_buf.item<float>() > 0 &&
                               std::isinf(max_buf.item<float>()) && max_buf.item<float>() < 0);
  if (!fresh) {
    if (moving_average_) {
      const float c = static_cast<float>(options_.averaging_constant);
      lo = min_buf + (lo - min_buf) * c;
      hi = max_buf + (hi - max_buf) * c;
    } else {
      lo = minimum(lo, min_buf);
      hi = maximum(hi, max_buf);
    }
  }
  min_buf.set_data(lo.reshape(min_buf.numel() == 0 ? lo.sizes() : min_buf.sizes()).clone());
  max_buf.set_data(hi.reshape(max_buf.numel() == 0 ? hi.sizes() : max_buf.sizes()).clone());
  return x;
}

std::pair<Tensor, Tensor> ObserverImpl::calculate_qparams() const {
  return qparams_from(min_val.to_vector<float>(), max_val.to_vector<float>());
}

std::pair<Tensor, Tensor> ObserverImpl::qparams_from(const std::vector<float>& mins,
                                                     const std::vector<float>& maxs) const {
  const bool seen =
      !mins.empty() && !(mins.size() == 1 && std::isinf(mins[0]) && mins[0] > 0 && std::isinf(maxs[0]) && maxs[0] < 0);
  if (!seen) return {full({1}, 1.0), full({1}, 0, TensorOptions().dtype(kInt32))};
  const float eps_value = std::numeric_limits<float>::epsilon();
  const float qmin = static_cast<float>(quant_min_), qmax = static_cast<float>(quant_max_);
  std::vector<float> scales(mins.size());
  std::vector<int32_t> zero_points(mins.size(), 0);
  for (size_t c = 0; c < mins.size(); ++c) {
    EMBER_CHECK(mins[c] <= maxs[c], type_name(), ": min ", mins[c], " is greater than max ", maxs[c]);
    // (an inf seen in calibration: the scale would be inf and the zero point NaN, converted to an
    // integer, undefined; PyTorch's ends up at quant_min by accident)
    EMBER_CHECK(std::isfinite(mins[c]) && std::isfinite(maxs[c]), type_name(), ": the observed range [", mins[c], ", ",
                maxs[c], "] is not finite, so it has no scale");
    const float mn = std::min(mins[c], 0.0f), mx = std::max(maxs[c], 0.0f);
    if (is_symmetric(options_.qscheme)) {
      const float half_range = static_cast<float>(static_cast<double>(quant_max_ - quant_min_) / 2);
      scales[c] = std::max(std::max(-mn, mx) / half_range, eps_value);
      if (options_.dtype == QDType::QUInt8)
        zero_points[c] = options_.quant_min ? static_cast<int32_t>((quant_min_ + quant_max_) / 2) : 128;
    } else {
      scales[c] = std::max((mx - mn) / (qmax - qmin), eps_value);
      EMBER_CHECK(std::isfinite(scales[c]), type_name(), ": the observed range [", mins[c], ", ", maxs[c],
                  "] is too wide for a float32 scale");
      // torch.round (half to even) in float32, then in integers: for a qint32 range, quant_max
      // as a float32 is 2^31, past int32 (|mn / scale| <= qmax - qmin < 2^33: an int64 holds it)
      const auto rounded = static_cast<int64_t>(std::nearbyint(mn / scales[c]));
      zero_points[c] = static_cast<int32_t>(std::clamp(quant_min_ - rounded, quant_min_, quant_max_));
    }
  }
  const Shape shape{static_cast<int64_t>(scales.size())};
  return {tensor(scales, shape), tensor(zero_points, shape)};
}

void ObserverImpl::pretty_print(std::ostream& os) const {
  os << type_name() << "(min_val=" << min_val << ", max_val=" << max_val << ")";
}

MinMaxObserverImpl::MinMaxObserverImpl(ObserverOptions options) : ObserverImpl("MinMaxObserver", options) {
  EMBER_CHECK(!is_per_channel(options.qscheme), "MinMaxObserver: a per-channel scheme needs PerChannelMinMaxObserver");
}

MovingAverageMinMaxObserverImpl::MovingAverageMinMaxObserverImpl(ObserverOptions options)
    : ObserverImpl("MovingAverageMinMaxObserver", options) {
  EMBER_CHECK(!is_per_channel(options.qscheme),
              "MovingAverageMinMaxObserver: a per-channel scheme needs PerChannelMinMaxObserver");
  moving_average_ = true;
}

PerChannelMinMaxObserverImpl::PerChannelMinMaxObserverImpl(ObserverOptions options)
    : ObserverImpl("PerChannelMinMaxObserver", options) {
  EMBER_CHECK(is_per_channel(options.qscheme), "PerChannelMinMaxObserver: expects a per-channel scheme, got ",
              qscheme_name(options.qscheme));
}

std::pair<Tensor, Tensor> PerChannelMinMaxObserverImpl::batch_range(const Tensor& x) const {
  const int64_t axis = wrap_dim(options_.ch_axis, x.dim(), "PerChannelMinMaxObserver");
  const Tensor rows = x.movedim(axis, 0).flatten(1);
  return {rows.amin({1}), rows.amax({1})};
}

// ---- fake quantization ----

FakeQuantizeImpl::FakeQuantizeImpl(ObserverOptions options) : Module("FakeQuantize") {
  if (is_per_channel(options.qscheme)) {
    observer_ = std::make_shared<PerChannelMinMaxObserverImpl>(options);
  } else {
    observer_ = std::make_shared<MovingAverageMinMaxObserverImpl>(options);
  }
  scale = register_buffer("scale", full({1}, 1.0));
  zero_point = register_buffer("zero_point", full({1}, 0, TensorOptions().dtype(kInt32)));
  register_module("activation_post_process", observer_);
}

Tensor FakeQuantizeImpl::forward(const Tensor& x) {
  const Tensor& s = scale;
  const Tensor& z = zero_point;
  if (observer_enabled_) {
    (*observer_)(x.detach());
    auto [new_scale, new_zero_point] = observer_->calculate_qparams();
    NoGradGuard no_grad;
    s.set_data(new_scale.to(s.device()));
    z.set_data(new_zero_point.to(z.device()));
  }
  if (!fake_quant_enabled_) return x;
  if (is_per_channel(observer_->options().qscheme))
    return fake_quantize_per_channel_affine(x, s, z, observer_->options().ch_axis, observer_->quant_min(),
                                            observer_->quant_max());
  return fake_quantize_per_tensor_affine(x, s.item<double>(), z.item<int64_t>(), observer_->quant_min(),
                                         observer_->quant_max());
}

void FakeQuantizeImpl::pretty_print(std::ostream& os) const {
  os << "FakeQuantize(fake_quant_enabled=" << fake_quant_enabled_ << ", observer_enabled=" << observer_enabled_
     << ", quant_min=" << observer_->quant_min() << ", quant_max=" << observer_->quant_max()
     << ", dtype=" << qdtype_name(observer_->options().dtype)
     << ", qscheme=" << qscheme_name(observer_->options().qscheme) << ")";
}

// ---- the dynamic choice ----

TensorQParams choose_quantization_params(float min, float max, int64_t qmin, int64_t qmax, bool reduce_range) {
  EMBER_CHECK(std::isfinite(min) && std::isfinite(max), "choose_quantization_params: the range [", min, ", ", max,
              "] is not finite (an inf or NaN in the input); its zero point would be undefined");
  EMBER_CHECK(min <= max, "choose_quantization_params: min ", min, " is greater than max ", max);
  constexpr int64_t kInt32Min = std::numeric_limits<int32_t>::min(), kInt32Max = std::numeric_limits<int32_t>::max();
  EMBER_CHECK(kInt32Min <= qmin && qmin < qmax && qmax <= kInt32Max && (!reduce_range || qmin / 2 < qmax / 2),
              "choose_quantization_params: [", qmin, ", ", qmax, "] is not a quantization range",
              reduce_range ? " once halved" : "", " (qmin < qmax, both int32s)");
  if (reduce_range) qmin /= 2, qmax /= 2;
  min = std::min(min, 0.0f);
  max = std::max(max, 0.0f);
  double scale = (static_cast<double>(max) - min) / static_cast<double>(qmax - qmin);
  // A scale whose float reciprocal is infinite (or 0) becomes 0.1, as fbgemm does.
  if (static_cast<float>(scale) == 0.0f || std::isinf(1.0f / static_cast<float>(scale))) scale = 0.1;
  constexpr float kSmallScale = 6.1e-5f;  // fbgemm's SMALL_SCALE_THRESHOLD
  if (scale < kSmallScale) {
    const float org_scale = static_cast<float>(scale);
    scale = kSmallScale;
    if (min == 0.0f)
      max = kSmallScale * static_cast<float>(qmax - qmin);
    else if (max == 0.0f)
      min = -kSmallScale * static_cast<float>(qmax - qmin);
    else
      min *= kSmallScale / org_scale, max *= kSmallScale / org_scale;
  }
  const double from_min = static_cast<double>(qmin) - min / scale, from_max = static_cast<double>(qmax) - max / scale;
  const double from_min_error = std::abs(static_cast<double>(qmin)) - std::abs(min / scale);
  const double from_max_error = std::abs(static_cast<double>(qmax)) - std::abs(max / scale);
  const double initial = from_min_error < from_max_error ? from_min : from_max;
  int64_t zero_point = initial < static_cast<double>(qmin)   ? qmin
                       : initial > static_cast<double>(qmax) ? qmax
                                                             : static_cast<int64_t>(std::nearbyint(initial));
  return {static_cast<double>(static_cast<float>(scale)), zero_point};
}

}  // namespace ember::quantization
