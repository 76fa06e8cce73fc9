// The int8 GEMM of quantized Linear on the CPU (Note [Int8 GEMM]): uint8 activations times int8
// weights into int32, with the epilogue that dequantizes (dynamic quantization) or requantizes
// (static quantization).
//
// Why u8 x s8 with vpmaddubsw: AVX2 has no 8-bit multiply-accumulate into 32 bits (that is
// AVX-VNNI's vpdpbusd). vpmaddubsw multiplies 32 unsigned bytes by 32 signed bytes and adds
// neighbouring pairs into 16 int16 (saturating), and vpmaddwd by ones adds pairs of those into 8
// int32: 32 multiply-adds in two instructions on the two vector ALUs, where float32 does 8 per
// FMA, so the ceiling is 2x float32's. The pair sum a0 w0 + a1 w1 fits int16 only when
// a <= 127 (127 * 128 * 2 = 32512): that is why PyTorch quantizes activations to 7 bits
// (reduce_range) for this instruction, and why ember does the same. The alternative, s8 x s8 by
// widening both to int16 for vpmaddwd, never saturates but does half the work per instruction.
//
// Where the CPU has AVX-512 VNNI (AMD Zen 4 and later, Intel since Cascade Lake), one vpdpbusd
// does it all: 64 u8 x s8 products, each 4 summed into one of 16 int32 lanes, added to the
// accumulator, with no int16 step (so nothing saturates, at any activation width). One zmm
// register is exactly one group of the packed panel below (16 columns x 4 k), so the same packed
// weight serves both kernels; which one runs is chosen once, from the CPU (int8_gemm_kernel()).
//
// Layout of the packed weight (an int8 tensor, only this file reads it): a 64-byte header
// (N, K, N rounded up to 16, K rounded up to 4, as int64), the int32 sum of each weight row
// (for the zero-point term: Σ (a - z) w = Σ a w - z Σ w), then panels of 16 output columns:
// for each group of 4 k, 16 columns x 4 bytes = two AVX2 registers, zero-padded past N and K.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ember/tensor/cpu/cpu_backend.h"
#include "ember/tensor/cpu/int8_packed.h"
#include "ember/tensor/ops.h"
#include "ember/tensor/parallel.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define EMBER_INT8_AVX2 1
#endif

namespace ember::cpu {
namespace {

using int8::Epilogue;
using int8::kGroup;
using int8::kHeader;
using int8::kPanel;
using int8::Packed;

// Four consecutive activation bytes a[k .. k+4) as one int32, zero past the row's end.
inline int32_t load_group(const uint8_t* row, int64_t k, int64_t K) {
  int32_t v = 0;
  std::memcpy(&v, row + k, static_cast<size_t>(std::min<int64_t>(kGroup, K - k)));
  return v;
}

// The portable path (and the oracle of the AVX2 one): one output at a time from the packed layout.
void panel_scalar(const uint8_t* a, int64_t lda, int64_t m0, int64_t rows, const Packed& w, int64_t p,
                  const Epilogue& e) {
  const int8_t* panel = w.panel(p);
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = a + (m0 + r) * lda;
    int32_t acc[kPanel] = {};
    for (int64_t g = 0; g < w.k_padded / kGroup; ++g) {
      const int64_t k = g * kGroup;
      for (int64_t j = 0; j < kPanel; ++j)
        for (int64_t i = 0; i < kGroup && k + i < w.k; ++i)
          acc[j] += static_cast<int32_t>(row[k + i]) * panel[(g * kPanel + j) * kGroup + i];
    }
    e.store(m0 + r, p * kPanel, std::min(kPanel, w.n - p * kPanel), acc);
  }
}

#ifdef EMBER_INT8_AVX2
// The epilogue of a full 16-column row piece in vector registers (float32 or int32 outputs; the
// rest go through Epilogue::store).
struct PanelEpilogue {
  __m256i zero_term[2];  // a_zero_point * Σ_k w[n, k]
  __m256 scale[2], bias[2], inv_out_scale;
  __m256i out_zero_point, out_min, out_max;
  bool vector;  // false: leave it to Epilogue::store
  PanelEpilogue(const Epilogue& e, int64_t n0, int64_t count) {
    vector = count == kPanel;
    if (!vector) return;
    const __m256i z = _mm256_set1_epi32(e.a_zero_point);
    for (int h = 0; h < 2; ++h) {
      const int64_t n = n0 + 8 * h;
      zero_term[h] = _mm256_mullo_epi32(z, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(e.row_sums + n)));
      if (e.out_dtype == kInt32) continue;
      const __m256 a_scale = _mm256_set1_ps(e.a_scale);
      scale[h] = _mm256_mul_ps(a_scale, e.per_channel ? _mm256_loadu_ps(e.w_scale + n) : _mm256_set1_ps(e.w_scale[0]));
      bias[h] = e.bias ? _mm256_loadu_ps(e.bias + n) : _mm256_setzero_ps();
    }
    inv_out_scale = _mm256_set1_ps(e.inv_out_scale);
    out_zero_point = _mm256_set1_epi32(e.out_zero_point);
    out_min = _mm256_set1_epi32(static_cast<int32_t>(e.out_quant_min));
    out_max = _mm256_set1_epi32(static_cast<int32_t>(e.out_quant_max));
  }
  // (Not inlined: in the GEMM loop's function its registers pushed an accumulator out to the stack.)
  __attribute__((noinline)) void store(const Epilogue& e, int64_t m, int64_t n0, const __m256i acc[2]) const {
    __m256 v[2];
    for (int h = 0; h < 2; ++h) {
      const __m256i raw = _mm256_sub_epi32(acc[h], zero_term[h]);
      if (e.out_dtype == kInt32) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(static_cast<int32_t*>(e.out) + m * e.ldo + n0 + 8 * h), raw);
        continue;
      }
      // (one fused multiply-add, as Epilogue::store: the same rounding, so both paths agree bit for bit)
      v[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(raw), scale[h], bias[h]);
      if (e.relu) v[h] = _mm256_max_ps(v[h], _mm256_setzero_ps());
      if (e.out_dtype == kFloat32) _mm256_storeu_ps(static_cast<float*>(e.out) + m * e.ldo + n0 + 8 * h, v[h]);
    }
    if (e.out_dtype != kUInt8) return;
    // Requantize: nearest-even (vcvtps2dq) of v / out_scale, + zero point, clamped; 16 int32 -> 16 bytes.
    __m256i q[2];
    for (int h = 0; h < 2; ++h) {
      const __m256 limit = _mm256_set1_ps(1e9f);  // inside int32: a far outlier still clamps to the right end
      const __m256 r = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(v[h], inv_out_scale), -limit), limit);
      q[h] = _mm256_add_epi32(_mm256_cvtps_epi32(r), out_zero_point);
      q[h] = _mm256_min_epi32(_mm256_max_epi32(q[h], out_min), out_max);
    }
    const __m256i words = _mm256_permute4x64_epi64(_mm256_packs_epi32(q[0], q[1]), 0xD8);  // columns in order
    const __m128i bytes = _mm_packus_epi16(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<uint8_t*>(e.out) + m * e.ldo + n0), bytes);
  }
};

// ROWS x 16 outputs: for each group of 4 k, the 4 activation bytes of a row broadcast to all
// lanes (a load, vbroadcastss), times the 16 columns' 4 weights (two registers), pairs summed
// to int16 (vpmaddubsw), then to int32 (vpmaddwd by ones).
template <int ROWS>
void panel_avx2(const uint8_t* a, int64_t lda, int64_t m0, const Packed& w, int64_t p, const Epilogue& e,
                const PanelEpilogue& pe) {
  const int8_t* panel = w.panel(p);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc[ROWS][2];
#pragma GCC unroll 8
  for (int r = 0; r < ROWS; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  const uint8_t* rows[ROWS];
#pragma GCC unroll 8
  for (int r = 0; r < ROWS; ++r) rows[r] = a + (m0 + r) * lda;
  // (Written out, not through a lambda: taking the accumulators' address made GCC keep them in
  // memory, storing and reloading every register each group.)
  const int64_t full_groups = w.k / kGroup;
  for (int64_t g = 0; g < full_groups; ++g) {
    const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + g * kPanel * kGroup));
    const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + g * kPanel * kGroup + 32));
#pragma GCC unroll 8
    for (int r = 0; r < ROWS; ++r) {
      const __m256i av = _mm256_castps_si256(_mm256_broadcast_ss(reinterpret_cast<const float*>(rows[r] + g * kGroup)));
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(_mm256_maddubs_epi16(av, w0), ones));
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(_mm256_maddubs_epi16(av, w1), ones));
    }
  }
  if (full_groups * kGroup < w.k) {  // the last, partial group of k
    const int64_t g = full_groups;
    const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + g * kPanel * kGroup));
    const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + g * kPanel * kGroup + 32));
#pragma GCC unroll 8
    for (int r = 0; r < ROWS; ++r) {
      const __m256i av = _mm256_set1_epi32(load_group(rows[r], g * kGroup, w.k));
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(_mm256_maddubs_epi16(av, w0), ones));
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(_mm256_maddubs_epi16(av, w1), ones));
    }
  }
  const int64_t n0 = p * kPanel, count = std::min(kPanel, w.n - n0);
#pragma GCC unroll 8
  for (int r = 0; r < ROWS; ++r) {  // (unrolled, so that acc is never indexed at run time: registers only)
    if (pe.vector) {
      const __m256i pair[2] = {acc[r][0], acc[r][1]};  // a copy: acc's address must not escape
      pe.store(e, m0 + r, n0, pair);
      continue;
    }
    alignas(32) int32_t out[kPanel];
    _mm256_store_si256(reinterpret_cast<__m256i*>(out), acc[r][0]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + 8), acc[r][1]);
    e.store(m0 + r, n0, count, out);
  }
}

constexpr int kVnniRows = 6;  // rows per VNNI tile (see panel_vnni)

// ROWS x (16 PANELS) outputs with AVX-512 VNNI: per group of 4 k, each panel's 64 bytes in one
// register, each row's 4 activation bytes broadcast to 16 lanes, one vpdpbusd per row and panel.
// Two panels at once: 6 x 2 accumulators cost 2 + 6 loads per 12 vpdpbusd, where 12 x 1 costs
// 1 + 12 per 12 — the loads, not the multiplies, bound this loop (380 against 305 GMAC/s per core
// with everything in L1) —, and six row pointers still fit in the general registers (eight or
// twelve spilled; packing the rows into one tile instead cost a pass over a convolution's large
// im2col matrix). (Compiled for AVX-512 here only; called only when the CPU has it.)
#define EMBER_VNNI_TARGET __attribute__((target("avx512f,avx512vnni")))
template <int ROWS, int PANELS>
EMBER_VNNI_TARGET void panel_vnni(const uint8_t* a, int64_t lda, int64_t m0, const Packed& w, int64_t p,
                                  const Epilogue& e, const PanelEpilogue* pe) {
  const int8_t* panel[PANELS];
  const uint8_t* rows[ROWS];
  __m512i acc[ROWS][PANELS];
#pragma GCC unroll 2
  for (int c = 0; c < PANELS; ++c) panel[c] = w.panel(p + c);
#pragma GCC unroll 8
  for (int r = 0; r < ROWS; ++r) {
    rows[r] = a + (m0 + r) * lda;
#pragma GCC unroll 2
    for (int c = 0; c < PANELS; ++c) acc[r][c] = _mm512_setzero_si512();
  }
  // (One loop for every group, the last, partial one included: a second loop for it after this
  // one made GCC copy all twelve accumulators between registers on every iteration.)
  const int64_t full_groups = w.k / kGroup, groups = w.k_padded / kGroup;
  for (int64_t g = 0; g < groups; ++g) {
    __m512i wv[PANELS];
#pragma GCC unroll 2
    for (int c = 0; c < PANELS; ++c) wv[c] = _mm512_loadu_si512(panel[c] + g * kPanel * kGroup);
#pragma GCC unroll 8
    for (int r = 0; r < ROWS; ++r) {
      int32_t group;
      if (__builtin_expect(g < full_groups, 1))
        std::memcpy(&group, rows[r] + g * kGroup, sizeof(group));  // (folds into vpbroadcastd's load)
      else
        group = load_group(rows[r], g * kGroup, w.k);
      const __m512i b = _mm512_set1_epi32(group);
#pragma GCC unroll 2
      for (int c = 0; c < PANELS; ++c) acc[r][c] = _mm512_dpbusd_epi32(acc[r][c], b, wv[c]);
    }
  }
#pragma GCC unroll 2
  for (int c = 0; c < PANELS; ++c) {
    const int64_t n0 = (p + c) * kPanel, count = std::min(kPanel, w.n - n0);
#pragma GCC unroll 8
    for (int r = 0; r < ROWS; ++r) {
      // (through memory: GCC 12's _mm512_extracti64x4_epi64 warns of its own undefined operand)
      alignas(64) int32_t out[kPanel];
      _mm512_store_si512(out, acc[r][c]);
      if (pe[c].vector) {
        const __m256i pair[2] = {_mm256_load_si256(reinterpret_cast<const __m256i*>(out)),
                                 _mm256_load_si256(reinterpret_cast<const __m256i*>(out + 8))};
        pe[c].store(e, m0 + r, n0, pair);
        continue;
      }
      e.store(m0 + r, n0, count, out);
    }
  }
}

// Rows m0 .. m0 + rows (rows <= ROWS) against PANELS panels from p.
template <int ROWS, int PANELS>
EMBER_VNNI_TARGET void rows_vnni(int64_t rows, const uint8_t* a, int64_t lda, int64_t m0, const Packed& w, int64_t p,
                                 const Epilogue& e, const PanelEpilogue* pe) {
  if constexpr (ROWS > 1) {
    if (rows < ROWS) return rows_vnni<ROWS - 1, PANELS>(rows, a, lda, m0, w, p, e, pe);
  }
  panel_vnni<ROWS, PANELS>(a, lda, m0, w, p, e, pe);
}

// All rows against panels p (and p + 1 when count is 2).
void panels_vnni(const uint8_t* a, int64_t lda, int64_t M, const Packed& w, int64_t p, int64_t count,
                 const Epilogue& e) {
  const PanelEpilogue pe[2] = {PanelEpilogue(e, p * kPanel, std::min(kPanel, w.n - p * kPanel)),
                               PanelEpilogue(e, (p + 1) * kPanel, std::min(kPanel, w.n - (p + 1) * kPanel))};
  for (int64_t m = 0; m < M; m += kVnniRows) {
    const int64_t rows = std::min<int64_t>(kVnniRows, M - m);
    if (count == 2)
      rows_vnni<kVnniRows, 2>(rows, a, lda, m, w, p, e, pe);
    else
      rows_vnni<kVnniRows, 1>(rows, a, lda, m, w, p, e, pe);
  }
}
#endif

}  // namespace

// w int8 [N, K] -> the packed layout above.
Tensor int8::pack_weight(const Tensor& w) {
  const int64_t n = w.size(0), k = w.size(1);
  const int64_t n_padded = (n + kPanel - 1) / kPanel * kPanel, k_padded = (k + kGroup - 1) / kGroup * kGroup;
  Tensor packed = zeros({kHeader + 4 * n_padded + n_padded * k_padded}, TensorOptions().dtype(kInt8));
  auto* base = static_cast<int8_t*>(packed.data_ptr());
  const int64_t header[4] = {n, k, n_padded, k_padded};
  std::memcpy(base, header, sizeof(header));
  auto* row_sums = reinterpret_cast<int32_t*>(base + kHeader);
  int8_t* panels = base + kHeader + 4 * n_padded;
  const int8_t* src = w.data_ptr<int8_t>();
  for (int64_t row = 0; row < n; ++row) {
    int32_t sum = 0;
    const int64_t p = row / kPanel, j = row % kPanel;
    for (int64_t col = 0; col < k; ++col) {
      const int8_t v = src[row * k + col];
      sum += v;
      panels[p * k_padded * kPanel + ((col / kGroup) * kPanel + j) * kGroup + col % kGroup] = v;
    }
    row_sums[row] = sum;
  }
  return packed;
}

Tensor CpuBackend::int8_pack_weight(const Tensor& w) { return int8::pack_weight(w); }

const char* int8_kernel_name(Int8Kernel k) {
  switch (k) {
    case Int8Kernel::Portable:
      return "portable";
    case Int8Kernel::Avx2:
      return "avx2 (vpmaddubsw)";
    case Int8Kernel::Avx512Vnni:
      return "avx512-vnni (vpdpbusd)";
  }
  return "?";
}

bool int8_kernel_available(Int8Kernel k) {
  switch (k) {
    case Int8Kernel::Portable:
      return true;
#ifdef EMBER_INT8_AVX2
    case Int8Kernel::Avx2:
      return true;
    case Int8Kernel::Avx512Vnni:
      // (libgcc's check includes the OS saving the zmm registers, XCR0)
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vnni");
#endif
    default:
      return false;
  }
}

// The instruction-set switch of the direct convolutions (backends::cpu::set_max_isa,
// EMBER_MAX_CPU_ISA=avx2) holds the int8 kernels to AVX2 too.
Int8Kernel int8_gemm_kernel() {
  static const bool vnni = int8_kernel_available(Int8Kernel::Avx512Vnni);
  static const bool avx2 = int8_kernel_available(Int8Kernel::Avx2);
  if (vnni && backends::cpu::max_isa() == backends::cpu::Isa::avx512) return Int8Kernel::Avx512Vnni;
  return avx2 ? Int8Kernel::Avx2 : Int8Kernel::Portable;
}

void CpuBackend::int8_gemm(const Tensor& a, const Tensor& w_packed, const Int8Epilogue& ep, const Tensor& out) {
  int8_gemm_with(int8_gemm_kernel(), a, w_packed, ep, out);
}

void int8_gemm_with(Int8Kernel kernel, const Tensor& a, const Tensor& w_packed, const Int8Epilogue& ep,
                    const Tensor& out) {
  EMBER_CHECK(int8_kernel_available(kernel), "int8_gemm: the ", int8_kernel_name(kernel),
              " kernel is not available on this CPU or build");
  const Packed w = Packed::checked(w_packed, out.size(1), a.size(1), "int8_gemm");
  const int64_t M = a.size(0);
  const Epilogue e = int8::make_epilogue(ep, w, out);
  const auto* a_data = a.data_ptr<uint8_t>();
  const int64_t lda = a.stride(0);
  const int64_t panels = w.n_padded / kPanel;
  // About 256K multiply-adds per chunk before a second thread pays for its wake-up.
  const int64_t grain = std::max<int64_t>(1, (1 << 18) / std::max<int64_t>(1, M * kPanel * w.k));
  if (kernel == Int8Kernel::Avx512Vnni) {
#ifdef EMBER_INT8_AVX2
    parallel_for(0, (panels + 1) / 2, (grain + 1) / 2, [&](int64_t q0, int64_t q1) {  // pairs of panels
      for (int64_t q = q0; q < q1; ++q) panels_vnni(a_data, lda, M, w, 2 * q, std::min<int64_t>(2, panels - 2 * q), e);
    });
#endif
    return;
  }
  parallel_for(0, panels, grain, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      if (kernel == Int8Kernel::Portable) {
        panel_scalar(a_data, lda, 0, M, w, p, e);
        continue;
      }
#ifdef EMBER_INT8_AVX2
      const PanelEpilogue pe(e, p * kPanel, std::min(kPanel, w.n - p * kPanel));
      int64_t m = 0;
      for (; m + 4 <= M; m += 4) panel_avx2<4>(a_data, lda, m, w, p, e, pe);
      switch (M - m) {
        case 3:
          panel_avx2<3>(a_data, lda, m, w, p, e, pe);
          break;
        case 2:
          panel_avx2<2>(a_data, lda, m, w, p, e, pe);
          break;
        case 1:
          panel_avx2<1>(a_data, lda, m, w, p, e, pe);
          break;
        default:
          break;
      }
#endif
    }
  });
}

}  // namespace ember::cpu
