#pragma once
// The CUDA back end's kernels, one file per family (cuda/<family>.cu), mirroring
// tensor/cpu/<family>.cpp. Shapes and contracts are those of tensor/backend.h; every kernel
// runs on the current stream of its tensors' device.
#include "tensor/backend.h"

namespace ember::cuda {

// elementwise.cu
void copy(const Tensor& src, const Tensor& dst);
void fill(const Tensor& dst, const Scalar& value);
void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out, const Scalar& alpha);
void unary(UnaryOp op, const Tensor& a, const Tensor& out, double p0, double p1);
void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out);
void random_uniform(const Tensor& out, double from, double to, uint64_t seed, uint64_t offset);
void random_normal(const Tensor& out, double mean, double std, uint64_t seed, uint64_t offset);
void random_int(const Tensor& out, int64_t low, int64_t high, uint64_t seed, uint64_t offset);

// blas.cpp (cuBLAS)
void gemm(const Tensor& a, const Tensor& b, const Tensor& c, double alpha, double beta);

}  // namespace ember::cuda
