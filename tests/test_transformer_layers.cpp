// MultiheadAttention, the Transformer's encoder and decoder layers and stacks, and Transformer
// against PyTorch (tools/gen_reference_nn.py, "mha.*", "encoder.*", "decoder.*" and
// "transformer.*"): PyTorch's weights loaded by their names
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

// A decoder or Transformer case: the module, the names of its two inputs, and its forward, which
// takes the masks by their keyword names (undefined where the case has none).
using MaskOf = std::function<Tensor(const char*)>;
struct TwoInputCase {
  std::shared_ptr<nn::Module> module;
  const char* inputs[2];
  std::function<Tensor(const Tensor&, const Tensor&, const MaskOf&)> forward;
};

TwoInputCase make_two_input(const std::string& kind, const std::string& name) {
  using nn::TransformerDecoderLayerOptions;
  const auto decoder_forward = [](auto module) {
    return [module](const Tensor& tgt, const Tensor& memory, const MaskOf& mask) {
      return module->forward(tgt, memory, mask("tgt_mask"), mask("memory_mask"), mask("tgt_key_padding_mask"),
                             mask("memory_key_padding_mask"));
    };
  };
  const auto transformer_forward = [](nn::Transformer t) {
    return [t](const Tensor& src, const Tensor& tgt, const MaskOf& mask) {
      return t->forward(src, tgt, mask("src_mask"), mask("tgt_mask"), mask("memory_mask"), mask("src_key_padding_mask"),
                        mask("tgt_key_padding_mask"), mask("memory_key_padding_mask"));
    };
  };
  if (kind == "decoder" && name == "layer") {
    nn::TransformerDecoderLayer layer(TransformerDecoderLayerOptions(8, 2).dim_feedforward(16).dropout(0.0));
    return {layer.ptr(), {"tgt", "memory"}, decoder_forward(layer)};
  }
  if (kind == "decoder" && name == "layer_gelu_norm_first_batch_first") {
    nn::TransformerDecoderLayer layer(TransformerDecoderLayerOptions(8, 2)
                                          .dim_feedforward(12)
                                          .dropout(0.0)
                                          .activation(kGELU)
                                          .norm_first(true)
                                          .batch_first(true));
    return {layer.ptr(), {"tgt", "memory"}, decoder_forward(layer)};
  }
  if (kind == "decoder" && name == "stack_norm") {
    nn::TransformerDecoder decoder(
        nn::TransformerDecoderOptions(TransformerDecoderLayerOptions(8, 2).dim_feedforward(16).dropout(0.0), 2)
            .norm(nn::AnyModule(nn::LayerNorm(nn::LayerNormOptions({8})))));
    return {decoder.ptr(), {"tgt", "memory"}, decoder_forward(decoder)};
  }
  if (kind == "transformer" && name == "small") {
    nn::Transformer t(nn::TransformerOptions(8, 2, 2, 1).dim_feedforward(16).dropout(0.0));
    return {t.ptr(), {"src", "tgt"}, transformer_forward(t)};
  }
  if (kind == "transformer" && name == "gelu_norm_first_batch_first") {
    nn::Transformer t(nn::TransformerOptions(6, 3, 1, 2)
                          .dim_feedforward(10)
                          .dropout(0.0)
                          .activation(kGELU)
                          .layer_norm_eps(1e-6)
                          .batch_first(true)
                          .norm_first(true));
    return {t.ptr(), {"src", "tgt"}, transformer_forward(t)};
  }
  throw Error("no case " + kind + "." + name);
}

class TwoInputTransformerTest
    : public ::testing::TestWithParam<std::tuple<DeviceType, std::pair<const char*, const char*>>> {};

TEST_P(TwoInputTransformerTest, MatchesPyTorch) {
  const Device device(std::get<0>(GetParam()));
  const auto [kind, name] = std::get<1>(GetParam());
  const std::string base = std::string(kind) + "." + name + ".";
  if (device.is_cuda() && !cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const auto& ref = testing::reference_nn();
  const auto at = [&](const std::string& key) { return testing::ref_tensor(ref, base + key); };
  const TwoInputCase c = make_two_input(kind, name);
  load_state(*c.module, ref, base);
  c.module->to(device);
  const double tol = device.is_cuda() ? 1e-4 : 1e-5;
  const Tensor a = at(c.inputs[0]).to(device, false, true).set_requires_grad(true);
  const Tensor b = at(c.inputs[1]).to(device, false, true).set_requires_grad(true);
  const Tensor out =
      c.forward(a, b, [&](const char* mask) { return ref.count(base + mask) ? at(mask).to(device) : Tensor(); });
  EXPECT_TRUE(testing::all_close(out.cpu(), at("out"), tol, tol)) << base << " output";
  (out * at("gout").to(device)).sum().backward();
  EXPECT_TRUE(testing::all_close(a.grad().cpu(), at(std::string("grad_") + c.inputs[0]), tol, tol))
      << base << "grad of a";
  EXPECT_TRUE(testing::all_close(b.grad().cpu(), at(std::string("grad_") + c.inputs[1]), tol, tol))
      << base << "grad of b";
  for (const auto& p : c.module->named_parameters())
    EXPECT_TRUE(testing::all_close(p.value().grad().cpu(), at("grad." + p.key()), tol, tol))
        << base << " gradient of " << p.key();
}

INSTANTIATE_TEST_SUITE_P(NN, TwoInputTransformerTest,
                         ::testing::Combine(::testing::Values(kCPU, kCUDA),
                                            ::testing::Values(std::pair("decoder", "layer"),
                                                              std::pair("decoder", "layer_gelu_norm_first_batch_first"),
                                                              std::pair("decoder", "stack_norm"),
                                                              std::pair("transformer", "small"),
                                                              std::pair("transformer", "gelu_norm_first_batch_first"))),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) == kCPU ? "cpu_" : "cuda_") +
                                  std::get<1>(info.param).first + "_" + std::get<1>(info.param).second;
                         });

TEST(Transformer, BuildsPyTorchsModuleTreeWithXavierWeightsAndItsCausalMask) {
  manual_seed(3);
  nn::Transformer t(nn::TransformerOptions(16, 4, 2, 2).dim_feedforward(32));
  // PyTorch's nn.Transformer(16, 4, 2, 2, 32): 64 parameters, 11200 elements
  int64_t elements = 0;
  for (const auto& p : t->parameters()) elements += p.numel();
  EXPECT_EQ(t->parameters().size(), 64u);
  EXPECT_EQ(elements, 11200);
  for (const char* key :
       {"encoder.layers.1.self_attn.in_proj_weight", "encoder.norm.bias",
        "decoder.layers.0.multihead_attn.out_proj.weight", "decoder.layers.1.norm3.weight", "decoder.norm.weight"})
    EXPECT_TRUE(t->named_parameters().contains(key)) << key;
  // xavier-uniform: within ±sqrt(6 / (fan_in + fan_out)), each copy drawn on its own
  const Tensor w = t->decoder->layers->at<nn::TransformerDecoderLayerImpl>(1)->linear1->weight;
  EXPECT_LE(w.abs().max().item<float>(), std::sqrt(6.0f / (16 + 32)));
  EXPECT_GT(w.abs().max().item<float>(), 0.8f * std::sqrt(6.0f / (16 + 32)));
  const Tensor w0 = t->decoder->layers->at<nn::TransformerDecoderLayerImpl>(0)->linear1->weight;
  EXPECT_FALSE(testing::all_close(w, w0, 0, 0)) << "reset_parameters draws every layer again";

  const Tensor mask = nn::TransformerImpl::generate_square_subsequent_mask(4);
  EXPECT_TRUE(testing::all_close(mask.narrow(0, 0, 3).narrow(1, 0, 3),
                                 testing::ref_tensor(testing::reference_nn(), "decoder.stack_norm.tgt_mask"), 0, 0));
  EXPECT_EQ(mask.dtype(), kFloat32);
  EXPECT_EQ(nn::TransformerImpl::generate_square_subsequent_mask(0).numel(), 0);
  EXPECT_ERROR_CONTAINS(nn::TransformerImpl::generate_square_subsequent_mask(-1), "size must be >= 0, got -1");

  // the decoder stack copies its prototype, as the encoder does
  nn::TransformerDecoderLayer prototype(nn::TransformerDecoderLayerOptions(8, 2).dim_feedforward(16));
  nn::TransformerDecoder decoder(prototype, 2);
  const auto second = decoder->layers->at<nn::TransformerDecoderLayerImpl>(1);
  EXPECT_TRUE(
      testing::all_close(second->multihead_attn->in_proj_weight, prototype->multihead_attn->in_proj_weight, 0, 0));
  EXPECT_FALSE(second->linear2->weight.shares_storage(prototype->linear2->weight));
}

TEST(Transformer, RefusesMismatchedInputs) {
  nn::Transformer t(nn::TransformerOptions(8, 2, 1, 1).dim_feedforward(16));
  EXPECT_ERROR_CONTAINS(t->forward(randn({5, 2, 8}), randn({4, 3, 8})),
                        "Transformer: the batch number of src [5, 2, 8] and tgt [4, 3, 8] must be equal");
  EXPECT_ERROR_CONTAINS(t->forward(randn({5, 2, 6}), randn({4, 2, 6})), "must be equal to d_model (8)");
  EXPECT_ERROR_CONTAINS(t->forward(randn({5}), randn({4, 2, 8})), "expected src [S, N, E] or [S, E], got [5]");
  nn::TransformerDecoderLayer layer(nn::TransformerDecoderLayerOptions(8, 2).batch_first(true));
  EXPECT_ERROR_CONTAINS(layer->forward(randn({4, 8}), randn({2, 5, 8})),
                        "TransformerDecoderLayer: tgt [4, 8] and memory [2, 5, 8] must both be batched or both");
  EXPECT_ERROR_CONTAINS(layer->forward(randn({2, 4, 8}), Tensor()), "memory [S, N, E] ([N, S, E] with batch_first)");
  EXPECT_ERROR_CONTAINS(nn::TransformerDecoderLayer(nn::TransformerDecoderLayerOptions(8, 2).dim_feedforward(0)),
                        "TransformerDecoderLayer: dim_feedforward must be > 0, got 0");
  EXPECT_ERROR_CONTAINS(nn::TransformerDecoder(nn::TransformerDecoderLayer(nullptr), 2),
                        "TransformerDecoder: the layer to copy is empty");
  EXPECT_ERROR_CONTAINS(nn::Transformer(nn::TransformerOptions(8, 2, -1, 1)), "must be >= 0, got -1 and 1");
}

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
