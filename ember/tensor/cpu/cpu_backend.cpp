// The CPU back end's instance (tensor/cpu/cpu_backend.h; its kernels are in the family files).
#include "ember/tensor/cpu/cpu_backend.h"

namespace ember {

Allocator* cpu::CpuBackend::allocator(int) { return cpu_allocator(); }

Backend& cpu_backend() {
  static cpu::CpuBackend instance;
  return instance;
}

}  // namespace ember
