// ember against LibTorch (Debian's libtorch-dev, PyTorch 1.13) on the same work, in one
// run, with the same thread count. Inputs are shared (from_blob both ways) and outputs are
// compared before anything is timed. Ratios are LibTorch time / ember time (> 1: ember faster).
//   build/bench/bench/libtorch_peer [threads] [optim|quant|conv|unary|random|sequence|linalg]   (only that section)
#include <ATen/native/quantized/PackedParams.h>
#include <torch/torch.h>

#include <malloc.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <ember/ember.h>

#include "models.h"
#include "timing.h"

namespace {

using ember::bench::fmt;

// A view of a contiguous ember tensor (float32, or the int8 section's uint8 and int8).
torch::Tensor as_torch(const ember::Tensor& t) {
  std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
  const auto type = t.dtype() == ember::kUInt8  ? torch::kUInt8
                    : t.dtype() == ember::kInt8 ? torch::kInt8
                                                : torch::kFloat32;
  if (type == torch::kFloat32 && t.dtype() != ember::kFloat32) {
    std::printf("as_torch: expects float32, uint8 or int8, got %s\n", ember::dtype_name(t.dtype()));
    std::exit(1);
  }
  return torch::from_blob(t.data_ptr(), shape, type);
}

void check(const char* name, const ember::Tensor& ours, const torch::Tensor& theirs, double tol) {
  const torch::Tensor diff = (as_torch(ours.contiguous()) - theirs.contiguous()).abs().max();
  const double d = diff.item<double>();
  if (!(d <= tol)) {
    std::printf("%s: ember and LibTorch disagree by %g\n", name, d);
    std::exit(1);
  }
}

// Times ember against LibTorch writing into a preallocated output (its out= form), which
// compares kernels, interleaved round by round so that both see the same machine state;
// and, separately afterwards, LibTorch's ordinary allocating call, which also pays for
// fresh pages of every large output (its CPU allocator caches nothing; ember's does).
// The page-fault storms of the latter disturb whatever runs next, hence not interleaved.
void compare(const char* name, const std::function<void()>& ours, const std::function<void()>& theirs,
             const std::function<void()>& theirs_out = nullptr, int rounds = 11) {
  std::vector<std::function<void()>> fns{ours};
  if (theirs_out)
    fns.push_back(theirs_out);
  else
    fns.push_back(theirs);
  const auto t = ember::bench::interleaved_medians(fns, rounds);
  const double t_alloc = theirs_out ? ember::bench::median_seconds(theirs, rounds) : t[1];
  std::printf("| %s | %.2f ms | %s | %s | %.2f ms | %.2f |\n", name, t[0] * 1e3,
              theirs_out ? fmt("%.2f ms", t[1] * 1e3).c_str() : "-",
              theirs_out ? fmt("%.2f", t[1] / t[0]).c_str() : "-", t_alloc * 1e3, t_alloc / t[0]);
  std::fflush(stdout);
}

// ---- optimizers: AdamW steps, a CNN training step, L-BFGS on Rosenbrock ----

void adamw_steps(int64_t tensors) {
  const int64_t n = 10'000'000 / tensors;
  std::vector<ember::Tensor> ep;
  std::vector<torch::Tensor> tp;
  for (int64_t i = 0; i < tensors; ++i) {
    ep.push_back(ember::randn({n}).set_requires_grad(true));
    ep.back().mutable_grad() = ember::randn({n});
    tp.push_back(as_torch(ep.back()).clone().requires_grad_(true));
    tp.back().mutable_grad() = as_torch(ep.back().grad()).clone();
  }
  ember::optim::AdamW eopt(ep, ember::optim::AdamWOptions(1e-3));
  torch::optim::AdamW topt(tp, torch::optim::AdamWOptions(1e-3));
  eopt.step();
  topt.step();
  for (size_t i = 0; i < ep.size(); ++i) check("AdamW step", ep[i], tp[i], 1e-6);
  const auto t = ember::bench::interleaved_medians({[&] { eopt.step(); }, [&] { topt.step(); }}, 9);
  std::printf("| AdamW step, %s float32 | %.2f ms | %.2f ms | %.2f |\n", tensors == 1 ? "1 x 10M" : "100 x 100K",
              t[0] * 1e3, t[1] * 1e3, t[1] / t[0]);
}

void cnn_step() {
  ember::manual_seed(0);
  ember::nn::Sequential em = ember::bench::small_cnn();
  auto tm = torch::nn::Sequential(
      torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3).padding(1)), torch::nn::ReLU(), torch::nn::MaxPool2d(2),
      torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3).padding(1)), torch::nn::ReLU(), torch::nn::MaxPool2d(2),
      torch::nn::Flatten(), torch::nn::Linear(3136, 128), torch::nn::ReLU(), torch::nn::Linear(128, 10));
  {  // the same weights
    torch::NoGradGuard no_grad;
    auto ours = em->named_parameters();
    for (auto& p : tm->named_parameters()) p.value().copy_(as_torch(ours[p.key()]));
  }
  const ember::Tensor x = ember::randn({128, 1, 28, 28}), y = ember::randint(0, 10, {128});
  const torch::Tensor tx = as_torch(x), ty = torch::from_blob(y.data_ptr(), {128}, torch::kInt64);
  ember::optim::SGD eopt(em->parameters(), ember::optim::SGDOptions(0.01).momentum(0.9));
  torch::optim::SGD topt(tm->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  auto ember_step = [&] {
    eopt.zero_grad();
    ember::nn::functional::cross_entropy(em(x), y).backward();
    eopt.step();
  };
  auto torch_step = [&] {
    topt.zero_grad();
    torch::nn::functional::cross_entropy(tm->forward(tx), ty).backward();
    topt.step();
  };
  ember_step();
  torch_step();
  check("CNN first-layer weight after one step", em->parameters()[0], tm->parameters()[0], 1e-5);
  const auto t = ember::bench::interleaved_medians({ember_step, torch_step}, 9);
  std::printf("| small CNN train step (SGD momentum), batch 128 | %.2f ms | %.2f ms | %.2f |\n", t[0] * 1e3, t[1] * 1e3,
              t[1] / t[0]);
}

// Iterations (steps of max_iter 1) and closure evaluations to reach loss < 1e-8, float64.
void lbfgs_rosenbrock(bool strong_wolfe) {
  ember::Tensor ex = ember::tensor<double>({-1.5, 2.0}).set_requires_grad(true);
  torch::Tensor tx = torch::tensor({-1.5, 2.0}, torch::kFloat64).requires_grad_(true);
  auto eo = ember::optim::LBFGSOptions(1.0).max_iter(1);
  auto to = torch::optim::LBFGSOptions(1.0).max_iter(1);
  if (strong_wolfe) {
    eo.line_search_fn("strong_wolfe");
    to.line_search_fn("strong_wolfe");
  }
  ember::optim::LBFGS eopt({ex}, eo);
  torch::optim::LBFGS topt({tx}, to);
  auto trosen = [](const torch::Tensor& x) { return (1 - x[0]).square() + 100 * (x[1] - x[0].square()).square(); };
  int64_t e_iter = 0, e_evals = 0, t_iter = 0, t_evals = 0;
  while (ember::bench::rosenbrock(ex).item<double>() >= 1e-8 && e_iter < 1000) {
    eopt.step([&] {
      ++e_evals;
      eopt.zero_grad();
      ember::Tensor f = ember::bench::rosenbrock(ex);
      f.backward();
      return f;
    });
    ++e_iter;
  }
  while (trosen(tx).item<double>() >= 1e-8 && t_iter < 1000) {
    topt.step([&] {
      ++t_evals;
      topt.zero_grad();
      torch::Tensor f = trosen(tx);
      f.backward();
      return f;
    });
    ++t_iter;
  }
  std::printf("| L-BFGS%s, Rosenbrock from (-1.5, 2) to loss < 1e-8 | %lld it / %lld evals | %lld it / %lld evals |\n",
              strong_wolfe ? " + strong Wolfe" : "", static_cast<long long>(e_iter), static_cast<long long>(e_evals),
              static_cast<long long>(t_iter), static_cast<long long>(t_evals));
}

int optimizer_section() {
  std::printf("\n| optimizer workload | ember | LibTorch | LibTorch / ember |\n|---|---|---|---|\n");
  adamw_steps(1);
  adamw_steps(100);
  cnn_step();
  lbfgs_rosenbrock(false);
  lbfgs_rosenbrock(true);
  return 0;
}

// ---- convolutions: ember's algorithms against LibTorch's (oneDNN), pass by pass ----

// One float32 convolution, stride 1: forward, and forward + backward (the gradients a layer
// inside a network needs: input, weight, bias; the first layer's input needs none), for ember
// with its heuristic (the direct kernels here), ember with im2col + GEMM forced, and LibTorch
// (at::convolution_backward, what its autograd calls), interleaved round by round.
void conv_row(const char* name, int64_t N, int64_t C, int64_t H, int64_t O, int64_t k, int64_t pad, bool input_grad) {
  namespace bc = ember::backends::cpu;
  const ember::Tensor x = ember::randn({N, C, H, H}), w = ember::randn({O, C, k, k}) * 0.05, b = ember::randn({O});
  const torch::Tensor tx = as_torch(x), tw = as_torch(w), tb = as_torch(b);
  const ember::Tensor gy = ember::randn_like(ember::conv2d(x, w, b, {1, 1}, {pad, pad}));
  const torch::Tensor tgy = as_torch(gy);
  check("conv2d", ember::conv2d(x, w, b, {1, 1}, {pad, pad}), torch::conv2d(tx, tw, tb, 1, pad), 1e-3);
  const std::array<bool, 3> wanted{input_grad, true, true};
  auto ember_pass = [&](bool backward) {
    (void)ember::conv2d(x, w, b, {1, 1}, {pad, pad});
    if (backward) (void)ember::native::conv2d_backward(x, w, gy, {1, 1}, {pad, pad}, {1, 1}, 1, wanted);
  };
  auto torch_pass = [&](bool backward) {
    (void)torch::conv2d(tx, tw, tb, 1, pad);
    if (backward)
      (void)at::convolution_backward(tgy, tx, tw, at::IntArrayRef{O}, {1, 1}, {pad, pad}, {1, 1}, false, {0, 0}, 1,
                                     wanted);
  };
  {  // the gradients agree before anything is timed
    const auto [dx, dw, db] = ember::native::conv2d_backward(x, w, gy, {1, 1}, {pad, pad}, {1, 1}, 1, wanted);
    const auto [tdx, tdw, tdb] =
        at::convolution_backward(tgy, tx, tw, at::IntArrayRef{O}, {1, 1}, {pad, pad}, {1, 1}, false, {0, 0}, 1, wanted);
    if (input_grad) check("conv2d input gradient", dx, tdx, 1e-3);
    check("conv2d weight gradient", dw, tdw, 2e-2);
    check("conv2d bias gradient", db, tdb, 1e-2);
  }
  for (bool backward : {false, true}) {
    const auto t = ember::bench::interleaved_medians({[&] { ember_pass(backward); },
                                                      [&] {
                                                        bc::set_conv_algorithm(bc::ConvAlgorithm::im2col_gemm);
                                                        ember_pass(backward);
                                                        bc::set_conv_algorithm(bc::ConvAlgorithm::automatic);
                                                      },
                                                      [&] { torch_pass(backward); }},
                                                     backward ? 7 : 9);
    std::printf("| %s, %s | %.2f ms | %.2f ms | %.2f ms | %.2f | %.2f |\n", name,
                backward ? "forward + backward" : "forward", t[0] * 1e3, t[1] * 1e3, t[2] * 1e3, t[2] / t[0],
                t[1] / t[0]);
    std::fflush(stdout);
  }
}

int conv_section() {
  std::printf("direct kernels: %s\n\n", ember::backends::cpu::isa());
  std::printf(
      "| convolution (stride 1) | ember | ember, im2col + GEMM | LibTorch | LibTorch / ember | im2col / ember "
      "|\n|---|---|---|---|---|---|\n");
  conv_row("64→64 3×3 pad 1 on 32×64×56×56", 32, 64, 56, 64, 3, 1, true);
  conv_row("small CNN conv 1→32 3×3 pad 1, 128×1×28×28", 128, 1, 28, 32, 3, 1, false);
  conv_row("small CNN conv 32→64 3×3 pad 1, 128×32×14×14", 128, 32, 14, 64, 3, 1, true);
  conv_row("64→64 1×1 on 32×64×56×56", 32, 64, 56, 64, 1, 0, true);
  return 0;
}

// ---- int8: the static quantized convolution against LibTorch's quantized::conv2d_relu ----

// The same integers on both sides: a uint8 input (7 bits, zero point 37), per-channel qint8
// weights, a float bias, ReLU fused, a uint8 output (scale 0.08, zero point 50). LibTorch packs
// the weight once (quantized::conv2d_prepack on its engine) and runs apply_relu; its onednn
// kernels want channels-last activations, so it is timed on an NCHW input (as ember's) and on a
// channels-last one (what a quantized PyTorch model passes along).
void quant_conv_rows() {
  std::printf(
      "\n| int8 conv 3×3 pad 1 + ReLU | ember int8 | LibTorch int8, NCHW in | LibTorch int8, channels-last in | "
      "LibTorch NCHW / ember | channels-last / ember |\n|---|---|---|---|---|---|\n");
  const auto prepack = c10::Dispatcher::singleton().findSchemaOrThrow("quantized::conv2d_prepack", "");
  struct Shape4 {
    int64_t n, c, hw, o;
  };
  for (const Shape4 l :
       {Shape4{500, 1, 28, 32}, Shape4{500, 32, 14, 64}, Shape4{1, 32, 14, 64}, Shape4{32, 64, 56, 64}}) {
    ember::manual_seed(0);
    const ember::Tensor x = ember::randint(0, 128, {l.n, l.c, l.hw, l.hw}).to(ember::kUInt8);
    const ember::Tensor w = ember::randint(-127, 128, {l.o, l.c, 3, 3}).to(ember::kInt8);
    const ember::Tensor w_scale = ember::rand({l.o}) * 0.01 + 0.001, bias = ember::randn({l.o});
    const ember::Tensor packed = ember::native::int8_pack_conv_weight(w);
    ember::Int8Epilogue e;
    e.a_zero_point = 37, e.a_scale = 0.05, e.w_scale = w_scale, e.bias = bias;
    e.out_scale = 0.08, e.out_zero_point = 50, e.out_quant_max = 255, e.relu = true;
    ember::Conv2dParams p;
    p.padding = {1, 1};
    torch::NoGradGuard torch_no_grad;
    const torch::Tensor tq = at::_make_per_tensor_quantized_tensor(as_torch(x), 0.05, 37);
    const torch::Tensor tq_last = tq.contiguous(at::MemoryFormat::ChannelsLast);
    const torch::Tensor tw = at::_make_per_channel_quantized_tensor(as_torch(w), as_torch(w_scale).to(torch::kFloat64),
                                                                    torch::zeros({l.o}, torch::kLong), 0);
    torch::jit::Stack stack{tw,
                            c10::optional<at::Tensor>(as_torch(bias)),
                            std::vector<int64_t>{1, 1},
                            std::vector<int64_t>{1, 1},
                            std::vector<int64_t>{1, 1},
                            int64_t{1}};
    prepack.callBoxed(&stack);
    const auto conv = stack[0].toCustomClass<ConvPackedParamsBase<2>>();
    ember::Tensor y;
    auto ember_conv = [&] { y = ember::native::int8_conv2d(x, packed, l.o, {3, 3}, p, e, ember::kUInt8); };
    ember_conv();
    // The same requantized bytes, up to a rounding tie (one step).
    const torch::Tensor ty = conv->apply_relu(tq, 0.08, 50).int_repr().contiguous();
    const ember::Tensor theirs =
        ember::from_blob(ty.data_ptr(), y.sizes(), ember::TensorOptions().dtype(ember::kUInt8));
    const int32_t worst = (y.to(ember::kInt32) - theirs.to(ember::kInt32)).abs().amax().item<int32_t>();
    if (worst > 1) {
      std::printf("int8 conv: ember and LibTorch differ by %d steps\n", worst);
      std::exit(1);
    }
    const auto t = ember::bench::interleaved_medians(
        {ember_conv, [&] { conv->apply_relu(tq, 0.08, 50); }, [&] { conv->apply_relu(tq_last, 0.08, 50); }},
        l.n == 1 ? 201 : 11);
    std::printf("| [%lld, %lld, %lld, %lld] → %lld | %.3f ms | %.3f ms | %.3f ms | %.2f | %.2f |\n",
                static_cast<long long>(l.n), static_cast<long long>(l.c), static_cast<long long>(l.hw),
                static_cast<long long>(l.hw), static_cast<long long>(l.o), t[0] * 1e3, t[1] * 1e3, t[2] * 1e3,
                t[1] / t[0], t[2] / t[0]);
    std::fflush(stdout);
  }
}

// ---- int8: the dynamic quantized Linear against LibTorch's quantized::linear_dynamic ----

// LibTorch's dynamic int8 Linear as torch.ao.nn.quantized.dynamic.Linear runs it: the weight
// quantized (qint8, per channel, the same integers as ember's), packed once by
// quantized::linear_prepack on the current engine (onednn in Debian's build), then
// apply_dynamic(x, reduce_range = true) per call.
int quant_section() {
  namespace q = ember::quantization;
  std::printf("quantized engine: %s\n\n", c10::toString(at::globalContext().qEngine()).c_str());
  std::printf(
      "| int8 dynamic Linear | ember float32 | ember int8 | LibTorch float32 | LibTorch int8 | ember int8 vs "
      "LibTorch int8 | int8 speed-up, ember / LibTorch |\n|---|---|---|---|---|---|---|\n");
  const auto prepack = c10::Dispatcher::singleton().findSchemaOrThrow("quantized::linear_prepack", "");
  for (auto [batch, in, out] :
       std::vector<std::array<int64_t, 3>>{{64, 1024, 1024}, {256, 1024, 1024}, {1, 1024, 1024}, {64, 4096, 1024}}) {
    ember::manual_seed(0);
    ember::nn::Linear fp(in, out);
    q::DynamicQuantizedLinearImpl int8(*fp, /*per_channel=*/true);
    const ember::Tensor x = ember::randn({batch, in});
    ember::NoGradGuard no_grad;
    torch::NoGradGuard torch_no_grad;
    const torch::Tensor tx = as_torch(x), tw = as_torch(fp->weight.detach()), tb = as_torch(fp->bias.detach());
    const torch::Tensor scales = as_torch(int8.weight_scale).to(torch::kFloat64);
    const torch::Tensor qw =
        torch::quantize_per_channel(tw, scales, torch::zeros({out}, torch::kLong), 0, torch::kQInt8);
    torch::jit::Stack stack{qw, c10::optional<at::Tensor>(tb)};
    prepack.callBoxed(&stack);
    const auto packed = stack[0].toCustomClass<LinearPackedParamsBase>();
    // The same integers up to the activation's rounding: an element that lands on the other side
    // of a tie moves an output by one step s_x * |w| (~2e-3 here), not more.
    check("int8 dynamic Linear", int8.forward(x), packed->apply_dynamic(tx, /*reduce_range=*/true), 5e-3);
    const auto t =
        ember::bench::interleaved_medians({[&] { fp(x); }, [&] { int8.forward(x); }, [&] { torch::linear(tx, tw, tb); },
                                           [&] { packed->apply_dynamic(tx, true); }},
                                          21);
    std::printf("| %lld→%lld, batch %lld | %.3f ms | %.3f ms | %.3f ms | %.3f ms | %.2f | %.2f / %.2f |\n",
                static_cast<long long>(in), static_cast<long long>(out), static_cast<long long>(batch), t[0] * 1e3,
                t[1] * 1e3, t[2] * 1e3, t[3] * 1e3, t[3] / t[1], t[0] / t[1], t[2] / t[3]);
    std::fflush(stdout);
  }
  quant_conv_rows();
  return 0;
}

}  // namespace

// ---- unary ops that call exp, tanh or log: ember's vec_math.h against LibTorch's Sleef ----

int unary_section() {
  std::printf(
      "| op, float32 | ember | LibTorch, preallocated out | LibTorch / ember | LibTorch, allocating | that / ember |\n"
      "|---|---|---|---|---|---|\n");
  for (const int64_t n : {int64_t(64) * 64 * 14 * 14, int64_t(16) << 20}) {
    const ember::Tensor x = ember::randn({n}) * 3.0;
    const torch::Tensor tx = as_torch(x);
    torch::Tensor out = torch::empty_like(tx);
    const std::string size = n == (16 << 20) ? "16M" : "800K";
    const ember::Tensor positive = x.abs();  // log's and log1p's input
    const torch::Tensor tpositive = as_torch(positive);
    auto row = [&](const char* op, ember::Tensor (*ours)(const ember::Tensor&),
                   torch::Tensor (*theirs)(const torch::Tensor&), const std::function<void()>& theirs_out,
                   bool positive_input = false) {
      const ember::Tensor& in = positive_input ? positive : x;
      const torch::Tensor& tin = positive_input ? tpositive : tx;
      const ember::Tensor a = ours(in);
      const torch::Tensor b = theirs(tin);
      if (!((as_torch(a) - b).abs() <= 1e-5 * (1 + b.abs())).all().item<bool>()) {
        std::printf("%s: ember and LibTorch disagree beyond 1e-5 (1 + |LibTorch's|)\n", op);
        std::exit(1);
      }
      compare((std::string(op) + " of " + size + " floats").c_str(), [&] { (void)ours(in); },
              [&] { (void)theirs(tin); }, theirs_out);
    };
    row(
        "exp", [](const ember::Tensor& v) { return ember::exp(v); },
        [](const torch::Tensor& v) { return torch::exp(v); }, [&] { torch::exp_out(out, tx); });
    row(
        "tanh", [](const ember::Tensor& v) { return ember::tanh(v); },
        [](const torch::Tensor& v) { return torch::tanh(v); }, [&] { torch::tanh_out(out, tx); });
    row(
        "sigmoid", [](const ember::Tensor& v) { return ember::sigmoid(v); },
        [](const torch::Tensor& v) { return torch::sigmoid(v); }, [&] { torch::sigmoid_out(out, tx); });
    row(
        "silu", [](const ember::Tensor& v) { return ember::silu(v); },
        [](const torch::Tensor& v) { return torch::silu(v); }, [&] { torch::silu_out(out, tx); });
    row(
        "elu", [](const ember::Tensor& v) { return ember::elu(v); },
        [](const torch::Tensor& v) { return torch::elu(v); }, [&] { torch::elu_out(out, tx); });
    row(
        "gelu(tanh)", [](const ember::Tensor& v) { return ember::gelu(v, "tanh"); },
        [](const torch::Tensor& v) { return torch::gelu(v, "tanh"); }, [&] { torch::gelu_out(out, tx, "tanh"); });
    row(
        "gelu", [](const ember::Tensor& v) { return ember::gelu(v); },
        [](const torch::Tensor& v) { return torch::gelu(v); }, [&] { torch::gelu_out(out, tx); });
    row(
        "log", [](const ember::Tensor& v) { return ember::log(v); },
        [](const torch::Tensor& v) { return torch::log(v); }, [&] { torch::log_out(out, tpositive); }, true);
    row(
        "log1p", [](const ember::Tensor& v) { return ember::log1p(v); },
        [](const torch::Tensor& v) { return torch::log1p(v); }, [&] { torch::log1p_out(out, tpositive); }, true);
    row(
        "softplus", [](const ember::Tensor& v) { return ember::softplus(v); },
        [](const torch::Tensor& v) { return torch::softplus(v); }, [&] { torch::softplus_out(out, tx, 1, 20); });
  }
  // What gelu's speed buys or costs in accuracy: the largest relative error of each float32
  // gelu against x erfc(-x / sqrt(2)) / 2 in float64 on the left tail, where 1 + erf(z) cancels
  // (in float64 too: it is 0 from x = -12), and near 0.
  for (const auto& [lo, hi] : {std::pair<double, double>{-12, -2}, {-2, 2}}) {
    const ember::Tensor x = ember::linspace(lo, hi, 100001);
    const torch::Tensor x64 = as_torch(x).to(torch::kFloat64);
    const torch::Tensor exact = 0.5 * x64 * torch::erfc(x64 * -M_SQRT1_2);
    auto worst = [&](const torch::Tensor& got) {
      return ((got.to(torch::kFloat64) - exact).abs() / exact.abs().clamp_min(1e-300)).max().item<double>();
    };
    std::printf("\ngelu's largest relative error on [%g, %g] against float64: ember %.2g, LibTorch %.2g", lo, hi,
                worst(as_torch(ember::gelu(x))), worst(torch::gelu(as_torch(x))));
  }
  std::printf("\n");
  return 0;
}

// ---- random fills and dropout: ember's Philox (8 blocks per AVX2 step) against LibTorch's CPU
// generator. The streams differ, so only the draws' means are checked, not the values. ----

int random_section() {
  std::printf(
      "| draw, float32 | ember | LibTorch, in place | LibTorch / ember | LibTorch, allocating | that / ember |\n"
      "|---|---|---|---|---|---|\n");
  for (const int64_t n : {int64_t(64) * 64 * 14 * 14, int64_t(16) << 20}) {
    ember::Tensor x = ember::empty({n});
    torch::Tensor tx = torch::empty({n});
    const ember::Tensor input = ember::randn({n});
    const torch::Tensor tinput = as_torch(input);
    const std::string size = n == (16 << 20) ? "16M" : "800K";
    auto expect_mean = [](const char* what, double mean, double want) {
      if (std::abs(mean - want) > 0.01) {
        std::printf("%s: mean %g, expected %g\n", what, mean, want);
        std::exit(1);
      }
    };
    x.uniform_();
    tx.uniform_();
    expect_mean("uniform_", x.mean().item<double>(), 0.5);
    expect_mean("LibTorch's uniform_", tx.mean().item<double>(), 0.5);
    compare(("uniform_ of " + size).c_str(), [&] { x.uniform_(); }, [&] { (void)torch::rand({n}); },
            [&] { tx.uniform_(); });
    x.normal_();
    tx.normal_();
    expect_mean("normal_", x.mean().item<double>(), 0.0);
    expect_mean("LibTorch's normal_", tx.mean().item<double>(), 0.0);
    compare(("normal_ of " + size).c_str(), [&] { x.normal_(); }, [&] { (void)torch::randn({n}); },
            [&] { tx.normal_(); });
    x.bernoulli_(0.3);
    tx.bernoulli_(0.3);
    expect_mean("bernoulli_", x.mean().item<double>(), 0.3);
    expect_mean("LibTorch's bernoulli_", tx.mean().item<double>(), 0.3);
    compare(("bernoulli_(0.3) of " + size).c_str(), [&] { x.bernoulli_(0.3); },
            [&] { (void)torch::bernoulli(tx, 0.3); }, [&] { tx.bernoulli_(0.3); });
    // dropout(p = 0.1) in training: both allocate the mask and the output.
    expect_mean("dropout", (ember::nn::functional::dropout(ember::ones({n}), 0.1, true)).mean().item<double>(), 1.0);
    compare(("dropout(0.1) of " + size).c_str(), [&] { (void)ember::nn::functional::dropout(input, 0.1, true); },
            [&] { (void)torch::dropout(tinput, 0.1, true); });
  }
  return 0;
}

// ---- sequences: the recurrent layers (composed per step on both sides), sorting, top-k, cumsum ----

int sequence_section() {
  std::printf("| workload | ember | LibTorch | LibTorch / ember |\n|---|---|---|---|\n");
  {  // LSTM and GRU, 2 layers 256 -> 512, 64 steps of a batch of 32: forward + backward (BPTT)
    const ember::Tensor x = ember::randn({64, 32, 256});
    const torch::Tensor tx = as_torch(x);
    auto same_weights = [](ember::nn::Module& ours, torch::nn::Module& theirs) {
      torch::NoGradGuard no_grad;
      auto ep = ours.named_parameters();
      for (auto& p : theirs.named_parameters()) p.value().copy_(as_torch(ep[p.key()]));
    };
    ember::nn::LSTM elstm(ember::nn::LSTMOptions(256, 512).num_layers(2));
    torch::nn::LSTM tlstm(torch::nn::LSTMOptions(256, 512).num_layers(2));
    same_weights(*elstm, *tlstm);
    check("LSTM output", std::get<0>(elstm->forward(x)), std::get<0>(tlstm->forward(tx)), 1e-4);
    const auto lstm = ember::bench::interleaved_medians({[&] { std::get<0>(elstm->forward(x)).sum().backward(); },
                                                         [&] { std::get<0>(tlstm->forward(tx)).sum().backward(); }},
                                                        5);
    std::printf("| LSTM 256->512, 2 layers, 64 steps x batch 32, forward + backward | %.1f ms | %.1f ms | %.2f |\n",
                lstm[0] * 1e3, lstm[1] * 1e3, lstm[1] / lstm[0]);
    ember::nn::GRU egru(ember::nn::GRUOptions(256, 512).num_layers(2));
    torch::nn::GRU tgru(torch::nn::GRUOptions(256, 512).num_layers(2));
    same_weights(*egru, *tgru);
    check("GRU output", std::get<0>(egru->forward(x)), std::get<0>(tgru->forward(tx)), 1e-4);
    const auto gru = ember::bench::interleaved_medians({[&] { std::get<0>(egru->forward(x)).sum().backward(); },
                                                        [&] { std::get<0>(tgru->forward(tx)).sum().backward(); }},
                                                       5);
    std::printf("| GRU 256->512, 2 layers, 64 steps x batch 32, forward + backward | %.1f ms | %.1f ms | %.2f |\n",
                gru[0] * 1e3, gru[1] * 1e3, gru[1] / gru[0]);
  }
  {  // sorting rows, top-5 of a vocabulary, running sums
    const ember::Tensor x = ember::randn({4096, 1024}), logits = ember::randn({256, 32000});
    const torch::Tensor tx = as_torch(x), tl = as_torch(logits);
    check("sort", std::get<0>(x.sort(1)), std::get<0>(tx.sort(1)), 0);
    check("topk", std::get<0>(logits.topk(5)), std::get<0>(tl.topk(5)), 0);
    check("cumsum", x.cumsum(1), tx.cumsum(1), 1e-3);
    const auto t = ember::bench::interleaved_medians(
        {[&] { (void)x.sort(1); }, [&] { (void)tx.sort(1); }, [&] { (void)logits.topk(5); }, [&] { (void)tl.topk(5); },
         [&] { (void)x.cumsum(1); }, [&] { (void)tx.cumsum(1); }},
        7);
    std::printf("| sort rows of 4096 x 1024 | %.2f ms | %.2f ms | %.2f |\n", t[0] * 1e3, t[1] * 1e3, t[1] / t[0]);
    std::printf("| top-5 of 256 x 32000 (a partial sort) | %.2f ms | %.2f ms | %.2f |\n", t[2] * 1e3, t[3] * 1e3,
                t[3] / t[2]);
    std::printf("| cumsum rows of 4096 x 1024 | %.2f ms | %.2f ms | %.2f |\n", t[4] * 1e3, t[5] * 1e3, t[5] / t[4]);
  }
  return 0;
}

// ---- torch::linalg: ember's factorizations (Eigen's blocked kernels in LAPACK's loops, one
// matrix per thread across a batch) against LibTorch's LAPACK (OpenBLAS's, when run as
// BENCHMARKS.md says). GFLOP/s counts the factorization's textbook flops (Golub and Van Loan's
// for the SVD: 21 n³ with U and V, 8/3 n³ for the values alone; eigh's 9 n³, 4/3 n³ for the
// values alone (the tridiagonal reduction); pinv adds the 2 n³ product; the QR's below). ----

// Householder QR of an m x n matrix (m ≥ n) with its reduced Q: geqrf's 2mn² - 2n³/3, and as
// many again to form Q (orgqr).
double qr_flops(double m, double n) { return 2 * (2 * m * n * n - 2.0 / 3 * n * n * n); }

int linalg_section() {
  std::printf("| float32 | ember | LibTorch | LibTorch / ember | ember GFLOP/s |\n|---|---|---|---|---|\n");
  auto row = [](const std::string& name, double flops, const std::function<void()>& ours,
                const std::function<void()>& theirs) {
    const auto t = ember::bench::interleaved_medians({ours, theirs}, 7);
    std::printf("| %s | %.2f ms | %.2f ms | %.2f | %.1f |\n", name.c_str(), t[0] * 1e3, t[1] * 1e3, t[1] / t[0],
                flops / t[0] * 1e-9);
  };
  for (const int64_t n : {256, 1024}) {
    const ember::Tensor a = ember::randn({n, n}) + ember::eye(n) * std::sqrt(static_cast<double>(n));
    const ember::Tensor b = ember::randn({n, 64});
    const ember::Tensor s = ember::matmul(a, a.t()) / static_cast<double>(n);
    const torch::Tensor ta = as_torch(a), tb = as_torch(b), ts = as_torch(s);
    check("solve", ember::linalg::solve(a, b), torch::linalg::solve(ta, tb, true), 1e-3);
    check("cholesky", ember::linalg::cholesky(s), torch::linalg::cholesky(ts), 1e-3);
    const double nd = static_cast<double>(n);
    const std::string size = std::to_string(n) + " x " + std::to_string(n);
    row(
        "solve " + size + ", 64 right-hand sides", 2.0 / 3 * nd * nd * nd + 2 * nd * nd * 64,
        [&] { (void)ember::linalg::solve(a, b); }, [&] { (void)torch::linalg::solve(ta, tb, true); });
    row(
        "inv " + size, 2 * nd * nd * nd, [&] { (void)ember::linalg::inv(a); }, [&] { (void)torch::linalg::inv(ta); });
    row(
        "cholesky " + size, nd * nd * nd / 3, [&] { (void)ember::linalg::cholesky(s); },
        [&] { (void)torch::linalg::cholesky(ts); });
    row(
        "eigh " + size, 9 * nd * nd * nd, [&] { (void)ember::linalg::eigh(s); },
        [&] { (void)torch::linalg::eigh(ts, "L"); });
    check("eigvalsh", ember::linalg::eigvalsh(s), torch::linalg::eigvalsh(ts, "L"), 1e-3);
    row(
        "eigvalsh " + size, 4.0 / 3 * nd * nd * nd, [&] { (void)ember::linalg::eigvalsh(s); },
        [&] { (void)torch::linalg::eigvalsh(ts, "L"); });
    check("qr", std::get<1>(ember::linalg::qr(a)), std::get<1>(torch::linalg::qr(ta, "reduced")), 1e-2);
    row(
        "qr " + size, qr_flops(nd, nd), [&] { (void)ember::linalg::qr(a); },
        [&] { (void)torch::linalg::qr(ta, "reduced"); });
    if (n > 256) continue;  // (an SVD of 1024 x 1024 takes seconds on 2 cores, on both sides)
    check("svdvals", ember::linalg::svdvals(a), torch::linalg::svdvals(ta, c10::nullopt), 1e-3);
    row(
        "svd (reduced) " + size, 21 * nd * nd * nd, [&] { (void)ember::linalg::svd(a, false); },
        [&] { (void)torch::linalg::svd(ta, false, c10::nullopt); });
    row(
        "svdvals " + size, 8.0 / 3 * nd * nd * nd, [&] { (void)ember::linalg::svdvals(a); },
        [&] { (void)torch::linalg::svdvals(ta, c10::nullopt); });
  }
  {  // a tall matrix (an orthonormal basis of 256 columns)
    const ember::Tensor a = ember::randn({2048, 256});
    const torch::Tensor ta = as_torch(a);
    check("qr", std::get<1>(ember::linalg::qr(a)), std::get<1>(torch::linalg::qr(ta, "reduced")), 1e-2);
    row(
        "qr 2048 x 256", qr_flops(2048, 256), [&] { (void)ember::linalg::qr(a); },
        [&] { (void)torch::linalg::qr(ta, "reduced"); });
  }
  {  // many small matrices: the per-matrix overhead
    const ember::Tensor a = ember::randn({4096, 8, 8}) + ember::eye(8) * 3.0;
    const torch::Tensor ta = as_torch(a);
    // (float32: a nearly singular draw among the 4096 loses digits to cancellation in both)
    check("log |det|", std::get<1>(ember::linalg::slogdet(a)), std::get<1>(torch::linalg::slogdet(ta)), 1e-2);
    row(
        "det of 4096 8 x 8 matrices", 4096 * 2.0 / 3 * 512, [&] { (void)ember::linalg::det(a); },
        [&] { (void)torch::linalg::det(ta); });
    // (pinv on better-conditioned draws: near rtol's threshold the two may drop different values)
    const ember::Tensor p = ember::randn({4096, 8, 8}) + ember::eye(8) * 8.0;
    const torch::Tensor tp = as_torch(p);
    check("pinv", ember::linalg::pinv(p), torch::linalg::pinv(tp), 1e-3);
    row(
        "qr of 4096 8 x 8 matrices", 4096 * qr_flops(8, 8), [&] { (void)ember::linalg::qr(a); },
        [&] { (void)torch::linalg::qr(ta, "reduced"); });
    row(
        "pinv of 4096 8 x 8 matrices (SVD)", 4096 * 23.0 * 512, [&] { (void)ember::linalg::pinv(p); },
        [&] { (void)torch::linalg::pinv(tp); });
  }
  return 0;
}

int main(int argc, char** argv) {
  // LibTorch's CPU allocator caches nothing: with glibc's default (dynamic) mmap threshold,
  // its large blocks go back to the OS on free and every training step page-faults them in
  // again, which made its CNN step 70-80 ms or 26-28 ms from run to run. Keeping freed memory
  // in the heap compares against LibTorch at its best (ember's allocator caches by design).
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  ember::set_num_threads(threads);
  torch::set_num_threads(threads);
  ember::manual_seed(0);
  std::printf("ember vs LibTorch %s, %d threads\n\n", TORCH_VERSION, threads);
  if (argc > 2 && std::string(argv[2]) == "optim") return optimizer_section();
  if (argc > 2 && std::string(argv[2]) == "quant") return quant_section();
  if (argc > 2 && std::string(argv[2]) == "conv") return conv_section();
  if (argc > 2 && std::string(argv[2]) == "unary") return unary_section();
  if (argc > 2 && std::string(argv[2]) == "random") return random_section();
  if (argc > 2 && std::string(argv[2]) == "sequence") return sequence_section();
  if (argc > 2 && std::string(argv[2]) == "linalg") return linalg_section();
  std::printf(
      "| workload | ember | LibTorch, preallocated out | LibTorch / ember | LibTorch, allocating | that / ember |\n"
      "|---|---|---|---|---|---|\n");

  {  // softmax over rows of a 4096 x 4096 matrix
    const ember::Tensor x = ember::randn({4096, 4096});
    const torch::Tensor tx = as_torch(x);
    check("softmax", x.softmax(1), tx.softmax(1), 1e-6);
    torch::Tensor out = torch::empty_like(tx);
    compare(
        "softmax rows of 4096x4096", [&] { (void)x.softmax(1); }, [&] { (void)tx.softmax(1); },
        [&] { at::_softmax_out(out, tx, 1, false); });
  }
  {  // transpose-copy of a 4096 x 4096 matrix
    const ember::Tensor x = ember::randn({4096, 4096});
    const torch::Tensor tx = as_torch(x);
    check("transpose", x.t().contiguous(), tx.t().contiguous(), 0);
    torch::Tensor out = torch::empty_like(tx);
    compare(
        "transpose-copy 4096x4096", [&] { (void)x.t().contiguous(); }, [&] { (void)tx.t().contiguous(); },
        [&] { out.copy_(tx.t()); });
  }
  {  // conv2d 64 -> 64, 3x3, padding 1, on a 32 x 64 x 56 x 56 batch
    const ember::Tensor x = ember::randn({32, 64, 56, 56}), w = ember::randn({64, 64, 3, 3}) * 0.05;
    const ember::Tensor b = ember::randn({64});
    const torch::Tensor tx = as_torch(x), tw = as_torch(w), tb = as_torch(b);
    check("conv2d", ember::conv2d(x, w, b, {1, 1}, {1, 1}), torch::conv2d(tx, tw, tb, 1, 1), 1e-3);
    compare(
        "conv2d 64->64 3x3 on 32x64x56x56",
        [&] {
          (void)ember::conv2d(x, w, b, {1, 1}, {1, 1});
        },
        [&] { (void)torch::conv2d(tx, tw, tb, 1, 1); }, nullptr, 5);
  }
  {  // GEMM 1024^3 and a 16M-float add, for context
    const ember::Tensor a = ember::randn({1024, 1024}), b = ember::randn({1024, 1024});
    const torch::Tensor ta = as_torch(a), tb = as_torch(b);
    check("matmul", ember::matmul(a, b), torch::matmul(ta, tb), 1e-2);
    torch::Tensor mo = torch::empty_like(ta);
    compare(
        "float32 GEMM 1024^3", [&] { (void)ember::matmul(a, b); }, [&] { (void)torch::matmul(ta, tb); },
        [&] { torch::mm_out(mo, ta, tb); });
    // Attention's scores: 128 small products (16 sequences x 8 heads), k transposed as a view.
    const ember::Tensor q = ember::randn({128, 128, 32}), k = ember::randn({128, 128, 32});
    const torch::Tensor tq = as_torch(q), tk = as_torch(k);
    check("attention scores", ember::matmul(q, k.transpose(1, 2)), torch::matmul(tq, tk.transpose(1, 2)), 1e-3);
    torch::Tensor so = torch::empty({128, 128, 128});
    compare(
        "attention scores, 128 x ([128, 32] @ [32, 128])", [&] { (void)ember::matmul(q, k.transpose(1, 2)); },
        [&] { (void)torch::matmul(tq, tk.transpose(1, 2)); }, [&] { torch::bmm_out(so, tq, tk.transpose(1, 2)); });
    const ember::Tensor u = ember::rand({16 << 20}), v = ember::rand({16 << 20});
    const torch::Tensor tu = as_torch(u), tv = as_torch(v);
    check("add", u + v, tu + tv, 0);
    torch::Tensor ao = torch::empty_like(tu);
    compare(
        "add of 16M floats", [&] { (void)(u + v); }, [&] { (void)(tu + tv); }, [&] { torch::add_out(ao, tu, tv); });
    compare(
        "sum of 16M floats", [&] { (void)u.sum(); }, [&] { (void)tu.sum(); });
  }

  // ---- autograd: bookkeeping on tiny ops, and an MLP training step ----
  std::printf("\n| autograd workload | ember | LibTorch | LibTorch / ember |\n|---|---|---|---|\n");
  {
    const int kOps = 1000;
    ember::Tensor x = ember::randn({4}).set_requires_grad(true);
    torch::Tensor tx = torch::randn({4}).requires_grad_(true);
    const auto t = ember::bench::interleaved_medians({
        [&] {
          ember::Tensor y = x;
          for (int i = 0; i < kOps / 2; ++i) y = (y * 0.999).tanh();
          y.sum().backward();
        },
        [&] {
          torch::Tensor y = tx;
          for (int i = 0; i < kOps / 2; ++i) y = (y * 0.999).tanh();
          y.sum().backward();
        },
    });
    std::printf("| chain of %d tiny ops, forward + backward, per op | %.2f us | %.2f us | %.2f |\n", kOps,
                t[0] / kOps * 1e6, t[1] / kOps * 1e6, t[1] / t[0]);
  }
  {
    ember::manual_seed(1);
    auto init = [](int64_t out, int64_t in) { return ember::randn({out, in}) * (1.0 / std::sqrt(in)); };
    std::vector<ember::Tensor> ew = {init(1024, 784),      ember::zeros({1024}), init(1024, 1024),
                                     ember::zeros({1024}), init(10, 1024),       ember::zeros({10})};
    std::vector<torch::Tensor> tw;
    for (auto& w : ew) {
      tw.push_back(as_torch(w).clone().requires_grad_(true));
      w.set_requires_grad(true);
    }
    const ember::Tensor x = ember::randn({256, 784}), y = ember::randint(0, 10, {256});
    const torch::Tensor tx = as_torch(x), ty = torch::from_blob(y.data_ptr(), {256}, torch::kInt64);
    auto ember_step = [&] {
      ember::autograd::zero_grad(ew);
      const ember::Tensor h1 = ember::linear(x, ew[0], ew[1]).relu();
      const ember::Tensor h2 = ember::linear(h1, ew[2], ew[3]).relu();
      ember::nn::functional::cross_entropy(ember::linear(h2, ew[4], ew[5]), y).backward();
    };
    auto torch_step = [&] {
      for (auto& w : tw) w.mutable_grad() = torch::Tensor();
      const torch::Tensor h1 = torch::relu(torch::nn::functional::linear(tx, tw[0], tw[1]));
      const torch::Tensor h2 = torch::relu(torch::nn::functional::linear(h1, tw[2], tw[3]));
      torch::nn::functional::cross_entropy(torch::nn::functional::linear(h2, tw[4], tw[5]), ty).backward();
    };
    ember_step();
    torch_step();
    check("MLP weight gradient", ew[0].grad(), tw[0].grad(), 1e-4);
    const auto t = ember::bench::interleaved_medians({ember_step, torch_step});
    std::printf("| MLP 784-1024-1024-10 step, batch 256 | %.2f ms | %.2f ms | %.2f |\n", t[0] * 1e3, t[1] * 1e3,
                t[1] / t[0]);
  }

  return optimizer_section();
}
