// Module hooks and replace_module: pre-hooks that see and replace the inputs, forward hooks that
// see the inputs and the output (a calibration observer), handles that remove them, and
// children replaced in place through Sequential and through typed holder members (Note [Module
// slots]) — what pruning and quantization build on.
#include "helpers.h"

namespace ember {
namespace {

using namespace nn;

Linear linear_with(std::vector<float> w, std::vector<float> b) {
  Linear fc(2, static_cast<int64_t>(b.size()));
  NoGradGuard no_grad;
  fc->weight.copy_(tensor(w, Shape{static_cast<int64_t>(b.size()), 2}));
  fc->bias.copy_(tensor(b));
  return fc;
}

TEST(Hooks, APreHookSeesAndReplacesTheInputs) {
  Linear fc = linear_with({1, 2, 3, 4}, {0, 0});
  TensorList seen;
  fc->register_forward_pre_hook([&](Module& m, const TensorList& in) -> std::optional<TensorList> {
    EXPECT_EQ(m.type_name(), "Linear");
    seen = in;
    return TensorList{in[0] * 2.0};
  });
  const Tensor x = tensor<float>({1, 1}, Shape{1, 2});
  const Tensor y = fc(x);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_TRUE(seen[0].is_same(x));
  EXPECT_TRUE(testing::all_close(y, tensor<float>({6, 14}, Shape{1, 2})));  // W (2x)
}

TEST(Hooks, AForwardHookSeesInputsAndOutputAndMayReplaceTheOutput) {
  Linear fc = linear_with({1, 0, 0, 1}, {0, 0});
  fc->register_forward_pre_hook([](Module&, const TensorList& in) { return TensorList{in[0] + 1.0}; });
  Tensor saw_in, saw_out;
  fc->register_forward_hook([&](Module&, const TensorList& in, const Tensor& out) -> std::optional<Tensor> {
    saw_in = in[0];
    saw_out = out;
    return out * 10.0;
  });
  const Tensor y = fc(tensor<float>({1, 2}, Shape{1, 2}));
  EXPECT_TRUE(testing::all_close(saw_in, tensor<float>({2, 3}, Shape{1, 2})));  // the pre-hook's inputs
  EXPECT_TRUE(testing::all_close(saw_out, tensor<float>({2, 3}, Shape{1, 2})));
  EXPECT_TRUE(testing::all_close(y, tensor<float>({20, 30}, Shape{1, 2})));
}

TEST(Hooks, HooksRunInsideSequentialAndOnEveryCallPath) {
  Sequential net(Linear(3, 4), ReLU(), Linear(4, 2));
  int calls = 0;
  for (const auto& m : *net) m->register_forward_pre_hook([&](Module&) { ++calls; });
  net(ones({5, 3}));  // the holder's call
  EXPECT_EQ(calls, 3);
  (*net)(ones({5, 3}));  // Module::operator() of the Sequential itself
  EXPECT_EQ(calls, 6);
}

TEST(Hooks, AMultiInputModuleSeesEveryTensorArgument) {
  MSELoss loss;
  loss->register_forward_pre_hook([](Module&, const TensorList& in) -> std::optional<TensorList> {
    EXPECT_EQ(in.size(), 2u);
    return TensorList{in[0], zeros_like(in[1])};  // compare with zero instead of the target
  });
  const Tensor l = loss(full({4}, 3.0), full({4}, 3.0));
  EXPECT_FLOAT_EQ(l.item<float>(), 9.0f);
  loss->register_forward_pre_hook([](Module&, const TensorList& in) { return TensorList{in[0]}; });
  EXPECT_ERROR_CONTAINS(loss(ones({1}), ones({1})), "returned 1 inputs for a call with 2");
}

// A calibration observer, as static quantization collects it: the running range of each
// Linear's output, from forward hooks on every Linear of a model.
TEST(Hooks, ForwardHooksMakeACalibrationObserver) {
  manual_seed(0);
  Sequential net(Linear(4, 8), ReLU(), Linear(8, 3));
  std::map<std::string, std::pair<float, float>> range;
  std::vector<HookHandle> handles;
  for (const auto& item : net->named_modules()) {
    if (item.value()->type_name() != "Linear") continue;
    handles.push_back(item.value()->register_forward_hook(
        [&range, name = item.key()](Module&, const TensorList&, const Tensor& out) -> std::optional<Tensor> {
          auto [it, fresh] = range.emplace(name, std::make_pair(out.min().item<float>(), out.max().item<float>()));
          if (!fresh) {
            it->second.first = std::min(it->second.first, out.min().item<float>());
            it->second.second = std::max(it->second.second, out.max().item<float>());
          }
          return std::nullopt;
        }));
  }
  NoGradGuard no_grad;
  const Tensor batch1 = randn({16, 4}), batch2 = randn({16, 4}) * 3.0;
  net(batch1);
  net(batch2);
  ASSERT_EQ(range.size(), 2u);
  const Tensor first = (*net)[0]->forward(cat({batch1, batch2}));
  EXPECT_FLOAT_EQ(range["0"].first, first.min().item<float>());
  EXPECT_FLOAT_EQ(range["0"].second, first.max().item<float>());
  for (const HookHandle& h : handles) h.remove();
  net(batch1 * 100.0);
  EXPECT_FLOAT_EQ(range["0"].second, first.max().item<float>());  // removed: no longer observed
}

TEST(Hooks, HandlesRemoveOnceAndOutliveTheirModule) {
  HookHandle handle;
  {
    Linear fc(2, 2);
    handle = fc->register_forward_hook([](Module&, const TensorList&, const Tensor&) { return std::nullopt; });
    EXPECT_TRUE(fc->has_forward_hooks());
    handle.remove();
    EXPECT_FALSE(fc->has_forward_hooks());
    EXPECT_ERROR_CONTAINS(handle.remove(), "no hook with handle");
    handle = fc->register_forward_hook([](Module&, const TensorList&, const Tensor&) { return std::nullopt; });
  }
  handle.remove();  // the module and its hooks are gone: nothing to do
}

// ---- replace_module ----

TEST(ReplaceModule, InsideSequentialTheForwardAndTheStateFollow) {
  Sequential net(Linear(2, 2), ReLU());
  const Tensor x = tensor<float>({-1, 2}, Shape{1, 2});
  net->replace_module("1", Tanh());
  Linear fresh = linear_with({1, 0, 0, 1}, {0, 0});
  net->replace_module("0", fresh);
  EXPECT_TRUE(testing::all_close(net(x), x.tanh()));
  EXPECT_TRUE(net->parameters()[0].is_same(fresh->weight));
  EXPECT_EQ((*net)[1]->type_name(), "Tanh");
  EXPECT_EQ(net->state_dict().keys(), (std::vector<std::string>{"0.weight", "0.bias"}));
  std::ostringstream os;
  os << net;
  EXPECT_NE(os.str().find("(1): Tanh()"), std::string::npos) << os.str();
}

// A stand-in for a quantized or pruned layer: not a LinearImpl, same call.
class DoubledImpl : public Module {
 public:
  DoubledImpl() : Module("Doubled") {}
  Tensor forward(const Tensor& x) override { return x * 2.0; }
};
EMBER_MODULE(Doubled);

// A subclass of LinearImpl: its holder's members stay reachable.
class NoisyLinearImpl : public LinearImpl {
 public:
  NoisyLinearImpl() : LinearImpl(2, 2) {}
  Tensor forward(const Tensor& x) override { return LinearImpl::forward(x) + 1.0; }
};

class BlockImpl : public Module {
 public:
  BlockImpl() : Module("Block") {
    fc = register_module("fc", linear_with({1, 0, 0, 1}, {0, 0}));
    act = register_module("act", ReLU());
  }
  Tensor forward(const Tensor& x) override { return act(fc(x)); }
  Linear fc{nullptr};
  ReLU act{nullptr};
};
EMBER_MODULE(Block);

TEST(ReplaceModule, TypedHolderMembersFollowTheirSlot) {
  Block block;
  const Tensor x = tensor<float>({1, 2}, Shape{1, 2});
  EXPECT_TRUE(testing::all_close(block(x), x));
  block->replace_module("fc", Doubled());
  EXPECT_TRUE(testing::all_close(block(x), x * 2.0)) << "the member holder calls the replacement";
  EXPECT_EQ(block->fc.module()->type_name(), "Doubled");
  EXPECT_ERROR_CONTAINS(block->fc->weight, "this Linear was replaced by a Doubled");
  EXPECT_TRUE(block->named_parameters().empty());

  block->replace_module("fc", std::make_shared<NoisyLinearImpl>());
  EXPECT_EQ(block->fc->weight.sizes(), (Shape{2, 2})) << "a subclass of the holder's type keeps its members";
  EXPECT_EQ(block->named_parameters().keys(), (std::vector<std::string>{"fc.weight", "fc.bias"}));
}

TEST(ReplaceModule, DottedPathsReachDeepChildrenAndBadOnesAreNamed) {
  Sequential net(Block{}, Block{});
  net->replace_module("1.fc", Doubled());
  const Tensor x = tensor<float>({1, 2}, Shape{1, 2});
  EXPECT_TRUE(testing::all_close(net(x), x * 2.0));
  EXPECT_ERROR_CONTAINS(net->replace_module("2.fc", Doubled()), "'2' is not a child of Sequential");
  EXPECT_ERROR_CONTAINS(net->replace_module("0.conv", Doubled()), "Block has no child 'conv'");
  EXPECT_ERROR_CONTAINS(net->replace_module("0", std::shared_ptr<Module>()), "is null");
}

}  // namespace
}  // namespace ember
