// MultiheadAttention, TransformerEncoderLayer and TransformerEncoder against PyTorch
// (tools/gen_reference_nn.py, "mha.*" and "encoder.*"): PyTorch's weights loaded by their names
// (a strict load), the same inputs and masks; the outputs, the attention weights and every
// gradient must agree. Then what the reference files cannot show: the fused path, the clones,
// the refusals.
#include <functional>
#include <sstream>

#include "helpers.h"

namespace ember {
namespace {

using Ref = std::map<std::string, Tensor>;

void load_state(nn::Module& module, const Ref& ref, const std::string& base) {
  StateDict state;
  for (const auto& [key, t] : ref)
    if (key.rfind(base + "state.", 0) == 0) state.insert(key.substr(base.size() + 6), t.clone());
  module.load_state_dict(state);
}

nn::MultiheadAttention make_attention(const std::string& name) {
  using nn::MultiheadAttentionOptions;
  if (name == "self") return nn::MultiheadAttention(8, 2);
  if (name == "cross_masks") return nn::MultiheadAttention(8, 4);
  if (name == "kdim_vdim_bias_kv_zero_attn")
    return nn::MultiheadAttention(
        MultiheadAttentionOptions(6, 2).kdim(5).vdim(3).add_bias_kv(true).add_zero_attn(true));
  if (name == "unbatched_no_weights") return nn::MultiheadAttention(MultiheadAttentionOptions(8, 2).bias(false));
  if (name == "attn_mask_3d") return nn::MultiheadAttention(4, 2);
  throw Error("no case " + name);
}

class MultiheadAttentionTest : public ::testing::TestWithParam<std::tuple<DeviceType, std::string>> {};

TEST_P(MultiheadAttentionTest, MatchesPyTorch) {
  const Device device(std::get<0>(GetParam()));
  const std::string name = std::get<1>(GetParam()), base = "mha." + name + ".";
  if (device.is_cuda() && !cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const auto& ref = testing::reference_nn();
  const auto at = [&](const std::string& key) { return testing::ref_tensor(ref, base + key); };
  const auto optional = [&](const std::string& key) { return ref.count(base + key) ? at(key).to(device) : Tensor(); };
  nn::MultiheadAttention attention = make_attention(name);
  load_state(*attention, ref, base);
  attention->to(device);
  const double tol = device.is_cuda() ? 1e-4 : 1e-5;

  std::vector<Tensor> inputs;
  for (int i = 0; ref.count(base + "in" + std::to_string(i)); ++i)
    inputs.push_back(at("in" + std::to_string(i)).to(device, false, true).set_requires_grad(true));
  const bool self_attention = inputs.size() == 1;
  const Tensor& q = inputs[0];
  const Tensor& k = self_attention ? q : inputs[1];
  const Tensor& v = self_attention ? q : inputs[2];
  const bool need_weights = ref.count(base + "weights") > 0;
  auto [out, weights] = attention->forward(q, k, v, optional("key_padding_mask"), need_weights, optional("attn_mask"),
                                           name != "cross_masks");
  EXPECT_TRUE(testing::all_close(out.cpu(), at("out"), tol, tol)) << name << " output";
  Tensor loss = (out * at("gout").to(device)).sum();
  EXPECT_EQ(weights.defined(), need_weights);
  if (need_weights) {
    EXPECT_TRUE(testing::all_close(weights.cpu(), at("weights"), tol, tol)) << name << " attention weights";
    loss = loss + (weights * at("gweights").to(device)).sum();
  }
  loss.backward();
  for (size_t i = 0; i < inputs.size(); ++i)
    EXPECT_TRUE(testing::all_close(inputs[i].grad().cpu(), at("grad_in" + std::to_string(i)), tol, tol))
        << name << " gradient of input " << i;
  for (const auto& p : attention->named_parameters())
    EXPECT_TRUE(testing::all_close(p.value().grad().cpu(), at("grad." + p.key()), tol, tol))
        << name << " gradient of " << p.key();
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<DeviceType, std::string>>& info) {
  return std::string(std::get<0>(info.param) == kCPU ? "cpu_" : "cuda_") + std::get<1>(info.param);
}

INSTANTIATE_TEST_SUITE_P(NN, MultiheadAttentionTest,
                         ::testing::Combine(::testing::Values(kCPU, kCUDA),
                                            ::testing::Values("self", "cross_masks", "kdim_vdim_bias_kv_zero_attn",
                                                              "unbatched_no_weights", "attn_mask_3d")),
                         case_name);

std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)> make_encoder(const std::string& name,
                                                                                std::shared_ptr<nn::Module>& module) {
  using nn::TransformerEncoderLayerOptions;
  if (name == "layer") {
    nn::TransformerEncoderLayer layer(TransformerEncoderLayerOptions(8, 2).dim_feedforward(16).dropout(0.0));
    module = layer.ptr();
    return [layer](const Tensor& x, const Tensor& m, const Tensor& p) { return layer->forward(x, m, p); };
  }
  if (name == "layer_gelu_norm_first_batch_first") {
    nn::TransformerEncoderLayer layer(TransformerEncoderLayerOptions(8, 2)
                                          .dim_feedforward(12)
                                          .dropout(0.0)
                                          .activation("gelu")
                                          .norm_first(true)
                                          .batch_first(true));
    module = layer.ptr();
    return [layer](const Tensor& x, const Tensor& m, const Tensor& p) { return layer->forward(x, m, p); };
  }
  if (name == "stack_norm") {
    nn::TransformerEncoder encoder(
        nn::TransformerEncoderOptions(TransformerEncoderLayerOptions(8, 2).dim_feedforward(16).dropout(0.0), 2)
            .norm(nn::AnyModule(nn::LayerNorm(nn::LayerNormOptions({8})))));
    module = encoder.ptr();
    return [encoder](const Tensor& x, const Tensor& m, const Tensor& p) { return encoder->forward(x, m, p); };
  }
  throw Error("no case " + name);
}

class TransformerEncoderTest : public ::testing::TestWithParam<std::tuple<DeviceType, std::string>> {};

TEST_P(TransformerEncoderTest, MatchesPyTorch) {
  const Device device(std::get<0>(GetParam()));
  const std::string name = std::get<1>(GetParam()), base = "encoder." + name + ".";
  if (device.is_cuda() && !cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const auto& ref = testing::reference_nn();
  const auto at = [&](const std::string& key) { return testing::ref_tensor(ref, base + key); };
  const auto optional = [&](const std::string& key) { return ref.count(base + key) ? at(key).to(device) : Tensor(); };
  std::shared_ptr<nn::Module> module;
  const auto forward = make_encoder(name, module);
  load_state(*module, ref, base);
  module->to(device);
  const double tol = device.is_cuda() ? 1e-4 : 1e-5;
  const Tensor x = at("in").to(device, false, true).set_requires_grad(true);
  const Tensor out = forward(x, optional("mask"), optional("key_padding_mask"));
  EXPECT_TRUE(testing::all_close(out.cpu(), at("out"), tol, tol)) << name << " output";
  (out * at("gout").to(device)).sum().backward();
  EXPECT_TRUE(testing::all_close(x.grad().cpu(), at("grad_in"), tol, tol)) << name << " input gradient";
  for (const auto& p : module->named_parameters())
    EXPECT_TRUE(testing::all_close(p.value().grad().cpu(), at("grad." + p.key()), tol, tol))
        << name << " gradient of " << p.key();
}

INSTANTIATE_TEST_SUITE_P(NN, TransformerEncoderTest,
                         ::testing::Combine(::testing::Values(kCPU, kCUDA),
                                            ::testing::Values("layer", "layer_gelu_norm_first_batch_first",
                                                              "stack_norm")),
                         case_name);

TEST(MultiheadAttention, FusedPathEqualsTheWeightsPathAndDropoutOnlyTrains) {
  manual_seed(5);
  nn::MultiheadAttention attention(nn::MultiheadAttentionOptions(8, 2).dropout(0.5));
  const Tensor x = randn({4, 3, 8});
  const Tensor mask = ones({4, 4}, TensorOptions().dtype(kBool)).triu(1);
  attention->eval();
  auto [with_weights, weights] = attention->forward(x, x, x, {}, true, mask);
  auto [fused, none] = attention->forward(x, x, x, {}, false, mask);
  EXPECT_FALSE(none.defined());
  EXPECT_TRUE(testing::all_close(fused, with_weights, 1e-5, 1e-6)) << "need_weights=false takes the fused op";
  EXPECT_TRUE(testing::all_close(weights.sum(-1), ones({3, 4}), 1e-5, 1e-6)) << "each query's weights sum to 1";
  EXPECT_EQ(weights.select(1, 0).select(1, 1).abs().max().item<float>(), 0.0f) << "the mask hides later keys";
  attention->train();
  auto [dropped, w] = attention->forward(x, x, x, {}, true, mask);
  EXPECT_GT((w == 0).sum().item<int64_t>(), (weights == 0).sum().item<int64_t>()) << "dropout zeroes weights";
}

TEST(TransformerEncoder, LayersStartAsClonesOfThePrototypeAndLearnApart) {
  nn::TransformerEncoderLayer prototype(nn::TransformerEncoderLayerOptions(8, 2).dim_feedforward(16));
  nn::TransformerEncoder encoder(prototype, 3);
  ASSERT_EQ(encoder->layers->size(), 3u);
  const auto first = encoder->layers->at<nn::TransformerEncoderLayerImpl>(0);
  const auto third = encoder->layers->at<nn::TransformerEncoderLayerImpl>(2);
  EXPECT_TRUE(testing::all_close(first->linear1->weight, prototype->linear1->weight, 0, 0));
  EXPECT_TRUE(testing::all_close(third->self_attn->in_proj_weight, prototype->self_attn->in_proj_weight, 0, 0));
  EXPECT_FALSE(third->linear1->weight.shares_storage(first->linear1->weight)) << "copies, not shared";
  EXPECT_EQ(encoder->named_parameters().size(), 3u * 12u);
  EXPECT_TRUE(encoder->named_parameters().contains("layers.2.self_attn.out_proj.weight"));
  std::ostringstream printed;
  printed << *first;
  EXPECT_NE(
      printed.str().find("(self_attn): MultiheadAttention(\n    (out_proj): Linear(in_features=8, out_features=8"),
      std::string::npos)
      << printed.str();
}

TEST(MultiheadAttention, RefusesBadShapesAndMasks) {
  nn::MultiheadAttention attention(8, 2);
  const Tensor x = randn({4, 3, 8});
  EXPECT_ERROR_CONTAINS(nn::MultiheadAttention(8, 3), "embed_dim (8) must be a positive multiple of num_heads (3)");
  EXPECT_ERROR_CONTAINS(attention->forward(x, x, randn({4, 3, 7})), "value [S, N, 8]");
  EXPECT_ERROR_CONTAINS(attention->forward(x, x, x, {}, true, ones({4, 5})), "attn_mask must be [4, 4] or [6, 4, 4]");
  EXPECT_ERROR_CONTAINS(attention->forward(x, x, x, ones({3, 4}, TensorOptions().dtype(kInt64))),
                        "key_padding_mask must be bool (or uint8) or floating, got int64");
  EXPECT_ERROR_CONTAINS(attention->forward(x, x, x, zeros({4, 3}, TensorOptions().dtype(kBool))),
                        "key_padding_mask must be [3, 4]");
  EXPECT_ERROR_CONTAINS(nn::TransformerEncoderLayer(nn::TransformerEncoderLayerOptions(8, 2).activation("tanh")),
                        "activation must be \"relu\", \"gelu\" or a function");
  EXPECT_ERROR_CONTAINS(nn::AnyModule().forward(x), "forward on an empty AnyModule");
}

}  // namespace
}  // namespace ember
