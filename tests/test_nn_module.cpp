// nn::Module semantics: registration and names, traversal, modes, dtype moves, hooks, state
// dicts, printing; initialisation; clip_grad; and properties of the layers that a reference
// value does not show (causality, padding rows, dropout modes).
#include <cmath>
#include <sstream>

#include "helpers.h"

namespace ember {
namespace {

using namespace nn;

class TinyNetImpl : public Module {
 public:
  TinyNetImpl() : Module("TinyNet") {
    features = register_module("features", Sequential(Linear(3, 4), ReLU(), BatchNorm1d(4)));
    head = register_module("head", Linear(4, 2));
    scale = register_parameter("scale", ones({1}));
    register_buffer("steps", zeros({}, kInt64));
    register_buffer("scratch", zeros({2}), /*persistent=*/false);
  }
  Tensor forward(const Tensor& x) override { return head(features(x)) * scale; }
  Sequential features{nullptr};
  Linear head{nullptr};
  Tensor scale;
};
EMBER_MODULE(TinyNet);

TEST(Module, NamesFollowPyTorch) {
  TinyNet net;
  EXPECT_EQ(net->named_parameters().keys(),
            (std::vector<std::string>{"scale", "features.0.weight", "features.0.bias", "features.2.weight",
                                      "features.2.bias", "head.weight", "head.bias"}));
  EXPECT_EQ(net->named_buffers().keys(),
            (std::vector<std::string>{"steps", "scratch", "features.2.running_mean", "features.2.running_var",
                                      "features.2.num_batches_tracked"}));
  const auto state = net->state_dict().keys();
  EXPECT_EQ(std::count(state.begin(), state.end(), "scratch"), 0) << "non-persistent buffers stay out";
  EXPECT_EQ(state.size(), 11u);
  EXPECT_EQ(net->named_modules().keys(),
            (std::vector<std::string>{"", "features", "features.0", "features.1", "features.2", "head"}));
  EXPECT_EQ(net->children().size(), 2u);
  EXPECT_EQ(net->parameters(/*recurse=*/false).size(), 1u);
  int visited = 0;
  net->apply([&](Module&) { ++visited; });
  EXPECT_EQ(visited, 6);
  EXPECT_NE(net->features->at<LinearImpl>(0), nullptr);
  EXPECT_ERROR_CONTAINS(net->features->at<ReLUImpl>(0), "child 0 is a Linear");
}

TEST(Module, RegistrationErrors) {
  TinyNet net;
  EXPECT_ERROR_CONTAINS(net->register_parameter("scale", ones({1})), "parameter 'scale' already exists");
  EXPECT_ERROR_CONTAINS(net->register_buffer("head", ones({1})), "already registered as a parameter or submodule");
  EXPECT_ERROR_CONTAINS(net->register_parameter("a.b", ones({1})), "must not contain '.'");
  EXPECT_ERROR_CONTAINS(net->register_parameter("ints", ones({1}, kInt64)), "must be floating point");
  EXPECT_ERROR_CONTAINS((*net->features)[7], "index 7 is out of range for 3 modules");
  EXPECT_ERROR_CONTAINS(net->head(ones({2, 5})), "Linear: expects input [..., 4], got shape [2, 5]");
  EXPECT_ERROR_CONTAINS(Conv2d(Conv2dOptions(3, 4, 3).groups(2)), "divisible by groups");
  EXPECT_ERROR_CONTAINS(Dropout(1.5), "p must be in [0, 1]");
  EXPECT_ERROR_CONTAINS(BatchNorm2d(3)(ones({2, 4, 2, 2})), "expects 3 channels");
  EXPECT_ERROR_CONTAINS(CausalSelfAttention(10, 3), "multiple of n_head");
}

TEST(Module, TrainEvalPropagates) {
  TinyNet net;
  net->eval();
  for (const auto& m : net->modules()) EXPECT_FALSE(m->is_training()) << m->type_name();
  net->train();
  for (const auto& m : net->modules()) EXPECT_TRUE(m->is_training()) << m->type_name();
}

TEST(Module, ToDTypeKeepsTensorIdentity) {
  TinyNet net;
  const Tensor weight = net->head->weight;  // an optimizer holds these handles
  optim::SGD opt(net->parameters(), optim::SGDOptions(0.1));
  net->to(kFloat64);
  EXPECT_EQ(weight.dtype(), kFloat64);
  EXPECT_TRUE(weight.is_same(net->head->weight));
  EXPECT_TRUE(weight.requires_grad());
  EXPECT_EQ(net->named_buffers()["steps"].dtype(), kInt64) << "to(dtype) converts floating tensors only";
  net(randn({5, 3}, kFloat64)).sum().backward();
  opt.step();  // the optimizer sees the converted tensors
  EXPECT_EQ(weight.grad().dtype(), kFloat64);
  EXPECT_ERROR_CONTAINS(net->to(kInt32), "expects a floating dtype");
}

TEST(Module, ZeroGradAndForwardPreHooks) {
  Linear fc(3, 2);
  fc(ones({1, 3})).sum().backward();
  EXPECT_TRUE(fc->weight.grad().defined());
  fc->zero_grad(/*set_to_none=*/false);
  EXPECT_EQ(fc->weight.grad().abs().sum().item<float>(), 0.0f);
  fc->zero_grad();
  EXPECT_FALSE(fc->weight.grad().defined());

  int calls = 0;
  const HookHandle handle = fc->register_forward_pre_hook([&](Module& m) {
    ++calls;
    NoGradGuard no_grad;
    m.as<LinearImpl>()->weight.zero_();  // what a pruning mask does to its weight
  });
  const Tensor y = fc(ones({1, 3}));
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(testing::all_close(y, fc->bias.detach().unsqueeze(0)));
  handle.remove();
  fc(ones({1, 3}));
  EXPECT_EQ(calls, 1);
  EXPECT_ERROR_CONTAINS(handle.remove(), "no hook with handle");
}

TEST(Module, PrintsTheTreeAsPyTorch) {
  Sequential net(Conv2d(Conv2dOptions(1, 8, 3).padding(1)), ReLU(), MaxPool2d(2), Flatten(), Linear(8, 2, false));
  std::ostringstream os;
  os << net;
  EXPECT_EQ(os.str(),
            "Sequential(\n"
            "  (0): Conv2d(1, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))\n"
            "  (1): ReLU()\n"
            "  (2): MaxPool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0), dilation=(1, 1), ceil_mode=false)\n"
            "  (3): Flatten(start_dim=1, end_dim=-1)\n"
            "  (4): Linear(in_features=8, out_features=2, bias=false)\n"
            ")");
}

TEST(Module, ContainersHoldChildren) {
  ModuleList list(Linear(2, 2), ReLU());
  list->push_back(Tanh());
  EXPECT_EQ(list->size(), 3u);
  EXPECT_EQ(list->named_children().keys(), (std::vector<std::string>{"0", "1", "2"}));
  ModuleDict dict;
  dict->insert("encoder", Linear(4, 2));
  dict->insert("decoder", Linear(2, 4));
  EXPECT_EQ(dict->keys(), (std::vector<std::string>{"encoder", "decoder"}));
  EXPECT_EQ(dict->parameters().size(), 4u);
  EXPECT_ERROR_CONTAINS((*dict)["missing"], "no module named 'missing'");
  EXPECT_ERROR_CONTAINS(Sequential()->forward(ones({1})), "empty Sequential");
}

// ---- init ----

TEST(Init, DefaultInitialisationMatchesPyTorchsBounds) {
  manual_seed(0);
  Linear fc(400, 300);
  const double bound = 1.0 / std::sqrt(400.0);  // kaiming_uniform(a=√5) = U(±1/√fan_in)
  EXPECT_LE(fc->weight.abs().max().item<double>(), bound);
  EXPECT_GT(fc->weight.abs().max().item<double>(), 0.99 * bound);
  EXPECT_NEAR(fc->weight.std().item<double>(), bound / std::sqrt(3.0), 0.01 * bound);  // std of U(-b, b)
  EXPECT_LE(fc->bias.abs().max().item<double>(), bound);
  Conv2d conv(Conv2dOptions(16, 32, 3));
  EXPECT_LE(conv->weight.abs().max().item<double>(), 1.0 / std::sqrt(16.0 * 9.0));
  Embedding emb(1000, 64);
  EXPECT_NEAR(emb->weight.std().item<double>(), 1.0, 0.02);
}

TEST(Init, FunctionsFollowTheirFormulas) {
  manual_seed(1);
  Tensor w = empty({256, 512});
  init::kaiming_normal_(w, 0, "fan_in", "relu");
  EXPECT_NEAR(w.std().item<double>(), std::sqrt(2.0 / 512), 0.02 * std::sqrt(2.0 / 512));
  init::kaiming_uniform_(w, 0, "fan_out", "relu");
  EXPECT_LE(w.abs().max().item<double>(), std::sqrt(2.0) * std::sqrt(3.0 / 256));
  init::xavier_uniform_(w, 2.0);
  EXPECT_LE(w.abs().max().item<double>(), 2.0 * std::sqrt(6.0 / (256 + 512)));
  init::xavier_normal_(w);
  EXPECT_NEAR(w.std().item<double>(), std::sqrt(2.0 / 768), 0.02 * std::sqrt(2.0 / 768));
  init::ones_(w);
  EXPECT_EQ(w.sum().item<double>(), 256.0 * 512);
  EXPECT_DOUBLE_EQ(init::calculate_gain("tanh"), 5.0 / 3);
  EXPECT_DOUBLE_EQ(init::calculate_gain("leaky_relu", 0.2), std::sqrt(2.0 / 1.04));
  Tensor v = empty({3});
  EXPECT_ERROR_CONTAINS(init::xavier_uniform_(v), "at least 2 dimensions");
  EXPECT_ERROR_CONTAINS(init::kaiming_uniform_(w, 0, "fan_middle"), "mode must be");
  EXPECT_ERROR_CONTAINS(init::calculate_gain("swish"), "unsupported nonlinearity");
}

// ---- clip_grad ----

TEST(ClipGrad, NormFollowsPyTorchsFormula) {
  Tensor a = zeros({1}).requires_grad_(), b = zeros({1}).requires_grad_(), c = zeros({2}).requires_grad_();
  a.mutable_grad() = tensor<float>({3.0f});
  b.mutable_grad() = tensor<float>({4.0f});
  const Tensor total = utils::clip_grad_norm_({a, b, c}, 1.0);  // c has no gradient: skipped
  EXPECT_FLOAT_EQ(total.item<float>(), 5.0f);
  EXPECT_FLOAT_EQ(a.grad().item<float>(), 0.59999988f);
  EXPECT_FLOAT_EQ(b.grad().item<float>(), 0.79999984f);
  // Below the limit the factor is 1: nothing changes.
  EXPECT_FLOAT_EQ(utils::clip_grad_norm_({a, b}, 10.0).item<float>(), 0.99999976f);
  EXPECT_FLOAT_EQ(a.grad().item<float>(), 0.59999988f);
  a.mutable_grad() = tensor<float>({-7.0f});
  EXPECT_FLOAT_EQ(utils::clip_grad_norm_({a, b}, 1.0, INFINITY).item<float>(), 7.0f);
  a.mutable_grad() = tensor<float>({NAN});
  EXPECT_ERROR_CONTAINS(utils::clip_grad_norm_({a}, 1.0, 2.0, true), "non-finite");
  EXPECT_EQ(utils::clip_grad_norm_({c}, 1.0).item<float>(), 0.0f);
  a.mutable_grad() = tensor<float>({1.0f, 2.0f, 2.0f});
  EXPECT_NEAR(utils::clip_grad_norm_({a}, 100.0, 3.0).item<float>(), std::cbrt(17.0), 1e-5);
}

TEST(ClipGrad, ValueClamps) {
  Tensor a = zeros({3}).requires_grad_();
  a.mutable_grad() = tensor<float>({-3.0f, 0.5f, 9.0f});
  utils::clip_grad_value_({a}, 1.0);
  EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{-1.0f, 0.5f, 1.0f}));
}

// ---- layer properties ----

TEST(Layers, AttentionIsCausal) {
  manual_seed(3);
  CausalSelfAttention attn(8, 2);
  Tensor x = randn({1, 6, 8});
  const Tensor y = attn(x);
  Tensor changed = x.clone();
  changed.narrow(1, 4, 2).copy_(randn({1, 2, 8}));  // only positions 4 and 5
  const Tensor y2 = attn(changed);
  EXPECT_TRUE(testing::all_close(y2.narrow(1, 0, 4), y.narrow(1, 0, 4), 1e-6, 1e-7)) << "the past saw the future";
  EXPECT_FALSE(testing::all_close(y2.narrow(1, 4, 2), y.narrow(1, 4, 2)));
}

// Gradients of a module's parameters and input against float64 central differences of
// sum(module(x) * w), perturbing the parameters in place (gradcheck takes copies of its
// inputs, so it cannot see a module's own parameters).
void expect_module_gradients_match(Module& module, const Tensor& x_in) {
  Tensor x = x_in.clone().requires_grad_();
  const Tensor w = sin(arange(module(x).numel(), kFloat64) * 1.3 + 0.2).reshape(module(x).sizes());
  auto loss = [&] { return (module(x) * w).sum(); };
  module.zero_grad();
  loss().backward();
  std::vector<std::pair<std::string, Tensor>> checked{{"input", x}};
  for (const auto& p : module.named_parameters()) checked.emplace_back(p.key(), p.value());
  NoGradGuard no_grad;
  for (auto& [name, t] : checked) {
    ASSERT_TRUE(t.grad().defined()) << name;
    double* data = t.data_ptr<double>();
    const auto analytic = t.grad().contiguous().to_vector<double>();
    for (int64_t j = 0; j < t.numel(); j += std::max<int64_t>(1, t.numel() / 16)) {
      const double saved = data[j], eps = 1e-6;
      data[j] = saved + eps;
      const double up = loss().item<double>();
      data[j] = saved - eps;
      const double down = loss().item<double>();
      data[j] = saved;
      const double numeric = (up - down) / (2 * eps);
      EXPECT_NEAR(analytic[static_cast<size_t>(j)], numeric, 1e-6 + 1e-4 * std::fabs(numeric))
          << module.type_name() << " gradient of " << name << " at element " << j;
    }
  }
}

TEST(Layers, ModuleGradientsMatchFiniteDifferences) {
  manual_seed(4);
  TransformerBlock block(4, 2);
  block->to(kFloat64);
  expect_module_gradients_match(*block, randn({2, 3, 4}, kFloat64));
  Sequential cnn(Conv2d(Conv2dOptions(2, 3, 3).padding(1).stride(2)), BatchNorm2d(3), ReLU(), AdaptiveAvgPool2d(1),
                 Flatten(), Linear(3, 2));
  cnn->to(kFloat64);
  expect_module_gradients_match(*cnn, randn({4, 2, 5, 5}, kFloat64));
  GroupNorm gn(2, 4);
  gn->to(kFloat64);
  expect_module_gradients_match(*gn, randn({2, 4, 3}, kFloat64));
}

TEST(Layers, EmbeddingPaddingRowGetsNoGradient) {
  Embedding emb(EmbeddingOptions(5, 3).padding_idx(-1));  // -1 = row 4
  EXPECT_EQ(emb->weight[4].abs().sum().item<float>(), 0.0f);
  emb(tensor<int64_t>({4, 1, 4})).sum().backward();
  EXPECT_EQ(emb->weight.grad()[4].abs().sum().item<float>(), 0.0f);
  EXPECT_EQ(emb->weight.grad()[1].sum().item<float>(), 3.0f);
}

TEST(Layers, DropoutAndBatchNormFollowTheMode) {
  Dropout drop(0.5);
  const Tensor x = ones({1000});
  const Tensor y = drop(x);
  const double zeros_share = (y == 0).to(kFloat32).mean().item<double>();
  EXPECT_NEAR(zeros_share, 0.5, 0.06);
  EXPECT_TRUE(testing::all_close(y.sum() / (1000 * (1 - zeros_share)), scalar_tensor(2.0, kFloat32), 1e-4));
  drop->eval();
  EXPECT_TRUE(drop(x).is_same(x) || testing::all_close(drop(x), x, 0, 0));

  BatchNorm1d bn(2);
  bn->eval();  // running statistics: mean 0, var 1, so eval is the identity (up to eps)
  const Tensor in = tensor<float>({1.0f, 2.0f, 3.0f, 4.0f}, Shape{2, 2});
  EXPECT_TRUE(testing::all_close(bn(in), in / std::sqrt(1 + 1e-5), 1e-6));
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 0);
  bn->train();
  bn(in);
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 1);
}

TEST(Layers, LossModulesMatchTheFunctions) {
  const Tensor logits = tensor<float>({1.0f, 2.0f, 0.5f, -1.0f, 0.0f, 3.0f}, Shape{2, 3});
  const Tensor target = tensor<int64_t>({1, 2});
  CrossEntropyLoss ce(functional::CrossEntropyOptions().label_smoothing(0.1));
  EXPECT_TRUE(testing::all_close(
      ce(logits, target),
      functional::cross_entropy(logits, target, functional::CrossEntropyOptions().label_smoothing(0.1))));
  const Tensor a = randn({4}), b = randn({4});
  EXPECT_TRUE(testing::all_close(MSELoss()(a, b), functional::mse_loss(a, b)));
  EXPECT_TRUE(testing::all_close(L1Loss("sum")(a, b), (a - b).abs().sum()));
  EXPECT_TRUE(testing::all_close(SmoothL1Loss("none", 0.0)(a, b), (a - b).abs()));
  EXPECT_ERROR_CONTAINS(L1Loss("avg")(a, b), "reduction must be");
}

}  // namespace
}  // namespace ember
