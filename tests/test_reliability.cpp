// Nothing lost, nothing silent: training checkpoints as one consistent unit, exact resume
// mid-epoch, validated metadata, durable writes that fail cleanly, loader workers that throw
// anything, and files that are not regular files. Each test names the failure it guards.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>

#include "helpers.h"

namespace ember {
namespace {

std::string temp_path(const std::string& name) { return std::string(::testing::TempDir()) + "ember_rel_" + name; }

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// A small run with every kind of state: dropout (the generator), AdamW moments, a StepLR
// schedule, a shuffled loader with workers. Built afresh for each leg of a test.
struct TrainingRun {
  nn::Sequential model;
  std::unique_ptr<optim::AdamW> opt;
  std::unique_ptr<optim::StepLR> sched;
  std::unique_ptr<data::DataLoader> loader;
  TrainingState state;
  int64_t steps = 0;  // optimizer steps so far

  TrainingRun(int workers, uint64_t init_seed) {
    manual_seed(init_seed);
    model = nn::Sequential(nn::Linear(6, 16), nn::ReLU(), nn::Dropout(0.3), nn::Linear(16, 3));
    opt = std::make_unique<optim::AdamW>(model->parameters(), optim::AdamWOptions(1e-2));
    sched = std::make_unique<optim::StepLR>(*opt, 5, 0.5);
    manual_seed(7);  // the data: the same in every leg
    auto ds = std::make_shared<data::TensorDataset>(randn({60, 6}), randint(0, 3, {60}));
    loader = std::make_unique<data::DataLoader>(
        ds, data::DataLoaderOptions().batch_size(8).shuffle(true).seed(11).num_workers(workers));
    manual_seed(init_seed + 100);  // dropout draws from here on
    state = TrainingState{&*model, opt.get()};
    state.scheduler = sched.get();
    state.loader = loader.get();
  }

  // Trains to the end of `epochs`, from wherever the loader stands; stops early (returning
  // false) after optimizer step `stop_at`.
  bool train(int64_t epochs, int64_t stop_at = -1) {
    for (int64_t epoch = loader->state_dict().epoch; epoch < epochs; ++epoch) {
      loader->set_epoch(epoch);
      for (const data::Batch& b : *loader) {
        opt->zero_grad();
        nn::functional::cross_entropy(model(b.data), b.target).backward();
        opt->step();
        if (++steps % 4 == 0) sched->step();
        if (steps == stop_at) return false;
      }
    }
    return true;
  }

  std::vector<Tensor> weights() const {
    std::vector<Tensor> out;
    for (const Tensor& p : model->parameters()) out.push_back(p.detach().clone());
    return out;
  }
};

// Bit for bit: the same bytes, not merely close values.
bool identical(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && a.dtype() == b.dtype() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.nbytes()) == 0;
}

void expect_identical(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(identical(a[i], b[i])) << "parameter " << i << " differs";
}

class ExactResume : public ::testing::TestWithParam<int> {};

// Killed after any step and resumed from that step's checkpoint, a run ends with the very
// weights of one never stopped: same batches, dropout masks, moments and lrs (0 and 2 workers).
TEST_P(ExactResume, MidEpochCheckpointContinuesBitForBit) {
  const int workers = GetParam();
  TrainingRun uninterrupted(workers, 1);
  ASSERT_TRUE(uninterrupted.train(3));
  const std::vector<Tensor> expected = uninterrupted.weights();
  const std::string path = temp_path("resume_" + std::to_string(workers) + ".ckpt");
  for (int64_t stop : {1, 7, 8, 12, 19}) {  // mid-epoch, at an epoch's end (8 batches), at a schedule step
    {
      TrainingRun first(workers, 1);
      ASSERT_FALSE(first.train(3, stop));
      first.state.values["steps"] = std::to_string(first.steps);
      save_checkpoint(first.state, path);
      // The run goes on drawing numbers after the save; the checkpoint must not depend on it.
      (void)rand({100});
    }
    TrainingRun second(workers, 99);  // other initial weights and generator: the checkpoint must set all
    load_checkpoint(second.state, path);
    second.steps = second.state.get_int("steps", 0, 1000);
    EXPECT_EQ(second.steps, stop);
    ASSERT_TRUE(second.train(3));
    expect_identical(second.weights(), expected);
  }
  std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(Workers, ExactResume, ::testing::Values(0, 2));

TEST(DataLoaderState, ResumesWithTheNextBatchInTheSamplersOrder) {
  auto ds = std::make_shared<data::TensorDataset>(arange(0, 10, kFloat32).unsqueeze(1), arange(0, 10, kInt64));
  for (int workers : {0, 3}) {
    data::DataLoader loader(ds, data::DataLoaderOptions().batch_size(3).shuffle(true).seed(5).num_workers(workers));
    loader.set_epoch(2);
    std::vector<std::vector<int64_t>> all;
    for (const data::Batch& b : loader) all.push_back(b.indices);
    ASSERT_EQ(all.size(), 4u);
    EXPECT_EQ(loader.state_dict().epoch, 3);  // after the last batch: the next epoch's start
    EXPECT_EQ(loader.state_dict().batch, 0);

    loader.set_epoch(2);
    auto it = loader.begin();
    ++it;  // two batches delivered
    EXPECT_EQ(loader.state_dict().epoch, 2);
    EXPECT_EQ(loader.state_dict().batch, 2);
    const data::DataLoaderState saved = loader.state_dict();

    data::DataLoader other(ds, data::DataLoaderOptions().batch_size(3).shuffle(true).seed(5).num_workers(workers));
    other.load_state_dict(saved);
    other.set_epoch(2);  // the same epoch keeps the position
    std::vector<std::vector<int64_t>> rest;
    for (const data::Batch& b : other) rest.push_back(b.indices);
    EXPECT_EQ(rest, std::vector<std::vector<int64_t>>(all.begin() + 2, all.end())) << workers << " workers";
    other.load_state_dict({2, 4});               // the epoch's end: an empty pass
    EXPECT_FALSE(other.begin() != other.end());  // in either order of evaluation
    other.load_state_dict({2, 1});
    other.set_epoch(0);  // another epoch starts from its first batch
    EXPECT_EQ(other.begin()->indices.size(), 3u);
    EXPECT_EQ(other.state_dict().batch, 1);
  }
  data::DataLoader loader(ds, data::DataLoaderOptions().batch_size(3));
  EXPECT_ERROR_CONTAINS(loader.load_state_dict({0, 5}), "not a position of this loader");
  EXPECT_ERROR_CONTAINS(loader.load_state_dict({-1, 0}), "not a position of this loader");
  EXPECT_ERROR_CONTAINS(loader.set_epoch(-3), "the epoch must be in [0, ");
}

// --- the checkpoint is one unit, and what is not a whole checkpoint is refused ---

struct Tiny {
  nn::Linear model{nn::Linear(3, 2)};
  optim::SGD opt{model->parameters(), optim::SGDOptions(0.1).momentum(0.9)};
  TrainingState state{&*model, &opt};
  void step() {
    opt.zero_grad();
    model(ones({4, 3})).sum().backward();
    opt.step();
  }
};

TEST(TrainingCheckpoint, AModelFileOrAnOldTwoFilePairIsRefused) {
  Tiny t;
  const std::string model_only = temp_path("model_only.safetensors");
  save(t.model, model_only);  // what older ember versions wrote beside a separate .optim file
  EXPECT_ERROR_CONTAINS(load_checkpoint(t.state, model_only), "is not an ember training checkpoint");
  // The weights of a checkpoint load as a model file does.
  const std::string ckpt = temp_path("unit.ckpt");
  t.step();
  save_checkpoint(t.state, ckpt);
  nn::Linear other(3, 2);
  load(other, ckpt);
  EXPECT_TRUE(identical(other->weight, t.model->weight));
  std::remove(model_only.c_str());
  std::remove(ckpt.c_str());
}

// Rewrites one metadata value of a checkpoint (the JSON header stays valid; the CRC covers data only).
void set_metadata(const std::string& path, const std::string& key, const std::string& value) {
  io::SafetensorsContents c = io::read_safetensors(path);
  c.metadata[key] = value;
  io::write_safetensors(path, c.tensors, c.metadata);
}

TEST(TrainingCheckpoint, MetadataIsValidatedNeverDefaulted) {
  Tiny t;
  t.step();
  data::DataLoader loader(std::make_shared<data::TensorDataset>(zeros({10, 3})),
                          data::DataLoaderOptions().batch_size(4));
  t.state.loader = &loader;
  t.state.values["epoch"] = "3";
  const std::string path = temp_path("meta.ckpt");
  save_checkpoint(t.state, path);
  const auto bytes = read_bytes(path);
  struct Case {
    const char *key, *value, *error;
  };
  for (const Case& c : {Case{"loader/epoch", "abc", "non-integer loader/epoch: 'abc'"},
                        Case{"loader/epoch", "-1", "not a position of this loader"},
                        Case{"loader/epoch", "99999999999999999999", "out-of-range loader/epoch"},
                        Case{"loader/batch", "4", "not a position of this loader (3 batches per epoch"},
                        Case{"loader/batch", "1.5", "non-integer loader/batch"},
                        Case{"generator/offset", "", "non-integer generator/offset"},
                        Case{"generator/ranks", "7", "generator/ranks = '7', not a list of seed:offset"},
                        Case{"generator/ranks", "7:1,8:", "non-integer generator/ranks: ''"},
                        Case{"ember.checkpoint", "2", "checkpoint format 2; this ember reads format 1 (a newer"},
                        Case{"ember.checkpoint", "x", "non-integer ember.checkpoint"},
                        Case{"optimizer/param_groups", "[{", "param_groups is not valid JSON"},
                        Case{"optimizer/state.0.step", "-2", "'state.0.step' is not a non-negative integer"}}) {
    write_bytes(path, bytes);
    set_metadata(path, c.key, c.value);
    Tiny fresh;
    fresh.state.loader = &loader;
    SCOPED_TRACE(std::string(c.key) + " = '" + c.value + "'");
    EXPECT_ERROR_CONTAINS(load_checkpoint(fresh.state, path), c.error);
  }
  // The program's own values: missing, non-numeric, negative or beyond the run are errors.
  write_bytes(path, bytes);
  Tiny fresh;
  fresh.state.loader = &loader;
  load_checkpoint(fresh.state, path);
  EXPECT_EQ(fresh.state.get_int("epoch", 0, 10), 3);
  EXPECT_ERROR_CONTAINS(fresh.state.get_int("epoch", 0, 2), "epoch = 3, outside [0, 2] for this run");
  EXPECT_ERROR_CONTAINS(fresh.state.get_int("step", 0, 2), "has no value 'step'");
  fresh.state.values["loss"] = "nan";
  EXPECT_ERROR_CONTAINS(fresh.state.get_double("loss"), "non-finite loss");
  fresh.state.values["loss"] = "1e400";
  EXPECT_ERROR_CONTAINS(fresh.state.get_double("loss"), "non-finite loss");
  fresh.state.values["loss"] = "0.5x";
  EXPECT_ERROR_CONTAINS(fresh.state.get_double("loss"), "non-numeric loss");
  // A run that needs a loader position or a schedule refuses a checkpoint without it.
  Tiny bare;
  save_checkpoint(bare.state, path);
  Tiny needs;
  needs.state.loader = &loader;
  EXPECT_ERROR_CONTAINS(load_checkpoint(needs.state, path), "holds no data-loader position");
  optim::StepLR sched(needs.opt, 2);
  needs.state.loader = nullptr;
  needs.state.scheduler = &sched;
  EXPECT_ERROR_CONTAINS(load_checkpoint(needs.state, path), "no LR scheduler state");
  std::remove(path.c_str());
}

TEST(TrainingCheckpoint, DamagedOrTruncatedDataIsDetected) {
  Tiny t;
  t.step();
  const std::string path = temp_path("damaged.ckpt");
  save_checkpoint(t.state, path);
  auto bytes = read_bytes(path);
  bytes[bytes.size() - 3] ^= 0x40;  // a bit flipped inside the tensor data
  write_bytes(path, bytes);
  EXPECT_ERROR_CONTAINS(load_checkpoint(t.state, path), "is damaged: the CRC-32");
  bytes[bytes.size() - 3] ^= 0x40;
  bytes.resize(bytes.size() - 5);  // cut short, as a copy interrupted by a full disk
  write_bytes(path, bytes);
  EXPECT_ERROR_CONTAINS(load_checkpoint(t.state, path), path);
  write_bytes(path, {});
  EXPECT_ERROR_CONTAINS(load_checkpoint(t.state, path), path);
  std::remove(path.c_str());
}

// A save that cannot complete leaves the previous checkpoint whole and no temporary file behind.
TEST(DurableWrites, AFailedSaveLeavesThePreviousCheckpoint) {
  Tiny t;
  const std::string path = temp_path("durable.ckpt");
  save_checkpoint(t.state, path);
  const auto before = read_bytes(path);
  t.step();
  // The temporary file cannot be created: its name is taken by a folder.
  std::filesystem::create_directory(path + ".tmp");
  EXPECT_ERROR_CONTAINS(save_checkpoint(t.state, path), "cannot open '" + path + ".tmp' for writing");
  EXPECT_EQ(read_bytes(path), before);
  std::filesystem::remove(path + ".tmp");
  // The disk is full (/dev/full): the write fails, the temporary file is removed.
  const std::string full = temp_path("full.ckpt");
  std::filesystem::remove(full + ".tmp");
  ASSERT_EQ(::symlink("/dev/full", (full + ".tmp").c_str()), 0);
  save_checkpoint(t.state, path);  // a successful save replaces the file
  EXPECT_NE(read_bytes(path), before);
  // write_file_atomically opens path.tmp with O_TRUNC: through the link, /dev/full refuses the bytes.
  EXPECT_ERROR_CONTAINS(io::write_file_atomically(full, {{before.data(), before.size()}}, "test"),
                        "writing '" + full + ".tmp' failed: No space left on device");
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::symlink_status(full + ".tmp")));
  EXPECT_FALSE(std::filesystem::exists(full));
  std::remove(path.c_str());
}

TEST(DurableWrites, DestinationIsCheckedBeforeTheRun) {
  io::check_writable(temp_path("writable.ckpt"), "--save");
  EXPECT_FALSE(std::filesystem::exists(temp_path("writable.ckpt.tmp")));
  EXPECT_ERROR_CONTAINS(io::check_writable("/nonexistent-folder/x.ckpt", "--save"),
                        "the folder '/nonexistent-folder' of '/nonexistent-folder/x.ckpt' does not exist");
  EXPECT_ERROR_CONTAINS(io::check_writable(::testing::TempDir(), "--save"), "is a directory; give a file name");
  EXPECT_ERROR_CONTAINS(io::check_writable("/proc/x.ckpt", "--save"), "--save: cannot write '/proc/x.ckpt'");
}

// --- files that are not regular files ---

TEST(NotRegularFiles, DirectoriesAndFifosAreRefusedByName) {
  const std::string dir = temp_path("a_folder");
  std::filesystem::create_directories(dir);
  const std::string fifo = temp_path("a_fifo");
  std::filesystem::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Reading a FIFO would block until a writer came, and a directory sizes as 2^63 bytes.
  EXPECT_ERROR_CONTAINS(io::read_safetensors(dir), "is a directory");
  EXPECT_ERROR_CONTAINS(io::read_safetensors(fifo), "is not a regular file");
  Tiny t;
  EXPECT_ERROR_CONTAINS(load_checkpoint(t.state, dir), "is a directory");
  EXPECT_ERROR_CONTAINS(load(t.model, fifo), "is not a regular file");
  EXPECT_ERROR_CONTAINS(data::read_idx(dir), "IDX: '" + dir + "' is a directory");
  EXPECT_ERROR_CONTAINS(data::read_idx(fifo), "not a regular file");
  EXPECT_ERROR_CONTAINS(data::CharTextDataset::from_file(fifo, {8, 8}), "not a regular file");
  EXPECT_ERROR_CONTAINS(data::read_idx(temp_path("missing")), "No such file or directory");
  std::filesystem::remove(fifo);
  std::filesystem::remove(dir);
}

// --- loader workers that throw anything ---

class ThrowsAnything : public data::Dataset {
 public:
  explicit ThrowsAnything(int kind) : kind_(kind) {}
  int64_t size() const override { return 8; }
  data::Example<> get(int64_t index) const override {
    if (index == 5) {
      if (kind_ == 0) throw 42;
      if (kind_ == 1) throw std::string("a string");
      throw "a C string";
    }
    return {full({2}, static_cast<double>(index)), Tensor()};
  }

 private:
  int kind_;
};

TEST(LoaderWorkers, AnExceptionOfAnyTypeReachesTheLoopAsAnError) {
  for (int kind : {0, 1, 2})
    for (int workers : {0, 2}) {
      data::DataLoader loader(std::make_shared<ThrowsAnything>(kind),
                              data::DataLoaderOptions().batch_size(4).num_workers(workers));
      const std::string error = testing::error_of([&] {
        for (const data::Batch& b : loader) (void)b;
      });
      EXPECT_NE(error.find("sample 5 (batch 1)"), std::string::npos) << error;
      const char* what[] = {"not a std::exception", "std::string: a string", "const char*: a C string"};
      EXPECT_NE(error.find(what[kind]), std::string::npos) << error;
    }
  data::DataLoader init(std::make_shared<ThrowsAnything>(0),
                        data::DataLoaderOptions().num_workers(1).worker_init([](int, uint64_t) { throw 7; }));
  EXPECT_ERROR_CONTAINS(init.begin(), "worker_init of worker 0 failed: an exception that is not a std::exception");
}

// --- in-place ops on overlapping memory (Note [Memory overlap]) ---

TEST(InPlaceOverlap, AWrittenToTensorWithInternalOverlapIsRefused) {
  Tensor row = zeros({3});
  Tensor expanded = row.expand({2, 3});  // both rows are the same three floats
  EXPECT_ERROR_CONTAINS(expanded.add_(ones({2, 3})), "add_: more than one element of the written-to tensor");
  EXPECT_ERROR_CONTAINS(expanded.mul_(2.0), "mul_: more than one element");
  EXPECT_ERROR_CONTAINS(expanded.copy_(ones({2, 3})), "copy_: more than one element");
  EXPECT_ERROR_CONTAINS(expanded += 1.0, "add_: more than one element");
  expanded.fill_(4.0);  // one value for every element: well defined, allowed as in PyTorch
  EXPECT_EQ(row.to_vector<float>(), std::vector<float>({4, 4, 4}));
  EXPECT_EQ(internal_overlap(row.expand({1, 3})), MemOverlap::No);  // a size-1 stride-0 dim is no overlap
}

TEST(InPlaceOverlap, AnInputThatPartlyOverlapsTheDestinationIsRefused) {
  Tensor a = arange(0, 10, kFloat32);
  // x[1:6] += x[0:5] would read elements that the kernel has already overwritten.
  Tensor dst = a.narrow(0, 1, 5);
  EXPECT_ERROR_CONTAINS(dst.add_(a.narrow(0, 0, 5)), "add_: some elements of the input (shape [5]) and the written-to");
  EXPECT_ERROR_CONTAINS(dst.copy_(a.narrow(0, 2, 5)), "copy_: some elements of the input");
  Tensor m = arange(0, 9, kFloat32).reshape({3, 3});
  EXPECT_ERROR_CONTAINS(m.copy_(m.t()), "copy_: some elements");  // the same bytes in another order
  EXPECT_ERROR_CONTAINS(m.sub_(m[0]), "sub_: some elements");     // a row of m broadcast over m
  Tensor counts = zeros({6});
  EXPECT_ERROR_CONTAINS(counts.narrow(0, 0, 4).scatter_add_(0, tensor({0, 1}, kInt64), counts.narrow(0, 1, 2)),
                        "scatter_add_: some elements");
  EXPECT_EQ(a.to_vector<float>(), arange(0, 10, kFloat32).to_vector<float>());  // nothing was written
}

TEST(InPlaceOverlap, TheSameViewAndDisjointViewsStayAllowed) {
  Tensor a = arange(0, 6, kFloat32);
  a.add_(a);  // each element is read before it is written
  EXPECT_EQ(a.to_vector<float>(), std::vector<float>({0, 2, 4, 6, 8, 10}));
  a.mul_(a.view({6}));  // another handle of the very same view
  EXPECT_EQ(a.to_vector<float>(), std::vector<float>({0, 4, 16, 36, 64, 100}));
  a.copy_(a);
  Tensor first = a.narrow(0, 0, 3);
  first.sub_(a.narrow(0, 3, 3));  // the same storage, disjoint halves
  EXPECT_EQ(a.to_vector<float>(), std::vector<float>({-36, -60, -84, 36, 64, 100}));
  Tensor grid = zeros({4, 4});
  Tensor col0 = grid.select(1, 0);
  col0.add_(grid.select(1, 1));  // strided views: too costly to decide, let through as in PyTorch
  EXPECT_EQ(overlap(col0, grid.select(1, 1)), MemOverlap::TooHard);
  EXPECT_EQ(overlap(a, zeros({6})), MemOverlap::No);
}

// --- concurrent backward into shared parameters ---

// Threads running backward through the same leaves: every addition into .grad lands (it was a
// plain read-modify-write, losing some of them). Runs under TSan in CI.
TEST(ConcurrentBackward, ThreadsAccumulateIntoSharedLeavesWithoutLosingAnything) {
  Tensor w = zeros({64}, TensorOptions().requires_grad(true));
  Tensor b = zeros({}, TensorOptions().requires_grad(true));
  constexpr int kThreads = 4, kRounds = 200;
  std::vector<std::thread> threads;
  std::atomic<bool> failed{false};
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      try {
        const Tensor x = full({64}, static_cast<double>(t + 1));
        for (int r = 0; r < kRounds; ++r) ((w * x).sum() + b).backward();  // d/dw = x, d/db = 1
      } catch (...) {
        failed = true;
      }
    });
  for (auto& th : threads) th.join();
  ASSERT_FALSE(failed);
  // Integers in float: the sums are exact whatever the order, so any lost addition shows.
  EXPECT_EQ(w.grad().to_vector<float>(), std::vector<float>(64, kRounds * (1 + 2 + 3 + 4)));
  EXPECT_EQ(b.grad().item<float>(), kThreads * kRounds);
}

// --- zero-sized dimensions, as PyTorch accepts them ---

TEST(ZeroSized, LinearWithNoInputsOrNoOutputsOrAnEmptyBatch) {
  nn::Linear no_inputs(0, 4);  // PyTorch: the output is the bias, broadcast over the batch
  const Tensor y = no_inputs(zeros({3, 0}));
  ASSERT_EQ(y.sizes(), Shape({3, 4}));
  EXPECT_TRUE(identical(y, no_inputs->bias.detach().expand({3, 4}).contiguous()));
  y.sum().backward();
  EXPECT_EQ(no_inputs->weight.grad().sizes(), Shape({4, 0}));
  EXPECT_EQ(no_inputs->bias.grad().to_vector<float>(), std::vector<float>(4, 3.0f));

  nn::Linear no_outputs(4, 0);
  Tensor x = randn({2, 5, 4}, TensorOptions().requires_grad(true));
  const Tensor z = no_outputs(x);
  EXPECT_EQ(z.sizes(), Shape({2, 5, 0}));
  z.sum().backward();
  EXPECT_TRUE(identical(x.grad(), zeros({2, 5, 4})));

  nn::Linear layer(4, 2);
  const Tensor empty_batch = layer(zeros({0, 4}));
  EXPECT_EQ(empty_batch.sizes(), Shape({0, 2}));
  empty_batch.sum().backward();
  EXPECT_TRUE(identical(layer->weight.grad(), zeros({2, 4})));
  EXPECT_EQ(matmul(ones({2, 3, 0}), ones({0, 5})).sizes(), Shape({2, 3, 5}));
  EXPECT_EQ(matmul(ones({2, 3, 0}), ones({2, 0, 5})).abs().sum().item<float>(), 0.0f);
}

TEST(ZeroSized, AmbiguousShapesAndEmptyReductionsSaySo) {
  // PyTorch refuses these too; the message says why rather than "invalid for input of size 0".
  EXPECT_ERROR_CONTAINS(zeros({3, 0}).reshape({-1, 0}),
                        "the unspecified dimension -1 can be any value and is ambiguous");
  EXPECT_ERROR_CONTAINS(zeros({0}).max(), "numel() == 0");
  EXPECT_TRUE(std::isnan(zeros({0}).mean().item<float>()));  // 0/0, as PyTorch
  data::DataLoader loader(std::make_shared<data::TensorDataset>(zeros({0, 3})),
                          data::DataLoaderOptions().batch_size(4));
  EXPECT_EQ(loader.size(), 0);
  EXPECT_FALSE(loader.begin() != loader.end());
}

}  // namespace
}  // namespace ember
