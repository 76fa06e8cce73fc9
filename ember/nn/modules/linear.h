#pragma once
// Linear: y = x Wᵀ + b. (Embedding, the other layer that owns a weight matrix, is in embedding.h.)

#include "ember/nn/module.h"
#include "ember/nn/modules/embedding.h"  // (Embedding lived here)
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

}  // namespace ember::nn
