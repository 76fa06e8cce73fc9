// Quantized tensors and the int8 ops (tensor/quantized.h): argument checks, then one kernel call.
#include <cmath>
#include <limits>
#include <ostream>
#include <sstream>

#include "ember/tensor/ops/internal.h"
#include "ember/tensor/quantized.h"

namespace ember {

const char* qdtype_name(QDType t) {
  switch (t) {
    case QDType::QInt8:
      return "qint8";
    case QDType::QUInt8:
      return "quint8";
    case QDType::QInt32:
      return "qint32";
  }
  return "?";
}

DType storage_dtype(QDType t) {
  switch (t) {
    case QDType::QInt8:
      return kInt8;
    case QDType::QUInt8:
      return kUInt8;
    case QDType::QInt32:
      return kInt32;
  }
  return kInt8;
}

std::pair<int64_t, int64_t> qdtype_range(QDType t) {
  switch (t) {
    case QDType::QInt8:
      return {-128, 127};
    case QDType::QUInt8:
      return {0, 255};
    case QDType::QInt32:
      return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
  }
  return {0, 0};
}

const char* qscheme_name(QScheme s) {
  switch (s) {
    case QScheme::PerTensorAffine:
      return "per_tensor_affine";
    case QScheme::PerChannelAffine:
      return "per_channel_affine";
    case QScheme::PerTensorSymmetric:
      return "per_tensor_symmetric";
    case QScheme::PerChannelSymmetric:
      return "per_channel_symmetric";
  }
  return "?";
}

namespace {
using native::contiguous;
using native::reshape;
using native::to;

// Checks x against the parameters and returns them as the kernels take them (contiguous, on x's device).
QuantParams checked(const char* op, const Tensor& x, const QuantParams& p) {
  ops::check_defined(x, op);
  ops::check_defined(p.scale, op, "scale");
  ops::check_defined(p.zero_point, op, "zero_point");
  EMBER_CHECK(p.quant_min <= p.quant_max, op, ": quant_min ", p.quant_min, " must not exceed quant_max ", p.quant_max);
  const int64_t channels = p.axis < 0 ? 1 : x.size(wrap_dim(p.axis, x.dim(), op));
  EMBER_CHECK(
      p.scale.dim() <= 1 && p.scale.numel() == channels && p.zero_point.dim() <= 1 && p.zero_point.numel() == channels,
      op, ": expects ", channels, p.axis < 0 ? " scale and zero point (per tensor)" : " scales and zero points",
      ", got scale of shape ", shape_str(p.scale.sizes()), " and zero_point of shape ", shape_str(p.zero_point.sizes()),
      " for input of shape ", shape_str(x.sizes()));
  EMBER_CHECK(p.scale.is_floating_point(), op, ": scale must be floating point, got ", p.scale.dtype());
  EMBER_CHECK(is_integral(p.zero_point.dtype(), false), op, ": zero_point must be an integer tensor, got ",
              p.zero_point.dtype());
  QuantParams out = p;
  out.axis = p.axis < 0 ? -1 : wrap_dim(p.axis, x.dim(), op);
  // float32, or float64 as PyTorch keeps per-channel scales (dequantize then multiplies in double)
  const DType scale_dtype = p.scale.dtype() == kFloat64 ? kFloat64 : kFloat32;
  out.scale = reshape(contiguous(to(p.scale, x.device(), scale_dtype, false, false)), {channels});
  out.zero_point = reshape(contiguous(to(p.zero_point, x.device(), kInt32, false, false)), {channels});
  if (out.scale.device().is_cpu()) {
    for (double s : out.scale.to_vector<double>())
      EMBER_CHECK(std::isfinite(s) && s > 0, op, ": scales must be positive and finite, got ", s);
  }
  return out;
}

}  // namespace

namespace native {

Tensor quantize_affine(const Tensor& x, const QuantParams& p, DType out_dtype) {
  const QuantParams q = checked("quantize", x, p);
  EMBER_CHECK(x.dtype() == kFloat32, "quantize: expects a float32 tensor, got ", x.dtype());
  EMBER_CHECK(out_dtype == kInt8 || out_dtype == kUInt8 || out_dtype == kInt32,
              "quantize: the integer type must be int8, uint8 or int32, got ", out_dtype);
  const Tensor in = contiguous(x);
  Tensor out = ops::empty_on(x.sizes(), out_dtype, x.device());
  if (out.numel() > 0) backend(x.device()).quantize(in, q, out);
  return out;
}

Tensor dequantize_affine(const Tensor& qx, const QuantParams& p) {
  const QuantParams q = checked("dequantize", qx, p);
  EMBER_CHECK(qx.dtype() == kInt8 || qx.dtype() == kUInt8 || qx.dtype() == kInt32,
              "dequantize: expects an int8, uint8 or int32 tensor, got ", qx.dtype());
  const Tensor in = contiguous(qx);
  Tensor out = ops::empty_on(qx.sizes(), kFloat32, qx.device());
  if (out.numel() > 0) backend(qx.device()).dequantize(in, q, out);
  return out;
}

TensorPair fake_quantize_affine(const Tensor& x, const QuantParams& p) {
  const QuantParams q = checked("fake_quantize", x, p);
  EMBER_CHECK(x.dtype() == kFloat32, "fake_quantize: expects a float32 tensor, got ", x.dtype());
  for (int64_t z : to(q.zero_point, Device(kCPU), kInt32, false, false).to_vector<int64_t>())
    EMBER_CHECK(z >= p.quant_min && z <= p.quant_max, "fake_quantize: zero_point ", z, " is outside [", p.quant_min,
                ", ", p.quant_max, "]");
  const Tensor in = contiguous(x);
  Tensor out = empty_like(in), mask = ops::empty_on(x.sizes(), kBool, x.device());
  if (out.numel() > 0) backend(x.device()).fake_quantize(in, q, out, mask);
  return {out, mask};
}

Tensor fake_quantize_per_tensor_affine(const Tensor& x, double scale, int64_t zero_point, int64_t quant_min,
                                       int64_t quant_max) {
  QuantParams p;
  p.scale = full({1}, scale, TensorOptions().dtype(kFloat32));
  p.zero_point = full({1}, zero_point, TensorOptions().dtype(kInt32));
  p.quant_min = quant_min;
  p.quant_max = quant_max;
  return std::get<0>(fake_quantize_affine(x, p));
}

Tensor fake_quantize_per_channel_affine(const Tensor& x, const Tensor& scale, const Tensor& zero_point, int64_t axis,
                                        int64_t quant_min, int64_t quant_max) {
  EMBER_CHECK(axis >= -x.dim() && axis < x.dim(), "fake_quantize_per_channel_affine: axis ", axis,
              " is out of range for shape ", shape_str(x.sizes()));
  QuantParams p{scale, zero_point, axis < 0 ? axis + x.dim() : axis, quant_min, quant_max};
  return std::get<0>(fake_quantize_affine(x, p));
}

Tensor int8_pack_weight(const Tensor& w) {
  ops::check_defined(w, "int8_pack_weight", "weight");
  EMBER_CHECK(w.dim() == 2 && w.dtype() == kInt8, "int8_pack_weight: expects an int8 [N, K] weight, got ", w.dtype(),
              " of shape ", shape_str(w.sizes()));
  return backend(w.device()).int8_pack_weight(contiguous(w));
}

// The kernels' column order: taps, then channels (each tap's channels contiguous, for im2col's
// copies and the direct kernels' four-channel words).
Tensor int8_pack_conv_weight(const Tensor& w) {
  ops::check_defined(w, "int8_pack_conv_weight", "weight");
  EMBER_CHECK(w.dim() == 4 && w.dtype() == kInt8, "int8_pack_conv_weight: expects an int8 [O, C, kh, kw] weight, got ",
              w.dtype(), " of shape ", shape_str(w.sizes()));
  return int8_pack_weight(view(contiguous(permute(w, {0, 2, 3, 1})), {w.size(0), -1}));
}

namespace {
// The epilogue's numbers (Note [Int8 GEMM]): the kernels convert them to float32 and int32 and
// clamp with them, so each must be in its range (a scale positive and finite, a zero point and
// the output's range inside uint8's). The weight scales and the bias are tensors the kernels read
// as they are: a NaN there gives what the vector kernels give (Epilogue::store).
void check_epilogue(const Int8Epilogue& e, DType out_dtype, const char* op) {
  EMBER_CHECK(e.a_zero_point >= 0 && e.a_zero_point <= 255, op, ": the input zero point ", e.a_zero_point,
              " is not a uint8");
  if (out_dtype == kInt32) return;
  EMBER_CHECK(std::isfinite(e.a_scale) && e.a_scale > 0, op, ": the input scale must be positive and finite, got ",
              e.a_scale);
  if (out_dtype != kUInt8) return;
  EMBER_CHECK(std::isfinite(e.out_scale) && e.out_scale > 0 && static_cast<float>(e.out_scale) > 0, op,
              ": the output scale must be positive and finite, got ", e.out_scale);
  EMBER_CHECK(e.out_zero_point >= 0 && e.out_zero_point <= 255, op, ": the output zero point ", e.out_zero_point,
              " is not a uint8");
  EMBER_CHECK(0 <= e.out_quant_min && e.out_quant_min <= e.out_quant_max && e.out_quant_max <= 255, op,
              ": the output range [", e.out_quant_min, ", ", e.out_quant_max, "] is not a range of uint8");
}
}  // namespace

Tensor int8_gemm(const Tensor& a, const Tensor& w_packed, int64_t n, const Int8Epilogue& e, DType out_dtype) {
  ops::check_defined(a, "int8_gemm");
  ops::check_defined(w_packed, "int8_gemm", "packed weight");
  EMBER_CHECK(a.dim() == 2 && a.dtype() == kUInt8, "int8_gemm: expects a uint8 [M, K] activation, got ", a.dtype(),
              " of shape ", shape_str(a.sizes()));
  EMBER_CHECK(out_dtype == kInt32 || out_dtype == kFloat32 || out_dtype == kUInt8,
              "int8_gemm: the output must be int32, float32 or uint8, got ", out_dtype);
  EMBER_CHECK(n >= 0, "int8_gemm: negative n ", n);
  EMBER_CHECK(out_dtype == kInt32 || (e.w_scale.defined() && e.w_scale.dtype() == kFloat32 &&
                                      (e.w_scale.numel() == 1 || e.w_scale.numel() == n)),
              "int8_gemm: a float or uint8 output needs float32 weight scales, one or ", n);
  EMBER_CHECK(!e.bias.defined() || (e.bias.dtype() == kFloat32 && e.bias.numel() == n && e.bias.is_contiguous()),
              "int8_gemm: the bias must be a contiguous float32 [", n, "]");
  check_epilogue(e, out_dtype, "int8_gemm");
  ops::check_same_device({&a, &w_packed, &e.w_scale, &e.bias}, "int8_gemm");
  const Tensor rows = a.stride(1) == 1 ? a : contiguous(a);
  Int8Epilogue ep = e;
  if (ep.w_scale.defined()) ep.w_scale = contiguous(ep.w_scale);
  Tensor out = ops::empty_on({a.size(0), n}, out_dtype, a.device());
  if (out.numel() > 0) backend(a.device()).int8_gemm(rows, w_packed, ep, out);
  return out;
}

Tensor int8_conv2d(const Tensor& input, const Tensor& w_packed, int64_t out_channels, std::array<int64_t, 2> kernel,
                   const Conv2dParams& p, const Int8Epilogue& e, DType out_dtype) {
  ops::check_defined(input, "int8_conv2d");
  EMBER_CHECK(input.dim() == 4 && input.dtype() == kUInt8, "int8_conv2d: expects a uint8 [N, C, H, W] input, got ",
              input.dtype(), " of shape ", shape_str(input.sizes()));
  EMBER_CHECK(out_dtype == kUInt8 || out_dtype == kFloat32, "int8_conv2d: the output must be uint8 or float32, got ",
              out_dtype);
  EMBER_CHECK(p.groups == 1, "int8_conv2d: groups must be 1, got ", p.groups);
  check_epilogue(e, out_dtype, "int8_conv2d");
  int64_t out_hw[2];
  for (int d = 0; d < 2; ++d) {
    EMBER_CHECK(kernel[d] > 0 && p.stride[d] > 0 && p.dilation[d] > 0 && p.padding[d] >= 0,
                "int8_conv2d: kernel, stride and dilation must be positive and padding >= 0");
    const int64_t extent = ops::size_add(ops::size_mul(p.dilation[d], kernel[d] - 1, "int8_conv2d"), 1, "int8_conv2d");
    const int64_t padded =
        ops::size_add(input.size(2 + d), ops::size_mul(2, p.padding[d], "int8_conv2d"), "int8_conv2d");
    EMBER_CHECK(padded >= extent, "int8_conv2d: the input of shape ", shape_str(input.sizes()),
                " is smaller than the kernel");
    out_hw[d] = (padded - extent) / p.stride[d] + 1;
  }
  EMBER_CHECK(out_channels >= 0, "int8_conv2d: negative out_channels ", out_channels);
  (void)ops::size_mul(ops::size_mul(input.size(1), kernel[0], "int8_conv2d"), kernel[1], "int8_conv2d");  // K
  EMBER_CHECK(!e.bias.defined() || (e.bias.dtype() == kFloat32 && e.bias.numel() == out_channels),
              "int8_conv2d: the bias must be float32 [", out_channels, "]");
  EMBER_CHECK(e.w_scale.defined() && (e.w_scale.numel() == 1 || e.w_scale.numel() == out_channels),
              "int8_conv2d: expects one weight scale or ", out_channels);
  ops::check_defined(w_packed, "int8_conv2d", "packed weight");
  ops::check_same_device({&input, &w_packed, &e.bias}, "int8_conv2d");
  Int8Epilogue ep = e;
  ep.w_scale = contiguous(to(e.w_scale, input.device(), kFloat32, false, false));
  if (ep.bias.defined()) ep.bias = contiguous(ep.bias);
  Tensor out = ops::empty_on({input.size(0), out_channels, out_hw[0], out_hw[1]}, out_dtype, input.device());
  if (out.numel() > 0) backend(input.device()).int8_conv2d(contiguous(input), w_packed, kernel, p, ep, out);
  return out;
}

}  // namespace native

// ---- QTensor ----

QTensor::QTensor(Tensor int_repr, Tensor scales, Tensor zero_points, int64_t axis, QDType dtype)
    : int_repr_(std::move(int_repr)), axis_(axis), dtype_(dtype) {
  ops::check_defined(int_repr_, "QTensor", "integer");
  EMBER_CHECK(int_repr_.dtype() == storage_dtype(dtype), "QTensor: a ", qdtype_name(dtype), " tensor stores ",
              storage_dtype(dtype), ", got ", int_repr_.dtype());
  if (axis_ >= 0 || axis_ < -1) axis_ = wrap_dim(axis_, int_repr_.dim(), "QTensor");
  const QuantParams q = checked("QTensor", int_repr_, QuantParams{scales, zero_points, axis_, 0, 0});
  scales_ = q.scale;
  zero_points_ = q.zero_point;
}

QuantParams QTensor::params() const {
  const auto [lo, hi] = qdtype_range(dtype_);
  return QuantParams{scales_, zero_points_, axis_, lo, hi};
}

Tensor QTensor::dequantize() const {
  EMBER_CHECK(defined(), "QTensor.dequantize: the tensor is undefined");
  return native::dequantize_affine(int_repr_, params());
}

double QTensor::q_scale() const {
  EMBER_CHECK(axis_ < 0, "q_scale: the tensor is quantized per channel (axis ", axis_, "); use q_per_channel_scales");
  return scales_.item<double>();
}

int64_t QTensor::q_zero_point() const {
  EMBER_CHECK(axis_ < 0, "q_zero_point: the tensor is quantized per channel (axis ", axis_,
              "); use q_per_channel_zero_points");
  return zero_points_.item<int64_t>();
}

const Tensor& QTensor::q_per_channel_scales() const {
  EMBER_CHECK(axis_ >= 0, "q_per_channel_scales: the tensor is quantized per tensor; use q_scale");
  return scales_;
}

const Tensor& QTensor::q_per_channel_zero_points() const {
  EMBER_CHECK(axis_ >= 0, "q_per_channel_zero_points: the tensor is quantized per tensor; use q_zero_point");
  return zero_points_;
}

int64_t QTensor::q_per_channel_axis() const {
  EMBER_CHECK(axis_ >= 0, "q_per_channel_axis: the tensor is quantized per tensor");
  return axis_;
}

int64_t QTensor::nbytes() const {
  if (!defined()) return 0;
  return static_cast<int64_t>(element_size(int_repr_.dtype())) * numel() + 4 * scales_.numel() +
         4 * zero_points_.numel();
}

QTensor quantize_per_tensor(const Tensor& x, double scale, int64_t zero_point, QDType dtype) {
  const auto [lo, hi] = qdtype_range(dtype);
  EMBER_CHECK(zero_point >= lo && zero_point <= hi, "quantize_per_tensor: zero_point ", zero_point, " is outside ",
              qdtype_name(dtype), "'s range [", lo, ", ", hi, "]");
  ops::check_defined(x, "quantize_per_tensor");
  const Tensor s = full({1}, scale, TensorOptions().dtype(kFloat32).device(x.device()));
  const Tensor z = full({1}, zero_point, TensorOptions().dtype(kInt32).device(x.device()));
  const QuantParams p{s, z, -1, lo, hi};
  return QTensor(native::quantize_affine(x, p, storage_dtype(dtype)), s, z, -1, dtype);
}

QTensor quantize_per_channel(const Tensor& x, const Tensor& scales, const Tensor& zero_points, int64_t axis,
                             QDType dtype) {
  ops::check_defined(x, "quantize_per_channel");
  EMBER_CHECK(axis >= -x.dim() && axis < x.dim(), "quantize_per_channel: axis ", axis, " is out of range for shape ",
              shape_str(x.sizes()));
  if (axis < 0) axis += x.dim();
  const auto [lo, hi] = qdtype_range(dtype);
  const QuantParams p{scales, zero_points, axis, lo, hi};
  return QTensor(native::quantize_affine(x, p, storage_dtype(dtype)), scales, zero_points, axis, dtype);
}

std::ostream& operator<<(std::ostream& os, const QTensor& q) {
  if (!q.defined()) return os << "[ undefined QTensor ]";
  std::ostringstream values;
  values << q.dequantize();
  std::string text = values.str();
  text.pop_back();  // the closing parenthesis
  os << text << ", size=(";
  for (int64_t i = 0; i < q.dim(); ++i) os << (i ? ", " : "") << q.size(i);
  os << (q.dim() == 1 ? ",)" : ")") << ", dtype=" << qdtype_name(q.dtype())
     << ", quantization_scheme=" << qscheme_name(q.qscheme());
  if (q.qscheme() == QScheme::PerTensorAffine) {
    os << ", scale=" << q.q_scale() << ", zero_point=" << q.q_zero_point();
  } else {
    os << ", scale=" << q.q_per_channel_scales() << ", zero_point=" << q.q_per_channel_zero_points()
       << ", axis=" << q.q_per_channel_axis();
  }
  return os << ")";
}

}  // namespace ember
