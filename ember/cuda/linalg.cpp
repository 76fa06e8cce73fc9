// Matrix factorizations through cuSOLVER (getrf, getrs, potrf, syevd, gesvdj, geqrf, orgqr) and cuBLAS's triangular
// solve (trsm), on the column-major batches of Note [Fortran order] in tensor/backend.h: one
// call per matrix of the batch on the current stream, the workspace from the caching allocator.
// The info codes stay on the device; the native layer reads them (once per call, as PyTorch's
// linalg ops do) to throw on a singular or indefinite matrix. Both libraries are opened on
// first use (cuda/lazy_library.h).
#include <cublas_v2.h>
#include <cusolverDn.h>

#include <algorithm>
#include <array>
#include <climits>
#include <string>

#include "ember/cuda/check.h"
#include "ember/cuda/cuda.h"
#include "ember/cuda/cuda_backend.h"
#include "ember/cuda/internal.h"
#include "ember/cuda/lazy_library.h"
#include "ember/tensor/ops.h"

namespace ember::cuda {
namespace {

LazyLibrary& cusolver_library() {
  static LazyLibrary library({"libcusolver.so." + std::to_string(CUSOLVER_VER_MAJOR), "libcusolver.so"}, "cuSOLVER");
  return library;
}
LazyLibrary& cublas_library() {
  static LazyLibrary library({"libcublas.so." + std::to_string(CUBLAS_VER_MAJOR), "libcublas.so"}, "cuBLAS");
  return library;
}
template <class Fn>
Fn load(LazyLibrary& library, const std::string& name) {
  return reinterpret_cast<Fn>(library.symbol(name.c_str()));
}

// The typed entry points for float (S) and double (D).
template <class T>
struct Api;
#define EMBER_SOLVER_API(T, L)                                                                         \
  template <>                                                                                          \
  struct Api<T> {                                                                                      \
    decltype(&cusolverDn##L##getrf_bufferSize) getrf_buffer_size;                                      \
    decltype(&cusolverDn##L##getrf) getrf;                                                             \
    decltype(&cusolverDn##L##getrs) getrs;                                                             \
    decltype(&cusolverDn##L##potrf_bufferSize) potrf_buffer_size;                                      \
    decltype(&cusolverDn##L##potrf) potrf;                                                             \
    decltype(&cusolverDn##L##syevd_bufferSize) syevd_buffer_size;                                      \
    decltype(&cusolverDn##L##syevd) syevd;                                                             \
    decltype(&cusolverDn##L##gesvdj_bufferSize) gesvdj_buffer_size;                                    \
    decltype(&cusolverDn##L##gesvdj) gesvdj;                                                           \
    decltype(&cusolverDn##L##geqrf_bufferSize) geqrf_buffer_size;                                      \
    decltype(&cusolverDn##L##geqrf) geqrf;                                                             \
    decltype(&cusolverDn##L##orgqr_bufferSize) orgqr_buffer_size;                                      \
    decltype(&cusolverDn##L##orgqr) orgqr;                                                             \
    decltype(&cublas##L##trsm_v2) trsm;                                                                \
    static const Api& get() {                                                                          \
      static const Api api{                                                                            \
          load<decltype(getrf_buffer_size)>(cusolver_library(), "cusolverDn" #L "getrf_bufferSize"),   \
          load<decltype(getrf)>(cusolver_library(), "cusolverDn" #L "getrf"),                          \
          load<decltype(getrs)>(cusolver_library(), "cusolverDn" #L "getrs"),                          \
          load<decltype(potrf_buffer_size)>(cusolver_library(), "cusolverDn" #L "potrf_bufferSize"),   \
          load<decltype(potrf)>(cusolver_library(), "cusolverDn" #L "potrf"),                          \
          load<decltype(syevd_buffer_size)>(cusolver_library(), "cusolverDn" #L "syevd_bufferSize"),   \
          load<decltype(syevd)>(cusolver_library(), "cusolverDn" #L "syevd"),                          \
          load<decltype(gesvdj_buffer_size)>(cusolver_library(), "cusolverDn" #L "gesvdj_bufferSize"), \
          load<decltype(gesvdj)>(cusolver_library(), "cusolverDn" #L "gesvdj"),                        \
          load<decltype(geqrf_buffer_size)>(cusolver_library(), "cusolverDn" #L "geqrf_bufferSize"),   \
          load<decltype(geqrf)>(cusolver_library(), "cusolverDn" #L "geqrf"),                          \
          load<decltype(orgqr_buffer_size)>(cusolver_library(), "cusolverDn" #L "orgqr_bufferSize"),   \
          load<decltype(orgqr)>(cusolver_library(), "cusolverDn" #L "orgqr"),                          \
          load<decltype(trsm)>(cublas_library(), "cublas" #L "trsm_v2")};                              \
      return api;                                                                                      \
    }                                                                                                  \
  };
EMBER_SOLVER_API(float, S)
EMBER_SOLVER_API(double, D)
#undef EMBER_SOLVER_API

void check_solver(cusolverStatus_t status, const char* what) {
  EMBER_CHECK(status == CUSOLVER_STATUS_SUCCESS, what, " on CUDA failed: cuSOLVER status ", static_cast<int>(status));
}
void check_blas(cublasStatus_t status, const char* what) {
  EMBER_CHECK(status == CUBLAS_STATUS_SUCCESS, what, " on CUDA failed: cuBLAS status ", static_cast<int>(status));
}

// One handle of each library per device and thread, bound to the thread's current stream.
cusolverDnHandle_t solver_handle(int device) {
  static const auto create = load<decltype(&cusolverDnCreate)>(cusolver_library(), "cusolverDnCreate");
  static const auto set_stream = load<decltype(&cusolverDnSetStream)>(cusolver_library(), "cusolverDnSetStream");
  thread_local std::array<cusolverDnHandle_t, 64> handles{};
  EMBER_CHECK(device >= 0 && device < 64, "cuSOLVER: device index ", device, " out of range");
  if (!handles[device]) check_solver(create(&handles[device]), "cusolverDnCreate");
  check_solver(set_stream(handles[device], stream_handle(device)), "cusolverDnSetStream");
  return handles[device];
}
cublasHandle_t blas_handle(int device) {
  static const auto create = load<decltype(&cublasCreate_v2)>(cublas_library(), "cublasCreate_v2");
  static const auto set_stream = load<decltype(&cublasSetStream_v2)>(cublas_library(), "cublasSetStream_v2");
  thread_local std::array<cublasHandle_t, 64> handles{};
  EMBER_CHECK(device >= 0 && device < 64, "cuBLAS: device index ", device, " out of range");
  if (!handles[device]) check_blas(create(&handles[device]), "cublasCreate");
  check_blas(set_stream(handles[device], stream_handle(device)), "cublasSetStream");
  return handles[device];
}

int as_int(int64_t v, const char* what) {
  EMBER_CHECK(v <= INT_MAX, what, " on CUDA: ", v, " exceeds cuSOLVER's 32-bit sizes");
  return static_cast<int>(v);
}

// A device workspace of `count` elements of T, from the caching allocator.
template <class T>
Tensor workspace(int count, const Tensor& like) {
  return empty({static_cast<int64_t>(count) * static_cast<int64_t>(sizeof(T))},
               TensorOptions(kUInt8).device(like.device()));
}

template <class F>
void dispatch_real(DType dtype, const char* op, const F& f) {
  if (dtype == kFloat32) return f(float{});
  if (dtype == kFloat64) return f(double{});
  throw Error(detail::concat(op, " on CUDA: not implemented for dtype ", dtype));
}

}  // namespace

void CudaBackend::lu_factor(const Tensor& a, const Tensor& pivots, const Tensor& info) {
  DeviceGuard guard(a.device().index);
  const int64_t batch = a.size(0);
  const int n = as_int(a.size(1), "lu_factor");
  dispatch_real(a.dtype(), "lu_factor", [&](auto zero) {
    using T = decltype(zero);
    const Api<T>& api = Api<T>::get();
    cusolverDnHandle_t h = solver_handle(a.device().index);
    T* base = a.data_ptr<T>();
    int lwork = 0;
    check_solver(api.getrf_buffer_size(h, n, n, base, n, &lwork), "getrf_bufferSize");
    Tensor work = workspace<T>(lwork, a);
    for (int64_t i = 0; i < batch; ++i)
      check_solver(api.getrf(h, n, n, base + i * n * n, n, static_cast<T*>(work.data_ptr()),
                             pivots.data_ptr<int32_t>() + i * n, info.data_ptr<int32_t>() + i),
                   "getrf");
  });
}

void CudaBackend::lu_solve(const Tensor& lu, const Tensor& pivots, const Tensor& b, bool transpose) {
  DeviceGuard guard(lu.device().index);
  const int64_t batch = lu.size(0);
  const int n = as_int(lu.size(1), "lu_solve"), k = as_int(b.size(2), "lu_solve");
  dispatch_real(lu.dtype(), "lu_solve", [&](auto zero) {
    using T = decltype(zero);
    const Api<T>& api = Api<T>::get();
    cusolverDnHandle_t h = solver_handle(lu.device().index);
    Tensor status = empty({1}, TensorOptions(kInt32).device(lu.device()));  // getrs reports bad arguments only
    for (int64_t i = 0; i < batch; ++i)
      check_solver(
          api.getrs(h, transpose ? CUBLAS_OP_T : CUBLAS_OP_N, n, k, lu.data_ptr<T>() + i * n * n, n,
                    pivots.data_ptr<int32_t>() + i * n, b.data_ptr<T>() + i * n * k, n, status.data_ptr<int32_t>()),
          "getrs");
  });
}

void CudaBackend::cholesky(const Tensor& a, const Tensor& info) {
  DeviceGuard guard(a.device().index);
  const int64_t batch = a.size(0);
  const int n = as_int(a.size(1), "cholesky");
  dispatch_real(a.dtype(), "cholesky", [&](auto zero) {
    using T = decltype(zero);
    const Api<T>& api = Api<T>::get();
    cusolverDnHandle_t h = solver_handle(a.device().index);
    T* base = a.data_ptr<T>();
    int lwork = 0;
    check_solver(api.potrf_buffer_size(h, CUBLAS_FILL_MODE_LOWER, n, base, n, &lwork), "potrf_bufferSize");
    Tensor work = workspace<T>(lwork, a);
    for (int64_t i = 0; i < batch; ++i)
      check_solver(api.potrf(h, CUBLAS_FILL_MODE_LOWER, n, base + i * n * n, n, static_cast<T*>(work.data_ptr()), lwork,
                             info.data_ptr<int32_t>() + i),
                   "potrf");
  });
}

void CudaBackend::triangular_solve(const Tensor& a, const Tensor& b, bool upper, bool unit_diagonal) {
  DeviceGuard guard(a.device().index);
  const int64_t batch = a.size(0);
  const int n = as_int(a.size(1), "triangular_solve"), k = as_int(b.size(2), "triangular_solve");
  dispatch_real(a.dtype(), "triangular_solve", [&](auto zero) {
    using T = decltype(zero);
    const Api<T>& api = Api<T>::get();
    cublasHandle_t h = blas_handle(a.device().index);
    const T one = 1;
    for (int64_t i = 0; i < batch; ++i)
      check_blas(api.trsm(h, CUBLAS_SIDE_LEFT, upper ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N,
                          unit_diagonal ? CUBLAS_DIAG_UNIT : CUBLAS_DIAG_NON_UNIT, n, k, &one,
                          a.data_ptr<T>() + i * n * n, n, b.data_ptr<T>() + i * n * k, n),
                 "trsm");
  });
}

void CudaBackend::eigh(const Tensor& a, const Tensor& w, const Tensor& info, bool vectors) {
  DeviceGuard guard(a.device().index);
  const int64_t batch = a.size(0);
  const int n = as_int(a.size(1), "eigh");
  dispatch_real(a.dtype(), "eigh", [&](auto zero) {
    using T = decltype(zero);
    const Api<T>& api = Api<T>::get();
    cusolverDnHandle_t h = solver_handle(a.device().index);
    T* base = a.data_ptr<T>();
    const cusolverEigMode_t job = vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
    int lwork = 0;
    check_solver(api.syevd_buffer_size(h, job, CUBLAS_FILL_MODE_LOWER, n, base, n, w.data_ptr<T>(), &lwork),
                 "syevd_bufferSize");
    Tensor work = workspace<T>(lwork, a);
    for (int64_t i = 0; i < batch; ++i)
      check_solver(api.syevd(h, job, CUBLAS_FILL_MODE_LOWER, n, base + i * n * n, n, w.data_ptr<T>() + i * n,
                             static_cast<T*>(work.data_ptr()), lwork, info.data_ptr<int32_t>() + i),
                   "syevd");
  });
}

// gesvdj (one-sided Jacobi) takes any m and n and returns V, not Vᵀ: written with ldv = n into
// a row-major [vrows, n] buffer, V's columns are that buffer's rows, so the buffer read row-major
// is Vh, and one strided copy puts it in vh's column-major layout.
void CudaBackend::svd(const Tensor& a, bool full_matrices, const Tensor& u, const Tensor& s, const Tensor& vh,
                      const Tensor& info) {
  DeviceGuard guard(a.device().index);
  const int64_t batch = a.size(0);
  const int m = as_int(a.size(1), "svd"), n = as_int(a.size(2), "svd"), k = std::min(m, n);
  const bool vectors = u.defined();
  static const auto create_info =
      load<decltype(&cusolverDnCreateGesvdjInfo)>(cusolver_library(), "cusolverDnCreateGesvdjInfo");
  static const auto destroy_info =
      load<decltype(&cusolverDnDestroyGesvdjInfo)>(cusolver_library(), "cusolverDnDestroyGesvdjInfo");
  gesvdjInfo_t params = nullptr;
  check_solver(create_info(&params), "cusolverDnCreateGesvdjInfo");
  struct Release {
    decltype(destroy_info) destroy;
    gesvdjInfo_t params;
    ~Release() { destroy(params); }
  } release{destroy_info, params};
  dispatch_real(a.dtype(), "svd", [&](auto zero) {
    using T = decltype(zero);
    const Api<T>& api = Api<T>::get();
    cusolverDnHandle_t h = solver_handle(a.device().index);
    const cusolverEigMode_t job = vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
    const int econ = full_matrices ? 0 : 1, ucols = vectors ? as_int(u.size(2), "svd") : 1;
    const int vrows = vectors ? as_int(vh.size(1), "svd") : 1;
    // Without vectors gesvdj still wants valid U and V pointers (it does not write them).
    Tensor u_buffer = vectors ? u : empty({1, m, 1}, TensorOptions(a.dtype()).device(a.device()));
    Tensor v_buffer = empty({vectors ? batch : 1, vrows, n}, TensorOptions(a.dtype()).device(a.device()));
    T* base = a.data_ptr<T>();
    int lwork = 0;
    check_solver(api.gesvdj_buffer_size(h, job, econ, m, n, base, m, s.data_ptr<T>(), u_buffer.template data_ptr<T>(),
                                        m, v_buffer.template data_ptr<T>(), n, &lwork, params),
                 "gesvdj_bufferSize");
    Tensor work = workspace<T>(lwork, a);
    for (int64_t i = 0; i < batch; ++i) {
      const int64_t vi = vectors ? i : 0;
      check_solver(api.gesvdj(h, job, econ, m, n, base + i * int64_t(m) * n, m, s.data_ptr<T>() + i * k,
                              u_buffer.template data_ptr<T>() + (vectors ? i * int64_t(m) * ucols : 0), m,
                              v_buffer.template data_ptr<T>() + vi * int64_t(vrows) * n, n,
                              static_cast<T*>(work.data_ptr()), lwork, info.data_ptr<int32_t>() + i, params),
                   "gesvdj");
    }
    if (vectors) copy(v_buffer, vh);
  });
}

// geqrf and orgqr report bad arguments only in their status word, which stays on the device.
void CudaBackend::qr_factor(const Tensor& a, const Tensor& tau) {
  DeviceGuard guard(a.device().index);
  const int64_t batch = a.size(0);
  const int m = as_int(a.size(1), "qr_factor"), n = as_int(a.size(2), "qr_factor"), k = std::min(m, n);
  dispatch_real(a.dtype(), "qr_factor", [&](auto zero) {
    using T = decltype(zero);
    const Api<T>& api = Api<T>::get();
    cusolverDnHandle_t h = solver_handle(a.device().index);
    T* base = a.data_ptr<T>();
    int lwork = 0;
    check_solver(api.geqrf_buffer_size(h, m, n, base, m, &lwork), "geqrf_bufferSize");
    Tensor work = workspace<T>(lwork, a);
    Tensor status = empty({1}, TensorOptions(kInt32).device(a.device()));
    for (int64_t i = 0; i < batch; ++i)
      check_solver(api.geqrf(h, m, n, base + i * int64_t(m) * n, m, tau.data_ptr<T>() + i * k,
                             static_cast<T*>(work.data_ptr()), lwork, status.data_ptr<int32_t>()),
                   "geqrf");
  });
}

// orgqr works in place: Q's first k columns start as the reflectors, one contiguous run of m k
// elements per matrix in both (column-major), so one 2D copy moves the whole batch.
void CudaBackend::householder_product(const Tensor& reflectors, const Tensor& tau, const Tensor& q) {
  DeviceGuard guard(q.device().index);
  const int64_t batch = q.size(0), n = reflectors.size(2);
  const int m = as_int(q.size(1), "householder_product"), c = as_int(q.size(2), "householder_product");
  const int k = as_int(tau.size(1), "householder_product");
  dispatch_real(q.dtype(), "householder_product", [&](auto zero) {
    using T = decltype(zero);
    const Api<T>& api = Api<T>::get();
    cusolverDnHandle_t h = solver_handle(q.device().index);
    T* base = q.data_ptr<T>();
    EMBER_CUDA_CHECK(cudaMemcpy2DAsync(base, sizeof(T) * m * c, reflectors.data_ptr<T>(), sizeof(T) * m * n,
                                       sizeof(T) * m * k, batch, cudaMemcpyDeviceToDevice,
                                       stream_handle(q.device().index)));
    int lwork = 0;
    check_solver(api.orgqr_buffer_size(h, m, c, k, base, m, tau.data_ptr<T>(), &lwork), "orgqr_bufferSize");
    Tensor work = workspace<T>(lwork, q);
    Tensor status = empty({1}, TensorOptions(kInt32).device(q.device()));
    for (int64_t i = 0; i < batch; ++i)
      check_solver(api.orgqr(h, m, c, k, base + i * int64_t(m) * c, m, tau.data_ptr<T>() + i * k,
                             static_cast<T*>(work.data_ptr()), lwork, status.data_ptr<int32_t>()),
                   "orgqr");
  });
}

}  // namespace ember::cuda
