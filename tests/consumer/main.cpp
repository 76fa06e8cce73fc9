// The program's own headers first, by the same paths ember uses inside its prefix.
#include <data/dataset.h>
#include <io/checkpoint.h>
// Then ember, through its one prefix.
#include <ember/ember.h>
#include <ember/nn/modules/linear.h>

#include <iostream>

// Nothing of ember is reachable as a top-level tensor/, data/, io/, nn/ ... header.
#if __has_include(<tensor/tensor.h>) || __has_include(<data/dataloader.h>) || __has_include(<io/safetensors.h>) || \
    __has_include(<nn/module.h>) || __has_include(<autograd/engine.h>) || __has_include(<cuda/cuda.h>)
#error "ember's headers are reachable outside the ember/ prefix"
#endif

int main() {
  const app::Dataset own;
  const ember::Tensor a = ember::tensor(own.values).view({2, 3});
  const ember::Tensor s = a.matmul(a.t()).sum();
  if (s.item<float>() != 83.0f) {
    std::cerr << "consumer: wrong result " << s << "\n";
    return 1;
  }
  ember::nn::Linear fc(3, 1);
  std::cout << "consumer: find_package(ember) works beside its own data/ and io/ headers (" << app::checkpoint_name()
            << "), sum(a @ a.T) = " << s << ", " << fc << "\n";
  return 0;
}
