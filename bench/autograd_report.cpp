// The tape's costs, measured: bookkeeping per op on tiny tensors, an MLP training step,
// the peak memory of an eval pass with and without NoGradGuard, and the profiler's cost per op
// and on that step.
//   build/bench/bench/autograd_report [threads]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>

#include <ember/ember.h>

#include "timing.h"

using namespace ember;
using bench::median_seconds;

namespace {

// 1000 tiny ops (4 elements): the op cost is negligible, so the time is bookkeeping.
void overhead() {
  const int kOps = 1000;
  Tensor x = randn({4}).set_requires_grad(true);
  auto chain = [&] {
    Tensor y = x;
    for (int i = 0; i < kOps / 2; ++i) y = (y * 0.999).tanh();
    return y.sum();
  };
  const double t_nograd = median_seconds([&] {
    NoGradGuard no_grad;
    (void)chain();
  });
  const double t_forward = median_seconds([&] { (void)chain(); });
  const double t_both = median_seconds([&] { chain().backward(); });
  std::printf("| chain of %d ops on 4-element tensors | per op |\n|---|---|\n", kOps);
  std::printf("| forward under NoGradGuard (no tape) | %.2f us |\n", t_nograd / kOps * 1e6);
  std::printf("| forward recording the tape | %.2f us |\n", t_forward / kOps * 1e6);
  std::printf("| forward + backward | %.2f us |\n", t_both / kOps * 1e6);
  std::printf("| tape bookkeeping (forward + backward - no-grad forward) | %.2f us |\n\n",
              (t_both - t_nograd) / kOps * 1e6);
}

struct Mlp {
  Tensor w1, b1, w2, b2, w3, b3;
  Mlp() {
    manual_seed(0);
    auto init = [](int64_t out, int64_t in) {
      return (randn({out, in}) * (1.0 / std::sqrt(in))).set_requires_grad(true);
    };
    w1 = init(1024, 784), b1 = zeros({1024}).set_requires_grad(true);
    w2 = init(1024, 1024), b2 = zeros({1024}).set_requires_grad(true);
    w3 = init(10, 1024), b3 = zeros({10}).set_requires_grad(true);
  }
  // One layer per statement, so that without the tape each activation dies at the next.
  Tensor forward(const Tensor& x) const {
    Tensor h = linear(x, w1, b1).relu();
    h = linear(h, w2, b2).relu();
    return linear(h, w3, b3);
  }
  std::vector<Tensor> params() const { return {w1, b1, w2, b2, w3, b3}; }
};

void mlp_step() {
  Mlp m;
  const Tensor x = randn({256, 784}), y = randint(0, 10, {256});
  const double t = median_seconds([&] {
    autograd::zero_grad(m.params());
    nn::functional::cross_entropy(m.forward(x), y).backward();
  });
  const double flop = 3.0 * 2.0 * 256 * (784.0 * 1024 + 1024.0 * 1024 + 1024.0 * 10);
  std::printf("| MLP 784-1024-1024-10, batch 256: forward + cross-entropy + backward | %.2f ms | %.1f GFLOP/s |\n\n",
              t * 1e3, flop / t / 1e9);
}

// Peak bytes above the start of an eval pass of a 4-layer MLP on a batch of 512.
void eval_memory() {
  Mlp m;
  const Tensor x = randn({512, 784});
  auto peak = [&](bool no_grad) {
    memory::empty_cache();
    const int64_t base = memory::stats().current_bytes;
    memory::reset_peak();
    {
      std::unique_ptr<NoGradGuard> guard = no_grad ? std::make_unique<NoGradGuard>() : nullptr;
      Tensor out = m.forward(x).softmax(1);
    }
    return memory::stats().peak_bytes - base;
  };
  const int64_t with_tape = peak(false), without = peak(true);
  std::printf("| MLP eval pass, batch 512 | peak bytes above the start |\n|---|---|\n");
  std::printf("| grad mode on (the tape keeps activations) | %.2f MiB |\n", with_tape / 1048576.0);
  std::printf("| NoGradGuard | %.2f MiB |\n", without / 1048576.0);
  std::printf("| ratio | %.2fx |\n", static_cast<double>(with_tape) / static_cast<double>(without));
  // The same for a deeper net (8 hidden layers of 1024), where the tape's cost grows with depth.
  std::vector<Tensor> ws;
  for (int i = 0; i < 8; ++i) ws.push_back((randn({1024, i == 0 ? 784 : 1024}) * 0.03).set_requires_grad(true));
  auto deep_peak = [&](bool no_grad) {
    memory::empty_cache();
    const int64_t base = memory::stats().current_bytes;
    memory::reset_peak();
    {
      std::unique_ptr<NoGradGuard> guard = no_grad ? std::make_unique<NoGradGuard>() : nullptr;
      Tensor h = x;
      for (const Tensor& w : ws) h = linear(h, w).relu();
    }
    return memory::stats().peak_bytes - base;
  };
  const int64_t deep_tape = deep_peak(false), deep_free = deep_peak(true);
  std::printf("| 8 hidden layers of 1024, grad mode on | %.2f MiB |\n", deep_tape / 1048576.0);
  std::printf("| 8 hidden layers of 1024, NoGradGuard | %.2f MiB |\n", deep_free / 1048576.0);
  std::printf("| ratio | %.2fx |\n", static_cast<double>(deep_tape) / static_cast<double>(deep_free));
}

}  // namespace

// The profiler (Note [Profiler]): off, an op pays the dispatch point's empty check; on, each op
// records an event (name, shapes, times, a memory sample). Interleaved: off, on, off, on, ...
void profiler_cost() {
  const int kOps = 1000;
  Tensor x = randn({4});
  auto chain = [&] {
    NoGradGuard no_grad;
    Tensor y = x;
    for (int i = 0; i < kOps; ++i) y = y * 0.999;
  };
  Mlp m;
  const Tensor xb = randn({256, 784}), yb = randint(0, 10, {256});
  auto step = [&] {
    autograd::zero_grad(m.params());
    nn::functional::cross_entropy(m.forward(xb), yb).backward();
  };
  auto profiled = [](const std::function<void()>& f) {
    return [f] {
      profiler::Profile profile;
      profiler::ProfilerGuard guard(profile);
      f();
    };
  };
  const auto t = bench::interleaved_medians({chain, profiled(chain), step, profiled(step)}, 11);
  std::printf("| the profiler | off | on | cost |\n|---|---|---|---|\n");
  std::printf("| %d tiny ops (4 elements, no tape) | %.2f us per op | %.2f us per op | +%.2f us per op |\n", kOps,
              t[0] / kOps * 1e6, t[1] / kOps * 1e6, (t[1] - t[0]) / kOps * 1e6);
  std::printf("| MLP 784-1024-1024-10 training step, batch 256 | %.2f ms | %.2f ms | %+.1f %% |\n\n", t[2] * 1e3,
              t[3] * 1e3, 100.0 * (t[3] / t[2] - 1.0));
}

int main(int argc, char** argv) {
  set_num_threads(argc > 1 ? std::atoi(argv[1]) : 2);
  std::printf("ember autograd report, %d threads\n\n", get_num_threads());
  overhead();
  mlp_step();
  eval_memory();
  profiler_cost();
  return 0;
}
