#pragma once
// Samplers: the order in which a loader visits a dataset, one epoch at a time
// (torch.utils.data.{Sequential,Random,Distributed}Sampler).
#include <cstdint>
#include <vector>

namespace ember::data {

class Sampler {
 public:
  virtual ~Sampler() = default;
  // The indices of epoch `epoch` (0, 1, ...): a pure function of the sampler's settings and the
  // epoch, so a run is reproducible and can resume at any epoch.
  virtual std::vector<int64_t> indices(int64_t epoch) const = 0;
  virtual int64_t size() const = 0;  // indices per epoch
};

// 0, 1, ..., n - 1 every epoch.
class SequentialSampler : public Sampler {
 public:
  explicit SequentialSampler(int64_t n);
  std::vector<int64_t> indices(int64_t epoch) const override;
  int64_t size() const override { return n_; }

 private:
  int64_t n_;
};

// A permutation of 0..n-1, a new one each epoch, drawn from (seed, epoch).
class RandomSampler : public Sampler {
 public:
  explicit RandomSampler(int64_t n, uint64_t seed = 0);
  std::vector<int64_t> indices(int64_t epoch) const override;
  int64_t size() const override { return n_; }

 private:
  int64_t n_;
  uint64_t seed_;
};

// This rank's share of the dataset for data-parallel training: the (optionally shuffled, with
// seed + epoch) indices are padded by repeating the first ones to a multiple of num_replicas
// (or cut to one, with drop_last), then rank r takes every num_replicas-th from r. Together
// the ranks cover every index, each once except the padding.
class DistributedSampler : public Sampler {
 public:
  DistributedSampler(int64_t n, int64_t num_replicas, int64_t rank, bool shuffle = true, uint64_t seed = 0,
                     bool drop_last = false);
  std::vector<int64_t> indices(int64_t epoch) const override;
  int64_t size() const override { return per_replica_; }

 private:
  int64_t n_, num_replicas_, rank_;
  bool shuffle_, drop_last_;
  uint64_t seed_;
  int64_t per_replica_;
};

// A seed for stream b of seed a (epochs, workers, examples): splitmix64's finalizer over the
// pair, so nearby pairs give unrelated seeds. Every derived seed in data/ comes from here.
uint64_t mix_seed(uint64_t a, uint64_t b);

// A permutation of 0..n-1 from a seed: Fisher-Yates with ember's Philox stream.
std::vector<int64_t> permutation(int64_t n, uint64_t seed);

}  // namespace ember::data
