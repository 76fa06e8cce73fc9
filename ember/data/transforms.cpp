#include "ember/data/transforms.h"

#include <cmath>

#include "ember/data/sampler.h"
#include "ember/tensor/error.h"
#include "ember/tensor/generator.h"
#include "ember/tensor/ops.h"

namespace ember::data::transforms {

namespace {

// The image as contiguous float32 [C, H, W], or an error naming the transform.
Tensor checked_image(const Tensor& image, const char* op) {
  EMBER_CHECK(image.defined() && image.dim() == 3 && image.dtype() == kFloat32, op,
              ": expects a float32 image [C, H, W], got ", image.defined() ? image.dtype() : kFloat32, " ",
              image.defined() ? shape_str(image.sizes()) : "undefined");
  return image.contiguous();
}

}  // namespace

double uniform(uint64_t seed, uint64_t k) {
  const auto w = philox4x32(seed, k);
  const uint64_t bits = (static_cast<uint64_t>(w[0]) << 21) ^ w[1];  // 53 random bits
  return static_cast<double>(bits & ((uint64_t{1} << 53) - 1)) * 0x1.0p-53;
}

data::Transform compose(std::vector<data::Transform> transforms) {
  for (const auto& t : transforms) EMBER_CHECK(t != nullptr, "transforms::compose: a transform is empty");
  return [transforms](Example<> e, int64_t index, uint64_t seed) {
    uint64_t k = 0;
    for (const auto& t : transforms) e = t(std::move(e), index, mix_seed(seed, ++k));
    return e;
  };
}

data::Transform normalize(std::vector<double> mean, std::vector<double> std) {
  EMBER_CHECK(!mean.empty() && mean.size() == std.size(),
              "transforms::normalize: mean and std need one value per "
              "channel, got ",
              mean.size(), " and ", std.size());
  for (double s : std) EMBER_CHECK(s > 0, "transforms::normalize: std must be > 0, got ", s);
  return [mean, std](Example<> e, int64_t, uint64_t) {
    Tensor x = checked_image(e.data, "transforms::normalize").clone();
    EMBER_CHECK(static_cast<size_t>(x.size(0)) == mean.size(), "transforms::normalize: ", mean.size(),
                " channels of mean/std for an image of shape ", shape_str(x.sizes()));
    float* p = x.data_ptr<float>();
    const int64_t plane = x.size(1) * x.size(2);
    for (int64_t c = 0; c < x.size(0); ++c) {
      const float m = static_cast<float>(mean[c]), inv = static_cast<float>(1.0 / std[c]);
      for (int64_t i = 0; i < plane; ++i) p[c * plane + i] = (p[c * plane + i] - m) * inv;
    }
    e.data = x;
    return e;
  };
}

Tensor crop(const Tensor& image, int64_t top, int64_t left, int64_t size, int64_t padding) {
  const Tensor x = checked_image(image, "transforms::crop");
  const int64_t C = x.size(0), H = x.size(1), W = x.size(2);
  EMBER_CHECK(size >= 1 && padding >= 0 && top >= 0 && left >= 0 && top + size <= H + 2 * padding &&
                  left + size <= W + 2 * padding,
              "transforms::crop: a ", size, "x", size, " window at (", top, ", ", left, ") does not fit a ", H, "x", W,
              " image padded by ", padding);
  Tensor out = zeros({C, size, size});
  const float* in = x.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t c = 0; c < C; ++c)
    for (int64_t i = 0; i < size; ++i) {
      const int64_t h = top + i - padding;
      if (h < 0 || h >= H) continue;
      for (int64_t j = 0; j < size; ++j) {
        const int64_t w = left + j - padding;
        if (w >= 0 && w < W) o[(c * size + i) * size + j] = in[(c * H + h) * W + w];
      }
    }
  return out;
}

data::Transform random_crop(int64_t size, int64_t padding) {
  EMBER_CHECK(size >= 1 && padding >= 0, "transforms::random_crop: size must be >= 1 and padding >= 0, got ", size,
              " and ", padding);
  return [size, padding](Example<> e, int64_t, uint64_t seed) {
    const Tensor x = checked_image(e.data, "transforms::random_crop");
    const int64_t rows = x.size(1) + 2 * padding - size + 1, cols = x.size(2) + 2 * padding - size + 1;
    EMBER_CHECK(rows >= 1 && cols >= 1, "transforms::random_crop: a ", size, "x", size, " crop of an image of shape ",
                shape_str(x.sizes()), " padded by ", padding);
    const int64_t top = static_cast<int64_t>(uniform(seed, 0) * static_cast<double>(rows));
    const int64_t left = static_cast<int64_t>(uniform(seed, 1) * static_cast<double>(cols));
    e.data = crop(x, top, left, size, padding);
    return e;
  };
}

Tensor horizontal_flip(const Tensor& image) {
  const Tensor x = checked_image(image, "transforms::horizontal_flip");
  Tensor out = empty(x.sizes());
  const int64_t rows = x.size(0) * x.size(1), W = x.size(2);
  const float* in = x.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t w = 0; w < W; ++w) o[r * W + w] = in[r * W + (W - 1 - w)];
  return out;
}

data::Transform random_horizontal_flip(double p) {
  EMBER_CHECK(p >= 0 && p <= 1, "transforms::random_horizontal_flip: p must be in [0, 1], got ", p);
  return [p](Example<> e, int64_t, uint64_t seed) {
    if (uniform(seed, 0) < p) e.data = horizontal_flip(e.data);
    return e;
  };
}

Tensor affine(const Tensor& image, double degrees, double tx, double ty) {
  const Tensor x = checked_image(image, "transforms::affine");
  const int64_t C = x.size(0), H = x.size(1), W = x.size(2);
  Tensor out = zeros(x.sizes());
  const float* in = x.data_ptr<float>();
  float* o = out.data_ptr<float>();
  const double a = degrees * M_PI / 180.0, cs = std::cos(a), sn = std::sin(a);
  const double cy = (H - 1) / 2.0, cx = (W - 1) / 2.0;
  for (int64_t i = 0; i < H; ++i)
    for (int64_t j = 0; j < W; ++j) {
      // Inverse map: where in the input this output pixel comes from (y down, so a positive
      // angle turns the picture counterclockwise on screen).
      const double dx = j - cx - tx, dy = i - cy - ty;
      const double sx = cs * dx - sn * dy + cx, sy = sn * dx + cs * dy + cy;
      const double fx = std::floor(sx), fy = std::floor(sy);
      const int64_t x0 = static_cast<int64_t>(fx), y0 = static_cast<int64_t>(fy);
      const double wx = sx - fx, wy = sy - fy;
      for (int64_t c = 0; c < C; ++c) {
        auto at = [&](int64_t y, int64_t xx) -> double {
          return (y >= 0 && y < H && xx >= 0 && xx < W) ? in[(c * H + y) * W + xx] : 0.0;
        };
        const double v = (1 - wy) * ((1 - wx) * at(y0, x0) + wx * at(y0, x0 + 1)) +
                         wy * ((1 - wx) * at(y0 + 1, x0) + wx * at(y0 + 1, x0 + 1));
        o[(c * H + i) * W + j] = static_cast<float>(v);
      }
    }
  return out;
}

data::Transform random_affine(double degrees, double translate) {
  EMBER_CHECK(degrees >= 0 && translate >= 0 && translate <= 1,
              "transforms::random_affine: degrees must be >= 0 "
              "and translate in [0, 1], got ",
              degrees, " and ", translate);
  return [degrees, translate](Example<> e, int64_t, uint64_t seed) {
    const Tensor x = checked_image(e.data, "transforms::random_affine");
    const double angle = (2 * uniform(seed, 0) - 1) * degrees;
    const double tx = (2 * uniform(seed, 1) - 1) * translate * static_cast<double>(x.size(2));
    const double ty = (2 * uniform(seed, 2) - 1) * translate * static_cast<double>(x.size(1));
    e.data = affine(x, angle, tx, ty);
    return e;
  };
}

}  // namespace ember::data::transforms
