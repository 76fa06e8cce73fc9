#pragma once
// Losses, normalizations and dropout as functions (torch.nn.functional). They are
// composed from differentiable ops, so the tape differentiates them; the formulas follow
// PyTorch's definitions, including its conventions for weights, ignore_index, label
// smoothing and the mean reduction.
#include <optional>
#include <string>
#include <vector>

#include "ember/autograd/functions.h"
#include "ember/tensor/arg.h"

namespace ember::nn::functional {

// reduction: "mean" (default), "sum" or "none".
// The losses whose only option is the reduction (LibTorch's MSELossFuncOptions and the like).
struct ReductionOptions {
  EMBER_ARG(std::string, reduction) = "mean";
};
using MSELossFuncOptions = ReductionOptions;
using L1LossFuncOptions = ReductionOptions;

struct CrossEntropyOptions {
  EMBER_ARG(Tensor, weight);  // [C] per-class weights, or undefined
  EMBER_ARG(int64_t, ignore_index) = -100;
  EMBER_ARG(double, label_smoothing) = 0.0;
  EMBER_ARG(std::string, reduction) = "mean";
};
using NLLLossOptions = CrossEntropyOptions;           // label_smoothing must stay 0
using CrossEntropyFuncOptions = CrossEntropyOptions;  // LibTorch's names
using NLLLossFuncOptions = NLLLossOptions;

// input: logits [N, C] or [N, C, d1, ...]; target: class indices [N] / [N, d1, ...] (int64),
// or class probabilities shaped like input (floating).
Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyOptions& options = {});
// input: log-probabilities [N, C] or [N, C, d1, ...]; target: class indices.
Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossOptions& options = {});
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
inline Tensor mse_loss(const Tensor& input, const Tensor& target, const ReductionOptions& options) {
  return mse_loss(input, target, options.reduction_);
}

Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
inline Tensor l1_loss(const Tensor& input, const Tensor& target, const ReductionOptions& options) {
  return l1_loss(input, target, options.reduction_);
}
// Huber-like: 0.5 d² / beta where |d| < beta, |d| - 0.5 beta elsewhere (beta = 0: L1).
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
                      double beta = 1.0);
struct SmoothL1LossOptions {
  EMBER_ARG(std::string, reduction) = "mean";
  EMBER_ARG(double, beta) = 1.0;
};
using SmoothL1LossFuncOptions = SmoothL1LossOptions;
inline Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const SmoothL1LossOptions& options) {
  return smooth_l1_loss(input, target, options.reduction_, options.beta_);
}
// 0.5 d² where |d| < delta, delta (|d| - 0.5 delta) elsewhere: delta times smooth_l1 with
// beta = delta (delta > 0).
Tensor huber_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean", double delta = 1.0);
struct HuberLossOptions {
  EMBER_ARG(std::string, reduction) = "mean";
  EMBER_ARG(double, delta) = 1.0;
};
using HuberLossFuncOptions = HuberLossOptions;
inline Tensor huber_loss(const Tensor& input, const Tensor& target, const HuberLossOptions& options) {
  return huber_loss(input, target, options.reduction_, options.delta_);
}
// input: log-probabilities; target: probabilities (log-probabilities when log_target).
// Pointwise target (log target - input); reduction "batchmean" divides the sum by the batch size
// (the mathematically correct KL divergence; PyTorch's "mean" divides by the element count).
Tensor kl_div(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
              bool log_target = false);
struct KLDivLossOptions {
  EMBER_ARG(std::string, reduction) = "mean";
  EMBER_ARG(bool, log_target) = false;
};
using KLDivFuncOptions = KLDivLossOptions;
inline Tensor kl_div(const Tensor& input, const Tensor& target, const KLDivLossOptions& options) {
  return kl_div(input, target, options.reduction_, options.log_target_);
}

struct BCEWithLogitsOptions {
  EMBER_ARG(Tensor, weight);
  EMBER_ARG(Tensor, pos_weight);
  EMBER_ARG(std::string, reduction) = "mean";
};
using BinaryCrossEntropyWithLogitsFuncOptions = BCEWithLogitsOptions;
// Numerically stable: (1 - y) x + (1 + (pos_weight - 1) y) (log(1 + exp(-|x|)) + max(-x, 0)).
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const BCEWithLogitsOptions& options = {});

// Probabilities (after a sigmoid) against targets of the same shape: ember::binary_cross_entropy
// with PyTorch's clamped logs and its finite gradient at 0 and 1. Unsafe under autocast (an
// error there): prefer binary_cross_entropy_with_logits on the logits.
struct BCELossOptions {
  EMBER_ARG(Tensor, weight);  // broadcasts to the input, or undefined
  EMBER_ARG(std::string, reduction) = "mean";
};
using BinaryCrossEntropyFuncOptions = BCELossOptions;  // LibTorch's name for the functional's options
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const BCELossOptions& options = {});

// x / max(||x||_p along dim, eps): unit vectors along dim (torch.nn.functional.normalize).
struct NormalizeFuncOptions {
  EMBER_ARG(double, p) = 2.0;
  EMBER_ARG(int64_t, dim) = 1;
  EMBER_ARG(double, eps) = 1e-12;
};
Tensor normalize(const Tensor& x, const NormalizeFuncOptions& options = {});
// sum(x1 x2) / sqrt(max(||x1||² ||x2||², eps²)) along dim, PyTorch 1.13's formula; x1 and x2
// broadcast.
struct CosineSimilarityFuncOptions {
  EMBER_ARG(int64_t, dim) = 1;
  EMBER_ARG(double, eps) = 1e-8;
};
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, const CosineSimilarityFuncOptions& options = {});

// Pads (or, with negative amounts, crops) x: pad = {left, right} of the last dim, then of the
// one before, ... (torch.nn.functional.pad). mode "constant" fills with value; "reflect" mirrors
// without repeating the edge (amounts < that dim's size), "replicate" repeats the edge,
// "circular" wraps around (amounts <= that dim's size). Every mode is differentiable in x.
struct PadFuncOptions {
  PadFuncOptions(Shape pad) : pad_(std::move(pad)) {}  // NOLINT(google-explicit-constructor): as LibTorch's
  EMBER_ARG(Shape, pad);
  EMBER_ARG(std::string, mode) = "constant";
  EMBER_ARG(double, value) = 0.0;
};
Tensor pad(const Tensor& x, const PadFuncOptions& options);

// max(0, x) + weight min(0, x), weight [1] or [C] (one per channel, dim 1).
Tensor prelu(const Tensor& x, const Tensor& weight);

// Normalizes each (sample, channel) of x [N, C, ...] over its spatial elements: batch_norm on
// x viewed as [1, N C, ...] (PyTorch's own formulation), so running statistics [C], when given,
// move by momentum as the mean over the batch of each sample's statistics.
Tensor instance_norm(const Tensor& x, const Tensor& running_mean = {}, const Tensor& running_var = {},
                     const Tensor& weight = {}, const Tensor& bias = {}, bool use_input_stats = true,
                     double momentum = 0.1, double eps = 1e-5);
struct InstanceNormFuncOptions {  // LibTorch's form
  EMBER_ARG(Tensor, running_mean);
  EMBER_ARG(Tensor, running_var);
  EMBER_ARG(Tensor, weight);
  EMBER_ARG(Tensor, bias);
  EMBER_ARG(bool, use_input_stats) = true;
  EMBER_ARG(double, momentum) = 0.1;
  EMBER_ARG(double, eps) = 1e-5;
};
inline Tensor instance_norm(const Tensor& x, const InstanceNormFuncOptions& o) {
  return instance_norm(x, o.running_mean_, o.running_var_, o.weight_, o.bias_, o.use_input_stats_, o.momentum_, o.eps_);
}

// Normalizes over the trailing `normalized_shape` dims; weight and bias (that shape) optional.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);
// x [N, C, ...]: normalizes each of `num_groups` groups of C / num_groups channels per sample;
// weight and bias [C] optional.
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);
// x [N, C, ...]. Training: batch statistics (biased variance), and the running statistics,
// when given, move by `momentum` (with the unbiased variance). Eval: the running statistics.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight = {},
                  const Tensor& bias = {}, bool training = false, double momentum = 0.1, double eps = 1e-5);
// Zeroes each element with probability p and scales the rest by 1 / (1 - p), with a mask
// drawn from ember's Philox generator; the identity when !training.
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true);
// Zeroes whole channels: x [N, C, H, W] (or unbatched [C, H, W]), each (sample, channel) kept
// with probability 1 - p and scaled by 1 / (1 - p); the identity when !training.
Tensor dropout2d(const Tensor& x, double p = 0.5, bool training = true);

// Attention (torch.nn.functional.scaled_dot_product_attention, its math form):
// softmax(q @ k^T * scale + mask) @ v, for q [..., L, E], k [..., S, E], v [..., S, Ev] ->
// [..., L, Ev], the leading dims broadcast. attn_mask [L, S] (or broadcastable to [..., L, S]):
// bool, true where a query may attend (false -> -inf), or floating, added to the scores.
// is_causal: query i attends to keys j <= i (then no attn_mask). scale defaults to 1/sqrt(E).
// dropout_p drops attention weights whenever it is above 0 (pass 0 in eval, as PyTorch's callers
// do). Under autocast it is one op of the lower-precision list, as in PyTorch: q, k and v are cast
// to the autocast dtype and everything inside, softmax included, runs in it, so the saved
// attention weights are 16-bit (the float32 list would otherwise keep them in float32).
struct AttentionOptions {
  EMBER_ARG(Tensor, attn_mask);
  EMBER_ARG(double, dropout_p) = 0.0;
  EMBER_ARG(bool, is_causal) = false;
  EMBER_ARG(std::optional<double>, scale) = std::nullopt;
};
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options = {});

// Resizes the spatial dims of x [N, C, H, W] (torch.nn.functional.interpolate), to `size` or by
// `scale_factor` (one number for both dims, or one per dim; the output size is floor(in *
// scale)). mode "nearest" (the source pixel floor(dst * in / out), or floor(dst / scale_factor)
// when a scale factor is given, as PyTorch) or "bilinear" (align_corners: corner pixels map to
// corner pixels; else pixel centres, PyTorch's default). Both are made of index_select and
// weighted sums, so they are differentiable and run on every device.
struct InterpolateOptions {
  EMBER_ARG(std::optional<Shape>, size);
  EMBER_ARG(std::optional<std::vector<double>>, scale_factor);
  EMBER_ARG(std::string, mode) = "nearest";
  EMBER_ARG(std::optional<bool>, align_corners);           // bilinear only; default false
  EMBER_ARG(std::optional<bool>, recompute_scale_factor);  // true: map by in / out, not by 1 / scale
  InterpolateOptions& scale_factor(double s) { return scale_factor(std::vector<double>{s}); }
};
using InterpolateFuncOptions = InterpolateOptions;
Tensor interpolate(const Tensor& x, const InterpolateOptions& options);

}  // namespace ember::nn::functional
