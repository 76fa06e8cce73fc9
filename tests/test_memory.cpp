// Allocator counters are exact: they count the bytes tensors asked for, nothing else.
#include "helpers.h"

namespace ember {
namespace {

TEST(Memory, ExactByteCounts) {
  const MemoryStats before = memory::stats(kCPU);
  {
    Tensor a = empty({10, 10});       // 400 bytes
    Tensor b = zeros({3}, kFloat64);  // 24 bytes
    Tensor c = ones({7}, kFloat16);   // 14 bytes
    const MemoryStats s = memory::stats(kCPU);
    EXPECT_EQ(s.current_bytes - before.current_bytes, 400 + 24 + 14);
    EXPECT_EQ(s.num_allocs - before.num_allocs, 3);
    Tensor v = a.view({100}).slice(0, 10, 20).t();  // views allocate nothing
    Tensor e = a.expand({10, 10});
    EXPECT_EQ(memory::stats(kCPU).current_bytes - before.current_bytes, 438);
    EXPECT_EQ(memory::stats(kCPU).num_allocs - before.num_allocs, 3);
  }
  const MemoryStats after = memory::stats(kCPU);
  EXPECT_EQ(after.current_bytes, before.current_bytes);
  EXPECT_EQ(after.num_frees - before.num_frees, 3);
}

TEST(Memory, PeakAndReset) {
  memory::reset_peak(kCPU);
  const int64_t base = memory::stats(kCPU).current_bytes;
  EXPECT_EQ(memory::stats(kCPU).peak_bytes, base);
  {
    Tensor big = empty({1 << 20});    // 4 MiB
    Tensor sum = big.fill_(1).sum();  // + one float for the result
    EXPECT_EQ(memory::stats(kCPU).peak_bytes, base + (4 << 20) + 4);
  }
  EXPECT_EQ(memory::stats(kCPU).peak_bytes, base + (4 << 20) + 4);  // the peak stays
  memory::reset_peak(kCPU);
  EXPECT_EQ(memory::stats(kCPU).peak_bytes, base);
}

TEST(Memory, LargeBlocksAreCachedNotCounted) {
  memory::empty_cache(kCPU);
  EXPECT_EQ(memory::stats(kCPU).cached_bytes, 0);
  const int64_t base = memory::stats(kCPU).current_bytes;
  { Tensor a = empty({1 << 20}); }  // 4 MiB block goes to the cache
  const MemoryStats s1 = memory::stats(kCPU);
  EXPECT_EQ(s1.current_bytes, base);
  EXPECT_EQ(s1.cached_bytes, 4 << 20);
  // A steady loop of allocating ops reuses the block: no new system allocations.
  Tensor x = ones({1 << 20});
  { Tensor warm_up = x + x; }
  const int64_t sys_before = memory::stats(kCPU).system_allocs;
  for (int i = 0; i < 10; ++i) Tensor y = x + x;
  EXPECT_EQ(memory::stats(kCPU).system_allocs, sys_before);
  memory::empty_cache(kCPU);
  EXPECT_EQ(memory::stats(kCPU).cached_bytes, 0);
}

// Regression: the cache kept whatever it held first. Once idle blocks of sizes that no longer
// ran filled it (a float32 phase before a bfloat16 one: bench/amp_report's layer_norm rows),
// each block of the loop that ran then went to the system and came back page-faulted, every
// step. Now the longest idle blocks make room.
TEST(Memory, ACacheFullOfOldSizesMakesRoomForTheLoopThatRunsNow) {
  memory::empty_cache(kCPU);
  const int64_t in_use = memory::stats(kCPU).reserved_bytes;  // by tensors that live elsewhere
  {
    std::vector<Tensor> old;
    for (int i = 0; i < 8; ++i) old.push_back(empty({16 << 20}));  // 8 x 64 MiB: the 512 MiB limit
  }
  EXPECT_EQ(memory::stats(kCPU).cached_bytes, int64_t{512} << 20);
  const Tensor x = ones({4 << 20});  // 16 MiB
  { Tensor warm_up = x + x; }
  EXPECT_EQ(memory::stats(kCPU).cached_bytes, (int64_t{448} + 16) << 20) << "one old block released";
  const int64_t sys_before = memory::stats(kCPU).system_allocs;
  for (int i = 0; i < 10; ++i) Tensor y = x + x;
  EXPECT_EQ(memory::stats(kCPU).system_allocs, sys_before);
  const MemoryStats s = memory::stats(kCPU);
  EXPECT_EQ(s.reserved_bytes - s.cached_bytes - in_use, int64_t{16} << 20) << "x alone in use";
  memory::empty_cache(kCPU);
  EXPECT_EQ(memory::stats(kCPU).reserved_bytes - in_use, int64_t{16} << 20);
}

// Regression: mid-size blocks (64 KiB .. 1 MiB, the activations of a small CNN) were not
// cached, so glibc mmapped and page-faulted them in again on every training step.
TEST(Memory, MidSizeBlocksAreCachedTooBelowThatMalloc) {
  memory::empty_cache(kCPU);
  const Tensor x = ones({100 * 1024 / 4});  // 100 KiB: glibc would mmap it
  { Tensor warm_up = x * 2; }
  EXPECT_EQ(memory::stats(kCPU).cached_bytes, 100 << 10);  // a multiple of 4 KiB, kept whole
  const int64_t sys_before = memory::stats(kCPU).system_allocs;
  for (int i = 0; i < 10; ++i) Tensor y = x * 2;
  EXPECT_EQ(memory::stats(kCPU).system_allocs, sys_before);
  { Tensor small = ones({1000}); }  // 4000 bytes: left to malloc, never cached
  EXPECT_EQ(memory::stats(kCPU).cached_bytes, 100 << 10);
  memory::empty_cache(kCPU);
}

TEST(Memory, FromBlobIsNotCounted) {
  std::vector<float> buf(1000);
  const int64_t base = memory::stats(kCPU).current_bytes;
  Tensor t = from_blob(buf.data(), {1000});
  EXPECT_EQ(memory::stats(kCPU).current_bytes, base);
  Tensor c = t.clone();  // a copy is
  EXPECT_EQ(memory::stats(kCPU).current_bytes, base + 4000);
}

TEST(Memory, EmptyTensorsAllocateNothing) {
  const MemoryStats before = memory::stats(kCPU);
  Tensor a = empty({0, 100});
  EXPECT_EQ(memory::stats(kCPU).num_allocs, before.num_allocs);
  EXPECT_EQ(a.data_ptr(), nullptr);
}

}  // namespace
}  // namespace ember
