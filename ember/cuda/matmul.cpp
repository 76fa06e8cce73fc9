// Matrix products through cuBLAS: c[b] = beta c[b] + alpha a[b] @ b[b] for float32 (TF32 when
// allowed), float64, and float16 / bfloat16 inputs with float32 accumulation; and through
// cuBLASLt, out = a @ b + bias with the bias added by the GEMM's epilogue as it writes out.
//
// cuBLAS is column-major; ember's matrices are row-major views with any strides. A row-major
// [R, C] matrix with strides (sr, 1) is the column-major [C, R] matrix with leading dimension
// sr, its transpose, so C = A B is computed as Cᵀ = Bᵀ Aᵀ with no copies; a matrix stored the
// other way round (strides (1, sc)) is passed with op T. Other layouts are copied dense first.
#include <cublasLt.h>
#include <cublas_v2.h>

#include <array>
#include <climits>

#include "ember/cuda/check.h"
#include "ember/cuda/cuda.h"
#include "ember/cuda/cuda_backend.h"
#include "ember/cuda/internal.h"
#include "ember/cuda/lazy_library.h"
#include "ember/tensor/ops.h"

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

// The cuBLASLt functions, likewise (its own library, libcublasLt, which libcublas also loads).
struct CublasLt {
  decltype(&cublasLtCreate) create;
  decltype(&cublasLtMatmulDescCreate) desc_create;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set;
  decltype(&cublasLtMatrixLayoutCreate) layout_create;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy;
  decltype(&cublasLtMatmulPreferenceCreate) preference_create;
  decltype(&cublasLtMatmulPreferenceDestroy) preference_destroy;
  decltype(&cublasLtMatmulPreferenceSetAttribute) preference_set;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic;
  decltype(&cublasLtMatmul) matmul;
};
const CublasLt& cublas_lt() {
  static LazyLibrary library({"libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR), "libcublasLt.so"}, "cuBLASLt");
  auto get = [](auto& field, const char* name) {
    field = reinterpret_cast<std::decay_t<decltype(field)>>(library.symbol(name));
  };
  static const CublasLt api = [&] {
    CublasLt f{};
    get(f.create, "cublasLtCreate");
    get(f.desc_create, "cublasLtMatmulDescCreate");
    get(f.desc_destroy, "cublasLtMatmulDescDestroy");
    get(f.desc_set, "cublasLtMatmulDescSetAttribute");
    get(f.layout_create, "cublasLtMatrixLayoutCreate");
    get(f.layout_destroy, "cublasLtMatrixLayoutDestroy");
    get(f.preference_create, "cublasLtMatmulPreferenceCreate");
    get(f.preference_destroy, "cublasLtMatmulPreferenceDestroy");
    get(f.preference_set, "cublasLtMatmulPreferenceSetAttribute");
    get(f.heuristic, "cublasLtMatmulAlgoGetHeuristic");
    get(f.matmul, "cublasLtMatmul");
    return f;
  }();
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

cublasLtHandle_t lt_handle_for(int device) {
  thread_local std::array<cublasLtHandle_t, 64> handles{};
  EMBER_CHECK(device >= 0 && device < 64, "cuBLASLt: device ", device, " out of range");
  if (!handles[device]) EMBER_CUBLAS_CHECK(cublas_lt().create(&handles[device]));
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

// `t` as cuBLAS will read it, its dims row_dim and row_dim + 1 being a [rows, cols] matrix:
// itself when row- or column-major, else a dense copy; `layout` receives how cuBLAS sees it.
Tensor as_operand(const Tensor& t, int64_t rows, int64_t cols, int row_dim, ColumnMajor& layout) {
  if (as_transpose(rows, cols, t.stride(row_dim), t.stride(row_dim + 1), layout)) return t;
  Tensor dense = native::contiguous(t);
  as_transpose(rows, cols, dense.stride(row_dim), dense.stride(row_dim + 1), layout);
  return dense;
}

int to_int(int64_t v, const char* what) {
  EMBER_CHECK(v >= 0 && v <= INT_MAX, "matmul on CUDA: ", what, " ", v, " exceeds cuBLAS's int range");
  return static_cast<int>(v);
}

// The largest power of two (up to 256) dividing an address: cuBLASLt picks kernels by the
// alignment it is promised, and views into a tensor start anywhere.
uint32_t alignment_of(const void* p) {
  uint32_t a = 256;
  while (a > 1 && reinterpret_cast<uintptr_t>(p) % a != 0) a /= 2;
  return a;
}

// Owns the cuBLASLt descriptors of one call.
struct LtCall {
  cublasLtMatmulDesc_t desc = nullptr;
  std::array<cublasLtMatrixLayout_t, 3> layouts{};  // first operand, second, output
  cublasLtMatmulPreference_t preference = nullptr;
  LtCall() = default;
  LtCall(const LtCall&) = delete;
  LtCall& operator=(const LtCall&) = delete;
  ~LtCall() {
    for (cublasLtMatrixLayout_t l : layouts)
      if (l) cublas_lt().layout_destroy(l);
    if (preference) cublas_lt().preference_destroy(preference);
    if (desc) cublas_lt().desc_destroy(desc);
  }
};

template <typename T>
void set(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const T& value) {
  EMBER_CUBLAS_CHECK(cublas_lt().desc_set(desc, attribute, &value, sizeof(value)));
}
template <typename T>
void set(cublasLtMatmulPreference_t preference, cublasLtMatmulPreferenceAttributes_t attribute, const T& value) {
  EMBER_CUBLAS_CHECK(cublas_lt().preference_set(preference, attribute, &value, sizeof(value)));
}

constexpr uint64_t kLtWorkspaceBytes = uint64_t{32} << 20;  // PyTorch's default on Hopper

}  // namespace

void CudaBackend::gemm(const Tensor& a_in, const Tensor& b_in, const Tensor& c, double alpha, double beta) {
  DeviceGuard guard(c.device().index);
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
  ColumnMajor ta{}, tb{}, tc{};
  const Tensor a = as_operand(a_in, M, K, 1, ta), b = as_operand(b_in, K, N, 1, tb);
  // The output must be row-major (cuBLAS writes it, column-major, as Cᵀ).
  Tensor out = c;
  if (!as_transpose(M, N, c.stride(1), c.stride(2), tc) || tc.op != CUBLAS_OP_N || (B > 1 && c.stride(0) == 0)) {
    out = beta == 0 ? empty(c.sizes(), TensorOptions(c.dtype()).device(c.device())) : native::contiguous(c);
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
    native::copy_(dst, out);
  }
}

namespace {

// The cuBLASLt descriptors of out = a @ b + bias: host work only, no GPU needed. False where
// cuBLASLt has no such kernel (float64, a strided out, empty sizes). `a`, `b` receive the
// operands as cuBLASLt will read them (made dense when neither row- nor column-major).
bool describe_bias_gemm(const Tensor& a_in, const Tensor& b_in, const Tensor& bias, const Tensor& out, LtCall& call,
                        Tensor& a, Tensor& b) {
  const int64_t M = out.size(0), N = out.size(1), K = a_in.size(1);
  cudaDataType_t type;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  switch (out.dtype()) {
    case kFloat32:
      type = CUDA_R_32F;
      if (backends::cuda::allow_tf32()) compute = CUBLAS_COMPUTE_32F_FAST_TF32;
      break;
    case kFloat16:
      type = CUDA_R_16F;
      break;
    case kBFloat16:
      type = CUDA_R_16BF;
      break;
    default:
      return false;  // float64: the two-pass path
  }
  if (M == 0 || N == 0 || K == 0 || !out.is_contiguous() || bias.stride(0) != 1) return false;
  ColumnMajor ta{}, tb{};
  a = as_operand(a_in, M, K, 0, ta);
  b = as_operand(b_in, K, N, 0, tb);
  // As in gemm: outᵀ (N x M, column-major) = op(bᵀ) (N x K) · op(aᵀ) (K x M) + bias, the bias
  // running along outᵀ's rows, which is what the epilogue broadcasts.
  const CublasLt& lt = cublas_lt();
  EMBER_CUBLAS_CHECK(lt.desc_create(&call.desc, compute, CUDA_R_32F));
  set(call.desc, CUBLASLT_MATMUL_DESC_TRANSA, tb.op);
  set(call.desc, CUBLASLT_MATMUL_DESC_TRANSB, ta.op);
  set(call.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
  set(call.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias.data_ptr());
  // Stored shapes (rows, cols) of each column-major operand: op T means stored transposed.
  auto stored = [](const ColumnMajor& t, int64_t rows, int64_t cols) {
    return t.op == CUBLAS_OP_N ? std::array<uint64_t, 2>{uint64_t(rows), uint64_t(cols)}
                               : std::array<uint64_t, 2>{uint64_t(cols), uint64_t(rows)};
  };
  const auto sb = stored(tb, N, K), sa = stored(ta, K, M);
  EMBER_CUBLAS_CHECK(lt.layout_create(&call.layouts[0], type, sb[0], sb[1], tb.ld));
  EMBER_CUBLAS_CHECK(lt.layout_create(&call.layouts[1], type, sa[0], sa[1], ta.ld));
  EMBER_CUBLAS_CHECK(lt.layout_create(&call.layouts[2], type, N, M, N));
  EMBER_CUBLAS_CHECK(lt.preference_create(&call.preference));
  set(call.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, kLtWorkspaceBytes);
  set(call.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignment_of(b.data_ptr()));
  set(call.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignment_of(a.data_ptr()));
  set(call.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignment_of(out.data_ptr()));
  set(call.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignment_of(out.data_ptr()));
  return true;
}

// Runs the described call with cuBLASLt's first heuristic choice, writing `out` (C = D);
// false (nothing done) when it has no kernel for the case.
bool run_lt(const LtCall& call, const void* alpha, const void* first, const void* second, const void* beta,
            const Tensor& out) {
  const CublasLt& lt = cublas_lt();
  const int device = out.device().index;
  cublasLtHandle_t h = lt_handle_for(device);
  cublasLtMatmulHeuristicResult_t best{};
  int found = 0;
  const cublasStatus_t status = lt.heuristic(h, call.desc, call.layouts[0], call.layouts[1], call.layouts[2],
                                             call.layouts[2], call.preference, 1, &best, &found);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || found == 0) return false;
  EMBER_CUBLAS_CHECK(status);
  const Tensor workspace =
      empty({static_cast<int64_t>(best.workspaceSize)}, TensorOptions(kUInt8).device(out.device()));
  EMBER_CUBLAS_CHECK(lt.matmul(h, call.desc, alpha, first, call.layouts[0], second, call.layouts[1], beta,
                               out.data_ptr(), call.layouts[2], out.data_ptr(), call.layouts[2], &best.algo,
                               best.workspaceSize ? workspace.data_ptr() : nullptr, best.workspaceSize,
                               stream_handle(device)));
  return true;
}

}  // namespace

bool check_bias_gemm_descriptors(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& out) {
  (void)cublas();  // resolves every cuBLAS function too
  LtCall call;
  Tensor a_used, b_used;
  return describe_bias_gemm(a, b, bias, out, call, a_used, b_used);
}

// out [M, N] = a [M, K] @ b [K, N] + bias [N] through cuBLASLt's bias epilogue; false (nothing
// done) where it has no kernel for the case (float64, strided out, empty sizes).
bool gemm_bias_epilogue(const Tensor& a_in, const Tensor& b_in, const Tensor& bias, const Tensor& out) {
  LtCall call;
  Tensor a, b;
  if (!describe_bias_gemm(a_in, b_in, bias, out, call, a, b)) return false;
  const float alpha = 1, beta = 0;
  return run_lt(call, &alpha, b.data_ptr(), a.data_ptr(), &beta, out);
}

void CudaBackend::gemm_bias(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& out) {
  DeviceGuard guard(out.device().index);
  if (!gemm_bias_epilogue(a, b, bias, out)) Backend::gemm_bias(a, b, bias, out);
}

// acc [M, N] int32 = a [M, K] int8 @ w [N, K]ᵀ int8, both row-major with K a multiple of 4: as
// in gemm, accᵀ (N x M, column-major) = wᵀ(stored [K, N], op T) · aᵀ (stored [K, M], op N), the
// "TN" form cuBLASLt's int8 tensor-core (IMMA) kernels take, int32 accumulation and scaling.
void int8_matmul_tn(const Tensor& a, const Tensor& w, const Tensor& acc) {
  const int64_t M = a.size(0), K = a.size(1), N = w.size(0);
  EMBER_CHECK(K % 4 == 0 && w.size(1) == K, "int8 matmul on CUDA: K must be a multiple of 4 (got ", K, ")");
  LtCall call;
  const CublasLt& lt = cublas_lt();
  EMBER_CUBLAS_CHECK(lt.desc_create(&call.desc, CUBLAS_COMPUTE_32I, CUDA_R_32I));
  set(call.desc, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
  set(call.desc, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  EMBER_CUBLAS_CHECK(lt.layout_create(&call.layouts[0], CUDA_R_8I, K, N, K));
  EMBER_CUBLAS_CHECK(lt.layout_create(&call.layouts[1], CUDA_R_8I, K, M, K));
  EMBER_CUBLAS_CHECK(lt.layout_create(&call.layouts[2], CUDA_R_32I, N, M, N));
  EMBER_CUBLAS_CHECK(lt.preference_create(&call.preference));
  set(call.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, kLtWorkspaceBytes);
  const int32_t alpha = 1, beta = 0;
  EMBER_CHECK(run_lt(call, &alpha, w.data_ptr(), a.data_ptr(), &beta, acc),
              "int8 matmul on CUDA: cuBLASLt has no int8 kernel for ", M, "x", K, " @ ", K, "x", N);
}

}  // namespace ember::cuda
