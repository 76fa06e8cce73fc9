#pragma once
// DataLoader (torch.utils.data.DataLoader): batches of a dataset in a sampler's order,
// loaded by std::thread workers ahead of the consumer. Optimization 2 of the eight: with
// num_workers > 0 the next batches are read, transformed and collated while the model trains
// on the current one; data_wait_seconds() shows how long the training loop still waited.
//     data::DataLoader loader(dataset, data::DataLoaderOptions().batch_size(64).shuffle(true)
//                                          .num_workers(2));
//     for (int epoch = 0; epoch < 10; ++epoch)
//       for (const data::Batch& batch : loader) train_step(batch.data, batch.target);
// Guarantees: batches arrive in exactly the sampler's order whatever num_workers is, so a run
// is reproducible; an exception of any type in a worker reaches the consumer as an ember::Error naming the
// sample index when that batch is due; ending or leaving a loop early, or destroying the
// loader mid-epoch, stops the workers without deadlock or leak. Workers run ember's kernels
// single-threaded (set_num_threads(1) in each), so workers and OpenMP never oversubscribe.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ember/data/dataset.h"
#include "ember/data/sampler.h"
#include "ember/tensor/arg.h"

namespace ember::data {

// A collated batch: data [B, ...], target [B, ...] (undefined if the examples have none),
// and the dataset indices it holds; `examples` holds the examples themselves instead when the
// collate keeps them (keep_examples: LibTorch's batches of examples of different shapes).
struct Batch {
  Tensor data, target;
  std::vector<int64_t> indices;
  std::vector<Example<>> examples;
};

using Collate = std::function<Batch(std::vector<Example<>>&& examples, const std::vector<int64_t>& indices)>;
// The default collate: stacks data and targets along a new first dimension.
Batch stack_collate(std::vector<Example<>>&& examples, const std::vector<int64_t>& indices);
// A collate that stacks nothing: the examples go into Batch::examples as they are.
Batch keep_examples(std::vector<Example<>>&& examples, const std::vector<int64_t>& indices);
// Reads batch `indices` whole, in place of the dataset's get_batch and the collate: for datasets
// that make batches themselves (LibTorch's, whose Stack<> transform collates; data/datasets.h).
using BatchReader = std::function<Batch(const std::vector<int64_t>& indices)>;

struct DataLoaderOptions {
  EMBER_ARG(int64_t, batch_size) = 1;
  EMBER_ARG(bool, shuffle) = false;  // RandomSampler(seed) when no sampler is given
  EMBER_ARG(bool, drop_last) = false;
  EMBER_ARG(int, num_workers) = 0;
  EMBER_ARG(int, prefetch_factor) = 2;  // batches in flight per worker
  EMBER_ARG(bool, persistent_workers) = false;
  EMBER_ARG(double, timeout) = 0.0;  // seconds to wait for one batch; 0 = forever
  EMBER_ARG(bool, pin_memory) = false;
  EMBER_ARG(uint64_t, seed) = 0;  // shuffling, Note [Sample seeds], worker seeds
  EMBER_ARG(Collate, collate) = nullptr;
  // worker_init(worker_id, seed) runs first in each worker thread; seed = f(seed, id, epoch).
  EMBER_ARG(std::function<void(int, uint64_t)>, worker_init) = nullptr;
  EMBER_ARG(BatchReader, batch_reader) = nullptr;
  // LibTorch's names: workers(n) is num_workers(n); enforce_ordering(false) is accepted (batches
  // always arrive in the sampler's order here, which is what true asks for).
  DataLoaderOptions& workers(int n) { return num_workers(n); }
  DataLoaderOptions& enforce_ordering(bool) { return *this; }
  int workers() const { return num_workers_; }
};

// Where a loader stands: the epoch and the batch of it that the next one delivered will be.
// Saved in training checkpoints, so a run stopped mid-epoch resumes with the very next batch
// (torchdata's StatefulDataLoader does this for PyTorch; here the loader does it itself).
struct DataLoaderState {
  int64_t epoch = 0, batch = 0;
};

class DataLoader {
  struct Epoch;
  class WorkerPool;

 public:
  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options = {},
             std::shared_ptr<const Sampler> sampler = nullptr);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  class Iterator {
   public:
    const Batch& operator*() const { return batch_; }
    const Batch* operator->() const { return &batch_; }
    Iterator& operator++();
    bool operator!=(const Iterator& o) const { return !(*this == o); }
    // Every iterator past its epoch's last batch equals end(), whichever of begin() and end()
    // was called first.
    bool operator==(const Iterator& o) const;

   private:
    friend class DataLoader;
    Iterator(std::shared_ptr<Epoch> epoch, int64_t index);
    void fetch();
    std::shared_ptr<Epoch> epoch_;
    int64_t index_;
    Batch batch_;
  };

  // Starts the next epoch (ending the previous one if it is still running).
  Iterator begin();
  Iterator end();
  int64_t size() const;  // batches per epoch
  // The epoch the next begin() runs (from its first batch, unless load_state_dict put the
  // loader mid-way through this very epoch).
  void set_epoch(int64_t epoch);
  int64_t epoch() const { return next_epoch_ - 1; }  // the epoch begin() last started

  // The position after the batches delivered so far: {epoch, next batch} during an epoch, the
  // next epoch's start after its last batch. load_state_dict makes the next begin() start there;
  // the batches then are those an uninterrupted run would have delivered, whatever num_workers
  // (samplers and sample seeds are pure functions of seed, epoch and index).
  DataLoaderState state_dict() const;
  void load_state_dict(const DataLoaderState& state);

  // Time the consumer spent waiting for batches (the loop's data wait), and batches delivered,
  // over all epochs since construction or reset_stats().
  double data_wait_seconds() const;
  int64_t batches_delivered() const;
  void reset_stats();

 private:
  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions options_;
  std::shared_ptr<const Sampler> sampler_;
  std::shared_ptr<WorkerPool> pool_;  // persistent workers live here between epochs
  std::shared_ptr<Epoch> current_;
  int64_t next_epoch_ = 0, start_batch_ = 0;
  bool positioned_ = false;  // set_epoch or load_state_dict since the last begin()
  struct Stats;
  std::shared_ptr<Stats> stats_;
};

}  // namespace ember::data
