// The float32 GEMM on CPUs with AVX-512 (Note [float32 GEMM on AVX-512]).
//
// Note [float32 GEMM on AVX-512]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// ember is compiled for x86-64-v3 (AVX2), and so is Eigen's GEMM inside it: on a CPU with
// AVX-512 it uses half the vector width the FMA units have. This kernel is compiled for AVX-512F
// (function by function, through the target attribute: nothing else of ember is) and runs only
// where the CPU has it and backends::cpu::max_isa() allows it. Its layout is the 16-bit GEMM's
// (Note [16-bit GEMM]), in float32:
//   - B [K, N] is packed into panels of 32 columns, [K][32] each (zero past N), once per call,
//     shared by the threads;
//   - A is packed per strip of 12 rows into [K][12] by the thread that uses it;
//   - a tile keeps 12 x 32 outputs in 24 of the 32 zmm registers across all of K: per k, two
//     loads of B, twelve broadcasts of A and 24 FMAs, which the FMA units, not the loads, limit.
// K is cut into chunks of kDepth (a panel of 32 x 4096 floats is 512 KiB, within L2): the first
// chunk applies beta, the later ones add. Each output is one chain of FMAs in k order, computed
// by one thread, so the result does not depend on the thread count. It differs from Eigen's in
// the last bits (another summation order), as two BLAS libraries' do.
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "ember/tensor/cpu/cpu.h"
#include "ember/tensor/cpu/cpu_backend.h"
#include "ember/tensor/cpu/transpose8x8.h"
#include "ember/tensor/parallel.h"

#if defined(__x86_64__) && defined(__AVX2__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define EMBER_GEMM32_AVX512_KERNEL 1
#define EMBER_GEMM32_AVX512 __attribute__((target("avx512f")))
#endif

namespace ember::cpu {

#ifdef EMBER_GEMM32_AVX512_KERNEL
namespace {

constexpr int64_t kRows = 12;     // rows of A per strip
constexpr int64_t kCols = 32;     // columns of B per panel (two zmm)
constexpr int64_t kDepth = 4096;  // K per chunk

// Where a tile's outputs go: c + r * ldc + j * cs for r < rows, j < cols.
struct TileOut {
  float* c;
  int64_t ldc, cs, rows, cols;
  float alpha, beta;
};

// ROWS x 32 outputs of a [K][12] strip against a [K][32] panel; ROWS is a template parameter so
// that the accumulators are registers. out = alpha acc + beta out (beta == 0: out is not read).
template <int ROWS>
EMBER_GEMM32_AVX512 void tile(const float* a, const float* b, int64_t K, const TileOut& t) {
  __m512 acc[ROWS][2];
#pragma GCC unroll 12
  for (int r = 0; r < ROWS; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    const __m512 b0 = _mm512_loadu_ps(b + k * kCols), b1 = _mm512_loadu_ps(b + k * kCols + 16);
#pragma GCC unroll 12
    for (int r = 0; r < ROWS; ++r) {
      const __m512 av = _mm512_set1_ps(a[k * kRows + r]);
      acc[r][0] = _mm512_fmadd_ps(av, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(av, b1, acc[r][1]);
    }
  }
  const __m512 alpha = _mm512_set1_ps(t.alpha), beta = _mm512_set1_ps(t.beta);
  if (t.cs == 1) {
    const auto mask = [](int64_t n) { return static_cast<__mmask16>(n >= 16 ? 0xFFFF : n <= 0 ? 0 : (1u << n) - 1); };
    const __mmask16 m0 = mask(t.cols), m1 = mask(t.cols - 16);
#pragma GCC unroll 12
    for (int r = 0; r < ROWS; ++r) {
      float* row = t.c + r * t.ldc;
      __m512 v0 = _mm512_mul_ps(alpha, acc[r][0]), v1 = _mm512_mul_ps(alpha, acc[r][1]);
      if (t.beta != 0) {
        v0 = _mm512_fmadd_ps(beta, _mm512_maskz_loadu_ps(m0, row), v0);
        v1 = _mm512_fmadd_ps(beta, _mm512_maskz_loadu_ps(m1, row + 16), v1);
      }
      _mm512_mask_storeu_ps(row, m0, v0);
      _mm512_mask_storeu_ps(row + 16, m1, v1);
    }
    return;
  }
  alignas(64) float out[kCols];  // a strided output row (N == 1 maps here): element by element
  for (int r = 0; r < ROWS; ++r) {
    _mm512_store_ps(out, _mm512_mul_ps(alpha, acc[r][0]));
    _mm512_store_ps(out + 16, _mm512_mul_ps(alpha, acc[r][1]));
    for (int64_t j = 0; j < t.cols; ++j) {
      float* o = t.c + r * t.ldc + j * t.cs;
      *o = t.beta == 0 ? out[j] : t.beta * *o + out[j];
    }
  }
}

// f(std::integral_constant<int, R>{}) with R = rows (1 .. kRows), as a compile-time constant.
template <class F, int R = kRows>
void with_rows(int64_t rows, const F& f) {
  if constexpr (R > 1) {
    if (rows < R) return with_rows<F, R - 1>(rows, f);
  }
  f(std::integral_constant<int, R>{});
}

// B [K, N] with strides (s1, s2), rows k0 .. k0 + depth and columns n0 .. n0 + 32 into
// dst [depth][32], zero past N.
void pack_panel(const float* b, int64_t s1, int64_t s2, int64_t k0, int64_t depth, int64_t n0, int64_t N, float* dst) {
  const int64_t cols = std::min(kCols, N - n0);
  if (cols < kCols) std::fill(dst, dst + depth * kCols, 0.0f);
  if (s2 == 1) {
    for (int64_t k = 0; k < depth; ++k) std::memcpy(dst + k * kCols, b + (k0 + k) * s1 + n0, sizeof(float) * cols);
    return;
  }
  // Down the columns. B a transpose (a Linear's w^T, s1 == 1): 8 x 8 blocks transposed in
  // registers, as the transposing copy does; then the edges, and other strides, one by one.
  int64_t k_blocks = 0, j_blocks = 0;
  if (s1 == 1) {
    k_blocks = depth / 8 * 8, j_blocks = cols / 8 * 8;
    for (int64_t j = 0; j < j_blocks; j += 8)
      for (int64_t k = 0; k < k_blocks; k += 8)
        transpose8x8_32(b + (n0 + j) * s2 + k0 + k, s2, dst + k * kCols + j, kCols);
  }
  for (int64_t j = 0; j < cols; ++j) {
    const float* col = b + (n0 + j) * s2 + k0 * s1;
    for (int64_t k = j < j_blocks ? k_blocks : 0; k < depth; ++k) dst[k * kCols + j] = col[k * s1];
  }
}

// A [M, K] with strides (s1, s2), rows m0 .. m0 + rows and columns k0 .. k0 + depth into
// dst [depth][12] (the kernel reads only the first `rows` of each k).
void pack_strip(const float* a, int64_t s1, int64_t s2, int64_t m0, int64_t rows, int64_t k0, int64_t depth,
                float* dst) {
  if (s1 == 1 && s2 != 1) {  // a transpose (a weight gradient's dy^T): the strip's rows lie side by side
    for (int64_t k = 0; k < depth; ++k) std::memcpy(dst + k * kRows, a + (k0 + k) * s2 + m0, sizeof(float) * rows);
    return;
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = a + (m0 + r) * s1 + k0 * s2;
    for (int64_t k = 0; k < depth; ++k) dst[k * kRows + r] = row[k * s2];
  }
}

}  // namespace

bool gemm32_avx512_available() {
  return backends::cpu::max_isa() == backends::cpu::Isa::avx512 && __builtin_cpu_supports("avx512f");
}

bool gemm32_avx512_applies(int64_t M, int64_t N, int64_t K) {
  return K > 0 && M >= 4 && N >= 16 && static_cast<double>(M) * N * K >= 32.0 * 32 * 32 && gemm32_avx512_available();
}

void gemm32_avx512(const Gemm32Args& g) {
  const int64_t panels = (g.N + kCols - 1) / kCols, strips = (g.M + kRows - 1) / kRows;
  const int64_t threads = parallel_threads();
  // Each task is one strip against a run of panels: enough tasks for every thread, and a strip
  // packed once per run.
  const int64_t groups = std::min(panels, std::max<int64_t>(1, (4 * threads + strips - 1) / strips));
  std::vector<float> packed;
  for (int64_t k0 = 0; k0 < g.K; k0 += kDepth) {
    const int64_t depth = std::min(kDepth, g.K - k0);
    const float beta = k0 == 0 ? g.beta : 1.0f;
    packed.resize(static_cast<size_t>(panels * depth * kCols));
    parallel_for(0, panels, std::max<int64_t>(1, kGrainSize / (depth * kCols)), [&](int64_t pb, int64_t pe) {
      for (int64_t p = pb; p < pe; ++p)
        pack_panel(g.b, g.bs1, g.bs2, k0, depth, p * kCols, g.N, packed.data() + p * depth * kCols);
    });
    parallel_for(0, strips * groups, 1, [&](int64_t tb, int64_t te) {
      std::vector<float> strip(static_cast<size_t>(depth * kRows));
      int64_t packed_strip = -1;
      for (int64_t t = tb; t < te; ++t) {
        const int64_t s = t / groups, group = t % groups;
        const int64_t m0 = s * kRows, rows = std::min(kRows, g.M - m0);
        if (s != packed_strip) pack_strip(g.a, g.as1, g.as2, m0, rows, k0, depth, strip.data());
        packed_strip = s;
        for (int64_t p = group * panels / groups; p < (group + 1) * panels / groups; ++p) {
          const TileOut out{g.c + m0 * g.cs1 + p * kCols * g.cs2, g.cs1,   g.cs2, rows,
                            std::min(kCols, g.N - p * kCols),     g.alpha, beta};
          with_rows(rows, [&](auto r) {
            tile<decltype(r)::value>(strip.data(), packed.data() + p * depth * kCols, depth, out);
          });
        }
      }
    });
  }
}
#else
bool gemm32_avx512_available() { return false; }
bool gemm32_avx512_applies(int64_t, int64_t, int64_t) { return false; }
void gemm32_avx512(const Gemm32Args&) { EMBER_ASSERT(false, "gemm32_avx512: not compiled for this CPU"); }
#endif

}  // namespace ember::cpu
