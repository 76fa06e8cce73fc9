#pragma once
// The random-arguments tests' harness (test_random_arguments*.cpp): Draw hands out awkward
// arguments from a seeded generator, and expect_only_ember_errors calls each named op many times
// with fresh draws, failing on anything but a return or an ember::Error.
#include <algorithm>
#include <cstdlib>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "helpers.h"

namespace ember::testing {

class Draw {
 public:
  Draw(uint64_t seed, Device device) : rng_(seed), device_(device) {}

  int64_t below(int64_t n) { return std::uniform_int_distribution<int64_t>(0, n - 1)(rng_); }
  bool coin() { return below(2) == 0; }

  // A dim, an index or a size: mostly small, sometimes just outside a tensor's range, sometimes
  // absurd. (Not merely large: a padding of 2^31 asks, rightly, for a huge output, which only
  // the machine's memory refuses; values near int64's limits must be refused by the op.)
  int64_t integer() {
    static const int64_t awkward[] = {-1,
                                      -2,
                                      -3,
                                      -5,
                                      4,
                                      5,
                                      7,
                                      int64_t{1} << 62,
                                      std::numeric_limits<int64_t>::max(),
                                      std::numeric_limits<int64_t>::min(),
                                      -(int64_t{1} << 62)};
    if (below(4) != 0) return below(4);  // 0..3
    return awkward[below(sizeof awkward / sizeof awkward[0])];
  }
  double real() {
    static const double awkward[] = {0.0,
                                     -1.0,
                                     0.5,
                                     2.0,
                                     1e300,
                                     -1e-300,
                                     std::numeric_limits<double>::infinity(),
                                     std::numeric_limits<double>::quiet_NaN()};
    return awkward[below(sizeof awkward / sizeof awkward[0])];
  }
  Shape shape(int64_t max_dims = 4) {
    Shape s(static_cast<size_t>(below(max_dims + 1)));
    for (auto& d : s) d = below(4);  // 0..3: empty and one-sized dimensions included
    return s;
  }
  Shape dims() {  // a list of dims for a reduction or a permutation
    Shape d(static_cast<size_t>(below(3)));
    for (auto& v : d) v = integer();
    return d;
  }
  DType dtype() {
    static const DType all[] = {kFloat32, kFloat32, kFloat32, kFloat64, kFloat16, kBFloat16,
                                kInt64,   kInt32,   kInt8,    kUInt8,   kBool};
    return all[below(sizeof all / sizeof all[0])];
  }
  // A tensor as a caller might hand one over: contiguous or a transposed / expanded view,
  // occasionally undefined, and one time in six holding the dtype's extreme values (so that
  // integer arithmetic must wrap and float-to-integer conversions must not overflow).
  Tensor tensor(const Shape& s, DType dt) {
    if (below(40) == 0) return Tensor();
    Tensor t = below(6) == 0     ? extremes(s, dt)
               : is_floating(dt) ? randn(s).to(device_, dt)
                                 : randint(0, 3, s).to(device_, dt);
    if (t.dim() >= 2 && coin()) t = t.transpose(0, 1).contiguous().transpose(0, 1);
    if (below(8) == 0 && t.dim() >= 1 && t.size(0) == 1) {
      Shape wider = t.sizes();
      wider[0] = 3;
      t = t.expand(wider);
    }
    return t;
  }
  Tensor tensor() { return tensor(shape(), dtype()); }
  // Values drawn from the ends of dt's range: inf, NaN, -0, huge, subnormal; INT_MIN, INT_MAX.
  Tensor extremes(const Shape& s, DType dt) {
    const double inf = std::numeric_limits<double>::infinity();
    Tensor table;
    if (is_floating(dt)) {
      table = ember::tensor<double>(
          {inf, -inf, std::numeric_limits<double>::quiet_NaN(), -0.0, 3e38, -3e38, 1e-40, 7e4, -1.0, 0.5});
    } else if (dt == kBool) {
      table = ember::tensor<int64_t>({0, 1});
    } else {
      using L32 = std::numeric_limits<int32_t>;
      using L64 = std::numeric_limits<int64_t>;
      const int64_t lo = dt == kUInt8 ? 0 : dt == kInt8 ? -128 : dt == kInt32 ? L32::min() : L64::min();
      const int64_t hi = dt == kUInt8 ? 255 : dt == kInt8 ? 127 : dt == kInt32 ? L32::max() : L64::max();
      table = ember::tensor<int64_t>({lo, hi, lo + 1, hi - 1, 0, 1, dt == kUInt8 ? 2 : -1});
    }
    const Tensor picks = randint(0, table.numel(), {checked_numel(s, "extremes")});
    return table.index_select(0, picks).view(s).to(device_, dt);
  }
  Tensor floating() { return tensor(shape(), below(5) == 0 ? dtype() : kFloat32); }
  Tensor index(int64_t bound) {  // an index tensor, mostly in range, sometimes absurdly out of it
    Shape s = shape(2);
    if (below(10) == 0) return extremes(s, kInt64);
    Tensor t = randint(-1, std::max<int64_t>(bound + 1, 1), s).to(device_, below(6) == 0 ? dtype() : kInt64);
    return t;
  }
  // `s` most of the time; otherwise one dim changed (to 0, or one more), so that shapes which
  // should agree often do and sometimes just fail to.
  Shape near(Shape s) {
    if (!s.empty() && below(4) == 0) s[static_cast<size_t>(below(static_cast<int64_t>(s.size())))] = coin() ? 0 : 5;
    return s;
  }
  Int2 pair() { return {integer(), integer()}; }
  Int2 positive_pair() { return {1 + below(3), 1 + below(3)}; }
  Device device() const { return device_; }

 private:
  std::mt19937_64 rng_;
  Device device_;  // where the drawn tensors live
};

using Call = std::function<void(Draw&)>;
using Calls = std::vector<std::pair<std::string, Call>>;

// Every call's draws on `device`, 300 per call. By hand: EMBER_RANDOM_DRAWS=N draws N (a longer
// search), EMBER_RANDOM_FIRST=K starts at draw K, EMBER_RANDOM_ONLY=name runs that call only,
// EMBER_RANDOM_VERBOSE=1 names each draw before it runs and counts those that returned rather
// than threw (whether the draws reach the kernels). The seed of a draw is the call's name hashed
// with its number: a failure names both.
void expect_only_ember_errors(const Calls& calls, Device device);

}  // namespace ember::testing
