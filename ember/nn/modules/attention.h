#pragma once
// LibTorch's attention layers under their names: MultiheadAttention, the Transformer's encoder
// and decoder layers and stacks, and Transformer itself, with PyTorch's parameter names (so its
// state dicts load) and its layout: sequences first, [L, N, E] (the Transformer layers also take
// batch_first, as in Python).
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

// The decoder layer's options are the encoder layer's (LibTorch's two structs have the same fields).
using TransformerDecoderLayerOptions = TransformerEncoderLayerOptions;

// Self-attention over the target, attention to the encoder's output (memory), then the
// feed-forward network, each added to its input and normalized (post-norm, PyTorch's default):
// x = norm1(x + dropout1(self_attn(x))); x = norm2(x + dropout2(multihead_attn(x, memory)));
// x = norm3(x + dropout3(ff(x))). tgt [T, N, E], memory [S, N, E]; masks as MultiheadAttention's
// (tgt_mask [T, T], memory_mask [T, S], the key padding masks [N, T] and [N, S]).
class TransformerDecoderLayerImpl : public Module {
 public:
  TransformerDecoderLayerImpl(int64_t d_model, int64_t nhead)
      : TransformerDecoderLayerImpl(TransformerDecoderLayerOptions(d_model, nhead)) {}
  explicit TransformerDecoderLayerImpl(const TransformerDecoderLayerOptions& options);
  Tensor forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask = {}, const Tensor& memory_mask = {},
                 const Tensor& tgt_key_padding_mask = {}, const Tensor& memory_key_padding_mask = {});

  TransformerDecoderLayerOptions options;
  MultiheadAttention self_attn{nullptr}, multihead_attn{nullptr};  // registration order: Python's
  Linear linear1{nullptr};
  Dropout dropout{nullptr};
  Linear linear2{nullptr};
  LayerNorm norm1{nullptr}, norm2{nullptr}, norm3{nullptr};
  Dropout dropout1{nullptr}, dropout2{nullptr}, dropout3{nullptr};
};
EMBER_MODULE(TransformerDecoderLayer);

struct TransformerDecoderOptions {
  // num_layers copies of decoder_layer, each starting with its parameters.
  TransformerDecoderOptions(TransformerDecoderLayer decoder_layer, int64_t num_layers)
      : decoder_layer_(std::move(decoder_layer)), num_layers_(num_layers) {}
  TransformerDecoderOptions(const TransformerDecoderLayerOptions& layer, int64_t num_layers)
      : TransformerDecoderOptions(TransformerDecoderLayer(layer), num_layers) {}
  EMBER_ARG(TransformerDecoderLayer, decoder_layer);
  EMBER_ARG(int64_t, num_layers);
  EMBER_ARG(AnyModule, norm);  // applied after the last layer, or empty
};

class TransformerDecoderImpl : public Module {
 public:
  TransformerDecoderImpl(TransformerDecoderLayer decoder_layer, int64_t num_layers)
      : TransformerDecoderImpl(TransformerDecoderOptions(std::move(decoder_layer), num_layers)) {}
  explicit TransformerDecoderImpl(const TransformerDecoderOptions& options);
  // Every layer attends to the same memory.
  Tensor forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask = {}, const Tensor& memory_mask = {},
                 const Tensor& tgt_key_padding_mask = {}, const Tensor& memory_key_padding_mask = {});

  TransformerDecoderOptions options;
  ModuleList layers{nullptr};
  AnyModule norm;
};
EMBER_MODULE(TransformerDecoder);

struct TransformerOptions {
  TransformerOptions(int64_t d_model = 512, int64_t nhead = 8) : d_model_(d_model), nhead_(nhead) {}  // NOLINT
  TransformerOptions(int64_t d_model, int64_t nhead, int64_t num_encoder_layers, int64_t num_decoder_layers)
      : d_model_(d_model),
        nhead_(nhead),
        num_encoder_layers_(num_encoder_layers),
        num_decoder_layers_(num_decoder_layers) {}
  EMBER_ARG(int64_t, d_model) = 512;
  EMBER_ARG(int64_t, nhead) = 8;
  EMBER_ARG(int64_t, num_encoder_layers) = 6;
  EMBER_ARG(int64_t, num_decoder_layers) = 6;
  EMBER_ARG(int64_t, dim_feedforward) = 2048;
  EMBER_ARG(double, dropout) = 0.1;
  EMBER_ARG(TransformerActivation, activation) = "relu";
  EMBER_ARG(double, layer_norm_eps) = 1e-5;  // Python's options from here on
  EMBER_ARG(bool, batch_first) = false;
  EMBER_ARG(bool, norm_first) = false;
};

// The encoder-decoder of "Attention Is All You Need": memory = encoder(src) (a TransformerEncoder
// closed by a LayerNorm), out = decoder(tgt, memory) (likewise). src [S, N, E], tgt [T, N, E],
// out [T, N, E]. Every parameter of two or more dims starts xavier-uniform, as PyTorch's.
class TransformerImpl : public Module {
 public:
  explicit TransformerImpl(const TransformerOptions& options = TransformerOptions());
  Tensor forward(const Tensor& src, const Tensor& tgt, const Tensor& src_mask = {}, const Tensor& tgt_mask = {},
                 const Tensor& memory_mask = {}, const Tensor& src_key_padding_mask = {},
                 const Tensor& tgt_key_padding_mask = {}, const Tensor& memory_key_padding_mask = {});
  void reset_parameters();
  // [sz, sz] float32: 0 on and below the diagonal, -inf above (position i sees positions <= i).
  static Tensor generate_square_subsequent_mask(int64_t sz);

  TransformerOptions options;
  TransformerEncoder encoder{nullptr};
  TransformerDecoder decoder{nullptr};
};
EMBER_MODULE(Transformer);

}  // namespace ember::nn
