// Matrix factorizations (Note [Fortran order] in tensor/backend.h): LU with partial pivoting,
// triangular solves, Cholesky and the symmetric eigendecomposition, each on a batch of
// column-major matrices, one matrix per thread. The LU and Cholesky loops are LAPACK's, written
// out so that the pivots and the failing minor come back as LAPACK reports them (Eigen's
// PartialPivLU and LLT report neither); their bulk is Eigen's blocked GEMM and triangular solve.
// The eigensolver is Eigen's (tridiagonal reduction, then implicit symmetric QR), and so are the
// SVD (bidiagonal divide and conquer; one-sided Jacobi below 16 columns; float32's values alone:
// its bidiagonalization, then the tridiagonal BᵀB's eigenvalues in float64) and the blocked
// Householder QR, whose reflectors and scales are LAPACK's (same sign convention, same layout);
// Q is formed from them as LAPACK's orgqr does, by blocks of reflectors applied through GEMMs.
#include <Eigen/Core>
#include <Eigen/Eigenvalues>
#include <Eigen/QR>
#include <Eigen/SVD>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "ember/tensor/cpu/cpu_backend.h"
#include "ember/tensor/cpu/tridiagonal_eigen.h"
#include "ember/tensor/parallel.h"

namespace ember::cpu {
namespace {

// The factorizations run in float32 or float64 (the native layer has checked): f(T{}).
template <class F>
void dispatch_real(DType dtype, const char* op, const F& f) {
  if (dtype == DType::Float32) return f(float{});
  if (dtype == DType::Float64) return f(double{});
  throw Error(detail::concat(op, ": not implemented for dtype ", dtype));
}

template <class T>
using Matrix = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>>;

// One batch entry per thread: a matrix's work is O(n³), so a small grain is enough.
template <class F>
void for_each_matrix(int64_t batch, int64_t n, const F& f) {
  parallel_for(0, batch, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, n * n * n)), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) f(i);
  });
}

// f(c0, c1) on chunks of a matrix's k right-hand-side columns, one per thread: a lone matrix's
// solves then use every core (inside a batch spread over the threads it runs inline).
template <class F>
void for_column_chunks(int64_t n, int64_t k, const F& f) {
  parallel_for(0, k, std::max<int64_t>(16, kGrainSize / std::max<int64_t>(1, n * n)), f);
}

// LAPACK's row swaps (laswp) on columns [c0, c1) of a column-major matrix with leading dimension
// ld: rows j and pivots[j] - 1 for j in [j0, j1), in that order or (`reverse`) backwards. Column
// by column, so each swap touches two elements of a column already in cache, not two rows
// strided across the whole matrix.
template <class T>
void swap_rows(T* data, int64_t ld, int64_t c0, int64_t c1, const int32_t* pivots, int64_t j0, int64_t j1,
               bool reverse = false) {
  for (int64_t c = c0; c < c1; ++c) {
    T* column = data + c * ld;
    if (!reverse) {
      for (int64_t j = j0; j < j1; ++j) std::swap(column[j], column[pivots[j] - 1]);
    } else {
      for (int64_t j = j1 - 1; j >= j0; --j) std::swap(column[j], column[pivots[j] - 1]);
    }
  }
}

// getrf on one n x n matrix: panels of kPanel columns are factored column by column (pivot =
// the largest magnitude below the diagonal, swapped within the panel), then the panel's swaps
// are applied to the columns on both sides, the rows to its right get U12 = L11⁻¹ A12 and the
// trailing matrix A22 -= L21 U12 (the O(n³) part, one GEMM).
// Returns LAPACK's info: 0, or the 1-based index of the first exactly zero pivot.
template <class T>
int32_t lu_one(T* data, int64_t n, int32_t* pivots) {
  constexpr int64_t kPanel = 32;
  Matrix<T> a(data, n, n);
  int32_t info = 0;
  for (int64_t p0 = 0; p0 < n; p0 += kPanel) {
    const int64_t width = std::min(kPanel, n - p0), p1 = p0 + width;
    for (int64_t j = p0; j < p1; ++j) {
      Eigen::Index best = 0;
      a.col(j).segment(j, n - j).cwiseAbs().maxCoeff(&best);
      const int64_t p = j + best;
      pivots[j] = static_cast<int32_t>(p + 1);
      if (p != j) a.row(j).segment(p0, width).swap(a.row(p).segment(p0, width));
      const T pivot = a(j, j);
      if (pivot != T(0)) {
        a.col(j).segment(j + 1, n - j - 1) /= pivot;
      } else if (info == 0) {
        info = static_cast<int32_t>(j + 1);  // as LAPACK: the column is left as it is, and the factoring goes on
      }
      if (p1 - j - 1 > 0)
        a.block(j + 1, j + 1, n - j - 1, p1 - j - 1).noalias() -=
            a.col(j).segment(j + 1, n - j - 1) * a.row(j).segment(j + 1, p1 - j - 1);
    }
    swap_rows(data, n, 0, p0, pivots, p0, p1);
    swap_rows(data, n, p1, n, pivots, p0, p1);
    if (p1 < n) {
      auto u12 = a.block(p0, p1, width, n - p1);
      a.block(p0, p0, width, width).template triangularView<Eigen::UnitLower>().solveInPlace(u12);
      a.block(p1, p1, n - p1, n - p1).noalias() -= a.block(p1, p0, n - p1, width) * a.block(p0, p1, width, n - p1);
    }
  }
  return info;
}

// potrf (lower) on one diagonal block, left-looking: column j is the block's minus the products
// of the rows already factored (one GEMV), scaled by the square root of its diagonal. Returns
// 0, or the 1-based index of the first pivot ≤ 0 or NaN (left on the diagonal, as LAPACK does).
template <class Block>
int32_t cholesky_unblocked(Block a) {
  using T = typename Block::Scalar;
  const int64_t n = a.rows();
  for (int64_t j = 0; j < n; ++j) {
    const T d = a(j, j) - a.row(j).head(j).squaredNorm();
    if (!(d > T(0))) {
      a(j, j) = d;
      return static_cast<int32_t>(j + 1);
    }
    const T root = std::sqrt(d);
    a(j, j) = root;
    const int64_t below = n - j - 1;
    if (below > 0) {
      if (j > 0) a.col(j).tail(below).noalias() -= a.block(j + 1, 0, below, j) * a.row(j).head(j).transpose();
      a.col(j).tail(below) /= root;
    }
  }
  return 0;
}

// potrf (lower) on one matrix, right-looking in blocks of kBlock columns (LAPACK's dpotrf):
// factor the diagonal block, solve the panel below it (L21 = A21 L11⁻ᵀ), then take L21 L21ᵀ
// from the lower triangle of the trailing matrix (the O(n³) part, a triangular GEMM). Only the
// lower triangle is read or written. Returns 0, or the order of the first leading minor that is
// not positive-definite.
template <class T>
int32_t cholesky_one(T* data, int64_t n) {
  constexpr int64_t kBlock = 96;
  Matrix<T> a(data, n, n);
  for (int64_t k0 = 0; k0 < n; k0 += kBlock) {
    const int64_t width = std::min(kBlock, n - k0), k1 = k0 + width, rest = n - k1;
    const int32_t info = cholesky_unblocked(a.block(k0, k0, width, width));
    if (info != 0) return static_cast<int32_t>(k0 + info);
    if (rest == 0) break;
    auto l21 = a.block(k1, k0, rest, width);
    a.block(k0, k0, width, width)
        .transpose()
        .template triangularView<Eigen::Upper>()
        .template solveInPlace<Eigen::OnTheRight>(l21);
    a.block(k1, k1, rest, rest).template triangularView<Eigen::Lower>() -= l21 * l21.transpose();
  }
  return 0;
}

}  // namespace

// a [B, n, n] (column-major) -> its LU factors in place; pivots [B, n] and info [B] int32
void CpuBackend::lu_factor(const Tensor& a, const Tensor& pivots, const Tensor& info) {
  const int64_t batch = a.size(0), n = a.size(1);
  dispatch_real(a.dtype(), "lu_factor", [&](auto zero) {
    using scalar_t = decltype(zero);
    scalar_t* base = a.data_ptr<scalar_t>();
    int32_t* piv = pivots.data_ptr<int32_t>();
    int32_t* inf = info.data_ptr<int32_t>();
    for_each_matrix(batch, n, [&](int64_t i) { inf[i] = lu_one(base + i * n * n, n, piv + i * n); });
  });
}

// b [B, n, k] <- A⁻¹ b (or A⁻ᵀ b): the row swaps, then L's and U's triangular solves (for Aᵀ
// = Uᵀ Lᵀ P: Uᵀ's and Lᵀ's solves, then the swaps undone in reverse order), on chunks of b's
// columns in parallel.
void CpuBackend::lu_solve(const Tensor& lu, const Tensor& pivots, const Tensor& b, bool transpose) {
  const int64_t batch = lu.size(0), n = lu.size(1), k = b.size(2);
  dispatch_real(lu.dtype(), "lu_solve", [&](auto zero) {
    using scalar_t = decltype(zero);
    scalar_t* factors = lu.data_ptr<scalar_t>();
    scalar_t* rhs = b.data_ptr<scalar_t>();
    const int32_t* piv = pivots.data_ptr<int32_t>();
    for_each_matrix(batch, n, [&](int64_t i) {
      const Matrix<scalar_t> f(factors + i * n * n, n, n);
      scalar_t* columns = rhs + i * n * k;
      const int32_t* p = piv + i * n;
      for_column_chunks(n, k, [&](int64_t c0, int64_t c1) {
        Eigen::Map<Eigen::Matrix<scalar_t, Eigen::Dynamic, Eigen::Dynamic>> x(columns + c0 * n, n, c1 - c0);
        if (!transpose) {
          swap_rows(columns, n, c0, c1, p, 0, n);
          f.template triangularView<Eigen::UnitLower>().solveInPlace(x);
          f.template triangularView<Eigen::Upper>().solveInPlace(x);
        } else {
          f.transpose().template triangularView<Eigen::Lower>().solveInPlace(x);
          f.transpose().template triangularView<Eigen::UnitUpper>().solveInPlace(x);
          swap_rows(columns, n, c0, c1, p, 0, n, /*reverse=*/true);
        }
      });
    });
  });
}

// a [B, n, n] -> lower Cholesky factors in place; info [B] int32
void CpuBackend::cholesky(const Tensor& a, const Tensor& info) {
  const int64_t batch = a.size(0), n = a.size(1);
  dispatch_real(a.dtype(), "cholesky", [&](auto zero) {
    using scalar_t = decltype(zero);
    scalar_t* base = a.data_ptr<scalar_t>();
    int32_t* inf = info.data_ptr<int32_t>();
    for_each_matrix(batch, n, [&](int64_t i) { inf[i] = cholesky_one(base + i * n * n, n); });
  });
}

// b [B, n, k] <- A⁻¹ b, A [B, n, n] triangular
void CpuBackend::triangular_solve(const Tensor& a, const Tensor& b, bool upper, bool unit_diagonal) {
  const int64_t batch = a.size(0), n = a.size(1), k = b.size(2);
  dispatch_real(a.dtype(), "triangular_solve", [&](auto zero) {
    using scalar_t = decltype(zero);
    scalar_t* tri = a.data_ptr<scalar_t>();
    scalar_t* rhs = b.data_ptr<scalar_t>();
    for_each_matrix(batch, n, [&](int64_t i) {
      const Matrix<scalar_t> t(tri + i * n * n, n, n);
      for_column_chunks(n, k, [&](int64_t c0, int64_t c1) {
        Matrix<scalar_t> x(rhs + i * n * k + c0 * n, n, c1 - c0);
        if (upper && unit_diagonal) t.template triangularView<Eigen::UnitUpper>().solveInPlace(x);
        if (upper && !unit_diagonal) t.template triangularView<Eigen::Upper>().solveInPlace(x);
        if (!upper && unit_diagonal) t.template triangularView<Eigen::UnitLower>().solveInPlace(x);
        if (!upper && !unit_diagonal) t.template triangularView<Eigen::Lower>().solveInPlace(x);
      });
    });
  });
}

// The product H_1 … H_b of b reflectors as one "compact WY" transform I - V T Vᵀ (LAPACK's larft,
// forward and column-wise): v [rows, b] the reflectors with their unit diagonal and zeros above
// it -> t [b, b] upper triangular, T_ii = τ_i and T[:i, i] = -τ_i T[:i, :i] (Vᵀ v_i)[:i].
template <class Dense, class Scales>
void compact_wy_factor(const Dense& v, const Scales& tau, Dense& t) {
  using Vector = Eigen::Matrix<typename Dense::Scalar, Eigen::Dynamic, 1>;
  const int64_t b = v.cols();
  Dense gram = Dense::Zero(b, b);
  gram.template selfadjointView<Eigen::Upper>().rankUpdate(v.transpose());  // its upper triangle
  t.setZero(b, b);
  Vector y(b);
  for (int64_t i = 0; i < b; ++i) {
    t(i, i) = tau(i);
    y.head(i).noalias() = t.topLeftCorner(i, i).template triangularView<Eigen::Upper>() * gram.col(i).head(i);
    t.col(i).head(i) = -tau(i) * y.head(i);
  }
}

// reflectors [m, k] in geqrf's layout (each one's essential part below the diagonal), their
// scales tau [k] -> out [m, c] (k ≤ c ≤ m), the first c columns of H_1 … H_k, as LAPACK's orgqr:
// Q starts as the identity and takes blocks of reflectors from the last to the first, each only
// from its first row and column on (the identity's columns before a reflector's index are never
// touched by it or the later ones). A block, I - V T Vᵀ, reaches the columns to its right (whose
// rows above the block's end are still zero) through two GEMMs (larfb); its own columns are still
// the identity's E, so they become E - V (T V₁ᵀ) at once, V₁ the block's top square. (Eigen's own
// sequence application, which multiplies through triangular products and recomputes the
// identity's columns, took about twice as long.)
template <class T>
void householder_q(const Eigen::Ref<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>>& reflectors, const T* tau,
                   Eigen::Ref<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>> out) {
  using Dense = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
  using Vector = Eigen::Matrix<T, Eigen::Dynamic, 1>;
  const int64_t m = out.rows(), c = out.cols(), k = reflectors.cols();
  const Eigen::Map<const Vector> scale(tau, k);
  out.setIdentity();
  constexpr int64_t kBlock = 32;  // (as LAPACK's orgqr; 64 and 96 were slower here)
  // Few reflectors: one at a time (org2r), sparing small matrices T's fixed costs (4096 8 × 8
  // matrices took 1.8 times as long through the blocks).
  if (k <= kBlock) {
    Vector workspace(c);
    for (int64_t j = k - 1; j >= 0; --j)
      out.block(j, j, m - j, c - j)
          .applyHouseholderOnTheLeft(reflectors.col(j).tail(m - j - 1), scale(j), workspace.data());
    return;
  }
  Dense v, t, w;
  for (int64_t end = k; end > 0; end -= kBlock) {
    const int64_t j = std::max<int64_t>(0, end - kBlock), b = end - j, rows = m - j;
    v = reflectors.block(j, j, rows, b);
    v.template triangularView<Eigen::StrictlyUpper>().setZero();
    v.diagonal().setOnes();
    compact_wy_factor(v, scale.segment(j, b), t);
    if (c > end) {  // the columns to the right: C -= V (T (V₂ᵀ C₂)), C₂ their rows from `end` on
      auto right = out.block(j, end, rows, c - end);
      w.noalias() = v.bottomRows(rows - b).transpose() * right.bottomRows(rows - b);
      w = t.template triangularView<Eigen::Upper>() * w;
      right.noalias() -= v * w;
    }
    w.noalias() = t.template triangularView<Eigen::Upper>() * v.topRows(b).transpose();
    auto own = out.block(j, j, rows, b);
    own.noalias() = -v * w;
    own.diagonal().array() += T(1);
  }
}

// a [n, n] symmetric (its lower triangle) -> T = Qᵀ A Q in place, in the layout of Eigen's
// tridiagonalization_inplace: T's diagonal on a's, the subdiagonal below it, each reflector H_i =
// I - tau_i v_i v_iᵀ's essential part below that (v_i's element i + 1 is 1), tau [n - 1]. LAPACK's
// sytrd: a reflector's similarity transform is A ← A - v wᵀ - w vᵀ with w = h (A v - ½ h (vᵀ A v)
// v). Unblocked (sytd2), each column sweeps the trailing matrix twice, for A v and for the
// rank-2 update; panels of 32 columns (latrd) defer the updates, keeping the panel's transforms
// as V and W (column i corrected when its turn comes, A v corrected by V (Wᵀ v) and W (Vᵀ v)),
// then update the trailing lower triangle with two triangular GEMMs (syr2k), so each column
// sweeps it once. 1024 × 1024 took 47-49 ms, the unblocked 74-80; below about 128 columns the
// panels' bookkeeping loses (0.3x at 8, 0.8x at 64), so the last 128 go unblocked, as LAPACK's.
template <class T>
void tridiagonalize(Matrix<T>& a, T* tau) {
  using Dense = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
  using Vector = Eigen::Matrix<T, Eigen::Dynamic, 1>;
  const int64_t n = a.rows();
  constexpr int64_t kPanel = 32, kUnblocked = 128;
  // The reflector of column i (v_i, with its 1) and its w; h and beta as makeHouseholder's.
  auto reflect = [&](int64_t i, Eigen::Ref<Vector> v) {
    const int64_t m = n - i - 1;  // H_i acts on rows i + 1 … n - 1
    T h, beta;
    a.col(i).tail(m).makeHouseholderInPlace(h, beta);
    v(0) = T(1);
    v.tail(m - 1) = a.col(i).tail(m - 1);
    a(i + 1, i) = beta;
    tau[i] = h;
    return h;
  };
  int64_t j0 = 0;
  if (n > kUnblocked) {
    Dense V(n, kPanel), W(n, kPanel);
    Vector products(kPanel);
    for (; n - j0 > kUnblocked; j0 += kPanel) {
      V.setZero();
      W.setZero();
      for (int64_t p = 0; p < kPanel; ++p) {
        const int64_t i = j0 + p, m = n - i - 1;
        if (p > 0) {  // column i as the panel's earlier reflectors left it
          auto column = a.col(i).tail(n - i);
          column.noalias() -= V.block(i, 0, n - i, p) * W.row(i).head(p).transpose();
          column.noalias() -= W.block(i, 0, n - i, p) * V.row(i).head(p).transpose();
        }
        auto v = V.col(p).segment(i + 1, m);
        const T h = reflect(i, v);
        // A v for the trailing A as the panel leaves it: A's own lower triangle (untouched so
        // far) times v, less V (Wᵀ v) and W (Vᵀ v)
        auto w = W.col(p).segment(i + 1, m);
        w.noalias() = a.bottomRightCorner(m, m).template selfadjointView<Eigen::Lower>() * v;
        products.head(p).noalias() = W.block(i + 1, 0, m, p).transpose() * v;
        w.noalias() -= V.block(i + 1, 0, m, p) * products.head(p);
        products.head(p).noalias() = V.block(i + 1, 0, m, p).transpose() * v;
        w.noalias() -= W.block(i + 1, 0, m, p) * products.head(p);
        w *= h;
        w += (T(-0.5) * h * w.dot(v)) * v;
      }
      const int64_t r0 = j0 + kPanel, rest = n - r0;  // the trailing lower triangle: A -= V Wᵀ + W Vᵀ
      auto trailing = a.bottomRightCorner(rest, rest).template triangularView<Eigen::Lower>();
      trailing -= V.block(r0, 0, rest, kPanel) * W.block(r0, 0, rest, kPanel).transpose();
      trailing -= W.block(r0, 0, rest, kPanel) * V.block(r0, 0, rest, kPanel).transpose();
    }
  }
  Vector v_all(n), w_all(n);
  for (int64_t i = j0; i < n - 1; ++i) {  // the last (or only) block, a reflector at a time
    const int64_t m = n - i - 1;
    auto v = v_all.head(m), w = w_all.head(m);
    const T h = reflect(i, v);
    auto trailing = a.bottomRightCorner(m, m).template selfadjointView<Eigen::Lower>();
    w.noalias() = h * (trailing * v);
    w += (T(-0.5) * h * w.dot(v)) * v;
    trailing.rankUpdate(v, w, T(-1));
  }
}

// A symmetric matrix's eigenvalues, ascending, and when `vectors` its eigenvectors in place as
// columns, from its lower triangle (a is overwritten either way), by LAPACK's steqr route: the
// reduction to a tridiagonal T = Qᵀ A Q (tridiagonalize), Q formed by householder_q's blocks, then
// T's QR iteration in float64 with its rotations applied to Q (tridiagonal_eigen.h). Eigen's solver
// forms Q in place a reflector at a time (as long as the reduction itself at 1024 × 1024), and
// iterates in the matrix's type: in float32 that drifted about n ε₃₂ ‖A‖ (480 ε₃₂ ‖A‖ off at
// 150 × 150, 4 ε₃₂ ‖A‖ this way). Scaled into [-1, 1] first, as Eigen's solver does, so the
// reduction's squares neither overflow nor underflow. False when the iteration does not converge.
template <class T, class Values>
bool symmetric_eigen(Matrix<T>& a, Values&& out, bool vectors) {
  const int64_t n = a.rows();
  a.template triangularView<Eigen::StrictlyUpper>().setZero();
  if (!a.allFinite()) return false;
  T scale = a.cwiseAbs().maxCoeff();
  if (scale == T(0)) scale = T(1);
  a /= scale;
  Eigen::Matrix<T, Eigen::Dynamic, 1> householder_scales(n - 1);
  tridiagonalize(a, householder_scales.data());
  std::vector<double> d(n), e(n - 1);
  for (int64_t i = 0; i < n; ++i) d[i] = a(i, i);
  for (int64_t i = 0; i + 1 < n; ++i) e[i] = a(i + 1, i);
  if (vectors) {  // Q = diag(1, Q'), Q' from the reflectors below the subdiagonal, in geqrf's layout
    const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> reflectors = a.bottomLeftCorner(n - 1, n - 1);
    auto rest = a.bottomRightCorner(n - 1, n - 1);
    householder_q<T>(reflectors, householder_scales.data(), rest);
    a.row(0).setZero();
    a.col(0).setZero();
    a(0, 0) = T(1);
  }
  if (!tridiagonal_eigen(d, e, vectors ? a.data() : static_cast<T*>(nullptr), n, n)) return false;
  for (int64_t i = 0; i < n; ++i) out(i) = static_cast<T>(d[i] * scale);
  return true;
}

// a [B, n, n] symmetric (lower triangle) -> eigenvectors in place; w [B, n] ascending; info [B]
void CpuBackend::eigh(const Tensor& a, const Tensor& w, const Tensor& info, bool vectors) {
  const int64_t batch = a.size(0), n = a.size(1);
  dispatch_real(a.dtype(), "eigh", [&](auto zero) {
    using scalar_t = decltype(zero);
    scalar_t* base = a.data_ptr<scalar_t>();
    scalar_t* values = w.data_ptr<scalar_t>();
    int32_t* inf = info.data_ptr<int32_t>();
    for_each_matrix(batch, n, [&](int64_t i) {
      Matrix<scalar_t> m(base + i * n * n, n, n);
      Eigen::Map<Eigen::Matrix<scalar_t, Eigen::Dynamic, 1>> v(values + i * n, n);
      // (without vectors the tridiagonal QR iteration rotates only the diagonals, O(n²) after the
      // O(n³) reduction, where accumulating the rotations into the vectors is itself O(n³))
      inf[i] = symmetric_eigen(m, v, vectors) ? 0 : 1;  // (a NaN or an infinity does not converge)
      if (inf[i] != 0) {
        v.setConstant(std::numeric_limits<scalar_t>::quiet_NaN());
        if (vectors) m.setConstant(std::numeric_limits<scalar_t>::quiet_NaN());
      }
    });
  });
}

// A float32 matrix's singular values alone (gesdd's job "N"), descending, a [m, n] with m ≥ n:
// Eigen's blocked bidiagonalization in float32 (B upper bidiagonal, d on its diagonal, e above it),
// then σ² as the eigenvalues of the tridiagonal BᵀB (d_i² + e_{i-1}² on its diagonal, d_i e_i beside
// it), formed and solved in float64 in O(n²). Squaring costs that iteration half its digits, but
// half of float64's (ε₆₄ σ₁² on σ²) is still below what float32 itself knows of any σ (ε₃₂ σ₁):
// 256 × 256 came 1e-6 off the float64 values, BDCSVD's float32 3e-5. BDCSVD without vectors still
// runs most of its divide and conquer; this takes about half its time at 256 × 256. (float64 has
// no wider type to square in, so it keeps BDCSVD.) False when the iteration does not converge.
// The bidiagonalization is Eigen::internal API (the step BDCSVD itself starts with; Debian pins
// Eigen 3.4); its in-place form overwrites a, where the class would first copy it.
template <class Values>
bool float32_singular_values(Eigen::Ref<Eigen::MatrixXf> a, Values&& out) {
  const int64_t n = a.cols();
  Eigen::internal::UpperBidiagonalization<Eigen::MatrixXf>::BidiagonalType b(n, n);
  Eigen::internal::upperbidiagonalization_inplace_blocked(a, b);
  const Eigen::VectorXd d = b.template diagonal<0>().cast<double>(), e = b.template diagonal<1>().cast<double>();
  Eigen::VectorXd diagonal(n), beside(n - 1);
  for (int64_t i = 0; i < n; ++i) diagonal(i) = d(i) * d(i) + (i > 0 ? e(i - 1) * e(i - 1) : 0.0);
  for (int64_t i = 0; i + 1 < n; ++i) beside(i) = d(i) * e(i);
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> solver;
  solver.computeFromTridiagonal(diagonal, beside, Eigen::EigenvaluesOnly);
  if (solver.info() != Eigen::Success) return false;
  out = solver.eigenvalues().reverse().cwiseMax(0.0).cwiseSqrt().cast<float>();  // (a zero σ² may round below 0)
  return true;
}

void CpuBackend::svd(const Tensor& a, bool full_matrices, const Tensor& u, const Tensor& s, const Tensor& vh,
                     const Tensor& info) {
  const int64_t batch = a.size(0), m = a.size(1), n = a.size(2), k = std::min(m, n);
  const bool vectors = u.defined();
  dispatch_real(a.dtype(), "svd", [&](auto zero) {
    using scalar_t = decltype(zero);
    using Dense = Eigen::Matrix<scalar_t, Eigen::Dynamic, Eigen::Dynamic>;
    scalar_t* base = a.data_ptr<scalar_t>();
    scalar_t* values = s.data_ptr<scalar_t>();
    int32_t* inf = info.data_ptr<int32_t>();
    const int64_t ucols = vectors ? u.size(2) : 0, vrows = vectors ? vh.size(1) : 0;
    scalar_t* ubase = vectors ? u.data_ptr<scalar_t>() : nullptr;
    scalar_t* vbase = vectors ? vh.data_ptr<scalar_t>() : nullptr;
    const unsigned options = full_matrices ? unsigned(Eigen::ComputeFullU | Eigen::ComputeFullV)
                                           : unsigned(Eigen::ComputeThinU | Eigen::ComputeThinV);
    constexpr scalar_t nan = std::numeric_limits<scalar_t>::quiet_NaN();
    for_each_matrix(batch, std::max(m, n), [&](int64_t i) {
      Eigen::Map<Eigen::Matrix<scalar_t, Eigen::Dynamic, 1>> sv(values + i * k, k);
      const Matrix<scalar_t> matrix(base + i * m * n, m, n);
      // (a NaN or an infinity does not converge, as LAPACK reports it; for BDCSVD it is InvalidInput)
      bool converged;
      if (!vectors) {
        if constexpr (std::is_same_v<scalar_t, float>) {
          // (a tall matrix in place, as the contract allows; a wide one as its transpose, which is tall)
          Matrix<float> in_place(base + i * m * n, m, n);
          Eigen::MatrixXf transposed;
          if (m < n) transposed = matrix.transpose();
          converged = matrix.allFinite() &&
                      (m >= n ? float32_singular_values(in_place, sv) : float32_singular_values(transposed, sv));
        } else {
          const Eigen::BDCSVD<Dense> solver(matrix);
          converged = solver.info() == Eigen::Success;
          if (converged) sv = solver.singularValues();
        }
      } else {
        Matrix<scalar_t> um(ubase + i * m * ucols, m, ucols), vm(vbase + i * vrows * n, vrows, n);
        const Eigen::BDCSVD<Dense> solver(matrix, options);
        converged = solver.info() == Eigen::Success;
        if (converged) {
          sv = solver.singularValues();
          um = solver.matrixU();
          vm = solver.matrixV().transpose();
        } else {
          um.setConstant(nan);
          vm.setConstant(nan);
        }
      }
      inf[i] = converged ? 0 : 1;
      if (!converged) sv.setConstant(nan);
    });
  });
}

// a [B, m, n] -> R and the reflectors in place (geqrf's layout); tau [B, k]
void CpuBackend::qr_factor(const Tensor& a, const Tensor& tau) {
  const int64_t batch = a.size(0), m = a.size(1), n = a.size(2), k = std::min(m, n);
  dispatch_real(a.dtype(), "qr_factor", [&](auto zero) {
    using scalar_t = decltype(zero);
    using Dense = Eigen::Matrix<scalar_t, Eigen::Dynamic, Eigen::Dynamic>;
    scalar_t* base = a.data_ptr<scalar_t>();
    scalar_t* scales = tau.data_ptr<scalar_t>();
    for_each_matrix(batch, std::max(m, n), [&](int64_t i) {
      Matrix<scalar_t> matrix(base + i * m * n, m, n);
      Eigen::Ref<Dense> in_place(matrix);
      const Eigen::HouseholderQR<Eigen::Ref<Dense>> qr(in_place);
      Eigen::Map<Eigen::Matrix<scalar_t, Eigen::Dynamic, 1>>(scales + i * k, k) = qr.hCoeffs();
    });
  });
}

// f [B, m, n] (geqrf's reflectors in its first k columns) -> q [B, m, c] (householder_q)
void CpuBackend::householder_product(const Tensor& f, const Tensor& tau, const Tensor& q) {
  const int64_t batch = q.size(0), m = q.size(1), c = q.size(2), k = tau.size(1), n = f.size(2);
  dispatch_real(q.dtype(), "householder_product", [&](auto zero) {
    using scalar_t = decltype(zero);
    using Dense = Eigen::Matrix<scalar_t, Eigen::Dynamic, Eigen::Dynamic>;
    scalar_t* base = q.data_ptr<scalar_t>();
    const scalar_t* scales = tau.data_ptr<scalar_t>();
    for_each_matrix(batch, m, [&](int64_t i) {
      const Eigen::Map<const Dense> reflectors(f.data_ptr<scalar_t>() + i * m * n, m, k);
      Matrix<scalar_t> out(base + i * m * c, m, c);
      householder_q<scalar_t>(reflectors, scales + i * k, out);
    });
  });
}

}  // namespace ember::cpu
