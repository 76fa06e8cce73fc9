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
std::pair<Tensor, Tensor> eigh_node(const Tensor& a) {
  auto [w, v, info] = forward([&] { return native::eigh_ex(a, "linalg.eigh"); });
  throw_on_info(info, "linalg.eigh", [](int32_t code) {
    return detail::concat("The algorithm failed to converge because the input matrix is ill-conditioned or has too ",
                          "many repeated eigenvalues (error code: ", code, ").");
  });
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

// Backward: g det A⁻ᵀ (the cofactor matrix). At an exactly singular A that is det's adjugate,
// which A⁻ᵀ cannot give: an ember::Error says so rather than return NaNs.
Tensor det(const Tensor& A) {
  constexpr const char* op = "linalg.det";
  const LuDeterminant f = lu_determinant(A, op);
  Tensor out = forward([&] { return f.permutation_sign * f.diagonal.prod({-1}); });
  if (needs_grad(A))
    record_fn(
        "LinalgDetBackward", {&A}, {&out},
        [sa = SavedTensor(A), so = SavedTensor::output(out), lu = f.lu, pivots = f.pivots](std::vector<Tensor>& g) {
          const Tensor d = so.unpack("linalg.det");
          EMBER_CHECK(!d.eq(0.0).any().item<bool>(), "linalg.det",
                      ": the gradient at an exactly singular matrix (det = 0) is its adjugate, which needs the SVD ",
                      "(planned); got a singular matrix of shape ", shape_str(d.sizes()), " batch");
          return std::vector<Tensor>{(g[0] * d).unsqueeze(-1).unsqueeze(-1) *
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

Tensor eigvalsh(const Tensor& A, const std::string& UPLO) { return std::get<0>(eigh(A, UPLO)); }

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
}  // namespace

Tensor matrix_norm(const Tensor& A, const Scalar& ord, const Shape& dim, bool keepdim, std::optional<DType> dtype) {
  constexpr const char* op = "linalg.matrix_norm";
  const auto [d0, d1] = matrix_dims(A, dim, op);
  const double p = ord.to_double();
  const double inf = std::numeric_limits<double>::infinity();
  EMBER_CHECK(std::abs(p) != 2, op, ": the order ", p,
              " needs the singular values (linalg.svdvals, planned); orders 'fro', 1, -1, inf and -inf are there");
  EMBER_CHECK(std::abs(p) == 1 || std::abs(p) == inf, op, ": order ", p, " not supported (1, -1, inf, -inf, 'fro')");
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
  matrix_dims(A, dim, op);
  EMBER_CHECK(ord != "nuc", op, ": the nuclear norm needs the singular values (linalg.svdvals, planned)");
  EMBER_CHECK(ord == "fro", op, ": order '", ord, "' not supported ('fro', or a number: 1, -1, inf, -inf)");
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
