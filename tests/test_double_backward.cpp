// Higher-order gradients (Note [Double backward]): create_graph against PyTorch's values and
// closed forms, and the refusals where a formula is not differentiable yet. Every op's second
// derivative against finite differences is in test_gradcheck.cpp (GradgradcheckTest).
#include "helpers.h"

namespace ember {
namespace {

using testing::all_close;

const Tensor& R(const std::string& name) { return testing::ref_tensor(testing::reference_grads(), name); }

TEST(DoubleBackward, GradientPenaltyMatchesPyTorch) {
  // WGAN-GP: the critic's gradient w.r.t. its input, taken with create_graph, is penalised, and
  // the penalty's gradient reaches the critic's weights through that backward.
  std::vector<Tensor> params;
  for (const char* n : {"w1", "b1", "w2", "b2"})
    params.push_back(R(std::string("double.gp.") + n).clone().set_requires_grad(true));
  const Tensor x = R("double.gp.x").clone().set_requires_grad(true);
  const Tensor critic = linear(linear(x, params[0], params[1]).tanh(), params[2], params[3]);
  const Tensor gx = autograd::grad({critic.sum()}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
  EXPECT_TRUE(gx.requires_grad());
  EXPECT_TRUE(all_close(gx, R("double.gp.gx"), 1e-12, 1e-12));
  const Tensor penalty = ((gx.norm(2, {1}) - 1.0).pow(2.0)).mean();
  EXPECT_TRUE(all_close(penalty, R("double.gp.penalty"), 1e-12, 1e-12));
  penalty.backward();
  const char* names[] = {"w1", "b1", "w2"};
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(all_close(params[i].grad(), R(std::string("double.gp.grad_") + names[i]), 1e-10, 1e-12)) << names[i];
  // The last bias does not move the critic's slope: PyTorch leaves its .grad None, ember undefined.
  EXPECT_FALSE(params[3].grad().defined());
}

TEST(DoubleBackward, HessianVectorProductMatchesPyTorch) {
  const Tensor x = R("double.hvp.x").clone().set_requires_grad(true), a = R("double.hvp.a"), v = R("double.hvp.v");
  const Tensor y = x.matmul(a);
  const Tensor f = (y.softmax(1) * y.log_softmax(1)).sum() + x.sigmoid().pow(3.0).sum();
  const Tensor g = autograd::grad({f}, {x}, {}, std::nullopt, true)[0];
  EXPECT_TRUE(all_close(g, R("double.hvp.g"), 1e-12, 1e-12));
  const Tensor hv = autograd::grad({(g * v).sum()}, {x})[0];
  EXPECT_TRUE(all_close(hv, R("double.hvp.hv"), 1e-10, 1e-12));
  EXPECT_FALSE(hv.requires_grad());  // no create_graph the second time: plain values
}

TEST(DoubleBackward, BackwardWithCreateGraphLeavesADifferentiableGrad) {
  // f = sum(x^3): .grad = 3 x^2 keeps its graph, and its own gradient is 6 x.
  Tensor x = tensor<double>({-1.0, 0.5, 2.0}).set_requires_grad(true);
  x.pow(3.0).sum().backward({}, std::nullopt, /*create_graph=*/true);
  EXPECT_TRUE(x.grad().requires_grad());
  EXPECT_TRUE(all_close(x.grad().detach(), tensor<double>({3.0, 0.75, 12.0}), 0, 1e-15));
  const Tensor g = x.grad();
  x.mutable_grad() = Tensor();
  g.sum().backward();
  EXPECT_TRUE(all_close(x.grad(), tensor<double>({-6.0, 3.0, 12.0}), 0, 1e-15));
  // retain_graph defaults to create_graph: the first graph can be walked again.
  Tensor w = tensor<double>({2.0}).set_requires_grad(true);
  const Tensor loss = (w * w).sum();
  loss.backward({}, std::nullopt, true);
  loss.backward();  // would be "backward through the graph a second time" without the default
  EXPECT_TRUE(all_close(w.grad().detach(), tensor<double>({8.0}), 0, 0));
}

TEST(DoubleBackward, AFormulaThatIsNotDifferentiableRefusesNamingTheOp) {
  manual_seed(5);
  const Tensor x = randn({1, 2, 5, 5}, kFloat64).set_requires_grad(true);
  const Tensor w = randn({3, 2, 3, 3}, kFloat64).set_requires_grad(true);
  const Tensor gx = autograd::grad({conv2d(x, w).pow(2.0).sum()}, {x}, {}, std::nullopt, true)[0];
  EXPECT_TRUE(gx.requires_grad());  // first-order values are fine ...
  const Tensor plain = autograd::grad({conv2d(x, w).pow(2.0).sum()}, {x})[0];
  EXPECT_TRUE(all_close(gx.detach(), plain, 1e-12, 1e-12));
  // ... but differentiating them again would need conv2d's backward to be differentiable.
  EXPECT_ERROR_CONTAINS(gx.sum().backward(), "the gradient formula of Conv2dBackward is not differentiable");
}

TEST(DoubleBackward, GradRefusesAnUnusedInputUnlessAllowed) {
  Tensor x = tensor<double>({1.0}).set_requires_grad(true), unused = tensor<double>({2.0}).set_requires_grad(true);
  const Tensor y = (x * 3.0).sum();
  EXPECT_ERROR_CONTAINS(autograd::grad({y}, {x, unused}, {}, true), "input 1 was not used in the graph");
  const auto g = autograd::grad({y}, {x, unused}, {}, std::nullopt, false, /*allow_unused=*/true);
  EXPECT_TRUE(all_close(g[0], tensor<double>({3.0}), 0, 0));
  EXPECT_FALSE(g[1].defined());
}

TEST(DoubleBackward, GradgradcheckCatchesAWrongSecondDerivative) {
  // x * x.detach(): the first derivative is right in value (x) but hides its own dependence on x.
  const auto r = autograd::gradgradcheck(
      [](const std::vector<Tensor>& x) { return x[0] * x[0].detach() * 0.5 + x[0].detach() * x[0] * 0.5; },
      {randn({3}, kFloat64)});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("gradient mismatch"), std::string::npos) << r.message;
}

}  // namespace
}  // namespace ember
