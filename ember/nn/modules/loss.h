#pragma once
// Losses as modules: thin holders of nn::functional options; forward(input, target).
#include "ember/nn/functional.h"
#include "ember/nn/module.h"

namespace ember::nn {

class CrossEntropyLossImpl : public Module {
 public:
  explicit CrossEntropyLossImpl(functional::CrossEntropyOptions options = {})
      : Module("CrossEntropyLoss"), options(std::move(options)) {}
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target) {
    return functional::cross_entropy(input, target, options);
  }
  functional::CrossEntropyOptions options;
};
EMBER_MODULE(CrossEntropyLoss);

class NLLLossImpl : public Module {
 public:
  explicit NLLLossImpl(functional::NLLLossOptions options = {}) : Module("NLLLoss"), options(std::move(options)) {}
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target) { return functional::nll_loss(input, target, options); }
  functional::NLLLossOptions options;
};
EMBER_MODULE(NLLLoss);

// On probabilities (after a sigmoid); BCEWithLogitsLoss on logits is the stable choice.
class BCELossImpl : public Module {
 public:
  explicit BCELossImpl(functional::BCELossOptions options = {}) : Module("BCELoss"), options(std::move(options)) {}
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target) {
    return functional::binary_cross_entropy(input, target, options);
  }
  functional::BCELossOptions options;
};
EMBER_MODULE(BCELoss);

class BCEWithLogitsLossImpl : public Module {
 public:
  explicit BCEWithLogitsLossImpl(functional::BCEWithLogitsOptions options = {})
      : Module("BCEWithLogitsLoss"), options(std::move(options)) {}
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target) {
    return functional::binary_cross_entropy_with_logits(input, target, options);
  }
  functional::BCEWithLogitsOptions options;
};
EMBER_MODULE(BCEWithLogitsLoss);

// The losses whose only option is the reduction ("mean", "sum", "none").
#define EMBER_REDUCTION_LOSS(Name, fn)                                                                      \
  class Name##Impl : public Module {                                                                        \
   public:                                                                                                  \
    explicit Name##Impl(std::string reduction = "mean") : Module(#Name), reduction(std::move(reduction)) {} \
    explicit Name##Impl(const functional::ReductionOptions& options) : Name##Impl(options.reduction_) {}    \
    using Module::forward;                                                                                  \
    Tensor forward(const Tensor& input, const Tensor& target) { return fn(input, target, reduction); }      \
    std::string reduction;                                                                                  \
  };                                                                                                        \
  EMBER_MODULE(Name)

EMBER_REDUCTION_LOSS(MSELoss, functional::mse_loss);
EMBER_REDUCTION_LOSS(L1Loss, functional::l1_loss);
#undef EMBER_REDUCTION_LOSS

class SmoothL1LossImpl : public Module {
 public:
  explicit SmoothL1LossImpl(std::string reduction = "mean", double beta = 1.0)
      : Module("SmoothL1Loss"), reduction(std::move(reduction)), beta(beta) {}
  explicit SmoothL1LossImpl(const functional::SmoothL1LossOptions& options)
      : SmoothL1LossImpl(options.reduction_, options.beta_) {}
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target) {
    return functional::smooth_l1_loss(input, target, reduction, beta);
  }
  std::string reduction;
  double beta;
};
EMBER_MODULE(SmoothL1Loss);

class HuberLossImpl : public Module {
 public:
  explicit HuberLossImpl(functional::HuberLossOptions options = {})
      : Module("HuberLoss"), options(std::move(options)) {}
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target) { return functional::huber_loss(input, target, options); }
  functional::HuberLossOptions options;
};
EMBER_MODULE(HuberLoss);

class KLDivLossImpl : public Module {
 public:
  explicit KLDivLossImpl(std::string reduction = "mean", bool log_target = false)
      : Module("KLDivLoss"), reduction(std::move(reduction)), log_target(log_target) {}
  explicit KLDivLossImpl(const functional::KLDivLossOptions& options)
      : KLDivLossImpl(options.reduction_, options.log_target_) {}
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target) {
    return functional::kl_div(input, target, reduction, log_target);
  }
  std::string reduction;
  bool log_target;
};
EMBER_MODULE(KLDivLoss);

// LibTorch's option names for these losses.
using CrossEntropyLossOptions = functional::CrossEntropyOptions;
using NLLLossOptions = functional::NLLLossOptions;
using BCELossOptions = functional::BCELossOptions;
using BCEWithLogitsLossOptions = functional::BCEWithLogitsOptions;
using MSELossOptions = functional::ReductionOptions;
using L1LossOptions = functional::ReductionOptions;
using SmoothL1LossOptions = functional::SmoothL1LossOptions;
using HuberLossOptions = functional::HuberLossOptions;
using KLDivLossOptions = functional::KLDivLossOptions;

}  // namespace ember::nn
