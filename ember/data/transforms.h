#pragma once
// Transforms for image examples (data [C, H, W] float32), to use with data::map. The random
// ones draw from the example's sample seed (Note [Sample seeds] in data/dataset.h), so an
// augmentation is reproducible and independent of the number of loader workers. These are
// real CPU work per example, which is what loader workers are for.
#include <vector>

#include "ember/data/dataset.h"

namespace ember::data::transforms {

// ember's transforms are data::Transform functions (LibTorch's transform classes, Normalize<>,
// Stack<> and Lambda<>, are in data/datasets.h). Applies the transforms in order.
data::Transform compose(std::vector<data::Transform> transforms);
// (x - mean[c]) / std[c] per channel.
data::Transform normalize(std::vector<double> mean, std::vector<double> std);
// Pads each side with `padding` zeros, then crops a size x size window at a random offset.
data::Transform random_crop(int64_t size, int64_t padding = 0);
// Mirrors left-right with probability p.
data::Transform random_horizontal_flip(double p = 0.5);
// Rotates by an angle uniform in [-degrees, degrees] and shifts by up to translate * width
// (and height) pixels, about the image centre, sampling bilinearly with zeros outside.
data::Transform random_affine(double degrees, double translate = 0.0);

// The deterministic cores (image [C, H, W] float32 -> same shape).
Tensor crop(const Tensor& image, int64_t top, int64_t left, int64_t size, int64_t padding);
Tensor horizontal_flip(const Tensor& image);
// Turns the picture by `degrees` counterclockwise as it appears on screen (row 0 at the top)
// about its centre, then moves it by (tx, ty) pixels (right, down); bilinear, zeros outside.
Tensor affine(const Tensor& image, double degrees, double tx, double ty);

// Uniform doubles in [0, 1) from a seed: draw k of the example's stream.
double uniform(uint64_t seed, uint64_t k);

}  // namespace ember::data::transforms
