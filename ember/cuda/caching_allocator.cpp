#include "ember/cuda/caching_allocator.h"

#include <algorithm>
#include <cstdio>
#include <tuple>

namespace ember::cuda {

std::string format_bytes(size_t bytes) {
  char buf[32];
  const double b = static_cast<double>(bytes);
  if (bytes >= (size_t{1} << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1 << 30));
  else if (bytes >= (size_t{1} << 20))
    std::snprintf(buf, sizeof buf, "%.2f MiB", b / (1 << 20));
  else if (bytes >= (size_t{1} << 10))
    std::snprintf(buf, sizeof buf, "%.2f KiB", b / (1 << 10));
  else
    std::snprintf(buf, sizeof buf, "%zu bytes", bytes);
  return buf;
}

bool CachingAllocator::BlockOrder::operator()(const Block* a, const Block* b) const {
  return std::make_tuple(a->stream, a->size, reinterpret_cast<uintptr_t>(a->ptr)) <
         std::make_tuple(b->stream, b->size, reinterpret_cast<uintptr_t>(b->ptr));
}

size_t CachingAllocator::round_size(size_t nbytes) {
  EMBER_CHECK(nbytes <= SIZE_MAX - kRoundLarge, "CUDA allocator: a request of ", nbytes, " bytes overflows");
  return nbytes < kRound ? kRound : (nbytes + kRound - 1) / kRound * kRound;
}

size_t CachingAllocator::segment_size(size_t rounded) {
  if (rounded <= kSmallRequest) return kSmallSegment;
  if (rounded < kMinLargeAlone) return kLargeSegment;
  return (rounded + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

CachingAllocator::~CachingAllocator() {
  // Live blocks belong to tensors that outlive the allocator (process exit); only the cache goes.
  try {
    empty_cache();
  } catch (...) {
  }
}

void* CachingAllocator::allocate(size_t nbytes, StreamId stream) {
  if (nbytes == 0) return nullptr;
  const size_t size = round_size(nbytes);
  std::lock_guard<std::mutex> lock(mutex_);
  process_events(/*wait=*/false);
  Block* block = caching_ ? find_free_block(size, stream) : nullptr;
  if (block) {
    pool_of(block).erase(block);
  } else {
    block = new_segment(size, stream, nbytes);
  }
  if (caching_) split(block, size);
  block->allocated = true;
  block->requested = nbytes;
  live_.emplace(block->ptr, block);
  ++stats_.num_allocs;
  stats_.current_bytes += static_cast<int64_t>(nbytes);
  stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.current_bytes);
  allocated_block_bytes_ += static_cast<int64_t>(block->size);
  return block->ptr;
}

CachingAllocator::Block* CachingAllocator::find_free_block(size_t size, StreamId stream) {
  Pool& pool = size <= kSmallRequest ? small_pool_ : large_pool_;
  Block key(nullptr, size, stream, size <= kSmallRequest);
  auto it = pool.lower_bound(&key);
  if (it == pool.end() || (*it)->stream != stream) return nullptr;
  return *it;
}

CachingAllocator::Block* CachingAllocator::new_segment(size_t size, StreamId stream, size_t nbytes) {
  const size_t bytes = caching_ ? segment_size(size) : size;
  void* ptr = memory_.malloc(bytes);
  if (!ptr) {  // give the device back what the cache holds, then try once more
    process_events(/*wait=*/true);
    release_free_segments();
    ptr = memory_.malloc(bytes);
  }
  if (!ptr)
    throw OutOfMemoryError(detail::concat("CUDA out of memory on ", memory_.name(), ": tried to allocate ",
                                          format_bytes(nbytes), " (a segment of ", format_bytes(bytes), "); ", usage(),
                                          ". Smaller batches or empty_cache() may help."));
  ++stats_.system_allocs;
  stats_.reserved_bytes += static_cast<int64_t>(bytes);
  stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  return new Block{ptr, bytes, stream, size <= kSmallRequest};
}

void CachingAllocator::split(Block* block, size_t size) {
  const size_t rest = block->size - size;
  const bool worth_it = block->small ? rest >= kRound : rest > kSmallRequest;
  if (!worth_it) return;
  auto* remainder = new Block{static_cast<char*>(block->ptr) + size, rest, block->stream, block->small};
  remainder->prev = block;
  remainder->next = block->next;
  if (block->next) block->next->prev = remainder;
  block->next = remainder;
  block->size = size;
  pool_of(remainder).insert(remainder);
}

void CachingAllocator::deallocate(void* ptr) {
  if (!ptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(ptr);
  EMBER_ASSERT(it != live_.end(), "CUDA allocator: free of a pointer it did not allocate");
  Block* block = it->second;
  live_.erase(it);
  ++stats_.num_frees;
  stats_.current_bytes -= static_cast<int64_t>(block->requested);
  allocated_block_bytes_ -= static_cast<int64_t>(block->size);
  block->allocated = false;
  block->requested = 0;
  if (!block->stream_uses.empty()) {  // other streams may still read it: wait for their work
    for (StreamId s : block->stream_uses) {
      pending_.emplace_back(memory_.record_event(s), block);
      ++block->pending_events;
    }
    block->stream_uses.clear();
    return;
  }
  release_to_pool(block);
}

void CachingAllocator::release_to_pool(Block* block) {
  if (!caching_ && !block->prev && !block->next) {  // a whole segment: straight back to the device
    memory_.free(block->ptr);
    stats_.reserved_bytes -= static_cast<int64_t>(block->size);
    delete block;
    return;
  }
  Pool& pool = pool_of(block);
  auto free_neighbour = [](const Block* b) { return b && !b->allocated && b->pending_events == 0; };
  if (free_neighbour(block->prev)) {  // absorb the previous block into this one's place
    Block* prev = block->prev;
    pool.erase(prev);
    prev->size += block->size;
    prev->next = block->next;
    if (block->next) block->next->prev = prev;
    delete block;
    block = prev;
  }
  if (free_neighbour(block->next)) {
    Block* next = block->next;
    pool.erase(next);
    block->size += next->size;
    block->next = next->next;
    if (next->next) next->next->prev = block;
    delete next;
  }
  pool.insert(block);
}

void CachingAllocator::process_events(bool wait) {
  std::vector<std::pair<EventId, Block*>> still;
  for (auto& [event, block] : pending_) {
    if (wait)
      memory_.wait_event(event);
    else if (!memory_.event_done(event)) {
      still.emplace_back(event, block);
      continue;
    }
    memory_.destroy_event(event);
    if (--block->pending_events == 0) release_to_pool(block);
  }
  pending_.swap(still);
}

void CachingAllocator::release_free_segments() {
  for (Pool* pool : {&small_pool_, &large_pool_}) {
    for (auto it = pool->begin(); it != pool->end();) {
      Block* b = *it;
      if (b->prev || b->next) {  // part of a segment still in use
        ++it;
        continue;
      }
      memory_.free(b->ptr);
      stats_.reserved_bytes -= static_cast<int64_t>(b->size);
      it = pool->erase(it);
      delete b;
    }
  }
}

void CachingAllocator::record_stream(void* ptr, StreamId stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(ptr);
  EMBER_CHECK(it != live_.end(), "record_stream: the memory was not allocated by this CUDA allocator");
  if (stream != it->second->stream) it->second->stream_uses.insert(stream);
}

bool CachingAllocator::owns(void* ptr) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return live_.count(ptr) != 0;
}

void CachingAllocator::set_caching(bool enabled) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    caching_ = enabled;
  }
  if (!enabled) empty_cache();
}

bool CachingAllocator::caching() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return caching_;
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  process_events(/*wait=*/true);
  release_free_segments();
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  MemoryStats s = stats_;
  s.cached_bytes = s.reserved_bytes - allocated_block_bytes_;
  return s;
}

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_bytes = stats_.current_bytes;
  stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

std::string CachingAllocator::usage() const {
  const auto allocated = static_cast<size_t>(stats_.current_bytes);
  const auto reserved = static_cast<size_t>(stats_.reserved_bytes);
  const auto cached = static_cast<size_t>(stats_.reserved_bytes - allocated_block_bytes_);
  return detail::concat(format_bytes(allocated), " allocated by tensors, ", format_bytes(reserved), " reserved (",
                        format_bytes(cached), " of it cached)");
}

}  // namespace ember::cuda
