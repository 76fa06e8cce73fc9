// View ops: new sizes and strides over the same storage, no data moves.
#include <algorithm>
#include <numeric>

#include "ember/tensor/ops.h"

namespace ember::native {
namespace {

Tensor make_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>(*base.impl());
  impl->sizes = std::move(sizes);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->autograd = nullptr;  // a view's history is recorded by the differentiable op, if any
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
    EMBER_CHECK(known != 0, op, ": cannot reshape a tensor of ", numel, " elements into shape ", shape_str(shape),
                " because the unspecified dimension -1 can be any value and is ambiguous");
    EMBER_CHECK(numel % known == 0, op, ": shape ", shape_str(shape), " is invalid for input of size ", numel);
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

Tensor view(const Tensor& self, const Shape& shape) {
  const Shape target = infer_shape(shape, self.numel(), "view");
  auto st = view_strides(self.sizes(), self.strides(), target);
  EMBER_CHECK(st.has_value(), "view: size ", shape_str(target), " is not compatible with input of size ",
              shape_str(self.sizes()), " and strides ", shape_str(self.strides()),
              " (at least one dimension spans across two contiguous subspaces); use reshape instead");
  return make_view(self, target, *st, self.storage_offset());
}

Tensor reshape(const Tensor& self, const Shape& shape) {
  const Shape target = infer_shape(shape, self.numel(), "reshape");
  if (auto st = view_strides(self.sizes(), self.strides(), target))
    return make_view(self, target, *st, self.storage_offset());
  return view(native::clone(self), target);
}

Tensor transpose(const Tensor& self, int64_t d0, int64_t d1) {
  d0 = wrap_dim(d0, self.dim(), "transpose");
  d1 = wrap_dim(d1, self.dim(), "transpose");
  if (self.dim() == 0) return self;
  Shape sz = self.sizes(), st = self.strides();
  std::swap(sz[d0], sz[d1]);
  std::swap(st[d0], st[d1]);
  return make_view(self, sz, st, self.storage_offset());
}

Tensor t(const Tensor& self) {
  EMBER_CHECK(self.dim() <= 2, "t: expects a tensor with <= 2 dimensions, but it has ", self.dim(), " (shape ",
              shape_str(self.sizes()), ")");
  return self.dim() < 2 ? self : transpose(self, 0, 1);
}

Tensor permute(const Tensor& self, const Shape& dims) {
  EMBER_CHECK(static_cast<int64_t>(dims.size()) == self.dim(), "permute: number of dims ", shape_str(dims),
              " does not match the tensor's ", self.dim(), " dimensions (shape ", shape_str(self.sizes()), ")");
  Shape sz(dims.size()), st(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = wrap_dim(dims[i], self.dim(), "permute");
    EMBER_CHECK(!seen[d], "permute: repeated dim in ", shape_str(dims));
    seen[d] = true;
    sz[i] = self.sizes()[d];
    st[i] = self.strides()[d];
  }
  return make_view(self, sz, st, self.storage_offset());
}

Tensor movedim(const Tensor& self, int64_t source, int64_t destination) {
  source = wrap_dim(source, self.dim(), "movedim");
  destination = wrap_dim(destination, self.dim(), "movedim");
  if (self.dim() == 0) return permute(self, {});  // dims 0 and -1 name the scalar itself, as in PyTorch
  Shape order;
  for (int64_t d = 0; d < self.dim(); ++d)
    if (d != source) order.push_back(d);
  order.insert(order.begin() + destination, source);
  return permute(self, order);
}

Tensor slice(const Tensor& self, int64_t d, std::optional<int64_t> start_opt, std::optional<int64_t> end_opt,
             int64_t step) {
  EMBER_CHECK(self.dim() > 0, "slice: cannot slice a 0-d tensor");
  d = wrap_dim(d, self.dim(), "slice");
  EMBER_CHECK(step > 0, "slice: step must be positive, got ", step);
  const int64_t n = self.sizes()[d];
  int64_t start = start_opt.value_or(0), end = end_opt.value_or(n);
  // Python semantics: negative counts from the end, out-of-range clamps.
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape sz = self.sizes(), st = self.strides();
  sz[d] = end == start ? 0 : (end - start - 1) / step + 1;  // (end - start + step - 1) / step could overflow
  if (sz[d] > 1) st[d] *= step;  // then step < n, and stride * n spans existing memory: no overflow
  return make_view(self, sz, st, self.storage_offset() + start * self.strides()[d]);
}

Tensor narrow(const Tensor& self, int64_t d, int64_t start, int64_t length) {
  EMBER_CHECK(self.dim() > 0, "narrow: cannot narrow a 0-d tensor");
  d = wrap_dim(d, self.dim(), "narrow");
  const int64_t n = self.sizes()[d];
  EMBER_CHECK(start >= -n && start <= n, "narrow: start ", start, " out of range for dimension ", d, " of size ", n);
  if (start < 0) start += n;
  EMBER_CHECK(length >= 0 && start <= n - length, "narrow: start (", start, ") + length (", length,
              ") exceeds dimension ", d, " of size ", n);
  return slice(self, d, start, start + length, 1);
}

Tensor select(const Tensor& self, int64_t d, int64_t index) {
  EMBER_CHECK(self.dim() > 0, "select: cannot select from a 0-d tensor");
  d = wrap_dim(d, self.dim(), "select");
  const int64_t n = self.sizes()[d];
  EMBER_CHECK(index >= -n && index < n, "select: index ", index, " out of range for dimension ", d, " of size ", n,
              " (shape ", shape_str(self.sizes()), ")");
  if (index < 0) index += n;
  Shape sz = self.sizes(), st = self.strides();
  sz.erase(sz.begin() + d);
  st.erase(st.begin() + d);
  return make_view(self, sz, st, self.storage_offset() + index * self.strides()[d]);
}

Tensor expand(const Tensor& self, const Shape& shape) {
  EMBER_CHECK(shape.size() >= self.sizes().size(), "expand: the number of sizes provided (", shape.size(),
              ") must be greater or equal to the number of dimensions in the tensor (", self.dim(), ")");
  const size_t lead = shape.size() - self.sizes().size();
  Shape sz(shape.size()), st(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      EMBER_CHECK(shape[i] >= 0, "expand: the expanded size ", shape[i], " is not allowed in a leading dimension");
      sz[i] = shape[i];
      st[i] = 0;
      continue;
    }
    const int64_t have = self.sizes()[i - lead];
    const int64_t want = shape[i] == -1 ? have : shape[i];
    EMBER_CHECK(have == want || have == 1, "expand: the expanded size of the tensor (", want,
                ") must match the existing size (", have, ") at non-singleton dimension ", i,
                ". Target sizes: ", shape_str(shape), ". Tensor sizes: ", shape_str(self.sizes()));
    EMBER_CHECK(want >= 0, "expand: invalid size ", want, " in ", shape_str(shape));
    sz[i] = want;
    st[i] = have == want ? self.strides()[i - lead] : 0;
  }
  checked_numel(sz, "expand");
  return make_view(self, sz, st, self.storage_offset());
}

Tensor squeeze(const Tensor& self) {
  Shape sz, st;
  for (int64_t i = 0; i < self.dim(); ++i)
    if (self.sizes()[i] != 1) {
      sz.push_back(self.sizes()[i]);
      st.push_back(self.strides()[i]);
    }
  return make_view(self, sz, st, self.storage_offset());
}

Tensor squeeze(const Tensor& self, int64_t d) {
  d = wrap_dim(d, self.dim(), "squeeze");
  if (self.dim() == 0 || self.sizes()[d] != 1) return self;
  Shape sz = self.sizes(), st = self.strides();
  sz.erase(sz.begin() + d);
  st.erase(st.begin() + d);
  return make_view(self, sz, st, self.storage_offset());
}

Tensor unsqueeze(const Tensor& self, int64_t d) {
  d = wrap_dim(d, self.dim() + 1, "unsqueeze");
  Shape sz = self.sizes(), st = self.strides();
  const int64_t new_stride = d < self.dim() ? self.sizes()[d] * self.strides()[d] : 1;
  sz.insert(sz.begin() + d, 1);
  st.insert(st.begin() + d, new_stride);
  return make_view(self, sz, st, self.storage_offset());
}

Tensor flatten(const Tensor& self, int64_t start, int64_t end) {
  if (self.dim() == 0) return reshape(self, {1});
  start = wrap_dim(start, self.dim(), "flatten");
  end = wrap_dim(end, self.dim(), "flatten");
  EMBER_CHECK(start <= end, "flatten: start_dim (", start, ") cannot come after end_dim (", end, ")");
  Shape shape(self.sizes().begin(), self.sizes().begin() + start);
  int64_t n = 1;
  for (int64_t i = start; i <= end; ++i) n *= self.sizes()[i];
  shape.push_back(n);
  shape.insert(shape.end(), self.sizes().begin() + end + 1, self.sizes().end());
  return reshape(self, shape);
}

Tensor unflatten(const Tensor& self, int64_t d, const Shape& new_sizes) {
  // wrap_dim lets a 0-d tensor name dim 0 or -1 (as PyTorch's reductions do); it has no size to split
  EMBER_CHECK(self.dim() > 0, "unflatten: dimension ", d, " of a 0-d tensor (it has no dimensions)");
  d = wrap_dim(d, self.dim(), "unflatten");
  EMBER_CHECK(!new_sizes.empty(), "unflatten: sizes must be non-empty");
  const Shape inner = infer_shape(new_sizes, self.sizes()[d], "unflatten");
  Shape shape(self.sizes().begin(), self.sizes().begin() + d);
  shape.insert(shape.end(), inner.begin(), inner.end());
  shape.insert(shape.end(), self.sizes().begin() + d + 1, self.sizes().end());
  return view(self, shape);
}

Tensor as_strided(const Tensor& self, const Shape& sz, const Shape& st, std::optional<int64_t> offset_opt) {
  const int64_t offset = offset_opt.value_or(self.storage_offset());
  EMBER_CHECK(offset >= 0, "as_strided: negative storage offset ", offset);
  const int64_t extent = storage_extent(sz, st, "as_strided");
  int64_t last = 0;
  EMBER_CHECK(!__builtin_add_overflow(offset, extent - 1, &last), "as_strided: offset ", offset, " overflows");
  const int64_t capacity = self.storage() ? static_cast<int64_t>(self.storage()->nbytes() / self.element_size()) : 0;
  EMBER_CHECK(extent == 0 || last < capacity, "as_strided: sizes ", shape_str(sz), ", strides ", shape_str(st),
              " and offset ", offset, " reach element ", last, " but the storage holds only ", capacity, " elements");
  return make_view(self, sz, st, offset);
}

}  // namespace ember::native
