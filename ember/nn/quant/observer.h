#pragma once
// Observers and fake quantization (torch.ao.quantization.observer / fake_quantize): modules that
// watch the tensors passing through them, keep their range, and turn it into a scale and a zero
// point exactly as PyTorch does (REFERENCE-pytorch.md §10):
//   mn = min(min, 0), mx = max(max, 0)  (so that 0 is exactly representable)
//   symmetric: scale = max(-mn, mx) / ((qmax - qmin) / 2), zero point 0 (qint8) or 128 (quint8)
//   affine:    scale = (mx - mn) / (qmax - qmin), zero point = clamp(qmin - round(mn / scale))
//   scale >= float32's epsilon; before any observation, (1, 0).
// All in float32, in PyTorch's order of operations, so the integers match to the last one.
#include <optional>
#include <utility>

#include "ember/nn/module.h"
#include "ember/tensor/quantized.h"

namespace ember::quantization {

struct ObserverOptions {
  QDType dtype = QDType::QUInt8;
  QScheme qscheme = QScheme::PerTensorAffine;
  bool reduce_range = false;  // one bit less (7-bit activations: Note [Int8 GEMM])
  // A custom range (both or neither); reduce_range halves it, as PyTorch does.
  std::optional<int64_t> quant_min, quant_max;
  double averaging_constant = 0.01;  // the moving-average observers
  int64_t ch_axis = 0;               // the per-channel observers
  ObserverOptions& with_dtype(QDType d) { return dtype = d, *this; }
  ObserverOptions& with_qscheme(QScheme s) { return qscheme = s, *this; }
  ObserverOptions& with_reduce_range(bool r) { return reduce_range = r, *this; }
  ObserverOptions& with_range(int64_t lo, int64_t hi) { return quant_min = lo, quant_max = hi, *this; }
  ObserverOptions& with_averaging_constant(double c) { return averaging_constant = c, *this; }
  ObserverOptions& with_ch_axis(int64_t a) { return ch_axis = a, *this; }
};

// The quantization range [quant_min, quant_max] PyTorch derives from the options
// (utils.calculate_qmin_qmax).
std::pair<int64_t, int64_t> quant_range(const ObserverOptions& o);

// The base: forward records the range of its input and returns the input unchanged.
// Buffers (PyTorch's names): eps, min_val, max_val.
class ObserverImpl : public nn::Module {
 public:
  ObserverImpl(std::string type_name, ObserverOptions options);
  Tensor forward(const Tensor& x) override;
  // (scale float32 [C], zero point int32 [C]); C = 1 per tensor.
  virtual std::pair<Tensor, Tensor> calculate_qparams() const;
  const ObserverOptions& options() const { return options_; }
  int64_t quant_min() const { return quant_min_; }
  int64_t quant_max() const { return quant_max_; }
  void pretty_print(std::ostream& os) const override;

  Tensor eps, min_val, max_val;

 protected:
  // The range of this batch: per tensor ([1] each) or per channel ([C] each).
  virtual std::pair<Tensor, Tensor> batch_range(const Tensor& x) const;
  // PyTorch's _calculate_qparams on these ranges (one per channel).
  std::pair<Tensor, Tensor> qparams_from(const std::vector<float>& mins, const std::vector<float>& maxs) const;
  ObserverOptions options_;
  int64_t quant_min_, quant_max_;
  bool moving_average_ = false;
};

// The running min and max of everything seen (PyTorch's default observer: quint8, per tensor affine).
class MinMaxObserverImpl : public ObserverImpl {
 public:
  explicit MinMaxObserverImpl(ObserverOptions options = {});
};
// The first batch sets the range; each later one moves it by averaging_constant (0.01) of the way.
class MovingAverageMinMaxObserverImpl : public ObserverImpl {
 public:
  explicit MovingAverageMinMaxObserverImpl(ObserverOptions options = {});
};
// A range per channel along ch_axis (weights: qint8, per channel symmetric).
class PerChannelMinMaxObserverImpl : public ObserverImpl {
 public:
  explicit PerChannelMinMaxObserverImpl(
      ObserverOptions options = ObserverOptions().with_qscheme(QScheme::PerChannelAffine));

 protected:
  std::pair<Tensor, Tensor> batch_range(const Tensor& x) const override;
};
// A running histogram of everything seen (2048 bins), whose qparams come from the range that
// minimises the L2 error of quantizing it (PyTorch's HistogramObserver and its
// _non_linear_param_search, which trims outliers). Per tensor only. Buffers: eps, min_val,
// max_val, histogram. As in PyTorch 1.13, each batch's histogram spans the integer parts of its
// range (histc's min=int(min), max=int(max)), so values outside them are not counted; ember
// follows it to give the same qparams.
class HistogramObserverImpl : public ObserverImpl {
 public:
  explicit HistogramObserverImpl(ObserverOptions options = {}, int64_t bins = 2048, int64_t upsample_rate = 128);
  Tensor forward(const Tensor& x) override;
  std::pair<Tensor, Tensor> calculate_qparams() const override;
  Tensor histogram;
  int64_t bins, upsample_rate;

 private:
  std::pair<float, float> search_range() const;
};

EMBER_MODULE(MinMaxObserver);
EMBER_MODULE(HistogramObserver);
EMBER_MODULE(MovingAverageMinMaxObserver);
EMBER_MODULE(PerChannelMinMaxObserver);

// PyTorch's presets: activations (quint8 affine, 7 bits: reduce_range) and weights (qint8
// symmetric, per tensor or per channel).
ObserverOptions default_activation_options();
ObserverOptions default_weight_options();
ObserverOptions default_per_channel_weight_options();

// Quantization-aware training's module: observes its input (when the observer is on), updates
// its scale and zero point, and returns the fake-quantized input (when fake quantization is on),
// through which gradients pass by the straight-through estimator. Buffers: scale, zero_point,
// and the observer's (under "activation_post_process.").
class FakeQuantizeImpl : public nn::Module {
 public:
  // The observer is a moving-average one (per channel when the scheme is).
  explicit FakeQuantizeImpl(ObserverOptions options = default_activation_options());
  Tensor forward(const Tensor& x) override;
  void enable_observer(bool on = true) { observer_enabled_ = on; }
  void enable_fake_quant(bool on = true) { fake_quant_enabled_ = on; }
  ObserverImpl& observer() { return *observer_; }
  void pretty_print(std::ostream& os) const override;

  Tensor scale, zero_point;

 private:
  std::shared_ptr<ObserverImpl> observer_;
  bool observer_enabled_ = true, fake_quant_enabled_ = true;
};
EMBER_MODULE(FakeQuantize);

// fbgemm's ChooseQuantizationParams, which dynamic quantization uses for each batch: the range
// widened to hold 0, scale in double, the zero point nudged from whichever end loses less.
struct TensorQParams {
  double scale;
  int64_t zero_point;
};
TensorQParams choose_quantization_params(float min, float max, int64_t qmin, int64_t qmax, bool reduce_range);

}  // namespace ember::quantization
