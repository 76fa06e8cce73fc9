#pragma once
// The CPU's strided loop: walks N operands that share one shape (inputs already broadcast
// by the op), calling an inner 1-D kernel on runs of the innermost dimension.
// Note [Strided loops]: dimensions of size 1 are dropped and dimensions that are
// contiguous with each other in every operand are merged, so a contiguous tensor of any
// shape is one run (and one vectorizable loop). Work is split across threads by element.
#include <array>
#include <cstdint>
#include <vector>

#include "ember/tensor/parallel.h"
#include "ember/tensor/tensor.h"

namespace ember::cpu {

template <int N>
struct StridedLoop {
  // Dimensions stored innermost first; strides in bytes.
  std::vector<int64_t> sizes;
  std::vector<std::array<int64_t, N>> strides;
  std::array<char*, N> base{};
  int64_t numel = 1;

  explicit StridedLoop(const std::array<const Tensor*, N>& ops) {
    const Tensor& ref = *ops[0];
    for (int k = 0; k < N; ++k) base[k] = static_cast<char*>(ops[k]->data_ptr());
    for (int64_t d = ref.dim() - 1; d >= 0; --d) {
      const int64_t size = ref.sizes()[d];
      numel *= size;
      if (size == 1) continue;
      std::array<int64_t, N> st;
      for (int k = 0; k < N; ++k) st[k] = ops[k]->strides()[d] * static_cast<int64_t>(ops[k]->element_size());
      // Merge with the previous (inner) dimension when it continues it in every operand.
      if (!sizes.empty()) {
        bool mergeable = true;
        for (int k = 0; k < N; ++k) mergeable &= st[k] == strides.back()[k] * sizes.back();
        if (mergeable) {
          sizes.back() *= size;
          continue;
        }
      }
      sizes.push_back(size);
      strides.push_back(st);
    }
    if (sizes.empty()) {  // a single element
      sizes.push_back(1);
      strides.push_back({});
    }
  }

  // inner(ptrs, strides, n): process n elements starting at ptrs with byte strides.
  template <class Inner>
  void run(const Inner& inner, int64_t grain = kGrainSize) const {
    if (numel == 0) return;
    parallel_for(0, numel, grain, [&](int64_t begin, int64_t end) {
      const size_t nd = sizes.size();
      std::vector<int64_t> idx(nd, 0);
      int64_t rem = begin;
      for (size_t d = 0; d < nd; ++d) {
        idx[d] = rem % sizes[d];
        rem /= sizes[d];
      }
      std::array<char*, N> ptr;
      for (int k = 0; k < N; ++k) {
        ptr[k] = base[k];
        for (size_t d = 0; d < nd; ++d) ptr[k] += idx[d] * strides[d][k];
      }
      int64_t pos = begin;
      while (pos < end) {
        const int64_t n = std::min(sizes[0] - idx[0], end - pos);
        inner(ptr, strides[0], n);
        pos += n;
        // Advance past the run, carrying into outer dimensions at its end.
        for (int k = 0; k < N; ++k) ptr[k] += n * strides[0][k];
        idx[0] += n;
        if (idx[0] < sizes[0]) continue;
        for (int k = 0; k < N; ++k) ptr[k] -= sizes[0] * strides[0][k];
        idx[0] = 0;
        for (size_t d = 1; d < nd; ++d) {
          ++idx[d];
          for (int k = 0; k < N; ++k) ptr[k] += strides[d][k];
          if (idx[d] < sizes[d]) break;
          for (int k = 0; k < N; ++k) ptr[k] -= sizes[d] * strides[d][k];
          idx[d] = 0;
        }
      }
    });
  }
};

}  // namespace ember::cpu
