// Custom autograd functions (Note [Custom functions]): LibTorch's Function<T> idiom, checked
// against finite differences and built-in ops, and every misuse refused with a message.
#include "helpers.h"

namespace ember {
namespace {

using autograd::AutogradContext;
using autograd::tensor_list;
using testing::all_close;

// y = scale x^3, saving the input and a double.
struct Cube : autograd::Function<Cube> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, double scale) {
    ctx->save_for_backward({x});
    ctx->saved_data["scale"] = scale;
    return x * x * x * scale;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const Tensor x = ctx->get_saved_variables()[0];
    return {grads[0] * x * x * (3.0 * ctx->saved_data["scale"].toDouble()), Tensor()};
  }
};

// y = exp(x), saving its output (the backward of an output-saving op).
struct Exp : autograd::Function<Exp> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x) {
    Tensor y = x.exp();
    ctx->save_for_backward({y});
    return y;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    return {grads[0] * ctx->get_saved_variables()[0]};
  }
};

// a * b and a + b: two tensor inputs, two outputs.
struct MulAdd : autograd::Function<MulAdd> {
  static tensor_list forward(AutogradContext* ctx, Tensor a, Tensor b) {
    ctx->save_for_backward({a, b});
    ctx->saved_data["needs"] = std::vector<int64_t>{ctx->needs_input_grad(0), ctx->needs_input_grad(1)};
    return {a * b, a + b};
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list g) {
    const auto saved = ctx->get_saved_variables();
    return {g[0] * saved[1] + g[1], g[0] * saved[0] + g[1]};
  }
};

TEST(CustomFunction, CubeMatchesTheBuiltInOpsAndFiniteDifferences) {
  manual_seed(1);
  const Tensor x0 = randn({2, 3}, kFloat64);
  Tensor x = x0.clone().set_requires_grad(true);
  const Tensor y = Cube::apply(x, 2.0);
  EXPECT_EQ(y.grad_fn()->name(), "CubeBackward");
  y.sum().backward();
  Tensor ref = x0.clone().set_requires_grad(true);
  (ref.pow(3.0) * 2.0).sum().backward();
  EXPECT_TRUE(all_close(y.detach(), (x0.pow(3.0) * 2.0), 1e-15, 1e-15));
  EXPECT_TRUE(all_close(x.grad(), ref.grad(), 1e-15, 1e-15));
  for (auto check : {autograd::gradcheck, autograd::gradgradcheck}) {  // (its backward is made of public ops)
    const auto r = check([](const std::vector<Tensor>& v) { return Cube::apply(v[0], 0.5); }, {x0}, {});
    EXPECT_TRUE(r.ok) << r.message;
  }
  const auto r = autograd::gradgradcheck([](const std::vector<Tensor>& v) { return Exp::apply(v[0]); }, {x0});
  EXPECT_TRUE(r.ok) << r.message;  // a saved output, tied to the node in the second backward
}

TEST(CustomFunction, TwoInputsTwoOutputsAndNeedsInputGrad) {
  manual_seed(2);
  Tensor a = randn({4}, kFloat64).set_requires_grad(true);
  const Tensor b = randn({4}, kFloat64);  // needs no gradient
  const tensor_list out = MulAdd::apply(a, b);
  ASSERT_EQ(out.size(), 2u);
  (out[0] * 2.0 + out[1] * 3.0).sum().backward();
  EXPECT_TRUE(all_close(a.grad(), b * 2.0 + 3.0, 1e-15, 1e-15));
  const auto r = autograd::gradcheck(
      [](const std::vector<Tensor>& v) {
        const auto o = MulAdd::apply(v[0], v[1]);
        return o[0] * o[1];
      },
      {randn({3}, kFloat64), randn({3}, kFloat64)});
  EXPECT_TRUE(r.ok) << r.message;
  // Only one output used: the other's gradient arrives as zeros.
  Tensor a2 = randn({4}, kFloat64).set_requires_grad(true);
  MulAdd::apply(a2, b)[1].sum().backward();
  EXPECT_TRUE(all_close(a2.grad(), ones({4}, kFloat64), 0, 0));
}

TEST(CustomFunction, NoRecordingWithoutGradModeOrInputsThatNeedIt) {
  const Tensor x = randn({3}, kFloat64).set_requires_grad(true);
  {
    NoGradGuard no_grad;
    EXPECT_FALSE(Cube::apply(x, 1.0).requires_grad());
  }
  EXPECT_FALSE(Cube::apply(randn({3}, kFloat64), 1.0).requires_grad());
  // forward itself records nothing: its ops ran with grad mode off.
  EXPECT_EQ(Cube::apply(x, 1.0).grad_fn()->next_edges.size(), 1u);
}

struct SortValues : autograd::Function<SortValues> {  // a mask output that carries no gradient
  static tensor_list forward(AutogradContext* ctx, const Tensor& x) {
    Tensor positive = (x > 0.0).to(x.dtype());
    ctx->mark_non_differentiable({positive});
    ctx->save_for_backward({positive});
    return {x * positive, positive};
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list g) { return {g[0] * ctx->get_saved_variables()[0]}; }
};

struct DoubleInPlace : autograd::Function<DoubleInPlace> {  // modifies its input and returns it
  static Tensor forward(AutogradContext* ctx, Tensor x) {
    x.mul_(2.0);
    ctx->mark_dirty({x});
    return x;
  }
  static tensor_list backward(AutogradContext*, tensor_list g) { return {g[0] * 2.0}; }
};

struct Identity : autograd::Function<Identity> {  // returns its input unchanged
  static Tensor forward(AutogradContext*, Tensor x) { return x; }
  static tensor_list backward(AutogradContext*, tensor_list g) { return {g[0] * 10.0}; }
};

TEST(CustomFunction, NonDifferentiableDirtyAndReturnedInputs) {
  Tensor x = tensor<double>({-1.0, 2.0, 3.0}).set_requires_grad(true);
  const auto out = SortValues::apply(x);
  EXPECT_TRUE(out[0].requires_grad());
  EXPECT_FALSE(out[1].requires_grad());
  out[0].sum().backward();
  EXPECT_TRUE(all_close(x.grad(), tensor<double>({0.0, 1.0, 1.0}), 0, 0));

  // In place on a non-leaf: its history now leads through the function.
  Tensor w = tensor<double>({1.0, 2.0}).set_requires_grad(true);
  Tensor h = w * 3.0;
  const Tensor y = DoubleInPlace::apply(h);
  EXPECT_TRUE(y.is_same(h));
  EXPECT_EQ(h.grad_fn()->name(), "DoubleInPlaceBackward");
  EXPECT_TRUE(all_close(h.detach(), tensor<double>({6.0, 12.0}), 0, 0));
  y.sum().backward();
  EXPECT_TRUE(all_close(w.grad(), tensor<double>({6.0, 6.0}), 0, 0));
  EXPECT_ERROR_CONTAINS(DoubleInPlace::apply(w), "a leaf tensor that requires grad was modified in place");

  Tensor v = tensor<double>({1.0}).set_requires_grad(true);
  const Tensor same = Identity::apply(v);
  EXPECT_FALSE(same.is_same(v));  // an alias with the function's history; v stays a leaf
  EXPECT_TRUE(v.is_leaf());
  same.sum().backward();
  EXPECT_TRUE(all_close(v.grad(), tensor<double>({10.0}), 0, 0));
}

// x w^T (+ b): forward's last parameter has a default, so apply() may be given two arguments
// while backward always returns three gradients (the last undefined without a bias), as
// PyTorch's C++ autograd tutorial writes it.
struct LinearWithDefaultBias : autograd::Function<LinearWithDefaultBias> {
  static Tensor forward(AutogradContext* ctx, Tensor x, Tensor w, Tensor b = Tensor()) {
    ctx->save_for_backward({x, w, b});
    Tensor y = x.mm(w.t());
    return b.defined() ? y + b : y;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list g) {
    const auto saved = ctx->get_saved_variables();
    return {g[0].mm(saved[1]), g[0].t().mm(saved[0]), saved[2].defined() ? g[0].sum(0) : Tensor()};
  }
};
struct ExtraDefinedGradient : autograd::Function<ExtraDefinedGradient> {
  static Tensor forward(AutogradContext*, Tensor x, Tensor b = Tensor()) { return b.defined() ? x + b : x * 1.0; }
  static tensor_list backward(AutogradContext*, tensor_list g) { return {g[0], g[0]}; }
};

TEST(CustomFunction, DefaultedArgumentsTakeTrailingUndefinedGradients) {
  manual_seed(4);
  const Tensor x0 = randn({2, 3}, kFloat64), w0 = randn({4, 3}, kFloat64), b0 = randn({4}, kFloat64);
  for (bool with_bias : {false, true}) {
    Tensor x = x0.clone().set_requires_grad(true), w = w0.clone().set_requires_grad(true);
    Tensor b = b0.clone().set_requires_grad(true);
    Tensor y = with_bias ? LinearWithDefaultBias::apply(x, w, b) : LinearWithDefaultBias::apply(x, w);
    (y * y).sum().backward();
    Tensor rx = x0.clone().set_requires_grad(true), rw = w0.clone().set_requires_grad(true);
    Tensor rb = b0.clone().set_requires_grad(true);
    Tensor r = rx.mm(rw.t());
    if (with_bias) r = r + rb;
    (r * r).sum().backward();
    EXPECT_TRUE(all_close(x.grad(), rx.grad(), 1e-14, 1e-14));
    EXPECT_TRUE(all_close(w.grad(), rw.grad(), 1e-14, 1e-14));
    EXPECT_EQ(b.grad().defined(), with_bias);
    if (with_bias) EXPECT_TRUE(all_close(b.grad(), rb.grad(), 1e-14, 1e-14));
  }
  // A defined gradient for an argument apply() was not given is still a miscount.
  const Tensor x = x0.clone().set_requires_grad(true);
  EXPECT_ERROR_CONTAINS(ExtraDefinedGradient::apply(x).sum().backward(),
                        "ExtraDefinedGradientBackward: backward returned 2 gradients, expected 1");
}

struct WrongCount : autograd::Function<WrongCount> {
  static Tensor forward(AutogradContext*, const Tensor& x, double) { return x * 2.0; }
  static tensor_list backward(AutogradContext*, tensor_list g) { return {g[0] * 2.0}; }
};
struct GradForScalar : autograd::Function<GradForScalar> {
  static Tensor forward(AutogradContext*, const Tensor& x, double) { return x * 2.0; }
  static tensor_list backward(AutogradContext*, tensor_list g) { return {g[0] * 2.0, g[0]}; }
};
struct WrongShape : autograd::Function<WrongShape> {
  static Tensor forward(AutogradContext*, const Tensor& x) { return x.sum(); }
  static tensor_list backward(AutogradContext*, tensor_list g) { return {g[0]}; }
};
struct ForgetsDirty : autograd::Function<ForgetsDirty> {
  static Tensor forward(AutogradContext* ctx, Tensor x) {
    ctx->mark_dirty({x});
    return x * 1.0;
  }
  static tensor_list backward(AutogradContext*, tensor_list g) { return {g[0]}; }
};

TEST(CustomFunction, MisuseIsAnErrorNamingTheFunction) {
  const Tensor x = randn({3}, kFloat64).set_requires_grad(true);
  EXPECT_ERROR_CONTAINS(WrongCount::apply(x, 1.0).sum().backward(),
                        "WrongCountBackward: backward returned 1 gradients, expected 2");
  EXPECT_ERROR_CONTAINS(GradForScalar::apply(x, 1.0).sum().backward(),
                        "GradForScalarBackward: backward returned a gradient for argument 1 of forward, which is not");
  EXPECT_ERROR_CONTAINS(WrongShape::apply(x).backward(), "gradient of shape [] for argument 0 of shape [3]");
  EXPECT_ERROR_CONTAINS(ForgetsDirty::apply(x.detach()), "ForgetsDirtyBackward: a tensor marked dirty");
  // A saved input modified in place before backward, and a second backward without retain_graph.
  Tensor h = x * 1.0;
  Tensor y = Cube::apply(h, 1.0);
  {
    NoGradGuard no_grad;
    h.add_(1.0);
  }
  EXPECT_ERROR_CONTAINS(y.sum().backward(), "saved by CubeBackward");
  y = Cube::apply(x, 1.0);
  y.sum().backward();
  EXPECT_ERROR_CONTAINS(y.sum().backward(), "backward through the graph a second time");
  // saved_data read as the wrong type.
  autograd::IValue v(3);
  EXPECT_EQ(v.toInt(), 3);
  EXPECT_ERROR_CONTAINS(v.toDouble(), "IValue: expected double but it holds int");
  EXPECT_TRUE(autograd::IValue("s").isString());
  EXPECT_TRUE(autograd::IValue().isNone());
}

}  // namespace
}  // namespace ember
