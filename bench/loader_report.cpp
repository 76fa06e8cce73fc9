// What loader workers buy (optimization 2): a training loop whose data pipeline does real
// CPU work per example (random affine jitter, bilinear, on 28x28 digits) and a small model,
// with num_workers 0, 1 and 2. Reports samples/s, the share of the step the loop waited for
// data, and the speed-up over 0 workers. Then the same pipeline feeding the small CNN of
// train_mnist, where the model's step is the bottleneck: the data wait should then all but
// vanish with a worker. Data: MNIST from the folder given, else the built-in synthetic digits.
//   build/bench/bench/loader_report [mnist_dir]
#include <chrono>
#include <cstdio>
#include <fstream>
#include <utility>
#include <vector>

#include <ember/ember.h>

#include "models.h"

using namespace ember;

namespace {

struct Result {
  double samples_per_s, wait_share;
};

Result run(const std::shared_ptr<const data::Dataset>& dataset, bool cnn, int workers, int model_threads,
           int64_t batches) {
  manual_seed(0);
  nn::Sequential model =
      cnn ? bench::small_cnn() : nn::Sequential(nn::Flatten(), nn::Linear(784, 256), nn::ReLU(), nn::Linear(256, 10));
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  data::DataLoader loader(dataset, data::DataLoaderOptions().batch_size(64).shuffle(true).num_workers(workers));
  int64_t seen = 0, steps = 0;
  set_num_threads(model_threads);
  const auto t0 = std::chrono::steady_clock::now();
  for (const data::Batch& b : loader) {
    opt.zero_grad();
    nn::functional::cross_entropy(model(b.data), b.target).backward();
    opt.step();
    seen += b.data.size(0);
    if (++steps == batches) break;
  }
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  set_num_threads(2);
  return {static_cast<double>(seen) / total, loader.data_wait_seconds() / total};
}

}  // namespace

int main(int argc, char** argv) {
  std::shared_ptr<const data::Dataset> base;
  std::string source = "synthetic digits";
  if (argc > 1 && std::ifstream(std::string(argv[1]) + "/train-labels-idx1-ubyte.gz")) {
    base = std::make_shared<data::MNIST>(argv[1], true);
    source = std::string("MNIST (") + argv[1] + ")";
  } else {
    base = std::make_shared<data::SyntheticDigits>(20000, 1);
  }
  auto augmented = data::map(base, data::transforms::compose({data::transforms::random_affine(15, 0.1),
                                                              data::transforms::normalize({0.13}, {0.31})}));
  // Threads for the model's kernels: on a loader-bound loop the model runs on the core(s) the
  // workers leave free, so that workers and OpenMP do not fight; on a compute-bound one a
  // mostly idle worker can share the cores with a model that keeps both threads.
  const struct {
    const char* title;
    bool cnn;
    int64_t steps;
    std::vector<std::pair<int, int>> workers_and_threads;
  } pipelines[] = {{"loader-bound: MLP 784-256-10", false, 150, {{0, 2}, {1, 1}, {2, 1}}},
                   {"compute-bound: the CNN of train_mnist", true, 40, {{0, 2}, {1, 1}, {1, 2}, {2, 2}}}};
  for (const auto& p : pipelines) {
    std::printf("%s; %s, random affine jitter, batch 64, %lld steps\n\n", p.title, source.c_str(),
                static_cast<long long>(p.steps));
    std::printf(
        "| num_workers | model threads | samples/s | data wait / step time | speed-up vs 0 workers |\n"
        "|---|---|---|---|---|\n");
    double base_rate = 0;
    for (const auto& [workers, threads] : p.workers_and_threads) {
      const Result r = run(augmented, p.cnn, workers, threads, p.steps);
      if (workers == 0) base_rate = r.samples_per_s;
      std::printf("| %d | %d | %.0f | %.1f %% | %.2f |\n", workers, threads, r.samples_per_s, 100 * r.wait_share,
                  r.samples_per_s / base_rate);
      std::fflush(stdout);
    }
    std::printf("\n");
  }
  return 0;
}
