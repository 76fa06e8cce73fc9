#pragma once
// Random numbers. Note [Philox streams]: ember draws every random number from one
// counter-based generator, Philox4x32-10 (Salmon et al., SC'11). A draw is a pure
// function of (seed, counter), so kernels fill any element independently (in parallel,
// on any device) and the CUDA back end reproduces the CPU's numbers for the same seed.
// The generator only hands out counter ranges: each op reserves the blocks it uses.
#include <array>
#include <cstdint>
#include <mutex>

// The Philox functions compile for the device too (cuda/*.cu): one stream of numbers for both.
#if defined(__CUDACC__)
#define EMBER_HOST_DEVICE __host__ __device__
#else
#define EMBER_HOST_DEVICE
#endif

namespace ember {

// One Philox4x32-10 block: 4 random 32-bit words for (key = seed, counter = block, 0).
EMBER_HOST_DEVICE inline std::array<uint32_t, 4> philox4x32(uint64_t seed, uint64_t block) {
  uint32_t c0 = static_cast<uint32_t>(block), c1 = static_cast<uint32_t>(block >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t{0xD2511F53u} * c0;
    const uint64_t p1 = uint64_t{0xCD9E8D57u} * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {c0, c1, c2, c3};
}

// [0, 1) from 24 random bits (exact in float) or 53 bits (exact in double).
EMBER_HOST_DEVICE inline float uniform_float(uint32_t x) { return static_cast<float>(x >> 8) * (1.0f / 16777216.0f); }
EMBER_HOST_DEVICE inline double uniform_double(uint32_t hi, uint32_t lo) {
  return static_cast<double>(((uint64_t{hi} << 32) | lo) >> 11) * (1.0 / 9007199254740992.0);
}

class Generator {
 public:
  explicit Generator(uint64_t seed = 67280421310721ULL) : seed_(seed) {}
  void manual_seed(uint64_t seed) {
    std::lock_guard<std::mutex> lock(mutex_);
    seed_ = seed;
    offset_ = 0;
  }
  uint64_t seed() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return seed_;
  }
  // The next block to hand out: with seed(), the generator's whole state (checkpoints save it,
  // so a resumed run draws the same dropout masks as one never stopped).
  uint64_t offset() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return offset_;
  }
  void set_state(uint64_t seed, uint64_t offset) {
    std::lock_guard<std::mutex> lock(mutex_);
    seed_ = seed;
    offset_ = offset;
  }
  // Reserves `blocks` Philox blocks; returns (seed, first block).
  std::pair<uint64_t, uint64_t> reserve(uint64_t blocks) {
    std::lock_guard<std::mutex> lock(mutex_);
    const uint64_t first = offset_;
    offset_ += blocks;
    return {seed_, first};
  }

 private:
  mutable std::mutex mutex_;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

// The process-wide generator used by rand/randn/randint/randperm and, later, dropout and init.
Generator& default_generator();
void manual_seed(uint64_t seed);

}  // namespace ember
