// Reductions, forward beside backward. A reduced gradient is put back on the input's
// shape by re-inserting the reduced dims (keepdim) and broadcasting.
#include <cmath>
#include <limits>

#include "ember/autograd/function_helpers.h"
#include "ember/tensor/ops/internal.h"

namespace ember {

namespace {
// d of a reduction over `dims` -> the input's shape (d keeps the reduced dims as size 1).
Tensor unreduce(const Tensor& d, const Shape& in_sizes, const std::vector<bool>& mask, bool keepdim) {
  const Tensor k = keepdim ? d : d.reshape(ops::reduced_shape(in_sizes, mask, true));
  return k.expand(in_sizes);
}
}  // namespace

Tensor autograd::sum(const Tensor& x, const Shape& dims, bool keepdim, std::optional<DType> dtype) {
  Tensor out = forward([&] { return native::sum(x, dims, keepdim, dtype); });
  if (needs_grad(x) && out.is_floating_point())
    record_fn(
        "SumBackward", {&x}, {&out},
        [lx = Like(x), mask = ops::reduction_mask(x, dims, "sum"), keepdim](std::vector<Tensor>& d) {
          return std::vector<Tensor>{unreduce(d[0], lx.sizes, mask, keepdim).to(lx.dtype).contiguous()};
        },
        kDifferentiable);
  return out;
}

Tensor autograd::mean(const Tensor& x, const Shape& dims, bool keepdim) {
  Tensor out = forward([&] { return native::mean(x, dims, keepdim); });
  if (needs_grad(x)) {
    const auto mask = ops::reduction_mask(x, dims, "mean");
    int64_t count = 1;
    for (int64_t i = 0; i < x.dim(); ++i)
      if (mask[i]) count *= x.size(i);
    record_fn(
        "MeanBackward", {&x}, {&out},
        [lx = Like(x), mask, keepdim, count](std::vector<Tensor>& d) {
          return std::vector<Tensor>{
              (unreduce(d[0], lx.sizes, mask, keepdim) / static_cast<double>(count)).to(lx.dtype)};
        },
        kDifferentiable);
  }
  return out;
}

// d prod / d x_i = product of the others, computed without dividing by a zero x_i.
Tensor autograd::prod(const Tensor& x, const Shape& dims, bool keepdim) {
  Tensor out = forward([&] { return native::prod(x, dims, keepdim); });
  if (needs_grad(x) && out.is_floating_point())
    record_fn("ProdBackward", {&x}, {&out},
              [lx = Like(x), sx = SavedTensor(x), dims, mask = ops::reduction_mask(x, dims, "prod"),
               keepdim](std::vector<Tensor>& d) {
                const Tensor v = sx.unpack("prod");
                const Tensor is_zero = v == 0.0;
                const Tensor nonzero = ember::where(is_zero, 1.0, v);
                const Tensor prod_nonzero = unreduce(native::prod(nonzero, dims, true), lx.sizes, mask, true);
                const Tensor zeros_in_row = unreduce(native::sum(is_zero, dims, true), lx.sizes, mask, true);
                // no zero in the row: prod / x; one zero: the others' product at the zero, 0 elsewhere.
                const Tensor others =
                    ember::where(zeros_in_row == 0, prod_nonzero / nonzero,
                                 ember::where(logical_and(is_zero, zeros_in_row == 1), prod_nonzero, 0.0));
                return std::vector<Tensor>{unreduce(d[0], lx.sizes, mask, keepdim) * others};
              });
  return out;
}

namespace {
// amax/amin: the gradient is shared evenly between tied extremes (PyTorch's rule).
Tensor extreme(const Tensor& x, const Shape& dims, bool keepdim, bool is_max) {
  Tensor out = forward([&] { return is_max ? native::amax(x, dims, keepdim) : native::amin(x, dims, keepdim); });
  if (needs_grad(x))
    record_fn(
        is_max ? "AmaxBackward" : "AminBackward", {&x}, {&out},
        [lx = Like(x), sx = SavedTensor(x), so = SavedTensor::output(out), dims, keepdim,
         mask = ops::reduction_mask(x, dims, "amax")](std::vector<Tensor>& d) {
          const Tensor v = sx.unpack("amax");
          const Tensor hit = (v == unreduce(so.unpack("amax"), lx.sizes, mask, keepdim)).to(v.dtype());
          const Tensor count = unreduce(native::sum(hit, dims, true), lx.sizes, mask, true);
          return std::vector<Tensor>{unreduce(d[0], lx.sizes, mask, keepdim) * hit / count};
        },
        kDifferentiable);
  return out;
}

// max/min along a dim: the gradient goes to the reported index only.
std::tuple<Tensor, Tensor> extreme_dim(const Tensor& x, int64_t dim, bool keepdim, bool is_max) {
  auto [values, indices] =
      forward([&] { return is_max ? native::max(x, dim, keepdim) : native::min(x, dim, keepdim); });
  if (needs_grad(x)) {
    const int64_t wd = wrap_dim(dim, x.dim(), is_max ? "max" : "min");
    record_fn(is_max ? "MaxBackward" : "MinBackward", {&x}, {&values, &indices},
              [lx = Like(x), idx = indices, wd, keepdim](std::vector<Tensor>& d) {
                if (lx.sizes.empty()) return std::vector<Tensor>{d[0].reshape({})};
                const Tensor dk = keepdim ? d[0] : d[0].unsqueeze(wd);
                const Tensor ik = keepdim ? idx : idx.unsqueeze(wd);
                Tensor g = lx.zeros();
                return std::vector<Tensor>{g.scatter_add_(wd, ik, dk)};
              });
  }
  return {values, indices};
}
}  // namespace

Tensor autograd::amax(const Tensor& x, const Shape& dims, bool keepdim) { return extreme(x, dims, keepdim, true); }
Tensor autograd::amin(const Tensor& x, const Shape& dims, bool keepdim) { return extreme(x, dims, keepdim, false); }
std::tuple<Tensor, Tensor> autograd::max(const Tensor& x, int64_t dim, bool keepdim) {
  return extreme_dim(x, dim, keepdim, true);
}
std::tuple<Tensor, Tensor> autograd::min(const Tensor& x, int64_t dim, bool keepdim) {
  return extreme_dim(x, dim, keepdim, false);
}

// cumsum: each input adds into its own and every later output, so its gradient is the sum of
// the output gradients from its position to the end: a cumsum from the end.
Tensor autograd::cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  Tensor out = forward([&] { return native::cumsum(x, dim, dtype); });
  if (needs_grad(x)) {
    const int64_t d = wrap_dim(dim, x.dim(), "cumsum");
    record_fn("CumsumBackward", {&x}, {&out}, [d, xd = x.dtype()](std::vector<Tensor>& g) {
      return std::vector<Tensor>{native::to(native::cumsum_reverse(g[0], d), xd)};
    });
  }
  return out;
}

// cumprod: out_j = Π_{i≤j} x_i. Before the line's first zero z, d out_j / d x_k = out_j / x_k
// (k ≤ j; out_j = 0 from z on), so the gradient is the reverse cumsum of g · out, divided by x.
// At z it is Σ_{j≥z} g_j Π_{i≤j, i≠z} x_i: the reverse cumsum of g times the cumprod of x with x_z
// set to 1. After z every output holds x_z = 0 as a factor: the gradient is 0. (PyTorch's
// formula.) Its value is exact, but not its derivative at a zero: the gradient after z is 0 for
// every x_z near 0 in the formula, x_z times a nonzero sum in truth. So a create_graph backward
// through cumprod is refused (Note [Double backward]) rather than wrong at zeros.
Tensor autograd::cumprod(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  Tensor out = forward([&] { return native::cumprod(x, dim, dtype); });
  if (needs_grad(x) && out.is_floating_point()) {
    const int64_t d = x.dim() == 0 ? 0 : wrap_dim(dim, x.dim(), "cumprod");
    record_fn("CumprodBackward", {&x}, {&out},
              [d, xd = x.dtype(), sx = SavedTensor(x), so = SavedTensor::output(out)](std::vector<Tensor>& g) {
                const Tensor v = sx.unpack("cumprod"), y = so.unpack("cumprod");
                if (v.dim() == 0) return std::vector<Tensor>{g[0].to(xd)};
                const auto reverse_cumsum = [d](const Tensor& t) { return t.flip({d}).cumsum(d).flip({d}); };
                const Tensor is_zero = v == 0.0;
                const Tensor zeros_so_far = is_zero.cumsum(d);
                const Tensor before = zeros_so_far == 0;
                const Tensor first_zero = logical_and(is_zero, zeros_so_far == 1);
                const Tensor a = ember::where(before, reverse_cumsum(g[0] * y) / ember::where(before, v, 1.0), 0.0);
                const Tensor b = ember::where(
                    first_zero, reverse_cumsum(g[0] * ember::where(first_zero, 1.0, v).cumprod(d, y.dtype())), 0.0);
                return std::vector<Tensor>{(a + b).to(xd)};
              });
  }
  return out;
}

namespace {
// sort and topk: each output value is one input element (indices says which), so the gradient
// goes back to it; the others get zero.
std::tuple<Tensor, Tensor> record_picks(const Tensor& x, int64_t dim, std::tuple<Tensor, Tensor> result,
                                        const char* name) {
  auto& [values, indices] = result;
  if (needs_grad(x)) {
    const int64_t d = wrap_dim(dim, x.dim(), name);
    record_fn(name, {&x}, {&values, &indices}, [lx = Like(x), idx = indices, d](std::vector<Tensor>& g) {
      if (lx.sizes.empty()) return std::vector<Tensor>{g[0].reshape({})};
      Tensor gx = lx.zeros();
      return std::vector<Tensor>{gx.scatter_add_(d, idx, g[0])};
    });
  }
  return result;
}
}  // namespace

std::tuple<Tensor, Tensor> autograd::sort(const Tensor& x, int64_t dim, bool descending) {
  return record_picks(x, dim, forward([&] { return native::sort(x, dim, descending); }), "SortBackward");
}

std::tuple<Tensor, Tensor> autograd::topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  return record_picks(x, dim, forward([&] { return native::topk(x, k, dim, largest, sorted); }), "TopkBackward");
}

// Composites: differentiable through the ops they are made of.
Tensor autograd::var(const Tensor& x, const Shape& dims, bool unbiased, bool keepdim) {
  if (!needs_grad(x)) return forward([&] { return native::var(x, dims, unbiased, keepdim); });
  const auto mask = ops::reduction_mask(x, dims, "var");
  EMBER_CHECK(x.is_floating_point(), "var: input dtype must be a floating point dtype, got ", x.dtype());
  int64_t count = 1;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (mask[i]) count *= x.size(i);
  const Tensor centered = x - ember::mean(x, dims, true);
  return ember::sum(centered * centered, dims, keepdim) / static_cast<double>(count - (unbiased ? 1 : 0));
}

Tensor autograd::std(const Tensor& x, const Shape& dims, bool unbiased, bool keepdim) {
  return ember::sqrt(ember::var(x, dims, unbiased, keepdim));
}

Tensor autograd::norm(const Tensor& x, double p, const Shape& dims, bool keepdim) {
  if (!needs_grad(x)) return forward([&] { return native::norm(x, p, dims, keepdim); });
  EMBER_CHECK(x.is_floating_point(), "norm: input dtype must be a floating point dtype, got ", x.dtype());
  if (std::isinf(p))
    return p > 0 ? ember::amax(ember::abs(x), dims, keepdim) : ember::amin(ember::abs(x), dims, keepdim);
  if (p == 2) return ember::sqrt(ember::sum(x * x, dims, keepdim));
  if (p == 1) return ember::sum(ember::abs(x), dims, keepdim);
  return ember::pow(ember::sum(ember::pow(ember::abs(x), p), dims, keepdim), 1.0 / p);
}

Tensor autograd::logsumexp(const Tensor& x, const Shape& dims, bool keepdim) {
  if (!needs_grad(x)) return forward([&] { return native::logsumexp(x, dims, keepdim); });
  const auto mask = ops::reduction_mask(x, dims, "logsumexp");
  // The shift m is a constant for differentiation: d/dx = softmax(x) over the dims.
  Tensor m = forward([&] { return native::amax(x, dims, true); });
  m = forward(
      [&] { return native::where(native::eq(native::abs(m), std::numeric_limits<double>::infinity()), 0.0, m); });
  Tensor out = ember::log(ember::sum(ember::exp(x - m), dims, true)) + m;
  return keepdim ? out : out.reshape(ops::reduced_shape(x.sizes(), mask, false));
}

}  // namespace ember
