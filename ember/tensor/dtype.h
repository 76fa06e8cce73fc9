#pragma once
// Element types, their C++ counterparts, type promotion and the dispatch macros that
// turn a runtime DType into a compile-time scalar_t inside kernels.
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>

#include "ember/tensor/error.h"
#include "ember/tensor/half.h"

namespace ember {

enum class DType : int8_t { Bool, UInt8, Int8, Int32, Int64, Float16, BFloat16, Float32, Float64 };
constexpr int kNumDTypes = 9;

constexpr DType kBool = DType::Bool;
constexpr DType kUInt8 = DType::UInt8;
constexpr DType kInt8 = DType::Int8;
constexpr DType kInt32 = DType::Int32;
constexpr DType kInt64 = DType::Int64;
constexpr DType kFloat16 = DType::Float16;
constexpr DType kBFloat16 = DType::BFloat16;
constexpr DType kFloat32 = DType::Float32;
constexpr DType kFloat64 = DType::Float64;
// LibTorch spellings.
constexpr DType kByte = kUInt8, kChar = kInt8, kInt = kInt32, kLong = kInt64;
constexpr DType kHalf = kFloat16, kFloat = kFloat32, kDouble = kFloat64;
constexpr DType kU8 = kUInt8, kI8 = kInt8, kI32 = kInt32, kI64 = kInt64, kF16 = kFloat16, kF32 = kFloat32,
                kF64 = kFloat64;

size_t element_size(DType t);
const char* dtype_name(DType t);  // "float32", as PyTorch names them without the "torch." prefix
inline bool is_floating(DType t) { return t >= DType::Float16; }
inline bool is_integral(DType t, bool include_bool) {
  return (t >= DType::UInt8 && t <= DType::Int64) || (include_bool && t == DType::Bool);
}
// The smallest dtype that holds both (PyTorch's promote_types). ember has no int16, so
// uint8 with int8 promotes to int32 where PyTorch would give int16.
DType promote_types(DType a, DType b);
inline DType default_float_dtype() { return kFloat32; }
inline std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

template <class T>
struct dtype_of;
#define EMBER_DTYPE_OF(T, D)          \
  template <>                         \
  struct dtype_of<T> {                \
    static constexpr DType value = D; \
  };
EMBER_DTYPE_OF(bool, kBool)
EMBER_DTYPE_OF(uint8_t, kUInt8)
EMBER_DTYPE_OF(int8_t, kInt8)
EMBER_DTYPE_OF(int32_t, kInt32)
EMBER_DTYPE_OF(int64_t, kInt64)
EMBER_DTYPE_OF(Half, kFloat16)
EMBER_DTYPE_OF(BFloat16, kBFloat16)
EMBER_DTYPE_OF(float, kFloat32)
EMBER_DTYPE_OF(double, kFloat64)
#undef EMBER_DTYPE_OF

// The type kernels compute in: float for the 16-bit floats, the type itself otherwise.
// clang-format off
template <class T> struct opmath { using type = T; };
template <> struct opmath<Half> { using type = float; };
template <> struct opmath<BFloat16> { using type = float; };
template <class T> using opmath_t = typename opmath<T>::type;

// The type reductions accumulate in: double for floats, int64 for integers.
template <class T> struct acc { using type = double; };
template <> struct acc<bool> { using type = int64_t; };
template <> struct acc<uint8_t> { using type = int64_t; };
template <> struct acc<int8_t> { using type = int64_t; };
template <> struct acc<int32_t> { using type = int64_t; };
template <> struct acc<int64_t> { using type = int64_t; };
template <class T> using acc_t = typename acc<T>::type;
// clang-format on

}  // namespace ember

// Dispatch: EMBER_DISPATCH_ALL(dtype, "op", [&] { ... scalar_t ... });
#define EMBER_DISPATCH_CASE(D, T, ...) \
  case D: {                            \
    using scalar_t = T;                \
    return __VA_ARGS__();              \
  }
#define EMBER_DISPATCH_FLOAT_CASES(...)                                    \
  EMBER_DISPATCH_CASE(::ember::DType::Float32, float, __VA_ARGS__)         \
  EMBER_DISPATCH_CASE(::ember::DType::Float64, double, __VA_ARGS__)        \
  EMBER_DISPATCH_CASE(::ember::DType::Float16, ::ember::Half, __VA_ARGS__) \
  EMBER_DISPATCH_CASE(::ember::DType::BFloat16, ::ember::BFloat16, __VA_ARGS__)
#define EMBER_DISPATCH_INT_CASES(...)                              \
  EMBER_DISPATCH_CASE(::ember::DType::UInt8, uint8_t, __VA_ARGS__) \
  EMBER_DISPATCH_CASE(::ember::DType::Int8, int8_t, __VA_ARGS__)   \
  EMBER_DISPATCH_CASE(::ember::DType::Int32, int32_t, __VA_ARGS__) \
  EMBER_DISPATCH_CASE(::ember::DType::Int64, int64_t, __VA_ARGS__)

#define EMBER_DISPATCH_ALL(DTYPE, NAME, ...)                         \
  [&] {                                                              \
    switch (DTYPE) {                                                 \
      EMBER_DISPATCH_FLOAT_CASES(__VA_ARGS__)                        \
      EMBER_DISPATCH_INT_CASES(__VA_ARGS__)                          \
      EMBER_DISPATCH_CASE(::ember::DType::Bool, bool, __VA_ARGS__)   \
    }                                                                \
    throw ::ember::Error(std::string(NAME) + ": unsupported dtype"); \
  }()

#define EMBER_DISPATCH_NUMERIC(DTYPE, NAME, ...)                                                \
  [&] {                                                                                         \
    switch (DTYPE) {                                                                            \
      EMBER_DISPATCH_FLOAT_CASES(__VA_ARGS__)                                                   \
      EMBER_DISPATCH_INT_CASES(__VA_ARGS__)                                                     \
      default:                                                                                  \
        break;                                                                                  \
    }                                                                                           \
    throw ::ember::Error(::ember::detail::concat(NAME, ": not implemented for dtype ", DTYPE)); \
  }()

#define EMBER_DISPATCH_FLOATING(DTYPE, NAME, ...)                                               \
  [&] {                                                                                         \
    switch (DTYPE) {                                                                            \
      EMBER_DISPATCH_FLOAT_CASES(__VA_ARGS__)                                                   \
      default:                                                                                  \
        break;                                                                                  \
    }                                                                                           \
    throw ::ember::Error(::ember::detail::concat(NAME, ": not implemented for dtype ", DTYPE)); \
  }()
