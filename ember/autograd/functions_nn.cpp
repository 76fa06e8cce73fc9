// softmax, convolution, pooling and indexing, forward beside backward.
#include "ember/autograd/function_helpers.h"
#include "ember/tensor/quantized.h"

namespace ember {

Tensor autograd::softmax(const Tensor& x, int64_t dim) {
  Tensor out = forward([&] { return native::softmax(x, dim); });
  if (needs_grad(x)) {
    const int64_t d = wrap_dim(dim, x.dim(), "softmax");
    // dx = y * (dy - sum(dy * y))
    record_fn(
        "SoftmaxBackward", {&x}, {&out},
        [lx = Like(x), so = SavedTensor::output(out), d](std::vector<Tensor>& g) {
          const Tensor y = so.unpack("softmax");
          return std::vector<Tensor>{(y * (g[0] - ember::sum(g[0] * y, {d}, true))).to(lx.dtype)};
        },
        kDifferentiable);
  }
  return out;
}

Tensor autograd::log_softmax(const Tensor& x, int64_t dim) {
  Tensor out = forward([&] { return native::log_softmax(x, dim); });
  if (needs_grad(x)) {
    const int64_t d = wrap_dim(dim, x.dim(), "log_softmax");
    // dx = dy - softmax * sum(dy)
    record_fn(
        "LogSoftmaxBackward", {&x}, {&out},
        [lx = Like(x), so = SavedTensor::output(out), d](std::vector<Tensor>& g) {
          return std::vector<Tensor>{
              (g[0] - ember::exp(so.unpack("log_softmax")) * ember::sum(g[0], {d}, true)).to(lx.dtype)};
        },
        kDifferentiable);
  }
  return out;
}

namespace {

// layer_norm's backward in public ops, for a create_graph backward (Note [Double backward]): the
// statistics recomputed from x so that the gradient is differentiable w.r.t. it. With
// x̂ = (x - mean) rstd and ĝ = dy w, dx = rstd (ĝ - mean(ĝ) - x̂ mean(ĝ x̂)) over the normalized
// dims, dw = Σ dy x̂ and db = Σ dy over the others.
TensorTriple layer_norm_backward_composed(const Tensor& dy, const Tensor& x, const Shape& normalized_shape,
                                          const Tensor& weight, double eps, std::array<bool, 3> wanted) {
  const int64_t lead = x.dim() - static_cast<int64_t>(normalized_shape.size());
  Shape normalized_dims, leading_dims;
  for (int64_t d = 0; d < x.dim(); ++d) (d < lead ? leading_dims : normalized_dims).push_back(d);
  const DType compute = x.dtype() == kFloat16 || x.dtype() == kBFloat16 ? kFloat32 : x.dtype();
  const Tensor xf = x.to(compute), g = dy.to(compute);
  const Tensor centered = xf - xf.mean(normalized_dims, true);
  const Tensor rstd = rsqrt((centered * centered).mean(normalized_dims, true) + eps), xhat = centered * rstd;
  auto over_rows = [&](const Tensor& t) { return leading_dims.empty() ? t : t.sum(leading_dims); };
  Tensor dx, dw, db;
  if (wanted[0]) {
    const Tensor gh = weight.defined() ? g * weight.to(compute) : g;
    dx = rstd * (gh - gh.mean(normalized_dims, true) - xhat * (gh * xhat).mean(normalized_dims, true));
  }
  if (wanted[1]) dw = over_rows(g * xhat);
  if (wanted[2]) db = over_rows(g);
  return {dx, dw, db};
}

// group_norm's, the same way: rows of a sample's group of channels, the affine per channel.
TensorTriple group_norm_backward_composed(const Tensor& dy, const Tensor& x, const Tensor& weight, int64_t groups,
                                          double eps, std::array<bool, 3> wanted) {
  const DType compute = x.dtype() == kFloat16 || x.dtype() == kBFloat16 ? kFloat32 : x.dtype();
  const int64_t n = x.size(0), c = x.size(1);
  Shape channel_shape(static_cast<size_t>(x.dim()), 1), all_but_channels{0};
  channel_shape[1] = c;
  for (int64_t d = 2; d < x.dim(); ++d) all_but_channels.push_back(d);
  const Tensor xg = x.to(compute).reshape({n, groups, -1}), g = dy.to(compute);
  const Tensor centered = xg - xg.mean({2}, true);
  const Tensor rstd = rsqrt((centered * centered).mean({2}, true) + eps), xhat = centered * rstd;
  Tensor dx, dw, db;
  if (wanted[0]) {
    const Tensor gh = (weight.defined() ? g * weight.to(compute).reshape(channel_shape) : g).reshape({n, groups, -1});
    dx = (rstd * (gh - gh.mean({2}, true) - xhat * (gh * xhat).mean({2}, true))).reshape(x.sizes());
  }
  if (wanted[1]) dw = (g * xhat.reshape(x.sizes())).sum(all_but_channels);
  if (wanted[2]) db = g.sum(all_but_channels);
  return {dx, dw, db};
}

// batch_norm's: statistics over the samples and positions of each channel, recomputed from x in
// training; in eval the running statistics the forward used, which x does not move.
TensorTriple batch_norm_backward_composed(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                          const Tensor& rstd, bool training, double eps, std::array<bool, 3> wanted) {
  const DType compute = x.dtype() == kFloat16 || x.dtype() == kBFloat16 ? kFloat32 : x.dtype();
  Shape channel_shape(static_cast<size_t>(x.dim()), 1), all_but_channels{0};
  channel_shape[1] = x.size(1);
  for (int64_t d = 2; d < x.dim(); ++d) all_but_channels.push_back(d);
  const Tensor xf = x.to(compute), g = dy.to(compute);
  Tensor centered, r;
  if (training) {
    centered = xf - xf.mean(all_but_channels, true);
    r = rsqrt((centered * centered).mean(all_but_channels, true) + eps);
  } else {
    centered = xf - mean.reshape(channel_shape);
    r = rstd.reshape(channel_shape);
  }
  const Tensor xhat = centered * r;
  Tensor dx, dw, db;
  if (wanted[0]) {
    const Tensor gh = weight.defined() ? g * weight.to(compute).reshape(channel_shape) : g;
    dx = training ? r * (gh - gh.mean(all_but_channels, true) - xhat * (gh * xhat).mean(all_but_channels, true))
                  : r * gh;
  }
  if (wanted[1]) dw = (g * xhat).sum(all_but_channels);
  if (wanted[2]) db = g.sum(all_but_channels);
  return {dx, dw, db};
}

}  // namespace

TensorTriple autograd::native_group_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t num_groups,
                                         double eps) {
  auto [out, mean, rstd] = forward([&] { return native::native_group_norm(x, weight, bias, num_groups, eps); });
  if (needs_grad({&x, &weight, &bias}))
    record_fn(
        "NativeGroupNormBackward", {&x, &weight, &bias}, {&out},
        [sx = SavedTensor(x), sw = SavedTensor(weight), mean = mean, rstd = rstd, num_groups, eps,
         lw = weight.defined() ? weight.dtype() : kFloat32, lb = bias.defined() ? bias.dtype() : kFloat32,
         wanted = std::array<bool, 3>{x.requires_grad(), weight.defined() && weight.requires_grad(),
                                      bias.defined() && bias.requires_grad()}](std::vector<Tensor>& g) {
          const Tensor x = sx.unpack("group_norm"), w = sw.unpack("group_norm");
          auto [dx, dw, db] = building_graph()
                                  ? group_norm_backward_composed(g[0], x, w, num_groups, eps, wanted)
                                  : native::native_group_norm_backward(g[0], x, mean, rstd, w, num_groups, wanted);
          return std::vector<Tensor>{dx.defined() ? dx.to(x.dtype()) : dx, dw.defined() ? dw.to(lw) : dw,
                                     db.defined() ? db.to(lb) : db};
        },
        kDifferentiable);
  return {out, mean, rstd};
}

// The running statistics are moved in place in training; their versions say so.
TensorTriple autograd::native_batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                         const Tensor& running_mean, const Tensor& running_var, bool training,
                                         double momentum, double eps) {
  auto [out, mean, rstd] = forward(
      [&] { return native::native_batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps); });
  if (training && running_mean.defined()) {
    running_mean.bump_version();
    running_var.bump_version();
  }
  if (needs_grad({&x, &weight, &bias}))
    record_fn(
        "NativeBatchNormBackward", {&x, &weight, &bias}, {&out},
        [sx = SavedTensor(x), sw = SavedTensor(weight), mean = mean, rstd = rstd, training, eps,
         lw = weight.defined() ? weight.dtype() : kFloat32, lb = bias.defined() ? bias.dtype() : kFloat32,
         wanted = std::array<bool, 3>{x.requires_grad(), weight.defined() && weight.requires_grad(),
                                      bias.defined() && bias.requires_grad()}](std::vector<Tensor>& g) {
          const Tensor x = sx.unpack("batch_norm"), w = sw.unpack("batch_norm");
          auto [dx, dw, db] = building_graph()
                                  ? batch_norm_backward_composed(g[0], x, w, mean, rstd, training, eps, wanted)
                                  : native::native_batch_norm_backward(g[0], x, mean, rstd, w, training, wanted);
          return std::vector<Tensor>{dx.defined() ? dx.to(x.dtype()) : dx, dw.defined() ? dw.to(lw) : dw,
                                     db.defined() ? db.to(lb) : db};
        },
        kDifferentiable);
  return {out, mean, rstd};
}

// Note [Fused layer_norm]: the node keeps the input, weight and each row's mean and rstd.
TensorTriple autograd::native_layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                                         const Tensor& bias, double eps) {
  auto [out, mean, rstd] = forward([&] { return native::native_layer_norm(x, normalized_shape, weight, bias, eps); });
  if (needs_grad({&x, &weight, &bias}))
    record_fn(
        "NativeLayerNormBackward", {&x, &weight, &bias}, {&out},
        [sx = SavedTensor(x), sw = SavedTensor(weight), mean = mean, rstd = rstd, normalized_shape, eps,
         lw = weight.defined() ? weight.dtype() : kFloat32, lb = bias.defined() ? bias.dtype() : kFloat32,
         wanted = std::array<bool, 3>{x.requires_grad(), weight.defined() && weight.requires_grad(),
                                      bias.defined() && bias.requires_grad()}](std::vector<Tensor>& g) {
          const Tensor x = sx.unpack("layer_norm"), w = sw.unpack("layer_norm");
          auto [dx, dw, db] =
              building_graph() ? layer_norm_backward_composed(g[0], x, normalized_shape, w, eps, wanted)
                               : native::native_layer_norm_backward(g[0], x, normalized_shape, mean, rstd, w, wanted);
          return std::vector<Tensor>{dx.defined() ? dx.to(x.dtype()) : dx, dw.defined() ? dw.to(lw) : dw,
                                     db.defined() ? db.to(lb) : db};
        },
        kDifferentiable);
  return {out, mean, rstd};
}

Tensor autograd::conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, Int2 stride, Int2 padding,
                        Int2 dilation, int64_t groups) {
  Tensor out = forward([&] { return native::conv2d(input, weight, bias, stride, padding, dilation, groups); });
  if (needs_grad({&input, &weight, &bias}))
    record_fn("Conv2dBackward", {&input, &weight, &bias}, {&out},
              [si = SavedTensor(input), sw = SavedTensor(weight), stride, padding, dilation, groups,
               wanted = std::array<bool, 3>{input.requires_grad(), weight.requires_grad(),
                                            bias.defined() && bias.requires_grad()}](std::vector<Tensor>& g) {
                auto [gx, gw, gb] = native::conv2d_backward(si.unpack("conv2d"), sw.unpack("conv2d"), g[0], stride,
                                                            padding, dilation, groups, wanted);
                return std::vector<Tensor>{gx, gw, gb};
              });
  return out;
}

// conv_transpose2d is conv2d's backward-data pass, so its gradients are conv2d's other passes:
// dx = conv2d(dy, w) (the forward), dw = conv2d's backward-weight with dy as the input and x as
// the output gradient, db = dy summed over all but the channel dim. An output_padding of a
// stride or more (allowed below the dilation) makes conv2d(dy, w) larger than x by
// output_padding / stride rows or columns, windows that fell wholly in the padding: dx is its
// first rows and columns.
Tensor autograd::conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias, Int2 stride,
                                  Int2 padding, Int2 output_padding, int64_t groups, Int2 dilation) {
  Tensor out = forward(
      [&] { return native::conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups, dilation); });
  if (needs_grad({&input, &weight, &bias}))
    record_fn(
        "ConvTranspose2dBackward", {&input, &weight, &bias}, {&out},
        [si = weight.requires_grad() ? SavedTensor(input) : SavedTensor(), sw = SavedTensor(weight), stride, padding,
         dilation, groups, x_sizes = input.sizes(), want_x = input.requires_grad(), want_w = weight.requires_grad(),
         want_b = bias.defined() && bias.requires_grad()](std::vector<Tensor>& g) {
          const Tensor w = sw.unpack("conv_transpose2d");
          Tensor gx, gw, gb;
          if (want_x) {
            gx = native::conv2d(g[0], w, {}, stride, padding, dilation, groups);
            for (int64_t d = gx.dim() - 2; d < gx.dim(); ++d)
              gx = native::narrow(gx, d, 0, x_sizes[static_cast<size_t>(d)]);
          }
          if (want_w)
            gw = std::get<1>(native::conv2d_backward(g[0], w, si.unpack("conv_transpose2d"), stride, padding, dilation,
                                                     groups, {false, true, false}));
          if (want_b) gb = native::sum(g[0], g[0].dim() == 4 ? Shape{0, 2, 3} : Shape{1, 2});
          return std::vector<Tensor>{gx, gw, gb};
        });
  return out;
}

// PyTorch's formulas, finite where x is 0 or 1 (the composed loss would give 0 * inf = NaN there):
// dx = w (x - y) / max(x (1 - x), eps), dy = w (log(1 - x) - log x) with the forward's clamps
// (eps = 1e-12 rounded to float, as PyTorch's constant is);
// both times the upstream gradient, spread over the elements by the reduction.
Tensor autograd::binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                                      const std::string& reduction) {
  Tensor out = forward([&] { return native::binary_cross_entropy(input, target, weight, reduction); });
  if (needs_grad(input, target)) {
    EMBER_CHECK(!weight.defined() || !weight.requires_grad(), "binary_cross_entropy: the weight cannot require grad");
    record_fn(
        "BinaryCrossEntropyBackward", {&input, &target}, {&out},
        [sx = SavedTensor(input), sy = SavedTensor(target), w = weight, reduction, n = input.numel(),
         want_x = input.requires_grad(), want_y = target.requires_grad()](std::vector<Tensor>& g) {
          const Tensor x = sx.unpack("binary_cross_entropy"), y = sy.unpack("binary_cross_entropy");
          Tensor scale = reduction == "mean" ? g[0] / static_cast<double>(n) : g[0];
          if (w.defined()) scale = scale * w;
          Tensor gx, gy;
          if (want_x)
            gx = (scale * (x - y) / ember::clamp(x * (1.0 - x), Scalar(static_cast<double>(1e-12f)))).expand(x.sizes());
          if (want_y) {
            const Tensor log_x = ember::clamp(ember::log(x), Scalar(-100.0));
            const Tensor log_1mx = ember::clamp(ember::log(1.0 - x), Scalar(-100.0));
            gy = (scale * (log_1mx - log_x)).expand(x.sizes());
          }
          return std::vector<Tensor>{gx, gy};
        },
        kDifferentiable);
  }
  return out;
}

// The gradient of each window's maximum goes to the position max_pool2d recorded.
std::tuple<Tensor, Tensor> autograd::max_pool2d_with_indices(const Tensor& x, Int2 kernel, std::optional<Int2> stride,
                                                             Int2 padding, Int2 dilation, bool ceil_mode) {
  auto [out, idx] =
      forward([&] { return native::max_pool2d_with_indices(x, kernel, stride, padding, dilation, ceil_mode); });
  if (needs_grad(x))
    record_fn("MaxPool2dBackward", {&x}, {&out, &idx}, [sizes = x.sizes(), indices = idx](std::vector<Tensor>& g) {
      return std::vector<Tensor>{native::max_pool2d_backward(g[0], indices, sizes)};
    });
  return {out, idx};
}

// What the node keeps is one byte per output, each maximum's tap in its window, not PyTorch's
// int64 index (a third of a small CNN's saved activations were those indices). Without a
// gradient (no-grad, inference, a quantized model's uint8 activations), only the values.
Tensor autograd::max_pool2d(const Tensor& x, Int2 kernel, std::optional<Int2> stride, Int2 padding, Int2 dilation,
                            bool ceil_mode) {
  if (!needs_grad(x))
    return forward([&] { return native::max_pool2d(x, kernel, stride, padding, dilation, ceil_mode); });
  if (kernel[0] <= 0 || kernel[1] <= 0 || kernel[0] > 256 / kernel[1])  // (bad sizes get max_pool2d's own error)
    return std::get<0>(ember::max_pool2d_with_indices(x, kernel, stride, padding, dilation, ceil_mode));
  auto [out, taps] =
      forward([&] { return native::max_pool2d_with_taps(x, kernel, stride, padding, dilation, ceil_mode); });
  record_fn("MaxPool2dBackward", {&x}, {&out},
            [sizes = x.sizes(), taps = taps, kernel, stride, padding, dilation, ceil_mode](std::vector<Tensor>& g) {
              return std::vector<Tensor>{
                  native::max_pool2d_backward_taps(g[0], taps, sizes, kernel, stride, padding, dilation, ceil_mode)};
            });
  return out;
}

Tensor autograd::avg_pool2d(const Tensor& x, Int2 kernel, std::optional<Int2> stride, Int2 padding, bool ceil_mode,
                            bool count_include_pad) {
  Tensor out = forward([&] { return native::avg_pool2d(x, kernel, stride, padding, ceil_mode, count_include_pad); });
  if (needs_grad(x))
    record_fn("AvgPool2dBackward", {&x}, {&out},
              [sizes = x.sizes(), kernel, stride, padding, ceil_mode, count_include_pad](std::vector<Tensor>& g) {
                return std::vector<Tensor>{
                    native::avg_pool2d_backward(g[0], sizes, kernel, stride, padding, ceil_mode, count_include_pad)};
              });
  return out;
}

Tensor autograd::adaptive_avg_pool2d(const Tensor& x, Int2 output_size) {
  Tensor out = forward([&] { return native::adaptive_avg_pool2d(x, output_size); });
  if (needs_grad(x))
    record_fn("AdaptiveAvgPool2dBackward", {&x}, {&out}, [sizes = x.sizes()](std::vector<Tensor>& g) {
      return std::vector<Tensor>{native::adaptive_avg_pool2d_backward(g[0], sizes)};
    });
  return out;
}

Tensor autograd::index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  Tensor out = forward([&] { return native::index_select(x, dim, index); });
  if (needs_grad(x) && x.dim() > 0) {
    const int64_t d = wrap_dim(dim, x.dim(), "index_select");
    // Rows picked several times receive the sum of their gradients.
    record_fn("IndexSelectBackward", {&x}, {&out},
              [lx = Like(x), idx = index.to(kInt64).reshape({-1}), d](std::vector<Tensor>& g) {
                Shape shape(lx.sizes.size(), 1);
                shape[static_cast<size_t>(d)] = -1;
                Tensor gx = lx.zeros();
                gx.scatter_add_(d, idx.view(shape).expand(g[0].sizes()).contiguous(), g[0]);
                return std::vector<Tensor>{gx};
              });
  }
  return out;
}

Tensor autograd::gather(const Tensor& x, int64_t dim, const Tensor& index) {
  Tensor out = forward([&] { return native::gather(x, dim, index); });
  if (needs_grad(x)) {
    const int64_t d = wrap_dim(dim, x.dim(), "gather");
    record_fn("GatherBackward", {&x}, {&out}, [lx = Like(x), idx = index, d](std::vector<Tensor>& g) {
      Tensor gx = lx.zeros();
      gx.scatter_add_(d, idx, g[0]);
      return std::vector<Tensor>{gx};
    });
  }
  return out;
}

namespace {
// The gradient of a scatter's src: the output gradient where each element landed; src elements
// beyond index's extent were not scattered and get zero.
Tensor scattered_gradient(const Like& src, const Tensor& index, int64_t dim, const Tensor& grad_out) {
  Tensor gs = src.zeros();
  Tensor region = gs;
  for (int64_t k = 0; k < index.dim(); ++k) region = native::narrow(region, k, 0, index.size(k));
  native::copy_(region, native::gather(grad_out, dim, index));
  return gs;
}
}  // namespace

Tensor autograd::scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor out = forward([&] { return native::scatter_add(x, dim, index, src); });
  if (needs_grad(x, src)) {
    const int64_t d = wrap_dim(dim, x.dim(), "scatter_add");
    record_fn("ScatterAddBackward", {&x, &src}, {&out}, [ls = Like(src), idx = index, d](std::vector<Tensor>& g) {
      return std::vector<Tensor>{g[0], scattered_gradient(ls, idx, d, g[0])};
    });
  }
  return out;
}

Tensor& autograd::scatter_add_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  EMBER_CHECK(!(GradMode::is_enabled() && (x.requires_grad() || src.requires_grad())),
              "scatter_add_: in-place scatter on tensors that require grad is not supported; use scatter_add");
  native::scatter_add_(x, dim, index, src);
  x.bump_version();
  return x;
}

// scatter overwrites: x's gradient is zero where an element was replaced, src's is the output
// gradient where each element landed (with colliding targets, as in PyTorch, each colliding
// element gets it: the gradient is only meaningful for distinct targets).
Tensor autograd::scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  Tensor out = forward([&] { return native::scatter(x, dim, index, src); });
  if (needs_grad(x, src)) {
    const int64_t d = wrap_dim(dim, x.dim(), "scatter");
    record_fn("ScatterBackward", {&x, &src}, {&out}, [ls = Like(src), idx = index, d](std::vector<Tensor>& g) {
      const Tensor gx = native::scatter(g[0], d, idx, ember::zeros_like(native::gather(g[0], d, idx)));
      return std::vector<Tensor>{gx, scattered_gradient(ls, idx, d, g[0])};
    });
  }
  return out;
}

Tensor& autograd::scatter_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  EMBER_CHECK(!(GradMode::is_enabled() && (x.requires_grad() || src.requires_grad())),
              "scatter_: in-place scatter on tensors that require grad is not supported; use scatter");
  native::scatter_(x, dim, index, src);
  x.bump_version();
  return x;
}

Tensor autograd::embedding(const Tensor& weight, const Tensor& indices) {
  if (!needs_grad(weight)) return forward([&] { return native::embedding(weight, indices); });
  EMBER_CHECK(weight.dim() == 2, "embedding: weight must be 2-D [num_embeddings, embedding_dim], got shape ",
              shape_str(weight.sizes()));
  Shape shape = indices.sizes();
  shape.push_back(weight.size(1));
  return ember::index_select(weight, 0, indices.reshape({-1})).view(shape);
}

namespace {
// tril/triu keep a triangle; their gradient is the same triangle of the output gradient
// (recorded in a create_graph backward).
using TriangleFn = Tensor (*)(const Tensor&, int64_t);
Tensor triangle(const char* name, TriangleFn native_fn, TriangleFn public_fn, const Tensor& x, int64_t diagonal) {
  Tensor out = forward([&] { return native_fn(x, diagonal); });
  if (needs_grad(x))
    record_fn(
        name, {&x}, {&out},
        [native_fn, public_fn, diagonal](std::vector<Tensor>& g) {
          return std::vector<Tensor>{building_graph() ? public_fn(g[0], diagonal) : native_fn(g[0], diagonal)};
        },
        kDifferentiable);
  return out;
}
}  // namespace

Tensor autograd::tril(const Tensor& x, int64_t diagonal) {
  return triangle("TrilBackward", native::tril, static_cast<TriangleFn>(ember::tril), x, diagonal);
}
Tensor autograd::triu(const Tensor& x, int64_t diagonal) {
  return triangle("TriuBackward", native::triu, static_cast<TriangleFn>(ember::triu), x, diagonal);
}

}  // namespace ember

namespace ember {
namespace {
// Fake quantization: the forward is the round trip; the gradient, the straight-through estimator.
Tensor fake_quantize(const Tensor& x, const QuantParams& p) {
  auto [out, mask] = forward([&] { return native::fake_quantize_affine(x, p); });
  if (needs_grad(x))
    record_fn("FakeQuantizeBackward", {&x}, {&out}, [mask = mask](std::vector<Tensor>& g) {
      return std::vector<Tensor>{native::mul(g[0], native::to(mask, g[0].dtype()))};
    });
  return out;
}
}  // namespace

Tensor autograd::fake_quantize_per_tensor_affine(const Tensor& x, double scale, int64_t zero_point, int64_t quant_min,
                                                 int64_t quant_max) {
  QuantParams p;
  p.scale = full({1}, scale, TensorOptions().dtype(kFloat32).device(x.device()));
  p.zero_point = full({1}, zero_point, TensorOptions().dtype(kInt32).device(x.device()));
  p.quant_min = quant_min;
  p.quant_max = quant_max;
  return fake_quantize(x, p);
}

Tensor autograd::fake_quantize_per_channel_affine(const Tensor& x, const Tensor& scale, const Tensor& zero_point,
                                                  int64_t axis, int64_t quant_min, int64_t quant_max) {
  EMBER_CHECK(x.defined() && axis >= -x.dim() && axis < x.dim(), "fake_quantize_per_channel_affine: axis ", axis,
              " is out of range for shape ", x.defined() ? shape_str(x.sizes()) : "(undefined)");
  return fake_quantize(x, QuantParams{scale, zero_point, axis < 0 ? axis + x.dim() : axis, quant_min, quant_max});
}

}  // namespace ember
