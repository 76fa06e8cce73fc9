// Bad input never crashes, checked at random (the harness: random_arguments.h), for the parts
// of the engine a training or inference program calls around the ops: the ops' native halves
// (the backward kernels, the CSR product, the GradScaler's kernels), the optimizers with
// awkward options and gradients, the learning-rate schedulers, gradient clipping, master
// weights, quantization (observers, fake quantization, static and dynamic int8 models, the int8
// kernels) and pruning's later steps (remove, shrink, sparsify).
#include <memory>

#include "ember/nn/prune.h"
#include "ember/nn/quant/dynamic.h"
#include "ember/nn/quant/static.h"
#include "random_arguments.h"

namespace ember {
namespace {

using testing::Call;
using testing::Calls;
using testing::Draw;
namespace prune = nn::utils::prune;
namespace q = quantization;

// A float32 leaf of about `s`'s shape, or an undefined tensor when the draw gave none.
Tensor leaf(Draw& d, const Shape& s) {
  const Tensor t = d.tensor(d.below(6) == 0 ? d.near(s) : s, kFloat32);
  return t.defined() ? t.contiguous().detach().requires_grad_() : Tensor();
}

// A gradient for `p`, as a program might assign one: usually p's shape and dtype, sometimes
// another shape or dtype, none, or with an inf or a NaN.
void give_grad(Draw& d, Tensor& p) {
  if (!p.defined()) return;
  switch (d.below(10)) {
    case 0:
      p.mutable_grad() = d.tensor(d.near(p.sizes()), kFloat32);
      break;
    case 1:
      p.mutable_grad() = d.tensor(p.sizes(), d.dtype());
      break;
    case 2:
      p.mutable_grad() = d.tensor(p.sizes(), kFloat32) * d.real();
      break;
    case 3:
      p.mutable_grad() = Tensor();
      break;
    default:
      p.mutable_grad() = d.tensor(p.sizes(), kFloat32);
  }
}

// `valid` most of the time, an awkward number (negative, huge, inf, NaN) otherwise.
double mostly(Draw& d, double valid) { return d.below(6) == 0 ? d.real() : valid; }

// One of the optimizers on `params`, with options drawn around their valid ranges.
std::unique_ptr<optim::Optimizer> optimizer(Draw& d, std::vector<Tensor> params) {
  switch (d.below(6)) {
    case 0:
      return std::make_unique<optim::SGD>(params, optim::SGDOptions(mostly(d, 0.1))
                                                      .momentum(mostly(d, 0.9))
                                                      .dampening(mostly(d, 0.0))
                                                      .nesterov(d.coin())
                                                      .weight_decay(mostly(d, 0.01)));
    case 1:
      return std::make_unique<optim::Adam>(
          params, optim::AdamOptions(mostly(d, 1e-3)).betas({mostly(d, 0.9), mostly(d, 0.999)}).amsgrad(d.coin()));
    case 2:
      return std::make_unique<optim::AdamW>(
          params, optim::AdamWOptions(1e-3).eps(mostly(d, 1e-8)).weight_decay(mostly(d, 0.01)).maximize(d.coin()));
    case 3:
      return std::make_unique<optim::RMSprop>(
          params, optim::RMSpropOptions(1e-2).alpha(mostly(d, 0.99)).momentum(mostly(d, 0.5)).centered(d.coin()));
    case 4:
      return std::make_unique<optim::Adagrad>(params, optim::AdagradOptions(mostly(d, 1e-2))
                                                          .lr_decay(mostly(d, 0.0))
                                                          .initial_accumulator_value(mostly(d, 0.1))
                                                          .eps(mostly(d, 1e-10)));
    default:
      return std::make_unique<optim::LBFGS>(
          params, optim::LBFGSOptions(mostly(d, 1.0))
                      .max_iter(d.below(6) == 0 ? d.integer() : 3)
                      .history_size(d.below(6) == 0 ? d.integer() : 5)
                      .line_search_fn(d.coin() ? std::optional<std::string>("strong_wolfe") : std::nullopt));
  }
}

// A float32 [N, C, H, W] batch for the static int8 models, with inf or NaN now and then.
Tensor image(Draw& d, int64_t channels) {
  Tensor x = d.tensor(d.near({1 + d.below(2), channels, 4, 4}), kFloat32);
  if (x.defined() && d.below(4) == 0) x = x * d.real();
  return x;
}

Calls calls() {
  Calls c;
  auto op = [&](const char* name, Call f) { c.emplace_back(name, std::move(f)); };
  // ---- ops and natives the other file leaves out ----
  op("as_strided", [](Draw& d) {
    (void)d.tensor().as_strided(d.dims(), d.dims(), d.coin() ? std::optional<int64_t>(d.integer()) : std::nullopt);
  });
  op("comparisons", [](Draw& d) {
    const Tensor a = d.tensor(), b = d.tensor();
    (void)a.lt(b), (void)a.ne(d.real()), (void)logical_and(a, b), (void)logical_not(a), (void)minimum(a, b);
  });
  op("reductions_min", [](Draw& d) {
    const Tensor t = d.tensor();
    switch (d.below(5)) {
      case 0:
        (void)t.amin(d.dims(), d.coin());
        break;
      case 1:
        (void)t.min(d.integer(), d.coin());
        break;
      case 2:
        (void)t.argmin(d.coin() ? std::optional<int64_t>(d.integer()) : std::nullopt, d.coin());
        break;
      case 3:
        (void)t.std(d.dims(), d.coin(), d.coin());
        break;
      default:
        (void)t.any(d.dims(), d.coin());
    }
  });
  op("activations", [](Draw& d) {
    const Tensor t = d.tensor();
    (void)t.gelu(d.coin() ? "tanh" : (d.coin() ? "none" : "erf")), (void)elu(t, d.real()), (void)t.softplus();
  });
  op("scatter_add_", [](Draw& d) {
    Tensor t = d.tensor({3, 3}, kFloat32);
    const Tensor index =
        (d.coin() ? randint(0, 3, d.near({d.below(4), d.below(4)})) : randint(-1, 4, d.near({d.below(4), d.below(4)})))
            .to(d.device());
    (void)t.scatter_add_(d.coin() ? d.below(2) : d.integer(), index,
                         d.tensor(d.near({3, 3}), d.coin() ? kFloat32 : d.dtype()));
  });
  op("conv2d_backward", [](Draw& d) {
    const int64_t n = 1 + d.below(2), c = 1 + d.below(2), o = 1 + d.below(2), k = 1 + d.below(3);
    const Int2 stride = d.below(4) != 0 ? d.positive_pair() : d.pair(), padding = {d.below(2), d.below(2)};
    const Tensor x = d.tensor(d.near({n, c, 4, 4}), kFloat32), w = d.tensor(d.near({o, c, k, k}), kFloat32);
    const int64_t ho = (4 + 2 * padding[0] - k) / std::max<int64_t>(stride[0], 1) + 1;
    const int64_t wo = (4 + 2 * padding[1] - k) / std::max<int64_t>(stride[1], 1) + 1;
    (void)native::conv2d_backward(x, w, d.tensor(d.near({n, o, ho, wo}), kFloat32), stride, padding, d.positive_pair(),
                                  d.coin() ? 1 : d.integer(), {d.coin(), d.coin(), d.coin()});
  });
  op("pool_backward", [](Draw& d) {
    const Shape input = d.near({1, 1 + d.below(2), 1 + d.below(5), 1 + d.below(5)});
    const Int2 kernel = d.coin() ? d.positive_pair() : d.pair(), stride = d.positive_pair();
    const Int2 padding = {d.below(2), d.below(2)};
    const Tensor grad = d.tensor(d.near({1, input.size() > 1 ? input[1] : 1, 1 + d.below(3), 1 + d.below(3)}),
                                 d.coin() ? kFloat32 : d.dtype());
    switch (d.below(4)) {
      case 0:
        (void)native::avg_pool2d_backward(grad, input, kernel, stride, padding, d.coin(), d.coin());
        break;
      case 1:
        (void)native::adaptive_avg_pool2d_backward(grad, input);
        break;
      case 2:
        (void)native::max_pool2d_backward(grad, d.tensor(grad.defined() ? grad.sizes() : Shape{}, kInt64) * d.integer(),
                                          input);
        break;
      default: {
        Tensor taps = d.tensor(grad.defined() ? grad.sizes() : Shape{}, kUInt8);
        if (d.coin())
          taps = std::get<1>(native::max_pool2d_with_taps(d.tensor(input, kFloat32), kernel, stride, padding,
                                                          d.positive_pair(), d.coin()));
        (void)native::max_pool2d_backward_taps(grad, taps * 100, input, kernel, stride, padding, d.positive_pair(),
                                               d.coin());
      }
    }
  });
  op("activation_backward", [](Draw& d) {
    const Tensor out = d.tensor();
    const Tensor grad = d.tensor(out.defined() && d.below(4) != 0 ? d.near(out.sizes()) : d.shape(),
                                 d.coin() && out.defined() ? out.dtype() : d.dtype());
    switch (d.below(3)) {
      case 0:
        (void)native::relu_backward(grad, out);
        break;
      case 1:
        (void)native::sigmoid_backward(grad, out);
        break;
      default:
        (void)native::tanh_backward(grad, out);
    }
  });
  op("csr_linear", [](Draw& d) {  // a valid CSR weight, then perhaps one thing broken
    const int64_t out = d.below(4), in = 1 + d.below(3);
    std::vector<int64_t> crow{0}, col;
    for (int64_t r = 0; r < out; ++r) {
      for (int64_t k = 0; k < in; ++k)
        if (d.coin()) col.push_back(k);
      crow.push_back(static_cast<int64_t>(col.size()));
    }
    switch (d.below(6)) {
      case 0:
        crow[static_cast<size_t>(d.below(static_cast<int64_t>(crow.size())))] += d.coin() ? 1 : -1;
        break;
      case 1:
        if (!col.empty()) col[static_cast<size_t>(d.below(static_cast<int64_t>(col.size())))] = d.integer();
        break;
      default:
        break;
    }
    const Tensor col_t = tensor<int64_t>(col).to(d.coin() ? kInt64 : d.dtype());
    (void)native::csr_linear(d.tensor(d.near({2, in}), kFloat32), tensor<int64_t>(crow).to(d.device()),
                             col_t.to(d.device()), d.tensor(d.near({static_cast<int64_t>(col.size())}), kFloat32),
                             d.coin() ? Tensor() : d.tensor(d.near({out}), kFloat32), d.coin() ? out : d.integer());
  });
  op("amp_kernels", [](Draw& d) {
    auto flag = [&](DType valid) {
      return d.tensor(d.below(6) == 0 ? d.near({1}) : Shape{1}, d.coin() ? valid : d.dtype());
    };
    if (d.coin()) {
      native::amp_unscale_({d.floating(), d.floating() * mostly(d, 1.0)}, flag(kFloat32),
                           flag(kFloat32).abs() * mostly(d, 1.0));
    } else {
      native::amp_update_scale_(flag(kFloat32).abs() * mostly(d, 1.0), flag(kInt32), flag(kFloat32), mostly(d, 2.0),
                                mostly(d, 0.5), d.below(6) == 0 ? d.integer() : 2);
    }
  });
  // ---- optimizers: awkward options, gradients of the wrong shape or dtype, non-finite values ----
  op("optimizers", [](Draw& d) {
    std::vector<Tensor> params = {leaf(d, {2, 3}), leaf(d, {3})};
    if (d.below(8) == 0) params.push_back(params[0]);  // a parameter twice
    auto opt = optimizer(d, params);
    for (int step = 0; step < 3; ++step) {
      for (Tensor& p : params) give_grad(d, p);
      switch (d.below(5)) {
        case 0:
          opt->zero_grad(d.coin());
          break;
        case 1:
          opt->step_unless(d.tensor(d.near({1}), d.coin() ? kFloat32 : d.dtype()));
          break;
        case 2: {
          const optim::OptimizerState state = opt->state_dict();
          optimizer(d, params)->load_state_dict(state);
          break;
        }
        default:
          (void)opt->step([&] {
            Tensor loss = zeros({});
            for (const Tensor& p : params)
              if (p.defined()) loss = loss + (p * p).sum() * d.real();
            if (loss.requires_grad()) loss.backward();
            return loss;
          });
      }
    }
    if (d.coin()) opt->add_param_group(optim::ParamGroup({d.coin() ? params[0] : leaf(d, {2})}));
  });
  op("lr_schedulers", [](Draw& d) {
    Tensor w = zeros({2}).requires_grad_();
    optim::SGD opt({w}, optim::SGDOptions(d.coin() ? 0.1 : d.real()).momentum(0.9));
    std::unique_ptr<optim::LRScheduler> s;
    switch (d.below(7)) {
      case 0:
        s = std::make_unique<optim::StepLR>(opt, d.integer(), d.real());
        break;
      case 1:
        s = std::make_unique<optim::MultiStepLR>(opt, d.dims(), d.real());
        break;
      case 2:
        s = std::make_unique<optim::ExponentialLR>(opt, d.real());
        break;
      case 3:
        s = std::make_unique<optim::CosineAnnealingLR>(opt, d.integer(), d.real());
        break;
      case 4:
        s = std::make_unique<optim::LinearLR>(opt, d.real(), d.real(), d.integer());
        break;
      case 5:
        s = std::make_unique<optim::OneCycleLR>(opt, optim::OneCycleLROptions(d.real(), d.integer())
                                                         .pct_start(d.coin() ? 0.3 : d.real())
                                                         .anneal_strategy(d.coin() ? "linear" : "bogus")
                                                         .three_phase(d.coin())
                                                         .div_factor(d.real()));
        break;
      default:
        s = std::make_unique<optim::SequentialLR>(
            opt,
            std::vector<std::shared_ptr<optim::LRScheduler>>{std::make_shared<optim::ExponentialLR>(opt, 0.5),
                                                             std::make_shared<optim::StepLR>(opt, 1 + d.below(3))},
            d.dims());
    }
    for (int i = 0; i < 4; ++i) d.coin() ? s->step() : s->step(d.integer());
    std::map<std::string, double> state = s->state_dict();
    if (d.coin() && !state.empty()) state.begin()->second = d.real();
    s->load_state_dict(state);
  });
  op("clip_grad", [](Draw& d) {
    std::vector<Tensor> params = {leaf(d, {2, 2}), leaf(d, {3})};
    for (Tensor& p : params) give_grad(d, p);
    if (d.coin())
      (void)nn::utils::clip_grad_norm_(params, d.real(), d.coin() ? 2.0 : d.real(), d.coin());
    else
      nn::utils::clip_grad_value_(params, d.real());
  });
  op("master_weights", [](Draw& d) {
    std::vector<Tensor> params = {leaf(d, {2}), leaf(d, {3})};
    for (Tensor& p : params)
      if (p.defined() && d.coin()) p = p.detach().to(d.coin() ? kFloat16 : kBFloat16).requires_grad_();
    optim::MasterWeights master(params);
    for (Tensor& p : params) give_grad(d, p);
    master.copy_grads_to_master();
    master.copy_master_to_model();
    master.zero_model_grads();
  });
  // ---- quantization ----
  op("observers", [](Draw& d) {
    static const QDType types[] = {QDType::QUInt8, QDType::QInt8, QDType::QInt32};
    const int kind = static_cast<int>(d.below(4));  // MinMax, MovingAverage, PerChannel, Histogram
    q::ObserverOptions o;
    const bool per_channel = d.below(6) == 0 ? d.coin() : kind == 2;
    o.with_qscheme(per_channel ? (d.coin() ? QScheme::PerChannelAffine : QScheme::PerChannelSymmetric)
                               : (d.coin() ? QScheme::PerTensorAffine : QScheme::PerTensorSymmetric));
    o.with_dtype(types[d.below(6) == 0 ? d.below(3) : d.below(2)]).with_reduce_range(d.coin());
    if (d.below(6) == 0) o.with_range(d.integer(), d.integer());
    o.with_averaging_constant(mostly(d, 0.01)).with_ch_axis(d.below(6) == 0 ? d.integer() : d.below(2));
    std::shared_ptr<q::ObserverImpl> observer;
    switch (kind) {
      case 0:
        observer = std::make_shared<q::MinMaxObserverImpl>(o);
        break;
      case 1:
        observer = std::make_shared<q::MovingAverageMinMaxObserverImpl>(o);
        break;
      case 2:
        observer = std::make_shared<q::PerChannelMinMaxObserverImpl>(o);
        break;
      default:
        observer = std::make_shared<q::HistogramObserverImpl>(o, d.below(6) == 0 ? d.integer() : 16,
                                                              d.below(6) == 0 ? d.integer() : 4);
    }
    for (int i = 0; i < 2; ++i) {
      Tensor x = d.tensor(d.shape(3), d.below(6) == 0 ? d.dtype() : kFloat32);
      if (x.defined() && is_floating(x.dtype()) && d.coin()) x = x * d.real();  // inf, NaN, huge, tiny, 0
      (void)observer->forward(x);
    }
    (void)observer->calculate_qparams();
  });
  op("fake_quantize_module", [](Draw& d) {
    q::ObserverOptions o = d.coin() ? q::default_activation_options() : q::default_per_channel_weight_options();
    if (d.coin()) o.with_ch_axis(d.integer());
    q::FakeQuantize fq(o);
    fq->enable_observer(d.coin());
    Tensor x = d.floating();
    if (x.defined() && d.coin()) x = x * d.real();
    (void)fq(x);
  });
  op("choose_quantization_params", [](Draw& d) {
    (void)q::choose_quantization_params(static_cast<float>(d.real()), static_cast<float>(d.real()), d.integer(),
                                        d.integer(), d.coin());
  });
  op("quantize_per_channel", [](Draw& d) {
    const Tensor x = d.floating();
    const int64_t axis = d.below(6) == 0 ? d.integer() : d.below(3);
    const int64_t c = x.defined() && axis >= 0 && axis < x.dim() ? x.size(axis) : 2;
    const QDType types[] = {QDType::QInt8, QDType::QUInt8, QDType::QInt32};
    (void)quantize_per_channel(x, d.tensor(d.near({c}), kFloat32).abs() * mostly(d, 1.0),
                               d.tensor(d.near({c}), d.coin() ? kInt32 : kInt64) + (d.below(6) == 0 ? d.integer() : 0),
                               axis, types[d.below(3)])
        .dequantize();
  });
  op("static_int8_model", [](Draw& d) {
    nn::Sequential model(nn::Conv2d(nn::Conv2dOptions(1, 2, 3).padding(1)), nn::ReLU(), nn::Flatten(),
                         nn::Linear(32, 3));
    d.coin() ? q::prepare(*model, d.coin() ? q::Calibration::MinMax : q::Calibration::Histogram)
             : q::prepare_qat(*model);
    for (int i = 0; i < 2; ++i) (void)model(image(d, 1));
    nn::Sequential int8 = q::convert(*model, q::ConvertOptions().keep_shallow_first_layer(d.coin() ? 0 : 32));
    if (d.coin()) {  // another model's state, edited
      StateDict state = int8->state_dict();
      const std::string name = state.keys()[static_cast<size_t>(d.below(static_cast<int64_t>(state.size())))];
      state[name] = d.coin() ? state[name] * d.real() : d.tensor();
      int8->load_state_dict(state, d.coin());
    }
    (void)int8(image(d, 1));
  });
  op("dynamic_int8_model", [](Draw& d) {
    const int64_t in = 1 + d.below(3);
    nn::Linear linear(in, 2);
    if (d.coin()) linear->weight.detach().mul_(d.real());
    auto model = q::quantize_dynamic(linear.ptr(), {"Linear"}, d.coin());
    Tensor x = d.tensor(d.near({2, in}), d.coin() ? kFloat32 : d.dtype());
    if (x.defined() && is_floating(x.dtype()) && d.coin()) x = x * d.real();
    (void)std::dynamic_pointer_cast<q::DynamicQuantizedLinearImpl>(model)->forward(x);
  });
  op("int8_kernels", [](Draw& d) {  // valid arguments with non-finite scales or bias, then perhaps one thing broken
    const int64_t n = 1 + d.below(3), k = 1 + d.below(4), kh = 1 + d.below(2);
    const bool conv = d.coin();
    Int8Epilogue e;
    e.a_zero_point = d.below(128);
    e.a_scale = 0.1;
    e.w_scale = d.tensor({d.coin() ? 1 : n}, kFloat32).abs() * (d.coin() ? 1.0 : d.real());
    if (d.coin()) e.bias = d.tensor({n}, kFloat32) * (d.coin() ? 1.0 : d.real());
    e.out_scale = 0.05;
    e.out_zero_point = d.below(128);
    e.out_quant_max = 127;
    e.relu = d.coin();
    DType out = d.coin() ? kUInt8 : kFloat32;
    int64_t out_n = n;
    Int2 kernel = {kh, kh};
    Conv2dParams p;
    p.padding = {d.below(2), d.below(2)};
    Tensor w = d.tensor({n, conv ? 2 : k, conv ? kh : 1, conv ? kh : 1}, kInt8);
    Tensor a = d.tensor(conv ? Shape{1 + d.below(2), 2, 3, 3} : Shape{2, k}, kUInt8);
    switch (d.below(8)) {
      case 0:
        e.a_scale = d.real(), e.out_scale = d.real();
        break;
      case 1:
        e.a_zero_point = d.integer(), e.out_zero_point = d.integer();
        break;
      case 2:
        e.out_quant_min = d.integer(), e.out_quant_max = d.integer();
        break;
      case 3:
        out_n = d.integer();
        break;
      case 4:
        out = d.dtype();
        break;
      case 5:
        w = d.tensor(d.near(w.sizes()), d.coin() ? kInt8 : d.dtype());  // the weight of another shape
        break;
      case 6:
        kernel = d.pair(), p.stride = d.pair(), p.dilation = d.pair();
        break;
      default:
        break;
    }
    if (conv) {
      (void)native::int8_conv2d(a, native::int8_pack_conv_weight(w), out_n, kernel, p, e, out);
    } else {
      const Tensor packed = native::int8_pack_weight(w.defined() && w.dim() == 4 ? w.flatten(1) : w);
      (void)native::int8_gemm(a, packed, out_n, e, out);
    }
  });
  // ---- pruning's later steps ----
  op("prune_then", [](Draw& d) {
    nn::Sequential model(nn::Linear(3, 4), nn::ReLU(), nn::Linear(4, 2));
    const std::shared_ptr<nn::Module> first = (*model)[0], last = (*model)[2];
    switch (d.below(3)) {
      case 0:
        prune::custom_from_mask(*first, d.coin() ? "weight" : "bias", d.tensor(d.near({4, 3}), d.dtype()));
        break;
      case 1:
        prune::global_unstructured(
            {{first, "weight"}, {last, d.coin() ? "weight" : "nothing"}},
            prune::L1Unstructured(d.coin() ? prune::Amount(d.real()) : prune::Amount(d.integer())),
            d.coin() ? std::vector<Tensor>{} : std::vector<Tensor>{d.floating()});
        break;
      default:
        prune::ln_structured(*first, "weight", prune::Amount(d.real()), d.coin() ? 1.0 : d.real(), 0);
    }
    switch (d.below(4)) {
      case 0:
        prune::remove(*first, d.coin() ? "weight" : "bias");
        break;
      case 1:
        (void)prune::shrink(*model);
        break;
      case 2:
        (void)prune::sparsify(*model, d.real());
        break;
      default:
        (void)prune::sparsity(*model);
    }
    (void)model(d.tensor(d.near({2, 3}), kFloat32));
  });
  return c;
}

TEST(Errors, RandomTrainingArgumentsReturnOrThrowAnEmberError) {
  testing::expect_only_ember_errors(calls(), Device(kCPU));
}

TEST(Errors, RandomTrainingArgumentsOnCudaReturnOrThrowAnEmberError) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  testing::expect_only_ember_errors(calls(), Device(kCUDA));
}

}  // namespace
}  // namespace ember
