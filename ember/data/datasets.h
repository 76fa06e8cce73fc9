#pragma once
// LibTorch's data API, beside ember's own and over the same loader (Note [LibTorch's data API]):
//
//   auto train = data::datasets::MNIST(root)
//                    .map(data::transforms::Normalize<>(0.1307, 0.3081))
//                    .map(data::transforms::Stack<>());
//   auto loader = data::make_data_loader<data::samplers::RandomSampler>(
//       std::move(train), data::DataLoaderOptions().batch_size(64).workers(2));
//   for (data::Example<>& batch : *loader) step(batch.data, batch.target);
//
// Note [LibTorch's data API]: a LibTorch dataset is a value type deriving from
// datasets::Dataset<Self> (get(size_t), size()); map() wraps it with a transform into a
// MapDataset, by value, as LibTorch does. Per-example transforms (Normalize, Lambda) apply to
// each example; a batch transform (Stack) turns a batch's vector of examples into one example.
// make_data_loader moves the dataset into a StatelessDataLoader that runs ember's DataLoader (its
// worker threads, prefetching and in-order delivery) with a batch reader that calls the dataset's
// get_batch in the workers; the batches come out as the dataset's BatchType: Example<> after
// Stack<>, std::vector<Example<>> without it. Samplers keep LibTorch's names and constructors,
// as ember Samplers (an epoch's order is a function of the epoch, so each pass over the loader
// is a new epoch and a new permutation).
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ember/autograd/functions.h"
#include "ember/data/dataloader.h"
#include "ember/data/idx.h"
#include "ember/data/sampler.h"

namespace ember::data {

namespace example {
// The target of an example that has none (LibTorch's NoTarget).
struct NoTarget {};
}  // namespace example

// An example of data alone (LibTorch's TensorExample): `*example` is its tensor.
template <>
struct Example<Tensor, example::NoTarget> {
  using DataType = Tensor;
  using TargetType = example::NoTarget;
  Example() = default;
  Example(Tensor data) : data(std::move(data)) {}  // NOLINT: implicit, as LibTorch's
  Tensor& operator*() { return data; }
  const Tensor& operator*() const { return data; }
  Tensor* operator->() { return &data; }
  const Tensor* operator->() const { return &data; }
  Tensor data;
};
using TensorExample = Example<Tensor, example::NoTarget>;

namespace datasets {

template <class Source, class Transform>
class MapDataset;

// The base of a LibTorch-style dataset (CRTP): derive Self from Dataset<Self> and write get()
// and size(). get() is called from the loader's workers at once, so it must be thread-safe.
template <class Self, class SingleExample = Example<>>
class Dataset {
 public:
  using ExampleType = SingleExample;
  using BatchType = std::vector<SingleExample>;
  virtual ~Dataset() = default;
  virtual ExampleType get(size_t index) = 0;
  virtual std::optional<size_t> size() const = 0;
  virtual BatchType get_batch(const std::vector<size_t>& indices) {
    BatchType batch;
    batch.reserve(indices.size());
    for (size_t i : indices) batch.push_back(get(i));
    return batch;
  }
  template <class Transform>
  MapDataset<Self, Transform> map(Transform transform) & {
    return MapDataset<Self, Transform>(static_cast<Self&>(*this), std::move(transform));
  }
  template <class Transform>
  MapDataset<Self, Transform> map(Transform transform) && {
    return MapDataset<Self, Transform>(std::move(static_cast<Self&>(*this)), std::move(transform));
  }
};

// A dataset whose batches pass through `transform` (its apply_batch).
template <class Source, class Transform>
class MapDataset {
 public:
  using DatasetType = Source;
  using TransformType = Transform;
  using BatchType = typename Transform::OutputBatchType;

  MapDataset(Source dataset, Transform transform) : dataset_(std::move(dataset)), transform_(std::move(transform)) {}
  BatchType get_batch(const std::vector<size_t>& indices) {
    return transform_.apply_batch(dataset_.get_batch(indices));
  }
  std::optional<size_t> size() const { return dataset_.size(); }
  const Source& dataset() const { return dataset_; }
  const Transform& transform() const { return transform_; }
  template <class Next>
  MapDataset<MapDataset, Next> map(Next transform) && {
    return MapDataset<MapDataset, Next>(std::move(*this), std::move(transform));
  }
  template <class Next>
  MapDataset<MapDataset, Next> map(Next transform) & {
    return MapDataset<MapDataset, Next>(*this, std::move(transform));
  }

 private:
  Source dataset_;
  Transform transform_;
};

// MNIST (or Fashion-MNIST) from `root`, as LibTorch's: data [1, 28, 28] float32 in [0, 1],
// target a 0-d int64. The files may be gzipped (LibTorch's reader takes only raw ones).
class MNIST : public Dataset<MNIST> {
 public:
  enum class Mode { kTrain, kTest };
  explicit MNIST(const std::string& root, Mode mode = Mode::kTrain);
  Example<> get(size_t index) override;
  std::optional<size_t> size() const override;
  bool is_train() const noexcept { return train_; }
  const Tensor& images() const { return images_; }    // [N, 1, 28, 28] float32
  const Tensor& targets() const { return targets_; }  // [N] int64

 private:
  bool train_;
  Tensor images_, targets_;
};

// The rows of one tensor, without targets (LibTorch's TensorDataset): get(i) is tensor[i], a view.
class TensorDataset : public Dataset<TensorDataset, TensorExample> {
 public:
  explicit TensorDataset(const std::vector<Tensor>& tensors);  // stacked into one [N, ...]
  explicit TensorDataset(Tensor tensor);
  TensorExample get(size_t index) override;
  std::optional<size_t> size() const override;

  Tensor tensor;
};

}  // namespace datasets

namespace transforms {

// The base of every transform: apply() maps one input, apply_batch() a batch of them.
template <class Input, class Output = Input>
class Transform {
 public:
  using InputType = Input;
  using OutputType = Output;
  using InputBatchType = std::vector<Input>;
  using OutputBatchType = std::vector<Output>;
  virtual ~Transform() = default;
  virtual Output apply(Input input) = 0;
  OutputBatchType apply_batch(InputBatchType inputs) {
    OutputBatchType out;
    out.reserve(inputs.size());
    for (auto& input : inputs) out.push_back(apply(std::move(input)));
    return out;
  }
};

// A transform of a whole batch (Stack<>).
template <class InputBatch, class OutputBatch>
class BatchTransform {
 public:
  using InputBatchType = InputBatch;
  using OutputBatchType = OutputBatch;
  virtual ~BatchTransform() = default;
  virtual OutputBatch apply_batch(InputBatch input_batch) = 0;
};

// A function of each example.
template <class Input, class Output = Input>
class Lambda : public Transform<Input, Output> {
 public:
  using FunctionType = std::function<Output(Input)>;
  explicit Lambda(FunctionType function) : function_(std::move(function)) {}
  Output apply(Input input) override { return function_(std::move(input)); }

 private:
  FunctionType function_;
};

// A function of each example's data tensor (the target passes through).
template <class Target = Tensor>
class TensorTransform : public Transform<Example<Tensor, Target>, Example<Tensor, Target>> {
 public:
  using E = Example<Tensor, Target>;
  virtual Tensor operator()(Tensor input) = 0;
  E apply(E input) override { return E(operator()(std::move(input.data)), std::move(input.target)); }
};

template <class Target = Tensor>
class TensorLambda : public TensorTransform<Target> {
 public:
  using FunctionType = std::function<Tensor(Tensor)>;
  explicit TensorLambda(FunctionType function) : function_(std::move(function)) {}
  Tensor operator()(Tensor input) override { return function_(std::move(input)); }

 private:
  FunctionType function_;
};

// (data - mean) / stddev, per channel: mean and stddev have one value, or one per channel of a
// [C, ...] data tensor.
template <class Target = Tensor>
class Normalize : public TensorTransform<Target> {
 public:
  Normalize(double mean, double stddev) : Normalize(std::vector<double>{mean}, std::vector<double>{stddev}) {}
  Normalize(const std::vector<double>& mean, const std::vector<double>& stddev)
      : mean_(channels(mean, "mean")), stddev_(channels(stddev, "stddev")) {
    for (double s : stddev) EMBER_CHECK(s != 0, "Normalize: a stddev of 0");
  }
  Tensor operator()(Tensor input) override {
    return (input - mean_.to(input.device(), input.dtype())) / stddev_.to(input.device(), input.dtype());
  }

 private:
  static Tensor channels(const std::vector<double>& v, const char* what) {
    EMBER_CHECK(!v.empty(), "Normalize: no ", what, " given");
    return tensor<double>(v).to(kFloat32).reshape({static_cast<int64_t>(v.size()), 1, 1});
  }
  Tensor mean_, stddev_;
};

// Stacks a batch of examples into one: data [B, ...], target [B, ...].
template <class E = Example<>>
class Stack;
template <>
class Stack<Example<>> : public BatchTransform<std::vector<Example<>>, Example<>> {
 public:
  Example<> apply_batch(std::vector<Example<>> examples) override {
    const std::vector<int64_t> none;
    Batch b = stack_collate(std::move(examples), none);
    return Example<>(std::move(b.data), std::move(b.target));
  }
};

// Stacks a batch of data-only examples into one: [B, ...].
template <>
class Stack<TensorExample> : public BatchTransform<std::vector<TensorExample>, TensorExample> {
 public:
  TensorExample apply_batch(std::vector<TensorExample> examples) override;
};

}  // namespace transforms

namespace samplers {

// 0, 1, ..., size - 1 each epoch.
class SequentialSampler : public data::SequentialSampler {
 public:
  explicit SequentialSampler(size_t size) : data::SequentialSampler(static_cast<int64_t>(size)) {}
};

// A new permutation each epoch, from a seed drawn from ember's generator at construction (so
// manual_seed fixes the order, as LibTorch's randperm from the default generator does).
class RandomSampler : public data::RandomSampler {
 public:
  explicit RandomSampler(int64_t size, DType index_dtype = kInt64);
};

// What LibTorch's two distributed samplers share: each rank takes one contiguous slice of an
// epoch's order, ceil(size / num_replicas) long with the order padded by its first indices
// (allow_duplicates), or floor(size / num_replicas) long with the rest left out.
class DistributedSliceSampler : public data::Sampler {
 public:
  int64_t size() const override { return local_; }

 protected:
  DistributedSliceSampler(size_t size, size_t num_replicas, size_t rank, bool allow_duplicates, const char* name);
  std::vector<int64_t> slice(std::vector<int64_t> order) const;  // this rank's part of `order`
  int64_t size_, replicas_, rank_, local_;
};

// A permutation per epoch (seeded by the epoch, as LibTorch's set_epoch seeds its shuffle, so
// every rank draws the same one and the slices never overlap).
class DistributedRandomSampler : public DistributedSliceSampler {
 public:
  explicit DistributedRandomSampler(size_t size, size_t num_replicas = 1, size_t rank = 0, bool allow_duplicates = true)
      : DistributedSliceSampler(size, num_replicas, rank, allow_duplicates, "DistributedRandomSampler") {}
  std::vector<int64_t> indices(int64_t epoch) const override;
};

// 0, 1, ..., size - 1 in order, sliced the same way.
class DistributedSequentialSampler : public DistributedSliceSampler {
 public:
  explicit DistributedSequentialSampler(size_t size, size_t num_replicas = 1, size_t rank = 0,
                                        bool allow_duplicates = true)
      : DistributedSliceSampler(size, num_replicas, rank, allow_duplicates, "DistributedSequentialSampler") {}
  std::vector<int64_t> indices(int64_t epoch) const override;
};

}  // namespace samplers

namespace detail {
// A BatchType as ember's Batch, and back: Example<> (a stacked batch) or std::vector<Example<>>.
inline Batch to_batch(Example<>&& e) {
  Batch b;
  b.data = std::move(e.data);
  b.target = std::move(e.target);
  return b;
}
inline Batch to_batch(std::vector<Example<>>&& examples) { return keep_examples(std::move(examples), {}); }
// TensorExample: the data alone, an undefined target in ember's Batch.
inline Batch to_batch(TensorExample&& e) {
  Batch b;
  b.data = std::move(e.data);
  return b;
}
Batch to_batch(std::vector<TensorExample>&& examples);
std::vector<TensorExample> data_only(const std::vector<Example<>>& examples);
template <class BatchType>
BatchType from_batch(const Batch& b) {
  if constexpr (std::is_same_v<BatchType, Example<>>) {
    return Example<>(b.data, b.target);
  } else if constexpr (std::is_same_v<BatchType, TensorExample>) {
    return TensorExample(b.data);
  } else if constexpr (std::is_same_v<BatchType, std::vector<TensorExample>>) {
    return data_only(b.examples);
  } else {
    static_assert(std::is_same_v<BatchType, std::vector<Example<>>>,
                  "make_data_loader: ember's loader carries batches of Example<> (Tensor data and target) or "
                  "TensorExample, stacked (Stack<>) or as a vector");
    return b.examples;
  }
}
// What ember's loader needs of a dataset here: its size (the batch reader does the reading).
class SizeOnly : public data::Dataset {
 public:
  explicit SizeOnly(int64_t n) : n_(n) {}
  int64_t size() const override { return n_; }
  Example<> get(int64_t) const override;

 private:
  int64_t n_;
};
}  // namespace detail

// LibTorch's loader over ember's DataLoader: `for (auto& batch : *loader)` runs one epoch.
template <class DatasetT, class SamplerT>
class StatelessDataLoader {
 public:
  using BatchType = typename DatasetT::BatchType;

  StatelessDataLoader(DatasetT dataset, SamplerT sampler, DataLoaderOptions options)
      : dataset_(std::make_shared<DatasetT>(std::move(dataset))), options_(options) {
    const std::optional<size_t> n = dataset_->size();
    EMBER_CHECK(n.has_value(), "make_data_loader: the dataset has no size (stream datasets are not in ember)");
    options.batch_reader([ds = dataset_](const std::vector<int64_t>& indices) {
      return detail::to_batch(ds->get_batch(std::vector<size_t>(indices.begin(), indices.end())));
    });
    loader_ = std::make_unique<DataLoader>(std::make_shared<detail::SizeOnly>(static_cast<int64_t>(*n)),
                                           std::move(options), std::make_shared<SamplerT>(std::move(sampler)));
  }

  class Iterator {
   public:
    BatchType& operator*() { return value_; }
    BatchType* operator->() { return &value_; }
    Iterator& operator++() {
      ++it_;
      load();
      return *this;
    }
    bool operator==(const Iterator& o) const { return it_ == o.it_; }
    bool operator!=(const Iterator& o) const { return !(it_ == o.it_); }

   private:
    friend class StatelessDataLoader;
    Iterator(DataLoader::Iterator it, DataLoader::Iterator end) : it_(std::move(it)), end_(std::move(end)) { load(); }
    void load() {
      if (it_ != end_) value_ = detail::from_batch<BatchType>(*it_);
    }
    DataLoader::Iterator it_, end_;
    BatchType value_;
  };

  Iterator begin() {
    auto first = loader_->begin();
    return Iterator(std::move(first), loader_->end());
  }
  Iterator end() { return Iterator(loader_->end(), loader_->end()); }
  // ember's loader itself: data_wait_seconds(), batches per epoch.
  DataLoader& loader() { return *loader_; }
  const DataLoaderOptions& options() const { return options_; }

 private:
  std::shared_ptr<DatasetT> dataset_;
  DataLoaderOptions options_;
  std::unique_ptr<DataLoader> loader_;
};

// make_data_loader<Sampler = RandomSampler>(dataset, batch_size | options): the sampler is made
// from the dataset's size, as LibTorch does; or pass one.
template <class SamplerT = samplers::RandomSampler, class DatasetT>
std::unique_ptr<StatelessDataLoader<DatasetT, SamplerT>> make_data_loader(DatasetT dataset, DataLoaderOptions options) {
  const std::optional<size_t> n = dataset.size();
  EMBER_CHECK(n.has_value(), "make_data_loader: the dataset has no size (stream datasets are not in ember)");
  SamplerT sampler(*n);
  return std::make_unique<StatelessDataLoader<DatasetT, SamplerT>>(std::move(dataset), std::move(sampler),
                                                                   std::move(options));
}
template <class SamplerT = samplers::RandomSampler, class DatasetT>
std::unique_ptr<StatelessDataLoader<DatasetT, SamplerT>> make_data_loader(DatasetT dataset, size_t batch_size) {
  return make_data_loader<SamplerT>(std::move(dataset),
                                    DataLoaderOptions().batch_size(static_cast<int64_t>(batch_size)));
}
template <class DatasetT, class SamplerT, class = std::enable_if_t<std::is_base_of_v<data::Sampler, SamplerT>>>
std::unique_ptr<StatelessDataLoader<DatasetT, SamplerT>> make_data_loader(DatasetT dataset, SamplerT sampler,
                                                                          DataLoaderOptions options = {}) {
  return std::make_unique<StatelessDataLoader<DatasetT, SamplerT>>(std::move(dataset), std::move(sampler),
                                                                   std::move(options));
}

}  // namespace ember::data
