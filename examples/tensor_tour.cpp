// A tour of ember's tensor core: the demo that `tools/setup.sh` runs.
// (The MNIST training example of a later issue replaces it as the main job.)
#include <chrono>
#include <iostream>

#include <ember/ember.h>

int main() {
  using namespace ember;
  manual_seed(0);

  std::cout << "== tensors, views and broadcasting ==\n";
  Tensor x = arange(6, kFloat32).view({2, 3});
  std::cout << "x =\n" << x << "\n";
  std::cout << "x.t() shares storage: " << std::boolalpha << x.t().shares_storage(x) << "\n";
  std::cout << "x + [10, 20, 30] =\n" << x + tensor({10.0f, 20.0f, 30.0f}) << "\n";
  std::cout << "x.sum(1) = " << x.sum({1}) << ", x.softmax(1) =\n" << x.softmax(1) << "\n";

  std::cout << "\n== matmul and convolution ==\n";
  Tensor a = randn({512, 512}), b = randn({512, 512});
  auto t0 = std::chrono::steady_clock::now();
  Tensor c = matmul(a, b);
  auto t1 = std::chrono::steady_clock::now();
  const double secs = std::chrono::duration<double>(t1 - t0).count();
  std::cout << "512^3 matmul: " << secs * 1e3 << " ms (" << 2.0 * 512 * 512 * 512 / secs / 1e9 << " GFLOP/s)\n";
  Tensor img = randn({8, 3, 32, 32}), w = randn({16, 3, 3, 3});
  Tensor y = max_pool2d(relu(conv2d(img, w, {}, {1, 1}, {1, 1})), {2, 2});
  std::cout << "conv2d -> relu -> max_pool2d: " << shape_str(img.sizes()) << " -> " << shape_str(y.sizes()) << "\n";

  std::cout << "\n== dtypes ==\n";
  Tensor h = tensor({1.0f + 1.0f / 2048, 65519.0f, 65520.0f}).to(kFloat16);
  std::cout << "float16 rounding (nearest even, overflow to inf): " << h << "\n";
  std::cout << "int64 / int64 promotes to float32: " << tensor<int64_t>({7}) / tensor<int64_t>({2}) << "\n";

  std::cout << "\n== memory counters ==\n";
  memory::reset_peak();
  const int64_t before = memory::stats().current_bytes;
  {
    Tensor big = zeros({1024, 1024});
    std::cout << "holding a 1024x1024 float32 tensor: +" << memory::stats().current_bytes - before << " bytes\n";
  }
  std::cout << "after it is freed: +" << memory::stats().current_bytes - before << " bytes; peak "
            << memory::stats().peak_bytes - before << " bytes above the start\n";
  std::cout << "CUDA available: " << cuda::is_available() << " (built with CUDA: " << cuda::built_with_cuda() << ")\n";
  return 0;
}
