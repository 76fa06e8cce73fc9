// The native matrix factorizations (tensor/linalg.h): checks, then one back-end kernel on a
// column-major copy of the batch (Note [Fortran order]).
#include "ember/tensor/linalg.h"

#include <algorithm>

#include "ember/tensor/ops/internal.h"

namespace ember::native {
namespace {

Shape batch_shape(const Tensor& a) { return Shape(a.sizes().begin(), a.sizes().end() - 2); }
int64_t batch_count(const Tensor& a) {
  int64_t count = 1;
  for (int64_t s : batch_shape(a)) count *= s;
  return count;
}
Shape with(Shape shape, std::initializer_list<int64_t> tail) {
  shape.insert(shape.end(), tail);
  return shape;
}

// x [..., n, m] -> a new [B, n, m] with column-major matrices (strides (n m, 1, n)).
Tensor fortran_copy(const Tensor& x) {
  const int64_t n = x.size(-2), m = x.size(-1);
  Tensor rows = ops::empty_on(with(batch_shape(x), {m, n}), x.dtype(), x.device());
  copy_(rows, transpose(x, -2, -1));
  return transpose(view(rows, {batch_count(x), m, n}), 1, 2);
}
// ... or, for an input the kernel only reads, x's own storage when it is column-major already
// (as lu_factor_ex's LU is).
Tensor fortran_view(const Tensor& x) {
  const Tensor rows = transpose(x, -2, -1);
  if (!rows.is_contiguous()) return fortran_copy(x);
  return transpose(view(rows, {batch_count(x), x.size(-1), x.size(-2)}), 1, 2);
}
// f [B, n, m] column-major -> the [..., n, m] view of the same storage.
Tensor unfold_batch(const Tensor& f, const Shape& batch) {
  return transpose(view(transpose(f, 1, 2), with(batch, {f.size(2), f.size(1)})), -2, -1);
}
// A new [B, n, m] with column-major matrices, for a kernel to write.
Tensor fortran_empty(int64_t b, int64_t n, int64_t m, const Tensor& like) {
  return transpose(ops::empty_on({b, m, n}, like.dtype(), like.device()), 1, 2);
}
Tensor info_for(const Tensor& a) { return ops::empty_on({batch_count(a)}, kInt32, a.device()); }

// Back ends only see work (backend.h): an empty batch, or empty matrices, are answered here, once
// for every back end.
bool has_work(const Tensor& f) { return f.numel() > 0; }
// The factorization `kernel()` of f, or, when f is empty, every matrix of it "succeeds" (info 0).
// Returns whether the kernel ran.
template <class Kernel>
bool factorize(const Tensor& f, Tensor& info, const Kernel& kernel) {
  if (!has_work(f)) {
    fill_(info, 0);
    return false;
  }
  kernel();
  return true;
}
// t [..., r, c] <- the identity's first c columns (LAPACK's answer for the factors of empty matrices).
void fill_identity_(Tensor& t) {
  copy_(t, expand(eye(t.size(-2), t.size(-1), TensorOptions(t.dtype()).device(t.device())), t.sizes()));
}

// b [..., n, k] beside a square a [..., n, n]: same dtype, device and batch dims.
void check_rhs(const Tensor& a, const Tensor& b, const char* op) {
  EMBER_CHECK(b.defined(), op, ": the right-hand side B is undefined");
  EMBER_CHECK(b.dim() == a.dim() && b.size(-2) == a.size(-1) && batch_shape(b) == batch_shape(a), op,
              ": expected B of shape [..., ", a.size(-1), ", k] with A's batch dims, but A is ", shape_str(a.sizes()),
              " and B is ", shape_str(b.sizes()));
  EMBER_CHECK(b.dtype() == a.dtype(), op, ": expected A and B to have the same dtype, but got ", a.dtype(), " and ",
              b.dtype());
  ops::check_same_device({&a, &b}, op);
}

}  // namespace

void check_linalg_input(const Tensor& a, const char* op, bool square) {
  EMBER_CHECK(a.defined(), op, ": the input tensor is undefined");
  EMBER_CHECK(a.dim() >= 2, op, ": the input tensor A must have at least 2 dimensions, but got shape ",
              shape_str(a.sizes()));
  EMBER_CHECK(!square || a.size(-1) == a.size(-2), op, ": A must be batches of square matrices, but they are ",
              a.size(-2), " by ", a.size(-1), " matrices (shape ", shape_str(a.sizes()), ")");
  EMBER_CHECK(a.dtype() == kFloat32 || a.dtype() == kFloat64, op, ": expected a float32 or float64 tensor, but got ",
              a.dtype(), " (shape ", shape_str(a.sizes()), "); like PyTorch's, ember's factorizations take no 16-bit",
              " or integer dtypes");
}

std::tuple<Tensor, Tensor, Tensor> lu_factor_ex(const Tensor& a, const char* op) {
  check_linalg_input(a, op);
  const Tensor lu = fortran_copy(a);
  const Tensor pivots = ops::empty_on({lu.size(0), lu.size(1)}, kInt32, a.device());
  Tensor info = info_for(a);
  factorize(lu, info, [&] { backend(a.device()).lu_factor(lu, pivots, info); });
  const Shape batch = batch_shape(a);
  return {unfold_batch(lu, batch), view(pivots, with(batch, {a.size(-1)})), view(info, batch)};
}

Tensor lu_solve(const Tensor& lu, const Tensor& pivots, const Tensor& b, bool transpose_a, const char* op) {
  check_linalg_input(lu, op);
  check_rhs(lu, b, op);
  EMBER_CHECK(pivots.defined() && pivots.dtype() == kInt32 && pivots.sizes() == with(batch_shape(lu), {lu.size(-1)}),
              op, ": expected int32 pivots of shape ", shape_str(with(batch_shape(lu), {lu.size(-1)})), ", but got ",
              pivots.defined() ? shape_str(pivots.sizes()) : std::string("an undefined tensor"));
  ops::check_same_device({&lu, &pivots}, op);
  const Tensor x = fortran_copy(b);
  if (has_work(x)) backend(lu.device()).lu_solve(fortran_view(lu), contiguous(pivots), x, transpose_a);
  return unfold_batch(x, batch_shape(b));
}

std::tuple<Tensor, Tensor> cholesky_ex(const Tensor& a, const char* op) {
  check_linalg_input(a, op);
  const Tensor l = fortran_copy(a);
  Tensor info = info_for(a);
  factorize(l, info, [&] { backend(a.device()).cholesky(l, info); });
  return {tril(unfold_batch(l, batch_shape(a))), view(info, batch_shape(a))};
}

Tensor solve_triangular(const Tensor& a, const Tensor& b, bool upper, bool unitriangular, const char* op) {
  check_linalg_input(a, op);
  check_rhs(a, b, op);
  const Tensor x = fortran_copy(b);
  if (has_work(x)) backend(a.device()).triangular_solve(fortran_view(a), x, upper, unitriangular);
  return unfold_batch(x, batch_shape(b));
}

std::tuple<Tensor, Tensor, Tensor> eigh_ex(const Tensor& a, bool compute_v, const char* op) {
  check_linalg_input(a, op);
  const Tensor f = fortran_copy(a);  // (the eigenvectors when `compute_v`)
  Tensor info = info_for(a);
  const Tensor values = ops::empty_on({f.size(0), f.size(1)}, a.dtype(), a.device());
  factorize(f, info, [&] { backend(a.device()).eigh(f, values, info, compute_v); });
  const Shape batch = batch_shape(a);
  return {view(values, with(batch, {a.size(-1)})), compute_v ? unfold_batch(f, batch) : Tensor(), view(info, batch)};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> svd_ex(const Tensor& a, bool full_matrices, bool compute_uv,
                                                  const char* op) {
  check_linalg_input(a, op, /*square=*/false);
  const int64_t m = a.size(-2), n = a.size(-1), k = std::min(m, n);
  const Tensor f = fortran_copy(a);
  Tensor info = info_for(a);
  const int64_t b = f.size(0);
  const Tensor s = ops::empty_on({b, k}, a.dtype(), a.device());
  Tensor u, vh;
  if (compute_uv) {
    u = fortran_empty(b, m, full_matrices ? m : k, a);
    vh = fortran_empty(b, full_matrices ? n : k, n, a);
  }
  const bool ran = factorize(f, info, [&] { backend(a.device()).svd(f, full_matrices, u, s, vh, info); });
  if (!ran && compute_uv) {  // full U and Vh of an empty matrix are identities, as LAPACK's (and PyTorch's)
    fill_identity_(u);
    fill_identity_(vh);
  }
  const Shape batch = batch_shape(a);
  return {compute_uv ? unfold_batch(u, batch) : Tensor(), view(s, with(batch, {k})),
          compute_uv ? unfold_batch(vh, batch) : Tensor(), view(info, batch)};
}

std::tuple<Tensor, Tensor> qr(const Tensor& a, bool complete, bool compute_q, const char* op) {
  check_linalg_input(a, op, /*square=*/false);
  const int64_t m = a.size(-2), n = a.size(-1), k = std::min(m, n), cols = complete ? m : k;
  const Tensor f = fortran_copy(a);
  const Tensor tau = ops::empty_on({f.size(0), k}, a.dtype(), a.device());
  if (has_work(f)) backend(a.device()).qr_factor(f, tau);
  const Shape batch = batch_shape(a);
  const Tensor r = triu(narrow(unfold_batch(f, batch), -2, 0, cols));
  if (!compute_q) return {Tensor(), r};
  Tensor q = fortran_empty(f.size(0), m, cols, a);
  if (has_work(tau))
    backend(a.device()).householder_product(f, tau, q);
  else  // no reflectors: Q is the identity's first columns
    fill_identity_(q);
  return {unfold_batch(q, batch), r};
}

}  // namespace ember::native
