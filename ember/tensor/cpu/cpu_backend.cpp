// The CPU back end: the kernel interface of tensor/backend.h bound to tensor/cpu/*.cpp.
#include "ember/tensor/cpu/kernels.h"

namespace ember {
namespace {

class CpuBackend final : public Backend {
 public:
  const char* name() const override { return "CPU"; }
  Allocator* allocator(int) override { return cpu_allocator(); }
  void copy(const Tensor& s, const Tensor& d) override { cpu::copy(s, d); }
  void fill(const Tensor& d, const Scalar& v) override { cpu::fill(d, v); }
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& o, const Scalar& al) override {
    cpu::binary(op, a, b, o, al);
  }
  void unary(UnaryOp op, const Tensor& a, const Tensor& o, double p0, double p1) override {
    cpu::unary(op, a, o, p0, p1);
  }
  void where(const Tensor& c, const Tensor& a, const Tensor& b, const Tensor& o) override { cpu::where(c, a, b, o); }
  void reduce(ReduceOp op, const Tensor& in, const Tensor& o, const Tensor& idx) override {
    cpu::reduce(op, in, o, idx);
  }
  void gemm(const Tensor& a, const Tensor& b, const Tensor& c, double alpha, double beta) override {
    cpu::gemm(a, b, c, alpha, beta);
  }
  void conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& o, const Conv2dParams& p) override {
    cpu::conv2d(x, w, b, o, p);
  }
  void max_pool2d(const Tensor& x, const Tensor& o, const Tensor& idx, const Pool2dParams& p) override {
    cpu::max_pool2d(x, o, idx, p);
  }
  void avg_pool2d(const Tensor& x, const Tensor& o, const Pool2dParams& p) override { cpu::avg_pool2d(x, o, p); }
  void adaptive_avg_pool2d(const Tensor& x, const Tensor& o) override { cpu::adaptive_avg_pool2d(x, o); }
  void conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& go, const Tensor& gx, const Tensor& gw,
                       const Tensor& gb, const Conv2dParams& p) override {
    cpu::conv2d_backward(x, w, go, gx, gw, gb, p);
  }
  void sgd_step(const std::vector<SgdParam>& p, const SgdStep& s) override { cpu::sgd_step(p, s); }
  void adam_step(const std::vector<AdamParam>& p, const AdamStep& s) override { cpu::adam_step(p, s); }
  void rmsprop_step(const std::vector<RmspropParam>& p, const RmspropStep& s) override { cpu::rmsprop_step(p, s); }
  void max_pool2d_backward(const Tensor& go, const Tensor& idx, const Tensor& gi) override {
    cpu::max_pool2d_backward(go, idx, gi);
  }
  void avg_pool2d_backward(const Tensor& go, const Tensor& gi, const Pool2dParams& p) override {
    cpu::avg_pool2d_backward(go, gi, p);
  }
  void adaptive_avg_pool2d_backward(const Tensor& go, const Tensor& gi) override {
    cpu::adaptive_avg_pool2d_backward(go, gi);
  }
  void softmax(const Tensor& x, const Tensor& o, int64_t dim, bool log) override { cpu::softmax(x, o, dim, log); }
  void index_select(const Tensor& s, int64_t dim, const Tensor& i, const Tensor& o) override {
    cpu::index_select(s, dim, i, o);
  }
  void gather(const Tensor& s, int64_t dim, const Tensor& i, const Tensor& o) override { cpu::gather(s, dim, i, o); }
  void scatter_add(const Tensor& self, int64_t dim, const Tensor& i, const Tensor& s) override {
    cpu::scatter_add(self, dim, i, s);
  }
  void random_uniform(const Tensor& o, double a, double b, uint64_t seed, uint64_t off) override {
    cpu::random_uniform(o, a, b, seed, off);
  }
  void random_normal(const Tensor& o, double m, double s, uint64_t seed, uint64_t off) override {
    cpu::random_normal(o, m, s, seed, off);
  }
  void random_int(const Tensor& o, int64_t lo, int64_t hi, uint64_t seed, uint64_t off) override {
    cpu::random_int(o, lo, hi, seed, off);
  }
};

}  // namespace

Backend& cpu_backend() {
  static CpuBackend instance;
  return instance;
}

}  // namespace ember
