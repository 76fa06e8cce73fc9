// Folding an eval-mode BatchNorm into the layer before it (Note [Folding batch_norm] in
// nn/fusion.h).
#include "ember/nn/fusion.h"

#include "ember/autograd/grad_mode.h"

namespace ember::nn::utils {
namespace {

struct Folded {
  Tensor weight, bias;  // float64, on the layer's device
};

// W' = s W row by row and b' = (b - running_mean) s + bias, s = weight / sqrt(running_var + eps),
// for a layer of `channels` outputs whose weight is [channels, ...].
Folded fold(const char* op, const Module& layer, const Tensor& weight, const Tensor& bias, int64_t channels,
            const BatchNormImpl& bn) {
  EMBER_CHECK(!layer.is_training() && !bn.is_training(), op, ": ", layer.type_name(), " and ", bn.type_name(),
              " must be in eval mode (call eval()): training normalizes with the batch's statistics");
  EMBER_CHECK(bn.running_mean.defined() && bn.running_var.defined(), op, ": ", bn.type_name(),
              " keeps no running statistics (track_running_stats is false), so there is nothing to fold");
  EMBER_CHECK(bn.options.num_features_ == channels, op, ": ", bn.type_name(), " of ", bn.options.num_features_,
              " features after ", layer.type_name(), " of ", channels, " outputs");
  EMBER_CHECK(bn.running_mean.device() == weight.device(), op, ": ", layer.type_name(), " is on ", weight.device(),
              " and ", bn.type_name(), " on ", bn.running_mean.device());
  NoGradGuard no_grad;
  const Tensor rstd = (bn.running_var.to(kFloat64) + bn.options.eps_).rsqrt();
  const Tensor s = bn.weight.defined() ? bn.weight.to(kFloat64) * rstd : rstd;
  Shape per_row(static_cast<size_t>(weight.dim()), 1);
  per_row[0] = channels;
  Folded f;
  f.weight = weight.to(kFloat64) * s.reshape(per_row);
  f.bias = ((bias.defined() ? bias.to(kFloat64) : zeros({channels}, TensorOptions(kFloat64).device(weight.device()))) -
            bn.running_mean.to(kFloat64)) *
           s;
  if (bn.bias.defined()) f.bias = f.bias + bn.bias.to(kFloat64);
  return f;
}

// The new layer on the old one's device and of its dtype, holding the folded values.
template <class Layer>
std::shared_ptr<Layer> holding(std::shared_ptr<Layer> layer, const Tensor& like, const Folded& f) {
  layer->to(like.device(), like.dtype());
  NoGradGuard no_grad;
  layer->weight.copy_(f.weight);
  layer->bias.copy_(f.bias);
  layer->eval();
  return layer;
}

}  // namespace

std::shared_ptr<Conv2dImpl> fuse_conv_bn_eval(const Conv2dImpl& conv, const BatchNormImpl& bn) {
  EMBER_CHECK(bn.type_name() == "BatchNorm2d", "fuse_conv_bn_eval: a Conv2d folds a BatchNorm2d, got ", bn.type_name());
  const Folded f = fold("fuse_conv_bn_eval", conv, conv.weight, conv.bias, conv.options.out_channels_, bn);
  Conv2dOptions o = conv.options;
  o.bias_ = true;  // the folded shift
  return holding(std::make_shared<Conv2dImpl>(o), conv.weight, f);
}

std::shared_ptr<LinearImpl> fuse_linear_bn_eval(const LinearImpl& linear, const BatchNormImpl& bn) {
  EMBER_CHECK(bn.type_name() == "BatchNorm1d", "fuse_linear_bn_eval: a Linear folds a BatchNorm1d, got ",
              bn.type_name());
  const Folded f = fold("fuse_linear_bn_eval", linear, linear.weight, linear.bias, linear.options.out_features_, bn);
  return holding(std::make_shared<LinearImpl>(LinearOptions(linear.options.in_features_, linear.options.out_features_)),
                 linear.weight, f);
}

Sequential fuse_batch_norms(const Sequential& model) {
  EMBER_CHECK(!model->is_training(), "fuse_batch_norms: the model must be in eval mode (call eval())");
  const auto children = model->named_children();
  const std::vector<std::string> names = children.keys();
  Sequential out;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::shared_ptr<Module>& m = children[names[i]];
    auto* bn = i + 1 < names.size() ? children[names[i + 1]]->as<BatchNormImpl>() : nullptr;
    if (bn && m->as<Conv2dImpl>()) {
      out->push_back(names[i], std::shared_ptr<Module>(fuse_conv_bn_eval(*m->as<Conv2dImpl>(), *bn)));
    } else if (bn && m->as<LinearImpl>()) {
      out->push_back(names[i], std::shared_ptr<Module>(fuse_linear_bn_eval(*m->as<LinearImpl>(), *bn)));
    } else {
      out->push_back(names[i], m);
      continue;
    }
    ++i;  // the BatchNorm, folded
  }
  out->eval();
  return out;
}

}  // namespace ember::nn::utils
