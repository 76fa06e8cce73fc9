#include "ember/nn/modules/attention.h"

#include <cmath>
#include <limits>

#include "ember/autograd/grad_mode.h"
#include "ember/nn/functional.h"
#include "ember/nn/init.h"

namespace ember::nn {

namespace {
std::string shape_or_undefined(const Tensor& t) { return t.defined() ? shape_str(t.sizes()) : "undefined"; }
}  // namespace

MultiheadAttentionImpl::MultiheadAttentionImpl(const MultiheadAttentionOptions& o)
    : Module("MultiheadAttention"), options(o) {
  const int64_t e = o.embed_dim_, h = o.num_heads_;
  EMBER_CHECK(e > 0 && h > 0 && e % h == 0, "MultiheadAttention: embed_dim (", e,
              ") must be a positive multiple of num_heads (", h, ")");
  EMBER_CHECK(o.kdim_ >= 0 && o.vdim_ >= 0, "MultiheadAttention: kdim and vdim must be >= 0 (0: embed_dim), got ",
              o.kdim_, " and ", o.vdim_);
  EMBER_CHECK(o.dropout_ >= 0 && o.dropout_ <= 1, "MultiheadAttention: dropout must be in [0, 1], got ", o.dropout_);
  const int64_t kdim = o.kdim_ ? o.kdim_ : e, vdim = o.vdim_ ? o.vdim_ : e;
  same_embed_dim_ = kdim == e && vdim == e;
  if (same_embed_dim_) {
    in_proj_weight = register_parameter("in_proj_weight", empty({3 * e, e}));
    bind_attribute("in_proj_weight", in_proj_weight);  // Note [Tensor attributes]
  } else {
    q_proj_weight = register_parameter("q_proj_weight", empty({e, e}));
    bind_attribute("q_proj_weight", q_proj_weight);
    k_proj_weight = register_parameter("k_proj_weight", empty({e, kdim}));
    bind_attribute("k_proj_weight", k_proj_weight);
    v_proj_weight = register_parameter("v_proj_weight", empty({e, vdim}));
    bind_attribute("v_proj_weight", v_proj_weight);
  }
  if (o.bias_) {
    in_proj_bias = register_parameter("in_proj_bias", empty({3 * e}));
    bind_attribute("in_proj_bias", in_proj_bias);
  }
  out_proj = register_module("out_proj", Linear(LinearOptions(e, e).bias(o.bias_)));
  if (o.add_bias_kv_) {
    bias_k = register_parameter("bias_k", empty({1, 1, e}));
    bind_attribute("bias_k", bias_k);
    bias_v = register_parameter("bias_v", empty({1, 1, e}));
    bind_attribute("bias_v", bias_v);
  }
  reset_parameters();
}

void MultiheadAttentionImpl::reset_parameters() {
  for (Tensor* w : {&in_proj_weight, &q_proj_weight, &k_proj_weight, &v_proj_weight})
    if (w->defined()) init::xavier_uniform_(*w);
  if (in_proj_bias.defined()) init::zeros_(in_proj_bias);
  if (out_proj->bias.defined()) init::zeros_(out_proj->bias);
  for (Tensor* b : {&bias_k, &bias_v})
    if (b->defined()) init::xavier_normal_(*b);
}

std::tuple<Tensor, Tensor> MultiheadAttentionImpl::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                                           const Tensor& key_padding_mask, bool need_weights,
                                                           const Tensor& attn_mask, bool average_attn_weights) {
  const char* op = "MultiheadAttention";
  const int64_t e = options.embed_dim_, h = options.num_heads_, d = e / h;
  const int64_t kdim = options.kdim_ ? options.kdim_ : e, vdim = options.vdim_ ? options.vdim_ : e;
  EMBER_CHECK(query.defined() && key.defined() && value.defined() && (query.dim() == 3 || query.dim() == 2) &&
                  key.dim() == query.dim() && value.dim() == query.dim(),
              op, ": expected query, key and value [L, N, E], [S, N, kdim], [S, N, vdim] (or all without N), got ",
              shape_or_undefined(query), ", ", shape_or_undefined(key), ", ", shape_or_undefined(value));
  const bool batched = query.dim() == 3;
  const Tensor q_in = batched ? query : query.unsqueeze(1), k_in = batched ? key : key.unsqueeze(1),
               v_in = batched ? value : value.unsqueeze(1);
  const int64_t L = q_in.size(0), n = q_in.size(1), S = k_in.size(0);
  EMBER_CHECK(q_in.size(2) == e && k_in.size(2) == kdim && v_in.size(2) == vdim && v_in.size(0) == S &&
                  k_in.size(1) == n && v_in.size(1) == n,
              op, ": expected query [L, N, ", e, "], key [S, N, ", kdim, "] and value [S, N, ", vdim, "], got ",
              shape_str(query.sizes()), ", ", shape_str(key.sizes()), ", ", shape_str(value.sizes()));

  // q, k, v = the input projections: one GEMM for self-attention, three otherwise.
  std::vector<Tensor> b(3);
  if (in_proj_bias.defined()) b = in_proj_bias.split(e);
  Tensor q, k, v;
  if (same_embed_dim_ && query.is_same(key) && key.is_same(value)) {
    const auto qkv = linear(q_in, in_proj_weight, in_proj_bias).split(e, 2);
    q = qkv[0], k = qkv[1], v = qkv[2];
  } else {
    const auto w =
        same_embed_dim_ ? in_proj_weight.split(e) : std::vector<Tensor>{q_proj_weight, k_proj_weight, v_proj_weight};
    q = linear(q_in, w[0], b[0]), k = linear(k_in, w[1], b[1]), v = linear(v_in, w[2], b[2]);
  }

  // The masks, as bool ("not allowed") or additive float: attn_mask [1 or N·heads, L, S],
  // key_padding_mask [N, S].
  Tensor mask = attn_mask, padding = key_padding_mask;
  if (padding.defined() && !batched && padding.dim() == 1) padding = padding.unsqueeze(0);
  auto as_bool_or_float = [&](const Tensor& m, const char* what) {
    EMBER_CHECK(m.dtype() == kBool || m.dtype() == kUInt8 || m.is_floating_point(), op, ": ", what,
                " must be bool (or uint8) or floating, got ", m.dtype());
    return m.dtype() == kUInt8 ? m.to(kBool) : m.dtype() == kBool ? m : m.to(q.dtype());
  };
  if (mask.defined()) {
    mask = as_bool_or_float(mask, "attn_mask");
    EMBER_CHECK((mask.dim() == 2 && mask.size(0) == L && mask.size(1) == S) ||
                    (mask.dim() == 3 && mask.size(0) == n * h && mask.size(1) == L && mask.size(2) == S),
                op, ": attn_mask must be [", L, ", ", S, "] or [", n * h, ", ", L, ", ", S, "], got ",
                shape_str(attn_mask.sizes()));
    if (mask.dim() == 2) mask = mask.unsqueeze(0);
  }
  if (padding.defined()) {
    padding = as_bool_or_float(padding, "key_padding_mask");
    EMBER_CHECK(padding.dim() == 2 && padding.size(0) == n && padding.size(1) == S, op, ": key_padding_mask must be [",
                n, ", ", S, "], got ", shape_str(key_padding_mask.sizes()));
  }
  // One more key (and value) per option: bias_k and bias_v, then a zero one; the masks let them in.
  auto allow_one_more_key = [&] {
    if (mask.defined()) mask = functional::pad(mask, functional::PadFuncOptions({0, 1}));
    if (padding.defined()) padding = functional::pad(padding, functional::PadFuncOptions({0, 1}));
  };
  if (options.add_bias_kv_) {
    k = cat({k, bias_k.expand({1, n, e})}, 0);
    v = cat({v, bias_v.expand({1, n, e})}, 0);
    allow_one_more_key();
  }
  auto heads = [&](const Tensor& z) { return z.reshape({z.size(0), n * h, d}).transpose(0, 1); };  // [N·heads, ., d]
  q = heads(q), k = heads(k), v = heads(v);
  if (options.add_zero_attn_) {
    const Tensor zero = zeros({n * h, 1, d}, TensorOptions().dtype(k.dtype()).device(k.device()));
    k = cat({k, zero}, 1);
    v = cat({v, zero}, 1);
    allow_one_more_key();
  }
  const int64_t keys = k.size(1);
  if (padding.defined()) {  // [N, S] -> [N·heads, 1, S], merged into the attention mask
    const Tensor per_head = padding.view({n, 1, 1, keys}).expand({n, h, 1, keys}).reshape({n * h, 1, keys});
    if (!mask.defined())
      mask = per_head;
    else if (mask.dtype() == kBool && per_head.dtype() == kBool)
      mask = logical_or(mask, per_head);
    else if (per_head.dtype() == kBool)  // where, not masked_fill: [1, L, S] and [N·heads, 1, S] broadcast
      mask = where(per_head, -std::numeric_limits<double>::infinity(), mask);
    else
      mask = (mask.dtype() == kBool ? where(mask, -std::numeric_limits<double>::infinity(),
                                            zeros({}, TensorOptions().dtype(q.dtype()).device(q.device())))
                                    : mask) +
             per_head;
  }
  if (mask.defined() && mask.dtype() == kBool)
    mask =
        zeros_like(mask, TensorOptions().dtype(q.dtype())).masked_fill(mask, -std::numeric_limits<double>::infinity());

  const double p = is_training() ? options.dropout_ : 0.0;
  Tensor out, weights;
  if (!need_weights) {  // the fused op: no [N·heads, L, S] weights kept for the caller
    out =
        functional::scaled_dot_product_attention(q, k, v, functional::AttentionOptions().attn_mask(mask).dropout_p(p));
  } else {  // PyTorch 1.13's steps: q scaled first, then the scores, softmax, dropout
    Tensor scores = bmm(q / std::sqrt(static_cast<double>(d)), k.transpose(1, 2));  // [N·heads, L, S]
    if (mask.defined()) scores = scores + mask;
    weights = softmax(scores, -1);
    if (p > 0) weights = functional::dropout(weights, p, true);
    out = bmm(weights, v);  // [N·heads, L, d]
  }
  out = out_proj(out.transpose(0, 1).reshape({L * n, e})).view({L, n, e});
  if (weights.defined()) {
    weights = weights.view({n, h, L, keys});
    if (average_attn_weights) weights = weights.mean({1});
    if (!batched) weights = weights.squeeze(0);
  }
  return {batched ? out : out.squeeze(1), weights};
}

Tensor TransformerActivation::operator()(const Tensor& x) const {
  if (function) return function(x);
  if (name == "relu") return relu(x);
  if (name == "gelu") return gelu(x);
  throw Error("Transformer layer: activation must be \"relu\", \"gelu\" or a function, got \"" + name + "\"");
}

namespace {

// The checks and sublayers the encoder and decoder layers share.
void check_layer_options(const TransformerEncoderLayerOptions& o, const char* layer) {
  EMBER_CHECK(o.dim_feedforward_ > 0, layer, ": dim_feedforward must be > 0, got ", o.dim_feedforward_);
  EMBER_CHECK(o.activation_.function || o.activation_.name == "relu" || o.activation_.name == "gelu", layer,
              ": activation must be \"relu\", \"gelu\" or a function, got \"", o.activation_.name, "\"");
}

MultiheadAttention attention_of(const TransformerEncoderLayerOptions& o) {
  return MultiheadAttention(MultiheadAttentionOptions(o.d_model_, o.nhead_).dropout(o.dropout_));
}

LayerNorm norm_of(const TransformerEncoderLayerOptions& o) {
  return LayerNorm(LayerNormOptions({o.d_model_}).eps(o.layer_norm_eps_));
}

// A [S, N, E] (or [S, E]) input as the layers compute on it: sequence first.
Tensor sequence_first(const Tensor& x, bool batch_first) { return batch_first && x.dim() == 3 ? x.transpose(0, 1) : x; }

void check_sequence(const Tensor& x, const char* layer, const char* name, bool batch_first) {
  EMBER_CHECK(x.defined() && (x.dim() == 3 || x.dim() == 2), layer, ": expected ", name, " [S, N, E]",
              batch_first ? " ([N, S, E] with batch_first)" : "", " or [S, E], got ", shape_or_undefined(x));
}

// num_layers copies of the prototype: each starts with its parameters, then learns alone (LibTorch
// clones the layer; ember builds it again from its options and loads the prototype's state).
template <class Layer>
ModuleList clones_of(const Layer& prototype, int64_t num_layers, const char* stack) {
  EMBER_CHECK(num_layers >= 0, stack, ": num_layers must be >= 0, got ", num_layers);
  EMBER_CHECK(!prototype.is_empty(), stack, ": the layer to copy is empty");
  ModuleList layers;
  const StateDict state = prototype->state_dict();
  for (int64_t i = 0; i < num_layers; ++i) {
    Layer layer(prototype->options);
    layer->load_state_dict(state);
    // (as a module: the decoder layer takes two tensors, which a holder's one-tensor caller cannot)
    layers->push_back(std::to_string(i), std::shared_ptr<Module>(layer.ptr()));
  }
  return layers;
}

}  // namespace

// ---- encoder ----

TransformerEncoderLayerImpl::TransformerEncoderLayerImpl(const TransformerEncoderLayerOptions& o)
    : Module("TransformerEncoderLayer"), options(o) {
  check_layer_options(o, "TransformerEncoderLayer");
  self_attn = register_module("self_attn", attention_of(o));
  linear1 = register_module("linear1", Linear(o.d_model_, o.dim_feedforward_));
  dropout = register_module("dropout", Dropout(o.dropout_));
  linear2 = register_module("linear2", Linear(o.dim_feedforward_, o.d_model_));
  norm1 = register_module("norm1", norm_of(o));
  norm2 = register_module("norm2", norm_of(o));
  dropout1 = register_module("dropout1", Dropout(o.dropout_));
  dropout2 = register_module("dropout2", Dropout(o.dropout_));
}

Tensor TransformerEncoderLayerImpl::feed_forward(const Tensor& x) {
  return dropout2(linear2(dropout(options.activation_(linear1(x)))));
}

Tensor TransformerEncoderLayerImpl::forward(const Tensor& src, const Tensor& src_mask,
                                            const Tensor& src_key_padding_mask) {
  check_sequence(src, "TransformerEncoderLayer", "src", options.batch_first_);
  Tensor x = sequence_first(src, options.batch_first_);
  auto attend = [&](const Tensor& y) {
    return dropout1(std::get<0>(self_attn->forward(y, y, y, src_key_padding_mask, /*need_weights=*/false, src_mask)));
  };
  if (options.norm_first_) {
    x = x + attend(norm1(x));
    x = x + feed_forward(norm2(x));
  } else {
    x = norm1(x + attend(x));
    x = norm2(x + feed_forward(x));
  }
  return sequence_first(x, options.batch_first_);  // (the transpose is its own inverse)
}

TransformerEncoderImpl::TransformerEncoderImpl(const TransformerEncoderOptions& o)
    : Module("TransformerEncoder"), options(o) {
  layers = register_module("layers", clones_of(o.encoder_layer_, o.num_layers_, "TransformerEncoder"));
  if (!o.norm_.is_empty()) {
    norm = o.norm_;
    register_module("norm", norm.ptr());
  }
}

Tensor TransformerEncoderImpl::forward(const Tensor& src, const Tensor& src_mask, const Tensor& src_key_padding_mask) {
  Tensor x = src;
  for (size_t i = 0; i < layers->size(); ++i)
    x = layers->at<TransformerEncoderLayerImpl>(i)->forward(x, src_mask, src_key_padding_mask);
  return norm.is_empty() ? x : norm.forward(x);
}

// ---- decoder ----

TransformerDecoderLayerImpl::TransformerDecoderLayerImpl(const TransformerDecoderLayerOptions& o)
    : Module("TransformerDecoderLayer"), options(o) {
  check_layer_options(o, "TransformerDecoderLayer");
  self_attn = register_module("self_attn", attention_of(o));
  multihead_attn = register_module("multihead_attn", attention_of(o));
  linear1 = register_module("linear1", Linear(o.d_model_, o.dim_feedforward_));
  dropout = register_module("dropout", Dropout(o.dropout_));
  linear2 = register_module("linear2", Linear(o.dim_feedforward_, o.d_model_));
  norm1 = register_module("norm1", norm_of(o));
  norm2 = register_module("norm2", norm_of(o));
  norm3 = register_module("norm3", norm_of(o));
  dropout1 = register_module("dropout1", Dropout(o.dropout_));
  dropout2 = register_module("dropout2", Dropout(o.dropout_));
  dropout3 = register_module("dropout3", Dropout(o.dropout_));
}

Tensor TransformerDecoderLayerImpl::forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask,
                                            const Tensor& memory_mask, const Tensor& tgt_key_padding_mask,
                                            const Tensor& memory_key_padding_mask) {
  const char* op = "TransformerDecoderLayer";
  check_sequence(tgt, op, "tgt", options.batch_first_);
  check_sequence(memory, op, "memory", options.batch_first_);
  EMBER_CHECK(tgt.dim() == memory.dim(), op, ": tgt ", shape_str(tgt.sizes()), " and memory ",
              shape_str(memory.sizes()), " must both be batched or both unbatched");
  Tensor x = sequence_first(tgt, options.batch_first_);
  const Tensor mem = sequence_first(memory, options.batch_first_);
  auto self_attend = [&](const Tensor& y) {
    return dropout1(std::get<0>(self_attn->forward(y, y, y, tgt_key_padding_mask, false, tgt_mask)));
  };
  auto attend_memory = [&](const Tensor& y) {
    return dropout2(std::get<0>(multihead_attn->forward(y, mem, mem, memory_key_padding_mask, false, memory_mask)));
  };
  auto feed_forward = [&](const Tensor& y) { return dropout3(linear2(dropout(options.activation_(linear1(y))))); };
  if (options.norm_first_) {
    x = x + self_attend(norm1(x));
    x = x + attend_memory(norm2(x));
    x = x + feed_forward(norm3(x));
  } else {
    x = norm1(x + self_attend(x));
    x = norm2(x + attend_memory(x));
    x = norm3(x + feed_forward(x));
  }
  return sequence_first(x, options.batch_first_);
}

TransformerDecoderImpl::TransformerDecoderImpl(const TransformerDecoderOptions& o)
    : Module("TransformerDecoder"), options(o) {
  layers = register_module("layers", clones_of(o.decoder_layer_, o.num_layers_, "TransformerDecoder"));
  if (!o.norm_.is_empty()) {
    norm = o.norm_;
    register_module("norm", norm.ptr());
  }
}

Tensor TransformerDecoderImpl::forward(const Tensor& tgt, const Tensor& memory, const Tensor& tgt_mask,
                                       const Tensor& memory_mask, const Tensor& tgt_key_padding_mask,
                                       const Tensor& memory_key_padding_mask) {
  Tensor x = tgt;
  for (size_t i = 0; i < layers->size(); ++i)
    x = layers->at<TransformerDecoderLayerImpl>(i)->forward(x, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
                                                            memory_key_padding_mask);
  return norm.is_empty() ? x : norm.forward(x);
}

// ---- Transformer ----

TransformerImpl::TransformerImpl(const TransformerOptions& o) : Module("Transformer"), options(o) {
  EMBER_CHECK(o.num_encoder_layers_ >= 0 && o.num_decoder_layers_ >= 0,
              "Transformer: num_encoder_layers and num_decoder_layers must be >= 0, got ", o.num_encoder_layers_,
              " and ", o.num_decoder_layers_);
  const auto layer = TransformerEncoderLayerOptions(o.d_model_, o.nhead_)
                         .dim_feedforward(o.dim_feedforward_)
                         .dropout(o.dropout_)
                         .activation(o.activation_)
                         .layer_norm_eps(o.layer_norm_eps_)
                         .batch_first(o.batch_first_)
                         .norm_first(o.norm_first_);
  const auto final_norm = [&] { return AnyModule(LayerNorm(LayerNormOptions({o.d_model_}).eps(o.layer_norm_eps_))); };
  encoder = register_module(
      "encoder", TransformerEncoder(TransformerEncoderOptions(layer, o.num_encoder_layers_).norm(final_norm())));
  decoder = register_module(
      "decoder", TransformerDecoder(TransformerDecoderOptions(layer, o.num_decoder_layers_).norm(final_norm())));
  reset_parameters();
}

void TransformerImpl::reset_parameters() {
  for (Tensor& p : parameters())
    if (p.dim() > 1) init::xavier_uniform_(p);
}

Tensor TransformerImpl::forward(const Tensor& src, const Tensor& tgt, const Tensor& src_mask, const Tensor& tgt_mask,
                                const Tensor& memory_mask, const Tensor& src_key_padding_mask,
                                const Tensor& tgt_key_padding_mask, const Tensor& memory_key_padding_mask) {
  check_sequence(src, "Transformer", "src", options.batch_first_);
  check_sequence(tgt, "Transformer", "tgt", options.batch_first_);
  const bool batched = src.dim() == 3;
  const int64_t batch_dim = options.batch_first_ ? 0 : 1;
  EMBER_CHECK(!batched || (tgt.dim() == 3 && src.size(batch_dim) == tgt.size(batch_dim)),
              "Transformer: the batch number of src ", shape_str(src.sizes()), " and tgt ", shape_str(tgt.sizes()),
              " must be equal");
  EMBER_CHECK(src.size(-1) == options.d_model_ && tgt.size(-1) == options.d_model_,
              "Transformer: the feature number of src ", shape_str(src.sizes()), " and tgt ", shape_str(tgt.sizes()),
              " must be equal to d_model (", options.d_model_, ")");
  const Tensor memory = encoder->forward(src, src_mask, src_key_padding_mask);
  return decoder->forward(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask);
}

Tensor TransformerImpl::generate_square_subsequent_mask(int64_t sz) {
  EMBER_CHECK(sz >= 0, "Transformer::generate_square_subsequent_mask: size must be >= 0, got ", sz);
  return full({sz, sz}, -std::numeric_limits<double>::infinity()).triu(1);
}

}  // namespace ember::nn
