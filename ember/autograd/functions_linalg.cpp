// Matrix products, forward beside backward: for C = A B, dA = dC B^T and dB = A^T dC.
#include "ember/autograd/function_helpers.h"

namespace ember {
namespace {
// The formulas' products: recorded in a create_graph backward (Note [Double backward]).
Tensor mm_of(const Tensor& a, const Tensor& b) { return building_graph() ? ember::mm(a, b) : native::mm(a, b); }
Tensor bmm_of(const Tensor& a, const Tensor& b) { return building_graph() ? ember::bmm(a, b) : native::bmm(a, b); }
}  // namespace

Tensor autograd::mm(const Tensor& a, const Tensor& b) {
  Tensor out = forward([&] { return native::mm(a, b); });
  if (needs_grad(a, b))
    record_fn(
        "MmBackward", {&a, &b}, {&out},
        [sa = b.requires_grad() ? SavedTensor(a) : SavedTensor(),
         sb = a.requires_grad() ? SavedTensor(b) : SavedTensor()](std::vector<Tensor>& d) {
          const Tensor x = sa.unpack("mm"), y = sb.unpack("mm");
          return std::vector<Tensor>{y.defined() ? mm_of(d[0], y.t()) : Tensor(),
                                     x.defined() ? mm_of(x.t(), d[0]) : Tensor()};
        },
        kDifferentiable);
  return out;
}

Tensor autograd::bmm(const Tensor& a, const Tensor& b) {
  Tensor out = forward([&] { return native::bmm(a, b); });
  if (needs_grad(a, b))
    record_fn(
        "BmmBackward", {&a, &b}, {&out},
        [sa = SavedTensor(a), sb = SavedTensor(b)](std::vector<Tensor>& d) {
          return std::vector<Tensor>{bmm_of(d[0], sb.unpack("bmm").transpose(1, 2)),
                                     bmm_of(sa.unpack("bmm").transpose(1, 2), d[0])};
        },
        kDifferentiable);
  return out;
}

Tensor autograd::addmm(const Tensor& bias, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha) {
  Tensor out = forward([&] { return native::addmm(bias, a, b, beta, alpha); });
  if (needs_grad({&bias, &a, &b}))
    record_fn(
        "AddmmBackward", {&bias, &a, &b}, {&out},
        [lc = Like(bias), sa = SavedTensor(a), sb = SavedTensor(b), beta, alpha](std::vector<Tensor>& d) {
          const double al = alpha.to_double();
          return std::vector<Tensor>{fit(d[0] * beta, lc.sizes, lc.dtype), mm_of(d[0], sb.unpack("addmm").t()) * al,
                                     mm_of(sa.unpack("addmm").t(), d[0]) * al};
        },
        kDifferentiable);
  return out;
}

// x [..., in] @ weight[out, in]^T + bias: one GEMM per gradient, the batch dims folded.
Tensor autograd::linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  Tensor out = forward([&] { return native::linear(x, weight, bias); });
  if (needs_grad({&x, &weight, &bias}))
    record_fn(
        "LinearBackward", {&x, &weight, &bias}, {&out},
        // x is needed only for the weight's gradient, the weight only for x's.
        [lx = Like(x), lw = Like(weight), sx = weight.requires_grad() ? SavedTensor(x) : SavedTensor(),
         sw = x.requires_grad() ? SavedTensor(weight) : SavedTensor(),
         has_bias = bias.defined()](std::vector<Tensor>& d) {
          const Tensor w = sw.unpack("linear"), xs = sx.unpack("linear");
          const Tensor d2 = d[0].reshape(fold_leading(d[0].sizes()));
          return std::vector<Tensor>{
              w.defined() ? mm_of(d2, w).reshape(lx.sizes) : Tensor(),
              xs.defined() ? mm_of(d2.t(), xs.reshape(fold_leading(xs.sizes()))) : Tensor(),
              has_bias ? (building_graph() ? ember::sum(d2, {0}) : native::sum(d2, {0})) : Tensor()};
        },
        kDifferentiable);
  return out;
}

// matmul: PyTorch's shape rules, composed from differentiable views, mm and bmm when the
// tape records (the native op is used directly otherwise).
Tensor autograd::matmul(const Tensor& a, const Tensor& b) {
  if (!needs_grad(a, b)) return forward([&] { return native::matmul(a, b); });
  EMBER_CHECK(a.dim() > 0 && b.dim() > 0, "matmul: both arguments need to be at least 1-D, but got shapes ",
              shape_str(a.sizes()), " and ", shape_str(b.sizes()));
  const int64_t da = a.dim(), db = b.dim(), ka = a.size(-1), kb = db == 1 ? b.size(0) : b.size(-2);
  EMBER_CHECK(ka == kb, "matmul: shapes ", shape_str(a.sizes()), " and ", shape_str(b.sizes()),
              " cannot be multiplied (", ka, " != ", kb, ")");
  if (da == 1 && db == 1) return ember::mm(a.unsqueeze(0), b.unsqueeze(1)).reshape({});
  if (da == 2 && db == 1) return ember::mm(a, b.unsqueeze(1)).squeeze(1);
  if (da == 1 && db == 2) return ember::mm(a.unsqueeze(0), b).squeeze(0);
  if (da == 2 && db == 2) return ember::mm(a, b);
  if (da >= 3 && db <= 2) {
    Shape out_shape(a.sizes().begin(), a.sizes().end() - 1);
    if (db == 2) out_shape.push_back(b.size(1));
    return ember::mm(a.reshape(fold_leading(a.sizes())), db == 1 ? b.unsqueeze(1) : b).reshape(out_shape);
  }
  const Tensor a3 = da == 1 ? a.unsqueeze(0) : a, b3 = db == 1 ? b.unsqueeze(1) : b;
  const Shape batch = broadcast_shapes(Shape(a3.sizes().begin(), a3.sizes().end() - 2),
                                       Shape(b3.sizes().begin(), b3.sizes().end() - 2), "matmul");
  const int64_t M = a3.size(-2), N = b3.size(-1);
  Shape sa = batch, sb = batch, out_shape = batch;
  sa.insert(sa.end(), {M, ka});
  sb.insert(sb.end(), {ka, N});
  out_shape.insert(out_shape.end(), {M, N});
  Tensor out = ember::bmm(a3.expand(sa).reshape(fold_leading(sa, 2)), b3.expand(sb).reshape(fold_leading(sb, 2)))
                   .reshape(out_shape);
  if (da == 1) out = out.squeeze(-2);
  if (db == 1) out = out.squeeze(-1);
  return out;
}

}  // namespace ember
