// Scans and sorting along one dim: cumsum, cumprod and sort (topk and argsort are sort's, in
// tensor/ops/sort.cpp). A contiguous tensor is [outer, D, inner]; each of its outer * inner
// lines runs on one thread.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <type_traits>
#include <vector>

#include "ember/tensor/cpu/cpu_backend.h"
#include "ember/tensor/dim_split.h"
#include "ember/tensor/parallel.h"

namespace ember::cpu {
namespace {

// Lines of the split, in parallel: f(base) for each line's first element offset.
template <class F>
void for_each_line(const DimSplit& s, const F& f) {
  const int64_t lines = s.outer * s.inner;
  parallel_for(0, lines, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, s.size)), [&](int64_t b, int64_t e) {
    for (int64_t line = b; line < e; ++line) f((line / s.inner) * s.size * s.inner + line % s.inner);
  });
}

// NaN above every number (PyTorch's order); NaNs equal among themselves.
template <class T>
bool less_nan_last(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return false;
    if (std::isnan(b)) return true;
  }
  return a < b;
}

}  // namespace

// out [outer, D, inner] = running sums of x along D, in acc_t (double for float, as PyTorch's CPU cumsum)
void CpuBackend::cumsum(const Tensor& x, int64_t dim, bool reverse, const Tensor& out) {
  const DimSplit s = split_at(x, dim);
  EMBER_DISPATCH_ALL(x.dtype(), "cumsum", [&] {
    using A = acc_t<scalar_t>;
    const auto* in = static_cast<const scalar_t*>(x.data_ptr());
    auto* o = static_cast<scalar_t*>(out.data_ptr());
    for_each_line(s, [&](int64_t base) {
      A acc = A(0);
      for (int64_t j = 0; j < s.size; ++j) {
        const int64_t at = base + (reverse ? s.size - 1 - j : j) * s.inner;
        if constexpr (std::is_integral_v<A>)  // integers wrap, as PyTorch's do (signed overflow is UB)
          acc = static_cast<A>(static_cast<uint64_t>(acc) + static_cast<uint64_t>(static_cast<A>(in[at])));
        else
          acc = acc + static_cast<A>(in[at]);
        o[at] = static_cast<scalar_t>(acc);
      }
    });
  });
}

// out [outer, D, inner] = running products of x along D, in acc_t as cumsum
void CpuBackend::cumprod(const Tensor& x, int64_t dim, const Tensor& out) {
  const DimSplit s = split_at(x, dim);
  EMBER_DISPATCH_ALL(x.dtype(), "cumprod", [&] {
    using A = acc_t<scalar_t>;
    const auto* in = static_cast<const scalar_t*>(x.data_ptr());
    auto* o = static_cast<scalar_t*>(out.data_ptr());
    for_each_line(s, [&](int64_t base) {
      A acc = A(1);
      for (int64_t j = 0; j < s.size; ++j) {
        const int64_t at = base + j * s.inner;
        if constexpr (std::is_integral_v<A>)  // integers wrap, as PyTorch's do (signed overflow is UB)
          acc = static_cast<A>(static_cast<uint64_t>(acc) * static_cast<uint64_t>(static_cast<A>(in[at])));
        else
          acc = acc * static_cast<A>(in[at]);
        o[at] = static_cast<scalar_t>(acc);
      }
    });
  });
}

// values, indices [outer, K, inner], K <= D: the first K of each line of x in order, stable,
// NaN last (first, descending). Each line is sorted as (key, index) pairs, the index breaking
// ties, so std::sort (or, for K < D, std::partial_sort: O(D log K), top-k's selection) gives the
// stable order.
void CpuBackend::sort(const Tensor& x, int64_t dim, bool descending, const Tensor& values, const Tensor& indices) {
  const DimSplit s = split_at(x, dim);
  const int64_t K = values.dim() == 0 ? 1 : values.size(dim);
  EMBER_DISPATCH_ALL(x.dtype(), "sort", [&] {
    using Key = opmath_t<scalar_t>;  // 16-bit floats compared as the float32 they widen to, exactly
    using Entry = std::pair<Key, int64_t>;
    const auto* in = static_cast<const scalar_t*>(x.data_ptr());
    auto* v = static_cast<scalar_t*>(values.data_ptr());
    auto* ix = static_cast<int64_t*>(indices.data_ptr());
    const auto before = [descending](const Entry& a, const Entry& b) {
      if (descending ? less_nan_last(b.first, a.first) : less_nan_last(a.first, b.first)) return true;
      if (descending ? less_nan_last(a.first, b.first) : less_nan_last(b.first, a.first)) return false;
      return a.second < b.second;
    };
    for_each_line(s, [&](int64_t base) {
      std::vector<Entry> line(static_cast<size_t>(s.size));
      for (int64_t j = 0; j < s.size; ++j) line[static_cast<size_t>(j)] = {static_cast<Key>(in[base + j * s.inner]), j};
      if (K < s.size)
        std::partial_sort(line.begin(), line.begin() + K, line.end(), before);
      else
        std::sort(line.begin(), line.end(), before);
      const int64_t out_base = (base / (s.size * s.inner)) * K * s.inner + base % s.inner;
      for (int64_t j = 0; j < K; ++j) {
        const int64_t from = line[static_cast<size_t>(j)].second;
        v[out_base + j * s.inner] = in[base + from * s.inner];
        ix[out_base + j * s.inner] = from;
      }
    });
  });
}

}  // namespace ember::cpu
