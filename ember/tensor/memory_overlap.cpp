#include "ember/tensor/memory_overlap.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "ember/tensor/error.h"

namespace ember {

bool is_non_overlapping_and_dense(const Tensor& t) {
  if (t.is_contiguous()) return true;
  std::vector<int64_t> dims;  // size-1 dims have no say in the layout
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.size(d) != 1) dims.push_back(d);
  std::sort(dims.begin(), dims.end(), [&](int64_t a, int64_t b) { return t.stride(a) < t.stride(b); });
  int64_t expected = 1;
  for (int64_t d : dims) {
    if (t.stride(d) != expected) return false;
    expected *= t.size(d);
  }
  return true;
}

MemOverlap internal_overlap(const Tensor& t) {
  if (is_non_overlapping_and_dense(t)) return MemOverlap::No;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.stride(d) == 0 && t.size(d) > 1) return MemOverlap::Partial;
  return MemOverlap::TooHard;
}

MemOverlap overlap(const Tensor& a, const Tensor& b) {
  if (a.impl() == b.impl()) return MemOverlap::Full;
  if (a.numel() == 0 || b.numel() == 0) return MemOverlap::No;
  if (!a.shares_storage(b)) return MemOverlap::No;
  if (!is_non_overlapping_and_dense(a) || !is_non_overlapping_and_dense(b)) return MemOverlap::TooHard;
  const auto* a_begin = static_cast<const char*>(a.data_ptr());
  const auto* b_begin = static_cast<const char*>(b.data_ptr());
  const char* a_end = a_begin + a.nbytes();
  const char* b_end = b_begin + b.nbytes();
  if (a_begin == b_begin && a_end == b_end)
    return a.strides() == b.strides() && a.dtype() == b.dtype() ? MemOverlap::Full : MemOverlap::Partial;
  return a_begin < b_end && b_begin < a_end ? MemOverlap::Partial : MemOverlap::No;
}

void assert_no_internal_overlap(const Tensor& out, const char* op, const char* suffix) {
  EMBER_CHECK(internal_overlap(out) != MemOverlap::Partial, op, suffix,
              ": more than one element of the written-to tensor (shape ", shape_str(out.sizes()), ", strides ",
              shape_str(out.strides()), ") refers to a single memory location; clone() it before the in-place op");
}

void assert_no_partial_overlap(const Tensor& out, const Tensor& input, const char* op, const char* suffix) {
  EMBER_CHECK(overlap(out, input) != MemOverlap::Partial, op, suffix, ": some elements of the input (shape ",
              shape_str(input.sizes()), ") and the written-to tensor (shape ", shape_str(out.sizes()),
              ") refer to the same memory locations; clone() the input before the in-place op");
}

}  // namespace ember
