#pragma once
// Shared by the gather/scatter kernels of every back end (tensor/cpu/indexing.cpp, cuda/indexing.cu).
#include "ember/tensor/tensor.h"

namespace ember {

// A view of `t` with index's sizes and stride 0 along `dim`: a strided loop over it points at
// element 0 of dim, and the kernel adds index * stride(dim) itself.
Tensor index_aligned_view(const Tensor& t, const Tensor& index, int64_t dim);

}  // namespace ember
