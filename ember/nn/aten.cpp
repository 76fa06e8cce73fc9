// LibTorch's ATen-level functions and nn::functional's LibTorch forms (aten.h): thin calls of
// nn::functional.
#include "ember/nn/aten.h"

namespace ember {

namespace F = nn::functional;

std::string reduction_name(int64_t reduction, const char* op) {
  switch (reduction) {
    case Reduction::None:
      return "none";
    case Reduction::Mean:
      return "mean";
    case Reduction::Sum:
      return "sum";
    default:
      throw Error(detail::concat(op, ": reduction must be Reduction::None, Mean or Sum (0, 1, 2), got ", reduction));
  }
}

Tensor nll_loss(const Tensor& self, const Tensor& target, const Tensor& weight, int64_t reduction,
                int64_t ignore_index) {
  return F::nll_loss(
      self, target,
      F::NLLLossOptions().weight(weight).ignore_index(ignore_index).reduction(reduction_name(reduction, "nll_loss")));
}

Tensor cross_entropy_loss(const Tensor& self, const Tensor& target, const Tensor& weight, int64_t reduction,
                          int64_t ignore_index, double label_smoothing) {
  return F::cross_entropy(self, target,
                          F::CrossEntropyOptions()
                              .weight(weight)
                              .ignore_index(ignore_index)
                              .label_smoothing(label_smoothing)
                              .reduction(reduction_name(reduction, "cross_entropy_loss")));
}

Tensor mse_loss(const Tensor& self, const Tensor& target, int64_t reduction) {
  return F::mse_loss(self, target, reduction_name(reduction, "mse_loss"));
}
Tensor l1_loss(const Tensor& self, const Tensor& target, int64_t reduction) {
  return F::l1_loss(self, target, reduction_name(reduction, "l1_loss"));
}
Tensor smooth_l1_loss(const Tensor& self, const Tensor& target, int64_t reduction, double beta) {
  return F::smooth_l1_loss(self, target, reduction_name(reduction, "smooth_l1_loss"), beta);
}
Tensor kl_div(const Tensor& self, const Tensor& target, int64_t reduction, bool log_target) {
  return F::kl_div(self, target, reduction_name(reduction, "kl_div"), log_target);
}
Tensor binary_cross_entropy(const Tensor& self, const Tensor& target, const Tensor& weight, int64_t reduction) {
  return binary_cross_entropy(self, target, weight, reduction_name(reduction, "binary_cross_entropy"));
}
Tensor binary_cross_entropy_with_logits(const Tensor& self, const Tensor& target, const Tensor& weight,
                                        const Tensor& pos_weight, int64_t reduction) {
  return F::binary_cross_entropy_with_logits(
      self, target,
      F::BCEWithLogitsOptions()
          .weight(weight)
          .pos_weight(pos_weight)
          .reduction(reduction_name(reduction, "binary_cross_entropy_with_logits")));
}

Tensor dropout(const Tensor& input, double p, bool train) { return F::dropout(input, p, train); }
Tensor feature_dropout(const Tensor& input, double p, bool train) { return F::dropout2d(input, p, train); }

Tensor layer_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps, bool) {
  return F::layer_norm(input, normalized_shape, weight, bias, eps);
}
Tensor group_norm(const Tensor& input, int64_t num_groups, const Tensor& weight, const Tensor& bias, double eps, bool) {
  return F::group_norm(input, num_groups, weight, bias, eps);
}
Tensor batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                  const Tensor& running_var, bool training, double momentum, double eps, bool) {
  return F::batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps);
}

namespace nn::functional {

// (Qualified: ember::dropout has the same parameters, and argument-dependent lookup finds it.)
Tensor dropout(const Tensor& x, const DropoutFuncOptions& o) { return functional::dropout(x, o.p_, o.training_); }
Tensor dropout2d(const Tensor& x, const DropoutFuncOptions& o) { return functional::dropout2d(x, o.p_, o.training_); }

Tensor softmax(const Tensor& x, const SoftmaxFuncOptions& o) {
  return ::ember::softmax(o.dtype_ ? x.to(*o.dtype_) : x, o.dim_);
}
Tensor log_softmax(const Tensor& x, const SoftmaxFuncOptions& o) {
  return ::ember::log_softmax(o.dtype_ ? x.to(*o.dtype_) : x, o.dim_);
}

Tensor max_pool2d(const Tensor& x, const Pool2dOptions& o) {
  return ::ember::max_pool2d(x, o.kernel_size_, o.stride_, o.padding_, o.dilation_, o.ceil_mode_);
}
Tensor avg_pool2d(const Tensor& x, const Pool2dOptions& o) {
  return ::ember::avg_pool2d(x, o.kernel_size_, o.stride_, o.padding_, o.ceil_mode_, o.count_include_pad_);
}

Tensor max_pool1d(const Tensor& x, const Pool1dOptions& o) {
  return ::ember::max_pool1d(x, o.kernel_size_, o.stride_, o.padding_, o.dilation_, o.ceil_mode_);
}
Tensor avg_pool1d(const Tensor& x, const Pool1dOptions& o) {
  return ::ember::avg_pool1d(x, o.kernel_size_, o.stride_, o.padding_, o.ceil_mode_, o.count_include_pad_);
}
Tensor leaky_relu(const Tensor& x, const LeakyReLUOptions& o) { return ::ember::leaky_relu(x, o.negative_slope_); }
Tensor elu(const Tensor& x, const ELUOptions& o) { return ::ember::elu(x, o.alpha_); }
Tensor softplus(const Tensor& x, const SoftplusOptions& o) { return ::ember::softplus(x, o.beta_, o.threshold_); }

}  // namespace nn::functional
}  // namespace ember
