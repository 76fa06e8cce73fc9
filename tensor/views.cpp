// View ops: new sizes and strides over the same storage, no data moves.
#include <algorithm>
#include <numeric>

#include "tensor/ops.h"

namespace ember {
namespace {

Tensor make_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>(*base.impl());
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->offset = offset;
  return Tensor(std::move(impl));
}

// Resolves one -1 in `shape` against `numel`; checks the element count matches.
Shape infer_shape(const Shape& shape, int64_t numel, const char* op) {
  Shape out = shape;
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      EMBER_CHECK(infer_at < 0, op, ": only one dimension can be inferred in shape ", shape_str(shape));
      infer_at = static_cast<int64_t>(i);
    } else {
      EMBER_CHECK(out[i] >= 0, op, ": invalid shape dimension ", out[i], " in ", shape_str(shape));
      EMBER_CHECK(!__builtin_mul_overflow(known, out[i], &known), op, ": shape ", shape_str(shape), " overflows int64");
    }
  }
  if (infer_at >= 0) {
    EMBER_CHECK(known != 0 && numel % known == 0, op, ": shape ", shape_str(shape), " is invalid for input of size ",
                numel);
    out[infer_at] = numel / known;
  } else {
    EMBER_CHECK(known == numel, op, ": shape ", shape_str(shape), " is invalid for input of size ", numel);
  }
  return out;
}

// Strides for viewing (sizes, strides) as `shape` without a copy, if possible (PyTorch's
// computeStride): each run of old dims that is contiguous in memory may be regrouped.
std::optional<Shape> view_strides(const Shape& sizes, const Shape& strides, const Shape& shape) {
  Shape out(shape.size());
  if (sizes.empty()) {
    std::fill(out.begin(), out.end(), 1);
    return out;
  }
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  if (numel == 0) return contiguous_strides(shape);
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_base_stride = strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= sizes[d];
    if (d == 0 || (sizes[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

}  // namespace

Tensor Tensor::view(const Shape& shape) const {
  const Shape target = infer_shape(shape, numel(), "view");
  auto st = view_strides(sizes(), strides(), target);
  EMBER_CHECK(st.has_value(), "view: size ", shape_str(target), " is not compatible with input of size ",
              shape_str(sizes()), " and strides ", shape_str(strides()),
              " (at least one dimension spans across two contiguous subspaces); use reshape instead");
  return make_view(*this, target, *st, storage_offset());
}

Tensor Tensor::reshape(const Shape& shape) const {
  const Shape target = infer_shape(shape, numel(), "reshape");
  if (auto st = view_strides(sizes(), strides(), target)) return make_view(*this, target, *st, storage_offset());
  return clone().view(target);
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  d0 = wrap_dim(d0, dim(), "transpose");
  d1 = wrap_dim(d1, dim(), "transpose");
  if (dim() == 0) return *this;
  Shape sz = sizes(), st = strides();
  std::swap(sz[d0], sz[d1]);
  std::swap(st[d0], st[d1]);
  return make_view(*this, sz, st, storage_offset());
}

Tensor Tensor::t() const {
  EMBER_CHECK(dim() <= 2, "t: expects a tensor with <= 2 dimensions, but it has ", dim(), " (shape ",
              shape_str(sizes()), ")");
  return dim() < 2 ? *this : transpose(0, 1);
}

Tensor Tensor::permute(const Shape& dims) const {
  EMBER_CHECK(static_cast<int64_t>(dims.size()) == dim(), "permute: number of dims ", shape_str(dims),
              " does not match the tensor's ", dim(), " dimensions (shape ", shape_str(sizes()), ")");
  Shape sz(dims.size()), st(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = wrap_dim(dims[i], dim(), "permute");
    EMBER_CHECK(!seen[d], "permute: repeated dim in ", shape_str(dims));
    seen[d] = true;
    sz[i] = sizes()[d];
    st[i] = strides()[d];
  }
  return make_view(*this, sz, st, storage_offset());
}

Tensor Tensor::movedim(int64_t source, int64_t destination) const {
  source = wrap_dim(source, dim(), "movedim");
  destination = wrap_dim(destination, dim(), "movedim");
  Shape order;
  for (int64_t d = 0; d < dim(); ++d)
    if (d != source) order.push_back(d);
  order.insert(order.begin() + destination, source);
  return permute(order);
}

Tensor Tensor::slice(int64_t d, std::optional<int64_t> start_opt, std::optional<int64_t> end_opt, int64_t step) const {
  EMBER_CHECK(dim() > 0, "slice: cannot slice a 0-d tensor");
  d = wrap_dim(d, dim(), "slice");
  EMBER_CHECK(step > 0, "slice: step must be positive, got ", step);
  const int64_t n = sizes()[d];
  int64_t start = start_opt.value_or(0), end = end_opt.value_or(n);
  // Python semantics: negative counts from the end, out-of-range clamps.
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape sz = sizes(), st = strides();
  sz[d] = (end - start + step - 1) / step;
  st[d] *= step;
  return make_view(*this, sz, st, storage_offset() + start * strides()[d]);
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  EMBER_CHECK(dim() > 0, "narrow: cannot narrow a 0-d tensor");
  d = wrap_dim(d, dim(), "narrow");
  const int64_t n = sizes()[d];
  EMBER_CHECK(start >= -n && start <= n, "narrow: start ", start, " out of range for dimension ", d, " of size ", n);
  if (start < 0) start += n;
  EMBER_CHECK(length >= 0 && start <= n - length, "narrow: start (", start, ") + length (", length,
              ") exceeds dimension ", d, " of size ", n);
  return slice(d, start, start + length);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  EMBER_CHECK(dim() > 0, "select: cannot select from a 0-d tensor");
  d = wrap_dim(d, dim(), "select");
  const int64_t n = sizes()[d];
  EMBER_CHECK(index >= -n && index < n, "select: index ", index, " out of range for dimension ", d, " of size ", n,
              " (shape ", shape_str(sizes()), ")");
  if (index < 0) index += n;
  Shape sz = sizes(), st = strides();
  sz.erase(sz.begin() + d);
  st.erase(st.begin() + d);
  return make_view(*this, sz, st, storage_offset() + index * strides()[d]);
}

Tensor Tensor::expand(const Shape& shape) const {
  EMBER_CHECK(shape.size() >= sizes().size(), "expand: the number of sizes provided (", shape.size(),
              ") must be greater or equal to the number of dimensions in the tensor (", dim(), ")");
  const size_t lead = shape.size() - sizes().size();
  Shape sz(shape.size()), st(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      EMBER_CHECK(shape[i] >= 0, "expand: the expanded size ", shape[i], " is not allowed in a leading dimension");
      sz[i] = shape[i];
      st[i] = 0;
      continue;
    }
    const int64_t have = sizes()[i - lead];
    const int64_t want = shape[i] == -1 ? have : shape[i];
    EMBER_CHECK(have == want || have == 1, "expand: the expanded size of the tensor (", want,
                ") must match the existing size (", have, ") at non-singleton dimension ", i,
                ". Target sizes: ", shape_str(shape), ". Tensor sizes: ", shape_str(sizes()));
    EMBER_CHECK(want >= 0, "expand: invalid size ", want, " in ", shape_str(shape));
    sz[i] = want;
    st[i] = have == want ? strides()[i - lead] : 0;
  }
  checked_numel(sz, "expand");
  return make_view(*this, sz, st, storage_offset());
}

Tensor Tensor::squeeze() const {
  Shape sz, st;
  for (int64_t i = 0; i < dim(); ++i)
    if (sizes()[i] != 1) {
      sz.push_back(sizes()[i]);
      st.push_back(strides()[i]);
    }
  return make_view(*this, sz, st, storage_offset());
}

Tensor Tensor::squeeze(int64_t d) const {
  d = wrap_dim(d, dim(), "squeeze");
  if (dim() == 0 || sizes()[d] != 1) return *this;
  Shape sz = sizes(), st = strides();
  sz.erase(sz.begin() + d);
  st.erase(st.begin() + d);
  return make_view(*this, sz, st, storage_offset());
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape sz = sizes(), st = strides();
  const int64_t new_stride = d < dim() ? sizes()[d] * strides()[d] : 1;
  sz.insert(sz.begin() + d, 1);
  st.insert(st.begin() + d, new_stride);
  return make_view(*this, sz, st, storage_offset());
}

Tensor Tensor::flatten(int64_t start, int64_t end) const {
  if (dim() == 0) return reshape({1});
  start = wrap_dim(start, dim(), "flatten");
  end = wrap_dim(end, dim(), "flatten");
  EMBER_CHECK(start <= end, "flatten: start_dim (", start, ") cannot come after end_dim (", end, ")");
  Shape shape(sizes().begin(), sizes().begin() + start);
  int64_t n = 1;
  for (int64_t i = start; i <= end; ++i) n *= sizes()[i];
  shape.push_back(n);
  shape.insert(shape.end(), sizes().begin() + end + 1, sizes().end());
  return reshape(shape);
}

Tensor Tensor::unflatten(int64_t d, const Shape& new_sizes) const {
  d = wrap_dim(d, dim(), "unflatten");
  EMBER_CHECK(!new_sizes.empty(), "unflatten: sizes must be non-empty");
  const Shape inner = infer_shape(new_sizes, sizes()[d], "unflatten");
  Shape shape(sizes().begin(), sizes().begin() + d);
  shape.insert(shape.end(), inner.begin(), inner.end());
  shape.insert(shape.end(), sizes().begin() + d + 1, sizes().end());
  return view(shape);
}

Tensor Tensor::as_strided(const Shape& sz, const Shape& st, std::optional<int64_t> offset_opt) const {
  const int64_t offset = offset_opt.value_or(storage_offset());
  EMBER_CHECK(offset >= 0, "as_strided: negative storage offset ", offset);
  const int64_t extent = storage_extent(sz, st, "as_strided");
  int64_t last = 0;
  EMBER_CHECK(!__builtin_add_overflow(offset, extent - 1, &last), "as_strided: offset ", offset, " overflows");
  const int64_t capacity = storage() ? static_cast<int64_t>(storage()->nbytes() / element_size()) : 0;
  EMBER_CHECK(extent == 0 || last < capacity, "as_strided: sizes ", shape_str(sz), ", strides ", shape_str(st),
              " and offset ", offset, " reach element ", last, " but the storage holds only ", capacity, " elements");
  return make_view(*this, sz, st, offset);
}

}  // namespace ember
