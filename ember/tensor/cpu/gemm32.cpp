// The float32 GEMM: ember's own register tiles for AVX2 and AVX-512 (Note [float32 GEMM]).
//
// Note [float32 GEMM]
// ~~~~~~~~~~~~~~~~~~~
// Eigen's GEMM is what ember started with, and it is still there (backends::cpu::
// set_own_float32_gemm(false)). It is compiled into ember for x86-64-v3, so on a CPU with
// AVX-512 it uses half the vector width the FMA units have; and on every CPU its blocking and
// per-call setup cost most on the products a transformer makes: many small ones (attention's
// heads) and activations against a Linear's w^T. These kernels use the 16-bit GEMM's layout
// (Note [16-bit GEMM]) in float32, with one register tile per instruction set:
//   - AVX2: 6 x 16 outputs in 12 of the 16 ymm registers; per k two loads of B, six broadcasts
//     of A and 12 FMAs;
//   - AVX-512: 12 x 32 outputs in 24 of the 32 zmm registers; per k two loads, twelve broadcasts
//     and 24 FMAs. Only these functions are compiled for AVX-512F (the target attribute), and
//     they run only where the CPU has it and backends::cpu::max_isa() allows it.
// In both, the FMA units, not the loads, limit a tile. Around the tile:
//   - B [K, N] is packed into panels of kCols columns, [K][kCols] each (zero past N), shared by
//     the threads, at most 2 MiB of them at a time (from the caching allocator, so a call reuses
//     the last call's block); a Linear's w^T goes through 8 x 8 register transposes. A last panel
//     of at most kCols / 2 columns is packed and run at half the width;
//   - A is packed per strip of kRows rows into [K][kRows] by the thread that uses it (rows of A
//     through the same transposes);
//   - where the tiles would waste less of themselves on c^T = b^T a^T (N = 49, a convolution's
//     7 x 7 outputs, leaves one column in the last 16-wide panel; 49 rows fill 8 strips and one
//     row), that product runs instead, its tiles stored through 8 x 8 transposes;
//   - K is cut into chunks of kDepth (an AVX-512 panel of 32 x 4096 floats is 512 KiB, within
//     L2): the first chunk applies beta, the later ones add;
//   - a product of less than ~512K multiply-adds per thread stays on one thread.
// Each output is one chain of FMAs in k order, from zero, computed by one thread, then times
// alpha and plus beta c in one FMA, on every path; so the result does not depend on the thread
// count or the orientation, and the two tiles give the same bits. It differs from
// Eigen's in the last bits (another summation order), as two BLAS libraries' do.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "ember/tensor/cpu/cpu.h"
#include "ember/tensor/cpu/cpu_backend.h"
#include "ember/tensor/cpu/gemm_tile.h"
#include "ember/tensor/cpu/transpose8x8.h"
#include "ember/tensor/ops.h"
#include "ember/tensor/parallel.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define EMBER_GEMM32_KERNELS 1
#define EMBER_GEMM32_AVX512 __attribute__((target("avx512f")))
#endif

namespace ember::cpu {
namespace {

// backends::cpu::set_own_float32_gemm; EMBER_CPU_GEMM=eigen turns it off at start.
std::atomic<bool> own_gemm{[] {
  const char* env = std::getenv("EMBER_CPU_GEMM");
  return !(env && std::string(env) == "eigen");
}()};

}  // namespace

#ifdef EMBER_GEMM32_KERNELS
namespace {

constexpr int64_t kDepth = 4096;  // K per chunk

using TileOut = cpu::TileOut<float>;

// A tile's products, already times alpha, from `out` [rows][width] to a strided output (N == 1
// maps here), element by element; beta c is fused as the vector stores fuse it, so that every
// path gives the same bits.
inline void store_strided(const float* out, int64_t width, const TileOut& t) {
  for (int64_t r = 0; r < t.rows; ++r)
    for (int64_t j = 0; j < t.cols; ++j) {
      float* o = t.c + r * t.ldc + j * t.cs;
      *o = t.beta == 0 ? out[r * width + j] : std::fma(t.beta, *o, out[r * width + j]);
    }
}

// The same to an output whose rows lie side by side (ldc == 1: the transposed product, c^T =
// b^T a^T, which gemm_tiled runs where it wastes less of the tile): each column's ROWS outputs
// are contiguous, so `out` goes through 8 x 8 transposes and each column is stored at once.
template <int ROWS>
void store_transposed(const float* out, int64_t width, const TileOut& t) {
  alignas(32) float block[8][8];  // [column][row]
  const auto rows_from = [&](auto first) {
    constexpr int kFirst = decltype(first)::value, kCount = std::min(8, ROWS - kFirst);
    const float* row[8];
    for (int i = 0; i < 8; ++i) row[i] = out + std::min(kFirst + i, ROWS - 1) * width;
    for (int64_t j0 = 0; j0 < t.cols; j0 += 8) {
      const float* const at[8] = {row[0] + j0, row[1] + j0, row[2] + j0, row[3] + j0,
                                  row[4] + j0, row[5] + j0, row[6] + j0, row[7] + j0};
      transpose8x8_32(at, &block[0][0], 8);
      for (int64_t j = j0; j < std::min(j0 + 8, t.cols); ++j) {
        float* o = t.c + j * t.cs + kFirst;
        if (t.beta == 0) {
          std::memcpy(o, block[j - j0], sizeof(float) * kCount);
        } else {
          for (int i = 0; i < kCount; ++i) o[i] = std::fma(t.beta, o[i], block[j - j0][i]);
        }
      }
    }
  };
  rows_from(std::integral_constant<int, 0>{});
  if constexpr (ROWS > 8) rows_from(std::integral_constant<int, 8>{});
}

// ROWS x (8 VECS) outputs of a [K][6] strip against a [K][8 VECS] panel: VECS = 2 is the tile,
// VECS = 1 a last panel of at most 8 columns. ROWS and VECS are template parameters so that the
// accumulators are registers. out = alpha acc + beta out (beta == 0: out is not read).
struct Avx2Tile {
  static constexpr int64_t kRows = 6, kCols = 16;

  template <int ROWS, int VECS>
  static void run(const float* a, const float* b, int64_t K, const TileOut& t) {
    constexpr int64_t kWidth = 8 * VECS;
    __m256 acc[ROWS][VECS];
#pragma GCC unroll 6
    for (int r = 0; r < ROWS; ++r)
#pragma GCC unroll 2
      for (int v = 0; v < VECS; ++v) acc[r][v] = _mm256_setzero_ps();
    for (int64_t k = 0; k < K; ++k) {
      __m256 bv[VECS];
#pragma GCC unroll 2
      for (int v = 0; v < VECS; ++v) bv[v] = _mm256_loadu_ps(b + k * kWidth + 8 * v);
#pragma GCC unroll 6
      for (int r = 0; r < ROWS; ++r) {
        const __m256 av = _mm256_broadcast_ss(a + k * kRows + r);
#pragma GCC unroll 2
        for (int v = 0; v < VECS; ++v) acc[r][v] = _mm256_fmadd_ps(av, bv[v], acc[r][v]);
      }
    }
    const __m256 alpha = _mm256_set1_ps(t.alpha), beta = _mm256_set1_ps(t.beta);
    if (t.cs == 1 && t.cols == kWidth) {  // whole rows: plain loads and stores
#pragma GCC unroll 6
      for (int r = 0; r < ROWS; ++r)
#pragma GCC unroll 2
        for (int v = 0; v < VECS; ++v) {
          float* o = t.c + r * t.ldc + 8 * v;
          __m256 x = _mm256_mul_ps(alpha, acc[r][v]);
          if (t.beta != 0) x = _mm256_fmadd_ps(beta, _mm256_loadu_ps(o), x);
          _mm256_storeu_ps(o, x);
        }
      return;
    }
    alignas(32) float out[ROWS * kWidth];  // the panel's last columns, or a strided output
    for (int r = 0; r < ROWS; ++r)
      for (int v = 0; v < VECS; ++v) _mm256_store_ps(out + r * kWidth + 8 * v, _mm256_mul_ps(alpha, acc[r][v]));
    if (t.ldc == 1)
      store_transposed<ROWS>(out, kWidth, t);
    else
      store_strided(out, kWidth, t);
  }
};

// ROWS x (16 VECS) outputs of a [K][12] strip against a [K][16 VECS] panel, as Avx2Tile.
struct Avx512Tile {
  static constexpr int64_t kRows = 12, kCols = 32;

  template <int ROWS, int VECS>
  EMBER_GEMM32_AVX512 static void run(const float* a, const float* b, int64_t K, const TileOut& t) {
    constexpr int64_t kWidth = 16 * VECS;
    __m512 acc[ROWS][VECS];
#pragma GCC unroll 12
    for (int r = 0; r < ROWS; ++r)
#pragma GCC unroll 2
      for (int v = 0; v < VECS; ++v) acc[r][v] = _mm512_setzero_ps();
    for (int64_t k = 0; k < K; ++k) {
      __m512 bv[VECS];
#pragma GCC unroll 2
      for (int v = 0; v < VECS; ++v) bv[v] = _mm512_loadu_ps(b + k * kWidth + 16 * v);
#pragma GCC unroll 12
      for (int r = 0; r < ROWS; ++r) {
        const __m512 av = _mm512_set1_ps(a[k * kRows + r]);
#pragma GCC unroll 2
        for (int v = 0; v < VECS; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
      }
    }
    const __m512 alpha = _mm512_set1_ps(t.alpha), beta = _mm512_set1_ps(t.beta);
    if (t.cs == 1) {  // masked loads and stores cost the same as plain ones here
      const auto mask = [](int64_t n) { return static_cast<__mmask16>(n >= 16 ? 0xFFFF : n <= 0 ? 0 : (1u << n) - 1); };
#pragma GCC unroll 12
      for (int r = 0; r < ROWS; ++r)
#pragma GCC unroll 2
        for (int v = 0; v < VECS; ++v) {
          float* o = t.c + r * t.ldc + 16 * v;
          const __mmask16 m = mask(t.cols - 16 * v);
          __m512 x = _mm512_mul_ps(alpha, acc[r][v]);
          if (t.beta != 0) x = _mm512_fmadd_ps(beta, _mm512_maskz_loadu_ps(m, o), x);
          _mm512_mask_storeu_ps(o, m, x);
        }
      return;
    }
    alignas(64) float out[ROWS * kWidth];
    for (int r = 0; r < ROWS; ++r)
      for (int v = 0; v < VECS; ++v) _mm512_store_ps(out + r * kWidth + 16 * v, _mm512_mul_ps(alpha, acc[r][v]));
    if (t.ldc == 1)
      store_transposed<ROWS>(out, kWidth, t);
    else
      store_strided(out, kWidth, t);
  }
};

// B [K, N] with strides (s1, s2), rows k0 .. k0 + depth and columns n0 .. n0 + COLS into
// dst [depth][COLS], zero past N.
template <int64_t COLS>
void pack_panel(const float* b, int64_t s1, int64_t s2, int64_t k0, int64_t depth, int64_t n0, int64_t N, float* dst) {
  const int64_t cols = std::min(COLS, N - n0);
  if (cols < COLS) std::fill(dst, dst + depth * COLS, 0.0f);
  if (s2 == 1) {  // rows of B (a fixed size inlines as vector moves; a call per 64 bytes cost 7 % of a step)
    if (cols == COLS)
      for (int64_t k = 0; k < depth; ++k) std::memcpy(dst + k * COLS, b + (k0 + k) * s1 + n0, sizeof(float) * COLS);
    else
      for (int64_t k = 0; k < depth; ++k) std::memcpy(dst + k * COLS, b + (k0 + k) * s1 + n0, sizeof(float) * cols);
    return;
  }
  // Down the columns. B a transpose (a Linear's w^T, s1 == 1): 8 x 8 blocks transposed in
  // registers, as the transposing copy does; then the edges, and other strides, one by one.
  int64_t k_blocks = 0, j_blocks = 0;
  if (s1 == 1) {
    k_blocks = depth / 8 * 8, j_blocks = cols / 8 * 8;
    for (int64_t j = 0; j < j_blocks; j += 8)
      for (int64_t k = 0; k < k_blocks; k += 8)
        transpose8x8_32(b + (n0 + j) * s2 + k0 + k, s2, dst + k * COLS + j, COLS);
  }
  for (int64_t j = 0; j < cols; ++j) {
    const float* col = b + (n0 + j) * s2 + k0 * s1;
    for (int64_t k = j < j_blocks ? k_blocks : 0; k < depth; ++k) dst[k * COLS + j] = col[k * s1];
  }
}

// A [M, K] with strides (s1, s2), rows m0 .. m0 + rows and columns k0 .. k0 + depth into
// dst [depth][ROWS] (the kernel reads only the first `rows` of each k).
template <int64_t ROWS>
void pack_strip(const float* a, int64_t s1, int64_t s2, int64_t m0, int64_t rows, int64_t k0, int64_t depth,
                float* dst) {
  if (s1 == 1 && s2 != 1) {  // a transpose (a weight gradient's dy^T): the strip's rows lie side by side
    if (rows == ROWS)
      for (int64_t k = 0; k < depth; ++k) std::memcpy(dst + k * ROWS, a + (k0 + k) * s2 + m0, sizeof(float) * ROWS);
    else
      for (int64_t k = 0; k < depth; ++k) std::memcpy(dst + k * ROWS, a + (k0 + k) * s2 + m0, sizeof(float) * rows);
    return;
  }
  int64_t k_blocks = 0;
  if (s2 == 1) {  // rows of A: eight rows by eight k at a time, transposed in registers
    k_blocks = depth / 8 * 8;
    alignas(32) float block[8][8];
    for (int64_t r0 = 0; r0 < rows; r0 += 8) {
      const int64_t n = std::min<int64_t>(8, rows - r0);
      const float* row[8];
      for (int64_t i = 0; i < 8; ++i) row[i] = a + (m0 + r0 + std::min(i, n - 1)) * s1 + k0;  // past the strip: repeats
      for (int64_t k = 0; k < k_blocks; k += 8) {
        const float* const at[8] = {row[0] + k, row[1] + k, row[2] + k, row[3] + k,
                                    row[4] + k, row[5] + k, row[6] + k, row[7] + k};
        if (n == 8 && r0 + 8 <= ROWS - (ROWS % 8)) {  // whole: straight into the strip
          transpose8x8_32(at, dst + k * ROWS + r0, ROWS);
          continue;
        }
        transpose8x8_32(at, &block[0][0], 8);  // else each k's first n: a strip's last rows at a fixed size
        constexpr int64_t kLast = ROWS % 8;    // (a call per 24 bytes was 12 % of a 6-row strip's product)
        if (n == kLast && kLast != 0)
          for (int64_t i = 0; i < 8; ++i) std::memcpy(dst + (k + i) * ROWS + r0, block[i], sizeof(float) * kLast);
        else
          for (int64_t i = 0; i < 8; ++i) std::memcpy(dst + (k + i) * ROWS + r0, block[i], sizeof(float) * n);
      }
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = a + (m0 + r) * s1 + k0 * s2;
    for (int64_t k = k_blocks; k < depth; ++k) dst[k * ROWS + r] = row[k * s2];
  }
}

// Whether the last of N's panels of C columns holds at most C / 2 of them, and so is packed and
// run at half the width (the driver and the cost model below both ask).
constexpr bool half_width_last(int64_t N, int64_t C) { return (N - 1) % C + 1 <= C / 2; }

// The tiled product with one register tile: for each chunk of K and block of panels, the
// panels packed by all threads, then each task one strip of A against a run of them. A last
// panel of at most half the tile's width is packed at that width and run by the half-width tile
// (N = 49, a 7 x 7 convolution's outputs, would otherwise compute 64 columns for 49 on AVX2).
template <class Tile>
void gemm_tiled(const Gemm32Args& g) {
  constexpr int64_t R = Tile::kRows, C = Tile::kCols;
  const int64_t panels = (g.N + C - 1) / C, strips = (g.M + R - 1) / R;
  const bool narrow_last = half_width_last(g.N, C);
  // At most 2 MiB of packed panels at a time (Eigen's GEMM packs in blocks too), from the caching
  // allocator, so that a call reuses the last call's block and a large B adds no large copy.
  const int64_t block = std::clamp<int64_t>((int64_t{1} << 19) / (std::min(kDepth, g.K) * C), 1, panels);
  const Tensor packed = empty({block * std::min(kDepth, g.K) * C}, kFloat32);
  float* pp = static_cast<float*>(packed.data_ptr());
  for (int64_t k0 = 0; k0 < g.K; k0 += kDepth) {
    const int64_t depth = std::min(kDepth, g.K - k0);
    const float beta = k0 == 0 ? g.beta : 1.0f;
    for (int64_t p0 = 0; p0 < panels; p0 += block) {
      const int64_t count = std::min(block, panels - p0);
      const auto narrow = [&](int64_t p) { return narrow_last && p0 + p == panels - 1; };
      parallel_for(0, count, std::max<int64_t>(1, kGrainSize / (depth * C)), [&](int64_t pb, int64_t pe) {
        for (int64_t p = pb; p < pe; ++p) {
          if (narrow(p))
            pack_panel<C / 2>(g.b, g.bs1, g.bs2, k0, depth, (p0 + p) * C, g.N, pp + p * depth * C);
          else
            pack_panel<C>(g.b, g.bs1, g.bs2, k0, depth, (p0 + p) * C, g.N, pp + p * depth * C);
        }
      });
      // Enough tasks for every thread, in strip order (a strip packed once per run of panels);
      // but where c's columns lie along M (ldc == 1: the transposed product), neighbouring strips'
      // tiles share every column's cache lines (strip order made two threads 1.5x slower than
      // one), so there each thread takes one group of panels against every strip, and no two
      // threads write one line. A task is still one strip against a group, packed per task: one
      // group per thread keeps that to one packing of each strip per thread.
      const bool by_panels = g.cs1 == 1;
      const int64_t groups =
          std::min(count, by_panels ? int64_t{parallel_threads()}
                                    : std::max<int64_t>(1, (4 * parallel_threads() + strips - 1) / strips));
      // A thread for each 512K multiply-adds (10-20 us) of the block, before a second thread
      // pays for waking up. (Counted per task, rounding down, two threads took 1024 x 64 x 10,
      // 393K each, at 0.6x one thread's speed.)
      const int64_t tasks = strips * groups;
      const int64_t work = strips * R * count * C * depth;
      const int64_t threads = std::clamp<int64_t>(work >> 19, 1, parallel_threads());
      const int64_t grain = (tasks + threads - 1) / threads;
      parallel_for(0, tasks, grain, [&](int64_t tb, int64_t te) {
        const std::unique_ptr<float[]> strip(new float[static_cast<size_t>(depth * R)]);
        int64_t packed_strip = -1;
        for (int64_t task = tb; task < te; ++task) {
          const int64_t s = by_panels ? task % strips : task / groups;
          const int64_t group = by_panels ? task / strips : task % groups;
          const int64_t m0 = s * R, rows = std::min(R, g.M - m0);
          if (s != packed_strip) pack_strip<R>(g.a, g.as1, g.as2, m0, rows, k0, depth, strip.get());
          packed_strip = s;
          for (int64_t p = group * count / groups; p < (group + 1) * count / groups; ++p) {
            const int64_t n0 = (p0 + p) * C;
            const TileOut out{g.c + m0 * g.cs1 + n0 * g.cs2, g.cs1, g.cs2, rows, std::min(C, g.N - n0), g.alpha, beta};
            const float* panel = pp + p * depth * C;
            with_rows<R>(rows, [&](auto r) {
              if (narrow(p))
                Tile::template run<decltype(r)::value, 1>(strip.get(), panel, depth, out);
              else
                Tile::template run<decltype(r)::value, 2>(strip.get(), panel, depth, out);
            });
          }
        }
      });
    }
  }
}

// The cycles per k of a product's tiles, [M, N] outputs: a tile of r rows and v vectors makes
// r v FMAs, two per cycle, but each accumulator's chain waits the FMA's 4-cycle latency, so a
// tile takes max(r v / 2, 4); a last panel of at most half the width has v = 1.
template <class Tile>
int64_t tile_cycles(int64_t M, int64_t N) {
  constexpr int64_t R = Tile::kRows, C = Tile::kCols;
  const auto tile = [](int64_t r, int64_t v) { return std::max<int64_t>(r * v / 2, 4); };
  const int64_t rest_r = M % R, rest_c = N % C, rest_v = half_width_last(N, C) ? 1 : 2;
  const auto row_of_tiles = [&](int64_t r) { return N / C * tile(r, 2) + (rest_c ? tile(r, rest_v) : 0); };
  return M / R * row_of_tiles(R) + (rest_r ? row_of_tiles(rest_r) : 0);
}

// c = a b, or c^T = b^T a^T where that wastes less of the tiles: [128, 1024] x [1024, 49] (a
// convolution with 7 x 7 outputs) fills its last 16-wide AVX2 panel with one column, while its
// transpose has 49 rows (8 strips and one row) and 128 exact columns: 1.15x fewer tile cycles
// by the model; measured on one AVX2 thread, 0.77 -> 0.90 of Eigen's speed (1024 x 49 x 128:
// 0.96 -> 1.20). The transposed tiles store through 8 x 8 transposes (store_transposed), so it
// takes a gain over 10 %. The bits are the same either way: each output is the same FMA chain.
template <class Tile>
void gemm_oriented(const Gemm32Args& g) {
  if (g.cs2 == 1 && 10 * tile_cycles<Tile>(g.N, g.M) < 9 * tile_cycles<Tile>(g.M, g.N))
    gemm_tiled<Tile>({g.b, g.bs2, g.bs1, g.a, g.as2, g.as1, g.c, g.cs2, g.cs1, g.N, g.M, g.K, g.alpha, g.beta});
  else
    gemm_tiled<Tile>(g);
}

}  // namespace

bool gemm32_kernel_available(Gemm32Kernel k) {
  switch (k) {
    case Gemm32Kernel::Eigen:
      return true;
    case Gemm32Kernel::Avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case Gemm32Kernel::Avx512:
      return __builtin_cpu_supports("avx512f");
  }
  return false;
}

void gemm32_with(Gemm32Kernel k, const Gemm32Args& g) {
  EMBER_CHECK(k != Gemm32Kernel::Eigen && gemm32_kernel_available(k), "gemm32: the ", gemm32_kernel_name(k),
              " kernel does not run on this CPU");
  if (g.M <= 0 || g.N <= 0) return;
  EMBER_ASSERT(g.K > 0, "gemm32: K == 0 is the caller's (c = beta c)");
  if (k == Gemm32Kernel::Avx512)
    gemm_oriented<Avx512Tile>(g);
  else
    gemm_oriented<Avx2Tile>(g);
}
#else
bool gemm32_kernel_available(Gemm32Kernel k) { return k == Gemm32Kernel::Eigen; }
void gemm32_with(Gemm32Kernel k, const Gemm32Args&) {
  EMBER_CHECK(false, "gemm32: the ", gemm32_kernel_name(k), " kernel is not compiled for this CPU");
}
#endif

const char* gemm32_kernel_name(Gemm32Kernel k) {
  switch (k) {
    case Gemm32Kernel::Eigen:
      return "Eigen";
    case Gemm32Kernel::Avx2:
      return "AVX2 (6 x 16 tiles)";
    case Gemm32Kernel::Avx512:
      return "AVX-512 (12 x 32 tiles)";
  }
  return "?";
}

Gemm32Kernel gemm32_kernel() {
  if (!own_gemm.load(std::memory_order_relaxed)) return Gemm32Kernel::Eigen;
  if (backends::cpu::max_isa() == backends::cpu::Isa::avx512 && gemm32_kernel_available(Gemm32Kernel::Avx512))
    return Gemm32Kernel::Avx512;
  return gemm32_kernel_available(Gemm32Kernel::Avx2) ? Gemm32Kernel::Avx2 : Gemm32Kernel::Eigen;
}

bool gemm32_applies(int64_t M, int64_t N, int64_t K) {
  // 9 to 15 columns (a 10-class head) with 16 rows or more run as the transposed product, whose
  // panels are whole: 1.0-1.3x Eigen's speed on AVX2, 1.4-1.7x on AVX-512 (8 or fewer columns
  // lost on AVX2, where packing A costs as much as the product).
  const bool columns = N >= 16 || (N >= 9 && M >= 16);
  return K > 0 && M >= 4 && columns && static_cast<double>(M) * N * K >= 32.0 * 32 * 32 &&
         gemm32_kernel() != Gemm32Kernel::Eigen;
}

void gemm32(const Gemm32Args& g) { gemm32_with(gemm32_kernel(), g); }

}  // namespace ember::cpu

namespace ember::backends::cpu {
void set_own_float32_gemm(bool on) { ember::cpu::own_gemm = on; }
bool own_float32_gemm() { return ember::cpu::own_gemm; }
}  // namespace ember::backends::cpu
