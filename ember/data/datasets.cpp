// LibTorch's data API over ember's (Note [LibTorch's data API] in datasets.h): MNIST as a value
// dataset, the samplers with LibTorch's names.
#include "ember/data/datasets.h"

#include <limits>
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

TensorDataset::TensorDataset(const std::vector<Tensor>& tensors) {
  EMBER_CHECK(!tensors.empty(), "TensorDataset: no tensors to stack");
  tensor = stack(tensors);
}

TensorDataset::TensorDataset(Tensor t) : tensor(std::move(t)) {
  EMBER_CHECK(tensor.defined() && tensor.dim() >= 1,
              "TensorDataset: expected a tensor of at least one dim (the "
              "examples), got ",
              tensor.defined() ? shape_str(tensor.sizes()) : "an undefined tensor");
}

TensorExample TensorDataset::get(size_t index) {
  EMBER_CHECK(index < static_cast<size_t>(tensor.size(0)), "TensorDataset: index ", index, " is out of range for ",
              tensor.size(0), " examples of ", shape_str(tensor.sizes()));
  return TensorExample(tensor[static_cast<int64_t>(index)]);
}

std::optional<size_t> TensorDataset::size() const { return static_cast<size_t>(tensor.size(0)); }

}  // namespace datasets

namespace transforms {

TensorExample Stack<TensorExample>::apply_batch(std::vector<TensorExample> examples) {
  EMBER_CHECK(!examples.empty(), "Stack<TensorExample>: an empty batch");
  std::vector<Tensor> data;
  data.reserve(examples.size());
  for (TensorExample& e : examples) data.push_back(std::move(e.data));
  return TensorExample(stack(data));
}

}  // namespace transforms

Batch detail::to_batch(std::vector<TensorExample>&& examples) {
  std::vector<Example<>> with_targets;
  with_targets.reserve(examples.size());
  for (TensorExample& e : examples) with_targets.emplace_back(std::move(e.data), Tensor());
  return keep_examples(std::move(with_targets), {});
}

std::vector<TensorExample> detail::data_only(const std::vector<Example<>>& examples) {
  std::vector<TensorExample> out;
  out.reserve(examples.size());
  for (const Example<>& e : examples) out.emplace_back(e.data);
  return out;
}

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
  constexpr size_t kMax = static_cast<size_t>(std::numeric_limits<int64_t>::max());
  EMBER_CHECK(size <= kMax && num_replicas <= kMax, name, ": size ", size, " and num_replicas ", num_replicas,
              " must fit in int64");
  EMBER_CHECK(num_replicas >= 1, name, ": num_replicas must be >= 1, got ", num_replicas);
  EMBER_CHECK(rank < num_replicas, name, ": rank ", rank, " is out of range for ", num_replicas, " replicas");
  // ceil(size / num_replicas) with allow_duplicates, floor otherwise ((size + R - 1) / R could overflow)
  local_ = size_ / replicas_ + (allow_duplicates && size_ % replicas_ != 0 ? 1 : 0);
}

// Positions [rank * local, (rank + 1) * local) of `order` padded by repeating it from its start
// (position p holds order[p mod n]), computed per position: the padded list itself would be as
// long as num_replicas, which may be far above n. rank * local fits: it is below R when n <= R
// (local is 1), and below n + R < 2n otherwise.
std::vector<int64_t> DistributedSliceSampler::slice(std::vector<int64_t> order) const {
  std::vector<int64_t> out;
  const auto n = static_cast<int64_t>(order.size());
  if (n == 0) return out;
  out.reserve(static_cast<size_t>(local_));
  for (int64_t j = 0, at = rank_ * local_ % n; j < local_; ++j, at = at + 1 == n ? 0 : at + 1)
    out.push_back(order[static_cast<size_t>(at)]);
  return out;
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
