// Graph semantics of the tape: accumulation, retain_graph, freed graphs, version checks,
// hooks, detach, grad mode, anomaly mode, functional grad, memory and threads.
#include <thread>

#include "helpers.h"

namespace ember {
namespace {

using testing::all_close;

Tensor leaf(const Shape& s, double scale = 1.0) { return (randn(s, kFloat64) * scale).set_requires_grad(true); }

TEST(Autograd, LeavesAndRequiresGrad) {
  Tensor x = ones({3});
  EXPECT_FALSE(x.requires_grad());
  EXPECT_TRUE(x.is_leaf());
  x.requires_grad_();
  EXPECT_TRUE(x.requires_grad());
  Tensor y = x * 2.0;
  EXPECT_TRUE(y.requires_grad());
  EXPECT_FALSE(y.is_leaf());
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_EQ(y.grad_fn()->name(), "MulBackward");
  EXPECT_ERROR_CONTAINS(y.requires_grad_(false), "you can only change requires_grad flags of leaf tensors");
  EXPECT_ERROR_CONTAINS(ones({2}, kInt64).requires_grad_(),
                        "only tensors of floating point dtype can require gradients");
  EXPECT_FALSE((x > 0.5).requires_grad());  // bool outputs carry no gradient
  EXPECT_FALSE(x.argmax().requires_grad());
}

TEST(Autograd, BackwardAccumulatesAcrossCalls) {
  manual_seed(0);
  Tensor w = leaf({4, 3}), x = randn({5, 4}, kFloat64);
  auto loss = [&] { return (x.matmul(w).tanh() * 3.0).sum(); };
  loss().backward();
  const Tensor once = w.grad().clone();
  loss().backward();  // the second backward adds to .grad: gradient accumulation
  EXPECT_TRUE(all_close(w.grad(), once * 2.0, 1e-12, 1e-12));
  // ... which equals one backward of the summed loss.
  Tensor w2 = w.detach().clone().set_requires_grad(true);
  (x.matmul(w2).tanh() * 3.0).sum().mul(2.0).backward();
  EXPECT_TRUE(all_close(w2.grad(), w.grad(), 1e-12, 1e-12));
}

TEST(Autograd, GradientsMeetingAtOneTensorAreSummed) {
  Tensor x = leaf({3});
  Tensor y = x * x + x.exp() + x;  // x reaches the loss along four paths
  y.sum().backward();
  const Tensor xd = x.detach();
  EXPECT_TRUE(all_close(x.grad(), xd * 2.0 + xd.exp() + 1.0, 1e-12, 1e-12));
}

// As in PyTorch, only a freed saved tensor stops a second backward: a cast saves none.
TEST(Autograd, ANodeThatSavesNoTensorsCanRunAgain) {
  Tensor x = leaf({3});
  const Tensor y = x.to(kFloat32);  // x is float64
  (y * 2.0).sum().backward();
  (y * 3.0).sum().backward();
  EXPECT_TRUE(all_close(x.grad(), full({3}, 5.0, kFloat64), 0, 0));
}

TEST(Autograd, RetainGraphAndFreedGraphError) {
  Tensor x = leaf({3});
  Tensor y = (x * x).sum();
  y.backward({}, /*retain_graph=*/true);
  y.backward();  // allowed: the first kept the saved tensors
  EXPECT_TRUE(all_close(x.grad(), x.detach() * 4.0, 1e-12, 1e-12));
  EXPECT_ERROR_CONTAINS(y.backward(), "trying to backward through the graph a second time");
  EXPECT_ERROR_CONTAINS(y.backward(), "pass retain_graph=true");
}

TEST(Autograd, InplaceModificationOfASavedTensorIsCaught) {
  Tensor x = leaf({3});
  Tensor y = x * 2.0;  // mul by a scalar saves nothing
  Tensor z = (y * 3.0).sum();
  Tensor w = y.sin().sum();  // sin saves y
  {
    NoGradGuard no_grad;
    y.mul_(2.0);  // version of y's storage: 0 -> 1
  }
  z.backward();  // fine: nothing it saved changed
  const std::string msg = testing::error_of([&] { w.backward(); });
  EXPECT_NE(msg.find("modified by an inplace operation"), std::string::npos) << msg;
  EXPECT_NE(msg.find("saved by SinBackward, is at version 1; expected version 0 instead"), std::string::npos) << msg;
  EXPECT_EQ(y.version(), 1u);
}

TEST(Autograd, InplaceOnLeafRefusedOutsideNoGrad) {
  Tensor w = leaf({3});
  EXPECT_ERROR_CONTAINS(w.add_(ones({3}, kFloat64)),
                        "a leaf tensor that requires grad is being used in an in-place operation");
  EXPECT_ERROR_CONTAINS(w.fill_(0), "a leaf tensor that requires grad");
  {
    NoGradGuard no_grad;  // how optimizers update parameters
    w.add_(ones({3}, kFloat64));
    w.zero_();
  }
  EXPECT_EQ(w.sum().item<double>(), 0.0);
}

TEST(Autograd, HooksReplaceGradientsAndRunInOrder) {
  Tensor x = leaf({3});
  Tensor y = x * 2.0;
  std::vector<std::string> order;
  y.register_hook([&](const Tensor& g) {
    order.push_back("y");
    return g * 10.0;  // replaces the gradient flowing into y's producer
  });
  x.register_hook([&](const Tensor& g) {
    order.push_back("x");
    return Tensor();  // observe only
  });
  x.register_post_accumulate_grad_hook([&](const Tensor& t) {
    order.push_back("x accumulated");
    EXPECT_TRUE(t.grad().defined());
  });
  y.sum().backward();
  EXPECT_TRUE(all_close(x.grad(), full({3}, 20.0, kFloat64), 0, 0));
  EXPECT_EQ(order, (std::vector<std::string>{"y", "x", "x accumulated"}));
}

TEST(Autograd, RetainGradOnNonLeaf) {
  Tensor x = leaf({3});
  Tensor y = x * 3.0;
  y.retain_grad();
  Tensor z = y * y;
  z.sum().backward();
  EXPECT_TRUE(all_close(y.grad(), y.detach() * 2.0, 1e-12, 1e-12));
  Tensor u = x * 1.0;
  (u * u).sum().backward();
  EXPECT_FALSE(u.grad().defined());  // not retained
}

TEST(Autograd, DetachCutsTheGraph) {
  Tensor x = leaf({3});
  Tensor d = x.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.shares_storage(x));
  Tensor y = (x * d).sum();  // d is a constant
  y.backward();
  EXPECT_TRUE(all_close(x.grad(), x.detach(), 0, 0));
  Tensor z = x * 2.0;
  z.detach_();
  EXPECT_FALSE(z.requires_grad());
}

TEST(Autograd, NoGradRecordsNothing) {
  Tensor x = leaf({3});
  {
    NoGradGuard no_grad;
    Tensor y = x * 2.0 + 1.0;
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(y.grad_fn(), nullptr);
    {
      EnableGradGuard enable;  // nestable: back on inside
      EXPECT_TRUE((x * 2.0).requires_grad());
    }
    EXPECT_FALSE((x * 2.0).requires_grad());
  }
  EXPECT_TRUE(GradMode::is_enabled());
  {
    InferenceMode inference;
    EXPECT_FALSE(x.exp().requires_grad());
  }
}

TEST(Autograd, FunctionalGradDoesNotTouchDotGrad) {
  Tensor x = leaf({3}), w = leaf({3});
  Tensor y = (x * w).sum();
  const auto g = autograd::grad({y}, {x, w});
  EXPECT_TRUE(all_close(g[0], w.detach(), 0, 0));
  EXPECT_TRUE(all_close(g[1], x.detach(), 0, 0));
  EXPECT_FALSE(x.grad().defined());
  // A non-leaf input: the gradient flowing into it.
  Tensor a = leaf({2});
  Tensor b = a * 3.0;
  Tensor c = (b * b).sum();
  EXPECT_TRUE(all_close(autograd::grad({c}, {b})[0], b.detach() * 2.0, 1e-12, 1e-12));
}

TEST(Autograd, AnomalyModeNamesTheOp) {
  Tensor x = tensor<double>({0.0, 1.0}).set_requires_grad(true);
  Tensor y = x.sqrt().sum();  // d sqrt / dx at 0 is inf
  DetectAnomalyGuard anomaly;
  EXPECT_ERROR_CONTAINS(y.backward(), "anomaly detected: the backward of SqrtBackward returned nan or inf");
}

TEST(Autograd, ErrorsOnBadBackward) {
  Tensor x = leaf({3});
  EXPECT_ERROR_CONTAINS((x * 2.0).backward(), "grad can be implicitly created only for one-element outputs");
  EXPECT_ERROR_CONTAINS(ones({3}).sum().backward(), "does not require grad and does not have a grad_fn");
  EXPECT_ERROR_CONTAINS((x * 2.0).backward(ones({2}, kFloat64)),
                        "gradient of shape [2] does not match output 0 of shape [3]");
  (x * 2.0).backward(ones({3}, kFloat64));  // an explicit gradient works
  EXPECT_TRUE(all_close(x.grad(), full({3}, 2.0, kFloat64), 0, 0));
}

TEST(Autograd, GradDtypeFollowsTheInput) {
  Tensor x = ones({3}).set_requires_grad(true);  // float32
  (x.to(kFloat64) * tensor<double>({1.0, 2.0, 3.0})).sum().backward();
  EXPECT_EQ(x.grad().dtype(), kFloat32);
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{1, 2, 3}));
  Tensor h = ones({2}).set_requires_grad(true);
  (h * tensor<double>({2.0, 4.0})).sum().backward();  // promoted to float64, gradient back in float32
  EXPECT_EQ(h.grad().dtype(), kFloat32);
}

// A small MLP in float64: log-softmax NLL of linear -> tanh -> linear.
struct Mlp {
  Tensor w1, b1, w2, b2;
  Mlp() {
    manual_seed(3);
    w1 = leaf({16, 8}, 0.3);
    b1 = leaf({16}, 0.1);
    w2 = leaf({4, 16}, 0.3);
    b2 = leaf({4}, 0.1);
  }
  Tensor loss(const Tensor& x, const Tensor& y) const {
    const Tensor logits = linear(linear(x, w1, b1).tanh(), w2, b2);
    return -logits.log_softmax(1).gather(1, y.unsqueeze(1)).mean();
  }
  std::vector<Tensor> grads() const { return {w1.grad(), b1.grad(), w2.grad(), b2.grad()}; }
};

TEST(Autograd, GradientAccumulationOverMicroBatchesEqualsOneBatch) {
  manual_seed(11);
  const Tensor x = randn({32, 8}, kFloat64), y = randint(0, 4, {32});
  Mlp big, small;
  big.loss(x, y).backward();
  for (int k = 0; k < 4; ++k)  // 4 micro-batches of 8, each loss divided by 4
    (small.loss(x.narrow(0, 8 * k, 8), y.narrow(0, 8 * k, 8)) / 4.0).backward();
  for (size_t i = 0; i < 4; ++i)
    EXPECT_TRUE(all_close(small.grads()[i], big.grads()[i], 1e-10, 1e-12)) << "param " << i;
}

// Memory: the tape's saved tensors are what NoGradGuard saves, and backward frees them.
TEST(Autograd, NoGradLowersPeakAndBackwardFreesSavedTensors) {
  manual_seed(5);
  std::vector<Tensor> ws;
  for (int i = 0; i < 4; ++i) ws.push_back((randn({256, 256}) * 0.05).set_requires_grad(true));
  const Tensor x = randn({512, 256});
  auto forward = [&] {
    Tensor h = x;
    for (const Tensor& w : ws) h = h.matmul(w).relu();
    return h.sum();
  };
  memory::empty_cache();
  const int64_t base = memory::stats().current_bytes;
  memory::reset_peak();
  {
    NoGradGuard no_grad;
    Tensor l = forward();
  }
  const int64_t peak_no_grad = memory::stats().peak_bytes - base;
  memory::reset_peak();
  Tensor l = forward();
  const int64_t held_by_graph = memory::stats().current_bytes - base;
  const int64_t peak_grad = memory::stats().peak_bytes - base;
  const double ratio = static_cast<double>(peak_grad) / static_cast<double>(peak_no_grad);
  // With the tape all four relu outputs stay saved (4 x 512 KiB); without it at most three
  // activations live at once. Measured: 1.67x.
  EXPECT_GT(ratio, 1.5) << "peak with grad / without = " << ratio;
  EXPECT_GT(held_by_graph, 4 * 512 * 256 * 4) << "activations saved for backward";
  l.backward();
  l = Tensor();
  int64_t grads = 0;
  for (const Tensor& w : ws) grads += static_cast<int64_t>(w.grad().nbytes());
  EXPECT_EQ(memory::stats().current_bytes - base, grads) << "after backward only the gradients remain";
}

TEST(Autograd, ThreadsRecordIndependently) {
  manual_seed(9);
  const Tensor w0 = randn({8, 8}, kFloat64), x = randn({4, 8}, kFloat64);
  auto expected = [&] {
    Tensor w = w0.clone().set_requires_grad(true);
    x.matmul(w).tanh().sum().backward();
    return w.grad();
  }();
  std::vector<Tensor> results(2);
  std::thread trainer([&] {
    for (int i = 0; i < 20; ++i) {
      Tensor w = w0.clone().set_requires_grad(true);
      x.matmul(w).tanh().sum().backward();
      results[0] = w.grad();
    }
  });
  std::thread evaluator([&] {
    NoGradGuard no_grad;  // only this thread's grad mode is off
    for (int i = 0; i < 20; ++i) {
      Tensor w = w0.clone().set_requires_grad(true);
      results[1] = x.matmul(w).tanh();
      EXPECT_FALSE(results[1].requires_grad());
    }
  });
  trainer.join();
  evaluator.join();
  EXPECT_TRUE(all_close(results[0], expected, 0, 0));
  EXPECT_TRUE(GradMode::is_enabled());
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

namespace F = nn::functional;

TEST(Functional, BatchNormUpdatesRunningStatistics) {
  manual_seed(2);
  const Tensor x = randn({8, 3, 2, 2}, kFloat64);
  Tensor rm = zeros({3}, kFloat64), rv = ones({3}, kFloat64);
  F::batch_norm(x, rm, rv, {}, {}, /*training=*/true, /*momentum=*/0.1);
  const Tensor mean = x.mean({0, 2, 3}), var = x.var({0, 2, 3});  // unbiased, as PyTorch's running_var
  EXPECT_TRUE(testing::all_close(rm, mean * 0.1, 1e-12, 1e-14));
  EXPECT_TRUE(testing::all_close(rv, var * 0.1 + 0.9, 1e-12, 1e-14));
  EXPECT_ERROR_CONTAINS(F::batch_norm(randn({1, 3}), {}, {}, {}, {}, true), "expected more than 1 value per channel");
}

TEST(Functional, DropoutMaskIsSeededScaledAndUsedByBackward) {
  Tensor x = ones({1000}, kFloat64).set_requires_grad(true);
  manual_seed(7);
  const Tensor y = F::dropout(x, 0.3, true);
  manual_seed(7);
  const Tensor y2 = F::dropout(x, 0.3, true);
  EXPECT_TRUE(testing::all_close(y, y2, 0, 0));  // same seed, same mask
  const auto v = y.detach().to_vector<double>();
  int64_t kept = 0;
  for (double e : v) {
    EXPECT_TRUE(e == 0.0 || std::abs(e - 1.0 / 0.7) < 1e-12);
    kept += e != 0.0;
  }
  EXPECT_NEAR(static_cast<double>(kept) / 1000.0, 0.7, 0.05);
  y.sum().backward();
  EXPECT_TRUE(testing::all_close(x.grad(), y.detach(), 0, 0));  // d/dx (x * mask) = mask
  EXPECT_TRUE(F::dropout(x, 0.3, /*training=*/false).is_same(x));
  EXPECT_ERROR_CONTAINS(F::dropout(x, 1.5), "dropout: probability has to be between 0 and 1, but got 1.5");
}

TEST(Functional, LossArgumentErrors) {
  const Tensor logits = randn({4, 3});
  EXPECT_ERROR_CONTAINS(F::cross_entropy(logits, tensor<int64_t>({0, 1, 2})), "expected target of shape [4]");
  EXPECT_ERROR_CONTAINS(F::cross_entropy(logits, tensor<int64_t>({0, 1, 2, 3})),
                        "target 3 is out of bounds for 3 classes");
  EXPECT_ERROR_CONTAINS(
      F::cross_entropy(logits, tensor<int64_t>({0, 1, 2, 0}), F::CrossEntropyOptions().reduction("avg")),
      "reduction must be 'mean', 'sum' or 'none', got 'avg'");
  EXPECT_ERROR_CONTAINS(F::layer_norm(logits, {4}),
                        "normalized_shape [4] must match the trailing dims of input [4, 3]");
  EXPECT_ERROR_CONTAINS(F::mse_loss(logits, randn({3, 4})),
                        "mse_loss: input of shape [4, 3] and target of shape [3, 4] differ");
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

TEST(Autograd, ZeroGradSetsToNoneOrZeroes) {
  Tensor a = ones({3}).set_requires_grad(true), b = ones({2}).set_requires_grad(true);
  ((a * 2.0).sum() + b.sum()).backward();
  autograd::zero_grad({a}, /*set_to_none=*/false);
  EXPECT_TRUE(a.grad().defined());
  EXPECT_EQ(a.grad().sum().item<float>(), 0.0f);
  const int64_t before = memory::stats().current_bytes;
  autograd::zero_grad({a, b});
  EXPECT_FALSE(a.grad().defined());
  EXPECT_FALSE(b.grad().defined());
  EXPECT_EQ(before - memory::stats().current_bytes, 3 * 4 + 2 * 4);  // the gradients' bytes are freed
}

}  // namespace
}  // namespace ember
