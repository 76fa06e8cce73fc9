#include "ember/data/dataloader.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "ember/autograd/functions.h"
#include "ember/cuda/cuda.h"
#include "ember/tensor/error.h"
#include "ember/tensor/parallel.h"

namespace ember::data {

Batch stack_collate(std::vector<Example<>>&& examples, const std::vector<int64_t>& indices) {
  EMBER_CHECK(!examples.empty(), "stack_collate: an empty batch");
  std::vector<Tensor> data, targets;
  const bool with_targets = examples[0].target.defined();
  for (auto& e : examples) {
    EMBER_CHECK(e.data.defined(), "stack_collate: an example without data");
    EMBER_CHECK(e.target.defined() == with_targets, "stack_collate: some examples have a target and some do not");
    data.push_back(std::move(e.data));
    if (e.target.defined()) targets.push_back(std::move(e.target));
  }
  return {stack(data), targets.empty() ? Tensor() : stack(targets), indices, {}};
}

Batch keep_examples(std::vector<Example<>>&& examples, const std::vector<int64_t>& indices) {
  Batch batch;
  batch.examples = std::move(examples);
  batch.indices = indices;
  return batch;
}

namespace {

// What the exception in flight says, whatever its type: a worker may run user code that throws
// an int or a string, which must reach the training loop as an ember::Error, not abort.
std::string current_exception_message() {
  try {
    throw;
  } catch (const std::exception& e) {
    return e.what();
  } catch (const std::string& s) {
    return "an exception of type std::string: " + s;
  } catch (const char* s) {
    return std::string("an exception of type const char*: ") + s;
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

// pin_memory: the batch's tensors move to page-locked memory (in the worker that made it),
// so the training loop's to(kCUDA, non_blocking) is an asynchronous copy. Without a CUDA
// device (or in a build without CUDA) batches stay in pageable memory, which is what a
// CPU-only run uses anyway; that is said once per process.
void pin(Batch& batch) {
  static const bool available = cuda::is_available();
  if (!available) {
    static std::once_flag once;
    std::call_once(once, [] {
      std::fprintf(stderr, "ember DataLoader: pin_memory has no effect here (%s); batches stay in pageable memory\n",
                   cuda::built_with_cuda() ? "no CUDA device" : "ember was built without CUDA");
    });
    return;
  }
  if (batch.data.defined() && batch.data.is_cpu()) batch.data = batch.data.pin_memory();
  if (batch.target.defined() && batch.target.is_cpu()) batch.target = batch.target.pin_memory();
}

}  // namespace

struct DataLoader::Stats {
  std::mutex mutex;
  double wait_seconds = 0;
  int64_t batches = 0;
};

// A fixed set of threads that run queued tasks; each first runs set_num_threads(1) and the
// user's worker_init. The destructor drops queued tasks, lets running ones finish, and joins.
class DataLoader::WorkerPool {
 public:
  using Task = std::function<void(int worker)>;

  WorkerPool(int n, const std::function<void(int, uint64_t)>& init, uint64_t seed) {
    for (int id = 0; id < n; ++id)
      threads_.emplace_back([this, id, init, seed] {
        set_num_threads(1);
        if (init) {
          try {
            init(id, mix_seed(seed, static_cast<uint64_t>(id)));
          } catch (...) {
            std::lock_guard<std::mutex> lock(mutex_);
            init_error_ = detail::concat("worker_init of worker ", id, " failed: ", current_exception_message());
          }
        }
        {
          std::lock_guard<std::mutex> lock(mutex_);
          ++initialized_;
        }
        cv_.notify_all();
        run(id);
      });
    // Every worker_init has run before the first batch is asked for, so a failing one is
    // reported by begin(), every time, not only when it happened to be fast.
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return initialized_ == n; });
  }
  ~WorkerPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
      tasks_.clear();
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  void submit(Task task) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.clear();
  }
  std::string init_error() {
    std::lock_guard<std::mutex> lock(mutex_);
    return init_error_;
  }

 private:
  void run(int id) {
    for (;;) {
      Task task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
        if (stop_) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task(id);
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Task> tasks_;
  bool stop_ = false;
  int initialized_ = 0;  // workers whose init has run
  std::string init_error_;
  std::vector<std::thread> threads_;
};

// One pass over the sampler's indices. Workers put finished batches into `ready`; the
// consumer takes them in order, submitting one more task for each it takes (prefetch).
struct DataLoader::Epoch : std::enable_shared_from_this<DataLoader::Epoch> {
  struct Result {
    Batch batch;
    std::string error;
  };

  std::shared_ptr<const Dataset> dataset;
  DataLoaderOptions options;
  std::vector<std::vector<int64_t>> batches;
  uint64_t epoch_seed = 0;
  std::weak_ptr<WorkerPool> pool;  // the loader owns the pool; an epoch never joins threads
  std::shared_ptr<Stats> stats;

  std::mutex mutex;
  std::condition_variable cv;
  std::map<int64_t, Result> ready;
  int64_t number = 0;     // the epoch
  int64_t submitted = 0;  // batches handed to the workers
  int64_t delivered = 0;  // batches taken by the consumer (the next one's index)
  bool cancelled = false;

  // Queued tasks of a cancelled epoch return at once. Only the consumer's thread cancels; a
  // worker may run ~Epoch (holding the last reference), so ~Epoch must not touch the pool
  // (a worker that ended up owning the pool would join itself).
  void cancel() {
    std::lock_guard<std::mutex> lock(mutex);
    cancelled = true;
  }

  // Reads, transforms and collates batch b (any thread).
  Batch load(int64_t b) const {
    const std::vector<int64_t>& idx = batches[static_cast<size_t>(b)];
    SampleSeedGuard seed(epoch_seed);
    if (options.batch_reader_) {
      Batch batch;
      try {
        batch = options.batch_reader_(idx);
      } catch (...) {
        throw Error(detail::concat("batch ", b, ": ", current_exception_message()));
      }
      batch.indices = idx;
      if (options.pin_memory_) pin(batch);
      return batch;
    }
    std::vector<Example<>> examples;
    try {
      examples = dataset->get_batch(idx);
    } catch (...) {
      const std::string batch_error = current_exception_message();
      for (int64_t i : idx) {  // find the example that fails, to name it
        try {
          (void)dataset->get(i);
        } catch (...) {
          throw Error(detail::concat("sample ", i, " (batch ", b, "): ", current_exception_message()));
        }
      }
      throw Error(detail::concat("batch ", b, ": ", batch_error));
    }
    EMBER_CHECK(examples.size() == idx.size(), "batch ", b, ": get_batch returned ", examples.size(), " examples for ",
                idx.size(), " indices");
    Batch batch;
    try {
      batch = options.collate_ ? options.collate_(std::move(examples), idx) : stack_collate(std::move(examples), idx);
    } catch (...) {
      throw Error(detail::concat("batch ", b, " (collate): ", current_exception_message()));
    }
    if (options.pin_memory_) pin(batch);
    return batch;
  }

  void submit_up_to(int64_t limit) {
    auto p = pool.lock();
    if (!p) return;
    std::weak_ptr<Epoch> self = shared_from_this();
    while (submitted < std::min<int64_t>(limit, static_cast<int64_t>(batches.size()))) {
      const int64_t b = submitted++;
      p->submit([self, b](int worker) {
        auto epoch = self.lock();
        if (!epoch) return;
        {
          std::lock_guard<std::mutex> lock(epoch->mutex);
          if (epoch->cancelled) return;
        }
        Result r;
        try {
          r.batch = epoch->load(b);
        } catch (...) {  // load names the sample; what escapes it is ours (bad_alloc)
          r.error = detail::concat("DataLoader: worker ", worker, " failed on ", current_exception_message());
        }
        {
          std::lock_guard<std::mutex> lock(epoch->mutex);
          epoch->ready.emplace(b, std::move(r));
        }
        epoch->cv.notify_all();
      });
    }
  }

  // Batch b, waiting for it (and timing the wait); rethrows a worker's error.
  Batch take(int64_t b) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      EMBER_CHECK(!cancelled,
                  "DataLoader: this iterator's epoch is over: begin() started a new epoch or the loader "
                  "was destroyed");
    }
    const auto t0 = std::chrono::steady_clock::now();
    Batch out;
    if (options.num_workers_ == 0) {
      try {
        out = load(b);
      } catch (...) {
        throw Error(detail::concat("DataLoader: failed on ", current_exception_message()));
      }
    } else {
      Result r;
      {
        std::unique_lock<std::mutex> lock(mutex);
        auto due = [&] { return ready.count(b) != 0; };
        if (options.timeout_ > 0) {
          if (!cv.wait_for(lock, std::chrono::duration<double>(options.timeout_), due))
            throw Error(detail::concat("DataLoader: timed out after ", options.timeout_, " s waiting for batch ", b,
                                       " (num_workers=", options.num_workers_, ")"));
        } else {
          cv.wait(lock, due);
        }
        r = std::move(ready[b]);
        ready.erase(b);
      }
      submit_up_to(b + 1 + static_cast<int64_t>(options.num_workers_) * options.prefetch_factor_);
      if (!r.error.empty()) throw Error(r.error);
      out = std::move(r.batch);
    }
    {
      std::lock_guard<std::mutex> lock(mutex);
      delivered = b + 1;
    }
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::lock_guard<std::mutex> lock(stats->mutex);
    stats->wait_seconds += waited;
    ++stats->batches;
    return out;
  }
};

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options,
                       std::shared_ptr<const Sampler> sampler)
    : dataset_(std::move(dataset)),
      options_(std::move(options)),
      sampler_(std::move(sampler)),
      stats_(std::make_shared<Stats>()) {
  const auto& o = options_;
  EMBER_CHECK(dataset_ != nullptr, "DataLoader: the dataset is null");
  EMBER_CHECK(o.batch_size_ >= 1, "DataLoader: batch_size must be >= 1, got ", o.batch_size_);
  EMBER_CHECK(o.num_workers_ >= 0, "DataLoader: num_workers must be >= 0, got ", o.num_workers_);
  EMBER_CHECK(o.prefetch_factor_ >= 1, "DataLoader: prefetch_factor must be >= 1, got ", o.prefetch_factor_);
  EMBER_CHECK(o.timeout_ >= 0, "DataLoader: timeout must be >= 0, got ", o.timeout_);
  EMBER_CHECK(!o.persistent_workers_ || o.num_workers_ > 0, "DataLoader: persistent_workers needs num_workers > 0");
  EMBER_CHECK(!(sampler_ && o.shuffle_), "DataLoader: give either a sampler or shuffle=true, not both");
  if (!sampler_)
    sampler_ = o.shuffle_ ? std::shared_ptr<const Sampler>(std::make_shared<RandomSampler>(dataset_->size(), o.seed_))
                          : std::make_shared<SequentialSampler>(dataset_->size());
}

DataLoader::~DataLoader() {
  if (current_) current_->cancel();
  pool_.reset();  // drops the queued tasks, joins the workers
}

int64_t DataLoader::size() const {
  const int64_t n = sampler_->size(), b = options_.batch_size_;
  return n / b + (!options_.drop_last_ && n % b != 0 ? 1 : 0);  // (n + b - 1) / b could overflow
}

DataLoader::Iterator DataLoader::begin() {
  if (current_) current_->cancel();
  if (pool_) pool_->clear();  // the previous epoch's queued batches
  const int64_t epoch = next_epoch_++, start = start_batch_;
  start_batch_ = 0;
  positioned_ = false;
  if (options_.num_workers_ > 0 && (!options_.persistent_workers_ || !pool_)) {
    pool_.reset();  // non-persistent workers: a fresh set each epoch, as PyTorch
    pool_ = std::make_shared<WorkerPool>(options_.num_workers_, options_.worker_init_,
                                         mix_seed(options_.seed_, static_cast<uint64_t>(epoch)));
  }
  auto e = std::make_shared<Epoch>();
  e->dataset = dataset_;
  e->options = options_;
  e->epoch_seed = mix_seed(options_.seed_ ^ 0xA5A5A5A5ULL, static_cast<uint64_t>(epoch));
  e->pool = pool_;
  e->stats = stats_;
  e->number = epoch;
  const std::vector<int64_t> order = sampler_->indices(epoch);
  for (size_t i = 0; i < order.size(); i += static_cast<size_t>(options_.batch_size_)) {
    const size_t end = std::min(order.size(), i + static_cast<size_t>(options_.batch_size_));
    if (options_.drop_last_ && end - i < static_cast<size_t>(options_.batch_size_)) break;
    e->batches.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(i),
                            order.begin() + static_cast<std::ptrdiff_t>(end));
  }
  EMBER_CHECK(start <= static_cast<int64_t>(e->batches.size()), "DataLoader: load_state_dict's batch ", start,
              " is beyond epoch ", epoch, "'s ", e->batches.size(), " batches");
  e->submitted = e->delivered = start;
  if (pool_) {
    const std::string init_error = pool_->init_error();
    EMBER_CHECK(init_error.empty(), "DataLoader: ", init_error);
    e->submit_up_to(start + static_cast<int64_t>(options_.num_workers_) * options_.prefetch_factor_);
  }
  current_ = e;
  return Iterator(e, start);
}

// The one epoch number never run: the one after it would not fit in int64.
constexpr int64_t kNoEpoch = std::numeric_limits<int64_t>::max();

void DataLoader::set_epoch(int64_t epoch) {
  EMBER_CHECK(epoch >= 0 && epoch < kNoEpoch, "DataLoader::set_epoch: the epoch must be in [0, ", kNoEpoch - 1,
              "], got ", epoch);
  if (epoch != next_epoch_) start_batch_ = 0;
  next_epoch_ = epoch;
  positioned_ = true;
}

DataLoaderState DataLoader::state_dict() const {
  if (!current_ || positioned_) return {next_epoch_, start_batch_};
  std::lock_guard<std::mutex> lock(current_->mutex);
  if (current_->delivered >= static_cast<int64_t>(current_->batches.size())) return {current_->number + 1, 0};
  return {current_->number, current_->delivered};
}

void DataLoader::load_state_dict(const DataLoaderState& state) {
  EMBER_CHECK(state.epoch >= 0 && state.epoch < kNoEpoch && state.batch >= 0 && state.batch <= size(),
              "DataLoader::load_state_dict: epoch ", state.epoch, " batch ", state.batch,
              " is not a position of this loader (epochs in [0, ", kNoEpoch - 1, "], ", size(), " batches each)");
  next_epoch_ = state.epoch;
  start_batch_ = state.batch;
  positioned_ = true;
}

DataLoader::Iterator DataLoader::end() { return Iterator(nullptr, 0); }

bool DataLoader::Iterator::operator==(const Iterator& o) const {
  auto at_end = [](const Iterator& it) {
    return !it.epoch_ || it.index_ >= static_cast<int64_t>(it.epoch_->batches.size());
  };
  if (at_end(*this) || at_end(o)) return at_end(*this) && at_end(o);
  return epoch_ == o.epoch_ && index_ == o.index_;
}

DataLoader::Iterator::Iterator(std::shared_ptr<Epoch> epoch, int64_t index) : epoch_(std::move(epoch)), index_(index) {
  fetch();
}

void DataLoader::Iterator::fetch() {
  if (epoch_ && index_ < static_cast<int64_t>(epoch_->batches.size())) batch_ = epoch_->take(index_);
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  ++index_;
  batch_ = Batch();
  fetch();
  return *this;
}

double DataLoader::data_wait_seconds() const {
  std::lock_guard<std::mutex> lock(stats_->mutex);
  return stats_->wait_seconds;
}

int64_t DataLoader::batches_delivered() const {
  std::lock_guard<std::mutex> lock(stats_->mutex);
  return stats_->batches;
}

void DataLoader::reset_stats() {
  std::lock_guard<std::mutex> lock(stats_->mutex);
  stats_->wait_seconds = 0;
  stats_->batches = 0;
}

}  // namespace ember::data
