// Views, copies, joins and splits, forward beside backward. A view's gradient is the
// inverse view of the output's gradient (or, for slices, the gradient placed into zeros).
#include <numeric>

#include "ember/autograd/function_helpers.h"

namespace ember {

namespace {
// Views whose gradient is the output gradient reshaped back.
Tensor reshaping(const char* name, const Tensor& self, Tensor out) {
  if (needs_grad(self))
    record_fn(
        name, {&self}, {&out},
        [lx = Like(self)](std::vector<Tensor>& d) { return std::vector<Tensor>{d[0].reshape(lx.sizes)}; },
        kDifferentiable);
  return out;
}

// Views that pick a sub-block: the gradient goes into that block of zeros. In a create_graph
// backward that placement is itself recorded, as one node whose gradient picks the block again
// (the public view, `pick_again`), so the picking views differentiate twice.
template <class Pick, class PickAgain>
Tensor picking(const char* name, const Tensor& self, Tensor out, Pick pick, PickAgain pick_again) {
  if (needs_grad(self))
    record_fn(
        name, {&self}, {&out},
        [lx = Like(self), pick, pick_again](std::vector<Tensor>& d) {
          Tensor g = lx.zeros();
          Tensor block = pick(g);
          native::copy_(block, d[0]);
          if (needs_grad(d[0]))
            record_fn(
                "PlaceInZerosBackward", {&d[0]}, {&g},
                [pick_again](std::vector<Tensor>& dd) { return std::vector<Tensor>{pick_again(dd[0])}; },
                kDifferentiable, kSavesNoTensors);
          return std::vector<Tensor>{g};
        },
        kDifferentiable, kSavesNoTensors);
  return out;
}
}  // namespace

Tensor autograd::view(const Tensor& self, const Shape& shape) {
  return reshaping("ViewBackward", self, forward([&] { return native::view(self, shape); }));
}
Tensor autograd::reshape(const Tensor& self, const Shape& shape) {
  return reshaping("ReshapeBackward", self, forward([&] { return native::reshape(self, shape); }));
}
Tensor autograd::squeeze(const Tensor& self) {
  return reshaping("SqueezeBackward", self, forward([&] { return native::squeeze(self); }));
}
Tensor autograd::squeeze(const Tensor& self, int64_t dim) {
  return reshaping("SqueezeBackward", self, forward([&] { return native::squeeze(self, dim); }));
}
Tensor autograd::unsqueeze(const Tensor& self, int64_t dim) {
  return reshaping("UnsqueezeBackward", self, forward([&] { return native::unsqueeze(self, dim); }));
}
Tensor autograd::flatten(const Tensor& self, int64_t start_dim, int64_t end_dim) {
  return reshaping("FlattenBackward", self, forward([&] { return native::flatten(self, start_dim, end_dim); }));
}
Tensor autograd::unflatten(const Tensor& self, int64_t dim, const Shape& sizes) {
  return reshaping("UnflattenBackward", self, forward([&] { return native::unflatten(self, dim, sizes); }));
}

Tensor autograd::transpose(const Tensor& self, int64_t dim0, int64_t dim1) {
  Tensor out = forward([&] { return native::transpose(self, dim0, dim1); });
  if (needs_grad(self))
    record_fn(
        "TransposeBackward", {&self}, {&out},
        [dim0, dim1](std::vector<Tensor>& d) {
          return std::vector<Tensor>{building_graph() ? ember::transpose(d[0], dim0, dim1)
                                                      : native::transpose(d[0], dim0, dim1)};
        },
        kDifferentiable);
  return out;
}
Tensor autograd::t(const Tensor& self) {
  return self.dim() < 2 ? forward([&] { return native::t(self); }) : ember::transpose(self, 0, 1);
}

Tensor autograd::permute(const Tensor& self, const Shape& dims) {
  Tensor out = forward([&] { return native::permute(self, dims); });
  if (needs_grad(self)) {
    Shape inverse(dims.size());
    for (size_t i = 0; i < dims.size(); ++i)
      inverse[wrap_dim(dims[i], self.dim(), "permute")] = static_cast<int64_t>(i);
    record_fn(
        "PermuteBackward", {&self}, {&out},
        [inverse](std::vector<Tensor>& d) {
          return std::vector<Tensor>{building_graph() ? ember::permute(d[0], inverse) : native::permute(d[0], inverse)};
        },
        kDifferentiable);
  }
  return out;
}
Tensor autograd::movedim(const Tensor& self, int64_t source, int64_t destination) {
  Tensor out = forward([&] { return native::movedim(self, source, destination); });
  if (needs_grad(self))
    record_fn(
        "MovedimBackward", {&self}, {&out},
        [source, destination](std::vector<Tensor>& d) {
          return std::vector<Tensor>{building_graph() ? ember::movedim(d[0], destination, source)
                                                      : native::movedim(d[0], destination, source)};
        },
        kDifferentiable);
  return out;
}

Tensor autograd::slice(const Tensor& self, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
                       int64_t step) {
  return picking(
      "SliceBackward", self, forward([&] { return native::slice(self, dim, start, end, step); }),
      [=](const Tensor& g) { return native::slice(g, dim, start, end, step); },
      [=](const Tensor& g) { return autograd::slice(g, dim, start, end, step); });
}
Tensor autograd::narrow(const Tensor& self, int64_t dim, int64_t start, int64_t length) {
  return picking(
      "NarrowBackward", self, forward([&] { return native::narrow(self, dim, start, length); }),
      [=](const Tensor& g) { return native::narrow(g, dim, start, length); },
      [=](const Tensor& g) { return autograd::narrow(g, dim, start, length); });
}
Tensor autograd::select(const Tensor& self, int64_t dim, int64_t index) {
  return picking(
      "SelectBackward", self, forward([&] { return native::select(self, dim, index); }),
      [=](const Tensor& g) { return native::select(g, dim, index); },
      [=](const Tensor& g) { return autograd::select(g, dim, index); });
}

Tensor autograd::expand(const Tensor& self, const Shape& shape) {
  Tensor out = forward([&] { return native::expand(self, shape); });
  if (needs_grad(self))
    record_fn(
        "ExpandBackward", {&self}, {&out},
        [lx = Like(self)](std::vector<Tensor>& d) { return std::vector<Tensor>{sum_to(d[0], lx.sizes)}; },
        kDifferentiable);
  return out;
}

Tensor autograd::as_strided(const Tensor& self, const Shape& sizes, const Shape& strides,
                            std::optional<int64_t> offset) {
  EMBER_CHECK(!needs_grad(self),
              "as_strided: ember does not differentiate through as_strided (its elements may "
              "overlap); build the view from view/slice/expand/permute, or call it under NoGradGuard");
  return forward([&] { return native::as_strided(self, sizes, strides, offset); });
}

Tensor autograd::to(const Tensor& self, Device device, DType dtype, bool non_blocking, bool copy) {
  Tensor out = forward([&] { return native::to(self, device, dtype, non_blocking, copy); });
  if (needs_grad(self) && !out.is_same(self) && out.is_floating_point())
    record_fn(
        "ToCopyBackward", {&self}, {&out},
        [lx = Like(self)](std::vector<Tensor>& d) {
          return std::vector<Tensor>{building_graph() ? ember::to(d[0], lx.device, lx.dtype, false, false)
                                                      : native::to(d[0], lx.device, lx.dtype, false, false)};
        },
        kDifferentiable, kSavesNoTensors);  // so the autocast cache's casts survive each backward
  return out;
}

Tensor autograd::clone(const Tensor& self) {
  Tensor out = forward([&] { return native::clone(self); });
  if (needs_grad(self))
    record_fn(
        "CloneBackward", {&self}, {&out}, [](std::vector<Tensor>& d) { return std::vector<Tensor>{d[0]}; },
        kDifferentiable);
  return out;
}

Tensor autograd::contiguous(const Tensor& self) { return self.is_contiguous() ? self : ember::clone(self); }

Tensor& autograd::fill_(Tensor& self, const Scalar& value) {
  autograd::check_inplace_allowed(self, "fill_");
  native::fill_(self, value);
  self.bump_version();
  return self;
}

Tensor& autograd::copy_(Tensor& self, const Tensor& src) {
  autograd::check_inplace_allowed(self, "copy_");
  // The tape does not record in-place ops, so src's gradient would be lost without a word (PyTorch
  // would record it): refused instead.
  EMBER_CHECK(!(GradMode::is_enabled() && src.requires_grad()),
              "copy_: the source requires grad, but an in-place copy records no gradient for it; build the result "
              "out of place (cat, where, clone) or detach the source");
  native::copy_(self, src);
  self.bump_version();
  return self;
}

Tensor autograd::cat(const std::vector<Tensor>& tensors, int64_t dim) {
  Tensor out = forward([&] { return native::cat(tensors, dim); });
  std::vector<const Tensor*> inputs;
  for (const Tensor& t : tensors) inputs.push_back(&t);
  bool any = false;
  for (const Tensor* t : inputs) any = any || needs_grad(*t);
  if (any) {
    std::vector<Like> likes;
    for (const Tensor& t : tensors) likes.emplace_back(t);
    const int64_t d = wrap_dim(dim, out.dim(), "cat");
    // Each input's gradient is its slice of the output's (recorded in a create_graph backward).
    auto node = std::make_shared<FunctionNode>(
        "CatBackward",
        [likes, d](std::vector<Tensor>& g) {
          std::vector<Tensor> grads;
          int64_t offset = 0;
          for (const Like& l : likes) {
            if (l.sizes.size() == 1 && l.sizes[0] == 0) {  // skipped legacy empty tensor
              grads.push_back(l.zeros());
              continue;
            }
            const int64_t length = l.sizes[static_cast<size_t>(d)];
            const Tensor part =
                building_graph() ? ember::narrow(g[0], d, offset, length) : native::narrow(g[0], d, offset, length);
            grads.push_back(part.to(l.dtype));
            offset += length;
          }
          return grads;
        },
        kDifferentiable);
    autograd::record(node, inputs, {&out});
  }
  return out;
}

Tensor autograd::stack(const std::vector<Tensor>& tensors, int64_t dim) {
  EMBER_CHECK(!tensors.empty(), "stack: expected a non-empty list of tensors");
  bool any = false;
  for (const Tensor& t : tensors) any = any || (t.defined() && needs_grad(t));
  if (!any) return forward([&] { return native::stack(tensors, dim); });
  for (size_t i = 0; i < tensors.size(); ++i)
    EMBER_CHECK(tensors[i].defined() && tensors[i].sizes() == tensors[0].sizes(),
                "stack: expects each tensor to be equal size, but got ", shape_str(tensors[0].sizes()),
                " at entry 0 and ", shape_str(tensors[i].sizes()), " at entry ", i);
  const int64_t d = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  for (const Tensor& t : tensors) parts.push_back(t.unsqueeze(d));
  return ember::cat(parts, d);
}

std::vector<Tensor> autograd::split_with_sizes(const Tensor& x, const Shape& sizes, int64_t dim) {
  const std::vector<Tensor> parts = forward([&] { return native::split_with_sizes(x, sizes, dim); });
  if (!needs_grad(x)) return parts;
  std::vector<Tensor> out;
  int64_t offset = 0;
  const int64_t d = wrap_dim(dim, x.dim(), "split");
  for (int64_t s : sizes) {
    out.push_back(ember::narrow(x, d, offset, s));
    offset += s;
  }
  return out;
}

std::vector<Tensor> autograd::split(const Tensor& x, int64_t split_size, int64_t dim) {
  const std::vector<Tensor> parts = forward([&] { return native::split(x, split_size, dim); });
  if (!needs_grad(x)) return parts;
  Shape sizes;
  const int64_t d = wrap_dim(dim, x.dim(), "split");
  for (const Tensor& p : parts) sizes.push_back(p.size(d));
  return ember::split_with_sizes(x, sizes, d);
}

std::vector<Tensor> autograd::chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  const std::vector<Tensor> parts = forward([&] { return native::chunk(x, chunks, dim); });
  if (!needs_grad(x)) return parts;
  Shape sizes;
  const int64_t d = wrap_dim(dim, x.dim(), "chunk");
  for (const Tensor& p : parts) sizes.push_back(p.size(d));
  return ember::split_with_sizes(x, sizes, d);
}

}  // namespace ember
