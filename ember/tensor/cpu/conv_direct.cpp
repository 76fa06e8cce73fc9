// The direct float32 convolution for stride 1 (Note [Direct convolution on a padded flat
// plane], conv_direct.h): padded planes, packed weights, threads, and the choice of
// instruction set. The register tiles are in conv_direct_kernels.h.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "ember/tensor/cpu/conv_algorithms.h"
#include "ember/tensor/cpu/conv_direct.h"
#include "ember/tensor/cpu/cpu.h"
#include "ember/tensor/cpu/transpose8x8.h"
#include "ember/tensor/cpu/vec_half.h"
#include "ember/tensor/ops.h"
#include "ember/tensor/parallel.h"

namespace ember::cpu {
namespace {

struct Kernels {
  const char* name;
  direct::Tiling tiling;
  void (*forward)(const direct::ForwardArgs&);
  void (*weight)(const direct::WeightArgs&);
};

bool cpu_has_avx512() {
#ifdef EMBER_HAVE_AVX512_KERNELS
  return __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}

std::atomic<backends::cpu::Isa> max_isa{[] {
  const char* env = std::getenv("EMBER_MAX_CPU_ISA");  // as oneDNN's DNNL_MAX_CPU_ISA
  return env && std::string(env) == "avx2" ? backends::cpu::Isa::avx2 : backends::cpu::Isa::avx512;
}()};

// Without x86-64-v3 (another architecture) no pass applies, and the table stays empty.
const Kernels& kernels() {
#ifdef EMBER_HAVE_DIRECT_CONV
  static const Kernels avx2{"avx2", direct::tiling_avx2(), direct::forward_avx2, direct::weight_avx2};
#else
  static const Kernels avx2{"none", {1, 1, 1, 1}, nullptr, nullptr};
#endif
#ifdef EMBER_HAVE_AVX512_KERNELS
  static const Kernels avx512{"avx512", direct::tiling_avx512(), direct::forward_avx512, direct::weight_avx512};
  if (max_isa.load(std::memory_order_relaxed) == backends::cpu::Isa::avx512 && cpu_has_avx512()) return avx512;
#endif
  return avx2;
}

// xp [C][x_plane] <- x [C][H][W] (widened to float32): each row at (h + pad_h) * Wp + pad_w,
// zeros everywhere else.
template <class T>
void pad_planes(const T* x, int64_t C, int64_t H, int64_t W, std::array<int64_t, 2> pad, const FlatPlane& pl,
                float* xp) {
  for (int64_t c = 0; c < C; ++c) {
    float* dst = xp + c * pl.x_plane;
    const T* src = x + c * H * W;
    int64_t at = 0;  // everything before `at` is written
    for (int64_t h = 0; h < H; ++h) {
      const int64_t row = (h + pad[0]) * pl.Wp + pad[1];
      std::memset(dst + at, 0, sizeof(float) * (row - at));
      widen_run(src + h * W, W, dst + row);
      at = row + W;
    }
    std::memset(dst + at, 0, sizeof(float) * (pl.x_plane - at));
  }
}

// out [N][G * Og][Ho][Wo] = the stride-1 convolution of in [N][G * Cg][H][W], weights given by
// weight(g, o, c, tap) (a float) and packed here per output-channel block. Shared by the forward
// pass and the backward-data pass (a convolution of the gradient with the flipped kernel). A
// 16-bit `out` is written through a float32 buffer per task, rounded as each task ends.
template <class T, class WeightAt>
void run_direct(const T* in, int64_t N, int64_t G, int64_t Cg, int64_t H, int64_t W, int64_t Og, int64_t kH, int64_t kW,
                std::array<int64_t, 2> pad, std::array<int64_t, 2> dil, const WeightAt& weight, const T* bias_in,
                T* out) {
  constexpr bool kFloat = std::is_same_v<T, float>;
  const Kernels& k = kernels();
  const int64_t OB = k.tiling.forward_block, taps = kH * kW, blocks = (Og + OB - 1) / OB;
  const FlatPlane pl = make_flat_plane(H, W, kH, kW, pad, dil, k.tiling.width);
  // wpk [G][blocks][Cg][taps][OB]: the OB weights one step broadcasts sit side by side.
  Tensor packed = empty({G * blocks * Cg * taps * OB}, kFloat32);
  float* wpk = static_cast<float*>(packed.data_ptr());
  for (int64_t g = 0; g < G; ++g)
    for (int64_t blk = 0; blk < blocks; ++blk)
      for (int64_t c = 0; c < Cg; ++c)
        for (int64_t t = 0; t < taps; ++t)
          for (int64_t oo = 0; oo < OB; ++oo) {
            const int64_t o = blk * OB + oo;
            *wpk++ = o < Og ? weight(g, o, c, t) : 0.0f;
          }
  wpk = static_cast<float*>(packed.data_ptr());
  std::vector<float> bias_widened(bias_in && !kFloat ? static_cast<size_t>(G * Og) : 0);
  if (!bias_widened.empty()) widen_run(bias_in, G * Og, bias_widened.data());
  const float* bias = kFloat ? reinterpret_cast<const float*>(bias_in) : (bias_in ? bias_widened.data() : nullptr);
  const int64_t outputs = Og * pl.Ho * pl.Wo;  // of one (sample, group)

  // y: where the kernel writes group g's outputs for one sample: `out` itself, or a 16-bit task's buffer.
  auto args_for = [&](int64_t g, const float* xp, float* y) {
    direct::ForwardArgs a;
    a.xp = xp;
    a.x_plane = pl.x_plane;
    a.wpk = wpk + g * blocks * Cg * taps * OB;
    a.bias = bias ? bias + g * Og : nullptr;
    a.tap_offset = pl.tap_offset.data();
    a.C = Cg, a.O = Og, a.taps = taps, a.Wp = pl.Wp, a.Ho = pl.Ho, a.Wo = pl.Wo;
    a.y = y;
    a.block_begin = 0, a.block_end = blocks;
    return a;
  };
  // A task's float32 outputs: in `out` for float32, else in `buffer`, then rounded into `out`.
  auto task_outputs = [&](int64_t i, float* buffer) {
    return kFloat ? reinterpret_cast<float*>(out + i * outputs) : buffer;
  };
  auto finish_task = [&](int64_t i, const float* buffer) {
    if constexpr (!kFloat) narrow_run(buffer, outputs, out + i * outputs);
  };
  const int64_t tasks = N * G, buffered = kFloat ? 0 : outputs;
  const int threads = parallel_threads();
  if (tasks >= threads) {  // one (sample, group) per thread, each with its own padded plane
    const int64_t per_thread = Cg * pl.x_plane + buffered;
    Tensor workspace = empty({threads, per_thread}, kFloat32);
    for_each_task(tasks, threads, [&](int64_t i, int tid) {
      float* xp = static_cast<float*>(workspace.data_ptr()) + tid * per_thread;
      float* buffer = xp + Cg * pl.x_plane;
      pad_planes(in + i * Cg * H * W, Cg, H, W, pad, pl, xp);
      k.forward(args_for(i % G, xp, task_outputs(i, buffer)));
      finish_task(i, buffer);
    });
    return;
  }
  // Fewer planes than threads (batch 1): the threads share a plane and split its blocks.
  Tensor workspace = empty({Cg * pl.x_plane + buffered}, kFloat32);
  float* xp = static_cast<float*>(workspace.data_ptr());
  float* buffer = xp + Cg * pl.x_plane;
  for (int64_t i = 0; i < tasks; ++i) {
    pad_planes(in + i * Cg * H * W, Cg, H, W, pad, pl, xp);
    parallel_for(0, blocks, 1, [&](int64_t b, int64_t e) {
      direct::ForwardArgs a = args_for(i % G, xp, task_outputs(i, buffer));
      a.block_begin = b, a.block_end = e;
      k.forward(a);
    });
    finish_task(i, buffer);
  }
}

}  // namespace

// One run of zeros between rows pads both sides when no window reaches past it.
FlatPlane make_flat_plane(int64_t H, int64_t W, int64_t kH, int64_t kW, std::array<int64_t, 2> pad,
                          std::array<int64_t, 2> dil, int64_t width) {
  auto round_up = [](int64_t x, int64_t m) { return (x + m - 1) / m * m; };
  FlatPlane pl;
  const int64_t Hp = H + 2 * pad[0];
  pl.Wp = pad[1] <= dil[1] * (kW - 1) ? W + pad[1] : W + 2 * pad[1];
  pl.Ho = Hp - dil[0] * (kH - 1);
  pl.Wo = W + 2 * pad[1] - dil[1] * (kW - 1);
  for (int64_t i = 0; i < kH; ++i)
    for (int64_t j = 0; j < kW; ++j) pl.tap_offset.push_back(i * dil[0] * pl.Wp + j * dil[1]);
  // Tiles read whole vectors up to the last output position plus the last tap's offset; a
  // multiple of 16 keeps every plane's start aligned.
  pl.x_plane = round_up(round_up(pl.Ho * pl.Wp, width) + pl.tap_offset.back(), 16);
  return pl;
}

bool direct_forward_applies(const ConvShape& s, const Conv2dParams& p) {
#ifdef EMBER_HAVE_DIRECT_CONV
  (void)s;
  return p.stride[0] == 1 && p.stride[1] == 1;
#else
  (void)s, (void)p;
  return false;
#endif
}

namespace {
// Whether the gradient [N, O, Ho, Wo] is the stride-1 convolution's whole output, as the direct
// backward kernels read it (their planes take its size from the input's).
bool whole_gradient(const ConvShape& s, const Conv2dParams& p) {
  return s.Ho == s.H + 2 * p.padding[0] - p.dilation[0] * (s.kH - 1) &&
         s.Wo == s.W + 2 * p.padding[1] - p.dilation[1] * (s.kW - 1);
}
}  // namespace

bool direct_backward_data_applies(const ConvShape& s, const Conv2dParams& p) {
  return direct_forward_applies(s, p) && whole_gradient(s, p) && p.padding[0] <= p.dilation[0] * (s.kH - 1) &&
         p.padding[1] <= p.dilation[1] * (s.kW - 1);
}

bool direct_backward_weight_applies(const ConvShape& s, const Conv2dParams& p) {
  return direct_forward_applies(s, p) && whole_gradient(s, p);
}

template <class T>
void conv2d_direct(const T* x, const T* w, const T* b, T* y, const ConvShape& s, const Conv2dParams& p) {
  const int64_t G = p.groups, Cg = s.C / G, Og = s.O / G, taps = s.kH * s.kW;
  run_direct(
      x, s.N, G, Cg, s.H, s.W, Og, s.kH, s.kW, p.padding, p.dilation,
      [&](int64_t g, int64_t o, int64_t c, int64_t t) {
        return static_cast<float>(w[((g * Og + o) * Cg + c) * taps + t]);
      },
      b, y);
}

// dx = the stride-1 convolution of dy with the kernel flipped in both axes and its two channel
// axes swapped, padded by dilation * (kernel - 1) - padding.
template <class T>
void conv2d_backward_data_direct(const T* dy, const T* w, T* dx, const ConvShape& s, const Conv2dParams& p) {
  const int64_t G = p.groups, Cg = s.C / G, Og = s.O / G, taps = s.kH * s.kW;
  const std::array<int64_t, 2> pad{p.dilation[0] * (s.kH - 1) - p.padding[0],
                                   p.dilation[1] * (s.kW - 1) - p.padding[1]};
  run_direct(
      dy, s.N, G, Og, s.Ho, s.Wo, Cg, s.kH, s.kW, pad, p.dilation,
      [&](int64_t g, int64_t c, int64_t o, int64_t t) {
        return static_cast<float>(w[((g * Og + o) * Cg + c) * taps + (taps - 1 - t)]);
      },
      static_cast<const T*>(nullptr), dx);
}

template <class T>
void conv2d_backward_weight_direct(const T* x, const T* dy, T* dw, const ConvShape& s, const Conv2dParams& p) {
  const Kernels& k = kernels();
  const int64_t G = p.groups, Cg = s.C / G, Og = s.O / G, taps = s.kH * s.kW, entries = Cg * taps;
  const int64_t OB = k.tiling.weight_block, blocks = (Og + OB - 1) / OB, Opad = blocks * OB;
  const FlatPlane pl = make_flat_plane(s.H, s.W, s.kH, s.kW, p.padding, p.dilation, k.tiling.width);
  // dyT [Ho * Wo][Opad] <- dy [Og][Ho * Wo] of one sample and group: position-major.
  const int64_t positions = pl.Ho * pl.Wo;
  auto transpose_gradient = [&](const float* d, float* dyT) {
    if (Opad > Og)
      for (int64_t j = 0; j < positions; ++j) std::memset(dyT + j * Opad + Og, 0, sizeof(float) * (Opad - Og));
#ifdef __AVX2__
    const int64_t o8 = Og / 8 * 8, j8 = positions / 8 * 8;
    for (int64_t o0 = 0; o0 < o8; o0 += 8)  // 8 x 8 blocks in registers, then the edges
      for (int64_t j0 = 0; j0 < j8; j0 += 8)
        transpose8x8_32(d + o0 * positions + j0, positions, dyT + j0 * Opad + o0, Opad);
#else
    const int64_t o8 = 0, j8 = 0;
#endif
    for (int64_t o = 0; o < Og; ++o)
      for (int64_t j = o < o8 ? j8 : 0; j < positions; ++j) dyT[j * Opad + o] = d[o * positions + j];
  };
  auto args_for = [&](const float* xp, const float* dyT, float* dwT) {
    direct::WeightArgs a;
    a.dyT = dyT, a.Ho = pl.Ho, a.Wo = pl.Wo, a.Wp = pl.Wp, a.Opad = Opad, a.xp = xp, a.x_plane = pl.x_plane;
    a.tap_offset = pl.tap_offset.data();
    a.C = Cg, a.taps = taps, a.dwT = dwT;
    a.block_begin = 0, a.block_end = blocks;
    return a;
  };
  // dwT [G][entries][Opad] per thread, summed and transposed into dw [G * Og][entries] at the end.
  const int64_t tasks = s.N * G, threads = tasks >= parallel_threads() ? parallel_threads() : 1;
  // Per thread: the padded plane, the transposed gradient and, for 16-bit dy, its widened copy.
  constexpr bool kFloat = std::is_same_v<T, float>;
  const int64_t widened = kFloat ? 0 : Og * positions;
  const int64_t dwT_size = G * entries * Opad, per_thread = Cg * pl.x_plane + positions * Opad + widened;
  Tensor ws = empty({threads, per_thread}, kFloat32);
  Tensor parts = zeros({threads, dwT_size}, kFloat32);
  float* part = static_cast<float*>(parts.data_ptr());
  auto prepare = [&](int64_t i, float* xp, float* dyT) {
    const int64_t n = i / G, g = i % G;
    pad_planes(x + i * Cg * s.H * s.W, Cg, s.H, s.W, p.padding, pl, xp);
    const T* d = dy + (n * s.O + g * Og) * positions;
    if constexpr (kFloat) {
      transpose_gradient(d, dyT);
    } else {
      float* d32 = dyT + positions * Opad;
      widen_run(d, Og * positions, d32);
      transpose_gradient(d32, dyT);
    }
  };
  if (threads > 1) {  // (sample, group) pairs over the threads, each summing into its own dwT
    for_each_task(tasks, static_cast<int>(threads), [&](int64_t i, int tid) {
      float* xp = static_cast<float*>(ws.data_ptr()) + tid * per_thread;
      float* dyT = xp + Cg * pl.x_plane;
      prepare(i, xp, dyT);
      k.weight(args_for(xp, dyT, part + tid * dwT_size + (i % G) * entries * Opad));
    });
  } else {  // fewer planes than threads: the threads split each plane's blocks (disjoint columns)
    float* xp = static_cast<float*>(ws.data_ptr());
    float* dyT = xp + Cg * pl.x_plane;
    for (int64_t i = 0; i < tasks; ++i) {
      prepare(i, xp, dyT);
      parallel_for(0, blocks, 1, [&](int64_t b, int64_t e) {
        direct::WeightArgs a = args_for(xp, dyT, part + (i % G) * entries * Opad);
        a.block_begin = b, a.block_end = e;
        k.weight(a);
      });
    }
  }
  parallel_for(0, G * Og, std::max<int64_t>(1, kGrainSize / (entries * threads)), [&](int64_t b, int64_t e) {
    for (int64_t go = b; go < e; ++go) {
      const int64_t g = go / Og, o = go % Og;
      for (int64_t ce = 0; ce < entries; ++ce) {
        float sum = 0.0f;
        for (int64_t t = 0; t < threads; ++t) sum += part[t * dwT_size + (g * entries + ce) * Opad + o];
        dw[go * entries + ce] = T(sum);
      }
    }
  });
}

#define EMBER_DIRECT_CONV_FOR(T)                                                                               \
  template void conv2d_direct<T>(const T*, const T*, const T*, T*, const ConvShape&, const Conv2dParams&);     \
  template void conv2d_backward_data_direct<T>(const T*, const T*, T*, const ConvShape&, const Conv2dParams&); \
  template void conv2d_backward_weight_direct<T>(const T*, const T*, T*, const ConvShape&, const Conv2dParams&);
EMBER_DIRECT_CONV_FOR(float)
EMBER_DIRECT_CONV_FOR(BFloat16)
EMBER_DIRECT_CONV_FOR(Half)
#undef EMBER_DIRECT_CONV_FOR

}  // namespace ember::cpu

namespace ember::backends::cpu {
void set_max_isa(Isa isa) { ember::cpu::max_isa = isa; }
Isa max_isa() { return ember::cpu::max_isa; }
const char* isa() { return ember::cpu::kernels().name; }
}  // namespace ember::backends::cpu
