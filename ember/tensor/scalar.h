#pragma once
// A number that is not a tensor: the `2` in `x * 2`. It remembers whether it was
// written as a bool, an integer or a floating value, since type promotion depends on it.
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ember/tensor/dtype.h"
#include "ember/tensor/error.h"

namespace ember {

namespace detail {
// double -> integer T where C++'s cast is undefined (NaN, inf, out of range): saturated to T's
// range, NaN to 0, as ember's tensor conversions do (tensor/cpu/copy.cpp).
template <class T>
T saturating_cast(double x) {
  if (!(x == x)) return T(0);
  if (x <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
  if (x >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(x);
}
}  // namespace detail

class Scalar {
 public:
  enum class Kind : int8_t { Bool, Int, Float };
  Scalar() : Scalar(int64_t{0}) {}
  Scalar(bool v) : kind_(Kind::Bool), i_(v), d_(v) {}  // NOLINT: implicit by design
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Scalar(T v) : kind_(Kind::Int), i_(static_cast<int64_t>(v)), d_(static_cast<double>(v)) {}  // NOLINT
  Scalar(double v) : kind_(Kind::Float), i_(detail::saturating_cast<int64_t>(v)), d_(v) {}    // NOLINT
  Scalar(float v) : Scalar(static_cast<double>(v)) {}                                         // NOLINT
  Scalar(Half v) : Scalar(static_cast<double>(static_cast<float>(v))) {}                      // NOLINT
  Scalar(BFloat16 v) : Scalar(static_cast<double>(static_cast<float>(v))) {}                  // NOLINT

  Kind kind() const { return kind_; }
  bool is_floating() const { return kind_ == Kind::Float; }
  bool is_integral() const { return kind_ == Kind::Int; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  double to_double() const { return d_; }
  int64_t to_int64() const { return i_; }
  bool to_bool() const { return kind_ == Kind::Float ? d_ != 0.0 : i_ != 0; }
  // The value converted to T (exact for integers, which never pass through double).
  template <class T>
  T to() const {
    if constexpr (std::is_same_v<T, bool>)
      return to_bool();
    else if constexpr (std::is_integral_v<T>)
      return kind_ == Kind::Float ? detail::saturating_cast<T>(d_) : static_cast<T>(i_);
    else
      return static_cast<T>(static_cast<opmath_t<T>>(kind_ == Kind::Float ? d_ : static_cast<double>(i_)));
  }
  // LibTorch's names: x.item().toFloat(). toInt and toLong throw when the value does not fit
  // (a float is truncated toward zero first), as LibTorch's checked conversions do.
  double toDouble() const { return to_double(); }
  float toFloat() const { return static_cast<float>(to_double()); }
  bool toBool() const { return to_bool(); }
  int64_t toLong() const { return checked_integer<int64_t>("toLong"); }
  int toInt() const { return checked_integer<int>("toInt"); }
  // The dtype PyTorch gives a tensor made from this number alone.
  DType default_dtype() const {
    return kind_ == Kind::Bool ? kBool : kind_ == Kind::Int ? kInt64 : default_float_dtype();
  }

 private:
  template <class I>
  I checked_integer(const char* op) const {
    if (kind_ != Kind::Float) {
      EMBER_CHECK(i_ >= std::numeric_limits<I>::min() && i_ <= std::numeric_limits<I>::max(), "Scalar::", op,
                  ": value ", i_, " cannot be converted without overflow");
      return static_cast<I>(i_);
    }
    // In double, min and max + 1 (-min) are exact; NaN fails the test.
    const double t = std::trunc(d_), lo = static_cast<double>(std::numeric_limits<I>::min());
    EMBER_CHECK(t >= lo && t < -lo, "Scalar::", op, ": value ", d_, " cannot be converted without overflow");
    return static_cast<I>(t);
  }
  Kind kind_;
  int64_t i_;
  double d_;
};

}  // namespace ember
