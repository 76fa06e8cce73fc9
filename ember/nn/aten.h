#pragma once
// LibTorch's ATen-level functions, torch::nll_loss(x, y, {}, torch::Reduction::Sum),
// torch::dropout(x, 0.5, train), torch::batch_norm(...), with ATen's signatures: the reduction an
// integer, training flags and eps as arguments, ATen's argument order. Each is a thin call of
// nn::functional, which keeps ember's own spellings; the reduction names torch::kMean, kSum,
// kNone and the interpolation modes kNearest, kBilinear are the strings ember's options take.
// Also: nn::functional's LibTorch forms (F::relu, F::max_pool2d(x, F::MaxPool2dFuncOptions(2)),
// F::dropout(x, F::DropoutFuncOptions().p(0.5).training(train)), ...).
#include <string>

#include "ember/nn/functional.h"
#include "ember/nn/modules/activation.h"
#include "ember/nn/modules/conv_pool.h"

namespace ember {

// ATen's reduction codes (at::Reduction).
namespace Reduction {
enum Reduction : int64_t { None = 0, Mean = 1, Sum = 2 };
}  // namespace Reduction
// "none", "mean" or "sum" for a code; an ember::Error naming `op` for any other.
std::string reduction_name(int64_t reduction, const char* op);

// The strings that LibTorch's enum tags stand for, in options: .reduction(torch::kSum).
inline constexpr const char* kNone = "none";
inline constexpr const char* kMean = "mean";
inline constexpr const char* kSum = "sum";
inline constexpr const char* kMax = "max";  // EmbeddingBag's mode
inline constexpr const char* kNearest = "nearest";
inline constexpr const char* kBilinear = "bilinear";
inline constexpr const char* kConstant = "constant";  // F::pad's modes
inline constexpr const char* kReflect = "reflect";
inline constexpr const char* kReplicate = "replicate";
inline constexpr const char* kCircular = "circular";
inline constexpr const char* kBatchMean = "batchmean";  // kl_div
inline constexpr const char* kTanh = "tanh";            // RNNOptions::nonlinearity, init's gains
inline constexpr const char* kReLU = "relu";
inline constexpr const char* kGELU = "gelu";  // the Transformer layers' activation
inline constexpr const char* kLeakyReLU = "leaky_relu";
inline constexpr const char* kSigmoid = "sigmoid";
inline constexpr const char* kLinear = "linear";
inline constexpr const char* kFanIn = "fan_in";  // init::kaiming_*_'s mode
inline constexpr const char* kFanOut = "fan_out";

Tensor nll_loss(const Tensor& self, const Tensor& target, const Tensor& weight = {},
                int64_t reduction = Reduction::Mean, int64_t ignore_index = -100);
Tensor cross_entropy_loss(const Tensor& self, const Tensor& target, const Tensor& weight = {},
                          int64_t reduction = Reduction::Mean, int64_t ignore_index = -100,
                          double label_smoothing = 0.0);
Tensor mse_loss(const Tensor& self, const Tensor& target, int64_t reduction = Reduction::Mean);
Tensor l1_loss(const Tensor& self, const Tensor& target, int64_t reduction = Reduction::Mean);
Tensor smooth_l1_loss(const Tensor& self, const Tensor& target, int64_t reduction = Reduction::Mean, double beta = 1.0);
Tensor kl_div(const Tensor& self, const Tensor& target, int64_t reduction = Reduction::Mean, bool log_target = false);
// (binary_cross_entropy(self, target, weight, reduction) with a string is the op itself.)
Tensor binary_cross_entropy(const Tensor& self, const Tensor& target, const Tensor& weight, int64_t reduction);
Tensor binary_cross_entropy_with_logits(const Tensor& self, const Tensor& target, const Tensor& weight = {},
                                        const Tensor& pos_weight = {}, int64_t reduction = Reduction::Mean);
Tensor dropout(const Tensor& input, double p, bool train);
Tensor feature_dropout(const Tensor& input, double p, bool train);  // channels: dropout2d
Tensor layer_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5, bool cudnn_enable = true);
Tensor group_norm(const Tensor& input, int64_t num_groups, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5, bool cudnn_enabled = true);
// ATen's order: the affine parameters before the running statistics.
Tensor batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                  const Tensor& running_var, bool training, double momentum, double eps, bool cudnn_enabled = true);

namespace nn::functional {

// The public ops under their F:: names.
using ::ember::adaptive_avg_pool2d;
using ::ember::avg_pool1d;
using ::ember::conv1d;
using ::ember::conv2d;
using ::ember::conv_transpose2d;
using ::ember::elu;
using ::ember::gelu;
using ::ember::leaky_relu;
using ::ember::linear;
using ::ember::log_softmax;
using ::ember::max_pool1d;
using ::ember::one_hot;
using ::ember::relu;
using ::ember::sigmoid;
using ::ember::silu;
using ::ember::softmax;
using ::ember::softplus;
using ::ember::tanh;

// LibTorch's F:: option types and the calls that take them.
struct DropoutFuncOptions {
  EMBER_ARG(double, p) = 0.5;
  EMBER_ARG(bool, training) = true;
};
using Dropout2dFuncOptions = DropoutFuncOptions;
Tensor dropout(const Tensor& x, const DropoutFuncOptions& options);
Tensor dropout2d(const Tensor& x, const DropoutFuncOptions& options);

struct SoftmaxFuncOptions {
  SoftmaxFuncOptions(int64_t dim) : dim_(dim) {}  // NOLINT(google-explicit-constructor): implicit by design
  EMBER_ARG(int64_t, dim);
  EMBER_ARG(std::optional<DType>, dtype);
};
using LogSoftmaxFuncOptions = SoftmaxFuncOptions;
Tensor softmax(const Tensor& x, const SoftmaxFuncOptions& options);
Tensor log_softmax(const Tensor& x, const SoftmaxFuncOptions& options);

using MaxPool2dFuncOptions = Pool2dOptions;
using AvgPool2dFuncOptions = Pool2dOptions;
Tensor max_pool2d(const Tensor& x, const Pool2dOptions& options);
Tensor avg_pool2d(const Tensor& x, const Pool2dOptions& options);
using MaxPool1dFuncOptions = Pool1dOptions;
using AvgPool1dFuncOptions = Pool1dOptions;
Tensor max_pool1d(const Tensor& x, const Pool1dOptions& options);
Tensor avg_pool1d(const Tensor& x, const Pool1dOptions& options);

using LeakyReLUFuncOptions = LeakyReLUOptions;
using ELUFuncOptions = ELUOptions;
using SoftplusFuncOptions = SoftplusOptions;
Tensor leaky_relu(const Tensor& x, const LeakyReLUOptions& options);
Tensor elu(const Tensor& x, const ELUOptions& options);
Tensor softplus(const Tensor& x, const SoftplusOptions& options);

}  // namespace nn::functional

}  // namespace ember
