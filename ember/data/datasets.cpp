// LibTorch's data API over ember's (Note [LibTorch's data API] in datasets.h): MNIST as a value
// dataset, the samplers with LibTorch's names.
#include "ember/data/datasets.h"

#include <numeric>

#include "ember/tensor/generator.h"

namespace ember::data {

namespace datasets {

MNIST::MNIST(const std::string& root, Mode mode) : train_(mode == Mode::kTrain) {
  const data::MNIST files(root, train_);
  images_ = files.images();
  targets_ = files.labels();
}

Example<> MNIST::get(size_t index) {
  EMBER_CHECK(index < static_cast<size_t>(images_.size(0)), "MNIST: index ", index, " is out of range for ",
              images_.size(0), " images");
  const auto i = static_cast<int64_t>(index);
  return Example<>(images_[i], targets_[i]);
}

std::optional<size_t> MNIST::size() const { return static_cast<size_t>(images_.size(0)); }

}  // namespace datasets

namespace samplers {

namespace {
uint64_t draw_seed() {  // 64 bits from ember's default generator
  const auto [seed, block] = default_generator().reserve(1);
  const auto words = philox4x32(seed, block);
  return (static_cast<uint64_t>(words[0]) << 32) | words[1];
}
}  // namespace

RandomSampler::RandomSampler(int64_t size, DType index_dtype) : data::RandomSampler(size, draw_seed()) {
  EMBER_CHECK(index_dtype == kInt64 || index_dtype == kInt32, "RandomSampler: indices are int64 or int32, got ",
              index_dtype);
}

namespace {
void check_replicas(size_t num_replicas, size_t rank, const char* sampler) {
  EMBER_CHECK(num_replicas >= 1, sampler, ": num_replicas must be >= 1, got ", num_replicas);
  EMBER_CHECK(rank < num_replicas, sampler, ": rank ", rank, " is out of range for ", num_replicas, " replicas");
}
int64_t local_count(int64_t size, int64_t replicas, bool allow_duplicates) {
  return allow_duplicates ? (size + replicas - 1) / replicas : size / replicas;
}
// Rank's slice of `all`, padded from its start when it is too short (allow_duplicates).
std::vector<int64_t> slice_of(std::vector<int64_t> all, int64_t rank, int64_t local) {
  const size_t total = static_cast<size_t>(local * (rank + 1));
  for (size_t i = 0; all.size() < total && !all.empty(); ++i) {
    const int64_t repeat = all[i];  // a copy: push_back may reallocate
    all.push_back(repeat);
  }
  return std::vector<int64_t>(all.begin() + rank * local, all.begin() + (rank + 1) * local);
}
}  // namespace

DistributedRandomSampler::DistributedRandomSampler(size_t size, size_t num_replicas, size_t rank, bool allow_duplicates)
    : size_(static_cast<int64_t>(size)),
      replicas_(static_cast<int64_t>(num_replicas)),
      rank_(static_cast<int64_t>(rank)) {
  check_replicas(num_replicas, rank, "DistributedRandomSampler");
  local_ = local_count(size_, replicas_, allow_duplicates);
}

// Every rank draws the same permutation for an epoch (its seed is the epoch, as LibTorch's
// set_epoch seeds its shuffle), so the slices never overlap.
std::vector<int64_t> DistributedRandomSampler::indices(int64_t epoch) const {
  return slice_of(permutation(size_, mix_seed(0x6c69627472636864ULL, static_cast<uint64_t>(epoch))), rank_, local_);
}

DistributedSequentialSampler::DistributedSequentialSampler(size_t size, size_t num_replicas, size_t rank,
                                                           bool allow_duplicates)
    : size_(static_cast<int64_t>(size)),
      replicas_(static_cast<int64_t>(num_replicas)),
      rank_(static_cast<int64_t>(rank)) {
  check_replicas(num_replicas, rank, "DistributedSequentialSampler");
  local_ = local_count(size_, replicas_, allow_duplicates);
}

std::vector<int64_t> DistributedSequentialSampler::indices(int64_t) const {
  std::vector<int64_t> all(static_cast<size_t>(size_));
  std::iota(all.begin(), all.end(), int64_t{0});
  return slice_of(std::move(all), rank_, local_);
}

}  // namespace samplers

Example<> detail::SizeOnly::get(int64_t) const {
  throw Error("make_data_loader: the LibTorch-style loader reads whole batches (its batch reader); get() is unused");
}

}  // namespace ember::data
