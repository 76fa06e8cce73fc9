#include "ember/data/synthetic_digits.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "ember/data/sampler.h"
#include "ember/data/transforms.h"
#include "ember/tensor/error.h"
#include "ember/tensor/ops.h"

namespace ember::data {

namespace {

struct Point {
  double x, y;  // in the unit box, y down
};
using Stroke = std::vector<Point>;

Stroke ellipse(double cx, double cy, double rx, double ry) {
  Stroke s;
  for (int k = 0; k <= 16; ++k) {
    const double a = 2 * M_PI * k / 16;
    s.push_back({cx + rx * std::cos(a), cy + ry * std::sin(a)});
  }
  return s;
}

// The pen strokes of each digit.
const std::array<std::vector<Stroke>, 10>& glyphs() {
  static const auto* table = new std::array<std::vector<Stroke>, 10>{{
      {ellipse(0.5, 0.5, 0.26, 0.38)},
      {{{0.36, 0.26}, {0.52, 0.1}, {0.52, 0.9}}},
      {{{0.26, 0.3}, {0.36, 0.14}, {0.55, 0.1}, {0.72, 0.2}, {0.72, 0.38}, {0.26, 0.9}, {0.78, 0.9}}},
      {{{0.26, 0.14}, {0.72, 0.14}, {0.46, 0.44}, {0.7, 0.58}, {0.7, 0.8}, {0.5, 0.92}, {0.25, 0.84}}},
      {{{0.64, 0.9}, {0.64, 0.1}, {0.2, 0.64}, {0.8, 0.64}}},
      {{{0.75, 0.1}, {0.3, 0.1}, {0.27, 0.46}, {0.55, 0.42}, {0.72, 0.58}, {0.7, 0.8}, {0.5, 0.92}, {0.25, 0.84}}},
      {{{0.7, 0.12},
        {0.45, 0.2},
        {0.3, 0.45},
        {0.28, 0.7},
        {0.4, 0.9},
        {0.62, 0.88},
        {0.72, 0.7},
        {0.6, 0.52},
        {0.4, 0.52},
        {0.29, 0.66}}},
      {{{0.22, 0.12}, {0.78, 0.12}, {0.45, 0.9}}},
      {ellipse(0.5, 0.3, 0.2, 0.18), ellipse(0.5, 0.7, 0.24, 0.2)},
      {ellipse(0.5, 0.34, 0.2, 0.2), {{0.7, 0.34}, {0.62, 0.9}}},
  }};
  return *table;
}

double segment_distance(double px, double py, Point a, Point b) {
  const double vx = b.x - a.x, vy = b.y - a.y, wx = px - a.x, wy = py - a.y;
  const double len2 = vx * vx + vy * vy;
  const double t = len2 > 0 ? std::clamp((wx * vx + wy * vy) / len2, 0.0, 1.0) : 0.0;
  const double dx = wx - t * vx, dy = wy - t * vy;
  return std::sqrt(dx * dx + dy * dy);
}

}  // namespace

SyntheticDigits::SyntheticDigits(int64_t size, uint64_t seed) : size_(size), seed_(seed) {
  EMBER_CHECK(size >= 0, "SyntheticDigits: size must be >= 0, got ", size);
}

Example<> SyntheticDigits::get(int64_t index) const {
  check_index(index, "SyntheticDigits");
  const uint64_t s = mix_seed(seed_, static_cast<uint64_t>(index));
  auto u = [&](uint64_t k) { return transforms::uniform(s, k); };
  const int64_t label = std::min<int64_t>(9, static_cast<int64_t>(u(0) * 10));
  // A random similarity plus shear: the glyph box maps to about 20x20 pixels, jittered.
  const double angle = (2 * u(1) - 1) * 0.26, scale = 17.0 + 5.0 * u(2), shear = (2 * u(3) - 1) * 0.25;
  const double ox = 14 + (2 * u(4) - 1) * 2.5, oy = 14 + (2 * u(5) - 1) * 2.5;
  const double width = 0.9 + 0.9 * u(6), cs = std::cos(angle), sn = std::sin(angle);
  auto place = [&](Point p) {  // unit box -> pixels
    const double x = (p.x - 0.5 + shear * (p.y - 0.5)) * scale, y = (p.y - 0.5) * scale;
    return Point{ox + cs * x - sn * y, oy + sn * x + cs * y};
  };
  std::vector<std::pair<Point, Point>> segments;
  for (const Stroke& stroke : glyphs()[static_cast<size_t>(label)])
    for (size_t k = 1; k < stroke.size(); ++k) segments.emplace_back(place(stroke[k - 1]), place(stroke[k]));
  Tensor image = empty({1, 28, 28});
  float* px = image.data_ptr<float>();
  uint64_t k = 7;
  for (int64_t i = 0; i < 28; ++i)
    for (int64_t j = 0; j < 28; ++j) {
      double d = 1e9;
      for (const auto& [a, b] : segments) d = std::min(d, segment_distance(j + 0.5, i + 0.5, a, b));
      const double ink = std::clamp(1.0 - (d - width / 2), 0.0, 1.0);  // a pen with a soft, 1-pixel edge
      const double noise = (u(k++) - 0.5) * 0.2;
      px[i * 28 + j] = static_cast<float>(std::clamp(ink + noise * (ink > 0 ? 1.0 : 0.3), 0.0, 1.0));
    }
  return {image, scalar_tensor(label, kInt64)};
}

}  // namespace ember::data
