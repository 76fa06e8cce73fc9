// cat, stack, split, chunk: joining copies into slices of one output; splitting is views.
#include "ember/tensor/ops/internal.h"

namespace ember::native {

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  EMBER_CHECK(!tensors.empty(), "cat: expected a non-empty list of tensors");
  // Legacy rule kept by PyTorch: 1-D empty tensors are skipped whatever their shape.
  const Tensor* ref = nullptr;
  DType dtype = tensors[0].dtype();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    EMBER_CHECK(t.defined(), "cat: tensor ", i, " is undefined");
    dtype = i == 0 ? t.dtype() : promote_types(dtype, t.dtype());
    if (t.dim() == 1 && t.numel() == 0) continue;
    if (!ref) ref = &t;
  }
  if (!ref) return ops::empty_on({0}, dtype, tensors[0].device());
  EMBER_CHECK(ref->dim() > 0, "cat: zero-dimensional tensor cannot be concatenated");
  dim = wrap_dim(dim, ref->dim(), "cat");
  Shape shape = ref->sizes();
  shape[dim] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (t.dim() == 1 && t.numel() == 0) continue;
    EMBER_CHECK(t.device() == ref->device(), "cat: expected all tensors to be on the same device, but found ",
                ref->device(), " and ", t.device());
    EMBER_CHECK(t.dim() == ref->dim(), "cat: tensors must have the same number of dimensions: got ", ref->dim(),
                " and ", t.dim(), " (tensor ", i, ")");
    for (int64_t d = 0; d < t.dim(); ++d)
      EMBER_CHECK(d == dim || t.size(d) == ref->size(d), "cat: sizes of tensors must match except in dimension ", dim,
                  ". Expected size ", ref->size(d), " but got size ", t.size(d), " for tensor number ", i,
                  " in the list (shapes ", shape_str(ref->sizes()), " and ", shape_str(t.sizes()), ")");
    shape[dim] += t.size(dim);
  }
  Tensor out = ops::empty_on(shape, dtype, ref->device());
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    if (t.dim() == 1 && t.numel() == 0) continue;
    if (t.numel() > 0) backend(out.device()).copy(t, native::narrow(out, dim, offset, t.size(dim)));
    offset += t.size(dim);
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  EMBER_CHECK(!tensors.empty(), "stack: expected a non-empty list of tensors");
  for (size_t i = 0; i < tensors.size(); ++i) {
    EMBER_CHECK(tensors[i].defined(), "stack: tensor ", i, " is undefined");
    EMBER_CHECK(tensors[i].sizes() == tensors[0].sizes(), "stack: expects each tensor to be equal size, but got ",
                shape_str(tensors[0].sizes()), " at entry 0 and ", shape_str(tensors[i].sizes()), " at entry ", i);
  }
  dim = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (const Tensor& t : tensors) parts.push_back(native::unsqueeze(t, dim));
  return cat(parts, dim);
}

std::vector<Tensor> split_with_sizes(const Tensor& x, const Shape& sizes, int64_t dim) {
  ops::check_defined(x, "split_with_sizes");
  EMBER_CHECK(x.dim() > 0, "split_with_sizes: cannot split a 0-d tensor");
  dim = wrap_dim(dim, x.dim(), "split_with_sizes");
  int64_t total = 0;
  for (int64_t s : sizes) {
    EMBER_CHECK(s >= 0, "split_with_sizes: split sizes must be non-negative, got ", shape_str(sizes));
    // checked before adding: a sum past the dimension's size is wrong anyway, and could overflow
    EMBER_CHECK(s <= x.size(dim) - total, "split_with_sizes: split sizes ", shape_str(sizes),
                " sum to more than dimension ", dim, "'s size ", x.size(dim));
    total += s;
  }
  EMBER_CHECK(total == x.size(dim), "split_with_sizes: split sizes ", shape_str(sizes), " sum to ", total,
              " but dimension ", dim, " has size ", x.size(dim));
  std::vector<Tensor> out;
  int64_t offset = 0;
  for (int64_t s : sizes) {
    out.push_back(native::narrow(x, dim, offset, s));
    offset += s;
  }
  return out;
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  ops::check_defined(x, "split");
  EMBER_CHECK(x.dim() > 0, "split: cannot split a 0-d tensor");
  dim = wrap_dim(dim, x.dim(), "split");
  const int64_t n = x.size(dim);
  EMBER_CHECK(split_size > 0 || (split_size == 0 && n == 0), "split: split_size must be positive, got ", split_size);
  Shape sizes;
  for (int64_t off = 0; off < n; off += split_size) sizes.push_back(std::min(split_size, n - off));
  if (sizes.empty()) sizes.push_back(0);
  return split_with_sizes(x, sizes, dim);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  ops::check_defined(x, "chunk");
  EMBER_CHECK(chunks > 0, "chunk: number of chunks must be positive, got ", chunks);
  EMBER_CHECK(x.dim() > 0, "chunk: cannot chunk a 0-d tensor");
  const int64_t n = x.size(wrap_dim(dim, x.dim(), "chunk"));
  const int64_t per_chunk = n / chunks + (n % chunks != 0 ? 1 : 0);  // ceil(n / chunks); n + chunks - 1 may overflow
  return split(x, std::max<int64_t>(per_chunk, n == 0 ? 0 : 1), dim);
}

}  // namespace ember::native
