// Global switches of the CUDA back end (they exist in every build, so programs need no #ifdef).
#include <atomic>

#include "ember/cuda/cuda.h"

namespace ember {
namespace {
std::atomic<bool> tf32_allowed{false};
std::atomic<bool> cudnn_benchmark{false};
}  // namespace

namespace backends::cuda {
void set_allow_tf32(bool allow) { tf32_allowed = allow; }
bool allow_tf32() { return tf32_allowed; }
}  // namespace backends::cuda

namespace backends::cudnn {
void set_benchmark(bool benchmark) { cudnn_benchmark = benchmark; }
bool benchmark() { return cudnn_benchmark; }
}  // namespace backends::cudnn

}  // namespace ember
