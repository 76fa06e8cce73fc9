#pragma once
// The CUDA back end: the kernel interface of tensor/backend.h on NVIDIA GPUs, implemented
// directly in one file per family, mirroring the CPU's (tensor/cpu/<family>.cpp): copy.cu,
// elementwise.cu, random.cu, reduce.cu, softmax.cu, matmul.cpp (cuBLAS, cuBLASLt), conv.cpp
// (cuDNN), pool.cu, indexing.cu, optim.cu. Every kernel makes its tensors' device current for
// the call and runs on that device's current stream. Built only with CUDA
// (cuda/stub_backend.cpp otherwise).
#include "ember/tensor/backend.h"

namespace ember::cuda {

class CudaBackend final : public Backend {
 public:
  const char* name() const override { return "CUDA"; }
  Allocator* allocator(int index) override;
  Allocator* pinned_host_allocator() override;

  // copy.cu
  void copy(const Tensor& src, const Tensor& dst) override;
  void fill(const Tensor& dst, const Scalar& value) override;
  void copy_across(const Tensor& src, const Tensor& dst, bool non_blocking) override;
  // elementwise.cu
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out, const Scalar& alpha) override;
  void unary(UnaryOp op, const Tensor& a, const Tensor& out, double p0, double p1) override;
  void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) override;
  // random.cu
  void random_uniform(const Tensor& out, double from, double to, uint64_t seed, uint64_t offset) override;
  void random_normal(const Tensor& out, double mean, double std, uint64_t seed, uint64_t offset) override;
  void random_int(const Tensor& out, int64_t low, int64_t high, uint64_t seed, uint64_t offset) override;
  // reduce.cu
  void reduce(ReduceOp op, const Tensor& in, const Tensor& out, const Tensor& indices) override;
  // softmax.cu
  void softmax(const Tensor& in, const Tensor& out, int64_t dim, bool log) override;
  // matmul.cpp (cuBLAS; Linear's bias through cuBLASLt's epilogue, where it has a kernel)
  void gemm(const Tensor& a, const Tensor& b, const Tensor& c, double alpha, double beta) override;
  void gemm_bias(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& out) override;
  // conv.cpp (cuDNN)
  void conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& out,
              const Conv2dParams& p) override;
  void conv2d_backward(const Tensor& input, const Tensor& weight, const Tensor& grad_out, const Tensor& grad_input,
                       const Tensor& grad_weight, const Tensor& grad_bias, const Conv2dParams& p) override;
  // pool.cu
  void max_pool2d(const Tensor& in, const Tensor& out, const Tensor& indices, const Pool2dParams& p) override;
  void avg_pool2d(const Tensor& in, const Tensor& out, const Pool2dParams& p) override;
  void adaptive_avg_pool2d(const Tensor& in, const Tensor& out) override;
  void max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, const Tensor& grad_in) override;
  void avg_pool2d_backward(const Tensor& grad_out, const Tensor& grad_in, const Pool2dParams& p) override;
  void adaptive_avg_pool2d_backward(const Tensor& grad_out, const Tensor& grad_in) override;
  // indexing.cu
  void index_select(const Tensor& src, int64_t dim, const Tensor& index, const Tensor& out) override;
  void gather(const Tensor& src, int64_t dim, const Tensor& index, const Tensor& out) override;
  void scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) override;
  // optim.cu
  void sgd_step(const std::vector<SgdParam>& params, const SgdStep& s) override;
  void adam_step(const std::vector<AdamParam>& params, const AdamStep& s) override;
  void rmsprop_step(const std::vector<RmspropParam>& params, const RmspropStep& s) override;
};

// Host-only checks of the library bindings, for machines without a GPU (the libraries alone
// suffice): every cuBLAS/cuBLASLt (cuDNN) function ember calls resolves, and the descriptors
// gemm_bias (conv2d) would build for these tensors, which may be CPU tensors, are accepted.
// check_bias_gemm_descriptors is false where gemm_bias would fall back to two passes.
bool check_bias_gemm_descriptors(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& out);
void check_conv2d_descriptors(const Tensor& input, const Tensor& weight, const Shape& out, const Conv2dParams& p);

}  // namespace ember::cuda
