#pragma once
// The CPU back end: the kernel interface of tensor/backend.h, implemented directly in one file
// per family (tensor/cpu/<family>.cpp), mirrored by the CUDA back end's cuda/<family>.cu (or
// .cpp): copy, elementwise, random, reduce, softmax, normalization, matmul, conv, pool, indexing,
// optim, quant, linalg. Shapes and contracts are those of tensor/backend.h; OpenMP parallelism with a
// grain size (tensor/parallel.h) inside the kernels.
#include "ember/tensor/backend.h"
#include "ember/tensor/cpu/cpu.h"

namespace ember::cpu {

// Not final: a test derives a host-memory stand-in for a device from it (test_grad_scaler.cpp).
class CpuBackend : public Backend {
 public:
  const char* name() const override { return "CPU"; }
  Allocator* allocator(int index) override;

  EMBER_BACKEND_KERNELS;  // each defined in its family file, named above
  // Sparse (tensor/cpu/sparse.cpp) and int8 quantization (tensor/cpu/quant.cpp, int8_gemm.cpp,
  // int8_conv.cpp): the CPU only, for now.
  void csr_linear(const Tensor& x, const Tensor& crow, const Tensor& col, const Tensor& values, const Tensor& bias,
                  const Tensor& out) override;
  void quantize(const Tensor& x, const QuantParams& q, const Tensor& out) override;
  void dequantize(const Tensor& q, const QuantParams& p, const Tensor& out) override;
  void fake_quantize(const Tensor& x, const QuantParams& q, const Tensor& out, const Tensor& mask) override;
  Tensor int8_pack_weight(const Tensor& w) override;
  void int8_gemm(const Tensor& a, const Tensor& w_packed, const Int8Epilogue& e, const Tensor& out) override;
  void int8_conv2d(const Tensor& input, const Tensor& w_packed, std::array<int64_t, 2> kernel, const Conv2dParams& p,
                   const Int8Epilogue& e, const Tensor& out) override;
};

// The CPU's 16-bit GEMM (Note [16-bit GEMM] in gemm16.cpp): float16 or bfloat16 operands read
// directly, float32 accumulation, each output rounded once; gemm's 16-bit case. The portable
// kernel is the oracle; gemm16_with runs a given kernel, for the tests and benchmarks.
// Avx512Bf16 (bfloat16 only) computes with vdpbf16ps: not the other kernels' bits.
enum class Gemm16Kernel { Portable, Avx2, Avx512, Avx512Bf16 };
const char* gemm16_kernel_name(Gemm16Kernel k);
bool gemm16_kernel_available(Gemm16Kernel k);  // built in, and supported by this CPU
// The kernel a matmul of `dtype` (float16 or bfloat16) runs here, under the switches of cpu.h.
Gemm16Kernel gemm16_kernel(DType dtype);
// c[b] = beta * c[b] + alpha * a[b] @ b[b], as Backend::gemm, for float16 or bfloat16 operands.
void gemm16_with(Gemm16Kernel k, const Tensor& a, const Tensor& b, const Tensor& c, double alpha, double beta);

// The float32 GEMM (Note [float32 GEMM] in gemm32.cpp): ember's own register tiles for AVX2 and
// AVX-512, or Eigen's GEMM. c = alpha a @ b + beta c for one [M, K] x [K, N] product (beta == 0:
// c is not read), any strides of a and b, c's elements at (cs1, cs2).
struct Gemm32Args {
  const float* a;
  int64_t as1, as2;
  const float* b;
  int64_t bs1, bs2;
  float* c;
  int64_t cs1, cs2;
  int64_t M, N, K;
  float alpha, beta;
};
enum class Gemm32Kernel { Eigen, Avx2, Avx512 };
const char* gemm32_kernel_name(Gemm32Kernel k);
bool gemm32_kernel_available(Gemm32Kernel k);  // built in, and supported by this CPU
// What float32 products use now: Eigen's where backends::cpu::own_float32_gemm() is off or the
// CPU has no AVX2, else the widest tile backends::cpu::max_isa() allows.
Gemm32Kernel gemm32_kernel();
// Whether an [M, K] x [K, N] float32 product takes ember's kernel: one is chosen, and the product
// is past the sizes where packing costs more than the tile gains (at least 4 rows, 16 columns,
// or 9 with 16 rows, and 32^3 multiply-adds).
bool gemm32_applies(int64_t M, int64_t N, int64_t K);
void gemm32(const Gemm32Args& g);  // with gemm32_kernel(), which must not be Eigen; K > 0
void gemm32_with(Gemm32Kernel k, const Gemm32Args& g);

// The CPU's int8 GEMM kernels (Note [Int8 GEMM]): the portable loop (the oracle, and for other
// CPUs), AVX2's vpmaddubsw, AVX-512 VNNI's vpdpbusd. int8_gemm runs the fastest one this CPU has;
// int8_gemm_with runs a given one, so that the tests can hold each to the others.
enum class Int8Kernel { Portable, Avx2, Avx512Vnni };
const char* int8_kernel_name(Int8Kernel k);
bool int8_kernel_available(Int8Kernel k);  // built in, and supported by this CPU
Int8Kernel int8_gemm_kernel();
void int8_gemm_with(Int8Kernel k, const Tensor& a, const Tensor& w_packed, const Int8Epilogue& e, const Tensor& out);

// The int8 convolution's algorithms (int8_conv.cpp): im2col + the int8 GEMM, for every shape, or
// the direct kernels (stride 1, AVX2 or VNNI; Note [Direct int8 convolution] in
// int8_conv_direct.cpp). int8_conv2d runs backends::cpu::conv_algorithm()'s choice with the
// fastest kernel; int8_conv2d_with a given pair (`automatic`: direct wherever it applies), for
// the tests. Arguments as Backend::int8_conv2d's.
bool int8_direct_applies(const Conv2dParams& p, Int8Kernel k);
void int8_conv2d_direct(Int8Kernel k, const Tensor& input, const Tensor& w_packed, std::array<int64_t, 2> kernel,
                        const Conv2dParams& p, const Int8Epilogue& e, const Tensor& out);
void int8_conv2d_with(backends::cpu::ConvAlgorithm algorithm, Int8Kernel k, const Tensor& input, const Tensor& w_packed,
                      std::array<int64_t, 2> kernel, const Conv2dParams& p, const Int8Epilogue& e, const Tensor& out);

}  // namespace ember::cpu
