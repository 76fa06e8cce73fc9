// interpolate (torch.nn.functional.interpolate) for 4-D inputs: nearest and bilinear, one
// spatial dim at a time. Each dim's source positions are computed on the host with PyTorch's
// formulas in its precision (float for float32 and 16-bit inputs, double for float64), so
// every floor lands where PyTorch's does; the resampling itself is index_select (nearest) or
// two index_selects blended by their weights (linear), which the tape differentiates.
#include <cmath>
#include <exception>

#include "ember/nn/functional.h"

namespace ember::nn::functional {
namespace {

// Where each of the `out` output positions of one dim reads: src0, src1 and the weight of src1.
struct AxisMap {
  std::vector<int64_t> src0, src1;
  std::vector<double> weight1;
};

// 1 / scale_factor when one is given (and not to be recomputed), in / out otherwise.
template <class T>
T source_scale(int64_t in, int64_t out, std::optional<double> scale) {
  return scale && *scale > 0 ? static_cast<T>(1.0 / *scale) : static_cast<T>(in) / static_cast<T>(out);
}

AxisMap nearest_map(int64_t in, int64_t out, std::optional<double> scale) {
  AxisMap m;
  m.src0.reserve(static_cast<size_t>(out));             // fails at once, not after a long loop, when out is absurd
  const float s = source_scale<float>(in, out, scale);  // PyTorch's nearest is in float for every dtype
  for (int64_t i = 0; i < out; ++i)
    m.src0.push_back(out == in       ? i
                     : out == 2 * in ? i >> 1
                                     : std::min(static_cast<int64_t>(std::floor(static_cast<float>(i) * s)), in - 1));
  return m;
}

template <class T>
AxisMap linear_map(int64_t in, int64_t out, std::optional<double> scale, bool align_corners) {
  AxisMap m;
  const T s = align_corners ? (out > 1 ? static_cast<T>(in - 1) / static_cast<T>(out - 1) : T(0))
                            : source_scale<T>(in, out, scale);
  m.src0.reserve(static_cast<size_t>(out));
  m.src1.reserve(static_cast<size_t>(out));
  m.weight1.reserve(static_cast<size_t>(out));
  for (int64_t i = 0; i < out; ++i) {
    T src = align_corners ? s * static_cast<T>(i) : s * (static_cast<T>(i) + T(0.5)) - T(0.5);
    if (src < T(0)) src = T(0);
    const int64_t i0 = std::min(static_cast<int64_t>(std::floor(src)), in - 1);
    m.src0.push_back(i0);
    m.src1.push_back(i0 + (i0 < in - 1 ? 1 : 0));
    m.weight1.push_back(static_cast<double>(std::min(std::max(src - static_cast<T>(i0), T(0)), T(1))));
  }
  return m;
}

// x resampled along `dim` by `m`.
Tensor resample(const Tensor& x, int64_t dim, const AxisMap& m) {
  const Tensor i0 = tensor<int64_t>(m.src0).to(x.device());
  if (m.src1.empty()) return x.index_select(dim, i0);
  Shape weight_shape(static_cast<size_t>(x.dim()), 1);
  weight_shape[static_cast<size_t>(dim)] = static_cast<int64_t>(m.weight1.size());
  const Tensor w1 = tensor<double>(m.weight1).to(x.device(), x.dtype()).reshape(weight_shape);
  const Tensor i1 = tensor<int64_t>(m.src1).to(x.device());
  return x.index_select(dim, i0) * (1.0 - w1) + x.index_select(dim, i1) * w1;
}

}  // namespace

Tensor interpolate(const Tensor& x, const InterpolateOptions& o) {
  const char* op = "interpolate";
  EMBER_CHECK(x.defined() && x.dim() == 4, op, ": expected a 4-D [N, C, H, W] input, got ",
              x.defined() ? shape_str(x.sizes()) : std::string("an undefined tensor"),
              " (1-D and 3-D resampling are not in ember yet)");
  EMBER_CHECK(x.is_floating_point(), op, ": expected a floating point input, got ", x.dtype());
  EMBER_CHECK(o.mode_ == "nearest" || o.mode_ == "bilinear", op, ": mode '", o.mode_,
              "' is not supported (ember has 'nearest' and 'bilinear')");
  EMBER_CHECK(o.size_.has_value() != o.scale_factor_.has_value(), op, ": give exactly one of size and scale_factor");
  EMBER_CHECK(o.mode_ == "bilinear" || !o.align_corners_.has_value(), op,
              ": align_corners only applies to the linear modes, not to '", o.mode_, "'");
  int64_t out_size[2];
  std::optional<double> scale[2];
  if (o.size_) {
    const Shape& size = *o.size_;
    EMBER_CHECK(size.size() == 1 || size.size() == 2, op, ": size must have 1 or 2 entries, got ", shape_str(size));
    for (int d = 0; d < 2; ++d) out_size[d] = size[size.size() == 1 ? 0 : d];
  } else {
    const std::vector<double>& f = *o.scale_factor_;
    EMBER_CHECK(f.size() == 1 || f.size() == 2, op, ": scale_factor must have 1 or 2 entries, got ", f.size());
    for (int d = 0; d < 2; ++d) {
      const double s = f[f.size() == 1 ? 0 : d];
      EMBER_CHECK(s > 0 && std::isfinite(s), op, ": scale_factor must be positive, got ", s);
      const double rows = std::floor(static_cast<double>(x.size(2 + d)) * s);
      EMBER_CHECK(rows < 0x1p62, op, ": scale_factor ", s, " makes an output dimension of ", rows, " from input shape ",
                  shape_str(x.sizes()));  // converting it to int64 would be undefined
      out_size[d] = static_cast<int64_t>(rows);
      if (!o.recompute_scale_factor_.value_or(false)) scale[d] = s;
    }
  }
  for (int d = 0; d < 2; ++d)
    EMBER_CHECK(out_size[d] > 0 && x.size(2 + d) > 0, op, ": input of shape ", shape_str(x.sizes()),
                " and output size ", out_size[0], "x", out_size[1], " must both be non-empty");
  (void)checked_numel({x.size(0), x.size(1), out_size[0], out_size[1]}, op);  // the output's size overflows int64
  const bool align = o.align_corners_.value_or(false);
  Tensor y = x;
  for (int d = 0; d < 2; ++d) {
    const int64_t in = x.size(2 + d);
    AxisMap m;
    try {
      m = o.mode_ == "nearest"    ? nearest_map(in, out_size[d], scale[d])
          : x.dtype() == kFloat64 ? linear_map<double>(in, out_size[d], scale[d], align)
                                  : linear_map<float>(in, out_size[d], scale[d], align);
    } catch (const std::exception&) {  // std::bad_alloc or std::length_error from an absurd size
      throw Error(detail::concat(op, ": no memory for the source positions of an output dimension of ", out_size[d],
                                 " (input shape ", shape_str(x.sizes()), ")"));
    }
    y = resample(y, 2 + d, m);
  }
  return y;
}

}  // namespace ember::nn::functional
