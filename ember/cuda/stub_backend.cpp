// The CUDA back end of a build without CUDA: queries answer "no device", everything else
// throws "built without CUDA", so that CPU-only machines build and pass the whole suite.
#include "ember/cuda/cuda.h"
#include "ember/tensor/backend.h"

namespace ember {
namespace {
[[noreturn]] void no_cuda(const char* what) {
  throw Error(detail::concat(what, ": ember was built without CUDA (configure with nvcc present, EMBER_CUDA=AUTO)"));
}

class NoCudaBackend final : public Backend {
 public:
  const char* name() const override { return "CUDA (ember was built without CUDA)"; }
  Allocator* allocator(int) override { no_cuda("CUDA memory"); }
  Allocator* pinned_host_allocator() override { no_cuda("pinned memory"); }
};
}  // namespace

Backend& cuda_backend() {
  static NoCudaBackend instance;
  return instance;
}

namespace cuda {
bool is_available() { return false; }
int device_count() { return 0; }
bool built_with_cuda() { return false; }
int current_device() { no_cuda("current_device"); }
void set_device(int) { no_cuda("set_device"); }
void synchronize(int) { no_cuda("synchronize"); }
DeviceProperties get_device_properties(int) { no_cuda("get_device_properties"); }
DeviceGuard::DeviceGuard(int device) {
  if (device >= 0) no_cuda("DeviceGuard");
}
DeviceGuard::~DeviceGuard() = default;
Stream Stream::default_stream(int) { no_cuda("Stream::default_stream"); }
Stream Stream::create(int) { no_cuda("Stream::create"); }
void Stream::synchronize() const { no_cuda("Stream::synchronize"); }
bool Stream::query() const { no_cuda("Stream::query"); }
Stream current_stream(int) { no_cuda("current_stream"); }
void set_current_stream(const Stream&) { no_cuda("set_current_stream"); }
StreamGuard::StreamGuard(const Stream&) : device_(-1) { no_cuda("StreamGuard"); }
StreamGuard::~StreamGuard() = default;
struct Event::Impl {};
Event::Event(bool) { no_cuda("Event"); }
void Event::record(const Stream&) { no_cuda("Event::record"); }
void Event::record() { no_cuda("Event::record"); }
void Event::synchronize() const { no_cuda("Event::synchronize"); }
bool Event::query() const { no_cuda("Event::query"); }
void Event::wait(const Stream&) const { no_cuda("Event::wait"); }
float Event::elapsed_ms(const Event&) const { no_cuda("Event::elapsed_ms"); }
void record_stream(const Tensor&, const Stream&) { no_cuda("record_stream"); }
Allocator* pinned_allocator() { no_cuda("pinned memory"); }
bool is_pinned(const Tensor&) { return false; }
void set_memory_caching(bool) {}  // a switch: accepted, without effect, in every build
bool memory_caching() { return true; }
int64_t device_to_host_waits() { return 0; }
}  // namespace cuda

namespace backends::cudnn {
BenchmarkStats benchmark_stats() { return {}; }
void clear_benchmark_cache() {}
}  // namespace backends::cudnn

}  // namespace ember
