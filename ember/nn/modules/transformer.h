#pragma once
// The pieces of a small GPT (pre-norm transformer decoder, nanoGPT's layout and names):
// causal multi-head self-attention, the MLP, and the block that joins them.
#include "ember/nn/modules/activation.h"
#include "ember/nn/modules/linear.h"
#include "ember/nn/modules/norm.h"

namespace ember::nn {

// x [B, T, C] -> [B, T, C]. Each position attends to itself and the positions before it:
// softmax(q kᵀ / √d + causal mask) v per head, d = C / n_head. c_attn projects to q, k, v at
// once (weight [3C, C]); c_proj mixes the heads.
class CausalSelfAttentionImpl : public Module {
 public:
  CausalSelfAttentionImpl(int64_t n_embd, int64_t n_head, double dropout = 0.0, bool bias = true);
  Tensor forward(const Tensor& x) override;
  void pretty_print(std::ostream& os) const override;

  int64_t n_embd, n_head;
  Linear c_attn, c_proj;
  Dropout attn_dropout, resid_dropout;
};
EMBER_MODULE(CausalSelfAttention);

// x [..., C] -> [..., C]: Linear(C, 4C), GELU, Linear(4C, C), dropout.
class MLPImpl : public Module {
 public:
  MLPImpl(int64_t n_embd, double dropout = 0.0, bool bias = true);
  Tensor forward(const Tensor& x) override;
  Linear c_fc;  // members in registration order: it is the state_dict order
  GELU gelu;
  Linear c_proj;
  Dropout dropout;
};
EMBER_MODULE(MLP);

// x + attn(ln_1(x)), then x + mlp(ln_2(x)).
class TransformerBlockImpl : public Module {
 public:
  TransformerBlockImpl(int64_t n_embd, int64_t n_head, double dropout = 0.0, bool bias = true);
  Tensor forward(const Tensor& x) override;
  LayerNorm ln_1;  // members in registration order: it is the state_dict order
  CausalSelfAttention attn;
  LayerNorm ln_2;
  MLP mlp;
};
EMBER_MODULE(TransformerBlock);

}  // namespace ember::nn
