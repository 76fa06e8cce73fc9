// 2-D convolution on NCHW tensors, forward and backward: im2col + GEMM (Eigen) for every shape
// and dtype, and for float32 the direct kernels (conv_direct.cpp) where they apply, chosen per
// pass by a heuristic or by benchmark mode (backends::cpu, tensor/cpu/cpu.h). All tensors
// arrive contiguous; float16/bfloat16 are read and written as they are and computed in float32.
#include <Eigen/Core>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <type_traits>
#include <vector>

#include "ember/tensor/cpu/conv_algorithms.h"
#include "ember/tensor/cpu/cpu.h"
#include "ember/tensor/cpu/cpu_backend.h"
#include "ember/tensor/cpu/vec_half.h"
#include "ember/tensor/ops.h"
#include "ember/tensor/parallel.h"

namespace ember::cpu {
namespace {

template <class T>
using MatR = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
template <class T>
using CMatR = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;

// col [Cg*kH*kW, Ho*Wo] <- x [Cg, H, W]: each column is one receptive field, zero-padded (and
// widened, for a 16-bit x and a float32 col).
template <class T, class Col>
void im2col(const T* x, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW, int64_t Ho, int64_t Wo,
            const Conv2dParams& p, Col* col) {
  for (int64_t c = 0; c < C; ++c)
    for (int64_t i = 0; i < kH; ++i)
      for (int64_t j = 0; j < kW; ++j) {
        Col* row = col + ((c * kH + i) * kW + j) * Ho * Wo;
        for (int64_t oh = 0; oh < Ho; ++oh) {
          const int64_t h = oh * p.stride[0] - p.padding[0] + i * p.dilation[0];
          Col* dst = row + oh * Wo;
          if (h < 0 || h >= H) {
            for (int64_t ow = 0; ow < Wo; ++ow) dst[ow] = Col(0);
            continue;
          }
          const T* src = x + (c * H + h) * W;
          const int64_t w0 = j * p.dilation[1] - p.padding[1];
          for (int64_t ow = 0; ow < Wo; ++ow) {
            const int64_t w = ow * p.stride[1] + w0;
            dst[ow] = (w >= 0 && w < W) ? static_cast<Col>(src[w]) : Col(0);
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

// c = a @ b + beta c, row-major [M, K] x [K, N] with any strides of a and b, through ember's
// float32 GEMM's AVX-512 tile (Note [float32 GEMM]) where it applies; false elsewhere (other
// dtypes, other CPUs, small products, the switch off), and the caller runs Eigen's. In a sample's task it runs on the
// task's thread.
template <class T>
bool try_gemm32(const T* a, int64_t as1, int64_t as2, const T* b, int64_t bs1, int64_t bs2, T* c, int64_t cs1,
                int64_t M, int64_t N, int64_t K, float beta) {
  if constexpr (std::is_same_v<T, float>) {
    // Only the AVX-512 tile: on AVX2 the 6 x 16 tile lost to Eigen on the DCGAN's per-sample
    // products (N = 49 output positions; K as small as 16): 7.9 s against 6.7 for 60 batches,
    // where the AVX-512 tile took 5.3 against 6.5. With the half-width last panel and the
    // transposed product it still lost, 6.9-7.3 s against 6.6-6.8 (those products themselves
    // ran even; the first layer's, 64 x 196 x 16 and 64 x 16 x 196, at 0.8x Eigen's speed).
    if (gemm32_kernel() != Gemm32Kernel::Avx512 || !gemm32_applies(M, N, K)) return false;
    gemm32({a, as1, as2, b, bs1, bs2, c, cs1, 1, M, N, K, 1.0f, beta});
    return true;
  } else {
    return false;
  }
}

// Stored as T, computed in Compute: float32 and float64 as themselves; float16 and bfloat16 in
// float32, with the receptive fields widened as im2col gathers them, the weights widened once
// (they are small), and each (sample, group)'s outputs rounded once from a float32 buffer. So no
// float32 copy of the input or of the output is made, and the bits are those of the float32 pass
// on the widened tensors, rounded.
template <class T, class Compute = T>
void conv2d_typed(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& out,
                  const Conv2dParams& p) {
  constexpr bool kWidened = !std::is_same_v<T, Compute>;
  const int64_t N = input.size(0), C_in = input.size(1), H = input.size(2), W = input.size(3);
  const int64_t O = weight.size(0), kH = weight.size(2), kW = weight.size(3);
  const int64_t Ho = out.size(2), Wo = out.size(3), G = p.groups, Cg = C_in / G, Og = O / G;
  const int64_t rows = Cg * kH * kW, cols = Ho * Wo;
  const bool pointwise = !kWidened && kH == 1 && kW == 1 && p.stride[0] == 1 && p.stride[1] == 1 && p.padding[0] == 0 &&
                         p.padding[1] == 0;  // a 1x1 conv is a plain GEMM on the input
  const T* x = static_cast<const T*>(input.data_ptr());
  const Tensor w_c = kWidened ? native::to(weight, dtype_of<Compute>::value) : weight;
  const Tensor b_c = kWidened && bias.defined() ? native::to(bias, dtype_of<Compute>::value) : bias;
  const Compute* w = static_cast<const Compute*>(w_c.data_ptr());
  const Compute* b = b_c.defined() ? static_cast<const Compute*>(b_c.data_ptr()) : nullptr;
  T* y = static_cast<T*>(out.data_ptr());
  // Several samples at once: one per thread with its own column buffer (and, widened, output
  // buffer), Eigen serial inside. One sample: Eigen parallelizes the product itself.
  const int threads = static_cast<int>(std::min<int64_t>(parallel_threads(), N));
  const int64_t per_thread = (pointwise ? 0 : rows * cols) + (kWidened ? Og * cols : 0);
  Tensor workspace = per_thread == 0 ? Tensor() : empty({threads, per_thread}, dtype_of<Compute>::value);
  auto sample = [&](int64_t n, int tid) {
    Compute* buf = per_thread == 0 ? nullptr : static_cast<Compute*>(workspace.data_ptr()) + tid * per_thread;
    for (int64_t g = 0; g < G; ++g) {
      const T* xg = x + (n * C_in + g * Cg) * H * W;
      const Compute* colp = nullptr;
      if constexpr (!kWidened) colp = xg;
      if (!pointwise) {
        im2col(xg, Cg, H, W, kH, kW, Ho, Wo, p, buf);
        colp = buf;
      }
      T* yg = y + (n * O + g * Og) * cols;
      MatR<Compute> Y(kWidened ? buf + rows * cols : reinterpret_cast<Compute*>(yg), Og, cols);
      if (!try_gemm32(w + g * Og * rows, rows, 1, colp, cols, 1, Y.data(), cols, Og, cols, rows, 0.0f))
        Y.noalias() = CMatR<Compute>(w + g * Og * rows, Og, rows) * CMatR<Compute>(colp, rows, cols);
      if (b)
        for (int64_t o = 0; o < Og; ++o) Y.row(o).array() += b[g * Og + o];
      if constexpr (kWidened) narrow_run(Y.data(), Og * cols, yg);
    }
  };
  for_each_task(N, threads, sample);
}

// dx (zeroed by the caller), dw, db from dy; any of them may be null. The input's values are
// read only for dw (dx and db need its shape alone).
template <class T>
void conv2d_backward_typed(const Tensor& input, const Tensor& weight, const Tensor& grad_out, T* dx, T* dw, T* db,
                           const Conv2dParams& p) {
  const int64_t N = input.size(0), C = input.size(1), H = input.size(2), W = input.size(3);
  const int64_t O = weight.size(0), kH = weight.size(2), kW = weight.size(3);
  const int64_t Ho = grad_out.size(2), Wo = grad_out.size(3), G = p.groups, Cg = C / G, Og = O / G;
  const int64_t rows = Cg * kH * kW, cols = Ho * Wo;
  const bool pointwise =
      kH == 1 && kW == 1 && p.stride[0] == 1 && p.stride[1] == 1 && p.padding[0] == 0 && p.padding[1] == 0;
  const T* x = dw ? static_cast<const T*>(input.data_ptr()) : nullptr;
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
      CMatR<T> Wg(w + g * Og * rows, Og, rows);
      CMatR<T> dY(dy + (n * O + g * Og) * cols, Og, cols);
      if (dw) {
        const T* xg = x + (n * C + g * Cg) * H * W;
        const T* colp = xg;
        if (!pointwise) {
          im2col(xg, Cg, H, W, kH, kW, Ho, Wo, p, col);
          colp = col;
        }
        MatR<T> dWg(static_cast<T*>(dw_ws.data_ptr()) + tid * O * rows + g * Og * rows, Og, rows);
        if (!try_gemm32(dY.data(), cols, 1, colp, 1, cols, dWg.data(), rows, Og, rows, cols, 1.0f))
          dWg.noalias() += dY * CMatR<T>(colp, rows, cols).transpose();
      }
      if (dx) {
        T* dxg = dx + (n * C + g * Cg) * H * W;
        if (pointwise) {
          if (!try_gemm32(Wg.data(), 1, rows, dY.data(), cols, 1, dxg, cols, rows, cols, Og, 1.0f))
            MatR<T>(dxg, rows, cols).noalias() += Wg.transpose() * dY;
        } else {
          if (!try_gemm32(Wg.data(), 1, rows, dY.data(), cols, 1, col, cols, rows, cols, Og, 0.0f))
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

// The algorithm of one pass: forced, benchmarked, or the heuristic.
enum class Pass { forward, backward_data, backward_weight };

std::atomic<backends::cpu::ConvAlgorithm> forced_algorithm{backends::cpu::ConvAlgorithm::automatic};
std::atomic<bool> benchmark_mode{false};
struct BenchmarkCache {
  std::mutex mutex;
  std::map<std::array<int64_t, 18>, bool> direct_wins;  // key: pass, dtype, shape, parameters
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
void run_pass(Pass pass, DType dtype, const ConvShape& s, const Conv2dParams& p, bool direct_applies,
              const Direct& direct, const Im2col& im2col) {
  using backends::cpu::ConvAlgorithm;
  const ConvAlgorithm forced = forced_algorithm.load(std::memory_order_relaxed);
  if (!direct_applies || forced == ConvAlgorithm::im2col_gemm) return im2col();
  if (forced == ConvAlgorithm::direct) return direct();
  if (!benchmark_mode.load(std::memory_order_relaxed)) return direct_by_heuristic(pass, s, p) ? direct() : im2col();
  // clang-format off
  const std::array<int64_t, 18> key = {static_cast<int64_t>(pass), static_cast<int64_t>(dtype), s.N, s.C, s.H, s.W,
                                       s.O, s.kH, s.kW, s.Ho, s.Wo, p.padding[0], p.padding[1], p.dilation[0],
                                       p.dilation[1], p.groups, p.stride[0], p.stride[1]};
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

template <class T>
const T* ptr(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.data_ptr()) : nullptr;
}
template <class T>
T* mut_ptr(const Tensor& t) {
  return static_cast<T*>(t.data_ptr());
}

// float32, and float16 / bfloat16 (autocast's activations), which both algorithms read and write
// as they are (widened as they gather, rounded once as they store: conv_algorithms.h,
// conv2d_typed).
template <class T>
void conv2d_float(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& out,
                  const Conv2dParams& p) {
  const ConvShape s = shape_of(input, weight, out);
  run_pass(
      Pass::forward, input.dtype(), s, p, direct_forward_applies(s, p),
      [&] { conv2d_direct<T>(ptr<T>(input), ptr<T>(weight), ptr<T>(bias), mut_ptr<T>(out), s, p); },
      [&] { conv2d_typed<T, float>(input, weight, bias, out, p); });
}

// db [O] = dy [N, O, Ho, Wo] summed over samples and positions in float32, rounded once; each
// row widened into a buffer and summed as the float32 path sums it.
template <class T>
void bias_gradient_widened(const Tensor& grad_out, T* db) {
  const int64_t N = grad_out.size(0), O = grad_out.size(1), cols = grad_out.size(2) * grad_out.size(3);
  const T* dy = ptr<T>(grad_out);
  parallel_for(0, O, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(N * cols, 1)), [&](int64_t b, int64_t e) {
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t o = b; o < e; ++o) {
      float s = 0.0f;
      for (int64_t n = 0; n < N; ++n) {
        widen_run(dy + (n * O + o) * cols, cols, row.data());
        s += Eigen::Map<const Eigen::VectorXf>(row.data(), cols).sum();
      }
      db[o] = T(s);
    }
  });
}

template <class T>
void conv2d_backward_float(const Tensor& input, const Tensor& weight, const Tensor& grad_out, const Tensor& grad_input,
                           const Tensor& grad_weight, const Tensor& grad_bias, const Conv2dParams& p) {
  constexpr bool kFloat = std::is_same_v<T, float>;
  const ConvShape s = shape_of(input, weight, grad_out);
  // The im2col passes of 16-bit tensors run on float32 copies, made once, of what a pass reads:
  // the input's values only for dw (the data pass takes its shape from the 16-bit tensor).
  Tensor x32, w32, dy32;
  auto as_float = [](Tensor& cached, const Tensor& t) -> const Tensor& {
    if (kFloat) return t;
    if (!cached.defined()) cached = native::to(t, kFloat32);
    return cached;
  };
  auto im2col_backward = [&](const Tensor& grad, bool data) {
    Tensor g32 = kFloat ? grad : empty(grad.sizes(), kFloat32);
    if (data && g32.numel() > 0) std::memset(g32.data_ptr(), 0, sizeof(float) * g32.numel());  // (empty: no data)
    conv2d_backward_typed<float>(data ? input : as_float(x32, input), as_float(w32, weight), as_float(dy32, grad_out),
                                 data ? mut_ptr<float>(g32) : nullptr, data ? nullptr : mut_ptr<float>(g32), nullptr,
                                 p);
    if constexpr (!kFloat) narrow_run(ptr<float>(g32), grad.numel(), mut_ptr<T>(grad));
  };
  if (grad_bias.defined()) {
    if constexpr (kFloat)
      conv2d_backward_typed<float>(input, weight, grad_out, nullptr, nullptr, mut_ptr<float>(grad_bias), p);
    else
      bias_gradient_widened<T>(grad_out, mut_ptr<T>(grad_bias));
  }
  if (grad_input.defined())
    run_pass(
        Pass::backward_data, input.dtype(), s, p, direct_backward_data_applies(s, p),
        [&] { conv2d_backward_data_direct<T>(ptr<T>(grad_out), ptr<T>(weight), mut_ptr<T>(grad_input), s, p); },
        [&] { im2col_backward(grad_input, /*data=*/true); });
  if (grad_weight.defined())
    run_pass(
        Pass::backward_weight, input.dtype(), s, p, direct_backward_weight_applies(s, p),
        [&] { conv2d_backward_weight_direct<T>(ptr<T>(input), ptr<T>(grad_out), mut_ptr<T>(grad_weight), s, p); },
        [&] { im2col_backward(grad_weight, /*data=*/false); });
}

}  // namespace

// input [N, C, H, W], weight [O, C/g, kH, kW], bias [O] -> out [N, O, Ho, Wo]
void CpuBackend::conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& out,
                        const Conv2dParams& p) {
  switch (input.dtype()) {
    case kFloat32:
      return conv2d_float<float>(input, weight, bias, out, p);
    case kFloat64:
      return conv2d_typed<double>(input, weight, bias, out, p);
    case kFloat16:
      return conv2d_float<Half>(input, weight, bias, out, p);
    case kBFloat16:
      return conv2d_float<BFloat16>(input, weight, bias, out, p);
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
      return conv2d_backward_float<float>(input, weight, grad_out, grad_input, grad_weight, grad_bias, p);
    case kFloat16:
      return conv2d_backward_float<Half>(input, weight, grad_out, grad_input, grad_weight, grad_bias, p);
    case kBFloat16:
      return conv2d_backward_float<BFloat16>(input, weight, grad_out, grad_input, grad_weight, grad_bias, p);
    case kFloat64: {
      auto ptr = [](const Tensor& t) { return t.defined() ? static_cast<double*>(t.data_ptr()) : nullptr; };
      if (grad_input.defined()) fill(grad_input, 0);
      return conv2d_backward_typed<double>(input, weight, grad_out, ptr(grad_input), ptr(grad_weight), ptr(grad_bias),
                                           p);
    }
    default:
      throw Error(detail::concat("conv2d backward: expected a floating point dtype, got ", input.dtype()));
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
