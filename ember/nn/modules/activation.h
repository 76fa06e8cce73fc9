#pragma once
// Activations (PReLU's slope is its one parameter), Softmax, Dropout, Flatten, Identity, Functional and Upsample.
#include <functional>
#include <tuple>

#include "ember/nn/functional.h"
#include "ember/nn/module.h"

namespace ember::nn {

class IdentityImpl : public Module {
 public:
  IdentityImpl() : Module("Identity") {}
  Tensor forward(const Tensor& x) override { return x; }
};
EMBER_MODULE(Identity);

struct ReLUOptions {
  ReLUOptions(bool inplace = false) : inplace_(inplace) {}  // NOLINT(google-explicit-constructor): as LibTorch's
  EMBER_ARG(bool, inplace);
};
// max(x, 0). With inplace, x itself is overwritten and returned where the tape would not record
// the op (grad mode off, or x needs no gradient); where it would, ember's tape records no
// in-place op, so the result is a new tensor with the same values and x stays as it was.
class ReLUImpl : public Module {
 public:
  explicit ReLUImpl(const ReLUOptions& options = {}) : Module("ReLU"), options(options) {}
  Tensor forward(const Tensor& x) override;
  void pretty_print(std::ostream& os) const override { os << (options.inplace_ ? "ReLU(inplace=true)" : "ReLU()"); }
  ReLUOptions options;
};
EMBER_MODULE(ReLU);

class GELUImpl : public Module {
 public:
  explicit GELUImpl(std::string approximate = "none");
  Tensor forward(const Tensor& x) override { return gelu(x, approximate_); }
  void pretty_print(std::ostream& os) const override;

 private:
  std::string approximate_;
};
EMBER_MODULE(GELU);

class SiLUImpl : public Module {
 public:
  SiLUImpl() : Module("SiLU") {}
  Tensor forward(const Tensor& x) override { return silu(x); }
};
EMBER_MODULE(SiLU);

class TanhImpl : public Module {
 public:
  TanhImpl() : Module("Tanh") {}
  Tensor forward(const Tensor& x) override { return tanh(x); }
};
EMBER_MODULE(Tanh);

class SigmoidImpl : public Module {
 public:
  SigmoidImpl() : Module("Sigmoid") {}
  Tensor forward(const Tensor& x) override { return sigmoid(x); }
};
EMBER_MODULE(Sigmoid);

struct LeakyReLUOptions {
  EMBER_ARG(double, negative_slope) = 0.01;
};
// x where x > 0, negative_slope x elsewhere.
class LeakyReLUImpl : public Module {
 public:
  explicit LeakyReLUImpl(const LeakyReLUOptions& options = {}) : Module("LeakyReLU"), options(options) {}
  Tensor forward(const Tensor& x) override { return leaky_relu(x, options.negative_slope_); }
  void pretty_print(std::ostream& os) const override {
    os << "LeakyReLU(negative_slope=" << options.negative_slope_ << ")";
  }
  LeakyReLUOptions options;
};
EMBER_MODULE(LeakyReLU);

struct ELUOptions {
  EMBER_ARG(double, alpha) = 1.0;
};
// x where x > 0, alpha (e^x - 1) elsewhere.
class ELUImpl : public Module {
 public:
  explicit ELUImpl(const ELUOptions& options = {}) : Module("ELU"), options(options) {}
  Tensor forward(const Tensor& x) override { return elu(x, options.alpha_); }
  void pretty_print(std::ostream& os) const override { os << "ELU(alpha=" << options.alpha_ << ")"; }
  ELUOptions options;
};
EMBER_MODULE(ELU);

struct PReLUOptions {
  EMBER_ARG(int64_t, num_parameters) = 1;  // 1, or the input's channels (dim 1)
  EMBER_ARG(double, init) = 0.25;
};
// x where x > 0, weight x elsewhere, with a learned slope (one, or one per channel).
class PReLUImpl : public Module {
 public:
  explicit PReLUImpl(const PReLUOptions& options = {});
  Tensor forward(const Tensor& x) override { return functional::prelu(x, weight); }
  void reset_parameters();
  void pretty_print(std::ostream& os) const override;
  PReLUOptions options;
  Tensor weight;  // [num_parameters]
};
EMBER_MODULE(PReLU);

struct SoftplusOptions {
  EMBER_ARG(double, beta) = 1.0;
  EMBER_ARG(double, threshold) = 20.0;
};
// log(1 + exp(beta x)) / beta, and x where beta x > threshold.
class SoftplusImpl : public Module {
 public:
  explicit SoftplusImpl(const SoftplusOptions& options = {}) : Module("Softplus"), options(options) {}
  Tensor forward(const Tensor& x) override { return softplus(x, options.beta_, options.threshold_); }
  void pretty_print(std::ostream& os) const override {
    os << "Softplus(beta=" << options.beta_ << ", threshold=" << options.threshold_ << ")";
  }
  SoftplusOptions options;
};
EMBER_MODULE(Softplus);

// Softmax(1) and Softmax(SoftmaxOptions(1)) alike, as in LibTorch.
struct SoftmaxOptions {
  SoftmaxOptions(int64_t dim) : dim_(dim) {}  // NOLINT(google-explicit-constructor): implicit by design
  EMBER_ARG(int64_t, dim);
};
using LogSoftmaxOptions = SoftmaxOptions;

class SoftmaxImpl : public Module {
 public:
  explicit SoftmaxImpl(const SoftmaxOptions& options) : Module("Softmax"), options(options) {}
  Tensor forward(const Tensor& x) override { return softmax(x, options.dim_); }
  void pretty_print(std::ostream& os) const override { os << "Softmax(dim=" << options.dim_ << ")"; }
  SoftmaxOptions options;
};
EMBER_MODULE(Softmax);

class LogSoftmaxImpl : public Module {
 public:
  explicit LogSoftmaxImpl(const LogSoftmaxOptions& options) : Module("LogSoftmax"), options(options) {}
  Tensor forward(const Tensor& x) override { return log_softmax(x, options.dim_); }
  void pretty_print(std::ostream& os) const override { os << "LogSoftmax(dim=" << options.dim_ << ")"; }
  LogSoftmaxOptions options;
};
EMBER_MODULE(LogSoftmax);

// Any function of one tensor as a module, for a Sequential (LibTorch's nn::Functional):
//   nn::Sequential(nn::Linear(4, 8), nn::Functional(relu), nn::Functional(leaky_relu, 0.2))
// Extra arguments are bound after the tensor.
class FunctionalImpl : public Module {
 public:
  using Function = std::function<Tensor(Tensor)>;
  explicit FunctionalImpl(Function function);
  template <class SomeFunction, class... Args, class = std::enable_if_t<(sizeof...(Args) > 0)>>
  explicit FunctionalImpl(SomeFunction original, Args&&... args)
      : FunctionalImpl(Function([original, bound = std::make_tuple(std::forward<Args>(args)...)](Tensor x) {
          return std::apply([&](const auto&... a) { return Tensor(original(x, a...)); }, bound);
        })) {}
  Tensor forward(const Tensor& x) override { return function_(x); }
  void pretty_print(std::ostream& os) const override { os << "Functional()"; }

 private:
  Function function_;
};
EMBER_MODULE(Functional);

// Dropout(0.5) and Dropout(DropoutOptions().p(0.5)) alike, as in LibTorch.
struct DropoutOptions {
  DropoutOptions(double p = 0.5) : p_(p) {}  // NOLINT(google-explicit-constructor): implicit by design
  EMBER_ARG(double, p);
};
using Dropout2dOptions = DropoutOptions;

// Zeroes elements with probability p in training mode; the identity in eval mode.
class DropoutImpl : public Module {
 public:
  explicit DropoutImpl(const DropoutOptions& options = {});
  Tensor forward(const Tensor& x) override { return functional::dropout(x, p(), is_training()); }
  void pretty_print(std::ostream& os) const override { os << "Dropout(p=" << p() << ")"; }
  double p() const { return options.p_; }
  DropoutOptions options;
};
EMBER_MODULE(Dropout);

// Zeroes whole channels of [N, C, H, W] (or [C, H, W]) with probability p in training mode.
class Dropout2dImpl : public Module {
 public:
  explicit Dropout2dImpl(const Dropout2dOptions& options = {});
  Tensor forward(const Tensor& x) override { return functional::dropout2d(x, p(), is_training()); }
  void pretty_print(std::ostream& os) const override { os << "Dropout2d(p=" << p() << ")"; }
  double p() const { return options.p_; }
  Dropout2dOptions options;
};
EMBER_MODULE(Dropout2d);

class FlattenImpl : public Module {
 public:
  explicit FlattenImpl(int64_t start_dim = 1, int64_t end_dim = -1)
      : Module("Flatten"), start_dim_(start_dim), end_dim_(end_dim) {}
  Tensor forward(const Tensor& x) override { return flatten(x, start_dim_, end_dim_); }
  void pretty_print(std::ostream& os) const override {
    os << "Flatten(start_dim=" << start_dim_ << ", end_dim=" << end_dim_ << ")";
  }
  int64_t start_dim() const { return start_dim_; }
  int64_t end_dim() const { return end_dim_; }

 private:
  int64_t start_dim_, end_dim_;
};
EMBER_MODULE(Flatten);

// functional::interpolate as a layer: Upsample(UpsampleOptions().scale_factor(2).mode("bilinear")).
using UpsampleOptions = functional::InterpolateOptions;
class UpsampleImpl : public Module {
 public:
  explicit UpsampleImpl(const UpsampleOptions& options = {});  // one of size and scale_factor must be set
  Tensor forward(const Tensor& x) override { return functional::interpolate(x, options); }
  void pretty_print(std::ostream& os) const override;
  UpsampleOptions options;
};
EMBER_MODULE(Upsample);

}  // namespace ember::nn
