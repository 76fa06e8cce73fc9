// Every layer against PyTorch for fixed weights: tools/gen_reference_nn.py stores each layer's
// state_dict, an input, the output, an upstream gradient and the gradients of the input and
// of every parameter (and buffers after the forward). The ember layer of the same name loads
// that state (which also checks that its state_dict keys and shapes are PyTorch's), runs
// forward and backward, and must agree.
#include <functional>

#include "helpers.h"

namespace ember {
namespace {

using ModulePtr = std::shared_ptr<nn::Module>;

const std::map<std::string, std::function<ModulePtr()>>& factories() {
  using namespace nn;
  static const auto* table = new std::map<std::string, std::function<ModulePtr()>>{
      {"linear", [] { return as_module(Linear(5, 3)); }},
      {"linear_nobias_3d", [] { return as_module(Linear(LinearOptions(5, 3).bias(false))); }},
      {"conv2d", [] { return as_module(Conv2d(Conv2dOptions(4, 6, 3).stride(2).padding(1).groups(2))); }},
      {"conv2d_dilation",
       [] {
         return as_module(Conv2d(Conv2dOptions(3, 5, Int2{3, 2}).padding(Int2{2, 1}).dilation(2)));
       }},
      {"maxpool2d", [] { return as_module(MaxPool2d(Pool2dOptions(3).stride(2).padding(1))); }},
      {"avgpool2d",
       [] {
         return as_module(AvgPool2d(Pool2dOptions(3).stride(2).padding(1).ceil_mode(true).count_include_pad(false)));
       }},
      {"adaptive_avgpool2d",
       [] {
         return as_module(AdaptiveAvgPool2d(Int2{2, 3}));
       }},
      {"batchnorm1d", [] { return as_module(BatchNorm1d(4)); }},
      {"batchnorm1d_3d", [] { return as_module(BatchNorm1d(BatchNormOptions(3).momentum(std::nullopt))); }},
      {"batchnorm2d", [] { return as_module(BatchNorm2d(BatchNormOptions(3).momentum(0.2))); }},
      {"batchnorm2d_eval", [] { return as_module(BatchNorm2d(3)); }},
      {"layernorm",
       [] {
         return as_module(LayerNorm(LayerNormOptions({4, 5})));
       }},
      {"groupnorm", [] { return as_module(GroupNorm(2, 6)); }},
      {"dropout_eval", [] { return as_module(Dropout(0.3)); }},
      {"embedding", [] { return as_module(Embedding(10, 4)); }},
      {"embedding_padding", [] { return as_module(Embedding(EmbeddingOptions(10, 4).padding_idx(1))); }},
      {"flatten", [] { return as_module(Flatten()); }},
      {"identity", [] { return as_module(Identity()); }},
      {"relu", [] { return as_module(ReLU()); }},
      {"gelu", [] { return as_module(GELU()); }},
      {"gelu_tanh", [] { return as_module(GELU("tanh")); }},
      {"silu", [] { return as_module(SiLU()); }},
      {"tanh", [] { return as_module(Tanh()); }},
      {"sigmoid", [] { return as_module(Sigmoid()); }},
      {"softmax", [] { return as_module(Softmax(1)); }},
      {"sequential", [] { return as_module(Sequential(Linear(5, 8), ReLU(), Linear(8, 2))); }},
      {"cnn",
       [] {
         return as_module(Sequential(Conv2d(Conv2dOptions(1, 4, 3).padding(1)), ReLU(), MaxPool2d(2), Flatten(),
                                     Linear(4 * 4 * 4, 10)));
       }},
      {"attention", [] { return as_module(CausalSelfAttention(8, 2)); }},
      {"mlp", [] { return as_module(MLP(8)); }},
      {"block", [] { return as_module(TransformerBlock(8, 2)); }},
      {"conv_transpose2d",
       [] {
         return as_module(
             ConvTranspose2d(ConvTranspose2dOptions(4, 6, 3).stride(2).padding(1).output_padding(1).groups(2)));
       }},
      {"conv_transpose2d_nobias",
       [] {
         return as_module(ConvTranspose2d(ConvTranspose2dOptions(3, 2, Int2{2, 3}).bias(false).dilation(Int2{1, 2})));
       }},
      {"leaky_relu", [] { return as_module(LeakyReLU(LeakyReLUOptions().negative_slope(0.2))); }},
      {"elu", [] { return as_module(ELU(ELUOptions().alpha(0.7))); }},
      {"softplus", [] { return as_module(Softplus(SoftplusOptions().beta(2).threshold(5))); }},
      {"log_softmax", [] { return as_module(LogSoftmax(1)); }},
      {"upsample_nearest", [] { return as_module(Upsample(UpsampleOptions().scale_factor(2.0))); }},
      {"upsample_bilinear",
       [] {
         return as_module(Upsample(UpsampleOptions().size(Shape{5, 7}).mode("bilinear").align_corners(true)));
       }},
      {"dropout2d_eval", [] { return as_module(Dropout2d(0.3)); }},
      {"dcgan_generator",
       [] {
         return as_module(
             Sequential(ConvTranspose2d(ConvTranspose2dOptions(8, 4, 4).bias(false)), BatchNorm2d(4), ReLU(),
                        ConvTranspose2d(ConvTranspose2dOptions(4, 1, 4).stride(2).padding(1).bias(false)), Tanh()));
       }},
  };
  return *table;
}

std::vector<std::string> layer_names() {
  std::vector<std::string> out;
  const std::string prefix = "layer.", suffix = ".gout";
  for (const auto& [key, t] : testing::reference_nn())
    if (key.compare(0, prefix.size(), prefix) == 0 && key.size() > suffix.size() &&
        key.compare(key.size() - suffix.size(), suffix.size(), suffix) == 0)
      out.push_back(key.substr(prefix.size(), key.size() - prefix.size() - suffix.size()));
  return out;
}

// The entries "<prefix><key>" of the reference as a state dict keyed by <key>.
StateDict with_prefix(const std::string& prefix) {
  StateDict out;
  for (const auto& [key, t] : testing::reference_nn())
    if (key.compare(0, prefix.size(), prefix) == 0) out.insert(key.substr(prefix.size()), t.clone());
  return out;
}

// Every layer on the CPU and on CUDA (skipped, and reported so, without a GPU): PyTorch's
// weights are loaded, then the module moves to the device; results come back to compare.
class LayerTest : public ::testing::TestWithParam<std::tuple<DeviceType, std::string>> {};

TEST_P(LayerTest, MatchesPyTorch) {
  const Device device(std::get<0>(GetParam()));
  const std::string name = std::get<1>(GetParam()), base = "layer." + name + ".";
  if (device.is_cuda() && !cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const auto& ref = testing::reference_nn();
  auto factory = factories().find(name);
  ASSERT_NE(factory, factories().end()) << "no ember layer for reference case " << name;
  ModulePtr module = factory->second();
  module->load_state_dict(with_prefix(base + "state."));  // strict: same keys and shapes as PyTorch
  module->train(name.find("_eval") == std::string::npos);
  module->to(device);
  // CUDA sums floats in float, and cuDNN picks its own algorithms: wider tolerances there.
  const double rtol = device.is_cuda() ? 1e-3 : 1e-4, atol = device.is_cuda() ? 1e-4 : 1e-5;

  Tensor x = testing::ref_tensor(ref, base + "in").to(device, /*non_blocking=*/false, /*copy=*/true);
  if (x.is_floating_point()) x.set_requires_grad(true);
  const Tensor out = (*module)(x);
  EXPECT_EQ(out.device(), device) << name;
  EXPECT_TRUE(testing::all_close(out.cpu(), testing::ref_tensor(ref, base + "out"), rtol, atol)) << name << " forward";
  out.backward(testing::ref_tensor(ref, base + "gout").to(device));
  if (x.is_floating_point())
    EXPECT_TRUE(testing::all_close(x.grad().cpu(), testing::ref_tensor(ref, base + "grad_in"), rtol, atol))
        << name << " input gradient";
  for (const auto& p : module->named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << name << " parameter " << p.key() << " got no gradient";
    EXPECT_TRUE(
        testing::all_close(p.value().grad().cpu(), testing::ref_tensor(ref, base + "grad." + p.key()), rtol, atol))
        << name << " gradient of " << p.key();
  }
  for (const auto& b : module->named_buffers())
    EXPECT_TRUE(
        testing::all_close(b.value().cpu(), testing::ref_tensor(ref, base + "after." + b.key()), rtol / 10, atol / 10))
        << name << " buffer " << b.key() << " after the forward";
}

INSTANTIATE_TEST_SUITE_P(NN, LayerTest,
                         ::testing::Combine(::testing::Values(kCPU, kCUDA), ::testing::ValuesIn(layer_names())),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) == kCPU ? "cpu_" : "cuda_") +
                                  std::get<1>(info.param);
                         });

}  // namespace
}  // namespace ember
