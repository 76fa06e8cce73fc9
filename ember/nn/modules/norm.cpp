#include "ember/nn/modules/norm.h"

#include "ember/autograd/grad_mode.h"
#include "ember/nn/functional.h"

namespace ember::nn {

NormBaseImpl::NormBaseImpl(const char* type_name, int64_t num_features, double eps, bool affine,
                           bool track_running_stats)
    : Module(type_name) {
  EMBER_CHECK(num_features > 0, type_name, ": num_features must be > 0, got ", num_features);
  EMBER_CHECK(eps >= 0, type_name, ": eps must be >= 0, got ", eps);
  if (affine) {
    weight = register_parameter("weight", ones({num_features}));
    bind_attribute("weight", weight);  // Note [Tensor attributes]
    bias = register_parameter("bias", zeros({num_features}));
    bind_attribute("bias", bias);  // Note [Tensor attributes]
  }
  if (track_running_stats) {
    running_mean = register_buffer("running_mean", zeros({num_features}));
    running_var = register_buffer("running_var", ones({num_features}));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, kInt64));
  }
}

void NormBaseImpl::reset_running_stats() {
  if (!running_mean.defined()) return;
  NoGradGuard no_grad;
  running_mean.zero_();
  running_var.fill_(1);
  num_batches_tracked.zero_();
}

BatchNormImpl::BatchNormImpl(const char* type_name, int64_t dims_lo, int64_t dims_hi, const BatchNormOptions& o)
    : NormBaseImpl(type_name, o.num_features_, o.eps_, o.affine_, o.track_running_stats_),
      options(o),
      dims_lo_(dims_lo),
      dims_hi_(dims_hi) {
  EMBER_CHECK(!o.momentum_ || (*o.momentum_ >= 0 && *o.momentum_ <= 1), type_name, ": momentum must be in [0, 1], got ",
              *o.momentum_);
}

Tensor BatchNormImpl::forward(const Tensor& x) {
  EMBER_CHECK(
      x.dim() >= dims_lo_ && x.dim() <= dims_hi_, type_name(), ": expects ",
      dims_lo_ == dims_hi_ ? std::to_string(dims_lo_) : std::to_string(dims_lo_) + " or " + std::to_string(dims_hi_),
      "-D input, got shape ", shape_str(x.sizes()));
  EMBER_CHECK(x.size(1) == options.num_features_, type_name(), ": expects ", options.num_features_,
              " channels (dim 1), got shape ", shape_str(x.sizes()));
  // Batch statistics in training, and in eval when no running statistics are kept.
  const bool use_batch_stats = is_training() || !options.track_running_stats_;
  double momentum = options.momentum_.value_or(0.0);
  if (is_training() && options.track_running_stats_) {
    NoGradGuard no_grad;
    num_batches_tracked.add_(1);
    // momentum = None: a cumulative moving average, 1 / (number of batches seen).
    if (!options.momentum_) momentum = 1.0 / static_cast<double>(num_batches_tracked.item<int64_t>());
  }
  const bool update = is_training() && options.track_running_stats_;
  return functional::batch_norm(x, update || !use_batch_stats ? running_mean : Tensor(),
                                update || !use_batch_stats ? running_var : Tensor(), weight, bias, use_batch_stats,
                                momentum, options.eps_);
}

void BatchNormImpl::pretty_print(std::ostream& os) const {
  os << type_name() << "(" << options.num_features_ << ", eps=" << options.eps_ << ", momentum=";
  if (options.momentum_)
    os << *options.momentum_;
  else
    os << "None";
  os << ", affine=" << (options.affine_ ? "true" : "false")
     << ", track_running_stats=" << (options.track_running_stats_ ? "true" : "false") << ")";
}

InstanceNormImpl::InstanceNormImpl(const char* type_name, int64_t batched_dims, const InstanceNormOptions& o)
    : NormBaseImpl(type_name, o.num_features_, o.eps_, o.affine_, o.track_running_stats_),
      options(o),
      batched_dims_(batched_dims) {
  EMBER_CHECK(o.momentum_ >= 0 && o.momentum_ <= 1, type_name, ": momentum must be in [0, 1], got ", o.momentum_);
}

Tensor InstanceNormImpl::forward(const Tensor& x) {
  EMBER_CHECK(x.defined() && (x.dim() == batched_dims_ || x.dim() == batched_dims_ - 1), type_name(), ": expected a ",
              batched_dims_, "-D (batched) or ", batched_dims_ - 1, "-D (unbatched) input, got ",
              x.defined() ? shape_str(x.sizes()) : std::string("an undefined tensor"));
  const bool batched = x.dim() == batched_dims_;
  const Tensor input = batched ? x : x.unsqueeze(0);
  // Without parameters or statistics PyTorch only warns about a channel count other than
  // num_features; with them the shapes must agree.
  EMBER_CHECK(!(options.affine_ || options.track_running_stats_) || input.size(1) == options.num_features_, type_name(),
              ": expected ", options.num_features_, " channels, got input of shape ", shape_str(x.sizes()));
  const Tensor out =
      functional::instance_norm(input, running_mean, running_var, weight, bias,
                                is_training() || !options.track_running_stats_, options.momentum_, options.eps_);
  return batched ? out : out.squeeze(0);
}

void InstanceNormImpl::pretty_print(std::ostream& os) const {
  os << type_name() << "(" << options.num_features_ << ", eps=" << options.eps_ << ", momentum=" << options.momentum_
     << ", affine=" << (options.affine_ ? "true" : "false")
     << ", track_running_stats=" << (options.track_running_stats_ ? "true" : "false") << ")";
}

LayerNormImpl::LayerNormImpl(const LayerNormOptions& o) : Module("LayerNorm"), options(o) {
  EMBER_CHECK(!o.normalized_shape_.empty(), "LayerNorm: normalized_shape must not be empty");
  if (o.elementwise_affine_) {
    weight = register_parameter("weight", ones(o.normalized_shape_));
    bind_attribute("weight", weight);  // Note [Tensor attributes]
    bias = register_parameter("bias", zeros(o.normalized_shape_));
    bind_attribute("bias", bias);  // Note [Tensor attributes]
  }
}

Tensor LayerNormImpl::forward(const Tensor& x) {
  return functional::layer_norm(x, options.normalized_shape_, weight, bias, options.eps_);
}

void LayerNormImpl::pretty_print(std::ostream& os) const {
  os << "LayerNorm(" << shape_str(options.normalized_shape_) << ", eps=" << options.eps_
     << ", elementwise_affine=" << (options.elementwise_affine_ ? "true" : "false") << ")";
}

GroupNormImpl::GroupNormImpl(int64_t num_groups, int64_t num_channels, double eps, bool affine)
    : Module("GroupNorm"), num_groups(num_groups), num_channels(num_channels), eps(eps) {
  EMBER_CHECK(num_groups > 0 && num_channels % num_groups == 0, "GroupNorm: num_channels (", num_channels,
              ") must be divisible by num_groups (", num_groups, ")");
  if (affine) {
    weight = register_parameter("weight", ones({num_channels}));
    bind_attribute("weight", weight);  // Note [Tensor attributes]
    bias = register_parameter("bias", zeros({num_channels}));
    bind_attribute("bias", bias);  // Note [Tensor attributes]
  }
}

Tensor GroupNormImpl::forward(const Tensor& x) {
  EMBER_CHECK(x.dim() >= 2 && x.size(1) == num_channels, "GroupNorm: expects input [N, ", num_channels,
              ", ...], got shape ", shape_str(x.sizes()));
  return functional::group_norm(x, num_groups, weight, bias, eps);
}

void GroupNormImpl::pretty_print(std::ostream& os) const {
  os << "GroupNorm(" << num_groups << ", " << num_channels << ", eps=" << eps
     << ", affine=" << (weight.defined() ? "true" : "false") << ")";
}

}  // namespace ember::nn
