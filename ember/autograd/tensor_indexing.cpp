// Tensor::index and Tensor::index_put_: Python's x[...] and x[...] = v, composed of ops that
// record on the tape (views, index_select, scatter), so that gradients flow as through them.
//
// Note [Tensor indexing]
// ~~~~~~~~~~~~~~~~~~~~~~
// The index list is walked left to right against self's dims, as LibTorch's applySlicing does:
//   - basic entries make a view: an integer selects (the dim goes; a 0-d integer tensor too),
//     a Slice slices, None and `true` insert a dim of size 1 (`false` one of size 0), and
//     Ellipsis skips the dims that the entries after it do not name;
//   - tensor entries ("advanced") are remembered with the dim they index: an int64/int32 tensor
//     indexes one dim; a bool (or uint8) mask of k dims indexes k dims at the positions of its
//     true elements (nonzero, which reads the mask on the host).
// Then the advanced indices, broadcast to one shape S, pick elements: the dims they index are
// flattened into one, and one index_select by the combined row-major positions picks them. The
// result (a copy) has S where those dims were, or first when basic entries stand between the
// tensors (NumPy's rule, which PyTorch follows). Integers are selects before any of this, as in
// LibTorch's C++ API.
// index_put_ writes through the same walk: with basic entries only it copies (or adds) the
// value into the view; with tensors, the positions in self of the elements that index() would
// pick are computed by the same advanced step on a tensor of positions, and the value is
// scattered to them (scatter_, or scatter_add_ with accumulate, where repeated positions add).
#include <algorithm>
#include <numeric>
#include <vector>

#include "ember/autograd/functions.h"
#include "ember/autograd/grad_mode.h"
#include "ember/autograd/meta.h"

namespace ember {
namespace {

using indexing::TensorIndex;
using Kind = TensorIndex::Kind;

bool is_mask(const Tensor& t) { return t.dtype() == kBool || t.dtype() == kUInt8; }

// The dims of self that the entries name (all but None, bools, Ellipsis and 0-d masks).
int64_t dims_named(const std::vector<TensorIndex>& indices) {
  int64_t named = 0;
  for (const TensorIndex& i : indices) {
    if (i.kind() == Kind::Integer || i.kind() == Kind::Slice) ++named;
    if (i.kind() == Kind::Tensor) named += i.tensor().defined() && is_mask(i.tensor()) ? i.tensor().dim() : 1;
  }
  return named;
}

struct Advanced {
  int64_t dim;   // in the view
  Tensor index;  // int64 positions along it, on the view's device
};

struct Walked {
  Tensor view;  // self with the basic entries applied
  std::vector<Advanced> advanced;
};

// The basic entries applied to self (a view), and the tensor entries remembered.
Walked walk(const Tensor& self, const std::vector<TensorIndex>& indices, const char* op) {
  EMBER_CHECK(self.defined(), op, ": the tensor is undefined");
  const int64_t named = dims_named(indices);
  EMBER_CHECK(named <= self.dim(), op, ": too many indices for a tensor of dimension ", self.dim(), " (", named,
              " given), shape ", shape_str(self.sizes()));
  EMBER_CHECK(std::count_if(indices.begin(), indices.end(),
                            [](const TensorIndex& i) { return i.kind() == Kind::Ellipsis; }) <= 1,
              op, ": an index can only have a single ellipsis ('...')");
  Walked w{self, {}};
  Tensor& v = w.view;
  int64_t d = 0;  // the next dim of v that an entry indexes
  for (const TensorIndex& i : indices) {
    switch (i.kind()) {
      case Kind::None:
        v = v.unsqueeze(d++);
        break;
      case Kind::Boolean:  // x[True] is x[None]; x[False] the same with no element
        v = v.unsqueeze(d);
        if (!i.boolean()) v = v.slice(d, 0, 0);
        ++d;
        break;
      case Kind::Ellipsis:
        d += self.dim() - named;
        break;
      case Kind::Integer: {
        const int64_t n = v.size(d);
        EMBER_CHECK(i.integer() >= -n && i.integer() < n, op, ": index ", i.integer(),
                    " is out of bounds for dimension ", d, " with size ", n, " (shape ", shape_str(self.sizes()), ")");
        v = v.select(d, i.integer());
        break;
      }
      case Kind::Slice:
        EMBER_CHECK(i.slice().step() > 0, op, ": a Slice's step must be positive, got ", i.slice().step());
        v = v.slice(d++, i.slice().start(), i.slice().stop(), i.slice().step());
        break;
      case Kind::Tensor: {
        const Tensor& t = i.tensor();
        EMBER_CHECK(t.defined(), op, ": an index tensor is undefined");
        EMBER_CHECK(is_mask(t) || t.dtype() == kInt64 || t.dtype() == kInt32, op,
                    ": tensors used as indices must be int64, int32, bool or uint8, got ", t.dtype());
        EMBER_CHECK(t.device() == v.device() || t.is_cpu(), op, ": an index on ", t.device(),
                    " cannot index a tensor on ", v.device());
        if (is_mask(t) && t.dim() == 0) {  // a 0-d mask is a bool
          v = v.unsqueeze(d);
          if (t.item<int64_t>() == 0) v = v.slice(d, 0, 0);
          ++d;
        } else if (t.dim() == 0) {  // a 0-d integer tensor is an integer (LibTorch's C++ API)
          const int64_t n = v.size(d), k = t.item<int64_t>();
          EMBER_CHECK(k >= -n && k < n, op, ": index ", k, " is out of bounds for dimension ", d, " with size ", n);
          v = v.select(d, k);
        } else if (is_mask(t)) {
          for (int64_t j = 0; j < t.dim(); ++j)
            EMBER_CHECK(d + j < v.dim() && t.size(j) == v.size(d + j), op, ": the mask's shape ", shape_str(t.sizes()),
                        " does not match the indexed tensor's ", shape_str(v.sizes()), " at its dimension ", d + j);
          const Tensor positions = nonzero(t).to(v.device());  // [count, k]
          for (int64_t j = 0; j < t.dim(); ++j) w.advanced.push_back({d + j, positions.select(1, j)});
          d += t.dim();
        } else {
          w.advanced.push_back({d++, t.to(v.device(), kInt64)});
        }
        break;
      }
    }
  }
  return w;
}

// v's elements at the advanced indices (Note [Tensor indexing]): the indexed dims flattened,
// one index_select.
Tensor pick(Tensor v, std::vector<Advanced> advanced, const char* op) {
  if (advanced.empty()) return v;
  Shape S = advanced[0].index.sizes();
  for (const Advanced& a : advanced) S = broadcast_shapes(S, a.index.sizes(), op);
  // Negative positions count from the end; each must lie inside its own dim (the combined
  // position could be in range with one of them out of it). The check reads two numbers back.
  for (Advanced& a : advanced) {
    const int64_t n = v.size(a.dim);
    if (a.index.numel() == 0) continue;
    const int64_t lo = a.index.amin().item<int64_t>(), hi = a.index.amax().item<int64_t>();
    EMBER_CHECK(lo >= -n && hi < n, op, ": index ", lo < -n ? lo : hi, " is out of bounds for dimension ", a.dim,
                " with size ", n);
    if (lo < 0) a.index = where(a.index < 0, a.index + n, a.index);
  }
  bool adjacent = true;
  for (size_t j = 1; j < advanced.size(); ++j) adjacent = adjacent && advanced[j].dim == advanced[0].dim + int64_t(j);
  if (!adjacent) {  // the indexed dims first, in order; the result's S goes first too
    Shape order;
    for (const Advanced& a : advanced) order.push_back(a.dim);
    for (int64_t d = 0; d < v.dim(); ++d)
      if (std::none_of(advanced.begin(), advanced.end(), [d](const Advanced& a) { return a.dim == d; }))
        order.push_back(d);
    v = v.permute(order);
    for (size_t j = 0; j < advanced.size(); ++j) advanced[j].dim = int64_t(j);
  }
  const int64_t first = advanced[0].dim, k = static_cast<int64_t>(advanced.size());
  Tensor position = advanced[k - 1].index.expand(S);  // row-major over the k dims
  int64_t scale = v.size(first + k - 1);
  for (int64_t j = k - 2; j >= 0; --j) {
    position = position + advanced[j].index * scale;
    scale *= v.size(first + j);
  }
  const Tensor merged = k == 1 ? v : v.flatten(first, first + k - 1);
  Shape out(v.sizes().begin(), v.sizes().begin() + first);
  out.insert(out.end(), S.begin(), S.end());
  out.insert(out.end(), v.sizes().begin() + first + k, v.sizes().end());
  return merged.index_select(first, position.reshape({-1})).reshape(out);
}

// Whether a value of shape `from` broadcasts to `to` (expand's rule).
bool expands_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  for (size_t k = 1; k <= from.size(); ++k)
    if (from[from.size() - k] != 1 && from[from.size() - k] != to[to.size() - k]) return false;
  return true;
}

Tensor index_impl(const Tensor& self, const std::vector<TensorIndex>& indices) {
  Walked w = walk(self, indices, "index");
  return pick(w.view, std::move(w.advanced), "index");
}

Tensor& index_put_impl(Tensor& self, const std::vector<TensorIndex>& indices, const Tensor& value, bool accumulate) {
  const char* op = "index_put_";
  EMBER_CHECK(self.defined() && value.defined(), op, ": the tensor or the value is undefined");
  autograd::check_inplace_allowed(self, op);
  EMBER_CHECK(!(GradMode::is_enabled() && value.requires_grad()), op,
              ": the value requires grad, but an in-place write records no gradient for it; build the result "
              "out of place (where, cat, scatter) or detach the value");
  EMBER_CHECK(value.device() == self.device() || value.dim() == 0, op, ": the value is on ", value.device(),
              ", the tensor on ", self.device());
  // Writes go to a contiguous tensor, whose element positions are its storage's (self, or a
  // copy that is copied back).
  Tensor base = self.is_contiguous() ? self : self.contiguous();
  Walked w = walk(base, indices, op);
  Tensor v = value.to(self.device(), self.dtype());
  while (v.dim() > w.view.dim() && v.size(0) == 1) v = v.squeeze(0);  // leading 1s do not count, as in PyTorch
  if (w.advanced.empty()) {                                           // a view of base: the value broadcasts into it
    EMBER_CHECK(expands_to(v.sizes(), w.view.sizes()), op, ": a value of shape ", shape_str(v.sizes()),
                " cannot be broadcast to the indexing result's shape ", shape_str(w.view.sizes()));
    if (accumulate)
      w.view.add_(v);
    else
      w.view.copy_(v);
  } else {
    // The position in base of each element of the view, then of each picked element.
    const TensorOptions int64_on = TensorOptions().dtype(kInt64).device(self.device());
    Tensor positions = full({}, w.view.storage_offset() - base.storage_offset(), int64_on);
    for (int64_t d = 0; d < w.view.dim(); ++d) {
      Shape along(static_cast<size_t>(w.view.dim()), 1);
      along[static_cast<size_t>(d)] = w.view.size(d);
      positions = positions + (arange(w.view.size(d), int64_on) * w.view.stride(d)).view(along);
    }
    const Tensor picked = pick(positions.expand(w.view.sizes()), std::move(w.advanced), op);
    while (v.dim() > picked.dim() && v.size(0) == 1) v = v.squeeze(0);
    EMBER_CHECK(expands_to(v.sizes(), picked.sizes()), op, ": a value of shape ", shape_str(v.sizes()),
                " cannot be broadcast to the indexing result's shape ", shape_str(picked.sizes()));
    const Tensor values = v.expand(picked.sizes()).contiguous();
    Tensor flat = base.view({-1});
    if (accumulate)
      flat.scatter_add_(0, picked.reshape({-1}), values.view({-1}));
    else
      flat.scatter_(0, picked.reshape({-1}), values.view({-1}));
  }
  if (!base.is_same(self)) self.copy_(base);
  return self;
}

}  // namespace

Tensor Tensor::index(std::initializer_list<TensorIndex> indices) const {
  return index_impl(*this, std::vector<TensorIndex>(indices));
}
Tensor Tensor::index(const std::vector<TensorIndex>& indices) const { return index_impl(*this, indices); }

Tensor& Tensor::index_put_(std::initializer_list<TensorIndex> indices, const Tensor& value, bool accumulate) {
  return index_put_impl(*this, std::vector<TensorIndex>(indices), value, accumulate);
}
Tensor& Tensor::index_put_(const std::vector<TensorIndex>& indices, const Tensor& value, bool accumulate) {
  return index_put_impl(*this, indices, value, accumulate);
}
Tensor& Tensor::index_put_(std::initializer_list<TensorIndex> indices, const Scalar& value) {
  return index_put_(std::vector<TensorIndex>(indices), value);
}
Tensor& Tensor::index_put_(const std::vector<TensorIndex>& indices, const Scalar& value) {
  return index_put_impl(*this, indices, full({}, value, TensorOptions().dtype(dtype()).device(device())), false);
}

Tensor Tensor::masked_select(const Tensor& mask) const { return ember::masked_select(*this, mask); }

Tensor masked_select(const Tensor& x, const Tensor& mask) {
  EMBER_CHECK(x.defined() && mask.defined(), "masked_select: the tensor or the mask is undefined");
  EMBER_CHECK(mask.dtype() == kBool, "masked_select: expected a bool mask, got ", mask.dtype());
  const Shape shape = broadcast_shapes(x.sizes(), mask.sizes(), "masked_select");
  return x.expand(shape).index({mask.expand(shape)});
}

}  // namespace ember
