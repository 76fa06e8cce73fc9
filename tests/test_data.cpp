// The data loader: order, batching, shuffling, sharding, errors, shutdown and timing. The
// suite's name contains "Thread" so that CI runs it under ThreadSanitizer too.
#include <atomic>
#include <chrono>
#include <limits>
#include <set>
#include <thread>

#include "helpers.h"

namespace ember {
namespace {

using namespace data;

// Example i = ([i, i + 0.5], target i); optionally slow, or failing at one index.
class CountingDataset : public Dataset {
 public:
  explicit CountingDataset(int64_t n, int64_t fail_at = -1, int sleep_us = 0)
      : n_(n), fail_at_(fail_at), sleep_us_(sleep_us) {}
  int64_t size() const override { return n_; }
  Example<> get(int64_t i) const override {
    check_index(i, "CountingDataset");
    if (sleep_us_ > 0) std::this_thread::sleep_for(std::chrono::microseconds(sleep_us_));
    EMBER_CHECK(i != fail_at_, "corrupt record ", i);
    return {tensor<float>({static_cast<float>(i), static_cast<float>(i) + 0.5f}), scalar_tensor(i, kInt64)};
  }

 private:
  int64_t n_, fail_at_;
  int sleep_us_;
};

std::vector<std::vector<int64_t>> epoch_of(DataLoader& loader) {
  std::vector<std::vector<int64_t>> out;
  for (const Batch& b : loader) {
    EXPECT_EQ(b.target.to_vector<int64_t>(), b.indices);
    EXPECT_EQ(b.data.size(0), static_cast<int64_t>(b.indices.size()));
    out.push_back(b.indices);
  }
  return out;
}

TEST(LoaderThreads, OrderIsTheSamplersWhateverTheWorkers) {
  auto ds = std::make_shared<CountingDataset>(103);
  for (bool shuffle : {false, true}) {
    DataLoader serial(ds, DataLoaderOptions().batch_size(8).shuffle(shuffle).seed(7));
    const auto want = epoch_of(serial);
    ASSERT_EQ(want.size(), 13u);
    for (int workers = 1; workers <= 4; ++workers) {
      DataLoader loader(ds, DataLoaderOptions().batch_size(8).shuffle(shuffle).seed(7).num_workers(workers));
      EXPECT_EQ(epoch_of(loader), want) << workers << " workers, shuffle " << shuffle;
    }
  }
}

TEST(LoaderThreads, BatchingAndDropLast) {
  auto ds = std::make_shared<CountingDataset>(10);
  DataLoader keep(ds, DataLoaderOptions().batch_size(4));
  EXPECT_EQ(keep.size(), 3);
  const auto batches = epoch_of(keep);
  EXPECT_EQ(batches.back(), (std::vector<int64_t>{8, 9}));  // the partial last batch
  DataLoader drop(ds, DataLoaderOptions().batch_size(4).drop_last(true).num_workers(2));
  EXPECT_EQ(drop.size(), 2);
  EXPECT_EQ(epoch_of(drop).size(), 2u);
  Batch first = *DataLoader(ds, DataLoaderOptions().batch_size(3)).begin();
  EXPECT_EQ(first.data.sizes(), (Shape{3, 2}));
  EXPECT_TRUE(testing::all_close(first.data[2], tensor<float>({2.0f, 2.5f})));
}

TEST(LoaderThreads, ShuffleIsReproduciblePerSeedAndEpoch) {
  auto ds = std::make_shared<CountingDataset>(50);
  DataLoader a(ds, DataLoaderOptions().batch_size(50).shuffle(true).seed(1));
  DataLoader b(ds, DataLoaderOptions().batch_size(50).shuffle(true).seed(1).num_workers(2));
  const auto a0 = epoch_of(a), a1 = epoch_of(a);
  EXPECT_EQ(epoch_of(b), a0);
  EXPECT_EQ(epoch_of(b), a1);
  EXPECT_NE(a0, a1) << "a new permutation each epoch";
  std::vector<int64_t> sorted = a0[0];
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 50; ++i) EXPECT_EQ(sorted[static_cast<size_t>(i)], i);
  a.set_epoch(1);
  EXPECT_EQ(epoch_of(a), a1) << "set_epoch replays an epoch";
  DataLoader c(ds, DataLoaderOptions().batch_size(50).shuffle(true).seed(2));
  EXPECT_NE(epoch_of(c), a0);
}

TEST(LoaderThreads, DistributedShardsCoverTheDatasetOnce) {
  for (bool drop_last : {false, true}) {
    std::multiset<int64_t> seen;
    for (int64_t rank = 0; rank < 3; ++rank) {
      DistributedSampler s(10, 3, rank, /*shuffle=*/true, /*seed=*/5, drop_last);
      const auto idx = s.indices(/*epoch=*/2);
      EXPECT_EQ(static_cast<int64_t>(idx.size()), drop_last ? 3 : 4);
      EXPECT_EQ(s.size(), static_cast<int64_t>(idx.size()));
      seen.insert(idx.begin(), idx.end());
    }
    for (int64_t i = 0; i < 10; ++i) EXPECT_GE(seen.count(i), drop_last ? 0u : 1u) << i;
    EXPECT_EQ(seen.size(), drop_last ? 9u : 12u);  // 10 + 2 padding, or 9 after dropping one
    std::set<int64_t> distinct(seen.begin(), seen.end());
    EXPECT_EQ(distinct.size(), drop_last ? 9u : 10u);
  }
  EXPECT_NE(DistributedSampler(10, 2, 0, true, 5).indices(0), DistributedSampler(10, 2, 0, true, 5).indices(1));
  EXPECT_ERROR_CONTAINS(DistributedSampler(10, 2, 2), "rank 2 is out of range for 2 replicas");
}

// PyTorch's padding, position by position (torch.utils.data.DistributedSampler, shuffle=False):
// the list repeats from its start up to num_samples * num_replicas, rank r takes r::R.
// Bug: the padded list was built whole, so num_replicas far above n (a mistaken argument)
// grew it for minutes, and (n + R - 1) / R overflowed for R near int64's limit.
// (n + batch - 1) / batch overflowed for a batch size near int64's limit, and so did the epoch
// after set_epoch(INT64_MAX) (both UBSan, the asan preset).
TEST(LoaderThreads, BatchSizesAndEpochsNearInt64sLimit) {
  auto ds = std::make_shared<TensorDataset>(arange(0, 5).to(kFloat32));
  DataLoader loader(ds, DataLoaderOptions().batch_size(std::numeric_limits<int64_t>::max()));
  EXPECT_EQ(loader.size(), 1);
  int64_t batches = 0;
  for (const auto& batch : loader) {
    EXPECT_EQ(batch.data.size(0), 5);
    ++batches;
  }
  EXPECT_EQ(batches, 1);
  EXPECT_ERROR_CONTAINS(loader.set_epoch(std::numeric_limits<int64_t>::max()),
                        "set_epoch: the epoch must be in [0, 9223372036854775806]");
  EXPECT_ERROR_CONTAINS(loader.load_state_dict({std::numeric_limits<int64_t>::max(), 0}),
                        "is not a position of this loader");
}

TEST(LoaderThreads, DistributedPaddingIsPyTorchsWithoutBuildingThePaddedList) {
  const std::vector<std::vector<int64_t>> five_over_three = {{0, 3}, {1, 4}, {2, 0}};
  for (int64_t r = 0; r < 3; ++r)
    EXPECT_EQ(DistributedSampler(5, 3, r, false).indices(0), five_over_three[static_cast<size_t>(r)]);
  const std::vector<std::vector<int64_t>> two_over_five = {{0}, {1}, {0}, {1}, {0}};  // more ranks than samples
  for (int64_t r = 0; r < 5; ++r)
    EXPECT_EQ(DistributedSampler(2, 5, r, false).indices(0), two_over_five[static_cast<size_t>(r)]);
  EXPECT_EQ(DistributedSampler(5, 3, 2, false, 0, /*drop_last=*/true).indices(0), (std::vector<int64_t>{2}));
  const int64_t huge = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(DistributedSampler(3, huge, huge - 1, false).indices(0), (std::vector<int64_t>{(huge - 1) % 3}));
  EXPECT_EQ(DistributedSampler(3, huge, 7, false).size(), 1);
  EXPECT_TRUE(DistributedSampler(3, huge, 7, false, 0, true).indices(0).empty());
}

TEST(LoaderThreads, WorkerErrorsArriveWhenTheirBatchIsDue) {
  auto ds = std::make_shared<CountingDataset>(40, /*fail_at=*/13);
  for (int workers : {0, 2}) {
    DataLoader loader(ds, DataLoaderOptions().batch_size(5).num_workers(workers));
    int delivered = 0;
    const std::string msg = testing::error_of([&] {
      for (const Batch& b : loader) {
        (void)b;
        ++delivered;
      }
    });
    EXPECT_EQ(delivered, 2) << "batches 0 and 1 come first";
    EXPECT_NE(msg.find("sample 13"), std::string::npos) << msg;
    EXPECT_NE(msg.find("corrupt record 13"), std::string::npos) << msg;
  }
}

TEST(LoaderThreads, LeavingEarlyAndDestroyingMidEpochShutDown) {
  auto slow = std::make_shared<CountingDataset>(1000, -1, /*sleep_us=*/200);
  for (bool persistent : {false, true}) {
    DataLoader loader(slow, DataLoaderOptions().batch_size(4).num_workers(3).persistent_workers(persistent));
    for (int epoch = 0; epoch < 3; ++epoch) {
      int n = 0;
      for (const Batch& b : loader) {
        (void)b;
        if (++n == 2) break;  // leaves 200+ batches undone
      }
    }
  }
  {
    DataLoader loader(slow, DataLoaderOptions().batch_size(4).num_workers(2));
    auto it = loader.begin();
    ++it;
  }  // destroyed mid-epoch, an iterator still pointing into it: no hang, no leak (ASan/TSan)
  {
    DataLoader loader(slow, DataLoaderOptions().batch_size(4).num_workers(2));
    auto stale = loader.begin();
    auto fresh = loader.begin();  // a new epoch ends the old one
    EXPECT_ERROR_CONTAINS(++stale, "this iterator's epoch is over");
    ++fresh;
  }
}

TEST(LoaderThreads, Timeout) {
  auto slow = std::make_shared<CountingDataset>(4, -1, /*sleep_us=*/100000);
  DataLoader loader(slow, DataLoaderOptions().batch_size(2).num_workers(1).timeout(0.02));
  EXPECT_ERROR_CONTAINS(loader.begin(), "timed out after 0.02 s waiting for batch 0");
}

TEST(LoaderThreads, ManyShortEpochs) {
  auto ds = std::make_shared<CountingDataset>(23);
  for (bool persistent : {false, true}) {
    DataLoader loader(
        ds, DataLoaderOptions().batch_size(5).shuffle(true).num_workers(3).prefetch_factor(1).persistent_workers(
                persistent));
    int64_t total = 0;
    for (int epoch = 0; epoch < 100; ++epoch)
      for (const Batch& b : loader) total += b.data.size(0);
    EXPECT_EQ(total, 2300);
    EXPECT_EQ(loader.batches_delivered(), 500);
  }
}

TEST(LoaderThreads, TransformsSeededPerSampleNotPerWorker) {
  auto base = std::make_shared<CountingDataset>(30);
  auto noisy = map(base, [](Example<> e, int64_t, uint64_t seed) {
    manual_seed(0);  // must not matter: the transform uses its sample seed only
    const float jitter = static_cast<float>(seed % 1000) / 1000.0f;
    e.data = e.data + jitter;
    return e;
  });
  auto run = [&](int workers, int64_t epoch) {
    DataLoader loader(noisy, DataLoaderOptions().batch_size(7).num_workers(workers).seed(3));
    loader.set_epoch(epoch);
    std::vector<float> out;
    for (const Batch& b : loader)
      for (float v : b.data.to_vector<float>()) out.push_back(v);
    return out;
  };
  EXPECT_EQ(run(0, 0), run(3, 0));
  EXPECT_NE(run(0, 0), run(0, 1)) << "new augmentations each epoch";
}

TEST(LoaderThreads, WorkerInitWaitStatsAndOptions) {
  auto ds = std::make_shared<CountingDataset>(20, -1, /*sleep_us=*/2000);
  std::atomic<int> inits{0}, id_sum{0};
  DataLoader loader(ds, DataLoaderOptions().batch_size(5).num_workers(2).worker_init([&](int id, uint64_t) {
    ++inits;
    id_sum += id;
    EXPECT_EQ(get_num_threads(), 1) << "workers run kernels single-threaded";
  }));
  epoch_of(loader);
  EXPECT_EQ(inits.load(), 2);
  EXPECT_EQ(id_sum.load(), 1);
  EXPECT_EQ(loader.batches_delivered(), 4);
  DataLoader serial(ds, DataLoaderOptions().batch_size(5));
  epoch_of(serial);
  EXPECT_GT(serial.data_wait_seconds(), 0.02) << "20 examples x 2 ms, all waited for";
  serial.reset_stats();
  EXPECT_EQ(serial.batches_delivered(), 0);
  EXPECT_ERROR_CONTAINS(DataLoader(ds, DataLoaderOptions().batch_size(0)), "batch_size must be >= 1");
  EXPECT_ERROR_CONTAINS(DataLoader(ds, DataLoaderOptions().persistent_workers(true)), "needs num_workers > 0");
  EXPECT_ERROR_CONTAINS(DataLoader(ds, DataLoaderOptions().shuffle(true), std::make_shared<SequentialSampler>(20)),
                        "either a sampler or shuffle");
  DataLoader pinned(ds, DataLoaderOptions().batch_size(10).pin_memory(true));
  EXPECT_EQ(epoch_of(pinned).size(), 2u) << "pin_memory degrades to pageable memory without a GPU";
}

TEST(LoaderThreads, DatasetsAndSubsets) {
  auto td = std::make_shared<TensorDataset>(arange(12, kFloat32).reshape({6, 2}), arange(6, kInt64));
  EXPECT_EQ(td->size(), 6);
  EXPECT_TRUE(testing::all_close(td->get(4).data, tensor<float>({8.0f, 9.0f})));
  auto sub = std::make_shared<Subset>(td, std::vector<int64_t>{5, 0});
  EXPECT_EQ(sub->get(0).target.item<int64_t>(), 5);
  EXPECT_ERROR_CONTAINS(sub->get(2), "Subset: index 2 is out of range for 2 examples");
  EXPECT_ERROR_CONTAINS(TensorDataset(ones({3, 2}), ones({4})), "data has 3 examples");
  EXPECT_ERROR_CONTAINS(Subset(td, {6}), "index 6 is out of range");
}

}  // namespace
}  // namespace ember

#include <zlib.h>

#include <fstream>

namespace ember {
namespace {

std::vector<uint8_t> idx_bytes(uint8_t code, std::vector<uint32_t> dims, std::vector<uint8_t> payload) {
  std::vector<uint8_t> out{0, 0, code, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(d >> s));
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

std::string idx_error(const std::vector<uint8_t>& b) {
  return testing::error_of([&] { data::parse_idx(b.data(), b.size(), "bad.idx"); });
}

TEST(Idx, ParsesBigEndianData) {
  const auto u8 = idx_bytes(0x08, {2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor t = data::parse_idx(u8.data(), u8.size(), "u8");
  EXPECT_EQ(t.dtype(), kUInt8);
  EXPECT_EQ(t.sizes(), (Shape{2, 3}));
  EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  const auto i32 = idx_bytes(0x0C, {2}, {0xFF, 0xFF, 0xFF, 0xFE, 0x00, 0x00, 0x01, 0x00});
  EXPECT_EQ(data::parse_idx(i32.data(), i32.size(), "i32").to_vector<int64_t>(), (std::vector<int64_t>{-2, 256}));
  const auto f32 = idx_bytes(0x0D, {1}, {0x3F, 0xC0, 0x00, 0x00});
  EXPECT_EQ(data::parse_idx(f32.data(), f32.size(), "f32").item<float>(), 1.5f);
}

TEST(Idx, HostileFilesAreErrorsNamingTheProblem) {
  EXPECT_NE(idx_error({0, 0}).find("shorter than the 4-byte magic"), std::string::npos);
  EXPECT_NE(idx_error({1, 0, 8, 1, 0, 0, 0, 0}).find("bad magic number"), std::string::npos);
  EXPECT_NE(idx_error(idx_bytes(0x0A, {1}, {0})).find("unknown element type 0x0A"), std::string::npos);
  EXPECT_NE(idx_error(idx_bytes(0x0B, {1}, {0, 0})).find("int16"), std::string::npos);
  EXPECT_NE(idx_error({0, 0, 8, 0}).find("0 dimensions"), std::string::npos);
  EXPECT_NE(idx_error({0, 0, 8, 3, 0, 0}).find("too short for 3 dimensions"), std::string::npos);
  EXPECT_NE(idx_error(idx_bytes(0x08, {2, 3}, {1, 2, 3})).find("6 bytes) but the file holds 3"), std::string::npos);
  EXPECT_NE(idx_error(idx_bytes(0x08, {1 << 20, 1 << 20, 1 << 20}, {})).find("too large"), std::string::npos);
  EXPECT_NE(idx_error({0, 0, 8, 1}).find("'bad.idx'"), std::string::npos);
}

TEST(Idx, ReadsGzipAndPlainFilesAndRejectsCorruptGzip) {
  const auto bytes = idx_bytes(0x08, {4}, {7, 8, 9, 10});
  const std::string plain = ::testing::TempDir() + "ember_plain.idx", gz = ::testing::TempDir() + "ember_packed.idx.gz";
  std::ofstream(plain, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  gzFile f = gzopen(gz.c_str(), "wb");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
  EXPECT_EQ(data::read_idx(plain).to_vector<int64_t>(), (std::vector<int64_t>{7, 8, 9, 10}));
  EXPECT_EQ(data::read_idx(gz).to_vector<int64_t>(), (std::vector<int64_t>{7, 8, 9, 10}));
  std::ifstream in(gz, std::ios::binary);
  std::vector<char> packed((std::istreambuf_iterator<char>(in)), {});
  packed.resize(packed.size() - 6);  // cut the gzip trailer and some data
  const std::string cut = ::testing::TempDir() + "ember_cut.idx.gz";
  std::ofstream(cut, std::ios::binary).write(packed.data(), static_cast<std::streamsize>(packed.size()));
  EXPECT_FALSE(testing::error_of([&] { data::read_idx(cut); }).empty());
  EXPECT_ERROR_CONTAINS(data::read_idx(::testing::TempDir() + "missing.idx"), "cannot open");
  EXPECT_ERROR_CONTAINS(data::MNIST(::testing::TempDir(), true), "download MNIST");
}

// Real MNIST from ../shared/data (skipped where it is absent; CI has it).
TEST(Idx, MnistFromSharedData) {
  const std::string root = EMBER_SHARED_DATA_DIR "/mnist";
  if (!std::ifstream(root + "/train-labels-idx1-ubyte.gz")) GTEST_SKIP() << "no MNIST at " << root;
  data::MNIST train(root, true), test(root, false);
  EXPECT_EQ(train.size(), 60000);
  EXPECT_EQ(test.size(), 10000);
  EXPECT_EQ(train.images().sizes(), (Shape{60000, 1, 28, 28}));
  EXPECT_EQ(train.labels().narrow(0, 0, 5).to_vector<int64_t>(), (std::vector<int64_t>{5, 0, 4, 1, 9}));
  EXPECT_EQ(test.labels().narrow(0, 0, 3).to_vector<int64_t>(), (std::vector<int64_t>{7, 2, 1}));
  EXPECT_EQ(train.images().max().item<float>(), 1.0f);
  EXPECT_EQ(train.images().min().item<float>(), 0.0f);
  // Sums computed from the files with Python's gzip module: the labels, and the first image.
  EXPECT_EQ(train.labels().sum().item<int64_t>(), 267236);
  EXPECT_NEAR((train.images()[0].sum() * 255.0).item<double>(), 27525.0, 1e-2);
  data::DataLoader loader(std::make_shared<data::MNIST>(root, false),
                          data::DataLoaderOptions().batch_size(1000).num_workers(2));
  int64_t seen = 0;
  for (const data::Batch& b : loader) {
    EXPECT_EQ(b.data.sizes(), (Shape{1000, 1, 28, 28}));
    seen += b.target.size(0);
  }
  EXPECT_EQ(seen, 10000);
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

namespace T = data::transforms;

Tensor one_hot_image(int64_t h, int64_t w, int64_t row, int64_t col) {
  Tensor x = zeros({1, h, w});
  x.data_ptr<float>()[row * w + col] = 1.0f;
  return x;
}

TEST(Transforms, DeterministicCores) {
  const Tensor x = one_hot_image(3, 3, 0, 2);  // top right
  // 90 degrees counterclockwise on screen: top right goes to top left.
  EXPECT_TRUE(testing::all_close(T::affine(x, 90, 0, 0), one_hot_image(3, 3, 0, 0), 0, 1e-6));
  EXPECT_TRUE(testing::all_close(T::affine(x, -90, 0, 0), one_hot_image(3, 3, 2, 2), 0, 1e-6));
  EXPECT_TRUE(testing::all_close(T::affine(x, 0, -1, 1), one_hot_image(3, 3, 1, 1), 0, 1e-6));  // left 1, down 1
  EXPECT_TRUE(testing::all_close(T::affine(x, 0, 0.5, 0).sum(), scalar_tensor(0.5f), 0, 1e-6)) << "bilinear halves";
  EXPECT_TRUE(testing::all_close(T::horizontal_flip(x), one_hot_image(3, 3, 0, 0)));
  EXPECT_TRUE(testing::all_close(T::crop(x, 0, 0, 3, 0), x));
  EXPECT_TRUE(testing::all_close(T::crop(x, 0, 1, 3, 1), one_hot_image(3, 3, 1, 2)));  // padded, shifted
  EXPECT_ERROR_CONTAINS(T::crop(x, 2, 0, 3, 0), "does not fit a 3x3 image");
  EXPECT_ERROR_CONTAINS(T::horizontal_flip(ones({3, 3})), "expects a float32 image [C, H, W]");
}

TEST(Transforms, RandomOnesFollowTheirSeed) {
  const Tensor x = arange(2 * 6 * 6, kFloat32).reshape({2, 6, 6});
  const data::Example<> e{x, scalar_tensor(1, kInt64)};
  const auto pipeline = T::compose({T::random_crop(6, 2), T::random_horizontal_flip(), T::random_affine(15, 0.1),
                                    T::normalize({1.0, 2.0}, {2.0, 4.0})});
  const Tensor a = pipeline(e, 0, 42).data, b = pipeline(e, 0, 42).data, c = pipeline(e, 0, 43).data;
  EXPECT_EQ(a.sizes(), x.sizes());
  EXPECT_TRUE(testing::all_close(a, b, 0, 0)) << "same seed, same augmentation";
  EXPECT_FALSE(testing::all_close(a, c)) << "another seed, another augmentation";
  const Tensor n = T::normalize({1.0, 2.0}, {2.0, 4.0})(e, 0, 0).data;
  EXPECT_FLOAT_EQ(n[1][0][0].item<float>(), (36.0f - 2.0f) / 4.0f);
  int flips = 0;
  for (uint64_t s = 0; s < 1000; ++s) flips += T::uniform(s, 0) < 0.5;
  EXPECT_NEAR(flips, 500, 60);
  EXPECT_ERROR_CONTAINS(T::normalize({0.5}, {0.0}), "std must be > 0");
  EXPECT_ERROR_CONTAINS(T::normalize({0.5}, {1.0})(e, 0, 0), "1 channels of mean/std");
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

TEST(SyntheticDigits, DeterministicBalancedAndLearnable) {
  data::SyntheticDigits train(3000, /*seed=*/1), test(600, /*seed=*/2);
  const data::Example<> a = train.get(17), b = data::SyntheticDigits(3000, 1).get(17);
  EXPECT_TRUE(testing::all_close(a.data, b.data, 0, 0));
  EXPECT_EQ(a.target.item<int64_t>(), b.target.item<int64_t>());
  EXPECT_EQ(a.data.sizes(), (Shape{1, 28, 28}));
  EXPECT_GE(a.data.min().item<float>(), 0.0f);
  EXPECT_LE(a.data.max().item<float>(), 1.0f);
  // Every class appears, none dominates; and the classes are distinguishable: the nearest class
  // mean (a linear classifier without training) gets most test images right.
  Tensor sums = zeros({10, 784});
  std::vector<int64_t> counts(10);
  for (int64_t i = 0; i < train.size(); ++i) {
    const data::Example<> e = train.get(i);
    const int64_t c = e.target.item<int64_t>();
    ++counts[static_cast<size_t>(c)];
    Tensor row = sums[c];
    row.add_(e.data.reshape({784}));
  }
  for (int64_t c = 0; c < 10; ++c) {
    EXPECT_GT(counts[static_cast<size_t>(c)], 200) << "class " << c;
    EXPECT_LT(counts[static_cast<size_t>(c)], 400) << "class " << c;
    Tensor row = sums[c];
    row.div_(static_cast<double>(counts[static_cast<size_t>(c)]));
  }
  int64_t correct = 0;
  for (int64_t i = 0; i < test.size(); ++i) {
    const data::Example<> e = test.get(i);
    const Tensor distance = (sums - e.data.reshape({1, 784})).square().sum({1});
    correct += distance.argmin().item<int64_t>() == e.target.item<int64_t>();
  }
  EXPECT_GT(static_cast<double>(correct) / static_cast<double>(test.size()), 0.6) << correct << " / " << test.size();
  EXPECT_ERROR_CONTAINS(train.get(3000), "SyntheticDigits: index 3000 is out of range");
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

TEST(Csv, ParsesAndRejectsBadInput) {
  const Tensor t = data::parse_csv("a,b\n1,2.5\r\n-3,4e2\n\n", "t.csv", /*skip_header=*/true);
  EXPECT_EQ(t.sizes(), (Shape{2, 2}));
  EXPECT_EQ(t.to_vector<double>(), (std::vector<double>{1, 2.5, -3, 400}));
  EXPECT_ERROR_CONTAINS(data::parse_csv("1,2\n3\n", "t.csv"),
                        "CSV 't.csv': line 2 has 1 columns, the lines before it 2");
  EXPECT_ERROR_CONTAINS(data::parse_csv("1,x\n", "t.csv"), "line 1, column 2: 'x' is not a number");
  EXPECT_ERROR_CONTAINS(data::parse_csv("1,,2\n", "t.csv"), "column 2: '' is not a number");
  EXPECT_ERROR_CONTAINS(data::parse_csv("1e999\n", "t.csv"), "is not a number");
  // Seen while writing fuzz_csv: a NUL byte ended the cell early, so "1\0x" read as 1.
  EXPECT_ERROR_CONTAINS(data::parse_csv(std::string("1\0x,2\n", 6), "t.csv"), "column 1");
  EXPECT_EQ(data::parse_csv("1 ,\t2\t\n", "t.csv").to_vector<double>(), (std::vector<double>{1, 2}));
  EXPECT_ERROR_CONTAINS(data::parse_csv("\n\n", "t.csv"), "no data rows");
  EXPECT_ERROR_CONTAINS(data::read_csv(::testing::TempDir() + "missing.csv"), "cannot open");
}

TEST(Csv, SharedTabularSets) {
  const std::string root = EMBER_SHARED_DATA_DIR;
  if (!std::ifstream(root + "/iris/iris.csv")) GTEST_SKIP() << "no shared data at " << root;
  const Tensor iris = data::read_csv(root + "/iris/iris.csv", true);
  EXPECT_EQ(iris.sizes(), (Shape{150, 5}));
  EXPECT_EQ(iris[0].to_vector<double>(), (std::vector<double>{5.1, 3.5, 1.4, 0.2, 0}));
  const Tensor digits = data::read_csv(root + "/digits/digits.csv.gz");
  EXPECT_EQ(digits.sizes(), (Shape{1797, 65}));
  EXPECT_EQ(digits.select(1, 64).max().item<double>(), 9.0);
  EXPECT_EQ(digits.narrow(1, 0, 64).max().item<double>(), 16.0);
}

TEST(CharText, VocabularyWindowsAndEntropy) {
  const data::CharVocabulary vocab("hello world");
  EXPECT_EQ(vocab.chars(), " dehlorw");
  EXPECT_EQ(vocab.encode("low"), (std::vector<int64_t>{4, 5, 7}));
  EXPECT_EQ(vocab.decode(std::vector<int64_t>{2, 3}), "eh");
  EXPECT_ERROR_CONTAINS(vocab.encode("hex"), "character 'x' at offset 2 is not in the vocabulary of 8 characters");
  EXPECT_ERROR_CONTAINS(vocab.decode(8), "id 8 is out of range for a vocabulary of 8 characters");

  // 11 characters, windows of 4 and their shifted targets: starts 0 and 4 (8 would need 13).
  const data::CharTextDataset text("hello world", data::CharTextOptions{4, 0});
  EXPECT_EQ(text.size(), 2);
  const data::Example<> second = text.get(1);
  EXPECT_EQ(vocab.decode(second.data.to_vector<int64_t>()), "o wo");
  EXPECT_EQ(vocab.decode(second.target.to_vector<int64_t>()), " wor");
  EXPECT_EQ(second.data.dtype(), kInt64);
  EXPECT_ERROR_CONTAINS(text.get(2), "index 2");
  const data::CharTextDataset overlapping("hello world", data::CharTextOptions{4, 1});
  EXPECT_EQ(overlapping.size(), 7);  // starts 0..6; the last target ends at the last character
  EXPECT_EQ(vocab.decode(overlapping.get(6).target.to_vector<int64_t>()), "orld");
  // "aab": -(2/3 ln 2/3 + 1/3 ln 1/3)
  EXPECT_NEAR(data::CharTextDataset("aab", data::CharTextOptions{1, 0}).unigram_entropy(), 0.6365141682948128, 1e-15);

  EXPECT_ERROR_CONTAINS(data::CharTextDataset("abc", data::CharTextOptions{3, 0}),
                        "a text of 3 characters is too short for seq_len 3");
  EXPECT_ERROR_CONTAINS(data::CharTextDataset("abc", data::CharTextOptions{0, 0}), "seq_len must be positive");
  EXPECT_ERROR_CONTAINS(data::CharTextDataset::from_file(::testing::TempDir() + "missing.txt"), "cannot open");
  // A test split encoded with the training split's vocabulary; a character it lacks is an error.
  EXPECT_EQ(data::CharTextDataset("dell", data::CharTextOptions{2, 0}, &vocab).tokens().to_vector<int64_t>(),
            (std::vector<int64_t>{1, 2, 4, 4}));
  EXPECT_ERROR_CONTAINS(data::CharTextDataset("zzz", data::CharTextOptions{2, 0}, &vocab), "'z'");

  const data::CharTextDataset sonnets(data::embedded_sonnets());
  EXPECT_GT(sonnets.size(), 60);
  EXPECT_GT(sonnets.unigram_entropy(), 2.5);  // English letters: about 3 nats
}

// Tiny Shakespeare's known statistics (nanoGPT's shakespeare_char: 65 characters, 1115394 of them).
TEST(CharText, TinyShakespeareFromSharedData) {
  const std::string path = EMBER_SHARED_DATA_DIR "/tinyshakespeare/input.txt";
  if (!std::ifstream(path)) GTEST_SKIP() << "no tiny Shakespeare at " << path;
  const auto text = data::CharTextDataset::from_file(path, data::CharTextOptions{256, 0});
  EXPECT_EQ(text.vocabulary().size(), 65);
  EXPECT_EQ(text.tokens().numel(), 1115394);
  EXPECT_EQ(text.size(), (1115394 - 1 - 256) / 256 + 1);
  EXPECT_EQ(text.vocabulary().decode(text.get(0).data.narrow(0, 0, 10).to_vector<int64_t>()), "First Citi");
  EXPECT_NEAR(text.unigram_entropy(), 3.312795245360308, 1e-12);  // Python: collections.Counter over the bytes
}

}  // namespace
}  // namespace ember
