#pragma once
// Global switches of the CPU back end, the CPU's counterparts of backends::cudnn (cuda/cuda.h).
#include "ember/tensor/benchmark_stats.h"

namespace ember::backends::cpu {

// Convolution algorithms (tensor/cpu/conv.cpp): im2col + GEMM, the fallback for every shape,
// or the direct kernels (stride 1; Note [Direct convolution on a padded flat plane] in
// tensor/cpu/conv_direct.h). `automatic` lets a per-shape heuristic choose, or benchmark mode.
// The int8 convolutions of quantized models (tensor/cpu/int8_conv.cpp) follow the same switch:
// direct wherever it applies unless im2col_gemm is forced.
enum class ConvAlgorithm { automatic, im2col_gemm, direct };
// Forces one algorithm where it applies (im2col + GEMM elsewhere): for tests and benchmarks.
void set_conv_algorithm(ConvAlgorithm algorithm);
ConvAlgorithm conv_algorithm();

// Benchmark mode (as torch.backends.cudnn.benchmark, on the CPU): for each new configuration
// of a convolution pass (forward, backward-data, backward-weight; shapes and parameters) time
// the algorithms that apply once, cache the fastest, reuse it. Off by default: the heuristic.
void set_benchmark(bool benchmark);
bool benchmark();
using BenchmarkStats = backends::BenchmarkStats;
BenchmarkStats benchmark_stats();
void clear_benchmark_cache();

// The widest instruction set the direct kernels, the int8 kernels, the 16-bit GEMM and the
// float32 GEMM may use (as oneDNN's
// DNNL_MAX_CPU_ISA; the environment variable EMBER_MAX_CPU_ISA=avx2 sets it at start). AVX-512
// (and its VNNI, for int8) is used only where the CPU has it and ember was compiled for it.
enum class Isa { avx2, avx512 };
void set_max_isa(Isa isa);
Isa max_isa();
// What the direct kernels run with now: "avx512", "avx2" (or "none" off x86-64).
const char* isa();

// Whether float32 matmuls use ember's own GEMM (Note [float32 GEMM] in tensor/cpu/gemm32.cpp:
// 6 x 16 register tiles on AVX2, 12 x 32 on AVX-512) or Eigen's; the im2col convolutions use it
// on AVX-512 only (on AVX2 Eigen's was faster on their small per-sample products). On by
// default; the environment variable EMBER_CPU_GEMM=eigen sets it off at start. For benchmarks
// and tests: the two differ in the last bits, as two BLAS libraries do.
void set_own_float32_gemm(bool on);
bool own_float32_gemm();

// Whether a bfloat16 matmul may use AVX-512 BF16's dot-product instruction (vdpbf16ps) where
// the CPU has it (Note [16-bit GEMM]): about twice the other kernels' rate, but it adds each
// pair of products in its own order and flushes denormals, so its results differ from theirs in
// the last bits (as torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction lets
// cuBLAS do on a GPU). On by default; off, every CPU gives the portable kernel's bits.
void set_allow_bf16_dot_product(bool allow);
bool allow_bf16_dot_product();

}  // namespace ember::backends::cpu
