#pragma once
// Allocators and their counters. Note [Exact memory counters]: current_bytes counts
// exactly the bytes tensors asked for and still hold (not rounding, not the cache), so
// tests can assert byte counts and later issues can show what an optimization saves.
#include <cstddef>
#include <cstdint>

#include "ember/tensor/device.h"

namespace ember {

struct MemoryStats {
  int64_t current_bytes = 0;        // bytes held by live allocations
  int64_t peak_bytes = 0;           // maximum of current_bytes since the last reset_peak
  int64_t num_allocs = 0;           // allocate() calls that returned memory
  int64_t num_frees = 0;            // deallocate() calls
  int64_t cached_bytes = 0;         // bytes kept by the allocator's cache, not held by anyone
  int64_t system_allocs = 0;        // allocations that went to the system (cache misses)
  int64_t reserved_bytes = 0;       // bytes the allocator holds from the system: in use (rounded) + cached
  int64_t peak_reserved_bytes = 0;  // maximum of reserved_bytes since the last reset_peak
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Returns nullptr for 0 bytes; throws ember::Error when memory cannot be had.
  virtual void* allocate(size_t nbytes) = 0;
  virtual void deallocate(void* ptr, size_t nbytes) = 0;
  virtual MemoryStats stats() const = 0;
  virtual void reset_peak() = 0;
  virtual void empty_cache() = 0;
  // Page-locked host memory (Tensor::is_pinned): copies from it to a GPU can be asynchronous.
  virtual bool is_pinned_host() const { return false; }
};

// The host allocator: 64-byte aligned memory, and a small cache of large blocks so that
// a steady loop of allocating ops does not pay for fresh pages on every call.
Allocator* cpu_allocator();
// The allocator for `device`: its back end's (Note [Back-end registry]).
Allocator* allocator_for(Device device);

namespace memory {
MemoryStats stats(Device device = kCPU);
void reset_peak(Device device = kCPU);
void empty_cache(Device device = kCPU);
}  // namespace memory

}  // namespace ember
