#include "ember/nn/modules/transformer.h"

namespace ember::nn {

CausalSelfAttentionImpl::CausalSelfAttentionImpl(int64_t n_embd, int64_t n_head, double dropout, bool bias)
    : Module("CausalSelfAttention"),
      n_embd(n_embd),
      n_head(n_head),
      c_attn(nullptr),
      c_proj(nullptr),
      attn_dropout(nullptr),
      resid_dropout(nullptr) {
  EMBER_CHECK(n_head > 0 && n_embd > 0 && n_embd % n_head == 0, "CausalSelfAttention: n_embd (", n_embd,
              ") must be a positive multiple of n_head (", n_head, ")");
  c_attn = register_module("c_attn", Linear(LinearOptions(n_embd, 3 * n_embd).bias(bias)));
  c_proj = register_module("c_proj", Linear(LinearOptions(n_embd, n_embd).bias(bias)));
  attn_dropout = register_module("attn_dropout", Dropout(dropout));
  resid_dropout = register_module("resid_dropout", Dropout(dropout));
}

Tensor CausalSelfAttentionImpl::forward(const Tensor& x) {
  EMBER_CHECK(x.dim() == 3 && x.size(2) == n_embd, "CausalSelfAttention: expects input [B, T, ", n_embd,
              "], got shape ", shape_str(x.sizes()));
  const int64_t b = x.size(0), t = x.size(1), c = n_embd, h = n_head, d = c / h;
  const auto qkv = c_attn(x).split(c, 2);                                                 // 3 x [B, T, C]
  auto heads = [&](const Tensor& z) { return z.reshape({b, t, h, d}).transpose(1, 2); };  // [B, H, T, D]
  const Tensor q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);
  // softmax(q k^T / sqrt(d)) v over j <= i: [B, H, T, D]; one autocast op (16-bit weights saved).
  const double p = attn_dropout->is_training() ? attn_dropout->p() : 0.0;
  const Tensor att =
      functional::scaled_dot_product_attention(q, k, v, functional::AttentionOptions().is_causal(true).dropout_p(p));
  const Tensor y = att.transpose(1, 2).reshape({b, t, c});  // heads side by side again
  return resid_dropout(c_proj(y));
}

void CausalSelfAttentionImpl::pretty_print(std::ostream& os) const {
  os << "CausalSelfAttention(n_embd=" << n_embd << ", n_head=" << n_head << ")";
}

MLPImpl::MLPImpl(int64_t n_embd, double p, bool bias)
    : Module("MLP"),
      c_fc(register_module("c_fc", Linear(LinearOptions(n_embd, 4 * n_embd).bias(bias)))),
      gelu(register_module("gelu", GELU())),
      c_proj(register_module("c_proj", Linear(LinearOptions(4 * n_embd, n_embd).bias(bias)))),
      dropout(register_module("dropout", Dropout(p))) {}

Tensor MLPImpl::forward(const Tensor& x) { return dropout(c_proj(gelu(c_fc(x)))); }

TransformerBlockImpl::TransformerBlockImpl(int64_t n_embd, int64_t n_head, double dropout, bool bias)
    : Module("TransformerBlock"),
      ln_1(register_module("ln_1", LayerNorm(LayerNormOptions({n_embd})))),
      attn(register_module("attn", CausalSelfAttention(n_embd, n_head, dropout, bias))),
      ln_2(register_module("ln_2", LayerNorm(LayerNormOptions({n_embd})))),
      mlp(register_module("mlp", MLP(n_embd, dropout, bias))) {}

Tensor TransformerBlockImpl::forward(const Tensor& x) {
  const Tensor h = x + attn(ln_1(x));
  return h + mlp(ln_2(h));
}

}  // namespace ember::nn
