// Devices, streams, events and memory through the CUDA runtime (CUDA builds; the host compiler
// builds this file, only kernels go through nvcc).
#include <array>
#include <atomic>
#include <cstdlib>
#include <mutex>

#include "ember/cuda/caching_allocator.h"
#include "ember/cuda/check.h"
#include "ember/cuda/cuda.h"
#include "ember/cuda/internal.h"

namespace ember {

namespace detail {
void throw_cuda_error(cudaError_t error, const char* statement, const char* file, int line) {
  cudaGetLastError();  // clear the error unless it is sticky (then the context is lost anyway)
  const std::string where = concat(" in '", statement, "' at ", file, ":", line);
  if (error == cudaErrorMemoryAllocation)
    throw cuda::OutOfMemoryError(concat("CUDA out of memory: ", cudaGetErrorString(error), where));
  throw Error(concat("CUDA error ", cudaGetErrorName(error), ": ", cudaGetErrorString(error), where));
}
}  // namespace detail

namespace cuda {
using ::ember::detail::concat;

namespace {
constexpr int kMaxDevices = 64;
constexpr int kStreamsPerDevice = 8;

int checked_device(int device, const char* what) {
  const int n = device_count();
  EMBER_CHECK(n > 0, what, ": no CUDA device is available (no GPU or no driver)");
  if (device < 0) {
    EMBER_CUDA_CHECK(cudaGetDevice(&device));
    return device;
  }
  EMBER_CHECK(device < n && device < kMaxDevices, what, ": CUDA device ", device, " does not exist (", n,
              " device(s))");
  return device;
}
}  // namespace

int device_count() {
  static const int count = [] {
    int n = 0;
    // No driver or no device is an answer (0), not an error.
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return n;
  }();
  return count;
}
bool is_available() { return device_count() > 0; }
bool built_with_cuda() { return true; }

int current_device() { return checked_device(-1, "current_device"); }
void set_device(int device) { EMBER_CUDA_CHECK(cudaSetDevice(checked_device(device, "set_device"))); }

void synchronize(int device) {
  DeviceGuard guard(checked_device(device, "synchronize"));
  EMBER_CUDA_CHECK(cudaDeviceSynchronize());
}

DeviceProperties get_device_properties(int device) {
  cudaDeviceProp p{};
  EMBER_CUDA_CHECK(cudaGetDeviceProperties(&p, checked_device(device, "get_device_properties")));
  return {p.name, p.major, p.minor, static_cast<int64_t>(p.totalGlobalMem), p.multiProcessorCount};
}

DeviceGuard::DeviceGuard(int device) {
  if (device < 0) return;
  EMBER_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ == device)
    previous_ = -1;  // nothing to restore
  else
    EMBER_CUDA_CHECK(cudaSetDevice(device));
}
DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0) cudaSetDevice(previous_);
}

// ---- streams ----------------------------------------------------------------

namespace {
thread_local std::array<uintptr_t, kMaxDevices> current_streams{};  // 0: the legacy default stream

struct StreamPool {
  std::once_flag created;
  std::array<cudaStream_t, kStreamsPerDevice> streams{};
  std::atomic<unsigned> next{0};
};
StreamPool stream_pools[kMaxDevices];
}  // namespace

Stream Stream::default_stream(int device) { return Stream(0, checked_device(device, "Stream::default_stream")); }

Stream Stream::create(int device) {
  device = checked_device(device, "Stream::create");
  StreamPool& pool = stream_pools[device];
  std::call_once(pool.created, [&] {
    DeviceGuard guard(device);
    for (cudaStream_t& s : pool.streams) EMBER_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  });
  return Stream(reinterpret_cast<uintptr_t>(pool.streams[pool.next++ % kStreamsPerDevice]), device);
}

void Stream::synchronize() const {
  DeviceGuard guard(device_);
  EMBER_CUDA_CHECK(cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(handle_)));
}

bool Stream::query() const {
  DeviceGuard guard(device_);
  const cudaError_t e = cudaStreamQuery(reinterpret_cast<cudaStream_t>(handle_));
  if (e == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  EMBER_CUDA_CHECK(e);
  return true;
}

Stream current_stream(int device) {
  device = checked_device(device, "current_stream");
  return Stream(current_streams[device], device);
}
void set_current_stream(const Stream& stream) {
  current_streams[checked_device(stream.device(), "set_current_stream")] = stream.handle();
}
cudaStream_t stream_handle(int device) { return reinterpret_cast<cudaStream_t>(current_streams[device]); }

StreamGuard::StreamGuard(const Stream& stream) : previous_(current_stream(stream.device())), device_(stream.device()) {
  set_current_stream(stream);
}
StreamGuard::~StreamGuard() { current_streams[previous_.device()] = previous_.handle(); }

// ---- events -----------------------------------------------------------------

struct Event::Impl {
  cudaEvent_t event = nullptr;  // created on the first record, on the stream's device
  int device = -1;
  bool timing = true;
  ~Impl() {
    if (event) {
      DeviceGuard guard(device);
      cudaEventDestroy(event);
    }
  }
};

Event::Event(bool enable_timing) : impl_(std::make_shared<Impl>()) { impl_->timing = enable_timing; }

void Event::record(const Stream& stream) {
  DeviceGuard guard(stream.device());
  if (!impl_->event) {
    EMBER_CUDA_CHECK(
        cudaEventCreateWithFlags(&impl_->event, impl_->timing ? cudaEventDefault : cudaEventDisableTiming));
    impl_->device = stream.device();
  }
  EMBER_CHECK(impl_->device == stream.device(), "Event::record: the event belongs to cuda:", impl_->device,
              ", the stream to cuda:", stream.device());
  EMBER_CUDA_CHECK(cudaEventRecord(impl_->event, reinterpret_cast<cudaStream_t>(stream.handle())));
}
void Event::record() { record(current_stream()); }

void Event::synchronize() const {
  if (impl_->event) EMBER_CUDA_CHECK(cudaEventSynchronize(impl_->event));
}

bool Event::query() const {
  if (!impl_->event) return true;  // never recorded: nothing to wait for, as in PyTorch
  const cudaError_t e = cudaEventQuery(impl_->event);
  if (e == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  EMBER_CUDA_CHECK(e);
  return true;
}

void Event::wait(const Stream& stream) const {
  if (!impl_->event) return;
  DeviceGuard guard(stream.device());
  EMBER_CUDA_CHECK(cudaStreamWaitEvent(reinterpret_cast<cudaStream_t>(stream.handle()), impl_->event, 0));
}

float Event::elapsed_ms(const Event& end) const {
  EMBER_CHECK(impl_->event && end.impl_->event, "Event::elapsed_ms: both events must have been recorded");
  EMBER_CHECK(impl_->timing && end.impl_->timing, "Event::elapsed_ms: both events need enable_timing");
  float ms = 0;
  EMBER_CUDA_CHECK(cudaEventElapsedTime(&ms, impl_->event, end.impl_->event));
  return ms;
}

// ---- memory -----------------------------------------------------------------

namespace {

// The caching allocator's name for a stream: its handle, except for the legacy default
// stream, whose handle is 0 on every device; it is named per device (tag | device), so that an
// event for it is recorded on its own device whichever device is current at the time.
constexpr StreamId kDefaultStreamTag = ~StreamId{0} << 8;
StreamId stream_id(uintptr_t handle, int device) {
  return handle ? static_cast<StreamId>(handle) : kDefaultStreamTag | static_cast<StreamId>(device);
}
constexpr StreamId kHostPool = ~StreamId{0};  // = the tag with device 255, which never exists

// Events for the caching allocator, on the device of the stream they are recorded on.
class RuntimeEvents : public DeviceMemory {
 public:
  EventId record_event(StreamId stream) override {
    cudaStream_t s = nullptr;
    int device = 0;
    if ((stream & ~StreamId{0xff}) == kDefaultStreamTag) {
      device = static_cast<int>(stream & 0xff);
    } else {
      s = reinterpret_cast<cudaStream_t>(stream);
      EMBER_CUDA_CHECK(cudaStreamGetDevice(s, &device));
    }
    DeviceGuard guard(device);
    cudaEvent_t e = nullptr;
    EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    EMBER_CUDA_CHECK(cudaEventRecord(e, s));
    return reinterpret_cast<EventId>(e);
  }
  bool event_done(EventId event) override {
    const cudaError_t e = cudaEventQuery(reinterpret_cast<cudaEvent_t>(event));
    if (e == cudaErrorNotReady) {
      cudaGetLastError();
      return false;
    }
    EMBER_CUDA_CHECK(e);
    return true;
  }
  void wait_event(EventId event) override {
    EMBER_CUDA_CHECK(cudaEventSynchronize(reinterpret_cast<cudaEvent_t>(event)));
  }
  void destroy_event(EventId event) override { cudaEventDestroy(reinterpret_cast<cudaEvent_t>(event)); }
};

class DeviceMemoryOf final : public RuntimeEvents {
 public:
  explicit DeviceMemoryOf(int device) : device_(device) {}
  void* malloc(size_t bytes) override {
    DeviceGuard guard(device_);
    void* ptr = nullptr;
    const cudaError_t e = cudaMalloc(&ptr, bytes);
    if (e == cudaErrorMemoryAllocation) {  // the caching allocator frees its cache and retries
      cudaGetLastError();
      return nullptr;
    }
    EMBER_CUDA_CHECK(e);
    return ptr;
  }
  void free(void* ptr) override {
    DeviceGuard guard(device_);
    EMBER_CUDA_CHECK(cudaFree(ptr));
  }
  std::string name() const override { return concat("cuda:", device_, " (", get_device_properties(device_).name, ")"); }

 private:
  int device_;
};

class PinnedHostMemory final : public RuntimeEvents {
 public:
  void* malloc(size_t bytes) override {
    void* ptr = nullptr;
    const cudaError_t e = cudaHostAlloc(&ptr, bytes, cudaHostAllocDefault);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      return nullptr;
    }
    EMBER_CUDA_CHECK(e);
    return ptr;
  }
  void free(void* ptr) override { EMBER_CUDA_CHECK(cudaFreeHost(ptr)); }
  std::string name() const override { return "pinned host memory"; }
};

// The Allocator interface over a caching allocator: blocks go to the current stream.
class CachedAllocator final : public Allocator {
 public:
  CachedAllocator(std::unique_ptr<DeviceMemory> memory, int device)
      : memory_(std::move(memory)), cache_(*memory_), device_(device) {}
  void* allocate(size_t nbytes) override {
    // Pinned host memory: one pool under an id no stream has, so that every stream that
    // copies from a block (record_stream), the default one included, delays its reuse.
    if (device_ < 0) return cache_.allocate(nbytes, kHostPool);
    DeviceGuard guard(device_);
    return cache_.allocate(nbytes, stream_id(reinterpret_cast<uintptr_t>(stream_handle(device_)), device_));
  }
  void deallocate(void* ptr, size_t) override { cache_.deallocate(ptr); }
  MemoryStats stats() const override { return cache_.stats(); }
  void reset_peak() override { cache_.reset_peak(); }
  void empty_cache() override { cache_.empty_cache(); }
  bool is_pinned_host() const override { return device_ < 0; }
  CachingAllocator& cache() { return cache_; }

 private:
  std::unique_ptr<DeviceMemory> memory_;
  CachingAllocator cache_;
  int device_;
};

// The caching switch for device memory: the environment's default, then set_memory_caching.
std::atomic<bool>& caching_switch() {
  static std::atomic<bool> on{[] {
    const char* off = std::getenv("EMBER_NO_CUDA_MEMORY_CACHING");
    return !(off && std::string(off) == "1");
  }()};
  return on;
}

std::array<std::atomic<CachedAllocator*>, kMaxDevices> allocators{};

CachedAllocator* device_allocator(int device) {
  static std::mutex mutex;
  device = checked_device(device, "CUDA allocator");
  CachedAllocator* a = allocators[device].load(std::memory_order_acquire);
  if (a) return a;
  std::lock_guard<std::mutex> lock(mutex);
  a = allocators[device].load(std::memory_order_relaxed);
  if (!a) {  // never destroyed: tensors may outlive main()
    a = new CachedAllocator(std::make_unique<DeviceMemoryOf>(device), device);
    a->cache().set_caching(caching_switch());
    allocators[device].store(a, std::memory_order_release);
  }
  return a;
}

CachedAllocator* pinned_cache() {
  static CachedAllocator* instance = new CachedAllocator(std::make_unique<PinnedHostMemory>(), -1);
  return instance;
}

}  // namespace

Allocator* device_memory(int device) { return device_allocator(device); }

Allocator* pinned_allocator() {
  checked_device(-1, "pinned memory");
  return pinned_cache();
}

void set_memory_caching(bool enabled) {
  caching_switch() = enabled;
  for (auto& a : allocators)
    if (CachedAllocator* allocator = a.load(std::memory_order_acquire)) allocator->cache().set_caching(enabled);
}
bool memory_caching() { return caching_switch(); }

bool is_pinned(const Tensor& tensor) {
  return tensor.defined() && tensor.is_cpu() && tensor.storage() && tensor.storage()->allocator() == pinned_cache();
}

void record_stream(const Tensor& tensor, const Stream& stream) {
  EMBER_CHECK(tensor.defined(), "record_stream: the tensor is undefined");
  void* ptr = tensor.storage()->data();
  if (!ptr) return;
  if (tensor.is_cuda()) {
    EMBER_CHECK(tensor.device().index == stream.device(), "record_stream: a tensor on ", tensor.device().str(),
                " and a stream on cuda:", stream.device());
    device_allocator(tensor.device().index)->cache().record_stream(ptr, stream_id(stream.handle(), stream.device()));
  } else {
    EMBER_CHECK(is_pinned(tensor), "record_stream: expected a CUDA or pinned tensor, got pageable CPU memory");
    pinned_cache()->cache().record_stream(ptr, stream_id(stream.handle(), stream.device()));
  }
}

}  // namespace cuda

}  // namespace ember
