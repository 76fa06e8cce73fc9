#pragma once
// ember::cuda — devices, streams, events and CUDA memory, as torch.cuda offers them.
// Queries (is_available, device_count) answer 0 / false, never throw, on a machine without a
// GPU or driver and in a build without CUDA; everything else throws a clear ember::Error there.
#include <cstdint>
#include <memory>
#include <string>

#include "ember/tensor/allocator.h"
#include "ember/tensor/benchmark_stats.h"
#include "ember/tensor/tensor.h"

namespace ember {
namespace cuda {

bool built_with_cuda();
int device_count();
bool is_available();  // built with CUDA and at least one device present

int current_device();
void set_device(int device);
// Waits for all work queued on `device` (-1: the current one).
void synchronize(int device = -1);

struct DeviceProperties {
  std::string name;
  int major = 0, minor = 0;  // compute capability
  int64_t total_memory = 0;  // bytes
  int multiprocessors = 0;
};
DeviceProperties get_device_properties(int device = -1);

// Makes `device` current for a scope (negative: leaves the current device alone).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// A queue of device work. Kernels, copies and the caching allocator use the current stream of
// their device (per thread; the device's default stream until set). Streams from
// Stream::create come from a small per-device pool and live as long as the process, so a
// stream id the allocator has seen never names a different stream later.
class Stream {
 public:
  Stream() = default;                                                         // device 0's default stream
  Stream(uintptr_t handle, int device) : handle_(handle), device_(device) {}  // wraps a cudaStream_t
  static Stream default_stream(int device = -1);
  static Stream create(int device = -1);        // a stream that does not synchronize with the default one
  uintptr_t handle() const { return handle_; }  // the cudaStream_t
  int device() const { return device_; }
  void synchronize() const;
  bool query() const;  // true when all its work is done
  bool operator==(const Stream& o) const { return handle_ == o.handle_ && device_ == o.device_; }
  bool operator!=(const Stream& o) const { return !(*this == o); }

 private:
  uintptr_t handle_ = 0;
  int device_ = 0;
};
Stream current_stream(int device = -1);
void set_current_stream(const Stream& stream);

// Makes `stream` (and its device) current for a scope.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream previous_;
  DeviceGuard device_;
};

// A marker in a stream: wait for it, make another stream wait for it, or time between two.
class Event {
 public:
  explicit Event(bool enable_timing = true);
  void record(const Stream& stream);
  void record();  // on the current stream
  void synchronize() const;
  bool query() const;
  void wait(const Stream& stream) const;  // work queued on `stream` later waits for this event
  float elapsed_ms(const Event& end) const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// The memory of `tensor` is in use by work queued on `stream` (not the stream it was allocated
// on): the caching allocator will not reuse it before that work is done (torch's record_stream).
void record_stream(const Tensor& tensor, const Stream& stream);

// Page-locked host memory (cudaHostAlloc), cached like device memory: what pin_memory() and
// the DataLoader's pin_memory use, so that non-blocking copies to the device are asynchronous.
Allocator* pinned_allocator();
bool is_pinned(const Tensor& tensor);

// The caching allocator's switch (Note [Caching allocator]), on by default: off, every device
// tensor is its own cudaMalloc and cudaFree, as with PyTorch's PYTORCH_NO_CUDA_MEMORY_CACHING=1
// (EMBER_NO_CUDA_MEMORY_CACHING=1 in the environment starts ember that way). The baseline that
// shows what the cache buys; turning it off releases the cache of every device.
void set_memory_caching(bool enabled);
bool memory_caching();

// Copies from a device to the host that waited for the device (item(), cpu(), a blocking
// to(kCPU)), counted since the start: the test hook for code that promises never to wait, as
// the GradScaler's iteration does (0 in a build without CUDA).
int64_t device_to_host_waits();

}  // namespace cuda

namespace backends::cuda {
// TensorFloat-32 for float32 matmuls (torch.backends.cuda.matmul.allow_tf32): faster, with a
// 10-bit mantissa for the products. Off by default.
void set_allow_tf32(bool allow);
bool allow_tf32();
}  // namespace backends::cuda

namespace backends::cudnn {
// Benchmark mode (torch.backends.cudnn.benchmark): time cuDNN's algorithms for each new
// convolution configuration once, cache the fastest, reuse it. Off by default: cuDNN's heuristic.
void set_benchmark(bool benchmark);
bool benchmark();
using BenchmarkStats = backends::BenchmarkStats;
BenchmarkStats benchmark_stats();
void clear_benchmark_cache();
}  // namespace backends::cudnn

}  // namespace ember
