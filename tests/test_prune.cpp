// Pruning (nn/prune.h): masks, names, hooks, composition and remove() against PyTorch's
// torch.nn.utils.prune on the same tensors (tests/reference/quant.bin, tools/gen_reference_quant.py).
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "helpers.h"

namespace ember {
namespace {

using testing::all_close;
using testing::ref_tensor;
using testing::reference_quant;
namespace prune = nn::utils::prune;

const Tensor& R(const std::string& name) { return ref_tensor(reference_quant(), name); }

// The state_dict keys stored by the generator (bytes of the keys joined by newlines).
std::string ref_keys(const std::string& name) {
  std::string s;
  for (auto b : R(name).to_vector<int64_t>()) s += static_cast<char>(b);
  return s;
}
std::string keys_of(const nn::Module& m) {
  std::string s;
  for (const auto& item : m.state_dict()) s += (s.empty() ? "" : "\n") + item.key();
  return s;
}

void set_weight(nn::Module& m, const Tensor& w) {
  NoGradGuard no_grad;
  m.find_parameter("weight")->copy_(w);
}

TEST(Prune, L1UnstructuredAndItsCompositionMatchPyTorch) {
  nn::Linear lin(5, 6);
  set_weight(*lin, R("prune.l1.w"));
  prune::l1_unstructured(*lin, "weight", 0.3);
  EXPECT_TRUE(all_close(*lin->find_buffer("weight_mask"), R("prune.l1.mask1"), 0, 0));
  EXPECT_EQ(lin->find_buffer("weight_mask")->sum().item<double>(), 30 - 9);
  // 0.5 of the 21 that remain: round(10.5) = 10, half to even as Python's round.
  prune::l1_unstructured(*lin, "weight", 0.5);
  EXPECT_TRUE(all_close(*lin->find_buffer("weight_mask"), R("prune.l1.mask2"), 0, 0));
  EXPECT_EQ(lin->find_buffer("weight_mask")->sum().item<double>(), 11);
  EXPECT_EQ(prune::find_hook(*lin, "weight")->methods.size(), 2u);
  // The weight the forward reads is orig * mask.
  EXPECT_TRUE(all_close(lin->weight, R("prune.l1.w") * R("prune.l1.mask2"), 0, 0));

  nn::Linear counted(4, 5);
  set_weight(*counted, R("prune.l1_count.w"));
  prune::l1_unstructured(*counted, "weight", 7);
  EXPECT_TRUE(all_close(*counted->find_buffer("weight_mask"), R("prune.l1_count.mask"), 0, 0));
}

TEST(Prune, LnStructuredChannelsAndNormsMatchPyTorch) {
  nn::Conv2d conv(3, 8, 3);
  set_weight(*conv, R("prune.ln.w"));
  prune::ln_structured(*conv, "weight", 0.25, 2, 0);
  EXPECT_TRUE(all_close(*conv->find_buffer("weight_mask"), R("prune.ln.mask1"), 0, 0));
  // Along the input channels now, by L1 norm, only over the six output channels still alive.
  prune::ln_structured(*conv, "weight", 0.5, 1, 1);
  EXPECT_TRUE(all_close(*conv->find_buffer("weight_mask"), R("prune.ln.mask2"), 0, 0));

  nn::Conv2d by_max(3, 8, 3);
  set_weight(*by_max, R("prune.ln.w"));
  prune::ln_structured(*by_max, "weight", 2, std::numeric_limits<double>::infinity(), 0);
  EXPECT_TRUE(all_close(*by_max->find_buffer("weight_mask"), R("prune.ln.mask_inf"), 0, 0));
}

TEST(Prune, GlobalUnstructuredSharesOneThresholdAcrossTensors) {
  nn::Linear a(4, 6), b(6, 3);
  set_weight(*a, R("prune.global.w1"));
  set_weight(*b, R("prune.global.w2"));
  const std::vector<prune::Target> targets{{a.module(), "weight"}, {b.module(), "weight"}};
  prune::global_unstructured(targets, prune::L1Unstructured(0.4));
  EXPECT_TRUE(all_close(*a->find_buffer("weight_mask"), R("prune.global.mask1"), 0, 0));
  EXPECT_TRUE(all_close(*b->find_buffer("weight_mask"), R("prune.global.mask2"), 0, 0));
  const double kept =
      a->find_buffer("weight_mask")->sum().item<double>() + b->find_buffer("weight_mask")->sum().item<double>();
  EXPECT_EQ(kept, 42 - 17);  // round(0.4 * 42) = 17 pruned, over both tensors together
  // Again: ranks the masked weights and prunes half of what survives.
  prune::global_unstructured(targets, prune::L1Unstructured(0.5));
  EXPECT_TRUE(all_close(*a->find_buffer("weight_mask"), R("prune.global2.mask1"), 0, 0));
  EXPECT_TRUE(all_close(*b->find_buffer("weight_mask"), R("prune.global2.mask2"), 0, 0));
}

TEST(Prune, APrunedLinearKeepsPyTorchsNamesGradientsAndRemove) {
  nn::Linear lin(4, 3);
  StateDict state("key");
  state.insert("weight", R("prune.linear.state.weight"));
  state.insert("bias", R("prune.linear.state.bias"));
  lin->load_state_dict(state);
  const Tensor param = *lin->find_parameter("weight");
  optim::SGD sgd(lin->parameters(), optim::SGDOptions(0.1));  // holds the parameter before pruning

  prune::l1_unstructured(*lin, "weight", 0.5);
  EXPECT_EQ(keys_of(*lin), ref_keys("prune.linear.keys"));  // bias, weight_orig, weight_mask
  EXPECT_TRUE(prune::is_pruned(*lin));
  // weight_orig is the same tensor the optimizer holds: it keeps training it.
  EXPECT_EQ(lin->find_parameter("weight_orig")->data_ptr(), param.data_ptr());
  Tensor out = lin(R("prune.linear.in"));
  EXPECT_TRUE(all_close(out, R("prune.linear.out")));
  out.sum().backward();
  EXPECT_TRUE(all_close(param.grad(), R("prune.linear.grad_orig")));  // zero where pruned
  sgd.step();
  lin(R("prune.linear.in"));  // the pre-hook reads the stepped weight_orig
  EXPECT_TRUE(all_close(lin->weight.detach(), param.detach() * *lin->find_buffer("weight_mask"), 0, 0));

  const Tensor mask = lin->find_buffer("weight_mask")->clone();
  prune::remove(*lin, "weight");
  EXPECT_EQ(keys_of(*lin), ref_keys("prune.linear.keys_removed"));  // bias, weight
  EXPECT_FALSE(prune::is_pruned(*lin));
  EXPECT_EQ(lin->find_parameter("weight")->data_ptr(), param.data_ptr());  // still the optimizer's tensor
  EXPECT_TRUE(lin->weight.is_leaf());
  EXPECT_TRUE(lin->weight.requires_grad());
  // Permanent: the pruned entries are zero in the parameter itself, and the forward reads it.
  EXPECT_EQ((lin->weight * (1 - mask)).abs().sum().item<double>(), 0.0);
  EXPECT_TRUE(all_close(lin(R("prune.linear.in")), linear(R("prune.linear.in"), lin->weight, lin->bias)));
  EXPECT_ERROR_CONTAINS(prune::remove(*lin, "weight"), "has to be pruned before pruning can be removed");
}

TEST(Prune, APrunedCheckpointLoadsIntoAPrunedModel) {
  nn::Linear a(6, 4), b(6, 4);
  prune::l1_unstructured(*a, "weight", 0.5);
  prune::identity(*b, "weight");
  b->load_state_dict(a->state_dict());  // the mask comes with the checkpoint
  const Tensor x = randn({3, 6});
  EXPECT_TRUE(all_close(b(x), a(x), 0, 0));  // the hook recomputes weight from the loaded mask
  EXPECT_EQ(prune::sparsity(*b).rows[1].zeros, 12);
}

TEST(Prune, RandomMethodsPruneTheRequestedCounts) {
  manual_seed(5);
  nn::Linear lin(10, 10);
  prune::random_unstructured(*lin, "weight", 0.35);
  EXPECT_EQ(lin->find_buffer("weight_mask")->sum().item<double>(), 65);
  nn::Conv2d conv(4, 6, 3);
  prune::random_structured(*conv, "weight", 2, 0);
  const Tensor per_channel = conv->find_buffer("weight_mask")->sum({1, 2, 3});
  EXPECT_EQ((per_channel == 0).sum().item<int64_t>(), 2);
  EXPECT_EQ((per_channel == 36).sum().item<int64_t>(), 4);
}

TEST(Prune, CustomMasksComposeAndSparsityCounts) {
  nn::Sequential net(nn::Linear(3, 2), nn::ReLU(), nn::Linear(2, 2, false));
  auto first = net->find_module("0");
  prune::custom_from_mask(*first, "weight", tensor<float>({1, 0, 1, 1, 1, 0}, Shape{2, 3}));
  prune::custom_from_mask(*first, "weight", tensor<float>({0, 1, 1, 1, 1, 1}, Shape{2, 3}));
  EXPECT_EQ(first->find_buffer("weight_mask")->to_vector<float>(), (std::vector<float>{0, 0, 1, 1, 1, 0}));
  prune::Sparsity s = prune::sparsity(*net);
  ASSERT_EQ(s.rows.size(), 3u);  // 0.bias, 0.weight (pruned, listed after bias), 2.weight
  EXPECT_EQ(s.rows[1].name, "0.weight");
  EXPECT_EQ(s.rows[1].zeros, 3);
  EXPECT_EQ(s.global.total, 2 + 6 + 4);
  EXPECT_TRUE(prune::is_pruned(*net));
}

TEST(Prune, BadCallsAreClearErrors) {
  nn::Linear lin(3, 2);
  EXPECT_ERROR_CONTAINS(prune::l1_unstructured(*lin, "weight", 1.5), "float in the range [0, 1]");
  EXPECT_ERROR_CONTAINS(prune::l1_unstructured(*lin, "weight", -1), "non-negative integer");
  EXPECT_ERROR_CONTAINS(prune::l1_unstructured(*lin, "weight", 7), "smaller than the number of parameters to prune=6");
  EXPECT_ERROR_CONTAINS(prune::l1_unstructured(*lin, "nothing", 1), "has no parameter 'nothing'");
  EXPECT_ERROR_CONTAINS(prune::ln_structured(*lin, "bias", 1, 2, 0), "multidimensional");
  EXPECT_ERROR_CONTAINS(prune::ln_structured(*lin, "weight", 1, 2, 2), "dim 2 is out of range");
  EXPECT_ERROR_CONTAINS(prune::l1_unstructured(*lin, "weight", 1, ones({5})), "importance_scores of shape [5]");
  EXPECT_ERROR_CONTAINS(prune::custom_from_mask(*lin, "weight", ones({2, 2})), "the mask has shape [2, 2]");
  EXPECT_FALSE(prune::is_pruned(*lin));  // failed calls leave the module as it was
  EXPECT_EQ(keys_of(*lin), "weight\nbias");

  // A module whose forward reads a field it never bound cannot be pruned by name.
  struct Bare : nn::Module {
    Bare() : Module("Bare") { w = register_parameter("w", ones({2, 2})); }
    Tensor w;
  };
  Bare bare;
  EXPECT_ERROR_CONTAINS(prune::l1_unstructured(bare, "w", 1), "does not bind its 'w'");
  EXPECT_ERROR_CONTAINS(prune::global_unstructured({{lin.module(), "weight"}}, prune::LnStructured(1, 2, 0)),
                        "only unstructured methods");
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

namespace prune = nn::utils::prune;
using testing::all_close;

TEST(PruneShrink, AStructurallyPrunedMlpBecomesSmallerWithTheSameOutputs) {
  manual_seed(21);
  nn::Sequential net(nn::Linear(6, 8), nn::ReLU(), nn::Linear(8, 5), nn::Tanh(), nn::Linear(5, 3));
  prune::ln_structured(*net->find_module("0"), "weight", 0.5, 2, 0);
  prune::ln_structured(*net->find_module("2"), "weight", 2, 1, 0);
  const Tensor x = randn({4, 6});
  const Tensor before = net(x).detach();
  const prune::ShrinkReport report = prune::shrink(*net);
  ASSERT_EQ(report.pairs.size(), 2u);
  EXPECT_EQ(report.pairs[0].removed, 4);
  EXPECT_EQ(report.pairs[1].removed, 2);
  EXPECT_EQ(net->find_module("0")->as<nn::LinearImpl>()->weight.sizes(), (Shape{4, 6}));
  EXPECT_EQ(net->find_module("2")->as<nn::LinearImpl>()->weight.sizes(), (Shape{3, 4}));
  EXPECT_EQ(net->find_module("4")->as<nn::LinearImpl>()->weight.sizes(), (Shape{3, 3}));
  EXPECT_EQ(report.parameters_before, (6 * 8 + 8) + (8 * 5 + 5) + (5 * 3 + 3));
  EXPECT_EQ(report.parameters_after, (6 * 4 + 4) + (4 * 3 + 3) + (3 * 3 + 3));
  // The dead channels' biases (through ReLU and Tanh) moved into the next layers' biases.
  EXPECT_TRUE(all_close(net(x), before, 1e-5, 1e-6));
  EXPECT_FALSE(prune::is_pruned(*net));
}

TEST(PruneShrink, ACnnThroughBatchNormPoolingAndFlattenKeepsItsOutputs) {
  manual_seed(22);
  nn::Sequential net(nn::Conv2d(nn::Conv2dOptions(3, 8, 3).padding(1)), nn::BatchNorm2d(8), nn::ReLU(),
                     nn::MaxPool2d(2), nn::Conv2d(8, 6, 3), nn::ReLU(), nn::Flatten(), nn::Linear(6 * 2 * 2, 4));
  for (int i = 0; i < 3; ++i) net(randn({5, 3, 8, 8}));  // running statistics that are not 0 and 1
  net->eval();
  prune::ln_structured(*net->find_module("0"), "weight", 0.5, 2, 0);
  prune::ln_structured(*net->find_module("4"), "weight", 0.5, 1, 0);
  const Tensor x = randn({2, 3, 8, 8});
  const Tensor before = net(x).detach();
  const prune::ShrinkReport report = prune::shrink(*net);
  EXPECT_EQ(net->find_module("0")->as<nn::Conv2dImpl>()->weight.sizes(), (Shape{4, 3, 3, 3}));
  EXPECT_EQ(net->find_module("1")->as<nn::BatchNormImpl>()->running_mean.sizes(), (Shape{4}));
  EXPECT_EQ(net->find_module("4")->as<nn::Conv2dImpl>()->weight.sizes(), (Shape{3, 4, 3, 3}));
  EXPECT_EQ(net->find_module("7")->as<nn::LinearImpl>()->weight.sizes(), (Shape{4, 3 * 2 * 2}));
  EXPECT_TRUE(all_close(net(x), before, 1e-5, 1e-5)) << report;
}

TEST(PruneShrink, WhatItCannotFollowExactlyStaysAndIsReported) {
  manual_seed(23);
  // The second convolution pads: a dead channel's nonzero constant would meet zeros at the borders.
  nn::Sequential net(nn::Conv2d(2, 4, 3), nn::Sigmoid(), nn::Conv2d(nn::Conv2dOptions(4, 3, 3).padding(1)));
  prune::ln_structured(*net->find_module("0"), "weight", 2, 2, 0);
  const Tensor x = randn({1, 2, 7, 7});
  const Tensor before = net(x).detach();
  const prune::ShrinkReport report = prune::shrink(*net);
  ASSERT_EQ(report.pairs.size(), 1u);
  EXPECT_NE(report.pairs[0].skipped.find("pads with zeros"), std::string::npos);
  EXPECT_EQ(net->find_module("0")->as<nn::Conv2dImpl>()->weight.size(0), 4);
  EXPECT_TRUE(all_close(net(x), before, 0, 0));
  EXPECT_ERROR_CONTAINS(prune::shrink(*nn::Linear(2, 2)), "expects a Sequential");
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

namespace prune = nn::utils::prune;
using testing::all_close;

TEST(PruneSparse, ACsrLinearEqualsTheDenseOneOnEveryShapeEdge) {
  manual_seed(24);
  for (auto [batch, in, out] :
       std::vector<std::array<int64_t, 3>>{{1, 5, 3}, {63, 17, 9}, {64, 40, 33}, {130, 64, 70}}) {
    SCOPED_TRACE(::testing::Message() << batch << "x" << in << "->" << out);
    nn::Linear lin(in, out);
    prune::l1_unstructured(*lin, "weight", 0.8);
    const Tensor x = randn({batch, in});
    const Tensor dense = lin(x).detach();
    prune::remove(*lin, "weight");
    prune::SparseLinearImpl sparse(*lin);
    EXPECT_EQ(sparse.values.numel(), in * out - static_cast<int64_t>(std::nearbyint(0.8 * in * out)));
    EXPECT_TRUE(all_close(sparse.forward(x), dense, 1e-5, 1e-5));
  }
  // A row with nothing stored gives its bias; a 3-D input keeps its leading dims.
  nn::Linear lin(4, 2);
  {
    NoGradGuard g;
    lin->weight.select(0, 1).zero_();
  }
  prune::SparseLinearImpl sparse(*lin);
  const Tensor x = randn({2, 3, 4});
  EXPECT_TRUE(all_close(sparse.forward(x), lin(x).detach(), 1e-5, 1e-6));
  EXPECT_ERROR_CONTAINS(sparse.forward(randn({2, 5})), "expects input [..., 4]");
  EXPECT_ERROR_CONTAINS(native::csr_linear(randn({2, 4}), sparse.crow, sparse.col + 10, sparse.values, sparse.bias, 2),
                        "out of range for 4 input features");
}

TEST(PruneSparse, SparsifySwapsOnlyTheLayersAboveTheThreshold) {
  manual_seed(25);
  nn::Sequential net(nn::Linear(32, 32), nn::ReLU(), nn::Linear(32, 8));
  prune::l1_unstructured(*net->find_module("0"), "weight", 0.95);
  prune::l1_unstructured(*net->find_module("2"), "weight", 0.5);
  const Tensor x = randn({6, 32});
  const Tensor before = net(x).detach();
  EXPECT_EQ(prune::sparsify(*net, 0.9), 1);
  EXPECT_EQ(net->find_module("0")->type_name(), "SparseLinear");
  EXPECT_EQ(net->find_module("2")->type_name(), "Linear");
  EXPECT_TRUE(all_close(net(x), before, 1e-5, 1e-6));
}

}  // namespace
}  // namespace ember
