// 2-D convolution on NCHW tensors, forward and backward: im2col + GEMM (Eigen) for every shape
// and dtype, and for float32 the direct kernels (conv_direct.cpp) where they apply, chosen per
// pass by a heuristic or by benchmark mode (backends::cpu, tensor/cpu/cpu.h). All tensors
// arrive contiguous; float16/bfloat16 compute in float32.
#include <Eigen/Core>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "ember/tensor/cpu/conv_algorithms.h"
#include "ember/tensor/cpu/cpu.h"
#include "ember/tensor/cpu/cpu_backend.h"
#include "ember/tensor/ops.h"
#include "ember/tensor/parallel.h"

namespace ember::cpu {
namespace {

template <class T>
using MatR = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
template <class T>
using CMatR = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;

// col [Cg*kH*kW, Ho*Wo] <- x [Cg, H, W]: each column is one receptive field, zero-padded.
template <class T>
void im2col(const T* x, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW, int64_t Ho, int64_t Wo,
            const Conv2dParams& p, T* col) {
  for (int64_t c = 0; c < C; ++c)
    for (int64_t i = 0; i < kH; ++i)
      for (int64_t j = 0; j < kW; ++j) {
        T* row = col + ((c * kH + i) * kW + j) * Ho * Wo;
        for (int64_t oh = 0; oh < Ho; ++oh) {
          const int64_t h = oh * p.stride[0] - p.padding[0] + i * p.dilation[0];
          T* dst = row + oh * Wo;
          if (h < 0 || h >= H) {
            for (int64_t ow = 0; ow < Wo; ++ow) dst[ow] = T(0);
            continue;
          }
          const T* src = x + (c * H + h) * W;
          const int64_t w0 = j * p.dilation[1] - p.padding[1];
          for (int64_t ow = 0; ow < Wo; ++ow) {
            const int64_t w = ow * p.stride[1] + w0;
            dst[ow] = (w >= 0 && w < W) ? src[w] : T(0);
          }
        }
      }
}

// x [Cg, H, W] += col [Cg*kH*kW, Ho*Wo]: the adjoint of im2col (overlapping windows add up).
template <class T>
void col2im(const T* col, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW, int64_t Ho, int64_t Wo,
            const Conv2dParams& p, T* x) {
  for (int64_t c = 0; c < C; ++c)
    for (int64_t i = 0; i < kH; ++i)
      for (int64_t j = 0; j < kW; ++j) {
        const T* row = col + ((c * kH + i) * kW + j) * Ho * Wo;
        for (int64_t oh = 0; oh < Ho; ++oh) {
          const int64_t h = oh * p.stride[0] - p.padding[0] + i * p.dilation[0];
          if (h < 0 || h >= H) continue;
          T* dst = x + (c * H + h) * W;
          const int64_t w0 = j * p.dilation[1] - p.padding[1];
          for (int64_t ow = 0; ow < Wo; ++ow) {
            const int64_t w = ow * p.stride[1] + w0;
            if (w >= 0 && w < W) dst[w] += row[oh * Wo + ow];
          }
        }
      }
}

template <class T>
void conv2d_typed(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& out,
                  const Conv2dParams& p) {
  const int64_t N = input.size(0), C = input.size(1), H = input.size(2), W = input.size(3);
  const int64_t O = weight.size(0), kH = weight.size(2), kW = weight.size(3);
  const int64_t Ho = out.size(2), Wo = out.size(3), G = p.groups, Cg = C / G, Og = O / G;
  const int64_t rows = Cg * kH * kW, cols = Ho * Wo;
  const bool pointwise = kH == 1 && kW == 1 && p.stride[0] == 1 && p.stride[1] == 1 && p.padding[0] == 0 &&
                         p.padding[1] == 0;  // a 1x1 conv is a plain GEMM on the input
  const T* x = static_cast<const T*>(input.data_ptr());
  const T* w = static_cast<const T*>(weight.data_ptr());
  const T* b = bias.defined() ? static_cast<const T*>(bias.data_ptr()) : nullptr;
  T* y = static_cast<T*>(out.data_ptr());
  // Several samples at once: one per thread with its own column buffer, Eigen serial
  // inside. One sample: Eigen parallelizes the product itself.
  const int threads = static_cast<int>(std::min<int64_t>(parallel_threads(), N));
  Tensor workspace = pointwise ? Tensor() : empty({threads, rows * cols}, dtype_of<T>::value);
  auto sample = [&](int64_t n, int tid) {
    for (int64_t g = 0; g < G; ++g) {
      const T* xg = x + (n * C + g * Cg) * H * W;
      const T* colp = xg;
      if (!pointwise) {
        T* buf = static_cast<T*>(workspace.data_ptr()) + tid * rows * cols;
        im2col(xg, Cg, H, W, kH, kW, Ho, Wo, p, buf);
        colp = buf;
      }
      MatR<T> Y(y + (n * O + g * Og) * cols, Og, cols);
      Y.noalias() = CMatR<T>(w + g * Og * rows, Og, rows) * CMatR<T>(colp, rows, cols);
      if (b)
        for (int64_t o = 0; o < Og; ++o) Y.row(o).array() += b[g * Og + o];
    }
  };
  for_each_task(N, threads, sample);
}

// dx (zeroed by the caller), dw, db from dy; any of them may be null.
template <class T>
void conv2d_backward_typed(const Tensor& input, const Tensor& weight, const Tensor& grad_out, T* dx, T* dw, T* db,
                           const Conv2dParams& p) {
  const int64_t N = input.size(0), C = input.size(1), H = input.size(2), W = input.size(3);
  const int64_t O = weight.size(0), kH = weight.size(2), kW = weight.size(3);
  const int64_t Ho = grad_out.size(2), Wo = grad_out.size(3), G = p.groups, Cg = C / G, Og = O / G;
  const int64_t rows = Cg * kH * kW, cols = Ho * Wo;
  const bool pointwise =
      kH == 1 && kW == 1 && p.stride[0] == 1 && p.stride[1] == 1 && p.padding[0] == 0 && p.padding[1] == 0;
  const T* x = static_cast<const T*>(input.data_ptr());
  const T* w = static_cast<const T*>(weight.data_ptr());
  const T* dy = static_cast<const T*>(grad_out.data_ptr());
  // One output channel per task: the sum of its gradient over samples and positions, each row
  // by Eigen's vectorized sum (a plain `s += d[k]` loop runs at one add per add latency, and
  // took 1.7 ms of a CNN step's first layer).
  if (db)
    parallel_for(0, O, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(N * cols, 1)), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        T s = T(0);
        for (int64_t n = 0; n < N; ++n)
          s += Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>>(dy + (n * O + o) * cols, cols).sum();
        db[o] = s;
      }
    });
  if (!dx && !dw) return;
  const int threads = static_cast<int>(std::min<int64_t>(parallel_threads(), N));
  // Per thread: a column buffer and, for dw, a partial sum over its samples.
  Tensor col_ws = empty({threads, pointwise ? 1 : rows * cols}, dtype_of<T>::value);
  Tensor dw_ws = dw ? zeros({threads, O * rows}, dtype_of<T>::value) : Tensor();
  auto sample = [&](int64_t n, int tid) {
    T* col = static_cast<T*>(col_ws.data_ptr()) + tid * (pointwise ? 1 : rows * cols);
    for (int64_t g = 0; g < G; ++g) {
      const T* xg = x + (n * C + g * Cg) * H * W;
      CMatR<T> Wg(w + g * Og * rows, Og, rows);
      CMatR<T> dY(dy + (n * O + g * Og) * cols, Og, cols);
      if (dw) {
        const T* colp = xg;
        if (!pointwise) {
          im2col(xg, Cg, H, W, kH, kW, Ho, Wo, p, col);
          colp = col;
        }
        MatR<T> dWg(static_cast<T*>(dw_ws.data_ptr()) + tid * O * rows + g * Og * rows, Og, rows);
        dWg.noalias() += dY * CMatR<T>(colp, rows, cols).transpose();
      }
      if (dx) {
        T* dxg = dx + (n * C + g * Cg) * H * W;
        if (pointwise) {
          MatR<T>(dxg, rows, cols).noalias() += Wg.transpose() * dY;
        } else {
          MatR<T>(col, rows, cols).noalias() = Wg.transpose() * dY;
          col2im(col, Cg, H, W, kH, kW, Ho, Wo, p, dxg);
        }
      }
    }
  };
  for_each_task(N, threads, sample);
  if (dw) {
    const T* parts = static_cast<const T*>(dw_ws.data_ptr());
    for (int64_t k = 0; k < O * rows; ++k) {
      T s = T(0);
      for (int t = 0; t < threads; ++t) s += parts[t * O * rows + k];
      dw[k] = s;
    }
  }
}

// The algorithm of one float32 pass: forced, benchmarked, or the heuristic.
enum class Pass { forward, backward_data, backward_weight };

std::atomic<backends::cpu::ConvAlgorithm> forced_algorithm{backends::cpu::ConvAlgorithm::automatic};
std::atomic<bool> benchmark_mode{false};
struct BenchmarkCache {
  std::mutex mutex;
  std::map<std::array<int64_t, 17>, bool> direct_wins;  // key: pass, shape, parameters
  backends::cpu::BenchmarkStats stats;
};
BenchmarkCache& benchmark_cache() {
  static BenchmarkCache cache;
  return cache;
}

// The heuristic (BENCHMARKS.md, "CPU convolution"): the direct kernels wherever they apply,
// except for 1 x 1 kernels (im2col + GEMM runs them as one GEMM with no copy) and for passes
// with almost no work per output (a first layer's 1 input channel forward, its 1-channel
// input gradient): there the direct kernels' per-tile costs and partly empty register blocks
// lose to one GEMM per sample. The backward-weight pass wins on every stride-1 shape measured.
bool direct_by_heuristic(Pass pass, const ConvShape& s, const Conv2dParams& p) {
  const int64_t taps = s.kH * s.kW, Cg = s.C / p.groups, Og = s.O / p.groups;
  if (taps == 1) return false;
  switch (pass) {
    case Pass::forward:
      return Cg * taps >= 32 && Og >= 4;
    case Pass::backward_data:
      return Og * taps >= 32 && Cg >= 4;
    case Pass::backward_weight:
      return true;
  }
  return true;
}

template <class Direct, class Im2col>
void run_pass(Pass pass, const ConvShape& s, const Conv2dParams& p, bool direct_applies, const Direct& direct,
              const Im2col& im2col) {
  using backends::cpu::ConvAlgorithm;
  const ConvAlgorithm forced = forced_algorithm.load(std::memory_order_relaxed);
  if (!direct_applies || forced == ConvAlgorithm::im2col_gemm) return im2col();
  if (forced == ConvAlgorithm::direct) return direct();
  if (!benchmark_mode.load(std::memory_order_relaxed)) return direct_by_heuristic(pass, s, p) ? direct() : im2col();
  // clang-format off
  const std::array<int64_t, 17> key = {static_cast<int64_t>(pass), s.N, s.C, s.H, s.W, s.O, s.kH, s.kW, s.Ho, s.Wo,
                                       p.padding[0], p.padding[1], p.dilation[0], p.dilation[1], p.groups,
                                       p.stride[0], p.stride[1]};
  // clang-format on
  BenchmarkCache& cache = benchmark_cache();
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    auto it = cache.direct_wins.find(key);
    if (it != cache.direct_wins.end()) {
      ++cache.stats.hits;
      return it->second ? direct() : im2col();
    }
  }
  // Time each once, as cudnn.benchmark does; the last one run leaves its (equal) result.
  auto seconds = [](const auto& run) {
    const auto start = std::chrono::steady_clock::now();
    run();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const double t_im2col = seconds(im2col), t_direct = seconds(direct);
  std::lock_guard<std::mutex> lock(cache.mutex);
  cache.direct_wins[key] = t_direct <= t_im2col;
  ++cache.stats.searches;
}

ConvShape shape_of(const Tensor& input, const Tensor& weight, const Tensor& out) {
  return {input.size(0),  input.size(1),  input.size(2), input.size(3), weight.size(0),
          weight.size(2), weight.size(3), out.size(2),   out.size(3)};
}

const float* float_ptr(const Tensor& t) { return t.defined() ? static_cast<const float*>(t.data_ptr()) : nullptr; }
float* float_ptr_mut(const Tensor& t) { return static_cast<float*>(t.data_ptr()); }

void conv2d_float(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& out,
                  const Conv2dParams& p) {
  const ConvShape s = shape_of(input, weight, out);
  run_pass(
      Pass::forward, s, p, direct_forward_applies(s, p),
      [&] { conv2d_direct(float_ptr(input), float_ptr(weight), float_ptr(bias), float_ptr_mut(out), s, p); },
      [&] { conv2d_typed<float>(input, weight, bias, out, p); });
}

void conv2d_backward_float(const Tensor& input, const Tensor& weight, const Tensor& grad_out, const Tensor& grad_input,
                           const Tensor& grad_weight, const Tensor& grad_bias, const Conv2dParams& p) {
  const ConvShape s = shape_of(input, weight, grad_out);
  if (grad_bias.defined())
    conv2d_backward_typed<float>(input, weight, grad_out, nullptr, nullptr, float_ptr_mut(grad_bias), p);
  if (grad_input.defined())
    run_pass(
        Pass::backward_data, s, p, direct_backward_data_applies(s, p),
        [&] { conv2d_backward_data_direct(float_ptr(grad_out), float_ptr(weight), float_ptr_mut(grad_input), s, p); },
        [&] {
          std::memset(float_ptr_mut(grad_input), 0, sizeof(float) * grad_input.numel());
          conv2d_backward_typed<float>(input, weight, grad_out, float_ptr_mut(grad_input), nullptr, nullptr, p);
        });
  if (grad_weight.defined())
    run_pass(
        Pass::backward_weight, s, p, direct_forward_applies(s, p),
        [&] { conv2d_backward_weight_direct(float_ptr(input), float_ptr(grad_out), float_ptr_mut(grad_weight), s, p); },
        [&] {
          conv2d_backward_typed<float>(input, weight, grad_out, nullptr, float_ptr_mut(grad_weight), nullptr, p);
        });
}

}  // namespace

// input [N, C, H, W], weight [O, C/g, kH, kW], bias [O] -> out [N, O, Ho, Wo]
void CpuBackend::conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& out,
                        const Conv2dParams& p) {
  switch (input.dtype()) {
    case kFloat32:
      return conv2d_float(input, weight, bias, out, p);
    case kFloat64:
      return conv2d_typed<double>(input, weight, bias, out, p);
    case kFloat16:
    case kBFloat16: {  // compute in float32
      Tensor of = empty(out.sizes(), kFloat32);
      conv2d_float(native::to(input, kFloat32), native::to(weight, kFloat32),
                   bias.defined() ? native::to(bias, kFloat32) : bias, of, p);
      copy(of, out);
      return;
    }
    default:
      throw Error(detail::concat("conv2d: expected a floating point dtype, got ", input.dtype()));
  }
}

// The gradients of conv2d; undefined outputs are skipped.
void CpuBackend::conv2d_backward(const Tensor& input, const Tensor& weight, const Tensor& grad_out,
                                 const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                                 const Conv2dParams& p) {
  switch (input.dtype()) {
    case kFloat32:
      return conv2d_backward_float(input, weight, grad_out, grad_input, grad_weight, grad_bias, p);
    case kFloat64: {
      auto ptr = [](const Tensor& t) { return t.defined() ? static_cast<double*>(t.data_ptr()) : nullptr; };
      if (grad_input.defined()) fill(grad_input, 0);
      return conv2d_backward_typed<double>(input, weight, grad_out, ptr(grad_input), ptr(grad_weight), ptr(grad_bias),
                                           p);
    }
    default:
      throw Error(detail::concat("conv2d backward: expected float32 or float64, got ", input.dtype(),
                                 " (16-bit convolutions compute in float32 and are differentiated there)"));
  }
}

}  // namespace ember::cpu

namespace ember::backends::cpu {
void set_conv_algorithm(ConvAlgorithm algorithm) { ember::cpu::forced_algorithm = algorithm; }
ConvAlgorithm conv_algorithm() { return ember::cpu::forced_algorithm; }
void set_benchmark(bool benchmark) { ember::cpu::benchmark_mode = benchmark; }
bool benchmark() { return ember::cpu::benchmark_mode; }
BenchmarkStats benchmark_stats() {
  auto& cache = ember::cpu::benchmark_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  return cache.stats;
}
void clear_benchmark_cache() {
  auto& cache = ember::cpu::benchmark_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  cache.direct_wins.clear();
  cache.stats = {};
}
}  // namespace ember::backends::cpu
