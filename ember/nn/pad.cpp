// torch.nn.functional.pad, one dim at a time: constant padding is a cat with filled blocks,
// the other modes an index_select of the positions each output element reads, so every mode's
// gradient comes from those ops (index_select's backward adds the repeated reads).
#include <algorithm>
#include <limits>

#include "ember/nn/functional.h"

namespace ember::nn::functional {
namespace {

// The positions of a dim of size n that its padded form reads, for amounts left, right >= 0
// (an ember tensor, not a std::vector: an absurd amount fails as an allocation, an ember::Error).
Tensor read_positions(const std::string& mode, int64_t n, int64_t left, int64_t right, Device device) {
  Tensor at = empty({n + left + right}, kInt64);
  int64_t* out = at.data_ptr<int64_t>();
  for (int64_t i = -left; i < n + right; ++i) {
    if (mode == "reflect")
      *out++ = i < 0 ? -i : i >= n ? 2 * (n - 1) - i : i;
    else if (mode == "replicate")
      *out++ = std::clamp<int64_t>(i, 0, n - 1);
    else  // circular
      *out++ = ((i % n) + n) % n;
  }
  return at.to(device);
}

Tensor pad_dim(const Tensor& x, int64_t d, int64_t left, int64_t right, const PadFuncOptions& o) {
  const int64_t n_in = x.size(d), most = std::numeric_limits<int64_t>::max();
  // Negative amounts crop first; the rest pads.
  EMBER_CHECK(left >= -n_in && right >= -n_in && (left >= 0 || right >= 0 || -left <= n_in + right), "pad: cropping (",
              left, ", ", right, ") of dim ", d, " (size ", n_in, ") leaves a negative size, for an input of shape ",
              shape_str(x.sizes()));
  const int64_t crop_left = std::max<int64_t>(0, -left), crop_right = std::max<int64_t>(0, -right);
  Tensor y = x.narrow(d, crop_left, n_in - crop_left - crop_right);
  left = std::max<int64_t>(0, left);
  right = std::max<int64_t>(0, right);
  if (left == 0 && right == 0) return y;
  const int64_t n = y.size(d);
  EMBER_CHECK(left <= most - n && right <= most - n - left, "pad: padding (", left, ", ", right, ") of dim ", d,
              " overflows its size for an input of shape ", shape_str(x.sizes()));
  if (o.mode_ == "constant") {
    const TensorOptions like = TensorOptions().dtype(y.dtype()).device(y.device());
    Shape side = y.sizes();
    std::vector<Tensor> parts;
    side[d] = left;
    if (left > 0) parts.push_back(full(side, o.value_, like));
    parts.push_back(y);
    side[d] = right;
    if (right > 0) parts.push_back(full(side, o.value_, like));
    return cat(parts, d);
  }
  if (o.mode_ == "reflect")
    EMBER_CHECK(left < n && right < n, "pad: reflect padding (", left, ", ", right, ") must be less than dim ", d,
                "'s size ", n, " for an input of shape ", shape_str(x.sizes()));
  else if (o.mode_ == "circular")
    EMBER_CHECK(left <= n && right <= n, "pad: circular padding (", left, ", ", right, ") must be at most dim ", d,
                "'s size ", n, " for an input of shape ", shape_str(x.sizes()));
  else
    EMBER_CHECK(n > 0, "pad: replicate padding of an empty dim ", d, " in shape ", shape_str(x.sizes()));
  return index_select(y, d, read_positions(o.mode_, n, left, right, y.device()));
}

}  // namespace

Tensor pad(const Tensor& x, const PadFuncOptions& o) {
  EMBER_CHECK(x.defined(), "pad: the input is undefined");
  EMBER_CHECK(o.mode_ == "constant" || o.mode_ == "reflect" || o.mode_ == "replicate" || o.mode_ == "circular",
              "pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', got '", o.mode_, "'");
  const auto pairs = static_cast<int64_t>(o.pad_.size() / 2);
  EMBER_CHECK(o.pad_.size() % 2 == 0, "pad: padding length must be divisible by 2, got ", shape_str(o.pad_));
  EMBER_CHECK(pairs <= x.dim(), "pad: padding length ", o.pad_.size(), " is too large for an input of shape ",
              shape_str(x.sizes()), " (at most twice its ", x.dim(), " dims)");
  EMBER_CHECK(o.mode_ == "constant" || x.numel() > 0 || pairs == 0, "pad: ", o.mode_,
              " padding of an empty tensor of shape ", shape_str(x.sizes()));
  Tensor y = x;
  for (int64_t k = 0; k < pairs; ++k) y = pad_dim(y, x.dim() - 1 - k, o.pad_[2 * k], o.pad_[2 * k + 1], o);
  return y;
}

}  // namespace ember::nn::functional
