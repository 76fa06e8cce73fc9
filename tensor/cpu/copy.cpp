// Copy with dtype conversion, and fill.
#include <cstring>
#include <limits>

#include "tensor/cpu/kernels.h"
#include "tensor/cpu/loops.h"

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
    const double x = static_cast<double>(static_cast<opmath_t<From>>(v));
    if (!(x == x)) return To(0);
    if (x <= static_cast<double>(std::numeric_limits<To>::lowest())) return std::numeric_limits<To>::lowest();
    if (x >= static_cast<double>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(x);
  } else {
    return static_cast<To>(static_cast<opmath_t<From>>(v));
  }
}

}  // namespace

// dst[i] = To(src[i])   (same shape; src may have zero strides)
void copy(const Tensor& src, const Tensor& dst) {
  if (dst.numel() == 0) return;
  if (src.dtype() == dst.dtype() && src.is_contiguous() && dst.is_contiguous()) {
    const size_t nbytes = dst.nbytes();
    char* d = static_cast<char*>(dst.data_ptr());
    const char* s = static_cast<const char*>(src.data_ptr());
    parallel_for(0, static_cast<int64_t>(nbytes), kGrainSize * 8, [&](int64_t b, int64_t e) {
      std::memcpy(d + b, s + b, static_cast<size_t>(e - b));
    });
    return;
  }
  StridedLoop<2> loop({&dst, &src});
  EMBER_DISPATCH_ALL(dst.dtype(), "copy", [&] {
    using To = scalar_t;
    EMBER_DISPATCH_ALL(src.dtype(), "copy", [&] {
      using From = scalar_t;
      loop.run([](const std::array<char*, 2>& p, const std::array<int64_t, 2>& st, int64_t n) {
        if (st[0] == sizeof(To) && st[1] == sizeof(From)) {
          To* d = reinterpret_cast<To*>(p[0]);
          const From* s = reinterpret_cast<const From*>(p[1]);
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
void fill(const Tensor& dst, const Scalar& value) {
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
