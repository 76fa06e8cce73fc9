#pragma once
// A dataset that needs no files: 28x28 images of the ten digits drawn procedurally from pen
// strokes (polylines in a unit box), each with its own random rotation, scale, shear, offset,
// stroke width and pixel noise. It is MNIST-shaped (data [1, 28, 28] float32 in [0, 1],
// target int64 0..9), so every example and test runs on a fresh machine; a small CNN learns
// it to high accuracy. Example i is a pure function of (seed, i).
#include "ember/data/dataset.h"

namespace ember::data {

class SyntheticDigits : public Dataset {
 public:
  explicit SyntheticDigits(int64_t size, uint64_t seed = 0);
  int64_t size() const override { return size_; }
  Example<> get(int64_t index) const override;

 private:
  int64_t size_;
  uint64_t seed_;
};

}  // namespace ember::data
