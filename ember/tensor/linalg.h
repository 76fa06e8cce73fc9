#pragma once
// The native matrix factorizations under ember::linalg (autograd/linalg.h): checks, batch
// folding and the column-major copies of Note [Fortran order], then one back-end kernel. They
// record nothing; each returns its factors as [..., n, m] views of column-major storage (as
// LAPACK leaves them, and as PyTorch returns them) and the per-matrix info codes, which the
// public functions turn into errors.
//
// Note [Fortran order]: LAPACK and cuSOLVER factor column-major matrices. A row-major [n, m]
// matrix is the column-major [m, n] matrix of its transpose, which is right for a product but
// not for a factorization (the LU of Aᵀ is not the LU of A), so each input is copied once into
// column-major storage — which the factorization overwrites anyway — and the result is handed
// back as a transposed view of it: no copy on the way out.
#include <tuple>

#include "ember/tensor/tensor.h"

namespace ember::native {

// a [..., n, n] float32/float64 -> (LU [..., n, n], pivots [..., n] int32 (1-based), info [...] int32)
std::tuple<Tensor, Tensor, Tensor> lu_factor_ex(const Tensor& a, const char* op);
// A⁻¹ b (Aᵀ⁻¹ b when `transpose`) from lu_factor_ex's LU and pivots; b [..., n, k], same batch dims
Tensor lu_solve(const Tensor& lu, const Tensor& pivots, const Tensor& b, bool transpose, const char* op);
// a [..., n, n] -> (L lower triangular, zeros above, info [...] int32); only a's lower triangle is read
std::tuple<Tensor, Tensor> cholesky_ex(const Tensor& a, const char* op);
// A⁻¹ b for triangular a [..., n, n] (its `upper` or lower triangle), b [..., n, k], same batch dims
Tensor solve_triangular(const Tensor& a, const Tensor& b, bool upper, bool unitriangular, const char* op);
// a [..., n, n] symmetric (lower triangle read) -> (eigenvalues [..., n] ascending,
// eigenvectors [..., n, n] as columns, info [...] int32); the vectors undefined when not
// `compute_v` (syevd's job "N")
std::tuple<Tensor, Tensor, Tensor> eigh_ex(const Tensor& a, bool compute_v, const char* op);
// a [..., m, n] -> (U [..., m, k], S [..., k] descending, Vh [..., k, n], info [...] int32) with
// k = min(m, n), or U [..., m, m] and Vh [..., n, n] when `full_matrices`; U and Vh undefined
// when not `compute_uv`
std::tuple<Tensor, Tensor, Tensor, Tensor> svd_ex(const Tensor& a, bool full_matrices, bool compute_uv, const char* op);
// a [..., m, n] -> (Q [..., m, k] with orthonormal columns, R [..., k, n] upper triangular), k =
// min(m, n); Q [..., m, m] and R [..., m, n] when `complete`; Q undefined when not `compute_q`.
// Householder reflections (geqrf, then orgqr), so R's diagonal may be negative, as LAPACK's.
std::tuple<Tensor, Tensor> qr(const Tensor& a, bool complete, bool compute_q, const char* op);

// The checks the public functions share: a defined float32/float64 tensor of at least 2 dims,
// square when `square`. The messages name `op`, the shape and the dtype.
void check_linalg_input(const Tensor& a, const char* op, bool square = true);

}  // namespace ember::native
