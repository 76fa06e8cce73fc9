#pragma once
// Lookup tables under LibTorch's names: Embedding and EmbeddingBag, the modules and their F::
// calls, with PyTorch's options (Note [Embedding options]).
//
// Note [Embedding options]: `padding_idx` names a row that is looked up as usual but receives
// no gradient (a bag leaves it out altogether: it adds nothing and is not counted in a mean);
// `max_norm` renormalizes, in place and before the lookup, every referenced row whose
// `norm_type`-norm exceeds it, to max_norm / (norm + 1e-7) times itself, as PyTorch's
// embedding_renorm_ (so the weight changes under the optimizer's feet, as in PyTorch);
// `scale_grad_by_freq` divides the gradient each row gets by how often its index occurs in the
// batch. A bag reduces the rows of each of its members: "sum" (optionally weighted by
// per_sample_weights), "mean" or "max" (the gradient goes to the row that gave each maximum);
// an empty bag gives zeros. Bags come from a 2-D input (one bag per row) or a 1-D input with
// `offsets` (bag b is input[offsets[b] : offsets[b + 1]]; `include_last_offset` when offsets
// carries the end too). `sparse` gradients are not in ember: asking for them is refused.
#include <optional>
#include <string>

#include "ember/nn/module.h"
#include "ember/tensor/arg.h"

namespace ember::nn {

struct EmbeddingOptions {
  EmbeddingOptions(int64_t num_embeddings, int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}
  EMBER_ARG(int64_t, num_embeddings);
  EMBER_ARG(int64_t, embedding_dim);
  EMBER_ARG(std::optional<int64_t>, padding_idx);
  EMBER_ARG(std::optional<double>, max_norm);
  EMBER_ARG(double, norm_type) = 2.0;
  EMBER_ARG(bool, scale_grad_by_freq) = false;
  EMBER_ARG(bool, sparse) = false;  // refused: ember has no sparse gradients
  EMBER_ARG(Tensor, _weight);       // the weight to start from (copied), or undefined: N(0, 1)
};

// Embedding::from_pretrained's options: the rest of EmbeddingOptions, and whether the weight stays fixed.
struct EmbeddingFromPretrainedOptions {
  EMBER_ARG(bool, freeze) = true;
  EMBER_ARG(std::optional<int64_t>, padding_idx);
  EMBER_ARG(std::optional<double>, max_norm);
  EMBER_ARG(double, norm_type) = 2.0;
  EMBER_ARG(bool, scale_grad_by_freq) = false;
  EMBER_ARG(bool, sparse) = false;
};

// A lookup table: weight [num_embeddings, embedding_dim] ~ N(0, 1), the padding row zero.
class EmbeddingImpl : public Module {
 public:
  EmbeddingImpl(int64_t num_embeddings, int64_t embedding_dim);
  explicit EmbeddingImpl(const EmbeddingOptions& options);
  Tensor forward(const Tensor& indices) override;  // any integer shape S -> S + [embedding_dim]
  void reset_parameters();
  void pretty_print(std::ostream& os) const override;

  EmbeddingOptions options;
  Tensor weight;
};

class Embedding : public ModuleHolder<EmbeddingImpl> {
 public:
  using ModuleHolder<EmbeddingImpl>::ModuleHolder;
  using Impl = EmbeddingImpl;
  // A table holding a copy of `embeddings` [num_embeddings, embedding_dim]; frozen (no
  // gradient) unless options.freeze(false).
  static Embedding from_pretrained(const Tensor& embeddings,
                                   const EmbeddingFromPretrainedOptions& options = EmbeddingFromPretrainedOptions());
};

struct EmbeddingBagOptions {
  EmbeddingBagOptions(int64_t num_embeddings, int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}
  EMBER_ARG(int64_t, num_embeddings);
  EMBER_ARG(int64_t, embedding_dim);
  EMBER_ARG(std::optional<double>, max_norm);
  EMBER_ARG(double, norm_type) = 2.0;
  EMBER_ARG(bool, scale_grad_by_freq) = false;
  EMBER_ARG(std::string, mode) = "mean";  // "sum", "mean" or "max" (torch::kSum, kMean, kMax)
  EMBER_ARG(bool, sparse) = false;
  EMBER_ARG(Tensor, _weight);
  EMBER_ARG(bool, include_last_offset) = false;
  EMBER_ARG(std::optional<int64_t>, padding_idx);
};

struct EmbeddingBagFromPretrainedOptions {
  EMBER_ARG(bool, freeze) = true;
  EMBER_ARG(std::optional<double>, max_norm);
  EMBER_ARG(double, norm_type) = 2.0;
  EMBER_ARG(bool, scale_grad_by_freq) = false;
  EMBER_ARG(std::string, mode) = "mean";
  EMBER_ARG(bool, sparse) = false;
  EMBER_ARG(bool, include_last_offset) = false;
  EMBER_ARG(std::optional<int64_t>, padding_idx);
};

// Bags of lookups reduced to one row each: input [B, N] (or [T] with offsets [B]) -> [B, embedding_dim].
class EmbeddingBagImpl : public Module {
 public:
  EmbeddingBagImpl(int64_t num_embeddings, int64_t embedding_dim);
  explicit EmbeddingBagImpl(const EmbeddingBagOptions& options);
  Tensor forward(const Tensor& input) override { return forward(input, Tensor(), Tensor()); }
  Tensor forward(const Tensor& input, const Tensor& offsets, const Tensor& per_sample_weights = {});
  void reset_parameters();
  void pretty_print(std::ostream& os) const override;

  EmbeddingBagOptions options;
  Tensor weight;
};

class EmbeddingBag : public ModuleHolder<EmbeddingBagImpl> {
 public:
  using ModuleHolder<EmbeddingBagImpl>::ModuleHolder;
  using Impl = EmbeddingBagImpl;
  static EmbeddingBag from_pretrained(
      const Tensor& embeddings, const EmbeddingBagFromPretrainedOptions& options = EmbeddingBagFromPretrainedOptions());
};

namespace functional {

struct EmbeddingFuncOptions {
  EMBER_ARG(std::optional<int64_t>, padding_idx);
  EMBER_ARG(std::optional<double>, max_norm);
  EMBER_ARG(double, norm_type) = 2.0;
  EMBER_ARG(bool, scale_grad_by_freq) = false;
  EMBER_ARG(bool, sparse) = false;
};
// LibTorch's order: the indices first. (torch::embedding(weight, indices) is ATen's.)
Tensor embedding(const Tensor& input, const Tensor& weight, const EmbeddingFuncOptions& options = {});

struct EmbeddingBagFuncOptions {
  EMBER_ARG(Tensor, offsets);
  EMBER_ARG(std::optional<double>, max_norm);
  EMBER_ARG(double, norm_type) = 2.0;
  EMBER_ARG(bool, scale_grad_by_freq) = false;
  EMBER_ARG(std::string, mode) = "mean";
  EMBER_ARG(bool, sparse) = false;
  EMBER_ARG(Tensor, per_sample_weights);
  EMBER_ARG(bool, include_last_offset) = false;
  EMBER_ARG(std::optional<int64_t>, padding_idx);
};
Tensor embedding_bag(const Tensor& input, const Tensor& weight, const EmbeddingBagFuncOptions& options = {});

}  // namespace functional

}  // namespace ember::nn
