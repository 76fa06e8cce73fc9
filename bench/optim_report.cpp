// What the optimizers cost and buy, in one run:
//   - AdamW, SGD-momentum and Adagrad steps over 10M float32 parameters (one tensor, and 100 tensors of
//     100K) in GB/s, against a plain triad loop (the machine's bandwidth ceiling) and against
//     the same update composed of unfused ember ops (what an optimizer written with tensor
//     ops, like LibTorch 1.13's, costs);
//   - one training step of the small CNN (batch 128) with SGD momentum: time and samples/s;
//   - L-BFGS on Rosenbrock from (-1.5, 2): iterations and closure evaluations to loss < 1e-8;
//   - a tiny model's training loop on a quiet machine and with a second copy of itself running
//     (tiny work must stay on the calling thread: an OpenMP region per step, whose threads
//     spin-wait for cores the other process holds, once made such a loop 75x slower).
//   build/bench/bench/optim_report [threads]
//   build/bench/bench/optim_report [threads] busy   (the second copy: trains until killed)
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <ember/tensor/parallel.h>

#include "models.h"
#include "timing.h"

using namespace ember;
using bench::fmt;

namespace {

// AdamW over `params` as ember ops, one op per line of the algorithm: each op reads and writes
// whole tensors, so the step makes ~12 passes over memory instead of one.
void unfused_adamw(std::vector<Tensor>& p, std::vector<Tensor>& m, std::vector<Tensor>& v, int64_t step) {
  NoGradGuard no_grad;
  const double lr = 1e-3, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 1e-2;
  const double bc1 = 1 - std::pow(b1, step), bc2 = 1 - std::pow(b2, step);
  for (size_t i = 0; i < p.size(); ++i) {
    const Tensor& g = p[i].grad();
    p[i].mul_(1 - lr * wd);
    m[i].mul_(b1).add_(g, 1 - b1);
    v[i].mul_(b2).add_(g * g, 1 - b2);
    const Tensor denom = (v[i].sqrt() / std::sqrt(bc2)).add_(eps);
    p[i].sub_(m[i] / denom, lr / bc1);
  }
}

void optimizer_bandwidth(int64_t tensors) {
  const int64_t total = 10'000'000, n = total / tensors;
  std::vector<Tensor> params, unfused, m, v;
  for (int64_t i = 0; i < tensors; ++i) {
    params.push_back(randn({n}).requires_grad_());
    params.back().mutable_grad() = randn({n});
    unfused.push_back(params.back().detach().clone().requires_grad_());
    unfused.back().mutable_grad() = params.back().grad().clone();
    m.push_back(zeros({n}));
    v.push_back(zeros({n}));
  }
  optim::AdamW adamw(params, optim::AdamWOptions(1e-3));
  std::vector<Tensor> sgd_params;
  for (const auto& p : params) {
    sgd_params.push_back(p.detach().clone().requires_grad_());
    sgd_params.back().mutable_grad() = p.grad();
  }
  optim::SGD sgd(sgd_params, optim::SGDOptions(1e-3).momentum(0.9));
  std::vector<Tensor> adagrad_params;
  for (const auto& p : params) {
    adagrad_params.push_back(p.detach().clone().requires_grad_());
    adagrad_params.back().mutable_grad() = p.grad();
  }
  optim::Adagrad adagrad(adagrad_params, optim::AdagradOptions(1e-3).lr_decay(1e-4));
  // Correctness first: the fused and the unfused step agree.
  adamw.step();
  unfused_adamw(unfused, m, v, 1);
  for (size_t i = 0; i < params.size(); ++i) {
    const double d = (params[i] - unfused[i]).abs().max().item<double>();
    if (d > 1e-6) {
      std::printf("fused and unfused AdamW disagree by %g\n", d);
      std::exit(1);
    }
  }
  Tensor xt = empty({total}), yt = full({total}, 1.0), zt = full({total}, 2.0);
  float *x = xt.data_ptr<float>(), *y = yt.data_ptr<float>(), *z = zt.data_ptr<float>();
  int64_t step = 1;
  const auto triad_loop = [&] {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < total; ++i) x[i] = y[i] + 0.5f * z[i];
  };
  const auto t =
      bench::interleaved_medians({triad_loop, [&] { adamw.step(); }, [&] { unfused_adamw(unfused, m, v, ++step); },
                                  [&] { sgd.step(); }, [&] { adagrad.step(); }},
                                 9);
  const double triad = 12.0 * total / t[0] / 1e9;
  const double adam_bytes = 28.0 * total;     // reads p, g, m, v; writes p, m, v
  const double sgd_bytes = 20.0 * total;      // reads p, g, buf; writes p, buf
  const double adagrad_bytes = 20.0 * total;  // reads p, g, sum; writes p, sum
  const std::string shape = tensors == 1 ? "1 x 10M" : fmt("%.0f x 100K", static_cast<double>(tensors));
  bench::row("triad ceiling (GB/s)", "-", fmt("%.1f", triad), 1.0, "the ceiling");
  bench::row("AdamW fused, " + shape + " (GB/s)", fmt("%.1f", adam_bytes / t[1] / 1e9), fmt("%.1f", triad),
             adam_bytes / t[1] / 1e9 / triad, ">= 0.60 of triad");
  bench::row("AdamW as ember ops, " + shape + " (ms)", fmt("%.1f", t[2] * 1e3), fmt("%.1f (fused)", t[1] * 1e3),
             t[2] / t[1], "fused speed-up");
  bench::row("SGD momentum fused, " + shape + " (GB/s)", fmt("%.1f", sgd_bytes / t[3] / 1e9), fmt("%.1f", triad),
             sgd_bytes / t[3] / 1e9 / triad, ">= 0.60 of triad");
  bench::row("Adagrad fused, " + shape + " (GB/s)", fmt("%.1f", adagrad_bytes / t[4] / 1e9), fmt("%.1f", triad),
             adagrad_bytes / t[4] / 1e9 / triad, ">= 0.60 of triad");
}

void cnn_step() {
  manual_seed(0);
  nn::Sequential model = bench::small_cnn();
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.01).momentum(0.9));
  const Tensor x = randn({128, 1, 28, 28}), y = randint(0, 10, {128});
  auto step = [&] {
    opt.zero_grad();
    nn::functional::cross_entropy(model(x), y).backward();
    opt.step();
  };
  const double t = bench::median_seconds(step, 9);
  bench::row("small CNN train step, batch 128 (ms)", fmt("%.1f", t * 1e3), "-", 128 / t, "samples/s");
}

void lbfgs_rosenbrock(bool strong_wolfe) {
  Tensor x = tensor<double>({-1.5, 2.0}).requires_grad_();
  auto options = optim::LBFGSOptions(1.0).max_iter(1);
  if (strong_wolfe) options.line_search_fn("strong_wolfe");
  optim::LBFGS opt({x}, options);
  int64_t evals = 0, iterations = 0;
  double loss = bench::rosenbrock(x).item<double>();
  while (loss >= 1e-8 && iterations < 1000) {
    opt.step([&] {
      ++evals;
      opt.zero_grad();
      Tensor f = bench::rosenbrock(x);
      f.backward();
      return f;
    });
    ++iterations;
    loss = bench::rosenbrock(x).item<double>();
  }
  std::printf(
      "| L-BFGS%s on Rosenbrock from (-1.5, 2) to loss < 1e-8 | %lld iterations | %lld evaluations | "
      "x = (%.6f, %.6f) |\n",
      strong_wolfe ? " + strong Wolfe" : "", static_cast<long long>(iterations), static_cast<long long>(evals),
      x[0].item<double>(), x[1].item<double>());
}

// A tiny regression (y = 3x + 2 through Linear(1, 8), Tanh, Linear(8, 1), batch 16, SGD
// momentum): `steps` steps, in seconds. The parallel regions it opened go to `regions`.
double tiny_regression_seconds(int64_t steps, int64_t* regions = nullptr) {
  manual_seed(0);
  nn::Sequential net(nn::Linear(1, 8), nn::Tanh(), nn::Linear(8, 1));
  optim::SGD opt(net->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  const Tensor x = randn({16, 1}), y = x * 3 + 2;
  const int64_t regions_before = parallel_regions();
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < steps; ++i) {
    opt.zero_grad();
    nn::functional::mse_loss(net(x), y).backward();
    opt.step();
  }
  if (regions) *regions = parallel_regions() - regions_before;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median_of_3(const std::function<double()>& f) {
  double t[3] = {f(), f(), f()};
  std::sort(t, t + 3);
  return t[1];
}

// The tiny loop quiet, then beside one and two other copies of this program running it (same
// threads; two copies and this one oversubscribe the 2 cores).
void tiny_model_under_load(int threads, const char* self) {
  const int64_t steps = 2000;
  int64_t regions = 0;
  const double quiet = median_of_3([&] { return tiny_regression_seconds(steps, &regions); });
  bench::row("tiny model, " + std::to_string(steps) +
                 " SGD steps, quiet (s); parallel regions opened: " + std::to_string(regions),
             fmt("%.3f", quiet), "-", 0, "");
  const std::string t = std::to_string(threads);
  char* args[] = {const_cast<char*>(self), const_cast<char*>(t.c_str()), const_cast<char*>("busy"), nullptr};
  std::vector<pid_t> others;
  for (int copies = 1; copies <= 2; ++copies) {
    pid_t other = 0;
    if (posix_spawn(&other, "/proc/self/exe", nullptr, nullptr, args, environ) != 0) {
      std::printf("| tiny model under load | could not start another copy |\n");
      break;
    }
    others.push_back(other);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the other copies are training now
    const double loaded = median_of_3([&] { return tiny_regression_seconds(steps); });
    bench::row("  the same beside " + std::to_string(copies) + " other cop" + (copies == 1 ? "y" : "ies") +
                   " of itself (s), loaded / quiet",
               fmt("%.3f", loaded), fmt("%.3f", quiet), loaded / quiet, "<= 2");
  }
  for (pid_t other : others) {
    kill(other, SIGKILL);
    waitpid(other, nullptr, 0);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  set_num_threads(threads);
  if (argc > 2 && std::string(argv[2]) == "busy")
    for (;;) tiny_regression_seconds(1000);  // until the first copy kills it
  std::printf("ember optimizers, %d threads\n\n| what | ember | reference | ratio | target |\n|---|---|---|---|---|\n",
              threads);
  cnn_step();  // first: the optimizer runs below leave ~1 GB of freed memory behind
  optimizer_bandwidth(1);
  optimizer_bandwidth(100);
  std::printf("\n");
  lbfgs_rosenbrock(false);
  lbfgs_rosenbrock(true);
  std::printf("\n");
  tiny_model_under_load(threads, argv[0]);
  return 0;
}
