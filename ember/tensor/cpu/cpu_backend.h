#pragma once
// The CPU back end: the kernel interface of tensor/backend.h, implemented directly in one file
// per family (tensor/cpu/<family>.cpp), mirrored by the CUDA back end's cuda/<family>.cu (or
// .cpp): copy, elementwise, random, reduce, softmax, matmul, conv, pool, indexing, optim.
// Shapes and contracts are those of tensor/backend.h; OpenMP parallelism with a grain size
// (tensor/parallel.h) inside the kernels.
#include "ember/tensor/backend.h"

namespace ember::cpu {

// Not final: a test derives a host-memory stand-in for a device from it (test_grad_scaler.cpp).
class CpuBackend : public Backend {
 public:
  const char* name() const override { return "CPU"; }
  Allocator* allocator(int index) override;

  EMBER_BACKEND_KERNELS;  // each defined in its family file, named above
};

}  // namespace ember::cpu
