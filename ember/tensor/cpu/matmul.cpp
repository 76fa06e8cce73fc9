// GEMM on the CPU through Eigen's blocked, vectorized, multi-threaded kernel. Strided
// operands are mapped in place (row- or column-major with an outer stride); only a
// matrix with neither unit stride is copied first. float16 and bfloat16 have their own
// kernel (gemm16.cpp), which reads the 16-bit operands directly.
#include <Eigen/Core>

#include "ember/tensor/cpu/cpu_backend.h"
#include "ember/tensor/ops.h"
#include "ember/tensor/parallel.h"

namespace ember::cpu {
namespace {

template <class T>
using RowMap =
    Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, 0, Eigen::OuterStride<>>;
template <class T>
using ColMap =
    Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>, 0, Eigen::OuterStride<>>;
template <class T>
using OutMap = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, 0, Eigen::OuterStride<>>;

// How a [rows, cols] matrix with strides (s0, s1) can be handed to Eigen without a copy.
enum class Layout { RowMajor, ColMajor, Copy };
Layout layout_of(int64_t rows, int64_t cols, int64_t s0, int64_t s1) {
  if ((cols == 1 || s1 == 1) && (rows == 1 || s0 >= cols)) return Layout::RowMajor;
  if ((rows == 1 || s0 == 1) && (cols == 1 || s1 >= rows)) return Layout::ColMajor;
  return Layout::Copy;
}

// Calls f(eigen_map) for the matrix at p.
template <class T, class F>
void with_matrix(const T* p, int64_t rows, int64_t cols, int64_t s0, int64_t s1, Layout layout, const F& f) {
  if (layout == Layout::RowMajor)
    f(RowMap<T>(p, rows, cols, Eigen::OuterStride<>(rows == 1 ? cols : s0)));
  else
    f(ColMap<T>(p, rows, cols, Eigen::OuterStride<>(cols == 1 ? rows : s1)));
}

// alpha and beta in T; for the integer GEMM (in unsigned T, see below) through the signed type,
// saturated: a double outside it, or a negative one, is undefined in a plain cast.
template <class T>
T scalar_as(double v) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(detail::saturating_cast<std::make_signed_t<T>>(v));
  else
    return static_cast<T>(v);
}

template <class T>
void gemm_typed(const Tensor& a, const Tensor& b, const Tensor& c, double alpha, double beta) {
  const int64_t B = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  const Layout la = layout_of(M, K, a.stride(1), a.stride(2));
  const Layout lb = layout_of(K, N, b.stride(1), b.stride(2));
  EMBER_ASSERT(la != Layout::Copy && lb != Layout::Copy && (N == 1 || c.stride(2) == 1), "gemm: unmappable operand");
  const T* pa = static_cast<const T*>(a.data_ptr());
  const T* pb = static_cast<const T*>(b.data_ptr());
  T* pc = static_cast<T*>(c.data_ptr());
  const T al = scalar_as<T>(alpha), be = scalar_as<T>(beta);
  // float32: ember's own kernel where it applies (Note [float32 GEMM]).
  bool own = false;
  if constexpr (std::is_same_v<T, float>) own = gemm32_applies(M, N, K);
  auto one = [&](int64_t i) {
    if constexpr (std::is_same_v<T, float>) {
      if (own) {
        gemm32({pa + i * a.stride(0), a.stride(1), a.stride(2), pb + i * b.stride(0), b.stride(1), b.stride(2),
                pc + i * c.stride(0), M == 1 ? N : c.stride(1), N == 1 ? 1 : c.stride(2), M, N, K, al, be});
        return;
      }
    }
    OutMap<T> C(pc + i * c.stride(0), M, N, Eigen::OuterStride<>(M == 1 ? N : c.stride(1)));
    if (K == 0) {
      if (beta == 0)
        C.setZero();
      else
        C *= be;
      return;
    }
    with_matrix(pa + i * a.stride(0), M, K, a.stride(1), a.stride(2), la, [&](const auto& A) {
      with_matrix(pb + i * b.stride(0), K, N, b.stride(1), b.stride(2), lb, [&](const auto& Bm) {
        if (beta == 0) {
          if (alpha == 1)
            C.noalias() = A * Bm;
          else
            C.noalias() = al * (A * Bm);
        } else {
          if (beta != 1) C *= be;  // addmm's usual beta = 1 costs no extra pass over C
          if (alpha == 1)
            C.noalias() += A * Bm;
          else
            C.noalias() += al * (A * Bm);
        }
      });
    });
  };
  // Small matrices: one thread per batch entry. Large ones: Eigen splits each product. ember's
  // kernel splits a product too, but a batch of at least a product per thread (attention's
  // heads) goes faster one product per thread, each packed and computed where it is used.
  const double flops = static_cast<double>(M) * N * K;
  const bool small = flops < 64.0 * 64 * 64 || (own && B >= parallel_threads() && flops < 256.0 * 256 * 256);
  if (B > 1 && small) {
    parallel_for(0, B, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t i = b0; i < b1; ++i) one(i);
    });
  } else {
    for (int64_t i = 0; i < B; ++i) one(i);
  }
}

Tensor mappable(const Tensor& t) {
  return layout_of(t.size(1), t.size(2), t.stride(1), t.stride(2)) == Layout::Copy ? native::contiguous(t) : t;
}

}  // namespace

// c[b] = beta * c[b] + alpha * a[b] @ b[b];  a [B, M, K], b [B, K, N], c [B, M, N]
void CpuBackend::gemm(const Tensor& a_in, const Tensor& b_in, const Tensor& c, double alpha, double beta) {
  const Tensor a = mappable(a_in), b = mappable(b_in);
  switch (c.dtype()) {
    case kFloat32:
      return gemm_typed<float>(a, b, c, alpha, beta);
    case kFloat64:
      return gemm_typed<double>(a, b, c, alpha, beta);
    // Integers wrap on overflow as in PyTorch: the products and sums run in the unsigned type of
    // the same width (the same bits in two's complement; signed overflow is undefined in C++).
    case kInt32:
      return gemm_typed<uint32_t>(a, b, c, alpha, beta);
    case kInt64:
      return gemm_typed<uint64_t>(a, b, c, alpha, beta);
    case kFloat16:
    case kBFloat16:  // read directly, accumulated in float32 (Note [16-bit GEMM])
      return gemm16_with(gemm16_kernel(c.dtype()), a_in, b_in, c, alpha, beta);
    case kUInt8:
    case kInt8: {  // small integers: compute in int64, wrap on the way back as PyTorch does
      Tensor cl = beta == 0 ? empty(c.sizes(), kInt64) : native::to(c, kInt64);
      gemm_typed<uint64_t>(native::to(a, kInt64), native::to(b, kInt64), cl, alpha, beta);
      copy(cl, c);
      return;
    }
    default:
      break;
  }
  throw Error(detail::concat("matmul: not implemented for dtype ", c.dtype()));
}

}  // namespace ember::cpu
