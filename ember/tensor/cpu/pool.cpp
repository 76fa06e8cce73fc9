// 2-D max, average and adaptive average pooling on NCHW tensors, forward and backward. All
// tensors arrive contiguous.
#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#ifdef __SSE2__  // (AVX2 implies it)
#include <immintrin.h>
#endif
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "ember/tensor/cpu/cpu_backend.h"
#include "ember/tensor/cpu/vec_half.h"
#include "ember/tensor/parallel.h"

namespace ember::cpu {
namespace {

// What a max pool records of each window's maximum (Backend::max_pool2d): nothing, its position
// in the plane (int64 indices, PyTorch's), or its tap number in the window (uint8).
enum class IndexKind { kNone, kPositions, kTaps };
IndexKind index_kind(const Tensor& indices) {
  if (!indices.defined()) return IndexKind::kNone;
  return indices.dtype() == kUInt8 ? IndexKind::kTaps : IndexKind::kPositions;
}

// The kernel taps [begin, end) of a pooling window starting at `origin` (stride and padding
// applied) that fall inside [0, size): out-of-bounds taps are skipped by the loop bounds, not
// tested per element.
// (ceil(a / d) for d > 0 written so that no sum overflows: a dilation may be near INT64_MAX
// when the kernel is 1)
inline int64_t ceil_div(int64_t a, int64_t d) { return a / d + (a % d > 0 ? 1 : 0); }
inline std::pair<int64_t, int64_t> taps_inside(int64_t origin, int64_t kernel, int64_t dilation, int64_t size) {
  const int64_t begin = origin < 0 ? ceil_div(-origin, dilation) : 0;
  const int64_t end = std::min(kernel, ceil_div(size - origin, dilation));
  return {begin, std::max(begin, end)};
}

// One side (rows or columns) of a max pool window, as the loops read it: `count` taps inside the
// input, the first at index `first` (a row or a column of the input) and at tap `first_tap` of
// the window's side. count 0: a window that lies in the padding only (dilation can skip over the
// whole input), which max_pool2d records as no tap. Computed from the inside taps so that no
// product overflows: kernels, paddings and dilations near INT64_MAX are valid arguments.
struct WindowSide {
  int64_t first = 0, count = 0, first_tap = 0;
};
inline WindowSide window_side(int64_t origin, int64_t kernel, int64_t dilation, int64_t size) {
  const auto [begin, end] = taps_inside(origin, kernel, dilation, size);
  if (begin == end) return {};
  return {origin + begin * dilation, end - begin, begin};  // inside [0, size): no overflow
}

// The maximum of a window and the first tap that holds it, in two branch-free passes (random
// data makes any `v > best` branch unpredictable; this is 2-4x faster). A NaN wins, as in
// PyTorch. The window's taps inside the input are rows x cols positions first + r * row_step +
// c * col_step of the plane; `index` gets the winner's position, `tap` its number in the window,
// first_tap + r * kw + c (used only for windows of at most 256 taps: uint8 tap records). An
// empty window gives the lowest value and index -1, which max_pool2d_backward skips. KH, KW > 0
// fix the tap counts at compile time (the common 2x2 and 3x3 windows, fully inside, get
// unrolled).
template <class T, int KH = 0, int KW = 0>
inline void window_max(const T* xp, int64_t first, int64_t rows, int64_t cols, int64_t row_step, int64_t col_step,
                       int64_t first_tap, int64_t kw, T& out, int64_t& index, int64_t& tap) {
  using M = opmath_t<T>;
  if constexpr (KH > 0) {
    rows = KH, cols = KW, col_step = 1, first_tap = 0, kw = KW;
  }
  M best =
      std::numeric_limits<M>::has_infinity ? -std::numeric_limits<M>::infinity() : std::numeric_limits<M>::lowest();
  int any_nan = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const M v = M(xp[first + r * row_step + c * col_step]);
      best = v > best ? v : best;
      any_nan |= (v != v);
    }
  int64_t at = -1, number = first_tap;  // an empty window: no position
  for (int64_t r = rows - 1; r >= 0; --r)
    for (int64_t c = cols - 1; c >= 0; --c) {
      const int64_t pos = first + r * row_step + c * col_step;
      const M v = M(xp[pos]);
      const int64_t hit = -static_cast<int64_t>(any_nan ? v != v : v == best);
      at = (pos & hit) | (at & ~hit);
      number = ((first_tap + r * kw + c) & hit) | (number & ~hit);
    }
  out = any_nan ? T(std::numeric_limits<M>::quiet_NaN()) : T(best);
  index = at;
  tap = number;
}

#ifdef __AVX2__
// How the vector max pool reads and writes one element type: 16 consecutive values of a row as
// two float vectors (the first 2n of them; masked past that), and n <= 8 results back. Widening
// 16-bit values is exact and narrowing a widened value gives its bits back, so a 16-bit pool
// picks the same taps and values as a float32 pool of the widened input.
struct Float32Lanes {
  using T = float;
  static void load16(const float* r, int64_t n, __m256& lo, __m256& hi) {
    if (n == 8) {
      lo = _mm256_loadu_ps(r);
      hi = _mm256_loadu_ps(r + 8);
      return;
    }
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    lo = _mm256_maskload_ps(r, _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(2 * n)), lane));
    hi = _mm256_maskload_ps(r + 8, _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(2 * n - 8)), lane));
  }
  static void store(float* y, int64_t n, __m256 v) {
    if (n == 8) return _mm256_storeu_ps(y, v);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    _mm256_maskstore_ps(y, _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), lane), v);
  }
};

#ifdef EMBER_HAVE_VEC_HALF
template <bool kBf16>  // bfloat16, else float16, as their bits
struct Half16Lanes {
  using T = uint16_t;
  static void load16(const uint16_t* r, int64_t n, __m256& lo, __m256& hi) {
    if (n == 8) {
      lo = widen8<kBf16>(r);
      hi = widen8<kBf16>(r + 8);
      return;
    }
    // 2n 16-bit values are n 32-bit lanes: a masked load of those.
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    alignas(32) uint16_t tail[16];
    _mm256_store_si256(reinterpret_cast<__m256i*>(tail),
                       _mm256_maskload_epi32(reinterpret_cast<const int*>(r),
                                             _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), lane)));
    lo = widen8<kBf16>(tail);
    hi = widen8<kBf16>(tail + 8);
  }
  static void store(uint16_t* y, int64_t n, __m256 v) {
    const __m128i bits = narrow8<kBf16>(v);
    if (n == 8) return store8(y, bits);
    alignas(16) uint16_t tail[8];
    store8(tail, bits);
    for (int64_t i = 0; i < n; ++i) y[i] = tail[i];
  }
};
#endif

// The 2x2, stride-2 windows of one output row, 8 at a time: y [n] (and index [n] as kIndices
// says) from rows r0 and r0 + W of a plane (n <= 8 outputs, 2n input columns; masked loads and
// stores past them). The same result as window_max: the first tap in scan order (0,0), (0,1),
// (1,0), (1,1) that holds the maximum, or the first NaN; the value is that tap's (so -0 before
// +0 stays -0). `base` is the plane position of the first window's tap (0,0).
template <class Lanes, IndexKind kIndices>
inline void max_pool_2x2_row8(const typename Lanes::T* r0, int64_t W, int64_t n, int32_t base, typename Lanes::T* y,
                              void* index) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  auto load16 = [&](const typename Lanes::T* r, __m256& even, __m256& odd) {
    __m256 lo, hi;
    Lanes::load16(r, n, lo, hi);
    // [x0 .. x15] -> even columns x0, x2, ..., x14 and odd ones, in order.
    even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0x88)), 0xD8));
    odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0xDD)), 0xD8));
  };
  __m256 p00, p01, p10, p11;
  load16(r0, p00, p01);
  load16(r0 + W, p10, p11);
  const __m256 best = _mm256_max_ps(_mm256_max_ps(p00, p01), _mm256_max_ps(p10, p11));
  const __m256 any_nan = _mm256_or_ps(_mm256_cmp_ps(p00, p01, _CMP_UNORD_Q), _mm256_cmp_ps(p10, p11, _CMP_UNORD_Q));
  auto hit = [&](__m256 v) {
    return _mm256_blendv_ps(_mm256_cmp_ps(v, best, _CMP_EQ_OQ), _mm256_cmp_ps(v, v, _CMP_UNORD_Q), any_nan);
  };
  // From the last tap to the first, so that the first hit wins. A tap is named by its offset
  // in the plane from the window's origin (0, 1, W, W + 1) or by its number (0, 1, 2, 3).
  constexpr bool kNumbers = kIndices == IndexKind::kTaps;
  const int step_down = kNumbers ? 2 : static_cast<int>(W);
  __m256 value = p11;
  __m256i tap = _mm256_set1_epi32(step_down + 1);
  auto take = [&](__m256 h, __m256 v, int name) {
    value = _mm256_blendv_ps(value, v, h);
    if constexpr (kIndices != IndexKind::kNone)
      tap = _mm256_castps_si256(
          _mm256_blendv_ps(_mm256_castsi256_ps(tap), _mm256_castsi256_ps(_mm256_set1_epi32(name)), h));
  };
  const __m256 h10 = hit(p10), h01 = hit(p01), h00 = hit(p00);
  take(h10, p10, step_down);
  take(h01, p01, 1);
  take(h00, p00, 0);
  Lanes::store(y, n, value);
  if constexpr (kIndices == IndexKind::kTaps) {
    // Eight 32-bit numbers (0 .. 3) to eight bytes.
    const __m128i words = _mm_packus_epi32(_mm256_castsi256_si128(tap), _mm256_extracti128_si256(tap, 1));
    const __m128i bytes = _mm_packus_epi16(words, words);
    if (n == 8) return _mm_storel_epi64(static_cast<__m128i*>(index), bytes);
    alignas(16) uint8_t tail[16];
    _mm_store_si128(reinterpret_cast<__m128i*>(tail), bytes);
    std::memcpy(index, tail, static_cast<size_t>(n));
  } else if constexpr (kIndices == IndexKind::kPositions) {
    auto* positions = static_cast<int64_t*>(index);
    const __m256i at = _mm256_add_epi32(_mm256_add_epi32(_mm256_set1_epi32(base), _mm256_slli_epi32(lane, 1)), tap);
    const __m256i at_lo = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(at));
    const __m256i at_hi = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(at, 1));
    if (n == 8) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(positions), at_lo);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(positions + 4), at_hi);
      return;
    }
    const __m256i lanes4 = _mm256_setr_epi64x(0, 1, 2, 3);
    _mm256_maskstore_epi64(reinterpret_cast<long long*>(positions), _mm256_cmpgt_epi64(_mm256_set1_epi64x(n), lanes4),
                           at_lo);
    _mm256_maskstore_epi64(reinterpret_cast<long long*>(positions + 4),
                           _mm256_cmpgt_epi64(_mm256_set1_epi64x(n - 4), lanes4), at_hi);
  }
}
#endif

// 2x2 windows at stride 2 that all lie inside the input (no padding or dilation; ceil_mode adds
// no partial window).
bool windows_2x2_inside(const Tensor& in, const Tensor& out, const Pool2dParams& p) {
  return p.kernel == std::array<int64_t, 2>{2, 2} && p.stride == std::array<int64_t, 2>{2, 2} &&
         p.padding == std::array<int64_t, 2>{0, 0} && p.dilation == std::array<int64_t, 2>{1, 1} &&
         2 * out.size(2) <= in.size(2) && 2 * out.size(3) <= in.size(3);
}

// Whether max_pool_2x2_row8 computes this pooling: float32 (and, with F16C, bfloat16 and
// float16: autocast's activations) such windows, planes with int32 offsets.
bool vector_max_pool_applies(const Tensor& in, const Tensor& out, const Pool2dParams& p) {
#ifdef __AVX2__
#ifdef EMBER_HAVE_VEC_HALF
  const bool type = in.dtype() == kFloat32 || in.dtype() == kBFloat16 || in.dtype() == kFloat16;
#else
  const bool type = in.dtype() == kFloat32;
#endif
  return type && windows_2x2_inside(in, out, p) && in.size(2) * in.size(3) < (int64_t(1) << 31);
#else
  (void)in, (void)out, (void)p;
  return false;
#endif
}

#ifdef __AVX2__
// in [planes, H, W] -> out, indices [planes, Ho, Wo] by max_pool_2x2_row8.
template <class Lanes, IndexKind kIndices>
void vector_max_pool_typed(const Tensor& in, const Tensor& out, const Tensor& indices) {
  using T = typename Lanes::T;
  const int64_t planes = in.size(0) * in.size(1), H = in.size(2), W = in.size(3);
  const int64_t Ho = out.size(2), Wo = out.size(3);
  const T* x = static_cast<const T*>(in.data_ptr());
  T* y = static_cast<T*>(out.data_ptr());
  char* idx = indices.defined() ? static_cast<char*>(indices.data_ptr()) : nullptr;
  const int64_t idx_size = indices.defined() ? static_cast<int64_t>(indices.element_size()) : 0;
  parallel_for(0, planes, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(H * W, 1)), [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl)
      for (int64_t oh = 0; oh < Ho; ++oh) {
        const T* r0 = x + pl * H * W + 2 * oh * W;
        const int64_t o = (pl * Ho + oh) * Wo;
        for (int64_t ow = 0; ow < Wo; ow += 8)
          max_pool_2x2_row8<Lanes, kIndices>(r0 + 2 * ow, W, std::min<int64_t>(8, Wo - ow),
                                             static_cast<int32_t>(2 * oh * W + 2 * ow), y + o + ow,
                                             idx ? idx + (o + ow) * idx_size : nullptr);
      }
  });
}

template <class Lanes>
void vector_max_pool_lanes(const Tensor& in, const Tensor& out, const Tensor& indices) {
  switch (index_kind(indices)) {
    case IndexKind::kNone:
      return vector_max_pool_typed<Lanes, IndexKind::kNone>(in, out, indices);
    case IndexKind::kPositions:
      return vector_max_pool_typed<Lanes, IndexKind::kPositions>(in, out, indices);
    case IndexKind::kTaps:
      return vector_max_pool_typed<Lanes, IndexKind::kTaps>(in, out, indices);
  }
}
#endif

void vector_max_pool(const Tensor& in, const Tensor& out, const Tensor& indices) {
#ifdef __AVX2__
#ifdef EMBER_HAVE_VEC_HALF
  if (in.dtype() == kBFloat16) return vector_max_pool_lanes<Half16Lanes<true>>(in, out, indices);
  if (in.dtype() == kFloat16) return vector_max_pool_lanes<Half16Lanes<false>>(in, out, indices);
#endif
  vector_max_pool_lanes<Float32Lanes>(in, out, indices);
#else
  (void)in, (void)out, (void)indices;
#endif
}

#ifdef __SSE2__
// Eight 2x2 windows of uint8 at stride 2, y[0 .. n) with n <= 8, from 16 bytes of each of two
// rows (the reads may run past the rows, never past the tensor): the rows' maximum, then each
// byte pair's (as 16-bit lanes, their high and low bytes), packed back to bytes.
inline void max_pool_2x2_u8x8(const uint8_t* top, const uint8_t* bottom, uint8_t* y, int64_t n) {
  const __m128i v = _mm_max_epu8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(top)),
                                 _mm_loadu_si128(reinterpret_cast<const __m128i*>(bottom)));
  const __m128i m = _mm_max_epi16(_mm_and_si128(v, _mm_set1_epi16(0xFF)), _mm_srli_epi16(v, 8));
  const __m128i bytes = _mm_packus_epi16(m, m);
  if (n == 8) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(y), bytes);
    return;
  }
  alignas(16) uint8_t tmp[16];
  _mm_store_si128(reinterpret_cast<__m128i*>(tmp), bytes);
  std::memcpy(y, tmp, static_cast<size_t>(n));
}
#endif

// Values only (no indices) of uint8 planes, 2x2 windows at stride 2 inside the input: the
// activations of quantized models, which have no gradient and so need no indices (the max of
// the integers is the max of the values). Eight windows per step; a row whose last step would
// end past the row starts that step earlier (the overlap is computed twice, the same).
void max_pool_2x2_u8(const Tensor& in, const Tensor& out) {
  const int64_t planes = in.size(0) * in.size(1), H = in.size(2), W = in.size(3);
  const int64_t Ho = out.size(2), Wo = out.size(3);
  const auto* x = static_cast<const uint8_t*>(in.data_ptr());
  const uint8_t* x_end = x + planes * H * W;
  auto* y = static_cast<uint8_t*>(out.data_ptr());
  parallel_for(
      0, planes * Ho, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(2 * W, 1)), [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {  // r: an output row of some plane
          const uint8_t* top = x + ((r / Ho) * H + 2 * (r % Ho)) * W;
          const uint8_t* bottom = top + W;
          uint8_t* yr = y + r * Wo;
          int64_t ow = 0;
#ifdef __SSE2__
          if (bottom + 2 * std::max<int64_t>(Wo, 8) <= x_end)
            for (; ow < Wo; ow += 8) {
              const int64_t at = Wo >= 8 ? std::min(ow, Wo - 8) : 0;
              max_pool_2x2_u8x8(top + 2 * at, bottom + 2 * at, yr + at, std::min<int64_t>(8, Wo - at));
            }
#endif
          for (; ow < Wo; ++ow)
            yr[ow] = std::max(std::max(top[2 * ow], top[2 * ow + 1]), std::max(bottom[2 * ow], bottom[2 * ow + 1]));
        }
      });
}

// A 16-bit plane from its float32 sums (a template, so that other types never instantiate it).
template <class T>
void round_plane(const opmath_t<T>* acc, int64_t n, T* dst) {
  if constexpr (!std::is_same_v<opmath_t<T>, T>) narrow_run(acc, n, dst);
}

// indices: undefined (values only), int64 positions or uint8 tap numbers (IndexKind).
template <class T>
void max_pool_typed(const Tensor& in, const Tensor& out, const Tensor& indices, const Pool2dParams& p) {
  const int64_t planes = in.size(0) * in.size(1), H = in.size(2), W = in.size(3);
  const int64_t Ho = out.size(2), Wo = out.size(3);
  const int64_t kh = p.kernel[0], kw = p.kernel[1], dh = p.dilation[0], dw = p.dilation[1];
  const T* x = static_cast<const T*>(in.data_ptr());
  T* y = static_cast<T*>(out.data_ptr());
  const IndexKind kind = index_kind(indices);
  int64_t* positions = kind == IndexKind::kPositions ? static_cast<int64_t*>(indices.data_ptr()) : nullptr;
  uint8_t* taps = kind == IndexKind::kTaps ? static_cast<uint8_t*>(indices.data_ptr()) : nullptr;
  // The taps inside the input, per output row and column (the same for every plane; integer
  // divisions per output would cost more than the pooling itself).
  std::vector<WindowSide> rows(static_cast<size_t>(Ho)), cols(static_cast<size_t>(Wo));
  for (int64_t oh = 0; oh < Ho; ++oh) rows[oh] = window_side(oh * p.stride[0] - p.padding[0], kh, dh, H);
  for (int64_t ow = 0; ow < Wo; ++ow) cols[ow] = window_side(ow * p.stride[1] - p.padding[1], kw, dw, W);
  const bool dense = dh == 1 && dw == 1;
  parallel_for(0, planes, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(H * W, 1)), [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      const T* xp = x + pl * H * W;
      for (int64_t oh = 0; oh < Ho; ++oh) {
        const WindowSide& row = rows[oh];
        // dh * W only when two rows are inside (then dh < H: no overflow)
        const int64_t row_step = row.count > 1 ? dh * W : 0;
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const WindowSide& col = cols[ow];
          const int64_t o = (pl * Ho + oh) * Wo + ow, first = row.first * W + col.first;
          const bool inside = dense && row.count == kh && col.count == kw;
          // Tap numbers only where they are recorded: windows of at most 256 taps.
          const int64_t first_tap = taps ? row.first_tap * kw + col.first_tap : 0;
          int64_t position, tap;
          if (inside && kh == 2 && kw == 2)
            window_max<T, 2, 2>(xp, first, 0, 0, W, 1, 0, 0, y[o], position, tap);
          else if (inside && kh == 3 && kw == 3)
            window_max<T, 3, 3>(xp, first, 0, 0, W, 1, 0, 0, y[o], position, tap);
          else
            window_max<T>(xp, first, row.count, col.count, row_step, dw, first_tap, taps ? kw : 0, y[o], position, tap);
          if (positions) positions[o] = position;
          if (taps) taps[o] = static_cast<uint8_t>(tap);
        }
      }
    }
  });
}

// Where each output's recorded maximum lies in its plane, from int64 positions or uint8 tap
// numbers (IndexKind): kEmptyWindow for a window with no tap inside the input (nothing to pass
// the gradient to), kBadRecord for a record max_pool2d could not have written.
constexpr int64_t kBadRecord = -1, kEmptyWindow = -2;
struct RecordedPositions {
  const int64_t* positions;
  int64_t HW;
  int64_t operator()(int64_t o, int64_t, int64_t) const {
    const int64_t at = positions[o];
    if (at == -1) return kEmptyWindow;  // max_pool2d's record of an empty window (and PyTorch's "none")
    return at >= 0 && at < HW ? at : kBadRecord;
  }
};
struct RecordedTaps {
  const uint8_t* taps;
  int64_t H, W;
  const Pool2dParams& p;
  // Each byte's row and column offset in its window (no division per output); bytes past the
  // window's taps are marked by a row offset no window can reach.
  std::array<int64_t, 256> row, col;
  std::vector<char> empty_row, empty_col;  // windows with no tap inside, per output row / column
  RecordedTaps(const uint8_t* taps_, int64_t H_, int64_t W_, int64_t Ho, int64_t Wo, const Pool2dParams& p_)
      : taps(taps_), H(H_), W(W_), p(p_), empty_row(static_cast<size_t>(Ho)), empty_col(static_cast<size_t>(Wo)) {
    for (int64_t t = 0; t < 256; ++t) {
      const bool tap = t < p.kernel[0] * p.kernel[1];
      row[t] = tap ? t / p.kernel[1] * p.dilation[0] : std::numeric_limits<int32_t>::min();
      col[t] = tap ? t % p.kernel[1] * p.dilation[1] : 0;
    }
    for (int64_t oh = 0; oh < Ho; ++oh)
      empty_row[oh] = window_side(oh * p.stride[0] - p.padding[0], p.kernel[0], p.dilation[0], H).count == 0;
    for (int64_t ow = 0; ow < Wo; ++ow)
      empty_col[ow] = window_side(ow * p.stride[1] - p.padding[1], p.kernel[1], p.dilation[1], W).count == 0;
  }
  int64_t operator()(int64_t o, int64_t oh, int64_t ow) const {
    if (empty_row[oh] || empty_col[ow]) return kEmptyWindow;
    const int64_t t = taps[o];
    const int64_t h = oh * p.stride[0] - p.padding[0] + row[t], w = ow * p.stride[1] - p.padding[1] + col[t];
    return h >= 0 && h < H && w >= 0 && w < W ? h * W + w : kBadRecord;
  }
};

// The common case spelled out: 2x2 windows at stride 2 inside the input (windows_2x2_inside),
// whose taps 0 .. 3 are (t >> 1, t & 1) from the window's corner. (Writing each input element
// once instead, its window's gradient or zero, was 2x slower: strided scalar stores.)
struct Recorded2x2Taps {
  const uint8_t* taps;
  int64_t W;
  int64_t operator()(int64_t o, int64_t oh, int64_t ow) const {
    const int64_t t = taps[o];
    return t < 4 ? (2 * oh + (t >> 1)) * W + 2 * ow + (t & 1) : kBadRecord;
  }
};

// grad_in[plane, at(o)] += grad_out[o], empty windows skipped; the first output whose record is
// bad goes to `bad` and ends its thread's work (the caller reports it).
template <class Locate>
void max_pool_scatter(const Tensor& grad_out, const Tensor& grad_in, const Locate& at, std::atomic<int64_t>& bad) {
  const int64_t planes = grad_in.size(0) * grad_in.size(1), HW = grad_in.size(2) * grad_in.size(3);
  const int64_t Ho = grad_out.size(2), Wo = grad_out.size(3);
  EMBER_DISPATCH_FLOATING(grad_in.dtype(), "max_pool2d_backward", [&] {
    using M = opmath_t<scalar_t>;
    // 16-bit gradients add up in a float32 plane, rounded once at the end (converting each
    // element in and out of float16 made this 1.6x bfloat16's time).
    constexpr bool kWidened = !std::is_same_v<M, scalar_t>;
    const scalar_t* dy = static_cast<const scalar_t*>(grad_out.data_ptr());
    scalar_t* dx = static_cast<scalar_t*>(grad_in.data_ptr());
    parallel_for(0, planes, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(HW, 1)), [&](int64_t b, int64_t e) {
      std::vector<M> widened(kWidened ? static_cast<size_t>(HW) : 0);
      for (int64_t pl = b; pl < e; ++pl) {
        scalar_t* dxp = dx + pl * HW;
        M* acc = kWidened ? widened.data() : reinterpret_cast<M*>(dxp);
        std::fill(acc, acc + HW, M(0));
        for (int64_t oh = 0, o = pl * Ho * Wo; oh < Ho; ++oh)
          for (int64_t ow = 0; ow < Wo; ++ow, ++o) {
            const int64_t pos = at(o, oh, ow);
            if (pos == kEmptyWindow) continue;
            if (pos < 0) {
              int64_t none = -1;
              bad.compare_exchange_strong(none, o);
              return;
            }
            acc[pos] += M(dy[o]);
          }
        if constexpr (kWidened) round_plane(acc, HW, dxp);
      }
    });
  });
}

// An averaging window: rows [h0, h1), columns [w0, w1), and what its sum is divided by (a
// double: a window of padding may count more than int64 holds).
struct Window {
  int64_t h0, h1, w0, w1;
  double divisor;
};

// avg_pool2d's window (PyTorch's rule: the divisor counts padding unless
// count_include_pad is off, but never the part of a ceil_mode window past the padding). The
// ends are min(start + kernel, size + padding) written so that no sum overflows: kernels near
// INT64_MAX are valid with as much padding.
Window avg_window(int64_t oh, int64_t ow, int64_t H, int64_t W, const Pool2dParams& p) {
  Window w{oh * p.stride[0] - p.padding[0], 0, ow * p.stride[1] - p.padding[1], 0, 0};
  w.h1 = w.h0 + std::min(p.kernel[0], H + p.padding[0] - w.h0);
  w.w1 = w.w0 + std::min(p.kernel[1], W + p.padding[1] - w.w0);
  const double padded_count = double(w.h1 - w.h0) * double(w.w1 - w.w0);
  w.h0 = std::max<int64_t>(w.h0, 0);
  w.w0 = std::max<int64_t>(w.w0, 0);
  w.h1 = std::min(w.h1, H);
  w.w1 = std::min(w.w1, W);
  w.divisor = p.count_include_pad ? padded_count : double((w.h1 - w.h0) * (w.w1 - w.w0));
  return w;
}

// adaptive_avg_pool2d's window: [floor(o * H / Ho), ceil((o + 1) * H / Ho)).
Window adaptive_window(int64_t oh, int64_t ow, int64_t H, int64_t W, int64_t Ho, int64_t Wo) {
  Window w{oh * H / Ho, ((oh + 1) * H + Ho - 1) / Ho, ow * W / Wo, ((ow + 1) * W + Wo - 1) / Wo, 0};
  w.divisor = double((w.h1 - w.h0) * (w.w1 - w.w0));
  return w;
}

// Forward: y[o] = sum(x[window(o)]) / divisor. Backward: x[window(o)] += y[o] / divisor
// (then `x` is the input gradient, zeroed by the caller, and `y` the output gradient).
// Planes are independent, so both run one plane per thread.
template <class T, bool kBackward, class WindowOf>
void average_pool(const Tensor& in, const Tensor& out, const WindowOf& window_of) {
  using M = opmath_t<T>;
  const int64_t planes = in.size(0) * in.size(1), H = in.size(2), W = in.size(3);
  const int64_t Ho = out.size(2), Wo = out.size(3);
  T* x = static_cast<T*>(in.data_ptr());
  T* y = static_cast<T*>(out.data_ptr());
  parallel_for(0, planes, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(H * W, 1)), [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      T* xp = x + pl * H * W;
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const Window w = window_of(oh, ow, H, W, Ho, Wo);
          T& yo = y[(pl * Ho + oh) * Wo + ow];
          if (kBackward) {
            if (w.divisor <= 0) continue;
            const M share = M(yo) / M(w.divisor);
            for (int64_t h = w.h0; h < w.h1; ++h)
              for (int64_t c = w.w0; c < w.w1; ++c) xp[h * W + c] = T(M(xp[h * W + c]) + share);
          } else {
            M sum = 0;
            for (int64_t h = w.h0; h < w.h1; ++h)
              for (int64_t c = w.w0; c < w.w1; ++c) sum += M(xp[h * W + c]);
            yo = T(w.divisor > 0 ? sum / M(w.divisor) : M(0));
          }
        }
    }
  });
}

}  // namespace

// in [N, C, H, W] -> out, indices [N, C, Ho, Wo] (indices: IndexKind)
void CpuBackend::max_pool2d(const Tensor& in, const Tensor& out, const Tensor& indices, const Pool2dParams& p) {
  if (in.dtype() == kUInt8) {  // quantized models' activations
    if (!indices.defined() && windows_2x2_inside(in, out, p)) return max_pool_2x2_u8(in, out);
    return max_pool_typed<uint8_t>(in, out, indices, p);
  }
  if (vector_max_pool_applies(in, out, p)) return vector_max_pool(in, out, indices);
  EMBER_DISPATCH_FLOATING(in.dtype(), "max_pool2d", [&] { max_pool_typed<scalar_t>(in, out, indices, p); });
}
// grad_out, indices [N, C, Ho, Wo] -> grad_in [N, C, H, W] (zeroed here)
void CpuBackend::max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, const Tensor& grad_in,
                                     const Pool2dParams& p) {
  const int64_t H = grad_in.size(2), W = grad_in.size(3);
  // Indices come from max_pool2d; they are checked anyway, inside the threads' loops (a
  // separate serial pass cost a third of this kernel), and the first bad one is reported after.
  std::atomic<int64_t> bad{-1};
  if (index_kind(indices) == IndexKind::kTaps) {
    const auto* taps = static_cast<const uint8_t*>(indices.data_ptr());
    if (windows_2x2_inside(grad_in, grad_out, p))
      max_pool_scatter(grad_out, grad_in, Recorded2x2Taps{taps, W}, bad);
    else
      max_pool_scatter(grad_out, grad_in, RecordedTaps(taps, H, W, grad_out.size(2), grad_out.size(3), p), bad);
    EMBER_CHECK(bad.load() < 0, "max_pool2d_backward: tap ", bad.load() < 0 ? 0 : int{taps[bad.load()]}, " of output ",
                bad.load(), " is not inside both its ", p.kernel[0], "x", p.kernel[1], " window and the ", H, "x", W,
                " input");
    return;
  }
  const auto* positions = static_cast<const int64_t*>(indices.data_ptr());
  max_pool_scatter(grad_out, grad_in, RecordedPositions{positions, H * W}, bad);
  EMBER_CHECK(bad.load() < 0, "max_pool2d_backward: index ", bad.load() < 0 ? 0 : positions[bad.load()],
              " is outside a plane of ", H * W, " elements");
}

// in [N, C, H, W] -> out [N, C, Ho, Wo]
void CpuBackend::avg_pool2d(const Tensor& in, const Tensor& out, const Pool2dParams& p) {
  EMBER_DISPATCH_FLOATING(in.dtype(), "avg_pool2d", [&] {
    average_pool<scalar_t, false>(in, out, [&](int64_t oh, int64_t ow, int64_t H, int64_t W, int64_t, int64_t) {
      return avg_window(oh, ow, H, W, p);
    });
  });
}
// grad_out [N, C, Ho, Wo] -> grad_in [N, C, H, W] (zeroed here)
void CpuBackend::avg_pool2d_backward(const Tensor& grad_out, const Tensor& grad_in, const Pool2dParams& p) {
  fill(grad_in, 0);
  EMBER_DISPATCH_FLOATING(grad_in.dtype(), "avg_pool2d_backward", [&] {
    average_pool<scalar_t, true>(
        grad_in, grad_out,
        [&](int64_t oh, int64_t ow, int64_t H, int64_t W, int64_t, int64_t) { return avg_window(oh, ow, H, W, p); });
  });
}
// in [N, C, H, W] -> out [N, C, Ho, Wo]
void CpuBackend::adaptive_avg_pool2d(const Tensor& in, const Tensor& out) {
  EMBER_DISPATCH_FLOATING(in.dtype(), "adaptive_avg_pool2d",
                          [&] { average_pool<scalar_t, false>(in, out, adaptive_window); });
}
// grad_out [N, C, Ho, Wo] -> grad_in [N, C, H, W] (zeroed here)
void CpuBackend::adaptive_avg_pool2d_backward(const Tensor& grad_out, const Tensor& grad_in) {
  fill(grad_in, 0);
  EMBER_DISPATCH_FLOATING(grad_in.dtype(), "adaptive_avg_pool2d_backward",
                          [&] { average_pool<scalar_t, true>(grad_in, grad_out, adaptive_window); });
}

}  // namespace ember::cpu
