// HistogramObserver (nn/quant/observer.h): PyTorch 1.13's algorithm, step for step, in its
// precisions — float32 where PyTorch computes with float32 tensors, double where it computes with
// Python floats — so that the same batches give the same qparams.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ember/autograd/grad_mode.h"
#include "ember/nn/quant/observer.h"

namespace ember::quantization {
namespace {

// torch.histc(x, bins, min=lo, max=hi) on the CPU: linear bins over [lo, hi] (the data's own
// range when lo == hi, widened by 1 each way if that is still empty), the last bin closed, values
// outside (and NaN) not counted; the bin is (x - lo) * bins / (hi - lo) in float32.
std::vector<float> histc(const std::vector<float>& x, int64_t bins, double lo, double hi) {
  if (lo == hi && !x.empty()) {
    lo = *std::min_element(x.begin(), x.end());
    hi = *std::max_element(x.begin(), x.end());
  }
  if (lo == hi) lo -= 1, hi += 1;
  const float left = static_cast<float>(lo), right = static_cast<float>(hi);
  std::vector<float> h(static_cast<size_t>(bins), 0.0f);
  for (float v : x) {
    if (!(v >= left && v <= right)) continue;
    // (v <= right, so the bin is at most `bins`: the last one, or more when the product overflowed)
    const float at = (v - left) * static_cast<float>(bins) / (right - left);
    const int64_t pos = at < static_cast<float>(bins) ? static_cast<int64_t>(at) : bins - 1;
    h[static_cast<size_t>(pos)] += 1.0f;
  }
  return h;
}

// torch.div(a, b, rounding_mode='floor') for floats (ATen's div_floor_floating).
float floor_div(float a, float b) {
  if (b == 0) return a / b;
  const float mod = std::fmod(a, b);
  float div = (a - mod) / b;
  if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;
  if (div == 0) return std::copysign(0.0f, a / b);
  float floordiv = std::floor(div);
  if (div - floordiv > 0.5f) floordiv += 1;
  return floordiv;
}

// The most finer bins a combination of histograms makes (PyTorch makes a tensor of them).
constexpr int64_t kMaxFineBins = int64_t{1} << 30;

// _get_norm: density * (end^3 - begin^3) / 3, in float32.
float l2_norm(float begin, float end, float density) {
  return density * ((end * end * end - begin * begin * begin) / 3);
}

}  // namespace

HistogramObserverImpl::HistogramObserverImpl(ObserverOptions options, int64_t bins, int64_t upsample_rate)
    : ObserverImpl("HistogramObserver", options), bins(bins), upsample_rate(upsample_rate) {
  EMBER_CHECK(!is_per_channel(options.qscheme), "HistogramObserver: per tensor schemes only, got ",
              qscheme_name(options.qscheme));
  EMBER_CHECK(bins > 0 && upsample_rate > 0, "HistogramObserver: bins and upsample_rate must be positive, got ", bins,
              " and ", upsample_rate);
  EMBER_CHECK(upsample_rate <= kMaxFineBins / bins,
              "HistogramObserver: bins * upsample_rate must be at most 2^30, got ", bins, " * ", upsample_rate);
  histogram = register_buffer("histogram", zeros({bins}));
}

Tensor HistogramObserverImpl::forward(const Tensor& x_in) {
  if (x_in.numel() == 0) return x_in;
  NoGradGuard no_grad;
  const std::vector<float> x = x_in.detach().to(Device(kCPU), kFloat32).to_vector<float>();
  const float old_min = min_val.item<float>(), old_max = max_val.item<float>();
  // torch.histc's check: its range must be finite (an inf or NaN in the batch makes it not).
  for (float v : x)
    EMBER_CHECK(std::isfinite(v), "HistogramObserver: the batch holds ", v,
                ", so the range of its histogram is not finite");
  const float new_min = *std::min_element(x.begin(), x.end()), new_max = *std::max_element(x.begin(), x.end());
  std::vector<float> h;
  float lo, hi;
  const bool fresh = (std::isinf(old_min) && old_min > 0 && std::isinf(old_max) && old_max < 0) || old_min == old_max;
  if (fresh) {
    lo = new_min, hi = new_max;
    h = histc(x, bins, std::trunc(lo), std::trunc(hi));  // Python's int(): toward zero
  } else {
    lo = std::min(new_min, old_min);
    hi = std::max(new_max, old_max);
    // _adjust_min_max: the old bins, upsampled, must fall on whole new bins.
    const float hist_bin_width = (old_max - old_min) / static_cast<float>(bins * upsample_rate);
    const float span = static_cast<float>(bins) * hist_bin_width;
    // PyTorch makes a tensor of bins * downsample_rate finer bins: too many for memory (or for
    // int64) when the new range is that much wider than the old.
    const double rate = std::ceil(static_cast<double>((hi - lo) / span));
    EMBER_CHECK(rate <= static_cast<double>(kMaxFineBins / bins), "HistogramObserver: the range [", lo, ", ", hi,
                "] is ", rate, " times wider than the histogram's [", old_min, ", ", old_max,
                "]: too many finer bins to combine them");
    const auto downsample_rate = static_cast<int64_t>(rate);
    const float e = static_cast<float>(downsample_rate) * span - (hi - lo);
    hi = hi + e;
    const auto start_idx = static_cast<int64_t>(std::nearbyint((old_min - lo) / hist_bin_width));
    h = histc(x, bins, std::trunc(lo), std::trunc(hi));
    const std::vector<float> old = histogram.to_vector<float>();
    if (lo == old_min && hi == old_max) {
      for (int64_t i = 0; i < bins; ++i) h[i] += old[i];
    } else {
      // _combine_histograms: the old histogram spread over upsample_rate finer bins, placed at
      // start_idx, summed (in double) over each run of downsample_rate of them.
      const int64_t fine = bins * downsample_rate;
      EMBER_CHECK(start_idx >= 0 && start_idx + bins * upsample_rate <= fine,
                  "HistogramObserver: the old histogram does not fit the new range");
      std::vector<double> integral(static_cast<size_t>(bins));
      double running = 0;
      for (int64_t f = 0, b = 0; f < fine; ++f) {
        const int64_t k = f - start_idx;
        if (k >= 0 && k < bins * upsample_rate) running += old[static_cast<size_t>(k / upsample_rate)];
        if ((f + 1) % downsample_rate == 0) integral[static_cast<size_t>(b++)] = running;
      }
      for (int64_t i = 0; i < bins; ++i) {
        const float shifted = i == 0 ? 0.0f : static_cast<float>(integral[i - 1]);
        h[i] = h[i] + static_cast<float>((integral[i] - shifted) / static_cast<double>(upsample_rate));
      }
    }
  }
  histogram.set_data(tensor(h, Shape{bins}));
  min_val.set_data(full({}, lo));
  max_val.set_data(full({}, hi));
  return x_in;
}

// _non_linear_param_search: trim the histogram's ends while the L2 quantization error falls.
std::pair<float, float> HistogramObserverImpl::search_range() const {
  const std::vector<float> h = histogram.to_vector<float>();
  const float lo = min_val.item<float>(), hi = max_val.item<float>();
  const int64_t dst_nbins = options_.dtype == QDType::QInt32 ? (int64_t{1} << 32) : 256;  // 2 ** bits
  std::vector<float> csum(h.size());
  double running = 0, total = 0;  // torch.cumsum accumulates float32 in double on the CPU
  for (size_t i = 0; i < h.size(); ++i) csum[i] = static_cast<float>(running += h[i]);
  for (float v : h) total += v;  // (PyTorch's float32 sum, to the last bits of its order)
  total = static_cast<double>(static_cast<float>(total));
  const double bin_width_d = (static_cast<double>(hi) - static_cast<double>(lo)) / static_cast<double>(bins);

  // _compute_quantization_error for the range [start, end] of source bins.
  auto error = [&](int64_t start, int64_t end) {
    const double dst_bin_width_d = bin_width_d * static_cast<double>(end - start + 1) / static_cast<double>(dst_nbins);
    if (dst_bin_width_d == 0.0) return 0.0;
    const float bw = static_cast<float>(bin_width_d), dw = static_cast<float>(dst_bin_width_d);
    const float half = static_cast<float>(dst_bin_width_d / 2), neg_half = static_cast<float>(-dst_bin_width_d / 2);
    const float top = static_cast<float>(dst_nbins - 1);
    const float inner = l2_norm(neg_half, half, 1.0f);  // per unit density
    double sum = 0;
    for (int64_t i = 0; i < bins; ++i) {
      const float begin = static_cast<float>(i - start) * bw, end_edge = begin + bw;
      const float dst_begin = std::clamp(floor_div(begin, dw), 0.0f, top);
      const float dst_end = std::clamp(floor_div(end_edge, dw), 0.0f, top);
      const float density = h[i] / bw;
      float norm = l2_norm(begin - (dst_begin + 0.5f) * dw, half, density);
      norm += (dst_end - dst_begin - 1) * (density * inner);
      norm += l2_norm(neg_half, end_edge - (dst_end * dw + half), density);
      sum += norm;
    }
    return static_cast<double>(static_cast<float>(sum));
  };

  const double stepsize = 1e-5;
  double alpha = 0.0, beta = 1.0, norm_min = std::numeric_limits<double>::infinity();
  int64_t start_bin = 0, end_bin = bins - 1;
  while (alpha < beta) {
    const double next_alpha = alpha + stepsize, next_beta = beta - stepsize;
    int64_t l = start_bin, r = end_bin;
    while (l < end_bin && csum[l] < static_cast<float>(next_alpha * total)) ++l;
    while (r > start_bin && csum[r] > static_cast<float>(next_beta * total)) --r;
    int64_t next_start = start_bin, next_end = end_bin;
    if (l - start_bin > end_bin - r) {
      next_start = l;
      alpha = next_alpha;
    } else {
      next_end = r;
      beta = next_beta;
    }
    if (next_start == start_bin && next_end == end_bin) continue;
    const double norm = error(next_start, next_end);
    if (norm > norm_min) break;
    norm_min = norm;
    start_bin = next_start;
    end_bin = next_end;
  }
  const float bin_width = (hi - lo) / static_cast<float>(bins);
  return {lo + bin_width * static_cast<float>(start_bin), lo + bin_width * static_cast<float>(end_bin + 1)};
}

std::pair<Tensor, Tensor> HistogramObserverImpl::calculate_qparams() const {
  const float lo = min_val.item<float>(), hi = max_val.item<float>();
  if (std::isinf(lo) && lo > 0 && std::isinf(hi) && hi < 0) return qparams_from({lo}, {hi});  // (1, 0)
  const auto [new_min, new_max] = search_range();
  return qparams_from({new_min}, {new_max});
}

}  // namespace ember::quantization
