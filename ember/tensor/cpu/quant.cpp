// Affine quantization on the CPU (Note [Affine quantization]): quantize, dequantize and the fake
// quantization of QAT with its straight-through mask. float32 in, one pass, per tensor or per
// channel. The rounding is nearbyint(x * (1 / scale)) as PyTorch's CPU kernels compute it.
#include <algorithm>
#include <climits>
#include <cmath>
#include <vector>

#ifdef __AVX2__
#include <immintrin.h>
#endif

#include "ember/tensor/cpu/cpu_backend.h"
#include "ember/tensor/parallel.h"

namespace ember::cpu {
namespace {

// The channel layout of a contiguous tensor around `axis`: flat index i is in channel (i / inner) % C.
struct Channels {
  int64_t count = 1, inner = 1;
  Channels(const Tensor& x, int64_t axis) {
    if (axis < 0) return;
    count = x.size(axis);
    for (int64_t d = axis + 1; d < x.dim(); ++d) inner *= x.size(d);
  }
};

// f(i, inverse scale, zero point) for every element, in parallel.
template <class F>
void for_each_quantized(int64_t n, const QuantParams& p, const Channels& ch, const F& f) {
  const std::vector<float> scale = p.scale.to_vector<float>();  // 1 / float(scale), as PyTorch
  const int32_t* zero_point = p.zero_point.data_ptr<int32_t>();
  parallel_for(0, n, kGrainSize, [&](int64_t begin, int64_t end) {
    if (ch.count == 1) {
      const float inv = 1.0f / scale[0];
      const int32_t z = zero_point[0];
      for (int64_t i = begin; i < end; ++i) f(i, inv, z);
      return;
    }
    for (int64_t i = begin; i < end;) {  // runs of one channel
      const int64_t c = (i / ch.inner) % ch.count;
      const int64_t run_end = std::min(end, (i / ch.inner + 1) * ch.inner);
      const float inv = 1.0f / scale[c];
      const int32_t z = zero_point[c];
      for (; i < run_end; ++i) f(i, inv, z);
    }
  });
}

constexpr float kLimit = 2147483520.0f;  // the largest float below 2^31

// x * inv where an int32 holds it, before the conversion to an integer (undefined in C++ for
// inf, NaN and values out of range): clamped, and NaN taken as -kLimit, as vmaxps(NaN, -kLimit)
// and CUDA's fmaxf do in the other paths, so that every path quantizes NaN to quant_min.
inline float clamped_product(float x, float inv) {
  const float r = x * inv;
  return std::isnan(r) ? -kLimit : std::clamp(r, -kLimit, kLimit);
}

// nearbyint(x * inv) + z clamped to [lo, hi], for n contiguous elements of one channel. The
// vector path converts with vcvtps2dq, which rounds half to even as nearbyint does (the default
// rounding mode); the product is first clamped to where an int32 holds it.
template <class Q>
void quantize_run(const float* x, Q* q, int64_t n, float inv, int32_t z, int64_t lo, int64_t hi) {
  int64_t i = 0;
#ifdef __AVX2__
  const __m256 vinv = _mm256_set1_ps(inv), vmin = _mm256_set1_ps(-kLimit), vmax = _mm256_set1_ps(kLimit);
  const __m256i vz = _mm256_set1_epi32(z);
  const __m256i vlo = _mm256_set1_epi32(static_cast<int32_t>(std::max<int64_t>(lo, INT32_MIN)));
  const __m256i vhi = _mm256_set1_epi32(static_cast<int32_t>(std::min<int64_t>(hi, INT32_MAX)));
  alignas(32) int32_t block[8];
  for (; i + 8 <= n; i += 8) {
    const __m256 r = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vinv), vmin), vmax);
    __m256i v = _mm256_add_epi32(_mm256_cvtps_epi32(r), vz);  // (int32 wraps only past qint32's own range)
    v = _mm256_min_epi32(_mm256_max_epi32(v, vlo), vhi);
    _mm256_store_si256(reinterpret_cast<__m256i*>(block), v);
    for (int j = 0; j < 8; ++j) q[i + j] = static_cast<Q>(block[j]);
  }
#endif
  for (; i < n; ++i) {
    const int64_t v = static_cast<int64_t>(std::nearbyint(clamped_product(x[i], inv))) + z;
    q[i] = static_cast<Q>(std::clamp(v, lo, hi));
  }
}

template <class Q>
void quantize_as(const Tensor& x, const QuantParams& p, const Tensor& out) {
  const float* in = x.data_ptr<float>();
  Q* q = out.data_ptr<Q>();
  const std::vector<float> scale = p.scale.to_vector<float>();
  const int32_t* zero_point = p.zero_point.data_ptr<int32_t>();
  const Channels ch(x, p.axis);
  // Runs of one channel: the whole tensor per tensor, `inner` elements per channel otherwise.
  const int64_t run = ch.count == 1 ? x.numel() : ch.inner, runs = x.numel() / std::max<int64_t>(run, 1);
  if (runs <= 1) {
    parallel_for(0, x.numel(), kGrainSize, [&](int64_t b, int64_t e) {
      quantize_run(in + b, q + b, e - b, 1.0f / scale[0], zero_point[0], p.quant_min, p.quant_max);
    });
    return;
  }
  parallel_for(0, runs, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(run, 1)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t c = r % ch.count;
      quantize_run(in + r * run, q + r * run, run, 1.0f / scale[c], zero_point[c], p.quant_min, p.quant_max);
    }
  });
}

// (q - z) * scale, in the scales' own precision: per-channel scales come as float64 from
// PyTorch's observers, and PyTorch multiplies in double before rounding to float.
template <class Q, class S>
void dequantize_as(const Tensor& q, const QuantParams& p, const Tensor& out) {
  const Q* in = q.data_ptr<Q>();
  float* y = out.data_ptr<float>();
  const S* scale = p.scale.data_ptr<S>();
  const int32_t* zero_point = p.zero_point.data_ptr<int32_t>();
  const Channels ch(q, p.axis);
  parallel_for(0, q.numel(), kGrainSize, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t c = ch.count == 1 ? 0 : (i / ch.inner) % ch.count;
      y[i] = static_cast<float>(static_cast<S>(static_cast<int64_t>(in[i]) - zero_point[c]) * scale[c]);
    }
  });
}

template <class Q>
void dequantize_as(const Tensor& q, const QuantParams& p, const Tensor& out) {
  if (p.scale.dtype() == kFloat64)
    dequantize_as<Q, double>(q, p, out);
  else
    dequantize_as<Q, float>(q, p, out);
}

}  // namespace

void CpuBackend::quantize(const Tensor& x, const QuantParams& p, const Tensor& out) {
  switch (out.dtype()) {
    case kInt8:
      return quantize_as<int8_t>(x, p, out);
    case kUInt8:
      return quantize_as<uint8_t>(x, p, out);
    case kInt32:
      return quantize_as<int32_t>(x, p, out);
    default:
      throw Error(detail::concat("quantize: cannot quantize to ", out.dtype()));
  }
}

void CpuBackend::dequantize(const Tensor& q, const QuantParams& p, const Tensor& out) {
  switch (q.dtype()) {
    case kInt8:
      return dequantize_as<int8_t>(q, p, out);
    case kUInt8:
      return dequantize_as<uint8_t>(q, p, out);
    case kInt32:
      return dequantize_as<int32_t>(q, p, out);
    default:
      throw Error(detail::concat("dequantize: cannot dequantize ", q.dtype()));
  }
}

void CpuBackend::fake_quantize(const Tensor& x, const QuantParams& p, const Tensor& out, const Tensor& mask) {
  const float* in = x.data_ptr<float>();
  float* y = out.data_ptr<float>();
  bool* pass = mask.defined() ? mask.data_ptr<bool>() : nullptr;
  const std::vector<float> scale = p.scale.to_vector<float>();
  const int64_t lo = p.quant_min, hi = p.quant_max;
  const Channels ch(x, p.axis);
  for_each_quantized(x.numel(), p, ch, [&](int64_t i, float inv, int32_t z) {
    const int64_t v = static_cast<int64_t>(std::nearbyint(clamped_product(in[i], inv))) + z;
    const float s = scale[ch.count == 1 ? 0 : (i / ch.inner) % ch.count];
    y[i] = static_cast<float>(std::clamp(v, lo, hi) - z) * s;
    if (pass) pass[i] = v >= lo && v <= hi;
  });
}

}  // namespace ember::cpu
