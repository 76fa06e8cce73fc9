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

DistributedSliceSampler::DistributedSliceSampler(size_t size, size_t num_replicas, size_t rank, bool allow_duplicates,
                                                 const char* name)
    : size_(static_cast<int64_t>(size)),
      replicas_(static_cast<int64_t>(num_replicas)),
      rank_(static_cast<int64_t>(rank)) {
  EMBER_CHECK(num_replicas >= 1, name, ": num_replicas must be >= 1, got ", num_replicas);
  EMBER_CHECK(rank < num_replicas, name, ": rank ", rank, " is out of range for ", num_replicas, " replicas");
  local_ = allow_duplicates ? (size_ + replicas_ - 1) / replicas_ : size_ / replicas_;
}

std::vector<int64_t> DistributedSliceSampler::slice(std::vector<int64_t> order) const {
  const size_t total = static_cast<size_t>(local_ * (rank_ + 1));
  for (size_t i = 0; order.size() < total && !order.empty(); ++i) {
    const int64_t repeat = order[i];  // a copy: push_back may reallocate
    order.push_back(repeat);
  }
  return std::vector<int64_t>(order.begin() + rank_ * local_, order.begin() + (rank_ + 1) * local_);
}

std::vector<int64_t> DistributedRandomSampler::indices(int64_t epoch) const {
  return slice(permutation(size_, mix_seed(0x6c69627472636864ULL, static_cast<uint64_t>(epoch))));
}

std::vector<int64_t> DistributedSequentialSampler::indices(int64_t) const {
  std::vector<int64_t> order(static_cast<size_t>(size_));
  std::iota(order.begin(), order.end(), int64_t{0});
  return slice(std::move(order));
}

}  // namespace samplers

Example<> detail::SizeOnly::get(int64_t) const {
  throw Error("make_data_loader: the LibTorch-style loader reads whole batches (its batch reader); get() is unused");
}

}  // namespace ember::data
