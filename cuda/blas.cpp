// Matrix products through cuBLAS: c[b] = beta c[b] + alpha a[b] @ b[b] for float32 (TF32 when
// allowed), float64, and float16 / bfloat16 inputs with float32 accumulation.
//
// cuBLAS is column-major; ember's matrices are row-major views with any strides. A row-major
// [R, C] matrix with strides (sr, 1) is the column-major [C, R] matrix with leading dimension
// sr, its transpose, so C = A B is computed as Cᵀ = Bᵀ Aᵀ with no copies; a matrix stored the
// other way round (strides (1, sc)) is passed with op T. Other layouts are copied dense first.
#include <cublas_v2.h>

#include <array>
#include <climits>

#include "cuda/check.h"
#include "cuda/cuda.h"
#include "cuda/internal.h"
#include "cuda/kernels.h"
#include "cuda/lazy_library.h"
#include "tensor/ops.h"

namespace ember::cuda {
namespace {

// The cuBLAS functions ember calls, resolved from the library on first use (cuda/lazy_library.h).
// (cublas_api.h overloads cublasGemmStridedBatchedEx for C++, so its type is spelled out.)
using GemmStridedBatchedEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                                const void*, const void*, cudaDataType, int, long long, const void*,
                                                cudaDataType, int, long long, const void*, void*, cudaDataType, int,
                                                long long, int, cublasComputeType_t, cublasGemmAlgo_t);
struct Cublas {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasSetStream_v2) set_stream;
  GemmStridedBatchedEx gemm_strided_batched;
  decltype(&cublasGetStatusName) status_name;
  decltype(&cublasGetStatusString) status_string;
};
const Cublas& cublas() {
  static LazyLibrary library({"libcublas.so." + std::to_string(CUBLAS_VER_MAJOR), "libcublas.so"}, "cuBLAS");
  static const Cublas api{reinterpret_cast<decltype(&cublasCreate_v2)>(library.symbol("cublasCreate_v2")),
                          reinterpret_cast<decltype(&cublasSetStream_v2)>(library.symbol("cublasSetStream_v2")),
                          reinterpret_cast<GemmStridedBatchedEx>(library.symbol("cublasGemmStridedBatchedEx")),
                          reinterpret_cast<decltype(&cublasGetStatusName)>(library.symbol("cublasGetStatusName")),
                          reinterpret_cast<decltype(&cublasGetStatusString)>(library.symbol("cublasGetStatusString"))};
  return api;
}

#define EMBER_CUBLAS_CHECK(statement)                                                                          \
  do {                                                                                                         \
    const cublasStatus_t ember_status_ = (statement);                                                          \
    if (ember_status_ != CUBLAS_STATUS_SUCCESS)                                                                \
      throw ::ember::Error(::ember::detail::concat("cuBLAS error ", cublas().status_name(ember_status_), ": ", \
                                                   cublas().status_string(ember_status_), " in '", #statement, \
                                                   "' at ", __FILE__, ":", __LINE__));                         \
  } while (0)

// One handle per device and thread (a handle must not be used by two threads at once).
cublasHandle_t handle_for(int device) {
  thread_local std::array<cublasHandle_t, 64> handles{};
  EMBER_CHECK(device >= 0 && device < 64, "cuBLAS: device ", device, " out of range");
  if (!handles[device]) EMBER_CUBLAS_CHECK(cublas().create(&handles[device]));
  return handles[device];
}

// How cuBLAS sees the transpose of a row-major [rows, cols] matrix with strides (sr, sc).
struct ColumnMajor {
  cublasOperation_t op;
  int64_t ld;
};
bool as_transpose(int64_t rows, int64_t cols, int64_t sr, int64_t sc, ColumnMajor& out) {
  if ((sc == 1 || cols == 1) && (rows == 1 || sr >= cols)) {  // row-major: its transpose is column-major
    out = {CUBLAS_OP_N, rows == 1 ? std::max<int64_t>(cols, 1) : sr};
    return true;
  }
  if ((sr == 1 || rows == 1) && (cols == 1 || sc >= rows)) {  // column-major: cuBLAS transposes it
    out = {CUBLAS_OP_T, cols == 1 ? std::max<int64_t>(rows, 1) : sc};
    return true;
  }
  return false;
}

int to_int(int64_t v, const char* what) {
  EMBER_CHECK(v >= 0 && v <= INT_MAX, "matmul on CUDA: ", what, " ", v, " exceeds cuBLAS's int range");
  return static_cast<int>(v);
}

}  // namespace

void gemm(const Tensor& a_in, const Tensor& b_in, const Tensor& c, double alpha, double beta) {
  const int64_t B = c.size(0), M = c.size(1), N = c.size(2), K = a_in.size(2);
  if (B == 0 || M == 0 || N == 0) return;
  cudaDataType_t type;
  cublasComputeType_t compute;
  switch (c.dtype()) {
    case kFloat32:
      type = CUDA_R_32F;
      compute = backends::cuda::allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
      break;
    case kFloat64:
      type = CUDA_R_64F;
      compute = CUBLAS_COMPUTE_64F;
      break;
    case kFloat16:
      type = CUDA_R_16F;
      compute = CUBLAS_COMPUTE_32F;
      break;
    case kBFloat16:
      type = CUDA_R_16BF;
      compute = CUBLAS_COMPUTE_32F;
      break;
    default:
      throw Error(detail::concat("matmul on CUDA: dtype ", c.dtype(),
                                 " is not supported (float32, float64, float16, bfloat16)"));
  }
  Tensor a = a_in, b = b_in;
  ColumnMajor ta{}, tb{}, tc{};
  if (!as_transpose(M, K, a.stride(1), a.stride(2), ta)) {
    a = a.contiguous();
    as_transpose(M, K, a.stride(1), a.stride(2), ta);
  }
  if (!as_transpose(K, N, b.stride(1), b.stride(2), tb)) {
    b = b.contiguous();
    as_transpose(K, N, b.stride(1), b.stride(2), tb);
  }
  // The output must be row-major (cuBLAS writes it, column-major, as Cᵀ).
  Tensor out = c;
  if (!as_transpose(M, N, c.stride(1), c.stride(2), tc) || tc.op != CUBLAS_OP_N || (B > 1 && c.stride(0) == 0)) {
    out = beta == 0 ? empty(c.sizes(), TensorOptions(c.dtype()).device(c.device())) : c.contiguous();
    as_transpose(M, N, out.stride(1), out.stride(2), tc);
  }
  const double alpha_d = alpha, beta_d = beta;
  const float alpha_f = static_cast<float>(alpha), beta_f = static_cast<float>(beta);
  const bool dbl = c.dtype() == kFloat64;
  const void* alpha_p = dbl ? static_cast<const void*>(&alpha_d) : &alpha_f;
  const void* beta_p = dbl ? static_cast<const void*>(&beta_d) : &beta_f;
  const int device = c.device().index;
  cublasHandle_t h = handle_for(device);
  EMBER_CUBLAS_CHECK(cublas().set_stream(h, stream_handle(device)));
  // Cᵀ (N x M) = op(Bᵀ) (N x K) · op(Aᵀ) (K x M)
  EMBER_CUBLAS_CHECK(cublas().gemm_strided_batched(
      h, tb.op, ta.op, to_int(N, "N"), to_int(M, "M"), to_int(K, "K"), alpha_p, static_cast<const char*>(b.data_ptr()),
      type, to_int(tb.ld, "ld"), B > 1 ? b.stride(0) : 0, static_cast<const char*>(a.data_ptr()), type,
      to_int(ta.ld, "ld"), B > 1 ? a.stride(0) : 0, beta_p, static_cast<char*>(out.data_ptr()), type,
      to_int(tc.ld, "ld"), B > 1 ? out.stride(0) : 0, to_int(B, "batch"), compute, CUBLAS_GEMM_DEFAULT));
  if (!out.shares_storage(c)) {
    Tensor dst = c;
    dst.copy_(out);
  }
}

}  // namespace ember::cuda
