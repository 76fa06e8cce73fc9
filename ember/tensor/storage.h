#pragma once
// A Storage is one block of device memory shared by a tensor and all its views.
#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>

#include "ember/tensor/allocator.h"
#include "ember/tensor/device.h"

namespace ember {

class StorageImpl {
 public:
  // Memory from `allocator`, returned to it on destruction.
  StorageImpl(size_t nbytes, Device device, Allocator* allocator)
      : data_(allocator->allocate(nbytes)), nbytes_(nbytes), device_(device), allocator_(allocator) {}
  // Borrowed memory (from_blob): `deleter`, when given, runs on destruction.
  StorageImpl(void* data, size_t nbytes, Device device, std::function<void(void*)> deleter)
      : data_(data), nbytes_(nbytes), device_(device), deleter_(std::move(deleter)) {}
  ~StorageImpl() {
    if (allocator_)
      allocator_->deallocate(data_, nbytes_);
    else if (deleter_)
      deleter_(data_);
  }
  StorageImpl(const StorageImpl&) = delete;
  StorageImpl& operator=(const StorageImpl&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  Allocator* allocator() const { return allocator_; }  // nullptr for borrowed memory
  // Note [Version counter]: every in-place write to this storage bumps it, so that a
  // tensor saved for backward can tell it was modified afterwards (autograd/node.h).
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> version_{0};
  void* data_;
  size_t nbytes_;
  Device device_;
  Allocator* allocator_ = nullptr;
  std::function<void(void*)> deleter_;
};

using Storage = std::shared_ptr<StorageImpl>;

}  // namespace ember
