#pragma once
// LibTorch's attention layers under their names: MultiheadAttention, TransformerEncoderLayer and
// TransformerEncoder, with PyTorch's parameter names (so its state dicts load) and its layout:
// sequences first, [L, N, E] (TransformerEncoderLayer also takes batch_first, as in Python).
#include <functional>
#include <string>
#include <tuple>

#include "ember/nn/modules/activation.h"
#include "ember/nn/modules/container.h"
#include "ember/nn/modules/linear.h"
#include "ember/nn/modules/norm.h"

namespace ember::nn {

struct MultiheadAttentionOptions {
  MultiheadAttentionOptions(int64_t embed_dim, int64_t num_heads) : embed_dim_(embed_dim), num_heads_(num_heads) {}
  EMBER_ARG(int64_t, embed_dim);
  EMBER_ARG(int64_t, num_heads);
  EMBER_ARG(double, dropout) = 0.0;        // on the attention weights, in training
  EMBER_ARG(bool, bias) = true;            // in_proj_bias and out_proj.bias
  EMBER_ARG(bool, add_bias_kv) = false;    // learned bias_k, bias_v appended to the keys and values
  EMBER_ARG(bool, add_zero_attn) = false;  // a zero key and value appended after the heads split
  EMBER_ARG(int64_t, kdim) = 0;            // the keys' and values' features; 0: embed_dim
  EMBER_ARG(int64_t, vdim) = 0;
};

// softmax(q kᵀ / √d + mask) v per head, d = embed_dim / num_heads, with q, k, v projected from
// query [L, N, E], key [S, N, kdim] and value [S, N, vdim] (or unbatched [L, E], ...), the heads
// joined by out_proj. Parameters: in_proj_weight [3E, E] (or q/k/v_proj_weight when kdim or
// vdim differ from E), in_proj_bias [3E], out_proj (Linear), bias_k/bias_v [1, 1, E].
// Masks: key_padding_mask [N, S] (true or nonzero: ignore that key) and attn_mask [L, S] or
// [N·heads, L, S], bool (true: not allowed) or added to the scores.
class MultiheadAttentionImpl : public Module {
 public:
  MultiheadAttentionImpl(int64_t embed_dim, int64_t num_heads)
      : MultiheadAttentionImpl(MultiheadAttentionOptions(embed_dim, num_heads)) {}
  explicit MultiheadAttentionImpl(const MultiheadAttentionOptions& options);
  // (output [L, N, E], the attention weights [N, L, S] averaged over the heads, or [N, heads, L,
  // S]; undefined when need_weights is false, which takes the fused attention op instead).
  std::tuple<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                     const Tensor& key_padding_mask = {}, bool need_weights = true,
                                     const Tensor& attn_mask = {}, bool average_attn_weights = true);
  void reset_parameters();  // xavier-uniform projections, zero biases, as PyTorch

  MultiheadAttentionOptions options;
  Tensor in_proj_weight, q_proj_weight, k_proj_weight, v_proj_weight, in_proj_bias, bias_k, bias_v;
  Linear out_proj{nullptr};

 private:
  bool same_embed_dim_;
};
EMBER_MODULE(MultiheadAttention);

// What the feed-forward part applies between its two Linear layers: "relu", "gelu" or a function.
struct TransformerActivation {
  TransformerActivation(const char* name) : name(name) {}  // NOLINT: implicit, as LibTorch's
  TransformerActivation(std::function<Tensor(const Tensor&)> f) : function(std::move(f)) {}  // NOLINT
  Tensor operator()(const Tensor& x) const;
  std::string name;
  std::function<Tensor(const Tensor&)> function;
};

struct TransformerEncoderLayerOptions {
  TransformerEncoderLayerOptions(int64_t d_model, int64_t nhead) : d_model_(d_model), nhead_(nhead) {}  // NOLINT
  EMBER_ARG(int64_t, d_model);
  EMBER_ARG(int64_t, nhead);
  EMBER_ARG(int64_t, dim_feedforward) = 2048;
  EMBER_ARG(double, dropout) = 0.1;
  EMBER_ARG(TransformerActivation, activation) = "relu";
  EMBER_ARG(double, layer_norm_eps) = 1e-5;
  EMBER_ARG(bool, batch_first) = false;  // [N, S, E] in and out (Python's option; LibTorch 1.13 lacks it)
  EMBER_ARG(bool, norm_first) = false;   // pre-norm (Python's option): x + attn(norm1(x)), ...
};

// Self-attention then a feed-forward network, each added to its input and normalized (post-norm,
// PyTorch's default): x = norm1(x + dropout1(attn(x))); x = norm2(x + dropout2(ff(x))), ff(x) =
// linear2(dropout(activation(linear1(x)))). src [S, N, E].
class TransformerEncoderLayerImpl : public Module {
 public:
  TransformerEncoderLayerImpl(int64_t d_model, int64_t nhead)
      : TransformerEncoderLayerImpl(TransformerEncoderLayerOptions(d_model, nhead)) {}
  explicit TransformerEncoderLayerImpl(const TransformerEncoderLayerOptions& options);
  Tensor forward(const Tensor& src) override { return forward(src, {}, {}); }
  Tensor forward(const Tensor& src, const Tensor& src_mask, const Tensor& src_key_padding_mask = {});

  TransformerEncoderLayerOptions options;
  MultiheadAttention self_attn{nullptr};  // members in registration order: it is the state_dict order
  Linear linear1{nullptr};
  Dropout dropout{nullptr};
  Linear linear2{nullptr};
  LayerNorm norm1{nullptr}, norm2{nullptr};
  Dropout dropout1{nullptr}, dropout2{nullptr};

 private:
  Tensor feed_forward(const Tensor& x);
};
EMBER_MODULE(TransformerEncoderLayer);

struct TransformerEncoderOptions {
  // num_layers copies of encoder_layer: each starts with its parameters, as LibTorch's clones.
  TransformerEncoderOptions(TransformerEncoderLayer encoder_layer, int64_t num_layers)
      : encoder_layer_(std::move(encoder_layer)), num_layers_(num_layers) {}
  TransformerEncoderOptions(const TransformerEncoderLayerOptions& layer, int64_t num_layers)
      : TransformerEncoderOptions(TransformerEncoderLayer(layer), num_layers) {}
  EMBER_ARG(TransformerEncoderLayer, encoder_layer);
  EMBER_ARG(int64_t, num_layers);
  EMBER_ARG(AnyModule, norm);  // applied after the last layer (a LayerNorm, say), or empty
};

class TransformerEncoderImpl : public Module {
 public:
  TransformerEncoderImpl(TransformerEncoderLayer encoder_layer, int64_t num_layers)
      : TransformerEncoderImpl(TransformerEncoderOptions(std::move(encoder_layer), num_layers)) {}
  explicit TransformerEncoderImpl(const TransformerEncoderOptions& options);
  Tensor forward(const Tensor& src) override { return forward(src, {}, {}); }
  Tensor forward(const Tensor& src, const Tensor& src_mask, const Tensor& src_key_padding_mask = {});

  TransformerEncoderOptions options;
  ModuleList layers{nullptr};
  AnyModule norm;
};
EMBER_MODULE(TransformerEncoder);

}  // namespace ember::nn
