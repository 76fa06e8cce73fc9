#pragma once
// Datasets (torch.utils.data.Dataset): a size and random access to examples. Data-loader
// workers call get() from several threads at once, so get() must be safe to call
// concurrently (it is const; datasets here hold immutable tensors or pure functions).
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "ember/tensor/tensor.h"

namespace ember::data {

// One sample: an input and a target (a target may be undefined for unlabeled data). A template
// as LibTorch's Example<Data, Target>; Example<> is the pair of tensors every dataset here returns.
template <class Data = Tensor, class Target = Tensor>
struct Example {
  using DataType = Data;
  using TargetType = Target;
  Example() = default;
  Example(Data data, Target target) : data(std::move(data)), target(std::move(target)) {}
  Data data;
  Target target;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // The example at `index` in [0, size()); an index out of range is an ember::Error.
  virtual Example<> get(int64_t index) const = 0;
  // Several examples at once; datasets that can read a batch faster than one by one override it.
  virtual std::vector<Example<>> get_batch(const std::vector<int64_t>& indices) const;

 protected:
  void check_index(int64_t index, const char* dataset) const;
};

// Examples are rows of two tensors: data[i], targets[i] (targets may be undefined).
class TensorDataset : public Dataset {
 public:
  TensorDataset(Tensor data, Tensor targets = {});
  int64_t size() const override { return data_.size(0); }
  Example<> get(int64_t index) const override;

 private:
  Tensor data_, targets_;
};

// The examples of `dataset` at `indices`, in that order.
class Subset : public Dataset {
 public:
  Subset(std::shared_ptr<const Dataset> dataset, std::vector<int64_t> indices);
  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  Example<> get(int64_t index) const override;

 private:
  std::shared_ptr<const Dataset> dataset_;
  std::vector<int64_t> indices_;
};

// Note [Sample seeds]: while it fetches a batch, the loader sets a thread-local epoch seed
// (from its own seed and the epoch); MapDataset hands its transform sample_seed(index), a mix
// of that and the example's index. Random transforms draw from it, never from a shared
// generator, so augmentations are reproducible and do not depend on which worker (or how
// many) fetched the example. Outside a loader the epoch seed is 0.
uint64_t sample_seed(int64_t index);
class SampleSeedGuard {
 public:
  explicit SampleSeedGuard(uint64_t seed);
  ~SampleSeedGuard();
  SampleSeedGuard(const SampleSeedGuard&) = delete;
  SampleSeedGuard& operator=(const SampleSeedGuard&) = delete;

 private:
  uint64_t saved_;
};

// transform(dataset.get(i), i, sample_seed(i)): augmentation, normalization. It runs in the
// loader's workers and must be safe to call concurrently.
using Transform = std::function<Example<>(Example<> example, int64_t index, uint64_t seed)>;
class MapDataset : public Dataset {
 public:
  MapDataset(std::shared_ptr<const Dataset> dataset, Transform transform);
  int64_t size() const override { return dataset_->size(); }
  Example<> get(int64_t index) const override;

 private:
  std::shared_ptr<const Dataset> dataset_;
  Transform transform_;
};

inline std::shared_ptr<MapDataset> map(std::shared_ptr<const Dataset> dataset, Transform transform) {
  return std::make_shared<MapDataset>(std::move(dataset), std::move(transform));
}

}  // namespace ember::data
