// The tour: every performance technique of ember, each with its switch off and on, on the same
// workload, measured in this run, with one line of why. One table at the end.
//   ember_tour                 the default run (half a minute on 2 cores)
//   ember_tour --quick         small workloads (seconds; what CI runs)
//   ember_tour --only amp      one section: amp, loader, ddp, accumulation, optimizers, nograd, cuda, int8
//                              (cuda also times the CPU's convolution algorithms)
//   ember_tour --report F      where the HTML report goes (default tour/report.html)
// Sections that need what this machine lacks (a GPU, mpirun) say what they would measure.
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <ember/ember.h>

#include "cli.h"

#include "report.h"

using namespace ember;

namespace {

struct Options {
  bool quick = false;
  std::string only;
  int threads = 2;
  std::string self;  // this program's path, to find train_mnist beside it
  std::string report = "tour/report.html";
};

// One line of the summary.
struct Row {
  std::string technique, off, on, effect;
};
std::vector<Row> rows;
// What the report draws: curves, and bars of off against on.
struct Curves {
  std::string title, x_label, y_label;
  bool log_y;
  std::vector<examples::Report::Series> series;
};
std::vector<Curves> curves;
std::vector<examples::Report::Bar> memory_bars, time_bars;

std::string fmt(const char* f, double v) {
  char buf[96];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}
std::string mib(int64_t bytes) { return fmt("%.1f MiB", bytes / double(1 << 20)); }

double seconds(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
// The median of `reps` runs after one warm-up.
double median_seconds(const std::function<void()>& f, int reps) {
  f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) t.push_back(seconds(f));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}
// Peak bytes above the start while f runs (the CPU allocator's exact counters).
int64_t peak_bytes(const std::function<void()>& f) {
  const int64_t base = memory::stats().current_bytes;
  memory::reset_peak();
  f();
  return memory::stats().peak_bytes - base;
}

// The live bytes above the start after every op of one run of f (the profiler's allocator
// samples), resampled to 101 points over the run, so that runs of different op counts (one
// batch, four micro-batches) share an axis: x is the percentage of the run's ops done.
examples::Report::Series memory_timeline(const std::string& name, const std::function<void()>& f) {
  profiler::Profile profile;
  const int64_t base = memory::stats().current_bytes;
  {
    profiler::ProfilerGuard guard(profile);
    f();
  }
  std::vector<double> live;
  for (const profiler::Event& e : profile.events())
    if (e.bytes_after >= 0) live.push_back((e.bytes_after - base) / double(1 << 20));
  examples::Report::Series timeline{name, {}};
  for (int i = 0; i <= 100 && !live.empty(); ++i)
    timeline.y.push_back(live[static_cast<size_t>(i * (live.size() - 1) / 100)]);
  return timeline;
}

void section(const char* title, const char* why) { std::printf("\n== %s ==\n%s\n", title, why); }

nn::Sequential small_cnn() {
  using namespace nn;
  return Sequential(Conv2d(Conv2dOptions(1, 16, 3).padding(1)), ReLU(), MaxPool2d(2),
                    Conv2d(Conv2dOptions(16, 32, 3).padding(1)), ReLU(), MaxPool2d(2), Flatten(),
                    Linear(32 * 7 * 7, 64), ReLU(), Linear(64, 10));
}
nn::Sequential mlp(int64_t width, int layers) {
  nn::Sequential net{nn::Flatten()};
  int64_t in = 784;
  for (int i = 0; i < layers; ++i) {
    net->push_back(nn::Linear(in, width));
    net->push_back(nn::ReLU());
    in = width;
  }
  net->push_back(nn::Linear(in, 10));
  return net;
}

// 1. Mixed precision: the CNN's training step in float32 and under bfloat16 autocast.
void amp_section(const Options& o) {
  section("1. mixed precision (autocast bf16)",
          "Activations kept for backward are stored in 16 bits: less memory. ember's CPU kernels read bf16 as it is "
          "and compute in float32 (AVX2 has no bf16 arithmetic), so the step takes about float32's time; on a GPU "
          "the tensor cores make it faster.");
  const int64_t batch = o.quick ? 32 : 128;
  const int steps = o.quick ? 3 : 30;
  manual_seed(1);
  const Tensor x = randn({batch, 1, 28, 28}), y = randint(0, 10, {batch});
  double ms[2], loss[2];
  int64_t peak[2];
  std::vector<examples::Report::Series> amp_curves{{"float32", {}}, {"bf16 autocast", {}}}, timelines;
  for (int on = 0; on < 2; ++on) {
    manual_seed(2);
    nn::Sequential net = small_cnn();
    optim::SGD opt(net->parameters(), optim::SGDOptions(0.01).momentum(0.9));
    auto step = [&] {
      opt.zero_grad();
      Tensor l;
      {
        autocast::AutocastGuard amp(kCPU, kBFloat16, on == 1);
        l = nn::functional::cross_entropy(net(x), y);
      }
      l.backward();
      opt.step();
      return l.item<double>();
    };
    step();
    opt.zero_grad();
    peak[on] = peak_bytes([&] { step(); });
    timelines.push_back(memory_timeline(on ? "bf16 autocast" : "float32", [&] { step(); }));
    ms[on] = median_seconds([&] { step(); }, steps) * 1e3;
    for (int i = 0; i < 3 * steps; ++i) amp_curves[on].y.push_back(loss[on] = step());
  }
  std::printf("step: %.1f ms (fp32) vs %.1f ms (bf16); step peak %s vs %s; loss after the steps %.4f vs %.4f\n", ms[0],
              ms[1], mib(peak[0]).c_str(), mib(peak[1]).c_str(), loss[0], loss[1]);
  curves.push_back(
      {"Mixed precision: the CNN's training loss, float32 and bf16 autocast", "step", "loss", false, amp_curves});
  curves.push_back({"Mixed precision: memory during one training step (live bytes after each op)",
                    "% of the step's ops", "MiB above the start", false, timelines});
  memory_bars.push_back({"1 mixed precision (MiB)", peak[0] / double(1 << 20), peak[1] / double(1 << 20)});
  time_bars.push_back({"1 mixed precision (ms/step)", ms[0], ms[1]});
  rows.push_back({"1 mixed precision (bf16, CPU)", mib(peak[0]) + ", " + fmt("%.1f ms", ms[0]),
                  mib(peak[1]) + ", " + fmt("%.1f ms", ms[1]),
                  fmt("memory %.2fx", double(peak[1]) / peak[0]) +
                      fmt(", time %.2fx (bf16 read as is, computed in float32)", ms[1] / ms[0])});
}

// 2. Data loading: an epoch whose samples are augmented (random affine), with 0 and 2 workers.
void loader_section(const Options& o) {
  section("2. fast data loading (worker threads, prefetch)",
          "Workers prepare the next batches while the model trains on this one: the loop waits less for data.");
  const int64_t n = o.quick ? 512 : 16384;
  auto digits = std::make_shared<data::SyntheticDigits>(n, 3);
  auto augmented = data::map(digits, data::transforms::random_affine(10, 0.1));
  double secs[2], wait[2];
  for (int on = 0; on < 2; ++on) {
    manual_seed(4);
    nn::Sequential net = mlp(256, 2);
    optim::SGD opt(net->parameters(), optim::SGDOptions(0.05));
    data::DataLoader loader(augmented,
                            data::DataLoaderOptions().batch_size(64).shuffle(true).seed(5).num_workers(on ? 2 : 0));
    secs[on] = seconds([&] {
      for (const data::Batch& b : loader) {
        opt.zero_grad();
        nn::functional::cross_entropy(net(b.data), b.target).backward();
        opt.step();
      }
    });
    wait[on] = loader.data_wait_seconds();
  }
  std::printf(
      "epoch of %lld augmented samples: %.2f s with 0 workers (waiting %.2f s), %.2f s with 2 (waiting %.2f s)\n",
      static_cast<long long>(n), secs[0], wait[0], secs[1], wait[1]);
  time_bars.push_back({"2 data loading (s/epoch)", secs[0], secs[1]});
  rows.push_back({"2 data loading (2 workers)", fmt("%.2f s/epoch", secs[0]) + fmt(", waiting %.2f s", wait[0]),
                  fmt("%.2f s/epoch", secs[1]) + fmt(", waiting %.2f s", wait[1]),
                  fmt("%.2fx faster", secs[0] / secs[1]) + " (2 cores: workers share them with the model)"});
}

// 3. Data parallel: train_mnist alone and under mpirun with 2 ranks, same global batch.
void ddp_section(const Options& o) {
  section("3. data parallel (DistributedDataParallel over MPI)",
          "Each rank trains on its shard; gradients are averaged during backward. Pays when each rank has its own "
          "cores or GPU; on this machine's 2 cores it shows the mechanism, not a speed-up.");
  const std::string dir = o.self.substr(0, o.self.find_last_of('/') + 1);
  const std::string trainer = dir + "train_mnist";
  if (access(trainer.c_str(), X_OK) != 0 || std::system("command -v mpirun > /dev/null 2>&1") != 0) {
    std::printf("skipped: needs mpirun (Open MPI) and train_mnist beside this program\n");
    rows.push_back({"3 data parallel", "-", "-", "skipped: no mpirun here"});
    return;
  }
  const std::string size = o.quick ? "1500" : "24000";
  const std::string common = " --epochs 1 --train-size " + size + " --test-size 500 --model mlp";
  auto run = [&](const std::string& command) {
    const std::string out = "/tmp/ember_tour_ddp_" + std::to_string(getpid());
    double secs = 0;
    const int status = std::system((command + " > " + out + " 2>&1").c_str());
    if (FILE* f = std::fopen(out.c_str(), "r")) {
      char line[512];
      while (std::fgets(line, sizeof line, f))
        if (std::sscanf(line, "epoch 1: train loss %*f accuracy %*f | test loss %*f accuracy %*f | %lf s", &secs) == 1)
          break;
      std::fclose(f);
    }
    std::remove(out.c_str());
    return status == 0 ? secs : -1.0;
  };
  const double one = run(trainer + common + " --batch-size 64 --threads 2");
  const double two =
      run("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np 2 --oversubscribe -x "
          "OMP_NUM_THREADS=1 " +
          trainer + common + " --batch-size 32 --threads 1 --distributed");
  if (one <= 0 || two <= 0) {
    std::printf("a run failed (1 process: %.2f s, 2 ranks: %.2f s)\n", one, two);
    rows.push_back({"3 data parallel", "-", "-", "a run failed: see above"});
    return;
  }
  std::printf("one epoch, global batch 64: 1 process x 2 threads %.2f s, 2 ranks x 1 thread %.2f s\n", one, two);
  time_bars.push_back({"3 data parallel (s/epoch)", one, two});
  rows.push_back({"3 data parallel (2 MPI ranks)", fmt("%.2f s/epoch", one), fmt("%.2f s/epoch", two),
                  fmt("%.2fx (same 2 cores; see BENCHMARKS.md)", one / two)});
}

// 4. Gradient accumulation: one step on batch B, and on B/K x K micro-batches.
void accumulation_section(const Options& o) {
  section("4. gradient accumulation",
          "K micro-batches of B/K with the loss divided by K give the big batch's gradient with a K times smaller "
          "activation peak.");
  const int64_t batch = o.quick ? 64 : 256, k = 4;
  manual_seed(6);
  const Tensor x = randn({batch, 1, 28, 28}), y = randint(0, 10, {batch});
  std::vector<Tensor> after[2];
  int64_t peak[2];
  std::vector<examples::Report::Series> timelines;
  examples::Report::Series losses[2] = {{"batch " + std::to_string(batch), {}},
                                        {std::to_string(k) + " x " + std::to_string(batch / k), {}}};
  for (int on = 0; on < 2; ++on) {
    manual_seed(7);
    nn::Sequential net = small_cnn();  // its activations (the conv outputs) dominate its memory
    optim::SGD opt(net->parameters(), optim::SGDOptions(0.1));
    auto gradients = [&] {
      opt.zero_grad();
      if (!on) {
        nn::functional::cross_entropy(net(x), y).backward();
      } else {
        for (int64_t m = 0; m < k; ++m)
          (nn::functional::cross_entropy(net(x.narrow(0, m * batch / k, batch / k)),
                                         y.narrow(0, m * batch / k, batch / k)) /
           double(k))
              .backward();
      }
    };
    timelines.push_back(memory_timeline(
        on ? std::to_string(k) + " x " + std::to_string(batch / k) : "batch " + std::to_string(batch), gradients));
    peak[on] = peak_bytes([&] {
      gradients();
      opt.step();
    });
    for (const Tensor& p : net->parameters()) after[on].push_back(p.detach().clone());
    // Training on: the loss of the whole batch before each step (the curves should coincide).
    for (int step = 0; step < (o.quick ? 5 : 20); ++step) {
      {
        NoGradGuard no_grad;
        losses[on].y.push_back(nn::functional::cross_entropy(net(x), y).item<double>());
      }
      gradients();
      opt.step();
    }
  }
  double diff = 0;
  for (size_t i = 0; i < after[0].size(); ++i)
    diff = std::max(diff, (after[0][i] - after[1][i]).abs().max().item<double>());
  std::printf("batch %lld: peak %s; %lld x %lld: peak %s; largest parameter difference after the step %.2e\n",
              static_cast<long long>(batch), mib(peak[0]).c_str(), static_cast<long long>(k),
              static_cast<long long>(batch / k), mib(peak[1]).c_str(), diff);
  memory_bars.push_back({"4 accumulation x4 (MiB)", peak[0] / double(1 << 20), peak[1] / double(1 << 20)});
  curves.push_back({"Gradient accumulation: memory while the gradients of one step build up", "% of the ops",
                    "MiB above the start", false, timelines});
  curves.push_back({"Gradient accumulation: the loss over training steps, one batch and accumulated (the same)",
                    "step",
                    "loss",
                    false,
                    {losses[0], losses[1]}});
  rows.push_back({"4 gradient accumulation (x4)", mib(peak[0]), mib(peak[1]),
                  fmt("peak %.2fx, ", double(peak[1]) / peak[0]) + fmt("same update (max diff %.1e)", diff)});
}

// 5. Optimizers: a logistic regression to the same loss with SGD, AdamW and L-BFGS.
void optimizer_section(const Options& o) {
  section("5. efficient optimizers (SGD, AdamW, L-BFGS)",
          "The same problem to the same loss: L-BFGS's curvature model needs far fewer iterations on a smooth, "
          "small problem; AdamW's per-parameter steps beat plain SGD.");
  manual_seed(8);
  const int64_t n = o.quick ? 256 : 1024, d = 32;
  const Tensor x = randn({n, d}), w_true = randn({d, 1});
  const Tensor y = ((x.matmul(w_true) + randn({n, 1}) * 0.5) > 0).to(kFloat32);
  // L2-regularised, so that the optimum is finite even when the classes separate.
  auto loss_of = [&](const Tensor& w) {
    return nn::functional::binary_cross_entropy_with_logits(x.matmul(w), y) + w.pow(2.0).sum() * 5e-3;
  };
  // The target: near the optimum L-BFGS finds with many iterations.
  Tensor w_best = zeros({d, 1}).requires_grad_();
  {
    optim::LBFGS best({w_best}, optim::LBFGSOptions(1).max_iter(200).line_search_fn("strong_wolfe"));
    best.step([&] {
      best.zero_grad();
      Tensor l = loss_of(w_best);
      l.backward();
      return l;
    });
  }
  const double target = loss_of(w_best).item<double>() * 1.01;
  struct Result {
    std::string name;
    int iterations;
    double secs;
  };
  std::vector<Result> results;
  std::vector<examples::Report::Series> loss_curves;
  for (const std::string name : {"SGD", "AdamW", "L-BFGS"}) {
    loss_curves.push_back({name, {}});
    Tensor w = zeros({d, 1}).requires_grad_();
    std::unique_ptr<optim::Optimizer> opt;
    if (name == "SGD") opt = std::make_unique<optim::SGD>(std::vector<Tensor>{w}, optim::SGDOptions(0.5).momentum(0.9));
    if (name == "AdamW")
      opt = std::make_unique<optim::AdamW>(std::vector<Tensor>{w}, optim::AdamWOptions(0.05).weight_decay(0));
    if (name == "L-BFGS")
      opt = std::make_unique<optim::LBFGS>(std::vector<Tensor>{w},
                                           optim::LBFGSOptions(1).max_iter(1).line_search_fn("strong_wolfe"));
    int it = 0;
    const double secs = seconds([&] {
      while (it < 5000) {
        const double l = opt->step([&] {
                              opt->zero_grad();
                              Tensor loss = loss_of(w);
                              loss.backward();
                              return loss;
                            })
                             .item<double>();
        ++it;
        loss_curves.back().y.push_back(l - target / 1.01);  // above the optimum
        if (l <= target) break;
      }
    });
    results.push_back({name, it, secs});
    std::printf("%-7s %5d iterations, %.3f s to loss <= %.4f\n", name.c_str(), it, secs, target);
  }
  curves.push_back(
      {"Optimizers: loss above the optimum per iteration", "iteration", "loss - optimum", true, loss_curves});
  rows.push_back(
      {"5 optimizers (to one loss)", fmt("SGD %.0f it", results[0].iterations),
       fmt("AdamW %.0f it", results[1].iterations) + fmt(", L-BFGS %.0f it", results[2].iterations),
       fmt("L-BFGS %.0fx fewer iterations than SGD", double(results[0].iterations) / results[2].iterations)});
}

// 6. No-grad: an eval pass with and without the tape.
void nograd_section(const Options& o) {
  section("6. no-grad guards and detach",
          "Without the tape nothing is kept for backward: each activation dies at the next layer.");
  const int64_t batch = o.quick ? 128 : 512;
  manual_seed(9);
  nn::Sequential net = mlp(1024, 6);
  net->eval();
  const Tensor x = randn({batch, 1, 28, 28});
  int64_t peak[2];
  double ms[2];
  std::vector<examples::Report::Series> timelines;
  auto pass = [&](bool no_grad) {
    std::optional<NoGradGuard> guard;
    if (no_grad) guard.emplace();
    (void)net(x).sum().item<double>();
  };
  for (int on = 0; on < 2; ++on) {
    peak[on] = peak_bytes([&] { pass(on); });
    timelines.push_back(memory_timeline(on ? "NoGradGuard" : "with the tape", [&] { pass(on); }));
  }
  // Timed alternately, so that both see the same machine.
  std::vector<double> times[2];
  for (int rep = 0; rep < (o.quick ? 3 : 21); ++rep)
    for (int on = 0; on < 2; ++on) times[on].push_back(seconds([&] { pass(on); }));
  for (int on = 0; on < 2; ++on) {
    std::sort(times[on].begin(), times[on].end());
    ms[on] = times[on][times[on].size() / 2] * 1e3;
  }
  curves.push_back({"No-grad: memory during one eval pass (live bytes after each op)", "% of the pass's ops",
                    "MiB above the start", false, timelines});
  std::printf("eval pass of an MLP 6 x 1024, batch %lld: peak %s with the tape, %s under NoGradGuard\n",
              static_cast<long long>(batch), mib(peak[0]).c_str(), mib(peak[1]).c_str());
  memory_bars.push_back({"6 no-grad eval (MiB)", peak[0] / double(1 << 20), peak[1] / double(1 << 20)});
  time_bars.push_back({"6 no-grad eval (ms)", ms[0], ms[1]});
  rows.push_back({"6 no-grad eval", mib(peak[0]) + fmt(", %.1f ms", ms[0]), mib(peak[1]) + fmt(", %.1f ms", ms[1]),
                  fmt("peak %.2fx", double(peak[1]) / peak[0]) + fmt(", time %.2fx", ms[1] / ms[0]) +
                      (ms[1] > 0.95 * ms[0] ? " (GEMM-bound: the tape's bookkeeping is microseconds)" : "")});
}

// The CNN's SGD step on the CPU, its median time in ms over `reps`.
double cpu_cnn_step_ms(const Tensor& x, const Tensor& y, int reps) {
  manual_seed(11);
  nn::Sequential net = small_cnn();
  optim::SGD opt(net->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  return median_seconds(
             [&] {
               opt.zero_grad();
               nn::functional::cross_entropy(net(x), y).backward();
               opt.step();
             },
             reps) *
         1e3;
}

// 7. CUDA: the CNN's step on the CPU and the GPU (when there is one); before it, the CPU's own
// convolution algorithms (backends::cpu) on the same step.
void cuda_section(const Options& o) {
  section("7. CUDA (caching allocator, cuDNN benchmark mode) and the CPU's convolutions",
          "The same step on the GPU; the caching allocator keeps cudaMalloc out of the loop. On the CPU, "
          "direct convolution kernels read the input in place where im2col copies it 9x for a 3x3 kernel; "
          "benchmark mode times both once per shape and keeps the faster, as cudnn.benchmark does.");
  {
    namespace bc = backends::cpu;
    const int64_t batch = o.quick ? 32 : 128;
    manual_seed(10);
    const Tensor x = randn({batch, 1, 28, 28}), y = randint(0, 10, {batch});
    const int reps = o.quick ? 3 : 20;
    bc::set_conv_algorithm(bc::ConvAlgorithm::im2col_gemm);
    const double im2col = cpu_cnn_step_ms(x, y, reps);
    bc::set_conv_algorithm(bc::ConvAlgorithm::automatic);
    const double heuristic = cpu_cnn_step_ms(x, y, reps);
    bc::set_benchmark(true);
    const double benchmarked = cpu_cnn_step_ms(x, y, reps);
    bc::set_benchmark(false);
    std::printf(
        "CPU CNN step, batch %lld (%s kernels): im2col + GEMM %.1f ms, direct (heuristic) %.1f ms, benchmark "
        "mode %.1f ms\n",
        static_cast<long long>(batch), bc::isa(), im2col, heuristic, benchmarked);
    time_bars.push_back({"7 CPU conv, CNN step (ms)", im2col, heuristic});
    rows.push_back({"7 CPU conv (CNN step)", fmt("im2col %.1f ms", im2col), fmt("direct %.1f ms", heuristic),
                    fmt("%.2fx faster", im2col / heuristic)});
  }
  if (!cuda::is_available()) {
    std::printf(
        "skipped: no GPU on this machine (it would time the CNN step on CPU and GPU, with the caching "
        "allocator and cuDNN's benchmark mode off and on; bench/gpu_report has those rows)\n");
    rows.push_back({"7 CUDA", "-", "-", "skipped: no GPU here"});
    return;
  }
  const int64_t batch = 128;
  manual_seed(10);
  const Tensor x = randn({batch, 1, 28, 28}), y = randint(0, 10, {batch});
  double ms[2];
  for (int on = 0; on < 2; ++on) {
    const Device device = on ? Device(kCUDA) : Device(kCPU);
    manual_seed(11);
    nn::Sequential net = small_cnn();
    net->to(device);
    optim::SGD opt(net->parameters(), optim::SGDOptions(0.05).momentum(0.9));
    const Tensor xd = x.to(device), yd = y.to(device);
    ms[on] = median_seconds(
                 [&] {
                   opt.zero_grad();
                   nn::functional::cross_entropy(net(xd), yd).backward();
                   opt.step();
                   if (on) cuda::synchronize();
                 },
                 o.quick ? 3 : 10) *
             1e3;
  }
  rows.push_back(
      {"7 CUDA (CNN step)", fmt("CPU %.1f ms", ms[0]), fmt("GPU %.2f ms", ms[1]), fmt("%.1fx", ms[0] / ms[1])});
}

// 8. Pruning and int8: a CNN trained briefly on synthetic digits, then compressed both ways.
void int8_section(const Options& o) {
  section("8. pruning and INT8 quantization",
          "Pruning zeroes the weights that matter least; removing whole channels (shrink) makes the layers "
          "smaller and faster. INT8 stores weights in a quarter of the bytes and multiplies in 8 bits.");
  manual_seed(10);
  auto train = std::make_shared<data::SyntheticDigits>(o.quick ? 2048 : 16384, 21);
  auto test = std::make_shared<data::SyntheticDigits>(o.quick ? 500 : 2000, 22);
  data::DataLoader loader(train, data::DataLoaderOptions().batch_size(64).shuffle(true).seed(3));
  std::vector<Tensor> test_x, test_y;
  for (const data::Batch& b : data::DataLoader(test, data::DataLoaderOptions().batch_size(250))) {
    test_x.push_back(b.data);
    test_y.push_back(b.target);
  }
  auto epoch = [&](nn::Sequential& net, optim::Optimizer& opt) {
    net->train();
    for (const data::Batch& b : loader) {
      opt.zero_grad();
      nn::functional::cross_entropy(net(b.data), b.target).backward();
      opt.step();
    }
  };
  struct Measure {
    double accuracy, ms;
    int64_t bytes, params;
  };
  auto measure = [&](nn::Sequential& net) {
    net->eval();
    NoGradGuard no_grad;
    double correct = 0, total = 0;
    for (size_t i = 0; i < test_x.size(); ++i) {
      correct += net(test_x[i]).argmax(1).eq(test_y[i]).sum().item<double>();
      total += static_cast<double>(test_y[i].size(0));
    }
    Measure m{correct / total, median_seconds([&] { net(test_x[0]); }, o.quick ? 3 : 21) * 1e3, 0, 0};
    for (const auto& item : net->state_dict())
      m.bytes += item.value().numel() * static_cast<int64_t>(element_size(item.value().dtype()));
    for (const Tensor& p : net->parameters()) m.params += p.numel();
    return m;
  };
  nn::Sequential net = small_cnn();
  optim::Adam opt(net->parameters(), optim::AdamOptions(3e-3));
  for (int e = 0; e < (o.quick ? 1 : 3); ++e) epoch(net, opt);
  const StateDict trained = net->state_dict();
  const Measure base = measure(net);

  // Accuracy against sparsity, unstructured (L1) and whole channels (L2), without fine-tuning.
  namespace prune = nn::utils::prune;
  std::vector<examples::Report::Series> sparsity_curves{{"L1 unstructured", {}}, {"L2 channels", {}}};
  std::vector<double> amounts{0.0, 0.3, 0.5, 0.7, 0.9};
  for (int structured = 0; structured < 2; ++structured)
    for (double amount : amounts) {
      nn::Sequential copy = small_cnn();
      copy->load_state_dict(trained);
      if (amount > 0)
        for (size_t i : {0, 3, 7})  // the convolutions and the hidden Linear (the classes stay)
          structured ? prune::ln_structured(*(*copy)[i], "weight", amount, 2, 0)
                     : prune::l1_unstructured(*(*copy)[i], "weight", amount);
      sparsity_curves[structured].y.push_back(100.0 * measure(copy).accuracy);
    }
  std::printf("test accuracy at sparsity 0/30/50/70/90 %% (no fine-tuning): L1 ");
  for (double a : sparsity_curves[0].y) std::printf("%.1f ", a);
  std::printf("| L2 channels ");
  for (double a : sparsity_curves[1].y) std::printf("%.1f ", a);
  std::printf("\n");
  curves.push_back({"Pruning: test accuracy (%) at 0, 30, 50, 70, 90 % of the weights pruned, no fine-tuning",
                    "sparsity step (0, 30, 50, 70, 90 %)", "accuracy %", false, sparsity_curves});

  // Half of the channels, one epoch of fine-tuning, then shrink: smaller dense layers.
  nn::Sequential pruned = small_cnn();
  pruned->load_state_dict(trained);
  for (size_t i : {0, 3, 7}) prune::ln_structured(*(*pruned)[i], "weight", 0.5, 2, 0);
  optim::Adam fine(pruned->parameters(), optim::AdamOptions(1e-3));
  epoch(pruned, fine);
  const prune::ShrinkReport shrunk = prune::shrink(*pruned);
  const Measure small = measure(pruned);
  // The fair reference for accuracy: the unpruned model given the same extra epoch.
  nn::Sequential longer = small_cnn();
  longer->load_state_dict(trained);
  optim::Adam more(longer->parameters(), optim::AdamOptions(1e-3));
  epoch(longer, more);
  const double reference_accuracy = measure(longer).accuracy;
  std::printf(
      "50 %% of the channels + 1 epoch + shrink: %lld -> %lld parameters, forward %.2f -> %.2f ms, accuracy "
      "%.4f -> %.4f (unpruned, the same extra epoch: %.4f)\n",
      static_cast<long long>(shrunk.parameters_before), static_cast<long long>(shrunk.parameters_after), base.ms,
      small.ms, base.accuracy, small.accuracy, reference_accuracy);
  rows.push_back({"8 pruning (50 % channels, shrink)",
                  fmt("%.0fK params", base.params / 1e3) + fmt(", %.2f ms", base.ms),
                  fmt("%.0fK params", small.params / 1e3) + fmt(", %.2f ms", small.ms),
                  fmt("%.2fx faster", base.ms / small.ms) +
                      fmt(", accuracy %+.1f pts", 100 * (small.accuracy - reference_accuracy))});

  // Static int8: observers calibrated on a few batches, then every layer in int8.
  nn::Sequential calibrated = small_cnn();
  calibrated->load_state_dict(trained);
  calibrated->eval();
  quantization::prepare(*calibrated);
  {
    NoGradGuard no_grad;
    int n = 0;
    for (const data::Batch& b : loader)
      if (calibrated(b.data), ++n == 8) break;
  }
  nn::Sequential int8 = quantization::convert(*calibrated);
  const Measure q = measure(int8);
  std::printf("static int8: %lld -> %lld bytes, forward %.2f -> %.2f ms, accuracy %.4f -> %.4f\n",
              static_cast<long long>(base.bytes), static_cast<long long>(q.bytes), base.ms, q.ms, base.accuracy,
              q.accuracy);
  memory_bars.push_back({"8 int8 weights (KiB)", base.bytes / 1024.0, q.bytes / 1024.0});
  time_bars.push_back({"8 shrink (ms/batch)", base.ms, small.ms});
  time_bars.push_back({"8 int8 (ms/batch)", base.ms, q.ms});
  rows.push_back({"8 INT8 (static)", fmt("%.0f KiB", base.bytes / 1024.0) + fmt(", %.2f ms", base.ms),
                  fmt("%.0f KiB", q.bytes / 1024.0) + fmt(", %.2f ms", q.ms),
                  fmt("%.2fx smaller", double(base.bytes) / q.bytes) + fmt(", %.2fx faster", base.ms / q.ms) +
                      fmt(", accuracy %+.1f pts", 100 * (q.accuracy - base.accuracy))});
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"ember's performance techniques, each off and on, measured in this run."};
  app.add_flag("--quick", o.quick, "small workloads (seconds)");
  app.add_option("--only", o.only, "one section: amp, loader, ddp, accumulation, optimizers, nograd, cuda, int8")
      ->check(CLI::IsMember({"", "amp", "loader", "ddp", "accumulation", "optimizers", "nograd", "cuda", "int8"}));
  app.add_option("--threads", o.threads, "threads for ember's kernels")->check(examples::cli::count(1, 1024));
  app.add_option("--report", o.report, "the HTML report (its folder is made; empty: none)");
  CLI11_PARSE(app, argc, argv);
  o.self = argv[0];
  try {
    set_num_threads(o.threads);
    const std::vector<std::pair<std::string, void (*)(const Options&)>> sections = {
        {"amp", amp_section},
        {"loader", loader_section},
        {"ddp", ddp_section},
        {"accumulation", accumulation_section},
        {"optimizers", optimizer_section},
        {"nograd", nograd_section},
        {"cuda", cuda_section},
        {"int8", int8_section}};
    for (const auto& [name, run] : sections)
      if (o.only.empty() || o.only == name) run(o);
    std::printf("\n| technique | off | on | effect |\n|---|---|---|---|\n");
    for (const Row& r : rows)
      std::printf("| %s | %s | %s | %s |\n", r.technique.c_str(), r.off.c_str(), r.on.c_str(), r.effect.c_str());
    if (!o.report.empty()) {
      examples::Report report("ember: every technique, off and on");
      report.paragraph(std::string("Measured in one run of ember_tour") + (o.quick ? " --quick" : "") + " with " +
                       std::to_string(o.threads) + " threads" + (cuda::is_available() ? ", with a GPU." : ", no GPU."));
      std::vector<std::vector<std::string>> table;
      for (const Row& r : rows) table.push_back({r.technique, r.off, r.on, r.effect});
      report.table({"technique", "off", "on", "effect"}, table);
      if (!memory_bars.empty()) report.bar_chart("Peak memory, off and on", memory_bars);
      if (!time_bars.empty()) report.bar_chart("Time, off and on", time_bars);
      for (const Curves& c : curves) report.line_chart(c.title, c.x_label, c.y_label, c.series, c.log_y);
      const size_t slash = o.report.find_last_of('/');
      if (slash != std::string::npos && std::system(("mkdir -p '" + o.report.substr(0, slash) + "'").c_str()) != 0)
        throw Error("ember_tour: cannot make the folder of " + o.report);
      report.write(o.report);
      std::printf("\nreport: %s (%d charts)\n", o.report.c_str(), report.charts());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ember_tour: %s\n", e.what());
    return 2;
  }
  return 0;
}
