#include "ember/data/dataset.h"

#include "ember/data/sampler.h"

#include "ember/tensor/error.h"

namespace ember::data {

std::vector<Example<>> Dataset::get_batch(const std::vector<int64_t>& indices) const {
  std::vector<Example<>> out;
  out.reserve(indices.size());
  for (int64_t i : indices) out.push_back(get(i));
  return out;
}

void Dataset::check_index(int64_t index, const char* dataset) const {
  EMBER_CHECK(index >= 0 && index < size(), dataset, ": index ", index, " is out of range for ", size(), " examples");
}

TensorDataset::TensorDataset(Tensor data, Tensor targets) : data_(std::move(data)), targets_(std::move(targets)) {
  EMBER_CHECK(data_.defined() && data_.dim() >= 1, "TensorDataset: data must have a first (example) dimension");
  EMBER_CHECK(!targets_.defined() || (targets_.dim() >= 1 && targets_.size(0) == data_.size(0)),
              "TensorDataset: data has ", data_.size(0), " examples but targets have shape ",
              targets_.defined() ? shape_str(targets_.sizes()) : "undefined");
}

Example<> TensorDataset::get(int64_t index) const {
  check_index(index, "TensorDataset");
  return {data_[index], targets_.defined() ? targets_[index] : Tensor()};
}

Subset::Subset(std::shared_ptr<const Dataset> dataset, std::vector<int64_t> indices)
    : dataset_(std::move(dataset)), indices_(std::move(indices)) {
  EMBER_CHECK(dataset_ != nullptr, "Subset: the dataset is null");
  for (int64_t i : indices_)
    EMBER_CHECK(i >= 0 && i < dataset_->size(), "Subset: index ", i, " is out of range for ", dataset_->size(),
                " examples");
}

Example<> Subset::get(int64_t index) const {
  check_index(index, "Subset");
  return dataset_->get(indices_[static_cast<size_t>(index)]);
}

namespace {
thread_local uint64_t current_sample_seed = 0;
}  // namespace

uint64_t sample_seed(int64_t index) { return mix_seed(current_sample_seed, static_cast<uint64_t>(index)); }
SampleSeedGuard::SampleSeedGuard(uint64_t seed) : saved_(current_sample_seed) { current_sample_seed = seed; }
SampleSeedGuard::~SampleSeedGuard() { current_sample_seed = saved_; }

MapDataset::MapDataset(std::shared_ptr<const Dataset> dataset, Transform transform)
    : dataset_(std::move(dataset)), transform_(std::move(transform)) {
  EMBER_CHECK(dataset_ != nullptr && transform_ != nullptr, "MapDataset: the dataset or the transform is null");
}

Example<> MapDataset::get(int64_t index) const {
  check_index(index, "MapDataset");
  return transform_(dataset_->get(index), index, sample_seed(index));
}

}  // namespace ember::data
