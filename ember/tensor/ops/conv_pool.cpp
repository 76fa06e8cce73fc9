// conv2d and 2-D pooling: argument checks and output sizes (PyTorch's formulas).
#include "ember/tensor/ops/internal.h"

namespace ember::native {
namespace {

std::string pair_str(Int2 p) { return shape_str({p[0], p[1]}); }

void check_positive(Int2 v, const char* op, const char* what) {
  EMBER_CHECK(v[0] > 0 && v[1] > 0, op, ": ", what, " must be positive, got ", pair_str(v));
}

using ops::size_add;
using ops::size_mul;

// floor((in + 2 pad - dil (k - 1) - 1 + (ceil ? stride - 1 : 0)) / stride) + 1, and with
// ceil_mode the last window must start inside the input or left padding.
int64_t pooled_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil, bool ceil_mode, const char* op) {
  const int64_t padded = size_add(in, size_mul(2, pad, op), op), reach = size_mul(dil, k - 1, op);
  const int64_t span = size_add(padded - reach - 1, ceil_mode ? stride - 1 : 0, op);
  if (span < 0) return 0;
  int64_t out = span / stride + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

Tensor check_nchw(const Tensor& x, const char* op, bool allow_uint8 = false) {
  ops::check_defined(x, op);
  EMBER_CHECK(x.dim() == 3 || x.dim() == 4, op, ": expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got shape ",
              shape_str(x.sizes()));
  EMBER_CHECK(x.is_floating_point() || (allow_uint8 && x.dtype() == kUInt8), op, ": expected a floating point input",
              allow_uint8 ? " (or uint8)" : "", ", got ", x.dtype());
  return contiguous(x.dim() == 3 ? unsqueeze(x, 0) : x);
}

Pool2dParams pool_params(const Tensor& x, Int2 kernel, std::optional<Int2> stride, Int2 padding, Int2 dilation,
                         bool ceil_mode, const char* op) {
  Pool2dParams p;
  p.kernel = kernel;
  p.stride = stride.value_or(kernel);
  p.padding = padding;
  p.dilation = dilation;
  p.ceil_mode = ceil_mode;
  check_positive(p.kernel, op, "kernel_size");
  check_positive(p.stride, op, "stride");
  check_positive(p.dilation, op, "dilation");
  // As PyTorch: only the batch may be empty (a window over an empty plane has no maximum).
  EMBER_CHECK(x.size(1) > 0 && x.size(2) > 0 && x.size(3) > 0, op, ": input of shape (N, C, H, W) ",
              shape_str(x.sizes()), " is empty in C, H or W; only the batch may be empty");
  EMBER_CHECK(padding[0] >= 0 && padding[1] >= 0 && padding[0] <= kernel[0] / 2 && padding[1] <= kernel[1] / 2, op,
              ": pad should be at most half of the effective kernel size, but got pad=", pair_str(padding),
              " and kernel_size=", pair_str(kernel));
  return p;
}

Shape pooled_shape(const Tensor& x4, const Pool2dParams& p, const char* op) {
  const int64_t Ho = pooled_size(x4.size(2), p.kernel[0], p.padding[0], p.stride[0], p.dilation[0], p.ceil_mode, op);
  const int64_t Wo = pooled_size(x4.size(3), p.kernel[1], p.padding[1], p.stride[1], p.dilation[1], p.ceil_mode, op);
  EMBER_CHECK(Ho > 0 && Wo > 0, op, ": output size is too small for input of shape ", shape_str(x4.sizes()),
              " with kernel_size=", pair_str(p.kernel), ", stride=", pair_str(p.stride),
              ", padding=", pair_str(p.padding));
  return {x4.size(0), x4.size(1), Ho, Wo};
}

// Autograd's max pool records each window's maximum as its tap number, one byte.
void check_taps_fit_a_byte(Int2 kernel, const char* op) {
  EMBER_CHECK(kernel[0] > 0 && kernel[1] > 0 && kernel[0] <= 256 / kernel[1], op, ": a window of ", pair_str(kernel),
              " taps does not number them in one byte");
}

// A kernel with no taps has no effective size (dilation (k - 1) + 1 <= 0): refused, as PyTorch does.
void check_kernel_size(const Tensor& weight, const char* op) {
  EMBER_CHECK(weight.size(2) > 0 && weight.size(3) > 0, op,
              ": kernel size should be greater than zero, got weight of shape ", shape_str(weight.sizes()));
}

Tensor restore_rank(const Tensor& out, const Tensor& original) {
  return original.dim() == 3 ? native::squeeze(out, 0) : out;
}

}  // namespace

namespace {

// conv2d's checks of its arguments (x: the input made 4-D), and the output's shape
// [N, out_channels, Ho, Wo]. `op` names conv2d or its backward in the errors.
Shape conv2d_output_shape(const Tensor& input, const Tensor& x, const Tensor& weight, const Tensor& bias, Int2 stride,
                          Int2 padding, Int2 dilation, int64_t groups, const char* op) {
  ops::check_defined(weight, op, "weight");
  ops::check_same_device({&input, &weight, &bias}, op);
  EMBER_CHECK(weight.dim() == 4, op, ": expected a 4-D weight [out_channels, in_channels/groups, kH, kW], got shape ",
              shape_str(weight.sizes()));
  check_kernel_size(weight, op);
  EMBER_CHECK(weight.dtype() == x.dtype() && (!bias.defined() || bias.dtype() == x.dtype()), op,
              ": input, weight and bias must share a dtype, got ", x.dtype(), ", ", weight.dtype(),
              bias.defined() ? detail::concat(" and ", bias.dtype()) : std::string());
  check_positive(stride, op, "stride");
  check_positive(dilation, op, "dilation");
  EMBER_CHECK(padding[0] >= 0 && padding[1] >= 0, op, ": negative padding ", pair_str(padding));
  EMBER_CHECK(groups > 0, op, ": groups must be positive, got ", groups);
  const int64_t C = x.size(1), O = weight.size(0);
  EMBER_CHECK(O % groups == 0, op, ": out_channels (", O, ") must be divisible by groups (", groups, ")");
  const int64_t expected_c = size_mul(weight.size(1), groups, op);
  EMBER_CHECK(expected_c == C, op, ": input of shape ", shape_str(input.sizes()), " has ", C,
              " channels, but weight of shape ", shape_str(weight.sizes()), " with groups=", groups, " expects ",
              expected_c);
  if (bias.defined())
    EMBER_CHECK(bias.dim() == 1 && bias.size(0) == O, op, ": bias must have shape [", O, "], got ",
                shape_str(bias.sizes()));
  const int64_t eff_h = size_add(size_mul(dilation[0], weight.size(2) - 1, op), 1, op),
                eff_w = size_add(size_mul(dilation[1], weight.size(3) - 1, op), 1, op);
  const int64_t Hp = size_add(x.size(2), size_mul(2, padding[0], op), op),
                Wp = size_add(x.size(3), size_mul(2, padding[1], op), op);
  EMBER_CHECK(Hp >= eff_h && Wp >= eff_w, op, ": input of shape ", shape_str(input.sizes()), " (padded ", Hp, "x", Wp,
              ") is smaller than the kernel (", eff_h, "x", eff_w, ")");
  return {x.size(0), O, (Hp - eff_h) / stride[0] + 1, (Wp - eff_w) / stride[1] + 1};
}

}  // namespace

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, Int2 stride, Int2 padding, Int2 dilation,
              int64_t groups) {
  const Tensor x = check_nchw(input, "conv2d");
  const Shape out_sizes = conv2d_output_shape(input, x, weight, bias, stride, padding, dilation, groups, "conv2d");
  Tensor out = ops::empty_on(out_sizes, x.dtype(), x.device());
  if (out.numel() > 0)
    backend(x.device())
        .conv2d(x, native::contiguous(weight), bias.defined() ? native::contiguous(bias) : bias, out,
                Conv2dParams{stride, padding, dilation, groups});
  return restore_rank(out, input);
}

// input [N, Cin, H, W], weight [Cin, Cout/g, kH, kW] -> [N, Cout, Ho, Wo]: conv2d's backward-data
// pass with input as its output gradient (the kernels of conv2d_backward, so cuDNN's
// backward-data algorithms, benchmark mode included, run it on CUDA).
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias, Int2 stride, Int2 padding,
                        Int2 output_padding, int64_t groups, Int2 dilation) {
  const char* op = "conv_transpose2d";
  const Tensor x = check_nchw(input, op);
  ops::check_defined(weight, op, "weight");
  ops::check_same_device({&input, &weight, &bias}, op);
  EMBER_CHECK(weight.dim() == 4, op, ": expected a 4-D weight [in_channels, out_channels/groups, kH, kW], got shape ",
              shape_str(weight.sizes()));
  check_kernel_size(weight, op);
  EMBER_CHECK(weight.dtype() == x.dtype() && (!bias.defined() || bias.dtype() == x.dtype()), op,
              ": input, weight and bias must share a dtype, got ", x.dtype(), ", ", weight.dtype(),
              bias.defined() ? detail::concat(" and ", bias.dtype()) : std::string());
  check_positive(stride, op, "stride");
  check_positive(dilation, op, "dilation");
  EMBER_CHECK(padding[0] >= 0 && padding[1] >= 0, op, ": negative padding ", pair_str(padding));
  EMBER_CHECK(groups > 0, op, ": groups must be positive, got ", groups);
  for (int d = 0; d < 2; ++d)
    EMBER_CHECK(output_padding[d] >= 0 && (output_padding[d] < stride[d] || output_padding[d] < dilation[d]), op,
                ": output_padding ", pair_str(output_padding), " must be smaller than either stride ", pair_str(stride),
                " or dilation ", pair_str(dilation));
  const int64_t C = x.size(1);
  EMBER_CHECK(weight.size(0) == C, op, ": input of shape ", shape_str(input.sizes()), " has ", C,
              " channels, but weight of shape ", shape_str(weight.sizes()), " expects ", weight.size(0));
  EMBER_CHECK(C % groups == 0, op, ": in_channels (", C, ") must be divisible by groups (", groups, ")");
  const int64_t O = size_mul(weight.size(1), groups, op);
  if (bias.defined())
    EMBER_CHECK(bias.dim() == 1 && bias.size(0) == O, op, ": bias must have shape [", O, "], got ",
                shape_str(bias.sizes()));
  Shape out_sizes{x.size(0), O, 0, 0};
  for (int d = 0; d < 2; ++d) {
    // (in - 1) stride - 2 pad + dil (k - 1) + output_padding + 1, each step checked
    const int64_t spread = size_mul(x.size(2 + d) - 1, stride[d], op);
    const int64_t reach = size_mul(dilation[d], weight.size(2 + d) - 1, op);
    out_sizes[2 + d] =
        size_add(size_add(size_add(spread, -size_mul(2, padding[d], op), op), reach, op), output_padding[d] + 1, op);
    EMBER_CHECK(out_sizes[2 + d] > 0, op, ": input of shape ", shape_str(input.sizes()), " with kernel ",
                shape_str(weight.sizes()), ", stride ", pair_str(stride), " and padding ", pair_str(padding),
                " gives an empty output (", out_sizes[2 + d], ")");
  }
  // 16-bit floats: in float32 on the CPU, so that the bias is added before the one rounding
  // (conv2d_backward itself takes them as they are); cuDNN takes them as they are.
  const DType compute = x.dtype() == kFloat64 || x.is_cuda() ? x.dtype() : kFloat32;
  Tensor out = ops::empty_on(out_sizes, compute, x.device());
  if (out.numel() > 0 && x.numel() > 0) {
    const Tensor w = to(contiguous(weight), compute);
    backend(x.device())
        .conv2d_backward(out, w, native::to(x, compute), out, Tensor(), Tensor(),
                         Conv2dParams{stride, padding, dilation, groups});
  } else {
    fill_(out, 0);
  }
  if (bias.defined()) add_(out, view(native::to(bias, compute), {1, O, 1, 1}));
  return restore_rank(native::to(out, x.dtype()), input);
}

namespace {

// The values, and the indices of `index_dtype` (undefined: none; Backend::max_pool2d says what
// int64 and uint8 ones hold).
std::tuple<Tensor, Tensor> max_pool2d_impl(const Tensor& input, Int2 kernel, std::optional<Int2> stride, Int2 padding,
                                           Int2 dilation, bool ceil_mode, std::optional<DType> index_dtype) {
  // uint8 too: the activations of statically quantized models (max is monotonic, so the pool of
  // the integers is the pool of the values).
  const Tensor x = check_nchw(input, "max_pool2d", /*allow_uint8=*/true);
  const Pool2dParams p = pool_params(x, kernel, stride, padding, dilation, ceil_mode, "max_pool2d");
  const Shape shape = pooled_shape(x, p, "max_pool2d");
  Tensor out = ops::empty_on(shape, x.dtype(), x.device());
  Tensor idx = index_dtype ? ops::empty_on(shape, *index_dtype, x.device()) : Tensor();
  if (out.numel() > 0) backend(x.device()).max_pool2d(x, out, idx, p);
  return {restore_rank(out, input), idx.defined() ? restore_rank(idx, input) : idx};
}

}  // namespace

std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, Int2 kernel, std::optional<Int2> stride,
                                                   Int2 padding, Int2 dilation, bool ceil_mode) {
  return max_pool2d_impl(input, kernel, stride, padding, dilation, ceil_mode, kInt64);
}

// Values only: nothing reads indices without a gradient (8 bytes per output not written; a
// quantized CNN's pooling was 3x slower than float32's for them).
Tensor max_pool2d(const Tensor& x, Int2 kernel, std::optional<Int2> stride, Int2 padding, Int2 dilation,
                  bool ceil_mode) {
  return std::get<0>(max_pool2d_impl(x, kernel, stride, padding, dilation, ceil_mode, std::nullopt));
}

std::tuple<Tensor, Tensor> max_pool2d_with_taps(const Tensor& input, Int2 kernel, std::optional<Int2> stride,
                                                Int2 padding, Int2 dilation, bool ceil_mode) {
  check_taps_fit_a_byte(kernel, "max_pool2d_with_taps");
  return max_pool2d_impl(input, kernel, stride, padding, dilation, ceil_mode, kUInt8);
}

Tensor avg_pool2d(const Tensor& input, Int2 kernel, std::optional<Int2> stride, Int2 padding, bool ceil_mode,
                  bool count_include_pad) {
  const Tensor x = check_nchw(input, "avg_pool2d");
  Pool2dParams p = pool_params(x, kernel, stride, padding, {1, 1}, ceil_mode, "avg_pool2d");
  p.count_include_pad = count_include_pad;
  Tensor out = ops::empty_on(pooled_shape(x, p, "avg_pool2d"), x.dtype(), x.device());
  if (out.numel() > 0) backend(x.device()).avg_pool2d(x, out, p);
  return restore_rank(out, input);
}

Tensor adaptive_avg_pool2d(const Tensor& input, Int2 output_size) {
  const Tensor x = check_nchw(input, "adaptive_avg_pool2d");
  check_positive(output_size, "adaptive_avg_pool2d", "output_size");
  EMBER_CHECK(x.size(2) > 0 && x.size(3) > 0, "adaptive_avg_pool2d: input of shape ", shape_str(input.sizes()),
              " has an empty spatial dimension");
  Tensor out = ops::empty_on({x.size(0), x.size(1), output_size[0], output_size[1]}, x.dtype(), x.device());
  if (out.numel() > 0) backend(x.device()).adaptive_avg_pool2d(x, out);
  return restore_rank(out, input);
}

std::tuple<Tensor, Tensor, Tensor> conv2d_backward(const Tensor& input, const Tensor& weight, const Tensor& grad_out,
                                                   Int2 stride, Int2 padding, Int2 dilation, int64_t groups,
                                                   std::array<bool, 3> wanted) {
  const char* op = "conv2d_backward";
  const Tensor x = check_nchw(input, op);
  // 16-bit floats as they are: cuDNN and the CPU's kernels accumulate them in float32. (The
  // kernels take one dtype: a gradient or weight of another is converted to the input's.)
  ops::check_defined(weight, op, "weight");
  const Tensor w = native::to(contiguous(weight), x.dtype());
  const Shape out_sizes = conv2d_output_shape(input, x, w, Tensor(), stride, padding, dilation, groups, op);
  ops::check_defined(grad_out, op, "grad_out");
  ops::check_same_device({&input, &grad_out}, op);
  // The gradient of conv2d's output, or of its first rows and columns: conv_transpose2d's
  // backward passes its input there, which is smaller when output_padding >= stride (allowed
  // below the dilation). The kernels read as many windows as the gradient has.
  const Shape dy_sizes =
      grad_out.dim() == 3 ? Shape{1, grad_out.size(0), grad_out.size(1), grad_out.size(2)} : grad_out.sizes();
  EMBER_CHECK(grad_out.is_floating_point() && grad_out.dim() == input.dim() && dy_sizes[0] == out_sizes[0] &&
                  dy_sizes[1] == out_sizes[1] && dy_sizes[2] >= 1 && dy_sizes[2] <= out_sizes[2] && dy_sizes[3] >= 1 &&
                  dy_sizes[3] <= out_sizes[3],
              op, ": expected a floating-point output gradient of shape ", shape_str(out_sizes),
              " (or fewer rows and columns) for input ", shape_str(input.sizes()), " and weight ",
              shape_str(weight.sizes()), ", got ", grad_out.dtype(), " ", shape_str(grad_out.sizes()));
  const Tensor dy = native::to(contiguous(input.dim() == 4 ? grad_out : unsqueeze(grad_out, 0)), x.dtype());
  Tensor gx = wanted[0] ? ops::empty_on(x.sizes(), x.dtype(), x.device()) : Tensor();
  Tensor gw = wanted[1] ? ops::empty_on(w.sizes(), w.dtype(), x.device()) : Tensor();
  Tensor gb = wanted[2] ? ops::empty_on({w.size(0)}, w.dtype(), x.device()) : Tensor();
  backend(x.device()).conv2d_backward(x, w, dy, gx, gw, gb, Conv2dParams{stride, padding, dilation, groups});
  if (gx.defined() && input.dim() == 3) gx = squeeze(gx, 0);
  return {gx, gw, gb};
}

namespace {
// The gradient buffer for a pooling backward: the input's shape, made 4-D, in grad_out's dtype,
// once grad_out is checked: floating point, of the input's rank, with its samples and channels.
Tensor pool_grad_input(const Tensor& grad_out, const Shape& input_sizes, const char* op) {
  EMBER_CHECK(input_sizes.size() == 3 || input_sizes.size() == 4, op, ": expected a 3-D or 4-D input shape, got ",
              shape_str(input_sizes));
  for (int64_t size : input_sizes) EMBER_CHECK(size >= 0, op, ": invalid input shape ", shape_str(input_sizes));
  Shape s = input_sizes;
  if (s.size() == 3) s.insert(s.begin(), 1);
  ops::check_defined(grad_out, op, "grad_out");
  const bool ok = grad_out.is_floating_point() && grad_out.dim() == static_cast<int64_t>(input_sizes.size());
  const Shape dy =
      ok && grad_out.dim() == 3 ? Shape{1, grad_out.size(0), grad_out.size(1), grad_out.size(2)} : grad_out.sizes();
  EMBER_CHECK(ok && dy[0] == s[0] && dy[1] == s[1], op,
              ": expected a floating-point output gradient with the input's samples and channels ",
              shape_str({s[0], s[1]}), " (input ", shape_str(input_sizes), "), got ", grad_out.dtype(), " ",
              shape_str(grad_out.sizes()));
  return ops::empty_on(s, grad_out.dtype(), grad_out.device());
}
}  // namespace

// Only the input's shape is needed: the pooling nodes keep that, not the input itself.
Tensor avg_pool2d_backward(const Tensor& grad_out, const Shape& input_sizes, Int2 kernel, std::optional<Int2> stride,
                           Int2 padding, bool ceil_mode, bool count_include_pad) {
  const char* op = "avg_pool2d_backward";
  Tensor gx = pool_grad_input(grad_out, input_sizes, op);
  Pool2dParams p = pool_params(gx, kernel, stride, padding, {1, 1}, ceil_mode, op);
  p.count_include_pad = count_include_pad;
  const Tensor dy = contiguous(input_sizes.size() == 3 ? unsqueeze(grad_out, 0) : grad_out);
  const Shape pooled = pooled_shape(gx, p, op);  // each gradient element is one window's
  EMBER_CHECK(dy.sizes() == pooled, op, ": expected a gradient of the pooled shape ", shape_str(pooled), " for input ",
              shape_str(input_sizes), " and kernel_size=", pair_str(kernel), ", got ", shape_str(grad_out.sizes()));
  backend(gx.device()).avg_pool2d_backward(dy, gx, p);
  return input_sizes.size() == 3 ? native::squeeze(gx, 0) : gx;
}

Tensor max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, const Shape& input_sizes) {
  Tensor gx = pool_grad_input(grad_out, input_sizes, "max_pool2d_backward");
  EMBER_CHECK(indices.dtype() == kInt64 && indices.sizes() == grad_out.sizes(),
              "max_pool2d_backward: indices must be int64 of the gradient's shape ", shape_str(grad_out.sizes()),
              ", got ", indices.dtype(), " ", shape_str(indices.sizes()));
  const bool batched = input_sizes.size() == 4;
  const Tensor dy = contiguous(batched ? grad_out : unsqueeze(grad_out, 0));
  const Tensor idx = contiguous(batched ? indices : unsqueeze(indices, 0));
  backend(gx.device()).max_pool2d_backward(dy, idx, gx, Pool2dParams{});  // positions need no window
  return batched ? gx : native::squeeze(gx, 0);
}

Tensor max_pool2d_backward_taps(const Tensor& grad_out, const Tensor& taps, const Shape& input_sizes, Int2 kernel,
                                std::optional<Int2> stride, Int2 padding, Int2 dilation, bool ceil_mode) {
  Tensor gx = pool_grad_input(grad_out, input_sizes, "max_pool2d_backward");
  const Pool2dParams p = pool_params(gx, kernel, stride, padding, dilation, ceil_mode, "max_pool2d_backward");
  check_taps_fit_a_byte(kernel, "max_pool2d_backward");
  const bool batched = input_sizes.size() == 4;
  const Tensor dy = contiguous(batched ? grad_out : unsqueeze(grad_out, 0));
  const Tensor t = contiguous(batched ? taps : unsqueeze(taps, 0));
  // A tap number means something only in the window it was counted in: the gradient's shape
  // must be the pooling's of this input with these parameters.
  const Shape pooled = pooled_shape(gx, p, "max_pool2d_backward");
  EMBER_CHECK(taps.dtype() == kUInt8 && t.sizes() == pooled && dy.sizes() == pooled,
              "max_pool2d_backward: uint8 taps and a gradient of the pooled shape ", shape_str(pooled),
              " expected for input ", shape_str(input_sizes), " and kernel_size=", pair_str(kernel), ", got ",
              taps.dtype(), " taps ", shape_str(taps.sizes()), " and a gradient ", shape_str(grad_out.sizes()));
  backend(gx.device()).max_pool2d_backward(dy, t, gx, p);
  return batched ? gx : native::squeeze(gx, 0);
}

Tensor adaptive_avg_pool2d_backward(const Tensor& grad_out, const Shape& input_sizes) {
  Tensor gx = pool_grad_input(grad_out, input_sizes, "adaptive_avg_pool2d_backward");
  const Tensor dy = contiguous(input_sizes.size() == 3 ? unsqueeze(grad_out, 0) : grad_out);
  backend(gx.device()).adaptive_avg_pool2d_backward(dy, gx);
  return input_sizes.size() == 3 ? native::squeeze(gx, 0) : gx;
}

}  // namespace ember::native
