#pragma once
// Linear and Embedding: the layers that own a weight matrix.
#include <optional>

#include "ember/nn/module.h"
#include "ember/tensor/arg.h"

namespace ember::nn {

struct LinearOptions {
  LinearOptions(int64_t in_features, int64_t out_features) : in_features_(in_features), out_features_(out_features) {}
  int64_t in_features_, out_features_;
  EMBER_ARG(bool, bias) = true;
};

// y = x Wᵀ + b; weight [out, in], bias [out]. Initialised as PyTorch does: kaiming-uniform
// with a = √5 (U(±1/√in)) for the weight and U(±1/√in) for the bias.
class LinearImpl : public Module {
 public:
  LinearImpl(int64_t in_features, int64_t out_features, bool bias = true);
  explicit LinearImpl(const LinearOptions& options);
  Tensor forward(const Tensor& x) override;
  void reset_parameters();
  void pretty_print(std::ostream& os) const override;

  LinearOptions options;
  Tensor weight, bias;
};
EMBER_MODULE(Linear);

struct EmbeddingOptions {
  EmbeddingOptions(int64_t num_embeddings, int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}
  int64_t num_embeddings_, embedding_dim_;
  EMBER_ARG(std::optional<int64_t>, padding_idx);
};

// A lookup table: weight [num_embeddings, embedding_dim] ~ N(0, 1). Rows at padding_idx start
// at zero and receive no gradient from this layer.
class EmbeddingImpl : public Module {
 public:
  EmbeddingImpl(int64_t num_embeddings, int64_t embedding_dim);
  explicit EmbeddingImpl(const EmbeddingOptions& options);
  Tensor forward(const Tensor& indices) override;  // any integer shape S -> S + [embedding_dim]
  void pretty_print(std::ostream& os) const override;

  EmbeddingOptions options;
  Tensor weight;
};
EMBER_MODULE(Embedding);

}  // namespace ember::nn
