#pragma once
// The eigenvalues of a symmetric tridiagonal T, and its eigenvectors as rotations applied to a
// matrix Q, by the implicit QR iteration with Wilkinson's shift (Golub and Van Loan, Matrix
// Computations, §8.3.5; LAPACK's steqr). eigh's second half, after the reduction to T.
//
// The iteration runs in float64 whatever Q's type: in float32 its rounding, repeated over the
// O(n) sweeps each value takes, drifted about n ε₃₂ ‖T‖ (Eigen's float32 solver: 4e-4 at
// 1024 × 1024 of norm 4, 480 ε₃₂ ‖T‖ at 150 × 150), while float64's, on the same T, lands within
// a few ε₃₂ ‖T‖ of the exact values. The test for convergence is relative to the output's ε.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace ember::cpu {

// Q's columns start..end ← Q's columns start..end · G_start ⋯ G_{end-1}, where G_k rotates the
// plane (k, k + 1): column k ← c_k column k + s_k column k + 1, column k + 1 ← c_k column k + 1
// - s_k column k (LAPACK's lasr). q column-major with leading dimension ld, `rows` rows. (Carrying
// one column through the whole sweep, each element read and written once, was no faster: a
// column pair stays in L1 between its two rotations.)
template <class T>
void apply_sweep(T* q, int64_t rows, int64_t ld, int64_t start, int64_t end, const double* c, const double* s) {
  for (int64_t k = start; k < end; ++k) {
    const T ck = static_cast<T>(c[k]), sk = static_cast<T>(s[k]);
    T* __restrict x = q + k * ld;
    T* __restrict y = q + (k + 1) * ld;
    for (int64_t i = 0; i < rows; ++i) {
      const T a = x[i], b = y[i];
      x[i] = ck * a + sk * b;
      y[i] = ck * b - sk * a;
    }
  }
}

// d [n] T's diagonal, e [n - 1] beside it; T scaled so its largest element is about 1 (the
// convergence test below is relative, but the shift's squares should not overflow). Both are
// overwritten: d becomes the eigenvalues, ascending. When q is given ([rows, n], column-major,
// leading dimension ld) it is multiplied on the right by every rotation and its columns are
// permuted with the values: the reduction's Q in, the eigenvectors of Q T Qᵀ out. False when 30 n
// sweeps do not converge.
template <class T>
bool tridiagonal_eigen(std::vector<double>& d, std::vector<double>& e, T* q, int64_t rows, int64_t ld) {
  const int64_t n = static_cast<int64_t>(d.size());
  constexpr double eps = std::numeric_limits<T>::epsilon(), tiny = std::numeric_limits<double>::min();
  std::vector<double> c(n), s(n);
  int64_t end = n - 1, sweeps = 0;
  while (end > 0) {
    // An element beside the diagonal negligible against its neighbours on it splits T in two.
    for (int64_t i = 0; i < end; ++i)
      if (std::abs(e[i]) <= eps * (std::abs(d[i]) + std::abs(d[i + 1])) || std::abs(e[i]) < tiny) e[i] = 0;
    while (end > 0 && e[end - 1] == 0) --end;  // the values at the end have converged
    if (end == 0) break;
    if (++sweeps > 30 * n) return false;
    int64_t start = end - 1;  // the unreduced block ending at `end`
    while (start > 0 && e[start - 1] != 0) --start;

    // Wilkinson's shift: the eigenvalue of T's trailing 2 × 2 nearer its last diagonal element.
    const double half_gap = 0.5 * (d[end - 1] - d[end]), b = e[end - 1];
    const double mu = d[end] - b / (half_gap + std::copysign(std::sqrt(half_gap * half_gap + b * b), half_gap)) * b;
    // The first rotation is (T - μ I)'s first column's; each next one chases the bulge it leaves
    // at (k - 1, k + 1) down to the end.
    double x = d[start] - mu, z = e[start];
    for (int64_t k = start; k < end; ++k) {
      const double r =
          std::sqrt(x * x + z * z);  // (T is scaled: no overflow; std::hypot's care cost a third of the time)
      const double ck = r == 0 ? 1.0 : x / r, sk = r == 0 ? 0.0 : z / r;
      if (k > start) e[k - 1] = r;
      const double a = d[k], m = e[k], f = d[k + 1];  // Gᵀ [a m; m f] G
      d[k] = ck * ck * a + 2 * ck * sk * m + sk * sk * f;
      d[k + 1] = sk * sk * a - 2 * ck * sk * m + ck * ck * f;
      e[k] = ck * sk * (f - a) + (ck * ck - sk * sk) * m;
      if (k + 1 < end) {
        z = sk * e[k + 1];  // the new bulge
        e[k + 1] *= ck;
      }
      x = e[k];
      c[k] = ck, s[k] = sk;
    }
    if (q) apply_sweep(q, rows, ld, start, end, c.data(), s.data());
  }
  for (int64_t i = 0; i + 1 < n; ++i) {  // ascending, the vectors with them (O(n²) comparisons, n swaps)
    const int64_t k = std::min_element(d.begin() + i, d.end()) - d.begin();
    if (k == i) continue;
    std::swap(d[i], d[k]);
    if (q) std::swap_ranges(q + i * ld, q + i * ld + rows, q + k * ld);
  }
  return true;
}

}  // namespace ember::cpu
