// native_layer_norm, native_group_norm, native_batch_norm and their backward: checks, the rows,
// then the kernels.
//
// Note [Fused layer_norm]: layer_norm is one kernel that reads each row, keeps its mean and
// rstd = 1 / sqrt(biased variance + eps), and writes (x - mean) * rstd * weight + bias, as
// PyTorch's native_layer_norm does. Composed of ops it took six passes and as many temporaries,
// and its backward kept the centered input and both statistics per element; the fused backward
// needs only the input and two values per row. A 16-bit input is read as it is and summed in
// float32, then each output rounded once, so a bfloat16 model gets float32's statistics without
// a float32 copy of its activations (the composed form had to copy: see BENCHMARKS.md, "16-bit
// models' layer_norm"). Under autocast layer_norm is on the float32 list, as in PyTorch.
// group_norm is the same with a sample's group of C / G channels for a row and the affine per
// channel; its backward keeps each sample's and channel's two sums, so the weight's and bias's
// gradients are their sums over the samples, in order. batch_norm normalizes a channel over the
// samples and positions: each sample's plane of the channel is summed on its own and the planes
// are added in sample order, so the bits do not depend on the thread count; in eval it uses the
// running statistics. Its node keeps the input and two values per channel. batch_norm is on no
// autocast list (PyTorch's neither): a 16-bit input gives a 16-bit output, its sums float32.
#include <limits>

#include "ember/tensor/ops/internal.h"

namespace ember::native {
namespace {

constexpr const char* kOp = "layer_norm";
constexpr const char* kGroupOp = "group_norm";
constexpr const char* kBatchOp = "batch_norm";

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

// group_norm's and batch_norm's input as [N, C, HW] (the trailing dims flattened), of its
// computing dtype's rows.
struct Channels {
  Tensor x;  // [N, C, HW]
  int64_t N, C, HW;
  DType compute;
};

Channels channels_of(const Tensor& self, const char* op) {
  ops::check_defined(self, op);
  EMBER_CHECK(self.dim() >= 2, op, ": expects input [N, C, ...], got shape ", shape_str(self.sizes()));
  Channels g;
  g.N = self.size(0);
  g.C = self.size(1);
  g.HW = checked_numel(Shape(self.sizes().begin() + 2, self.sizes().end()), op);
  g.x = view(contiguous(self.is_floating_point() ? self : to(self, default_float_dtype())), {g.N, g.C, g.HW});
  g.compute = is_16_bit(g.x.dtype()) ? kFloat32 : g.x.dtype();
  return g;
}

Channels groups_of(const Tensor& self, int64_t num_groups) {
  const Channels g = channels_of(self, kGroupOp);
  EMBER_CHECK(num_groups > 0 && g.C % num_groups == 0, kGroupOp, ": ", g.C, " channels are not divisible into ",
              num_groups, " groups");
  return g;
}

// Checks a per-channel tensor (weight, bias, running statistics; undefined passes): C floating
// point values on self's device.
void check_channel_tensor(const Tensor& t, int64_t C, const Tensor& self, const char* what, const char* op) {
  if (!t.defined()) return;
  EMBER_CHECK(t.sizes() == Shape{C}, op, ": ", what, " must have shape [", C, "], got ", shape_str(t.sizes()));
  EMBER_CHECK(t.is_floating_point(), op, ": ", what, " must be floating point, got ", t.dtype());
  EMBER_CHECK(t.device() == self.device(), op, ": expected all tensors to be on the same device, but found ",
              self.device(), " (input) and ", t.device(), " (", what, ")");
}

// A per-channel tensor as the kernel reads it: C contiguous values of the computing dtype
// (undefined stays so).
Tensor channel_affine_of(const Tensor& t, int64_t C, DType compute, const Tensor& self, const char* what,
                         const char* op = kGroupOp) {
  check_channel_tensor(t, C, self, what, op);
  return t.defined() ? contiguous(to(t, compute)) : t;
}

}  // namespace

TensorTriple native_group_norm(const Tensor& self, const Tensor& weight, const Tensor& bias, int64_t num_groups,
                               double eps) {
  const Channels g = groups_of(self, num_groups);
  const Tensor w = channel_affine_of(weight, g.C, g.compute, self, "weight");
  const Tensor b = channel_affine_of(bias, g.C, g.compute, self, "bias");
  Tensor out = empty_like(g.x);
  const int64_t R = ops::size_mul(g.N, num_groups, kGroupOp);
  Tensor mean = ops::empty_on({R}, g.compute, self.device()), rstd = ops::empty_on({R}, g.compute, self.device());
  if (R > 0) backend(self.device()).group_norm(g.x, w, b, num_groups, eps, out, mean, rstd);
  return {view(out, self.sizes()), view(mean, {g.N, num_groups}), view(rstd, {g.N, num_groups})};
}

TensorTriple native_group_norm_backward(const Tensor& grad_out, const Tensor& self, const Tensor& mean,
                                        const Tensor& rstd, const Tensor& weight, int64_t num_groups,
                                        std::array<bool, 3> wanted) {
  const Channels g = groups_of(self, num_groups);
  ops::check_defined(grad_out, kGroupOp, "gradient");
  EMBER_CHECK(grad_out.sizes() == self.sizes(), kGroupOp, ": gradient of shape ", shape_str(grad_out.sizes()),
              " for input of shape ", shape_str(self.sizes()));
  const int64_t R = ops::size_mul(g.N, num_groups, kGroupOp);
  for (const Tensor* s : {&mean, &rstd}) {
    ops::check_defined(*s, kGroupOp, "saved statistics");
    EMBER_CHECK(s->numel() == R && s->dtype() == g.compute, kGroupOp, ": statistics of shape ", shape_str(s->sizes()),
                " and dtype ", s->dtype(), " for ", R, " groups of ", g.compute);
  }
  ops::check_same_device({&grad_out, &self, &mean, &rstd}, kGroupOp);
  const Tensor w = channel_affine_of(weight, g.C, g.compute, self, "weight");
  const Tensor dy = view(contiguous(to(grad_out, g.x.dtype())), {g.N, g.C, g.HW});
  const Device device = self.device();
  Tensor dx = wanted[0] ? empty_like(g.x) : Tensor();
  Tensor dw = wanted[1] ? ops::empty_on({g.C}, g.compute, device) : Tensor();
  Tensor db = wanted[2] ? ops::empty_on({g.C}, g.compute, device) : Tensor();
  if (R == 0 || g.HW == 0) {
    for (Tensor* t : {&dw, &db})
      if (t->defined()) fill_(*t, 0);
  } else if (wanted[0] || wanted[1] || wanted[2]) {
    backend(device).group_norm_backward(dy, g.x, view(contiguous(mean), {-1}), view(contiguous(rstd), {-1}), w,
                                        num_groups, dx, dw, db);
  }
  return {dx.defined() ? view(dx, self.sizes()) : dx, dw, db};
}

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

namespace {

// running = (1 - momentum) running + momentum value, in place in running's dtype, computed in the
// wider of running's and value's.
void move_toward(const Tensor& running, const Tensor& value, double momentum) {
  const DType acc = running.dtype() == kFloat64 ? kFloat64 : value.dtype();
  Tensor target = running;
  copy_(target, add(mul(to(running, acc), Scalar(1.0 - momentum)), to(value, acc), momentum));
}

}  // namespace

TensorTriple native_batch_norm(const Tensor& self, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                               const Tensor& running_var, bool training, double momentum, double eps) {
  const Channels g = channels_of(self, kBatchOp);
  const Tensor w = channel_affine_of(weight, g.C, g.compute, self, "weight", kBatchOp);
  const Tensor b = channel_affine_of(bias, g.C, g.compute, self, "bias", kBatchOp);
  EMBER_CHECK(running_mean.defined() == running_var.defined(), kBatchOp,
              ": running_mean and running_var must be given together");
  EMBER_CHECK(training || running_mean.defined(), kBatchOp, ": running_mean and running_var are needed in eval mode");
  check_channel_tensor(running_mean, g.C, self, "running_mean", kBatchOp);
  check_channel_tensor(running_var, g.C, self, "running_var", kBatchOp);
  const int64_t count = ops::size_mul(g.N, g.HW, kBatchOp);  // values per channel
  EMBER_CHECK(!training || count != 1, kBatchOp,
              ": expected more than 1 value per channel when training, got input of shape ", shape_str(self.sizes()));
  const Device device = self.device();
  Tensor mean, rstd;
  if (training) {
    mean = ops::empty_on({g.C}, g.compute, device);
    Tensor var = ops::empty_on({g.C}, g.compute, device);
    if (count > 0 && g.C > 0) {
      backend(device).batch_norm_statistics(g.x, mean, var);
      if (running_mean.defined()) {  // toward the unbiased variance, as PyTorch's
        move_toward(running_mean, mean, momentum);
        move_toward(running_var, mul(var, Scalar(static_cast<double>(count) / static_cast<double>(count - 1))),
                    momentum);
      }
    } else {  // an empty batch: no statistics, the running ones untouched (PyTorch's)
      fill_(mean, std::numeric_limits<double>::quiet_NaN());
      fill_(var, std::numeric_limits<double>::quiet_NaN());
    }
    rstd = rsqrt(add(var, Scalar(eps)));
  } else {
    // the running statistics as the kernel reads them; the mean not an alias (a later training
    // step moves the running mean in place)
    mean = clone(channel_affine_of(running_mean, g.C, g.compute, self, "running_mean", kBatchOp));
    rstd = rsqrt(add(channel_affine_of(running_var, g.C, g.compute, self, "running_var", kBatchOp), Scalar(eps)));
  }
  Tensor out = empty_like(g.x);
  if (out.numel() > 0) backend(device).batch_norm(g.x, mean, rstd, w, b, out);
  return {view(out, self.sizes()), mean, rstd};
}

TensorTriple native_batch_norm_backward(const Tensor& grad_out, const Tensor& self, const Tensor& mean,
                                        const Tensor& rstd, const Tensor& weight, bool training,
                                        std::array<bool, 3> wanted) {
  const Channels g = channels_of(self, kBatchOp);
  ops::check_defined(grad_out, kBatchOp, "gradient");
  EMBER_CHECK(grad_out.sizes() == self.sizes(), kBatchOp, ": gradient of shape ", shape_str(grad_out.sizes()),
              " for input of shape ", shape_str(self.sizes()));
  for (const Tensor* s : {&mean, &rstd}) {
    ops::check_defined(*s, kBatchOp, "saved statistics");
    EMBER_CHECK(s->numel() == g.C && s->dtype() == g.compute, kBatchOp, ": statistics of shape ", shape_str(s->sizes()),
                " and dtype ", s->dtype(), " for ", g.C, " channels of ", g.compute);
  }
  ops::check_same_device({&grad_out, &self, &mean, &rstd}, kBatchOp);
  const Tensor w = channel_affine_of(weight, g.C, g.compute, self, "weight", kBatchOp);
  const Tensor dy = view(contiguous(to(grad_out, g.x.dtype())), {g.N, g.C, g.HW});
  const Device device = self.device();
  Tensor dx = wanted[0] ? empty_like(g.x) : Tensor();
  Tensor dw = wanted[1] ? ops::empty_on({g.C}, g.compute, device) : Tensor();
  Tensor db = wanted[2] ? ops::empty_on({g.C}, g.compute, device) : Tensor();
  if (g.N == 0 || g.HW == 0) {
    for (Tensor* t : {&dw, &db})
      if (t->defined()) fill_(*t, 0);
  } else if (g.C > 0 && (wanted[0] || wanted[1] || wanted[2])) {
    backend(device).batch_norm_backward(dy, g.x, view(contiguous(mean), {-1}), view(contiguous(rstd), {-1}), w,
                                        training, dx, dw, db);
  }
  return {dx.defined() ? view(dx, self.sizes()) : dx, dw, db};
}

}  // namespace ember::native
