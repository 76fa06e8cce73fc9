// A LibTorch program, ported to ember by its include alone: WGAN-GP on eight Gaussians in the
// plane. The critic's gradient penalty takes torch::autograd::grad with create_graph = true and
// backpropagates through that gradient; both networks use a custom autograd Function (a smooth
// activation with a hand-written backward), so the double backward runs through it too.
// Built from this one file against ember (EMBER_PORT) and against LibTorch (tools/libtorch_ports.sh).
//   gradient_penalty [iterations=300] [threads=2] [seed=3]
#ifdef EMBER_PORT
#include <ember/torch.h>
#else
#include <torch/torch.h>
#endif

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

// x * sigmoid(x), with its derivative sigmoid(x) (1 + x (1 - sigmoid(x))) written by hand.
struct Swish : torch::autograd::Function<Swish> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x) {
    ctx->save_for_backward({x});
    return x * torch::sigmoid(x);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto x = ctx->get_saved_variables()[0];
    auto s = torch::sigmoid(x);
    return {grads[0] * s * (1 + x * (1 - s))};
  }
};

struct MlpImpl : torch::nn::Module {
  MlpImpl(int64_t in, int64_t hidden, int64_t out)
      : fc1(register_module("fc1", torch::nn::Linear(in, hidden))),
        fc2(register_module("fc2", torch::nn::Linear(hidden, hidden))),
        fc3(register_module("fc3", torch::nn::Linear(hidden, out))) {}
  torch::Tensor forward(torch::Tensor x) {
    x = Swish::apply(fc1->forward(x));
    x = Swish::apply(fc2->forward(x));
    return fc3->forward(x);
  }
  torch::nn::Linear fc1, fc2, fc3;
};
TORCH_MODULE(Mlp);

// n points from eight Gaussians (std 0.05) on the circle of radius 2.
torch::Tensor eight_gaussians(int64_t n) {
  auto angle = torch::randint(0, 8, {n}).to(torch::kFloat32) * (2 * M_PI / 8);
  auto centres = torch::stack({torch::cos(angle), torch::sin(angle)}, 1) * 2.0;
  return centres + torch::randn({n, 2}) * 0.05;
}

int main(int argc, char** argv) {
  const int64_t iterations = argc > 1 ? std::atoll(argv[1]) : 300;
  torch::set_num_threads(argc > 2 ? std::atoi(argv[2]) : 2);
  torch::manual_seed(argc > 3 ? std::atoi(argv[3]) : 3);
  constexpr int64_t kBatch = 256, kCriticSteps = 5;
  constexpr double kLambda = 10.0;  // the penalty's weight, as in the WGAN-GP paper

  Mlp generator(2, 64, 2), critic(2, 64, 1);
  torch::optim::Adam g_opt(generator->parameters(), torch::optim::AdamOptions(1e-3).betas(std::make_tuple(0.5, 0.9)));
  torch::optim::Adam c_opt(critic->parameters(), torch::optim::AdamOptions(1e-3).betas(std::make_tuple(0.5, 0.9)));

  const auto start = std::chrono::steady_clock::now();
  double wasserstein = 0, penalty_value = 0;
  for (int64_t it = 1; it <= iterations; ++it) {
    for (int64_t k = 0; k < kCriticSteps; ++k) {
      auto real = eight_gaussians(kBatch);
      torch::Tensor fake;
      {
        torch::NoGradGuard no_grad;
        fake = generator->forward(torch::randn({kBatch, 2}));
      }
      auto eps = torch::rand({kBatch, 1});
      auto mixed = (eps * real + (1 - eps) * fake).requires_grad_(true);
      auto mixed_out = critic->forward(mixed);
      auto grad = torch::autograd::grad({mixed_out}, {mixed}, {torch::ones_like(mixed_out)},
                                        /*retain_graph=*/true, /*create_graph=*/true)[0];
      auto penalty = (grad.norm(2, 1) - 1).pow(2).mean();
      auto w_estimate = critic->forward(real).mean() - critic->forward(fake).mean();
      auto loss = -w_estimate + kLambda * penalty;
      c_opt.zero_grad();
      loss.backward();
      c_opt.step();
      wasserstein = w_estimate.item<double>();
      penalty_value = penalty.item<double>();
    }
    g_opt.zero_grad();
    auto g_loss = -critic->forward(generator->forward(torch::randn({kBatch, 2}))).mean();
    g_loss.backward();
    g_opt.step();
    if (it % 100 == 0)
      std::printf("iteration %ld: W estimate %.4f, penalty %.4f\n", static_cast<long>(it), wasserstein, penalty_value);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // How close the generated points are to the eight modes: mean distance to the nearest centre.
  torch::NoGradGuard no_grad;
  auto samples = generator->forward(torch::randn({2000, 2}));
  auto angles = torch::arange(8).to(torch::kFloat32) * (2 * M_PI / 8);
  auto centres = torch::stack({torch::cos(angles), torch::sin(angles)}, 1) * 2.0;  // [8, 2]
  auto distance = (samples.unsqueeze(1) - centres.unsqueeze(0)).norm(2, 2);        // [2000, 8]
  const double mode_distance = std::get<0>(distance.min(1)).mean().item<double>();
  std::printf("result gradient_penalty w_estimate=%.4f penalty=%.4f mode_distance=%.4f seconds=%.2f\n", wasserstein,
              penalty_value, mode_distance, seconds);
  return 0;
}
