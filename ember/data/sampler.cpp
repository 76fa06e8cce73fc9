#include "ember/data/sampler.h"

#include <numeric>

#include "ember/tensor/error.h"
#include "ember/tensor/generator.h"

namespace ember::data {

std::vector<int64_t> permutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> out(static_cast<size_t>(n));
  std::iota(out.begin(), out.end(), int64_t{0});
  // Fisher-Yates; two Philox words per swap give a 64-bit draw (modulo bias < n / 2^64).
  uint64_t block = 0;
  for (int64_t i = n - 1; i > 0; --i) {
    const auto words = philox4x32(seed, block++);
    const uint64_t r = (static_cast<uint64_t>(words[0]) << 32) | words[1];
    std::swap(out[static_cast<size_t>(i)], out[static_cast<size_t>(r % static_cast<uint64_t>(i + 1))]);
  }
  return out;
}

uint64_t mix_seed(uint64_t a, uint64_t b) {
  uint64_t z = a * 0x9E3779B97F4A7C15ULL + b + 0x632BE59BD9B4E019ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

namespace {
uint64_t epoch_seed(uint64_t seed, int64_t epoch) { return mix_seed(seed, static_cast<uint64_t>(epoch)); }
}  // namespace

SequentialSampler::SequentialSampler(int64_t n) : n_(n) {
  EMBER_CHECK(n >= 0, "SequentialSampler: n must be >= 0, got ", n);
}

std::vector<int64_t> SequentialSampler::indices(int64_t) const {
  std::vector<int64_t> out(static_cast<size_t>(n_));
  std::iota(out.begin(), out.end(), int64_t{0});
  return out;
}

RandomSampler::RandomSampler(int64_t n, uint64_t seed) : n_(n), seed_(seed) {
  EMBER_CHECK(n >= 0, "RandomSampler: n must be >= 0, got ", n);
}

std::vector<int64_t> RandomSampler::indices(int64_t epoch) const { return permutation(n_, epoch_seed(seed_, epoch)); }

DistributedSampler::DistributedSampler(int64_t n, int64_t num_replicas, int64_t rank, bool shuffle, uint64_t seed,
                                       bool drop_last)
    : n_(n), num_replicas_(num_replicas), rank_(rank), shuffle_(shuffle), drop_last_(drop_last), seed_(seed) {
  EMBER_CHECK(n >= 0, "DistributedSampler: n must be >= 0, got ", n);
  EMBER_CHECK(num_replicas >= 1, "DistributedSampler: num_replicas must be >= 1, got ", num_replicas);
  EMBER_CHECK(rank >= 0 && rank < num_replicas, "DistributedSampler: rank ", rank, " is out of range for ",
              num_replicas, " replicas");
  per_replica_ = n / num_replicas + (!drop_last && n % num_replicas != 0 ? 1 : 0);  // (n + R - 1) / R could overflow
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const {
  std::vector<int64_t> all;
  if (shuffle_) {
    all = permutation(n_, epoch_seed(seed_, epoch));
  } else {
    all.resize(static_cast<size_t>(n_));
    std::iota(all.begin(), all.end(), int64_t{0});
  }
  // The list padded to per_replica * num_replicas by repeating it from its start (PyTorch's
  // padding: position i holds all[i mod n]), or cut to that length with drop_last; rank r takes
  // positions r, r + R, r + 2R... Computed per position, without building the padded list,
  // which num_replicas far above n would make enormous; mod n, so that nothing overflows.
  std::vector<int64_t> out;
  if (n_ == 0) return out;
  out.reserve(static_cast<size_t>(per_replica_));
  const int64_t step = num_replicas_ % n_;
  for (int64_t j = 0, at = rank_ % n_; j < per_replica_; ++j, at = (at + step) % n_) out.push_back(all[at]);
  return out;
}

}  // namespace ember::data
