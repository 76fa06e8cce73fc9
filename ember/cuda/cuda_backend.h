#pragma once
// CudaBackend, tensor/backend.h's kernels on NVIDIA GPUs. Its family files carry the CPU's names
// (copy.cu ~ tensor/cpu/copy.cpp, elementwise.cu, random.cu, reduce.cu, softmax.cu,
// normalization.cu, matmul.cpp with cuBLAS and cuBLASLt, conv.cpp with cuDNN, pool.cu, indexing.cu,
// optim.cu, linalg.cpp with cuSOLVER). A kernel makes its tensors' device current and runs on
// that device's current stream. Without CUDA, cuda/stub_backend.cpp stands in.
#include "ember/tensor/backend.h"

namespace ember::cuda {

class CudaBackend final : public Backend {
 public:
  const char* name() const override { return "CUDA"; }
  Allocator* allocator(int index) override;
  Allocator* pinned_host_allocator() override;

  EMBER_BACKEND_KERNELS;  // each defined in its family file, named above
  // copy.cu: host <-> device and device <-> device
  void copy_across(const Tensor& src, const Tensor& dst, bool non_blocking) override;
  // matmul.cpp: Linear's bias added by cuBLASLt's epilogue as the product is written
  void gemm_bias(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& out) override;
  // quant.cu: affine quantization, the int8 GEMM (cuBLASLt's int8 kernels, matmul.cpp) with the
  // CPU's epilogue, and the int8 convolution as im2col + that GEMM (the CPU's bytes).
  void quantize(const Tensor& x, const QuantParams& q, const Tensor& out) override;
  void dequantize(const Tensor& q, const QuantParams& p, const Tensor& out) override;
  void fake_quantize(const Tensor& x, const QuantParams& q, const Tensor& out, const Tensor& mask) override;
  Tensor int8_pack_weight(const Tensor& w) override;
  void int8_gemm(const Tensor& a, const Tensor& w_packed, const Int8Epilogue& e, const Tensor& out) override;
  void int8_conv2d(const Tensor& input, const Tensor& w_packed, std::array<int64_t, 2> kernel, const Conv2dParams& p,
                   const Int8Epilogue& e, const Tensor& out) override;
};

// Host-only checks of the library bindings, for machines without a GPU (the libraries alone
// suffice): every cuBLAS/cuBLASLt (cuDNN) function ember calls resolves, and the descriptors
// gemm_bias (conv2d) would build for these tensors, which may be CPU tensors, are accepted.
// check_bias_gemm_descriptors is false where gemm_bias would fall back to two passes.
bool check_bias_gemm_descriptors(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& out);
void check_conv2d_descriptors(const Tensor& input, const Tensor& weight, const Shape& out, const Conv2dParams& p);

}  // namespace ember::cuda
