#pragma once
// Quantized tensors: integers that stand for real numbers through a scale and a zero point (Note
// [Affine quantization], tensor/backend.h), as torch.quantize_per_tensor / quantize_per_channel
// make them. A QTensor is a plain value: the integer tensor (int_repr), its scales (float32) and
// zero points (int32), per tensor or per channel along an axis. It is for inference: no autograd
// (training sees quantization through fake_quantize_per_*_affine, which are differentiable).
//
//     QTensor q = quantize_per_tensor(x, 0.05, 10, QDType::QUInt8);
//     q.int_repr();    // uint8, same shape as x
//     q.dequantize();  // float32: (q - 10) * 0.05
#include <iosfwd>
#include <utility>

#include "ember/tensor/backend.h"
#include "ember/tensor/tensor.h"

namespace ember {

enum class QDType : int8_t { QInt8, QUInt8, QInt32 };
const char* qdtype_name(QDType t);                   // "qint8", as PyTorch names them without "torch."
DType storage_dtype(QDType t);                       // int8, uint8, int32
std::pair<int64_t, int64_t> qdtype_range(QDType t);  // the full range: [-128, 127], [0, 255], int32's

enum class QScheme : int8_t { PerTensorAffine, PerChannelAffine, PerTensorSymmetric, PerChannelSymmetric };
const char* qscheme_name(QScheme s);  // "per_tensor_affine", ...
inline bool is_per_channel(QScheme s) { return s == QScheme::PerChannelAffine || s == QScheme::PerChannelSymmetric; }
inline bool is_symmetric(QScheme s) { return s == QScheme::PerTensorSymmetric || s == QScheme::PerChannelSymmetric; }

class QTensor {
 public:
  QTensor() = default;
  // Validates: int_repr of dtype's storage type; scales float32 and zero_points int32, one
  // element for axis -1 (per tensor) or int_repr.size(axis) elements.
  QTensor(Tensor int_repr, Tensor scales, Tensor zero_points, int64_t axis, QDType dtype);

  bool defined() const { return int_repr_.defined(); }
  const Tensor& int_repr() const { return int_repr_; }
  Tensor dequantize() const;  // float32
  QDType dtype() const { return dtype_; }
  // As PyTorch reports a quantized tensor's scheme: per_tensor_affine or per_channel_affine.
  QScheme qscheme() const { return axis_ < 0 ? QScheme::PerTensorAffine : QScheme::PerChannelAffine; }
  double q_scale() const;                           // per tensor only
  int64_t q_zero_point() const;                     // per tensor only
  const Tensor& q_per_channel_scales() const;       // float32 [C], per channel only
  const Tensor& q_per_channel_zero_points() const;  // int32 [C]
  int64_t q_per_channel_axis() const;
  QuantParams params() const;  // for the kernels (quant_min/max: the dtype's full range)

  const Shape& sizes() const { return int_repr_.sizes(); }
  int64_t size(int64_t d) const { return int_repr_.size(d); }
  int64_t dim() const { return int_repr_.dim(); }
  int64_t numel() const { return int_repr_.numel(); }
  Device device() const { return int_repr_.device(); }
  // Bytes it occupies: the integers plus the scales and zero points.
  int64_t nbytes() const;

 private:
  Tensor int_repr_, scales_, zero_points_;
  int64_t axis_ = -1;
  QDType dtype_ = QDType::QUInt8;
};

// q = clamp(nearbyint(x / scale) + zero_point) over the dtype's full range; x float32.
QTensor quantize_per_tensor(const Tensor& x, double scale, int64_t zero_point, QDType dtype);
QTensor quantize_per_channel(const Tensor& x, const Tensor& scales, const Tensor& zero_points, int64_t axis,
                             QDType dtype);
inline Tensor dequantize(const QTensor& q) { return q.dequantize(); }
// As PyTorch prints one: the dequantized values, then size, dtype, scheme and parameters.
std::ostream& operator<<(std::ostream& os, const QTensor& q);

namespace native {
// The kernels' ops (Note [Affine quantization], Note [Int8 GEMM]): checks, then one kernel call.
Tensor quantize_affine(const Tensor& x, const QuantParams& p, DType out_dtype);
Tensor dequantize_affine(const Tensor& q, const QuantParams& p);
// (the round trip in float32, the straight-through mask as bool)
TensorPair fake_quantize_affine(const Tensor& x, const QuantParams& p);
Tensor int8_pack_weight(const Tensor& w);  // int8 [N, K]
// int8 [O, C, kh, kw] -> the packed weight int8_conv2d takes (columns taps, then channels)
Tensor int8_pack_conv_weight(const Tensor& w);
// a uint8 [M, K] x the packed weight [N, K] -> [M, N] of out_dtype (int32, float32, uint8)
Tensor int8_gemm(const Tensor& a, const Tensor& w_packed, int64_t n, const Int8Epilogue& e, DType out_dtype);
// input uint8 [N, C, H, W] x the weight of int8_pack_conv_weight -> [N, O, Ho, Wo] (uint8 or float32)
Tensor int8_conv2d(const Tensor& input, const Tensor& w_packed, int64_t out_channels, std::array<int64_t, 2> kernel,
                   const Conv2dParams& p, const Int8Epilogue& e, DType out_dtype);
}  // namespace native

}  // namespace ember
