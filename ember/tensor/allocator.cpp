#include "ember/tensor/allocator.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <vector>

#include "ember/tensor/backend.h"
#include "ember/tensor/error.h"

namespace ember {
namespace {

constexpr size_t kAlignment = 64;
// Blocks of 64 KiB and more are cached. glibc serves blocks above its mmap threshold (128 KiB
// at first, then adapting to what the program frees) with fresh mmaps and returns them on
// free; caching from 64 KiB keeps a training loop's activations out of that heuristic, so
// a steady loop makes no system allocations whatever ran before it. When a freed block would
// take the idle blocks past the limit, the longest idle ones go back to the system first: sizes
// that ran before (a float32 phase before a bfloat16 one, another batch size) make room for the
// loop that runs now, instead of filling the cache for good and sending each of its blocks to
// fresh pages (a page-faulted 16 MiB block costs some milliseconds).
constexpr size_t kCacheMinBlock = size_t{64} << 10;
constexpr size_t kPageGranule = size_t{4} << 10;    // cached sizes below 1 MiB round up to 4 KiB
constexpr size_t kLargeGranule = size_t{64} << 10;  // and from 1 MiB up to 64 KiB
constexpr size_t kCacheLimit = size_t{512} << 20;   // at most this much kept idle

class CpuAllocator final : public Allocator {
 public:
  ~CpuAllocator() override { empty_cache(); }

  void* allocate(size_t nbytes) override {
    if (nbytes == 0) return nullptr;
    const size_t block = block_size(nbytes);
    void* ptr = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (block >= kCacheMinBlock) {
        auto it = by_size_.find(block);
        if (it != by_size_.end()) {
          ptr = it->second.ptr;
          by_age_.erase(it->second.freed_at);
          by_size_.erase(it);
          stats_.cached_bytes -= static_cast<int64_t>(block);
        }
      }
    }
    if (!ptr) {
      ptr = std::aligned_alloc(kAlignment, block);
      EMBER_CHECK(ptr != nullptr, "CPU allocator: out of memory allocating ", nbytes, " bytes");
      std::lock_guard<std::mutex> lock(mutex_);
      ++stats_.system_allocs;
      stats_.reserved_bytes += static_cast<int64_t>(block);
      stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.num_allocs;
    stats_.current_bytes += static_cast<int64_t>(nbytes);
    stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.current_bytes);
    return ptr;
  }

  void deallocate(void* ptr, size_t nbytes) override {
    if (!ptr) return;
    const size_t block = block_size(nbytes);
    std::vector<void*> released;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++stats_.num_frees;
      stats_.current_bytes -= static_cast<int64_t>(nbytes);
      if (block >= kCacheMinBlock && block <= kCacheLimit) {
        while (static_cast<size_t>(stats_.cached_bytes) + block > kCacheLimit) {  // the longest idle first
          const auto oldest = by_age_.begin()->second;
          released.push_back(oldest->second.ptr);
          stats_.cached_bytes -= static_cast<int64_t>(oldest->first);
          stats_.reserved_bytes -= static_cast<int64_t>(oldest->first);
          by_size_.erase(oldest);
          by_age_.erase(by_age_.begin());
        }
        const uint64_t now = clock_++;
        by_age_.emplace(now, by_size_.emplace(block, Idle{ptr, now}));
        stats_.cached_bytes += static_cast<int64_t>(block);
      } else {
        stats_.reserved_bytes -= static_cast<int64_t>(block);
        released.push_back(ptr);
      }
    }
    for (void* p : released) std::free(p);
  }

  MemoryStats stats() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }
  void reset_peak() override {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.peak_bytes = stats_.current_bytes;
    stats_.peak_reserved_bytes = stats_.reserved_bytes;
  }
  void empty_cache() override {
    std::multimap<size_t, Idle> idle;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      idle.swap(by_size_);
      by_age_.clear();
      stats_.reserved_bytes -= stats_.cached_bytes;
      stats_.cached_bytes = 0;
    }
    for (auto& kv : idle) std::free(kv.second.ptr);
  }

 private:
  // aligned_alloc wants a multiple of the alignment; cached blocks use a coarser granule
  // so that nearby sizes share blocks.
  static size_t block_size(size_t nbytes) {
    const size_t g = nbytes >= (size_t{1} << 20) ? kLargeGranule : nbytes >= kCacheMinBlock ? kPageGranule : kAlignment;
    EMBER_CHECK(nbytes <= SIZE_MAX - g, "CPU allocator: size ", nbytes, " overflows");
    return (nbytes + g - 1) / g * g;
  }

  // The idle blocks by size, to reuse one, and by when they were freed, to release the stalest.
  struct Idle {
    void* ptr;
    uint64_t freed_at;
  };
  mutable std::mutex mutex_;
  MemoryStats stats_;
  std::multimap<size_t, Idle> by_size_;
  std::map<uint64_t, std::multimap<size_t, Idle>::iterator> by_age_;
  uint64_t clock_ = 0;
};

}  // namespace

Allocator* cpu_allocator() {
  static CpuAllocator* instance = new CpuAllocator();  // never destroyed: tensors may outlive main()
  return instance;
}

Allocator* allocator_for(Device device) { return backend(device).allocator(device.index); }

namespace memory {
MemoryStats stats(Device device) { return allocator_for(device)->stats(); }
void reset_peak(Device device) { allocator_for(device)->reset_peak(); }
void empty_cache(Device device) { allocator_for(device)->empty_cache(); }
}  // namespace memory

}  // namespace ember
