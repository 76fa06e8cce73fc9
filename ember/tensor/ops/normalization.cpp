// native_layer_norm and its backward: checks, the [R, D] rows, one kernel call.
//
// Note [Fused layer_norm]: layer_norm is one kernel that reads each row, keeps its mean and
// rstd = 1 / sqrt(biased variance + eps), and writes (x - mean) * rstd * weight + bias, as
// PyTorch's native_layer_norm does. Composed of ops it took six passes and as many temporaries,
// and its backward kept the centered input and both statistics per element; the fused backward
// needs only the input and two values per row. A 16-bit input is read as it is and summed in
// float32, then each output rounded once, so a bfloat16 model gets float32's statistics without
// a float32 copy of its activations (the composed form had to copy: see BENCHMARKS.md, "16-bit
// models' layer_norm"). Under autocast layer_norm is on the float32 list, as in PyTorch.
#include "ember/tensor/ops/internal.h"

namespace ember::native {
namespace {

constexpr const char* kOp = "layer_norm";

bool is_16_bit(DType d) { return d == kFloat16 || d == kBFloat16; }

// The rows to normalize: x's dtype if floating (float32 for integers and bool, as softmax's),
// contiguous, as [R, D] with D the product of the trailing `normalized_shape`.
struct Rows {
  Tensor x;  // [R, D]
  int64_t R, D;
  DType compute;      // the kernel's M: float32 for 16-bit rows, else their dtype
  Shape stats_sizes;  // the mean's and rstd's: x's leading sizes, then a 1 per normalized dim
};

Rows rows_of(const Tensor& self, const Shape& normalized_shape) {
  ops::check_defined(self, kOp);
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  EMBER_CHECK(k > 0 && k <= self.dim() && Shape(self.sizes().end() - k, self.sizes().end()) == normalized_shape, kOp,
              ": normalized_shape ", shape_str(normalized_shape), " must match the trailing dims of input ",
              shape_str(self.sizes()));
  Rows r;
  r.x = contiguous(self.is_floating_point() ? self : to(self, default_float_dtype()));
  r.compute = is_16_bit(r.x.dtype()) ? kFloat32 : r.x.dtype();
  r.D = checked_numel(normalized_shape, kOp);
  r.stats_sizes = Shape(self.sizes().begin(), self.sizes().end() - k);
  r.R = checked_numel(r.stats_sizes, kOp);
  r.stats_sizes.resize(static_cast<size_t>(self.dim()), 1);
  r.x = view(r.x, {r.R, r.D});
  return r;
}

// weight or bias as the kernel reads it: D values of the computing dtype (undefined stays so).
Tensor affine_of(const Tensor& t, const Shape& normalized_shape, DType compute, const Tensor& self, const char* what) {
  if (!t.defined()) return t;
  EMBER_CHECK(t.sizes() == normalized_shape, kOp, ": ", what, " of shape ", shape_str(t.sizes()),
              " must have normalized_shape ", shape_str(normalized_shape));
  EMBER_CHECK(t.is_floating_point(), kOp, ": ", what, " must be floating point, got ", t.dtype());
  EMBER_CHECK(t.device() == self.device(), kOp, ": expected all tensors to be on the same device, but found ",
              self.device(), " (input) and ", t.device(), " (", what, ")");
  return view(contiguous(to(t, compute)), {-1});
}

}  // namespace

TensorTriple native_layer_norm(const Tensor& self, const Shape& normalized_shape, const Tensor& weight,
                               const Tensor& bias, double eps) {
  const Rows r = rows_of(self, normalized_shape);
  const Tensor w = affine_of(weight, normalized_shape, r.compute, self, "weight");
  const Tensor b = affine_of(bias, normalized_shape, r.compute, self, "bias");
  Tensor out = empty_like(r.x);
  Tensor mean = ops::empty_on({r.R}, r.compute, self.device()), rstd = ops::empty_on({r.R}, r.compute, self.device());
  if (r.R > 0) backend(self.device()).layer_norm(r.x, w, b, eps, out, mean, rstd);
  return {view(out, self.sizes()), view(mean, r.stats_sizes), view(rstd, r.stats_sizes)};
}

TensorTriple native_layer_norm_backward(const Tensor& grad_out, const Tensor& self, const Shape& normalized_shape,
                                        const Tensor& mean, const Tensor& rstd, const Tensor& weight,
                                        std::array<bool, 3> wanted) {
  const Rows r = rows_of(self, normalized_shape);
  ops::check_defined(grad_out, kOp, "gradient");
  EMBER_CHECK(grad_out.sizes() == self.sizes(), kOp, ": gradient of shape ", shape_str(grad_out.sizes()),
              " for input of shape ", shape_str(self.sizes()));
  for (const Tensor* s : {&mean, &rstd}) {
    ops::check_defined(*s, kOp, "saved statistics");
    EMBER_CHECK(s->numel() == r.R && s->dtype() == r.compute, kOp, ": statistics of shape ", shape_str(s->sizes()),
                " and dtype ", s->dtype(), " for ", r.R, " rows of ", r.compute);
  }
  ops::check_same_device({&grad_out, &self, &mean, &rstd}, kOp);
  const Tensor w = affine_of(weight, normalized_shape, r.compute, self, "weight");
  const Tensor dy = view(contiguous(to(grad_out, r.x.dtype())), {r.R, r.D});
  const Device device = self.device();
  Tensor dx = wanted[0] ? empty_like(r.x) : Tensor();
  Tensor dw = wanted[1] ? ops::empty_on({r.D}, r.compute, device) : Tensor();
  Tensor db = wanted[2] ? ops::empty_on({r.D}, r.compute, device) : Tensor();
  if (r.R == 0 || r.D == 0) {
    for (Tensor* t : {&dw, &db})
      if (t->defined()) fill_(*t, 0);
  } else if (wanted[0] || wanted[1] || wanted[2]) {
    backend(device).layer_norm_backward(dy, r.x, view(contiguous(mean), {-1}), view(contiguous(rstd), {-1}), w, dx, dw,
                                        db);
  }
  return {dx.defined() ? view(dx, self.sizes()) : dx, dw.defined() ? view(dw, normalized_shape) : dw,
          db.defined() ? view(db, normalized_shape) : db};
}

}  // namespace ember::native
