#pragma once
// The CUDA back end's kernels, one file per family (cuda/<family>.cu), mirroring
// tensor/cpu/<family>.cpp. Shapes and contracts are those of tensor/backend.h; every kernel
// runs on the current stream of its tensors' device.
#include "ember/tensor/backend.h"

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

// reduce.cu
void reduce(ReduceOp op, const Tensor& in, const Tensor& out, const Tensor& indices);
void softmax(const Tensor& in, const Tensor& out, int64_t dim, bool log);

// indexing.cu
void index_select(const Tensor& src, int64_t dim, const Tensor& index, const Tensor& out);
void gather(const Tensor& src, int64_t dim, const Tensor& index, const Tensor& out);
void scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);

// optim.cu
void sgd_step(const std::vector<SgdParam>& params, const SgdStep& s);
void adam_step(const std::vector<AdamParam>& params, const AdamStep& s);
void rmsprop_step(const std::vector<RmspropParam>& params, const RmspropStep& s);

// pool.cu
void max_pool2d(const Tensor& in, const Tensor& out, const Tensor& indices, const Pool2dParams& p);
void max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, const Tensor& grad_in);
void avg_pool2d(const Tensor& in, const Tensor& out, const Pool2dParams& p);
void avg_pool2d_backward(const Tensor& grad_out, const Tensor& grad_in, const Pool2dParams& p);
void adaptive_avg_pool2d(const Tensor& in, const Tensor& out);
void adaptive_avg_pool2d_backward(const Tensor& grad_out, const Tensor& grad_in);

// cudnn.cpp (cuDNN)
void conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& out, const Conv2dParams& p);
void conv2d_backward(const Tensor& input, const Tensor& weight, const Tensor& grad_out, const Tensor& grad_input,
                     const Tensor& grad_weight, const Tensor& grad_bias, const Conv2dParams& p);

// blas.cpp (cuBLAS, cuBLASLt)
void gemm(const Tensor& a, const Tensor& b, const Tensor& c, double alpha, double beta);
// out [M, N] = a [M, K] @ b [K, N] + bias [N] through cuBLASLt's bias epilogue; false (nothing
// done) where it has no kernel for the case (float64, strided out, empty sizes).
bool gemm_bias(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& out);

// Host-only checks of the library bindings, for machines without a GPU (the libraries alone
// suffice): every cuBLAS/cuBLASLt (cuDNN) function ember calls resolves, and the descriptors
// gemm_bias (conv2d) would build for these tensors, which may be CPU tensors, are accepted.
// check_bias_gemm_descriptors is false where gemm_bias would decline.
bool check_bias_gemm_descriptors(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& out);
void check_conv2d_descriptors(const Tensor& input, const Tensor& weight, const Shape& out, const Conv2dParams& p);

}  // namespace ember::cuda
