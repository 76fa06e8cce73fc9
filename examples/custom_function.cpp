// Writing your own autograd function (Note [Custom functions] in ember/autograd/custom_function.h).
//
// 1. SmoothAbs, sqrt(x^2 + eps): a forward and a hand-derived backward, then checked the way
//    ember checks its own ops — against finite differences (gradcheck), and its second derivative
//    too (gradgradcheck), since its backward is written with ember's public ops.
// 2. Sign with a straight-through gradient: sign(x) has a zero gradient almost everywhere, so a
//    model with binary (+1/-1) weights cannot learn through it. A custom backward that passes the
//    gradient through where |x| <= 1 (BinaryConnect's estimator, the idea behind quantization-
//    aware training) lets it: below, the same regression is trained with the built-in sign and
//    with the custom one.
//   build/release/examples/custom_function
#include <ember/ember.h>

#include <cstdio>

using namespace ember;
using autograd::AutogradContext;
using autograd::tensor_list;

struct SmoothAbs : autograd::Function<SmoothAbs> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, double eps) {
    Tensor y = (x * x + eps).sqrt();
    ctx->save_for_backward({x, y});  // an input and an output
    return y;
  }
  // d/dx sqrt(x^2 + eps) = x / y; nothing for eps (not a tensor).
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const tensor_list saved = ctx->get_saved_variables();
    return {grads[0] * saved[0] / saved[1], Tensor()};
  }
};

struct SignSTE : autograd::Function<SignSTE> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x) {
    ctx->save_for_backward({x});
    return (x >= 0.0).to(x.dtype()) * 2.0 - 1.0;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const Tensor x = ctx->get_saved_variables()[0];
    return {where(x.abs() <= 1.0, grads[0], 0.0)};  // straight through, inside [-1, 1]
  }
};

// Fits y = x w with w in {-1, +1}^8, through `binarize` applied to latent float weights.
template <class Binarize>
double train(Binarize binarize, const Tensor& x, const Tensor& y, const Tensor& w_true) {
  manual_seed(3);
  Tensor latent = (randn({8, 1}) * 0.1).set_requires_grad(true);
  optim::SGD opt({latent}, optim::SGDOptions(0.05));
  Tensor loss;
  for (int step = 0; step < 200; ++step) {
    opt.zero_grad();
    loss = nn::functional::mse_loss(x.matmul(binarize(latent)), y);
    loss.backward();
    opt.step();
  }
  NoGradGuard no_grad;
  const Tensor w = binarize(latent);
  const double right = (w == w_true).to(kFloat32).mean().item<double>();
  std::printf("  final loss %.4f, signs recovered %.0f %%\n", loss.item<double>(), 100 * right);
  return loss.item<double>();
}

int main() {
  std::printf("1. SmoothAbs: a custom forward and backward\n");
  const Tensor x0 = randn({5}, kFloat64);
  const auto first =
      autograd::gradcheck([](const std::vector<Tensor>& v) { return SmoothAbs::apply(v[0], 0.01); }, {x0});
  const auto second =
      autograd::gradgradcheck([](const std::vector<Tensor>& v) { return SmoothAbs::apply(v[0], 0.01); }, {x0});
  std::printf("  gradcheck: %s, gradgradcheck: %s\n", first.ok ? "ok" : first.message.c_str(),
              second.ok ? "ok" : second.message.c_str());

  std::printf("2. binary weights: y = x sign(w), trained by SGD on float w\n");
  manual_seed(0);
  const Tensor w_true = (randn({8, 1}) >= 0.0).to(kFloat32) * 2.0 - 1.0;
  const Tensor x = randn({256, 8}), y = x.matmul(w_true);
  std::printf(" built-in sign (its gradient is zero):\n");
  const double plain = train([](const Tensor& w) { return w.sign(); }, x, y, w_true);
  std::printf(" SignSTE (straight-through gradient):\n");
  const double ste = train([](const Tensor& w) { return SignSTE::apply(w); }, x, y, w_true);
  return first.ok && second.ok && ste < plain ? 0 : 1;
}
