#pragma once
// The CPU back end: the kernel interface of tensor/backend.h, implemented directly in one file
// per family (tensor/cpu/<family>.cpp), mirrored by the CUDA back end's cuda/<family>.cu (or
// .cpp): copy, elementwise, random, reduce, softmax, matmul, conv, pool, indexing, optim.
// Shapes and contracts are those of tensor/backend.h; OpenMP parallelism with a grain size
// (tensor/parallel.h) inside the kernels.
#include "ember/tensor/backend.h"

namespace ember::cpu {

class CpuBackend final : public Backend {
 public:
  const char* name() const override { return "CPU"; }
  Allocator* allocator(int index) override;

  // copy.cpp
  void copy(const Tensor& src, const Tensor& dst) override;
  void fill(const Tensor& dst, const Scalar& value) override;
  // elementwise.cpp
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out, const Scalar& alpha) override;
  void unary(UnaryOp op, const Tensor& a, const Tensor& out, double p0, double p1) override;
  void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) override;
  // random.cpp
  void random_uniform(const Tensor& out, double from, double to, uint64_t seed, uint64_t offset) override;
  void random_normal(const Tensor& out, double mean, double std, uint64_t seed, uint64_t offset) override;
  void random_int(const Tensor& out, int64_t low, int64_t high, uint64_t seed, uint64_t offset) override;
  // reduce.cpp
  void reduce(ReduceOp op, const Tensor& in, const Tensor& out, const Tensor& indices) override;
  // softmax.cpp
  void softmax(const Tensor& in, const Tensor& out, int64_t dim, bool log) override;
  // matmul.cpp (Eigen)
  void gemm(const Tensor& a, const Tensor& b, const Tensor& c, double alpha, double beta) override;
  // conv.cpp
  void conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& out,
              const Conv2dParams& p) override;
  void conv2d_backward(const Tensor& input, const Tensor& weight, const Tensor& grad_out, const Tensor& grad_input,
                       const Tensor& grad_weight, const Tensor& grad_bias, const Conv2dParams& p) override;
  // pool.cpp
  void max_pool2d(const Tensor& in, const Tensor& out, const Tensor& indices, const Pool2dParams& p) override;
  void avg_pool2d(const Tensor& in, const Tensor& out, const Pool2dParams& p) override;
  void adaptive_avg_pool2d(const Tensor& in, const Tensor& out) override;
  void max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, const Tensor& grad_in) override;
  void avg_pool2d_backward(const Tensor& grad_out, const Tensor& grad_in, const Pool2dParams& p) override;
  void adaptive_avg_pool2d_backward(const Tensor& grad_out, const Tensor& grad_in) override;
  // indexing.cpp
  void index_select(const Tensor& src, int64_t dim, const Tensor& index, const Tensor& out) override;
  void gather(const Tensor& src, int64_t dim, const Tensor& index, const Tensor& out) override;
  void scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) override;
  // optim.cpp
  void sgd_step(const std::vector<SgdParam>& params, const SgdStep& s) override;
  void adam_step(const std::vector<AdamParam>& params, const AdamStep& s) override;
  void rmsprop_step(const std::vector<RmspropParam>& params, const RmspropStep& s) override;
};

}  // namespace ember::cpu
