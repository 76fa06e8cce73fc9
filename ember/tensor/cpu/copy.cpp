// Copy with dtype conversion, and fill.
#include <cstdint>
#include <cstring>
#ifdef __AVX2__
#include <immintrin.h>
#endif
#include <limits>

#include "ember/tensor/cpu/cpu_backend.h"
#include "ember/tensor/cpu/loops.h"
#include "ember/tensor/cpu/transpose8x8.h"
#include "ember/tensor/cpu/vec_half.h"

namespace ember::cpu {
namespace {

template <class To, class From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return static_cast<opmath_t<From>>(v) != opmath_t<From>(0);
  } else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) {
    return To(static_cast<float>(static_cast<opmath_t<From>>(v)));
  } else if constexpr (std::is_integral_v<To> && !std::is_integral_v<From>) {
    // Float to integer saturates and maps NaN to 0, where C++ leaves it undefined.
    return detail::saturating_cast<To>(static_cast<double>(static_cast<opmath_t<From>>(v)));
  } else {
    return static_cast<To>(static_cast<opmath_t<From>>(v));
  }
}

// float16 / bfloat16 <-> float32 of contiguous runs (what autocast's casts are), 8 at a time, and
// bool to the other arithmetic types and 16-bit floats; returns false for other pairs, left to convert<>.
template <class To, class From>
bool convert_run_vectorized(To* d, const From* s, int64_t n) {
  constexpr bool kTo16 = std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>;
  constexpr bool kFrom16 = std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>;
  if constexpr (std::is_same_v<To, float> && kFrom16) {
    widen_run(s, n, d);
    return true;
  } else if constexpr (kTo16 && std::is_same_v<From, float>) {
    narrow_run(s, n, d);
    return true;
  } else if constexpr (std::is_same_v<From, bool> && std::is_arithmetic_v<To>) {
    // a mask read as its bytes (0 or 1): GCC 12 vectorizes the widening of uint8_t, not of bool
    const auto* b = reinterpret_cast<const uint8_t*>(s);
    for (int64_t i = 0; i < n; ++i) d[i] = static_cast<To>(b[i]);
    return true;
  } else if constexpr (std::is_same_v<From, bool> && kTo16) {
    // the same for 16-bit floats: 0 or 1 is the byte times 1.0's bit pattern
    const auto* b = reinterpret_cast<const uint8_t*>(s);
    const uint16_t one = To(1.0f).bits;
    auto* bits = reinterpret_cast<uint16_t*>(d);
    for (int64_t i = 0; i < n; ++i) bits[i] = static_cast<uint16_t>(b[i] * one);
    return true;
  }
  return false;
}

// A transposing copy: dst is contiguous along loop dim 0, src along loop dim 1. Walking
// either one in order strides through the other a cache line per element, so the two dims
// are walked in kTile x kTile tiles that stay in L1. 16 beats 32 and 64 here: rows of a
// large power-of-two matrix map to the same L1 set, and 32 of them overflow its 8 ways.
constexpr int64_t kTile = 16;

bool is_transposing(const StridedLoop<2>& loop, size_t to_size, size_t from_size) {
  return loop.sizes.size() >= 2 && loop.strides[0][0] == static_cast<int64_t>(to_size) &&
         loop.strides[1][1] == static_cast<int64_t>(from_size) && loop.strides[0][1] != static_cast<int64_t>(from_size);
}

template <class To, class From>
void tiled_copy(const StridedLoop<2>& loop) {
  const int64_t n0 = loop.sizes[0], n1 = loop.sizes[1];
  const int64_t s0 = loop.strides[0][1], d1 = loop.strides[1][0], s1 = loop.strides[1][1];
  const int64_t outer = loop.numel / (n0 * n1), tiles1 = (n1 + kTile - 1) / kTile;
  parallel_for(0, outer * tiles1, std::max<int64_t>(1, kGrainSize / (kTile * n0)), [&](int64_t b, int64_t e) {
    for (int64_t w = b; w < e; ++w) {
      const int64_t t1 = w % tiles1;
      char* dp = loop.base[0];
      const char* sp = loop.base[1];
      for (size_t d = 2, rem = static_cast<size_t>(w / tiles1); d < loop.sizes.size(); ++d) {
        const int64_t i = static_cast<int64_t>(rem) % loop.sizes[d];
        rem /= static_cast<size_t>(loop.sizes[d]);
        dp += i * loop.strides[d][0];
        sp += i * loop.strides[d][1];
      }
      const int64_t i1_end = std::min(n1, (t1 + 1) * kTile);
      for (int64_t i0b = 0; i0b < n0; i0b += kTile) {
        const int64_t i0_end = std::min(n0, i0b + kTile);
#ifdef __AVX2__
        // Same 4-byte type, element-aligned strides: move full 8x8 blocks in registers.
        constexpr bool kBits32 = std::is_same_v<To, From> && sizeof(To) == 4;
        if constexpr (kBits32) {
          if (s0 % 4 == 0 && d1 % 4 == 0 && i0_end - i0b == kTile && i1_end - t1 * kTile == kTile) {
            for (int64_t i1 = t1 * kTile; i1 < i1_end; i1 += 8)
              for (int64_t i0 = i0b; i0 < i0_end; i0 += 8)
                transpose8x8_32(reinterpret_cast<const float*>(sp + i0 * s0 + i1 * s1), s0 / 4,
                                reinterpret_cast<float*>(dp + i1 * d1 + i0 * 4), d1 / 4);
            continue;
          }
        }
#endif
        for (int64_t i1 = t1 * kTile; i1 < i1_end; ++i1) {
          To* drow = reinterpret_cast<To*>(dp + i1 * d1);  // d0 == sizeof(To): a plain array
          const char* scol = sp + i1 * s1;
          for (int64_t i0 = i0b; i0 < i0_end; ++i0)
            drow[i0] = convert<To>(*reinterpret_cast<const From*>(scol + i0 * s0));
        }
      }
    }
  });
}

}  // namespace

// dst[i] = To(src[i])   (same shape; src may have zero strides)
void CpuBackend::copy(const Tensor& src, const Tensor& dst) {
  if (dst.numel() == 0) return;
  if (src.dtype() == dst.dtype() && src.is_contiguous() && dst.is_contiguous()) {
    const size_t nbytes = dst.nbytes();
    char* d = static_cast<char*>(dst.data_ptr());
    const char* s = static_cast<const char*>(src.data_ptr());
    parallel_for(0, static_cast<int64_t>(nbytes), kGrainSize * 8,
                 [&](int64_t b, int64_t e) { std::memcpy(d + b, s + b, static_cast<size_t>(e - b)); });
    return;
  }
  StridedLoop<2> loop({&dst, &src});
  EMBER_DISPATCH_ALL(dst.dtype(), "copy", [&] {
    using To = scalar_t;
    EMBER_DISPATCH_ALL(src.dtype(), "copy", [&] {
      using From = scalar_t;
      if (is_transposing(loop, sizeof(To), sizeof(From))) return tiled_copy<To, From>(loop);
      loop.run([](const std::array<char*, 2>& p, const std::array<int64_t, 2>& st, int64_t n) {
        if (st[0] == sizeof(To) && st[1] == sizeof(From)) {
          To* d = reinterpret_cast<To*>(p[0]);
          const From* s = reinterpret_cast<const From*>(p[1]);
          if (!convert_run_vectorized(d, s, n))
            for (int64_t i = 0; i < n; ++i) d[i] = convert<To>(s[i]);
        } else {
          for (int64_t i = 0; i < n; ++i)
            *reinterpret_cast<To*>(p[0] + i * st[0]) = convert<To>(*reinterpret_cast<const From*>(p[1] + i * st[1]));
        }
      });
    });
  });
}

// dst[i] = value
void CpuBackend::fill(const Tensor& dst, const Scalar& value) {
  StridedLoop<1> loop({&dst});
  EMBER_DISPATCH_ALL(dst.dtype(), "fill", [&] {
    const scalar_t v = value.to<scalar_t>();
    loop.run([v](const std::array<char*, 1>& p, const std::array<int64_t, 1>& st, int64_t n) {
      if (st[0] == sizeof(scalar_t)) {
        scalar_t* d = reinterpret_cast<scalar_t*>(p[0]);
        for (int64_t i = 0; i < n; ++i) d[i] = v;
      } else {
        for (int64_t i = 0; i < n; ++i) *reinterpret_cast<scalar_t*>(p[0] + i * st[0]) = v;
      }
    });
  });
}

}  // namespace ember::cpu
