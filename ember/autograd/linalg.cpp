// torch::linalg (Note [Linear algebra] in autograd/linalg.h): each factorization is one node,
// forward beside backward, its formula written with the public functions so that it records in
// a create_graph backward; the rest are compositions of them.
#include "ember/autograd/linalg.h"

#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "ember/autograd/function_helpers.h"
#include "ember/tensor/linalg.h"

namespace ember {
namespace {

Tensor mT(const Tensor& t) { return t.transpose(-2, -1); }
Shape batch_of(const Tensor& t, int64_t matrix_dims = 2) {
  return Shape(t.sizes().begin(), t.sizes().end() - matrix_dims);
}
Shape with(Shape shape, std::initializer_list<int64_t> tail) {
  shape.insert(shape.end(), tail);
  return shape;
}
Tensor identity_like(const Tensor& a) {
  return eye(a.size(-1), -1, TensorOptions().dtype(a.dtype()).device(a.device())).expand(a.sizes());
}

// The per-matrix status codes of a factorization, read once on the host: the first nonzero one
// becomes an ember::Error (PyTorch's wording, with the batch element when there is a batch).
void throw_on_info(const Tensor& info, const char* op, const std::function<std::string(int32_t)>& message) {
  if (info.numel() == 0) return;
  const Tensor codes = info.contiguous().cpu();
  const int32_t* code = codes.data_ptr<int32_t>();
  for (int64_t i = 0; i < codes.numel(); ++i)
    if (code[i] != 0)
      throw Error(detail::concat(op, ": ", info.dim() > 0 ? detail::concat("(Batch element ", i, "): ") : "",
                                 message(code[i])));
}

void check_operand(const Tensor& a, const Tensor& b, const char* op) {
  EMBER_CHECK(b.defined(), op, ": the tensor B is undefined");
  EMBER_CHECK(b.dtype() == a.dtype(), op, ": expected A and B to have the same dtype, but got A ", a.dtype(), " and B ",
              b.dtype());
  EMBER_CHECK(b.device() == a.device(), op, ": expected A and B on the same device, but got A on ", a.device(),
              " and B on ", b.device());
}

// A [*, n, n] and B [*, n, k] expanded to their broadcast batch dims.
std::pair<Tensor, Tensor> broadcast_batches(const Tensor& a, const Tensor& b, const char* op) {
  const Shape batch = broadcast_shapes(batch_of(a), batch_of(b), op);
  return {a.expand(with(batch, {a.size(-2), a.size(-1)})), b.expand(with(batch, {b.size(-2), b.size(-1)}))};
}

// X = A⁻¹ B for A [*, n, n] and B [*, n, k] with the same batch dims: one LU, then its solves.
// Backward: gB = A⁻ᵀ gX (the saved LU's transposed solve), gA = -gB Xᵀ.
Tensor lu_solve_node(const Tensor& a, const Tensor& b, const char* op,
                     const std::function<std::string(int32_t)>& singular) {
  Tensor lu, pivots, info;
  std::tie(lu, pivots, info) = forward([&] { return native::lu_factor_ex(a, op); });
  throw_on_info(info, op, singular);
  Tensor x = forward([&] { return native::lu_solve(lu, pivots, b, false, op); });
  if (needs_grad(a, b))
    record_fn(
        "LinalgSolveBackward", {&a, &b}, {&x},
        [sa = SavedTensor(a), sx = SavedTensor::output(x), lu = lu, pivots = pivots,
         a_grad = a.requires_grad()](std::vector<Tensor>& g) {
          const Tensor x = sx.unpack("linalg.solve");
          const Tensor gb = building_graph() ? linalg::solve(mT(sa.unpack("linalg.solve")), g[0])
                                             : native::lu_solve(lu, pivots, g[0], true, "linalg.solve");
          return std::vector<Tensor>{a_grad ? -matmul(gb, mT(x)) : Tensor(), gb};
        },
        kDifferentiable);
  return x;
}

std::string singular_solve(int32_t) { return "The solver failed because the input matrix is singular."; }
std::string svd_not_converged(int32_t code) {
  return detail::concat("The algorithm failed to converge because the input matrix is ill-conditioned or has too ",
                        "many repeated singular values, or holds a NaN or an infinity (error code: ", code, ").");
}

// det and log|det| from the LU: the row swaps' parity and the diagonal of U.
struct LuDeterminant {
  Tensor lu, pivots, permutation_sign, diagonal;
};
LuDeterminant lu_determinant(const Tensor& a, const char* op) {
  native::check_linalg_input(a, op);
  return forward([&] {
    auto [lu, pivots, info] = native::lu_factor_ex(a, op);
    const Tensor steps = arange(1, a.size(-1) + 1, TensorOptions().dtype(kInt32).device(a.device()));
    const Tensor swaps = ne(pivots, steps).sum({-1});
    const Tensor sign = 1.0 - 2.0 * remainder(swaps, 2).to(a.dtype());
    return LuDeterminant{lu, pivots, sign, lu.diagonal(0, -2, -1)};
  });
}

// The gradient of det (g det A⁻ᵀ) and of log|det| (g A⁻ᵀ): A⁻ᵀ from the saved LU, or inv(A)
// (recorded) in a create_graph backward.
Tensor inverse_transpose(const SavedTensor& a, const Tensor& lu, const Tensor& pivots, const char* op) {
  if (building_graph()) return mT(linalg::inv(a.unpack(op)));
  return native::lu_solve(lu, pivots, identity_like(lu), true, op);
}

// Lower L with A = L Lᵀ, and the status codes. Backward (PyTorch's): with P = tril(Lᵀ gL) and
// S = ½ (P + tril(P, -1)ᵀ), the symmetric gA = L⁻ᵀ S L⁻¹.
std::pair<Tensor, Tensor> cholesky_node(const Tensor& a, const char* op) {
  auto [l, info] = forward([&] { return native::cholesky_ex(a, op); });
  if (needs_grad(a))
    record_fn(
        "LinalgCholeskyBackward", {&a}, {&l},
        [sl = SavedTensor::output(l)](std::vector<Tensor>& g) {
          const Tensor l = sl.unpack("linalg.cholesky");
          Tensor s = matmul(mT(l), g[0]).tril();
          s = 0.5 * (s + mT(s.tril(-1)));
          s = linalg::solve_triangular(mT(l), s, /*upper=*/true, /*left=*/true);
          return std::vector<Tensor>{linalg::solve_triangular(l, s, /*upper=*/false, /*left=*/false)};
        },
        kDifferentiable);
  return {l, info};
}

std::string not_positive_definite(int32_t k) {
  return detail::concat("The factorization could not be completed because the input is not positive-definite (the ",
                        "leading minor of order ", k, " is not positive-definite).");
}

// X = A⁻¹ B, A triangular, same batch dims. Backward: gB = A⁻ᵀ gX (Aᵀ's other triangle), gA =
// -gB Xᵀ on A's triangle (without the diagonal when unitriangular).
Tensor triangular_node(const Tensor& a, const Tensor& b, bool upper, bool unit) {
  Tensor x = forward([&] { return native::solve_triangular(a, b, upper, unit, "linalg.solve_triangular"); });
  if (needs_grad(a, b))
    record_fn(
        "LinalgSolveTriangularBackward", {&a, &b}, {&x},
        [sa = SavedTensor(a), sx = SavedTensor::output(x), upper, unit,
         a_grad = a.requires_grad()](std::vector<Tensor>& g) {
          const Tensor gb = linalg::solve_triangular(mT(sa.unpack("linalg.solve_triangular")), g[0], !upper,
                                                     /*left=*/true, unit);
          Tensor ga;
          if (a_grad) {
            ga = -matmul(gb, mT(sx.unpack("linalg.solve_triangular")));
            ga = upper ? ga.triu(unit ? 1 : 0) : ga.tril(unit ? -1 : 0);
          }
          return std::vector<Tensor>{ga, gb};
        },
        kDifferentiable);
  return x;
}

// (w, V) of symmetric A (lower triangle). Backward (PyTorch's, for a real symmetric A): with
// E_ij = w_j - w_i off the diagonal, gA = V (diag(gw) + skew(Vᵀ gV) / E) Vᵀ, where skew(M) =
// ½ (M - Mᵀ): the eigenvalues' gradient on the diagonal, the vectors' rotations off it.
std::string eigh_not_converged(int32_t code) {
  return detail::concat("The algorithm failed to converge because the input matrix is ill-conditioned or has too ",
                        "many repeated eigenvalues (error code: ", code, ").");
}

std::pair<Tensor, Tensor> eigh_node(const Tensor& a) {
  auto [w, v, info] = forward([&] { return native::eigh_ex(a, /*compute_v=*/true, "linalg.eigh"); });
  throw_on_info(info, "linalg.eigh", eigh_not_converged);
  if (needs_grad(a))
    record_fn(
        "LinalgEighBackward", {&a}, {&w, &v},
        [sw = SavedTensor::output(w, 0), sv = SavedTensor::output(v, 1)](std::vector<Tensor>& g) {
          const Tensor w = sw.unpack("linalg.eigh"), v = sv.unpack("linalg.eigh");
          const Tensor eye_n = identity_like(v);
          const Tensor vtgv = matmul(mT(v), g[1]);
          const Tensor gaps = w.unsqueeze(-2) - w.unsqueeze(-1) + eye_n;  // E, ones on the diagonal
          const Tensor inner = 0.5 * (vtgv - mT(vtgv)) / gaps + eye_n * g[0].unsqueeze(-1);
          return std::vector<Tensor>{matmul(matmul(v, inner), mT(v))};
        },
        kDifferentiable);
  return {w, v};
}

// w alone; computes V only when a gradient needs it, as PyTorch does. Backward: V diag(gw) Vᵀ.
Tensor eigvalsh_node(const Tensor& a) {
  constexpr const char* op = "linalg.eigvalsh";
  const bool grad = needs_grad(a);
  auto [w, v, info] = forward([&] { return native::eigh_ex(a, /*compute_v=*/grad, op); });
  throw_on_info(info, op, eigh_not_converged);
  if (grad)
    record_fn(
        "LinalgEigvalshBackward", {&a}, {&w},
        [sa = SavedTensor(a), v = v](std::vector<Tensor>& g) {
          Tensor v_ = v;  // in a create_graph backward, vectors that record their own gradient
          if (building_graph()) v_ = eigh_node(sa.unpack(op)).second;
          return std::vector<Tensor>{matmul(v_ * g[0].unsqueeze(-2), mT(v_))};
        },
        kDifferentiable);
  return w;
}

// x / d, but 0 where x is exactly 0: the backward of an SVD divides by gaps between singular
// values and by the values themselves, which are 0 for repeated or zero ones; where no gradient
// reaches such a term (its numerator is 0), it contributes nothing instead of 0 / 0 = NaN, as a
// term PyTorch skips for an undefined gradient.
Tensor divide_where_nonzero(const Tensor& x, const Tensor& d) { return where(x == 0.0, 0.0, x / d); }

// (U, S, Vh) of A [..., m, n]. Backward (PyTorch's, for real A) on the first k columns of U and
// rows of Vh (the rest of full ones are arbitrary bases; their gradients are dropped). With
// J = Uᵀ gU, K = Vh gVhᵀ, skew(X) = X - Xᵀ and E_ij = s_j² - s_i² (ones on the diagonal):
//   gA = U (diag(gS) + (skew(J) s_j + s_i skew(K)) / E) Vh
//      + (gU - U J) S⁻¹ Vh        when m > k: the part of gU outside U's columns
//      + U S⁻¹ (gVh - Kᵀ Vh)      when n > k: the part of gVh outside Vh's rows
std::tuple<Tensor, Tensor, Tensor> svd_node(const Tensor& a, bool full_matrices) {
  constexpr const char* op = "linalg.svd";
  auto [u, s, vh, info] = forward([&] { return native::svd_ex(a, full_matrices, /*compute_uv=*/true, op); });
  throw_on_info(info, op, svd_not_converged);
  if (needs_grad(a))
    record_fn(
        "LinalgSvdBackward", {&a}, {&u, &s, &vh},
        [su = SavedTensor::output(u, 0), ss = SavedTensor::output(s, 1), svh = SavedTensor::output(vh, 2),
         full_matrices](std::vector<Tensor>& g) {
          Tensor u = su.unpack(op), s = ss.unpack(op), vh = svh.unpack(op), gu = g[0], gvh = g[2];
          const int64_t m = u.size(-2), n = vh.size(-1), k = s.size(-1);
          if (full_matrices) {
            u = u.narrow(-1, 0, k), gu = gu.narrow(-1, 0, k);
            vh = vh.narrow(-2, 0, k), gvh = gvh.narrow(-2, 0, k);
          }
          const Tensor j = matmul(mT(u), gu), kk = matmul(vh, mT(gvh));
          const Tensor s2 = s * s;
          const Tensor gaps = s2.unsqueeze(-2) - s2.unsqueeze(-1) + identity_like(j);  // E
          Tensor inner = divide_where_nonzero((j - mT(j)) * s.unsqueeze(-2) + s.unsqueeze(-1) * (kk - mT(kk)), gaps) +
                         g[1].unsqueeze(-1) * identity_like(j);
          Tensor ga = matmul(matmul(u, inner), vh);
          if (m > k) ga = ga + matmul(divide_where_nonzero(gu - matmul(u, j), s.unsqueeze(-2)), vh);
          if (n > k) ga = ga + matmul(u, divide_where_nonzero(gvh - matmul(mT(kk), vh), s.unsqueeze(-1)));
          return std::vector<Tensor>{ga};
        },
        kDifferentiable);
  return {u, s, vh};
}

// S alone; computes U and Vh only when a gradient needs them. Backward: U diag(gS) Vh.
Tensor svdvals_node(const Tensor& a) {
  constexpr const char* op = "linalg.svdvals";
  const bool grad = needs_grad(a);
  auto [u, s, vh, info] = forward([&] { return native::svd_ex(a, /*full_matrices=*/false, grad, op); });
  throw_on_info(info, op, svd_not_converged);
  if (grad)
    record_fn(
        "LinalgSvdvalsBackward", {&a}, {&s},
        [sa = SavedTensor(a), u = u, vh = vh](std::vector<Tensor>& g) {
          Tensor u_ = u, vh_ = vh;  // in a create_graph backward, vectors that record their own gradient
          if (building_graph()) std::tie(u_, std::ignore, vh_) = svd_node(sa.unpack(op), false);
          return std::vector<Tensor>{matmul(u_ * g[0].unsqueeze(-2), vh_)};
        },
        kDifferentiable);
  return s;
}

// The gradient of the QR of a square or tall matrix (reduced): with M = gR Rᵀ - Qᵀ gQ and S the
// symmetric matrix whose upper triangle is M's, gA = (gQ + Q S) R⁻ᵀ (PyTorch's formula; Q S is the
// part of gQ's rotation that R's triangular shape pins down).
Tensor qr_backward_tall(const Tensor& q, const Tensor& r, const Tensor& gq, const Tensor& gr) {
  const Tensor m = (matmul(gr, mT(r)) - matmul(mT(q), gq)).triu();
  return linalg::solve_triangular(mT(r), gq + matmul(q, m + mT(m.triu(1))), /*upper=*/false, /*left=*/false);
}

// (Q, R) of A [..., m, n]; Q empty for mode "r". Backward for reduced Q (or complete, which is the
// same when m ≤ n): the tall case above; a wide A = [X Y] (m < n) has X = Q R₁ and R₂ = Qᵀ Y, so
// X's gradient is the square case's with gQ + Y gR₂ᵀ (Y = Q R₂), and Y's is Q gR₂.
std::tuple<Tensor, Tensor> qr_node(const Tensor& a, const std::string& mode) {
  constexpr const char* op = "linalg.qr";
  auto [q, r] = forward([&] { return native::qr(a, mode == "complete", mode != "r", op); });
  if (mode == "r") q = empty({0}, TensorOptions().dtype(a.dtype()).device(a.device()));
  if (!needs_grad(a)) return {q, r};
  const int64_t m = a.size(-2), n = a.size(-1);
  if (mode == "r" || (mode == "complete" && m > n)) {  // as PyTorch, an error only once a gradient is asked for
    const char* why = mode == "r"
                          ? "The derivative of linalg.qr depends on Q, which is not computed when mode='r'. "
                            "Please use linalg.qr(A, mode='reduced') if you are going to differentiate "
                            "through linalg.qr."
                          : "The QR decomposition is not differentiable when mode='complete' and nrows > ncols.";
    record_fn(
        "LinalgQrBackward", {&a}, {&r},
        [why](std::vector<Tensor>&) -> std::vector<Tensor> { throw Error(detail::concat("linalg.qr: ", why)); },
        kDifferentiable, kSavesNoTensors);
    return {q, r};
  }
  record_fn(
      "LinalgQrBackward", {&a}, {&q, &r},
      [sq = SavedTensor::output(q, 0), sr = SavedTensor::output(r, 1)](std::vector<Tensor>& g) {
        const Tensor q = sq.unpack(op), r = sr.unpack(op);
        const int64_t m = q.size(-2), n = r.size(-1);
        if (m >= n) return std::vector<Tensor>{qr_backward_tall(q, r, g[0], g[1])};
        const Tensor r2 = r.narrow(-1, m, n - m), gr2 = g[1].narrow(-1, m, n - m);
        const Tensor y = matmul(q, r2);
        const Tensor gx = qr_backward_tall(q, r.narrow(-1, 0, m), g[0] + matmul(y, mT(gr2)), g[1].narrow(-1, 0, m));
        return std::vector<Tensor>{cat({gx, matmul(q, gr2)}, -1)};
      },
      kDifferentiable);
  return {q, r};
}

// The machine ε of a linalg dtype (float32 or float64, the only ones check_linalg_input admits).
double epsilon_of(DType dtype) {
  return dtype == kFloat64 ? std::numeric_limits<double>::epsilon()
                           : static_cast<double>(std::numeric_limits<float>::epsilon());
}

// The tolerances of pinv and matrix_rank (PyTorch's): atol 0 and rtol max(m, n) ε by default; a
// positive atol alone turns the default rtol off.
std::pair<double, double> rank_tolerances(const Tensor& a, std::optional<double> atol, std::optional<double> rtol,
                                          const char* op) {
  EMBER_CHECK(!atol || *atol >= 0, op, ": atol must be non-negative, got ", *atol);
  EMBER_CHECK(!rtol || *rtol >= 0, op, ": rtol must be non-negative, got ", *rtol);
  const double default_rtol = epsilon_of(a.dtype()) * static_cast<double>(std::max(a.size(-2), a.size(-1)));
  return {atol.value_or(0.0), rtol ? *rtol : (atol && *atol > 0 ? 0.0 : default_rtol)};
}

// max(atol, rtol σ₁) [..., 1] for singular values (or eigenvalues, of a symmetric A) [..., k], k > 0.
Tensor rank_threshold(const Tensor& values, double atol, double rtol) {
  return clamp_min(values.abs().amax({-1}, /*keepdim=*/true) * rtol, atol);
}

}  // namespace

namespace linalg {

Tensor solve(const Tensor& A, const Tensor& B, bool left) {
  constexpr const char* op = "linalg.solve";
  native::check_linalg_input(A, op);
  check_operand(A, B, op);
  // B is a vector when 1-D, or with one dim fewer than A and A's batch dims (PyTorch's rule).
  const bool vector = B.dim() == 1 || (B.dim() == A.dim() - 1 && B.sizes() == batch_of(A, 1));
  const Tensor b = vector ? B.unsqueeze(-1) : B;
  // (as PyTorch's, a vector B with left=false is the column [n, 1]: XA = B fits it only when n = 1)
  EMBER_CHECK(b.dim() >= 2 && (left ? b.size(-2) : b.size(-1)) == A.size(-1), op,
              ": incompatible shapes of A and B for the equation ", left ? "AX = B (" : "XA = B (",
              shape_str(A.sizes()), " and ", shape_str(B.sizes()), ")");
  auto [a2, b2] = broadcast_batches(left ? A : mT(A), left ? b : mT(b), op);
  Tensor x = lu_solve_node(a2, b2, op, singular_solve);
  if (!left) x = mT(x);
  return vector ? x.squeeze(-1) : x;
}

Tensor inv(const Tensor& A) {
  constexpr const char* op = "linalg.inv";
  native::check_linalg_input(A, op);
  return lu_solve_node(A, identity_like(A), op, [](int32_t k) {
    return detail::concat("The diagonal element ", k,
                          " is zero, the inversion could not be completed because the input matrix is singular.");
  });
}

// Backward: g C, C the cofactor matrix (det's derivative), det A⁻ᵀ from the saved LU. A⁻ᵀ does not
// exist at an exactly singular A, where C does: when one matrix of the batch is singular, C of
// every one comes from the SVD A = U S Vh: C = det(U) det(Vh) U diag(Π_{j≠i} s_j) Vh, 0 when two
// singular values are 0. (PyTorch 1.13 returns 0 there, pytorch/pytorch#104675.)
namespace {
Tensor cofactors(const Tensor& a) {
  auto [u, s, vh] = linalg::svd(a, /*full_matrices=*/false);
  const Tensor off_diagonal = 1.0 - identity_like(a);
  const Tensor others = (s.unsqueeze(-2) * off_diagonal + identity_like(a)).prod({-1});  // Π_{j≠i} s_j
  const Tensor sign = linalg::det(u) * linalg::det(vh);
  return sign.unsqueeze(-1).unsqueeze(-1) * matmul(u * others.unsqueeze(-2), vh);
}
}  // namespace

Tensor det(const Tensor& A) {
  constexpr const char* op = "linalg.det";
  const LuDeterminant f = lu_determinant(A, op);
  Tensor out = forward([&] { return f.permutation_sign * f.diagonal.prod({-1}); });
  if (needs_grad(A))
    record_fn(
        "LinalgDetBackward", {&A}, {&out},
        [sa = SavedTensor(A), so = SavedTensor::output(out), lu = f.lu, pivots = f.pivots](std::vector<Tensor>& g) {
          const Tensor d = so.unpack("linalg.det"), scale = g[0].unsqueeze(-1).unsqueeze(-1);
          if (d.numel() > 0 && d.eq(0.0).any().item<bool>())
            return std::vector<Tensor>{scale * cofactors(sa.unpack("linalg.det"))};
          return std::vector<Tensor>{scale * d.unsqueeze(-1).unsqueeze(-1) *
                                     inverse_transpose(sa, lu, pivots, "linalg.det")};
        },
        kDifferentiable);
  return out;
}

std::tuple<Tensor, Tensor> slogdet(const Tensor& A) {
  constexpr const char* op = "linalg.slogdet";
  const LuDeterminant f = lu_determinant(A, op);
  Tensor sign = forward([&] { return f.permutation_sign * f.diagonal.sign().prod({-1}); });
  Tensor logabs = forward([&] { return f.diagonal.abs().log().sum({-1}); });
  if (needs_grad(A))
    record_fn(
        "LinalgSlogdetBackward", {&A}, {&logabs},
        [sa = SavedTensor(A), lu = f.lu, pivots = f.pivots](std::vector<Tensor>& g) {
          return std::vector<Tensor>{g[0].unsqueeze(-1).unsqueeze(-1) *
                                     inverse_transpose(sa, lu, pivots, "linalg.slogdet")};
        },
        kDifferentiable);
  return {sign, logabs};
}

std::tuple<Tensor, Tensor> cholesky_ex(const Tensor& A, bool upper, bool check_errors) {
  constexpr const char* op = "linalg.cholesky";
  auto [l, info] = cholesky_node(A, op);
  if (check_errors) throw_on_info(info, op, not_positive_definite);
  return {upper ? mT(l) : l, info};
}

Tensor cholesky(const Tensor& A, bool upper) { return std::get<0>(cholesky_ex(A, upper, /*check_errors=*/true)); }

Tensor solve_triangular(const Tensor& A, const Tensor& B, bool upper, bool left, bool unitriangular) {
  constexpr const char* op = "linalg.solve_triangular";
  native::check_linalg_input(A, op);
  check_operand(A, B, op);
  EMBER_CHECK(B.dim() >= 2, op, ": B must have at least 2 dimensions, but got shape ", shape_str(B.sizes()));
  if (!left) return mT(solve_triangular(mT(A), mT(B), !upper, /*left=*/true, unitriangular));
  EMBER_CHECK(B.size(-2) == A.size(-1), op, ": incompatible shapes of A and B for the equation AX = B (",
              shape_str(A.sizes()), " and ", shape_str(B.sizes()), ")");
  auto [a2, b2] = broadcast_batches(A, B, op);
  return triangular_node(a2, b2, upper, unitriangular);
}

std::tuple<Tensor, Tensor> eigh(const Tensor& A, const std::string& UPLO) {
  EMBER_CHECK(UPLO == "L" || UPLO == "U", "linalg.eigh: expected UPLO to be 'L' or 'U', but got '", UPLO, "'");
  native::check_linalg_input(A, "linalg.eigh");
  return eigh_node(UPLO == "U" ? mT(A) : A);  // the upper triangle of A is the lower one of Aᵀ
}

Tensor eigvalsh(const Tensor& A, const std::string& UPLO) {
  EMBER_CHECK(UPLO == "L" || UPLO == "U", "linalg.eigvalsh: expected UPLO to be 'L' or 'U', but got '", UPLO, "'");
  native::check_linalg_input(A, "linalg.eigvalsh");
  return eigvalsh_node(UPLO == "U" ? mT(A) : A);
}

std::tuple<Tensor, Tensor, Tensor> svd(const Tensor& A, bool full_matrices) {
  native::check_linalg_input(A, "linalg.svd", /*square=*/false);
  return svd_node(A, full_matrices);
}

Tensor svdvals(const Tensor& A) {
  native::check_linalg_input(A, "linalg.svdvals", /*square=*/false);
  return svdvals_node(A);
}

std::tuple<Tensor, Tensor> qr(const Tensor& A, const std::string& mode) {
  EMBER_CHECK(mode == "reduced" || mode == "complete" || mode == "r", "linalg.qr: qr received unrecognized mode '",
              mode, "' but expected one of 'reduced' (default), 'r', or 'complete'");
  native::check_linalg_input(A, "linalg.qr", /*square=*/false);
  return qr_node(A, mode);
}

namespace {
// A⁺ = V diag(1/σ) Uᵀ over the singular values above the threshold (V diag(1/λ) Vᵀ from eigh when
// `hermitian`), computed with recording off; the singular values (|eigenvalues|) into `values`
// when given. Backward, for P = A A⁺ and Q = A⁺ A (projections):
//   gA = -A⁺ᵀ G A⁺ᵀ + (I - P) Gᵀ A⁺ A⁺ᵀ + A⁺ᵀ A⁺ Gᵀ (I - Q),
// each product associated so that its inner matrices are the smaller of m × m and n × n.
Tensor pinv_node(const Tensor& A, double abs_tol, double rel_tol, bool hermitian, Tensor* values = nullptr) {
  constexpr const char* op = "linalg.pinv";
  Tensor out = forward([&] {
    if (A.numel() == 0) {
      const TensorOptions options = TensorOptions().dtype(A.dtype()).device(A.device());
      if (values) *values = zeros(with(batch_of(A), {std::min(A.size(-2), A.size(-1))}), options);
      return zeros(with(batch_of(A), {A.size(-1), A.size(-2)}), options);
    }
    if (hermitian) {
      auto [w, v] = eigh_node(A);
      if (values) *values = w.abs();
      const Tensor inv_w = where(w.abs() > rank_threshold(w, abs_tol, rel_tol), w.reciprocal(), 0.0);
      return matmul(v * inv_w.unsqueeze(-2), mT(v));
    }
    auto [u, s, vh] = svd_node(A, /*full_matrices=*/false);
    if (values) *values = s;
    const Tensor inv_s = where(s > rank_threshold(s, abs_tol, rel_tol), s.reciprocal(), 0.0);
    return matmul(mT(vh) * inv_s.unsqueeze(-2), mT(u));
  });
  if (needs_grad(A))
    record_fn(
        "LinalgPinvBackward", {&A}, {&out},
        [sa = SavedTensor(A), so = SavedTensor::output(out)](std::vector<Tensor>& g) {
          const Tensor a = sa.unpack(op), p = so.unpack(op), gt = mT(g[0]), pt = mT(p);
          if (a.size(-2) <= a.size(-1)) {  // m ≤ n: m × m inner products
            const Tensor k = matmul(gt, p), kpt = matmul(k, pt);
            return std::vector<Tensor>{-mT(matmul(p, k)) + kpt - matmul(matmul(a, p), kpt) +
                                       matmul(matmul(pt, p), gt - matmul(k, a))};
          }
          const Tensor k = matmul(p, gt), ptk = matmul(pt, k);
          return std::vector<Tensor>{-mT(matmul(k, p)) + matmul(matmul(gt - matmul(a, k), p), pt) + ptk -
                                     matmul(matmul(ptk, p), a)};
        },
        kDifferentiable);
  return out;
}
}  // namespace

Tensor pinv(const Tensor& A, std::optional<double> atol, std::optional<double> rtol, bool hermitian) {
  constexpr const char* op = "linalg.pinv";
  native::check_linalg_input(A, op, /*square=*/hermitian);
  const auto [abs_tol, rel_tol] = rank_tolerances(A, atol, rtol, op);
  return pinv_node(A, abs_tol, rel_tol, hermitian);
}

Tensor pinv(const Tensor& A, double rcond, bool hermitian) { return pinv(A, 0.0, rcond, hermitian); }

Tensor matrix_rank(const Tensor& A, std::optional<double> atol, std::optional<double> rtol, bool hermitian) {
  constexpr const char* op = "linalg.matrix_rank";
  native::check_linalg_input(A, op, /*square=*/hermitian);
  const auto [abs_tol, rel_tol] = rank_tolerances(A, atol, rtol, op);
  NoGradGuard no_grad;  // a count: no gradient
  if (std::min(A.size(-2), A.size(-1)) == 0)
    return zeros(batch_of(A), TensorOptions().dtype(kInt64).device(A.device()));
  const Tensor values = hermitian ? eigvalsh(A).abs() : svdvals(A);
  return (values > rank_threshold(values, abs_tol, rel_tol)).sum({-1});
}

Tensor matrix_rank(const Tensor& A, double tol, bool hermitian) { return matrix_rank(A, tol, 0.0, hermitian); }

// X = A⁺ B through the SVD, whatever the driver: for a matrix of full column rank that is the
// least-squares solution LAPACK's drivers find, and for a rank-deficient one the minimum-norm
// solution, as gelsy's and gelsd's are. The driver names which other outputs are computed, as
// PyTorch's: the rank (gelsy, gelsd, gelss), the singular values (gelsd, gelss), the squared
// residuals ‖A X - B‖² per column when m > n (gels; gelsd and gelss only when every matrix has
// full rank). The gradient is X's as a product A⁺ B, which is PyTorch's formula too.
std::tuple<Tensor, Tensor, Tensor, Tensor> lstsq(const Tensor& A, const Tensor& B, std::optional<double> rcond,
                                                 const std::optional<std::string>& driver) {
  constexpr const char* op = "linalg.lstsq";
  native::check_linalg_input(A, op, /*square=*/false);
  check_operand(A, B, op);
  EMBER_CHECK(B.dim() >= 1 && A.dim() >= B.dim() && A.dim() - B.dim() <= 1, op,
              ": B must have as many dims as A (a batch of matrices) or one fewer (a batch of vectors), but A is ",
              shape_str(A.sizes()), " and B is ", shape_str(B.sizes()));
  const bool vector = B.dim() == A.dim() - 1;
  const Tensor b = vector ? B.unsqueeze(-1) : B;
  EMBER_CHECK(b.size(-2) == A.size(-2), op, ": A and B must have the same number of rows, but A is ",
              shape_str(A.sizes()), " and B is ", shape_str(B.sizes()));
  const std::string name = driver.value_or(A.device().is_cuda() ? "gels" : "gelsy");
  EMBER_CHECK(name == "gels" || name == "gelsy" || name == "gelsd" || name == "gelss", op,
              ": driver should be one of gels, gelsy, gelsd, gelss, but got '", name, "'");
  EMBER_CHECK(!rcond || *rcond >= 0 || *rcond == -1.0, op, ": rcond must be non-negative, got ", *rcond);
  const int64_t m = A.size(-2), n = A.size(-1);
  // LAPACK's rcond: a negative one means the machine precision; absent, ε max(m, n) (PyTorch's)
  const double eps = epsilon_of(A.dtype());
  const double rel_tol = !rcond ? eps * static_cast<double>(std::max(m, n)) : *rcond < 0 ? eps : *rcond;
  Tensor values;
  const Tensor solution = matmul(pinv_node(A, 0.0, rel_tol, /*hermitian=*/false, &values), b);
  const Tensor x = vector ? solution.squeeze(-1) : solution;

  NoGradGuard no_grad;  // the other outputs have no gradient, as PyTorch's
  const TensorOptions options = TensorOptions().dtype(A.dtype()).device(A.device());
  Tensor rank = empty({0}, options.dtype(kInt64)), singular_values = empty({0}, options);
  Tensor residuals = empty({0}, options);
  if (name != "gels") {
    rank = values.size(-1) == 0 ? zeros(batch_of(A), options.dtype(kInt64))
                                : (values > rank_threshold(values, 0.0, rel_tol)).sum({-1});
  }
  if (name == "gelsd" || name == "gelss") singular_values = values;
  bool with_residuals = m > n && name != "gelsy";  // gels assumes full rank; gelsd and gelss check it
  if (with_residuals && name != "gels") with_residuals = rank.numel() == 0 || rank.eq(n).all().item<bool>();
  if (with_residuals) residuals = (matmul(A, solution) - b).square().sum({-2});
  return {x, residuals, rank, singular_values};
}

Tensor matrix_power(const Tensor& A, int64_t n) {
  constexpr const char* op = "linalg.matrix_power";
  EMBER_CHECK(A.defined(), op, ": the input tensor is undefined");
  EMBER_CHECK(A.dim() >= 2 && A.size(-1) == A.size(-2), op,
              ": expected a tensor of square matrices [..., n, n], but got shape ", shape_str(A.sizes()));
  if (n == 0) return identity_like(A).clone();
  Tensor base = n < 0 ? inv(A) : A;
  // |n| by its bits: the squares of base times the product of those whose bit is set
  uint64_t bits = n < 0 ? 0 - static_cast<uint64_t>(n) : static_cast<uint64_t>(n);
  Tensor result;
  while (true) {
    if (bits & 1) result = result.defined() ? matmul(result, base) : base;
    bits >>= 1;
    if (!bits) break;
    base = matmul(base, base);
  }
  return result;
}

Tensor vector_norm(const Tensor& x, const Scalar& ord, const std::optional<Shape>& dim, bool keepdim,
                   std::optional<DType> dtype) {
  constexpr const char* op = "linalg.vector_norm";
  EMBER_CHECK(x.defined(), op, ": the input tensor is undefined");
  EMBER_CHECK(is_floating(x.dtype()), op, ": expected a floating point tensor as input, but got ", x.dtype());
  EMBER_CHECK(!dtype || is_floating(*dtype), op, ": dtype must be a floating point dtype, got ", *dtype);
  const Tensor v = dtype && *dtype != x.dtype() ? x.to(*dtype) : x;
  const Shape dims = dim.value_or(Shape{});
  const double p = ord.to_double();
  EMBER_CHECK(!std::isnan(p), op, ": the order must be a number, got NaN");
  if (p == -std::numeric_limits<double>::infinity()) return v.abs().amin(dims, keepdim);
  if (p == 0) return ne(v, 0.0).to(v.dtype()).sum(dims, keepdim);  // the count of nonzeros (no gradient)
  if (p < 0) return v.abs().pow(p).sum(dims, keepdim).pow(1.0 / p);
  return v.norm(p, dims, keepdim);
}

namespace {
// Wraps the two matrix dims of a matrix norm; they must differ.
std::pair<int64_t, int64_t> matrix_dims(const Tensor& A, const Shape& dim, const char* op) {
  EMBER_CHECK(A.defined(), op, ": the input tensor is undefined");
  EMBER_CHECK(A.dim() >= 2, op, ": the input tensor A must have at least 2 dimensions, but got shape ",
              shape_str(A.sizes()));
  EMBER_CHECK(is_floating(A.dtype()), op, ": expected a floating point tensor as input, but got ", A.dtype());
  EMBER_CHECK(dim.size() == 2, op, ": dim must be a 2-tuple, but got ", dim.size(), " dims");
  const int64_t d0 = wrap_dim(dim[0], A.dim(), op), d1 = wrap_dim(dim[1], A.dim(), op);
  EMBER_CHECK(d0 != d1, op, ": dims must be different, got (", dim[0], ", ", dim[1], ")");
  return {d0, d1};
}

// The singular values of the matrices over dims (d0, d1) -> their max (ord 2), min (-2) or sum
// ("nuc"), those dims removed (kept as size 1 when `keepdim`).
Tensor singular_value_norm(const Tensor& A, int64_t d0, int64_t d1, const char* ord, bool keepdim,
                           std::optional<DType> dtype) {
  const Tensor v = dtype && *dtype != A.dtype() ? A.to(*dtype) : A;
  Shape order;
  for (int64_t d = 0; d < v.dim(); ++d)
    if (d != d0 && d != d1) order.push_back(d);
  order.push_back(d0);
  order.push_back(d1);
  const Tensor s = linalg::svdvals(v.permute(order));
  const std::string o = ord;
  Tensor r = o == "nuc" ? s.sum({-1}) : o == "2" ? s.amax({-1}) : s.amin({-1});
  if (keepdim) r = r.unsqueeze(std::min(d0, d1)).unsqueeze(std::max(d0, d1));
  return r;
}
}  // namespace

Tensor matrix_norm(const Tensor& A, const Scalar& ord, const Shape& dim, bool keepdim, std::optional<DType> dtype) {
  constexpr const char* op = "linalg.matrix_norm";
  const auto [d0, d1] = matrix_dims(A, dim, op);
  const double p = ord.to_double();
  const double inf = std::numeric_limits<double>::infinity();
  if (std::abs(p) == 2) return singular_value_norm(A, d0, d1, p > 0 ? "2" : "-2", keepdim, dtype);
  EMBER_CHECK(std::abs(p) == 1 || std::abs(p) == inf, op, ": order ", p,
              " not supported (2, -2, 1, -1, inf, -inf, 'fro', 'nuc')");
  const Tensor v = dtype && *dtype != A.dtype() ? A.to(*dtype) : A;
  // ±1: the column sums (over the rows, d0) of |A|, their max or min over d1; ±inf the other way round
  const bool columns = std::abs(p) == 1;
  Tensor sums = v.abs().sum({columns ? d0 : d1}, /*keepdim=*/true);
  Tensor r = p > 0 ? sums.amax({columns ? d1 : d0}, true) : sums.amin({columns ? d1 : d0}, true);
  if (!keepdim) r = r.squeeze(std::max(d0, d1)).squeeze(std::min(d0, d1));
  return r;
}

Tensor matrix_norm(const Tensor& A, const std::string& ord, const Shape& dim, bool keepdim,
                   std::optional<DType> dtype) {
  constexpr const char* op = "linalg.matrix_norm";
  const auto [d0, d1] = matrix_dims(A, dim, op);
  if (ord == "nuc") return singular_value_norm(A, d0, d1, "nuc", keepdim, dtype);
  EMBER_CHECK(ord == "fro", op, ": order '", ord,
              "' not supported ('fro', 'nuc', or a number: 2, -2, 1, -1, inf, -inf)");
  return vector_norm(A, 2, dim, keepdim, dtype);
}

Tensor norm(const Tensor& x, const std::optional<Scalar>& ord, const std::optional<Shape>& dim, bool keepdim,
            std::optional<DType> dtype) {
  constexpr const char* op = "linalg.norm";
  EMBER_CHECK(x.defined(), op, ": the input tensor is undefined");
  if (dim) {
    EMBER_CHECK(dim->size() == 1 || dim->size() == 2, op, ": dim must be one or two dims, but got ", dim->size());
    if (dim->size() == 1) return vector_norm(x, ord.value_or(2), dim, keepdim, dtype);
    return ord ? matrix_norm(x, *ord, *dim, keepdim, dtype) : matrix_norm(x, "fro", *dim, keepdim, dtype);
  }
  if (!ord) return vector_norm(x, 2, std::nullopt, keepdim, dtype);
  EMBER_CHECK(x.dim() == 1 || x.dim() == 2, op, ": input must be 1-D or 2-D when dim is not given and ord is, ",
              "but got shape ", shape_str(x.sizes()));
  return x.dim() == 1 ? vector_norm(x, *ord, std::nullopt, keepdim, dtype)
                      : matrix_norm(x, *ord, Shape{-2, -1}, keepdim, dtype);
}

Tensor norm(const Tensor& x, const std::string& ord, const std::optional<Shape>& dim, bool keepdim,
            std::optional<DType> dtype) {
  constexpr const char* op = "linalg.norm";
  EMBER_CHECK(x.defined(), op, ": the input tensor is undefined");
  EMBER_CHECK(dim ? dim->size() == 2 : x.dim() == 2, op, ": order '", ord,
              "' is a matrix norm: it needs a 2-D input or two dims, but got shape ", shape_str(x.sizes()));
  return matrix_norm(x, ord, dim.value_or(Shape{-2, -1}), keepdim, dtype);
}

}  // namespace linalg

Tensor det(const Tensor& A) { return linalg::det(A); }
std::tuple<Tensor, Tensor> slogdet(const Tensor& A) { return linalg::slogdet(A); }
Tensor inverse(const Tensor& A) { return linalg::inv(A); }
Tensor logdet(const Tensor& A) {
  auto [sign, logabs] = linalg::slogdet(A);
  return where(sign < 0.0, std::numeric_limits<double>::quiet_NaN(), logabs);
}

}  // namespace ember
