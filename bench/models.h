#pragma once
// Models shared by the benchmark programs.
#include <ember/ember.h>

namespace ember::bench {

// The small MNIST CNN of the benchmarks (input [N, 1, 28, 28], 10 classes).
inline nn::Sequential small_cnn() {
  using namespace nn;
  return Sequential(Conv2d(Conv2dOptions(1, 32, 3).padding(1)), ReLU(), MaxPool2d(2),
                    Conv2d(Conv2dOptions(32, 64, 3).padding(1)), ReLU(), MaxPool2d(2), Flatten(),
                    Linear(64 * 7 * 7, 128), ReLU(), Linear(128, 10));
}

inline Tensor rosenbrock(const Tensor& x) { return (1 - x[0]).square() + 100 * (x[1] - x[0].square()).square(); }

}  // namespace ember::bench
