// Scans and sorting along one dim: cumsum and sort (topk and argsort are sort's, in
// tensor/ops/sort.cpp). A contiguous tensor is [outer, D, inner]; each of its outer * inner
// lines runs on one thread.
#include <algorithm>
#include <cmath>
#include <numeric>
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
        acc = acc + static_cast<A>(in[at]);
        o[at] = static_cast<scalar_t>(acc);
      }
    });
  });
}

// values, indices [outer, D, inner]: each line of x ordered, stable, NaN last (first, descending)
void CpuBackend::sort(const Tensor& x, int64_t dim, bool descending, const Tensor& values, const Tensor& indices) {
  const DimSplit s = split_at(x, dim);
  EMBER_DISPATCH_ALL(x.dtype(), "sort", [&] {
    using K = opmath_t<scalar_t>;  // 16-bit floats compared as the float32 they widen to, exactly
    const auto* in = static_cast<const scalar_t*>(x.data_ptr());
    auto* v = static_cast<scalar_t*>(values.data_ptr());
    auto* ix = static_cast<int64_t*>(indices.data_ptr());
    for_each_line(s, [&](int64_t base) {
      std::vector<int64_t> order(static_cast<size_t>(s.size));
      std::iota(order.begin(), order.end(), int64_t{0});
      const auto key = [&](int64_t j) { return static_cast<K>(in[base + j * s.inner]); };
      if (descending)
        std::stable_sort(order.begin(), order.end(),
                         [&](int64_t a, int64_t b) { return less_nan_last(key(b), key(a)); });
      else
        std::stable_sort(order.begin(), order.end(),
                         [&](int64_t a, int64_t b) { return less_nan_last(key(a), key(b)); });
      for (int64_t j = 0; j < s.size; ++j) {
        v[base + j * s.inner] = in[base + order[static_cast<size_t>(j)] * s.inner];
        ix[base + j * s.inner] = order[static_cast<size_t>(j)];
      }
    });
  });
}

}  // namespace ember::cpu
