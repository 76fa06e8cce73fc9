#pragma once
// 16-bit floating types. Both store raw bits and convert to float for arithmetic:
// CPU kernels on float16/bfloat16 compute in float32 internally, as PyTorch's do.
// Conversions from float round to nearest, ties to even (PyTorch's rule).
#include <cstdint>
#include <cstring>
#include <ostream>

namespace ember {

namespace detail {
inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// float -> IEEE binary16, round to nearest even (after F. Giesen's public-domain method). Each
// case is computed and one chosen, without branches, so that the loops of the CPU kernels
// over float16 tensors vectorize (with branches they ran 17x slower than bfloat16's).
inline uint16_t float_to_half_bits(float value) {
  const uint32_t all = float_bits(value);
  const uint32_t sign = (all >> 16) & 0x8000u;
  const uint32_t f = all & 0x7FFFFFFFu;
  const uint32_t inf_or_nan = f > 0x7F800000u ? 0x7E00u : 0x7C00u;  // NaN stays a (quiet) NaN
  // Below 2^-14 (half subnormal or zero): adding 0.5 aligns the subnormal bits at the bottom of
  // the mantissa, and the FPU rounds.
  const uint32_t magic = 126u << 23;
  const uint32_t subnormal = float_bits(bits_float(f) + bits_float(magic)) - magic;
  const uint32_t mant_odd = (f >> 13) & 1u;
  // (a carry into the exponent gives inf at 65520)
  const uint32_t normal = (f + (static_cast<uint32_t>(15 - 127) << 23) + 0xFFFu + mant_odd) >> 13;
  const uint32_t out = f >= 0x47800000u ? inf_or_nan : f < 0x38800000u ? subnormal : normal;  // >= 65536: inf, NaN
  return static_cast<uint16_t>(out | sign);
}

inline float half_bits_to_float(uint16_t h) {
  const uint32_t shifted_exp = 0x7C00u << 13;
  const uint32_t magnitude = static_cast<uint32_t>(h & 0x7FFFu) << 13;
  const uint32_t exp = shifted_exp & magnitude;
  const uint32_t normal = magnitude + ((127u - 15u) << 23);
  const uint32_t inf_nan = normal + ((128u - 16u) << 23);
  // zero / subnormal: renormalized through the FPU
  const uint32_t subnormal = float_bits(bits_float(normal + (1u << 23)) - bits_float(113u << 23));
  const uint32_t o = exp == shifted_exp ? inf_nan : exp == 0 ? subnormal : normal;
  return bits_float(o | (static_cast<uint32_t>(h & 0x8000u) << 16));
}

inline uint16_t float_to_bfloat16_bits(float value) {
  uint32_t f = float_bits(value);
  if ((f & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((f >> 16) | 0x0040u);  // quiet NaN
  f += 0x7FFFu + ((f >> 16) & 1u);
  return static_cast<uint16_t>(f >> 16);
}
inline float bfloat16_bits_to_float(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }
}  // namespace detail

struct Half {
  uint16_t bits = 0;
  Half() = default;
  Half(float f) : bits(detail::float_to_half_bits(f)) {}  // NOLINT: implicit like c10::Half
  static Half from_bits(uint16_t b) {
    Half h;
    h.bits = b;
    return h;
  }
  operator float() const { return detail::half_bits_to_float(bits); }  // NOLINT
};

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float f) : bits(detail::float_to_bfloat16_bits(f)) {}  // NOLINT
  static BFloat16 from_bits(uint16_t b) {
    BFloat16 h;
    h.bits = b;
    return h;
  }
  operator float() const { return detail::bfloat16_bits_to_float(bits); }  // NOLINT
};

inline std::ostream& operator<<(std::ostream& os, Half h) { return os << static_cast<float>(h); }
inline std::ostream& operator<<(std::ostream& os, BFloat16 h) { return os << static_cast<float>(h); }

}  // namespace ember
