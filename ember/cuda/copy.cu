// Copies on CUDA: within a device (with casts, any layout), fills, and between the host and a
// device or two devices (CudaBackend::copy_across), mirroring tensor/cpu/copy.cpp.
#include <atomic>
#include <cstring>

#include "ember/cuda/cuda.h"
#include "ember/cuda/cuda_backend.h"
#include "ember/cuda/loops.cuh"
#include "ember/tensor/ops.h"

namespace ember::cuda {
namespace {

template <class T>
__global__ void fill_dense(T* out, T value, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = value;
}

int device_index(const Tensor& t) { return t.device().index; }

}  // namespace

void CudaBackend::copy(const Tensor& src, const Tensor& dst) {
  DeviceGuard guard(dst.device().index);
  if (dst.numel() == 0) return;
  if (src.dtype() == dst.dtype()) {
    if (src.is_contiguous() && dst.is_contiguous()) {
      EMBER_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), dst.numel() * dst.element_size(),
                                       cudaMemcpyDeviceToDevice, stream_of(dst)));
      return;
    }
    EMBER_CUDA_DISPATCH_BYTES(dst.element_size(), [&] {
      launch_strided<2>({&dst, &src}, "copy",
                        [] __device__(char** p) { *reinterpret_cast<R*>(p[0]) = *reinterpret_cast<const R*>(p[1]); });
    });
    return;
  }
  EMBER_CUDA_DISPATCH_ALL(src.dtype(), "copy", [&] {
    using S = scalar_t;
    EMBER_CUDA_DISPATCH_ALL(dst.dtype(), "copy", [&] {
      using D = scalar_t;
      launch_strided<2>({&dst, &src}, "copy", [] __device__(char** p) {
        *reinterpret_cast<D*>(p[0]) = convert<D>(convert<opmath_t<S>>(*reinterpret_cast<const S*>(p[1])));
      });
    });
  });
}

void CudaBackend::fill(const Tensor& dst, const Scalar& value) {
  DeviceGuard guard(dst.device().index);
  if (dst.numel() == 0) return;
  // The value in dst's dtype, converted on the host exactly as the CPU back end converts it.
  const Tensor host = full({}, value, TensorOptions(dst.dtype()));
  EMBER_CUDA_DISPATCH_BYTES(dst.element_size(), [&] {
    R bits;
    std::memcpy(&bits, host.data_ptr(), sizeof(R));
    if (dst.is_contiguous()) {
      fill_dense<R>
          <<<grid_for(dst.numel()), kBlock, 0, stream_of(dst)>>>(static_cast<R*>(dst.data_ptr()), bits, dst.numel());
      EMBER_KERNEL_CHECK();
    } else {
      launch_strided<1>({&dst}, "fill", [bits] __device__(char** p) { *reinterpret_cast<R*>(p[0]) = bits; });
    }
  });
}

namespace {
std::atomic<int64_t> device_to_host_wait_count{0};
}  // namespace

int64_t device_to_host_waits() { return device_to_host_wait_count.load(); }

// Host <-> device (or device <-> device): dense tensors of one dtype and shape. Asynchronous
// on the current stream only for pinned host memory and non_blocking; the pinned block is
// then kept from reuse until the copy is done (record_stream). Otherwise the call returns
// when the copy has finished, as PyTorch's does.
void CudaBackend::copy_across(const Tensor& src, const Tensor& dst, bool non_blocking) {
  EMBER_ASSERT(src.is_contiguous() && dst.is_contiguous() && src.numel() == dst.numel(),
               "copy_across expects dense tensors of one size");
  const size_t bytes = static_cast<size_t>(dst.numel()) * dst.element_size();
  if (bytes == 0) return;
  if (src.is_cuda() && dst.is_cuda()) {  // across devices
    cuda::DeviceGuard guard(device_index(dst));
    const cudaStream_t stream = cuda::stream_handle(device_index(dst));
    cuda::synchronize(device_index(src));  // the source's pending writes are on its own device's streams
    EMBER_CUDA_CHECK(
        cudaMemcpyPeerAsync(dst.data_ptr(), device_index(dst), src.data_ptr(), device_index(src), bytes, stream));
    if (!non_blocking) EMBER_CUDA_CHECK(cudaStreamSynchronize(stream));
    return;
  }
  const bool to_device = dst.is_cuda();
  const Tensor& device_side = to_device ? dst : src;
  const Tensor& host_side = to_device ? src : dst;
  cuda::DeviceGuard guard(device_index(device_side));
  const cudaStream_t stream = cuda::stream_handle(device_index(device_side));
  EMBER_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), bytes,
                                   to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, stream));
  if (non_blocking && cuda::is_pinned(host_side)) {
    cuda::record_stream(host_side, cuda::current_stream(device_index(device_side)));
    return;
  }
  if (!to_device) ++device_to_host_wait_count;
  EMBER_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace ember::cuda
