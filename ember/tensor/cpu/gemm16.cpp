// The 16-bit GEMM on the CPU (Note [16-bit GEMM]): float16 or bfloat16 operands read directly,
// products accumulated in float32, each output rounded once.
//
// Note [16-bit GEMM]
// ~~~~~~~~~~~~~~~~~~
// AVX2 has no 16-bit arithmetic, so a bfloat16 or float16 product is computed in float32 either
// way. The question is where the widening happens. Widening whole tensors (float32 copies of A,
// B and C, Eigen's GEMM, a rounding pass back) makes a 16-bit matmul cost more than a float32
// one — three extra passes over memory — and briefly holds float32 copies of both operands,
// which is what autocast's 16-bit activations were meant to save. Here the widening is part of
// the packing and of the inner loop:
//   - B [K, N] is packed, still 16-bit, into panels of 16 columns, [K][16] each (zero past N);
//     the kernel widens 16 values per k in registers (bfloat16: a zero-extension and a shift;
//     float16: F16C's vcvtph2ps), which the FMA units never wait for.
//   - A is packed per strip of 6 rows into float32 [K][6] by the thread that uses it, so each
//     row's value is a broadcast from memory; a strip is packed once for the run of panels a
//     thread computes against it (the work is ordered strip by strip).
//   - 6 x 16 outputs stay in 12 registers across all of K (no K blocking, so no float32
//     partial sums in memory), then are scaled (alpha, beta) and rounded to 16 bits once.
// The transient memory is B's packed 16-bit copy and one float32 strip per thread; float32
// copies of the tensors are never made. The portable kernel walks the same packed layout with
// std::fma, so the vector kernels equal it bit for bit (the tests hold them to each other).
// Where the CPU has AVX-512, one register holds a panel's 16 widened values and the kernel takes
// two panels at once (6 x 32 outputs in 12 of the 32 registers): twice the multiply-adds per
// broadcast of A as AVX2's 6 x 16. The same FMAs in the same k order, so still bit for bit.
// A single row of A (a batch-1 Linear) skips the packing, which would be a whole extra pass over
// B for one row: a GEMV reads B once, 8 outputs per vector with the same FMAs in the same k
// order (gemv_avx2; memory-bound, so the AVX-512 kernel uses it too).
// Where the CPU has AVX-512 BF16 (Zen 4 and later, Cooper Lake, Sapphire Rapids), a bfloat16
// product may run on vdpbf16ps instead (backends::cpu::set_allow_bf16_dot_product, on by
// default): one instruction multiplies 16 pairs of bfloat16 values by 16 pairs and adds both
// products of each pair into a float32 lane, with no widening at all. B's panels are packed as
// pairs of rows ([K/2][16][2], the pair's two values side by side as the instruction takes
// them) and A's strips as pairs of bfloat16 ([K/2][6], one 32-bit broadcast per row): half the
// instructions of the 6 x 32 FMA kernel. Each product is exact in float32 and each addition
// rounds, as with the FMAs, but the instruction adds a pair's second product first and treats
// denormal inputs and results as zero, so its bits differ from the other kernels' (within the
// same float32 rounding bound; the tests hold it to that).
#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "ember/tensor/cpu/cpu.h"
#include "ember/tensor/cpu/cpu_backend.h"
#include "ember/tensor/cpu/gemm_tile.h"
#include "ember/tensor/half.h"
#include "ember/tensor/ops.h"
#include "ember/tensor/parallel.h"

#include "ember/tensor/cpu/vec_half.h"
#if defined(EMBER_HAVE_VEC_HALF) && defined(__FMA__)
#define EMBER_GEMM16_AVX2 1
#endif

namespace ember::cpu {
namespace {

constexpr int64_t kRows = 6;   // rows of A per tile
constexpr int64_t kCols = 16;  // columns of B per panel

template <bool kBf16>
inline float widen(uint16_t v) {
  return kBf16 ? detail::bfloat16_bits_to_float(v) : detail::half_bits_to_float(v);
}
template <bool kBf16>
inline uint16_t narrow(float v) {
  return kBf16 ? detail::float_to_bfloat16_bits(v) : detail::float_to_half_bits(v);
}

// A [M, K] with strides (s1, s2): rows m0 .. m0 + rows widened into dst [K][kRows] (the kernels
// read only the first `rows` of each k, so the rest stays unwritten).
template <bool kBf16>
void pack_strip(const uint16_t* a, int64_t s1, int64_t s2, int64_t m0, int64_t rows, int64_t K, float* dst) {
  if (s1 == 1 && s2 != 1) {  // a transpose (a weight gradient's dy^T): the strip's rows lie side by side
    for (int64_t k = 0; k < K; ++k)
      for (int64_t r = 0; r < rows; ++r) dst[k * kRows + r] = widen<kBf16>(a[k * s2 + m0 + r]);
    return;
  }
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* row = a + (m0 + r) * s1;
    for (int64_t k = 0; k < K; ++k) dst[k * kRows + r] = widen<kBf16>(row[k * s2]);
  }
}

// B [K, N] with strides (s1, s2): columns n0 .. n0 + 16 into dst [K][kCols], still 16-bit,
// zero past N.
void pack_panel(const uint16_t* b, int64_t s1, int64_t s2, int64_t n0, int64_t N, int64_t K, uint16_t* dst) {
  const int64_t cols = std::min(kCols, N - n0);
  if (cols < kCols) std::fill(dst, dst + K * kCols, uint16_t{0});
  if (s2 == 1) {
    for (int64_t k = 0; k < K; ++k) std::memcpy(dst + k * kCols, b + k * s1 + n0, sizeof(uint16_t) * cols);
    return;
  }
  for (int64_t j = 0; j < cols; ++j) {  // down each column: contiguous reads when B is a transpose
    const uint16_t* col = b + (n0 + j) * s2;
    for (int64_t k = 0; k < K; ++k) dst[k * kCols + j] = col[k * s1];
  }
}

// The dot-product kernel's layouts (pairs along K; K odd: the last pair's second value is 0).
// A [M, K]: rows m0 .. m0 + rows into dst [K2][kRows], each entry the 32-bit pair
// (a[m, 2p] in the low half, a[m, 2p + 1] in the high half), still bfloat16.
void pack_strip_pairs(const uint16_t* a, int64_t s1, int64_t s2, int64_t m0, int64_t rows, int64_t K, uint32_t* dst) {
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* row = a + (m0 + r) * s1;
    for (int64_t p = 0; 2 * p < K; ++p) {
      const uint32_t high = 2 * p + 1 < K ? row[(2 * p + 1) * s2] : 0;
      dst[p * kRows + r] = row[2 * p * s2] | high << 16;
    }
  }
}

// B [K, N]: columns n0 .. n0 + 16 into dst [K2][kCols][2]: pair p of column j is
// (b[2p, j], b[2p + 1, j]); zero past N and K.
void pack_panel_pairs(const uint16_t* b, int64_t s1, int64_t s2, int64_t n0, int64_t N, int64_t K, uint16_t* dst) {
  const int64_t cols = std::min(kCols, N - n0), K2 = (K + 1) / 2;
  if (cols < kCols || K % 2 != 0) std::fill(dst, dst + K2 * kCols * 2, uint16_t{0});
  auto at = [&](int64_t k, int64_t j) -> uint16_t& { return dst[((k / 2) * kCols + j) * 2 + k % 2]; };
  if (s2 == 1) {
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < cols; ++j) at(k, j) = b[k * s1 + n0 + j];
    return;
  }
  for (int64_t j = 0; j < cols; ++j)  // down each column: contiguous reads when B is a transpose
    for (int64_t k = 0; k < K; ++k) at(k, j) = b[k * s1 + (n0 + j) * s2];
}

using TileOut = cpu::TileOut<uint16_t>;

// out = alpha * acc + beta * out (beta == 0: out is not read, as BLAS), rounded once. One fused
// multiply-add, written out, in both kernels: the same rounding, so they agree bit for bit.
template <bool kBf16>
inline uint16_t finish(float acc, const uint16_t* old, const TileOut& t) {
  const float scaled = t.alpha * acc;
  return narrow<kBf16>(t.beta == 0 ? scaled : std::fma(t.beta, widen<kBf16>(*old), scaled));
}

template <bool kBf16>
void store_tile_scalar(const float* tile, const TileOut& t) {
  for (int64_t r = 0; r < t.rows; ++r)
    for (int64_t j = 0; j < t.cols; ++j) {
      uint16_t* out = t.c + r * t.ldc + j * t.cs;
      *out = finish<kBf16>(tile[r * kCols + j], out, t);
    }
}

// The portable kernel (and the oracle of the vector one): k ascending, one std::fma per product.
template <bool kBf16>
void tile_portable(const float* a, const uint16_t* b, int64_t K, const TileOut& t) {
  float tile[kRows * kCols] = {};
  for (int64_t k = 0; k < K; ++k)
    for (int64_t r = 0; r < t.rows; ++r)
      for (int64_t j = 0; j < kCols; ++j)
        tile[r * kCols + j] = std::fma(a[k * kRows + r], widen<kBf16>(b[k * kCols + j]), tile[r * kCols + j]);
  store_tile_scalar<kBf16>(tile, t);
}

#ifdef EMBER_GEMM16_AVX2
// Eight outputs: out = alpha acc + beta out, rounded once (finish's arithmetic, 8 at a time).
template <bool kBf16>
inline void store8_scaled(uint16_t* out, __m256 acc, const TileOut& t) {
  __m256 v = _mm256_mul_ps(_mm256_set1_ps(t.alpha), acc);
  if (t.beta != 0) v = _mm256_fmadd_ps(_mm256_set1_ps(t.beta), widen8<kBf16>(out), v);
  store8(out, narrow8<kBf16>(v));
}

template <bool kBf16>
void store_tile_avx2(const float* tile, const TileOut& t) {
  if (t.cols != kCols || t.cs != 1) return store_tile_scalar<kBf16>(tile, t);
  for (int64_t r = 0; r < t.rows; ++r)
    for (int64_t h = 0; h < kCols; h += 8)
      store8_scaled<kBf16>(t.c + r * t.ldc + h, _mm256_loadu_ps(tile + r * kCols + h), t);
}

// ROWS x 16 outputs: per k, the panel's 16 values widened into two registers, each row's value
// broadcast, two FMAs per row. ROWS is a template so the accumulators are registers.
template <bool kBf16, int ROWS>
void tile_avx2(const float* a, const uint16_t* b, int64_t K, const TileOut& t) {
  __m256 acc[ROWS][2];
#pragma GCC unroll 6
  for (int r = 0; r < ROWS; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    const __m256 b0 = widen8<kBf16>(b + k * kCols), b1 = widen8<kBf16>(b + k * kCols + 8);
#pragma GCC unroll 6
    for (int r = 0; r < ROWS; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + k * kRows + r);
      acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
    }
  }
  if (t.cols == kCols && t.cs == 1) {  // whole rows: rounded and stored from the registers
#pragma GCC unroll 6
    for (int r = 0; r < ROWS; ++r) {
      store8_scaled<kBf16>(t.c + r * t.ldc, acc[r][0], t);
      store8_scaled<kBf16>(t.c + r * t.ldc + 8, acc[r][1], t);
    }
    return;
  }
  alignas(32) float tile[kRows * kCols];
#pragma GCC unroll 6
  for (int r = 0; r < ROWS; ++r) {
    _mm256_store_ps(tile + r * kCols, acc[r][0]);
    _mm256_store_ps(tile + r * kCols + 8, acc[r][1]);
  }
  store_tile_scalar<kBf16>(tile, t);
}

// One row of A (M == 1, a batch-1 Linear): a GEMV. The tiled path packs all of B for that one
// row, a full extra pass over the weights (0.64x float32's time at batch 1). Here B is read
// once, 8 columns per vector, k in order with one FMA per product from zero and the tiles'
// rounding, so the bits are the portable kernel's. B [K, N] either has rows contiguous (s2 ==
// 1: 8 columns are one load per k) or columns contiguous (s1 == 1: a Linear's w^T; 8 x 8
// blocks transposed in registers).
struct GemvArgs {
  const float* a;  // [K], widened
  const uint16_t* b;
  int64_t s1, s2, K, N;
  uint16_t* c;  // [N] with stride cs
  int64_t cs;
  float alpha, beta;
};

// r[j] = 8 values of column n0 + j, k0 .. k0 + 8 -> r[i] = row k0 + i, columns n0 .. n0 + 8.
inline void transpose8x8_16(__m128i r[8]) {
  const __m128i t0 = _mm_unpacklo_epi16(r[0], r[1]), t1 = _mm_unpackhi_epi16(r[0], r[1]);
  const __m128i t2 = _mm_unpacklo_epi16(r[2], r[3]), t3 = _mm_unpackhi_epi16(r[2], r[3]);
  const __m128i t4 = _mm_unpacklo_epi16(r[4], r[5]), t5 = _mm_unpackhi_epi16(r[4], r[5]);
  const __m128i t6 = _mm_unpacklo_epi16(r[6], r[7]), t7 = _mm_unpackhi_epi16(r[6], r[7]);
  const __m128i u0 = _mm_unpacklo_epi32(t0, t2), u1 = _mm_unpackhi_epi32(t0, t2);
  const __m128i u2 = _mm_unpacklo_epi32(t1, t3), u3 = _mm_unpackhi_epi32(t1, t3);
  const __m128i u4 = _mm_unpacklo_epi32(t4, t6), u5 = _mm_unpackhi_epi32(t4, t6);
  const __m128i u6 = _mm_unpacklo_epi32(t5, t7), u7 = _mm_unpackhi_epi32(t5, t7);
  r[0] = _mm_unpacklo_epi64(u0, u4), r[1] = _mm_unpackhi_epi64(u0, u4);
  r[2] = _mm_unpacklo_epi64(u1, u5), r[3] = _mm_unpackhi_epi64(u1, u5);
  r[4] = _mm_unpacklo_epi64(u2, u6), r[5] = _mm_unpackhi_epi64(u2, u6);
  r[6] = _mm_unpacklo_epi64(u3, u7), r[7] = _mm_unpackhi_epi64(u3, u7);
}

// Outputs n0 .. n0 + 8 * G (all inside N): G independent accumulators, so that the FMAs'
// latency overlaps.
template <bool kBf16, int G>
void gemv_columns(const GemvArgs& g, int64_t n0) {
  __m256 acc[G];
  for (int v = 0; v < G; ++v) acc[v] = _mm256_setzero_ps();
  int64_t k = 0;
  if (g.s2 == 1) {
    for (; k < g.K; ++k) {
      const __m256 av = _mm256_broadcast_ss(g.a + k);
      for (int v = 0; v < G; ++v) acc[v] = _mm256_fmadd_ps(av, widen8<kBf16>(g.b + k * g.s1 + n0 + 8 * v), acc[v]);
    }
  } else {  // s1 == 1
    for (; k + 8 <= g.K; k += 8)
      for (int v = 0; v < G; ++v) {
        __m128i r[8];
        for (int j = 0; j < 8; ++j)
          r[j] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(g.b + (n0 + 8 * v + j) * g.s2 + k));
        transpose8x8_16(r);
        for (int i = 0; i < 8; ++i)
          acc[v] = _mm256_fmadd_ps(_mm256_broadcast_ss(g.a + k + i), widen8<kBf16>(r[i]), acc[v]);
      }
    for (; k < g.K; ++k)  // the last K % 8 rows of B, gathered
      for (int v = 0; v < G; ++v) {
        alignas(16) uint16_t row[8];
        for (int j = 0; j < 8; ++j) row[j] = g.b[(n0 + 8 * v + j) * g.s2 + k];
        acc[v] = _mm256_fmadd_ps(_mm256_broadcast_ss(g.a + k), widen8<kBf16>(row), acc[v]);
      }
  }
  alignas(32) float tile[kRows * kCols];  // store_tile_avx2's layout: one row of 16
  for (int v = 0; v < G; v += 2) {
    _mm256_store_ps(tile, acc[v]);
    const int64_t cols = v + 1 < G ? 16 : 8;
    if (v + 1 < G) _mm256_store_ps(tile + 8, acc[v + 1]);
    const TileOut t{g.c + (n0 + 8 * v) * g.cs, 0, g.cs, 1, cols, g.alpha, g.beta};
    store_tile_avx2<kBf16>(tile, t);
  }
}

template <bool kBf16>
void gemv_avx2(const GemvArgs& g) {
  constexpr int kGroup = 4;  // vectors per step: 32 outputs
  const int64_t steps = g.N / (8 * kGroup), vectors = g.N / 8;
  parallel_for(0, steps, std::max<int64_t>(1, (1 << 18) / std::max<int64_t>(1, 8 * kGroup * g.K)),
               [&](int64_t b, int64_t e) {
                 for (int64_t i = b; i < e; ++i) gemv_columns<kBf16, kGroup>(g, i * 8 * kGroup);
               });
  for (int64_t v = steps * kGroup; v < vectors; ++v) gemv_columns<kBf16, 1>(g, v * 8);
  for (int64_t n = vectors * 8; n < g.N; ++n) {  // the last N % 8 columns, as the portable kernel does them
    float acc = 0.0f;
    for (int64_t k = 0; k < g.K; ++k) acc = std::fma(g.a[k], widen<kBf16>(g.b[k * g.s1 + n * g.s2]), acc);
    const TileOut t{g.c + n * g.cs, 0, g.cs, 1, 1, g.alpha, g.beta};
    store_tile_scalar<kBf16>(&acc, t);
  }
}

// (Compiled for AVX-512 here only; called only when the CPU has it.)
#define EMBER_GEMM16_AVX512 __attribute__((target("avx512f")))
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() through their masked builtins, which its
// -Wmaybe-uninitialized reports once inlined (a false positive, GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// 16 bfloat16 or float16 values -> 16 float32 in one register, exactly.
template <bool kBf16>
EMBER_GEMM16_AVX512 inline __m512 widen16(const uint16_t* p) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  if constexpr (kBf16)
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
  else
    return _mm512_cvtph_ps(v);
}

// ROWS x (16 PANELS) float32 accumulators: zeroed, and written through the AVX2 kernel's rounding
// store (the same bits as the other kernels for the same sums).
template <int ROWS, int PANELS>
EMBER_GEMM16_AVX512 inline void zero_tiles_avx512(__m512 (&acc)[ROWS][PANELS]) {
#pragma GCC unroll 6
  for (int r = 0; r < ROWS; ++r)
#pragma GCC unroll 2
    for (int c = 0; c < PANELS; ++c) acc[r][c] = _mm512_setzero_ps();
}
template <bool kBf16, int ROWS, int PANELS>
EMBER_GEMM16_AVX512 inline void store_tiles_avx512(__m512 (&acc)[ROWS][PANELS], const TileOut* t) {
  alignas(64) float tile[kRows * kCols];
#pragma GCC unroll 2
  for (int c = 0; c < PANELS; ++c) {
#pragma GCC unroll 6
    for (int r = 0; r < ROWS; ++r) _mm512_store_ps(tile + r * kCols, acc[r][c]);
    store_tile_avx2<kBf16>(tile, t[c]);
  }
}

// ROWS x (16 PANELS) outputs: per k, each panel's 16 values widened into one register, each
// row's value broadcast, one FMA per row and panel. Panel c starts c * panel_size after b.
template <bool kBf16, int ROWS, int PANELS>
EMBER_GEMM16_AVX512 void tile_avx512(const float* a, const uint16_t* b, int64_t panel_size, int64_t K,
                                     const TileOut* t) {
  __m512 acc[ROWS][PANELS];
  zero_tiles_avx512(acc);
  for (int64_t k = 0; k < K; ++k) {
    __m512 bv[PANELS];
#pragma GCC unroll 2
    for (int c = 0; c < PANELS; ++c) bv[c] = widen16<kBf16>(b + c * panel_size + k * kCols);
#pragma GCC unroll 6
    for (int r = 0; r < ROWS; ++r) {
      const __m512 av = _mm512_set1_ps(a[k * kRows + r]);
#pragma GCC unroll 2
      for (int c = 0; c < PANELS; ++c) acc[r][c] = _mm512_fmadd_ps(av, bv[c], acc[r][c]);
    }
  }
  store_tiles_avx512<kBf16>(acc, t);
}

// ---- AVX-512 BF16: vdpbf16ps on pairs along K ----
#define EMBER_GEMM16_AVX512_BF16 __attribute__((target("avx512f,avx512bf16")))

// ROWS x (16 PANELS) outputs from K2 pairs: per pair, each panel's 16 column pairs in one
// register, each row's pair broadcast, one vdpbf16ps per row and panel.
template <int ROWS, int PANELS>
EMBER_GEMM16_AVX512_BF16 void tile_avx512_bf16(const uint32_t* a, const uint16_t* b, int64_t panel_size, int64_t K2,
                                               const TileOut* t) {
  __m512 acc[ROWS][PANELS];
  zero_tiles_avx512(acc);
  for (int64_t p = 0; p < K2; ++p) {
    __m512bh bv[PANELS];
#pragma GCC unroll 2
    for (int c = 0; c < PANELS; ++c) bv[c] = (__m512bh)_mm512_loadu_si512(b + c * panel_size + p * 2 * kCols);
#pragma GCC unroll 6
    for (int r = 0; r < ROWS; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[p * kRows + r]));
#pragma GCC unroll 2
      for (int c = 0; c < PANELS; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], av, bv[c]);
    }
  }
  store_tiles_avx512<true>(acc, t);
}
#pragma GCC diagnostic pop
#endif

// The tiled GEMM: B packed in panels, A in strips, one kernel call per tile. kPairs: the
// dot-product kernel's layouts (pairs along K, A still bfloat16) instead of [K][16] panels and
// float32 strips.
template <bool kBf16, bool kPairs>
void gemm16_tiled(Gemm16Kernel kernel, const Tensor& a, const Tensor& b, const Tensor& c, float alpha, float beta) {
  const int64_t batch = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  const int64_t panels = (N + kCols - 1) / kCols, strips = (M + kRows - 1) / kRows;
  const auto* pa = static_cast<const uint16_t*>(a.data_ptr());
  const auto* pb = static_cast<const uint16_t*>(b.data_ptr());
  auto* pc = static_cast<uint16_t*>(c.data_ptr());
  // The strides once: Tensor::stride checks its argument, too slow for a per-tile call.
  const std::array<int64_t, 3> as{a.stride(0), a.stride(1), a.stride(2)}, bs{b.stride(0), b.stride(1), b.stride(2)},
      cs{c.stride(0), c.stride(1), c.stride(2)};
  const int64_t depth = kPairs ? (K + 1) / 2 : K;  // the kernels' steps: pairs of k, or k
  using StripValue = std::conditional_t<kPairs, uint32_t, float>;
  // Every panel of every batch entry's B, packed once: [batch][panels][K][kCols] (or
  // [K2][kCols][2]), 16-bit.
  const int64_t panel_size = depth * kCols * (kPairs ? 2 : 1);
  const Tensor packed = empty({batch * panels * panel_size}, c.dtype());
  auto* pp = static_cast<uint16_t*>(packed.data_ptr());
  parallel_for(0, batch * panels, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, panel_size)),
               [&](int64_t q0, int64_t q1) {
                 for (int64_t q = q0; q < q1; ++q) {
                   const uint16_t* bq = pb + (q / panels) * bs[0];
                   if constexpr (kPairs)
                     pack_panel_pairs(bq, bs[1], bs[2], (q % panels) * kCols, N, K, pp + q * panel_size);
                   else
                     pack_panel(bq, bs[1], bs[2], (q % panels) * kCols, N, K, pp + q * panel_size);
                 }
               });

  // Work items (batch entry, strip, panel), strip by strip, so that a thread's contiguous run of
  // items packs each strip once. About 256K multiply-adds per chunk before a second thread pays.
  const int64_t items = batch * strips * panels;
  const int64_t grain = std::max<int64_t>(1, (1 << 18) / std::max<int64_t>(1, kRows * kCols * K));
  parallel_for(0, items, grain, [&](int64_t i0, int64_t i1) {
    std::vector<StripValue> strip(static_cast<size_t>(std::max<int64_t>(1, depth * kRows)));
    int64_t packed_strip = -1;  // batch * strips + strip, of what `strip` holds
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t bs = i / panels, p = i % panels;
      const int64_t n = bs / strips, m0 = (bs % strips) * kRows;
      const int64_t rows = std::min(kRows, M - m0);
      if (bs != packed_strip) {
        if constexpr (kPairs)
          pack_strip_pairs(pa + n * as[0], as[1], as[2], m0, rows, K, strip.data());
        else
          pack_strip<kBf16>(pa + n * as[0], as[1], as[2], m0, rows, K, strip.data());
        packed_strip = bs;
      }
      auto tile_out = [&](int64_t panel) {
        return TileOut{pc + n * cs[0] + m0 * cs[1] + panel * kCols * cs[2],
                       cs[1],
                       cs[2],
                       rows,
                       std::min(kCols, N - panel * kCols),
                       alpha,
                       beta};
      };
      const TileOut t = tile_out(p);
      const uint16_t* panel = pp + (n * panels + p) * panel_size;
#ifdef EMBER_GEMM16_AVX2
      if (kernel == Gemm16Kernel::Avx512 || kPairs) {
        const bool two = p + 1 < panels && i + 1 < i1;  // this panel and the next (packed right after it) at once
        const TileOut pair[2] = {t, two ? tile_out(p + 1) : t};
        with_rows<kRows>(rows, [&](auto r) {
          constexpr int R = decltype(r)::value;
          if constexpr (kPairs) {
            if (two)
              tile_avx512_bf16<R, 2>(strip.data(), panel, panel_size, depth, pair);
            else
              tile_avx512_bf16<R, 1>(strip.data(), panel, panel_size, depth, pair);
          } else {
            if (two)
              tile_avx512<kBf16, R, 2>(strip.data(), panel, panel_size, K, pair);
            else
              tile_avx512<kBf16, R, 1>(strip.data(), panel, panel_size, K, pair);
          }
        });
        if (two) ++i;
        continue;
      }
      if constexpr (!kPairs) {
        if (kernel == Gemm16Kernel::Avx2) {
          with_rows<kRows>(rows, [&](auto r) { tile_avx2<kBf16, decltype(r)::value>(strip.data(), panel, K, t); });
          continue;
        }
      }
#endif
      if constexpr (!kPairs) tile_portable<kBf16>(strip.data(), panel, K, t);
    }
  });
}

template <bool kBf16>
void gemm16_typed(Gemm16Kernel kernel, const Tensor& a, const Tensor& b, const Tensor& c, float alpha, float beta) {
  const int64_t batch = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  if (batch == 0 || M == 0 || N == 0) return;
#ifdef EMBER_GEMM16_AVX2
  if (M == 1 && kernel != Gemm16Kernel::Portable && (b.stride(1) == 1 || b.stride(2) == 1)) {
    const auto* pa = static_cast<const uint16_t*>(a.data_ptr());
    const auto* pb = static_cast<const uint16_t*>(b.data_ptr());
    auto* pc = static_cast<uint16_t*>(c.data_ptr());
    std::vector<float> row(static_cast<size_t>(K));
    for (int64_t n = 0; n < batch; ++n) {
      const uint16_t* an = pa + n * a.stride(0);
      if (a.stride(2) == 1)
        widen_run(reinterpret_cast<const std::conditional_t<kBf16, BFloat16, Half>*>(an), K, row.data());
      else
        for (int64_t k = 0; k < K; ++k) row[k] = widen<kBf16>(an[k * a.stride(2)]);
      gemv_avx2<kBf16>({row.data(), pb + n * b.stride(0), b.stride(1), b.stride(2), K, N, pc + n * c.stride(0),
                        c.stride(2), alpha, beta});
    }
    return;
  }
  if constexpr (kBf16) {
    if (kernel == Gemm16Kernel::Avx512Bf16) return gemm16_tiled<true, true>(kernel, a, b, c, alpha, beta);
  }
#endif
  gemm16_tiled<kBf16, false>(kernel, a, b, c, alpha, beta);
}

}  // namespace

const char* gemm16_kernel_name(Gemm16Kernel k) {
  switch (k) {
    case Gemm16Kernel::Portable:
      return "portable";
    case Gemm16Kernel::Avx2:
      return "avx2 (f16c widening, fma)";
    case Gemm16Kernel::Avx512:
      return "avx512 (6 x 32 tiles)";
    case Gemm16Kernel::Avx512Bf16:
      return "avx512_bf16 (vdpbf16ps, 6 x 32 tiles)";
  }
  return "?";
}

bool gemm16_kernel_available(Gemm16Kernel k) {
  switch (k) {
    case Gemm16Kernel::Portable:
      return true;
#ifdef EMBER_GEMM16_AVX2
    case Gemm16Kernel::Avx2:
      return true;
    case Gemm16Kernel::Avx512:
      return __builtin_cpu_supports("avx512f");  // (libgcc's check includes the OS saving zmm, XCR0)
    case Gemm16Kernel::Avx512Bf16:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
#endif
    default:
      return false;
  }
}

// The instruction-set switch of the direct convolutions (backends::cpu::set_max_isa,
// EMBER_MAX_CPU_ISA=avx2) holds this GEMM to AVX2 too; the dot product has its own switch.
Gemm16Kernel gemm16_kernel(DType dtype) {
  static const bool dot = gemm16_kernel_available(Gemm16Kernel::Avx512Bf16);
  static const bool avx512 = gemm16_kernel_available(Gemm16Kernel::Avx512);
  static const bool avx2 = gemm16_kernel_available(Gemm16Kernel::Avx2);
  const bool wide = backends::cpu::max_isa() == backends::cpu::Isa::avx512;
  if (dot && wide && dtype == kBFloat16 && backends::cpu::allow_bf16_dot_product()) return Gemm16Kernel::Avx512Bf16;
  if (avx512 && wide) return Gemm16Kernel::Avx512;
  return avx2 ? Gemm16Kernel::Avx2 : Gemm16Kernel::Portable;
}

// c[b] = beta * c[b] + alpha * a[b] @ b[b];  a [B, M, K], b [B, K, N], c [B, M, N], one 16-bit dtype
void gemm16_with(Gemm16Kernel kernel, const Tensor& a, const Tensor& b, const Tensor& c, double alpha, double beta) {
  EMBER_CHECK(gemm16_kernel_available(kernel), "matmul: the 16-bit GEMM's ", gemm16_kernel_name(kernel),
              " kernel is not available on this CPU or build");
  EMBER_CHECK(a.dtype() == c.dtype() && b.dtype() == c.dtype() && (c.dtype() == kFloat16 || c.dtype() == kBFloat16),
              "matmul: the 16-bit GEMM takes float16 or bfloat16 operands of one dtype, got ", a.dtype(), ", ",
              b.dtype(), " -> ", c.dtype());
  EMBER_CHECK(a.dim() == 3 && b.dim() == 3 && c.dim() == 3 && a.size(0) == b.size(0) && a.size(0) == c.size(0) &&
                  a.size(2) == b.size(1) && c.size(1) == a.size(1) && c.size(2) == b.size(2),
              "matmul: the 16-bit GEMM takes a [B, M, K], b [B, K, N], c [B, M, N], got ", shape_str(a.sizes()), ", ",
              shape_str(b.sizes()), " -> ", shape_str(c.sizes()));
  EMBER_CHECK(kernel != Gemm16Kernel::Avx512Bf16 || c.dtype() == kBFloat16, "matmul: the 16-bit GEMM's ",
              gemm16_kernel_name(kernel), " kernel takes bfloat16 only, got ", c.dtype());
  const auto al = static_cast<float>(alpha), be = static_cast<float>(beta);
  if (c.dtype() == kBFloat16)
    gemm16_typed<true>(kernel, a, b, c, al, be);
  else
    gemm16_typed<false>(kernel, a, b, c, al, be);
}

}  // namespace ember::cpu

namespace ember::backends::cpu {
namespace {
std::atomic<bool> bf16_dot_product{true};
}
void set_allow_bf16_dot_product(bool allow) { bf16_dot_product = allow; }
bool allow_bf16_dot_product() { return bf16_dot_product; }
}  // namespace ember::backends::cpu
