#pragma once
// torch::linalg: linear systems, inverses, determinants, the Cholesky and QR factors, the symmetric
// eigendecomposition, the SVD and norms, with PyTorch's names, arguments, batching and gradients.
//
// Note [Linear algebra]: every function takes batches of matrices [..., n, m] (the batch dims
// broadcast where two operands meet) in float32 or float64 on the CPU (Eigen and LAPACK's
// algorithms, tensor/cpu/linalg.cpp) or CUDA (cuSOLVER and cuBLAS, cuda/linalg.cpp). Each
// factorization is one node on the tape whose backward is written with these public functions
// (PyTorch's formulas), so gradients of gradients come with them. A singular matrix in solve,
// inv or det's gradient, a matrix that is not positive-definite in cholesky, or an eigensolver
// that fails is an ember::Error naming the function and the batch element (one read of the
// factorization's status codes; cholesky_ex returns them instead). Eigenvectors and singular
// vectors are unique up to sign, and ember's (from Eigen on the CPU) may differ in sign from
// LAPACK's: a loss that depends on their signs has no well-defined gradient, in PyTorch either.
//
// Not there yet (planned): eig, which needs complex numbers.
#include <optional>
#include <string>
#include <tuple>

#include "ember/autograd/functions.h"

namespace ember::linalg {

// X with A X = B (left) or X A = B. A [..., n, n]; B [..., n, k], or a vector [..., n] (when B
// is 1-D, or has one dim fewer than A and A's batch dims). LU with partial pivoting.
Tensor solve(const Tensor& A, const Tensor& B, bool left = true);
// A⁻¹ (through solve(A, I)).
Tensor inv(const Tensor& A);
// det(A) [...], from the LU factors: (-1)^(row swaps) Π U_ii.
Tensor det(const Tensor& A);
// (sign [...], log |det A| [...]): no overflow where det would; log |det| is -inf when det = 0.
std::tuple<Tensor, Tensor> slogdet(const Tensor& A);
// L lower triangular with A = L Lᵀ (U = Lᵀ upper when `upper`); only A's lower triangle is read.
Tensor cholesky(const Tensor& A, bool upper = false);
// (L, info [...] int32): info k > 0 where the leading minor of order k is not positive-definite;
// an ember::Error then only when `check_errors`.
std::tuple<Tensor, Tensor> cholesky_ex(const Tensor& A, bool upper = false, bool check_errors = false);
// X with A X = B (left) or X A = B for triangular A [..., n, n] (its upper or lower triangle;
// ones on the diagonal assumed when `unitriangular`), B [..., n, k] ([..., k, n] when !left).
Tensor solve_triangular(const Tensor& A, const Tensor& B, bool upper, bool left = true, bool unitriangular = false);
// (eigenvalues [..., n] ascending, eigenvectors [..., n, n] as columns) of symmetric A, which only
// its lower ("L") or upper ("U") triangle gives.
std::tuple<Tensor, Tensor> eigh(const Tensor& A, const std::string& UPLO = "L");
Tensor eigvalsh(const Tensor& A, const std::string& UPLO = "L");
// (U, S, Vh) with A = U diag(S) Vh for A [..., m, n]: S [..., k] descending (k = min(m, n)); U
// [..., m, m] and Vh [..., n, n] when `full_matrices` (PyTorch's default), else U [..., m, k] and
// Vh [..., k, n]. The gradient through U and Vh is finite where the singular values are distinct
// and nonzero; the extra columns of full U and Vh are arbitrary bases, and gradients reaching them
// are ignored (as PyTorch ignores them).
std::tuple<Tensor, Tensor, Tensor> svd(const Tensor& A, bool full_matrices = true);
// S alone (no singular vectors are computed unless a gradient needs them); its gradient,
// U diag(gS) Vh, is finite everywhere.
Tensor svdvals(const Tensor& A);
// (Q, R) with A = Q R for A [..., m, n], k = min(m, n): mode "reduced" gives Q [..., m, k] with
// orthonormal columns and R [..., k, n] upper triangular; "complete" Q [..., m, m] orthogonal and R
// [..., m, n]; "r" R alone (Q an empty tensor). Householder reflections, so R's diagonal may be
// negative (as LAPACK's and PyTorch's). Differentiable for "reduced", and for "complete" when
// m ≤ n (PyTorch's formula); asking for a gradient through "r", or "complete" with m > n, is an
// ember::Error, as in PyTorch.
std::tuple<Tensor, Tensor> qr(const Tensor& A, const std::string& mode = "reduced");
// The pseudo-inverse A⁺ [..., n, m] from the SVD, singular values at or below max(atol, rtol σ₁)
// taken as zero. rtol defaults to max(m, n) ε (dtype's ε) when atol is absent or zero, else 0.
// `hermitian`: A symmetric (its lower triangle read), through eigh. Gradient: the derivative of
// A⁺ for a matrix of constant rank (Golub and Pereyra's), as PyTorch's.
Tensor pinv(const Tensor& A, std::optional<double> atol = std::nullopt, std::optional<double> rtol = std::nullopt,
            bool hermitian = false);
// LibTorch's older form: singular values at or below rcond σ₁ dropped.
Tensor pinv(const Tensor& A, double rcond, bool hermitian = false);
// The number of singular values above max(atol, rtol σ₁) [...] int64, tolerances as pinv's.
Tensor matrix_rank(const Tensor& A, std::optional<double> atol = std::nullopt,
                   std::optional<double> rtol = std::nullopt, bool hermitian = false);
// LibTorch's older form: singular values above `tol` (absolute) counted.
Tensor matrix_rank(const Tensor& A, double tol, bool hermitian = false);
// (solution, residuals, rank, singular_values) of the least-squares problem min ‖A X - B‖ for A
// [..., m, n] and B [..., m, k] (or a vector [..., m]; batch dims broadcast): the solution
// [..., n, k], minimum-norm where A is rank-deficient, singular values at or below rcond σ₁
// taken as zero (rcond: ε max(m, n) by default). `driver` ("gelsy" on the CPU and "gels" on CUDA
// by default, "gelsd", "gelss") chooses, as PyTorch's, which other outputs are computed; the
// rest are empty. Every driver solves through the SVD (see linalg.cpp).
std::tuple<Tensor, Tensor, Tensor, Tensor> lstsq(const Tensor& A, const Tensor& B,
                                                 std::optional<double> rcond = std::nullopt,
                                                 const std::optional<std::string>& driver = std::nullopt);
// A^n by repeated squaring (n = 0: the identity; n < 0: inv(A)^-n).
Tensor matrix_power(const Tensor& A, int64_t n);

// The vector norm over `dim` (every element when absent): ord inf, -inf, 0 (the count of
// nonzeros), or any other number p: (Σ |x|^p)^(1/p). Computed in `dtype` when given.
Tensor vector_norm(const Tensor& x, const Scalar& ord = 2, const std::optional<Shape>& dim = std::nullopt,
                   bool keepdim = false, std::optional<DType> dtype = std::nullopt);
// The matrix norm over the two dims `dim`: ord "fro", "nuc" (the sum of the singular values), 2,
// -2 (the largest, smallest singular value), 1, -1 (max/min column sum of |A|), inf, -inf
// (max/min row sum).
Tensor matrix_norm(const Tensor& A, const Scalar& ord, const Shape& dim = {-2, -1}, bool keepdim = false,
                   std::optional<DType> dtype = std::nullopt);
Tensor matrix_norm(const Tensor& A, const std::string& ord = "fro", const Shape& dim = {-2, -1}, bool keepdim = false,
                   std::optional<DType> dtype = std::nullopt);
inline Tensor matrix_norm(const Tensor& A, const char* ord, const Shape& dim = {-2, -1}, bool keepdim = false,
                          std::optional<DType> dtype = std::nullopt) {
  return matrix_norm(A, std::string(ord), dim, keepdim, dtype);
}
// PyTorch's linalg.norm: a vector norm over one dim, a matrix norm over two; without `dim`, the
// 2-norm of every element when `ord` is absent, else the vector or matrix norm of a 1-D or 2-D x.
Tensor norm(const Tensor& x, const std::optional<Scalar>& ord = std::nullopt,
            const std::optional<Shape>& dim = std::nullopt, bool keepdim = false,
            std::optional<DType> dtype = std::nullopt);
Tensor norm(const Tensor& x, const std::string& ord, const std::optional<Shape>& dim = std::nullopt,
            bool keepdim = false, std::optional<DType> dtype = std::nullopt);
inline Tensor norm(const Tensor& x, const char* ord, const std::optional<Shape>& dim = std::nullopt,
                   bool keepdim = false, std::optional<DType> dtype = std::nullopt) {
  return norm(x, std::string(ord), dim, keepdim, dtype);
}

}  // namespace ember::linalg

namespace ember {
// torch::det, torch::slogdet, torch::inverse, and torch::logdet: log det A (NaN where det < 0).
Tensor det(const Tensor& A);
std::tuple<Tensor, Tensor> slogdet(const Tensor& A);
Tensor inverse(const Tensor& A);
Tensor logdet(const Tensor& A);
}  // namespace ember
