// The caching allocator's logic (Note [Caching allocator]) on a fake device: host memory with a
// capacity, and events the test completes by hand. The same code serves CUDA tensors.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

#include "ember/cuda/caching_allocator.h"
#include "helpers.h"

namespace ember::cuda {
namespace {

constexpr size_t KiB = size_t{1} << 10, MiB = size_t{1} << 20;

class FakeDevice : public DeviceMemory {
 public:
  explicit FakeDevice(size_t capacity = size_t{1} << 30) : capacity_(capacity) {}
  void* malloc(size_t bytes) override {
    if (used_ + bytes > capacity_) return nullptr;
    used_ += bytes;
    ++mallocs;
    void* p = std::malloc(bytes);  // never touched: only addresses matter
    sizes_[p] = bytes;
    return p;
  }
  void free(void* ptr) override {
    used_ -= sizes_.at(ptr);
    sizes_.erase(ptr);
    ++frees;
    std::free(ptr);
  }
  EventId record_event(StreamId stream) override {
    events.push_back({stream, false});
    return events.size();  // ids from 1
  }
  bool event_done(EventId e) override { return events.at(e - 1).done; }
  void wait_event(EventId e) override { events.at(e - 1).done = true; }
  void destroy_event(EventId) override { ++destroyed; }
  std::string name() const override { return "fake device"; }

  struct Event {
    StreamId stream;
    bool done;
  };
  std::vector<Event> events;
  int mallocs = 0, frees = 0, destroyed = 0;

 private:
  size_t capacity_, used_ = 0;
  std::map<void*, size_t> sizes_;
};

char* at(void* p, size_t offset) { return static_cast<char*>(p) + offset; }

TEST(CachingAllocator, RoundingAndSegmentSizes) {
  EXPECT_EQ(CachingAllocator::round_size(1), 512u);
  EXPECT_EQ(CachingAllocator::round_size(512), 512u);
  EXPECT_EQ(CachingAllocator::round_size(513), 1024u);
  EXPECT_EQ(CachingAllocator::segment_size(512), 2 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size(MiB), 2 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size(MiB + 512), 20 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size(10 * MiB), 10 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size(15 * MiB + 512), 16 * MiB);
  EXPECT_ERROR_CONTAINS(CachingAllocator::round_size(SIZE_MAX - 10), "overflows");
}

TEST(CachingAllocator, SmallBlocksSplitOneSegmentAndMergeBack) {
  FakeDevice dev;
  CachingAllocator a(dev);
  void* x = a.allocate(1000, 0);  // 1024 bytes
  void* y = a.allocate(3000, 0);  // 3072
  void* z = a.allocate(512, 0);
  EXPECT_EQ(dev.mallocs, 1);  // one 2 MiB segment serves all three, side by side
  EXPECT_EQ(y, at(x, 1024));
  EXPECT_EQ(z, at(x, 4096));
  MemoryStats s = a.stats();
  EXPECT_EQ(s.current_bytes, 4512);  // exactly what was asked for
  EXPECT_EQ(s.reserved_bytes, static_cast<int64_t>(2 * MiB));
  EXPECT_EQ(s.cached_bytes, static_cast<int64_t>(2 * MiB - 4608));
  EXPECT_EQ(s.system_allocs, 1);
  a.deallocate(y);
  a.deallocate(x);  // merges with y's block: 4096 free bytes at x
  void* w = a.allocate(4096, 0);
  EXPECT_EQ(w, x);
  a.deallocate(w);
  a.deallocate(z);  // the whole segment is one free block again
  s = a.stats();
  EXPECT_EQ(s.current_bytes, 0);
  EXPECT_EQ(s.cached_bytes, static_cast<int64_t>(2 * MiB));
  EXPECT_EQ(s.num_allocs, 4);
  EXPECT_EQ(s.num_frees, 4);
  a.empty_cache();
  EXPECT_EQ(dev.frees, 1);
  EXPECT_EQ(a.stats().reserved_bytes, 0);
}

TEST(CachingAllocator, LargeBlocksBestFitAndSplitOnlyWhenTheRestIsLarge) {
  FakeDevice dev;
  CachingAllocator a(dev);
  void* p = a.allocate(3 * MiB, 0);   // a 20 MiB segment, split: 17 MiB stay free
  void* q = a.allocate(16 * MiB, 0);  // fits the rest: 1 MiB remains, too small to split off
  EXPECT_EQ(dev.mallocs, 1);
  EXPECT_EQ(q, at(p, 3 * MiB));
  EXPECT_EQ(a.stats().cached_bytes, 0);  // the 1 MiB tail went with q's block
  void* r = a.allocate(12 * MiB, 0);     // ≥ 10 MiB: a segment of its own, 12 MiB
  EXPECT_EQ(dev.mallocs, 2);
  EXPECT_EQ(a.stats().reserved_bytes, static_cast<int64_t>(32 * MiB));
  a.deallocate(r);
  void* r2 = a.allocate(11 * MiB, 0);  // the freed 12 MiB block is the best fit; 1 MiB rest stays with it
  EXPECT_EQ(r2, r);
  EXPECT_EQ(dev.mallocs, 2);
  for (void* ptr : {p, q, r2}) a.deallocate(ptr);
}

// The promise of the allocator: a steady loop allocates from the device in its first
// iteration only.
TEST(CachingAllocator, SteadyLoopStopsCallingMallocAfterTheFirstIteration) {
  FakeDevice dev;
  CachingAllocator a(dev);
  const size_t sizes[] = {4 * KiB, 784 * 256 * 4, 300 * KiB, 5 * MiB, 64 * 3 * 224 * 224 * 4 / 8, 12, 13 * MiB};
  int mallocs_after_first = -1;
  for (int iter = 0; iter < 10; ++iter) {
    std::vector<void*> live;
    for (size_t s : sizes) live.push_back(a.allocate(s, 0));          // forward: activations
    for (size_t i = 0; i < 3; ++i) a.deallocate(live[i]);             // some die early
    for (size_t s : sizes) live.push_back(a.allocate(s / 2 + 1, 0));  // backward: gradients
    for (size_t i = 3; i < live.size(); ++i) a.deallocate(live[i]);
    if (iter == 0) mallocs_after_first = dev.mallocs;
  }
  EXPECT_EQ(dev.mallocs, mallocs_after_first);
  EXPECT_EQ(a.stats().current_bytes, 0);
}

TEST(CachingAllocator, BlocksServeOnlyTheirStream) {
  FakeDevice dev;
  CachingAllocator a(dev);
  void* p = a.allocate(4 * KiB, /*stream=*/1);
  a.deallocate(p);
  void* q = a.allocate(4 * KiB, /*stream=*/2);  // stream 1's cached segment is not stream 2's
  EXPECT_EQ(dev.mallocs, 2);
  EXPECT_NE(q, p);
  void* r = a.allocate(4 * KiB, /*stream=*/1);
  EXPECT_EQ(r, p);
  a.deallocate(q);
  a.deallocate(r);
}

TEST(CachingAllocator, RecordStreamDefersReuseUntilTheOtherStreamsWorkIsDone) {
  FakeDevice dev;
  CachingAllocator a(dev);
  void* p = a.allocate(8 * KiB, 1);
  a.record_stream(p, 2);  // a kernel on stream 2 reads it
  a.record_stream(p, 1);  // its own stream: nothing to wait for
  a.deallocate(p);
  ASSERT_EQ(dev.events.size(), 1u);
  EXPECT_EQ(dev.events[0].stream, 2u);
  void* q = a.allocate(8 * KiB, 1);  // p is not free yet: q comes from the rest of the segment
  EXPECT_NE(q, p);
  dev.events[0].done = true;  // stream 2 caught up
  void* r = a.allocate(8 * KiB, 1);
  EXPECT_EQ(r, p);
  EXPECT_EQ(dev.destroyed, 1);
  a.deallocate(q);
  a.deallocate(r);
  EXPECT_ERROR_CONTAINS(a.record_stream(at(p, 1), 2), "not allocated by this CUDA allocator");
}

TEST(CachingAllocator, OutOfMemoryReleasesTheCacheThenNamesTheSizes) {
  FakeDevice dev(40 * MiB);
  CachingAllocator a(dev);
  void* big = a.allocate(12 * MiB, 0);
  a.deallocate(big);                  // 12 MiB cached
  void* p = a.allocate(30 * MiB, 0);  // no room beside the cache: it is released, then it fits
  EXPECT_EQ(dev.frees, 1);
  EXPECT_EQ(a.stats().reserved_bytes, static_cast<int64_t>(30 * MiB));
  try {
    a.allocate(20 * MiB, 0);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("CUDA out of memory on fake device: tried to allocate 20.00 MiB"), std::string::npos) << msg;
    EXPECT_NE(msg.find("30.00 MiB allocated by tensors, 30.00 MiB reserved (0 bytes of it cached)"), std::string::npos)
        << msg;
  }
  a.deallocate(p);
  EXPECT_EQ(a.allocate(0, 0), nullptr);
}

TEST(CachingAllocator, PeaksAndEmptyCacheKeepLiveSegments) {
  FakeDevice dev;
  CachingAllocator a(dev);
  void* p = a.allocate(100, 0);
  void* q = a.allocate(2 * MiB, 0);
  a.deallocate(q);
  MemoryStats s = a.stats();
  EXPECT_EQ(s.peak_bytes, static_cast<int64_t>(2 * MiB + 100));
  EXPECT_EQ(s.peak_reserved_bytes, static_cast<int64_t>(22 * MiB));
  a.empty_cache();  // the 20 MiB segment goes; the small one holds p and stays
  s = a.stats();
  EXPECT_EQ(s.reserved_bytes, static_cast<int64_t>(2 * MiB));
  a.reset_peak();
  EXPECT_EQ(a.stats().peak_bytes, 100);
  EXPECT_EQ(a.stats().peak_reserved_bytes, static_cast<int64_t>(2 * MiB));
  EXPECT_TRUE(a.owns(p));
  a.deallocate(p);
  EXPECT_FALSE(a.owns(p));
}

// Caching off (the baseline of the benchmark): every request a malloc of its rounded size, every
// free a free, except that a block another stream used waits for that stream's event first.
TEST(CachingAllocator, WithCachingOffEveryBlockIsItsOwnSegmentAndGoesBackWhenFreed) {
  FakeDevice dev;
  CachingAllocator a(dev);
  void* kept = a.allocate(1000, 0);  // cached mode: a 2 MiB segment...
  a.deallocate(kept);
  EXPECT_EQ(a.stats().reserved_bytes, static_cast<int64_t>(2 * MiB));
  a.set_caching(false);  // ...released when caching goes off
  EXPECT_FALSE(a.caching());
  EXPECT_EQ(a.stats().reserved_bytes, 0);
  EXPECT_EQ(dev.frees, 1);
  for (int step = 0; step < 3; ++step) {  // a "training step" of two tensors
    void* x = a.allocate(1000, 0);
    void* y = a.allocate(3 * MiB, 0);
    EXPECT_EQ(a.stats().reserved_bytes, static_cast<int64_t>(1024 + 3 * MiB));  // exact rounded sizes
    a.deallocate(x);
    a.deallocate(y);
    EXPECT_EQ(a.stats().reserved_bytes, 0);
  }
  EXPECT_EQ(dev.mallocs, 1 + 6);
  EXPECT_EQ(dev.frees, 1 + 6);
  EXPECT_EQ(a.stats().system_allocs, 7);
  void* shared = a.allocate(4096, 0);
  a.record_stream(shared, 7);
  a.deallocate(shared);
  EXPECT_EQ(dev.frees, 7);  // stream 7 may still read it
  dev.events.back().done = true;
  a.deallocate(a.allocate(512, 0));  // the next call notices the event
  EXPECT_EQ(dev.frees, 9);
  a.set_caching(true);
  a.deallocate(a.allocate(512, 0));
  a.deallocate(a.allocate(512, 0));
  EXPECT_EQ(dev.mallocs, 10);  // cached again: one segment for both
}

}  // namespace
}  // namespace ember::cuda
