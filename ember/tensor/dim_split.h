#pragma once
// A contiguous tensor seen as [outer, size, inner] around one of its dims: the loop shape of the
// kernels that work along a dim (softmax, index_select) on every back end.
#include <cstdint>

#include "ember/tensor/tensor.h"

namespace ember {

struct DimSplit {
  int64_t outer = 1, size = 1, inner = 1;
};

// A 0-d tensor is one element: [1, 1, 1].
inline DimSplit split_at(const Tensor& t, int64_t dim) {
  DimSplit s;
  if (t.dim() == 0) return s;
  for (int64_t d = 0; d < dim; ++d) s.outer *= t.size(d);
  s.size = t.size(dim);
  for (int64_t d = dim + 1; d < t.dim(); ++d) s.inner *= t.size(d);
  return s;
}

}  // namespace ember
