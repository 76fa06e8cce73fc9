// prune::shrink: structured sparsity turned into smaller dense layers (nn/prune.h).
//
// A dead output channel o of a producer (its weight row is zero) outputs its bias b_o everywhere.
// Through elementwise layers, an eval-mode BatchNorm and pooling that constant stays a constant
// c_o (computed by running those layers on it), so the consumer's input channel o adds the same
// c_o * (the sum of its weights on that channel) to every output: that goes into the consumer's
// bias, and channel o leaves both layers. A padded convolution breaks this (its borders see the
// padding's zeros instead of c_o), unless c_o is 0.
#include <cmath>
#include <ostream>

#include "ember/autograd/grad_mode.h"
#include "ember/nn/modules/activation.h"
#include "ember/nn/modules/conv_pool.h"
#include "ember/nn/modules/linear.h"
#include "ember/nn/modules/norm.h"
#include "ember/nn/prune.h"

namespace ember::nn::utils::prune {
namespace {

bool is_producer(Module& m) { return m.as<LinearImpl>() || m.as<Conv2dImpl>(); }

bool is_elementwise(Module& m) {
  return m.as<ReLUImpl>() || m.as<GELUImpl>() || m.as<SiLUImpl>() || m.as<TanhImpl>() || m.as<SigmoidImpl>() ||
         m.as<IdentityImpl>() || m.as<DropoutImpl>();
}

Tensor index_tensor(const std::vector<int64_t>& idx) { return tensor(idx, Shape{static_cast<int64_t>(idx.size())}); }

void copy_into(Tensor& dst, const Tensor& src) {
  NoGradGuard no_grad;
  dst.copy_(src);
}

// A producer with only the output channels `keep`.
std::shared_ptr<Module> keep_outputs(Module& m, const std::vector<int64_t>& keep) {
  const Tensor idx = index_tensor(keep);
  const int64_t n = static_cast<int64_t>(keep.size());
  if (auto* lin = m.as<LinearImpl>()) {
    auto out = std::make_shared<LinearImpl>(LinearOptions(lin->options.in_features_, n).bias(lin->bias.defined()));
    copy_into(out->weight, lin->weight.index_select(0, idx));
    if (lin->bias.defined()) copy_into(out->bias, lin->bias.index_select(0, idx));
    return out;
  }
  auto* conv = m.as<Conv2dImpl>();
  Conv2dOptions o = conv->options;
  o.out_channels_ = n;
  auto out = std::make_shared<Conv2dImpl>(o);
  copy_into(out->weight, conv->weight.index_select(0, idx));
  if (conv->bias.defined()) copy_into(out->bias, conv->bias.index_select(0, idx));
  return out;
}

// A consumer with only the input features `keep` and `extra_bias` added to its bias.
std::shared_ptr<Module> keep_inputs(Module& m, const std::vector<int64_t>& keep, const Tensor& extra_bias) {
  const Tensor idx = index_tensor(keep);
  const int64_t n = static_cast<int64_t>(keep.size());
  if (auto* lin = m.as<LinearImpl>()) {
    const bool bias = lin->bias.defined() || extra_bias.defined();
    auto out = std::make_shared<LinearImpl>(LinearOptions(n, lin->options.out_features_).bias(bias));
    copy_into(out->weight, lin->weight.index_select(1, idx));
    if (bias) {
      Tensor b = lin->bias.defined() ? lin->bias.detach().clone() : zeros({lin->options.out_features_});
      if (extra_bias.defined()) b = b + extra_bias;
      copy_into(out->bias, b);
    }
    return out;
  }
  auto* conv = m.as<Conv2dImpl>();
  Conv2dOptions o = conv->options;
  o.in_channels_ = n;
  o.bias_ = conv->bias.defined() || extra_bias.defined();
  auto out = std::make_shared<Conv2dImpl>(o);
  copy_into(out->weight, conv->weight.index_select(1, idx));
  if (o.bias_) {
    Tensor b = conv->bias.defined() ? conv->bias.detach().clone() : zeros({o.out_channels_});
    if (extra_bias.defined()) b = b + extra_bias;
    copy_into(out->bias, b);
  }
  return out;
}

std::shared_ptr<Module> keep_batch_norm_channels(BatchNormImpl& bn, const std::vector<int64_t>& keep) {
  const Tensor idx = index_tensor(keep);
  BatchNormOptions o = bn.options;
  o.num_features_ = static_cast<int64_t>(keep.size());
  std::shared_ptr<BatchNormImpl> out;
  if (bn.type_name() == "BatchNorm2d")
    out = std::make_shared<BatchNorm2dImpl>(o);
  else
    out = std::make_shared<BatchNorm1dImpl>(o);
  if (bn.weight.defined()) copy_into(out->weight, bn.weight.index_select(0, idx));
  if (bn.bias.defined()) copy_into(out->bias, bn.bias.index_select(0, idx));
  if (bn.running_mean.defined()) {
    copy_into(out->running_mean, bn.running_mean.index_select(0, idx));
    copy_into(out->running_var, bn.running_var.index_select(0, idx));
    copy_into(out->num_batches_tracked, bn.num_batches_tracked);
  }
  out->train(bn.is_training());
  return out;
}

int64_t parameter_count(Module& m) {
  int64_t n = 0;
  for (const Tensor& p : m.parameters()) n += p.numel();
  return n;
}

}  // namespace

ShrinkReport shrink(Module& sequential) {
  EMBER_CHECK(sequential.type_name() == "Sequential", "prune.shrink: expects a Sequential (a chain of layers), got ",
              sequential.type_name());
  NoGradGuard no_grad;
  ShrinkReport report;
  report.parameters_before = parameter_count(sequential);
  // Pruned tensors become plain parameters holding orig * mask.
  for (auto& m : sequential.modules())
    for (const std::string name : {"weight", "bias"})
      if (find_hook(*m, name)) remove(*m, name);

  const std::vector<std::string> names = sequential.named_children().keys();
  for (size_t i = 0; i < names.size(); ++i) {
    auto producer = sequential.find_module(names[i]);
    if (!is_producer(*producer)) continue;
    // The layers up to the next producer; stop at one shrink cannot see through.
    size_t j = i + 1;
    std::string blocker;
    bool flattened = false;
    for (; j < names.size(); ++j) {
      Module& m = *sequential.find_module(names[j]);
      if (is_producer(m)) break;
      if (is_elementwise(m) || m.as<MaxPool2dImpl>() || m.as<AdaptiveAvgPool2dImpl>() || m.as<BatchNormImpl>())
        continue;
      if (auto* pool = m.as<AvgPool2dImpl>()) {
        if (pool->options.padding_ == Int2{0, 0} || !pool->options.count_include_pad_) continue;
        blocker = "a padded AvgPool2d (count_include_pad) changes a constant channel at the borders";
        break;
      }
      if (auto* flat = m.as<FlattenImpl>()) {
        if (flat->start_dim() == 1 && (flat->end_dim() == -1 || flat->end_dim() == 3)) {
          flattened = true;
          continue;
        }
      }
      blocker = "cannot follow channels through " + m.type_name();
      break;
    }
    if (j >= names.size() && blocker.empty()) continue;  // the model's own outputs: they stay
    ShrinkReport::Pair pair;
    pair.producer = names[i];
    pair.consumer = j < names.size() ? names[j] : "";
    const Tensor weight = producer->attribute("weight");
    pair.channels = weight.size(0);
    auto done = [&](std::string why) {
      pair.skipped = std::move(why);
      report.pairs.push_back(pair);
    };
    if (!blocker.empty()) {
      done(blocker);
      continue;
    }
    auto consumer = sequential.find_module(names[j]);
    auto* pconv = producer->as<Conv2dImpl>();
    auto* cconv = consumer->as<Conv2dImpl>();
    if ((pconv && pconv->options.groups_ != 1) || (cconv && cconv->options.groups_ != 1)) {
      done("grouped convolutions are not shrunk");
      continue;
    }
    if (pconv && consumer->as<LinearImpl>() && !flattened) {
      done("a Conv2d's channels reach a Linear without a Flatten");
      continue;
    }
    // Dead channels: all-zero weight rows.
    const std::vector<float> row_abs = weight.detach().abs().flatten(1).sum({1}).to(kFloat32).to_vector<float>();
    std::vector<int64_t> keep, dead;
    for (int64_t o = 0; o < pair.channels; ++o) (row_abs[o] == 0 ? dead : keep).push_back(o);
    if (dead.empty()) {
      done("no dead channels");
      continue;
    }
    if (keep.empty()) {
      done("every channel is dead (the layer would vanish)");
      continue;
    }
    // The constant each channel carries to the consumer: its bias through the layers between.
    const Tensor bias = producer->attribute("bias");
    Tensor constant = bias.defined() ? bias.detach().to(kFloat32).clone() : zeros({pair.channels});
    for (size_t k = i + 1; k < j; ++k) {
      Module& m = *sequential.find_module(names[k]);
      if (auto* bn = m.as<BatchNormImpl>()) {
        const Tensor mean = bn->running_mean.defined() ? bn->running_mean : zeros({pair.channels});
        const Tensor var = bn->running_var.defined() ? bn->running_var : ones({pair.channels});
        constant = (constant - mean) / (var + bn->options.eps_).sqrt();
        if (bn->weight.defined()) constant = constant * bn->weight.detach() + bn->bias.detach();
      } else if (is_elementwise(m) && !m.as<DropoutImpl>()) {
        constant = m(constant.view({1, pair.channels})).view({pair.channels});
      }
    }
    const std::vector<float> constants = constant.to_vector<float>();
    bool nonzero = false;
    for (int64_t o : dead) nonzero = nonzero || constants[o] != 0;
    // The consumer's input features of each channel: one (Linear), or a block of `spatial`
    // after a Flatten, or one channel of a Conv2d.
    const Tensor cw = consumer->attribute("weight").detach();
    int64_t spatial = 1;
    if (consumer->as<LinearImpl>() && flattened) {
      if (cw.size(1) % pair.channels != 0) {
        done("the Linear's inputs are not a whole number of features per channel");
        continue;
      }
      spatial = cw.size(1) / pair.channels;
    }
    if (cconv && nonzero && cconv->options.padding_ != Int2{0, 0}) {
      done("the next Conv2d pads with zeros where the dead channels carry a nonzero constant");
      continue;
    }
    Tensor extra_bias;
    if (nonzero) {
      // Σ over the dead channels of constant * the consumer's weights on that channel.
      const Tensor per_channel = cw.flatten(1).view({cw.size(0), pair.channels, -1}).sum({2});  // [out, channels]
      std::vector<float> dead_constants(static_cast<size_t>(pair.channels), 0.0f);
      for (int64_t o : dead) dead_constants[o] = constants[o];
      extra_bias = per_channel.matmul(tensor(dead_constants, Shape{pair.channels}));
    }
    std::vector<int64_t> keep_features;
    for (int64_t o : keep)
      for (int64_t s = 0; s < spatial; ++s) keep_features.push_back(o * spatial + s);
    sequential.replace_module(names[i], keep_outputs(*producer, keep));
    for (size_t k = i + 1; k < j; ++k)
      if (auto* bn = sequential.find_module(names[k])->as<BatchNormImpl>())
        sequential.replace_module(names[k], keep_batch_norm_channels(*bn, keep));
    sequential.replace_module(names[j], keep_inputs(*consumer, keep_features, extra_bias));
    pair.removed = static_cast<int64_t>(dead.size());
    report.pairs.push_back(pair);
  }
  report.parameters_after = parameter_count(sequential);
  return report;
}

std::ostream& operator<<(std::ostream& os, const ShrinkReport& r) {
  os << "shrink: " << r.parameters_before << " -> " << r.parameters_after << " parameters\n";
  for (const auto& p : r.pairs) {
    os << "  (" << p.producer << ")";
    if (!p.consumer.empty()) os << " -> (" << p.consumer << ")";
    if (p.skipped.empty())
      os << ": " << p.removed << " of " << p.channels << " channels removed\n";
    else
      os << ": kept (" << p.skipped << ")\n";
  }
  return os;
}

}  // namespace ember::nn::utils::prune
