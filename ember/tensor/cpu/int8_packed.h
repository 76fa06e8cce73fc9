#pragma once
// The packed int8 weight and the int8 epilogue, shared by the int8 GEMM (int8_gemm.cpp, Note
// [Int8 GEMM] there, which describes the layout) and the direct int8 convolution
// (int8_conv_direct.cpp). Internal to the CPU back end.
#include <algorithm>
#include <cmath>

#include "ember/tensor/backend.h"
#include "ember/tensor/tensor.h"

namespace ember::cpu::int8 {

constexpr int64_t kPanel = 16, kGroup = 4, kHeader = 64;

// w int8 [N, K] (contiguous) -> the packed layout (int8_gemm.cpp).
Tensor pack_weight(const Tensor& w);

struct Packed {
  int64_t n, k, n_padded, k_padded;
  const int32_t* row_sums;
  const int8_t* panels;
  // The packed weight of `n` rows of `k`, or an Error naming `op`: a tensor that pack_weight did
  // not make for this shape (another layer's, a CUDA layout, bytes loaded from elsewhere) would
  // send the kernels past its end.
  static Packed checked(const Tensor& t, int64_t n, int64_t k, const char* op) {
    EMBER_CHECK(t.dtype() == kInt8 && t.dim() == 1 && t.is_contiguous() && t.numel() >= kHeader, op,
                ": the packed weight must be int8_pack_weight's, got ", t.dtype(), " of shape ", shape_str(t.sizes()));
    const Packed w(t);
    const int64_t n_padded = (n + kPanel - 1) / kPanel * kPanel, k_padded = (k + kGroup - 1) / kGroup * kGroup;
    EMBER_CHECK(w.n == n && w.k == k && w.n_padded == n_padded && w.k_padded == k_padded &&
                    t.numel() == kHeader + 4 * n_padded + n_padded * k_padded,
                op, ": the packed weight is not one of ", n, " rows of ", k, " (its header says ", w.n, " rows of ",
                w.k, ", in ", t.numel(), " bytes)");
    return w;
  }
  explicit Packed(const Tensor& t) {
    const auto* base = static_cast<const int8_t*>(t.data_ptr());
    const auto* header = reinterpret_cast<const int64_t*>(base);
    n = header[0], k = header[1], n_padded = header[2], k_padded = header[3];
    row_sums = reinterpret_cast<const int32_t*>(base + kHeader);
    panels = base + kHeader + 4 * n_padded;
  }
  const int8_t* panel(int64_t p) const { return panels + p * k_padded * kPanel; }
};

// What the epilogue needs per call, resolved to raw pointers.
struct Epilogue {
  int32_t a_zero_point;
  const int32_t* row_sums;
  float a_scale;
  const float* w_scale;  // [1] or [N]
  bool per_channel;
  const float* bias;  // or null
  float inv_out_scale;
  int32_t out_zero_point;
  int64_t out_quant_min, out_quant_max;
  bool relu;
  DType out_dtype;
  void* out;
  int64_t ldo, n;

  // Writes one accumulated row piece: acc[j] for columns n0 .. n0 + count (the portable path,
  // and the oracle of the vector ones, which do the same arithmetic in the same order).
  void store(int64_t m, int64_t n0, int64_t count, const int32_t* acc) const {
    for (int64_t j = 0; j < count; ++j) {
      const int64_t col = n0 + j;
      const int32_t raw = acc[j] - a_zero_point * row_sums[col];
      if (out_dtype == kInt32) {
        static_cast<int32_t*>(out)[m * ldo + col] = raw;
        continue;
      }
      // One rounding, written as a fused multiply-add so that no compiler's contraction choice
      // can make the vector paths (which use vfmadd) differ from this one.
      float v = std::fma(static_cast<float>(raw), a_scale * w_scale[per_channel ? col : 0], bias ? bias[col] : 0.0f);
      // The comparisons are vmaxps/vminps's, NaN included (a NaN bias or weight scale): the ReLU
      // takes NaN to 0, the requantization's lower clamp takes it to -1e9 (so to out_quant_min).
      if (relu) v = v > 0.0f ? v : 0.0f;
      if (out_dtype == kFloat32) {
        static_cast<float*>(out)[m * ldo + col] = v;
      } else {
        float r = v * inv_out_scale;
        r = r > -1e9f ? r : -1e9f;
        r = r < 1e9f ? r : 1e9f;
        const int64_t q = static_cast<int64_t>(std::nearbyint(r)) + out_zero_point;
        static_cast<uint8_t*>(out)[m * ldo + col] = static_cast<uint8_t>(std::clamp(q, out_quant_min, out_quant_max));
      }
    }
  }
};

inline Epilogue make_epilogue(const Int8Epilogue& ep, const Packed& w, const Tensor& out) {
  Epilogue e{};
  e.a_zero_point = static_cast<int32_t>(ep.a_zero_point);
  e.row_sums = w.row_sums;
  e.a_scale = static_cast<float>(ep.a_scale);
  e.w_scale = ep.w_scale.defined() ? ep.w_scale.data_ptr<float>() : nullptr;
  e.per_channel = ep.w_scale.defined() && ep.w_scale.numel() > 1;
  e.bias = ep.bias.defined() ? ep.bias.data_ptr<float>() : nullptr;
  e.inv_out_scale = 1.0f / static_cast<float>(ep.out_scale);
  e.out_zero_point = static_cast<int32_t>(ep.out_zero_point);
  e.out_quant_min = std::max<int64_t>(ep.out_quant_min, 0);
  e.out_quant_max = std::min<int64_t>(ep.out_quant_max, 255);
  e.relu = ep.relu;
  e.out_dtype = out.dtype();
  e.out = out.data_ptr();
  e.ldo = w.n;
  e.n = w.n;
  return e;
}

}  // namespace ember::cpu::int8
