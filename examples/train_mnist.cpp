// Trains an MLP or a small CNN on MNIST-shaped digits and reports test accuracy: the data
// loader, nn modules, optimizers, gradient accumulation and checkpoints working together.
//   train_mnist                          # built-in synthetic digits, no files needed
//   train_mnist --data ../shared/data/mnist --model cnn --epochs 3 --workers 2
//   mpirun -np 2 train_mnist --distributed       # data parallel: each rank its shard, DDP
//   train_mnist --prune 0.7 --quantize dynamic   # then pruned + fine-tuned, then int8, each reported
//   train_mnist --help
#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>

#include <ember/ember.h>

#include "cli.h"

#include "amp.h"
#include "progress.h"

using namespace ember;

namespace {

struct Config {
  std::string data_dir, model = "mlp", optimizer = "sgd", schedule = "none", device = "cpu", save, resume, metrics;
  std::string amp = "none", profile, prune_method = "l1", quantize;
  double prune = 0;
  int profile_steps = 20;
  int64_t save_every = 0;
  int epochs = 2, workers = 0, threads = 2, accumulate = 1;
  int64_t batch_size = 64, train_size = 12000, test_size = 2000;
  double lr = -1, expect_accuracy = -1;
  uint64_t seed = 0;
  bool pin_memory = false, augment = false, distributed = false;
};

nn::Sequential make_model(const std::string& kind) {
  using namespace nn;
  if (kind == "cnn")
    return Sequential(Conv2d(Conv2dOptions(1, 32, 3).padding(1)), ReLU(), MaxPool2d(2),
                      Conv2d(Conv2dOptions(32, 64, 3).padding(1)), ReLU(), MaxPool2d(2), Flatten(),
                      Linear(64 * 7 * 7, 128), ReLU(), Linear(128, 10));
  return Sequential(Flatten(), Linear(784, 256), ReLU(), Linear(256, 128), ReLU(), Linear(128, 10));
}

std::unique_ptr<optim::Optimizer> make_optimizer(const Config& c, const std::vector<Tensor>& params) {
  if (c.optimizer == "sgd")
    return std::make_unique<optim::SGD>(params, optim::SGDOptions(c.lr > 0 ? c.lr : 0.05).momentum(0.9));
  if (c.optimizer == "adam") return std::make_unique<optim::Adam>(params, optim::AdamOptions(c.lr > 0 ? c.lr : 1e-3));
  if (c.optimizer == "adamw")
    return std::make_unique<optim::AdamW>(params, optim::AdamWOptions(c.lr > 0 ? c.lr : 1e-3));
  return std::make_unique<optim::LBFGS>(
      params, optim::LBFGSOptions(c.lr > 0 ? c.lr : 1.0).max_iter(4).line_search_fn("strong_wolfe"));
}

// Mean loss and accuracy over a dataset, in eval mode without the tape.
std::pair<double, double> evaluate(nn::Sequential& model, const std::shared_ptr<const data::Dataset>& ds, Device device,
                                   const std::string& amp) {
  model->eval();
  NoGradGuard no_grad;
  const examples::AmpScope autocast(amp, device);
  data::DataLoader loader(ds, data::DataLoaderOptions().batch_size(500));
  examples::DeviceSums sums(device, 2);  // summed loss, correct predictions: read once, at the end
  for (const data::Batch& b : loader) {
    const Tensor target = b.target.to(device);
    const Tensor logits = model(b.data.to(device));
    sums.add(0, nn::functional::cross_entropy(logits, target, nn::functional::CrossEntropyOptions().reduction("sum")));
    sums.add(1, logits.argmax(1).eq(target).sum());
  }
  model->train();
  sums.refresh(0, /*always=*/true);
  return {sums[0] / static_cast<double>(ds->size()), sums[1] / static_cast<double>(ds->size())};
}

// What a compressed model costs and keeps: test accuracy, inference time per batch of 500 on the
// CPU, bytes of its checkpoint on disk, and the share of weights that are zero.
struct ModelReport {
  double accuracy = 0, ms_per_batch = 0, zero_fraction = 0;
  int64_t bytes = 0;
};

double last_report_accuracy = 0;

ModelReport report_model(nn::Sequential& model, const std::shared_ptr<const data::Dataset>& test, const char* label) {
  ModelReport r;
  r.accuracy = evaluate(model, test, Device(kCPU), "none").second;
  // The forward alone, on batches loaded beforehand: what the compression changes.
  static std::vector<Tensor> batches;
  if (batches.empty())
    for (const data::Batch& b : data::DataLoader(test, data::DataLoaderOptions().batch_size(500)))
      batches.push_back(b.data);
  model->eval();
  NoGradGuard no_grad;
  for (const Tensor& x : batches) model(x);  // warm-up (packs int8 weights, fills the allocator's cache)
  const auto t0 = std::chrono::steady_clock::now();
  for (int round = 0; round < 3; ++round)
    for (const Tensor& x : batches) model(x);
  r.ms_per_batch = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e3 /
                   (3.0 * static_cast<double>(batches.size()));
  model->train();
  const std::string path = "/tmp/ember_train_mnist_report.safetensors";
  save(model->state_dict(), path);
  r.bytes = static_cast<int64_t>(std::filesystem::file_size(path));
  std::filesystem::remove(path);
  r.zero_fraction = nn::utils::prune::sparsity(*model).global.fraction();  // of the float parameters
  last_report_accuracy = r.accuracy;
  std::printf("%-28s test accuracy %.4f | %6.2f ms per batch of 500 | checkpoint %8lld bytes | %5.1f %% zeros\n", label,
              r.accuracy, r.ms_per_batch, static_cast<long long>(r.bytes), 100.0 * r.zero_fraction);
  return r;
}

// Technique 8, pruning: masks on the trained weights, one epoch of fine-tuning with the masks in
// place (the pruned weights get no gradient), then the masks made permanent.
void prune_and_finetune(const Config& c, nn::Sequential& model, optim::Optimizer& opt, data::DataLoader& loader,
                        const std::shared_ptr<const data::Dataset>& test) {
  namespace prune = nn::utils::prune;
  report_model(model, test, "before pruning:");
  std::vector<prune::Target> weights;
  for (const auto& item : model->named_modules())
    if (item.value()->as<nn::LinearImpl>() || item.value()->as<nn::Conv2dImpl>())
      weights.push_back({item.value(), "weight"});
  for (size_t i = 0; i < weights.size(); ++i) {
    nn::Module& m = *weights[i].module;
    if (c.prune_method == "l1") prune::l1_unstructured(m, "weight", c.prune);
    // Channels: every layer but the last, whose outputs are the classes.
    if (c.prune_method == "ln-structured" && i + 1 < weights.size()) prune::ln_structured(m, "weight", c.prune, 2, 0);
  }
  if (c.prune_method == "global") prune::global_unstructured(weights, prune::L1Unstructured(c.prune));
  std::printf("pruned %s, amount %.2f\n", c.prune_method.c_str(), c.prune);
  report_model(model, test, "pruned, before fine-tuning:");
  // One epoch of fine-tuning at the run's starting learning rate (a cosine schedule has brought
  // it to 0 by now), through a closure, which every optimizer takes and L-BFGS needs.
  for (optim::ParamGroup& g : opt.param_groups())
    if (g.initial_lr) g.options().set_lr(*g.initial_lr);
  model->train();
  for (const data::Batch& b : loader)
    opt.step([&] {
      opt.zero_grad();
      Tensor loss = nn::functional::cross_entropy(model(b.data), b.target);
      loss.backward();
      return loss;
    });
  for (auto& w : weights)
    if (prune::find_hook(*w.module, "weight")) prune::remove(*w.module, "weight");
  report_model(model, test, "pruned, fine-tuned 1 epoch:");
  if (c.prune_method == "ln-structured") {  // dead channels out: smaller dense layers, the same outputs
    const prune::ShrinkReport shrunk = prune::shrink(*model);
    std::cout << shrunk;
    report_model(model, test, "shrunk:");
  }
}

// Technique 8, int8, side by side with the float32 model:
//   dynamic: Linear layers with int8 weights, activations quantized per batch;
//   static:  histogram observers calibrated on 10 training batches, then every layer int8 with uint8
//            activations between them (Note [Static int8 chains]);
//   qat:     one epoch of training through fake quantization first, then the same conversion.
void quantize_and_report(const Config& c, nn::Sequential& model, data::DataLoader& loader,
                         const std::shared_ptr<const data::Dataset>& test) {
  report_model(model, test, "float32:");
  const std::string label = c.quantize + " int8:";
  if (c.quantize == "dynamic") {
    quantization::quantize_dynamic(model.module(), {"Linear"}, /*per_channel=*/true);
    report_model(model, test, label.c_str());
    return;
  }
  if (c.quantize == "static") {
    quantization::prepare(*model, quantization::Calibration::Histogram);  // as PyTorch's x86 qconfig
    model->eval();
    NoGradGuard no_grad;
    int batches = 0;
    for (const data::Batch& b : loader) {
      model(b.data);
      if (++batches == 10) break;
    }
  } else {  // qat
    quantization::prepare_qat(*model);
    optim::Adam opt(model->parameters(), optim::AdamOptions(1e-4));
    model->train();
    for (const data::Batch& b : loader) {
      opt.zero_grad();
      nn::functional::cross_entropy(model(b.data), b.target).backward();
      opt.step();
    }
  }
  nn::Sequential int8 = quantization::convert(*model);
  report_model(int8, test, label.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  CLI::App app{"Train an MLP or a small CNN on MNIST (or the built-in synthetic digits) with ember."};
  app.option_defaults()->always_capture_default();
  app.add_option("--data", c.data_dir, "folder with the MNIST IDX files (default: synthetic digits)");
  app.add_option("--model", c.model, "mlp or cnn")->check(CLI::IsMember({"mlp", "cnn"}));
  app.add_option("--optimizer", c.optimizer, "sgd (momentum 0.9), adam, adamw or lbfgs")
      ->check(CLI::IsMember({"sgd", "adam", "adamw", "lbfgs"}));
  app.add_option("--epochs", c.epochs, "passes over the training set")->check(examples::cli::count(1, 1e6));
  app.add_option("--batch-size", c.batch_size, "examples per batch")->check(examples::cli::count(1, 1 << 24));
  app.add_option("--lr", c.lr, "learning rate (default: the optimizer's: sgd 0.05, adam/adamw 1e-3, lbfgs 1)")
      ->check(examples::cli::positive(1e6));
  app.add_option("--schedule", c.schedule, "learning-rate schedule over the epochs: none or cosine (to 0)")
      ->check(CLI::IsMember({"none", "cosine"}));
  app.add_option("--accumulate", c.accumulate, "batches per optimizer step (gradient accumulation)")
      ->check(examples::cli::count(1, 1 << 20));
  app.add_option("--workers", c.workers, "data-loader worker threads")->check(examples::cli::count(0, 256));
  app.add_option("--device", c.device, "cpu, cuda or cuda:N: where the model trains");
  app.add_option("--amp", c.amp,
                 "mixed precision: none, bf16 (autocast) or fp16 (autocast and a GradScaler for the loss scale)")
      ->check(CLI::IsMember({"none", "bf16", "fp16"}));
  app.add_flag("--pin-memory", c.pin_memory, "batches in page-locked memory, copied to the GPU asynchronously");
  app.add_flag("--augment", c.augment, "random affine jitter of the training images");
  app.add_flag("--distributed", c.distributed,
               "data parallel over the processes of `mpirun -np N`: each rank trains on its shard "
               "(--batch-size per rank) and DistributedDataParallel averages the gradients; rank 0 reports and saves");
  app.add_option("--threads", c.threads, "threads for ember's kernels")->check(examples::cli::count(1, 1024));
  app.add_option("--seed", c.seed, "seed for weights, shuffling and augmentation")
      ->check(examples::cli::count(0, 18446744073709551615.0));
  app.add_option("--train-size", c.train_size, "synthetic training examples")->check(examples::cli::count(1, 1 << 28));
  app.add_option("--test-size", c.test_size, "synthetic test examples")->check(examples::cli::count(1, 1 << 28));
  examples::cli::add_checkpoint_options(app, c.save, c.save_every, c.resume, "optimizer steps");
  app.add_option("--metrics", c.metrics, "write per-epoch metrics to this CSV file");
  app.add_option("--profile", c.profile,
                 "profile the first --profile-steps batches: a Chrome trace to this file (chrome://tracing, "
                 "Perfetto) and a table of the ops' times");
  app.add_option("--profile-steps", c.profile_steps, "batches to profile")->check(examples::cli::count(1, 1e9));
  app.add_option("--prune", c.prune,
                 "after training: prune this share of the weights, fine-tune one epoch at the starting learning rate, "
                 "report (technique 8)")
      ->check(examples::cli::range(0, 1));
  app.add_option("--prune-method", c.prune_method,
                 "l1 (smallest |w| per layer), global (one L1 threshold over all layers) or ln-structured (whole "
                 "output channels by L2 norm)")
      ->check(CLI::IsMember({"l1", "global", "ln-structured"}));
  app.add_option("--quantize", c.quantize,
                 "after training: an int8 model, compared with float32: dynamic (Linear layers), static "
                 "(calibrated, every layer int8) or qat (one epoch of quantization-aware training, then static)")
      ->check(CLI::IsMember({"dynamic", "static", "qat"}));
  app.add_option("--expect-accuracy", c.expect_accuracy, "exit with status 1 below this test accuracy (for CI)")
      ->check(examples::cli::range(0, 1));
  CLI11_PARSE(app, argc, argv);

  try {
    set_num_threads(c.threads);
    manual_seed(c.seed);
    // Data parallel: rank 0 prints, evaluates and saves; every rank trains on its own shard.
    std::shared_ptr<distributed::ProcessGroup> group;
    if (c.distributed) group = distributed::init_process_group("mpi");
    const int rank = group ? group->rank() : 0, world = group ? group->size() : 1;
    if (rank != 0 && !std::freopen("/dev/null", "w", stdout))  // the other ranks' reports would repeat rank 0's
      throw Error("train_mnist: cannot silence rank " + std::to_string(rank) + "'s output");
    std::shared_ptr<const data::Dataset> train, test;
    if (!c.data_dir.empty()) {
      train = std::make_shared<data::MNIST>(c.data_dir, true);
      test = std::make_shared<data::MNIST>(c.data_dir, false);
    } else {
      train = std::make_shared<data::SyntheticDigits>(c.train_size, c.seed * 2 + 1);
      test = std::make_shared<data::SyntheticDigits>(c.test_size, c.seed * 2 + 2);
    }
    const auto norm = data::transforms::normalize({0.1307}, {0.3081});
    auto train_tf = c.augment ? data::transforms::compose({data::transforms::random_affine(10, 0.08), norm}) : norm;
    auto train_set = data::map(train, train_tf);
    auto test_set = data::map(test, norm);

    const Device device(c.device);
    EMBER_CHECK(device.is_cpu() || cuda::is_available(), "--device ", c.device, ": no CUDA device is available");
    EMBER_CHECK(c.amp == "none" || c.optimizer != "lbfgs",
                "--amp: L-BFGS's closure does not combine with loss scaling; use sgd, adam or adamw");
    amp::GradScaler scaler(examples::scaler_options(c.amp));
    nn::Sequential model = make_model(c.model);
    model->to(device);
    nn::DistributedDataParallel ddp(nullptr);
    if (group) ddp = nn::DistributedDataParallel(model, group);  // rank 0's weights everywhere
    auto train_forward = [&](const Tensor& x) { return ddp ? ddp(x) : model(x); };
    auto opt = make_optimizer(c, model->parameters());
    const double base_lr = opt->param_groups().front().options().get_lr();
    // Stepped once per epoch; its state is in the checkpoint.
    std::unique_ptr<optim::LRScheduler> scheduler;
    if (c.schedule == "cosine") {
      for (optim::ParamGroup& g : opt->param_groups()) g.initial_lr = base_lr;
      scheduler = std::make_unique<optim::CosineAnnealingLR>(*opt, c.epochs);
    }
    std::shared_ptr<const data::Sampler> sampler;
    if (group) sampler = std::make_shared<data::DistributedSampler>(train_set->size(), world, rank, true, c.seed);
    data::DataLoader loader(train_set,
                            data::DataLoaderOptions()
                                .batch_size(c.batch_size)
                                .shuffle(sampler == nullptr)  // the DistributedSampler shuffles itself
                                .seed(c.seed)
                                .num_workers(c.workers)
                                .pin_memory(c.pin_memory),
                            sampler);
    // Note [Training checkpoints]: everything the run depends on, in one file. A resumed run
    // continues bit for bit: the loader's next batch, the random state, the epoch's running sums.
    TrainingState state{&*model, opt.get()};
    state.scaler = &scaler;
    state.scheduler = scheduler.get();
    state.loader = &loader;
    if (!c.save.empty() && rank == 0) io::check_writable(c.save, "--save");  // now, not after an epoch
    int first_epoch = 0;
    int64_t optimizer_steps = 0;
    std::optional<TrainingState> resumed;  // set when the checkpoint was saved mid-epoch
    if (!c.resume.empty()) {
      const auto meta = load_metadata(c.resume);  // the model kind first: a clearer message than missing keys
      const auto saved_model = meta.find("run/model");
      EMBER_CHECK(!is_checkpoint(meta) || (saved_model != meta.end() && saved_model->second == c.model), "--resume: '",
                  c.resume, "' is a checkpoint of --model ", saved_model == meta.end() ? "?" : saved_model->second,
                  ", not ", c.model);
      load_checkpoint(state, c.resume);
      const examples::ResumePoint at = examples::resume_point(state, loader, c.resume, c.epochs);
      if (at.finished) return 0;
      first_epoch = at.epoch;
      optimizer_steps = state.get_int("optimizer_steps", 0, std::numeric_limits<int64_t>::max());
      if (at.batch > 0) resumed = state;
      // A run resumed with another --epochs has another schedule: jump to its point (closed form).
      if (scheduler && at.epochs_changed) scheduler->step(first_epoch);
    }
    std::ofstream metrics = examples::open_metrics(
        c.metrics,
        "epoch,train_loss,train_accuracy,test_loss,test_accuracy,seconds,data_wait_seconds,amp,loss_scale,"
        "skipped_steps,peak_bytes",
        !c.resume.empty());
    std::printf("%s, %lld training examples, %s, %s, batch %lld x %d, %d worker(s), on %s%s\n",
                c.data_dir.empty() ? "synthetic digits" : "MNIST", static_cast<long long>(train->size()),
                c.model.c_str(), c.optimizer.c_str(), static_cast<long long>(c.batch_size), c.accumulate, c.workers,
                device.str().c_str(), c.amp == "none" ? "" : (", " + c.amp + " autocast").c_str());
    if (group)
      std::printf("data parallel over %d MPI ranks: %lld examples per rank per epoch, global batch %lld\n", world,
                  static_cast<long long>(sampler->size()), static_cast<long long>(c.batch_size * world));
    double accuracy = 0;
    for (int epoch = first_epoch; epoch < c.epochs; ++epoch) {
      loader.set_epoch(epoch);  // keeps a resumed mid-epoch position in this epoch
      loader.reset_stats();
      examples::Progress progress(epoch + 1, sampler ? sampler->size() : train->size());
      examples::DeviceSums sums(device, 2);  // loss × batch size, correct predictions
      double seen = 0, shown_loss = 0;
      int64_t step = 0, batches = 0;
      int64_t skipped_before = scaler.skipped_steps();
      if (resumed) {  // the epoch's counters and sums as they were at the save
        batches = loader.state_dict().batch;
        step = resumed->get_int("step", 0, batches);
        seen = static_cast<double>(resumed->get_int("seen", 0, std::numeric_limits<int64_t>::max()));
        sums.set(0, resumed->get_double("loss_sum"));
        sums.set(1, resumed->get_double("correct"));
        skipped_before -= resumed->get_int("skipped_in_epoch", 0, batches);
        resumed.reset();
      }
      // The whole training state, mid-epoch (after an optimizer step) or at the epoch's end.
      auto save_state = [&](bool mid_epoch) {
        if (c.save.empty() || rank != 0) return;
        state.values = {{"model", c.model},
                        {"epochs", std::to_string(c.epochs)},
                        {"optimizer_steps", std::to_string(optimizer_steps)}};
        if (mid_epoch) {
          sums.refresh(batches, /*always=*/true);
          state.values["loss_sum"] = examples::exact_text(sums[0]);
          state.values["correct"] = examples::exact_text(sums[1]);
          state.values["step"] = std::to_string(step);
          state.values["seen"] = std::to_string(static_cast<int64_t>(seen));
          state.values["skipped_in_epoch"] = std::to_string(scaler.skipped_steps() - skipped_before);
        }
        save_checkpoint(state, c.save);
      };
      memory::reset_peak(device);
      // One optimizer step through the loss scaler: skipped (on the device, no wait) when fp16
      // gradients overflowed.
      auto optimizer_step = [&] {
        scaler.step(*opt);
        scaler.update();
        ++optimizer_steps;
      };
      opt->zero_grad();
      // The profiler (Note [Profiler]) over the first batches of the run; each batch is a range.
      profiler::Profile profile;
      std::optional<profiler::ProfilerGuard> profiling;
      if (!c.profile.empty() && epoch == first_epoch) profiling.emplace(profile);
      for (const data::Batch& b : loader) {
        std::optional<profiler::RecordFunction> batch_range;
        if (profiling) batch_range.emplace("batch");
        // From pinned memory the copies are asynchronous (non_blocking), overlapping the GPU's work.
        const Tensor x = b.data.to(device, c.pin_memory), target = b.target.to(device, c.pin_memory);
        Tensor logits, loss;
        auto forward_backward = [&] {
          {
            const examples::AmpScope autocast(c.amp, device);  // the forward in bf16/fp16 where it pays
            logits = train_forward(x);
            loss = nn::functional::cross_entropy(logits, target);
          }
          // Gradients add up over K batches; with DDP, only the last of them is averaged over the ranks.
          const bool last_batch = batches + 1 == loader.size();
          const bool local_only = ddp && c.optimizer != "lbfgs" && (step + 1) % c.accumulate != 0 && !last_batch;
          std::optional<nn::DistributedDataParallelImpl::NoSyncGuard> no_sync;
          if (local_only) no_sync.emplace(*ddp);
          scaler.scale(loss / static_cast<double>(c.accumulate)).backward();
          return loss;
        };
        bool stepped = false;
        if (c.optimizer == "lbfgs") {
          opt->step([&] {
            opt->zero_grad();
            return forward_backward();
          });
          ++optimizer_steps;
          stepped = true;
        } else {
          forward_backward();
          if (++step % c.accumulate == 0) {
            optimizer_step();
            opt->zero_grad();
            stepped = true;
          }
        }
        const double n = static_cast<double>(target.size(0));
        sums.add(0, loss * n);
        sums.add(1, logits.argmax(1).eq(target).sum());
        seen += n;
        ++batches;
        // Mid-epoch saves only between optimizer steps, where no gradient is half accumulated.
        if (stepped && c.save_every > 0 && optimizer_steps % c.save_every == 0 && batches < loader.size())
          save_state(/*mid_epoch=*/true);
        if (sums.refresh(batches)) shown_loss = sums[0] / seen;
        progress.update(batches, static_cast<int64_t>(seen), shown_loss);
        batch_range.reset();
        if (profiling && batches == c.profile_steps) {
          profiling.reset();
          profile.export_chrome_trace(c.profile);
          std::printf("\nprofile of the first %lld batches (%s):\n%s", static_cast<long long>(batches),
                      c.profile.c_str(), profile.table("self", 15).c_str());
        }
      }
      sums.refresh(batches, /*always=*/true);
      const double loss_sum = sums[0], correct = sums[1];
      if (c.optimizer != "lbfgs" && step % c.accumulate != 0) optimizer_step();  // the last partial accumulation
      if (scheduler) scheduler->step();
      const double secs = progress.seconds();
      progress.finish();
      const int64_t skipped = scaler.skipped_steps() - skipped_before;  // one wait per epoch
      const int64_t peak = memory::stats(device).peak_bytes;
      const auto [test_loss, test_acc] = rank == 0 ? evaluate(model, test_set, device, c.amp) : std::pair(0.0, 0.0);
      accuracy = test_acc;
      std::printf("epoch %d: train loss %.4f accuracy %.4f | test loss %.4f accuracy %.4f | %.1f s, data wait %.2f s",
                  epoch + 1, loss_sum / seen, correct / seen, test_loss, test_acc, secs, loader.data_wait_seconds());
      std::printf(" | peak %.1f MiB", static_cast<double>(peak) / (1 << 20));
      if (c.amp != "none")
        std::printf(" | %s: loss scale %g, %lld skipped step(s)", c.amp.c_str(), scaler.get_scale(),
                    static_cast<long long>(skipped));
      std::printf("\n");
      save_state(/*mid_epoch=*/false);  // before the metrics row: a kill between them repeats no row
      if (metrics.is_open())
        metrics << epoch + 1 << ',' << loss_sum / seen << ',' << correct / seen << ',' << test_loss << ',' << test_acc
                << ',' << secs << ',' << loader.data_wait_seconds() << ',' << c.amp << ',' << scaler.get_scale() << ','
                << skipped << ',' << peak << '\n'
                << std::flush;
    }
    std::printf("test accuracy %.4f\n", accuracy);
    if ((c.prune > 0 || !c.quantize.empty()) && rank == 0) {
      EMBER_CHECK(device.is_cpu(), "--prune/--quantize: run on the CPU (their reports compare CPU kernels)");
      std::printf("\n");
      if (c.prune > 0) prune_and_finetune(c, model, *opt, loader, test_set);
      if (!c.quantize.empty()) quantize_and_report(c, model, loader, test_set);
      accuracy = last_report_accuracy;  // what --expect-accuracy checks: the compressed model's
    }
    if (rank == 0 && c.expect_accuracy >= 0 && accuracy < c.expect_accuracy) {
      std::fprintf(stderr, "test accuracy %.4f is below the expected %.4f\n", accuracy, c.expect_accuracy);
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_mnist: %s\n", e.what());
    return 2;
  }
  return 0;
}
