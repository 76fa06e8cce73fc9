#pragma once
// Stateless layers: activations, Softmax, Dropout, Flatten and Identity.
#include "ember/nn/functional.h"
#include "ember/nn/module.h"

namespace ember::nn {

class IdentityImpl : public Module {
 public:
  IdentityImpl() : Module("Identity") {}
  Tensor forward(const Tensor& x) override { return x; }
};
EMBER_MODULE(Identity);

class ReLUImpl : public Module {
 public:
  ReLUImpl() : Module("ReLU") {}
  Tensor forward(const Tensor& x) override { return relu(x); }
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

class SoftmaxImpl : public Module {
 public:
  explicit SoftmaxImpl(int64_t dim) : Module("Softmax"), dim_(dim) {}
  Tensor forward(const Tensor& x) override { return softmax(x, dim_); }
  void pretty_print(std::ostream& os) const override { os << "Softmax(dim=" << dim_ << ")"; }

 private:
  int64_t dim_;
};
EMBER_MODULE(Softmax);

// Zeroes elements with probability p in training mode; the identity in eval mode.
class DropoutImpl : public Module {
 public:
  explicit DropoutImpl(double p = 0.5);
  Tensor forward(const Tensor& x) override { return functional::dropout(x, p_, is_training()); }
  void pretty_print(std::ostream& os) const override { os << "Dropout(p=" << p_ << ")"; }
  double p() const { return p_; }

 private:
  double p_;
};
EMBER_MODULE(Dropout);

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

}  // namespace ember::nn
