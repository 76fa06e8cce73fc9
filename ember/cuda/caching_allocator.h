#pragma once
// The caching allocator behind CUDA tensors (and pinned host memory), written against a small
// memory interface so that its logic runs, and is tested, on machines without a GPU.
//
// Note [Caching allocator]: cudaMalloc and cudaFree synchronize the device and cost
// milliseconds, so a training loop must not call them per tensor. As PyTorch's allocator does:
// - sizes round up to 512 bytes; requests up to 1 MiB come from a small pool of 2 MiB
//   segments, larger ones from a large pool (20 MiB segments for requests under 10 MiB, else
//   the request rounded up to 2 MiB);
// - a free block serves the smallest request it fits (best fit) and is split when the rest is
//   worth keeping (≥ 512 B in the small pool, > 1 MiB in the large one); freed neighbours in
//   one segment merge again;
// - blocks belong to the stream they were allocated on and serve only that stream: work on
//   one stream is ordered, so a block freed there can be handed out again at once even if
//   kernels still read it. A block also used on another stream (record_stream) returns to its
//   pool only after an event recorded on that stream at free time has completed;
// - when the device runs out, the cached segments that are wholly free are released and the
//   allocation retried; then OutOfMemoryError says what was asked, allocated and cached.
// So a steady training loop reaches a state where every request is served from the cache and
// cudaMalloc is never called again.
// With caching off (cuda::set_memory_caching(false), PyTorch's PYTORCH_NO_CUDA_MEMORY_CACHING),
// every request is a cudaMalloc of its rounded size and every free a cudaFree (once the streams
// that used it are done): the baseline that shows what the cache buys.
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ember/tensor/allocator.h"
#include "ember/tensor/error.h"

namespace ember::cuda {

using StreamId =
    uintptr_t;  // a cudaStream_t, or a tag for a device's default stream (cuda/runtime.cpp), or any id in tests
using EventId = uintptr_t;

// Out of device memory: a distinct type, so that a program can catch it and retry smaller.
class OutOfMemoryError : public Error {
 public:
  explicit OutOfMemoryError(const std::string& what) : Error(what) {}
};

// Where the caching allocator gets memory and events: the CUDA runtime, or a fake in tests.
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  virtual void* malloc(size_t bytes) = 0;  // nullptr when the device is out of memory
  virtual void free(void* ptr) = 0;
  virtual EventId record_event(StreamId stream) = 0;  // completes after the work queued so far
  virtual bool event_done(EventId event) = 0;
  virtual void wait_event(EventId event) = 0;  // blocks the host until it completes
  virtual void destroy_event(EventId event) = 0;
  virtual std::string name() const = 0;  // "CUDA device 0", for error messages
};

class CachingAllocator {
 public:
  static constexpr size_t kRound = 512;                      // every size is a multiple of this
  static constexpr size_t kSmallRequest = size_t{1} << 20;   // up to here: the small pool
  static constexpr size_t kSmallSegment = size_t{2} << 20;   // small pool segments
  static constexpr size_t kLargeSegment = size_t{20} << 20;  // for large requests under 10 MiB
  static constexpr size_t kMinLargeAlone = size_t{10} << 20;
  static constexpr size_t kRoundLarge = size_t{2} << 20;  // segments of big requests round to this

  explicit CachingAllocator(DeviceMemory& memory) : memory_(memory) {}
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  static size_t round_size(size_t nbytes);
  static size_t segment_size(size_t rounded);

  // nullptr for 0 bytes; OutOfMemoryError when the device has no room even after the cache is released.
  void* allocate(size_t nbytes, StreamId stream);
  void deallocate(void* ptr);
  // `ptr`'s block is used by work queued on `stream` too: freeing it waits for that work.
  void record_stream(void* ptr, StreamId stream);
  bool owns(void* ptr) const;
  // Releases every cached segment that is wholly free (after waiting for pending events).
  void empty_cache();
  // Off: no pools, every block its own segment, returned to the device when freed. Turning it
  // off releases the cache; blocks split earlier return to their pools as before.
  void set_caching(bool enabled);
  bool caching() const;

  // current_bytes: bytes asked for by live allocations (exact); reserved_bytes: bytes of all
  // segments; cached_bytes: bytes of free blocks; system_allocs: calls to the device's malloc.
  MemoryStats stats() const;
  void reset_peak();

 private:
  struct Block {
    Block(void* p, size_t s, StreamId st, bool sm) : ptr(p), size(s), stream(st), small(sm) {}
    void* ptr;
    size_t size;
    StreamId stream;
    bool small;
    bool allocated = false;
    size_t requested = 0;
    int pending_events = 0;
    Block* prev = nullptr;  // neighbours within one segment
    Block* next = nullptr;
    std::set<StreamId> stream_uses;  // streams other than `stream` that used it
  };
  // Pools order blocks by (stream, size, address): the best fit for a stream is a lower_bound.
  struct BlockOrder {
    bool operator()(const Block* a, const Block* b) const;
  };
  using Pool = std::set<Block*, BlockOrder>;

  Pool& pool_of(const Block* b) { return b->small ? small_pool_ : large_pool_; }
  Block* find_free_block(size_t size, StreamId stream);
  Block* new_segment(size_t size, StreamId stream, size_t nbytes);
  void split(Block* block, size_t size);
  void release_to_pool(Block* block);  // merges with free neighbours
  void process_events(bool wait);
  void release_free_segments();
  std::string usage() const;  // "N allocated, M reserved (K cached)"; the caller holds the mutex

  DeviceMemory& memory_;
  mutable std::mutex mutex_;
  Pool small_pool_, large_pool_;
  std::unordered_map<void*, Block*> live_;
  std::vector<std::pair<EventId, Block*>> pending_;
  MemoryStats stats_;
  int64_t allocated_block_bytes_ = 0;  // sizes of allocated blocks (rounded)
  bool caching_ = true;
};

// "1.50 MiB": sizes in error messages.
std::string format_bytes(size_t bytes);

}  // namespace ember::cuda
