#pragma once
// Normalization layers: BatchNorm1d/2d, InstanceNorm1d/2d, LayerNorm, GroupNorm.
#include <optional>

#include "ember/nn/module.h"
#include "ember/tensor/arg.h"

namespace ember::nn {

struct BatchNormOptions {
  BatchNormOptions(int64_t num_features) : num_features_(num_features) {}  // NOLINT: implicit by design
  int64_t num_features_;
  EMBER_ARG(double, eps) = 1e-5;
  EMBER_ARG(std::optional<double>, momentum) = 0.1;  // nullopt: cumulative moving average
  EMBER_ARG(bool, affine) = true;
  EMBER_ARG(bool, track_running_stats) = true;
};
using BatchNorm1dOptions = BatchNormOptions;  // LibTorch's names
using BatchNorm2dOptions = BatchNormOptions;

// What BatchNorm and InstanceNorm keep (PyTorch's _NormBase): with affine, the parameters
// weight (ones) and bias (zeros) [C]; with track_running_stats, the buffers running_mean
// (zeros), running_var (ones) and num_batches_tracked (int64, 0-d).
class NormBaseImpl : public Module {
 public:
  void reset_running_stats();  // back to zeros, ones and 0 (nothing without the statistics)
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 protected:
  NormBaseImpl(const char* type_name, int64_t num_features, double eps, bool affine, bool track_running_stats);
};

// Training normalizes with the batch statistics and updates the running ones; eval uses the
// running statistics.
class BatchNormImpl : public NormBaseImpl {
 public:
  BatchNormImpl(const char* type_name, int64_t expected_dims_lo, int64_t expected_dims_hi,
                const BatchNormOptions& options);
  Tensor forward(const Tensor& x) override;
  void pretty_print(std::ostream& os) const override;

  BatchNormOptions options;

 private:
  int64_t dims_lo_, dims_hi_;
};

class BatchNorm1dImpl : public BatchNormImpl {  // input [N, C] or [N, C, L]
 public:
  explicit BatchNorm1dImpl(const BatchNormOptions& options) : BatchNormImpl("BatchNorm1d", 2, 3, options) {}
};
EMBER_MODULE(BatchNorm1d);

class BatchNorm2dImpl : public BatchNormImpl {  // input [N, C, H, W]
 public:
  explicit BatchNorm2dImpl(const BatchNormOptions& options) : BatchNormImpl("BatchNorm2d", 4, 4, options) {}
};
EMBER_MODULE(BatchNorm2d);

struct InstanceNormOptions {
  InstanceNormOptions(int64_t num_features) : num_features_(num_features) {}  // NOLINT: implicit by design
  int64_t num_features_;
  EMBER_ARG(double, eps) = 1e-5;
  EMBER_ARG(double, momentum) = 0.1;
  EMBER_ARG(bool, affine) = false;               // PyTorch's defaults: neither parameters
  EMBER_ARG(bool, track_running_stats) = false;  // nor running statistics
};
using InstanceNorm1dOptions = InstanceNormOptions;  // LibTorch's names
using InstanceNorm2dOptions = InstanceNormOptions;

// Normalizes each sample's channel over its own spatial elements (F::instance_norm). The
// running statistics, when kept, are updated in training and used in eval (without them eval
// normalizes with the input's statistics too). An unbatched input (one dim fewer) is one sample.
class InstanceNormImpl : public NormBaseImpl {
 public:
  InstanceNormImpl(const char* type_name, int64_t batched_dims, const InstanceNormOptions& options);
  Tensor forward(const Tensor& x) override;
  void pretty_print(std::ostream& os) const override;

  InstanceNormOptions options;

 private:
  int64_t batched_dims_;
};
class InstanceNorm1dImpl : public InstanceNormImpl {  // input [N, C, L] or [C, L]
 public:
  explicit InstanceNorm1dImpl(const InstanceNormOptions& options) : InstanceNormImpl("InstanceNorm1d", 3, options) {}
};
EMBER_MODULE(InstanceNorm1d);
class InstanceNorm2dImpl : public InstanceNormImpl {  // input [N, C, H, W] or [C, H, W]
 public:
  explicit InstanceNorm2dImpl(const InstanceNormOptions& options) : InstanceNormImpl("InstanceNorm2d", 4, options) {}
};
EMBER_MODULE(InstanceNorm2d);

struct LayerNormOptions {
  LayerNormOptions(Shape normalized_shape) : normalized_shape_(std::move(normalized_shape)) {}  // NOLINT
  Shape normalized_shape_;
  EMBER_ARG(double, eps) = 1e-5;
  EMBER_ARG(bool, elementwise_affine) = true;
};

class LayerNormImpl : public Module {
 public:
  explicit LayerNormImpl(const LayerNormOptions& options);
  Tensor forward(const Tensor& x) override;
  void pretty_print(std::ostream& os) const override;
  LayerNormOptions options;
  Tensor weight, bias;
};
EMBER_MODULE(LayerNorm);

struct GroupNormOptions {
  GroupNormOptions(int64_t num_groups, int64_t num_channels) : num_groups_(num_groups), num_channels_(num_channels) {}
  EMBER_ARG(int64_t, num_groups);
  EMBER_ARG(int64_t, num_channels);
  EMBER_ARG(double, eps) = 1e-5;
  EMBER_ARG(bool, affine) = true;
};

class GroupNormImpl : public Module {
 public:
  GroupNormImpl(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true);
  explicit GroupNormImpl(const GroupNormOptions& o)
      : GroupNormImpl(o.num_groups_, o.num_channels_, o.eps_, o.affine_) {}
  Tensor forward(const Tensor& x) override;
  void pretty_print(std::ostream& os) const override;
  int64_t num_groups, num_channels;
  double eps;
  Tensor weight, bias;
};
EMBER_MODULE(GroupNorm);

}  // namespace ember::nn
