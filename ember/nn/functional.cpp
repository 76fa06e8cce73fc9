#include "ember/nn/functional.h"

#include <cmath>
#include <limits>

#include "ember/autograd/autocast.h"
#include "ember/autograd/grad_mode.h"

namespace ember::nn::functional {
namespace {

Tensor reduce(const Tensor& loss, const std::string& reduction, const char* op) {
  if (reduction == "none") return loss;
  if (reduction == "sum") return loss.sum();
  EMBER_CHECK(reduction == "mean", op, ": reduction must be 'mean', 'sum' or 'none', got '", reduction, "'");
  return loss.mean();
}

// [N, C, d1, ...] -> [N * d1 * ..., C] with the class dim last.
Tensor classes_last(const Tensor& x) {
  if (x.dim() == 2) return x;
  const Tensor last = x.movedim(1, -1);
  return last.reshape(fold_leading(last.sizes()));
}

// The shared core of cross_entropy and nll_loss on log-probabilities [M, C] and targets [M].
Tensor nll_core(const Tensor& logp, const Tensor& target_in, const Shape& target_shape, const CrossEntropyOptions& o,
                const char* op) {
  const int64_t C = logp.size(1);
  EMBER_CHECK(target_in.dtype() == kInt64 || target_in.dtype() == kInt32, op,
              ": expected class indices of dtype int64, got ", target_in.dtype());
  const Tensor target = target_in.to(kInt64).reshape({-1});
  EMBER_CHECK(target.size(0) == logp.size(0), op, ": input has ", logp.size(0), " rows of classes but target has ",
              target.size(0), " entries");
  if (o.weight_.defined())
    EMBER_CHECK(o.weight_.dim() == 1 && o.weight_.size(0) == C, op, ": weight must have shape [", C, "], got ",
                shape_str(o.weight_.sizes()));
  const Tensor valid = target.ne(o.ignore_index_);
  const Tensor safe = where(valid, target, Scalar(int64_t{0}));
  if (safe.numel() > 0) {
    // Both bounds in one copy to the host: on a GPU each copy waits for the queued work.
    const std::vector<int64_t> bounds = stack({safe.amin(), safe.amax()}).cpu().to_vector<int64_t>();
    const int64_t lo = bounds[0], hi = bounds[1];
    EMBER_CHECK(lo >= 0 && hi < C, op, ": target ", lo < 0 ? lo : hi, " is out of bounds for ", C, " classes");
  }
  const Tensor validf = valid.to(logp.dtype());
  const Tensor w =
      (o.weight_.defined() ? o.weight_.to(logp.dtype()).index_select(0, safe) : ones_like(validf)) * validf;
  Tensor loss = -logp.gather(1, safe.unsqueeze(1)).squeeze(1) * w;
  if (o.label_smoothing_ > 0) {
    const double eps = o.label_smoothing_;
    const Tensor smooth = o.weight_.defined() ? -(logp * o.weight_.to(logp.dtype())).sum({1}) : -logp.sum({1});
    loss = loss * (1.0 - eps) + smooth * validf * (eps / static_cast<double>(C));
  }
  if (o.reduction_ == "none") return loss.reshape(target_shape);
  if (o.reduction_ == "sum") return loss.sum();
  EMBER_CHECK(o.reduction_ == "mean", op, ": reduction must be 'mean', 'sum' or 'none', got '", o.reduction_, "'");
  return loss.sum() / w.sum();  // weighted mean over the targets that count
}

void check_class_input(const Tensor& input, const char* op) {
  EMBER_CHECK(input.defined() && input.dim() >= 2, op, ": expected input of shape [N, C] or [N, C, d1, ...], got ",
              input.defined() ? shape_str(input.sizes()) : std::string("an undefined tensor"));
  EMBER_CHECK(input.is_floating_point(), op, ": expected a floating point input, got ", input.dtype());
}

}  // namespace

Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyOptions& o) {
  check_class_input(input, "cross_entropy");
  EMBER_CHECK(o.label_smoothing_ >= 0 && o.label_smoothing_ <= 1,
              "cross_entropy: label_smoothing must be in [0, 1], got ", o.label_smoothing_);
  const Tensor logp = classes_last(input).log_softmax(1);
  if (target.is_floating_point()) {  // class probabilities
    EMBER_CHECK(target.sizes() == input.sizes(), "cross_entropy: probability targets must have the input's shape ",
                shape_str(input.sizes()), ", got ", shape_str(target.sizes()));
    const int64_t C = input.size(1);
    Tensor t = classes_last(target.to(logp.dtype()));
    if (o.label_smoothing_ > 0) t = t * (1.0 - o.label_smoothing_) + o.label_smoothing_ / static_cast<double>(C);
    Tensor per_class = logp * t;
    if (o.weight_.defined()) per_class = per_class * o.weight_.to(logp.dtype());
    Tensor loss = -per_class.sum({1});
    Shape shape = input.sizes();
    shape.erase(shape.begin() + 1);
    return reduce(loss.reshape(shape), o.reduction_, "cross_entropy");
  }
  Shape target_shape = input.sizes();
  target_shape.erase(target_shape.begin() + 1);
  EMBER_CHECK(target.sizes() == target_shape, "cross_entropy: expected target of shape ", shape_str(target_shape),
              " for input of shape ", shape_str(input.sizes()), ", got ", shape_str(target.sizes()));
  return nll_core(logp, target, target_shape, o, "cross_entropy");
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossOptions& o) {
  check_class_input(input, "nll_loss");
  EMBER_CHECK(o.label_smoothing_ == 0, "nll_loss: label_smoothing is a cross_entropy option");
  Shape target_shape = input.sizes();
  target_shape.erase(target_shape.begin() + 1);
  EMBER_CHECK(target.sizes() == target_shape, "nll_loss: expected target of shape ", shape_str(target_shape),
              " for input of shape ", shape_str(input.sizes()), ", got ", shape_str(target.sizes()));
  return nll_core(classes_last(input), target, target_shape, o, "nll_loss");
}

Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  EMBER_CHECK(input.sizes() == target.sizes(), "mse_loss: input of shape ", shape_str(input.sizes()),
              " and target of shape ", shape_str(target.sizes()), " differ");
  const Tensor diff = input - target;
  return reduce(diff * diff, reduction, "mse_loss");
}

Tensor binary_cross_entropy_with_logits(const Tensor& x, const Tensor& y, const BCEWithLogitsOptions& o) {
  EMBER_CHECK(x.sizes() == y.sizes(), "binary_cross_entropy_with_logits: input of shape ", shape_str(x.sizes()),
              " and target of shape ", shape_str(y.sizes()), " differ");
  const Tensor softplus_neg = log1p(exp(-x.abs())) + (-x).relu();  // log(1 + exp(-x)), stably
  Tensor loss = o.pos_weight_.defined() ? (1.0 - y) * x + ((o.pos_weight_ - 1.0) * y + 1.0) * softplus_neg
                                        : (1.0 - y) * x + softplus_neg;
  if (o.weight_.defined()) loss = loss * o.weight_;
  return reduce(loss, o.reduction_, "binary_cross_entropy_with_logits");
}

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const BCELossOptions& o) {
  return ::ember::binary_cross_entropy(input, target, o.weight_, o.reduction_);
}

Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  EMBER_CHECK(input.sizes() == target.sizes(), "l1_loss: input of shape ", shape_str(input.sizes()),
              " and target of shape ", shape_str(target.sizes()), " differ");
  return reduce((input - target).abs(), reduction, "l1_loss");
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction, double beta) {
  EMBER_CHECK(input.sizes() == target.sizes(), "smooth_l1_loss: input of shape ", shape_str(input.sizes()),
              " and target of shape ", shape_str(target.sizes()), " differ");
  EMBER_CHECK(beta >= 0, "smooth_l1_loss: beta must be >= 0, got ", beta);
  const Tensor d = (input - target).abs();
  if (beta == 0) return reduce(d, reduction, "smooth_l1_loss");
  const Tensor quadratic = d * d * (0.5 / beta);
  return reduce(where(d < beta, quadratic, d - 0.5 * beta), reduction, "smooth_l1_loss");
}

Tensor normalize(const Tensor& x, const NormalizeFuncOptions& o) {
  EMBER_CHECK(x.defined(), "normalize: the tensor is undefined");
  EMBER_CHECK(x.is_floating_point(), "normalize: expected a floating tensor, got ", x.dtype());
  const Tensor norm = x.norm(o.p_, Shape{o.dim_}, /*keepdim=*/true).clamp_min(o.eps_);
  return x / norm;
}

Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, const CosineSimilarityFuncOptions& o) {
  EMBER_CHECK(x1.defined() && x2.defined(), "cosine_similarity: a tensor is undefined");
  const Tensor dot = (x1 * x2).sum(Shape{o.dim_});
  const Tensor squares = (x1 * x1).sum(Shape{o.dim_}) * (x2 * x2).sum(Shape{o.dim_});
  return dot / squares.clamp_min(o.eps_ * o.eps_).sqrt();
}

Tensor huber_loss(const Tensor& input, const Tensor& target, const std::string& reduction, double delta) {
  EMBER_CHECK(input.sizes() == target.sizes(), "huber_loss: input of shape ", shape_str(input.sizes()),
              " and target of shape ", shape_str(target.sizes()), " differ");
  EMBER_CHECK(delta > 0, "huber_loss: delta must be > 0, got ", delta);
  const Tensor d = (input - target).abs();
  return reduce(where(d < delta, d * d * 0.5, (d - 0.5 * delta) * delta), reduction, "huber_loss");
}

Tensor kl_div(const Tensor& input, const Tensor& target, const std::string& reduction, bool log_target) {
  EMBER_CHECK(input.sizes() == target.sizes(), "kl_div: input of shape ", shape_str(input.sizes()),
              " and target of shape ", shape_str(target.sizes()), " differ");
  // target · (log target - input), with 0 · log 0 = 0 as PyTorch's xlogy.
  const Tensor loss =
      log_target ? target.exp() * (target - input) : target * where(target > 0, target, 1.0).log() - target * input;
  if (reduction == "batchmean") {
    EMBER_CHECK(input.dim() > 0, "kl_div: 'batchmean' needs a batch dimension, input is 0-d");
    return loss.sum() / static_cast<double>(input.size(0));
  }
  return reduce(loss, reduction, "kl_div");
}

// One fused kernel each (Note [Fused layer_norm] in tensor/ops/normalization.cpp).
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias, double eps) {
  return std::get<0>(::ember::native_group_norm(x, weight, bias, num_groups, eps));
}

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  return std::get<0>(::ember::native_layer_norm(x, normalized_shape, weight, bias, eps));
}

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  return std::get<0>(::ember::native_batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps));
}

Tensor instance_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                     const Tensor& bias, bool use_input_stats, double momentum, double eps) {
  EMBER_CHECK(x.defined() && x.dim() >= 3,
              "instance_norm: expected an input [N, C, ...] with at least one spatial dim, got ",
              x.defined() ? shape_str(x.sizes()) : std::string("an undefined tensor"));
  EMBER_CHECK(running_mean.defined() == running_var.defined(),
              "instance_norm: running_mean and running_var are given together or not at all");
  EMBER_CHECK(use_input_stats || running_mean.defined(),
              "instance_norm: expected running_mean and running_var when use_input_stats is false");
  const int64_t n = x.size(0), c = x.size(1);
  // One "channel" per (sample, channel): each [C] tensor repeated N times.
  auto per_sample = [&](const Tensor& t, const char* what) -> Tensor {
    if (!t.defined()) return t;
    EMBER_CHECK(t.dim() == 1 && t.size(0) == c, "instance_norm: ", what, " must be [", c, "] for an input of shape ",
                shape_str(x.sizes()), ", got ", shape_str(t.sizes()));
    return t.unsqueeze(0).expand({n, c}).reshape({n * c});
  };
  Tensor mean_n = per_sample(running_mean, "running_mean"), var_n = per_sample(running_var, "running_var");
  Shape merged = x.sizes();
  merged.erase(merged.begin());
  merged[0] = n * c;
  merged.insert(merged.begin(), 1);
  const Tensor out = batch_norm(x.reshape(merged), mean_n, var_n, per_sample(weight, "weight"),
                                per_sample(bias, "bias"), use_input_stats, momentum, eps);
  if (running_mean.defined() && use_input_stats) {  // the batch's mean of the per-sample updates
    NoGradGuard no_grad;
    Tensor mean = running_mean, var = running_var;  // handles: the caller's buffers are written
    mean.copy_(mean_n.view({n, c}).mean({0}));
    var.copy_(var_n.view({n, c}).mean({0}));
  }
  return out.view(x.sizes());
}

Tensor prelu(const Tensor& x, const Tensor& weight) {
  EMBER_CHECK(x.defined() && weight.defined(), "prelu: the input or the weight is undefined");
  EMBER_CHECK(weight.dim() <= 1, "prelu: the weight must be 0-D or 1-D, got shape ", shape_str(weight.sizes()));
  const int64_t count = weight.numel();
  Tensor w = weight.reshape({count});
  if (count != 1) {  // one slope per channel of dim 1
    EMBER_CHECK(x.dim() >= 2 && x.size(1) == count, "prelu: ", count, " weights need an input with ", count,
                " channels in dim 1, got shape ", shape_str(x.sizes()));
    Shape at(static_cast<size_t>(x.dim()), 1);
    at[1] = count;
    w = w.view(at);
  }
  return where(x > 0.0, x, w * x);
}

Tensor dropout(const Tensor& x, double p, bool training) {
  EMBER_CHECK(p >= 0 && p <= 1, "dropout: probability has to be between 0 and 1, but got ", p);
  if (!training || p == 0) return x;
  if (p == 1) return x * 0.0;
  const Tensor mask = dropout_mask(x.sizes(), p, TensorOptions().dtype(x.dtype()).device(x.device()));
  return x * mask;  // mul saves the mask for backward
}

Tensor dropout2d(const Tensor& x, double p, bool training) {
  EMBER_CHECK(p >= 0 && p <= 1, "dropout2d: probability has to be between 0 and 1, but got ", p);
  EMBER_CHECK(x.defined() && (x.dim() == 3 || x.dim() == 4),
              "dropout2d: expected a 4-D [N, C, H, W] or 3-D [C, H, W] input, got ",
              x.defined() ? shape_str(x.sizes()) : std::string("an undefined tensor"));
  if (!training || p == 0) return x;
  if (p == 1) return x * 0.0;
  Shape mask_shape = x.sizes();  // one draw per (sample, channel), broadcast over H and W
  mask_shape[mask_shape.size() - 1] = mask_shape[mask_shape.size() - 2] = 1;
  return x * dropout_mask(mask_shape, p, TensorOptions().dtype(x.dtype()).device(x.device()));
}

Tensor scaled_dot_product_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                    const AttentionOptions& o) {
  const char* op = "scaled_dot_product_attention";
  EMBER_CHECK(q_in.defined() && k_in.defined() && v_in.defined(), op, ": query, key and value must be defined");
  EMBER_CHECK(q_in.dim() >= 2 && k_in.dim() >= 2 && v_in.dim() >= 2, op,
              ": query, key and value need at least 2 dims ([..., L, E]), got ", shape_str(q_in.sizes()), ", ",
              shape_str(k_in.sizes()), ", ", shape_str(v_in.sizes()));
  const int64_t L = q_in.size(-2), E = q_in.size(-1), S = k_in.size(-2);
  EMBER_CHECK(k_in.size(-1) == E && v_in.size(-2) == S, op,
              ": expected query [..., L, E], key [..., S, E] and value [..., S, Ev], got ", shape_str(q_in.sizes()),
              ", ", shape_str(k_in.sizes()), ", ", shape_str(v_in.sizes()));
  EMBER_CHECK(q_in.device() == k_in.device() && q_in.device() == v_in.device(), op,
              ": query, key and value must be on one device, got ", q_in.device(), ", ", k_in.device(), ", ",
              v_in.device());
  EMBER_CHECK(is_floating(q_in.dtype()) && is_floating(k_in.dtype()) && is_floating(v_in.dtype()), op,
              ": query, key and value must be floating, got ", q_in.dtype(), ", ", k_in.dtype(), ", ", v_in.dtype());
  EMBER_CHECK(!(o.is_causal_ && o.attn_mask_.defined()), op, ": pass attn_mask or is_causal, not both");
  EMBER_CHECK(o.dropout_p_ >= 0 && o.dropout_p_ <= 1, op, ": dropout_p must be in [0, 1], got ", o.dropout_p_);
  // The autocast op: lower the inputs once, then no policy inside (the softmax stays 16-bit).
  Tensor q = q_in, k = k_in, v = v_in, mask = o.attn_mask_;
  if (mask.defined()) {
    EMBER_CHECK(mask.device() == q.device(), op, ": attn_mask is on ", mask.device(), ", the query on ", q.device());
    EMBER_CHECK(mask.dtype() == kBool || is_floating(mask.dtype()), op, ": attn_mask must be bool or floating, got ",
                mask.dtype());
  }
  const DeviceType device_type = q.device().type;
  if (autocast::is_enabled(device_type)) {  // every floating input but float64, as PyTorch's policy
    const DType low = autocast::get_autocast_dtype(device_type);
    auto lower = [&](const Tensor& t) { return is_floating(t.dtype()) && t.dtype() != kFloat64 ? t.to(low) : t; };
    q = lower(q), k = lower(k), v = lower(v);
    if (mask.defined()) mask = lower(mask);
  }
  const autocast::SuspendGuard no_autocast;
  const double scale = o.scale_.value_or(1.0 / std::sqrt(static_cast<double>(E)));
  Tensor scores = matmul(q, k.transpose(-2, -1)) * scale;  // [..., L, S]
  const double neg_inf = -std::numeric_limits<double>::infinity();
  if (o.is_causal_) {
    const Tensor future = triu(ones({L, S}, TensorOptions(kBool).device(q.device())), 1);  // j > i
    scores = scores.masked_fill(future, neg_inf);
  } else if (mask.defined()) {
    scores = mask.dtype() == kBool ? scores.masked_fill(logical_not(mask), neg_inf) : scores + mask;
  }
  Tensor weights = softmax(scores, -1);
  if (o.dropout_p_ > 0) weights = dropout(weights, o.dropout_p_, true);
  return matmul(weights, v);  // [..., L, Ev]
}

}  // namespace ember::nn::functional
