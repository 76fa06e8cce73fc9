// Reductions over the rows of a [K, R] view. Three schedules (Note [Reduction schedules]):
//  - many rows: one thread per block of rows, each row reduced serially;
//  - few long rows (e.g. a full sum): each row split across threads, partials combined;
//  - reduced dim outermost (sR == K, sK == 1, e.g. a column sum of a contiguous matrix):
//    a vector of K accumulators swept over the R rows, so memory is read in order.
// Floats accumulate in double, integers in int64 (wrapping), as acc_t<T> says.
#include <cmath>
#include <limits>
#include <vector>

#ifdef __AVX2__
#include <immintrin.h>
#endif

#include "ember/tensor/cpu/cpu_backend.h"
#include "ember/tensor/parallel.h"

#ifdef EMBER_WITH_OPENMP
#define EMBER_SIMD_REDUCTION_SUM(var) _Pragma("omp simd reduction(+ : a)")  // var must be `a`
#else
#define EMBER_SIMD_REDUCTION_SUM(var)
#endif

namespace ember::cpu {
namespace {

// A contiguous float sum: blocks of 1024 summed in float (vectorized, 8 lanes, so each
// lane adds ~128 numbers), the block sums added in double. As fast as reading the memory
// and more accurate than one float accumulator.
inline double sum_floats(const float* p, int64_t n) {
  double total = 0;
  for (int64_t b = 0; b < n; b += 1024) {
    const int64_t e = std::min(n, b + 1024);
    float a = 0;
    EMBER_SIMD_REDUCTION_SUM(a)
    for (int64_t i = b; i < e; ++i) a += p[i];
    total += a;
  }
  return total;
}

// A contiguous sum of bytes (a bool mask's count, or uint8 values): vpsadbw adds each 8 bytes into
// a 64-bit lane, 32 bytes per instruction; the widening loop below it takes 4x as long.
inline uint64_t sum_bytes(const uint8_t* p, int64_t n) {
  uint64_t s = 0;
  int64_t i = 0;
#ifdef __AVX2__
  __m256i acc = _mm256_setzero_si256();
  for (; i + 32 <= n; i += 32)
    acc = _mm256_add_epi64(
        acc, _mm256_sad_epu8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)), _mm256_setzero_si256()));
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc);
  s = lanes[0] + lanes[1] + lanes[2] + lanes[3];
#endif
  for (; i < n; ++i) s += p[i];
  return s;
}

// A contiguous float max (or min): eight lanes of vmaxps, and a separate flag for NaN, which
// wins, as ExtremeOp's step says. 20x the scalar loop, whose NaN test keeps it from vectorizing.
template <bool kMax>
inline float extreme_floats(const float* p, int64_t n) {
  float best = kMax ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  bool nan = false;
  int64_t i = 0;
#ifdef __AVX2__
  __m256 acc = _mm256_set1_ps(best), nans = _mm256_setzero_ps();
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(p + i);
    acc = kMax ? _mm256_max_ps(acc, v) : _mm256_min_ps(acc, v);
    nans = _mm256_or_ps(nans, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  for (float v : lanes) best = kMax ? std::max(best, v) : std::min(best, v);
  nan = _mm256_movemask_ps(nans) != 0;
#endif
  for (; i < n; ++i) {
    nan = nan || p[i] != p[i];
    best = kMax ? std::max(best, p[i]) : std::min(best, p[i]);
  }
  return nan ? std::numeric_limits<float>::quiet_NaN() : best;
}

template <class Out, class A>
inline Out cast_out(A v) {
  if constexpr (std::is_same_v<Out, Half> || std::is_same_v<Out, BFloat16>)
    return Out(static_cast<float>(v));
  else
    return static_cast<Out>(v);
}

template <class T>
struct SumOp {
  using Acc = acc_t<T>;
  static Acc init() { return Acc(0); }
  static Acc step(Acc a, T x) {
    if constexpr (std::is_integral_v<Acc>)
      return Acc(uint64_t(a) + uint64_t(Acc(x)));
    else
      return a + Acc(opmath_t<T>(x));
  }
  // Partial results are Acc (int64, double or float), not T: passing them through step would
  // narrow them to T first (a bool partial count became 1, a float16 one lost its low bits).
  static Acc combine(Acc a, Acc b) {
    if constexpr (std::is_integral_v<Acc>)
      return Acc(uint64_t(a) + uint64_t(b));
    else
      return a + b;
  }
};
template <class T>
struct ProdOp {
  using Acc = acc_t<T>;
  static Acc init() { return Acc(1); }
  static Acc step(Acc a, T x) {
    if constexpr (std::is_integral_v<Acc>)
      return Acc(uint64_t(a) * uint64_t(Acc(x)));
    else
      return a * Acc(opmath_t<T>(x));
  }
  static Acc combine(Acc a, Acc b) {
    if constexpr (std::is_integral_v<Acc>)
      return Acc(uint64_t(a) * uint64_t(b));
    else
      return a * b;
  }
};
template <class T, bool kMax>
struct ExtremeOp {  // NaN propagates
  using Acc = opmath_t<T>;
  static Acc init() {
    if constexpr (std::is_same_v<T, bool>)
      return !kMax;
    else if constexpr (std::numeric_limits<Acc>::has_infinity)
      return kMax ? -std::numeric_limits<Acc>::infinity() : std::numeric_limits<Acc>::infinity();
    else
      return kMax ? std::numeric_limits<Acc>::lowest() : std::numeric_limits<Acc>::max();
  }
  static Acc step(Acc a, T xv) {
    const Acc x = Acc(xv);
    return ((kMax ? x > a : x < a) || x != x) ? x : a;
  }
  static Acc combine(Acc a, Acc b) { return a != a ? a : step(a, T(b)); }
};
template <class T, bool kAll>
struct LogicalOp {
  using Acc = bool;
  static Acc init() { return kAll; }
  static Acc step(Acc a, T x) {
    return kAll ? (a && opmath_t<T>(x) != opmath_t<T>(0)) : (a || opmath_t<T>(x) != opmath_t<T>(0));
  }
  static Acc combine(Acc a, Acc b) { return kAll ? a && b : a || b; }
};

// Reduces in[k, :] for every k into out[k] with the policy Op.
template <class T, class Out, class Op>
void reduce_rows(const Tensor& in, const Tensor& out) {
  using Acc = typename Op::Acc;
  const int64_t K = in.size(0), R = in.size(1), sK = in.stride(0), sR = in.stride(1);
  const T* x = static_cast<const T*>(in.data_ptr());
  Out* o = static_cast<Out*>(out.data_ptr());
  const int threads = parallel_threads();
  auto row = [&](const T* p, int64_t n) {
    Acc a = Op::init();
    if constexpr (std::is_same_v<Op, SumOp<T>> && std::is_floating_point_v<Acc>) {
      if (sR == 1) {  // let the compiler reassociate this sum so it vectorizes
        if constexpr (std::is_same_v<T, float>) return sum_floats(p, n);
        EMBER_SIMD_REDUCTION_SUM(a)
        for (int64_t r = 0; r < n; ++r) a += Acc(opmath_t<T>(p[r]));
        return a;
      }
    }
    if constexpr (std::is_same_v<Op, SumOp<T>> && std::is_integral_v<Acc>) {
      // SumOp's wrapping uint64 sum as a plain loop, which vectorizes; a mask is read as its bytes
      // (GCC 12 does not vectorize the widening of a bool), with vpsadbw.
      if (sR == 1) {
        if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, uint8_t>) {
          return Acc(sum_bytes(reinterpret_cast<const uint8_t*>(p), n));
        } else {
          uint64_t s = 0;
          for (int64_t r = 0; r < n; ++r) s += uint64_t(Acc(p[r]));
          return Acc(s);
        }
      }
    }
    if constexpr (std::is_same_v<Op, ExtremeOp<float, true>> || std::is_same_v<Op, ExtremeOp<float, false>>) {
      if (sR == 1) return Acc(extreme_floats<std::is_same_v<Op, ExtremeOp<float, true>>>(p, n));
    }
    if (sR == 1) {
      for (int64_t r = 0; r < n; ++r) a = Op::step(a, p[r]);
    } else {
      for (int64_t r = 0; r < n; ++r) a = Op::step(a, p[r * sR]);
    }
    return a;
  };
  if (sK == 1 && sR == K && K > 1) {  // reduced dim outermost: sweep rows with K accumulators
    parallel_for(0, K, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(R, 1)), [&](int64_t kb, int64_t ke) {
      std::vector<Acc> acc(static_cast<size_t>(ke - kb), Op::init());
      for (int64_t r = 0; r < R; ++r) {
        const T* p = x + r * sR;
        for (int64_t k = kb; k < ke; ++k) acc[k - kb] = Op::step(acc[k - kb], p[k]);
      }
      for (int64_t k = kb; k < ke; ++k) o[k] = cast_out<Out>(acc[k - kb]);
    });
  } else if (K < threads && R >= 2 * kGrainSize) {  // few long rows: split each row
    for (int64_t k = 0; k < K; ++k) {
      std::vector<Acc> partial(static_cast<size_t>(threads), Op::init());
      const int64_t chunk = (R + threads - 1) / threads;
      parallel_for(0, threads, 1, [&](int64_t tb, int64_t te) {
        for (int64_t t = tb; t < te; ++t) {
          const int64_t b = t * chunk, e = std::min(R, b + chunk);
          if (b < e) partial[t] = row(x + k * sK + b * sR, e - b);
        }
      });
      Acc a = Op::init();
      for (Acc p : partial) a = Op::combine(a, p);
      o[k] = cast_out<Out>(a);
    }
  } else {
    parallel_for(0, K, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(R, 1)), [&](int64_t kb, int64_t ke) {
      for (int64_t k = kb; k < ke; ++k) o[k] = cast_out<Out>(row(x + k * sK, R));
    });
  }
}

// Position and value of the first maximum (or minimum) of each row; NaN counts as the extreme.
template <class T, bool kMax>
void arg_reduce_rows(const Tensor& in, const Tensor& values, const Tensor& indices) {
  using M = opmath_t<T>;
  const int64_t K = in.size(0), R = in.size(1), sK = in.stride(0), sR = in.stride(1);
  const T* x = static_cast<const T*>(in.data_ptr());
  T* v = values.defined() ? static_cast<T*>(values.data_ptr()) : nullptr;
  int64_t* idx = indices.defined() ? static_cast<int64_t*>(indices.data_ptr()) : nullptr;
  parallel_for(0, K, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(R, 1)), [&](int64_t kb, int64_t ke) {
    for (int64_t k = kb; k < ke; ++k) {
      const T* p = x + k * sK;
      M best = M(p[0]);
      int64_t at = 0;
      for (int64_t r = 1; r < R && best == best; ++r) {
        const M cur = M(p[r * sR]);
        if ((kMax ? cur > best : cur < best) || cur != cur) {
          best = cur;
          at = r;
        }
      }
      if (v) v[k] = p[at * sR];
      if (idx) idx[k] = at;
    }
  });
}

template <class T>
void reduce_typed(ReduceOp op, const Tensor& in, const Tensor& out, const Tensor& indices) {
  using SumOut = std::conditional_t<std::is_integral_v<T>, int64_t, T>;
  switch (op) {
    case ReduceOp::Sum:
      return reduce_rows<T, SumOut, SumOp<T>>(in, out);
    case ReduceOp::Prod:
      return reduce_rows<T, SumOut, ProdOp<T>>(in, out);
    case ReduceOp::All:
      return reduce_rows<T, bool, LogicalOp<T, true>>(in, out);
    case ReduceOp::Any:
      return reduce_rows<T, bool, LogicalOp<T, false>>(in, out);
    case ReduceOp::Max:
      if (indices.defined()) return arg_reduce_rows<T, true>(in, out, indices);
      return reduce_rows<T, T, ExtremeOp<T, true>>(in, out);
    case ReduceOp::Min:
      if (indices.defined()) return arg_reduce_rows<T, false>(in, out, indices);
      return reduce_rows<T, T, ExtremeOp<T, false>>(in, out);
    case ReduceOp::ArgMax:
      return arg_reduce_rows<T, true>(in, Tensor(), out);
    case ReduceOp::ArgMin:
      return arg_reduce_rows<T, false>(in, Tensor(), out);
  }
}

}  // namespace

// in [K, R] -> out [K] (and indices [K] for Max/Min with indices)
void CpuBackend::reduce(ReduceOp op, const Tensor& in, const Tensor& out, const Tensor& indices) {
  EMBER_DISPATCH_ALL(in.dtype(), "reduce", [&] { reduce_typed<scalar_t>(op, in, out, indices); });
}

}  // namespace ember::cpu
