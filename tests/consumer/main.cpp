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

// The tour at the top of ember/ember.h, steps 1 to 4, as written there.
bool header_tour() {
  using namespace ember;
  Tensor x = randn({64, 784});
  Tensor y = x.view({64, 28, 28}).sum({1, 2});
  Tensor w = zeros({784, 10}).requires_grad_(), targets = randint(0, 10, {64});
  Tensor loss = nn::functional::cross_entropy(x.matmul(w), targets);
  loss.backward();
  {
    NoGradGuard no_grad;
    x.matmul(w);
  }
  nn::Sequential model(nn::Linear(784, 128), nn::ReLU(), nn::Linear(128, 10));
  optim::AdamW opt(model->parameters(), optim::AdamWOptions(1e-3));
  opt.zero_grad();
  nn::functional::cross_entropy(model(x), targets).backward();
  opt.step();
  return y.sizes() == Shape{64} && w.grad().sizes() == Shape{784, 10};
}

int main() {
  if (!header_tour()) {
    std::cerr << "consumer: the tour of ember.h did not give the shapes it promises\n";
    return 1;
  }
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
