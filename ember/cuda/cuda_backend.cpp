// The CUDA back end: the kernel interface of tensor/backend.h on NVIDIA GPUs. Elementwise,
// reduction, softmax, indexing, optimizer and random kernels are ember's own (cuda/*.cu);
// matmul goes through cuBLAS (cuda/blas.cpp). Every call runs on the current stream of the
// tensors' device, with that device made current for the call.
#include "ember/cuda/check.h"
#include "ember/cuda/cuda.h"
#include "ember/cuda/internal.h"
#include "ember/cuda/kernels.h"
#include "ember/tensor/backend.h"

namespace ember {
namespace {

// The device of a kernel's tensors, current for the kernel's duration.
int device_of(const Tensor& t) { return t.device().index; }

class CudaBackend final : public Backend {
 public:
  const char* name() const override { return "CUDA"; }
  Allocator* allocator(int index) override { return cuda::device_memory(index); }
  Allocator* pinned_host_allocator() override { return cuda::pinned_allocator(); }

  void copy(const Tensor& src, const Tensor& dst) override {
    cuda::DeviceGuard guard(device_of(dst));
    cuda::copy(src, dst);
  }
  void fill(const Tensor& dst, const Scalar& value) override {
    cuda::DeviceGuard guard(device_of(dst));
    cuda::fill(dst, value);
  }

  // Host <-> device (or device <-> device): dense tensors of one dtype and shape. Asynchronous
  // on the current stream only for pinned host memory and non_blocking; the pinned block is
  // then kept from reuse until the copy is done (record_stream). Otherwise the call returns
  // when the copy has finished, as PyTorch's does.
  void copy_across(const Tensor& src, const Tensor& dst, bool non_blocking) override {
    EMBER_ASSERT(src.is_contiguous() && dst.is_contiguous() && src.numel() == dst.numel(),
                 "copy_across expects dense tensors of one size");
    const size_t bytes = static_cast<size_t>(dst.numel()) * dst.element_size();
    if (bytes == 0) return;
    if (src.is_cuda() && dst.is_cuda()) {  // across devices
      cuda::DeviceGuard guard(device_of(dst));
      const cudaStream_t stream = cuda::stream_handle(device_of(dst));
      cuda::synchronize(device_of(src));  // the source's pending writes are on its own device's streams
      EMBER_CUDA_CHECK(
          cudaMemcpyPeerAsync(dst.data_ptr(), device_of(dst), src.data_ptr(), device_of(src), bytes, stream));
      if (!non_blocking) EMBER_CUDA_CHECK(cudaStreamSynchronize(stream));
      return;
    }
    const bool to_device = dst.is_cuda();
    const Tensor& device_side = to_device ? dst : src;
    const Tensor& host_side = to_device ? src : dst;
    cuda::DeviceGuard guard(device_of(device_side));
    const cudaStream_t stream = cuda::stream_handle(device_of(device_side));
    EMBER_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), bytes,
                                     to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, stream));
    if (non_blocking && cuda::is_pinned(host_side)) {
      cuda::record_stream(host_side, cuda::current_stream(device_of(device_side)));
      return;
    }
    EMBER_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out, const Scalar& alpha) override {
    cuda::DeviceGuard guard(device_of(out));
    cuda::binary(op, a, b, out, alpha);
  }
  void unary(UnaryOp op, const Tensor& a, const Tensor& out, double p0, double p1) override {
    cuda::DeviceGuard guard(device_of(out));
    cuda::unary(op, a, out, p0, p1);
  }
  void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) override {
    cuda::DeviceGuard guard(device_of(out));
    cuda::where(cond, a, b, out);
  }
  void reduce(ReduceOp op, const Tensor& in, const Tensor& out, const Tensor& indices) override {
    cuda::DeviceGuard guard(device_of(in));
    cuda::reduce(op, in, out, indices);
  }
  void softmax(const Tensor& in, const Tensor& out, int64_t dim, bool log) override {
    cuda::DeviceGuard guard(device_of(out));
    cuda::softmax(in, out, dim, log);
  }
  void index_select(const Tensor& src, int64_t dim, const Tensor& index, const Tensor& out) override {
    cuda::DeviceGuard guard(device_of(out));
    cuda::index_select(src, dim, index, out);
  }
  void gather(const Tensor& src, int64_t dim, const Tensor& index, const Tensor& out) override {
    cuda::DeviceGuard guard(device_of(out));
    cuda::gather(src, dim, index, out);
  }
  void scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) override {
    cuda::DeviceGuard guard(device_of(self));
    cuda::scatter_add(self, dim, index, src);
  }
  void sgd_step(const std::vector<SgdParam>& params, const SgdStep& s) override {
    if (params.empty()) return;
    cuda::DeviceGuard guard(device_of(params.front().param));
    cuda::sgd_step(params, s);
  }
  void adam_step(const std::vector<AdamParam>& params, const AdamStep& s) override {
    if (params.empty()) return;
    cuda::DeviceGuard guard(device_of(params.front().param));
    cuda::adam_step(params, s);
  }
  void rmsprop_step(const std::vector<RmspropParam>& params, const RmspropStep& s) override {
    if (params.empty()) return;
    cuda::DeviceGuard guard(device_of(params.front().param));
    cuda::rmsprop_step(params, s);
  }
  void conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& out,
              const Conv2dParams& p) override {
    cuda::DeviceGuard guard(device_of(out));
    cuda::conv2d(input, weight, bias, out, p);
  }
  void conv2d_backward(const Tensor& input, const Tensor& weight, const Tensor& grad_out, const Tensor& grad_input,
                       const Tensor& grad_weight, const Tensor& grad_bias, const Conv2dParams& p) override {
    cuda::DeviceGuard guard(device_of(input));
    cuda::conv2d_backward(input, weight, grad_out, grad_input, grad_weight, grad_bias, p);
  }
  void max_pool2d(const Tensor& in, const Tensor& out, const Tensor& indices, const Pool2dParams& p) override {
    cuda::DeviceGuard guard(device_of(out));
    cuda::max_pool2d(in, out, indices, p);
  }
  void max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, const Tensor& grad_in) override {
    cuda::DeviceGuard guard(device_of(grad_in));
    cuda::max_pool2d_backward(grad_out, indices, grad_in);
  }
  void avg_pool2d(const Tensor& in, const Tensor& out, const Pool2dParams& p) override {
    cuda::DeviceGuard guard(device_of(out));
    cuda::avg_pool2d(in, out, p);
  }
  void avg_pool2d_backward(const Tensor& grad_out, const Tensor& grad_in, const Pool2dParams& p) override {
    cuda::DeviceGuard guard(device_of(grad_in));
    cuda::avg_pool2d_backward(grad_out, grad_in, p);
  }
  void adaptive_avg_pool2d(const Tensor& in, const Tensor& out) override {
    cuda::DeviceGuard guard(device_of(out));
    cuda::adaptive_avg_pool2d(in, out);
  }
  void adaptive_avg_pool2d_backward(const Tensor& grad_out, const Tensor& grad_in) override {
    cuda::DeviceGuard guard(device_of(grad_in));
    cuda::adaptive_avg_pool2d_backward(grad_out, grad_in);
  }
  void gemm(const Tensor& a, const Tensor& b, const Tensor& c, double alpha, double beta) override {
    cuda::DeviceGuard guard(device_of(c));
    cuda::gemm(a, b, c, alpha, beta);
  }
  void gemm_bias(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& out) override {
    cuda::DeviceGuard guard(device_of(out));
    if (!cuda::gemm_bias(a, b, bias, out)) Backend::gemm_bias(a, b, bias, out);
  }
  void random_uniform(const Tensor& out, double from, double to, uint64_t seed, uint64_t offset) override {
    cuda::DeviceGuard guard(device_of(out));
    cuda::random_uniform(out, from, to, seed, offset);
  }
  void random_normal(const Tensor& out, double mean, double std, uint64_t seed, uint64_t offset) override {
    cuda::DeviceGuard guard(device_of(out));
    cuda::random_normal(out, mean, std, seed, offset);
  }
  void random_int(const Tensor& out, int64_t low, int64_t high, uint64_t seed, uint64_t offset) override {
    cuda::DeviceGuard guard(device_of(out));
    cuda::random_int(out, low, high, seed, offset);
  }
};

}  // namespace

Backend& cuda_backend() {
  static CudaBackend instance;
  return instance;
}

}  // namespace ember
