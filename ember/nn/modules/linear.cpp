#include "ember/nn/modules/linear.h"

#include <cmath>

#include "ember/autograd/grad_mode.h"
#include "ember/nn/init.h"

namespace ember::nn {

LinearImpl::LinearImpl(int64_t in_features, int64_t out_features, bool bias)
    : LinearImpl(LinearOptions(in_features, out_features).bias(bias)) {}

LinearImpl::LinearImpl(const LinearOptions& o) : Module("Linear"), options(o) {
  EMBER_CHECK(o.in_features_ >= 0 && o.out_features_ >= 0,
              "Linear: features must be >= 0, got in_features=", o.in_features_, ", out_features=", o.out_features_);
  weight = register_parameter("weight", empty({o.out_features_, o.in_features_}));
  bind_attribute("weight", weight);  // Note [Tensor attributes]
  if (o.bias_) bias = register_parameter("bias", empty({o.out_features_}));
  bind_attribute("bias", bias);  // Note [Tensor attributes]
  reset_parameters();
}

void LinearImpl::reset_parameters() {
  if (weight.numel() == 0) return;
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(options.in_features_));
    init::uniform_(bias, -bound, bound);
  }
}

Tensor LinearImpl::forward(const Tensor& x) {
  EMBER_CHECK(x.dim() >= 1 && x.size(-1) == options.in_features_, "Linear: expects input [..., ", options.in_features_,
              "], got shape ", shape_str(x.sizes()));
  return linear(x, weight, bias);
}

void LinearImpl::pretty_print(std::ostream& os) const {
  os << "Linear(in_features=" << options.in_features_ << ", out_features=" << options.out_features_
     << ", bias=" << (options.bias_ ? "true" : "false") << ")";
}

EmbeddingImpl::EmbeddingImpl(int64_t num_embeddings, int64_t embedding_dim)
    : EmbeddingImpl(EmbeddingOptions(num_embeddings, embedding_dim)) {}

EmbeddingImpl::EmbeddingImpl(const EmbeddingOptions& o) : Module("Embedding"), options(o) {
  EMBER_CHECK(o.num_embeddings_ > 0 && o.embedding_dim_ > 0,
              "Embedding: sizes must be > 0, got num_embeddings=", o.num_embeddings_,
              ", embedding_dim=", o.embedding_dim_);
  if (o.padding_idx_) {
    int64_t& p = *options.padding_idx_;
    EMBER_CHECK(p >= -o.num_embeddings_ && p < o.num_embeddings_, "Embedding: padding_idx ", p, " is out of range for ",
                o.num_embeddings_, " embeddings");
    if (p < 0) p += o.num_embeddings_;
  }
  weight = register_parameter("weight", empty({o.num_embeddings_, o.embedding_dim_}));
  bind_attribute("weight", weight);  // Note [Tensor attributes]
  init::normal_(weight);
  if (options.padding_idx_) {
    NoGradGuard no_grad;
    weight.select(0, *options.padding_idx_).zero_();
  }
}

Tensor EmbeddingImpl::forward(const Tensor& indices) {
  Tensor out = embedding(weight, indices);
  if (!options.padding_idx_) return out;
  // The padding row's value is looked up as usual, but no gradient flows back to it.
  const Tensor is_pad = (indices == *options.padding_idx_).unsqueeze(-1);
  return where(is_pad, embedding(weight.detach(), indices), out);
}

void EmbeddingImpl::pretty_print(std::ostream& os) const {
  os << "Embedding(" << options.num_embeddings_ << ", " << options.embedding_dim_;
  if (options.padding_idx_) os << ", padding_idx=" << *options.padding_idx_;
  os << ")";
}

}  // namespace ember::nn
