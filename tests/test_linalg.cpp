// torch::linalg (autograd/linalg.h). Values and gradients against PyTorch are in
// test_reference.cpp and test_reference_grads.cpp ("linalg_*", "logdet"), first and second
// derivatives against finite differences in test_gradcheck.cpp. Here: matrices large enough
// for the blocked LU's several panels and the SVD's divide and conquer checked by their defining
// identities, the status codes and PyTorch's error messages, empty batches and 0 x 0 matrices,
// gradients where singular values repeat or vanish, and the refusals.
#include <cmath>
#include <limits>

#include "helpers.h"

namespace ember {
namespace testing {
// S, U's leading pair of columns' projector U₂U₂ᵀ, V's leading column's V₁V₁ᵀ and U diag(S²) Uᵀ,
// flattened into one vector: functions of the singular vectors that do not depend on their signs
// (as gen_reference.py's svd_invariants; the gradient tests use it too).
Tensor svd_invariants(const Tensor& a, bool full_matrices) {
  auto [u, s, vh] = linalg::svd(a, full_matrices);
  const int64_t k = s.size(-1);
  const Tensor u2 = u.narrow(-1, 0, 2), v1 = vh.narrow(-2, 0, 1).transpose(-2, -1), uk = u.narrow(-1, 0, k);
  return cat({s.reshape({-1}), matmul(u2, u2.transpose(-2, -1)).reshape({-1}),
              matmul(v1, v1.transpose(-2, -1)).reshape({-1}),
              matmul(uk * s.square().unsqueeze(-2), uk.transpose(-2, -1)).reshape({-1})});
}
// Q and R of linalg.qr flattened into one vector (the gradient tests' output).
Tensor qr_flat(const Tensor& a, const std::string& mode) {
  auto [q, r] = linalg::qr(a, mode);
  return cat({q.reshape({-1}), r.reshape({-1})});
}
}  // namespace testing
namespace {

Tensor mT(const Tensor& t) { return t.transpose(-2, -1); }
double max_abs(const Tensor& t) { return t.abs().amax().item<double>(); }
Tensor spd(int64_t batch, int64_t n, DType dtype) {
  const Tensor m = randn({batch, n, n}, dtype);
  return matmul(m, mT(m)) + static_cast<double>(n) * eye(n, -1, dtype);
}

// n = 77 and 100: three and four panels of the blocked LU (32 columns each), a ragged last one.
TEST(Linalg, SolveInvAndDetOfLargeMatricesSatisfyTheirIdentities) {
  manual_seed(5);
  for (const int64_t n : {77, 100}) {
    SCOPED_TRACE(n);
    const Tensor a = randn({2, n, n}, kFloat64), b = randn({2, n, 3}, kFloat64);
    const Tensor x = linalg::solve(a, b);
    EXPECT_LT(max_abs(matmul(a, x) - b), 1e-9);
    EXPECT_LT(max_abs(matmul(a, linalg::inv(a)) - eye(n, -1, kFloat64)), 1e-9);
    // log|det A| = Σ log|λ| for symmetric A; and det(A Aᵀ) = det(A)²
    const Tensor s = a + mT(a);
    EXPECT_TRUE(
        testing::all_close(std::get<1>(linalg::slogdet(s)), linalg::eigvalsh(s).abs().log().sum({-1}), 1e-9, 1e-9));
    const Tensor small = a.narrow(-1, 0, 40).narrow(-2, 0, 40) * 0.5;
    EXPECT_TRUE(testing::all_close(linalg::det(matmul(small, mT(small))), linalg::det(small).square(), 1e-8, 0));
  }
}

// The gradient of log|det A| is A⁻ᵀ: the saved LU's transposed solve, on 70 right-hand sides
// split across threads.
TEST(Linalg, GradientOfLogAbsDetIsTheInverseTransposeOfALargeMatrix) {
  manual_seed(4);
  const Tensor a = (randn({70, 70}, kFloat64) + 5.0 * eye(70, -1, kFloat64)).set_requires_grad(true);
  std::get<1>(linalg::slogdet(a)).backward();
  EXPECT_TRUE(testing::all_close(a.grad(), mT(linalg::inv(a.detach())), 1e-12, 1e-12));
}

TEST(Linalg, TransposedAndFloat32InputsGiveTheSameSolution) {
  manual_seed(6);
  const Tensor a = randn({50, 50}, kFloat64) + 8.0 * eye(50, -1, kFloat64), b = randn({50, 4}, kFloat64);
  const Tensor x = linalg::solve(a, b);
  // A stored column-major (a transposed view of a contiguous Aᵀ): the same solution
  EXPECT_TRUE(testing::all_close(linalg::solve(mT(a.t().contiguous()), b), x, 1e-12, 1e-12));
  EXPECT_TRUE(testing::all_close(linalg::solve(a.to(kFloat32), b.to(kFloat32)).to(kFloat64), x, 1e-4, 1e-4));
}

TEST(Linalg, CholeskyTriangularSolveAndEighOfLargeMatrices) {
  manual_seed(7);
  const Tensor a = spd(3, 90, kFloat64);
  const Tensor l = linalg::cholesky(a);
  EXPECT_EQ(max_abs(l.triu(1)), 0.0);
  EXPECT_LT(max_abs(matmul(l, mT(l)) - a), 1e-9);
  const Tensor u = linalg::cholesky(a, /*upper=*/true);
  EXPECT_TRUE(testing::all_close(u, mT(l), 0, 0));
  const Tensor b = randn({3, 90, 5}, kFloat64);
  EXPECT_LT(max_abs(matmul(l, linalg::solve_triangular(l, b, /*upper=*/false)) - b), 1e-9);
  const Tensor bt = randn({3, 5, 90}, kFloat64);
  EXPECT_LT(max_abs(matmul(linalg::solve_triangular(u, bt, /*upper=*/true, /*left=*/false), u) - bt), 1e-9);
  auto [w, v] = linalg::eigh(a);
  EXPECT_LT(max_abs(matmul(v, mT(v)) - eye(90, -1, kFloat64)), 1e-10);
  EXPECT_LT(max_abs(matmul(v * w.unsqueeze(-2), mT(v)) - a), 1e-8);
  EXPECT_TRUE((w.narrow(-1, 1, 89) >= w.narrow(-1, 0, 89)).all().item<bool>()) << "eigenvalues ascending";
}

// eigvalsh computes the eigenvectors only when a gradient needs them (syevd's job "N"
// otherwise, as PyTorch): a known spectrum (distinct, both signs) in float64, float32 within its
// own accuracy of float64's values of the same matrix, the values alike either way, and the
// gradient of the largest eigenvalue is its eigenvector's projector v vᵀ.
TEST(Linalg, EigvalshAloneAndWithItsGradient) {
  manual_seed(21);
  const int64_t n = 150;
  const Tensor q = std::get<0>(linalg::qr(randn({n, n}, kFloat64)));
  const Tensor spectrum = arange(0, n, kFloat64) - (n / 2 - 0.5);  // -74.5 … 74.5
  const Tensor a = matmul(q * spectrum.unsqueeze(-2), mT(q));
  const Tensor alone = linalg::eigvalsh(a);
  EXPECT_LT(max_abs(alone - spectrum), 1e-11);
  const Tensor a32 = a.to(kFloat32);
  EXPECT_EQ(linalg::eigvalsh(a32).dtype(), kFloat32);
  // (within 2 ε₃₂ ‖A‖; Eigen's float32 iteration was 90 ε₃₂ ‖A‖ off here)
  EXPECT_LT(max_abs(linalg::eigvalsh(a32).to(kFloat64) - linalg::eigvalsh(a32.to(kFloat64))), 2 * 1.2e-7 * 75);

  const Tensor leaf = a.detach().requires_grad_();
  const Tensor with_grad = linalg::eigvalsh(leaf);
  EXPECT_LT(max_abs(with_grad.detach() - alone), 1e-11);
  with_grad.narrow(-1, n - 1, 1).sum().backward();
  const Tensor v = q.narrow(-1, n - 1, 1);
  EXPECT_LT(max_abs(leaf.grad() - matmul(v, mT(v))), 1e-10);
}

// float32's eigh iterates on the tridiagonal in float64 (tridiagonal_eigen.h), after a reduction
// whose first 32 of 150 columns go as a blocked panel and the rest one at a time: random, graded
// (1 … 1e-6), repeated (two values, 75 times each) and rank-deficient spectra at 150 × 150 keep
// float32's own accuracy: values within 10 ε₃₂ ‖A‖₂ of float64's for the same matrix (Eigen's
// float32 iteration was 480 ε₃₂ ‖A‖ off), A V = V diag(w) and VᵀV = I within 40 ε₃₂ (0.3 n).
TEST(Linalg, Float32EighKeepsFloat32sAccuracy) {
  manual_seed(22);
  const int64_t n = 150;
  const double eps = 1.2e-7;
  const Tensor q = std::get<0>(linalg::qr(randn({n, n}, kFloat64)));
  const Tensor index = arange(0, n, kFloat64);
  const Tensor r = randn({n, n}, kFloat64);
  for (const Tensor& a64 :
       {r + mT(r), matmul(q * (index * (-6.0 / (n - 1) * std::log(10.0))).exp().unsqueeze(-2), mT(q)),
        matmul(q * (1.0 + (index >= 75).to(kFloat64)).unsqueeze(-2), mT(q)),
        matmul(q * (index * (index >= 100).to(kFloat64)).unsqueeze(-2), mT(q))}) {
    const Tensor a = a64.to(kFloat32);
    const Tensor exact = linalg::eigvalsh(a.to(kFloat64));
    const double norm = max_abs(exact);  // ‖A‖₂
    auto [w, v] = linalg::eigh(a);
    ASSERT_EQ(w.dtype(), kFloat32);
    EXPECT_LT(max_abs(w.to(kFloat64) - exact), 10 * eps * norm);
    EXPECT_LT(max_abs(linalg::eigvalsh(a).to(kFloat64) - exact), 10 * eps * norm);
    const Tensor w64 = w.to(kFloat64), v64 = v.to(kFloat64);
    EXPECT_LT(max_abs(matmul(a.to(kFloat64), v64) - v64 * w64.unsqueeze(-2)), 40 * eps * norm);
    EXPECT_LT(max_abs(matmul(mT(v64), v64) - eye(n, -1, kFloat64)), 40 * eps);
  }
}

TEST(Linalg, OnlyTheNamedTriangleIsRead) {
  manual_seed(8);
  const Tensor a = spd(1, 6, kFloat64)[0], noise = randn({6, 6}, kFloat64);
  EXPECT_TRUE(testing::all_close(linalg::cholesky(a + noise.triu(1)), linalg::cholesky(a), 0, 0));
  EXPECT_TRUE(testing::all_close(linalg::eigvalsh(a + noise.tril(-1), "U"), linalg::eigvalsh(a), 1e-12, 1e-12));
  const Tensor t = randn({6, 6}, kFloat64) + 4.0 * eye(6, -1, kFloat64), b = randn({6, 2}, kFloat64);
  EXPECT_TRUE(testing::all_close(linalg::solve_triangular(t, b, /*upper=*/true),
                                 linalg::solve_triangular(t.triu(), b, /*upper=*/true), 0, 0));
  const Tensor unit = t.tril(-1) + eye(6, -1, kFloat64);
  EXPECT_TRUE(testing::all_close(linalg::solve_triangular(t, b, /*upper=*/false, /*left=*/true, true),
                                 linalg::solve(unit, b), 1e-12, 1e-12));
}

TEST(Linalg, SingularAndIndefiniteMatricesThrowPyTorchsMessages) {
  const Tensor singular = tensor<double>({1, 2, 2, 4}, Shape{2, 2});
  EXPECT_ERROR_CONTAINS(linalg::solve(singular, ones({2}, kFloat64)),
                        "linalg.solve: The solver failed because the input matrix is singular.");
  EXPECT_ERROR_CONTAINS(linalg::inv(stack({eye(2, -1, kFloat64), singular})),
                        "linalg.inv: (Batch element 1): The diagonal element 2 is zero");
  EXPECT_EQ(linalg::det(singular).item<double>(), 0.0);
  EXPECT_EQ(std::get<1>(linalg::slogdet(singular)).item<double>(), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(std::get<0>(linalg::slogdet(singular)).item<double>(), 0.0);
  const Tensor indefinite = tensor<double>({1, 2, 0, 2, 1, 0, 0, 0, 1}, Shape{3, 3});
  EXPECT_ERROR_CONTAINS(linalg::cholesky(indefinite),
                        "linalg.cholesky: The factorization could not be completed because the input is not "
                        "positive-definite (the leading minor of order 2 is not positive-definite).");
  auto [l, info] = linalg::cholesky_ex(stack({eye(3, -1, kFloat64), indefinite}));
  EXPECT_EQ(info.to_vector<int32_t>(), (std::vector<int32_t>{0, 2}));
  // the partial result, as LAPACK leaves it (PyTorch's CPU output): the failing pivot 1 - 2² on
  // the diagonal, the rest of that column as it was
  EXPECT_EQ(l.to_vector<double>(), (std::vector<double>{1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 2, -3, 0, 0, 0, 1}));
  EXPECT_ERROR_CONTAINS(linalg::cholesky_ex(indefinite, false, /*check_errors=*/true), "leading minor of order 2");
  EXPECT_ERROR_CONTAINS(linalg::cholesky(full({2, 2}, std::nan(""), kFloat64)), "leading minor of order 1");
  // beyond the first block of 64 columns, and only the lower triangle read there too
  Tensor big = spd(1, 100, kFloat64)[0];
  EXPECT_TRUE(
      testing::all_close(linalg::cholesky(big + randn({100, 100}, kFloat64).triu(1)), linalg::cholesky(big), 0, 0));
  big.index_put_({70, 70}, -1e6);
  EXPECT_ERROR_CONTAINS(linalg::cholesky(big), "(the leading minor of order 71 is not positive-definite)");
}

TEST(Linalg, NonFiniteMatricesGiveNaNsOrErrorsNeverCrashes) {
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  for (const double bad : {nan, inf}) {
    SCOPED_TRACE(bad);
    const Tensor a = tensor<double>({2, bad, bad, 1}, Shape{2, 2});
    EXPECT_ERROR_CONTAINS(linalg::eigh(a), "linalg.eigh: The algorithm failed to converge");
    EXPECT_ERROR_CONTAINS(linalg::eigvalsh(stack({eye(2, -1, kFloat64), a})),
                          "linalg.eigvalsh: (Batch element 1): The algorithm failed to converge");
    EXPECT_ERROR_CONTAINS(linalg::cholesky(a), "leading minor of order 2");
  }
  const Tensor a = tensor<double>({2, nan, nan, 1}, Shape{2, 2});
  EXPECT_TRUE(linalg::solve(a, ones({2}, kFloat64)).isnan().all().item<bool>());
  EXPECT_TRUE(std::isnan(linalg::det(a).item<double>()));
}

TEST(Linalg, DeterminantsSignsAndLogdet) {
  // a row swap flips the sign; slogdet stays finite where det underflows
  const Tensor swap = tensor<double>({0, 1, 1, 0}, Shape{2, 2});
  EXPECT_EQ(linalg::det(swap).item<double>(), -1.0);
  EXPECT_TRUE(std::isnan(logdet(swap).item<double>()));
  const Tensor tiny = eye(3, -1, kFloat32) * 1e-20;
  EXPECT_EQ(linalg::det(tiny).item<float>(), 0.0f);
  EXPECT_NEAR(std::get<1>(linalg::slogdet(tiny)).item<float>(), 3 * std::log(1e-20), 1e-3);
  const Tensor m = randn({3, 4, 4}, kFloat64);
  auto [sign, logabs] = linalg::slogdet(m);
  EXPECT_TRUE(testing::all_close(sign * logabs.exp(), linalg::det(m), 1e-12, 1e-14));
}

TEST(Linalg, EmptyBatchesAndEmptyMatrices) {
  const Tensor none = zeros({0, 3, 3}, kFloat64);
  EXPECT_EQ(linalg::inv(none).sizes(), (Shape{0, 3, 3}));
  EXPECT_EQ(linalg::det(none).sizes(), (Shape{0}));
  EXPECT_EQ(std::get<0>(linalg::eigh(none)).sizes(), (Shape{0, 3}));
  EXPECT_EQ(linalg::cholesky(none).sizes(), (Shape{0, 3, 3}));
  const Tensor empty = zeros({2, 0, 0}, kFloat32);  // det of a 0 x 0 matrix is 1, as PyTorch's
  EXPECT_EQ(linalg::det(empty).to_vector<float>(), (std::vector<float>{1, 1}));
  EXPECT_EQ(std::get<1>(linalg::eigh(empty)).sizes(), (Shape{2, 0, 0}));  // (Eigen's solver would read (0, 0))
  EXPECT_EQ(linalg::cholesky(empty).sizes(), (Shape{2, 0, 0}));
  EXPECT_EQ(linalg::solve(empty, zeros({2, 0, 4})).sizes(), (Shape{2, 0, 4}));
  EXPECT_EQ(linalg::matrix_power(empty, -3).sizes(), (Shape{2, 0, 0}));
  const Tensor a = randn({3, 3}, kFloat64) + 3.0 * eye(3, -1, kFloat64);  // no right-hand sides
  EXPECT_EQ(linalg::solve(a, zeros({3, 0}, kFloat64)).sizes(), (Shape{3, 0}));
  EXPECT_EQ(linalg::solve_triangular(a, zeros({3, 0}, kFloat64), /*upper=*/true).sizes(), (Shape{3, 0}));
}

TEST(Linalg, MatrixPowerAndInverseAliases) {
  manual_seed(9);
  const Tensor a = randn({4, 4}, kFloat64) + 3.0 * eye(4, -1, kFloat64);
  EXPECT_TRUE(
      testing::all_close(linalg::matrix_power(a, 5), matmul(matmul(matmul(matmul(a, a), a), a), a), 1e-12, 1e-12));
  EXPECT_TRUE(testing::all_close(linalg::matrix_power(a, -1), inverse(a), 1e-14, 1e-14));
  EXPECT_TRUE(testing::all_close(linalg::matrix_power(a, 0), eye(4, -1, kFloat64), 0, 0));
  const Tensor ints = tensor<int64_t>({1, 1, 0, 1}, Shape{2, 2});  // integers take non-negative powers
  EXPECT_EQ(linalg::matrix_power(ints, 10).to_vector<int64_t>(), (std::vector<int64_t>{1, 10, 0, 1}));
  EXPECT_ERROR_CONTAINS(linalg::matrix_power(ints, -1), "linalg.inv: expected a float32 or float64 tensor");
}

// det's derivative is the cofactor matrix, which exists at a singular matrix too (from the SVD
// there): [[1, 2], [2, 4]] -> [[4, -2], [-2, 1]]; 0 at rank n - 2; 1 for any 1 x 1 matrix.
TEST(Linalg, GradientOfDetAtASingularMatrixIsItsCofactorMatrix) {
  const Tensor a = tensor<double>({1, 2, 2, 4}, Shape{2, 2}).set_requires_grad(true);
  linalg::det(a).backward();
  EXPECT_TRUE(testing::all_close(a.grad(), tensor<double>({4, -2, -2, 1}, Shape{2, 2}), 1e-12, 1e-12));
  const Tensor batch = stack({zeros({3, 3}, kFloat64), eye(3, -1, kFloat64) * 2.0}).set_requires_grad(true);
  linalg::det(batch).sum().backward();  // a singular matrix beside a regular one: both from the SVD
  EXPECT_TRUE(testing::all_close(batch.grad()[0], zeros({3, 3}, kFloat64), 0, 1e-12));
  EXPECT_TRUE(testing::all_close(batch.grad()[1], eye(3, -1, kFloat64) * 4.0, 1e-12, 1e-12));
  const Tensor one = zeros({1, 1}, kFloat32).set_requires_grad(true);
  det(one).backward();
  EXPECT_EQ(one.grad().item<float>(), 1.0f);
  // against finite differences of det (a polynomial) at exactly singular 4 x 4 matrices, ranks 3 and 2
  const Tensor x = randn({4, 3}, kFloat64), y = randn({3, 4}, kFloat64);
  for (const Tensor& m : {matmul(x, y), matmul(x.narrow(1, 0, 2), y.narrow(0, 0, 2))}) {
    const auto r = autograd::gradcheck([](const std::vector<Tensor>& v) { return linalg::det(v[0]); }, {m});
    EXPECT_TRUE(r.ok) << r.message;
  }
}

// Sizes past Eigen's switch from Jacobi to divide and conquer (16 columns): A = U diag(S) Vh,
// orthonormal vectors, descending values, tall and wide, reduced and full.
TEST(Linalg, SvdOfLargeMatricesSatisfiesItsIdentities) {
  manual_seed(11);
  for (const DType dtype : {kFloat64, kFloat32}) {
    const double tol = dtype == kFloat64 ? 1e-11 : 2e-4;
    for (const Shape& shape : {Shape{2, 100, 37}, Shape{37, 100}, Shape{64, 64}}) {
      SCOPED_TRACE(shape_str(shape));
      const Tensor a = randn(shape, dtype);
      for (const bool full : {false, true}) {
        auto [u, s, vh] = linalg::svd(a, full);
        const int64_t m = a.size(-2), n = a.size(-1), k = std::min(m, n);
        EXPECT_EQ(u.size(-1), full ? m : k);
        EXPECT_EQ(vh.size(-2), full ? n : k);
        const Tensor uk = u.narrow(-1, 0, k), vk = vh.narrow(-2, 0, k);
        EXPECT_LT(max_abs(matmul(uk * s.unsqueeze(-2), vk) - a), tol * 10);
        EXPECT_LT(max_abs(matmul(mT(u), u) - eye(u.size(-1), -1, dtype)), tol);
        EXPECT_LT(max_abs(matmul(vh, mT(vh)) - eye(vh.size(-2), -1, dtype)), tol);
        EXPECT_TRUE((s.narrow(-1, 0, k - 1) >= s.narrow(-1, 1, k - 1)).all().item<bool>());
        EXPECT_TRUE(testing::all_close(linalg::svdvals(a), s, tol, tol));
      }
    }
  }
}

// float32's singular values alone come from the bidiagonal's BᵀB, squared and solved in float64:
// graded values down to 1e-6 and exact zeros (rank 40 of 60) keep float32's own accuracy (ε₃₂ σ₁)
// against float64's values of the same float32 matrix, tall and wide, and NaNs do not converge.
TEST(Linalg, Float32SvdvalsKeepFloat32sAccuracy) {
  manual_seed(14);
  const Tensor u = std::get<0>(linalg::qr(randn({90, 60}, kFloat64)));
  const Tensor v = std::get<0>(linalg::qr(randn({60, 60}, kFloat64)));
  const Tensor graded = (arange(0, 60, kFloat64) * (-6.0 / 59 * std::log(10.0))).exp();  // 1 … 1e-6
  const Tensor with_zeros = graded * (arange(0, 60, kFloat64) < 40).to(kFloat64);
  for (const Tensor& s : {graded, with_zeros})
    for (const bool wide : {false, true}) {
      Tensor a = matmul(u * s.unsqueeze(-2), mT(v)).to(kFloat32);
      if (wide) a = mT(a);
      const Tensor exact = linalg::svdvals(a.to(kFloat64));
      const Tensor values = linalg::svdvals(a);
      EXPECT_EQ(values.dtype(), kFloat32);
      EXPECT_LT(max_abs(values.to(kFloat64) - exact), 4 * 1.2e-7);  // σ₁ = 1
      EXPECT_TRUE((values.narrow(0, 0, 59) >= values.narrow(0, 1, 59)).all().item<bool>());
      EXPECT_GE(values.amin().item<double>(), 0.0);
    }
  const Tensor bad = stack({eye(3, 2, kFloat32), tensor<float>({1, NAN, 0, 1, 2, 3}, Shape{3, 2})});
  EXPECT_ERROR_CONTAINS(linalg::svdvals(bad), "linalg.svdvals: (Batch element 1): The algorithm failed to converge");
}

TEST(Linalg, PinvAndMatrixRankOfRankDeficientMatrices) {
  manual_seed(12);
  const Tensor a = matmul(randn({3, 6, 2}, kFloat64), randn({3, 2, 5}, kFloat64));  // rank 2
  const Tensor p = linalg::pinv(a);
  EXPECT_EQ(p.sizes(), (Shape{3, 5, 6}));
  EXPECT_LT(max_abs(matmul(matmul(a, p), a) - a), 1e-12);  // the Penrose conditions
  EXPECT_LT(max_abs(matmul(matmul(p, a), p) - p), 1e-12);
  EXPECT_LT(max_abs(matmul(a, p) - mT(matmul(a, p))), 1e-12);
  EXPECT_EQ(linalg::matrix_rank(a).to_vector<int64_t>(), (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(linalg::matrix_rank(a).dtype(), kInt64);
  // symmetric and indefinite, rank 2: through eigh the same A⁺ as through the SVD
  const Tensor x = randn({5, 2}, kFloat64);
  const Tensor h = matmul(x * tensor<double>({1, -1}, Shape{2}), mT(x));
  EXPECT_TRUE(testing::all_close(linalg::pinv(h, std::nullopt, std::nullopt, /*hermitian=*/true), linalg::pinv(h),
                                 1e-10, 1e-12));
  EXPECT_EQ(linalg::matrix_rank(h, std::nullopt, std::nullopt, /*hermitian=*/true).item<int64_t>(), 2);
  // tolerances: an atol or rtol above the second singular value drops it
  const Tensor d = tensor<double>({3, 0, 0, 0.5}, Shape{2, 2});
  EXPECT_EQ(linalg::pinv(d, std::optional<double>(0.6)).to_vector<double>(),  // atol
            (std::vector<double>{1.0 / 3, 0, 0, 0}));
  EXPECT_EQ(linalg::pinv(d, /*rcond=*/0.1).to_vector<double>(), (std::vector<double>{1.0 / 3, 0, 0, 2}));
  EXPECT_EQ(linalg::matrix_rank(d, /*tol=*/0.5).item<int64_t>(), 1);  // strictly above the tolerance
}

// The drivers' outputs (PyTorch's conventions), the minimum-norm solution of a rank-deficient A,
// rcond, the normal equations at a larger size, and the refusals.
TEST(Linalg, LstsqDriversSolutionsAndRefusals) {
  manual_seed(13);
  const Tensor a = randn({3, 40, 20}, kFloat64), b = randn({3, 40, 5}, kFloat64);
  auto [x, residuals, rank, values] = linalg::lstsq(a, b, std::nullopt, "gelsd");
  EXPECT_LT(max_abs(matmul(mT(a), matmul(a, x) - b)), 1e-10);  // Aᵀ (A X - B) = 0
  EXPECT_TRUE(testing::all_close(residuals, (matmul(a, x) - b).square().sum({-2}), 1e-12, 1e-12));
  EXPECT_EQ(rank.to_vector<int64_t>(), (std::vector<int64_t>{20, 20, 20}));
  EXPECT_TRUE(testing::all_close(values, linalg::svdvals(a), 1e-12, 1e-12));
  auto [x2, r2, rank2, v2] = linalg::lstsq(a, b);  // gelsy on the CPU: the rank, no residuals
  EXPECT_TRUE(testing::all_close(x2, x, 1e-12, 1e-12));
  EXPECT_EQ(r2.numel(), 0);
  EXPECT_EQ(rank2.sizes(), (Shape{3}));
  EXPECT_EQ(v2.numel(), 0);
  auto [x3, r3, rank3, v3] = linalg::lstsq(a, b, std::nullopt, "gels");  // residuals, no rank
  EXPECT_EQ(r3.sizes(), (Shape{3, 5}));
  EXPECT_EQ(rank3.numel(), 0);
  // rank-deficient: no residuals from gelsd, and the minimum-norm solution (in A's row space)
  const Tensor d = matmul(randn({8, 2}, kFloat64), randn({2, 6}, kFloat64));
  auto [xd, rd, rankd, vd] = linalg::lstsq(d, randn({8, 3}, kFloat64), std::nullopt, "gelsd");
  EXPECT_EQ(rd.numel(), 0);
  EXPECT_EQ(rankd.item<int64_t>(), 2);
  EXPECT_LT(max_abs(xd - matmul(linalg::pinv(d), matmul(d, xd))), 1e-10);
  EXPECT_EQ(std::get<2>(linalg::lstsq(d, randn({8, 1}, kFloat64), 0.9)).item<int64_t>(), 1);  // rcond σ₁
  // a batch of vectors B [..., m] (one dim fewer than A): solutions [..., n], with their gradient
  const Tensor av = a.detach().set_requires_grad(true);
  const Tensor xv = std::get<0>(linalg::lstsq(av, b.select(-1, 0)));
  EXPECT_EQ(xv.sizes(), (Shape{3, 20}));
  EXPECT_TRUE(testing::all_close(xv, x.select(-1, 0), 1e-12, 1e-12));
  xv.sum().backward();
  EXPECT_TRUE(av.grad().defined());
  EXPECT_ERROR_CONTAINS(linalg::lstsq(a, b, std::nullopt, "foo"),
                        "linalg.lstsq: driver should be one of gels, gelsy, gelsd, gelss, but got 'foo'");
  EXPECT_ERROR_CONTAINS(linalg::lstsq(a, randn({3, 30, 5}, kFloat64)), "must have the same number of rows");
  EXPECT_ERROR_CONTAINS(linalg::lstsq(a, randn({2, 3, 40, 5}, kFloat64)), "must have as many dims as A");
  EXPECT_ERROR_CONTAINS(linalg::lstsq(a, b.to(kFloat32)), "linalg.lstsq: expected A and B to have the same dtype");
}

TEST(Linalg, SvdGradientsWhereSingularValuesRepeatOrVanish) {
  // S of the identity: every singular value repeated, yet S's gradient U diag(gS) Vh is finite
  const Tensor a = eye(3, -1, kFloat64).set_requires_grad(true);
  linalg::svdvals(a).sum().backward();
  EXPECT_TRUE(testing::all_close(a.grad(), eye(3, -1, kFloat64), 1e-12, 1e-12));
  // ... and through svd, when no gradient reaches U or Vh (PyTorch skips those terms)
  const Tensor b = eye(3, -1, kFloat64).set_requires_grad(true);
  std::get<1>(linalg::svd(b)).sum().backward();
  EXPECT_TRUE(testing::all_close(b.grad(), eye(3, -1, kFloat64), 1e-12, 1e-12));
  // a rank-1 tall matrix: the nuclear norm's gradient U Vh over all three singular pairs (as
  // PyTorch's), finite although two singular values are 0 and equal
  const Tensor c = matmul(randn({5, 1}, kFloat64), randn({1, 3}, kFloat64)).set_requires_grad(true);
  linalg::matrix_norm(c, "nuc").backward();
  EXPECT_TRUE(c.grad().isfinite().all().item<bool>());
  EXPECT_NEAR(linalg::matrix_norm(c.grad(), "fro").item<double>(), std::sqrt(3.0), 1e-9);
  EXPECT_NEAR(linalg::matrix_norm(c.grad(), 2).item<double>(), 1.0, 1e-9);
}

// Q has orthonormal columns, R is upper triangular, Q R = A: tall, wide and square, each mode,
// both dtypes, and sizes past the CPU kernels' blocks (96 reflectors, Eigen's 48) so the blocked paths run.
TEST(Linalg, QrFactorsInEveryMode) {
  manual_seed(31);
  for (const DType dtype : {kFloat32, kFloat64})
    for (const Shape& shape :
         {Shape{2, 5, 3}, Shape{3, 5}, Shape{4, 4}, Shape{230, 130}, Shape{110, 250}, Shape{200, 192}})
      for (const char* mode : {"reduced", "complete"}) {
        SCOPED_TRACE(detail::concat(shape_str(shape), " ", dtype, " ", mode));
        const Tensor a = randn(shape, dtype);
        const int64_t m = a.size(-2), n = a.size(-1), k = std::min(m, n);
        const int64_t cols = std::string(mode) == "complete" ? m : k;
        auto [q, r] = linalg::qr(a, mode);
        EXPECT_EQ(q.size(-1), cols);
        EXPECT_EQ(r.size(-2), cols);
        EXPECT_EQ(r.size(-1), n);
        const double tol = dtype == kFloat64 ? 1e-12 : 1e-4;
        EXPECT_LT(max_abs(matmul(mT(q), q) - eye(cols, -1, dtype)), tol * std::max<int64_t>(m, 10));
        EXPECT_EQ(max_abs(r - r.triu()), 0.0);
        EXPECT_LT(max_abs(matmul(q, r) - a), tol * std::max<int64_t>(m, 10));
        EXPECT_TRUE(testing::all_close(std::get<1>(linalg::qr(a, "r")), r.narrow(-2, 0, k), 0, 0));
      }
  // a transposed (non-contiguous) input factors as its contiguous copy
  const Tensor wide = randn({3, 6}, kFloat64);
  EXPECT_TRUE(
      testing::all_close(std::get<1>(linalg::qr(wide.t())), std::get<1>(linalg::qr(wide.t().contiguous())), 0, 0));
}

TEST(Linalg, QrOfEmptyMatricesModesAndGradientRefusals) {
  auto [q, r] = linalg::qr(zeros({3, 0}, kFloat64), "complete");  // no reflectors: Q is the identity
  EXPECT_TRUE(testing::all_close(q, eye(3, -1, kFloat64), 0, 0));
  EXPECT_EQ(r.sizes(), (Shape{3, 0}));
  auto [q0, r0] = linalg::qr(zeros({0, 2, 4}));
  EXPECT_EQ(q0.sizes(), (Shape{0, 2, 2}));
  EXPECT_EQ(r0.sizes(), (Shape{0, 2, 4}));
  EXPECT_EQ(std::get<0>(linalg::qr(zeros({2, 0, 3}))).sizes(), (Shape{2, 0, 0}));
  auto [qr_q, qr_r] = linalg::qr(randn({4, 3}), "r");  // Q is an empty tensor, as PyTorch's
  EXPECT_EQ(qr_q.sizes(), (Shape{0}));
  EXPECT_EQ(qr_r.sizes(), (Shape{3, 3}));
  EXPECT_ERROR_CONTAINS(linalg::qr(randn({3, 3}), "full"),
                        "linalg.qr: qr received unrecognized mode 'full' but expected one of 'reduced' (default), 'r', "
                        "or 'complete'");
  EXPECT_ERROR_CONTAINS(linalg::qr(randn({3})), "linalg.qr: the input tensor A must have at least 2 dimensions");
  EXPECT_ERROR_CONTAINS(linalg::qr(ones({3, 3}, kInt64)), "linalg.qr: expected a float32 or float64 tensor");
  // gradients: refused (when asked for) where Q is not computed or not unique, as PyTorch
  const Tensor a = randn({4, 3}, kFloat64).requires_grad_(true);
  EXPECT_ERROR_CONTAINS(std::get<1>(linalg::qr(a, "r")).sum().backward(),
                        "linalg.qr: The derivative of linalg.qr depends on Q, which is not computed when mode='r'");
  EXPECT_ERROR_CONTAINS(std::get<1>(linalg::qr(a, "complete")).sum().backward(),
                        "linalg.qr: The QR decomposition is not differentiable when mode='complete' and nrows > ncols");
  std::get<0>(linalg::qr(a.t(), "complete")).sum().backward();  // wide: complete is reduced
  EXPECT_TRUE(a.grad().isfinite().all().item<bool>());
}

TEST(Linalg, SvdOfEmptyMatricesAndNonFiniteInputs) {
  auto [u, s, vh] = linalg::svd(zeros({0, 3}, kFloat64));  // as LAPACK's: full bases are identities
  EXPECT_EQ(u.sizes(), (Shape{0, 0}));
  EXPECT_EQ(s.sizes(), (Shape{0}));
  EXPECT_TRUE(testing::all_close(vh, eye(3, -1, kFloat64), 0, 0));
  auto [u2, s2, vh2] = linalg::svd(zeros({4, 2, 0}), /*full_matrices=*/true);
  EXPECT_TRUE(testing::all_close(u2, eye(2, -1, kFloat32).expand({4, 2, 2}), 0, 0));
  EXPECT_EQ(vh2.sizes(), (Shape{4, 0, 0}));
  EXPECT_EQ(std::get<0>(linalg::svd(zeros({4, 2, 0}), false)).sizes(), (Shape{4, 2, 0}));
  auto [u3, s3, vh3] = linalg::svd(zeros({0, 2, 3}), /*full_matrices=*/true);  // an empty batch
  EXPECT_EQ(u3.sizes(), (Shape{0, 2, 2}));
  EXPECT_EQ(s3.sizes(), (Shape{0, 2}));
  EXPECT_EQ(vh3.sizes(), (Shape{0, 3, 3}));
  EXPECT_EQ(linalg::svdvals(zeros({0, 5, 3})).sizes(), (Shape{0, 3}));
  EXPECT_EQ(linalg::pinv(zeros({2, 0, 3})).sizes(), (Shape{2, 3, 0}));
  EXPECT_EQ(linalg::matrix_rank(zeros({2, 0, 3})).to_vector<int64_t>(), (std::vector<int64_t>{0, 0}));
  for (const double bad : {std::nan(""), std::numeric_limits<double>::infinity()}) {
    const Tensor m = stack({eye(2, -1, kFloat64), tensor<double>({1, bad, 0, 1}, Shape{2, 2})});
    EXPECT_ERROR_CONTAINS(linalg::svd(m), "linalg.svd: (Batch element 1): The algorithm failed to converge");
    EXPECT_ERROR_CONTAINS(linalg::svdvals(m), "linalg.svdvals: (Batch element 1)");
  }
}

TEST(Linalg, BadArgumentsNameTheFunctionAndShapes) {
  const Tensor a = randn({3, 3}), b = randn({3, 2});
  EXPECT_ERROR_CONTAINS(linalg::solve(randn({3, 4}), b), "linalg.solve: A must be batches of square matrices");
  EXPECT_ERROR_CONTAINS(linalg::solve(a, randn({4, 2})),
                        "linalg.solve: incompatible shapes of A and B for the equation AX = B ([3, 3] and [4, 2])");
  EXPECT_ERROR_CONTAINS(linalg::solve(a, randn({3}), /*left=*/false), "the equation XA = B");
  EXPECT_ERROR_CONTAINS(linalg::solve(a, b.to(kFloat64)), "linalg.solve: expected A and B to have the same dtype");
  EXPECT_ERROR_CONTAINS(linalg::inv(a.to(kFloat16)), "linalg.inv: expected a float32 or float64 tensor, but got");
  EXPECT_ERROR_CONTAINS(linalg::det(randn({3})), "linalg.det: the input tensor A must have at least 2 dimensions");
  EXPECT_ERROR_CONTAINS(linalg::solve(randn({2, 3, 3}), randn({4, 3, 1})), "linalg.solve");
  EXPECT_ERROR_CONTAINS(linalg::solve_triangular(a, randn({3}), true), "B must have at least 2 dimensions");
  EXPECT_ERROR_CONTAINS(linalg::eigh(a, "X"), "linalg.eigh: expected UPLO to be 'L' or 'U', but got 'X'");
  EXPECT_ERROR_CONTAINS(linalg::eigvalsh(a, "l"), "linalg.eigvalsh: expected UPLO to be 'L' or 'U', but got 'l'");
  EXPECT_ERROR_CONTAINS(linalg::eigvalsh(b), "linalg.eigvalsh: A must be batches of square matrices");
  EXPECT_ERROR_CONTAINS(linalg::vector_norm(ones({3}, kInt64)), "linalg.vector_norm: expected a floating point");
  EXPECT_ERROR_CONTAINS(linalg::svd(randn({3})), "linalg.svd: the input tensor A must have at least 2 dimensions");
  EXPECT_ERROR_CONTAINS(linalg::svdvals(ones({2, 2}, kInt32)), "linalg.svdvals: expected a float32 or float64 tensor");
  EXPECT_ERROR_CONTAINS(linalg::pinv(b, std::optional<double>(-1.0)), "linalg.pinv: atol must be non-negative, got -1");
  EXPECT_ERROR_CONTAINS(linalg::pinv(b, std::nullopt, std::nullopt, /*hermitian=*/true),
                        "linalg.pinv: A must be batches of square matrices, but they are 3 by 2 matrices");
  EXPECT_ERROR_CONTAINS(linalg::matrix_rank(b, std::nullopt, -0.5), "linalg.matrix_rank: rtol must be non-negative");
  EXPECT_ERROR_CONTAINS(linalg::matrix_norm(a, "max"), "linalg.matrix_norm: order 'max' not supported");
  EXPECT_ERROR_CONTAINS(linalg::matrix_norm(a, 3), "linalg.matrix_norm: order 3 not supported");
  EXPECT_ERROR_CONTAINS(linalg::matrix_norm(a, "fro", {0, 0}), "dims must be different");
  EXPECT_ERROR_CONTAINS(linalg::norm(randn({2, 2, 2}), 1), "input must be 1-D or 2-D");
  EXPECT_ERROR_CONTAINS(linalg::norm(randn({4}), "fro"), "order 'fro' is a matrix norm");
}

TEST(Linalg, VectorNormOrders) {
  const Tensor x = tensor<float>({3, -4, 0, 1}, Shape{4});
  EXPECT_FLOAT_EQ(linalg::vector_norm(x).item<float>(), std::sqrt(26.0f));
  EXPECT_FLOAT_EQ(linalg::vector_norm(x, 1).item<float>(), 8.0f);
  EXPECT_FLOAT_EQ(linalg::vector_norm(x, 0).item<float>(), 3.0f);
  EXPECT_FLOAT_EQ(linalg::vector_norm(x, std::numeric_limits<double>::infinity()).item<float>(), 4.0f);
  EXPECT_FLOAT_EQ(linalg::vector_norm(x, -std::numeric_limits<double>::infinity()).item<float>(), 0.0f);
  EXPECT_EQ(linalg::vector_norm(x, 2, std::nullopt, false, kFloat64).dtype(), kFloat64);
}

}  // namespace
}  // namespace ember
