#pragma once
// The CPU back end's kernels, one file per family (tensor/cpu/<family>.cpp), mirrored by
// cuda/<family>.cu. Shapes and contracts are those of tensor/backend.h.
#include "ember/tensor/backend.h"

namespace ember::cpu {

void copy(const Tensor& src, const Tensor& dst);
void fill(const Tensor& dst, const Scalar& value);
void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out, const Scalar& alpha);
void unary(UnaryOp op, const Tensor& a, const Tensor& out, double p0, double p1);
void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out);
void reduce(ReduceOp op, const Tensor& in, const Tensor& out, const Tensor& indices);
void gemm(const Tensor& a, const Tensor& b, const Tensor& c, double alpha, double beta);
void conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& out, const Conv2dParams& p);
void max_pool2d(const Tensor& in, const Tensor& out, const Tensor& indices, const Pool2dParams& p);
void avg_pool2d(const Tensor& in, const Tensor& out, const Pool2dParams& p);
void adaptive_avg_pool2d(const Tensor& in, const Tensor& out);
void conv2d_backward(const Tensor& input, const Tensor& weight, const Tensor& grad_out, const Tensor& grad_input,
                     const Tensor& grad_weight, const Tensor& grad_bias, const Conv2dParams& p);
void max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, const Tensor& grad_in);
void avg_pool2d_backward(const Tensor& grad_out, const Tensor& grad_in, const Pool2dParams& p);
void adaptive_avg_pool2d_backward(const Tensor& grad_out, const Tensor& grad_in);
void softmax(const Tensor& in, const Tensor& out, int64_t dim, bool log);
void index_select(const Tensor& src, int64_t dim, const Tensor& index, const Tensor& out);
void gather(const Tensor& src, int64_t dim, const Tensor& index, const Tensor& out);
void scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
void sgd_step(const std::vector<SgdParam>& params, const SgdStep& s);
void adam_step(const std::vector<AdamParam>& params, const AdamStep& s);
void rmsprop_step(const std::vector<RmspropParam>& params, const RmspropStep& s);
void random_uniform(const Tensor& out, double from, double to, uint64_t seed, uint64_t offset);
void random_normal(const Tensor& out, double mean, double std, uint64_t seed, uint64_t offset);
void random_int(const Tensor& out, int64_t low, int64_t high, uint64_t seed, uint64_t offset);

}  // namespace ember::cpu
